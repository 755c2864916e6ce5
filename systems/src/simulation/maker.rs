//! The built-in market maker (D10): an internal account under no broker that quotes a ladder
//! of levels each side of every index, re-quoted each run the ladder moved.
//!
//! Its orders go through the desk like anyone's — same checks, same matching, same fills and
//! ledger — so its positions and PnL count in every invariant. A re-quote keeps every order
//! whose level survives and amends the others in place onto the new levels (same order, new
//! price), so the book and its change stream move by the levels that changed, not by the
//! ladder. It stops quoting the side that would grow its inventory past the maximum, and
//! never takes part in margin or liquidation (it has no broker to answer to).
//!
//! The market maker is a customer-shaped account under no broker (`MARKET_MAKER`, `NO_BROKER`:
//! no key names that broker, so no broker sees it), funded at genesis by a completed deposit
//! per settlement asset, so its money, orders and positions go through the same desk, fills and
//! ledger as everyone's and count in every invariant. Its levels sit on a fixed grid (the level
//! step at the start price, in whole ticks), so a move of the index shifts the ladder by whole
//! grid steps; the re-quote keeps orders on surviving levels, amends the others onto the new
//! levels (same order, new price) and moves the side the index moved towards first, so it never
//! meets its own stale quote. A ladder is whole grid steps (`core::simulation::Ladder`), so a
//! quote's level is integer arithmetic (the ladder's first level, like the feed's index on its
//! tick, is `core::decimal::round_units`: the decimal quotient rounded, computed on the
//! mantissas where that is provably the same number), and the system remembers in a `Local`
//! (not in the engine's state, so a restored engine re-quotes in full once, reading its quotes)
//! the ladder each side was left quoting in full and each quote's level: a market whose ladders
//! and quotes did not move is skipped. It learns which quotes changed from
//! `trading::orders::MakerOrderChanges`, the desk's list per market and side of the maker's
//! orders changed since (a fill, an end, a move), so a side nobody traded against is
//! re-quoted without reading its orders, and one a customer traded against reads only the
//! quotes traded. A ladder that moved with the index at every tick re-priced all twenty
//! orders a market every second (the figures before and after: `benches/README.md`).

use bevy_ecs::prelude::{Local, Mut, Res, ResMut, Resource, World};
use perpsim_core::Decimal;
use perpsim_core::decimal::{from_units, whole_units};
use perpsim_core::entry::{Amend, OrderEntry};
use perpsim_core::instrument::{Asset, InstrumentStatus};
use perpsim_core::order::{OrderType, Side};
use perpsim_core::simulation::{InstrumentSimulation, Ladder, Simulation};
use perpsim_core::time::Timestamp;
use serde::{Deserialize, Serialize};

use crate::money::ledger::{Books, Ledger};
use crate::money::store::WorldAccounts;
use crate::records::ids::OrderId;
use crate::records::money::MovementKind;
use crate::records::simulation::SimulationSettings;
use crate::records::simulation::{MARKET_MAKER, NO_BROKER};
use crate::records::venue::{Customer, MarketId};
use crate::registry::Registry;
use crate::rng::EngineRng;
use crate::simulation::recorded::{self, RecordedBooks};
use crate::trading::desk::Desk;

/// The maker's open quotes per market, bids then asks, and its next reference number.
#[derive(Resource, Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MakerState {
    quotes: Vec<[Vec<OrderId>; 2]>,
    next_reference: u64,
}

impl MakerState {
    /// A market's quotes per side and the maker's reference counter, for the recorded
    /// book's re-quote (`recorded`), the quotes made room for.
    pub(crate) fn quotes_mut(&mut self, market: usize) -> (&mut [Vec<OrderId>; 2], &mut u64) {
        if self.quotes.len() <= market {
            self.quotes.resize_with(market + 1, Default::default);
        }
        (&mut self.quotes[market], &mut self.next_reference)
    }
}

