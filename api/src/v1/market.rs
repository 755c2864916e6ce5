//! Market data from the books and the fills (interface §2.12, §4.1; D8): public trades,
//! tickers and OHLC candles.

use std::sync::Arc;

use perpsim_core::Error;
use perpsim_core::filter::Pattern;
use perpsim_core::time::{DAY_MS, MINUTE_MS, TimeBound, Timestamp};
use perpsim_systems::ReadView;
use perpsim_systems::publish::market_view::MarketView;
use perpsim_systems::records::tape::{INTERVALS, RECENT_FILLS};
use perpsim_systems::records::trade::PublicFill;
use perpsim_systems::records::venue::InstrumentView;
use poem::web::Data;
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};

use super::{Signed, Tag};
use crate::contract::Nullable;
use crate::errors::ApiError;
use crate::pagination::{DEFAULT_LIMIT, MAX_LIMIT};
use crate::requests::orders::SideApi;
use crate::state::AppState;
use crate::wire::{DecimalOut, Time, query_time};

/// A fill as the market sees it (D8).
#[derive(Object, Debug, Clone)]
#[oai(example)]
pub struct PublicTrade {
    pub code: String,
    pub symbol: String,
    pub price: DecimalOut,
    pub amount: DecimalOut,
    pub taker_side: SideApi,
    pub timestamp: Time,
}

/// Ticker (§2.12, D8). `funding_rate` is the latest settled rate (before the first
/// settlement, the preliminary rate; null while there is neither), `predicted_rate` the
/// running interval's preliminary rate (null until it has one), `next_funding_time` the next
/// whole hour (UTC). The 24 h figures cover the trades of the last 1 440 whole
/// minutes, the current one included.
#[derive(Object, Debug, Clone)]
#[oai(example)]
pub struct Ticker {
    pub symbol: String,
    pub last_price: Nullable<DecimalOut>,
    pub mark_price: DecimalOut,
    pub index_price: DecimalOut,
    pub best_bid: Nullable<DecimalOut>,
    pub best_ask: Nullable<DecimalOut>,
    pub volume_24h: DecimalOut,
    pub high_24h: Nullable<DecimalOut>,
    pub low_24h: Nullable<DecimalOut>,
    pub open_interest: DecimalOut,
    pub funding_rate: Nullable<DecimalOut>,
    pub predicted_rate: Nullable<DecimalOut>,
    pub next_funding_time: Time,
    pub timestamp: Time,
}

/// One candle; only periods with trades have one (D8).
#[derive(Object, Debug, Clone)]
#[oai(example)]
pub struct Candle {
    pub symbol: String,
    /// `1m`, `5m`, `15m`, `1h`, `4h` or `1d` (`60m` is echoed as `1h`).
    pub interval: String,
    pub open_time: Time,
    pub open: DecimalOut,
    pub high: DecimalOut,
    pub low: DecimalOut,
    pub close: DecimalOut,
    pub volume: DecimalOut,
}

fn market<'v>(
    view: &'v ReadView,
    symbol: &str,
) -> Result<(&'v InstrumentView, u32, &'v MarketView), Error> {
    let instrument = view.instruments.get(symbol);
    let market = view.trading.market(symbol);
    match (instrument, market) {
        (Some(i), Some((id, m))) => Ok((i, id, m)),
        _ => Err(Error::not_found(format!("symbol {symbol} does not exist"))),
    }
}

/// A public fill as `GET /v1/market-trades` and the market-trades channel show it.
pub fn public_trade(view: &ReadView, f: &PublicFill) -> PublicTrade {
    let spec = &view.instruments[view.trading.symbol(f.market)].spec;
    PublicTrade {
        code: f.code.to_string(),
        symbol: spec.symbol.clone(),
        price: DecimalOut::new(f.price, spec.price_decimals()),
        amount: DecimalOut::new(f.amount, spec.amount_decimals()),
        taker_side: f.taker_side.into(),
        timestamp: f.timestamp.into(),
    }
}

