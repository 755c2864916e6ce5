//! The reference index (interface §4.2, §4.3 rule 11): per customer, the latest order placed
//! under each reference_id.
//!
//! That one order answers every question about a reference. Rule 11 admits a new order under
//! a reference only once the one before it has ended, so the open order, if any, is the
//! latest; when none is open, the latest is also the one updated last (an ended order never
//! changes again), which is what the single read returns.
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

#[derive(Resource, Debug, Clone)]
pub struct RefIndex {
    /// (hash, order id + 1); the id part is 0 in an empty slot.
    slots: Vec<(u64, u64)>,
    /// Occupied slots.
    used: usize,
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
    /// The first empty slot of the window: the hash is not in the table.
    Empty(usize),
    /// The window is full and the hash is not in it.
    Full,
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
    /// Rebuilt from the `count` orders there are, oldest first, so each reference ends at
    /// its latest order.
    pub fn rebuild(orders: &(impl OrderLookup + ?Sized), count: u64) -> Self {
        let mut index = RefIndex::default();
        for id in (0..count).map(OrderId) {
            index.insert(orders, id);
        }
        index
    }

    /// Number of distinct (customer, reference) pairs.
    pub fn len(&self) -> usize {
        self.used + self.overflow.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn probe(&self, h: u64) -> Probe {
        let mask = self.slots.len() - 1;
        for step in 0..MAX_PROBE {
            let i = (h as usize).wrapping_add(step) & mask;
            match self.slots[i] {
                (_, 0) => return Probe::Empty(i),
                (held, _) if held == h => return Probe::Hash(i),
                _ => {}
            }
        }
        Probe::Full
    }

    /// The latest order of `customer` under `reference`.
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
            // Nothing is ever removed, so a reference sent to the overflow map met a full
            // window or a foreign holder of its hash, and still would.
            Probe::Empty(_) => None,
            Probe::Hash(i) => {
                let id = held(self.slots[i].1);
                if names(orders.order(id), customer, reference) {
                    Some(id)
                } else {
                    self.overflow_get(customer, reference)
                }
            }
            Probe::Full => self.overflow_get(customer, reference),
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

    /// Order `id` (already in `orders`) becomes the latest under its reference.
    pub fn insert(&mut self, orders: &(impl OrderLookup + ?Sized), id: OrderId) {
        let o = orders.order(id);
        self.insert_hashed(orders, hash(o.customer, &o.reference_id), id);
    }

    fn insert_hashed(&mut self, orders: &(impl OrderLookup + ?Sized), h: u64, id: OrderId) {
        let o = orders.order(id);
        match self.probe(h) {
            Probe::Empty(i) => {
                self.slots[i] = (h, stored(id));
                self.used += 1;
                if 2 * self.used > self.slots.len() {
                    self.grow(orders);
                }
                return;
            }
            Probe::Hash(i)
                if names(
                    orders.order(held(self.slots[i].1)),
                    o.customer,
                    &o.reference_id,
                ) =>
            {
                assert!(
                    held(self.slots[i].1) < id,
                    "a reference moves on only to a newer order"
                );
                self.slots[i].1 = stored(id);
                return;
            }
            Probe::Hash(_) | Probe::Full => {}
        }
        let key = (o.customer, o.reference_id.clone());
        if let Some(before) = self.overflow.insert(key, id) {
            assert!(before < id, "a reference moves on only to a newer order");
        }
    }

    /// Doubles the table and places every entry again, the overflow map's included (a
    /// larger table may have room for them now).
    fn grow(&mut self, orders: &(impl OrderLookup + ?Sized)) {
        let larger = vec![EMPTY; 2 * self.slots.len()];
        let slots = std::mem::replace(&mut self.slots, larger);
        let overflow = std::mem::take(&mut self.overflow);
        self.used = 0;
        let ids = slots
            .into_iter()
            .filter(|&(_, id)| id != 0)
            .map(|(h, id)| (h, held(id)))
            .chain(overflow.into_iter().map(|((c, r), id)| (hash(c, &r), id)));
        for (h, id) in ids {
            self.insert_hashed(orders, h, id);
        }
    }

    /// Whether every entry is found again from its own order, and the count is right.
    pub fn is_consistent(&self, orders: &(impl OrderLookup + ?Sized)) -> bool {
        let mut used = 0;
        for &(h, id) in self.slots.iter().filter(|&&(_, id)| id != 0) {
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
        used == self.used && overflow
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
        let index = RefIndex::rebuild(orders.as_slice(), orders.len() as u64);
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
        let grown = RefIndex::rebuild(more.as_slice(), more.len() as u64);
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
}
