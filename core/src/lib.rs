//! perpsim-core: the pure domain of the simulator.
//!
//! Everything here is a plain value or a pure function: decimals and their string forms, ids,
//! simulation time, the seeded RNG, instruments, wildcard filters and the error catalogue.
//! This crate does no I/O, starts no threads, reads no clock and draws no OS randomness
//! (`clippy.toml` beside this file forbids it mechanically). It knows nothing of HTTP, redb
//! or bevy.

pub mod clock;
pub mod decimal;
pub mod entry;
pub mod error;
pub mod filter;
pub mod fixed;
pub mod ids;
pub mod instrument;
pub mod latency;
pub mod limits;
pub mod money;
pub mod order;
pub mod risk;
pub mod rng;
pub mod simulation;
pub mod time;

pub use error::{Error, ErrorCode};
pub use rust_decimal::{Decimal, RoundingStrategy};
pub use uuid::Uuid;
