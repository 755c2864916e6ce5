//! Order entry rules (interface §4.3 rules 1–14, §2.3; D5): pure checks that turn a decoded
//! request into a [`NewOrder`] or a catalogue error naming the field and the rule.
//!
//! Shape errors are 400 VALIDATION_ERROR; a well-formed order the venue cannot take (off the
//! instrument's tick or lot, above the venue's maximum notional) is 400 ORDER_REJECTED. What
//! needs the engine's state (a duplicate open reference, the margin check, instrument status)
//! is decided by the engine, not here.

use std::net::IpAddr;

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::error::{Error, ErrorCode};
use crate::instrument::InstrumentSpec;
use crate::money::MAX_LEVERAGE;
use crate::order::{OrderType, Side, TimeInForce, TriggerPriceType};
use crate::time::Timestamp;

/// Longest reference_id (§8).
pub const MAX_REFERENCE_ID: usize = 40;

/// The venue's maximum notional of one order, in the quote currency (§7 leaves the value
/// open; documented in the OpenAPI description of order entry).
pub const MAX_ORDER_NOTIONAL: i64 = 10_000_000;

/// An order entry as decoded from the request body, before any rule is checked. It travels
/// in the journaled command as sent: the rules run in the engine, against its prices.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderEntry {
    pub side: Side,
    pub kind: OrderType,
    pub reference_id: String,
    #[serde(with = "crate::decimal::bin_opt")]
    pub amount: Option<Decimal>,
    #[serde(with = "crate::decimal::bin_opt")]
    pub cash_amount: Option<Decimal>,
    #[serde(with = "crate::decimal::bin_opt")]
    pub limit_price: Option<Decimal>,
    #[serde(with = "crate::decimal::bin_opt")]
    pub trigger_price: Option<Decimal>,
    pub trigger_price_type: Option<TriggerPriceType>,
    #[serde(with = "crate::decimal::bin_opt")]
    pub take_profit_price: Option<Decimal>,
    #[serde(with = "crate::decimal::bin_opt")]
    pub stop_loss_price: Option<Decimal>,
    pub time_in_force: Option<TimeInForce>,
    pub expire_time: Option<Timestamp>,
    pub post_only: bool,
    pub leverage: Option<u32>,
    /// Checked at the edge and never stored (§2.3: never echoed); None in commands.
    pub customer_ip: Option<String>,
}

impl OrderEntry {
    /// An entry with only the required fields; every optional one absent.
    pub fn new(side: Side, kind: OrderType, reference_id: impl Into<String>) -> Self {
        OrderEntry {
            side,
            kind,
            reference_id: reference_id.into(),
            amount: None,
            cash_amount: None,
            limit_price: None,
            trigger_price: None,
            trigger_price_type: None,
            take_profit_price: None,
            stop_loss_price: None,
            time_in_force: None,
            expire_time: None,
            post_only: false,
            leverage: None,
            customer_ip: None,
        }
    }

    /// Whether the order could stay open after the request that places it: a limit order
    /// resting GTC or GTD (its default is GTC), or a conditional order waiting on its trigger.
    /// Market orders and IOC or FOK limits end in that request. Decided from the entry as
    /// sent, before the rules: an entry the rules refuse is refused either way.
    pub fn can_rest(&self) -> bool {
        match self.kind {
            OrderType::Market => false,
            OrderType::Limit => {
                matches!(
                    self.time_in_force,
                    None | Some(TimeInForce::Gtc | TimeInForce::Gtd)
                ) && self.cash_amount.is_none()
            }
            _ => true,
        }
    }
}

/// An amend (D5 PATCH): any of these, at least one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Amend {
    #[serde(with = "crate::decimal::bin_opt")]
    pub amount: Option<Decimal>,
    #[serde(with = "crate::decimal::bin_opt")]
    pub limit_price: Option<Decimal>,
    #[serde(with = "crate::decimal::bin_opt")]
    pub trigger_price: Option<Decimal>,
    pub expire_time: Option<Timestamp>,
}

/// The prices rule 8 compares triggers with, and the time expire_time must be after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reference {
    pub last_trade_price: Decimal,
    pub mark_price: Decimal,
    pub now: Timestamp,
}

/// How much an order is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantity {
    /// Contracts, on the instrument's lot grid.
    Amount(Decimal),
    /// Notional in the quote currency, resolved to whole lots at execution (rule 2).
    Cash(Decimal),
}

/// A checked order, as the engine receives it. The reference stays in the entry: the engine
/// takes it from there once, into the shared [`crate::order::ReferenceId`] its records hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewOrder {
    pub side: Side,
    pub kind: OrderType,
    pub quantity: Quantity,
    pub limit_price: Option<Decimal>,
    pub trigger_price: Option<Decimal>,
    pub trigger_price_type: Option<TriggerPriceType>,
    pub take_profit_price: Option<Decimal>,
    pub stop_loss_price: Option<Decimal>,
    pub time_in_force: TimeInForce,
    pub expire_time: Option<Timestamp>,
    pub post_only: bool,
    pub leverage: Option<u32>,
}

