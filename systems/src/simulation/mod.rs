//! The living market (D1, D10): the random-walk price feed (`feed`, IngestSystems) and the
//! built-in market maker (`maker`, MatchSystems, after the run's order requests, so every
//! run ends with the whole ladder quoted; when its own amend fills, the top-up waits for the
//! next run, which a restore's own run is not: see `Restoring`).
//!
//! What the market does is fixed at genesis ([`SimulationSettings`], from the journal's
//! head), so a replay runs the same market. The feed draws from its own generator, seeded
//! from the engine's seed: the price path depends on the seed alone, never on how many ids
//! the trading drew.

use bevy_ecs::prelude::{IntoScheduleConfigs, Res, Schedule, World};
use perpsim_core::simulation::Simulation;
use serde::{Deserialize, Serialize};

use crate::records::clock::ScheduledEvent;
use crate::records::simulation::{Restoring, SimulationSettings};
use crate::sets::{PriceSteps, Quoting, RecordedMarket};

pub mod feed;
pub mod maker;
pub mod recorded;
#[cfg(test)]
mod recorded_tests;
#[cfg(test)]
mod tests;

/// What the market keeps between runs (snapshots hold it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarketState {
    pub feed: feed::FeedState,
    pub maker: maker::MakerState,
    /// The recorded books the maker quotes (issue 39).
    pub recorded: recorded::RecordedBooks,
}

pub(crate) fn plugin(world: &mut World, schedule: &mut Schedule) {
    schedule.add_systems(
        feed::step_prices
            .run_if(crate::clock::due(ScheduledEvent::PriceStep))
            .in_set(PriceSteps),
    );
    world.init_resource::<recorded::QuotedBooks>();
    schedule.add_systems(
        (
            recorded::print_trades.run_if(recorded::trades_taken),
            recorded::quote_books
                .run_if(maker_on)
                .run_if(recorded::books_set),
        )
            .chain()
            .in_set(RecordedMarket),
    );
    schedule.add_systems(maker::quote.in_set(Quoting).run_if(maker_on));
}

/// The maker quotes when it is on, except in a restore's own run (see [`Restoring`]).
fn maker_on(settings: Res<SimulationSettings>, restoring: Option<Res<Restoring>>) -> bool {
    settings.0.market_maker && !restoring.is_some_and(|r| r.0)
}

pub(crate) fn insert(world: &mut World, simulation: Simulation, state: MarketState) {
    world.insert_resource(SimulationSettings(simulation));
    world.insert_resource(state.feed);
    world.insert_resource(state.maker);
    world.insert_resource(state.recorded);
}

pub(crate) fn extract(world: &World) -> MarketState {
    MarketState {
        feed: world.resource::<feed::FeedState>().clone(),
        maker: world.resource::<maker::MakerState>().clone(),
        recorded: world.resource::<recorded::RecordedBooks>().clone(),
    }
}
