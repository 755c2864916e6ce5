//! The workload: each worker, one broker key on its own keep-alive connection, sends its
//! profile's requests one after another (closed loop) or paced to a share of a total rate,
//! recording every request's latency by kind.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::client::Http;
use super::target::Account;

/// What the workers send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// Place a resting limit order, cancel it.
    Entry,
    /// A broker's day: place, amend, read the order, the open orders, the account summary
    /// and a ticker, cancel; a deposit every eighth round.
    Mixed,
}

impl Profile {
    pub fn name(self) -> &'static str {
        match self {
            Profile::Entry => "place+cancel",
            Profile::Mixed => "mixed",
        }
    }
}

/// Request kinds, in report order.
pub const KINDS: [&str; 8] = [
    "place",
    "cancel",
    "amend",
    "get order",
    "open orders",
    "summary",
    "ticker",
    "deposit",
];
const PLACE: usize = 0;
const CANCEL: usize = 1;
const AMEND: usize = 2;
const GET: usize = 3;
const OPEN: usize = 4;
const SUMMARY: usize = 5;
const TICKER: usize = 6;
const DEPOSIT: usize = 7;

/// When the workers stop.
#[derive(Debug, Clone, Copy)]
pub enum Stop {
    After(Duration),
    /// This many requests in all, shared evenly by the workers.
    Count(u64),
}

#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub profile: Profile,
    pub stop: Stop,
    /// Requests a second for all workers together; none: as fast as answers come.
    pub rate: Option<f64>,
}

/// Latencies in microseconds by kind, and the requests answered outside 2xx.
#[derive(Clone)]
pub struct Tally {
    pub kinds: Vec<Histogram<u64>>,
    pub errors: u64,
    pub first_error: Option<String>,
}

/// Longest latency a histogram holds: a minute.
const MAX_US: u64 = 60_000_000;

impl Default for Tally {
    fn default() -> Self {
        let h = || Histogram::new_with_bounds(1, MAX_US, 3).expect("histogram bounds");
        Tally {
            kinds: KINDS.iter().map(|_| h()).collect(),
            errors: 0,
            first_error: None,
        }
    }
}

impl Tally {
    fn record(&mut self, kind: usize, took: Duration) {
        let us = (took.as_micros() as u64).clamp(1, MAX_US);
        self.kinds[kind].record(us).expect("within bounds");
    }

    pub fn merge(&mut self, other: &Tally) {
        for (mine, theirs) in self.kinds.iter_mut().zip(&other.kinds) {
            mine.add(theirs).expect("same bounds");
        }
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error.clone_from(&other.first_error);
        }
    }

    /// Every kind together.
    pub fn total(&self) -> Histogram<u64> {
        let mut all = self.kinds[0].clone();
        for h in &self.kinds[1..] {
            all.add(h).expect("same bounds");
        }
        all
    }

    pub fn requests(&self) -> u64 {
        self.kinds.iter().map(Histogram::len).sum()
    }
}

/// Tallies since the last [`Live::take`], one per worker: what a sampler reads while the
/// workers run.
pub struct Live {
    intervals: Vec<Mutex<Tally>>,
}

impl Live {
    pub fn new(workers: usize) -> Self {
        Live {
            intervals: (0..workers).map(|_| Mutex::default()).collect(),
        }
    }

    /// Everything recorded since the last call, merged; the intervals start over.
    pub fn take(&self) -> Tally {
        let mut all = Tally::default();
        for interval in &self.intervals {
            all.merge(&std::mem::take(
                &mut *interval.lock().expect("interval lock"),
            ));
        }
        all
    }
}

pub struct Outcome {
    pub tally: Tally,
    pub elapsed: Duration,
    /// CPU the server used while the workers ran, when measured.
    pub server_cpu: Option<Duration>,
}

impl Outcome {
    pub fn per_second(&self) -> f64 {
        self.tally.requests() as f64 / self.elapsed.as_secs_f64()
    }

    /// Server CPU per request, in microseconds.
    pub fn cpu_per_request_us(&self) -> Option<f64> {
        let cpu = self.server_cpu?;
        Some(cpu.as_secs_f64() * 1e6 / self.tally.requests().max(1) as f64)
    }
}

/// One request of a round.
struct Step {
    kind: usize,
    method: &'static str,
    path: String,
    body: String,
}

