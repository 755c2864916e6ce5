//! The venue's trading state (interface §2.3, §2.10; D5): one market per instrument with its
//! order book, and the trade records and public fills. Live orders and open positions are
//! entities (see `orders` and `positions`); the snapshot form here carries them too. Plain
//! data and pure leaf functions; the systems that change it live in `desk` (order handling)
//! and `fills` (booking executions).
//!
//! Ids are sequence numbers: an order's id is the count of orders accepted before it, a
//! trade's its index in `trades`, a fill's its index in `fills`. All three only grow, in
//! non-decreasing time, so a time window is one range of ids.
//!
//! A market's book, last price, triggers and open interest stay in `Exchange::markets`, a `Vec`
//! indexed by `MarketId`: the matching loop holds one book and the orders it fills at once, and
//! a dense index is the cheapest lookup there; its spec, status and prices are the instrument
//! entity's.

use std::collections::{BTreeMap, BTreeSet};
use std::num::NonZeroU64;
use std::sync::Arc;

use bevy_ecs::prelude::Resource;
use perpsim_core::Decimal;
use perpsim_core::decimal::{from_units, whole_units};
use perpsim_core::ids::{CustomerCode, PositionCode};
use perpsim_core::instrument::InstrumentSpec;
use serde::{Deserialize, Serialize};

use crate::dirty::DirtyKeys;
use crate::records::ids::OrderId;
use crate::records::log::{LogDigest, ProjectedLog};
use crate::records::order::{Lots, Ticks};
use crate::records::position::{Position, PositionKey};
use crate::records::tape::Tape;
use crate::trading::book::Book;
use crate::trading::ended::EndedState;

use crate::records::order::Order;
use crate::records::trade::{PublicFill, TradeRecord};
use crate::records::venue::MarketId;
use crate::trading::orders::OrderRecords;

/// Which price a waiting conditional order watches, and which way it fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Watch {
    /// Fires once the last trade price is at or above the key.
    TradeRising,
    /// Fires once the last trade price is at or below the key.
    TradeFalling,
    MarkRising,
    MarkFalling,
}

/// One instrument's market: its book, last trade price and waiting conditional orders.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Market {
    pub spec: InstrumentSpec,
    /// `spec.symbol`, shared with the trade rows booked in this market.
    #[serde(skip)]
    pub symbol: Arc<str>,
    pub book: Book,
    #[serde(with = "perpsim_core::decimal::bin_opt")]
    pub last_price: Option<Decimal>,
    /// Waiting conditional orders by (watch, trigger ticks, order id): a price move fires a
    /// range, in trigger order and then placement order.
    pub triggers: BTreeSet<(Watch, Ticks, OrderId)>,
    /// Sum of long positions (= sum of shorts).
    #[serde(with = "perpsim_core::decimal::bin")]
    pub open_interest: Decimal,
}

impl Market {
    pub fn new(spec: InstrumentSpec) -> Self {
        Market {
            symbol: Arc::from(spec.symbol.as_str()),
            spec,
            book: Book::new(),
            last_price: None,
            triggers: BTreeSet::new(),
            open_interest: Decimal::ZERO,
        }
    }

    /// A price on the tick grid as whole ticks (order entry refuses anything else).
    pub fn ticks(&self, price: Decimal) -> Ticks {
        whole_units(price, self.spec.tick_size)
            .and_then(|t| Ticks::try_from(t).ok())
            .expect("prices are on the tick grid and bounded by the venue maximum notional")
    }

    pub fn price(&self, ticks: Ticks) -> Decimal {
        from_units(ticks, self.spec.tick_size)
    }

    /// An amount on the lot grid as whole lots.
    pub fn lots(&self, amount: Decimal) -> Lots {
        whole_units(amount, self.spec.lot_size)
            .and_then(|l| Lots::try_from(l).ok())
            .expect("amounts are on the lot grid and bounded by the venue maximum notional")
    }

    /// The lots a resting order reserves initial margin for (D5): what is `unfilled` of it
    /// less the part that reduces the customer's position (`reducible`), never below zero.
    pub fn opening_lots(&self, unfilled: Decimal, reducible: Decimal) -> Lots {
        self.lots((unfilled - reducible).max(Decimal::ZERO))
    }

    /// Initial margin per lot of a resting order at `price`: each fill releases exactly its
    /// share of the reserve.
    pub fn reserve_rate(&self, price: Decimal, initial_margin: Decimal) -> Decimal {
        price * self.spec.lot_size * initial_margin
    }

