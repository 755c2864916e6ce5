//! The projection's backlog (issue 37): rows whose ticks are durable in the journal but which
//! the projection's tables do not hold yet, so that a tick of a million rows (a funding hour
//! at a million positions) commits in the time of its journal record, not of its projection.
//!
//! A commit's rows go into the commit's own transaction, as always, when they are few and
//! nothing waits before them ([`Limits::inline`]). Otherwise they wait here as a [`Batch`],
//! and every later commit — and the writer when idle (`Journal::project_backlog`) — projects
//! a bounded share of the backlog, oldest first, table by table in key order
//! (`history::plan`): each answer waits for at most that share, and the hour's rows reach the
//! tables beside the answers that follow it.
//!
//! Reads never see less: the backlog is published ([`Pending`]) before the view of its ticks
//! and trimmed only after the transaction that completes a batch commits, and a read takes it
//! before it begins its read transaction, so the two together hold every row of every tick
//! the view it read has. A row in both is the backlog's, the newer.
//!
//! A busy server's commits are many and small (a place or a cancel each), and a transaction of
//! the projection's file costs about as much as the few rows it writes. So a server makes its
//! commits' rows wait here together ([`Limits::linger`]) and projects them in one transaction
//! once that many wait, or once the writer has had nothing to do for a while; reads find them
//! here meanwhile, as they find a large commit's.
//!
//! Crash safety needs nothing new: the projection's mark (`projected_through`) moves past a
//! batch in the transaction that writes the batch's last part, so after a crash it is behind
//! the journal, and recovery projects the ticks after it again (a part written twice is the
//! same rows and keys).
//!
//! Bounds: each commit projects `max(slice, backlog / 256)` writes, so a backlog stays within
//! about 256 commits' worth of rows however fast they come; a read walks the backlog's rows
//! of its kind (at most that many, for the seconds the backlog lasts). Lingering commits are
//! at most [`MAX_PROJECTION_LINGER`] (or a share's writes) before one projects them.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;

use arc_swap::ArcSwap;
use perpsim_core::ids::{CustomerCode, TradeCode};
use perpsim_systems::records::funding::FundingRecord;
use perpsim_systems::records::history::HandedHistory;
use perpsim_systems::records::money::Movement;
use perpsim_systems::records::order::Order;
use perpsim_systems::records::risk::{Notification, RiskRecord};
use perpsim_systems::records::trade::{PublicFill, TradeRecord};
use redb::WriteTransaction;

use crate::history::{KINDS, Listed, Step, plan};
use crate::journal::JournalError;
use crate::projection::{self, Projected};

/// A commit projects at least this share of the backlog's writes, so the backlog stays within
/// about this many commits' worth of rows however fast they come.
const SHARE: usize = 256;

/// When a commit's rows wait in the backlog, and how much of it a commit projects.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Rows a commit writes in its own transaction when the backlog is empty.
    pub inline: usize,
    /// Writes (rows and index entries) of the backlog projected a commit, at least.
    pub slice: usize,
    /// Commits whose rows wait together before a transaction projects them: 1, each commit
    /// projects its own (or a share of the backlog); more, every commit's rows wait until
    /// that many do (or `slice` writes), and an idle writer projects them sooner.
    pub linger: usize,
}

/// Rows a commit projects in its own transaction when the backlog is empty, unless set.
pub const DEFAULT_PROJECTION_BATCH: usize = 8_192;
/// The most that may be set: a commit of a million rows holds every answer after it for
/// seconds (`--bench journal -- journal/project`).
pub const MAX_PROJECTION_BATCH: usize = 1 << 20;
/// The most commits whose rows may wait together (`Journal::set_projection_linger`): a read
/// walks each waiting commit's rows of its kind.
pub const MAX_PROJECTION_LINGER: usize = 256;

impl Default for Limits {
    fn default() -> Self {
        // ~8k writes are ~20 ms of redb inserts (`--bench journal -- journal/project`).
        Limits {
            inline: DEFAULT_PROJECTION_BATCH,
            slice: 8_192,
            linger: 1,
        }
    }
}

/// One commit's rows waiting to be projected, with a lookup by sequence number per kind.
pub struct Batch {
    /// The last tick of the commit.
    tick: u64,
    rows: Projected,
    /// Per [`Listed::KIND`]: (seq, position in the hand-out) of the latest row of each seq,
    /// in seq order.
    lookups: [Vec<(u64, u32)>; KINDS],
}

impl Batch {
    fn new(tick: u64, rows: Projected) -> Self {
        let mut lookups: [Vec<(u64, u32)>; KINDS] = Default::default();
        let h = &rows.history;
        lookup::<Movement>(h, &mut lookups);
        lookup::<TradeRecord>(h, &mut lookups);
        lookup::<Notification>(h, &mut lookups);
        lookup::<RiskRecord>(h, &mut lookups);
        lookup::<PublicFill>(h, &mut lookups);
        lookup::<FundingRecord>(h, &mut lookups);
        Batch {
            tick,
            rows,
            lookups,
        }
    }