pub fn ticker(view: &ReadView, i: &InstrumentView, id: u32, m: &MarketView) -> Ticker {
    let (pd, ad) = (i.spec.price_decimals(), i.spec.amount_decimals());
    let now = view.clock.now;
    let minute = now.millis().div_euclid(MINUTE_MS) * MINUTE_MS;
    let day: Vec<_> = m
        .day_candles
        .range(minute - DAY_MS + MINUTE_MS..)
        .map(|(_, c)| *c)
        .collect();
    let price = |p| DecimalOut::new(p, pd);
    let funding = super::funding::latest(view, &view.funding[id as usize]);
    Ticker {
        symbol: i.spec.symbol.clone(),
        last_price: m.last_price.map(price).into(),
        mark_price: price(i.mark_price),
        index_price: price(i.index_price),
        best_bid: m.best_bid.map(price).into(),
        best_ask: m.best_ask.map(price).into(),
        volume_24h: DecimalOut::new(day.iter().map(|c| c.volume).sum(), ad),
        high_24h: day.iter().map(|c| c.high).max().map(price).into(),
        low_24h: day.iter().map(|c| c.low).min().map(price).into(),
        open_interest: DecimalOut::new(m.open_interest, ad),
        funding_rate: funding.as_ref().map(|f| f.funding_rate.clone()).into(),
        predicted_rate: funding.and_then(|f| f.predicted_rate.0).into(),
        next_funding_time: view.funding[id as usize].next_funding_time().into(),
        timestamp: now.into(),
    }
}

fn pattern(field: &str, value: Option<String>) -> Result<Option<Pattern>, Error> {
    value
        .map(|v| Pattern::parse(&v).map_err(|why| Error::validation(format!("{field} {why}"))))
        .transpose()
}

pub struct MarketApi;

// The recent-trades list shows at most what the view keeps.
const _: () = assert!(MAX_LIMIT as usize <= RECENT_FILLS);

#[OpenApi(tag = "Tag::MarketData")]
impl MarketApi {
    /// Recent public trades, newest first.
    ///
    /// `symbol` (exact; unknown → 404) and `limit` (1–1000, default 100).
    #[oai(
        path = "/market-trades",
        method = "get",
        operation_id = "listMarketTrades"
    )]
    async fn market_trades(
        &self,
        state: Data<&Arc<AppState>>,
        _auth: Signed,
        symbol: Query<Option<String>>,
        limit: Query<Option<u32>>,
    ) -> Result<Json<Vec<PublicTrade>>, ApiError> {
        let limit = limit.0.unwrap_or(DEFAULT_LIMIT);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(Error::validation(format!(
                "limit must be between 1 and {MAX_LIMIT}, got {limit}"
            ))
            .into());
        }
        let view = state.engine.view();
        let fills = match symbol.0.as_deref() {
            Some(s) => &market(&view, s)?.2.fills,
            None => &view.trading.fills,
        };
        let rows = fills.iter().rev().take(limit as usize);
        Ok(Json(rows.map(|f| public_trade(&view, f)).collect()))
    }

    /// Tickers, filtered like instruments (`symbol`, `underlying`, `quote_currency` with
    /// `|` and `*`, case-insensitive, anchored). Sorted by symbol.
    #[oai(path = "/tickers", method = "get", operation_id = "listTickers")]
    async fn tickers(
        &self,
        state: Data<&Arc<AppState>>,
        _auth: Signed,
        symbol: Query<Option<String>>,
        underlying: Query<Option<String>>,
        quote_currency: Query<Option<String>>,
    ) -> Result<Json<Vec<Ticker>>, ApiError> {
        let symbol = pattern("symbol", symbol.0)?;
        let underlying = pattern("underlying", underlying.0)?;
        let quote = pattern("quote_currency", quote_currency.0)?;
        let matches = |p: &Option<Pattern>, v: &str| p.as_ref().is_none_or(|p| p.matches(v));
        let view = state.engine.view();
        let rows = view
            .instruments
            .values()
            .filter(|i| matches(&symbol, &i.spec.symbol))
            .filter(|i| matches(&underlying, &i.spec.underlying))
            .filter(|i| matches(&quote, &i.spec.quote_currency))
            .filter_map(|i| {
                view.trading
                    .market(&i.spec.symbol)
                    .map(|(id, m)| ticker(&view, i, id, m))
            })
            .collect();
        Ok(Json(rows))
    }

    /// One ticker; 404 for an unknown symbol.
    #[oai(path = "/tickers/:symbol", method = "get", operation_id = "getTicker")]
    async fn ticker(
        &self,
        state: Data<&Arc<AppState>>,
        _auth: Signed,
        symbol: Path<String>,
    ) -> Result<Json<Ticker>, ApiError> {
        let view = state.engine.view();
        let (i, id, m) = market(&view, &symbol.0)?;
        Ok(Json(ticker(&view, i, id, m)))
    }

    /// OHLC candles, oldest first, only for periods with trades.
    ///
    /// `symbol` and `interval` (1m, 5m, 15m, 1h or its alias 60m, 4h, 1d) are required;
    /// `from` / `to` (inclusive open times; RFC 3339 or milliseconds) default to the last 100
    /// periods.
    #[oai(path = "/ohlc", method = "get", operation_id = "listOhlc")]
    async fn ohlc(
        &self,
        state: Data<&Arc<AppState>>,
        _auth: Signed,
        symbol: Query<String>,
        interval: Query<String>,
        from: Query<Option<String>>,
        to: Query<Option<String>>,
    ) -> Result<Json<Vec<Candle>>, ApiError> {
        let name = if interval.0 == "60m" {
            "1h"
        } else {
            interval.0.as_str()
        };
        let (index, period) = INTERVALS
            .iter()
            .enumerate()
            .find(|(_, (n, _))| *n == name)
            .map(|(i, (_, ms))| (i, *ms))
            .ok_or_else(|| {
                Error::validation(format!(
                    "interval must be one of 1m, 5m, 15m, 1h, 60m, 4h, 1d; got {:?}",
                    interval.0
                ))
            })?;
        let view = state.engine.view();
        let (i, id, _) = market(&view, &symbol.0)?;
        let from = query_time("from", from.0.as_deref(), TimeBound::From)?;
        let to = query_time("to", to.0.as_deref(), TimeBound::To)?;
        let last = to.unwrap_or(view.clock.now).millis().div_euclid(period) * period;
        let first = from.map_or(last - 99 * period, |f| f.millis());
        let (pd, ad) = (i.spec.price_decimals(), i.spec.amount_decimals());
        let rows = state
            .engine
            .candles(id, index, first..=last)?
            .into_iter()
            .map(|(t, c)| Candle {
                symbol: i.spec.symbol.clone(),
                interval: name.to_owned(),
                open_time: Timestamp::from_millis(t).into(),
                open: DecimalOut::new(c.open, pd),
                high: DecimalOut::new(c.high, pd),
                low: DecimalOut::new(c.low, pd),
                close: DecimalOut::new(c.close, pd),
                volume: DecimalOut::new(c.volume, ad),
            })
            .collect();
        Ok(Json(rows))
    }
}

