//! perpsim-systems: the engine.
//!
//! A bevy_ecs `World` holds every piece of venue state as components and resources; one
//! `Schedule` of named system sets (see [`sets`]) runs in a fixed order, single-threaded.
//! A folder per concern, each registering its systems and resources like a bevy plugin:
//! [`engine`] (the tick, ingest, snapshots), [`trading`] (books, orders, matching, fills),
//! [`money`] (the ledger and transfers), [`positions`] (open positions and their valuation),
//! [`simulation`] (the living market: price feed and market maker), [`settlement`] (daily
//! settlement and funding), [`publish`] (the read view), [`audit`] (the invariants, while the
//! engine audits).
//! The engine is deterministic: time arrives with each tick, randomness comes from the seeded
//! [`perpsim_core::rng::SimRng`], and every collection whose order reaches output is ordered
//! by a stable id. It does no I/O: the host (the `api` crate) feeds it commands, journals them
//! through `storage`, and serves reads from the [`ReadView`] it publishes.

pub mod audit;
pub mod clock;
pub mod command;
pub mod dirty;
pub mod engine;
pub mod faults;
pub mod money;
pub mod positions;
pub mod publish;
pub mod records;
pub mod registry;
pub mod risk;
pub mod rng;
pub mod sets;
pub mod settlement;
pub mod simulation;
pub mod trading;

#[cfg(test)]
mod testkit;

pub use command::{Answers, Command, CommandResult, EngineEvent, Genesis, Outcome, Submit};
pub use engine::observe::{AccountFigures, Closing, ClosingMarket, MarketPrices};
pub use engine::snapshot::{EngineState, StateHash};
pub use engine::{Engine, TickOutput};
pub use publish::view::ReadView;
pub use trading::ended::EndedRun;
