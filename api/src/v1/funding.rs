//! Funding rates (interface §2.12, §4.1 rules 1–5; D7, D8): the settlement history and each
//! instrument's latest funding.

use std::ops::Bound;
use std::sync::Arc;

use perpsim_core::Error;
use perpsim_core::time::{Timestamp, YEAR_10000_MS};
use perpsim_storage::{Fundings, JournalError};
use perpsim_systems::ReadView;
use perpsim_systems::records::funding::{FundingRecord, FundingView};
use perpsim_systems::records::ids::FundingSeq;
use perpsim_systems::records::venue::MarketId;
use poem::web::Data;
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};

use super::{Signed, Tag, history};
use crate::contract::Nullable;
use crate::errors::ApiError;
use crate::pagination::{self, Keys, PageQuery, PageRequest, ResponseMetadata, Scope};
use crate::state::AppState;
use crate::state::host::history_read_failed;
use crate::wire::{DecimalOut, Time};

/// Decimals every rate shows at least (a rate set with more keeps them).
const RATE_DECIMALS: u32 = 8;

/// One hourly settlement of one instrument.
#[derive(Object, Debug, Clone)]
#[oai(example)]
pub struct FundingRateRecord {
    pub symbol: String,
    /// The rate for the hour (a fraction; 0.0001 = 0.01 %): longs paid shorts
    /// `amount × mark_price × funding_rate` when positive.
    pub funding_rate: DecimalOut,
    /// The settlement instant, on the hour.
    pub funding_time: Time,
    /// The mark price the payments were computed at.
    pub mark_price: DecimalOut,
}

/// An instrument's latest funding (§2.12, D8).
#[derive(Object, Debug, Clone)]
#[oai(example)]
pub struct FundingRateLatest {
    pub symbol: String,
    /// The latest settled rate; before the first settlement, the running interval's
    /// preliminary rate.
    pub funding_rate: DecimalOut,
    /// When the latest settlement happened; before the first, the start of the running
    /// interval.
    pub funding_time: Time,
    /// The mark price of the latest settlement; before the first, the current mark.
    pub mark_price: DecimalOut,
    /// The running interval's preliminary rate: the premium samples' time-weighted mean
    /// clamped to ±0.5 % and rounded to 8 decimals, or the rate the admin API set. Null when
    /// the interval has none yet (right after a settlement, until its first sample).
    pub predicted_rate: Nullable<DecimalOut>,
    /// The next whole hour (UTC), when the running interval settles.
    pub next_funding_time: Time,
}

/// A page of funding settlements, newest first.
#[derive(Object, Debug, Clone)]
#[oai(example)]
pub struct FundingRatePage {
    pub data: Vec<FundingRateRecord>,
    pub response_metadata: ResponseMetadata,
}

fn rate(r: perpsim_core::Decimal) -> DecimalOut {
    DecimalOut::new(r, RATE_DECIMALS)
}

fn record(view: &ReadView, r: &FundingRecord) -> FundingRateRecord {
    let symbol = view.trading.symbol(r.market);
    let pd = view.instruments[symbol].spec.price_decimals();
    FundingRateRecord {
        symbol: symbol.to_owned(),
        funding_rate: rate(r.rate),
        funding_time: r.time.into(),
        mark_price: DecimalOut::new(r.mark_price, pd),
    }
}

/// D8: the latest settlement, else the running interval's preliminary rate, else none (404).
pub fn latest(view: &ReadView, f: &FundingView) -> Option<FundingRateLatest> {
    let symbol = view.trading.symbol(f.market);
    let instrument = &view.instruments[symbol];
    let pd = instrument.spec.price_decimals();
    let (funding_rate, funding_time, mark) = match (&f.latest, f.preliminary) {
        (Some(r), _) => (r.rate, r.time, r.mark_price),
        (None, Some(p)) => (p, f.interval_start, instrument.mark_price),
        (None, None) => return None,
    };
    Some(FundingRateLatest {
        symbol: symbol.to_owned(),
        funding_rate: rate(funding_rate),
        funding_time: funding_time.into(),
        mark_price: DecimalOut::new(mark, pd),
        predicted_rate: f.preliminary.map(rate).into(),
        next_funding_time: f.next_funding_time().into(),
    })
}

