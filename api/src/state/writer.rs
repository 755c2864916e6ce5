//! The journal's writer: the threads that make the engine's ticks durable, in order, and only
//! then publish each one and answer its senders.
//!
//! The engine thread applies a tick and hands it here; while this thread commits it, the
//! engine applies the next. The nonces of signed requests that sent no command come here
//! straight from the request handlers ([`Spend`]), so such a request never waits for a tick
//! being applied. Every tick, and the nonces spent alone, waiting when a commit ends go into
//! the next transaction together (a group). A server's journal commits a group without a sync
//! of redb's file and hands the group's record to the log's thread (`perpsim-log`), which
//! appends every record waiting in one synced write to the group log
//! (`perpsim_storage::group_log`) while this thread commits the next group; only then does it
//! project the group's history rows and publish it. What a tick's senders hear, the view the
//! reads load, the events the channels push and the rows the history reads find still follow
//! its durability, never precede it: nothing of a tick leaves before it survives a crash.
//! A journal shared with readers (`--journal-readers on`) has no log: each commit syncs.
//!
//! The history rows a tick let go, and the orders that ended in it, owe their digest to the
//! engine's state hash (see `ProjectedLog` and `EndedRun`): this thread computes it,
//! [`SETTLE_AFTER_COMMIT`] rows after each commit and [`SETTLE_IDLE`] at a time while nothing
//! waits, so the engine's tick does not.
//!
//! Bounds: at most [`PIPELINE`] jobs wait in the channel (the engine waits when it is full),
//! and the nonces spent alone that wait are bounded by the engine queue's size (a request
//! waits when it is full). A commit takes at most [`PIPELINE`] of the engine's jobs and twice
//! [`SPENDS_A_JOB`] nonces spent alone (a job of them may open it, and those waiting at its
//! end join it), and at most [`PIPELINE`] groups wait for the log's thread (this thread waits
//! when they do); the hand-outs whose digest is owed are bounded by the engine's
//! `MAX_OWED_ROWS` (beyond it the engine computes them itself).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use perpsim_core::ids::{BrokerCode, PublicKey};
use perpsim_storage::{
    Archived, GroupLog, Journal, JournalError, NonceWrites, Projected, SEGMENT_BYTES,
    SEGMENT_TICKS, Sealed, UsedNonce,
};
use perpsim_systems::records::history::HandedHistory;
use perpsim_systems::records::order::Order;
use perpsim_systems::{Answers, EndedRun, EngineEvent, ReadView};
use tokio::sync::{broadcast, oneshot};

use super::host::{Reply, StateReport, TickBundle, TickEvents, wall_clock_ns};
use super::metrics;
use super::published::Published;
use crate::signing::BEHIND_NS;

/// Jobs waiting for the writer, and ticks in one commit.
pub(super) const PIPELINE: usize = 64;

/// Nonces spent alone taken into one job: the engine's bound on a tick's requests.
const SPENDS_A_JOB: usize = 4_096;

/// Rows whose owed digest the writer computes after each commit, at most (about a
/// millisecond): a tick's few at once, a funding hour's over the commits that follow it.
const SETTLE_AFTER_COMMIT: usize = 8_192;

/// Rows whose owed digest the writer computes in one idle turn (about 10 ms), before it
/// projects a share of the backlog.
const SETTLE_IDLE: usize = 65_536;

/// How long the writer waits for a job before it writes the groups waiting for redb.
const QUIET: Duration = Duration::from_millis(20);

/// Spent nonces are forgotten once their floor has moved this far (wall-clock ns): each
/// forgetting rewrites the nonce table's oldest pages, so doing it at every commit would
/// double the pages a commit writes to that table. A nonce kept a second longer than its
/// window is refused by the window all the same.
const FORGET_EVERY_NS: u64 = 1_000_000_000;

/// Spent nonces are kept this long after their own time: the window's 30 s, and 5 s more so a
/// small step back of the wall clock cannot bring a forgotten nonce back into the window.
const FORGET_AFTER_NS: u64 = BEHIND_NS + 5_000_000_000;