/// Round `round` of a worker's profile.
fn round(profile: Profile, customer: &str, reference: &str, round: u64) -> Vec<Step> {
    let orders = format!("/v1/customers/{customer}/orders");
    let order = format!("{orders}/{reference}");
    let step = |kind, method, path: &str, body: String| Step {
        kind,
        method,
        path: path.to_owned(),
        body,
    };
    let place = step(
        PLACE,
        "POST",
        &orders,
        format!(
            r#"{{"symbol":"BTC-USDC-PERP","side":"buy","type":"limit","reference_id":"{reference}","amount":"0.001","limit_price":"30000"}}"#
        ),
    );
    let cancel = step(CANCEL, "DELETE", &order, String::new());
    if profile == Profile::Entry {
        return vec![place, cancel];
    }
    let mut steps = vec![
        place,
        step(AMEND, "PATCH", &order, r#"{"limit_price":"30001"}"#.into()),
        step(GET, "GET", &order, String::new()),
        step(OPEN, "GET", &format!("{orders}?limit=10"), String::new()),
        step(
            SUMMARY,
            "GET",
            &format!("/v1/customers/{customer}/account-summary"),
            String::new(),
        ),
        step(TICKER, "GET", "/v1/tickers/BTC-USDC-PERP", String::new()),
        cancel,
    ];
    if round.is_multiple_of(8) {
        let deposits = format!("/v1/customers/{customer}/deposits");
        steps.push(step(
            DEPOSIT,
            "POST",
            &deposits,
            r#"{"asset":"USDC","amount":"1"}"#.into(),
        ));
    }
    steps
}

/// Drives started in this process: each drive's order references carry its number, so a
/// drive never reuses an order reference an earlier drive on the same server left open.
static DRIVES: AtomicU64 = AtomicU64::new(0);

/// Runs the plan with one worker per account, on `url`; `live` is fed as it goes.
pub fn drive(url: &str, accounts: &[Account], plan: &Plan, live: Option<&Live>) -> Outcome {
    let started = Instant::now();
    let drive = DRIVES.fetch_add(1, Relaxed);
    let workers = accounts.len();
    let quota = match plan.stop {
        Stop::Count(n) => n.div_ceil(workers as u64),
        Stop::After(_) => u64::MAX,
    };
    // A worker's share of the rate: its requests are due one every `gap`.
    let gap = plan
        .rate
        .map(|r| Duration::from_secs_f64(workers as f64 / r));
    let tallies: Vec<Tally> = std::thread::scope(|scope| {
        let runs: Vec<_> = accounts
            .iter()
            .enumerate()
            .map(|(w, account)| {
                let interval = live.map(|l| &l.intervals[w]);
                scope.spawn(move || {
                    let http = Http::new(url);
                    let mut tally = Tally::default();
                    let mut sent = 0u64;
                    let going = |sent: u64| match plan.stop {
                        Stop::After(d) => started.elapsed() < d,
                        Stop::Count(_) => sent < quota,
                    };
                    'rounds: for r in 0.. {
                        let reference = format!("d{drive}w{w}r{r}");
                        for step in round(plan.profile, &account.customer, &reference, r) {
                            if !going(sent) {
                                break 'rounds;
                            }
                            if let Some(gap) = gap {
                                let due = started + gap.mul_f64(sent as f64);
                                std::thread::sleep(due.saturating_duration_since(Instant::now()));
                            }
                            let t = Instant::now();
                            let (status, text) =
                                http.send(step.method, &step.path, &step.body, &account.auth);
                            let took = t.elapsed();
                            tally.record(step.kind, took);
                            let ok = (200..300).contains(&status);
                            if !ok {
                                tally.errors += 1;
                                tally.first_error.get_or_insert_with(|| {
                                    format!("{} {} → {status} {text}", step.method, step.path)
                                });
                            }
                            if let Some(interval) = interval {
                                let mut i = interval.lock().expect("interval lock");
                                i.record(step.kind, took);
                                i.errors += u64::from(!ok);
                            }
                            sent += 1;
                        }
                    }
                    tally
                })
            })
            .collect();
        runs.into_iter()
            .map(|r| r.join().expect("worker"))
            .collect()
    });
    let elapsed = started.elapsed();
    let mut tally = Tally::default();
    for t in &tallies {
        tally.merge(t);
    }
    Outcome {
        tally,
        elapsed,
        server_cpu: None,
    }
}
