//! The crash campaign: mixed signed load from several keys, `kill -9` at a random moment,
//! restart on the same data dir, and after every round check what a crash may and may not do:
//! - the recovered state hash equals a replay of the journal from genesis (and the debug
//!   binary asserts money conservation and the trading invariants after every tick of both);
//! - every acknowledged write is there, nothing is there that was neither acknowledged nor in
//!   flight, and each customer's balance is the sum of its completed ledger rows;
//! - every signed request captured before the kill and sent again after the restart is
//!   refused as reused, except one that was in flight and never took effect, which may be
//!   accepted once (its nonce was never spent).
//!
//! Each worker owns one broker key and one customer and sends one request at a time, so at the
//! kill each has at most one request in flight. A data dir serves `rounds_per_dir` rounds, so
//! the replay from genesis each round stays bounded.

mod checks;
mod worker;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use self::checks::{check_worker, replay_round, settle_in_flight};
use self::worker::{Model, Op, Outcome, Worker};
use crate::{Server, replay_hash};

#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub rounds: u32,
    pub rounds_per_dir: u32,
    pub workers: usize,
    pub seed: u64,
}

/// What a campaign did, for its report.
#[derive(Debug, Default, Clone, Copy)]
pub struct Report {
    pub rounds: u32,
    pub acknowledged: u64,
    pub in_flight_at_kill: u64,
    pub replays_refused: u64,
    pub in_flight_accepted_on_replay: u64,
    pub commands_journaled: u64,
    /// Archive calls that moved a segment of the journal (kills land among them too).
    pub segments_archived: u64,
}

/// splitmix64: the campaign's choices come from its seed, so a failing run can be repeated.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const SYMBOL: &str = "BTC-USDC-PERP";
/// Answers a round waits for before its random kill delay starts.
const MIN_ANSWERS_BEFORE_KILL: usize = 6;
/// Manual clock (the campaign moves it, so nothing ticks between the kill and the checks),
/// frequent snapshots (recovery is snapshot plus tail), the smallest history window (so the
/// kills fall while the engine lets go of its history rows, many times a run), every commit's
/// history rows left to the projection's backlog (so kills fall between a tick's journal
/// commit and its projection, issue 37), and a rate
/// limit the load never meets, nor the replays of every round's requests (each refused as
/// reused, so each a failed authentication of this one address).
const FLAGS: [&str; 18] = [
    "--clock",
    "manual",
    "--start",
    crate::START,
    "--snapshot-every",
    "40",
    "--history-window",
    "256",
    "--projection-batch",
    "0",
    "--rate-limit",
    "100000",
    "--rate-burst",
    "100000",
    "--auth-failure-rate",
    "100000",
    "--auth-failure-burst",
    "100000",
];

fn setup(server: &Server, settings: &Settings, dir_index: u32) -> Vec<Worker> {
    let workers: Vec<Worker> = (0..settings.workers)
        .map(|i| {
            let client = server.new_broker(&format!("campaign-{i}"));
            let customer = crate::customer(&client);
            let r = crate::transfer(
                &client,
                &customer,
                "deposits",
                json!({"asset": "USDC", "amount": "1000000"}),
            );
            assert_eq!(r.status, 201, "{}", r.text);
            let model = Model {
                deposits: BTreeSet::from([r.json()["code"].as_str().unwrap().to_owned()]),
                ..Model::default()
            };
            let seed = settings.seed ^ (u64::from(dir_index) << 32) ^ i as u64;
            Worker {
                client,
                customer,
                model,
                rng: Rng(seed),
            }
        })
        .collect();
    crate::advance(server, 1);
    workers
}

/// A worker's ops in one round, and the op the kill cut.
type WorkerRound = (Vec<Op>, Option<Op>);

