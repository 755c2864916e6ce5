//! Orders (interface §2.3, §3.1, §4.2, §4.3; D5): entry, the open-orders list, single read,
//! cancel and amend. Handlers decode and check the shape; every rule that needs prices or
//! state runs in the engine.

use std::sync::Arc;

use perpsim_core::Error;
use perpsim_core::decimal::Sign;
use perpsim_core::entry::{self, Amend, OrderEntry};
use perpsim_core::ids::CustomerCode;
use perpsim_core::order::{self as core_order, OrderStatus};
use perpsim_core::time::Timestamp;
use perpsim_systems::records::fault_plan::PPM;
use perpsim_systems::records::order::Order;
use perpsim_systems::{Command, Outcome, ReadView};
use poem::web::Data;
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Enum, Object, OpenApi};

use super::{Signed, Tag, customer};
use crate::contract::Nullable;
use crate::contract::Text;
use crate::errors::ApiError;
use crate::pagination::{self, PageRequest, ResponseMetadata, Scope};
use crate::state::AppState;
use crate::wire::{DecimalIn, DecimalOut, LeverageIn, NumberIn, Time};

#[derive(Enum, Debug, Clone, Copy, PartialEq, Eq)]
#[oai(rename = "Side", rename_all = "snake_case")]
pub enum SideApi {
    Buy,
    Sell,
}

impl From<SideApi> for core_order::Side {
    fn from(s: SideApi) -> Self {
        match s {
            SideApi::Buy => core_order::Side::Buy,
            SideApi::Sell => core_order::Side::Sell,
        }
    }
}

impl From<core_order::Side> for SideApi {
    fn from(s: core_order::Side) -> Self {
        match s {
            core_order::Side::Buy => SideApi::Buy,
            core_order::Side::Sell => SideApi::Sell,
        }
    }
}

/// Order types on entry (§2.3).
#[derive(Enum, Debug, Clone, Copy, PartialEq, Eq)]
#[oai(rename_all = "snake_case")]
pub enum OrderEntryType {
    Market,
    Limit,
    StopLoss,
    StopLossLimit,
    TakeProfit,
    TakeProfitLimit,
    TakeProfitStopLoss,
}

impl From<OrderEntryType> for core_order::OrderType {
    fn from(t: OrderEntryType) -> Self {
        use core_order::OrderType as T;
        match t {
            OrderEntryType::Market => T::Market,
            OrderEntryType::Limit => T::Limit,
            OrderEntryType::StopLoss => T::StopLoss,
            OrderEntryType::StopLossLimit => T::StopLossLimit,
            OrderEntryType::TakeProfit => T::TakeProfit,
            OrderEntryType::TakeProfitLimit => T::TakeProfitLimit,
            OrderEntryType::TakeProfitStopLoss => T::TakeProfitStopLoss,
        }
    }
}

#[derive(Enum, Debug, Clone, Copy, PartialEq, Eq)]
#[oai(rename = "TimeInForce")]
pub enum TimeInForceApi {
    #[oai(rename = "IOC")]
    Ioc,
    #[oai(rename = "FOK")]
    Fok,
    #[oai(rename = "GTC")]
    Gtc,
    #[oai(rename = "GTD")]
    Gtd,
}

impl From<TimeInForceApi> for core_order::TimeInForce {
    fn from(t: TimeInForceApi) -> Self {
        match t {
            TimeInForceApi::Ioc => core_order::TimeInForce::Ioc,
            TimeInForceApi::Fok => core_order::TimeInForce::Fok,
            TimeInForceApi::Gtc => core_order::TimeInForce::Gtc,
            TimeInForceApi::Gtd => core_order::TimeInForce::Gtd,
        }
    }
}

#[derive(Enum, Debug, Clone, Copy, PartialEq, Eq)]
#[oai(rename = "TriggerPriceType", rename_all = "snake_case")]
pub enum TriggerPriceTypeApi {
    TradePrice,
    MarkPrice,
}

