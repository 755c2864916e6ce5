//! The reference index (interface §4.2, §4.3 rule 11): per customer, the latest order placed
//! under each reference_id.
//!
//! That one order answers every question about a reference. Rule 11 admits a new order under
//! a reference only once the one before it has ended, so the open order, if any, is the
//! latest; when none is open, the latest is also the one updated last (an ended order never
//! changes again), which is what the single read returns.
//!
//! Every order entry, cancel and amend looks a reference up, so the index is built for that:
//! maps from a 64-bit hash of (customer, reference) to the order id, compared as integers
//! instead of strings behind pointers, 16 bytes an entry. The hash's top bits pick one of
//! [`PARTITIONS`] maps, so a lookup searches a map of a few hundred entries even at a
//! million references (one leaf at tens of thousands) instead of descending one deep tree;
//! references aimed at one partition only make that one map deeper, still O(log n). A lookup
//! confirms the hit against the order's own customer and reference. A reference whose hash
//! slot already belongs to another reference is kept in an overflow map by its full key, so
//! two references never mix. The hash is therefore only about speed, not correctness: a
//! cheap word-at-a-time mix is enough, and references chosen to collide on purpose only
//! move themselves to the overflow map, which costs what a map keyed by strings costs.
//!
//! Not state: the index is derived from the orders, so snapshots leave it out and a restore
//! rebuilds it. Its hash values and its iteration order never reach output.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

use perpsim_core::ids::CustomerCode;
use perpsim_core::order::ReferenceId;

use crate::exchange::Order;

/// Partitions of the index (a power of two; an empty `BTreeMap` allocates nothing, so this
/// costs 24 bytes each up front).
pub const PARTITIONS: usize = 4096;

#[derive(Debug, Clone)]
pub struct RefIndex {
    by_hash: Vec<BTreeMap<u64, u64>>,
    /// References whose hash slot another reference holds.
    overflow: BTreeMap<(CustomerCode, ReferenceId), u64>,
    /// Distinct (customer, reference) pairs held.
    len: usize,
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
            by_hash: vec![BTreeMap::new(); PARTITIONS],
            overflow: BTreeMap::new(),
            len: 0,
        }
    }
}

fn partition(h: u64) -> usize {
    (h >> (64 - PARTITIONS.trailing_zeros())) as usize
}

fn names(o: &Order, customer: CustomerCode, reference: &str) -> bool {
    o.customer == customer && *o.reference_id == *reference
}

impl RefIndex {
    /// Rebuilt from every order, oldest first, so each reference ends at its latest order.
    pub fn rebuild(orders: &[Order]) -> Self {
        let mut index = RefIndex::default();
        for id in 0..orders.len() as u64 {
            index.insert(orders, id);
        }
        index
    }

    /// Number of distinct (customer, reference) pairs.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The latest order of `customer` under `reference`.
    pub fn get(&self, orders: &[Order], customer: CustomerCode, reference: &str) -> Option<u64> {
        self.find(orders, hash(customer, reference), customer, reference)
    }

    fn find(
        &self,
        orders: &[Order],
        h: u64,
        customer: CustomerCode,
        reference: &str,
    ) -> Option<u64> {
        let id = *self.by_hash[partition(h)].get(&h)?;
        if names(&orders[id as usize], customer, reference) {
            return Some(id);
        }
        if self.overflow.is_empty() {
            return None;
        }
        self.overflow
            .get(&(customer, ReferenceId::from(reference)))
            .copied()
    }

    /// Order `id` (already in `orders`) becomes the latest under its reference.
    pub fn insert(&mut self, orders: &[Order], id: u64) {
        let o = &orders[id as usize];
        self.insert_hashed(orders, hash(o.customer, &o.reference_id), id);
    }

    fn insert_hashed(&mut self, orders: &[Order], h: u64, id: u64) {
        let o = &orders[id as usize];
        let slot = match self.by_hash[partition(h)].entry(h) {
            Entry::Vacant(vacant) => {
                vacant.insert(id);
                self.len += 1;
                return;
            }
            Entry::Occupied(occupied) => occupied.into_mut(),
        };
        if names(&orders[*slot as usize], o.customer, &o.reference_id) {
            assert!(*slot < id, "a reference moves on only to a newer order");
            *slot = id;
            return;
        }
        match self
            .overflow
            .insert((o.customer, o.reference_id.clone()), id)
        {
            None => self.len += 1,
            Some(before) => assert!(before < id, "a reference moves on only to a newer order"),
        }
    }

    /// Whether each entry is found again from its own order: right hash slot, or overflow
    /// only where another reference holds that slot.
    pub fn is_consistent(&self, orders: &[Order]) -> bool {
        let mut held = self.overflow.len();
        for (p, map) in self.by_hash.iter().enumerate() {
            if map.is_empty() {
                continue;
            }
            held += map.len();
            let placed = map.iter().all(|(&h, &id)| {
                let o = &orders[id as usize];
                partition(h) == p && h == hash(o.customer, &o.reference_id)
            });
            if !placed {
                return false;
            }
        }
        let overflow = self.overflow.iter().all(|((customer, reference), &id)| {
            let h = hash(*customer, reference);
            names(&orders[id as usize], *customer, reference)
                && self.by_hash[partition(h)]
                    .get(&h)
                    .is_some_and(|&holder| !names(&orders[holder as usize], *customer, reference))
        });
        held == self.len && overflow
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
            id,
            customer: CustomerCode(Uuid::from_u128(customer)),
            market: 0,
            side: Side::Buy,
            kind: OrderType::Limit,
            reference_id: reference.into(),
            amount: Decimal::ONE,
            cash_amount: None,
            filled_amount: Decimal::ZERO,
            filled_quote: Decimal::ZERO,
            limit_price: Some(Decimal::ONE),
            trigger: None,
            time_in_force: TimeInForce::Gtc,
            expire_time: None,
            post_only: false,
            status: OrderStatus::Open,
            reason: None,
            placed_at: Timestamp::EPOCH,
            created: Timestamp::EPOCH,
            updated: Timestamp::EPOCH,
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
        let index = RefIndex::rebuild(&orders);
        assert_eq!(index.get(&orders, c(1), "a"), Some(3));
        assert_eq!(index.get(&orders, c(2), "a"), Some(1));
        assert_eq!(index.get(&orders, c(1), "b"), Some(2));
        assert_eq!(index.get(&orders, c(2), "b"), None);
        assert_eq!(
            index.get(&orders, c(1), "A"),
            None,
            "references are case-sensitive"
        );
        assert_eq!(index.len(), 3);
        assert!(index.is_consistent(&orders));
    }

    #[test]
    fn references_sharing_a_hash_are_told_apart_by_the_order() {
        // Force what SipHash makes vanishingly rare: three references under one hash value.
        let orders = vec![
            order(0, 1, "x"),
            order(1, 1, "y"),
            order(2, 2, "x"),
            order(3, 1, "y"),
        ];
        let mut index = RefIndex::default();
        for id in 0..orders.len() as u64 {
            index.insert_hashed(&orders, 7, id);
        }
        assert_eq!(index.find(&orders, 7, c(1), "x"), Some(0));
        assert_eq!(
            index.find(&orders, 7, c(1), "y"),
            Some(3),
            "the overflow moves on too"
        );
        assert_eq!(index.find(&orders, 7, c(2), "x"), Some(2));
        assert_eq!(index.find(&orders, 7, c(2), "y"), None);
        assert_eq!(index.len(), 3);
        assert!(
            !index.is_consistent(&orders),
            "entries under a foreign hash are caught"
        );
    }
}
