//! The order desk (interface §3.1, §4.3; D5): placement with the stateful checks, matching
//! against the market's book, cancel, amend, GTD expiry and conditional triggers. Every path
//! runs in MatchSystems or TriggerSystems through [`Desk`], one request at a time in arrival
//! order, so a request sees every effect of the ones before it (fills included).
//!
//! What rests holds initial margin for its opening part, per lot: a limit order from placement,
//! a stop_loss_limit or take_profit_limit order from the moment it fires (refused
//! `rejected`/`INSUFFICIENT_FUNDS` if that margin is not available then).

mod amend;
mod checks;
mod forced;
mod margin;
mod recorded;
mod triggers;

use bevy_ecs::prelude::{Entity, Local, Query, Res, ResMut, Resource};
use bevy_ecs::system::SystemParam;
use perpsim_core::entry::{self, Amend, NewOrder, OrderEntry, OrderTerms, Quantity, Reference};
use perpsim_core::ids::{BrokerCode, CustomerCode};
use perpsim_core::instrument::{Asset, InstrumentStatus};
use perpsim_core::money::{DEFAULT_FEES, FeeRates, MAX_LEVERAGE, margin_profile};
use perpsim_core::order::{
    EndReason, OrderStatus, OrderType, ReferenceId, Side, TimeInForce, TriggerPriceType,
};
use perpsim_core::{Decimal, Error, ErrorCode};

use crate::clock::{DueEvents, Scheduler, SimClock};
use crate::command::{Answers, OrderCommand};
use crate::money::ledger::{AccountStore, Books, Ledger, VenueBatch};
use crate::money::store::Accounts;
use crate::positions::{MarginRate, OpenPositions};
use crate::records::clock::ScheduledEvent;
use crate::records::ids::OrderId;
use crate::records::money::AccountId;
use crate::records::order::{Extra, Order, Trigger};
use crate::records::order::{Lots, Ticks};
use crate::records::periodic::PeriodicPasses;
use crate::records::trade::{Liquidity, TradeKind};
use crate::records::venue::CustomerView;
use crate::records::venue::MarketId;
use crate::records::venue::{Customer, InstrumentState};
use crate::registry::{Limits, Registry};
use crate::rng::EngineRng;
use crate::trading::book::Fill;
use crate::trading::exchange::{Exchange, Market, Watch};
use crate::trading::fills::{Execution, FillSide, book_fill};
use crate::trading::orders::Orders;

/// What a fill needs of one side's customer: its broker, its fee rates in the market and its
/// initial margin fraction (its profile), read once per side of an execution.
#[derive(Debug, Clone, Copy)]
struct Terms {
    broker: BrokerCode,
    fees: FeeRates,
    rate: MarginRate,
}

/// The taking side of an execution: an order's, or a liquidation's (no order, D10).
struct Taker {
    order: Option<OrderId>,
    customer: CustomerCode,
    kind: TradeKind,
    terms: Terms,
}

/// Order commands of the current run, with their position in the tick, in arrival order.
#[derive(Resource, Debug, Default)]
pub struct OrderRequests(pub Vec<(usize, OrderCommand)>);

/// Everything order handling reads and writes.
#[derive(SystemParam)]
pub struct Desk<'w, 's> {
    exchange: ResMut<'w, Exchange>,
    orders: Orders<'w, 's>,
    ledger: ResMut<'w, Ledger>,
    rng: ResMut<'w, EngineRng>,
    clock: Res<'w, SimClock>,
    scheduler: ResMut<'w, Scheduler>,
    registry: Res<'w, Registry>,
    limits: Res<'w, Limits>,
    customers: Query<'w, 's, &'static mut Customer>,
    instruments: Query<'w, 's, &'static InstrumentState>,
    positions: OpenPositions<'w, 's>,
    accounts: Accounts<'w, 's>,
    passes: ResMut<'w, PeriodicPasses>,
    /// The fills of the sweep in progress: kept between sweeps, so a taker's allocates
    /// nothing. Empty between them.
    fills: Local<'s, Vec<Fill>>,
}

