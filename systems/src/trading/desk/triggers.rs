//! Conditional orders (rules 4–8; D5): armed under the price that fires them, fired in
//! trigger then placement order, then working as their mechanical type.

use super::*;

impl Desk<'_, '_> {
    /// Registers a waiting conditional order under the price(s) that fire it.
    pub(super) fn arm(&mut self, id: OrderId) {
        let o = self.orders.get(id);
        let m = &mut self.exchange.markets[o.market as usize];
        for (watch, ticks) in watches(m, o) {
            m.triggers.insert((watch, ticks, id));
        }
    }

    pub(super) fn disarm(&mut self, id: OrderId) {
        let o = self.orders.get(id);
        disarm(&mut self.exchange.markets[o.market as usize], o);
    }

    /// The first waiting order of a market whose trigger is reached, if any. Nothing fires
    /// while matching is off (post_only, trade_halt).
    pub(super) fn next_triggered(&self, market: MarketId) -> Option<OrderId> {
        let state = self.instrument(market);
        if state.status != InstrumentStatus::Active {
            return None;
        }
        let m = &self.exchange.markets[market as usize];
        if m.triggers.is_empty() {
            return None;
        }
        let tick = m.spec.tick_size;
        let mut fired: Option<OrderId> = None;
        let mut consider = |watch: Watch, price: Decimal| {
            let (lo, hi) = match watch {
                // Rising: fires when the price is at or above the trigger.
                Watch::TradeRising | Watch::MarkRising => {
                    let hi = (price / tick).floor();
                    (Ticks::MIN, to_ticks(hi))
                }
                Watch::TradeFalling | Watch::MarkFalling => {
                    let lo = (price / tick).ceil();
                    (to_ticks(lo), Ticks::MAX)
                }
            };
            if let Some(&(_, _, id)) = m
                .triggers
                .range((watch, lo, OrderId(0))..=(watch, hi, OrderId(u64::MAX)))
                .min_by_key(|(_, _, id)| *id)
            {
                fired = Some(fired.map_or(id, |f| f.min(id)));
            }
        };
        if let Some(last) = m.last_price {
            consider(Watch::TradeRising, last);
            consider(Watch::TradeFalling, last);
        } else {
            consider(Watch::TradeRising, state.mark_price);
            consider(Watch::TradeFalling, state.mark_price);
        }
        consider(Watch::MarkRising, state.mark_price);
        consider(Watch::MarkFalling, state.mark_price);
        fired
    }

    /// A fired conditional order: a stop_market (and the combo's leg) executes as a market
    /// IOC order, a stop_limit works as a limit GTC order (D5).
    pub(super) fn trigger(&mut self, id: OrderId) {
        self.disarm(id);
        let now = self.clock.now;
        let o = self.orders.get_mut(id);
        if let Some(t) = o.trigger_mut() {
            t.fired = true;
        }
        o.created = now;
        self.orders.fired(id);
        self.exchange.mark_order(id);
        // D5: a fired stop_limit works as a limit GTC order, and what of it rests holds the
        // initial margin of its opening part like any resting limit order (reserved now,
        // released lot by lot as it fills). Without that margin available it is refused.
        let o = self.orders.get(id);
        if let Some(price) = o.limit_price {
            let (code, market) = (o.customer, o.market);
            let m = &self.exchange.markets[market as usize];
            let lots = m.opening_lots(o.remaining(), self.reducible(code, market, o.side));
            let rate = m.reserve_rate(price, self.initial_margin(code));
            let (available, account) = self.available(code, m.spec.settlement);
            if Decimal::from(lots) * rate > available {
                self.finish(
                    id,
                    OrderStatus::Rejected,
                    Some(EndReason::InsufficientFunds),
                );
                return;
            }
            self.hold_reserve(id, (lots, rate), account);
        }
        self.execute(id, None);
    }
}

/// The (watch, trigger ticks) a waiting order is armed under in its market (rule 8: a sell
/// take-profit lies above, a sell stop-loss below; a buy the reverse); none once it fired.
pub(super) fn watches(m: &Market, o: &Order) -> Vec<(Watch, Ticks)> {
    if !o.waiting() {
        return Vec::new();
    }
    let buy = o.side == Side::Buy;
    let pick = |rising: bool, trade: bool| match (rising, trade) {
        (true, true) => Watch::TradeRising,
        (false, true) => Watch::TradeFalling,
        (true, false) => Watch::MarkRising,
        (false, false) => Watch::MarkFalling,
    };
    match o.kind {
        // A buy stop fires on a rise, a sell stop on a fall; take-profits the reverse.
        OrderType::StopLoss | OrderType::StopLossLimit => {
            vec![(
                pick(buy, true),
                m.ticks(o.trigger_price().expect("stop types have one")),
            )]
        }
        OrderType::TakeProfit | OrderType::TakeProfitLimit => {
            vec![(
                pick(!buy, true),
                m.ticks(o.trigger_price().expect("tp types have one")),
            )]
        }
        OrderType::TakeProfitStopLoss => vec![
            (
                pick(!buy, false),
                m.ticks(o.take_profit_price().expect("combo has both")),
            ),
            (
                pick(buy, false),
                m.ticks(o.stop_loss_price().expect("combo has both")),
            ),
        ],
        OrderType::Market | OrderType::Limit => Vec::new(),
    }
}

/// Takes a waiting order out of its market's trigger index.
pub(super) fn disarm(m: &mut Market, o: &Order) {
    for (watch, ticks) in watches(m, o) {
        m.triggers.remove(&(watch, ticks, o.id));
    }
}

fn to_ticks(d: Decimal) -> Ticks {
    let t = d.trunc();
    i64::try_from(t.mantissa() / 10i128.pow(t.scale())).unwrap_or(if t.is_sign_negative() {
        Ticks::MIN
    } else {
        Ticks::MAX
    })
}
