//! The engine host: the one thread that owns the engine.
//!
//! It takes requests from a bounded channel and applies the waiting commands as one tick.
//! The tick then goes to the journal's writer ([`super::writer`]), which commits it durably
//! while the engine applies the next, and only then publishes the new read view and answers
//! the senders. Reads never touch either thread: they load the published view. A tick whose
//! predecessor is still on its way to disk waits for it, briefly, gathering the requests that
//! arrive meanwhile ([`super::published`]).
//!
//! It also spends the nonces of signed requests durably (D2, at most once across restarts): a
//! command's nonce is written in its tick's own transaction. A request that sends no command
//! (a read, a refusal) hands its nonce straight to the journal's writer, which writes it in its
//! next group commit, with or without a tick: such a request never waits for a tick the engine
//! is applying (a long advance's step, a funding pass), only for a commit.

use std::ops::RangeInclusive;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use perpsim_core::clock::ClockMode;
use perpsim_core::ids::CustomerCode;
use perpsim_core::order::not_open;
use perpsim_core::time::Timestamp;
use perpsim_core::{Error, ErrorCode};
use perpsim_storage::{
    Archived, Fundings, Journal, JournalError, Movements, Notices, Projection, TickRecord, Trades,
    UsedNonce,
};
use perpsim_systems::command::Answer;
use perpsim_systems::records::log::DEFAULT_WINDOW_BITS;
use perpsim_systems::records::order::Order;
use perpsim_systems::records::tape::Candle;
use perpsim_systems::records::venue::MarketId;
use perpsim_systems::{Answers, Command, Engine, EngineEvent, ReadView, StateHash, Submit};
use tokio::sync::{broadcast, oneshot, watch};

use crate::signing::Admission;
use crate::state::metrics;
use crate::state::published::{Published, TICK_LINGER};
use crate::state::writer::{After, Applied, Job, Made, Spend, Writer};

/// Bounds of the host (TigerBeetle style: everything has one).
#[derive(Debug, Clone, Copy)]
pub struct HostLimits {
    /// Requests waiting for the engine; senders wait when it is full.
    pub queue: usize,
    /// Most requests (commands and nonces to spend) in one tick: one journal transaction.
    pub max_tick_commands: usize,
    /// A snapshot is written once this many commands were journaled since the last one.
    pub snapshot_every: u64,
    /// ... or once the simulation clock moved this far (ms) since the last one (or since
    /// the start), however few commands came: a realtime venue journals a tick a second and
    /// a manual advance runs every second it spans, so time, not commands, is what a
    /// recovery replays when the venue is quiet.
    pub snapshot_interval_ms: i64,
    /// Each history log's window, as a power of two (`Engine::set_history_window`).
    pub history_window_bits: u32,
}

impl Default for HostLimits {
    fn default() -> Self {
        HostLimits {
            queue: 65_536,
            max_tick_commands: 4_096,
            snapshot_every: 100_000,
            snapshot_interval_ms: 3_600_000,
            history_window_bits: DEFAULT_WINDOW_BITS,
        }
    }
}

/// Where the engine stands, with the hash of its whole state.
#[derive(Debug, Clone, Copy)]
pub struct StateReport {
    pub ticks: u64,
    pub commands: u64,
    pub hash: StateHash,
}

enum Message {
    /// A command, with the nonce of the signed request that sent it.
    Command(Command, Option<UsedNonce>, Reply),
    /// Answered once the ticks before it are durable.
    AfterTick(AfterTick),
}

/// A request that changes nothing, answered after the tick it arrives with.
enum AfterTick {
    State(oneshot::Sender<StateReport>),
    /// Move the oldest ticks the snapshots no longer need to the journal's archive.
    Archive(oneshot::Sender<Result<Archived, String>>),
    Shutdown(oneshot::Sender<Result<(), String>>),
}

/// A command's sender: takes the answer at the command's position in its tick, of the type
/// the command's [`Submit`] names, once the tick is durable. A tick that is not made
/// durable drops it, and its sender hears [`stopped`].
pub(super) type Reply = Box<dyn FnOnce(&mut Answers, usize) + Send>;