    pub fn amount(&self, lots: Lots) -> Decimal {
        from_units(
            i64::try_from(lots).expect("lots are bounded by the venue maximum notional"),
            self.spec.lot_size,
        )
    }
}

/// What changed since the read view last looked (not part of the state).
#[derive(Debug, Clone, Default)]
pub struct Dirty {
    pub orders: DirtyKeys<OrderId>,
    pub positions: DirtyKeys<(CustomerCode, MarketId)>,
    pub closed: Vec<(CustomerCode, MarketId, PositionCode)>,
    /// The view's positions are to be rebuilt from scratch: tracking resumed, and positions
    /// closed while it was paused were never reported.
    pub rebuild_positions: bool,
    /// The view's live orders likewise: orders that ended while it was paused were never
    /// reported, and their records are gone.
    pub rebuild_orders: bool,
    /// The view's market data likewise, from the tape: the fills before are not all held.
    pub rebuild_tape: bool,
    /// The fills the view has taken the markets' data after.
    pub fills_published: usize,
}

/// The persistent part of [`Exchange`] with the live orders and open positions (what
/// snapshots hold).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExchangeState {
    pub markets: Vec<MarketSnapshot>,
    /// Live orders, by id.
    pub live_orders: Vec<Order>,
    /// What is kept of the ended orders (their records are the journal's projection's).
    pub ended: EndedState,
    pub positions: BTreeMap<(CustomerCode, MarketId), Position>,
    /// The trade records, as the state hash reads them (their rows are held apart,
    /// `snapshot::HeldHistory`).
    pub trades: LogDigest,
    /// The public fills likewise.
    pub fills: LogDigest,
    /// The candles and latest fills the fills made.
    pub tape: Tape,
    pub next_priority: u64,
}

/// [`ExchangeState`] as the exchange and the order entities hold it, field for field, so it
/// encodes to the same bytes.
#[derive(Serialize)]
pub struct ExchangeStateRef<'a> {
    markets: Vec<MarketSnapshot>,
    live_orders: Vec<&'a Order>,
    ended: EndedState,
    positions: BTreeMap<PositionKey, &'a Position>,
    trades: LogDigest,
    fills: LogDigest,
    tape: &'a Tape,
    next_priority: u64,
}

/// A market in snapshot form: the book is stored as its resting orders in priority order and
/// rebuilt on restore, so the encoding does not depend on the book's slot layout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarketSnapshot {
    pub spec: InstrumentSpec,
    #[serde(with = "perpsim_core::decimal::bin_opt")]
    pub last_price: Option<Decimal>,
    pub triggers: BTreeSet<(Watch, Ticks, OrderId)>,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub open_interest: Decimal,
}

#[derive(Resource, Debug, Clone, Default)]
pub struct Exchange {
    pub markets: Vec<Market>,
    pub by_symbol: BTreeMap<String, MarketId>,
    /// The trade records by sequence number: every one while nobody projects them, else
    /// the last chunk's (whole chunks are let go once handed out, `Engine::tick`).
    pub trades: ProjectedLog<TradeRecord>,
    /// The public fills by sequence number, likewise.
    pub fills: ProjectedLog<PublicFill>,
    /// Each market's candles and latest fills, and the latest of all (bounded).
    pub tape: Tape,
    pub next_priority: u64,
    pub dirty: Dirty,
    /// Orders changed in the current run, for the orders channel (drained by the events
    /// system at the end of every run, whether or not the view is kept).
    pub changed_orders: Vec<OrderId>,
}

impl Dirty {
    /// A position left the book of open positions under `code`.
    pub fn close(&mut self, customer: CustomerCode, market: MarketId, code: PositionCode) {
        if self.positions.is_tracking() {
            self.closed.push((customer, market, code));
        }
    }
}

impl Exchange {
    pub fn new(specs: impl IntoIterator<Item = InstrumentSpec>) -> Self {
        let mut exchange = Exchange::default();
        for spec in specs {
            exchange.add_market(Market::new(spec));
        }
        exchange
    }

    fn add_market(&mut self, market: Market) {
        let id = self.markets.len() as MarketId;
        self.by_symbol.insert(market.spec.symbol.clone(), id);
        self.markets.push(market);
    }

    pub fn market_id(&self, symbol: &str) -> Option<MarketId> {
        self.by_symbol.get(symbol).copied()
    }