/// MatchSystems: the tick's order requests, one at a time.
pub fn handle_order_requests(
    mut requests: ResMut<OrderRequests>,
    mut answers: ResMut<Answers>,
    mut desk: Desk,
) {
    answers.reserve_orders(requests.0.len());
    for (at, command) in requests.0.drain(..) {
        let result = match command {
            OrderCommand::PlaceOrder(c) => desk
                .check_open_orders(c.customer, &c.entry)
                .and_then(|()| desk.place(c.customer, &c.symbol, &c.entry)),
            OrderCommand::CancelOrder(c) => desk.cancel(c.customer, &c.reference_id),
            OrderCommand::AmendOrder(c) => desk.amend(c.customer, &c.reference_id, &c.amend),
            OrderCommand::SetLeverage(c) => {
                answers.put(at, desk.set_leverage(c.customer, c.leverage));
                continue;
            }
        };
        answers.put(at, result.map(|id| desk.orders.record(id)));
    }
    desk.flush();
}

/// MatchSystems: GTD orders whose expire_time has come end `expired` with reason EXPIRED.
pub fn expire_orders(due: Res<DueEvents>, mut desk: Desk) {
    for event in &due.0 {
        if let ScheduledEvent::OrderExpiry(id) = *event {
            let now = desk.clock.now;
            // An amend may have moved the time on; the event for the new time expires it.
            let due = |o: &Order| o.expire_time().is_some_and(|t| t <= now);
            if desk.orders.live(id).is_some_and(due) {
                desk.finish(id, OrderStatus::Expired, Some(EndReason::Expired));
            }
        }
    }
    desk.flush();
}

/// TriggerSystems: conditional orders whose trigger price is reached fire, in trigger order
/// then placement order, until no more fire (each fires at most once, so this ends).
pub fn fire_triggers(mut desk: Desk) {
    for market in 0..desk.exchange.markets.len() as MarketId {
        while let Some(id) = desk.next_triggered(market) {
            desk.trigger(id);
        }
    }
    desk.flush();
}

fn rejected(message: String) -> Error {
    Error::new(ErrorCode::OrderRejected, message)
}

impl Desk<'_, '_> {
    /// Gives what the run staged (orders, positions, accounts) its entities; every system
    /// using the desk calls it before it returns.
    pub fn flush(&mut self) {
        self.orders.flush();
        self.positions.flush();
        self.accounts.flush();
    }

    fn instrument(&self, market: MarketId) -> &InstrumentState {
        let entity = self.registry.markets[market as usize];
        self.instruments
            .get(entity)
            .expect("every market is an instrument")
    }

    fn customer(&self, code: CustomerCode) -> Result<&Customer, Error> {
        self.registry
            .customers
            .get(&code)
            .and_then(|e| self.customers.get(*e).ok())
            .ok_or_else(|| Error::not_found(format!("customer {code} does not exist")))
    }

    fn initial_margin(&self, code: CustomerCode) -> Decimal {
        let leverage = self.customer(code).map_or(1, |c| c.leverage);
        margin_profile(leverage)
            .expect("customers hold a valid leverage")
            .initial
    }

    /// An order by id: live, or ended in this tick.
    pub fn order(&self, id: OrderId) -> &Order {
        self.orders.get(id)
    }

    /// An order by id if it is live (open), whenever it ended if not.
    pub fn live_order(&self, id: OrderId) -> Option<&Order> {
        self.orders.live(id)
    }

    /// Changes to the market maker's orders in a market's side so far (see
    /// [`crate::trading::orders::MakerOrderChanges`]).
    pub fn maker_changes(&self, market: MarketId, side: Side) -> u64 {
        self.orders.maker_changes(market, side)
    }

    /// The market maker's orders in a market's side changed since it last forgot them,
    /// `None` where too many did (see [`crate::trading::orders::MakerOrderChanges`]).
    pub fn maker_changed(&self, market: MarketId, side: Side) -> Option<&[OrderId]> {
        self.orders.maker_changed(market, side)
    }

    /// Forgets the market maker's changed orders in a market's side: it knows them now.
    pub fn forget_maker_changes(&mut self, market: MarketId, side: Side) {
        self.orders.forget_maker_changes(market, side);
    }