/// Milliseconds since the epoch, as rules 2 says they may be.
fn millis(field: &str, text: Option<&str>) -> Result<Option<i64>, Error> {
    let Some(text) = text else { return Ok(None) };
    let ms: i64 = text.parse().map_err(|_| {
        Error::validation(format!(
            "{field} must be an integer of milliseconds since the epoch, got {text:?}"
        ))
    })?;
    if ms < 0 {
        return Err(Error::validation(format!(
            "{field} must not be negative, got {ms}"
        )));
    }
    if ms >= YEAR_10000_MS {
        return Err(Error::validation(format!(
            "{field} must be before 10000-01-01T00:00:00Z ({YEAR_10000_MS}), got {ms}"
        )));
    }
    Ok(Some(ms))
}

/// The settlements with `start ≤ funding_time < end`: the history is in time order, so the
/// window is one range of sequence numbers (empty when `start` ≥ `end`, rule 1).
pub(super) fn window(
    read: &Fundings,
    start: Option<i64>,
    end: Option<i64>,
) -> Result<(Bound<FundingSeq>, Bound<FundingSeq>), JournalError> {
    let first_at = |ms: i64| read.partition_point(|r| r.time >= Timestamp::from_millis(ms));
    let lo = start.map_or(Ok(0), first_at)?;
    let hi = end.map_or_else(|| read.count(), first_at)?;
    Ok((
        Bound::Included(FundingSeq(lo)),
        Bound::Excluded(FundingSeq(hi.max(lo))),
    ))
}

/// One market's settlements in the projection, or all.
pub(super) struct MarketKeys<'a> {
    pub read: &'a Fundings,
    pub market: Option<MarketId>,
}

impl Keys<FundingSeq> for MarketKeys<'_> {
    type Error = JournalError;

    fn take(
        &self,
        (low, high): (Bound<FundingSeq>, Bound<FundingSeq>),
        from_top: bool,
        limit: usize,
    ) -> Result<Vec<FundingSeq>, JournalError> {
        let range = (low.map(|k| k.0), high.map(|k| k.0));
        let seqs = self.read.market_seqs(self.market, range, from_top, limit)?;
        Ok(seqs.into_iter().map(FundingSeq).collect())
    }
}

/// One page of settlements, newest first, from the journal's projection (one read
/// transaction for the whole page).
fn page(
    state: &AppState,
    view: &ReadView,
    market: Option<MarketId>,
    (start, end): (Option<i64>, Option<i64>),
    req: &PageRequest<FundingSeq>,
    scope: &Scope<'_>,
) -> Result<FundingRatePage, Error> {
    let read = state.engine.fundings()?;
    let failed = |e| history_read_failed("funding rates", e);
    let bounds = window(&read, start, end).map_err(failed)?;
    let keys = MarketKeys {
        read: &read,
        market,
    };
    let page = pagination::page_of(&keys, bounds, req, (&state.cursors, scope), true);
    let page = page.map_err(failed)?;
    let rows = history::rows(&read, &page.keys).map_err(failed)?;
    Ok(FundingRatePage {
        data: rows.iter().map(|r| record(view, r)).collect(),
        response_metadata: page.metadata,
    })
}

pub struct FundingApi;