    /// Projects the trade records and public fills made from now on (every one,
    /// `from_start`), or stops; on again while on changes nothing.
    pub fn project_history(&mut self, on: bool, from_start: bool) {
        self.trades.project(on, from_start);
        self.fills.project(on, from_start);
    }

    /// See [`Engine::set_history_window`](crate::engine::Engine::set_history_window).
    pub fn set_history_window(&mut self, bits: u32) {
        self.trades.set_window(bits);
        self.fills.set_window(bits);
    }

    pub fn mark_order(&mut self, id: OrderId) {
        self.dirty.orders.push(id);
        self.changed_orders.push(id);
    }

    /// Tracks what changes for the read view, or not (see `Ledger::track_changes`);
    /// `orders` (the count of orders accepted) and `positions` (the keys of the open
    /// positions) are marked when tracking resumes.
    pub fn track_changes(
        &mut self,
        on: bool,
        orders: impl Iterator<Item = OrderId>,
        positions: impl Iterator<Item = PositionKey>,
    ) {
        let d = &mut self.dirty;
        match (on, d.orders.is_tracking()) {
            (false, _) => {
                d.orders.pause();
                d.positions.pause();
                d.closed = Vec::new();
            }
            (true, false) => self.mark_everything(orders, positions),
            (true, true) => {}
        }
    }

    /// Every live order and open position marked changed, and the view's orders and
    /// positions to be rebuilt: what a view needs that starts from here (a restore) or
    /// stopped following (publishing off).
    fn mark_everything(
        &mut self,
        orders: impl Iterator<Item = OrderId>,
        positions: impl Iterator<Item = PositionKey>,
    ) {
        let d = &mut self.dirty;
        d.orders.resume(orders);
        d.positions.resume(positions);
        d.rebuild_positions = true;
        d.rebuild_orders = true;
        d.rebuild_tape = true;
        d.fills_published = self.fills.len();
    }

    /// Rests what is left of an order (`lots` at its limit `price`, as the matching that
    /// just ran computed them) in its book, behind everything already there.
    pub fn rest(&mut self, o: &mut Order, price: Ticks, lots: Lots) {
        let market = &mut self.markets[o.market as usize];
        // Checked by multiplying back, which is exact (the grid's units times whole
        // numbers), rather than by dividing again as the matching did.
        assert_eq!(
            (Some(market.price(price)), market.amount(lots)),
            (o.limit_price, o.remaining()),
            "an order rests at its limit with what is left"
        );
        let r = market.book.rest(o.id, o.side, price, lots);
        self.next_priority += 1;
        o.resting = Some(r);
        o.priority = NonZeroU64::new(self.next_priority);
    }

    /// The snapshot form, with the orders and open positions (entities, so the caller
    /// collects them).
    pub fn state(
        &self,
        (live_orders, ended): (Vec<Order>, EndedState),
        positions: BTreeMap<PositionKey, Position>,
    ) -> ExchangeState {
        ExchangeState {
            markets: self.market_snapshots(),
            live_orders,
            ended,
            positions,
            trades: self.trades.digest(),
            fills: self.fills.digest(),
            tape: self.tape.clone(),
            next_priority: self.next_priority,
        }
    }

    /// [`Exchange::state`] borrowed: it encodes to the same bytes without copying the
    /// tape.
    pub fn state_ref<'a>(
        &'a self,
        (live_orders, ended): (Vec<&'a Order>, EndedState),
        positions: BTreeMap<PositionKey, &'a Position>,
    ) -> ExchangeStateRef<'a> {
        ExchangeStateRef {
            markets: self.market_snapshots(),
            live_orders,
            ended,
            positions,
            trades: self.trades.digest(),
            fills: self.fills.digest(),
            tape: &self.tape,
            next_priority: self.next_priority,
        }
    }

    fn market_snapshots(&self) -> Vec<MarketSnapshot> {
        self.markets
            .iter()
            .map(|m| MarketSnapshot {
                spec: m.spec.clone(),
                last_price: m.last_price,
                triggers: m.triggers.clone(),
                open_interest: m.open_interest,
            })
            .collect()
    }

    /// Rebuilds the books from the resting orders in their recorded time priority, and
    /// hands back the live orders (with their places in the books), which become entities,
    /// and what is known of the ended ones (`orders::restore`). The open positions become
    /// entities too (`snapshot::restore_entities`); here they are only marked for the view.
    /// `trades` and `fills` are the rows held and the digest of those let go (which
    /// `EngineState::decode` checked against the state's digests).
    pub fn from_state(
        state: ExchangeState,
        (trades, fills): (ProjectedLog<TradeRecord>, ProjectedLog<PublicFill>),
    ) -> (Self, Vec<Order>, EndedState) {
        let mut exchange = Exchange::default();
        for m in state.markets {
            exchange.add_market(Market {
                last_price: m.last_price,
                triggers: m.triggers,
                open_interest: m.open_interest,
                ..Market::new(m.spec)
            });
        }
        exchange.trades = trades;
        exchange.fills = fills;
        exchange.tape = state.tape;
        exchange.next_priority = state.next_priority;
        let mut live = state.live_orders;
        let mut resting: Vec<(u64, usize)> = live
            .iter()
            .enumerate()
            .filter_map(|(i, o)| o.priority.map(|p| (p.get(), i)))
            .collect();
        resting.sort_unstable();
        for (_, i) in resting {
            let o = &mut live[i];
            let market = &mut exchange.markets[o.market as usize];
            let price = market.ticks(o.limit_price.expect("resting orders have a limit"));
            let lots = market.lots(o.remaining());
            o.resting = Some(market.book.rest(o.id, o.side, price, lots));
        }
        exchange.mark_everything(live.iter().map(|o| o.id), state.positions.keys().copied());
        (exchange, live, state.ended)
    }
}