impl poem_openapi::types::Example for PublicTrade {
    fn example() -> Self {
        PublicTrade {
            code: "2d3e4f5a-6b7c-4d8e-9f0a-1b2c3d4e5f6a".into(),
            symbol: "BTC-USDC-PERP".into(),
            price: DecimalOut("59000.0".into()),
            amount: DecimalOut("0.0100".into()),
            taker_side: SideApi::Buy,
            timestamp: Time("2026-01-01T00:00:01.000Z".into()),
        }
    }
}

impl poem_openapi::types::Example for Ticker {
    fn example() -> Self {
        Ticker {
            symbol: "BTC-USDC-PERP".into(),
            last_price: Some(DecimalOut("59000.0".into())).into(),
            mark_price: DecimalOut("60000.0".into()),
            index_price: DecimalOut("60000.0".into()),
            best_bid: Some(DecimalOut("58999.9".into())).into(),
            best_ask: Some(DecimalOut("59000.1".into())).into(),
            volume_24h: DecimalOut("12.3400".into()),
            high_24h: Some(DecimalOut("60100.0".into())).into(),
            low_24h: Some(DecimalOut("58800.0".into())).into(),
            open_interest: DecimalOut("5.0000".into()),
            funding_rate: None.into(),
            predicted_rate: None.into(),
            next_funding_time: Time("2026-01-01T01:00:00.000Z".into()),
            timestamp: Time("2026-01-01T00:00:01.000Z".into()),
        }
    }
}

impl poem_openapi::types::Example for Candle {
    fn example() -> Self {
        Candle {
            symbol: "BTC-USDC-PERP".into(),
            interval: "1h".into(),
            open_time: Time("2026-01-01T00:00:00.000Z".into()),
            open: DecimalOut("59000.0".into()),
            high: DecimalOut("59100.0".into()),
            low: DecimalOut("58900.0".into()),
            close: DecimalOut("59050.0".into()),
            volume: DecimalOut("1.2500".into()),
        }
    }
}