    /// How many markets there are; their ids are `0..count`.
    pub fn market_count(&self) -> MarketId {
        self.exchange.markets.len() as MarketId
    }

    /// A market's spec and its instrument's state (status, index and mark).
    pub fn market(
        &self,
        market: MarketId,
    ) -> (&perpsim_core::instrument::InstrumentSpec, &InstrumentState) {
        (
            &self.exchange.markets[market as usize].spec,
            self.instrument(market),
        )
    }

    /// Signed size of the customer's position in a market (long positive).
    pub fn position_size(&self, code: CustomerCode, market: MarketId) -> Decimal {
        self.positions
            .get((code, market))
            .map_or(Decimal::ZERO, |p| p.size)
    }

    /// A new order (§4.3) with every stateful check; the order's id.
    pub fn place(
        &mut self,
        code: CustomerCode,
        symbol: &str,
        entry: &OrderEntry,
    ) -> Result<OrderId, Error> {
        let leverage_now = self.customer(code)?.leverage;
        let (market, new, mark) = self.admit(code, symbol, entry)?;
        let leverage = new.leverage.unwrap_or(leverage_now);
        let profile = margin_profile(leverage).expect("validated leverage");
        if leverage != leverage_now {
            self.check_leverage_change(code, leverage)?;
        }
        // D5: the order's opening part needs amount × price × initial margin available.
        let price = new.limit_price().unwrap_or(mark);
        let reducible = self.reducible(code, market, new.side);
        let opening_notional = match new.quantity() {
            Quantity::Amount(a) => (a - reducible).max(Decimal::ZERO) * price,
            Quantity::Cash(c) => (c - reducible * price).max(Decimal::ZERO),
        };
        let account = self.check_available(code, market, opening_notional * profile.initial)?;
        if leverage != leverage_now {
            self.apply_leverage(code, leverage);
        }
        let id = self.create(code, market, &entry.reference_id, &new, self.clock.now);
        let units = entry_units(&new);
        if let (
            OrderTerms::Limit {
                quantity: Quantity::Amount(a),
                ..
            },
            TimeInForce::Gtc | TimeInForce::Gtd,
        ) = (new.terms, new.time_in_force)
        {
            let m = &self.exchange.markets[market as usize];
            let lots = match units {
                // Nothing of it reduces a position: all of it opens.
                Some((_, lots)) if reducible.is_zero() => lots,
                _ => m.opening_lots(a, reducible),
            };
            let rate = m.reserve_rate(price, profile.initial);
            self.hold_reserve(id, (lots, rate), account);
        }
        if let Some(at) = new.expire_time {
            self.scheduler.schedule(at, ScheduledEvent::OrderExpiry(id));
        }
        if new.kind().is_conditional() {
            self.arm(id);
        } else {
            self.execute(id, units);
        }
        Ok(id)
    }

    /// The entry read by §4.3's rules against the market as it stands, then the stateful
    /// checks but margin: the instrument's status, a cash order's lot, the timers' room and
    /// rule 11's open reference. The market, the order and the mark it was judged at.
    fn admit(
        &self,
        code: CustomerCode,
        symbol: &str,
        entry: &OrderEntry,
    ) -> Result<(MarketId, NewOrder, Decimal), Error> {
        let market = self
            .exchange
            .market_id(symbol)
            .ok_or_else(|| Error::not_found(format!("symbol {symbol} does not exist")))?;
        let (status, mark) = {
            let i = self.instrument(market);
            (i.status, i.mark_price)
        };
        let m = &self.exchange.markets[market as usize];
        let reference = Reference {
            // Before the first trade, triggers are judged against the mark price.
            last_trade_price: m.last_price.unwrap_or(mark),
            mark_price: mark,
            now: self.clock.now,
        };
        let new = entry::validate(entry, &m.spec, &reference)?;
        self.check_status(market, status, &new)?;
        if let Quantity::Cash(cash) = new.quantity() {
            self.check_cash_buys_a_lot(market, &new, cash, mark)?;
        }
        if new.expire_time.is_some() {
            self.scheduler.room_for_request()?;
        }
        if self.orders.open_by_ref(code, &entry.reference_id).is_some() {
            return Err(Error::new(
                ErrorCode::DuplicateReferenceId,
                format!(
                    "reference_id {} is already used by an open order (rule 11)",
                    entry.reference_id
                ),
            ));
        }
        Ok((market, new, mark))
    }

