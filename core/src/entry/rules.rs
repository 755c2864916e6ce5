//! The order-entry rules of §4.3, one function each, run by [`validate`] in a fixed order.

use std::net::IpAddr;

use rust_decimal::Decimal;

use super::{
    GridUnits, MAX_ORDER_NOTIONAL, MAX_REFERENCE_ID, NewOrder, OrderEntry, OrderTerms, Quantity,
    Reference,
};
use crate::decimal::whole_units;
use crate::error::{Error, ErrorCode};
use crate::instrument::InstrumentSpec;
use crate::money::MAX_LEVERAGE;
use crate::order::{OrderType, Side, TimeInForce, TriggerPriceType};
use crate::time::Timestamp;

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
    let bound = MAX_ORDER_NOTIONAL.unsigned_abs();
    if crate::decimal::product_at_most(amount, price, bound) == Some(true) {
        return Ok(());
    }
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
/// notional: so every price the book or a trigger holds is a bounded number of ticks. Its
/// ticks (see [`GridUnits`]).
pub fn check_price(
    field: &str,
    price: Decimal,
    instrument: &InstrumentSpec,
) -> Result<Option<i128>, Error> {
    let ticks = whole_units(price, instrument.tick_size);
    // No whole number of ticks in i128: on the grid only if the remainder says so.
    if ticks.is_none() && !instrument.on_tick(price) {
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
    })?;
    Ok(ticks)
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

/// A quantity or price must be positive (§4.3 rules 1–5): the refusal an entry and an amend
/// of the field get alike.
pub fn check_positive(field: &str, value: Decimal, rule: u8) -> Result<(), Error> {
    positive(field, Some(value), rule).map(|_| ())
}

