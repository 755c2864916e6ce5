//! Funding's records: an hour's settlement of one instrument and a market's funding as the
//! read side shows it, with the rate rules they are stated in (D7).

use perpsim_core::Decimal;
use perpsim_core::time::{HOUR_MS, Timestamp};
use serde::{Deserialize, Serialize};

use crate::records::ids::FundingSeq;
use crate::records::venue::MarketId;

/// The clamp of a sampled rate: ±0.5 % (D7).
pub const RATE_CLAMP: Decimal = Decimal::from_parts(5, 0, 0, false, 3);

/// Decimals of a sampled preliminary rate (a set one keeps its own, up to [`MAX_RATE_DECIMALS`]).
pub const RATE_DECIMALS: u32 = 8;

/// Most decimals a rate set through the admin API may carry.
pub const MAX_RATE_DECIMALS: u32 = 10;

/// One hourly settlement of one instrument, as `GET /v1/funding_rates` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FundingRecord {
    pub seq: FundingSeq,
    pub market: MarketId,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub rate: Decimal,
    pub time: Timestamp,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub mark_price: Decimal,
}

/// A market's funding as the read side shows it (tickers, `GET /v1/funding_rates/{symbol}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FundingView {
    pub market: MarketId,
    pub latest: Option<FundingRecord>,
    /// The running interval's preliminary rate: the ticker's `predicted_rate`.
    pub preliminary: Option<Decimal>,
    pub interval_start: Timestamp,
}

impl FundingView {
    pub fn next_funding_time(&self) -> Timestamp {
        self.interval_start.plus_millis(HOUR_MS)
    }
}
