//! A lookup by key for what the engine holds many of and reaches in random order (customers,
//! by the code a command names): a hash map, since an insert in a B-tree of random keys is a
//! chain of cache misses down its levels — a third of a journal replay that opens customers.
//! Where a pass reaches keys in their order (the accounts, booked in the positions' key
//! order), a B-tree is faster: each lookup finds the path of the last one in cache; this
//! took a funding hour at a million positions from 0.31 s to 0.48 s. So the accounts keep
//! both: the passes walk their B-tree, and an order's or a fill's one account is found here.
//!
//! It never iterates in its own order: the only ways to read all of it are [`Lookup::sorted`]
//! and [`Lookup::total`] (a sum), so no hash order reaches output, a snapshot or the state
//! hash (the determinism rule of `clippy.toml`, which allows this one hashed collection).

#![allow(clippy::disallowed_types)] // the one hashed collection: read whole only sorted or summed

use std::collections::HashMap;
use std::hash::Hash;
use std::ops::Index;

use rustc_hash::FxBuildHasher;

#[derive(Debug, Clone)]
pub struct Lookup<K, V>(HashMap<K, V, FxBuildHasher>);

impl<K, V> Default for Lookup<K, V> {
    fn default() -> Self {
        Lookup(HashMap::default())
    }
}

impl<K: Hash + Ord + Copy, V: Copy> Lookup<K, V> {
    pub fn get(&self, key: &K) -> Option<&V> {
        self.0.get(key)
    }

    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        self.0.insert(key, value)
    }

    pub fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        self.0.get_mut(key)
    }

    pub fn remove(&mut self, key: &K) -> Option<V> {
        self.0.remove(key)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The sum of the values: the same in any order, so it may read them in the map's own.
    pub fn total(&self) -> u64
    where
        V: Into<u64>,
    {
        self.0.values().map(|v| (*v).into()).sum()
    }

    /// Every entry, ordered by key.
    pub fn sorted(&self) -> Vec<(K, V)> {
        let mut all: Vec<(K, V)> = self.0.iter().map(|(k, v)| (*k, *v)).collect();
        all.sort_unstable_by_key(|(k, _)| *k);
        all
    }
}

impl<K: Hash + Ord + Copy, V: Copy> Index<&K> for Lookup<K, V> {
    type Output = V;

    fn index(&self, key: &K) -> &V {
        self.0.get(key).expect("a key the lookup holds")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lookup_reads_whole_only_in_key_order_whatever_the_insertion_order() {
        let mut a = Lookup::default();
        let mut b = Lookup::default();
        for k in 0..1_000u64 {
            a.insert(k.wrapping_mul(0x9E37_79B9_7F4A_7C15), k);
            b.insert((999 - k).wrapping_mul(0x9E37_79B9_7F4A_7C15), 999 - k);
        }
        let sorted = a.sorted();
        assert_eq!(sorted, b.sorted());
        assert!(sorted.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(a[&7u64.wrapping_mul(0x9E37_79B9_7F4A_7C15)], 7);
        assert_eq!((sorted.len(), a.get(&1)), (1_000, None));
    }
}