fn reply_to<C: Submit>(sender: oneshot::Sender<Answer<C::Answer>>) -> Reply
where
    C::Answer: Send + 'static,
{
    Box::new(move |answers: &mut Answers, at: usize| {
        let _ = sender.send(answers.take::<C::Answer>(at));
    })
}

/// One tick for the push channels: its events and the read view published with them, so
/// every frame of the tick is rendered from the state the events describe.
#[derive(Debug)]
pub struct TickBundle {
    pub view: Arc<ReadView>,
    pub events: Vec<EngineEvent>,
}

/// Events of one tick, broadcast to subscribers (push channels).
pub type TickEvents = Arc<TickBundle>;

/// Capacity of the event broadcast, in ticks; a subscriber that falls further behind loses
/// ticks and is told so by the channel (it never slows the engine).
const EVENT_BUFFER: usize = 4_096;

#[derive(Clone)]
pub struct EngineHandle {
    tx: flume::Sender<Message>,
    /// Nonces of signed requests that sent no command, to the journal's writer.
    spends: flume::Sender<Spend>,
    view: Arc<ArcSwap<ReadView>>,
    /// Reads of the history the view does not hold (ended orders), beside the writer.
    projection: Projection,
    events: broadcast::Sender<TickEvents>,
    stopped: watch::Receiver<bool>,
}

/// What a request hears when the engine is gone, or when its tick could not be journaled (the
/// host drops the replies of a tick it could not make durable, so nothing of it is confirmed).
pub(crate) fn stopped() -> Error {
    Error::new(
        ErrorCode::ExchangeError,
        "the engine has stopped; nothing of this request was confirmed",
    )
}

impl EngineHandle {
    /// Sends a signed request's command and waits until its tick is durable. The command
    /// carries the request's [`Admission`]: the nonce is spent in the same transaction as the
    /// command, and the admission is marked so.
    pub async fn submit<C: Submit>(
        &self,
        command: C,
        signed: &Admission,
    ) -> Result<C::Answer, Error>
    where
        C::Answer: Send + 'static,
    {
        // A reply comes only after the tick's commit: from here on the nonce is spent.
        let command = command.into();
        let result = self
            .ask(|reply| Message::Command(command, Some(signed.used()), reply_to::<C>(reply)))
            .await?;
        signed.mark_journaled();
        result
    }

    /// Sends an operator's command (the admin API: no nonce to spend) and waits until its
    /// tick is durable.
    pub async fn submit_admin<C: Submit>(&self, command: C) -> Result<C::Answer, Error>
    where
        C::Answer: Send + 'static,
    {
        let command = command.into();
        self.ask(|reply| Message::Command(command, None, reply_to::<C>(reply)))
            .await?
    }

