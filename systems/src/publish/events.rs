//! The tick's events for the push channels (D9), derived from state as the view is, but
//! whether or not the view is kept: a replay emits the same events as the live run.
//!
//! After every run of the schedule, [`emit_events`] reads what the append-only logs gained
//! since it last looked (trade records, public fills, movements, notices, margin state
//! changes) and the orders that run changed. At the end of the tick, [`end_of_tick`] adds
//! each changed market's book changes as one batch, the tickers that moved, and the 5-second
//! valuation instant. Cursors and depths start from the state a genesis or restore leaves,
//! so a restored engine goes on emitting exactly what the uninterrupted one would.
//!
//! Events are made only for a listener (`events::Listening`, set by the host): the service's
//! channels take all of them; a scenario replay, the recovery's replay and the benchmarks only
//! margin-state changes, so their runs make no order `Arc`s (which the order's next change must
//! copy), depth diffs, tickers or timer events, while every log's cursor still follows. When
//! the channels start listening, the stream's baseline is taken from the state as it stands, as
//! after a restore.
//!
//! A restore's own run of the schedule must change nothing: the market maker does not quote in
//! it (`records::simulation::Restoring`; the events test found it topping up a quote its own amend
//! had filled, moving the state away from the uninterrupted engine's until the next re-price).

use std::sync::Arc;

use bevy_ecs::prelude::{FromWorld, Mut, QueryState, Res, ResMut, Resource, World};
use bevy_ecs::system::SystemParam;
use perpsim_core::order::Side;

use crate::clock::SimClock;
use crate::command::{EngineEvent, TickEvents};
use crate::money::ledger::Ledger;
use crate::publish::view::{Publishing, ReadView};
use crate::records::depth::{Depth, Level, STREAM_DEPTH, diff};
use crate::records::funding::FundingView;
use crate::records::money::{MovementKind, MovementStatus};
use crate::records::venue::{InstrumentState, MarketSlot};
use crate::risk::RiskLog;
use crate::risk::notices::Notifications;
use crate::settlement::funding::FundingState;
use crate::trading::exchange::{Exchange, Market};
use crate::trading::orders::OrderRecords;

/// Positions and margin are pushed once per this much simulation time (§8: about 5 s).
pub const VALUATION_INTERVAL_MS: i64 = 5_000;

/// How far each log has been emitted.
#[derive(Resource, Debug, Clone, Default)]
pub struct EventCursors {
    movements: usize,
    trades: usize,
    fills: usize,
    notices: usize,
    risk: usize,
}

/// What a ticker shows that the engine holds, to tell when it moved.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TickerKey {
    state: InstrumentState,
    last_price: Option<perpsim_core::Decimal>,
    best: (Option<i64>, Option<i64>),
    open_interest: perpsim_core::Decimal,
    funding: FundingView,
}

/// What the end of the last tick showed: each market's stream depth (and the book revision
/// it was read at), its ticker, whether it traded since, and the last valuation instant.
#[derive(Resource, Debug, Clone, Default)]
pub struct StreamState {
    depths: Vec<(u64, Arc<Depth>)>,
    tickers: Vec<Option<TickerKey>>,
    traded: Vec<bool>,
    /// The 5-second period of the last tick's end.
    valued: i64,
}

/// The markets' states as [`end_of_tick`] reads them: the query built once, not at every tick
/// (building it matched every archetype: a twentieth of a serving engine's thread).
#[derive(Resource)]
pub(crate) struct MarketStates(QueryState<(&'static MarketSlot, &'static InstrumentState)>);

impl FromWorld for MarketStates {
    fn from_world(world: &mut World) -> Self {
        MarketStates(world.query())
    }
}

/// Which of the tick's events the host consumes. Emitting an event nobody reads is work on
/// every run: an `Arc` of every changed order (which the order's next change must then
/// copy), a 50-level depth diff of every changed book each tick (issue 36 item 3).
#[derive(Resource, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Listening {
    /// Every event, for the push channels (the service).
    #[default]
    Channels,
    /// Margin-state changes only (a scenario replay's report, the benchmarks); every other
    /// log's cursor still follows, so nothing is emitted late if the channels start.
    MarginStates,
}

