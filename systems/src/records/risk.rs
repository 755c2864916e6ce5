//! Risk's records: margin state changes (the `liquidations` channel, §6 rules 4–5) and
//! position depreciation notices (§3.3).

use perpsim_core::Decimal;
use perpsim_core::ids::{BrokerCode, CustomerCode, NotificationCode};
use perpsim_core::instrument::Asset;
use perpsim_core::risk::MarginState;
use perpsim_core::time::Timestamp;
use serde::{Deserialize, Serialize};

use crate::records::ids::{NoticeSeq, RiskSeq};

use crate::records::venue::MarketId;

/// One change of an account's margin state: the record the `liquidations` channel carries
/// (§6 rules 4–5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RiskRecord {
    pub seq: RiskSeq,
    pub customer: CustomerCode,
    pub broker: BrokerCode,
    pub asset: Asset,
    pub state: MarginState,
    /// Null when the state is normal (rule 4).
    #[serde(with = "perpsim_core::decimal::bin_opt")]
    pub margin_deficit: Option<Decimal>,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub leverage_ratio: Decimal,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub margin_ratio: Decimal,
    pub time: Timestamp,
}

/// A `position_depreciation` notice: what was evaluated; the derived values (initial and
/// current value, the percentage, the currency) come from these by
/// [`perpsim_core::risk::Depreciation`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notification {
    pub seq: NoticeSeq,
    pub code: NotificationCode,
    pub customer: CustomerCode,
    pub broker: BrokerCode,
    pub created_at: Timestamp,
    pub market: MarketId,
    /// Signed (long positive).
    #[serde(with = "perpsim_core::decimal::bin")]
    pub size: Decimal,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub avg_fill_price: Decimal,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub mark_price: Decimal,
    pub mark_time: Timestamp,
    /// 10, 20, 30, ...
    pub threshold_pct: u32,
}
