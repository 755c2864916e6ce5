//! Order entry and amend (§4.3, D5): the bodies as the API documents them, the side, type,
//! time-in-force and trigger-price-type words, and the commands the bodies ask for.

use perpsim_core::Error;
use perpsim_core::decimal::Sign;
use perpsim_core::entry::{self, Amend, OrderEntry};
use perpsim_core::ids::CustomerCode;
use perpsim_core::order as core_order;
use perpsim_core::time::Timestamp;
use perpsim_systems::command::{AmendOrder, PlaceOrder};
use poem_openapi::{Enum, Object};

use crate::contract::Text;
use crate::wire::{DecimalIn, LeverageIn, NumberIn};

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
pub fn place_command(customer: CustomerCode, body: &OrderRequest) -> Result<PlaceOrder, Error> {
    Ok(PlaceOrder {
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
) -> Result<AmendOrder, Error> {
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
    Ok(AmendOrder {
        customer,
        reference_id,
        amend,
    })
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
