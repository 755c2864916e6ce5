//! perpsim-systems: the engine.
//!
//! A bevy_ecs `World` holds every piece of venue state as components and resources; one
//! `Schedule` of named system sets (see [`sets`]) runs in a fixed order, single-threaded.
//! The engine is deterministic: time arrives with each tick, randomness comes from the seeded
//! [`perpsim_core::rng::SimRng`], and every collection whose order reaches output is ordered
//! by a stable id. It does no I/O: the host (the `api` crate) feeds it commands, journals them
//! through `storage`, and serves reads from the [`view::ReadView`] it publishes.

pub mod accounts;
pub mod book;
pub mod clock;
pub mod command;
pub mod desk;
pub mod dirty;
pub mod engine;
pub mod exchange;
pub mod fills;
pub mod ingest;
pub mod ledger;
pub mod market_view;
pub mod positions;
pub mod refs;
pub mod registry;
pub mod sets;
pub mod snapshot;
pub mod view;

pub use command::{Command, CommandResult, Genesis, Outcome};
pub use engine::{Engine, EngineEvent, TickOutput};
pub use snapshot::{EngineState, StateHash};
pub use view::ReadView;

#[cfg(test)]
mod ledger_tests;
#[cfg(test)]
mod positions_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod trading_tests;
