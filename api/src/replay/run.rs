//! Runs a plan through the engine the service runs, on its manual clock, as fast as it can:
//! every tick journaled (in batches: no request waits on one), the report's samples taken at
//! their instants, the margin-state changes and refused requests kept for the report.
//!
//! The loop: one tick per instant with commands, at that instant (its timers fired first, as any
//! tick fires them), and an empty tick at each of the report's sample instants without commands (at
//! most 500, at least a second apart): a schedule run is an instant's whole cost when a recording
//! gives a step each 100 ms, so none is spent on an advance before the commands (an `AdvanceClock`
//! tick and the commands' tick after it took three runs). At a sample it reads prices and each
//! customer's balance, equity and notional from the engine without building the view
//! (`Engine::prices`, `Engine::accounts_figures`: the margin book's figures). It keeps the
//! margin-state events and every refused request. Ticks are journaled in batches of 4 096, each
//! committed on a thread of its own while the engine goes on (`run::journaled`: at most one batch
//! waits; a failed commit fails the run with its own error), and the history rows the ticks made
//! go to a second thread (`report/streamed`; the engine hands them out when asked,
//! `Engine::set_history_on_request`, an eighth of a batch at a time, so most leave in whole
//! chunks, moved rather than copied tick by tick), which writes `ledger.csv` and `trades.csv`
//! as they come and tallies what the report counts of the logs (trades by kind, money per
//! currency, notices, each market's fills and chart marks) and settles the ended orders' digest
//! the engine owes: the engine lets its rows go past its history window, so a run holds a
//! window of each log, not the whole run. The ledger lists each movement once, as the run leaves
//! it, in ledger order: rows after a pending transfer wait for it to complete (a transfer delay's
//! rows; to the end of the run for one still pending then).

use std::iter::Peekable;
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::SyncSender;
use std::time::Duration;

use perpsim_core::ids::{CustomerCode, PublicKey};
use perpsim_core::instrument::Asset;
use perpsim_core::order::{OrderStatus, ReferenceId, is_not_open, not_open};
use perpsim_core::time::Timestamp;
use perpsim_core::{Decimal, Error};
use perpsim_storage::{CommandBytes, Journal, NonceWrites, TickRecord};
use perpsim_systems::publish::events::Listening;
use perpsim_systems::records::money::VenueAccount;
use perpsim_systems::records::order::Order;
use perpsim_systems::records::risk::RiskRecord;
use perpsim_systems::{
    AccountFigures, Command, CommandResult, Engine, EngineEvent, MarketPrices, Outcome,
};
use rapidhash::{RapidHashMap, RapidHashSet};

use super::feed::Fed;
use super::plan::{Plan, Step, UNBOUND};
use super::report::streamed::{self, LogTallies, Streamed};
use super::timeline::Timeline;
use perpsim_systems::command::{CreateBroker, CreateCustomer};

/// Ticks written per journal transaction.
const JOURNAL_BATCH: usize = 4_096;

/// Ticks whose history rows go to the tables' writer at a time, an eighth of a journal batch:
/// the writer is at most about one such batch behind the engine, so what it has left when the
/// run ends is short (the 24-hour scenario's journal batch took it ~230 ms to write).
const HISTORY_BATCH: usize = JOURNAL_BATCH / 8;

/// A replay's history window, as a power of two (4 096 rows): a chunk a journal batch fills
/// many times over (see [`replaying`]). The outputs do not depend on it; the engine thread's
/// time does (the 24-hour scenario's engine 3–5 % less than at a server's 65 536).
const REPLAY_WINDOW_BITS: u32 = 12;

/// The name of the broker a scenario's customers belong to.
pub const BROKER: &str = "scenario";

/// What the report reads besides the final state.
pub struct Observed {
    /// (name, code) of every customer, in creation order.
    pub customers: Vec<(String, CustomerCode)>,
    /// The settlement assets sampled, sorted.
    pub assets: Vec<Asset>,
    pub samples: Vec<Sample>,
    /// Every margin-state change, in order.
    pub margin: Vec<RiskRecord>,
    pub refusals: Vec<Refusal>,
    /// What the logs tallied as they streamed out (`streamed`), once the run is over.
    pub logs: LogTallies,
    /// The what-if's factors the run drew.
    pub drawn: super::whatif::Drawn,
}

