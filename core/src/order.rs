//! Order vocabulary shared by the engine and the API (interface §2.3, D5).

use serde::{Deserialize, Serialize};

use crate::error::{Error, ErrorCode};

/// A client order id (§2.3) as the engine holds it: shared, so an order, its trade records,
/// its ledger rows and the read view's reference index hold one allocation between them.
/// It serializes exactly as a string.
pub type ReferenceId = std::sync::Arc<str>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Side {
    Buy,
    Sell,
}

impl Side {
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Buy => "buy",
            Side::Sell => "sell",
        }
    }

    pub fn opposite(self) -> Side {
        match self {
            Side::Buy => Side::Sell,
            Side::Sell => Side::Buy,
        }
    }
}

/// Order types on entry (interface §2.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum OrderType {
    Market,
    Limit,
    StopLoss,
    StopLossLimit,
    TakeProfit,
    TakeProfitLimit,
    TakeProfitStopLoss,
}

impl OrderType {
    pub fn as_str(self) -> &'static str {
        match self {
            OrderType::Market => "market",
            OrderType::Limit => "limit",
            OrderType::StopLoss => "stop_loss",
            OrderType::StopLossLimit => "stop_loss_limit",
            OrderType::TakeProfit => "take_profit",
            OrderType::TakeProfitLimit => "take_profit_limit",
            OrderType::TakeProfitStopLoss => "take_profit_stop_loss",
        }
    }

    /// The time in force a conditional type requires (rule 7).
    pub fn required_time_in_force(self) -> Option<TimeInForce> {
        match self {
            OrderType::StopLoss | OrderType::TakeProfit | OrderType::TakeProfitStopLoss => {
                Some(TimeInForce::Ioc)
            }
            OrderType::StopLossLimit | OrderType::TakeProfitLimit => Some(TimeInForce::Gtc),
            OrderType::Market | OrderType::Limit => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimeInForce {
    Ioc,
    Fok,
    Gtc,
    Gtd,
}

impl TimeInForce {
    pub fn as_str(self) -> &'static str {
        match self {
            TimeInForce::Ioc => "IOC",
            TimeInForce::Fok => "FOK",
            TimeInForce::Gtc => "GTC",
            TimeInForce::Gtd => "GTD",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TriggerPriceType {
    TradePrice,
    MarkPrice,
}

impl OrderType {
    /// The mechanical type the venue stores, reported on reads (rule 14, D5).
    pub fn stored_str(self) -> &'static str {
        match self {
            OrderType::StopLoss | OrderType::TakeProfit => "stop_market",
            OrderType::StopLossLimit | OrderType::TakeProfitLimit => "stop_limit",
            other => other.as_str(),
        }
    }

    /// Waits for a trigger before it reaches the book.
    pub fn is_conditional(self) -> bool {
        !matches!(self, OrderType::Market | OrderType::Limit)
    }
}

/// Order status (interface §3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum OrderStatus {
    Open,
    PartiallyFilled,
    Filled,
    Canceled,
    Expired,
    Rejected,
}

impl OrderStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            OrderStatus::Open => "open",
            OrderStatus::PartiallyFilled => "partially_filled",
            OrderStatus::Filled => "filled",
            OrderStatus::Canceled => "canceled",
            OrderStatus::Expired => "expired",
            OrderStatus::Rejected => "rejected",
        }
    }

    /// Still working: resting, or waiting for its trigger.
    pub fn is_open(self) -> bool {
        matches!(self, OrderStatus::Open | OrderStatus::PartiallyFilled)
    }
}

/// The answer to a cancel (`conflict` ORDER_NOT_CANCELLABLE) or an amend (ORDER_NOT_AMENDABLE)
/// of a reference with no open order (§3.1): 409 naming the status of the latest order that
/// ended under it (what the single read returns), 404 when the venue never knew the
/// reference. The engine answers `conflict` alone: it keeps nothing of ended orders'
/// references (issue 37), so who answers names the latest — the server from the journal's
/// projection, a replay from the orders it saw end.
pub fn not_open(conflict: ErrorCode, reference: &str, latest: Option<OrderStatus>) -> Error {
    let verb = match conflict {
        ErrorCode::OrderNotAmendable => "amended",
        _ => "cancelled",
    };
    match latest {
        None => Error::not_found(format!("order {reference} does not exist")),
        Some(status) => Error::new(
            conflict,
            format!(
                "order {reference} is {} and cannot be {verb}",
                status.as_str()
            ),
        ),
    }
}

/// Whether an engine's answer is the bare "none open" of [`not_open`], still to be named.
pub fn is_not_open(e: &Error) -> bool {
    matches!(
        e.code,
        ErrorCode::OrderNotCancellable | ErrorCode::OrderNotAmendable
    )
}

/// Why an order ended without filling (interface §2.3). `InsufficientFunds` is a
/// fired stop_loss_limit or take_profit_limit order refused because the initial margin of
/// the part that would rest and open exposure was not available (status rejected).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EndReason {
    UserInitiated,
    TimeInForce,
    Expired,
    InsufficientFunds,
    /// Cancelled by a liquidation of the customer (D10).
    Liquidation,
}

impl EndReason {
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::UserInitiated => "USER_INITIATED",
            EndReason::TimeInForce => "TIME_IN_FORCE",
            EndReason::Expired => "EXPIRED",
            EndReason::InsufficientFunds => "INSUFFICIENT_FUNDS",
            EndReason::Liquidation => "LIQUIDATION",
        }
    }
}

impl TriggerPriceType {
    pub fn as_str(self) -> &'static str {
        match self {
            TriggerPriceType::TradePrice => "trade_price",
            TriggerPriceType::MarkPrice => "mark_price",
        }
    }
}

/// Direction of a net position (D6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum PositionSide {
    Long,
    Short,
}

impl PositionSide {
    pub fn as_str(self) -> &'static str {
        match self {
            PositionSide::Long => "long",
            PositionSide::Short => "short",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_open_names_the_latest_status_or_is_404_section_3_1() {
        let cancel = not_open(
            ErrorCode::OrderNotCancellable,
            "a",
            Some(OrderStatus::Filled),
        );
        assert_eq!(cancel.code, ErrorCode::OrderNotCancellable);
        assert_eq!(cancel.message, "order a is filled and cannot be cancelled");
        let amend = not_open(
            ErrorCode::OrderNotAmendable,
            "b",
            Some(OrderStatus::Canceled),
        );
        assert_eq!(amend.message, "order b is canceled and cannot be amended");
        let never = not_open(ErrorCode::OrderNotAmendable, "c", None);
        assert_eq!(
            (never.code, never.message.as_str()),
            (ErrorCode::NotFound, "order c does not exist")
        );
        assert!(is_not_open(&cancel) && is_not_open(&amend) && !is_not_open(&never));
    }
}