fn invalid(message: String) -> Error {
    Error::validation(message)
}

fn rejected(message: String) -> Error {
    Error::new(ErrorCode::OrderRejected, message)
}

/// The venue's maximum notional (400 ORDER_REJECTED past it), at entry and on every amend.
/// The product is checked, not computed blindly: two inputs of 28 digits each would overflow
/// a decimal, and every later figure of the order (reserve, fees, margin) stays small only
/// because this bound holds.
pub fn check_notional(amount: Decimal, price: Decimal) -> Result<(), Error> {
    let max = Decimal::from(MAX_ORDER_NOTIONAL);
    match amount.checked_mul(price) {
        Some(notional) if notional <= max => Ok(()),
        Some(notional) => Err(rejected(format!(
            "notional {notional} exceeds the venue maximum {MAX_ORDER_NOTIONAL}"
        ))),
        None => Err(rejected(format!(
            "notional {amount} × {price} exceeds the venue maximum {MAX_ORDER_NOTIONAL}"
        ))),
    }
}

/// A price on the instrument's tick grid at which one lot stays within the venue maximum
/// notional: so every price the book or a trigger holds is a bounded number of ticks.
pub fn check_price(field: &str, price: Decimal, instrument: &InstrumentSpec) -> Result<(), Error> {
    if !instrument.on_tick(price) {
        return Err(rejected(format!(
            "{field} {price} is not a multiple of the tick size {}",
            instrument.tick_size
        )));
    }
    check_notional(instrument.lot_size, price).map_err(|_| {
        rejected(format!(
            "{field} {price} is too high: one lot ({}) at it exceeds the venue maximum notional \
             {MAX_ORDER_NOTIONAL}",
            instrument.lot_size
        ))
    })
}

/// `reference_id`: 1 to 40 characters of `[a-zA-Z0-9_-]` (§2.3, rule 11's shape).
pub fn check_reference_id(field: &str, id: &str) -> Result<(), Error> {
    let ok = !id.is_empty()
        && id.len() <= MAX_REFERENCE_ID
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    match ok {
        true => Ok(()),
        false => Err(invalid(format!(
            "{field} must be 1 to {MAX_REFERENCE_ID} characters of a-z, A-Z, 0-9, _ and -"
        ))),
    }
}

/// `customer_ip`: IPv4 or IPv6 text, with no port, CIDR suffix or zone (rule 10).
pub fn check_customer_ip(ip: &str) -> Result<(), Error> {
    if ip.contains('%') {
        return Err(invalid(
            "customer_ip must not carry an IPv6 zone (rule 10)".to_owned(),
        ));
    }
    if ip.contains('/') {
        return Err(invalid(
            "customer_ip must not carry a CIDR suffix (rule 10)".to_owned(),
        ));
    }
    ip.parse::<IpAddr>().map(drop).map_err(|_| {
        invalid(format!(
            "customer_ip must be an IPv4 or IPv6 address without a port (rule 10), got {ip:?}"
        ))
    })
}

fn positive(field: &str, value: Option<Decimal>, rule: u8) -> Result<Option<Decimal>, Error> {
    match value {
        // Sign and zero tests: a general comparison costs more, and this runs per field.
        Some(v) if v.is_sign_negative() || v.is_zero() => {
            Err(invalid(format!("{field} must be positive (rule {rule})")))
        }
        other => Ok(other),
    }
}

fn not_used(field: &str, value: bool, kind: OrderType, rule: u8) -> Result<(), Error> {
    match value {
        true => Err(invalid(format!(
            "{field} is not used by {} orders (rule {rule})",
            kind.as_str()
        ))),
        false => Ok(()),
    }
}

fn required(
    field: &str,
    value: Option<Decimal>,
    kind: OrderType,
    rule: u8,
) -> Result<Decimal, Error> {
    value.ok_or_else(|| {
        invalid(format!(
            "{field} is required for {} orders (rule {rule})",
            kind.as_str()
        ))
    })
}

/// Rule 8: a conditional price must not be reached yet and must lie on its own side of the
/// reference price. `take_profit` says which leg: a sell take-profit lies above, a sell
/// stop-loss below; a buy the reverse.
fn check_trigger(
    field: &str,
    price: Decimal,
    side: Side,
    take_profit: bool,
    reference: Decimal,
    which: &str,
) -> Result<(), Error> {
    let above = matches!((side, take_profit), (Side::Sell, true) | (Side::Buy, false));
    let ok = if above {
        price > reference
    } else {
        price < reference
    };
    match ok {
        true => Ok(()),
        false => Err(invalid(format!(
            "{field} {price} is already reached or on the wrong side of the {which} {reference}: a {} {} must be {} it (rule 8)",
            side.as_str(),
            if take_profit {
                "take-profit"
            } else {
                "stop-loss"
            },
            if above { "above" } else { "below" },
        ))),
    }
}

