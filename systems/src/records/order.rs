//! The order record (D5 read fields) and its parts: what order handling keeps, the read view
//! shares and the channels carry. Prices in a book are whole ticks, sizes whole lots.
//!
//! An `Order` keeps what only some orders carry behind one boxed `Extra` (a conditional order's
//! trigger, a cash order's notional or a GTD order's expiry, which rules 2 and 7 make
//! exclusive), has no `updated` of its own (it is always `created`, the time of the last
//! event), and its `reference_id` is one shared `Arc<str>` with its trade records and ledger
//! rows: a million may rest, and the record is 192 bytes, so its `Arc` fits the allocator's
//! 224-byte class (memory per resting order, `--bench book`: `benches/README.md`).

use std::num::NonZeroU64;

use perpsim_core::Decimal;
use perpsim_core::ids::CustomerCode;
use perpsim_core::order::{
    EndReason, OrderStatus, OrderType, ReferenceId, Side, TimeInForce, TriggerPriceType,
};
use perpsim_core::time::Timestamp;
use serde::{Deserialize, Serialize};

use crate::records::ids::OrderId;
use crate::records::venue::MarketId;

/// One order, as accepted (D5 read fields; `created` is the time of its last event, which
/// the wire also reports as `updated`). A million may rest (issue 11: at most 400 bytes each
/// through the engine), so what only some orders carry lives behind one box (`extra`), the
/// broker is the customer's (looked up when a fill needs it), and the record stays in the
/// allocator's 224-byte class once shared (`Arc`) with the read view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Order {
    pub id: OrderId,
    pub customer: CustomerCode,
    pub market: MarketId,
    pub side: Side,
    pub kind: OrderType,
    pub reference_id: ReferenceId,
    /// Contracts; for a cash order, what its notional resolved to (rule 2).
    #[serde(with = "perpsim_core::decimal::bin")]
    pub amount: Decimal,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub filled_amount: Decimal,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub filled_quote: Decimal,
    #[serde(with = "perpsim_core::decimal::bin_opt")]
    pub limit_price: Option<Decimal>,
    /// A conditional order's trigger, a cash order's notional or a GTD order's expiry.
    pub extra: Option<Box<Extra>>,
    pub time_in_force: TimeInForce,
    pub post_only: bool,
    pub status: OrderStatus,
    pub reason: Option<EndReason>,
    pub placed_at: Timestamp,
    pub created: Timestamp,
    /// Its time priority while it rests: a venue-wide sequence (from 1) drawn at each rest,
    /// so a restored book is rebuilt in exactly the same order.
    pub priority: Option<NonZeroU64>,
    /// Its place in the book while it rests. Not state: the book's slot layout is rebuilt on
    /// restore, so handles are too.
    #[serde(skip)]
    pub resting: Option<OrderRef>,
    /// Initial margin reserved for the opening part still resting: `reserve_lots` lots at
    /// `reserve_rate` per lot (price × lot size × initial margin), so every release is exact.
    pub reserve_lots: Lots,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub reserve_rate: Decimal,
}

/// What only some orders carry. The three exclude each other: a cash order is IOC and never
/// conditional (rule 2), a conditional order is IOC or GTC (rule 7), only GTD expires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Extra {
    Trigger(Trigger),
    Cash(#[serde(with = "perpsim_core::decimal::bin")] Decimal),
    Expires(Timestamp),
}

/// What a conditional order waits for (rules 4–6, 8): its trigger price, or both legs of the
/// combo, and whether it has fired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trigger {
    #[serde(with = "perpsim_core::decimal::bin_opt")]
    pub trigger_price: Option<Decimal>,
    pub trigger_price_type: TriggerPriceType,
    #[serde(with = "perpsim_core::decimal::bin_opt")]
    pub take_profit_price: Option<Decimal>,
    #[serde(with = "perpsim_core::decimal::bin_opt")]
    pub stop_loss_price: Option<Decimal>,
    /// The trigger fired: the order now works as its mechanical type.
    pub fired: bool,
}

impl Order {
    pub fn is_open(&self) -> bool {
        self.status.is_open()
    }

    /// Conditional orders only (stop, take-profit and the combo).
    pub fn trigger(&self) -> Option<&Trigger> {
        match self.extra.as_deref() {
            Some(Extra::Trigger(t)) => Some(t),
            _ => None,
        }
    }

    pub fn trigger_mut(&mut self) -> Option<&mut Trigger> {
        match self.extra.as_deref_mut() {
            Some(Extra::Trigger(t)) => Some(t),
            _ => None,
        }
    }

    /// Cash orders only: the notional asked for (rule 2).
    pub fn cash_amount(&self) -> Option<Decimal> {
        match self.extra.as_deref() {
            Some(Extra::Cash(c)) => Some(*c),
            _ => None,
        }
    }

    /// GTD orders only.
    pub fn expire_time(&self) -> Option<Timestamp> {
        match self.extra.as_deref() {
            Some(Extra::Expires(t)) => Some(*t),
            _ => None,
        }
    }

    /// Moves a GTD order's expiry (an amend).
    pub fn set_expire_time(&mut self, at: Timestamp) {
        match self.extra.as_deref_mut() {
            Some(Extra::Expires(t)) => *t = at,
            _ => panic!("order {} is not GTD", self.id),
        }
    }

    pub fn trigger_price(&self) -> Option<Decimal> {
        self.trigger().and_then(|t| t.trigger_price)
    }

    pub fn trigger_price_type(&self) -> Option<TriggerPriceType> {
        self.trigger().map(|t| t.trigger_price_type)
    }

    pub fn take_profit_price(&self) -> Option<Decimal> {
        self.trigger().and_then(|t| t.take_profit_price)
    }

    pub fn stop_loss_price(&self) -> Option<Decimal> {
        self.trigger().and_then(|t| t.stop_loss_price)
    }

    /// A conditional order still waiting for its trigger.
    pub fn waiting(&self) -> bool {
        self.trigger().is_some_and(|t| !t.fired)
    }

    /// Works as a limit order: a limit order, or a stop_loss_limit or take_profit_limit
    /// order whose trigger has fired (D5).
    pub fn works_as_limit(&self) -> bool {
        self.limit_price.is_some() && !self.waiting()
    }

    /// Contracts not yet filled.
    pub fn remaining(&self) -> Decimal {
        self.amount - self.filled_amount
    }

    /// Quantity-weighted average fill price, at the ledger's 10 decimals; None before a fill.
    pub fn avg_fill_price(&self) -> Option<Decimal> {
        (!self.filled_amount.is_zero())
            .then(|| perpsim_core::decimal::round_ledger(self.filled_quote / self.filled_amount))
    }

    /// The reserve still held, in money.
    pub fn reserved(&self) -> Decimal {
        Decimal::from(self.reserve_lots) * self.reserve_rate
    }
}

/// A price in ticks of the instrument.
pub type Ticks = i64;

/// An amount in lots of the instrument.
pub type Lots = u64;

/// Handle of a resting order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OrderRef {
    pub(crate) slot: u32,
    pub(crate) generation: u32,
}