/// How far the incremental fill checks have got, and when the next full scan is due (debug
/// and test builds).
#[derive(Resource, Debug, Default)]
pub struct CheckedUpTo {
    trades: usize,
    movements: usize,
    trade_movements: usize,
    /// Passes so far: past [`SCAN_ALWAYS_UP_TO`] items, a scan runs on every
    /// [`FULL_SCAN_EVERY`]th.
    passes: u64,
}

/// A scan whose cost grows with the state — the order index and the reference table (every
/// order ever), the live orders, the positions and the accounts — made each run of the
/// schedule cost what exists: a simulated week spent two thirds of its time in the audit. Up
/// to [`SCAN_ALWAYS_UP_TO`] items a scan runs on every pass; past it on every this many, which
/// still catches a corruption within about a minute of simulation time (a pass a second).
/// Checks whose cost follows what changed (new fills, books, money) run on every pass.
const FULL_SCAN_EVERY: u64 = 64;
const SCAN_ALWAYS_UP_TO: u64 = 128;

impl CheckedUpTo {
    /// Checked up to `trades` trade records and `movements` ledger rows, which agree.
    pub fn starting_at(trades: usize, movements: usize) -> Self {
        CheckedUpTo {
            trades,
            movements,
            trade_movements: trades,
            passes: 0,
        }
    }

    /// Counts a run of the audit.
    pub fn next_pass(&mut self) {
        self.passes += 1;
    }

    /// Whether a scan over `items` runs on this pass.
    pub fn scans(&self, items: u64) -> bool {
        items <= SCAN_ALWAYS_UP_TO || self.passes.is_multiple_of(FULL_SCAN_EVERY)
    }
}

impl Exchange {
    /// The trading invariants whose cost follows what changed (issue 4 item 7), after every
    /// run while the engine audits: no book is crossed; every fill is in the trades exactly
    /// twice (one record per side) and each record in the ledger exactly once. Returns the
    /// first violation.
    pub fn check_fills(
        &self,
        ledger: &crate::money::ledger::Ledger,
        done: &mut CheckedUpTo,
    ) -> Result<(), String> {
        if let Some(m) = self.markets.iter().find(|m| !m.book.is_uncrossed()) {
            return Err(format!("{}: the book is crossed", m.spec.symbol));
        }
        if self.trades.len() != 2 * self.fills.len() {
            return Err(format!(
                "{} fills but {} trade records",
                self.fills.len(),
                self.trades.len()
            ));
        }
        let movements = ledger.movements();
        for t in self.trades.iter_from(done.trades) {
            if t.fill.0 != t.seq.0 / 2 {
                return Err(format!(
                    "trade {} is not one of fill {}'s two records",
                    t.code, t.fill
                ));
            }
            let booked = movements
                .get(t.movement.index())
                .and_then(|m| m.trade.as_ref())
                .is_some_and(|info| info.trade_code == Some(t.code) && info.fee == t.fee);
            if !booked {
                return Err(format!(
                    "trade {} is not booked by ledger row #{}",
                    t.code, t.movement
                ));
            }
        }
        done.trades = self.trades.len();
        done.trade_movements += movements
            .iter_from(done.movements)
            .filter(|m| m.trade.as_ref().is_some_and(|t| t.trade_code.is_some()))
            .count();
        done.movements = movements.len();
        if done.trade_movements != self.trades.len() {
            return Err(format!(
                "{} trade rows in the ledger for {} trade records",
                done.trade_movements,
                self.trades.len()
            ));
        }
        Ok(())
    }