/// The floor to forget spent nonces below, given the last one forgotten and the one now due:
/// the due one once it has moved [`FORGET_EVERY_NS`] past the last.
fn floor_to_forget(forgotten: u64, due: u64) -> Option<u64> {
    (due >= forgotten.saturating_add(FORGET_EVERY_NS)).then_some(due)
}

/// What the engine thread hands to the writer, in the order it happened.
pub(super) enum Job {
    Tick(Box<Made>),
    After(After),
}

/// What waits for the ticks handed before it to be durable.
pub(super) enum After {
    /// A snapshot of the state after those ticks; `reply` is a shutdown's.
    Snapshot {
        tick: u64,
        encoded: Vec<u8>,
        reply: Option<oneshot::Sender<Result<(), String>>>,
    },
    /// A state report, answered once they are durable.
    State(oneshot::Sender<StateReport>, StateReport),
    /// One segment of the journal's oldest ticks moved to its archive (between commits, so
    /// it holds the writer for one bounded segment).
    Archive(oneshot::Sender<Result<Archived, String>>),
}

/// A signed request's nonce that no command carried, to spend durably: `reply` hears once it
/// is (dropped unsent if it cannot be).
pub(super) struct Spend {
    pub used: UsedNonce,
    pub reply: oneshot::Sender<()>,
}

/// A tick applied (or nonces alone to spend), with what leaves once it is durable.
pub(super) struct Made {
    /// The tick; none for a write of nonces alone.
    pub tick: Option<Applied>,
    pub nonces: Vec<UsedNonce>,
    pub nonce_replies: Vec<oneshot::Sender<()>>,
}

/// A tick the engine applied: its journal record (its number follows the last one handed),
/// and its view, events and answers.
pub(super) struct Applied {
    pub record: Vec<u8>,
    pub view: Arc<ReadView>,
    pub events: Vec<EngineEvent>,
    /// The orders that ended in the tick: projected with it (in its transaction, or by the
    /// projection's backlog), as the view no longer holds them.
    pub ended: Vec<Arc<Order>>,
    /// The history rows the tick made or changed: projected likewise, as the view holds
    /// none.
    pub history: HandedHistory,
    /// The tick's ended orders whose link of the engine's running digest is owed: settled
    /// here, off the engine thread (`perpsim_systems::EndedRun`).
    pub ended_runs: Vec<Arc<EndedRun>>,
    /// Each command's sender, in command order.
    pub replies: Vec<Reply>,
    pub answers: Answers,
}

impl Made {
    fn job(self) -> Job {
        Job::Tick(Box::new(self))
    }
}

pub(super) struct Writer {
    journal: Arc<Journal>,
    /// What publishes each group once it is durable; moved to the log's thread by `run`.
    publisher: Option<Publisher>,
    /// The last tick committed to the journal (durable, or on its way through the log).
    committed: u64,
    /// The hand-outs committed whose runs still owe their digest, oldest first.
    owed: VecDeque<HandedHistory>,
    /// The runs of ended orders committed whose link is still owed, oldest first.
    owed_ended: VecDeque<Arc<EndedRun>>,
    /// The floor below which spent nonces were last forgotten (wall-clock ns).
    forgotten_below: u64,
    /// The last tick committed when the file's size was last read (0: never).
    sized_at: u64,
}

/// What leaves once the groups before it are durable: the log's thread takes them in order.
struct Publisher {
    journal: Arc<Journal>,
    view: Arc<ArcSwap<ReadView>>,
    events: broadcast::Sender<TickEvents>,
    /// The keys of the last view broadcast: a tick that changes them is broadcast even with
    /// no events, so the channels close a revoked key's sessions at once (D9).
    keys: imbl::OrdMap<PublicKey, BrokerCode>,
    /// Where each tick published is noted, for the engine thread's linger.
    published: Arc<Published>,
}

/// One item for the log's thread, in commit order.
enum Release {
    /// A committed group: its record to append (none: durable already), whether the log
    /// starts again after it, its ticks' span and rows to project, what to publish.
    Group {
        sealed: Sealed,
        span: Option<(u64, u64)>,
        rows: Projected,
        made: Vec<Made>,
    },
    /// A state report, answered once the groups before it are durable and published.
    State(oneshot::Sender<StateReport>, StateReport),
    /// Heard once the groups before it are projected (a snapshot waits for it).
    Barrier(std::sync::mpsc::SyncSender<()>),
}