impl From<TriggerPriceTypeApi> for core_order::TriggerPriceType {
    fn from(t: TriggerPriceTypeApi) -> Self {
        match t {
            TriggerPriceTypeApi::TradePrice => core_order::TriggerPriceType::TradePrice,
            TriggerPriceTypeApi::MarkPrice => core_order::TriggerPriceType::MarkPrice,
        }
    }
}

/// Order entry (§4.3, D5). `symbol`, `side`, `type` and `reference_id` are required; the rest
/// depends on the type (rules 1–14). A price field the type does not use is refused, never
/// dropped. Well-formed orders the venue cannot take (off the tick or lot grid, notional above
/// the venue maximum of 10 000 000 quote units) answer 400 ORDER_REJECTED.
#[derive(Object, Debug)]
#[oai(deny_unknown_fields, example)]
pub struct OrderRequest {
    pub symbol: Text,
    pub side: SideApi,
    #[oai(rename = "type")]
    pub kind: OrderEntryType,
    /// 1–40 characters of `[a-zA-Z0-9_-]`; unique among the customer's open orders.
    pub reference_id: Text,
    /// Contracts, on the instrument's lot grid. Required unless `cash_amount` is used.
    pub amount: Option<DecimalIn>,
    /// Notional in the quote currency (market and limit only, IOC): resolved to whole lots.
    pub cash_amount: Option<NumberIn>,
    pub limit_price: Option<DecimalIn>,
    pub trigger_price: Option<DecimalIn>,
    pub trigger_price_type: Option<TriggerPriceTypeApi>,
    pub take_profit_price: Option<DecimalIn>,
    pub stop_loss_price: Option<DecimalIn>,
    /// Defaults: market and cash orders IOC, limit GTC, conditional types their required value.
    pub time_in_force: Option<TimeInForceApi>,
    /// Required for GTD and only for GTD; RFC 3339, in the future.
    pub expire_time: Option<Text>,
    /// Limit orders only: refused with ORDER_REJECTED if it would take liquidity.
    pub post_only: Option<bool>,
    /// Selects the account-wide margin profile (1 or 2).
    pub leverage: Option<LeverageIn>,
    /// IPv4 or IPv6 text without port, CIDR suffix or zone; never echoed.
    pub customer_ip: Option<Text>,
}

/// Amend (D5): any of the fields, at least one. A price change or size increase loses time
/// priority; a size decrease keeps it.
#[derive(Object, Debug)]
#[oai(deny_unknown_fields, example)]
pub struct AmendRequest {
    pub amount: Option<DecimalIn>,
    pub limit_price: Option<DecimalIn>,
    pub trigger_price: Option<DecimalIn>,
    pub expire_time: Option<Text>,
}

/// An order (§2.3, D5). Fields that do not apply are null; `cash_amount` appears only on
/// cash orders.
#[derive(Object, Debug, Clone)]
#[oai(example)]
pub struct OrderRecord {
    pub reference_id: String,
    pub customer_code: String,
    pub symbol: String,
    pub side: SideApi,
    /// On the POST response the requested type; on reads the stored type (`stop_market`,
    /// `stop_limit` for stop and take-profit orders).
    #[oai(rename = "type")]
    pub kind: String,
    /// Contracts; for a cash order, what its notional resolved to.
    pub amount: Nullable<DecimalOut>,
    #[oai(skip_serializing_if_is_none)]
    pub cash_amount: Option<DecimalOut>,
    pub filled_amount: DecimalOut,
    pub filled_quote: DecimalOut,
    pub avg_fill_price: Nullable<DecimalOut>,
    pub limit_price: Nullable<DecimalOut>,
    pub trigger_price: Nullable<DecimalOut>,
    pub trigger_price_type: Nullable<String>,
    pub take_profit_price: Nullable<DecimalOut>,
    pub stop_loss_price: Nullable<DecimalOut>,
    pub time_in_force: String,
    /// Null except for GTD; on reads null once the order is filled, canceled or expired.
    pub expire_time: Nullable<Time>,
    /// Echoed on POST; false on every read.
    pub post_only: bool,
    /// open, partially_filled, filled, canceled, expired or rejected.
    pub status: String,
    /// USER_INITIATED, TIME_IN_FORCE or EXPIRED; INSUFFICIENT_FUNDS (status rejected) when a
    /// stop_loss_limit or take_profit_limit order fires and the initial margin of the part
    /// that would rest and open exposure is not available; null while open.
    pub reason: Nullable<String>,
    /// The time of the last event on the order.
    pub created: Time,
    pub updated: Time,
}