    /// D5: refused unless the customer has `required` available in the market's currency;
    /// else the account's entity, if it is open, so the reserve that follows is held without
    /// a second search.
    fn check_available(
        &self,
        code: CustomerCode,
        market: MarketId,
        required: Decimal,
    ) -> Result<Option<Entity>, Error> {
        let asset = self.exchange.markets[market as usize].spec.settlement;
        let (available, account) = self.available(code, asset);
        if required > available {
            return Err(Error::new(
                ErrorCode::InsufficientFunds,
                format!(
                    "the order needs {} {} of initial margin; {available} is available",
                    perpsim_core::decimal::round_ledger(required),
                    asset.as_str()
                ),
            ));
        }
        Ok(account)
    }

    /// What the customer has available in `asset` (zero without an account), and the
    /// account's entity if it is open.
    fn available(&self, code: CustomerCode, asset: Asset) -> (Decimal, Option<Entity>) {
        let account = self.accounts.entity(&AccountId::customer(code, asset));
        let available = account.map_or(Decimal::ZERO, |e| self.accounts.at(e).available());
        (available, account)
    }

    fn create(
        &mut self,
        code: CustomerCode,
        market: MarketId,
        reference: &str,
        new: &NewOrder,
        now: perpsim_core::time::Timestamp,
    ) -> OrderId {
        let id = self.orders.next_id();
        let amount = match new.quantity() {
            Quantity::Amount(a) => a,
            Quantity::Cash(_) => Decimal::ZERO,
        };
        self.orders.push(Order {
            id,
            customer: code,
            market,
            side: new.side,
            kind: new.kind(),
            reference_id: ReferenceId::from(reference),
            amount,
            filled_amount: Decimal::ZERO,
            filled_quote: Decimal::ZERO,
            limit_price: new.limit_price(),
            extra: extra(new),
            time_in_force: new.time_in_force,
            post_only: new.post_only,
            status: OrderStatus::Open,
            reason: None,
            placed_at: now,
            created: now,
            priority: None,
            resting: None,
            reserve_lots: 0,
            reserve_rate: Decimal::ZERO,
        });
        self.exchange.mark_order(id);
        id
    }

    /// Runs an order against its book: fill what crosses, then rest (GTC/GTD limit) or end.
    /// `units`: its limit in ticks and the lots it wants, where entry found them (see
    /// [`entry_units`]); else worked out from its record.
    fn execute(&mut self, id: OrderId, units: Option<(Option<Ticks>, Lots)>) {
        let o = self.orders.get(id);
        let (market, side, customer) = (o.market, o.side, o.customer);
        // Read once: matching changes what the order has filled, never its time in force.
        let tif = o.time_in_force;
        let m = &self.exchange.markets[market as usize];
        let limit_ticks = || o.limit_price.map(|p| m.ticks(p));
        let from_record = || (limit_ticks(), m.lots(o.remaining()));
        debug_assert!(
            units.is_none_or(|u| u == from_record()),
            "entry's units are the record's"
        );
        let (limit, want) = match (units, o.cash_amount()) {
            (Some(units), _) => units,
            (None, Some(cash)) if o.amount.is_zero() => {
                let limit = limit_ticks();
                (limit, self.cash_lots(id, limit, cash))
            }
            (None, _) => from_record(),
        };
        let m = &self.exchange.markets[market as usize];
        let all_or_none = tif == TimeInForce::Fok;
        if want == 0 || (all_or_none && m.book.fillable(side, limit, want) < want) {
            self.finish(id, OrderStatus::Expired, Some(EndReason::TimeInForce));
            return;
        }
        let taker = |desk: &Self| Taker {
            order: Some(id),
            customer,
            kind: TradeKind::Trade,
            terms: desk.terms(customer, market),
        };
        let (left, filled) = self.sweep(taker, (side, market), limit, want);
        if left == 0 {
            self.finish(id, OrderStatus::Filled, None);
        } else if let (Some(limit), TimeInForce::Gtc | TimeInForce::Gtd) = (limit, tif) {
            let o = self.orders.get_mut(id);
            if filled {
                o.status = OrderStatus::PartiallyFilled;
            }
            self.exchange.rest(o, limit, left);
        } else {
            // IOC and market orders keep what they filled (D5).
            self.finish(id, OrderStatus::Expired, Some(EndReason::TimeInForce));
        }
    }

