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
//!
//! An engine whose host digests off its thread (a server's journal writer, a replay's tables'
//! writer) owes the digest instead ([`EndedOrders::owe_digests`]): each tick's ended orders
//! become an [`EndedRun`], chained to the one before by a shared cell, which the host settles
//! in order ([`EndedOrders::take_owed`]); what needs the digest first (the state hash, a
//! snapshot) computes what is still owed itself, and the engine settles the oldest runs itself
//! past [`MAX_OWED_ORDERS`]. A chain computed in order gives the same digest whoever computed
//! each link, and when.

use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};

use bevy_ecs::prelude::Resource;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::records::ids::OrderId;
use crate::records::order::Order;

/// Ended orders whose digest an engine owing it holds at most: past it the engine settles
/// the oldest runs itself (their records kept until then).
pub const MAX_OWED_ORDERS: usize = 65_536;

/// A digest of the chain: set once, by whoever computes it first.
type Link = Arc<OnceLock<[u8; 32]>>;

/// One tick's ended orders whose link of the chain is owed: `SHA-256(before ‖ encodings)`,
/// `before` the previous run's `after` (or the digest the chain stood at).
#[derive(Debug)]
pub struct EndedRun {
    before: Link,
    orders: Vec<Arc<Order>>,
    after: Link,
}

impl EndedRun {
    /// How many ended orders the run holds (what settling it digests).
    pub fn orders(&self) -> usize {
        self.orders.len()
    }

    /// Computes this run's link once the one before it is known; whether it is now known.
    pub fn settle(&self) -> bool {
        let Some(before) = self.before.get() else {
            return false;
        };
        self.after.get_or_init(|| chain(before, &self.orders));
        true
    }
}

/// `SHA-256(digest ‖ the orders' encodings)`: a tick's link of the chain.
fn chain(digest: &[u8; 32], orders: &[Arc<Order>]) -> [u8; 32] {
    let mut hash = Sha256::new().chain_update(digest);
    let mut scratch = Vec::new();
    for o in orders {
        scratch.clear();
        hash.update(postcard::to_io(&**o, &mut scratch).expect("orders always encode"));
    }
    hash.finalize().into()
}

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
    /// Whether the digest is owed (see the module's header): then `pending` stays empty.
    owing: bool,
    /// Orders ended since the last seal, while owing.
    unsealed: bool,
    /// The runs whose links are not folded into `digest` yet, oldest first, and their orders.
    owed: VecDeque<Arc<EndedRun>>,
    owed_orders: usize,
    /// The runs not yet handed to the host.
    to_hand: Vec<Arc<EndedRun>>,
}

impl EndedOrders {
    /// Takes in an order that just ended; its position in `recent`.
    pub fn end(&mut self, record: Arc<Order>) -> usize {
        assert!(!record.is_open(), "order {} has ended", record.id);
        self.count += 1;
        if self.owing {
            self.unsealed = true; // chained by whoever settles the tick's run
        } else {
            self.scratch.clear();
            let encoded = postcard::to_io(&*record, &mut self.scratch);
            let digest = self.digest;
            self.pending
                .get_or_insert_with(|| Sha256::new().chain_update(digest))
                .update(encoded.expect("orders always encode"));
        }
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

    /// Chains the orders ended since the last seal into `digest` (at the end of each tick),
    /// or, while owing, makes them a run owed.
    pub fn seal(&mut self) {
        if let Some(h) = self.pending.take() {
            self.digest = h.finalize().into();
        }
        if std::mem::take(&mut self.unsealed) {
            let before = match self.owed.back() {
                Some(last) => Arc::clone(&last.after),
                None => Arc::new(OnceLock::from(self.digest)),
            };
            let run = Arc::new(EndedRun {
                before,
                orders: self.recent.clone(),
                after: Link::default(),
            });
            self.owed_orders += run.orders.len();
            self.owed.push_back(Arc::clone(&run));
            self.to_hand.push(run);
        }
        self.fold();
    }

    /// Folds the settled runs at the front into `digest`, settling the oldest here while more
    /// than [`MAX_OWED_ORDERS`] orders are owed.
    fn fold(&mut self) {
        while let Some(run) = self.owed.front() {
            if self.owed_orders > MAX_OWED_ORDERS {
                run.settle();
            }
            let Some(&after) = run.after.get() else {
                break;
            };
            self.owed_orders -= run.orders.len();
            self.digest = after;
            self.owed.pop_front();
        }
        // Runs settled before the host took them (the engine's, past the bound) are not
        // handed: a host that never takes its runs holds no more than the bound either.
        let settled = self.to_hand.iter().take_while(|r| r.after.get().is_some());
        let settled = settled.count();
        self.to_hand.drain(..settled);
    }

    /// The engine owes the digest from here on, for its host to settle off its thread.
    pub fn owe_digests(&mut self) {
        self.seal();
        self.owing = true;
    }

    /// The runs made since the last call, for the host to settle in order
    /// ([`EndedRun::settle`]).
    pub fn take_owed(&mut self) -> Vec<Arc<EndedRun>> {
        std::mem::take(&mut self.to_hand)
    }

    /// The digest as a seal now would leave it, every link still owed computed.
    fn digest(&self) -> [u8; 32] {
        if let Some(h) = &self.pending {
            return h.clone().finalize().into();
        }
        let mut digest = self.digest;
        for run in &self.owed {
            assert!(run.settle(), "the run before it was settled first");
            digest = *run.after.get().expect("just settled");
        }
        match self.unsealed {
            true => chain(&digest, &self.recent),
            false => digest,
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
            owing: false,
            unsealed: false,
            owed: VecDeque::new(),
            owed_orders: 0,
            to_hand: Vec::new(),
        }
    }
}
