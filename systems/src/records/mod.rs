//! The engine's vocabulary: the records every concern shares, at the bottom of `systems`.
//!
//! Orders, trades, ledger movements and accounts, positions, brokers, customers and
//! instruments, funding, margin-state and notice records, the clock and its timed events.
//! Concerns own the behaviour (matching, booking, valuing, judging); these are the words
//! they, the commands, the read view and the channels are written in. Plain data with the
//! pure functions that read it; nothing here imports a concern.

pub mod audit;
pub mod clock;
pub mod depth;
pub mod fault_plan;
pub mod funding;
pub mod history;
pub mod ids;
pub mod log;
pub mod lookup;
pub mod money;
pub mod order;
pub mod periodic;
pub mod position;
pub mod risk;
pub mod simulation;
pub mod tape;
pub mod trade;
pub mod venue;
