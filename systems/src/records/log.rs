//! An append-only log kept in fixed-size chunks, for history the engine appends to by the
//! million (the ledger's rows): growing it never moves what it holds. A `Vec` doubles by
//! copying, so the row that crosses its capacity pays for every row before it — 136 MB
//! copied in the middle of a midnight at a million positions, and a stall every request
//! waits behind once the history is large. Here a full chunk stays where it is and the next
//! one is allocated at its final size.
//!
//! Encoded as a sequence, exactly as a `Vec` of the same items: snapshots, and the state
//! hash over them, do not change.

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Index, IndexMut};

use serde::de::{Deserialize, Deserializer, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeSeq, Serializer};

/// Items per chunk: 2^16, about 9 MB of ledger rows.
const CHUNK_BITS: u32 = 16;
const CHUNK: usize = 1 << CHUNK_BITS;

#[derive(Clone)]
pub struct Log<T> {
    /// Item `i` is in chunk `i / CHUNK`; the chunks before it are full, those after it are
    /// empty (reserved). The first grows as a `Vec` does (a small log stays small); every
    /// later one is allocated whole.
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for Log<T> {
    fn default() -> Self {
        Log {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<T> Log<T> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn push(&mut self, item: T) {
        let at = self.len >> CHUNK_BITS;
        if at == self.chunks.len() {
            let first = self.chunks.is_empty();
            self.chunks
                .push(Vec::with_capacity(if first { 0 } else { CHUNK }));
        }
        self.chunks[at].push(item);
        self.len += 1;
    }

    /// Room for `additional` more items without allocating while they are appended: a pass
    /// that knows how many rows it writes takes its memory once, ahead.
    pub fn reserve(&mut self, additional: usize) {
        let target = self.len + additional;
        if let Some(tail) = self.chunks.get_mut(self.len >> CHUNK_BITS) {
            let room = CHUNK - tail.len();
            tail.reserve(room.min(additional));
        }
        while self.chunks.len() * CHUNK < target {
            self.chunks.push(Vec::with_capacity(CHUNK));
        }
    }

    pub fn get(&self, index: usize) -> Option<&T> {
        self.chunks.get(index >> CHUNK_BITS)?.get(index % CHUNK)
    }

    /// Every item, in the order appended.
    pub fn iter(&self) -> std::iter::Flatten<std::slice::Iter<'_, Vec<T>>> {
        self.into_iter()
    }

    /// The items from `start` (appended since a reader last looked) to the end.
    pub fn iter_from(&self, start: usize) -> impl Iterator<Item = &T> + '_ {
        let skip = start.min(self.len);
        let first = skip >> CHUNK_BITS;
        self.chunks
            .iter()
            .skip(first)
            .flatten()
            .skip(skip - first * CHUNK)
    }
}

impl<T> Index<usize> for Log<T> {
    type Output = T;

    fn index(&self, index: usize) -> &T {
        &self.chunks[index >> CHUNK_BITS][index % CHUNK]
    }
}

impl<T> IndexMut<usize> for Log<T> {
    fn index_mut(&mut self, index: usize) -> &mut T {
        &mut self.chunks[index >> CHUNK_BITS][index % CHUNK]
    }
}

impl<'a, T> IntoIterator for &'a Log<T> {
    type Item = &'a T;
    type IntoIter = std::iter::Flatten<std::slice::Iter<'a, Vec<T>>>;

    fn into_iter(self) -> Self::IntoIter {
        self.chunks.iter().flatten()
    }
}

impl<T: PartialEq> PartialEq for Log<T> {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl<T: Eq> Eq for Log<T> {}

impl<T: fmt::Debug> fmt::Debug for Log<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T: Serialize> Serialize for Log<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.len))?;
        self.iter()
            .try_for_each(|item| seq.serialize_element(item))?;
        seq.end()
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Log<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Items<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Items<T> {
            type Value = Log<T>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a sequence")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Log<T>, A::Error> {
                let mut log = Log::default();
                while let Some(item) = seq.next_element()? {
                    log.push(item);
                }
                Ok(log)
            }
        }
        d.deserialize_seq(Items(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_reads_back_what_was_appended_across_chunks_and_encodes_as_a_vec() {
        let n = 2 * CHUNK + 5;
        let mut log = Log::default();
        log.reserve(CHUNK + 3);
        (0..n as u64).for_each(|i| log.push(i));
        assert_eq!(
            (log.len(), log[CHUNK], log.get(n - 1)),
            (n, CHUNK as u64, Some(&(n as u64 - 1)))
        );
        assert!(log.iter().copied().eq(0..n as u64));
        assert!(
            log.iter_from(CHUNK - 1)
                .copied()
                .eq(CHUNK as u64 - 1..n as u64)
        );
        assert_eq!(log.iter_from(n + 7).count(), 0);
        assert_eq!(log.get(n), None);
        log[3] = 33;
        let as_vec: Vec<u64> = log.iter().copied().collect();
        let bytes = postcard::to_allocvec(&log).expect("encodes");
        assert_eq!(bytes, postcard::to_allocvec(&as_vec).expect("encodes"));
        let back: Log<u64> = postcard::from_bytes(&bytes).expect("decodes");
        assert!(back == log && back.iter().eq(as_vec.iter()));
    }
}