    /// Blocking twin of [`Self::submit_admin`] for start-up code outside the runtime.
    pub fn submit_blocking<C: Submit>(&self, command: C) -> Result<C::Answer, Error>
    where
        C::Answer: Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Message::Command(command.into(), None, reply_to::<C>(reply)))
            .map_err(|_| stopped())?;
        answer.blocking_recv().map_err(|_| stopped())?
    }

    /// Spends a signed request's nonce durably when no command of it did; returns once the
    /// nonce is journaled. It goes to the journal's writer, not through the engine thread.
    pub async fn spend_nonce(&self, admission: &Admission) -> Result<(), Error> {
        if admission.journaled() {
            return Ok(());
        }
        let (reply, heard) = oneshot::channel();
        let spend = Spend {
            used: admission.used(),
            reply,
        };
        self.spends.send_async(spend).await.map_err(|_| stopped())?;
        heard.await.map_err(|_| stopped())?;
        admission.mark_journaled();
        Ok(())
    }

    pub async fn state(&self) -> Result<StateReport, Error> {
        self.ask(|r| Message::AfterTick(AfterTick::State(r))).await
    }

    /// Moves one segment of the journal's oldest ticks, those no kept snapshot needs, to the
    /// archive once the ticks before the request are durable (issue 37: the data dir's disk).
    pub async fn archive(&self) -> Result<Archived, Error> {
        self.ask(|r| Message::AfterTick(AfterTick::Archive(r)))
            .await?
            .map_err(|e| Error::new(ErrorCode::ExchangeError, format!("archive failed: {e}")))
    }

    /// Sends the request made around its reply channel and waits for the answer; either end
    /// gone means the engine stopped.
    async fn ask<T>(
        &self,
        request: impl FnOnce(oneshot::Sender<T>) -> Message,
    ) -> Result<T, Error> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send_async(request(reply))
            .await
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())
    }

    /// Asks the engine to write its final snapshot and stop.
    pub async fn shutdown(&self) -> Result<(), String> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send_async(Message::AfterTick(AfterTick::Shutdown(reply)))
            .await
            .map_err(|_| "engine already stopped".to_owned())?;
        answer
            .await
            .map_err(|_| "engine stopped without answering".to_owned())?
    }

    /// The latest published read view; never waits on the engine.
    pub fn view(&self) -> Arc<ReadView> {
        self.view.load_full()
    }

    /// The order a reference names, as a read answers it: the live one in `view`, else the
    /// latest that ended, from the journal's projection (a read transaction: it never waits
    /// on the writer). The projection is as new as `view` or newer, never older: a tick's
    /// ended orders are committed with it, or wait in the projection's backlog, which reads
    /// take too, before its view is published.
    pub fn order_by_ref(
        &self,
        view: &ReadView,
        customer: CustomerCode,
        reference: &str,
    ) -> Result<Option<Arc<Order>>, Error> {
        if let Some(live) = view.trading.live_order_by_ref(customer, reference) {
            return Ok(Some(Arc::clone(live)));
        }
        Ok(self.ended_order(customer, reference)?.map(Arc::new))
    }

    /// A cancel's or amend's answer once the engine said none is open under the reference:
    /// named from the latest order that ended under it, in the journal's projection, which
    /// holds every tick up to the one the answer came from (or a later one, whose latest it
    /// then names, as a read at that moment would; `perpsim_core::order::not_open`).
    pub fn name_not_open(
        &self,
        none_open: Error,
        customer: CustomerCode,
        reference: &str,
    ) -> Error {
        match self.ended_order(customer, reference) {
            Ok(latest) => not_open(none_open.code, reference, latest.map(|o| o.status)),
            Err(e) => e,
        }
    }

    /// The latest order that ended under a reference, from the journal's projection.
    fn ended_order(&self, customer: CustomerCode, reference: &str) -> Result<Option<Order>, Error> {
        self.projection
            .ended_order(customer, reference)
            .map_err(|e| history_read_failed(&format!("order {reference}"), e))
    }

    /// The ledger movements as the journal's projection holds them now (a read transaction:
    /// it never waits on the writer). It is as new as the view published last, or newer: a
    /// tick's movements are committed with it, or wait in the projection's backlog, which
    /// reads take too, before its view is published.
    pub fn movements(&self) -> Result<Movements, Error> {
        self.projection
            .movements()
            .map_err(|e| history_read_failed("transactions", e))
    }

    /// The trade records as the journal's projection holds them now, likewise.
    pub fn trades(&self) -> Result<Trades, Error> {
        self.projection
            .trades()
            .map_err(|e| history_read_failed("trades", e))
    }

    /// The depreciation notices as the journal's projection holds them now, likewise.
    pub fn notices(&self) -> Result<Notices, Error> {
        self.projection
            .notices()
            .map_err(|e| history_read_failed("notifications", e))
    }

    /// The funding settlements as the journal's projection holds them now, likewise.
    pub fn fundings(&self) -> Result<Fundings, Error> {
        self.projection
            .fundings()
            .map_err(|e| history_read_failed("funding rates", e))
    }

    /// A market's candles of interval `i` of `INTERVALS` opening within `opens`, by open time,
    /// as the journal's projection holds them now, likewise.
    pub fn candles(
        &self,
        market: MarketId,
        i: usize,
        opens: RangeInclusive<i64>,
    ) -> Result<Vec<(i64, Candle)>, Error> {
        self.projection
            .candles(market, i, opens)
            .map_err(|e| history_read_failed("candles", e))
    }

    pub fn subscribe(&self) -> broadcast::Receiver<TickEvents> {
        self.events.subscribe()
    }

    /// Whether the engine thread has ended.
    pub fn is_stopped(&self) -> bool {
        *self.stopped.borrow()
    }

    /// Resolves once the engine thread has ended, for whatever reason.
    pub async fn stopped(&self) {
        let mut rx = self.stopped.clone();
        let _ = rx.wait_for(|stopped| *stopped).await;
    }
}