/// Prices and every customer's figures at one instant.
pub struct Sample {
    pub at: Timestamp,
    pub prices: Vec<MarketPrices>,
    /// `[customer × assets + asset]`, as `Observed::customers` and `Observed::assets`.
    pub accounts: Vec<AccountFigures>,
    /// `[asset]`: the venue's fees, clearing and insurance balances (`VenueAccount::ALL`).
    pub venue: Vec<[Decimal; 3]>,
}

impl Sample {
    /// Customer `c`'s figures in asset `a`; none before the customer existed (a recorded
    /// journal creates customers as it goes).
    pub fn figures(&self, c: usize, a: usize) -> Option<AccountFigures> {
        let assets = self.venue.len();
        if a >= assets {
            return None;
        }
        self.accounts.get(c * assets + a).copied()
    }
}

/// A request of the timeline the venue refused, as the API would have answered it.
pub struct Refusal {
    pub at: Timestamp,
    /// The event's position in the scenario (0-based); none for a customer's setup.
    pub event: Option<usize>,
    pub customer: Option<String>,
    pub code: &'static str,
    pub message: String,
}

/// The references a plan cancels or amends, each with the status of the latest order that
/// ended under it: what names the refusal of a cancel or amend with none open, as the server
/// names it from its projection (the engine keeps nothing of ended orders' references).
/// Only the plan's own references are followed, so it is bounded by the plan. Hashed: every
/// order that ends is looked up, and a B-tree of 150 000 references compared strings for a
/// twentieth of the 24-hour scenario's engine thread. The hash is rapidhash's, randomly
/// seeded per map as the standard library's is (the references are the file's, untrusted):
/// SipHash's was 1.1 % of that thread's instructions.
///
/// A fed run (`feed`) learns the references as the file is read, possibly after an order that
/// ended under one: until the read is over it keeps every ended order of the scenario's
/// customers (bounded by the plan's orders), then only those of the references named.
#[derive(Default)]
struct Named {
    latest: RapidHashMap<Reference, Option<OrderStatus>>,
    /// While recording: the scenario's customers (sorted) and the references named so far.
    recording: Option<(Vec<CustomerCode>, RapidHashSet<Reference>)>,
}

/// A customer's reference.
type Reference = (CustomerCode, ReferenceId);

impl Named {
    /// Keeps every ended order of `customers` until [`Named::settle`].
    fn record(&mut self, mut customers: Vec<CustomerCode>) {
        customers.sort_unstable();
        self.recording = Some((customers, RapidHashSet::default()));
    }

    /// Every reference is named: from here on only theirs are kept.
    fn settle(&mut self) {
        if let Some((_, named)) = self.recording.take() {
            self.latest.retain(|key, _| named.contains(key));
        }
    }

    fn watch(&mut self, customer: CustomerCode, reference: &str) {
        let key = (customer, ReferenceId::from(reference));
        if let Some((_, named)) = &mut self.recording {
            named.insert(key.clone());
        }
        self.latest.entry(key).or_insert(None);
    }

    /// The watch-all of a run's chunk of steps (`codes` binds their customers).
    fn watch_all(&mut self, steps: &Timeline, codes: &[CustomerCode]) {
        for (c, reference) in steps.order_references() {
            self.watch(codes[c], &reference);
        }
    }

    fn ended(&mut self, orders: &[Arc<Order>]) {
        for o in orders {
            let key = (o.customer, Arc::clone(&o.reference_id));
            match &self.recording {
                Some((customers, _)) if customers.binary_search(&o.customer).is_ok() => {
                    self.latest.insert(key, Some(o.status));
                }
                _ => {
                    if let Some(latest) = self.latest.get_mut(&key) {
                        *latest = Some(o.status);
                    }
                }
            }
        }
    }

