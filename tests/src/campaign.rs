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

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::{Client, Resp, Server, now_ns, replay_hash};

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
/// frequent snapshots (recovery is snapshot plus tail), and a rate limit the load never meets.
const FLAGS: [&str; 10] = [
    "--clock",
    "manual",
    "--start",
    crate::START,
    "--snapshot-every",
    "40",
    "--rate-limit",
    "100000",
    "--rate-burst",
    "100000",
];

/// A signed request as sent, to be sent again byte for byte.
#[derive(Debug, Clone)]
struct Captured {
    method: &'static str,
    path: String,
    body: String,
    nonce: String,
}

#[derive(Debug, Clone)]
enum Kind {
    Place { reference: String, resting: bool },
    Amend { reference: String, price: String },
    Cancel { reference: String },
    Deposit,
    Withdraw,
    Read,
}

#[derive(Debug, Clone)]
enum Outcome {
    Acked(Value),
    Refused,
    InFlight,
}

#[derive(Debug, Clone)]
struct Op {
    kind: Kind,
    sent: Captured,
    outcome: Outcome,
}

/// What one worker's customer must look like: built only from acknowledged answers.
#[derive(Default)]
struct Model {
    placed: BTreeSet<String>,
    refused_places: BTreeSet<String>,
    canceled: BTreeSet<String>,
    /// The last acknowledged amend price per reference.
    amended: BTreeMap<String, String>,
    resting: Vec<String>,
    deposits: BTreeSet<String>,
    withdrawals: BTreeSet<String>,
    next_reference: u64,
    /// References this round placed, amended or cancelled: what a round's checks read one by
    /// one (the last round of a data dir reads them all).
    touched: BTreeSet<String>,
}

struct Worker {
    client: Client,
    customer: String,
    model: Model,
    rng: Rng,
}

impl Worker {
    fn next_op(&mut self) -> (Kind, &'static str, String, Value) {
        let c = &self.customer;
        let orders = format!("/v1/customers/{c}/orders");
        let dice = self.rng.below(100);
        let pick = |rng: &mut Rng, v: &[String]| v[rng.below(v.len() as u64) as usize].clone();
        if dice < 15 && !self.model.resting.is_empty() {
            let reference = pick(&mut self.rng, &self.model.resting);
            let price = self.band_price(reference.ends_with('b'));
            let body = json!({"limit_price": price});
            let path = format!("{orders}/{reference}");
            return (Kind::Amend { reference, price }, "PATCH", path, body);
        }
        if dice < 27 && !self.model.resting.is_empty() {
            let reference = pick(&mut self.rng, &self.model.resting);
            let path = format!("{orders}/{reference}");
            return (Kind::Cancel { reference }, "DELETE", path, Value::Null);
        }
        match dice {
            0..=59 => {
                self.model.next_reference += 1;
                let buy = self.rng.below(2) == 0;
                let side = if buy { "buy" } else { "sell" };
                let n = self.model.next_reference;
                let reference = format!("w{}n{n}{}", self.rng.below(1 << 20), &side[..1]);
                let (resting, body) = match self.rng.below(4) {
                    0 => (
                        false,
                        json!({"symbol": SYMBOL, "side": side, "type": "market",
                               "reference_id": reference, "amount": "0.001"}),
                    ),
                    1 => (
                        false,
                        json!({"symbol": SYMBOL, "side": "sell", "type": "stop_loss",
                               "reference_id": reference, "amount": "0.001",
                               "trigger_price": "40000.0"}),
                    ),
                    _ => (
                        true,
                        json!({"symbol": SYMBOL, "side": side, "type": "limit",
                               "reference_id": reference, "amount": "0.001",
                               "limit_price": self.band_price(buy)}),
                    ),
                };
                (Kind::Place { reference, resting }, "POST", orders, body)
            }
            60..=69 => (
                Kind::Deposit,
                "POST",
                format!("/v1/customers/{c}/deposits"),
                json!({"asset": "USDC", "amount": "100"}),
            ),
            70..=79 => (
                Kind::Withdraw,
                "POST",
                format!("/v1/customers/{c}/withdrawals"),
                json!({"asset": "USDC", "amount": "1.5"}),
            ),
            _ => (
                Kind::Read,
                "GET",
                format!("/v1/customers/{c}/balances"),
                Value::Null,
            ),
        }
    }

