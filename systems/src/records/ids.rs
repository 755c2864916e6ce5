//! The engine's sequence ids: dense counters, each its own type so one cannot stand for
//! another. Each is the position of its record in its log (or, for an order, the count of
//! orders accepted before it); all only grow.

use serde::{Deserialize, Serialize};

/// An order's id: the count of orders accepted before it (so orders are indexed by it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct OrderId(pub u64);

/// A ledger movement's sequence number: its position in the ledger, in creation order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MovementSeq(pub u64);

impl OrderId {
    /// Its slot in a dense index of every order.
    pub fn index(self) -> usize {
        usize::try_from(self.0).expect("order ids fit the address space")
    }
}

impl MovementSeq {
    /// Its position in the ledger's movements.
    pub fn index(self) -> usize {
        usize::try_from(self.0).expect("movement numbers fit the address space")
    }
}

impl std::fmt::Display for OrderId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::fmt::Display for MovementSeq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}
