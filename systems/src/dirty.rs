//! Keys changed since the read view last looked.
//!
//! Bookings mark what they touch on the hot path, so marking is a push, not a set insert;
//! the view takes the keys sorted and deduplicated, every tick while the engine serves.
//! Bounded all the same: the list compacts itself in place (sort, dedup) whenever it has
//! doubled since its last compaction, so it never holds more than twice the distinct keys
//! changed since the last take (or [`MIN_COMPACT`]), at amortised O(log n) a push.
//!
//! With publishing off (a replay) nobody reads the view, so tracking is paused: marking
//! costs one branch and nothing is kept. Resuming marks every key, and the view catches up
//! in full, the way a restored engine's first publish does.

/// Below this many entries a list never compacts: more than one tick of a busy engine marks.
pub const MIN_COMPACT: usize = 1 << 16;

#[derive(Debug, Clone)]
pub struct DirtyKeys<T> {
    keys: Vec<T>,
    compact_at: usize,
    tracking: bool,
}

impl<T> Default for DirtyKeys<T> {
    fn default() -> Self {
        DirtyKeys {
            keys: Vec::new(),
            compact_at: MIN_COMPACT,
            tracking: true,
        }
    }
}

impl<T> DirtyKeys<T> {
    /// Not tracking until [`DirtyKeys::resume`]d.
    pub fn paused() -> Self {
        DirtyKeys {
            tracking: false,
            ..Self::default()
        }
    }
}

impl<T: Ord> DirtyKeys<T> {
    pub fn push(&mut self, key: T) {
        if !self.tracking {
            return;
        }
        self.keys.push(key);
        if self.keys.len() >= self.compact_at {
            self.compact();
            self.compact_at = (2 * self.keys.len()).max(MIN_COMPACT);
        }
    }

    fn compact(&mut self) {
        // The stable sort merges runs: a periodic pass marks its keys in order, after a
        // compacted prefix, and two runs merge in one linear pass instead of a full sort.
        self.keys.sort();
        self.keys.dedup();
    }

    /// Everything marked since the last take, sorted, each key once.
    pub fn take(&mut self) -> Vec<T> {
        self.compact();
        self.compact_at = MIN_COMPACT;
        std::mem::take(&mut self.keys)
    }

    pub fn is_tracking(&self) -> bool {
        self.tracking
    }

    /// Stops tracking and forgets what was marked: nothing will read it.
    pub fn pause(&mut self) {
        self.tracking = false;
        self.keys = Vec::new();
        self.compact_at = MIN_COMPACT;
    }

    /// Tracks again with every key in `all` marked, which covers whatever changed while
    /// paused.
    pub fn resume(&mut self, all: impl IntoIterator<Item = T>) {
        self.tracking = true;
        all.into_iter().for_each(|k| self.push(k));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_come_out_sorted_and_once() {
        let mut d = DirtyKeys::default();
        [5, 1, 5, 3, 1, 2].into_iter().for_each(|k| d.push(k));
        assert_eq!(d.take(), [1, 2, 3, 5]);
        assert_eq!(d.take(), Vec::<u32>::new());
    }

    #[test]
    fn a_list_nobody_takes_stays_within_twice_its_distinct_keys() {
        // Past the floor, so compaction is what keeps it bounded.
        let distinct = MIN_COMPACT as u32 + 5_000;
        let mut d = DirtyKeys::default();
        for i in 0..4 * distinct {
            d.push(i % distinct);
            assert!(
                d.keys.len() <= 2 * distinct as usize,
                "{} at push {i}",
                d.keys.len()
            );
        }
        assert_eq!(d.take().len(), distinct as usize);
    }

    #[test]
    fn a_paused_list_keeps_nothing_and_resumes_with_every_key() {
        let mut d = DirtyKeys::default();
        d.push(7);
        d.pause();
        d.push(8);
        assert!(d.keys.is_empty());
        d.resume([3, 1, 2]);
        d.push(9);
        assert_eq!(d.take(), [1, 2, 3, 9]);
    }
}