    fn name(&self, none_open: Error, customer: CustomerCode, reference: &str) -> Error {
        let latest = self
            .latest
            .get(&(customer, reference.into()))
            .copied()
            .flatten();
        not_open(none_open.code, reference, latest)
    }
}

/// Where a run's steps come from: the whole plan's timeline, or a feed (`feed`).
enum Source<'f> {
    Whole(Option<Timeline>),
    Fed(&'f mut Fed),
}

impl Source<'_> {
    /// The next chunk of steps in time order, its references watched; `known` counts the
    /// steps received.
    fn next(
        &mut self,
        named: &mut Named,
        codes: &[CustomerCode],
        known: &mut u64,
    ) -> Result<Option<Timeline>, String> {
        match self {
            Source::Whole(whole) => Ok(whole.take().inspect(|steps| {
                named.watch_all(steps, codes);
                *known += steps.len() as u64;
            })),
            Source::Fed(fed) => fed.next_chunk(&mut |steps| match steps {
                Some(steps) => {
                    named.watch_all(steps, codes);
                    *known += steps.len() as u64;
                }
                None => named.settle(),
            }),
        }
    }
}

/// The engine with its journal writer and what is observed along the way.
pub struct Runner {
    pub engine: Engine,
    named: Named,
    journal: Batches,
    pending: Vec<Vec<u8>>,
    first_pending: u64,
    /// The customers the ticks not yet handed to the tables' writer created (`streamed`;
    /// their rows are the engine's until then).
    history: streamed::Batch,
    pub observed: Observed,
}

/// Batches of ticks on their way to the writers (see [`journaled`]): the encoded ticks with
/// the first one's number to the journal's, what they made to the tables'.
pub struct Batches {
    ticks: SyncSender<(u64, Vec<Vec<u8>>)>,
    tables: SyncSender<streamed::Batch>,
}

/// Runs `body` with the journal's commits on a thread of their own, so the engine goes on
/// with the next ticks while a batch is committed (a run's second core is otherwise idle),
/// and `ledger.csv` and `trades.csv` written at `tables` on another as the engine hands its
/// history out (`streamed`); at most one batch waits behind the one being written on each.
/// Its result, the time the commits took and the tables written. A writer that fails fails
/// the run with its own error.
pub fn journaled<T>(
    journal: &Journal,
    tables: (&Path, &Path),
    body: impl FnOnce(Batches) -> Result<T, String>,
) -> Result<(T, Duration, Streamed), String> {
    std::thread::scope(|s| {
        let (ticks, received) = std::sync::mpsc::sync_channel::<(u64, Vec<Vec<u8>>)>(1);
        let (to_tables, batches) = std::sync::mpsc::sync_channel::<streamed::Batch>(1);
        let written = s.spawn(move || streamed::write(tables, batches));
        let writer = s.spawn(move || {
            let mut took = Duration::ZERO;
            for (first, ticks) in received {
                let started = std::time::Instant::now();
                journal
                    .append_batch(first, &ticks, None, NonceWrites::default())
                    .map_err(|e| e.to_string())?;
                took += started.elapsed();
            }
            Ok::<_, String>(took)
        });
        // The senders are dropped with the body's runner.
        let out = body(Batches {
            ticks,
            tables: to_tables,
        });
        let took = writer.join().expect("the journal's writer does not panic");
        let written = written.join().expect("the tables' writer does not panic");
        // The writers' own errors first: the body's would only say a writer stopped.
        let (took, written) = (took?, written?);
        Ok((out?, took, written))
    })
}

impl Runner {
    pub fn new(engine: Engine, journal: Batches, assets: Vec<Asset>) -> Self {
        let first_pending = engine.counters().ticks + 1;
        Runner {
            engine,
            named: Named::default(),
            journal,
            pending: Vec::with_capacity(JOURNAL_BATCH),
            first_pending,
            history: streamed::Batch::default(),
            observed: Observed {
                customers: Vec::new(),
                assets,
                samples: Vec::new(),
                margin: Vec::new(),
                refusals: Vec::new(),
                logs: LogTallies::default(),
                drawn: Default::default(),
            },
        }
    }

