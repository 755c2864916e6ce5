//! The admin family: the venue's settings an operator changes (funding, transfers, bounds,
//! the fault plan, a recorded book and its trades), applied as IngestSystems takes them.

use perpsim_core::Decimal;
use perpsim_core::limits::VenueLimits;
use serde::{Deserialize, Serialize};

use crate::records::fault_plan::FaultPlan;

/// D3: the preliminary funding rate of the running interval, overriding the premium
/// samples until the interval settles.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetFundingRate {
    pub symbol: String,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub rate: Decimal,
}

/// Whether deposits and withdrawals are taken (§2.1 TRANSFERS_UNAVAILABLE).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetTransfersAvailable {
    pub available: bool,
}

/// D4: the bounds on open orders per customer and customers per broker, from this command
/// on (a start with other `--max-open-orders` or `--max-customers`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetLimits {
    pub limits: VenueLimits,
}

/// Issue 25: the fault plan an integrator rehearses against, or none (faults off).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetFaults {
    pub plan: Option<FaultPlan>,
}

/// Levels a side of a recorded book holds at most: the depth channel's 50.
pub const MAX_BOOK_LEVELS: usize = 50;

/// Issue 39 (D11): the book a recording shows for an instrument, which the market maker
/// quotes from then on instead of its ladder (`simulation::recorded`): best first — bids
/// descending, asks ascending —, at most [`MAX_BOOK_LEVELS`] a side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetRecordedBook {
    pub symbol: String,
    pub bids: Vec<BookLevel>,
    pub asks: Vec<BookLevel>,
}

/// Issue 39 (D11): a trade a recording printed for an instrument, its aggressor on `side`:
/// it fills the customers' resting orders it reaches by the queue model
/// (`trading::desk::recorded`), against the market maker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrintRecordedTrade {
    pub symbol: String,
    pub side: perpsim_core::order::Side,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub price: Decimal,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub amount: Decimal,
}

/// One price level of a recorded book: its price and the amount resting there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BookLevel {
    #[serde(with = "perpsim_core::decimal::bin")]
    pub price: Decimal,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub amount: Decimal,
}

#[derive(Debug)]
pub enum AdminCommand {
    SetFundingRate(SetFundingRate),
    SetTransfersAvailable(SetTransfersAvailable),
    SetLimits(SetLimits),
    SetFaults(SetFaults),
    SetRecordedBook(SetRecordedBook),
    PrintRecordedTrade(PrintRecordedTrade),
}
