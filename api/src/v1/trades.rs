//! Trade records (interface §2.10, §4.1, §4.2; D5): per customer, one by code, broker-wide.

use std::ops::Bound;
use std::sync::Arc;

use perpsim_core::Error;
use perpsim_core::ids::{BrokerCode, CustomerCode, TradeCode};
use perpsim_core::time::{TimeBound, Timestamp};
use perpsim_storage::{Holder, JournalError, Trades};
use perpsim_systems::ReadView;
use perpsim_systems::records::ids::TradeSeq;
use perpsim_systems::records::trade::TradeRecord as Trade;
use poem::web::Data;
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::{Enum, Object, OpenApi};

use super::history::{self, ListKeys};
use super::{Signed, Tag, customer, customer_of};
use crate::contract::Nullable;
use crate::contract::group::query_group;
use crate::errors::ApiError;
use crate::pagination::{self, PageQuery, PageRequest, ResponseMetadata, Scope};
use crate::requests::orders::SideApi;
use crate::state::AppState;
use crate::state::host::history_read_failed;
use crate::wire::{DecimalOut, Time, query_time};

#[derive(Enum, Debug, Clone, Copy, PartialEq, Eq)]
#[oai(rename_all = "snake_case")]
pub enum TradeType {
    /// An order's fill.
    Trade,
    /// A liquidation's forced IOC fill against the book (D10): the liquidated side, with no
    /// order and reference_id null; the resting side is an ordinary `trade`.
    Liquidation,
    /// What the book could not absorb of a liquidation, closed at the mark price against an
    /// opposite position (both sides, no fee). Opposite positions are taken in rank order,
    /// highest first, ties by customer code: profit = unrealised PnL / (|amount| ×
    /// entry_price), effective leverage = the account's notional / equity in the settlement
    /// currency; winners (profit > 0, equity > 0) rank by profit × effective leverage, above
    /// the other positions with positive equity, ranked by profit / effective leverage, above
    /// those without, ranked by profit.
    AutoDeleveraging,
}

#[derive(Enum, Debug, Clone, Copy, PartialEq, Eq)]
#[oai(rename = "Liquidity", rename_all = "snake_case")]
pub enum LiquidityApi {
    Maker,
    Taker,
}

#[derive(Enum, Debug, Clone, Copy, PartialEq, Eq)]
#[oai(rename = "Sort", rename_all = "snake_case")]
pub enum SortApi {
    Asc,
    Desc,
}

/// One side's record of a fill (§2.10, D5).
#[derive(Object, Debug, Clone)]
#[oai(example)]
pub struct TradeRecord {
    pub code: String,
    pub customer_code: String,
    /// `trade` (an order's fill), `liquidation` (a liquidation's forced IOC fill against the
    /// book: the liquidated side, no order, reference_id null) or `auto_deleveraging` (what
    /// the book could not absorb, closed at the mark price against an opposite position,
    /// both sides, no fee). Auto-deleveraging takes opposite positions in rank order, highest
    /// first, ties by customer code: profit = unrealised PnL / (amount × entry_price) and
    /// effective leverage = the account's notional / equity in the settlement currency;
    /// winners (profit > 0, equity > 0) rank by profit × effective leverage, above the other
    /// positions with positive equity (by profit / effective leverage), above those without
    /// (by profit).
    #[oai(rename = "type")]
    pub kind: TradeType,
    pub symbol: String,
    pub side: SideApi,
    pub price: DecimalOut,
    pub amount: DecimalOut,
    /// Ledger precision; negative for a rebate.
    pub fee: DecimalOut,
    pub realised_pnl: DecimalOut,
    /// Null on forced fills.
    pub reference_id: Nullable<String>,
    pub liquidity: LiquidityApi,
    pub position_code: String,
    pub timestamp: Time,
}

/// A page of trades.
#[derive(Object, Debug)]
#[oai(example)]
pub struct TradePage {
    pub data: Vec<TradeRecord>,
    pub response_metadata: ResponseMetadata,
}

