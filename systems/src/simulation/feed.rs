//! The random-walk price feed (D10): per instrument, one geometric-Brownian step of the
//! index each simulated second, rounded to the tick. The mark follows the index, keeping any
//! basis the admin API set between them.
//!
//! The price feed draws from its own `SimRng`, seeded from the engine's seed with a stream
//! constant, so the price path is the seed's alone and never depends on how many ids the
//! trading drew; the only floating point is inside `core::simulation::gbm_factor` (libm's
//! `exp`, `log`, `cos`, `sqrt`, whose bits a test pins), and what leaves it is a 12-decimal
//! factor. The walk keeps each market's unrounded level so it cannot stick where a second's
//! move is under half a tick; the index is the level rounded to the tick, and the mark keeps
//! any basis the admin API set.

use bevy_ecs::prelude::{Query, Res, ResMut, Resource};
use perpsim_core::Decimal;
use perpsim_core::rng::SimRng;
use perpsim_core::simulation::{FACTOR_DECIMALS, gbm_factor, round_to_unit};
use serde::{Deserialize, Serialize};

use crate::clock::SimClock;
use crate::records::simulation::SimulationSettings;
use crate::records::venue::{Instrument, InstrumentState, MarketSlot};

/// The feed's own generator and, per market, the walk's level before rounding: a walk that
/// only kept the rounded price would stick wherever one second's move is under half a tick.
#[derive(Resource, Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeedState {
    rng: SimRng,
    /// Indexed by market id.
    levels: Vec<Level>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Level(#[serde(with = "perpsim_core::decimal::bin")] Decimal);

/// Mixed into the engine's seed for the feed's generator: a stream of its own.
const FEED_STREAM: u64 = 0x7072_6963_6566_6565;

impl FeedState {
    pub fn new(seed: u64, start_prices: impl Iterator<Item = Decimal>) -> Self {
        FeedState {
            rng: SimRng::from_seed(seed ^ FEED_STREAM),
            levels: start_prices.map(Level).collect(),
        }
    }
}

/// Pure: one step of a market's index and mark from `level` with `factor`; returns the new
/// level, index and mark. The walk restarts from the index when something else (the admin
/// API) moved it off the level; the mark keeps its distance to the index.
pub fn step(
    level: Decimal,
    index: Decimal,
    mark: Decimal,
    factor: Decimal,
    tick: Decimal,
) -> (Decimal, Decimal, Decimal) {
    let level = match round_to_unit(level, tick).max(tick) == index {
        true => level,
        false => index,
    };
    let level = (level * factor).round_dp(FACTOR_DECIMALS).max(tick);
    let new_index = round_to_unit(level, tick).max(tick);
    let new_mark = (mark + (new_index - index)).max(tick);
    (level, new_index, new_mark)
}

/// IngestSystems, on the second's timer (its run condition): every market steps, in
/// market-id order (the order of the draws).
pub fn step_prices(
    clock: Res<SimClock>,
    settings: Res<SimulationSettings>,
    mut feed: ResMut<FeedState>,
    mut instruments: Query<(&MarketSlot, &Instrument, &mut InstrumentState)>,
) {
    let mut markets: Vec<_> = instruments.iter_mut().collect();
    markets.sort_unstable_by_key(|(slot, _, _)| slot.0);
    for (slot, instrument, mut state) in markets {
        let m = slot.0 as usize;
        let sim = &settings.0.instruments[m];
        debug_assert_eq!(
            sim.symbol, instrument.0.symbol,
            "settings follow market ids"
        );
        let factor = gbm_factor(&mut feed.rng, sim.volatility);
        let (level, index, mark) = step(
            feed.levels[m].0,
            state.index_price,
            state.mark_price,
            factor,
            instrument.0.tick_size,
        );
        feed.levels[m] = Level(level);
        if index != state.index_price || mark != state.mark_price {
            state.index_price = index;
            state.mark_price = mark;
            state.price_time = clock.now;
        }
    }
}
