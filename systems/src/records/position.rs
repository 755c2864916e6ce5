//! The net position record (D6), one per (customer, market).

use bevy_ecs::prelude::Component;
use perpsim_core::Decimal;
use perpsim_core::ids::{BrokerCode, CustomerCode, PositionCode};
use perpsim_core::order::PositionSide;
use perpsim_core::time::Timestamp;
use serde::{Deserialize, Serialize};

use crate::records::venue::MarketId;

/// A position's key: its customer and market (one net position per pair, D6).
pub type PositionKey = (CustomerCode, MarketId);

/// A net position (D6): `size` is signed (long positive); `amount` on the wire is |size|.
/// Written by fills and profile changes only.
#[derive(Component, Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    pub code: PositionCode,
    pub customer: CustomerCode,
    pub broker: BrokerCode,
    pub market: MarketId,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub size: Decimal,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub entry_price: Decimal,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub avg_fill_price: Decimal,
    /// Initial margin locked: |size| × entry_price × initial margin (§2.5).
    #[serde(with = "perpsim_core::decimal::bin")]
    pub margin: Decimal,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// The highest depreciation threshold already noticed for this position's baseline, in
    /// tens of percent (2 = the 20 % notice); 0 before any (§3.3). Fills reset it when they
    /// start a new baseline (an increase, a flip, a reopen); the depreciation check raises it.
    pub noticed: u8,
}

impl Position {
    pub fn side(&self) -> PositionSide {
        if self.size.is_sign_negative() {
            PositionSide::Short
        } else {
            PositionSide::Long
        }
    }

    /// Unrealised PnL at `mark`, at the ledger's 10 decimals.
    pub fn unrealised_pnl(&self, mark: Decimal) -> Decimal {
        unrealised_pnl(self.size, self.entry_price, mark)
    }
}

/// The unrealised PnL of `size` entered at `entry_price`, at `mark`, rounded for the ledger.
pub fn unrealised_pnl(size: Decimal, entry_price: Decimal, mark: Decimal) -> Decimal {
    perpsim_core::decimal::round_ledger_product(&[size, mark - entry_price])
}

/// The margin a position locks once settled at `mark` (D6), if settling changes it: its
/// entry becomes the mark, so a position already entered at the mark with that margin locked
/// has nothing to settle (its unrealised PnL is zero).
pub fn settled_margin(
    size: Decimal,
    entry_price: Decimal,
    margin: Decimal,
    mark: Decimal,
    initial: Decimal,
) -> Option<Decimal> {
    let settled = locked_margin(size, mark, initial);
    (entry_price != mark || settled != margin).then_some(settled)
}

/// The initial margin `size` locks at `price`, rounded for the ledger: |size| × price ×
/// `initial`. A fill locks it at the entry price, midnight's settlement at the mark.
pub fn locked_margin(size: Decimal, price: Decimal, initial: Decimal) -> Decimal {
    perpsim_core::decimal::round_ledger_product(&[size.abs(), price, initial])
}
