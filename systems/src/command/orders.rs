//! The order family: order requests and the leverage change, which the desk applies in
//! arrival order within MatchSystems (a leverage change moves margin as an order does).

use perpsim_core::entry::{Amend, OrderEntry};
use perpsim_core::ids::CustomerCode;
use serde::{Deserialize, Serialize};

/// An order entry as sent (§4.3); the rules run in the engine against its prices.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlaceOrder {
    pub customer: CustomerCode,
    pub symbol: String,
    pub entry: Box<OrderEntry>,
}

/// DELETE: cancels the open order of a reference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelOrder {
    pub customer: CustomerCode,
    pub reference_id: String,
}

/// PATCH (D5): amends the open order of a reference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AmendOrder {
    pub customer: CustomerCode,
    pub reference_id: String,
    pub amend: Amend,
}

/// A customer's leverage (D6), answered with the customer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetLeverage {
    pub customer: CustomerCode,
    pub leverage: u32,
}

#[derive(Debug)]
pub enum OrderCommand {
    PlaceOrder(PlaceOrder),
    CancelOrder(CancelOrder),
    AmendOrder(AmendOrder),
    SetLeverage(SetLeverage),
}

impl CancelOrder {
    pub fn reference(&self) -> (CustomerCode, &str) {
        (self.customer, &self.reference_id)
    }
}

impl AmendOrder {
    pub fn reference(&self) -> (CustomerCode, &str) {
        (self.customer, &self.reference_id)
    }
}