/// How a record is rendered: as the POST response or as a read.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Rendering {
    Entry,
    Read,
}

pub fn record(view: &ReadView, o: &Order, how: Rendering) -> OrderRecord {
    let symbol = view.trading.symbol(o.market).to_owned();
    let spec = &view.instruments[&symbol].spec;
    let (pd, ad) = (spec.price_decimals(), spec.amount_decimals());
    let price = |p: Option<perpsim_core::Decimal>| p.map(|p| DecimalOut::new(p, pd));
    let ended = !o.is_open() && o.status != OrderStatus::Rejected;
    OrderRecord {
        reference_id: o.reference_id.to_string(),
        customer_code: o.customer.to_string(),
        symbol,
        side: o.side.into(),
        kind: match how {
            Rendering::Entry => o.kind.as_str(),
            Rendering::Read => o.kind.stored_str(),
        }
        .to_owned(),
        amount: Some(DecimalOut::new(o.amount, ad)).into(),
        cash_amount: o.cash_amount().map(|c| DecimalOut::new(c, 0)),
        filled_amount: DecimalOut::new(o.filled_amount, ad),
        filled_quote: DecimalOut::new(o.filled_quote, pd),
        avg_fill_price: price(o.avg_fill_price().map(|p| p.normalize())).into(),
        limit_price: price(o.limit_price).into(),
        trigger_price: price(o.trigger_price()).into(),
        trigger_price_type: o.trigger_price_type().map(|t| t.as_str().to_owned()).into(),
        take_profit_price: price(o.take_profit_price()).into(),
        stop_loss_price: price(o.stop_loss_price()).into(),
        time_in_force: o.time_in_force.as_str().to_owned(),
        expire_time: match (how, ended) {
            (Rendering::Read, true) => None.into(),
            _ => o.expire_time().map(Time::from).into(),
        },
        post_only: how == Rendering::Entry && o.post_only,
        status: o.status.as_str().to_owned(),
        reason: o.reason.map(|r| r.as_str().to_owned()).into(),
        created: o.created.into(),
        updated: o.created.into(),
    }
}

#[derive(ApiResponse)]
pub enum OrderCreated {
    /// The order was accepted (also when it ended at once, such as an expired IOC).
    #[oai(status = 201)]
    Created(Json<OrderRecord>),
}

/// A page of open orders, oldest first.
#[derive(Object, Debug)]
#[oai(example)]
pub struct OrderPage {
    pub data: Vec<OrderRecord>,
    pub response_metadata: ResponseMetadata,
}

fn decimal(field: &str, v: &Option<DecimalIn>) -> Result<Option<perpsim_core::Decimal>, Error> {
    v.as_ref().map(|d| d.parse(field, Sign::Signed)).transpose()
}

fn time(field: &str, v: &Option<Text>) -> Result<Option<Timestamp>, Error> {
    v.as_deref()
        .map(|t| {
            Timestamp::parse_rfc3339(t).ok_or_else(|| {
                Error::validation(format!("{field} must be an RFC 3339 timestamp, got {t:?}"))
            })
        })
        .transpose()
}