    /// The lots a cash order's budget buys off the book now (no worse than `limit`), which
    /// become its amount.
    fn cash_lots(&mut self, id: OrderId, limit: Option<Ticks>, cash: Decimal) -> Lots {
        let o = self.orders.get(id);
        let m = &self.exchange.markets[o.market as usize];
        let unit = m.spec.tick_size * m.spec.lot_size;
        let budget = (cash / unit).floor();
        let budget = budget.mantissa() / 10i128.pow(budget.scale());
        let lots = m.book.lots_within_budget(o.side, limit, budget);
        let amount = m.amount(lots);
        self.orders.get_mut(id).amount = amount;
        lots
    }

    /// Takes up to `want` lots on `side` of `market`'s book (within `limit`) and books each
    /// fill against `taker`, asked for only if something fills. Returns the lots left and
    /// whether any filled.
    fn sweep(
        &mut self,
        taker: impl FnOnce(&Self) -> Taker,
        (side, market): (Side, MarketId),
        limit: Option<Ticks>,
        want: Lots,
    ) -> (Lots, bool) {
        let mut fills = std::mem::take(&mut *self.fills);
        let book = &mut self.exchange.markets[market as usize].book;
        let left = book.take(side, limit, want, &mut fills);
        let filled = !fills.is_empty();
        if filled {
            let taker = taker(self);
            // The venue's side of every fill's rows posted once, at the sweep's end.
            self.with_venue_batch(|desk, batch| {
                for f in &fills {
                    desk.settle(&taker, (side, market), f, batch);
                }
            });
        }
        fills.clear();
        *self.fills = fills;
        (left, filled)
    }

    /// Runs `book` (fills) with the venue's side of its ledger rows owed in a batch, posted
    /// when it returns.
    fn with_venue_batch(&mut self, book: impl FnOnce(&mut Self, &mut VenueBatch)) {
        let mut batch = self.ledger.open_venue_batch();
        book(self, &mut batch);
        let now = self.clock.now;
        self.ledger
            .close_venue_batch(&mut self.accounts, batch, now);
    }

    /// One lookup of what a fill needs of a customer in a market.
    fn terms(&self, code: CustomerCode, market: MarketId) -> Terms {
        let c = self
            .customer(code)
            .expect("orders belong to existing customers");
        let symbol = self.exchange.markets[market as usize].spec.symbol.as_str();
        Terms {
            broker: c.broker,
            fees: c.fees.get(symbol).copied().unwrap_or(DEFAULT_FEES),
            rate: MarginRate::of_leverage(c.leverage),
        }
    }

    /// Books one execution of a taker against a resting order, and moves the maker on:
    /// filled and out of the book, or partially filled.
    fn settle(
        &mut self,
        taker: &Taker,
        (side, market): (Side, MarketId),
        f: &Fill,
        batch: &mut VenueBatch,
    ) {
        let maker_customer = self.orders.get(f.maker_id).customer;
        let maker = self.terms(maker_customer, market);
        let sides = [
            FillSide {
                order: taker.order,
                kind: taker.kind,
                customer: taker.customer,
                broker: taker.terms.broker,
                side,
                fee_bps: taker.terms.fees.taker_bps,
                rate: taker.terms.rate,
                liquidity: Liquidity::Taker,
            },
            FillSide {
                order: Some(f.maker_id),
                kind: TradeKind::Trade,
                customer: maker_customer,
                broker: maker.broker,
                side: side.opposite(),
                fee_bps: maker.fees.maker_bps,
                rate: maker.rate,
                liquidity: Liquidity::Maker,
            },
        ];
        let price = self.exchange.markets[market as usize].price(f.price);
        self.book((market, price, f.lots), sides, batch);
        let maker = self.orders.get_mut(f.maker_id);
        if f.maker_done {
            maker.resting = None;
            maker.priority = None;
            self.finish(f.maker_id, OrderStatus::Filled, None);
        } else {
            maker.status = OrderStatus::PartiallyFilled;
        }
    }