    /// One tick, journaled, and the ticks after it at its instant while a periodic pass
    /// books its rows (as a server's host ticks them); the first tick's results.
    pub fn tick(
        &mut self,
        now: Timestamp,
        commands: Vec<Command>,
    ) -> Result<Vec<CommandResult>, String> {
        self.tick_encoded(now, commands, &[])
    }

    /// [`Runner::tick`], where `encoded[k]`, when there is one, is command `k`'s encoding
    /// (the timeline's): the journal takes it as it is.
    pub fn tick_encoded(
        &mut self,
        now: Timestamp,
        commands: Vec<Command>,
        encoded: &[Encoded],
    ) -> Result<Vec<CommandResult>, String> {
        let results = self.tick_once(now, commands, encoded)?;
        while self.engine.settling() {
            self.tick_once(self.engine.clock().now, Vec::new(), &[])?;
        }
        Ok(results)
    }

    fn tick_once(
        &mut self,
        now: Timestamp,
        commands: Vec<Command>,
        encoded: &[Encoded],
    ) -> Result<Vec<CommandResult>, String> {
        let first_seq = self.engine.counters().commands;
        let parts: Vec<CommandBytes> = (commands.iter().enumerate())
            .map(|(k, c)| match encoded.get(k).copied().flatten() {
                Some((bytes, None)) => CommandBytes::Encoded(bytes),
                Some((bytes, Some(customer))) => CommandBytes::Rebound(c, bytes, customer),
                None => CommandBytes::Value(c),
            })
            .collect();
        self.pending
            .push(TickRecord::encode_parts(now, first_seq, &parts));
        let out = self.engine.tick(now, commands);
        self.named.ended(&out.ended);
        let results = out.answers.into_results();
        self.take(out.events, &results);
        if self.pending.len() == JOURNAL_BATCH {
            self.flush()?;
        } else if self.pending.len().is_multiple_of(HISTORY_BATCH) {
            self.hand_out_history()?;
        }
        Ok(results)
    }

    fn take(&mut self, events: Vec<EngineEvent>, results: &[CommandResult]) {
        for e in events {
            if let EngineEvent::MarginState(record) = e {
                self.observed.margin.push(record);
            }
        }
        for r in results {
            if let Ok(Outcome::Customer(c)) = r
                && !self
                    .observed
                    .customers
                    .iter()
                    .any(|(_, code)| *code == c.code)
            {
                let name = c.external_id.clone().unwrap_or_else(|| c.code.to_string());
                self.history.names.push((c.code, name.clone()));
                self.observed.customers.push((name, c.code));
            }
        }
    }

    /// The engine and what was observed, once the run is over.
    pub fn into_parts(self) -> (Engine, Observed) {
        assert!(
            self.pending.is_empty() && self.history.names.is_empty(),
            "every tick is handed to the writers before the report"
        );
        (self.engine, self.observed)
    }

    /// Hands the ticks not yet journaled to the journal's writer, to commit in one
    /// transaction, and what they made to the tables' writer.
    pub fn flush(&mut self) -> Result<(), String> {
        if self.pending.is_empty() {
            return Ok(());
        }
        self.hand_out_history()?;
        let ticks = std::mem::replace(&mut self.pending, Vec::with_capacity(JOURNAL_BATCH));
        let first = self.first_pending;
        self.first_pending += ticks.len() as u64;
        // Refused only when the writer stopped, on an error `journaled` then returns.
        self.journal
            .ticks
            .send((first, ticks))
            .map_err(|_| "the journal's writer stopped".to_owned())
    }

    /// Hands the history rows the ticks since the last hand-out made to the tables' writer.
    fn hand_out_history(&mut self) -> Result<(), String> {
        let mut history = std::mem::take(&mut self.history);
        history.symbols = self.engine.market_symbols();
        history.rows = self.engine.take_history();
        history.ended = self.engine.take_owed_ended();
        // Refused only when the writer stopped, on an error `journaled` then returns.
        self.journal
            .tables
            .send(history)
            .map_err(|_| "the tables' writer stopped".to_owned())
    }