fn decode(body: &OrderRequest) -> Result<OrderEntry, Error> {
    if let Some(ip) = &body.customer_ip {
        entry::check_customer_ip(ip)?;
    }
    Ok(OrderEntry {
        side: body.side.into(),
        kind: body.kind.into(),
        reference_id: body.reference_id.to_string(),
        amount: decimal("amount", &body.amount)?,
        cash_amount: body
            .cash_amount
            .as_ref()
            .map(|c| c.parse("cash_amount", Sign::Signed))
            .transpose()?,
        limit_price: decimal("limit_price", &body.limit_price)?,
        trigger_price: decimal("trigger_price", &body.trigger_price)?,
        trigger_price_type: body.trigger_price_type.map(Into::into),
        take_profit_price: decimal("take_profit_price", &body.take_profit_price)?,
        stop_loss_price: decimal("stop_loss_price", &body.stop_loss_price)?,
        time_in_force: body.time_in_force.map(Into::into),
        expire_time: time("expire_time", &body.expire_time)?,
        post_only: body.post_only.unwrap_or(false),
        leverage: body
            .leverage
            .as_ref()
            .map(|l| l.parse("leverage"))
            .transpose()?,
        // Checked above and never stored (§2.3).
        customer_ip: None,
    })
}

/// The command an order entry's body asks for (createOrder; a scenario's `order` event).
pub fn place_command(customer: CustomerCode, body: &OrderRequest) -> Result<Command, Error> {
    Ok(Command::PlaceOrder {
        customer,
        symbol: body.symbol.to_string(),
        entry: Box::new(decode(body)?),
    })
}

/// The command an amend's body asks for (amendOrder; a scenario's `amend` event).
pub fn amend_command(
    customer: CustomerCode,
    reference_id: String,
    body: &AmendRequest,
) -> Result<Command, Error> {
    entry::check_reference_id("reference_id", &reference_id)?;
    let amend = Amend {
        amount: decimal("amount", &body.amount)?,
        limit_price: decimal("limit_price", &body.limit_price)?,
        trigger_price: decimal("trigger_price", &body.trigger_price)?,
        expire_time: time("expire_time", &body.expire_time)?,
    };
    if amend == Amend::default() {
        return Err(Error::validation(
            "give at least one of amount, limit_price, trigger_price, expire_time",
        ));
    }
    Ok(Command::AmendOrder {
        customer,
        reference_id,
        amend,
    })
}

pub struct OrdersApi;

/// The fault plan's share of order entries answered late (issue 25): chosen by the request's
/// nonce, so a client can tell which entries it asked to be late by. Nothing is journaled:
/// a late answer changes no state.
async fn late_by_fault_plan(state: &AppState, auth: &Signed) {
    let plan = state.engine.view().faults.clone();
    let Some(fault) = plan.and_then(|p| p.order_entry) else {
        return;
    };
    let nonce = auth.0.used().nonce;
    if nonce % u64::from(PPM) < u64::from(fault.delay_ppm) {
        tokio::time::sleep(std::time::Duration::from_millis(fault.delay_ms)).await;
    }
}

impl OrdersApi {
    async fn submit_order(
        state: &AppState,
        auth: &Signed,
        command: Command,
        how: Rendering,
    ) -> Result<OrderRecord, ApiError> {
        let named = command.order_reference().map(|(c, r)| (c, r.to_owned()));
        match state.engine.submit(command, auth.admission()).await {
            Ok(Outcome::Order(o)) => Ok(record(&state.engine.view(), &o, how)),
            Ok(other) => unreachable!("order requests answer an order, got {other:?}"),
            // None open: named from the projection, which the engine keeps nothing of.
            Err(e) if core_order::is_not_open(&e) => {
                let (customer, reference) = named.expect("only a cancel or amend finds none open");
                Err(state.engine.name_not_open(e, customer, &reference).into())
            }
            Err(e) => Err(e.into()),
        }
    }
}

