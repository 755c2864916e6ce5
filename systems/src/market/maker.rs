//! The built-in market maker (D10): an internal account under no broker that quotes a ladder
//! of levels each side of every index, re-quoted each run the ladder moved.
//!
//! Its orders go through the desk like anyone's — same checks, same matching, same fills and
//! ledger — so its positions and PnL count in every invariant. A re-quote keeps every order
//! whose level survives and amends the others in place onto the new levels (same order, new
//! price), so the book and its change stream move by the levels that changed, not by the
//! ladder. It stops quoting the side that would grow its inventory past the maximum, and
//! never takes part in margin or liquidation (it has no broker to answer to).

use bevy_ecs::prelude::{Local, Mut, Res, ResMut, Resource, World};
use perpsim_core::Decimal;
use perpsim_core::decimal::whole_units;
use perpsim_core::entry::{Amend, OrderEntry};
use perpsim_core::instrument::{Asset, InstrumentStatus};
use perpsim_core::order::{OrderType, Side};
use perpsim_core::simulation::{InstrumentSimulation, Ladder, Simulation};
use perpsim_core::time::Timestamp;
use serde::{Deserialize, Serialize};

use crate::money::ledger::{Books, Ledger};
use crate::money::store::WorldAccounts;
use crate::records::ids::OrderId;
use crate::records::market::SimulationSettings;
use crate::records::market::{MARKET_MAKER, NO_BROKER};
use crate::records::money::MovementKind;
use crate::records::venue::{Customer, MarketId};
use crate::registry::Registry;
use crate::rng::EngineRng;
use crate::trading::desk::Desk;

/// The maker's open quotes per market, bids then asks, and its next reference number.
#[derive(Resource, Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MakerState {
    quotes: Vec<[Vec<OrderId>; 2]>,
    next_reference: u64,
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
/// integer arithmetic (this was most of a flash crash's Monte-Carlo).
pub fn quote(
    mut desk: Desk,
    mut state: ResMut<MakerState>,
    settings: Res<SimulationSettings>,
    mut quoted: Local<Vec<[Option<Ladder>; 2]>>,
) {
    let markets = desk.market_count();
    state.quotes.resize_with(markets as usize, Default::default);
    quoted.resize(markets as usize, [None; 2]);
    for market in 0..markets {
        let m = market as usize;
        let sim = &settings.0.instruments[m];
        let (spec, now) = desk.market(market);
        let (grid, index) = (sim.grid(spec), now.index_price);
        let quoting = Quoting { market, sim, grid };
        let ladders = [true, false].map(|bid| sim.ladder(index, bid, grid));
        let wanted = |i: usize| wanted(&desk, quoting, ladders[i]);
        let standing =
            |i: usize| quoted[m][i] == Some(wanted(i)) && intact(&desk, sim, &state.quotes[m][i]);
        if standing(0) && standing(1) {
            continue;
        }
        let best_bid = state.quotes[m][0]
            .iter()
            .filter_map(|&id| desk.order(id).limit_price)
            .max();
        let rising = best_bid.is_some_and(|b| ladders[0].best(grid).is_some_and(|n| b < n));
        let sides = match rising {
            true => [1, 0],
            false => [0, 1],
        };
        for i in sides {
            let mut ids = std::mem::take(&mut state.quotes[m][i]);
            let next_reference = &mut state.next_reference;
            quoted[m][i] = requote(&mut desk, next_reference, quoting, ladders[i], &mut ids);
            state.quotes[m][i] = ids;
        }
    }
    desk.flush();
}

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

/// Whether every quote of a side is still open for the full quote size: nothing filled,
/// ended or moved it since the re-quote that left it (only the maker moves its orders).
fn intact(desk: &Desk, sim: &InstrumentSimulation, ids: &[OrderId]) -> bool {
    ids.iter().all(|&id| {
        let o = desk.order(id);
        o.is_open() && o.remaining() == sim.size
    })
}

/// The open quotes of one side already on a level of `wanted` (each topped up to the quote
/// size), the others to move, and which levels are held. A quote's level is its price in
/// whole grid steps; a second quote on a held level is moved like any other.
fn keep_held_levels(
    desk: &mut Desk,
    Quoting { sim, grid, .. }: Quoting<'_>,
    wanted: Ladder,
    ids: &[OrderId],
) -> (Vec<OrderId>, Vec<OrderId>, Vec<bool>) {
    let mut held = vec![false; wanted.len];
    let level = |price: Decimal| {
        let steps = whole_units(price, grid).and_then(|s| i64::try_from(s).ok());
        steps.and_then(|s| wanted.level_of(s))
    };
    let (mut kept, mut free) = (Vec::with_capacity(ids.len()), Vec::new());
    for &id in ids {
        let o = desk.order(id);
        if !o.is_open() {
            continue;
        }
        match level(o.limit_price.expect("quotes are limit orders")) {
            Some(at) if !held[at] => {
                held[at] = true;
                kept.push(id);
                if o.remaining() != sim.size {
                    let amend = Amend {
                        amount: Some(o.filled_amount + sim.size),
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
    (kept, free, held)
}

/// Cancels an open quote (one left over, or one the desk refused to move).
fn cancel(desk: &mut Desk, id: OrderId) {
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
/// unquoted until the next run. The ladder now quoted in full, if every level holds a quote.
fn requote(
    desk: &mut Desk,
    next_reference: &mut u64,
    quoting: Quoting<'_>,
    ladder: Ladder,
    ids: &mut Vec<OrderId>,
) -> Option<Ladder> {
    let Quoting { market, sim, grid } = quoting;
    if desk.market(market).1.status == InstrumentStatus::TradeHalt {
        return None; // nothing may be placed or amended: the quotes stand as they are
    }
    // Read after the other side's re-quote, whose fills may have moved the position.
    let wanted = wanted(desk, quoting, ladder);
    let side = if ladder.bid { Side::Buy } else { Side::Sell };
    let (mut kept, free, held) = keep_held_levels(desk, quoting, wanted, ids);
    let mut missing = (0..wanted.len)
        .filter(|&k| !held[k])
        .map(|k| wanted.price(k, grid));
    for id in free {
        let o = desk.order(id);
        // An earlier move's matching may have ended it: nothing to move or cancel then.
        let open = o.is_open();
        let amend = Amend {
            amount: (o.remaining() != sim.size).then_some(o.filled_amount + sim.size),
            limit_price: missing.next(),
            trigger_price: None,
            expire_time: None,
        };
        let moved = match amend.limit_price {
            Some(_) if open => desk.amend_open(id, &amend).is_ok(),
            _ => false,
        };
        match moved {
            true => kept.push(id),
            false if open => cancel(desk, id),
            false => {}
        }
    }
    for price in missing {
        *next_reference += 1;
        let entry = OrderEntry {
            amount: Some(sim.size),
            limit_price: Some(price),
            ..OrderEntry::new(side, OrderType::Limit, format!("mm-{next_reference}"))
        };
        if let Ok(id) = desk.place(MARKET_MAKER, &sim.symbol, &entry) {
            kept.push(id);
        }
    }
    kept.retain(|&id| desk.order(id).is_open());
    *ids = kept;
    (ids.len() == wanted.len).then_some(wanted)
}
