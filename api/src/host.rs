//! The engine host: the one thread that owns the engine.
//!
//! It takes requests from a bounded channel, applies the waiting commands as one tick, appends
//! the tick to the journal in one durable transaction, and only then publishes the new read
//! view and answers the senders. Reads never touch this thread: they load the published view.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use perpsim_core::clock::ClockMode;
use perpsim_core::time::Timestamp;
use perpsim_core::{Error, ErrorCode};
use perpsim_storage::{Journal, JournalError, TickRecord};
use perpsim_systems::{Command, CommandResult, Engine, EngineEvent, Outcome, ReadView, StateHash};
use tokio::sync::{broadcast, oneshot, watch};

use crate::metrics::Metrics;

/// Bounds of the host (TigerBeetle style: everything has one).
#[derive(Debug, Clone, Copy)]
pub struct HostLimits {
    /// Requests waiting for the engine; senders wait when it is full.
    pub queue: usize,
    /// Most commands in one tick (one journal transaction).
    pub max_tick_commands: usize,
    /// A snapshot is written once this many commands were journaled since the last one.
    pub snapshot_every: u64,
}

impl Default for HostLimits {
    fn default() -> Self {
        HostLimits {
            queue: 65_536,
            max_tick_commands: 4_096,
            snapshot_every: 100_000,
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

enum Request {
    Command(Command, oneshot::Sender<CommandResult>),
    State(oneshot::Sender<StateReport>),
    Shutdown(oneshot::Sender<Result<(), String>>),
}

/// Events of one tick, broadcast to subscribers (push channels).
pub type TickEvents = Arc<Vec<EngineEvent>>;

/// Capacity of the event broadcast; a subscriber that falls further behind loses events and
/// is told so by the channel (it never slows the engine).
const EVENT_BUFFER: usize = 1_024;

#[derive(Clone)]
pub struct EngineHandle {
    tx: flume::Sender<Request>,
    view: Arc<ArcSwap<ReadView>>,
    events: broadcast::Sender<TickEvents>,
    stopped: watch::Receiver<bool>,
}

fn stopped() -> Error {
    Error::new(ErrorCode::ExchangeError, "the engine has stopped")
}

impl EngineHandle {
    /// Sends a command and waits until its tick is durable.
    pub async fn submit(&self, command: Command) -> Result<Outcome, Error> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send_async(Request::Command(command, reply))
            .await
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    /// Blocking twin of [`Self::submit`] for start-up code outside the runtime.
    pub fn submit_blocking(&self, command: Command) -> Result<Outcome, Error> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Request::Command(command, reply))
            .map_err(|_| stopped())?;
        answer.blocking_recv().map_err(|_| stopped())?
    }

    pub async fn state(&self) -> Result<StateReport, Error> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send_async(Request::State(reply))
            .await
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())
    }

    /// Asks the engine to write its final snapshot and stop.
    pub async fn shutdown(&self) -> Result<(), String> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send_async(Request::Shutdown(reply))
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

    pub fn subscribe(&self) -> broadcast::Receiver<TickEvents> {
        self.events.subscribe()
    }

    /// Resolves once the engine thread has ended, for whatever reason.
    pub async fn stopped(&self) {
        let mut rx = self.stopped.clone();
        let _ = rx.wait_for(|stopped| *stopped).await;
    }
}

pub fn wall_clock_ms() -> Timestamp {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis();
    Timestamp::from_millis(i64::try_from(ms).expect("wall clock fits i64 ms"))
}