/// Where the writer's work comes from: the engine thread's jobs, in the order it made them,
/// and the nonces that signed requests without a command spend, which skip the engine.
struct Inbox {
    jobs: flume::Receiver<Job>,
    /// None once every handle that spends them has gone.
    spends: Option<flume::Receiver<Spend>>,
}

/// The engine thread has ended: no job comes after those taken.
struct Ended;

/// What a wait for work ended with.
enum Woke {
    Job(Job),
    Spend(Spend),
    Ended,
    SpendsGone,
    Quiet,
}

impl Inbox {
    /// The next job waiting: the engine's first, else the nonces waiting as one job.
    fn try_next(&mut self) -> Result<Option<Job>, Ended> {
        match self.jobs.try_recv() {
            Ok(job) => Ok(Some(job)),
            Err(flume::TryRecvError::Disconnected) => Err(Ended),
            Err(flume::TryRecvError::Empty) => Ok(self.spent(None).map(Made::job)),
        }
    }

    /// The nonces waiting join a group about to be committed: a writer kept busy by the
    /// engine's ticks still spends them at each commit.
    fn spent_into(&mut self, group: &mut Vec<Made>) {
        group.extend(self.spent(None));
    }

    /// `first` and the nonces waiting after it, at most [`SPENDS_A_JOB`], as one write of
    /// nonces alone; none when there are none.
    fn spent(&mut self, first: Option<Spend>) -> Option<Made> {
        let waiting = self.spends.iter().flat_map(|s| s.try_iter());
        let (nonces, nonce_replies): (Vec<_>, Vec<_>) = first
            .into_iter()
            .chain(waiting)
            .take(SPENDS_A_JOB)
            .map(|spend| (spend.used, spend.reply))
            .unzip();
        (!nonces.is_empty()).then_some(Made {
            tick: None,
            nonces,
            nonce_replies,
        })
    }

    /// Waits for a job or a nonce, at most `quiet` (for ever without it): none when it
    /// passed with neither.
    fn wait(&mut self, quiet: Option<Duration>) -> Result<Option<Job>, Ended> {
        loop {
            let mut selector =
                flume::Selector::new().recv(&self.jobs, |r| r.map_or(Woke::Ended, Woke::Job));
            if let Some(spends) = &self.spends {
                selector = selector.recv(spends, |r| r.map_or(Woke::SpendsGone, Woke::Spend));
            }
            let woke = match quiet {
                Some(quiet) => selector.wait_timeout(quiet).unwrap_or(Woke::Quiet),
                None => selector.wait(),
            };
            match woke {
                Woke::Job(job) => return Ok(Some(job)),
                Woke::Spend(first) => return Ok(self.spent(Some(first)).map(Made::job)),
                Woke::Ended => return Err(Ended),
                Woke::Quiet => return Ok(None),
                Woke::SpendsGone => self.spends = None, // and wait for the engine alone
            }
        }
    }
}

impl Writer {
    /// The writer of `journal`, whose last tick committed is `committed`: it publishes each
    /// tick once durable into `view`, which holds the state after `committed`, and `events`,
    /// and notes it in `published`.
    pub(super) fn new(
        journal: Arc<Journal>,
        view: Arc<ArcSwap<ReadView>>,
        events: broadcast::Sender<TickEvents>,
        committed: u64,
        published: Arc<Published>,
    ) -> Writer {
        let keys = view.load().keys.clone();
        Writer {
            publisher: Some(Publisher {
                journal: Arc::clone(&journal),
                view,
                events,
                keys,
                published,
            }),
            journal,
            committed,
            owed: VecDeque::new(),
            owed_ended: VecDeque::new(),
            forgotten_below: 0,
            sized_at: 0,
        }
    }

    /// Starts the writer's thread: the engine thread hands it jobs through the sender this
    /// returns (the writer ends once that is dropped and every job before is written), and
    /// signed requests without a command their nonces through `spends`.
    pub(super) fn start(
        self,
        spends: flume::Receiver<Spend>,
    ) -> (flume::Sender<Job>, JoinHandle<Result<(), JournalError>>) {
        let (jobs, received) = flume::bounded(PIPELINE);
        let inbox = Inbox {
            jobs: received,
            spends: Some(spends),
        };
        let thread = std::thread::Builder::new()
            .name("perpsim-journal".into())
            .spawn(move || self.run(inbox))
            .expect("spawn the journal's writer");
        (jobs, thread)
    }

