//! Simulation time as the engine reports it, and the timed events it schedules.

use perpsim_core::clock::ClockMode;
use perpsim_core::time::Timestamp;
use serde::{Deserialize, Serialize};

use crate::records::ids::{MovementSeq, OrderId};

/// The clock as the read view and the clock commands report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockView {
    pub mode: ClockMode,
    pub now: Timestamp,
}

/// A timed event. Capabilities add variants as they land (transfer completion, GTD expiry,
/// daily settlement, depreciation evaluation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScheduledEvent {
    /// The whole hour at which funding settles (interface §1); re-arms itself for the next.
    FundingHour,
    /// A pending deposit or withdrawal reaches created_at + transfer delay (D7); carries the
    /// movement's ledger sequence number, so completion needs no lookup.
    TransferDue(MovementSeq),
    /// A GTD order reaches its expire_time (D5); carries the order id. An amend that moves
    /// the time schedules anew, and a stale event finds the order's time unchanged-or-later.
    OrderExpiry(OrderId),
    /// One step of the random-walk price feed, every simulated second (D10).
    PriceStep,
    /// A premium sample for the preliminary funding rate, every whole minute (D7).
    FundingSample,
    /// Daily settlement at 00:00 UTC (D6).
    DailySettlement,
    /// A depreciation evaluation, every notice interval of simulation time (D9).
    DepreciationCheck,
}
