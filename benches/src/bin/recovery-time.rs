//! Restart to healthy with a long journal: builds a data dir holding `N` journaled commands of
//! trading traffic (default 1 000 000), once with snapshots as the host writes them (and
//! archives behind them) and once without, then times `perpsim serve` from spawn to its first
//! `200` on `/healthz` (the listener binds only after recovery), five times each, and prints
//! the medians. Each run is killed (SIGKILL), so each restart after the first is a recovery
//! from a crash: redb walks the journal's file before the engine's recovery starts.
//!
//!     cargo build --release -p perpsim-api -p perpsim-benches
//!     target/release/recovery-time [N]
//!
//! Target (issue 14): ≤ 2 s with snapshots.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};
use std::time::{Duration, Instant};

use perpsim_benches::{
    START, broker_command, create_customers, created, genesis, instant_deposits,
};
use perpsim_core::Decimal;
use perpsim_core::entry::OrderEntry;
use perpsim_core::ids::CustomerCode;
use perpsim_core::order::{OrderType, Side};
use perpsim_storage::{Journal, NonceWrites, SEGMENT_BYTES, SEGMENT_TICKS, TickRecord};
use perpsim_systems::command::{AdvanceClock, CancelOrder, PlaceOrder, SetInstrumentPrice};
use perpsim_systems::publish::events::Listening;
use perpsim_systems::{Command, Engine, Outcome};

const CUSTOMERS: usize = 1_000;
const PER_TICK: usize = 1_000;
/// The host's default `--snapshot-every`.
const SNAPSHOT_EVERY: u64 = 100_000;
const RUNS: usize = 5;

/// Appends ticks to both journals; snapshots go to the second only, as the host writes them,
/// each followed by the host's archiving of the whole segments no kept snapshot needs.
struct Writer {
    engine: Engine,
    plain: Journal,
    snapshotted: Journal,
    since_snapshot: u64,
    /// No snapshot after this many commands: recovery then replays a full interval's tail,
    /// the worst case at the default `--snapshot-every`.
    last_snapshot_before: u64,
}

impl Writer {
    fn tick(&mut self, commands: Vec<Command>) -> Vec<Outcome> {
        let at = self.engine.counters();
        let now = self.engine.clock().now;
        let encoded = TickRecord::encode(now, at.commands, &commands);
        let count = commands.len() as u64;
        let out = self.engine.tick(now, commands);
        for journal in [&self.plain, &self.snapshotted] {
            journal
                .append(at.ticks + 1, &encoded, NonceWrites::default())
                .expect("append");
        }
        self.since_snapshot += count;
        let done = self.engine.counters();
        if self.since_snapshot >= SNAPSHOT_EVERY && done.commands < self.last_snapshot_before {
            self.snapshotted
                .write_snapshot(done.ticks, self.engine.encode_state())
                .expect("snapshot");
            self.snapshotted
                .archive_whole_segments(SEGMENT_TICKS, SEGMENT_BYTES)
                .expect("archive");
            self.since_snapshot = 0;
        }
        out.results()
            .into_iter()
            .map(|r| r.expect("accepted"))
            .collect()
    }
}

fn limit(customer: CustomerCode, id: usize, side: Side, price_ticks: i64) -> Command {
    let entry = OrderEntry {
        amount: Some(Decimal::new(10, 4)),
        limit_price: Some(Decimal::new(price_ticks, 1)),
        ..OrderEntry::new(side, OrderType::Limit, format!("r{id}"))
    };
    Command::PlaceOrder(PlaceOrder {
        customer,
        symbol: "BTC-USDC-PERP".into(),
        entry: Box::new(entry),
    })
}