    /// Commits every job until the engine thread drops its sender; the log's thread makes
    /// each group durable and publishes it. A commit that fails ends the thread with its
    /// error: the replies of every tick not made durable are dropped unsent, so each waiting
    /// request hears that nothing of it was confirmed.
    fn run(mut self, mut inbox: Inbox) -> Result<(), JournalError> {
        let (release, released) = std::sync::mpsc::sync_channel(PIPELINE);
        let log = self.journal.take_group_log();
        let publisher = self.publisher.take().expect("run once");
        let thread = std::thread::Builder::new()
            .name("perpsim-log".into())
            .spawn(move || publisher.run(log, released))
            .expect("spawn the group log's thread");
        let committed = self.commit_all(&mut inbox, &release);
        drop(release);
        let released = thread.join().expect("the group log's thread never panics");
        // The log's thread's own error first: the writer's then only says it stopped.
        released.and(committed)?;
        // Stopping: the backlog reaches the projection's tables and redb's file is synced
        // before it closes (a crash instead leaves both to recovery).
        while self.journal.project_backlog()? {}
        metrics::backlog(0);
        self.journal.checkpoint()
    }

    fn commit_all(
        &mut self,
        inbox: &mut Inbox,
        release: &SyncSender<Release>,
    ) -> Result<(), JournalError> {
        let mut group = Vec::with_capacity(PIPELINE);
        while let Some(first) = self.next_job(inbox)? {
            let mut job = Some(first);
            while let Some(next) = job {
                match next {
                    Job::Tick(made) => group.push(*made),
                    Job::After(after) => {
                        inbox.spent_into(&mut group);
                        self.commit(&mut group, release)?;
                        self.finish(after, release)?;
                    }
                }
                // The engine's jobs only: the nonces waiting join at the commit, so a commit
                // holds at most two jobs' worth of them however many wait.
                job = if group.len() < PIPELINE {
                    inbox.jobs.try_recv().ok()
                } else {
                    None
                };
            }
            inbox.spent_into(&mut group);
            self.commit(&mut group, release)?;
        }
        Ok(())
    }

    /// The next job (none once the engine thread has gone); while none waits, the
    /// projection's backlog is projected a share at a time where it is due (see
    /// `Journal::project_due`).
    fn next_job(&mut self, inbox: &mut Inbox) -> Result<Option<Job>, JournalError> {
        loop {
            match inbox.try_next() {
                Ok(Some(job)) => return Ok(Some(job)),
                Err(Ended) => return Ok(None),
                Ok(None) => {
                    let settling = self.settle(SETTLE_IDLE);
                    let more = self.journal.project_due()? || settling;
                    metrics::backlog(self.journal.backlog());
                    if !more {
                        return self.wait_job(inbox);
                    }
                }
            }
        }
    }

    /// Waits for the next job; once none came for [`QUIET`], the rows lingering in the
    /// projection's backlog are projected and the groups sealed through the log are written to
    /// redb's file (a server between bursts keeps both current, without a transaction of its
    /// own at each pause of a busy one).
    fn wait_job(&mut self, inbox: &mut Inbox) -> Result<Option<Job>, JournalError> {
        match inbox.wait(Some(QUIET)) {
            Ok(Some(job)) => return Ok(Some(job)),
            Err(Ended) => return Ok(None),
            Ok(None) => {
                while self.journal.project_backlog()? {}
                metrics::backlog(0);
                self.journal.write_pending()?;
                self.size_journal();
            }
        }
        Ok(inbox.wait(None).ok().flatten())
    }

    /// Reads the journal file's size into its metric.
    fn size_journal(&mut self) {
        self.sized_at = self.committed.max(1);
        if let Ok(bytes) = self.journal.file_bytes() {
            metrics::journal_bytes(bytes);
        }
    }