/// An amount sits on the instrument's lot grid (well-formed, but not takeable otherwise).
/// Its lots (see [`GridUnits`]).
pub fn check_lot(amount: Decimal, instrument: &InstrumentSpec) -> Result<Option<i128>, Error> {
    let lots = whole_units(amount, instrument.lot_size);
    match lots.is_some() || instrument.on_lot(amount) {
        true => Ok(lots),
        false => Err(rejected(format!(
            "amount {amount} is not a multiple of the lot size {}",
            instrument.lot_size
        ))),
    }
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

/// Checks every entry rule that needs no engine state and resolves the defaults of D5. The
/// rules run in this order, so a request breaking several is told of the first.
pub fn validate(
    entry: &OrderEntry,
    instrument: &InstrumentSpec,
    reference: &Reference,
) -> Result<NewOrder, Error> {
    check_reference_id("reference_id", &entry.reference_id)?;
    if let Some(ip) = &entry.customer_ip {
        check_customer_ip(ip)?;
    }
    check_leverage(entry.leverage)?;
    let given = Given::positive(entry)?;
    let size = size(entry.kind, given.amount, given.cash)?;
    let terms = terms(entry.kind, size, &given)?;
    check_trigger_price_type(entry.kind, entry.trigger_price_type)?;
    let time_in_force = time_in_force(entry.kind, entry.time_in_force, terms)?;
    let expire_time = expire_time(time_in_force, entry.expire_time, reference.now)?;
    check_post_only(entry.post_only, entry.kind)?;
    check_triggers(&terms, entry.side, reference)?;
    let units = check_grid(&terms, instrument, reference)?;
    Ok(NewOrder {
        side: entry.side,
        terms,
        time_in_force,
        expire_time,
        post_only: entry.post_only,
        leverage: entry.leverage,
        units,
    })
}

/// Rule 9: leverage selects an account-wide profile, at most max_leverage.
fn check_leverage(leverage: Option<u32>) -> Result<(), Error> {
    match leverage.filter(|l| *l == 0 || *l > MAX_LEVERAGE) {
        Some(l) => Err(invalid(format!(
            "leverage must be between 1 and max_leverage {MAX_LEVERAGE}, got {l} (rule 9)"
        ))),
        None => Ok(()),
    }
}

/// The quantities and prices as given, each positive where given (rules 1–5).
struct Given {
    amount: Option<Decimal>,
    cash: Option<Decimal>,
    limit: Option<Decimal>,
    trigger: Option<Decimal>,
    take_profit: Option<Decimal>,
    stop_loss: Option<Decimal>,
}

impl Given {
    fn positive(entry: &OrderEntry) -> Result<Self, Error> {
        Ok(Given {
            amount: positive("amount", entry.amount, 1)?,
            cash: positive("cash_amount", entry.cash_amount, 2)?,
            limit: positive("limit_price", entry.limit_price, 3)?,
            trigger: positive("trigger_price", entry.trigger_price, 4)?,
            take_profit: positive("take_profit_price", entry.take_profit_price, 5)?,
            stop_loss: positive("stop_loss_price", entry.stop_loss_price, 5)?,
        })
    }
}

/// How much, by the kind of order: market and limit orders in contracts or cash, the
/// conditional ones in contracts.
enum Size {
    Either(Quantity),
    Contracts(Decimal),
}

/// Rules 1 and 2: exactly one of amount and cash_amount for market and limit; amount for
/// every other type.
fn size(kind: OrderType, amount: Option<Decimal>, cash: Option<Decimal>) -> Result<Size, Error> {
    let either = matches!(kind, OrderType::Market | OrderType::Limit);
    match (either, amount, cash) {
        (true, Some(_), Some(_)) => Err(invalid(
            "give exactly one of amount and cash_amount (rule 1)".to_owned(),
        )),
        (true, None, None) => Err(invalid(
            "amount or cash_amount is required (rule 1)".to_owned(),
        )),
        (true, None, Some(c)) => Ok(Size::Either(Quantity::Cash(c))),
        (true, Some(a), None) => Ok(Size::Either(Quantity::Amount(a))),
        (false, _, Some(_)) => Err(invalid(format!(
            "cash_amount is not supported for {} orders (rule 2)",
            kind.as_str()
        ))),
        (false, None, None) => Err(invalid(format!(
            "amount is required for {} orders (rule 1)",
            kind.as_str()
        ))),
        (false, Some(a), None) => Ok(Size::Contracts(a)),
    }
}

/// Rules 3, 4, 5 and 12: each price field is required where the type uses it and refused
/// where it does not, never silently dropped. Every refusal of a field comes before any
/// requirement.
fn terms(kind: OrderType, size: Size, given: &Given) -> Result<OrderTerms, Error> {
    let with_limit = matches!(kind, OrderType::StopLossLimit | OrderType::TakeProfitLimit);
    let uses_limit = kind == OrderType::Limit || with_limit;
    let uses_trigger = kind.is_conditional() && kind != OrderType::TakeProfitStopLoss;
    let combo = kind == OrderType::TakeProfitStopLoss;
    not_used("limit_price", given.limit.is_some() && !uses_limit, kind, 3)?;
    not_used(
        "trigger_price",
        given.trigger.is_some() && !uses_trigger,
        kind,
        4,
    )?;
    not_used(
        "take_profit_price",
        given.take_profit.is_some() && !combo,
        kind,
        5,
    )?;
    not_used(
        "stop_loss_price",
        given.stop_loss.is_some() && !combo,
        kind,
        5,
    )?;
    Ok(match size {
        Size::Either(quantity) if kind == OrderType::Limit => OrderTerms::Limit {
            quantity,
            limit_price: required("limit_price", given.limit, kind, 3)?,
        },
        Size::Either(quantity) => OrderTerms::Market(quantity),
        Size::Contracts(amount) if combo => OrderTerms::Combo {
            amount,
            take_profit_price: required("take_profit_price", given.take_profit, kind, 5)?,
            stop_loss_price: required("stop_loss_price", given.stop_loss, kind, 5)?,
        },
        Size::Contracts(amount) => {
            let limit_price = match with_limit {
                true => Some(required("limit_price", given.limit, kind, 3)?),
                false => None,
            };
            OrderTerms::Conditional {
                kind,
                amount,
                trigger_price: required("trigger_price", given.trigger, kind, 4)?,
                limit_price,
            }
        }
    })
}

/// Rule 6: the trigger price type is refused on market and limit, and must match otherwise
/// (the type decides it: [`NewOrder::trigger_price_type`]).
fn check_trigger_price_type(kind: OrderType, given: Option<TriggerPriceType>) -> Result<(), Error> {
    match (kind, given) {
        (OrderType::Market | OrderType::Limit, Some(_)) => Err(invalid(format!(
            "trigger_price_type is not used by {} orders (rule 6)",
            kind.as_str()
        ))),
        (OrderType::TakeProfitStopLoss, Some(TriggerPriceType::TradePrice)) => Err(invalid(
            "trigger_price_type must be mark_price for take_profit_stop_loss orders (rule 6)"
                .to_owned(),
        )),
        (OrderType::Market | OrderType::Limit | OrderType::TakeProfitStopLoss, _) => Ok(()),
        (_, Some(TriggerPriceType::MarkPrice)) => Err(invalid(format!(
            "trigger_price_type must be trade_price for {} orders (rule 6)",
            kind.as_str()
        ))),
        (_, _) => Ok(()),
    }
}

/// Rules 2, 7 and 13, with the defaults of D5; a market order never rests.
fn time_in_force(
    kind: OrderType,
    given: Option<TimeInForce>,
    terms: OrderTerms,
) -> Result<TimeInForce, Error> {
    let cash = matches!(
        terms,
        OrderTerms::Market(Quantity::Cash(_))
            | OrderTerms::Limit {
                quantity: Quantity::Cash(_),
                ..
            }
    );
    let tif = match (kind.required_time_in_force(), given) {
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
        (None, None) if kind == OrderType::Limit && !cash => TimeInForce::Gtc,
        (None, None) => TimeInForce::Ioc,
    };
    if cash && tif != TimeInForce::Ioc {
        return Err(invalid(format!(
            "cash_amount orders require time_in_force IOC (rule 2), got {}",
            tif.as_str()
        )));
    }
    if kind == OrderType::Market && matches!(tif, TimeInForce::Gtc | TimeInForce::Gtd) {
        return Err(invalid(format!(
            "market orders cannot rest: time_in_force must be IOC or FOK, got {}",
            tif.as_str()
        )));
    }
    Ok(tif)
}

/// Rule 13: GTD orders, and only they, carry an expire_time in the future.
fn expire_time(
    tif: TimeInForce,
    given: Option<Timestamp>,
    now: Timestamp,
) -> Result<Option<Timestamp>, Error> {
    match (tif, given) {
        (TimeInForce::Gtd, None) => Err(invalid(
            "expire_time is required for GTD orders (rule 13)".to_owned(),
        )),
        (TimeInForce::Gtd, Some(t)) if t <= now => Err(invalid(format!(
            "expire_time must be in the future (now {now}) (rule 13)"
        ))),
        (TimeInForce::Gtd, Some(t)) => Ok(Some(t)),
        (_, Some(_)) => Err(invalid(
            "expire_time is only used by GTD orders (rule 13)".to_owned(),
        )),
        (_, None) => Ok(None),
    }
}

fn check_post_only(post_only: bool, kind: OrderType) -> Result<(), Error> {
    match post_only && kind != OrderType::Limit {
        true => Err(invalid(format!(
            "post_only applies to limit orders only, not {} orders",
            kind.as_str()
        ))),
        false => Ok(()),
    }
}

/// Rule 8: triggers must not be reached yet and must lie on the right side.
fn check_triggers(terms: &OrderTerms, side: Side, reference: &Reference) -> Result<(), Error> {
    match *terms {
        OrderTerms::Conditional {
            kind,
            trigger_price,
            ..
        } => {
            let take_profit = matches!(kind, OrderType::TakeProfit | OrderType::TakeProfitLimit);
            let last = reference.last_trade_price;
            check_trigger(
                "trigger_price",
                trigger_price,
                side,
                take_profit,
                last,
                "last trade price",
            )
        }
        OrderTerms::Combo {
            take_profit_price,
            stop_loss_price,
            ..
        } => {
            let mark = reference.mark_price;
            check_trigger(
                "take_profit_price",
                take_profit_price,
                side,
                true,
                mark,
                "mark price",
            )?;
            check_trigger(
                "stop_loss_price",
                stop_loss_price,
                side,
                false,
                mark,
                "mark price",
            )
        }
        OrderTerms::Market(_) | OrderTerms::Limit { .. } => Ok(()),
    }
}

/// The instrument's grid and the venue maximum: well-formed, but not takeable. The limit
/// price and the amount in the grid's units.
fn check_grid(
    terms: &OrderTerms,
    instrument: &InstrumentSpec,
    reference: &Reference,
) -> Result<GridUnits, Error> {
    let (limit, trigger, take_profit, stop_loss) = match *terms {
        OrderTerms::Market(_) => (None, None, None, None),
        OrderTerms::Limit { limit_price, .. } => (Some(limit_price), None, None, None),
        OrderTerms::Conditional {
            trigger_price,
            limit_price,
            ..
        } => (limit_price, Some(trigger_price), None, None),
        OrderTerms::Combo {
            take_profit_price,
            stop_loss_price,
            ..
        } => (None, None, Some(take_profit_price), Some(stop_loss_price)),
    };
    let limit_ticks = limit.map(|p| check_price("limit_price", p, instrument));
    let mut units = GridUnits {
        limit_ticks: limit_ticks.transpose()?.flatten(),
        lots: None,
    };
    for (field, price) in [
        ("trigger_price", trigger),
        ("take_profit_price", take_profit),
        ("stop_loss_price", stop_loss),
    ] {
        if let Some(p) = price {
            check_price(field, p, instrument)?;
        }
    }
    match terms.quantity() {
        Quantity::Amount(a) => {
            units.lots = check_lot(a, instrument)?;
            check_notional(a, limit.or(trigger).unwrap_or(reference.mark_price))?;
        }
        Quantity::Cash(c) if c > Decimal::from(MAX_ORDER_NOTIONAL) => {
            return Err(rejected(format!(
                "cash_amount {c} exceeds the venue maximum notional {MAX_ORDER_NOTIONAL}"
            )));
        }
        Quantity::Cash(_) => {}
    }
    Ok(units)
}