    /// The batch's latest rows of a kind with seqs in `range`, in seq order (or reversed).
    fn in_range<T: Listed>(
        &self,
        range: (Bound<u64>, Bound<u64>),
        descending: bool,
    ) -> Box<dyn Iterator<Item = (u64, &T)> + '_> {
        let lookup = &self.lookups[T::KIND];
        let from = match range.0 {
            Bound::Included(s) => lookup.partition_point(|&(q, _)| q < s),
            Bound::Excluded(s) => lookup.partition_point(|&(q, _)| q <= s),
            Bound::Unbounded => 0,
        };
        let to = match range.1 {
            Bound::Included(s) => lookup.partition_point(|&(q, _)| q <= s),
            Bound::Excluded(s) => lookup.partition_point(|&(q, _)| q < s),
            Bound::Unbounded => lookup.len(),
        };
        let found = lookup[from..to.max(from)]
            .iter()
            .map(|&(seq, at)| (seq, self.at::<T>(at)));
        if descending {
            Box::new(found.rev())
        } else {
            Box::new(found)
        }
    }

    fn at<T: Listed>(&self, position: u32) -> &T {
        T::of(&self.rows.history)
            .iter()
            .nth(position as usize)
            .expect("a lookup names a row of its batch")
    }
}

/// A kind's lookup: each seq's latest row's position, in seq order.
fn lookup<T: Listed>(h: &HandedHistory, lookups: &mut [Vec<(u64, u32)>; KINDS]) {
    let position = |i: usize| u32::try_from(i).expect("a batch holds fewer than 2^32 rows");
    let mut found: Vec<(u64, u32)> = T::of(h)
        .iter()
        .enumerate()
        .map(|(i, r)| (r.seq(), position(i)))
        .collect();
    if !found.is_sorted() {
        // Stable: of two rows of a seq the later, changed one stays last.
        found.sort_by_key(|&(seq, _)| seq);
    }
    found.reverse();
    found.dedup_by_key(|&mut (seq, _)| seq);
    found.reverse();
    lookups[T::KIND] = found;
}

/// The backlog as reads see it: its batches, oldest first.
#[derive(Default)]
pub struct Pending {
    batches: Vec<Arc<Batch>>,
}

impl Pending {
    /// One past the highest seq of a kind the backlog holds (0: none).
    pub(crate) fn count<T: Listed>(&self) -> u64 {
        let last = |b: &Arc<Batch>| b.lookups[T::KIND].last().map(|&(seq, _)| seq + 1);
        self.batches.iter().filter_map(last).max().unwrap_or(0)
    }

    /// The latest row numbered `seq`, if the backlog holds it.
    pub(crate) fn get<T: Listed>(&self, seq: u64) -> Option<&T> {
        self.batches.iter().rev().find_map(|b| {
            let lookup = &b.lookups[T::KIND];
            let i = lookup.binary_search_by_key(&seq, |&(q, _)| q).ok()?;
            Some(b.at::<T>(lookup[i].1))
        })
    }

    /// Up to `limit` seqs of rows in `range` that `listed` takes, from each batch; the caller
    /// merges them with the table's.
    pub(crate) fn seqs<T: Listed>(
        &self,
        listed: impl Fn(&T) -> bool,
        range: (Bound<u64>, Bound<u64>),
        descending: bool,
        limit: usize,
    ) -> Vec<u64> {
        let mut out = Vec::new();
        for b in &self.batches {
            let found = b.in_range::<T>(range, descending);
            out.extend(found.filter(|(_, r)| listed(r)).map(|(s, _)| s).take(limit));
        }
        out
    }

    /// The public fills the backlog holds, in sequence order.
    pub(crate) fn fills(&self) -> impl Iterator<Item = &PublicFill> {
        self.batches
            .iter()
            .flat_map(|b| b.rows.history.fills.iter())
    }

    /// The seq of the trade record with this code (codes are unique), if the backlog holds
    /// it.
    pub(crate) fn trade(&self, code: TradeCode) -> Option<u64> {
        let mut trades = self
            .batches
            .iter()
            .flat_map(|b| b.rows.history.trades.iter());
        trades.find(|t| t.code == code).map(|t| t.seq.0)
    }

    /// The latest ended order under `reference` of `customer`, if the backlog holds one.
    pub(crate) fn ended_order(&self, customer: CustomerCode, reference: &str) -> Option<&Order> {
        let orders = self
            .batches
            .iter()
            .rev()
            .flat_map(|b| b.rows.ended.iter().rev());
        orders
            .map(|o| &**o)
            .find(|o| o.customer == customer && &*o.reference_id == reference)
    }
}