/// At genesis: the maker's account, funded with `maker_funding` in each settlement asset by
/// a completed deposit (money that enters the venue, like any customer's).
pub(crate) fn spawn(world: &mut World, simulation: &Simulation, assets: &[Asset], now: Timestamp) {
    let entity = world
        .spawn(Customer {
            code: MARKET_MAKER,
            broker: NO_BROKER,
            external_id: Some("market-maker".into()),
            created_at: now,
            leverage: perpsim_core::money::DEFAULT_LEVERAGE,
            provisioned: true,
            fees: Default::default(),
        })
        .id();
    world
        .resource_mut::<Registry>()
        .customers
        .insert(MARKET_MAKER, entity);
    for &asset in assets {
        world.resource_scope(|world, mut rng: Mut<EngineRng>| {
            world.resource_scope(|world, mut ledger: Mut<Ledger>| {
                let mut accounts = WorldAccounts(world);
                let mut books = Books {
                    accounts: &mut accounts,
                    rng: &mut rng.0,
                    now,
                };
                let seq = ledger
                    .request_transfer(
                        &mut books,
                        (MARKET_MAKER, NO_BROKER),
                        (MovementKind::Deposit, Decimal::ZERO),
                        asset,
                        simulation.maker_funding,
                    )
                    .expect("transfers are available at genesis")
                    .seq;
                ledger
                    .complete_transfer(&mut accounts, seq, now)
                    .expect("just requested");
            })
        });
    }
}

/// MatchSystems, after the run's order requests: every market's ladder brought to the
/// current index. The side the index moved towards goes first, so the other side never meets
/// a stale quote of the maker's own. A run where neither ladder nor any quote moved does
/// nothing; and the ladders are whole grid steps, so finding which quotes survive a move is
/// integer arithmetic (this was most of a flash crash's Monte-Carlo). The maker remembers
/// each quote's level and learns which quotes changed from the desk's list of its orders
/// changed since, so it reads only those (reading a dozen orders a market a second was a
/// third of what the re-quote cost; reading a side whole after a fill on one quote, an
/// eighth of the re-quote in the 24-hour scenario).
pub fn quote(
    mut desk: Desk,
    mut state: ResMut<MakerState>,
    settings: Res<SimulationSettings>,
    (mut kept, mut scratch): (Local<Vec<Quoted>>, Local<Scratch>),
    (recorded, mut seen): (Res<RecordedBooks>, ResMut<recorded::QuotedBooks>),
) {
    let markets = desk.market_count();
    state.quotes.resize_with(markets as usize, Default::default);
    kept.resize_with(markets as usize, Default::default);
    for market in 0..markets {
        let m = market as usize;
        let sim = &settings.0.instruments[m];
        if let Some(book) = recorded.book(market) {
            let quoting = (market, book, sim.max_inventory);
            recorded::quote(&mut desk, quoting, state.quotes_mut(m), &mut seen.0);
            kept[m].sides = Default::default(); // the ladder's memory no longer holds
            continue;
        }
        let (spec, now) = desk.market(market);
        let cache = &mut kept[m];
        let grid = *cache.grid.get_or_insert_with(|| sim.grid(spec));
        let quoting = Quoting { market, sim, grid };
        let ladders = cache.ladders(sim, now.index_price);
        let wanted = |i: usize| wanted(&desk, quoting, ladders[i]);
        let standing = |i: usize| {
            let side = &cache.sides[i];
            side.ladder == Some(wanted(i))
                && side.intact(&desk, quoting, (SIDES[i], &state.quotes[m][i]))
        };
        if standing(0) && standing(1) {
            // Each changed quote was read open and full: the sides are as their re-quotes
            // left them.
            for side in SIDES {
                desk.forget_maker_changes(market, side);
            }
            continue;
        }
        let bids = cache.sides[0].steps(&desk, grid, &state.quotes[m][0]);
        let rising = bids
            .iter()
            .max()
            .is_some_and(|&b| ladders[0].len > 0 && b < ladders[0].first);
        let sides = match rising {
            true => [1, 0],
            false => [0, 1],
        };
        for i in sides {
            let mut ids = std::mem::take(&mut state.quotes[m][i]);
            let next_reference = &mut state.next_reference;
            let side = &mut cache.sides[i];
            side.steps(&desk, grid, &ids);
            requote(
                &mut desk,
                next_reference,
                (quoting, ladders[i]),
                (&mut ids, side),
                &mut scratch,
            );
            state.quotes[m][i] = ids;
        }
    }
    desk.flush();
}