pub fn record(view: &ReadView, t: &Trade) -> TradeRecord {
    let symbol = view.trading.symbol(t.market).to_owned();
    let spec = &view.instruments[&symbol].spec;
    TradeRecord {
        code: t.code.to_string(),
        customer_code: t.customer.to_string(),
        kind: match t.kind {
            perpsim_systems::records::trade::TradeKind::Trade => TradeType::Trade,
            perpsim_systems::records::trade::TradeKind::Liquidation => TradeType::Liquidation,
            perpsim_systems::records::trade::TradeKind::AutoDeleveraging => {
                TradeType::AutoDeleveraging
            }
        },
        symbol,
        side: t.side.into(),
        price: DecimalOut::new(t.price, spec.price_decimals()),
        amount: DecimalOut::new(t.amount, spec.amount_decimals()),
        fee: DecimalOut::ledger(t.fee),
        realised_pnl: DecimalOut::ledger(t.realised_pnl),
        reference_id: t.reference_id.as_deref().map(str::to_owned).into(),
        liquidity: match t.liquidity {
            perpsim_systems::records::trade::Liquidity::Maker => LiquidityApi::Maker,
            perpsim_systems::records::trade::Liquidity::Taker => LiquidityApi::Taker,
        },
        position_code: t.position_code.to_string(),
        timestamp: t.timestamp.into(),
    }
}

/// The trade seqs inside `[from, to]`: trades are recorded in non-decreasing time, so the
/// window is one range of seqs.
pub(super) fn window(
    read: &Trades,
    from: Option<Timestamp>,
    to: Option<Timestamp>,
) -> Result<(Bound<TradeSeq>, Bound<TradeSeq>), JournalError> {
    let (lo, end) = history::time_range(read, |t| t.timestamp, (from, to))?;
    Ok((
        Bound::Included(TradeSeq(lo)),
        Bound::Excluded(TradeSeq(end.max(lo))),
    ))
}

query_group! {
    /// The filters every trade list shares: `symbol` (exact; unknown gives an empty page),
    /// `from` and `to` (inclusive), `sort` (default `desc`).
    pub struct TradeFilters {
        symbol as "symbol": Option<String>,
        from as "from": Option<String>,
        to as "to": Option<String>,
        sort as "sort": Option<SortApi>,
    }
}

fn list(
    state: &AppState,
    view: &ReadView,
    broker: BrokerCode,
    customer: Option<CustomerCode>,
    (q, paging): (TradeFilters, PageQuery),
) -> Result<TradePage, Error> {
    let from = query_time("from", q.from.as_deref(), TimeBound::From)?;
    let to = query_time("to", q.to.as_deref(), TimeBound::To)?;
    let sort = q.sort.unwrap_or(SortApi::Desc);
    let filters = format!(
        "customer={customer:?};symbol={:?};from={from:?};to={to:?};sort={sort:?}",
        q.symbol
    );
    let scope = Scope {
        list: "trades",
        broker,
        filters: &filters,
    };
    let req = PageRequest::<TradeSeq>::of(&state.cursors, &scope, &paging)?;
    // An unknown symbol is an empty page (§4.1), not an error.
    let market = match &q.symbol {
        Some(s) => view.trading.market(s).map(|(id, _)| Some(id)),
        None => Some(None),
    };
    let Some(market) = market else {
        let empty = imbl::OrdSet::new();
        let page = pagination::page(&empty, pagination::all(), &req, &state.cursors, &scope);
        return Ok(TradePage {
            data: Vec::new(),
            response_metadata: page.metadata,
        });
    };
    let read = state.engine.trades()?;
    let failed = |e| history_read_failed("trades", e);
    let holder = match customer {
        Some(c) => Holder::Customer(c),
        None => Holder::Broker(broker),
    };
    let keys = ListKeys {
        read: &read,
        list: (holder, market),
    };
    let bounds = window(&read, from, to).map_err(failed)?;
    let cut = (&state.cursors, &scope);
    let page = pagination::page_of(&keys, bounds, &req, cut, sort == SortApi::Desc);
    let page = page.map_err(failed)?;
    let rows = history::rows(&read, &page.keys).map_err(failed)?;
    Ok(TradePage {
        data: rows.iter().map(|t| record(view, t)).collect(),
        response_metadata: page.metadata,
    })
}