    /// One transaction for the group's ticks and nonces (through the group log: durable once
    /// the log's thread appends its record, which then publishes each in order).
    fn commit(
        &mut self,
        group: &mut Vec<Made>,
        release: &SyncSender<Release>,
    ) -> Result<(), JournalError> {
        if group.is_empty() {
            return Ok(());
        }
        // Moved out, in tick order (a movement changed in two of the ticks is written twice,
        // the later last): publishing needs none of them.
        let mut rows = Projected::default();
        for t in group.iter_mut().filter_map(|m| m.tick.as_mut()) {
            rows.ended.append(&mut t.ended);
            rows.history.append(&mut t.history);
            self.owed_ended.extend(t.ended_runs.drain(..));
        }
        if rows.history.owing() > 0 {
            self.owed.push_back(rows.history.clone()); // the runs, shared, not the rows
        }
        let forget_below = self.forget_below();
        let first = self.committed + 1;
        let started = Instant::now();
        let (sealed, count) = {
            let ticks: Vec<&[u8]> = group
                .iter()
                .filter_map(|m| m.tick.as_ref().map(|t| t.record.as_slice()))
                .collect();
            let nonces: Vec<UsedNonce> = group
                .iter()
                .flat_map(|m| m.nonces.iter().copied())
                .collect();
            let writes = NonceWrites {
                used: &nonces,
                forget_below,
            };
            match self.journal.commit_group(first, &ticks, writes) {
                Ok(sealed) => (sealed, ticks.len() as u64),
                Err(e) => {
                    tracing::error!(error = %e, "journal commit failed; stopping the engine");
                    return Err(e);
                }
            }
        };
        self.committed += count;
        metrics::commit(started.elapsed(), count as usize, self.committed);
        // The file's size is a system call: read at the first commit, then once a
        // [`PIPELINE`] ticks, and when the writer falls quiet.
        if self.sized_at == 0 || self.committed >= self.sized_at + PIPELINE as u64 {
            self.size_journal();
        }
        let span = (count > 0).then_some((first, self.committed));
        let made = std::mem::take(group);
        release
            .send(Release::Group {
                sealed,
                span,
                rows,
                made,
            })
            .map_err(|_| log_stopped())?;
        group.reserve(PIPELINE);
        self.settle(SETTLE_AFTER_COMMIT);
        Ok(())
    }

    /// The floor to forget spent nonces below in this commit, by the wall clock now (0: none),
    /// and it is recorded.
    fn forget_below(&mut self) -> u64 {
        let due = wall_clock_ns().saturating_sub(FORGET_AFTER_NS);
        let Some(floor) = floor_to_forget(self.forgotten_below, due) else {
            return 0;
        };
        self.forgotten_below = floor;
        floor
    }

    /// Computes owed digests, oldest first, until `budget` rows (ended orders first) are
    /// digested; whether any are still owed.
    fn settle(&mut self, budget: usize) -> bool {
        let mut left = budget;
        while let Some(run) = self.owed_ended.front() {
            if left == 0 {
                return true;
            }
            // The engine settles a run itself past its bound, or for a snapshot: the link
            // before is then known all the same, as the runs are settled in order.
            assert!(run.settle(), "the run before it was settled first");
            left = left.saturating_sub(run.orders());
            self.owed_ended.pop_front();
        }
        while let Some(history) = self.owed.front() {
            left = left.saturating_sub(history.settle(left));
            if history.owing() > 0 {
                return true;
            }
            self.owed.pop_front();
        }
        false
    }

    /// Archives the whole segments of ticks no kept snapshot needs any more, so the journal's
    /// file, which a restart after a crash walks, holds about two snapshot intervals of ticks
    /// whatever the history. A failure leaves the ticks in the file, and serving goes on.
    fn archive_behind_snapshots(&self) {
        match self
            .journal
            .archive_whole_segments(SEGMENT_TICKS, SEGMENT_BYTES)
        {
            Ok(Some(done)) => {
                metrics::archive(Some(done.archive_bytes));
                tracing::info!(through = done.archived_through, "journal archived");
            }
            Ok(None) => {}
            Err(e) => tracing::error!(error = %e, "journal archive failed"),
        }
    }