    /// Samples prices and every known customer's figures now.
    pub fn sample(&mut self) {
        let at = self.engine.clock().now;
        if self.observed.samples.last().is_some_and(|s| s.at == at) {
            return;
        }
        let codes: Vec<CustomerCode> = self.observed.customers.iter().map(|(_, c)| *c).collect();
        let accounts = self.engine.accounts_figures(&codes, &self.observed.assets);
        let venue = self
            .observed
            .assets
            .iter()
            .map(|a| VenueAccount::ALL.map(|v| self.engine.venue_balance(v, *a)))
            .collect();
        self.observed.samples.push(Sample {
            at,
            prices: self.engine.prices(),
            accounts,
            venue,
        });
    }
}

/// A fresh engine set up as a run drives it: nothing published (no reader), the margin-state
/// changes the only events (all the report reads of them), and its history handed out
/// [`HISTORY_BATCH`] ticks at a time (to the tables' writer) and let go past its window.
///
/// The window is [`REPLAY_WINDOW_BITS`]: rows in a chunk still filling are handed out as copies
/// and the engine digests them itself when the chunk is let go, while a whole chunk leaves
/// moved, owing its digest to the tables' writer. A journal batch of the 24-hour scenario makes
/// some 68 000 ledger rows, about a server's chunk of 65 536, so most rows were copied first;
/// a hand-out's 8 500 still leave mostly in whole chunks of 4 096.
pub fn replaying(engine: Engine) -> Engine {
    let mut engine = crate::state::config::audited(engine);
    engine.set_publishing(false);
    engine.set_listening(Listening::MarginStates);
    engine.set_projecting(true);
    engine.set_history_on_request(true);
    engine.set_history_window(REPLAY_WINDOW_BITS);
    engine.owe_ended_digests();
    engine
}

/// The settlement assets of the instruments, sorted.
pub fn settlement_assets(engine: &Engine) -> Vec<Asset> {
    let mut assets: Vec<Asset> = engine
        .genesis_config()
        .instruments
        .iter()
        .map(|i| i.settlement)
        .collect();
    assets.sort();
    assets.dedup();
    assets
}

/// Runs `plan` from genesis into `journal`, with `ledger.csv` and `trades.csv` written at
/// `tables` as it goes, calling `progress` with the steps done and those known; the time the
/// journal's commits took, beside the run, and the tables written. The steps are taken from
/// the plan, or from `fed` as the file is read (`feed`: the plan then has none, and gets its
/// count of events and files named at the end); each command is decoded as it goes to the
/// engine and freed once applied.
pub fn run(
    plan: &mut Plan,
    fed: Option<&mut Fed>,
    (journal, tables): (&Journal, (&Path, &Path)),
    progress: &dyn Fn(u64, u64),
) -> Result<(Engine, Observed, Duration, Streamed), String> {
    // The what-if's factors first: the volatility's is part of the genesis the journal keeps.
    let seed = plan.genesis.seed;
    let drawn = super::whatif::apply(&plan.what_if, seed, &mut plan.genesis, &mut plan.steps);
    journal.init(&plan.genesis).map_err(|e| e.to_string())?;
    let engine = replaying(Engine::genesis(plan.genesis.clone()));
    let assets = settlement_assets(&engine);
    let ((engine, mut observed), took, streamed) = journaled(journal, tables, |batches| {
        drive(plan, fed, Runner::new(engine, batches, assets), progress)
    })?;
    observed.drawn = drawn;
    Ok((engine, observed, took, streamed))
}