    /// Buys rest between 55 000 and 59 999.9, sells between 60 000.1 and 65 000: market orders
    /// of the other workers take from them.
    fn band_price(&mut self, buy: bool) -> String {
        let ticks = self.rng.below(50_000);
        let price = if buy {
            550_000 + ticks
        } else {
            600_001 + ticks
        };
        format!("{}.{}", price / 10, price % 10)
    }

    /// Sends one op and books its answer in the model (in flight once the server is gone).
    fn step(&mut self) -> Op {
        let (kind, method, path, body) = self.next_op();
        let body = if body.is_null() {
            String::new()
        } else {
            body.to_string()
        };
        let sent = Captured {
            method,
            path,
            body,
            nonce: now_ns().to_string(),
        };
        let answer = self.client.try_send_with_nonce(
            sent.method,
            &sent.path,
            sent.body.as_bytes(),
            &sent.nonce,
        );
        let outcome = match answer {
            Err(_) => Outcome::InFlight,
            Ok(r) if r.status >= 500 => Outcome::InFlight, // the engine stopped under it
            Ok(r) if r.status < 300 => Outcome::Acked(r.json()),
            Ok(r) => {
                assert!(
                    r.status == 400 || r.status == 409,
                    "{method} {}: unexpected {} {}",
                    sent.path,
                    r.status,
                    r.text
                );
                Outcome::Refused
            }
        };
        let op = Op {
            kind,
            sent,
            outcome,
        };
        self.book(&op);
        op
    }

    fn book(&mut self, op: &Op) {
        let m = &mut self.model;
        if let Kind::Place { reference, .. }
        | Kind::Amend { reference, .. }
        | Kind::Cancel { reference } = &op.kind
        {
            m.touched.insert(reference.clone());
        }
        match (&op.kind, &op.outcome) {
            (Kind::Place { reference, resting }, Outcome::Acked(v)) => {
                m.placed.insert(reference.clone());
                if *resting && v["status"] == "open" {
                    m.resting.push(reference.clone());
                }
            }
            (Kind::Place { reference, .. }, Outcome::Refused) => {
                m.refused_places.insert(reference.clone());
            }
            (Kind::Amend { reference, price }, Outcome::Acked(_)) => {
                m.amended.insert(reference.clone(), price.clone());
            }
            (Kind::Amend { reference, .. } | Kind::Cancel { reference }, Outcome::Refused) => {
                // No longer open (filled by another worker, say): stop picking it.
                m.resting.retain(|r| r != reference);
            }
            (Kind::Cancel { reference }, Outcome::Acked(_)) => {
                m.canceled.insert(reference.clone());
                m.resting.retain(|r| r != reference);
            }
            (Kind::Deposit, Outcome::Acked(v)) => {
                m.deposits.insert(v["code"].as_str().unwrap().to_owned());
            }
            (Kind::Withdraw, Outcome::Acked(v)) => {
                m.withdrawals.insert(v["code"].as_str().unwrap().to_owned());
            }
            _ => {}
        }
    }
}

fn get(c: &Client, path: &str) -> Resp {
    let r = c.send("GET", path, None);
    assert!(r.status == 200 || r.status == 404, "{path}: {}", r.text);
    r
}

