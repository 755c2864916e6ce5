//! Trade records (one per side of a fill, D5) and public fills (D8 PublicTrade).

use perpsim_core::Decimal;
use perpsim_core::ids::{BrokerCode, CustomerCode, FillCode, PositionCode, TradeCode};
use perpsim_core::order::{ReferenceId, Side};
use perpsim_core::time::Timestamp;
use serde::{Deserialize, Serialize};

use crate::records::ids::{FillSeq, MovementSeq, TradeSeq};

use crate::records::money::MovementKind;
use crate::records::venue::MarketId;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TradeKind {
    Trade,
    Liquidation,
    AutoDeleveraging,
}

impl TradeKind {
    /// The ledger movement a fill of this kind books (§2.1: the trade family).
    pub fn movement(self) -> MovementKind {
        match self {
            TradeKind::Trade => MovementKind::Trade,
            TradeKind::Liquidation => MovementKind::Liquidation,
            TradeKind::AutoDeleveraging => MovementKind::AutoDeleveraging,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TradeKind::Trade => "trade",
            TradeKind::Liquidation => "liquidation",
            TradeKind::AutoDeleveraging => "auto_deleveraging",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Liquidity {
    Maker,
    Taker,
}

impl Liquidity {
    pub fn as_str(self) -> &'static str {
        match self {
            Liquidity::Maker => "maker",
            Liquidity::Taker => "taker",
        }
    }
}

/// One side's record of a fill (D5 trade record).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TradeRecord {
    pub seq: TradeSeq,
    pub code: TradeCode,
    pub fill: FillSeq,
    pub customer: CustomerCode,
    pub broker: BrokerCode,
    pub kind: TradeKind,
    pub market: MarketId,
    pub side: Side,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub price: Decimal,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub amount: Decimal,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub fee: Decimal,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub realised_pnl: Decimal,
    pub reference_id: Option<ReferenceId>,
    pub liquidity: Liquidity,
    pub position_code: PositionCode,
    pub timestamp: Timestamp,
    /// The ledger row that booked it (each fill appears once in the ledger, §2.9).
    pub movement: MovementSeq,
}

/// A fill as the market sees it (D8 PublicTrade).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublicFill {
    pub seq: FillSeq,
    pub code: FillCode,
    pub market: MarketId,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub price: Decimal,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub amount: Decimal,
    pub taker_side: Side,
    pub timestamp: Timestamp,
}
