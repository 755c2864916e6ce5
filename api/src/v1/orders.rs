//! Orders (interface §2.3, §3.1, §4.2, §4.3; D5): entry, the open-orders list, single read,
//! cancel and amend. The bodies are read into commands by `requests::orders`; every rule
//! that needs prices or state runs in the engine.

use std::sync::Arc;

use perpsim_core::Error;
use perpsim_core::clock::ClockMode;
use perpsim_core::entry::{self};
use perpsim_core::ids::CustomerCode;
use perpsim_core::order::{self as core_order, OrderStatus};
use perpsim_systems::records::fault_plan::PPM;
use perpsim_systems::records::order::Order;
use perpsim_systems::{ReadView, Submit};
use poem::web::Data;
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object, OpenApi};

use super::{Signed, Tag, customer};
use crate::contract::Nullable;
use crate::errors::ApiError;
use crate::pagination::{self, PageQuery, PageRequest, ResponseMetadata, Scope};
use crate::requests::orders::{AmendRequest, OrderRequest, SideApi, amend_command, place_command};
use crate::state::AppState;
use crate::state::host::stopped;
use crate::wire::{DecimalOut, Time};
use perpsim_systems::command::CancelOrder;

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
    /// `named`: the customer and reference a cancel or amend names, for its answer when
    /// none is open under it.
    async fn submit_order<C: Submit<Answer = Arc<Order>> + Send + 'static>(
        state: &AppState,
        auth: &Signed,
        command: C,
        named: Option<(CustomerCode, String)>,
        how: Rendering,
    ) -> Result<OrderRecord, ApiError> {
        let answer = match &state.latency {
            None => state.engine.submit(command, auth.admission()).await,
            // The entry reaches the venue its drawn delay later (`state::latency`).
            Some(latency) => {
                let clock = state.engine.view().clock;
                let (engine, admission) = (state.engine.clone(), auth.0.clone());
                let send = async move { engine.submit(command, &admission).await };
                let manual = clock.mode == ClockMode::Manual;
                let sent = latency.enter(manual, clock.now, send).await;
                sent.unwrap_or_else(|| Err(stopped()))
            }
        };
        match answer {
            Ok(order) => Ok(record(&state.engine.view(), &order, how)),
            // None open: named from the projection, which the engine keeps nothing of.
            Err(e) => match named {
                Some((customer, reference)) if core_order::is_not_open(&e) => {
                    Err(state.engine.name_not_open(e, customer, &reference).into())
                }
                _ => Err(e.into()),
            },
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
        let answer = Self::submit_order(&state, &auth, command, None, Rendering::Entry).await;
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
    async fn list(
        &self,
        state: Data<&Arc<AppState>>,
        auth: Signed,
        code: customer::Path,
        status: Query<Option<String>>,
        paging: PageQuery,
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
        let req = PageRequest::of(&state.cursors, &scope, &paging)?;
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
        let named = Some((customer, reference_id.0.clone()));
        let command = CancelOrder {
            customer,
            reference_id: reference_id.0,
        };
        Ok(Json(
            Self::submit_order(&state, &auth, command, named, Rendering::Read).await?,
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
        let named = Some((command.customer, command.reference_id.clone()));
        Ok(Json(
            Self::submit_order(&state, &auth, command, named, Rendering::Read).await?,
        ))
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