/// The run's loop: the set-up, then a tick per instant with commands and the samples, a
/// chunk of steps at a time, then the samples to the end.
fn drive(
    plan: &mut Plan,
    fed: Option<&mut Fed>,
    mut r: Runner,
    progress: &dyn Fn(u64, u64),
) -> Result<(Engine, Observed), String> {
    let start = plan.genesis.start;
    let codes = set_up(&mut r, plan, start)?;
    r.sample();
    let mut source = match fed {
        Some(fed) => {
            r.named.record(codes.clone());
            Source::Fed(fed)
        }
        None => {
            let mut timeline = std::mem::take(&mut plan.steps);
            if let Some(model) = &plan.latency {
                let seed = plan.genesis.seed;
                super::latency::delay_requests(&mut timeline, model, seed, plan.end);
            }
            Source::Whole(Some(timeline))
        }
    };
    let mut at = Instants {
        next_sample: start.plus_millis(plan.sample_every_ms),
        done: 0,
        known: 0,
    };
    while let Some(chunk) = source.next(&mut r.named, &codes, &mut at.known)? {
        let (mut steps, mut made) = (chunk.iter_encoded().peekable(), Default::default());
        while steps.peek().is_some() {
            instant(
                &mut r,
                plan,
                (&codes, &mut steps, &mut made),
                &mut at,
                progress,
            )?;
        }
    }
    if let Source::Fed(fed) = &mut source
        && let Some(read) = fed.done()
    {
        (plan.events, plan.inputs) = (read.events, read.inputs);
        plan.text_sha256 = Some(read.text_sha256);
    }
    let (mut none, mut made) = (None.into_iter().peekable(), Default::default());
    while r.engine.clock().now < plan.end {
        instant(
            &mut r,
            plan,
            (&codes, &mut none, &mut made),
            &mut at,
            progress,
        )?;
    }
    r.sample();
    r.flush()?;
    Ok(r.into_parts())
}

/// Where a run's loop is: the next sample's instant, the steps done and those known.
struct Instants {
    next_sample: Timestamp,
    done: u64,
    known: u64,
}

/// An instant's commands' origins and encodings (see [`FromFile`]), reused from one to the next.
type Made<'t> = (Vec<Origin>, Vec<Encoded<'t>>);

/// A command's encoding as the file gave it, with the customer it is bound to where the plan
/// encoded it for [`UNBOUND`] (`Command::encode_rebound` puts the customer's code in).
type Encoded<'t> = Option<(&'t [u8], Option<CustomerCode>)>;

/// The next instant: the earliest of the next step's, the next sample's and the end; its
/// commands applied in one tick (or an empty tick there), and its sample taken.
fn instant<'t>(
    r: &mut Runner,
    plan: &Plan,
    (codes, steps, (origins, encoded)): (
        &[CustomerCode],
        &mut Peekable<impl Iterator<Item = (Step, &'t [u8])>>,
        &mut Made<'t>,
    ),
    at: &mut Instants,
    progress: &dyn Fn(u64, u64),
) -> Result<(), String> {
    let next_step = steps.peek().map(|s| s.0.at).unwrap_or(plan.end);
    let t = next_step.min(at.next_sample).min(plan.end);
    let mut commands = Vec::new();
    origins.clear();
    encoded.clear();
    while let Some((step, bytes)) = steps.next_if(|s| s.0.at == t) {
        origins.push((step.event, step.customer));
        // A customer's command is bound to its code here, its encoding by its bytes.
        encoded.push(Some((bytes, step.customer.map(|c| codes[c]))));
        commands.push(bound(step, codes));
    }
    if commands.is_empty() {
        advance(r, t)?;
    } else {
        at.done += commands.len() as u64;
        refused(r, t, Some((&origins[..], plan, &encoded[..])), commands)?;
        progress(at.done, at.known);
    }
    if t == at.next_sample || t == plan.end {
        r.sample();
        at.next_sample = at.next_sample.plus_millis(plan.sample_every_ms);
    }
    Ok(())
}

/// The scenario's broker and customers, created at `start` with their leverage, fees and
/// deposits; the customers' codes in the scenario's order.
fn set_up(r: &mut Runner, plan: &Plan, start: Timestamp) -> Result<Vec<CustomerCode>, String> {
    let broker = create_broker(r, start)?;
    let creates = plan
        .customers
        .iter()
        .map(|c| {
            Command::CreateCustomer(CreateCustomer {
                broker,
                external_id: Some(c.name.clone()),
            })
        })
        .collect();
    r.tick(start, creates)?;
    let codes: Vec<CustomerCode> = r.observed.customers.iter().map(|(_, c)| *c).collect();
    assert_eq!(
        codes.len(),
        plan.customers.len(),
        "every scenario customer is created"
    );
    let setup = plan
        .customers
        .iter()
        .zip(&codes)
        .flat_map(|(c, code)| c.setup.iter().map(|cmd| bind(cmd.clone(), *code)))
        .collect();
    refused(r, start, None, setup)?;
    Ok(codes)
}

