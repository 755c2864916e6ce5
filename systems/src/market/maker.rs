//! The built-in market maker (D10): an internal account under no broker that quotes a ladder
//! of levels each side of every index, re-quoted each run the ladder moved.
//!
//! Its orders go through the desk like anyone's — same checks, same matching, same fills and
//! ledger — so its positions and PnL count in every invariant. A re-quote keeps every order
//! whose level survives and amends the others in place onto the new levels (same order, new
//! price), so the book and its change stream move by the levels that changed, not by the
//! ladder. It stops quoting the side that would grow its inventory past the maximum, and
//! never takes part in margin or liquidation (it has no broker to answer to).

use bevy_ecs::prelude::{Mut, Res, ResMut, Resource, World};
use perpsim_core::Decimal;
use perpsim_core::entry::{Amend, OrderEntry};
use perpsim_core::instrument::{Asset, InstrumentStatus};
use perpsim_core::order::{OrderType, Side};
use perpsim_core::simulation::{InstrumentSimulation, Simulation};
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
/// current index (a no-op when nothing moved and nothing filled). The side the index moved
/// towards goes first, so the other side never meets a stale quote of the maker's own.
pub fn quote(mut desk: Desk, mut state: ResMut<MakerState>, settings: Res<SimulationSettings>) {
    let markets = desk.market_count();
    state.quotes.resize_with(markets as usize, Default::default);
    for market in 0..markets {
        let sim = &settings.0.instruments[market as usize];
        let (spec, now) = desk.market(market);
        let grid = sim.grid(spec);
        let new_best_bid = sim.best(now.index_price, true, grid);
        let best_bid = state.quotes[market as usize][0]
            .iter()
            .filter_map(|&id| desk.order(id).limit_price)
            .max();
        let rising = best_bid.is_some_and(|b| new_best_bid.is_some_and(|n| b < n));
        let sides = match rising {
            true => [(1, Side::Sell), (0, Side::Buy)],
            false => [(0, Side::Buy), (1, Side::Sell)],
        };
        for (i, side) in sides {
            let mut ids = std::mem::take(&mut state.quotes[market as usize][i]);
            let quoting = Quoting { market, sim, grid };
            requote(
                &mut desk,
                &mut state.next_reference,
                quoting,
                side,
                &mut ids,
            );
            state.quotes[market as usize][i] = ids;
        }
    }
    desk.flush();
}

/// The open quotes of one side already on a level of `wanted` (each topped up to the quote
/// size), the others to move, and which levels are held. The ladder is strictly monotone
/// (bids falling, asks rising), so a quote's level is found by bisection, not by a scan per
/// quote; a second quote on a held level is moved like any other.
fn keep_held_levels(
    desk: &mut Desk,
    sim: &InstrumentSimulation,
    side: Side,
    ids: &[OrderId],
    wanted: &[Decimal],
) -> (Vec<OrderId>, Vec<OrderId>, Vec<bool>) {
    let mut held = vec![false; wanted.len()];
    let level = |price: &Decimal| match side {
        Side::Buy => wanted.binary_search_by(|p| price.cmp(p)),
        Side::Sell => wanted.binary_search_by(|p| p.cmp(price)),
    };
    let (mut kept, mut free) = (Vec::with_capacity(ids.len()), Vec::new());
    for &id in ids {
        let o = desk.order(id);
        if !o.is_open() {
            continue;
        }
        match level(&o.limit_price.expect("quotes are limit orders")) {
            Ok(at) if !held[at] => {
                held[at] = true;
                kept.push(id);
                if o.remaining() != sim.size {
                    let amend = Amend {
                        amount: Some(o.filled_amount + sim.size),
                        limit_price: None,
                        trigger_price: None,
                        expire_time: None,
                    };
                    let reference = o.reference_id.to_string();
                    let _ = desk.amend(MARKET_MAKER, &reference, &amend);
                }
            }
            _ => free.push(id),
        }
    }
    (kept, free, held)
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
/// unquoted until the next run.
fn requote(
    desk: &mut Desk,
    next_reference: &mut u64,
    Quoting { market, sim, grid }: Quoting<'_>,
    side: Side,
    ids: &mut Vec<OrderId>,
) {
    let (_, state) = desk.market(market);
    if state.status == InstrumentStatus::TradeHalt {
        return; // nothing may be placed or amended: the quotes stand as they are
    }
    let index = state.index_price;
    let position = desk.position_size(MARKET_MAKER, market);
    let grows = match side {
        Side::Buy => position >= sim.max_inventory,
        Side::Sell => -position >= sim.max_inventory,
    };
    let wanted = match grows {
        true => Vec::new(),
        false => sim.ladder(index, side == Side::Buy, grid),
    };
    let (mut kept, free, held) = keep_held_levels(desk, sim, side, ids, &wanted);
    let mut wanted = wanted
        .into_iter()
        .zip(held)
        .filter(|(_, h)| !h)
        .map(|(p, _)| p);
    for id in free {
        let o = desk.order(id);
        let reference = o.reference_id.to_string();
        match wanted.next() {
            Some(price) => {
                let amend = Amend {
                    amount: (o.remaining() != sim.size).then_some(o.filled_amount + sim.size),
                    limit_price: Some(price),
                    trigger_price: None,
                    expire_time: None,
                };
                match desk.amend(MARKET_MAKER, &reference, &amend) {
                    Ok(_) => kept.push(id),
                    Err(_) => {
                        let _ = desk.cancel(MARKET_MAKER, &reference);
                    }
                }
            }
            None => {
                let _ = desk.cancel(MARKET_MAKER, &reference);
            }
        }
    }
    for price in wanted {
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
}