/// The append-only logs the events follow besides the exchange's: movements, notices,
/// margin states.
#[derive(SystemParam)]
pub struct Logs<'w> {
    ledger: Res<'w, Ledger>,
    notices: Res<'w, Notifications>,
    risk: Res<'w, RiskLog>,
    listening: Res<'w, Listening>,
}

/// PublishSystems (before the view): the events of this run, in a fixed order — orders by
/// id, then trade records, public fills, movements, notices and margin states by sequence.
pub fn emit_events(
    mut events: ResMut<TickEvents>,
    mut cursors: ResMut<EventCursors>,
    mut stream: ResMut<StreamState>,
    mut exchange: ResMut<Exchange>,
    orders: OrderRecords,
    logs: Logs,
) {
    let out = &mut events.0;
    let changed = std::mem::take(&mut exchange.changed_orders);
    let c = &mut *cursors;
    match *logs.listening {
        Listening::Channels => emit_logs(out, c, &mut stream, &exchange, &orders, &logs, changed),
        Listening::MarginStates => {
            c.trades = exchange.trades.len();
            c.fills = exchange.fills.len();
            c.movements = logs.ledger.movements().len();
            c.notices = logs.notices.0.len();
        }
    }
    out.extend(
        logs.risk
            .0
            .iter_from(c.risk)
            .cloned()
            .map(EngineEvent::MarginState),
    );
    c.risk = logs.risk.0.len();
}

/// The events of every log but the margin states', for the channels.
fn emit_logs(
    out: &mut Vec<EngineEvent>,
    c: &mut EventCursors,
    stream: &mut StreamState,
    exchange: &Exchange,
    orders: &OrderRecords,
    logs: &Logs,
    mut changed: Vec<crate::records::ids::OrderId>,
) {
    changed.sort_unstable();
    changed.dedup();
    out.extend(
        changed
            .into_iter()
            .map(|id| EngineEvent::Order(Arc::clone(orders.record(id)))),
    );
    out.extend(
        exchange
            .trades
            .iter_from(c.trades)
            .map(|t| EngineEvent::Trade(Arc::new(t.clone()))),
    );
    c.trades = exchange.trades.len();
    stream.traded.resize(exchange.markets.len(), false);
    for fill in exchange.fills.iter_from(c.fills) {
        stream.traded[fill.market as usize] = true;
        out.push(EngineEvent::PublicTrade(Arc::new(fill.clone())));
    }
    c.fills = exchange.fills.len();
    // Transfers are pushed when they finish (`money::accounts`); everything else is booked
    // in a terminal status, so it is pushed as it appears.
    let movements = logs.ledger.movements();
    out.extend(
        movements
            .iter_from(c.movements)
            .filter(|m| !matches!(m.kind, MovementKind::Deposit | MovementKind::Withdrawal))
            .filter(|m| m.status != MovementStatus::Pending)
            .map(|m| EngineEvent::Movement(Arc::new(m.clone()))),
    );
    c.movements = movements.len();
    let notices = &logs.notices.0;
    out.extend(
        notices
            .iter_from(c.notices)
            .map(|n| EngineEvent::Notice(Arc::new(n.clone()))),
    );
    c.notices = notices.len();
}

/// A market's stream depth: its best [`STREAM_DEPTH`] levels a side.
fn depth(market: &Market) -> Depth {
    let side = |s: Side| {
        market
            .book
            .depth(s, STREAM_DEPTH)
            .into_iter()
            .map(|(p, lots)| Level {
                price: market.price(p),
                amount: market.amount(lots),
            })
            .collect()
    };
    Depth {
        bids: side(Side::Buy),
        asks: side(Side::Sell),
    }
}

fn ticker_key(world: &World, market: &Market, state: InstrumentState, m: usize) -> TickerKey {
    TickerKey {
        state,
        last_price: market.last_price,
        best: (
            market.book.best_bid().map(|(p, _)| p),
            market.book.best_ask().map(|(p, _)| p),
        ),
        open_interest: market.open_interest,
        funding: world.resource::<FundingState>().view(m as u32),
    }
}

