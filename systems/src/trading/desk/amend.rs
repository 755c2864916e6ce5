//! Cancel and amend (§3.1; D5): the open order of a reference, changed in place or ended.

use super::*;

impl Desk<'_, '_> {
    pub fn cancel(&mut self, code: CustomerCode, reference: &str) -> Result<OrderId, Error> {
        let id = self.open_order(code, reference, ErrorCode::OrderNotCancellable)?;
        self.finish(id, OrderStatus::Canceled, Some(EndReason::UserInitiated));
        Ok(id)
    }

    /// The open order a reference names; `conflict` (409) alone when none is open. The
    /// engine keeps nothing of ended orders' references: who answers names the status of the
    /// latest that ended under it, or answers 404 (`perpsim_core::order::not_open`).
    pub(super) fn open_order(
        &self,
        code: CustomerCode,
        reference: &str,
        conflict: ErrorCode,
    ) -> Result<OrderId, Error> {
        self.customer(code)?;
        match self.orders.open_by_ref(code, reference) {
            Some(o) => Ok(o.id),
            None => Err(Error::new(
                conflict,
                format!("no order is open under {reference}"),
            )),
        }
    }

    pub fn amend(
        &mut self,
        code: CustomerCode,
        reference: &str,
        amend: &Amend,
    ) -> Result<OrderId, Error> {
        let id = self.open_order(code, reference, ErrorCode::OrderNotAmendable)?;
        self.amend_open(id, amend)
    }

    /// [`Desk::amend`] of an order known by its id and open, as the market maker moves its
    /// quotes: without looking its reference up.
    pub fn amend_open(&mut self, id: OrderId, amend: &Amend) -> Result<OrderId, Error> {
        let now = self.clock.now;
        let o = self.orders.get(id).clone();
        assert!(o.is_open(), "order {id} is open to be amended");
        let code = o.customer;
        let market = o.market;
        let (status, mark) = {
            let i = self.instrument(market);
            (i.status, i.mark_price)
        };
        let m = &self.exchange.markets[market as usize];
        if status == InstrumentStatus::TradeHalt {
            return Err(rejected(format!(
                "{} is in trade_halt: orders cannot be amended",
                m.spec.symbol
            )));
        }
        let uses_limit = o.limit_price.is_some();
        let untriggered = o.waiting();
        let uses_trigger = o.trigger_price().is_some() && untriggered;
        let refuse = |field: &str| {
            Error::validation(format!(
                "{field} cannot be amended on a {} order",
                o.kind.stored_str()
            ))
        };
        let positive = |field: &str, v: Decimal| {
            if v <= Decimal::ZERO {
                Err(Error::validation(format!("{field} must be positive")))
            } else {
                Ok(v)
            }
        };
        if let Some(a) = amend.amount {
            positive("amount", a)?;
            if !m.spec.on_lot(a) {
                return Err(rejected(format!(
                    "amount {a} is not a multiple of the lot size {}",
                    m.spec.lot_size
                )));
            }
            if a <= o.filled_amount {
                return Err(Error::validation(format!(
                    "amount must be above the filled amount {}",
                    o.filled_amount
                )));
            }
        }
        for (field, value, used) in [
            ("limit_price", amend.limit_price, uses_limit),
            ("trigger_price", amend.trigger_price, uses_trigger),
        ] {
            if let Some(p) = value {
                if !used {
                    return Err(refuse(field));
                }
                positive(field, p)?;
                entry::check_price(field, p, &m.spec)?;
            }
        }
        if let Some(t) = amend.expire_time {
            if o.time_in_force != TimeInForce::Gtd {
                return Err(refuse("expire_time"));
            }
            if t <= now {
                return Err(Error::validation(format!(
                    "expire_time must be in the future (now {now})"
                )));
            }
            self.scheduler.room_for_request()?;
        }
        let old_expiry = o.expire_time();
        let amount = amend.amount.unwrap_or(o.amount);
        let limit = amend.limit_price.or(o.limit_price);
        // The venue maximum holds for the amended order as it did at entry.
        let trigger = amend.trigger_price.or(o.trigger_price());
        entry::check_notional(amount, limit.or(trigger).unwrap_or(mark))?;
        if let Some(t) = amend.trigger_price {
            // Rule 8 holds for the new trigger as it did at entry.
            let entry = OrderEntry {
                amount: Some(amount),
                limit_price: limit,
                trigger_price: Some(t),
                ..OrderEntry::new(o.side, o.kind, o.reference_id.to_string())
            };
            let reference = Reference {
                last_trade_price: m.last_price.unwrap_or(mark),
                mark_price: mark,
                now,
            };
            entry::validate(&entry, &m.spec, &reference)?;
        }
        let crosses = limit.is_some_and(|p| m.book.crosses(o.side, Some(m.ticks(p))));
        if o.resting.is_some() && crosses && (o.post_only || status == InstrumentStatus::PostOnly) {
            return Err(rejected(
                "the amended order would take liquidity".to_owned(),
            ));
        }
        // The reserve follows the resting opening part at the new price and size.
        let asset = m.spec.settlement;
        let im = self.initial_margin(code);
        let m = &self.exchange.markets[market as usize];
        let new_reserve_lots = if o.works_as_limit() && (o.reserve_lots > 0 || amount > o.amount) {
            m.opening_lots(
                amount - o.filled_amount,
                self.reducible(code, market, o.side),
            )
        } else {
            0
        };
        let new_rate = limit.map_or(Decimal::ZERO, |p| m.reserve_rate(p, im));
        let delta = Decimal::from(new_reserve_lots) * new_rate - o.reserved();
        if delta > Ledger::available(&self.accounts, code, asset) {
            return Err(Error::new(
                ErrorCode::InsufficientFunds,
                format!(
                    "the amended order needs {delta} {} more initial margin",
                    asset.as_str()
                ),
            ));
        }
        // Accepted: apply.
        self.ledger
            .adjust_locked(&mut self.accounts, code, asset, delta, now);
        let loses_priority = amount > o.amount || limit != o.limit_price;
        {
            let e = self.orders.get_mut(id);
            e.amount = amount;
            e.limit_price = limit;
            e.reserve_lots = new_reserve_lots;
            e.reserve_rate = new_rate;
            e.created = now;
            if let Some(t) = amend.expire_time {
                e.set_expire_time(t);
            }
        }
        if let Some(t) = amend.expire_time {
            if let Some(old) = old_expiry {
                self.scheduler.cancel(old, ScheduledEvent::OrderExpiry(id));
            }
            self.scheduler.schedule(t, ScheduledEvent::OrderExpiry(id));
        }
        if untriggered {
            self.disarm(id);
            if let Some(t) = amend.trigger_price {
                let trigger = self.orders.get_mut(id).trigger_mut();
                trigger
                    .expect("a waiting order has a trigger")
                    .trigger_price = Some(t);
            }
            self.arm(id);
        } else if let Some(r) = o.resting {
            let m = &mut self.exchange.markets[market as usize];
            if loses_priority {
                m.book.cancel(r);
                let e = self.orders.get_mut(id);
                e.resting = None;
                e.priority = None;
                self.execute(id);
            } else if amount < o.amount {
                let lots = m.lots(amount - o.filled_amount);
                m.book.reduce(r, lots);
            }
        }
        self.exchange.mark_order(id);
        Ok(id)
    }
}
