//! The money family: transfers and a customer's account settings (D7), applied as
//! IngestSystems takes them.

use perpsim_core::Decimal;
use perpsim_core::ids::{CustomerCode, MovementCode};
use perpsim_core::instrument::Asset;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TransferKind {
    Deposit,
    Withdrawal,
}

/// A deposit or withdrawal, pending until `delay_ms` of simulation time has passed. The
/// delay travels with the command so a replay schedules exactly what the live run did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestTransfer {
    pub customer: CustomerCode,
    pub kind: TransferKind,
    pub asset: Asset,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub amount: Decimal,
    pub delay_ms: i64,
}

/// Cancels a pending transfer (the admin API).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelTransfer {
    pub code: MovementCode,
}

/// Whether a customer's account is provisioned (the admin API, §2.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetProvisioned {
    pub customer: CustomerCode,
    pub provisioned: bool,
}

/// Fees in basis points for one symbol, or every instrument when `symbol` is None.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetFees {
    pub customer: CustomerCode,
    pub symbol: Option<String>,
    #[serde(with = "perpsim_core::decimal::bin_opt")]
    pub maker_bps: Option<Decimal>,
    #[serde(with = "perpsim_core::decimal::bin_opt")]
    pub taker_bps: Option<Decimal>,
}

#[derive(Debug)]
pub enum MoneyCommand {
    RequestTransfer(RequestTransfer),
    CancelTransfer(CancelTransfer),
    SetProvisioned(SetProvisioned),
    SetFees(SetFees),
}