/// Customers with money, then ticks of orders placed away from each other and cancelled two
/// ticks later (about 2 000 resting at any time), with a price update every hundredth command.
fn build(dir: &Path, commands: u64) {
    let open = |name: &str| {
        let sub = dir.join(name);
        std::fs::create_dir_all(&sub).unwrap();
        let journal = Journal::open(&sub.join("journal.redb")).unwrap();
        journal.init(&genesis()).unwrap();
        journal
    };
    let mut w = Writer {
        engine: Engine::genesis(genesis()),
        plain: open("plain"),
        snapshotted: open("snapshotted"),
        since_snapshot: 0,
        last_snapshot_before: commands - SNAPSHOT_EVERY + 1,
    };
    w.engine.set_publishing(false);
    w.engine.set_listening(Listening::MarginStates);
    let Outcome::Broker(broker) = &w.tick(vec![broker_command()])[0] else {
        panic!("broker")
    };
    let customers = created(w.tick(create_customers(broker.code, CUSTOMERS)));
    w.tick(instant_deposits(
        &customers,
        Decimal::from(1_000_000_000i64),
    ));
    w.tick(vec![Command::AdvanceClock(AdvanceClock {
        to: START.plus_millis(1_000),
    })]);
    let mut id = 0usize;
    let mut placed: Vec<Vec<(CustomerCode, usize)>> = Vec::new();
    while w.engine.counters().commands < commands {
        let mut batch = Vec::with_capacity(PER_TICK);
        if placed.len() >= 2 {
            for (customer, r) in placed.remove(0) {
                batch.push(Command::CancelOrder(CancelOrder {
                    customer,
                    reference_id: format!("r{r}"),
                }));
            }
        }
        let mut this_tick = Vec::new();
        while batch.len() < PER_TICK {
            id += 1;
            let customer = customers[id % CUSTOMERS];
            if id.is_multiple_of(100) {
                let p = 600_000 + (id % 1_000) as i64;
                batch.push(Command::SetInstrumentPrice(SetInstrumentPrice {
                    symbol: "BTC-USDC-PERP".into(),
                    index_price: Decimal::new(p, 1),
                    mark_price: Decimal::new(p, 1),
                }));
                continue;
            }
            let (side, price) = match id % 2 {
                0 => (Side::Buy, 500_000 + (id % 50_000) as i64),
                _ => (Side::Sell, 700_000 + (id % 50_000) as i64),
            };
            batch.push(limit(customer, id, side, price));
            this_tick.push((customer, id));
        }
        placed.push(this_tick);
        let remaining = commands - w.engine.counters().commands;
        batch.truncate(remaining as usize);
        w.tick(batch);
    }
    println!(
        "built: {} commands in {} ticks, state hash {}",
        w.engine.counters().commands,
        w.engine.counters().ticks,
        w.engine.state_hash()
    );
}

/// Spawn to first `200` on `/healthz`.
fn restart_to_healthy(perpsim: &Path, data_dir: &Path) -> Duration {
    let started = Instant::now();
    let mut child = Process::new(perpsim)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--clock",
            "manual",
            "--data-dir",
        ])
        .arg(data_dir)
        .env("PERPSIM_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start perpsim");
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let mut address = None;
    for line in stderr.lines().map_while(Result::ok) {
        if let Some(a) = line.split("address=http://").nth(1) {
            address = Some(a.trim().to_owned());
            break;
        }
    }
    let address = address.expect("perpsim listened");
    loop {
        if healthz(&address) {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let took = started.elapsed();
    child.kill().ok();
    child.wait().ok();
    took
}

fn healthz(address: &str) -> bool {
    let Ok(mut s) = TcpStream::connect(address) else {
        return false;
    };
    let _ = s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer.starts_with("HTTP/1.1 200")
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Time from spawning `perpsim serve` on a data dir of COMMANDS journaled commands to its
/// first healthy answer, the server killed after each, with and without snapshots.
#[derive(clap::Parser)]
#[command(name = "recovery-time")]
struct Cli {
    /// Commands the data dir's journal holds.
    #[arg(default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    commands: u64,
}

fn main() {
    let Cli { commands } = clap::Parser::parse();
    let exe = std::env::current_exe().unwrap();
    let perpsim: PathBuf = exe.with_file_name("perpsim");
    assert!(perpsim.exists(), "build perpsim in the same profile first");
    let dir = tempfile::tempdir().unwrap();
    let built = Instant::now();
    build(dir.path(), commands);
    println!("journals written in {:.1} s", built.elapsed().as_secs_f64());
    for name in ["snapshotted", "plain"] {
        let file = dir.path().join(name).join("journal.redb");
        let bytes = std::fs::metadata(&file).map_or(0, |m| m.len());
        println!("{name}: journal.redb {:.1} MiB", bytes as f64 / 1048576.0);
    }
    for name in ["snapshotted", "plain"] {
        let data_dir = dir.path().join(name);
        let runs: Vec<Duration> = (0..RUNS)
            .map(|_| restart_to_healthy(&perpsim, &data_dir))
            .collect();
        println!(
            "{name}: restart to healthy, median of {RUNS}: {:.3} s (runs: {:?})",
            median(runs.clone()).as_secs_f64(),
            runs.iter().map(|d| d.as_millis()).collect::<Vec<_>>()
        );
    }
}