fn create_broker(
    r: &mut Runner,
    start: Timestamp,
) -> Result<perpsim_core::ids::BrokerCode, String> {
    // No key signs for it: the scenario's requests come from the file, not the API.
    let command = Command::CreateBroker(CreateBroker {
        name: BROKER.into(),
        public_key: PublicKey([0; 32]),
    });
    match r.tick(start, vec![command])?.pop() {
        Some(Ok(Outcome::Broker(b))) => Ok(b.code),
        other => Err(format!("the scenario's broker was not created: {other:?}")),
    }
}

/// An instant without commands (a sample's, the end): an empty tick there, its timers fired
/// and one run at it, as the instant's commands would have had.
fn advance(r: &mut Runner, to: Timestamp) -> Result<(), String> {
    if to > r.engine.clock().now {
        r.tick(to, Vec::new())?;
    }
    Ok(())
}

/// Of each command a file gave: its event's position in the file, and its customer's in the
/// plan.
type Origin = (usize, Option<usize>);

/// An instant's commands as the file gave them: each one's origin, the plan, and each one's
/// encoding, which the journal takes as it is or bound to its customer.
type FromFile<'a> = (&'a [Origin], &'a Plan, &'a [Encoded<'a>]);

/// Applies one instant's commands, keeping each refusal with its event, where the commands
/// are a file's (with their encodings, where the journal can take them as they are).
fn refused(
    r: &mut Runner,
    at: Timestamp,
    from_file: Option<FromFile>,
    commands: Vec<Command>,
) -> Result<(), String> {
    let names: Vec<Option<(CustomerCode, String)>> = (commands.iter())
        .map(|c| c.order_reference().map(|(c, r)| (c, r.to_owned())))
        .collect();
    let encoded = from_file.map(|(_, _, e)| e).unwrap_or_default();
    let results = r.tick_encoded(at, commands, encoded)?;
    for (k, result) in results.into_iter().enumerate() {
        let Err(mut e) = result else { continue };
        if let Some((customer, reference)) = &names[k]
            && is_not_open(&e)
        {
            e = r.named.name(e, *customer, reference);
        }
        let (event, customer) = match from_file {
            Some((origins, plan, _)) => (
                Some(origins[k].0),
                origins[k].1.map(|c| plan.customers[c].name.clone()),
            ),
            None => (None, None),
        };
        r.observed.refusals.push(Refusal {
            at,
            event,
            customer,
            code: e.code.code(),
            message: e.message,
        });
    }
    Ok(())
}

fn bound(step: Step, codes: &[CustomerCode]) -> Command {
    match step.customer {
        Some(c) => bind(step.command, codes[c]),
        None => step.command,
    }
}

/// The command for `code`: the plan built a customer's command for [`UNBOUND`].
fn bind(mut command: Command, code: CustomerCode) -> Command {
    if let Some(customer) = command.customer_mut() {
        assert_eq!(*customer, UNBOUND, "a planned command is bound once");
        *customer = code;
    }
    command
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::hash::BuildHasher;

    /// The references are the scenario file's, untrusted: a file naming references built to
    /// collide under a fixed hash would make every ended order's look-up walk them all. Each
    /// map of them hashes with a seed of its own, drawn at random, so no file can be built
    /// against it (a fixed-seed or keyless hasher would hash a key the same in every map).
    #[test]
    fn each_map_of_a_plans_references_hashes_with_a_random_seed_of_its_own() {
        let key: Reference = (
            CustomerCode(perpsim_core::Uuid::from_u128(7)),
            ReferenceId::from("r1"),
        );
        let hashes: BTreeSet<u64> = (0..8)
            .map(|_| Named::default().latest.hasher().hash_one(&key))
            .collect();
        assert_eq!(
            hashes.len(),
            8,
            "one key hashed alike in two maps: {hashes:?}"
        );
    }
}
