//! The reference index (interface §4.2, §4.3 rule 11): per customer, the open order under
//! each reference_id. Rule 11 admits a new order under a reference only once the one before
//! it has ended, so there is at most one; an order leaves the index when it ends (what is
//! known of an ended one is `trading::ended`'s), so its size follows the live set.
//!
//! Every order entry, cancel and amend looks a reference up, and at a million references the
//! cost of that is cache misses, so the index is an open-addressing table of (hash of
//! customer and reference, order id) pairs: 16 bytes each, at most half full, one cache line
//! for most lookups. A hit is confirmed against the order's own customer and reference, so
//! references that share a hash never mix. Probing is bounded: a reference whose
//! [`MAX_PROBE`]-slot window is full (or whose hash another reference holds) goes to an
//! overflow map keyed by the reference itself. The hash is therefore only about speed: a
//! cheap word-at-a-time mix is enough, and references crafted to crowd one window only move
//! themselves to the overflow map, which costs what a map keyed by strings costs.
//!
//! Not state: the index is derived from the orders, so snapshots leave it out and a restore
//! rebuilds it. Its hash values and its layout never reach output.

use std::collections::BTreeMap;

use perpsim_core::ids::CustomerCode;
use perpsim_core::order::ReferenceId;

use bevy_ecs::prelude::Resource;

use crate::records::ids::OrderId;
use crate::records::order::Order;

/// What the index confirms a hit against: the order of an id (live or ended).
pub trait OrderLookup {
    fn order(&self, id: OrderId) -> &Order;
}

impl OrderLookup for [Order] {
    fn order(&self, id: OrderId) -> &Order {
        &self[id.index()]
    }
}

impl OrderLookup for [std::sync::Arc<Order>] {
    fn order(&self, id: OrderId) -> &Order {
        &self[id.index()]
    }
}

/// Slots a lookup probes at most before it turns to the overflow map.
pub const MAX_PROBE: usize = 32;
/// Slots of a new index (a power of two, like every size it grows to).
const INITIAL_SLOTS: usize = 1024;
/// An empty slot (ids are stored plus one).
const EMPTY: (u64, u64) = (0, 0);
/// A slot whose order ended: probes go on past it (a reference further on in its window
/// stays reachable) and an insert may take it. Ids never reach `u64::MAX - 1`.
const REMOVED: u64 = u64::MAX;

#[derive(Resource, Debug, Clone)]
pub struct RefIndex {
    /// (hash, order id + 1); the id part is 0 in an empty slot.
    slots: Vec<(u64, u64)>,
    /// Slots not empty: holding an order, or [`REMOVED`].
    used: usize,
    /// Slots [`REMOVED`].
    removed: usize,
    /// References the table has no slot for (window full, or hash held by another).
    overflow: BTreeMap<(CustomerCode, ReferenceId), OrderId>,
}

/// Word-at-a-time multiply-rotate mixing (as rustc's FxHasher) with a final avalanche, so
/// references differing in one character land far apart. References are at most 40 bytes.
fn hash(customer: CustomerCode, reference: &str) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mix = |h: u64, word: u64| (h.rotate_left(5) ^ word).wrapping_mul(K);
    let id = customer.0.as_u128();
    let mut h = mix(mix(0, id as u64), (id >> 64) as u64);
    for chunk in reference.as_bytes().chunks(8) {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        h = mix(h, u64::from_le_bytes(word));
    }
    h = mix(h, reference.len() as u64);
    // murmur3's finaliser.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

impl Default for RefIndex {
    fn default() -> Self {
        RefIndex {
            slots: vec![EMPTY; INITIAL_SLOTS],
            used: 0,
            removed: 0,
            overflow: BTreeMap::new(),
        }
    }
}

fn names(o: &Order, customer: CustomerCode, reference: &str) -> bool {
    o.customer == customer && *o.reference_id == *reference
}

/// Where a probe for hash `h` ended.
enum Probe {
    /// The slot holding this hash (it may still belong to another reference).
    Hash(usize),
    /// The hash is not in the table: the first empty slot of the window, and the first
    /// removed one before it (where an insert goes, if any).
    Empty(usize, Option<usize>),
    /// The window has no empty slot and the hash is not in it; its first removed slot.
    Full(Option<usize>),
}

/// A slot holds its order's id plus one, so that zero is the empty slot.
fn stored(id: OrderId) -> u64 {
    id.0 + 1
}

