//! `GET /v1/instruments` (interface §4.1).

use std::sync::Arc;

use perpsim_core::Error;
use perpsim_core::filter::Pattern;
use poem_openapi::OpenApi;
use poem_openapi::param::Query;
use poem_openapi::payload::Json;

use super::{Signed, Tag};
use crate::errors::ApiError;
use crate::state::AppState;
use crate::types::{InstrumentRecord, InstrumentStatusApi};

pub struct InstrumentsApi;

fn pattern(field: &str, value: Option<String>) -> Result<Option<Pattern>, Error> {
    value
        .map(|v| Pattern::parse(&v).map_err(|why| Error::validation(format!("{field} {why}"))))
        .transpose()
}

#[OpenApi(tag = "Tag::MarketData")]
impl InstrumentsApi {
    /// List instruments.
    ///
    /// Filters `symbol`, `underlying` and `quote_currency` take `|`-separated literals; `*`
    /// matches any sequence (including empty); matching is case-insensitive and anchored to
    /// the whole value. A known symbol gives a one-record list. Sorted by symbol.
    #[oai(
        path = "/instruments",
        method = "get",
        operation_id = "listInstruments"
    )]
    async fn list(
        &self,
        state: poem::web::Data<&Arc<AppState>>,
        _auth: Signed,
        /// e.g. `BTC-*|ETH-USDC-PERP`
        symbol: Query<Option<String>>,
        /// e.g. `btc|eth`
        underlying: Query<Option<String>>,
        /// e.g. `USD*`
        quote_currency: Query<Option<String>>,
        status: Query<Option<InstrumentStatusApi>>,
    ) -> Result<Json<Vec<InstrumentRecord>>, ApiError> {
        let symbol = pattern("symbol", symbol.0)?;
        let underlying = pattern("underlying", underlying.0)?;
        let quote = pattern("quote_currency", quote_currency.0)?;
        let matches = |p: &Option<Pattern>, v: &str| p.as_ref().is_none_or(|p| p.matches(v));
        let view = state.engine.view();
        let records = view
            .instruments
            .values()
            .filter(|i| matches(&symbol, &i.spec.symbol))
            .filter(|i| matches(&underlying, &i.spec.underlying))
            .filter(|i| matches(&quote, &i.spec.quote_currency))
            .filter(|i| status.0.is_none_or(|s| i.status == s.into()))
            .map(InstrumentRecord::from)
            .collect();
        Ok(Json(records))
    }
}