#[OpenApi(tag = "Tag::Orders")]
impl OrdersApi {
    /// Place an order.
    ///
    /// Every rule of §4.3 is checked; refusals are 400 VALIDATION_ERROR naming the field and
    /// the rule, ORDER_REJECTED (off the tick or lot grid, notional above 10 000 000, a
    /// cash_amount that buys less than one lot at the price it would first trade at, the
    /// instrument in trade_halt, not resting under post_only, or an order that could stay
    /// open while the customer already holds the bound of open orders: 1 000 by default,
    /// `--max-open-orders`; market, IOC and FOK orders pass it), INSUFFICIENT_FUNDS (the
    /// opening part needs amount × price × initial margin available), or 409
    /// DUPLICATE_REFERENCE_ID. A refused order leaves nothing behind.
    #[oai(
        path = "/customers/:code/orders",
        method = "post",
        operation_id = "createOrder"
    )]
    async fn create(
        &self,
        state: Data<&Arc<AppState>>,
        auth: Signed,
        code: customer::Path,
        body: Json<OrderRequest>,
    ) -> Result<OrderCreated, ApiError> {
        let command = place_command(code.customer()?.code, &body.0)?;
        let answer = Self::submit_order(&state, &auth, command, Rendering::Entry).await;
        late_by_fault_plan(&state, &auth).await;
        Ok(OrderCreated::Created(Json(answer?)))
    }

    /// A customer's open orders, conditional ones included, oldest first.
    ///
    /// `status` may only be `open` (the default). Cursor pagination (`limit` 1–1000,
    /// `after` / `before`).
    #[oai(
        path = "/customers/:code/orders",
        method = "get",
        operation_id = "listOpenOrders"
    )]
    #[allow(clippy::too_many_arguments)]
    async fn list(
        &self,
        state: Data<&Arc<AppState>>,
        auth: Signed,
        code: customer::Path,
        status: Query<Option<String>>,
        limit: Query<Option<u32>>,
        after: Query<Option<String>>,
        before: Query<Option<String>>,
    ) -> Result<Json<OrderPage>, ApiError> {
        let view = code.view();
        let customer = code.customer()?.code;
        if let Some(s) = status.0.as_deref().filter(|s| *s != "open") {
            return Err(Error::validation(format!("status supports only open, got {s:?}")).into());
        }
        let filters = customer.to_string();
        let scope = Scope {
            list: "orders",
            broker: auth.broker(),
            filters: &filters,
        };
        let req = PageRequest::parse(
            &state.cursors,
            &scope,
            limit.0,
            after.0.as_deref(),
            before.0.as_deref(),
        )?;
        let empty = imbl::OrdSet::new();
        let set = view.trading.open_orders.get(&customer).unwrap_or(&empty);
        let page = pagination::page(set, pagination::all(), &req, &state.cursors, &scope);
        let data = page
            .keys
            .iter()
            .map(|(_, id)| record(&view, &view.trading.orders[id], Rendering::Read))
            .collect();
        Ok(Json(OrderPage {
            data,
            response_metadata: page.metadata,
        }))
    }

    /// One order by reference: the open one, else the one updated last.
    ///
    /// 404 NOT_FOUND for a reference the venue does not know (refused orders included).
    #[oai(
        path = "/customers/:code/orders/:reference_id",
        method = "get",
        operation_id = "getOrder"
    )]
    async fn get(
        &self,
        state: Data<&Arc<AppState>>,
        _auth: Signed,
        code: customer::Path,
        reference_id: Path<String>,
    ) -> Result<Json<OrderRecord>, ApiError> {
        let view = code.view();
        let customer = code.customer()?.code;
        entry::check_reference_id("reference_id", &reference_id.0)?;
        let order = state
            .engine
            .order_by_ref(&view, customer, &reference_id.0)?
            .ok_or_else(|| Error::not_found(format!("order {} does not exist", reference_id.0)))?;
        Ok(Json(record(&view, &order, Rendering::Read)))
    }

    /// Cancel the open order of a reference.
    ///
    /// Answers the order with status `canceled` and reason USER_INITIATED. 404 when the
    /// venue does not know the reference; 409 ORDER_NOT_CANCELLABLE, naming its status, when
    /// none is open.
    #[oai(
        path = "/customers/:code/orders/:reference_id",
        method = "delete",
        operation_id = "cancelOrder"
    )]
    async fn cancel(
        &self,
        state: Data<&Arc<AppState>>,
        auth: Signed,
        code: customer::Path,
        reference_id: Path<String>,
    ) -> Result<Json<OrderRecord>, ApiError> {
        let customer = code.customer()?.code;
        entry::check_reference_id("reference_id", &reference_id.0)?;
        let command = Command::CancelOrder {
            customer,
            reference_id: reference_id.0,
        };
        Ok(Json(
            Self::submit_order(&state, &auth, command, Rendering::Read).await?,
        ))
    }

    /// Amend the open order of a reference (D5).
    ///
    /// Any of `amount`, `limit_price`, `trigger_price`, `expire_time`. A price change or a
    /// size increase loses time priority. 409 ORDER_NOT_AMENDABLE when none is open.
    #[oai(
        path = "/customers/:code/orders/:reference_id",
        method = "patch",
        operation_id = "amendOrder"
    )]
    async fn amend(
        &self,
        state: Data<&Arc<AppState>>,
        auth: Signed,
        code: customer::Path,
        reference_id: Path<String>,
        body: Json<AmendRequest>,
    ) -> Result<Json<OrderRecord>, ApiError> {
        let command = amend_command(code.customer()?.code, reference_id.0, &body.0)?;
        Ok(Json(
            Self::submit_order(&state, &auth, command, Rendering::Read).await?,
        ))
    }
}

