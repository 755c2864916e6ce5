//! What the engine keeps of ended orders (issue 37): not their records. An order that ends
//! leaves the live set for [`EndedOrders::recent`], where it stays until the next tick
//! starts — long enough to be published, pushed on the channels and handed to the host with
//! its tick (`TickOutput::ended`), which writes it to the journal's projection, where reads
//! find it. Memory then follows the live set and the references used, not the history.
//!
//! Two things outlive the record, because the engine's answers and its state hash need them:
//! - per (customer, reference_id), the status of the latest order that ended under it: a
//!   cancel or amend of a reference with no open order answers 409 naming that status, or
//!   404 for a reference never used. Keyed by 128 bits of SHA-256 over the pair (a collision
//!   is as likely as SHA-256's), 24 bytes an entry;
//! - `digest`, a running SHA-256 over every ended order's encoding in the order they ended,
//!   chained once a tick (`SHA-256(digest ‖ the tick's encodings)`, as the journal groups
//!   them): the state hash covers the history through it, at a constant cost, where it used
//!   to encode every ended order.

use std::sync::Arc;

use bevy_ecs::prelude::Resource;
use perpsim_core::ids::CustomerCode;
use perpsim_core::order::OrderStatus;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::records::ids::OrderId;
use crate::records::lookup::Lookup;
use crate::records::order::Order;

/// A reference's key: the first 128 bits of SHA-256 over the customer and the reference.
type RefKey = (u64, u64);

fn ref_key(customer: CustomerCode, reference: &str) -> RefKey {
    // A one-byte domain tag keeps the message in one SHA-256 block for references of up to
    // 38 bytes.
    let mut h = Sha256::new();
    h.update(b"r");
    h.update(customer.0.as_bytes());
    h.update(reference.as_bytes());
    let d = h.finalize();
    let word = |i: usize| u64::from_le_bytes(d[i..i + 8].try_into().expect("8 bytes"));
    (word(0), word(8))
}

/// The snapshot form of [`EndedOrders`] (between ticks, when `recent` is not state).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndedState {
    /// Orders ended so far.
    pub count: u64,
    /// The running hash over their encodings, in the order they ended.
    pub digest: [u8; 32],
    /// The latest ended status per reference key, sorted by key.
    pub refs: Vec<(RefKey, OrderStatus)>,
}

#[derive(Resource, Debug, Default)]
pub struct EndedOrders {
    /// The orders that ended since the tick started, in the order they ended.
    pub recent: Vec<Arc<Order>>,
    refs: Lookup<RefKey, OrderStatus>,
    count: u64,
    digest: [u8; 32],
    /// This tick's chaining, until [`EndedOrders::seal`]; never state (sealed between ticks).
    pending: Option<Sha256>,
    /// An order's encoding, reused.
    scratch: Vec<u8>,
}

impl EndedOrders {
    /// Takes in an order that just ended; its position in `recent`.
    pub fn end(&mut self, record: Arc<Order>) -> usize {
        assert!(!record.is_open(), "order {} has ended", record.id);
        self.refs.insert(
            ref_key(record.customer, &record.reference_id),
            record.status,
        );
        self.scratch.clear();
        let encoded = postcard::to_io(&*record, &mut self.scratch).expect("orders always encode");
        let digest = self.digest;
        self.pending
            .get_or_insert_with(|| Sha256::new().chain_update(digest))
            .update(encoded);
        self.count += 1;
        self.recent.push(record);
        self.recent.len() - 1
    }

    /// The record at `position` in `recent`, which must be order `id`'s: a record is held
    /// only through the tick it ended in.
    pub fn record(&self, position: u64, id: OrderId) -> &Arc<Order> {
        match self.recent.get(position as usize) {
            Some(o) if o.id == id => o,
            _ => panic!("order {id} ended in an earlier tick: its record is the projection's"),
        }
    }

    /// The status of the latest order that ended under a reference, if any did.
    pub fn status_of(&self, customer: CustomerCode, reference: &str) -> Option<OrderStatus> {
        self.refs.get(&ref_key(customer, reference)).copied()
    }

    /// Orders ended so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// A new tick starts: the last one's records were handed out with it.
    pub fn start_tick(&mut self) {
        self.seal();
        self.recent.clear();
    }

    /// Chains the orders ended since the last seal into `digest` (at the end of each tick).
    pub fn seal(&mut self) {
        if let Some(h) = self.pending.take() {
            self.digest = h.finalize().into();
        }
    }

    /// The digest as a seal now would leave it.
    fn digest(&self) -> [u8; 32] {
        match &self.pending {
            Some(h) => h.clone().finalize().into(),
            None => self.digest,
        }
    }

    pub fn state(&self) -> EndedState {
        EndedState {
            count: self.count,
            digest: self.digest(),
            refs: self.refs.sorted(),
        }
    }

    pub fn restore(state: EndedState) -> Self {
        let mut refs = Lookup::default();
        for (key, status) in state.refs {
            refs.insert(key, status);
        }
        EndedOrders {
            recent: Vec::new(),
            refs,
            count: state.count,
            digest: state.digest,
            pending: None,
            scratch: Vec::new(),
        }
    }
}