/// What the maker keeps of a market between runs, derived (a restored engine starts without
/// it and rebuilds it from the orders): the price grid, which never changes, and per side
/// what [`SideQuotes`] says.
#[derive(Debug, Default)]
pub struct Quoted {
    grid: Option<Decimal>,
    /// The ladders at the index they were computed for: many runs find the index unmoved
    /// (a recorded market's steps, ten a second, move no other market's index), and the
    /// ladders' decimal rounding was most of what such a run cost the maker.
    ladders: Option<(Decimal, [Ladder; 2])>,
    sides: [SideQuotes; 2],
}

impl Quoted {
    /// The bid and ask ladders at `index` on the grid.
    fn ladders(&mut self, sim: &InstrumentSimulation, index: Decimal) -> [Ladder; 2] {
        let grid = self.grid.expect("the grid is known before the ladders");
        match self.ladders {
            Some((at, ladders)) if at == index => ladders,
            _ => {
                let ladders = [true, false].map(|bid| sim.ladder(index, bid, grid));
                self.ladders = Some((index, ladders));
                ladders
            }
        }
    }
}

/// One side's quotes as its last re-quote left them: the ladder it quoted in full, if it
/// did; each quote's price in grid steps, in the order of the side's ids (only the maker
/// moves its orders, so a quote's price stays what its last placement or move made it); and
/// whether every quote was then open for the full quote size. Which quotes changed since,
/// the desk says ([`crate::trading::orders::MakerOrderChanges`], forgotten at each re-quote).
#[derive(Debug, Default)]
pub struct SideQuotes {
    ladder: Option<Ladder>,
    levels: Vec<i64>,
    full: bool,
}

impl SideQuotes {
    /// What the side quotes after a re-quote: the orders `kept` that are still live, in
    /// `ids` and their levels; the ladder when every wanted level holds one, and whether
    /// each of the orders read holds the whole quote `size`.
    fn record(
        &mut self,
        desk: &Desk,
        (ids, kept): (&mut Vec<OrderId>, &mut Vec<Kept>),
        wanted: Ladder,
        size: Decimal,
    ) {
        let mut full = true;
        kept.retain(|&Kept { id, read, .. }| {
            if !read {
                return true;
            }
            match desk.live_order(id) {
                Some(o) => {
                    full &= o.remaining() == size;
                    true
                }
                None => false,
            }
        });
        ids.clear();
        self.levels.clear();
        for k in kept.iter() {
            ids.push(k.id);
            self.levels.push(k.steps);
        }
        self.ladder = (ids.len() == wanted.len).then_some(wanted);
        self.full = full;
    }

    /// The quotes' prices in grid steps, read from the orders when not known (after a
    /// restore). A price off the grid (it cannot be: the maker places on it) reads as no
    /// level at all.
    fn steps(&mut self, desk: &Desk, grid: Decimal, ids: &[OrderId]) -> &[i64] {
        if self.levels.len() != ids.len() {
            self.levels = ids
                .iter()
                .map(|&id| {
                    // An ended quote holds no level (its record may be gone).
                    let Some(o) = desk.live_order(id) else {
                        return i64::MIN;
                    };
                    let price = o.limit_price.expect("quotes are limit orders");
                    let steps = whole_units(price, grid).and_then(|s| i64::try_from(s).ok());
                    steps.unwrap_or(i64::MIN)
                })
                .collect();
        }
        &self.levels
    }