impl poem_openapi::types::Example for OrderRequest {
    fn example() -> Self {
        OrderRequest {
            symbol: "BTC-USDC-PERP".into(),
            side: SideApi::Buy,
            kind: OrderEntryType::Limit,
            reference_id: "my-order-1".into(),
            amount: Some(DecimalIn::example_text("0.0100")),
            cash_amount: None,
            limit_price: Some(DecimalIn::example_text("59000.0")),
            trigger_price: None,
            trigger_price_type: None,
            take_profit_price: None,
            stop_loss_price: None,
            time_in_force: Some(TimeInForceApi::Gtc),
            expire_time: None,
            post_only: Some(false),
            leverage: Some(LeverageIn::example_value(1)),
            customer_ip: Some("203.0.113.7".into()),
        }
    }
}

impl poem_openapi::types::Example for AmendRequest {
    fn example() -> Self {
        AmendRequest {
            amount: Some(DecimalIn::example_text("0.0200")),
            limit_price: Some(DecimalIn::example_text("59100.0")),
            trigger_price: None,
            expire_time: None,
        }
    }
}

impl poem_openapi::types::Example for OrderRecord {
    fn example() -> Self {
        OrderRecord {
            reference_id: "my-order-1".into(),
            customer_code: "5b0b5d2e-8a7e-4b8e-9c59-2f0e6f9b1a11".into(),
            symbol: "BTC-USDC-PERP".into(),
            side: SideApi::Buy,
            kind: "limit".into(),
            amount: Some(DecimalOut("0.0100".into())).into(),
            cash_amount: None,
            filled_amount: DecimalOut("0.0040".into()),
            filled_quote: DecimalOut("236.0".into()),
            avg_fill_price: Some(DecimalOut("59000.0".into())).into(),
            limit_price: Some(DecimalOut("59000.0".into())).into(),
            trigger_price: None.into(),
            trigger_price_type: None.into(),
            take_profit_price: None.into(),
            stop_loss_price: None.into(),
            time_in_force: "GTC".into(),
            expire_time: None.into(),
            post_only: false,
            status: "partially_filled".into(),
            reason: None.into(),
            created: Time("2026-01-01T00:00:01.000Z".into()),
            updated: Time("2026-01-01T00:00:01.000Z".into()),
        }
    }
}

impl poem_openapi::types::Example for OrderPage {
    fn example() -> Self {
        OrderPage {
            data: vec![OrderRecord::example()],
            response_metadata: ResponseMetadata::example(),
        }
    }
}