pub fn wall_clock_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_nanos() as u64
}

pub fn wall_clock_ms() -> Timestamp {
    let ms = wall_clock_ns() / 1_000_000;
    Timestamp::from_millis(i64::try_from(ms).expect("wall clock fits i64 ms"))
}

/// A read of the journal's projection failed: logged, and answered as the venue's error.
pub fn history_read_failed(what: &str, e: JournalError) -> Error {
    tracing::error!(error = %e, "reading {what} failed");
    Error::new(ErrorCode::ExchangeError, format!("reading {what} failed"))
}

/// Starts the engine thread and the journal's writer beside it. The journal's projection must
/// be complete through the engine's last tick (`perpsim_storage::recover` sees to it).
pub fn start(
    mut engine: Engine,
    journal: Journal,
    limits: HostLimits,
) -> (EngineHandle, JoinHandle<Result<(), JournalError>>) {
    // Every tick's movements go to the projection from here (it holds those before).
    engine.set_projecting(true);
    engine.set_history_window(limits.history_window_bits);
    // The ended orders' running digest is the writer's to compute, as the history rows' is.
    engine.owe_ended_digests();
    let (tx, rx) = flume::bounded(limits.queue);
    let (spends, spent) = flume::bounded(limits.queue);
    let view = Arc::new(ArcSwap::new(engine.view()));
    let (events, _) = broadcast::channel(EVENT_BUFFER);
    let (stopped_tx, stopped) = watch::channel(false);
    let handle = EngineHandle {
        tx,
        spends,
        view: view.clone(),
        projection: journal
            .projection()
            .expect("the service's journal is opened to write"),
        events: events.clone(),
        stopped,
    };
    assert_eq!(
        journal.projected_through().ok(),
        Some(engine.counters().ticks),
        "the projection is complete before the service starts"
    );
    metrics::archive(journal.archive_bytes().ok());
    let ticks = engine.counters().ticks;
    let published = Arc::new(Published::new(ticks));
    let writer = Writer::new(
        Arc::new(journal),
        view,
        events,
        ticks,
        Arc::clone(&published),
    );
    let (jobs, writer) = writer.start(spent);
    let host = Host {
        published,
        snapshot_clock: engine.clock().now,
        engine,
        limits,
        jobs,
        writer,
        since_snapshot: 0,
    };
    let thread = std::thread::Builder::new()
        .name("perpsim-engine".into())
        .spawn(move || {
            let result = host.run(rx);
            let _ = stopped_tx.send(true);
            result
        })
        .expect("spawn engine thread");
    (handle, thread)
}

struct Host {
    engine: Engine,
    limits: HostLimits,
    /// To the journal's writer, which makes each tick durable and then publishes it.
    jobs: flume::Sender<Job>,
    writer: JoinHandle<Result<(), JournalError>>,
    /// The ticks the writer's log thread has published: a tick lingers behind one in flight.
    published: Arc<Published>,
    since_snapshot: u64,
    /// The simulation time of the last snapshot (or of the start).
    snapshot_clock: Timestamp,
}

/// Requests drained for one tick: commands with their reply slots and their nonces, and the
/// requests that are answered once the tick is durable (so they see its effects).
#[derive(Default)]
struct Batch {
    commands: Vec<Command>,
    replies: Vec<Reply>,
    nonces: Vec<UsedNonce>,
    after_tick: Vec<AfterTick>,
}

impl Batch {
    fn take(&mut self, request: Message) {
        match request {
            Message::Command(c, nonce, reply) => {
                self.commands.push(c);
                self.replies.push(reply);
                self.nonces.extend(nonce);
            }
            Message::AfterTick(after) => self.after_tick.push(after),
        }
    }

    fn len(&self) -> usize {
        self.replies.len() + self.after_tick.len()
    }
}

/// Longest sleep between looks at the clock when nothing arrives.
const IDLE_WAIT: Duration = Duration::from_millis(250);

/// Why the engine stopped taking requests.
enum Ending {
    Shutdown(oneshot::Sender<Result<(), String>>),
    /// Every handle is gone.
    Disconnected,
    /// The journal's writer ended: a commit failed (its error is the thread's result).
    WriterStopped,
}