    fn finish(&mut self, after: After, release: &SyncSender<Release>) -> Result<(), JournalError> {
        match after {
            After::State(reply, report) => release
                .send(Release::State(reply, report))
                .map_err(|_| log_stopped()),
            After::Archive(reply) => {
                let archived = self.journal.archive(SEGMENT_TICKS);
                match &archived {
                    Ok(done) => {
                        metrics::archive(Some(done.archive_bytes));
                        tracing::info!(through = done.archived_through, "journal archived");
                    }
                    // The journal forgets its ticks only in the transaction that lists the
                    // segment: a failure leaves them where they were, and serving goes on.
                    Err(e) => tracing::error!(error = %e, "journal archive failed"),
                }
                let _ = reply.send(archived.map_err(|e| e.to_string()));
                Ok(())
            }
            After::Snapshot {
                tick,
                encoded,
                reply,
            } => {
                // Every kept snapshot is at or before the projection's mark, so recovery
                // always starts from the newest: the groups before it are projected, and the
                // backlog, first (a stall only when a snapshot falls in the seconds after a
                // tick of a million rows).
                let (heard, hear) = std::sync::mpsc::sync_channel(1);
                release
                    .send(Release::Barrier(heard))
                    .map_err(|_| log_stopped())?;
                hear.recv().map_err(|_| log_stopped())?;
                while self.journal.project_backlog()? {}
                metrics::backlog(0);
                let written = self.journal.write_snapshot(tick, encoded);
                if let Ok(info) = &written {
                    metrics::snapshot();
                    tracing::info!(tick, hash = %info.hash, "snapshot written");
                    self.archive_behind_snapshots();
                }
                match reply {
                    // A shutdown's snapshot: its requester hears how it went.
                    Some(reply) => {
                        let _ = reply.send(written.map(drop).map_err(|e| e.to_string()));
                        Ok(())
                    }
                    None => written.map(drop),
                }
            }
        }
    }
}

/// The log's thread's end stopped (its error is that thread's result).
fn log_stopped() -> JournalError {
    JournalError::Storage("the group log's thread stopped".into())
}

impl Publisher {
    /// Makes each drain of groups durable (one append of their records, started again
    /// after a checkpoint) and then releases them in order, until the writer drops its end.
    fn run(
        mut self,
        mut log: Option<GroupLog>,
        released: Receiver<Release>,
    ) -> Result<(), JournalError> {
        while let Ok(first) = released.recv() {
            let mut batch = vec![first];
            while batch.len() < PIPELINE {
                match released.try_recv() {
                    Ok(next) => batch.push(next),
                    Err(_) => break,
                }
            }
            append(log.as_mut(), &batch)?;
            for item in batch {
                self.release(item)?;
            }
        }
        Ok(())
    }

    fn release(&mut self, item: Release) -> Result<(), JournalError> {
        match item {
            Release::Group {
                span, rows, made, ..
            } => {
                self.journal.project_committed(span, rows)?;
                metrics::backlog(self.journal.backlog());
                for made in made {
                    self.publish(made);
                }
            }
            Release::State(reply, report) => {
                let _ = reply.send(report);
            }
            Release::Barrier(reply) => {
                let _ = reply.send(());
            }
        }
        Ok(())
    }

    /// Answers a durable tick's nonces, publishes its view and events, answers its commands.
    fn publish(&mut self, made: Made) {
        for reply in made.nonce_replies {
            let _ = reply.send(()); // a requester that has gone no longer needs to hear it
        }
        let Some(tick) = made.tick else {
            return;
        };
        let view_tick = tick.view.tick;
        self.view.store(Arc::clone(&tick.view));
        if !tick.events.is_empty() || !tick.view.keys.ptr_eq(&self.keys) {
            self.keys = tick.view.keys.clone();
            let bundle = TickBundle {
                view: tick.view,
                events: tick.events,
            };
            let _ = self.events.send(Arc::new(bundle));
        }
        let mut answers = tick.answers;
        for (at, reply) in tick.replies.into_iter().enumerate() {
            reply(&mut answers, at);
        }
        self.published.note(view_tick);
    }
}