/// One round of load until the kill. Returns each worker's ops and the op cut by the kill,
/// and how many archive calls moved a segment.
fn load(
    server: &mut Server,
    workers: &mut Vec<Worker>,
    kill_after: Duration,
) -> (Vec<WorkerRound>, u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicUsize::new(0));
    for w in workers.iter_mut() {
        w.model.touched.clear();
    }
    let shared: Vec<_> = workers.drain(..).map(|w| Arc::new(Mutex::new(w))).collect();
    let threads: Vec<_> = shared
        .iter()
        .map(|w| {
            let (w, stop, answered) = (w.clone(), stop.clone(), answered.clone());
            std::thread::spawn(move || {
                let mut w = w.lock().unwrap();
                let mut ops = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let op = w.step();
                    if matches!(op.outcome, Outcome::InFlight) {
                        return (ops, Some(op));
                    }
                    ops.push(op);
                    answered.fetch_add(1, Ordering::Relaxed);
                }
                (ops, None)
            })
        })
        .collect();
    // The clock moves under the load, so transfers complete and GTD-free timers run; every
    // fifth step also archives what the snapshots no longer need, so kills land in archives
    // too and each round's replay from genesis reads through the segments.
    let admin = {
        let (url, token, stop) = (server.url.clone(), server.admin_token(), stop.clone());
        std::thread::spawn(move || {
            let auth = format!("Bearer {token}");
            let headers = [
                ("Authorization", auth.as_str()),
                ("Content-Type", "application/json"),
            ];
            let mut archived = 0;
            for step in 0u64.. {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let advance = format!("{url}/admin/v1/clock/advance");
                let _ = crate::try_raw("POST", &advance, &headers, br#"{"seconds":1}"#);
                if step % 5 == 4 {
                    let archive = format!("{url}/admin/v1/journal/archive");
                    let moved = crate::try_raw("POST", &archive, &headers[..1], b"")
                        .is_ok_and(|r| r.status == 200 && !r.json()["segment"].is_null());
                    archived += u64::from(moved);
                }
                std::thread::sleep(Duration::from_millis(40));
            }
            archived
        })
    };
    // The kill comes at a random moment once the round has done some work, however busy the
    // machine is.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while answered.load(Ordering::Relaxed) < MIN_ANSWERS_BEFORE_KILL {
        assert!(std::time::Instant::now() < deadline, "no answer in 30 s");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(kill_after);
    server.kill9();
    stop.store(true, Ordering::Relaxed);
    let archived = admin.join().unwrap();
    let rounds = threads.into_iter().map(|t| t.join().unwrap()).collect();
    workers.extend(
        shared
            .into_iter()
            .map(|w| Arc::try_unwrap(w).ok().unwrap().into_inner().unwrap()),
    );
    (rounds, archived)
}

/// Runs the campaign in data dirs under `root`; panics on the first broken promise.
pub fn run(settings: Settings, root: &Path, mut progress: impl FnMut(u32, &Report)) -> Report {
    let mut report = Report::default();
    let mut rng = Rng(settings.seed);
    let mut round = 0;
    let mut dir_index = 0;
    while round < settings.rounds {
        let dir = root.join(format!("dir-{dir_index}"));
        let seed = settings.seed.to_string();
        let mut flags = FLAGS.to_vec();
        flags.extend(["--seed", seed.as_str()]);
        let mut server = Server::start_in(&dir, &flags);
        let mut workers = setup(&server, &settings, dir_index);
        let rounds_here = settings.rounds_per_dir.min(settings.rounds - round);
        let mut dir_commands = 0;
        for round_here in 1..=rounds_here {
            let kill_after = Duration::from_millis(rng.below(600));
            let (results, archived) = load(&mut server, &mut workers, kill_after);
            report.segments_archived += archived;
            let replayed = replay_hash(&dir);
            server = Server::start_in(&dir, &flags);
            for w in &mut workers {
                w.client.url.clone_from(&server.url);
            }
            let (_, commands, recovered) = server.state();
            assert_eq!(
                recovered, replayed,
                "round {round}: recovery and a replay from genesis differ"
            );
            dir_commands = commands;
            let mut all = Vec::new();
            for (w, (ops, in_flight)) in workers.iter_mut().zip(results) {
                report.acknowledged += ops
                    .iter()
                    .filter(|o| matches!(o.outcome, Outcome::Acked(_)))
                    .count() as u64;
                report.in_flight_at_kill += u64::from(in_flight.is_some());
                check_worker(w, in_flight.as_ref(), round_here == rounds_here);
                let mut sent: Vec<(Op, Option<bool>)> =
                    ops.into_iter().map(|op| (op, None)).collect();
                if let Some(op) = in_flight {
                    let took_effect = settle_in_flight(w, &op);
                    sent.push((op, took_effect));
                }
                all.push(sent);
            }
            let (refused, accepted) = replay_round(&mut workers, &all);
            report.replays_refused += refused;
            report.in_flight_accepted_on_replay += accepted;
            round += 1;
            report.rounds = round;
            progress(round, &report);
        }
        report.commands_journaled += dir_commands;
        drop(server);
        std::fs::remove_dir_all(&dir).ok();
        dir_index += 1;
    }
    report
}
