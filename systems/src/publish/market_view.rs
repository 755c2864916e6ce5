//! The published side of trading: orders, positions, trades, public fills and per-market data
//! (book tops, the last day's candles), as persistent maps (the newest fills as chunks behind
//! `Arc`s) the API reads without touching the engine.
//!
//! The view of trading: live orders, open positions, book tops, and the last day's one-minute
//! candles and newest public fills of the markets that traded, shared from the exchange's tape
//! (`records/tape`: every fill is recorded there as it is booked; the one-minute candles that
//! opened less than a day before the newest, what the tickers' 24 h figures read, the newest
//! kept apart so a fill adds to it without a map look-up, and `RECENT_FILLS`, 1 000 overall and
//! per market: what the recent-trades list's `limit` reaches). The tape is state, in snapshots,
//! so neither a restore nor the view needs the fills' history; `/ohlc`'s candles of every
//! interval are the journal's projection's. It must NOT know the wire: records are converted in
//! `api`.

use std::sync::Arc;

use bevy_ecs::prelude::{Query, Res, ResMut};
use imbl::{OrdMap, OrdSet};
use perpsim_core::Decimal;
use perpsim_core::ids::{CustomerCode, PositionCode};
use perpsim_core::order::ReferenceId;
use perpsim_core::time::Timestamp;

use crate::positions::PositionIndex;
use crate::publish::view::ReadView;
use crate::records::ids::OrderId;
use crate::records::order::Order;
use crate::records::position::Position;
use crate::records::tape::{Candle, RecentFills};
use crate::records::venue::MarketId;
use crate::trading::exchange::Exchange;
use crate::trading::orders::OrderRecords;

/// One market as the read side sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct MarketView {
    pub symbol: String,
    pub last_price: Option<Decimal>,
    pub best_bid: Option<Decimal>,
    pub best_ask: Option<Decimal>,
    pub open_interest: Decimal,
    /// Its one-minute candles of the last day by open time, only minutes with trades (the
    /// ticker's 24 h figures; every interval's candles are the journal's projection's).
    pub day_candles: OrdMap<i64, Candle>,
    /// Its latest public fills, oldest first: at most
    /// [`RECENT_FILLS`](crate::records::tape::RECENT_FILLS).
    pub fills: RecentFills,
}

#[derive(Debug, Clone, Default)]
pub struct TradingView {
    pub markets: Vec<MarketView>,
    /// The live orders (resting or waiting), by id. Each record is the engine's own,
    /// shared: the engine copies it before its next change. An order leaves the view when it
    /// ends: a read of an ended one goes to the journal's projection, so the view's size
    /// follows the live set, not the history (issue 37).
    pub orders: OrdMap<OrderId, Arc<Order>>,
    /// Per customer, the live order under each reference_id (rule 11: at most one).
    pub refs: OrdMap<CustomerCode, OrdMap<ReferenceId, OrderId>>,
    /// A customer's open orders by (placement time, id): the open-orders list (§4.2).
    pub open_orders: OrdMap<CustomerCode, OrdSet<(Timestamp, OrderId)>>,
    pub positions: OrdMap<CustomerCode, MarketPositions>,
    pub position_codes: OrdMap<PositionCode, (CustomerCode, MarketId)>,
    /// The latest public fills of every market, oldest first: at most
    /// [`RECENT_FILLS`](crate::records::tape::RECENT_FILLS).
    pub fills: RecentFills,
    /// Each market's stream depth by market id (D9 orderbook-stream), as of this view's tick.
    pub books: Vec<Arc<crate::records::depth::Depth>>,
}

/// A customer's open positions in the read view, by market: one shared slice, replaced
/// whole at a change (a customer holds a position per instrument at most). A map per
/// customer held about 2.4 KB for one position (2.4 GB at a million customers), copied
/// whole at each change once a reader shared it; a slice holds one in about 180 B and is
/// copied by sharing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MarketPositions(Arc<[Position]>);

impl MarketPositions {
    pub fn get(&self, market: &MarketId) -> Option<&Position> {
        let at = self.0.binary_search_by_key(market, |p| p.market).ok()?;
        Some(&self.0[at])
    }

    /// The positions, by market.
    pub fn values(&self) -> std::slice::Iter<'_, Position> {
        self.0.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `position` in its market's place, replacing the one held there.
    pub fn insert(&mut self, position: Position) {
        let mut all = self.0.to_vec();
        match all.binary_search_by_key(&position.market, |p| p.market) {
            Ok(at) => all[at] = position,
            Err(at) => all.insert(at, position),
        }
        self.0 = all.into();
    }

    pub fn remove(&mut self, market: &MarketId) {
        if self.get(market).is_some() {
            self.0 = self
                .0
                .iter()
                .filter(|p| p.market != *market)
                .cloned()
                .collect();
        }
    }
}

impl std::ops::Index<&MarketId> for MarketPositions {
    type Output = Position;

    fn index(&self, market: &MarketId) -> &Position {
        self.get(market).expect("a position in the market")
    }
}

impl TradingView {
    pub fn market(&self, symbol: &str) -> Option<(MarketId, &MarketView)> {
        self.markets
            .iter()
            .enumerate()
            .find(|(_, m)| m.symbol == symbol)
            .map(|(i, m)| (i as MarketId, m))
    }