    /// Whether every quote is still open for the full quote size: where the last re-quote
    /// left them so, only those changed since are read.
    fn intact(&self, desk: &Desk, quoting: Quoting<'_>, (side, ids): (Side, &[OrderId])) -> bool {
        let read = self
            .named_changes(desk, quoting.market, side)
            .unwrap_or(ids);
        intact(desk, quoting.sim, read)
    }

    /// The quotes changed since the last re-quote, where the desk names them and that
    /// re-quote left every quote full; `None` when any quote may have changed.
    fn named_changes<'d>(
        &self,
        desk: &'d Desk,
        market: MarketId,
        side: Side,
    ) -> Option<&'d [OrderId]> {
        desk.maker_changed(market, side).filter(|_| self.full)
    }
}

/// The sides in the order of a market's quotes: bids, then asks.
pub(super) const SIDES: [Side; 2] = [Side::Buy, Side::Sell];

/// The ladder a side wants now: none of its levels when quoting would grow the maker's
/// inventory past its maximum.
fn wanted(desk: &Desk, Quoting { market, sim, .. }: Quoting<'_>, ladder: Ladder) -> Ladder {
    let position = desk.position_size(MARKET_MAKER, market);
    let grows = match ladder.bid {
        true => position >= sim.max_inventory,
        false => -position >= sim.max_inventory,
    };
    match grows {
        true => Ladder { len: 0, ..ladder },
        false => ladder,
    }
}

/// Whether every order of `ids` is still open for the full quote size: nothing filled,
/// ended or moved it since the re-quote that left it (only the maker moves its orders).
fn intact(desk: &Desk, sim: &InstrumentSimulation, ids: &[OrderId]) -> bool {
    ids.iter().all(|&id| {
        desk.live_order(id)
            .is_some_and(|o| o.remaining() == sim.size)
    })
}

/// A re-quote's working lists, kept between runs for their memory (a re-quote runs for two
/// sides of every market every simulated second): the quotes kept, those to move, which
/// levels are held, and the quotes that changed since the side's last re-quote (where
/// `named`; else any may have). Cleared by each use; never read across runs.
#[derive(Debug, Default)]
pub struct Scratch {
    kept: Vec<Kept>,
    free: Vec<OrderId>,
    held: Vec<bool>,
    changed: Vec<OrderId>,
    named: bool,
}

impl Scratch {
    /// Whether quote `id` is known open and full without reading it: the side's last
    /// re-quote left every quote so and the desk names the quotes changed since, not it.
    fn known(&self, id: OrderId) -> bool {
        self.named && !self.changed.contains(&id)
    }
}

/// A quote a re-quote keeps, on its level in grid steps; `read`: read again once the
/// re-quote is done, as one it moved, placed or topped up (a move may fill it).
#[derive(Debug, Clone, Copy)]
struct Kept {
    id: OrderId,
    steps: i64,
    read: bool,
}

impl Kept {
    fn moved(id: OrderId, steps: i64) -> Self {
        Kept {
            id,
            steps,
            read: true,
        }
    }
}

/// The open quotes of one side already on a level of `wanted` (each topped up to the quote
/// size) with their levels and whether they must be read again (a quote not known to be as
/// the last re-quote left it), the others to move, and which levels are held, into
/// `scratch`. A quote's level is its price in whole grid steps; a second quote on a held
/// level is moved like any other. A quote [`Scratch::known`] open and full is not read.
fn keep_held_levels(
    desk: &mut Desk,
    sim: &InstrumentSimulation,
    wanted: Ladder,
    (ids, levels): (&[OrderId], &[i64]),
    scratch: &mut Scratch,
) {
    scratch.kept.clear();
    scratch.free.clear();
    scratch.held.clear();
    scratch.held.resize(wanted.len, false);
    for (&id, &steps) in ids.iter().zip(levels) {
        let known = scratch.known(id);
        let Scratch {
            kept, free, held, ..
        } = &mut *scratch;
        let short = match known {
            true => None,
            false => {
                let Some(o) = desk.live_order(id) else {
                    continue;
                };
                (o.remaining() != sim.size).then_some(o.filled_amount)
            }
        };
        match wanted.level_of(steps) {
            Some(at) if !held[at] => {
                held[at] = true;
                kept.push(Kept {
                    id,
                    steps,
                    read: !known,
                });
                if let Some(filled) = short {
                    let amend = Amend {
                        amount: Some(filled + sim.size),
                        limit_price: None,
                        trigger_price: None,
                        expire_time: None,
                    };
                    let _ = desk.amend_open(id, &amend);
                }
            }
            _ => free.push(id),
        }
    }
}