/// Every row of a paginated list.
fn all_pages(c: &Client, path: &str) -> Vec<Value> {
    let mut rows = Vec::new();
    let mut after: Option<String> = None;
    let sep = if path.contains('?') { '&' } else { '?' };
    loop {
        let page = match &after {
            Some(cursor) => format!("{path}{sep}limit=1000&after={cursor}"),
            None => format!("{path}{sep}limit=1000"),
        };
        let r = get(c, &page).json();
        rows.extend(r["data"].as_array().unwrap().iter().cloned());
        if r["response_metadata"]["has_next"] != true {
            return rows;
        }
        after = Some(
            r["response_metadata"]["end_cursor"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
}

/// The checks of one worker's customer after a restart; `in_flight` is its op cut by the kill.
/// Orders are read one by one where this round touched them, or all of them when `all`.
fn check_worker(w: &Worker, in_flight: Option<&Op>, all: bool) {
    let (c, m, code) = (&w.client, &w.model, &w.customer);
    let flying_place = in_flight.and_then(|op| match &op.kind {
        Kind::Place { reference, .. } => Some(reference.as_str()),
        _ => None,
    });
    let checked = |r: &&String| all || m.touched.contains(*r);
    for reference in m.placed.iter().filter(checked) {
        let r = get(c, &format!("/v1/customers/{code}/orders/{reference}"));
        assert_eq!(r.status, 200, "acknowledged order {reference} was lost");
        let order = r.json();
        if m.canceled.contains(reference) {
            assert_eq!(order["status"], "canceled", "{reference}: {order}");
        }
        let amended_last = in_flight.is_none_or(
            |op| !matches!(&op.kind, Kind::Amend { reference: r, .. } if r == reference),
        );
        let open = order["status"] == "open" || order["status"] == "partially_filled";
        if let (Some(price), true, true) = (m.amended.get(reference), open, amended_last) {
            assert_eq!(order["limit_price"], price.as_str(), "{reference}: {order}");
        }
    }
    for reference in m.refused_places.iter().filter(checked) {
        let r = get(c, &format!("/v1/customers/{code}/orders/{reference}"));
        assert_eq!(
            r.status, 404,
            "refused order {reference} exists: {}",
            r.text
        );
    }
    for order in all_pages(c, &format!("/v1/customers/{code}/orders")) {
        let reference = order["reference_id"].as_str().unwrap();
        assert!(
            m.placed.contains(reference) || flying_place == Some(reference),
            "open order {reference} was neither acknowledged nor in flight"
        );
    }
    let rows = all_pages(
        c,
        &format!("/v1/customers/transactions?customer_code={code}"),
    );
    let mut total: i128 = 0;
    for (kind, acked) in [("deposit", &m.deposits), ("withdrawal", &m.withdrawals)] {
        let codes: BTreeSet<String> = rows
            .iter()
            .filter(|t| t["type"] == kind)
            .map(|t| t["code"].as_str().unwrap().to_owned())
            .collect();
        assert!(codes.is_superset(acked), "an acknowledged {kind} was lost");
        let flying = in_flight.is_some_and(|op| {
            matches!(
                (&op.kind, kind),
                (Kind::Deposit, "deposit") | (Kind::Withdraw, "withdrawal")
            )
        });
        let extra = codes.len() - acked.len();
        assert!(
            extra == 0 || (extra == 1 && flying),
            "{extra} {kind}s neither acknowledged nor in flight"
        );
    }
    for row in rows.iter().filter(|t| t["status"] == "completed") {
        let units = ledger_units(row["total_amount"].as_str().unwrap());
        total += if row["direction"] == "credit" {
            units
        } else {
            -units
        };
    }
    let balances = get(c, &format!("/v1/customers/{code}/balances?asset=USDC")).json();
    let balance = &balances[0];
    assert_eq!(
        ledger_units(balance["total"].as_str().unwrap()),
        total,
        "balance is the sum of its completed rows: {balance}"
    );
    let parts: i128 = ["available", "locked", "pending"]
        .iter()
        .map(|f| ledger_units(balance[*f].as_str().unwrap()))
        .sum();
    assert_eq!(
        parts,
        ledger_units(balance["total"].as_str().unwrap()),
        "{balance}"
    );
}

/// Learns whether the op cut by the kill took effect, and books it if it did (it may have:
/// the kill can come between the commit and the answer). `Some(true)` when its effect is
/// there, so sending it again must be refused; `None` when a request leaves nothing to see.
fn settle_in_flight(w: &mut Worker, op: &Op) -> Option<bool> {
    let code = w.customer.clone();
    let order = |w: &Worker, reference: &str| {
        let r = get(
            &w.client,
            &format!("/v1/customers/{code}/orders/{reference}"),
        );
        (r.status == 200).then(|| r.json())
    };
    let is_open = |o: &Value| o["status"] == "open" || o["status"] == "partially_filled";
    match &op.kind {
        Kind::Place { reference, resting } => {
            let found = order(w, reference);
            if let Some(o) = &found {
                w.model.placed.insert(reference.clone());
                if *resting && is_open(o) {
                    w.model.resting.push(reference.clone());
                }
            }
            Some(found.is_some())
        }
        Kind::Cancel { reference } => {
            let canceled = order(w, reference).is_some_and(|o| o["status"] == "canceled");
            if canceled {
                w.model.canceled.insert(reference.clone());
                w.model.resting.retain(|r| r != reference);
            }
            canceled.then_some(true)
        }
        Kind::Amend { reference, price } => {
            let o = order(w, reference)?;
            let applied = is_open(&o) && o["limit_price"] == price.as_str();
            if applied {
                w.model.amended.insert(reference.clone(), price.clone());
            }
            applied.then_some(true)
        }
        Kind::Deposit | Kind::Withdraw => {
            let (kind, known) = match op.kind {
                Kind::Deposit => ("deposit", &mut w.model.deposits),
                _ => ("withdrawal", &mut w.model.withdrawals),
            };
            let path = format!("/v1/customers/transactions?customer_code={code}");
            let fresh: Vec<String> = all_pages(&w.client, &path)
                .iter()
                .filter(|t| t["type"] == kind)
                .map(|t| t["code"].as_str().unwrap().to_owned())
                .filter(|c| !known.contains(c))
                .collect();
            known.extend(fresh.iter().cloned());
            Some(!fresh.is_empty())
        }
        Kind::Read => None,
    }
}

/// A decimal string at the ledger's 10 places, as an exact integer of 1e-10 units.
fn ledger_units(text: &str) -> i128 {
    let (sign, digits) = match text.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, text),
    };
    let (whole, frac) = digits.split_once('.').unwrap_or((digits, ""));
    assert!(frac.len() <= 10, "more than 10 places: {text}");
    let frac = format!("{frac:0<10}");
    sign * (whole.parse::<i128>().unwrap() * 10_000_000_000 + frac.parse::<i128>().unwrap())
}

/// Sends every captured request of the round again, each with whether its effect is known to
/// be there. Returns (refused as reused, in-flight requests accepted now because they never
/// took effect).
fn replay_round(workers: &mut [Worker], ops: &[Vec<(Op, Option<bool>)>]) -> (u64, u64) {
    let (mut refused, mut accepted) = (0, 0);
    for (w, ops) in workers.iter_mut().zip(ops) {
        for (op, took_effect) in ops {
            let s = &op.sent;
            let r = w
                .client
                .send_with_nonce(s.method, &s.path, s.body.as_bytes(), &s.nonce);
            let reused = r.status == 401 && r.text.contains("reused");
            match op.outcome {
                Outcome::InFlight if !reused && *took_effect != Some(true) => {
                    // Its nonce was never spent, so it never took effect: this is its first
                    // acceptance, and the model learns of it like any answer.
                    accepted += 1;
                    let answered = Op {
                        outcome: match r.status {
                            200..=299 => Outcome::Acked(r.json()),
                            _ => Outcome::Refused,
                        },
                        ..op.clone()
                    };
                    w.book(&answered);
                }
                _ => {
                    assert!(
                        reused,
                        "{} {} sent again after the restart: {} {}",
                        s.method, s.path, r.status, r.text
                    );
                    refused += 1;
                }
            }
        }
    }
    (refused, accepted)
}

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

/// One round of load until the kill. Returns each worker's ops and the op cut by the kill.
fn load(
    server: &mut Server,
    workers: &mut Vec<Worker>,
    kill_after: Duration,
) -> Vec<(Vec<Op>, Option<Op>)> {
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
    // The clock moves under the load, so transfers complete and GTD-free timers run.
    let admin = {
        let (url, token, stop) = (server.url.clone(), server.admin_token(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let auth = format!("Bearer {token}");
                let _ = crate::try_raw(
                    "POST",
                    &format!("{url}/admin/v1/clock/advance"),
                    &[
                        ("Authorization", &auth),
                        ("Content-Type", "application/json"),
                    ],
                    br#"{"seconds":1}"#,
                );
                std::thread::sleep(Duration::from_millis(40));
            }
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
    admin.join().unwrap();
    let rounds = threads.into_iter().map(|t| t.join().unwrap()).collect();
    workers.extend(
        shared
            .into_iter()
            .map(|w| Arc::try_unwrap(w).ok().unwrap().into_inner().unwrap()),
    );
    rounds
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
            let results = load(&mut server, &mut workers, kill_after);
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