pub struct TradesApi;

#[OpenApi(tag = "Tag::Orders")]
impl TradesApi {
    /// A customer's trades.
    ///
    /// `from` / `to` (inclusive; RFC 3339 or milliseconds since the epoch, both optional),
    /// `sort` `asc` or `desc` (default `desc`), `symbol` (exact; unknown gives an empty page),
    /// cursor pagination.
    #[oai(
        path = "/customers/:code/trades",
        method = "get",
        operation_id = "listCustomerTrades"
    )]
    async fn customer_trades(
        &self,
        state: Data<&Arc<AppState>>,
        auth: Signed,
        code: customer::Path,
        filters: TradeFilters,
        paging: PageQuery,
    ) -> Result<Json<TradePage>, ApiError> {
        let view = code.view();
        let customer = code.customer()?.code;
        let q = (filters, paging);
        Ok(Json(list(&state, &view, auth.broker(), Some(customer), q)?))
    }

    /// One trade of a customer by its code.
    #[oai(
        path = "/customers/:code/trades/:trade_code",
        method = "get",
        operation_id = "getCustomerTrade"
    )]
    async fn customer_trade(
        &self,
        state: Data<&Arc<AppState>>,
        _auth: Signed,
        code: customer::Path,
        trade_code: Path<String>,
    ) -> Result<Json<TradeRecord>, ApiError> {
        let view = code.view();
        let customer = code.customer()?.code;
        let not_found = || Error::not_found(format!("trade {} does not exist", trade_code.0));
        let read = state.engine.trades()?;
        let failed = |e| history_read_failed("trades", e);
        let Some(code) = TradeCode::parse(&trade_code.0) else {
            return Err(not_found().into());
        };
        let trade = match read.by_code(code).map_err(failed)? {
            Some(seq) => read.get(seq).map_err(failed)?,
            None => None,
        };
        match trade {
            Some(t) if t.customer == customer => Ok(Json(record(&view, &t))),
            _ => Err(not_found().into()),
        }
    }

    /// The broker's trades across its customers.
    ///
    /// Query `customer_code`, `from`, `to`, `symbol` (exact; unknown gives an empty page),
    /// `sort`, `limit`, `after`, `before`; any other parameter is refused with 400 naming it
    /// and the supported set.
    #[oai(path = "/trades", method = "get", operation_id = "listTrades")]
    async fn trades(
        &self,
        state: Data<&Arc<AppState>>,
        auth: Signed,
        customer_code: Query<Option<String>>,
        filters: TradeFilters,
        paging: PageQuery,
    ) -> Result<Json<TradePage>, ApiError> {
        let view = state.engine.view();
        let customer = customer_code
            .0
            .as_deref()
            .map(|c| customer_of(&view, auth.broker(), c).map(|c| c.code))
            .transpose()?;
        let q = (filters, paging);
        Ok(Json(list(&state, &view, auth.broker(), customer, q)?))
    }
}

impl poem_openapi::types::Example for TradeRecord {
    fn example() -> Self {
        TradeRecord {
            code: "0c7d1f0e-6a9b-4a4e-8f6d-3b2a1c0d9e8f".into(),
            customer_code: "5b0b5d2e-8a7e-4b8e-9c59-2f0e6f9b1a11".into(),
            kind: TradeType::Trade,
            symbol: "BTC-USDC-PERP".into(),
            side: SideApi::Buy,
            price: DecimalOut("59000.0".into()),
            amount: DecimalOut("0.0100".into()),
            fee: DecimalOut("0.2950000000".into()),
            realised_pnl: DecimalOut("0.0000000000".into()),
            reference_id: Some("my-order-1".into()).into(),
            liquidity: LiquidityApi::Taker,
            position_code: "7e4f2a1b-3c5d-4e6f-8a9b-0c1d2e3f4a5b".into(),
            timestamp: Time("2026-01-01T00:00:01.000Z".into()),
        }
    }
}

impl poem_openapi::types::Example for TradePage {
    fn example() -> Self {
        TradePage {
            data: vec![TradeRecord::example()],
            response_metadata: ResponseMetadata::example(),
        }
    }
}