/// Cancels an open quote (one left over, or one the desk refused to move).
pub(super) fn cancel(desk: &mut Desk, id: OrderId) {
    let reference = desk.order(id).reference_id.to_string();
    let _ = desk.cancel(MARKET_MAKER, &reference);
}

/// What a market's re-quote is given: the market, its simulation and its price grid.
#[derive(Clone, Copy)]
struct Quoting<'a> {
    market: MarketId,
    sim: &'a InstrumentSimulation,
    grid: Decimal,
}

/// One side of one market: keep the orders on surviving levels (topped up to the quote
/// size), move the others onto the missing levels, cancel what is left over and place what
/// is still missing. A request the desk refuses (a status that forbids it) leaves that level
/// unquoted until the next run. `side` is left saying what the side now quotes.
fn requote(
    desk: &mut Desk,
    next_reference: &mut u64,
    (quoting, ladder): (Quoting<'_>, Ladder),
    (ids, side): (&mut Vec<OrderId>, &mut SideQuotes),
    scratch: &mut Scratch,
) {
    let Quoting { market, sim, grid } = quoting;
    if desk.market(market).1.status == InstrumentStatus::TradeHalt {
        side.ladder = None;
        return; // nothing may be placed or amended: the quotes stand as they are
    }
    // Read after the other side's re-quote, whose fills may have moved the position.
    let wanted = wanted(desk, quoting, ladder);
    let order_side = if ladder.bid { Side::Buy } else { Side::Sell };
    scratch.changed.clear();
    scratch.named = false;
    if let Some(changed) = side.named_changes(desk, market, order_side) {
        scratch.changed.extend_from_slice(changed);
        scratch.named = true;
    }
    keep_held_levels(desk, sim, wanted, (ids, &side.levels), scratch);
    let Scratch {
        kept, free, held, ..
    } = scratch;
    let mut missing = (0..wanted.len)
        .filter(|&k| !held[k])
        .map(|k| wanted.steps(k));
    for &id in free.iter() {
        // An earlier move's matching may have ended it: nothing to move or cancel then, and
        // the level it would have moved to stays unquoted this run.
        let Some(o) = desk.live_order(id) else {
            missing.next();
            continue;
        };
        let to = missing.next();
        let amend = Amend {
            amount: (o.remaining() != sim.size).then_some(o.filled_amount + sim.size),
            limit_price: to.map(|steps| from_units(steps, grid)),
            trigger_price: None,
            expire_time: None,
        };
        let moved = to.is_some() && desk.amend_open(id, &amend).is_ok();
        match (moved, to) {
            (true, Some(steps)) => kept.push(Kept::moved(id, steps)),
            _ => cancel(desk, id),
        }
    }
    for steps in missing {
        *next_reference += 1;
        let entry = OrderEntry {
            amount: Some(sim.size),
            limit_price: Some(from_units(steps, grid)),
            ..OrderEntry::new(order_side, OrderType::Limit, format!("mm-{next_reference}"))
        };
        if let Ok(id) = desk.place(MARKET_MAKER, &sim.symbol, &entry) {
            kept.push(Kept::moved(id, steps));
        }
    }
    side.record(desk, (ids, kept), wanted, sim.size);
    desk.forget_maker_changes(market, order_side);
}