/// A batch, its steps, and how far they are written.
struct Queued {
    batch: Arc<Batch>,
    steps: Vec<Step>,
    /// The next step to write, and how much of it is written.
    at: (usize, usize),
}

impl Queued {
    fn left(&self) -> usize {
        let rows = &self.batch.rows;
        let (step, done) = self.at;
        let rest: usize = self.steps[step..].iter().map(|s| s.len(rows)).sum();
        rest - done
    }
}

/// The writer's side of the backlog.
pub(crate) struct Backlog {
    queue: VecDeque<Queued>,
    /// Writes left, over every batch.
    writes: usize,
    limits: Limits,
    published: Arc<ArcSwap<Pending>>,
}

/// What one transaction's share of the backlog did, applied once it commits.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    /// Batches completed, from the front.
    done: usize,
    /// Where the next batch stands.
    at: (usize, usize),
    writes: usize,
}

impl Backlog {
    pub(crate) fn new(published: Arc<ArcSwap<Pending>>) -> Self {
        Backlog {
            queue: VecDeque::new(),
            writes: 0,
            limits: Limits::default(),
            published,
        }
    }

    pub(crate) fn published(&self) -> Arc<ArcSwap<Pending>> {
        Arc::clone(&self.published)
    }

    pub(crate) fn limits(&self) -> Limits {
        self.limits
    }

    pub(crate) fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// Whether a commit's `rows` wait here rather than go into its own transaction.
    pub(crate) fn takes(&self, rows: &Projected) -> bool {
        !self.queue.is_empty() || rows.len() > self.limits.inline || self.limits.linger > 1
    }

    /// Whether a transaction should project a share of the backlog now: as soon as it holds
    /// anything, or, with commits lingering, once `linger` commits' rows or a share's writes
    /// wait.
    pub(crate) fn due(&self) -> bool {
        let waiting = self.queue.len();
        waiting > 0 && (waiting >= self.limits.linger || self.writes >= self.limits.slice)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Rows and index entries not yet projected.
    pub(crate) fn writes(&self) -> usize {
        self.writes
    }

    /// Writes this transaction's share of the backlog, oldest first; marks the projection
    /// complete through the last batch it completes.
    /// A transaction's share of the backlog's writes.
    fn share(&self) -> usize {
        self.limits.slice.max(self.writes / SHARE)
    }

    /// Whether the next share projects the whole backlog.
    pub(crate) fn empties_in_one_share(&self) -> bool {
        self.writes <= self.share()
    }

    /// Whether a commit of more than `inline` rows waits here (lingering commits' rows are
    /// few, and re-projected after a crash at little cost).
    pub(crate) fn holds_large(&self) -> bool {
        let inline = self.limits.inline;
        self.queue.iter().any(|q| q.batch.rows.len() > inline)
    }

    pub(crate) fn work(&mut self, txn: &WriteTransaction) -> Result<Progress, JournalError> {
        let mut budget = self.share();
        let mut progress = Progress::default();
        for (i, q) in self.queue.iter_mut().enumerate() {
            let (mut step, mut done) = if i == 0 { q.at } else { (0, 0) };
            let rows = &q.batch.rows;
            while step < q.steps.len() && budget > 0 {
                if done == 0 {
                    q.steps[step].prepare();
                }
                let len = q.steps[step].len(rows);
                let n = (len - done).min(budget);
                q.steps[step].write(txn, rows, done..done + n)?;
                (budget, progress.writes) = (budget - n, progress.writes + n);
                done += n;
                if done == len {
                    (step, done) = (step + 1, 0);
                }
            }
            if step < q.steps.len() {
                progress.at = (step, done);
                break;
            }
            progress.done = i + 1;
            projection::mark(txn, q.batch.tick)?;
        }
        Ok(progress)
    }

    /// Applies a committed transaction's share, and `more` rows (of the ticks through
    /// `tick`, just committed) to wait; publishes the backlog for reads.
    pub(crate) fn advance(&mut self, progress: Progress, more: Option<(u64, Projected)>) {
        self.queue.drain(..progress.done);
        if let Some(front) = self.queue.front_mut() {
            front.at = progress.at;
        }
        self.writes -= progress.writes;
        if let Some((tick, rows)) = more {
            let steps = plan(&rows);
            let q = Queued {
                batch: Arc::new(Batch::new(tick, rows)),
                steps,
                at: (0, 0),
            };
            self.writes += q.left();
            self.queue.push_back(q);
        }
        let batches = self.queue.iter().map(|q| Arc::clone(&q.batch)).collect();
        self.published.store(Arc::new(Pending { batches }));
        debug_assert_eq!(self.writes, self.queue.iter().map(Queued::left).sum());
    }
}