/// Starts the engine thread.
pub fn start(
    engine: Engine,
    journal: Journal,
    limits: HostLimits,
    metrics: Arc<Metrics>,
) -> (EngineHandle, JoinHandle<Result<(), JournalError>>) {
    let (tx, rx) = flume::bounded(limits.queue);
    let view = Arc::new(ArcSwap::new(engine.view()));
    let (events, _) = broadcast::channel(EVENT_BUFFER);
    let (stopped_tx, stopped) = watch::channel(false);
    let handle = EngineHandle {
        tx,
        view: view.clone(),
        events: events.clone(),
        stopped,
    };
    let host = Host {
        engine,
        journal,
        limits,
        metrics,
        view,
        events,
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
    journal: Journal,
    limits: HostLimits,
    metrics: Arc<Metrics>,
    view: Arc<ArcSwap<ReadView>>,
    events: broadcast::Sender<TickEvents>,
    since_snapshot: u64,
}

/// Requests drained for one tick: commands with their reply slots, and the requests that are
/// answered once the tick is durable (so they see its effects).
#[derive(Default)]
struct Batch {
    commands: Vec<Command>,
    replies: Vec<oneshot::Sender<CommandResult>>,
    after_tick: Vec<Request>,
}

impl Batch {
    fn take(&mut self, request: Request) {
        match request {
            Request::Command(c, reply) => {
                self.commands.push(c);
                self.replies.push(reply);
            }
            other => self.after_tick.push(other),
        }
    }
}

/// Longest sleep between looks at the clock when nothing arrives.
const IDLE_WAIT: Duration = Duration::from_millis(250);

impl Host {
    fn run(mut self, rx: flume::Receiver<Request>) -> Result<(), JournalError> {
        loop {
            let first = match rx.recv_timeout(self.wait()) {
                Ok(request) => Some(request),
                Err(flume::RecvTimeoutError::Timeout) => None,
                Err(flume::RecvTimeoutError::Disconnected) => return self.snapshot().map(drop),
            };
            let mut batch = Batch::default();
            if let Some(request) = first {
                batch.take(request);
            }
            while batch.replies.len() < self.limits.max_tick_commands {
                match rx.try_recv() {
                    Ok(request) => batch.take(request),
                    Err(_) => break,
                }
            }
            self.tick(batch.commands, batch.replies)?;
            for request in batch.after_tick {
                match request {
                    Request::State(reply) => {
                        let c = self.engine.counters();
                        let _ = reply.send(StateReport {
                            ticks: c.ticks,
                            commands: c.commands,
                            hash: self.engine.state_hash(),
                        });
                    }
                    Request::Shutdown(reply) => {
                        let result = self.snapshot().map(drop).map_err(|e| e.to_string());
                        let _ = reply.send(result);
                        return Ok(());
                    }
                    Request::Command(..) => unreachable!("commands go into the tick"),
                }
            }
        }
    }

    /// How long to wait for requests: until the next timed event in realtime mode.
    fn wait(&self) -> Duration {
        match (self.engine.clock().mode, self.engine.next_due()) {
            (ClockMode::Realtime, Some(due)) => {
                let ms = due.millis().saturating_sub(wall_clock_ms().millis()).max(0);
                Duration::from_millis(ms as u64).min(IDLE_WAIT)
            }
            _ => IDLE_WAIT,
        }
    }

    fn now(&self) -> Timestamp {
        let clock = self.engine.clock();
        match clock.mode {
            ClockMode::Realtime => wall_clock_ms().max(clock.now),
            ClockMode::Manual => clock.now,
        }
    }

    fn tick(
        &mut self,
        commands: Vec<Command>,
        replies: Vec<oneshot::Sender<CommandResult>>,
    ) -> Result<(), JournalError> {
        let now = self.now();
        let due = self.engine.next_due().is_some_and(|t| t <= now);
        if commands.is_empty() && !due {
            return Ok(());
        }
        let at = self.engine.counters();
        let count = commands.len() as u64;
        let encoded = TickRecord::encode(now, at.commands, &commands);
        let out = self.engine.tick(now, commands);
        let started = Instant::now();
        if let Err(e) = self.journal.append(at.ticks + 1, &encoded) {
            // The engine is ahead of the journal now; nothing of this tick may be confirmed.
            for reply in replies {
                let _ = reply.send(Err(Error::new(
                    ErrorCode::ExchangeError,
                    "journal write failed; the service stops",
                )));
            }
            tracing::error!(error = %e, "journal append failed; stopping the engine");
            return Err(e);
        }
        self.metrics
            .record_commit(started.elapsed().as_nanos() as u64);
        self.view.store(self.engine.view());
        if !out.events.is_empty() {
            let _ = self.events.send(Arc::new(out.events));
        }
        self.metrics.ticks.fetch_add(1, Relaxed);
        self.metrics.commands.fetch_add(count, Relaxed);
        for (reply, result) in replies.into_iter().zip(out.results) {
            let _ = reply.send(result);
        }
        self.since_snapshot += count;
        if self.since_snapshot >= self.limits.snapshot_every {
            self.snapshot()?;
        }
        Ok(())
    }

    fn snapshot(&mut self) -> Result<StateHash, JournalError> {
        let ticks = self.engine.counters().ticks;
        let info = self.journal.write_snapshot(ticks, &self.engine.state())?;
        self.since_snapshot = 0;
        self.metrics.snapshots.fetch_add(1, Relaxed);
        tracing::info!(tick = ticks, hash = %info.hash, "snapshot written");
        Ok(info.hash)
    }
}
