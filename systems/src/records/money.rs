//! Money's words: accounts by (owner, asset), their balances, and the ledger's movements
//! with their kinds and statuses (interface §2.5, §2.9; D7).

use std::sync::Arc;

use bevy_ecs::prelude::Component;
use perpsim_core::Decimal;
use perpsim_core::ids::{BrokerCode, CustomerCode, MovementCode, TradeCode};
use perpsim_core::instrument::Asset;
use perpsim_core::order::ReferenceId;
use perpsim_core::time::Timestamp;
use serde::{Deserialize, Serialize};

use crate::records::ids::MovementSeq;

/// The venue's own accounts, the other side of every customer movement but transfers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum VenueAccount {
    /// Trading fees collected (and rebates paid).
    Fees,
    /// Realised PnL, funding and settlement between counterparties.
    Clearing,
    /// Covers negative balances left by liquidations.
    Insurance,
}

impl VenueAccount {
    pub const ALL: [VenueAccount; 3] = [
        VenueAccount::Fees,
        VenueAccount::Clearing,
        VenueAccount::Insurance,
    ];
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Owner {
    Venue(VenueAccount),
    Customer(CustomerCode),
}

/// An account: its owner and the asset it holds. Ordered by owner, then asset (the
/// snapshot's and every index's order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AccountId {
    pub owner: Owner,
    pub asset: Asset,
}

impl AccountId {
    pub fn customer(code: CustomerCode, asset: Asset) -> Self {
        AccountId {
            owner: Owner::Customer(code),
            asset,
        }
    }

    pub fn venue(account: VenueAccount, asset: Asset) -> Self {
        AccountId {
            owner: Owner::Venue(account),
            asset,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum MovementKind {
    Deposit,
    Withdrawal,
    Trade,
    Liquidation,
    AutoDeleveraging,
    Settlement,
    Funding,
}

impl MovementKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MovementKind::Deposit => "deposit",
            MovementKind::Withdrawal => "withdrawal",
            MovementKind::Trade => "trade",
            MovementKind::Liquidation => "liquidation",
            MovementKind::AutoDeleveraging => "auto_deleveraging",
            MovementKind::Settlement => "settlement",
            MovementKind::Funding => "funding",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum MovementStatus {
    Pending,
    Completed,
    Cancelled,
}

impl MovementStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            MovementStatus::Pending => "pending",
            MovementStatus::Completed => "completed",
            MovementStatus::Cancelled => "cancelled",
        }
    }
}

/// Balance of one account, a component of its account entity. `available = total − locked −
/// pending` (D7) is derived, never stored, so it cannot disagree.
#[derive(Component, Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Balance {
    #[serde(with = "perpsim_core::decimal::bin")]
    pub total: Decimal,
    /// Initial margin reserved by open positions.
    #[serde(with = "perpsim_core::decimal::bin")]
    pub locked: Decimal,
    /// Pending withdrawals.
    #[serde(with = "perpsim_core::decimal::bin")]
    pub pending: Decimal,
    /// When the balance last changed (simulation time).
    pub as_of: Timestamp,
}

impl Balance {
    pub fn available(&self) -> Decimal {
        self.total - self.locked - self.pending
    }
}

/// One ledger movement, the row behind a transaction and a balance-changes message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Movement {
    /// Position in the ledger: creation order, the sort key of transaction lists.
    pub seq: MovementSeq,
    pub code: MovementCode,
    pub customer: CustomerCode,
    pub broker: BrokerCode,
    pub kind: MovementKind,
    pub status: MovementStatus,
    pub asset: Asset,
    /// Signed: positive credits the customer. Rounded once, at booking.
    #[serde(with = "perpsim_core::decimal::bin")]
    pub amount: Decimal,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// The customer's total after the movement, once completed.
    #[serde(with = "perpsim_core::decimal::bin_opt")]
    pub balance_after: Option<Decimal>,
    /// What a trade-family row carries besides the amount (§2.9); boxed, as most rows are
    /// transfers, funding or settlement.
    pub trade: Option<Box<TradeInfo>>,
    /// What a settlement or funding row carries besides the amount (§2.9): one shared by
    /// every row of a market's pass, which all name the same instrument, mark and rate.
    pub periodic: Option<Arc<PeriodicInfo>>,
}

/// The instrument, mark and rate behind a settlement or funding movement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeriodicInfo {
    pub symbol: Arc<str>,
    /// The mark price the amount was computed at.
    #[serde(with = "perpsim_core::decimal::bin")]
    pub mark_price: Decimal,
    /// The funding rate, on funding rows.
    #[serde(with = "perpsim_core::decimal::bin_opt")]
    pub funding_rate: Option<Decimal>,
}

/// The fill behind a trade-family movement: `amount = realised_pnl − fee` exactly (D7).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TradeInfo {
    #[serde(with = "perpsim_core::decimal::bin")]
    pub realised_pnl: Decimal,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub fee: Decimal,
    pub reference_id: Option<ReferenceId>,
    /// The instrument: of the fill, or of the liquidation an insurance cover closes.
    pub symbol: Arc<str>,
    /// The fill's trade; none on an insurance cover (a liquidation row no fill made).
    pub trade_code: Option<TradeCode>,
}

/// Completed flows across the venue's boundary, per asset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flows {
    #[serde(with = "perpsim_core::decimal::bin")]
    pub deposited: Decimal,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub withdrawn: Decimal,
    /// The venue's own capital put in at genesis (the insurance fund).
    #[serde(with = "perpsim_core::decimal::bin")]
    pub capital: Decimal,
}

impl Flows {
    /// What all accounts of the asset must sum to.
    pub fn net(&self) -> Decimal {
        self.deposited + self.capital - self.withdrawn
    }
}
