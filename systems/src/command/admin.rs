//! The admin family: the venue's settings an operator changes (funding, transfers, bounds,
//! the fault plan), applied as IngestSystems takes them.

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

#[derive(Debug)]
pub enum AdminCommand {
    SetFundingRate(SetFundingRate),
    SetTransfersAvailable(SetTransfersAvailable),
    SetLimits(SetLimits),
    SetFaults(SetFaults),
}
