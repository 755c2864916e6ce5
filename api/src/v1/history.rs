//! What the history lists (transactions, trades, notifications, funding rates) share: their keys as the journal's
//! projection holds them, a time window over its rows, and a page's rows (issue 37).

use std::cmp::Reverse;
use std::ops::Bound;

use perpsim_core::time::Timestamp;
use perpsim_storage::Listed;
use perpsim_storage::{Holder, JournalError, Rows};
use perpsim_systems::records::ids::{FundingSeq, MovementSeq, NoticeSeq, TradeSeq};
use perpsim_systems::records::venue::MarketId;

use crate::pagination::{CursorKey, Keys};

/// A list's sort key: a row's sequence number, ascending or (`NEWEST_FIRST`) reversed.
pub trait SeqKey: CursorKey {
    const NEWEST_FIRST: bool;
    fn seq(&self) -> u64;
    fn from_seq(seq: u64) -> Self;
}

/// A list in sequence order: its key is the sequence number itself.
macro_rules! ascending_seq_key {
    ($($id:ident),*) => {$(
        impl SeqKey for $id {
            const NEWEST_FIRST: bool = false;

            fn seq(&self) -> u64 {
                self.0
            }

            fn from_seq(seq: u64) -> Self {
                $id(seq)
            }
        }
    )*};
}

ascending_seq_key!(TradeSeq, NoticeSeq, FundingSeq);

impl SeqKey for Reverse<MovementSeq> {
    const NEWEST_FIRST: bool = true;

    fn seq(&self) -> u64 {
        self.0.0
    }

    fn from_seq(seq: u64) -> Self {
        Reverse(MovementSeq(seq))
    }
}

/// A holder's list in the projection, of one market's rows or all.
pub struct ListKeys<'a, T> {
    pub read: &'a Rows<T>,
    pub list: (Holder, Option<MarketId>),
}

impl<T: Listed, K: SeqKey> Keys<K> for ListKeys<'_, T> {
    type Error = JournalError;

    fn take(
        &self,
        (low, high): (Bound<K>, Bound<K>),
        from_top: bool,
        limit: usize,
    ) -> Result<Vec<K>, JournalError> {
        let seq = |b: Bound<K>| b.map(|k| k.seq());
        // A newest-first list's low end is the highest sequence number.
        let (range, descending) = match K::NEWEST_FIRST {
            false => ((seq(low), seq(high)), from_top),
            true => ((seq(high), seq(low)), !from_top),
        };
        let seqs = self.read.seqs(self.list, range, descending, limit)?;
        Ok(seqs.into_iter().map(K::from_seq).collect())
    }
}

/// The sequence numbers `lo..end` of the rows made inside `[from, to]` (inclusive; either
/// open): rows are made in non-decreasing time, so the window is one range.
pub fn time_range<T: Listed>(
    read: &Rows<T>,
    time: impl Fn(&T) -> Timestamp,
    (from, to): (Option<Timestamp>, Option<Timestamp>),
) -> Result<(u64, u64), JournalError> {
    let lo = match from {
        Some(f) => read.partition_point(|r| time(r) >= f)?,
        None => 0,
    };
    let end = match to {
        Some(t) => read.partition_point(|r| time(r) > t)?,
        None => read.count()?,
    };
    Ok((lo, end))
}

/// The rows a page's keys name, in the page's order.
pub fn rows<T: Listed, K: SeqKey>(read: &Rows<T>, keys: &[K]) -> Result<Vec<T>, JournalError> {
    keys.iter().map(|k| read.listed(k.seq())).collect()
}
