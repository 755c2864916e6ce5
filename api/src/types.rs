//! API shapes shared by the broker and admin APIs, and conversions from engine views. Engine
//! components never appear in the API; conversions live here, at the edge.

use perpsim_core::decimal;
use perpsim_core::instrument::{FUNDING_INTERVAL, InstrumentStatus};
use perpsim_systems::records::venue::InstrumentView;
use poem_openapi::{Enum, Object};

/// Instrument status (interface §2.11, D8).
#[derive(Enum, Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[oai(rename = "InstrumentStatus", rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum InstrumentStatusApi {
    /// Trading normally.
    Active,
    /// Only limit orders that would rest are accepted; matching is disabled.
    PostOnly,
    /// New orders are rejected.
    TradeHalt,
}

impl From<InstrumentStatusApi> for InstrumentStatus {
    fn from(s: InstrumentStatusApi) -> Self {
        match s {
            InstrumentStatusApi::Active => InstrumentStatus::Active,
            InstrumentStatusApi::PostOnly => InstrumentStatus::PostOnly,
            InstrumentStatusApi::TradeHalt => InstrumentStatus::TradeHalt,
        }
    }
}

impl From<InstrumentStatus> for InstrumentStatusApi {
    fn from(s: InstrumentStatus) -> Self {
        match s {
            InstrumentStatus::Active => InstrumentStatusApi::Active,
            InstrumentStatus::PostOnly => InstrumentStatusApi::PostOnly,
            InstrumentStatus::TradeHalt => InstrumentStatusApi::TradeHalt,
        }
    }
}

/// Instrument type; perpetuals are the only kind (Future and Option were removed).
#[derive(Enum, Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[oai(rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum InstrumentType {
    Perpetual,
}

/// A tradable instrument (interface §2.11, D8).
#[derive(Object, Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[oai(example)]
pub struct InstrumentRecord {
    /// Internal symbol, e.g. BTC-USDC-PERP.
    pub symbol: String,
    pub underlying: String,
    pub quote_currency: String,
    /// Currency the instrument's PnL, fees and margin settle in (USDC or USDT).
    pub settlement_currency: String,
    #[oai(rename = "type")]
    #[serde(rename = "type")]
    pub kind: InstrumentType,
    pub status: InstrumentStatusApi,
    /// Funding settlement interval: `1h` for perpetuals.
    pub funding_interval: String,
    /// Smallest amount increment, decimal string.
    pub lot_size: String,
    /// Smallest price increment, decimal string.
    pub tick_size: String,
    /// Venue's minimum initial margin as a 2-decimal fraction string (0.50 = 50%).
    pub init_margin_req: String,
    /// Venue's maintenance margin as a 2-decimal fraction string.
    pub maint_margin_req: String,
    /// Deprecated: always an empty string; use max_leverage on the margin profile.
    #[oai(deprecated)]
    pub max_leverage: String,
}

impl poem_openapi::types::Example for InstrumentRecord {
    fn example() -> Self {
        InstrumentRecord {
            symbol: "BTC-USDC-PERP".into(),
            underlying: "BTC".into(),
            quote_currency: "USDC".into(),
            settlement_currency: "USDC".into(),
            kind: InstrumentType::Perpetual,
            status: InstrumentStatusApi::Active,
            funding_interval: "1h".into(),
            lot_size: "0.0001".into(),
            tick_size: "0.1".into(),
            init_margin_req: "0.50".into(),
            maint_margin_req: "0.30".into(),
            max_leverage: String::new(),
        }
    }
}

impl From<&InstrumentView> for InstrumentRecord {
    fn from(v: &InstrumentView) -> Self {
        let s = &v.spec;
        InstrumentRecord {
            symbol: s.symbol.clone(),
            underlying: s.underlying.clone(),
            quote_currency: s.quote_currency.clone(),
            settlement_currency: s.settlement.as_str().to_owned(),
            kind: InstrumentType::Perpetual,
            status: v.status.into(),
            funding_interval: FUNDING_INTERVAL.to_owned(),
            lot_size: decimal::format(s.lot_size, 0),
            tick_size: decimal::format(s.tick_size, 0),
            init_margin_req: decimal::format(s.init_margin_req, 2),
            maint_margin_req: decimal::format(s.maint_margin_req, 2),
            max_leverage: String::new(),
        }
    }
}