#[OpenApi(tag = "Tag::MarketData")]
impl FundingApi {
    /// Funding settlements, newest first: one record per instrument per settled hour.
    ///
    /// `start` (inclusive) and `end` (exclusive) in milliseconds since the epoch; a window
    /// with `start` ≥ `end` is an empty page (rule 1); a negative `start` or an `end` at or
    /// after 10000-01-01 is 400 (rule 2). `symbol` narrows it to one instrument (unknown →
    /// 404, rule 5). Cursor pagination as on every list; a cursor is bound to the `start`,
    /// `end` and `symbol` it was issued for (rule 3). History starts with the venue's first
    /// settlement (rule 4); an hour with no preliminary rate settles nothing and has no record.
    #[oai(
        path = "/funding_rates",
        method = "get",
        operation_id = "listFundingRates"
    )]
    async fn funding_rates(
        &self,
        state: Data<&Arc<AppState>>,
        auth: Signed,
        start: Query<Option<String>>,
        end: Query<Option<String>>,
        symbol: Query<Option<String>>,
        paging: PageQuery,
    ) -> Result<Json<FundingRatePage>, ApiError> {
        let view = state.engine.view();
        let start = millis("start", start.0.as_deref())?;
        let end = millis("end", end.0.as_deref())?;
        let market = match symbol.0.as_deref() {
            Some(s) => Some(
                view.trading
                    .market(s)
                    .map(|(id, _)| id)
                    .ok_or_else(|| Error::not_found(format!("symbol {s} does not exist")))?,
            ),
            None => None,
        };
        let filters = format!("start={start:?};end={end:?};market={market:?}");
        let scope = Scope {
            list: "funding_rates",
            broker: auth.broker(),
            filters: &filters,
        };
        let req = PageRequest::<FundingSeq>::of(&state.cursors, &scope, &paging)?;
        let page = page(&state, &view, market, (start, end), &req, &scope)?;
        Ok(Json(page))
    }

    /// An instrument's latest funding: the latest settlement with the running interval's
    /// predicted rate, or before any settlement the preliminary rate (§2.12).
    ///
    /// 404 for an unknown symbol, and when the instrument has neither a settlement nor a
    /// preliminary rate in the running interval (rule 5, D8).
    #[oai(
        path = "/funding_rates/:symbol",
        method = "get",
        operation_id = "getFundingRate"
    )]
    async fn funding_rate(
        &self,
        state: Data<&Arc<AppState>>,
        _auth: Signed,
        symbol: Path<String>,
    ) -> Result<Json<FundingRateLatest>, ApiError> {
        let view = state.engine.view();
        let (market, _) = view
            .trading
            .market(&symbol.0)
            .ok_or_else(|| Error::not_found(format!("symbol {} does not exist", symbol.0)))?;
        let latest = latest(&view, &view.funding[market as usize]).ok_or_else(|| {
            Error::not_found(format!(
                "no funding recorded for {} yet, and no preliminary rate in the running interval",
                symbol.0
            ))
        })?;
        Ok(Json(latest))
    }
}

impl poem_openapi::types::Example for FundingRateRecord {
    fn example() -> Self {
        FundingRateRecord {
            symbol: "BTC-USDC-PERP".into(),
            funding_rate: DecimalOut("0.00010000".into()),
            funding_time: Time("2026-01-01T01:00:00.000Z".into()),
            mark_price: DecimalOut("60000.0".into()),
        }
    }
}

impl poem_openapi::types::Example for FundingRateLatest {
    fn example() -> Self {
        FundingRateLatest {
            symbol: "BTC-USDC-PERP".into(),
            funding_rate: DecimalOut("0.00010000".into()),
            funding_time: Time("2026-01-01T01:00:00.000Z".into()),
            mark_price: DecimalOut("60000.0".into()),
            predicted_rate: Some(DecimalOut("0.00012500".into())).into(),
            next_funding_time: Time("2026-01-01T02:00:00.000Z".into()),
        }
    }
}

impl poem_openapi::types::Example for FundingRatePage {
    fn example() -> Self {
        FundingRatePage {
            data: vec![FundingRateRecord::example()],
            response_metadata: ResponseMetadata::example(),
        }
    }
}
