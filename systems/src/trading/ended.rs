//! What the engine keeps of ended orders (issue 37): not their records. An order that ends
//! leaves the live set for [`EndedOrders::recent`], where it stays until the next tick
//! starts — long enough to be published, pushed on the channels and handed to the host with
//! its tick (`TickOutput::ended`), which writes it to the journal's projection, where reads
//! find it. Memory then follows the live set and the references used, not the history.
//!
//! What outlives the record is `digest`, a running SHA-256 over every ended order's encoding
//! in the order they ended, chained once a tick (`SHA-256(digest ‖ the tick's encodings)`,
//! as the journal groups them): the state hash covers the history through it, at a constant
//! cost, where it used to encode every ended order. Nothing is kept per reference: a cancel
//! or amend of a reference with no open order is answered "none open" by the engine, and
//! who answers names the latest ended order's status from the projection
//! (`perpsim_core::order::not_open`). Memory follows the live set, not the references used.

use std::sync::Arc;

use bevy_ecs::prelude::Resource;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::records::ids::OrderId;
use crate::records::order::Order;

/// The snapshot form of [`EndedOrders`] (between ticks, when `recent` is not state).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndedState {
    /// Orders ended so far.
    pub count: u64,
    /// The running hash over their encodings, in the order they ended.
    pub digest: [u8; 32],
}

#[derive(Resource, Debug, Default)]
pub struct EndedOrders {
    /// The orders that ended since the tick started, in the order they ended.
    pub recent: Vec<Arc<Order>>,
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
        }
    }

    pub fn restore(state: EndedState) -> Self {
        EndedOrders {
            recent: Vec::new(),
            count: state.count,
            digest: state.digest,
            pending: None,
            scratch: Vec::new(),
        }
    }
}