/// The writer has ended (a commit failed): the engine stops taking requests.
struct WriterStopped;

impl Host {
    /// Serves until shutdown, then hands the final snapshot to the writer and waits for it.
    /// The result is the writer's, so a failed commit or snapshot is the engine's error.
    fn run(mut self, rx: flume::Receiver<Message>) -> Result<(), JournalError> {
        // Handing it fails only when the writer has ended, and then on its own error.
        let _ = match self.serve(&rx) {
            Ending::Shutdown(reply) => self.snapshot(Some(reply)),
            Ending::Disconnected => self.snapshot(None),
            Ending::WriterStopped => Ok(()),
        };
        let Host { jobs, writer, .. } = self;
        drop(jobs); // the writer ends once it has written what was handed to it
        writer.join().expect("the journal's writer does not panic")
    }

    fn serve(&mut self, rx: &flume::Receiver<Message>) -> Ending {
        loop {
            if self.writer.is_finished() {
                return Ending::WriterStopped;
            }
            let first = match rx.recv_timeout(self.wait()) {
                Ok(request) => Some(request),
                Err(flume::RecvTimeoutError::Timeout) => None,
                Err(flume::RecvTimeoutError::Disconnected) => return Ending::Disconnected,
            };
            let mut batch = Batch::default();
            if let Some(request) = first {
                batch.take(request);
                if !batch.commands.is_empty() {
                    // The requests arriving while the last tick is on its way to disk join
                    // this one (`super::published`).
                    let last = self.engine.counters().ticks;
                    self.published.wait_for(last, TICK_LINGER);
                }
            }
            while batch.len() < self.limits.max_tick_commands {
                match rx.try_recv() {
                    Ok(request) => batch.take(request),
                    Err(_) => break,
                }
            }
            let after_tick = std::mem::take(&mut batch.after_tick);
            if self.tick(batch, rx.len()).is_err() {
                return Ending::WriterStopped;
            }
            for request in after_tick {
                let handed = match request {
                    AfterTick::State(reply) => self.report(reply),
                    AfterTick::Archive(reply) => self.hand(Job::After(After::Archive(reply))),
                    AfterTick::Shutdown(reply) => return Ending::Shutdown(reply),
                };
                if handed.is_err() {
                    return Ending::WriterStopped;
                }
            }
        }
    }

    /// The state now, answered once the ticks before it are durable.
    fn report(&self, reply: oneshot::Sender<StateReport>) -> Result<(), WriterStopped> {
        let c = self.engine.counters();
        let report = StateReport {
            ticks: c.ticks,
            commands: c.commands,
            hash: self.engine.state_hash(),
        };
        self.hand(Job::After(After::State(reply, report)))
    }

    /// How long to wait for requests: until the next timed event in realtime mode.
    fn wait(&self) -> Duration {
        if self.engine.settling() {
            return Duration::ZERO;
        }
        match (self.engine.clock().mode, self.engine.next_due()) {
            (ClockMode::Realtime, Some(due)) => {
                let ms = due.millis().saturating_sub(wall_clock_ms().millis()).max(0);
                Duration::from_millis(ms as u64).min(IDLE_WAIT)
            }
            _ => IDLE_WAIT,
        }
    }

    /// The tick's instant: the wall clock in realtime mode, except while a periodic pass
    /// books its rows over ticks, which hold the venue's clock at the pass's instant.
    fn now(&self) -> Timestamp {
        let clock = self.engine.clock();
        match clock.mode {
            ClockMode::Realtime if !self.engine.settling() => wall_clock_ms().max(clock.now),
            ClockMode::Realtime | ClockMode::Manual => clock.now,
        }
    }

    /// Hands a job to the writer, waiting while [`PIPELINE`] jobs wait before it.
    fn hand(&self, job: Job) -> Result<(), WriterStopped> {
        self.jobs.send(job).map_err(|_| WriterStopped)
    }