/// The order id a non-empty slot holds.
fn held(slot: u64) -> OrderId {
    OrderId(slot - 1)
}

impl RefIndex {
    /// Rebuilt from the open orders, `ids`.
    pub fn rebuild(
        orders: &(impl OrderLookup + ?Sized),
        ids: impl IntoIterator<Item = OrderId>,
    ) -> Self {
        let mut index = RefIndex::default();
        for id in ids {
            index.insert(orders, id);
        }
        index
    }

    /// Number of (customer, reference) pairs held: one per open order.
    pub fn len(&self) -> usize {
        self.used - self.removed + self.overflow.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn probe(&self, h: u64) -> Probe {
        let mask = self.slots.len() - 1;
        let mut removed = None;
        for step in 0..MAX_PROBE {
            let i = (h as usize).wrapping_add(step) & mask;
            match self.slots[i] {
                (_, 0) => return Probe::Empty(i, removed),
                (_, REMOVED) => {
                    removed = removed.or(Some(i));
                }
                (held, _) if held == h => return Probe::Hash(i),
                _ => {}
            }
        }
        Probe::Full(removed)
    }

    /// The open order of `customer` under `reference`.
    pub fn get(
        &self,
        orders: &(impl OrderLookup + ?Sized),
        customer: CustomerCode,
        reference: &str,
    ) -> Option<OrderId> {
        self.find(orders, hash(customer, reference), customer, reference)
    }

    fn find(
        &self,
        orders: &(impl OrderLookup + ?Sized),
        h: u64,
        customer: CustomerCode,
        reference: &str,
    ) -> Option<OrderId> {
        match self.probe(h) {
            // A reference sent to the overflow map met a full window or a foreign holder of
            // its hash, which may have been removed since: the map is asked too (it is empty
            // but for references crowded together, on purpose or by rare chance).
            Probe::Empty(..) => self.overflow_get(customer, reference),
            Probe::Hash(i) => {
                let id = held(self.slots[i].1);
                if names(orders.order(id), customer, reference) {
                    Some(id)
                } else {
                    self.overflow_get(customer, reference)
                }
            }
            Probe::Full(_) => self.overflow_get(customer, reference),
        }
    }

    fn overflow_get(&self, customer: CustomerCode, reference: &str) -> Option<OrderId> {
        if self.overflow.is_empty() {
            return None;
        }
        self.overflow
            .get(&(customer, ReferenceId::from(reference)))
            .copied()
    }

    /// Order `id` (already in `orders`, open) is the one under its reference now.
    pub fn insert(&mut self, orders: &(impl OrderLookup + ?Sized), id: OrderId) {
        let o = orders.order(id);
        self.insert_hashed(orders, hash(o.customer, &o.reference_id), id);
    }

    fn insert_hashed(&mut self, orders: &(impl OrderLookup + ?Sized), h: u64, id: OrderId) {
        // The order is looked up only where its reference decides: a table growing places
        // every entry again by its hash alone, without a cache miss on each order.
        match self.probe(h) {
            Probe::Empty(_, Some(i)) | Probe::Full(Some(i)) => {
                self.slots[i] = (h, stored(id));
                self.removed -= 1;
                return;
            }
            Probe::Empty(i, None) => {
                self.slots[i] = (h, stored(id));
                self.used += 1;
                if 2 * self.used > self.slots.len() {
                    self.grow(orders);
                }
                return;
            }
            Probe::Hash(i) => {
                let (o, holder) = (orders.order(id), held(self.slots[i].1));
                if names(orders.order(holder), o.customer, &o.reference_id) {
                    assert!(holder < id, "a reference moves on only to a newer order");
                    self.slots[i].1 = stored(id);
                    return;
                }
            }
            Probe::Full(None) => {}
        }
        let o = orders.order(id);
        let key = (o.customer, o.reference_id.clone());
        if let Some(before) = self.overflow.insert(key, id) {
            assert!(before < id, "a reference moves on only to a newer order");
        }
    }

    /// Order `o`, which just ended, leaves the index: its slot is marked [`REMOVED`] (or
    /// its overflow entry dropped). The slot's id confirms it, so no order is looked up.
    pub fn remove(&mut self, o: &Order) {
        self.remove_hashed(hash(o.customer, &o.reference_id), o);
    }

    fn remove_hashed(&mut self, h: u64, o: &Order) {
        let id = o.id;
        if let Probe::Hash(i) = self.probe(h)
            && self.slots[i].1 == stored(id)
        {
            self.slots[i].1 = REMOVED;
            self.removed += 1;
            return;
        }
        let key = (o.customer, o.reference_id.clone());
        let held = self.overflow.remove(&key);
        assert_eq!(
            held,
            Some(id),
            "an ending order is the one under its reference"
        );
    }

    /// Places every entry again, the overflow map's included, in a table twice the size (or
    /// the same size when most slots are only [`REMOVED`]): a fresh table has room for more
    /// of them, and no removed slot.
    fn grow(&mut self, orders: &(impl OrderLookup + ?Sized)) {
        let size = match 4 * (self.used - self.removed) < self.slots.len() {
            true => self.slots.len(),
            false => 2 * self.slots.len(),
        };
        let slots = std::mem::replace(&mut self.slots, vec![EMPTY; size]);
        let overflow = std::mem::take(&mut self.overflow);
        self.used = 0;
        self.removed = 0;
        let ids = slots
            .into_iter()
            .filter(|&(_, id)| id != 0 && id != REMOVED)
            .map(|(h, id)| (h, held(id)))
            .chain(overflow.into_iter().map(|((c, r), id)| (hash(c, &r), id)));
        for (h, id) in ids {
            self.insert_hashed(orders, h, id);
        }
    }

    /// Whether every entry is found again from its own order, and the count is right.
    pub fn is_consistent(&self, orders: &(impl OrderLookup + ?Sized)) -> bool {
        let mut used = 0;
        let removed = self.slots.iter().filter(|s| s.1 == REMOVED).count();
        for &(h, id) in self
            .slots
            .iter()
            .filter(|&&(_, id)| id != 0 && id != REMOVED)
        {
            used += 1;
            let o = orders.order(held(id));
            if h != hash(o.customer, &o.reference_id)
                || self.find(orders, h, o.customer, &o.reference_id) != Some(held(id))
            {
                return false;
            }
        }
        let overflow = self.overflow.iter().all(|((customer, reference), &id)| {
            names(orders.order(id), *customer, reference)
                && self.get(orders, *customer, reference) == Some(id)
        });
        used + removed == self.used && removed == self.removed && overflow
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perpsim_core::Decimal;
    use perpsim_core::Uuid;
    use perpsim_core::order::{OrderStatus, OrderType, Side, TimeInForce};
    use perpsim_core::time::Timestamp;

    fn order(id: u64, customer: u128, reference: &str) -> Order {
        Order {
            id: OrderId(id),
            customer: CustomerCode(Uuid::from_u128(customer)),
            market: 0,
            side: Side::Buy,
            kind: OrderType::Limit,
            reference_id: reference.into(),
            amount: Decimal::ONE,
            filled_amount: Decimal::ZERO,
            filled_quote: Decimal::ZERO,
            limit_price: Some(Decimal::ONE),
            extra: None,
            time_in_force: TimeInForce::Gtc,
            post_only: false,
            status: OrderStatus::Open,
            reason: None,
            placed_at: Timestamp::EPOCH,
            created: Timestamp::EPOCH,
            priority: None,
            resting: None,
            reserve_lots: 0,
            reserve_rate: Decimal::ZERO,
        }
    }

    fn c(n: u128) -> CustomerCode {
        CustomerCode(Uuid::from_u128(n))
    }

    #[test]
    fn a_reference_names_its_latest_order_per_customer_rule_11() {
        let orders = vec![
            order(0, 1, "a"),
            order(1, 2, "a"),
            order(2, 1, "b"),
            order(3, 1, "a"),
        ];
        let index = RefIndex::rebuild(orders.as_slice(), (0..orders.len() as u64).map(OrderId));
        assert_eq!(index.get(orders.as_slice(), c(1), "a"), Some(OrderId(3)));
        assert_eq!(index.get(orders.as_slice(), c(2), "a"), Some(OrderId(1)));
        assert_eq!(index.get(orders.as_slice(), c(1), "b"), Some(OrderId(2)));
        assert_eq!(index.get(orders.as_slice(), c(2), "b"), None);
        assert_eq!(
            index.get(orders.as_slice(), c(1), "A"),
            None,
            "references are case-sensitive"
        );
        assert_eq!(index.len(), 3);
        assert!(index.is_consistent(orders.as_slice()));
    }

    #[test]
    fn references_sharing_a_hash_are_told_apart_by_the_order() {
        // Force what the hash makes rare: three references under one hash value.
        let orders = vec![
            order(0, 1, "x"),
            order(1, 1, "y"),
            order(2, 2, "x"),
            order(3, 1, "y"),
        ];
        let mut index = RefIndex::default();
        for id in 0..orders.len() as u64 {
            index.insert_hashed(orders.as_slice(), 7, OrderId(id));
        }
        assert_eq!(
            index.find(orders.as_slice(), 7, c(1), "x"),
            Some(OrderId(0))
        );
        assert_eq!(
            index.find(orders.as_slice(), 7, c(1), "y"),
            Some(OrderId(3)),
            "the overflow moves on too"
        );
        assert_eq!(
            index.find(orders.as_slice(), 7, c(2), "x"),
            Some(OrderId(2))
        );
        assert_eq!(index.find(orders.as_slice(), 7, c(2), "y"), None);
        assert_eq!(index.len(), 3);
        assert!(
            !index.is_consistent(orders.as_slice()),
            "entries under a foreign hash are caught"
        );
    }

    #[test]
    fn a_crowded_window_spills_to_the_overflow_map_and_growth_keeps_every_entry() {
        // Hashes that differ only above the table's mask all start at one slot.
        let n = MAX_PROBE + 8;
        let orders: Vec<Order> = (0..n as u64)
            .map(|id| order(id, 1, &format!("r{id}")))
            .collect();
        let mut index = RefIndex::default();
        for id in 0..n as u64 {
            index.insert_hashed(orders.as_slice(), 5 + id * (1 << 20), OrderId(id));
        }
        assert_eq!((index.used, index.overflow.len()), (MAX_PROBE, 8));
        for id in 0..n as u64 {
            let found = index.find(
                orders.as_slice(),
                5 + id * (1 << 20),
                c(1),
                &format!("r{id}"),
            );
            assert_eq!(found, Some(OrderId(id)));
        }
        // With real hashes: filling past half the table doubles it (three times here), and
        // every entry is found again from its own order afterwards.
        let more: Vec<Order> = (0..3_000u64)
            .map(|id| order(id, 2 + id as u128 % 7, &format!("m{id}")))
            .collect();
        let grown = RefIndex::rebuild(more.as_slice(), (0..more.len() as u64).map(OrderId));
        assert!(
            grown.slots.len() >= 2 * 3_000,
            "grown to {}",
            grown.slots.len()
        );
        assert_eq!(grown.len(), 3_000);
        assert!(grown.is_consistent(more.as_slice()));
        for o in &more {
            assert_eq!(
                grown.get(more.as_slice(), o.customer, &o.reference_id),
                Some(o.id)
            );
        }
    }

    #[test]
    fn an_ended_order_leaves_the_index_and_its_slot_serves_again_rule_11() {
        // Three references under one hash, so removal is seen in the window and the overflow
        // map alike; then enough orders through one customer to rebuild the table.
        let orders: Vec<Order> = (0..3).map(|id| order(id, 1, &format!("r{id}"))).collect();
        let mut index = RefIndex::default();
        for id in 0..3 {
            index.insert_hashed(orders.as_slice(), 9, OrderId(id));
        }
        index.remove_hashed(9, &orders[0]);
        assert_eq!(index.find(orders.as_slice(), 9, c(1), "r0"), None);
        assert_eq!(index.len(), 2);
        // The removed slot holds the hash no more: "r1", in the overflow map, is found.
        index.remove_hashed(9, &orders[1]);
        assert_eq!(index.find(orders.as_slice(), 9, c(1), "r1"), None);
        assert_eq!(
            index.find(orders.as_slice(), 9, c(1), "r2"),
            Some(OrderId(2)),
            "the hash's slot is removed; its other reference is in the overflow map"
        );
        let n = 20_000u64;
        let many: Vec<Order> = (0..n)
            .map(|id| order(id, 2, &format!("m{}", id % 7)))
            .collect();
        let mut index = RefIndex::default();
        for id in (0..n).map(OrderId) {
            index.insert(many.as_slice(), id);
            if id.0 >= 6 {
                index.remove(&many[id.index() - 6]);
            }
        }
        assert_eq!(index.len(), 6, "one open order a reference");
        for k in 0..7 {
            let open = (n - 6..n).find(|i| i % 7 == k).map(OrderId);
            assert_eq!(index.get(many.as_slice(), c(2), &format!("m{k}")), open);
        }
        assert!(
            index.slots.len() <= 4 * INITIAL_SLOTS,
            "removed slots are reclaimed, not grown past"
        );
        assert!(index.is_consistent(many.as_slice()));
    }
}