    /// The live state's trading invariants (issue 4 item 7): per market the positions of all
    /// accounts sum to zero; every live order rests or waits armed and is what its reference
    /// names; every customer's locked margin is its positions' margin plus its resting
    /// orders' reserves. Returns the first violation.
    pub fn check_live(
        &self,
        orders: &OrderRecords,
        positions: &[&Position],
        accounts: &[(
            &crate::records::money::AccountId,
            &crate::records::money::Balance,
        )],
    ) -> Result<(), String> {
        self.check_position_sums(positions)?;
        // What each (customer, asset) holds, summed once sorted: a map entry per position and
        // order on every run was a large share of a simulated week's audit.
        let mut locked: Vec<((CustomerCode, perpsim_core::instrument::Asset), Decimal)> = positions
            .iter()
            .map(|p| {
                let asset = self.markets[p.market as usize].spec.settlement;
                ((p.customer, asset), p.margin)
            })
            .collect();
        self.check_live_orders(orders, &mut locked)?;
        locked.sort_unstable_by_key(|(key, _)| *key);
        check_locked(&locked, accounts)
    }

    fn check_position_sums(&self, positions: &[&Position]) -> Result<(), String> {
        let mut sums = vec![Decimal::ZERO; self.markets.len()];
        for p in positions {
            if p.size.is_zero() {
                return Err(format!("{}: an empty position is kept", p.code));
            }
            sums[p.market as usize] += p.size;
        }
        match sums.iter().position(|s| !s.is_zero()) {
            Some(i) => Err(format!(
                "{}: positions sum to {} instead of zero",
                self.markets[i].spec.symbol, sums[i]
            )),
            None => Ok(()),
        }
    }

    /// Each live order's checks; its reserve pushed onto `locked`.
    fn check_live_orders(
        &self,
        orders: &OrderRecords,
        locked: &mut Vec<((CustomerCode, perpsim_core::instrument::Asset), Decimal)>,
    ) -> Result<(), String> {
        let armed: BTreeSet<OrderId> = self
            .markets
            .iter()
            .flat_map(|m| m.triggers.iter().map(|&(_, _, id)| id))
            .collect();
        let mut waiting = 0;
        for o in orders.live() {
            if !o.is_open() {
                return Err(format!("order {} is live but {}", o.id, o.status.as_str()));
            }
            if o.waiting() {
                waiting += 1;
                if !armed.contains(&o.id) {
                    return Err(format!("waiting order {} is not armed", o.id));
                }
            } else if o.resting.is_none() {
                return Err(format!("live order {} neither rests nor waits", o.id));
            }
            if orders.refs().get(orders, o.customer, &o.reference_id) != Some(o.id) {
                return Err(format!(
                    "open order {} is not what its reference {} names (rule 11)",
                    o.id, o.reference_id
                ));
            }
            let asset = self.markets[o.market as usize].spec.settlement;
            locked.push(((o.customer, asset), o.reserved()));
        }
        match waiting == armed.len() {
            true => Ok(()),
            false => Err(format!(
                "{} orders armed but {waiting} live orders wait",
                armed.len()
            )),
        }
    }
}

/// Every customer's locked balance is what `locked` (sorted by customer and asset) holds for
/// it.
fn check_locked(
    locked: &[((CustomerCode, perpsim_core::instrument::Asset), Decimal)],
    accounts: &[(
        &crate::records::money::AccountId,
        &crate::records::money::Balance,
    )],
) -> Result<(), String> {
    let mut held = locked.iter().peekable();
    // The accounts come in id order, which is (customer, asset) order among customers.
    for (crate::records::money::AccountId { owner, asset }, b) in accounts {
        if let crate::records::money::Owner::Customer(c) = owner {
            let key = (*c, *asset);
            while held.next_if(|(k, _)| *k < key).is_some() {}
            let mut expected = Decimal::ZERO;
            while let Some((_, amount)) = held.next_if(|(k, _)| *k == key) {
                expected += amount;
            }
            if b.locked != expected {
                return Err(format!(
                    "{c} {asset:?}: locked {} but positions and orders hold {expected}",
                    b.locked
                ));
            }
        }
    }
    Ok(())
}