/// Appends the batch's records to the log, one write for those between checkpoints.
fn append(log: Option<&mut GroupLog>, batch: &[Release]) -> Result<(), JournalError> {
    let Some(log) = log else {
        return Ok(()); // every commit synced redb
    };
    let failed = |e: std::io::Error| {
        tracing::error!(error = %e, "group log append failed; stopping the engine");
        JournalError::Storage(format!("group log: {e}"))
    };
    let mut records: Vec<(u64, &[u8])> = Vec::with_capacity(batch.len());
    for item in batch {
        let Release::Group { sealed, .. } = item else {
            continue;
        };
        if let Some((seq, bytes)) = &sealed.record {
            records.push((*seq, bytes));
        }
        if sealed.restart {
            log.append(&records).map_err(failed)?;
            records.clear();
            log.restart();
        }
    }
    if !records.is_empty() {
        log.append(&records).map_err(failed)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use arc_swap::ArcSwap;
    use perpsim_core::ids::PublicKey;
    use perpsim_storage::{Journal, UsedNonce};
    use perpsim_systems::Engine;
    use tokio::sync::{broadcast, oneshot};

    use super::{FORGET_EVERY_NS, Published, Spend, Writer, floor_to_forget};
    use crate::state::host::wall_clock_ns;

    /// D2 beside D3: a signed request that sent no command (a read) has its nonce spent by the
    /// writer alone, durably, with no job from the engine thread at all, as while the engine
    /// applies a long advance's step. Ten thousand waiting at once, more than two jobs' worth
    /// a commit takes, are all spent over the commits that follow; one a minute old, past the
    /// window, is forgotten by the floor the writer takes from the wall clock. Once the engine
    /// thread has gone and the writer ended, a nonce handed over is refused, never confirmed.
    #[test]
    fn a_reads_nonce_is_spent_durably_without_waiting_for_the_engine() {
        let (_dir, path, journal, genesis) = crate::state::testing::journal(5);
        let view = Arc::new(ArcSwap::new(Engine::genesis(genesis).view()));
        let writer = Writer::new(
            Arc::new(journal),
            view,
            broadcast::channel(4).0,
            0,
            Arc::new(Published::new(0)),
        );
        let (spends, spent) = flume::bounded(16_384);
        let first = wall_clock_ns();
        let used: Vec<UsedNonce> = (0..10_000)
            .map(|i| UsedNonce {
                key: PublicKey([7; 32]),
                nonce: first + i,
            })
            .collect();
        let stale = UsedNonce {
            nonce: first - 60_000_000_000,
            ..used[0]
        };
        let mut heard: Vec<_> = std::iter::once(&stale)
            .chain(&used)
            .map(|&used| {
                let (reply, heard) = oneshot::channel();
                spends.send(Spend { used, reply }).unwrap();
                heard
            })
            .collect();
        let (jobs, thread) = writer.start(spent);
        let deadline = Instant::now() + Duration::from_secs(60);
        for heard in &mut heard {
            while heard.try_recv().is_err() {
                assert!(Instant::now() < deadline, "a nonce was never spent");
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let reader = Journal::open_read_only(&path).unwrap();
        assert_eq!(reader.nonces_since(0).unwrap(), used);
        drop(jobs); // the engine thread's end: the writer ends
        thread.join().unwrap().unwrap();
        let (reply, heard) = oneshot::channel();
        let late = UsedNonce {
            nonce: first + 10_000,
            ..used[0]
        };
        assert!(spends.send(Spend { used: late, reply }).is_err());
        assert!(
            heard.blocking_recv().is_err(),
            "a dropped reply: nothing confirmed"
        );
    }

    /// D2's nonce store: spent nonces are forgotten once a second of their floor, not at every
    /// commit, and never below a floor already forgotten.
    #[test]
    fn spent_nonces_are_forgotten_once_their_floor_moved_a_second() {
        let start = 1_700_000_000 * 1_000_000_000;
        assert_eq!(floor_to_forget(0, start), Some(start));
        assert_eq!(floor_to_forget(start, start + FORGET_EVERY_NS - 1), None);
        assert_eq!(floor_to_forget(start, start + 1), None);
        let next = start + FORGET_EVERY_NS;
        assert_eq!(floor_to_forget(start, next), Some(next));
        assert_eq!(
            floor_to_forget(next, start),
            None,
            "a wall clock stepped back"
        );
    }
}