/// The end of a tick: each market's book changes of the whole tick as one batch, a ticker
/// for each market whose ticker moved, and the valuation instant when a 5-second boundary
/// passed. With `emit` false (after a genesis or a restore) or the channels not listening,
/// only the baseline is taken; with neither the channels nor the view, nothing.
pub fn end_of_tick(world: &mut World, emit: bool) {
    let channels = *world.resource::<Listening>() == Listening::Channels;
    if !channels && !world.resource::<Publishing>().0 {
        return; // no depth, ticker or instant is read: the baseline is taken when one is
    }
    let emit = emit && channels;
    let mut states: Vec<(usize, InstrumentState)> =
        world.resource_scope(|world, mut markets: Mut<MarketStates>| {
            let found = markets.0.iter(world);
            found
                .map(|(slot, state)| (slot.0 as usize, state.clone()))
                .collect()
        });
    states.sort_unstable_by_key(|(m, _)| *m);
    let mut stream = world.remove_resource::<StreamState>().unwrap_or_default();
    let mut out = Vec::new();
    let exchange = world.resource::<Exchange>();
    let count = exchange.markets.len();
    stream
        .depths
        .resize_with(count, || (u64::MAX, Arc::default()));
    stream.tickers.resize(count, None);
    stream.traded.resize(count, false);
    let mut published = Vec::new();
    for (m, market) in exchange.markets.iter().enumerate() {
        let revision = market.book.revision();
        if stream.depths[m].0 != revision {
            let now = depth(market);
            let changes = diff(&stream.depths[m].1, &now);
            if !changes.is_empty() {
                out.push(EngineEvent::Book {
                    market: m as u32,
                    changes,
                });
                stream.depths[m].1 = Arc::new(now);
                published.push(m);
            }
            stream.depths[m].0 = revision;
        }
        let key = ticker_key(world, market, states[m].1.clone(), m);
        let traded = std::mem::take(&mut stream.traded[m]);
        if traded || stream.tickers[m].as_ref() != Some(&key) {
            out.push(EngineEvent::Ticker(m as u32));
            stream.tickers[m] = Some(key);
        }
    }
    let now = world.resource::<SimClock>().now;
    let period = now.millis().div_euclid(VALUATION_INTERVAL_MS);
    if period > stream.valued {
        out.push(EngineEvent::Valuation { at: now });
    }
    stream.valued = period;
    if world.resource::<Publishing>().0 {
        let all = (0..count).filter(|m| !emit || published.contains(m));
        publish_books(world, &stream, all);
    }
    world.insert_resource(stream);
    if emit {
        world.resource_mut::<TickEvents>().0.extend(out);
    }
}

/// The view's copy of the stream depths of `markets` (shared, not copied).
fn publish_books(world: &mut World, stream: &StreamState, markets: impl Iterator<Item = usize>) {
    let mut view = world.resource_mut::<ReadView>();
    let books = &mut view.trading.books;
    books.resize_with(stream.depths.len(), Arc::default);
    for m in markets {
        books[m] = Arc::clone(&stream.depths[m].1);
    }
}

/// Publishing resumed (after a replay): the view takes every market's depth.
pub(crate) fn republish_books(world: &mut World) {
    let stream = world.remove_resource::<StreamState>().unwrap_or_default();
    publish_books(world, &stream, 0..stream.depths.len());
    world.insert_resource(stream);
}

/// Starts every cursor at the end of its log: a genesis or a restore has nothing to push.
pub(crate) fn start_cursors(world: &mut World) {
    let cursors = EventCursors {
        movements: world.resource::<Ledger>().movements().len(),
        trades: world.resource::<Exchange>().trades.len(),
        fills: world.resource::<Exchange>().fills.len(),
        notices: world.resource::<Notifications>().0.len(),
        risk: world.resource::<RiskLog>().0.len(),
    };
    world.insert_resource(cursors);
}