    /// Applies one batch and hands it to the writer; `queued`: requests left waiting behind it.
    fn tick(&mut self, batch: Batch, queued: usize) -> Result<(), WriterStopped> {
        let Batch {
            commands,
            replies,
            nonces,
            ..
        } = batch;
        let now = self.now();
        let due = self.engine.next_due().is_some_and(|t| t <= now) || self.engine.settling();
        if commands.is_empty() && !due {
            return Ok(()); // nonces come only with commands here
        }
        let at = self.engine.counters();
        let count = commands.len() as u64;
        let encoded = TickRecord::encode(now, at.commands, &commands);
        let applying = Instant::now();
        let out = self.engine.tick(now, commands);
        metrics::tick(applying.elapsed(), count as usize, queued);
        let publishing = Instant::now();
        let view = self.engine.view();
        metrics::publish(publishing.elapsed());
        let ended_runs = self.engine.take_owed_ended();
        metrics::handed();
        self.hand(Job::Tick(Box::new(Made {
            tick: Some(Applied {
                record: encoded,
                view,
                events: out.events,
                ended: out.ended,
                history: out.history,
                ended_runs,
                replies,
                answers: out.answers,
            }),
            nonces,
            nonce_replies: Vec::new(),
        })))?;
        self.since_snapshot += count;
        let elapsed = self.engine.clock().now.millis() - self.snapshot_clock.millis();
        if self.since_snapshot >= self.limits.snapshot_every
            || elapsed >= self.limits.snapshot_interval_ms
        {
            self.snapshot(None)?;
        }
        Ok(())
    }

    /// Hands a snapshot of the state now to the writer, which writes it after the ticks
    /// before it; `reply` hears how it went (a shutdown's).
    fn snapshot(
        &mut self,
        reply: Option<oneshot::Sender<Result<(), String>>>,
    ) -> Result<(), WriterStopped> {
        let tick = self.engine.counters().ticks;
        let encoded = self.engine.encode_state();
        self.since_snapshot = 0;
        self.snapshot_clock = self.engine.clock().now;
        self.hand(Job::After(After::Snapshot {
            tick,
            encoded,
            reply,
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use perpsim_core::ids::PublicKey;
    use perpsim_storage::{Journal, replay_from_genesis};
    use perpsim_systems::Engine;

    use super::{HostLimits, start};
    use perpsim_systems::command::{CreateBroker, CreateCustomer};

    /// Issue 37 (durability pipelined): while the writer commits one tick the engine applies
    /// the next, yet nothing of a tick leaves before it is durable. Eight senders at once:
    /// each answer finds its customer in the published view, that view's tick already in the
    /// journal (read beside the writer); at the end the journal replays to the final snapshot.
    #[test]
    fn every_answer_and_view_follows_its_ticks_commit() {
        let (_dir, path, journal, genesis) = crate::state::testing::journal(3);
        let (handle, thread) = start(Engine::genesis(genesis), journal, HostLimits::default());
        let reader = Arc::new(Journal::open_read_only(&path).unwrap());
        let broker = match handle.submit_blocking(CreateBroker {
            name: "b".into(),
            public_key: PublicKey([9; 32]),
        }) {
            Ok(b) => b.code,
            other => panic!("a broker, got {other:?}"),
        };
        let senders: Vec<_> = (0..8)
            .map(|_| {
                let (handle, reader) = (handle.clone(), Arc::clone(&reader));
                std::thread::spawn(move || {
                    for _ in 0..25 {
                        let created = handle.submit_blocking(CreateCustomer {
                            broker,
                            external_id: None,
                        });
                        let Ok(customer) = created else {
                            panic!("a customer, got {created:?}");
                        };
                        let seen = handle.view();
                        assert!(seen.customers.contains_key(&customer.code));
                        assert!(reader.last_tick().unwrap() >= seen.tick);
                    }
                })
            })
            .collect();
        for sender in senders {
            sender.join().unwrap();
        }
        let last = handle.view();
        assert_eq!(last.customers.len(), 200);
        drop(handle); // every handle gone: the final snapshot, then the threads end
        thread.join().unwrap().unwrap();
        assert_eq!(reader.last_tick().unwrap(), last.tick);
        let snapshot = reader.snapshots().unwrap()[0];
        assert_eq!(snapshot.tick, last.tick);
        let replayed = replay_from_genesis(&reader).unwrap().unwrap();
        assert_eq!(replayed.engine.state_hash(), snapshot.hash);
    }
}