/// Checks every entry rule that needs no engine state and resolves the defaults of D5.
pub fn validate(
    entry: &OrderEntry,
    instrument: &InstrumentSpec,
    reference: &Reference,
) -> Result<NewOrder, Error> {
    let kind = entry.kind;
    check_reference_id("reference_id", &entry.reference_id)?;
    if let Some(ip) = &entry.customer_ip {
        check_customer_ip(ip)?;
    }
    // Rule 9: leverage selects an account-wide profile, at most max_leverage.
    if let Some(l) = entry.leverage.filter(|l| *l == 0 || *l > MAX_LEVERAGE) {
        return Err(invalid(format!(
            "leverage must be between 1 and max_leverage {MAX_LEVERAGE}, got {l} (rule 9)"
        )));
    }
    let amount = positive("amount", entry.amount, 1)?;
    let cash = positive("cash_amount", entry.cash_amount, 2)?;
    let limit_price = positive("limit_price", entry.limit_price, 3)?;
    let trigger_price = positive("trigger_price", entry.trigger_price, 4)?;
    let take_profit = positive("take_profit_price", entry.take_profit_price, 5)?;
    let stop_loss = positive("stop_loss_price", entry.stop_loss_price, 5)?;

    // Rules 1 and 2: exactly one of amount and cash_amount for market and limit; amount for
    // every other type.
    let quantity = match (kind, amount, cash) {
        (OrderType::Market | OrderType::Limit, Some(_), Some(_)) => {
            return Err(invalid(
                "give exactly one of amount and cash_amount (rule 1)".to_owned(),
            ));
        }
        (OrderType::Market | OrderType::Limit, None, None) => {
            return Err(invalid(
                "amount or cash_amount is required (rule 1)".to_owned(),
            ));
        }
        (OrderType::Market | OrderType::Limit, None, Some(c)) => Quantity::Cash(c),
        (_, _, Some(_)) => {
            return Err(invalid(format!(
                "cash_amount is not supported for {} orders (rule 2)",
                kind.as_str()
            )));
        }
        (_, None, None) => {
            return Err(invalid(format!(
                "amount is required for {} orders (rule 1)",
                kind.as_str()
            )));
        }
        (_, Some(a), None) => Quantity::Amount(a),
    };

    // Rules 3, 4, 5 and 12: each price field is required where the type uses it and refused
    // where it does not, never silently dropped.
    let uses_limit = matches!(
        kind,
        OrderType::Limit | OrderType::StopLossLimit | OrderType::TakeProfitLimit
    );
    let uses_trigger = matches!(
        kind,
        OrderType::StopLoss
            | OrderType::StopLossLimit
            | OrderType::TakeProfit
            | OrderType::TakeProfitLimit
    );
    let combo = kind == OrderType::TakeProfitStopLoss;
    not_used("limit_price", limit_price.is_some() && !uses_limit, kind, 3)?;
    not_used(
        "trigger_price",
        trigger_price.is_some() && !uses_trigger,
        kind,
        4,
    )?;
    not_used(
        "take_profit_price",
        take_profit.is_some() && !combo,
        kind,
        5,
    )?;
    not_used("stop_loss_price", stop_loss.is_some() && !combo, kind, 5)?;
    let limit_price = if uses_limit {
        Some(required("limit_price", limit_price, kind, 3)?)
    } else {
        None
    };
    let trigger_price = if uses_trigger {
        Some(required("trigger_price", trigger_price, kind, 4)?)
    } else {
        None
    };
    let (take_profit, stop_loss) = if combo {
        (
            Some(required("take_profit_price", take_profit, kind, 5)?),
            Some(required("stop_loss_price", stop_loss, kind, 5)?),
        )
    } else {
        (None, None)
    };

    // Rule 6: the trigger price type is refused on market and limit, and must match otherwise.
    let trigger_price_type = match (kind, entry.trigger_price_type) {
        (OrderType::Market | OrderType::Limit, Some(_)) => {
            return Err(invalid(format!(
                "trigger_price_type is not used by {} orders (rule 6)",
                kind.as_str()
            )));
        }
        (OrderType::Market | OrderType::Limit, None) => None,
        (OrderType::TakeProfitStopLoss, Some(TriggerPriceType::TradePrice)) => {
            return Err(invalid(
                "trigger_price_type must be mark_price for take_profit_stop_loss orders (rule 6)"
                    .to_owned(),
            ));
        }
        (OrderType::TakeProfitStopLoss, _) => Some(TriggerPriceType::MarkPrice),
        (_, Some(TriggerPriceType::MarkPrice)) => {
            return Err(invalid(format!(
                "trigger_price_type must be trade_price for {} orders (rule 6)",
                kind.as_str()
            )));
        }
        (_, _) => Some(TriggerPriceType::TradePrice),
    };

    // Rules 2, 7 and 13, with the defaults of D5.
    let time_in_force = match (kind.required_time_in_force(), entry.time_in_force) {
        (Some(required), Some(given)) if given != required => {
            return Err(invalid(format!(
                "time_in_force must be {} for {} orders (rule 7), got {}",
                required.as_str(),
                kind.as_str(),
                given.as_str()
            )));
        }
        (Some(required), _) => required,
        (None, Some(tif)) => tif,
        (None, None) if kind == OrderType::Limit && matches!(quantity, Quantity::Amount(_)) => {
            TimeInForce::Gtc
        }
        (None, None) => TimeInForce::Ioc,
    };
    if matches!(quantity, Quantity::Cash(_)) && time_in_force != TimeInForce::Ioc {
        return Err(invalid(format!(
            "cash_amount orders require time_in_force IOC (rule 2), got {}",
            time_in_force.as_str()
        )));
    }
    if kind == OrderType::Market && matches!(time_in_force, TimeInForce::Gtc | TimeInForce::Gtd) {
        return Err(invalid(format!(
            "market orders cannot rest: time_in_force must be IOC or FOK, got {}",
            time_in_force.as_str()
        )));
    }
    let expire_time = match (time_in_force, entry.expire_time) {
        (TimeInForce::Gtd, None) => {
            return Err(invalid(
                "expire_time is required for GTD orders (rule 13)".to_owned(),
            ));
        }
        (TimeInForce::Gtd, Some(t)) if t <= reference.now => {
            return Err(invalid(format!(
                "expire_time must be in the future (now {}) (rule 13)",
                reference.now
            )));
        }
        (TimeInForce::Gtd, Some(t)) => Some(t),
        (_, Some(_)) => {
            return Err(invalid(
                "expire_time is only used by GTD orders (rule 13)".to_owned(),
            ));
        }
        (_, None) => None,
    };
    if entry.post_only && kind != OrderType::Limit {
        return Err(invalid(format!(
            "post_only applies to limit orders only, not {} orders",
            kind.as_str()
        )));
    }

    // Rule 8: triggers must not be reached yet and must lie on the right side.
    let side = entry.side;
    match kind {
        OrderType::StopLoss | OrderType::StopLossLimit => {
            check_trigger(
                "trigger_price",
                trigger_price.expect("required above"),
                side,
                false,
                reference.last_trade_price,
                "last trade price",
            )?;
        }
        OrderType::TakeProfit | OrderType::TakeProfitLimit => {
            check_trigger(
                "trigger_price",
                trigger_price.expect("required above"),
                side,
                true,
                reference.last_trade_price,
                "last trade price",
            )?;
        }
        OrderType::TakeProfitStopLoss => {
            check_trigger(
                "take_profit_price",
                take_profit.expect("required above"),
                side,
                true,
                reference.mark_price,
                "mark price",
            )?;
            check_trigger(
                "stop_loss_price",
                stop_loss.expect("required above"),
                side,
                false,
                reference.mark_price,
                "mark price",
            )?;
        }
        OrderType::Market | OrderType::Limit => {}
    }

    // The instrument's grid and the venue maximum: well-formed, but not takeable.
    for (field, price) in [
        ("limit_price", limit_price),
        ("trigger_price", trigger_price),
        ("take_profit_price", take_profit),
        ("stop_loss_price", stop_loss),
    ] {
        if let Some(p) = price {
            check_price(field, p, instrument)?;
        }
    }
    if let Quantity::Amount(a) = quantity {
        if !instrument.on_lot(a) {
            return Err(rejected(format!(
                "amount {a} is not a multiple of the lot size {}",
                instrument.lot_size
            )));
        }
        let price = limit_price
            .or(trigger_price)
            .unwrap_or(reference.mark_price);
        check_notional(a, price)?;
    }
    if let Quantity::Cash(c) = quantity
        && c > Decimal::from(MAX_ORDER_NOTIONAL)
    {
        return Err(rejected(format!(
            "cash_amount {c} exceeds the venue maximum notional {MAX_ORDER_NOTIONAL}"
        )));
    }

    Ok(NewOrder {
        side,
        kind,
        quantity,
        limit_price,
        trigger_price,
        trigger_price_type,
        take_profit_price: take_profit,
        stop_loss_price: stop_loss,
        time_in_force,
        expire_time,
        post_only: entry.post_only,
        leverage: entry.leverage,
    })
}

#[cfg(test)]
#[path = "entry_tests.rs"]
mod tests;