    /// Books one execution of `lots` at `price` between its two sides, the taker first.
    fn book(
        &mut self,
        (market, price, lots): (MarketId, Decimal, Lots),
        sides: [FillSide; 2],
        batch: &mut VenueBatch,
    ) {
        let mut books = Books {
            accounts: &mut self.accounts,
            rng: &mut self.rng.0,
            now: self.clock.now,
        };
        let execution = Execution {
            market,
            price,
            lots,
        };
        book_fill(
            &mut self.exchange,
            &mut self.orders,
            (&mut self.positions, &mut self.passes),
            (&mut self.ledger, batch),
            &mut books,
            execution,
            sides,
        );
    }

    /// Ends an order: out of the book and the trigger index, its reserve released, and out
    /// of the live set and the reference index (see `trading::ended`): its reference is free
    /// again (rule 11).
    fn finish(&mut self, id: OrderId, status: OrderStatus, reason: Option<EndReason>) {
        let now = self.clock.now;
        let o = self.orders.get_mut(id);
        debug_assert!(o.is_open(), "only open orders end");
        let market = o.market;
        triggers::disarm(&mut self.exchange.markets[market as usize], o);
        if let Some(r) = o.resting.take() {
            self.exchange.markets[market as usize].book.cancel(r);
        }
        o.priority = None;
        o.status = status;
        o.reason = reason;
        o.created = now;
        // A timer outliving its order would let place-and-cancel pile timers up.
        if let Some(at) = o.expire_time().filter(|at| *at > now) {
            self.scheduler.cancel(at, ScheduledEvent::OrderExpiry(id));
        }
        let release = o.reserved();
        o.reserve_lots = 0;
        let customer = o.customer;
        let asset = self.exchange.markets[market as usize].spec.settlement;
        self.ledger
            .adjust_locked(&mut self.accounts, customer, asset, -release, now);
        self.orders.end(id);
        self.exchange.mark_order(id);
    }
}

/// What only some orders carry: a conditional order's trigger, a cash order's notional or a
/// GTD order's expiry. Rules 2 and 7 leave an order at most one: a cash order is IOC and
/// never conditional, a conditional order is IOC or GTC.
fn extra(new: &NewOrder) -> Option<Box<Extra>> {
    let trigger = |trigger_price, take_profit_price, stop_loss_price| {
        Extra::Trigger(Trigger {
            trigger_price,
            trigger_price_type: new
                .trigger_price_type()
                .unwrap_or(TriggerPriceType::TradePrice),
            take_profit_price,
            stop_loss_price,
            fired: false,
        })
    };
    let extra = match (new.terms, new.expire_time) {
        (OrderTerms::Conditional { trigger_price, .. }, _) => {
            trigger(Some(trigger_price), None, None)
        }
        (
            OrderTerms::Combo {
                take_profit_price,
                stop_loss_price,
                ..
            },
            _,
        ) => trigger(None, Some(take_profit_price), Some(stop_loss_price)),
        (
            OrderTerms::Market(Quantity::Cash(cash))
            | OrderTerms::Limit {
                quantity: Quantity::Cash(cash),
                ..
            },
            _,
        ) => Extra::Cash(cash),
        (_, Some(at)) => Extra::Expires(at),
        (_, None) => return None,
    };
    Some(Box::new(extra))
}

/// A new order's limit in ticks and its amount in lots as entry found them (see
/// [`perpsim_core::entry::GridUnits`]), for its first run against the book: None for a cash
/// order, a conditional one, or one whose units entry did not find.
fn entry_units(new: &NewOrder) -> Option<(Option<Ticks>, Lots)> {
    let lots = Lots::try_from(new.units.lots?).ok()?;
    let limit = match new.terms {
        OrderTerms::Market(Quantity::Amount(_)) => None,
        OrderTerms::Limit {
            quantity: Quantity::Amount(_),
            ..
        } => Some(Ticks::try_from(new.units.limit_ticks?).ok()?),
        _ => return None,
    };
    Some((limit, lots))
}
