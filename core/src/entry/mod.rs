//! Order entry rules (interface §4.3 rules 1–14, §2.3; D5): pure checks that turn a decoded
//! request into a [`NewOrder`] or a catalogue error naming the field and the rule.
//!
//! Shape errors are 400 VALIDATION_ERROR; a well-formed order the venue cannot take (off the
//! instrument's tick or lot, above the venue's maximum notional) is 400 ORDER_REJECTED. What
//! needs the engine's state (a duplicate open reference, the margin check, instrument status)
//! is decided by the engine, not here.

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

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

/// A checked order, as the engine receives it: each order type's fields in its own
/// [`OrderTerms`], so what the rules guarantee (a limit order's price, a stop's trigger) is the
/// type's to hold, not the reader's to expect. The reference stays in the entry: the engine
/// takes it from there once, into the shared [`crate::order::ReferenceId`] its records hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewOrder {
    pub side: Side,
    pub terms: OrderTerms,
    pub time_in_force: TimeInForce,
    /// GTD orders only (rule 13).
    pub expire_time: Option<Timestamp>,
    /// Limit orders only.
    pub post_only: bool,
    pub leverage: Option<u32>,
    /// Its limit price and amount in the instrument's units, as the grid's check found them.
    pub units: GridUnits,
}

/// An order's limit price in whole ticks and its amount in whole lots, as entry found them
/// while checking the grid: the matching path trades in those units, and working them out
/// again cost a division each on every order's way to the book. None where the order has
/// none (a market order's limit, a cash order's lots), or where the units leave i128 (on the
/// grid, but beyond any instrument's bounds): the engine works them out itself then.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GridUnits {
    pub limit_ticks: Option<i128>,
    pub lots: Option<i128>,
}

/// What each order type trades on (§4.3 rules 1–8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderTerms {
    /// `market`: contracts or cash, IOC or FOK.
    Market(Quantity),
    /// `limit`: contracts or cash (cash: IOC, rule 2) at a limit price.
    Limit {
        quantity: Quantity,
        limit_price: Decimal,
    },
    /// `stop_loss`, `take_profit` (market once fired) and their `_limit` forms, on the last
    /// trade price (rule 6).
    Conditional {
        kind: OrderType,
        amount: Decimal,
        trigger_price: Decimal,
        limit_price: Option<Decimal>,
    },
    /// `take_profit_stop_loss`: both legs on the mark price (rule 6).
    Combo {
        amount: Decimal,
        take_profit_price: Decimal,
        stop_loss_price: Decimal,
    },
}

impl OrderTerms {
    pub fn quantity(&self) -> Quantity {
        match *self {
            OrderTerms::Market(quantity) | OrderTerms::Limit { quantity, .. } => quantity,
            OrderTerms::Conditional { amount, .. } | OrderTerms::Combo { amount, .. } => {
                Quantity::Amount(amount)
            }
        }
    }
}

impl NewOrder {
    pub fn kind(&self) -> OrderType {
        match self.terms {
            OrderTerms::Market(_) => OrderType::Market,
            OrderTerms::Limit { .. } => OrderType::Limit,
            OrderTerms::Conditional { kind, .. } => kind,
            OrderTerms::Combo { .. } => OrderType::TakeProfitStopLoss,
        }
    }

    pub fn quantity(&self) -> Quantity {
        self.terms.quantity()
    }

    /// The price it trades at no worse than: a limit order's, or a fired `_limit` order's.
    pub fn limit_price(&self) -> Option<Decimal> {
        match self.terms {
            OrderTerms::Limit { limit_price, .. } => Some(limit_price),
            OrderTerms::Conditional { limit_price, .. } => limit_price,
            OrderTerms::Market(_) | OrderTerms::Combo { .. } => None,
        }
    }

    pub fn trigger_price(&self) -> Option<Decimal> {
        match self.terms {
            OrderTerms::Conditional { trigger_price, .. } => Some(trigger_price),
            _ => None,
        }
    }

    pub fn take_profit_price(&self) -> Option<Decimal> {
        match self.terms {
            OrderTerms::Combo {
                take_profit_price, ..
            } => Some(take_profit_price),
            _ => None,
        }
    }

    pub fn stop_loss_price(&self) -> Option<Decimal> {
        match self.terms {
            OrderTerms::Combo {
                stop_loss_price, ..
            } => Some(stop_loss_price),
            _ => None,
        }
    }

    /// Rule 6: conditional orders watch the last trade price, the combo the mark.
    pub fn trigger_price_type(&self) -> Option<TriggerPriceType> {
        match self.terms {
            OrderTerms::Market(_) | OrderTerms::Limit { .. } => None,
            OrderTerms::Conditional { .. } => Some(TriggerPriceType::TradePrice),
            OrderTerms::Combo { .. } => Some(TriggerPriceType::MarkPrice),
        }
    }
}

mod rules;

pub use rules::{
    check_customer_ip, check_lot, check_notional, check_positive, check_price, check_reference_id,
    validate,
};

#[cfg(test)]
mod tests;