    /// The live order under a reference, if any. When none is, a read answers the latest
    /// ended one, which the view does not hold (see `orders`).
    pub fn live_order_by_ref(
        &self,
        customer: CustomerCode,
        reference: &str,
    ) -> Option<&Arc<Order>> {
        self.orders.get(self.refs.get(&customer)?.get(reference)?)
    }

    pub fn symbol(&self, market: MarketId) -> &str {
        &self.markets[market as usize].symbol
    }
}

/// Drops the reference of an order that ended, unless a newer live order holds it already.
fn forget_ref(
    refs: &mut OrdMap<CustomerCode, OrdMap<ReferenceId, OrderId>>,
    o: &Order,
    id: OrderId,
) {
    let Some(by) = refs.get_mut(&o.customer) else {
        return;
    };
    if by.get(&o.reference_id) == Some(&id) {
        by.remove(&o.reference_id);
        if by.is_empty() {
            refs.remove(&o.customer);
        }
    }
}

/// The candles and latest fills of the markets that traded since the last run (of every
/// market, on a rebuild), shared with the exchange's tape.
fn publish_tape(t: &mut TradingView, exchange: &mut Exchange) {
    let rebuild = std::mem::take(&mut exchange.dirty.rebuild_tape);
    let mut traded: Vec<usize> = match rebuild {
        true => (0..exchange.tape.markets.len()).collect(),
        false => exchange
            .fills
            .iter_from(exchange.dirty.fills_published)
            .map(|f| f.market as usize)
            .collect(),
    };
    exchange.dirty.fills_published = exchange.fills.len();
    traded.sort_unstable();
    traded.dedup();
    for &market in &traded {
        let (tape, m) = (&exchange.tape.markets[market], &mut t.markets[market]);
        m.day_candles = tape.day_candles();
        m.fills = tape.fills.clone();
    }
    if rebuild || !traded.is_empty() {
        t.fills = exchange.tape.fills.clone();
    }
}

/// PublishSystems: what trading changed since the last run.
pub fn publish_trading(
    mut view: ResMut<ReadView>,
    mut exchange: ResMut<Exchange>,
    orders: OrderRecords,
    index: Res<PositionIndex>,
    positions: Query<&Position>,
) {
    let exchange = &mut *exchange;
    let t = &mut view.trading;
    while t.markets.len() < exchange.markets.len() {
        let m = &exchange.markets[t.markets.len()];
        t.markets.push(MarketView {
            symbol: m.spec.symbol.clone(),
            last_price: None,
            best_bid: None,
            best_ask: None,
            open_interest: Decimal::ZERO,
            day_candles: OrdMap::new(),
            fills: RecentFills::default(),
        });
    }
    publish_orders(t, exchange, &orders);
    publish_positions(t, exchange, &index, &positions);
    publish_tape(t, exchange);
    for (i, m) in exchange.markets.iter().enumerate() {
        let v = &mut t.markets[i];
        v.last_price = m.last_price;
        v.best_bid = m.book.best_bid().map(|(p, _)| m.price(p));
        v.best_ask = m.book.best_ask().map(|(p, _)| m.price(p));
        v.open_interest = m.open_interest;
    }
}

/// The live orders the run changed, their references and each customer's open list.
fn publish_orders(t: &mut TradingView, exchange: &mut Exchange, orders: &OrderRecords) {
    if std::mem::take(&mut exchange.dirty.rebuild_orders) {
        t.orders = OrdMap::new();
        t.refs = OrdMap::new();
        t.open_orders = OrdMap::new();
    }
    for id in exchange.dirty.orders.take() {
        let o = orders.record(id);
        let key = (o.placed_at, id);
        let open = t.open_orders.entry(o.customer).or_default();
        if o.is_open() {
            open.insert(key);
        } else {
            open.remove(&key);
        }
        if o.is_open() {
            t.orders.insert(id, Arc::clone(o));
            // Most changes are fills of the order its reference already names.
            let named = t
                .refs
                .get(&o.customer)
                .and_then(|by| by.get(&o.reference_id));
            if named != Some(&id) {
                t.refs
                    .entry(o.customer)
                    .or_default()
                    .insert(o.reference_id.clone(), id);
            }
        } else {
            t.orders.remove(&id);
            forget_ref(&mut t.refs, o, id);
        }
    }
}

/// The open positions the run changed or closed.
fn publish_positions(
    t: &mut TradingView,
    exchange: &mut Exchange,
    index: &PositionIndex,
    positions: &Query<&Position>,
) {
    if std::mem::take(&mut exchange.dirty.rebuild_positions) {
        t.positions = OrdMap::new();
        t.position_codes = OrdMap::new();
    }
    for (customer, market, code) in std::mem::take(&mut exchange.dirty.closed) {
        t.position_codes.remove(&code);
        if let Some(held) = t.positions.get_mut(&customer) {
            held.remove(&market);
        }
    }
    for key in exchange.dirty.positions.take() {
        if let Some(p) = index
            .map()
            .get(&key)
            .map(|&e| positions.get(e).expect("indexed"))
        {
            t.position_codes.insert(p.code, key);
            match t.positions.get_mut(&key.0) {
                Some(held) => held.insert(p.clone()),
                None => {
                    let mut held = MarketPositions::default();
                    held.insert(p.clone());
                    t.positions.insert(key.0, held);
                }
            }
        }
    }
}
