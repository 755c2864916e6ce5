//! perpsim's order book against `orderbook-rs` 0.15 on the same seeded workloads (issue 4):
//! add-only, cancel-only, aggressive walk, and mixed 70 % add / 20 % cancel / 10 % aggressive.
//! Criterion measures throughput side by side; a timed pass prints p50/p99 per operation;
//! a counting allocator over mimalloc (what `perpsim` serves with) measures memory per resting
//! order at 1 000 000 resting orders.
//! The same workloads also run through the whole engine (`engine`): each operation is a
//! journaled-form command (place limit GTC, cancel by reference, market IOC) for one of 16
//! funded customers, applied in ticks of 1 000 as the host does, with order entry rules,
//! margin checks, fills booked into positions, trades and the ledger; publishing off and the
//! ended orders' running digest owed to the host's writer thread, as during replay and serving
//! (the engine thread's cost; the read view's upkeep is measured by the serving benches).
//! Run: `cargo bench -p perpsim-benches --bench book`; `PERPSIM_BOOK_NO_REPORT=1` skips the
//! report (the timed pass and the memory figures), for a profiler's run of one workload.
#![allow(unsafe_code)] // the counting allocator below; nothing else

use std::alloc::{GlobalAlloc, Layout};
use std::collections::HashMap;
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use orderbook_rs::{Id, OrderBook, TimeInForce};
use perpsim_benches::{create_customers, created, instant_deposits, unbounded};
use perpsim_core::Decimal;
use perpsim_core::clock::ClockMode;
use perpsim_core::entry::OrderEntry;
use perpsim_core::ids::{CustomerCode, PublicKey};
use perpsim_core::instrument::default_instruments;
use perpsim_core::order::OrderType;
use perpsim_core::order::Side;
use perpsim_core::rng::SimRng;
use perpsim_core::time::Timestamp;
use perpsim_systems::command::{CancelOrder, CreateBroker, PlaceOrder};
use perpsim_systems::publish::events::Listening;
use perpsim_systems::records::ids::OrderId;
use perpsim_systems::records::order::OrderRef;
use perpsim_systems::trading::book::{Book, Fill};
use perpsim_systems::{Command, Engine, Genesis, Outcome};

/// Counts live heap bytes, for the memory-per-order measurement, over the allocator the
/// service runs with (mimalloc, as `perpsim` and the other engine benches): glibc's malloc
/// would time costs the service does not have, such as consolidating freed chunks on a
/// tick's first large allocation. Both books run on it.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: delegates every call to mimalloc unchanged; only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { mimalloc::MiMalloc.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as isize - layout.size() as isize, Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[derive(Debug, Clone, Copy)]
enum Op {
    /// A limit order: matches what it crosses, rests the rest.
    Add {
        id: u64,
        side: Side,
        price: i64,
        lots: u64,
    },
    Cancel {
        id: u64,
    },
    /// A market order.
    Aggress {
        id: u64,
        side: Side,
        lots: u64,
    },
}

/// The two books behind one interface; each keeps its own id → order index, as an engine must.
trait Venue {
    fn apply(&mut self, op: Op);
}

#[derive(Default)]
struct Perpsim {
    book: Book,
    by_id: HashMap<u64, OrderRef>,
    fills: Vec<Fill>,
}

impl Perpsim {
    fn forget_filled(&mut self) {
        for f in self.fills.drain(..) {
            if f.maker_done {
                self.by_id.remove(&f.maker_id.0);
            }
        }
    }
}

impl Venue for Perpsim {
    fn apply(&mut self, op: Op) {
        match op {
            Op::Add {
                id,
                side,
                price,
                lots,
            } => {
                let left = self.book.take(side, Some(price), lots, &mut self.fills);
                self.forget_filled();
                if left > 0 {
                    let r = self.book.rest(OrderId(id), side, price, left);
                    self.by_id.insert(id, r);
                }
            }
            Op::Cancel { id } => {
                if let Some(r) = self.by_id.remove(&id) {
                    self.book.cancel(r);
                }
            }
            Op::Aggress { side, lots, .. } => {
                self.book.take(side, None, lots, &mut self.fills);
                self.forget_filled();
            }
        }
    }
}

struct Reference(OrderBook<()>);

impl Default for Reference {
    fn default() -> Self {
        Reference(OrderBook::new("BTC-USDC-PERP"))
    }
}

fn their_side(side: Side) -> orderbook_rs::Side {
    match side {
        Side::Buy => orderbook_rs::Side::Buy,
        Side::Sell => orderbook_rs::Side::Sell,
    }
}

impl Venue for Reference {
    fn apply(&mut self, op: Op) {
        match op {
            Op::Add {
                id,
                side,
                price,
                lots,
            } => {
                let _ = self.0.add_limit_order(
                    Id::from_u64(id),
                    price as u128,
                    lots,
                    their_side(side),
                    TimeInForce::Gtc,
                    None,
                );
            }
            Op::Cancel { id } => {
                let _ = self.0.cancel_order(Id::from_u64(id));
            }
            Op::Aggress { id, side, lots } => {
                let _ = self
                    .0
                    .submit_market_order(Id::from_u64(id), lots, their_side(side));
            }
        }
    }
}

const MID: i64 = 600_000;

/// A seeded workload: orders to pre-load (not measured) and the measured operations.
struct Workload {
    name: &'static str,
    preload: Vec<Op>,
    ops: Vec<Op>,
}

fn passive(rng: &mut SimRng, id: u64, spread: u64) -> Op {
    let r = rng.next_u64();
    let side = if r & 1 == 0 { Side::Buy } else { Side::Sell };
    let offset = 1 + ((r >> 8) % spread) as i64;
    let price = if side == Side::Buy {
        MID - offset
    } else {
        MID + offset
    };
    Op::Add {
        id,
        side,
        price,
        lots: 1 + (r >> 40) % 20,
    }
}

fn workloads() -> Vec<Workload> {
    let mut rng = SimRng::from_seed(2026);
    let n = 20_000u64;
    let add_only = Workload {
        name: "add_only",
        preload: vec![],
        ops: (0..n).map(|i| passive(&mut rng, i, 500)).collect(),
    };

    let preload: Vec<Op> = (0..n).map(|i| passive(&mut rng, i, 500)).collect();
    let mut ids: Vec<u64> = (0..n).collect();
    for i in (1..ids.len()).rev() {
        ids.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
    }
    let cancel_only = Workload {
        name: "cancel_only",
        preload,
        ops: ids.into_iter().map(|id| Op::Cancel { id }).collect(),
    };

    // 400 levels a side, 10 one-lot orders each; every market order sweeps 25 orders.
    let mut preload = Vec::new();
    for level in 0..400i64 {
        for k in 0..10u64 {
            let id = (level as u64) * 20 + k;
            preload.push(Op::Add {
                id,
                side: Side::Buy,
                price: MID - 1 - level,
                lots: 1,
            });
            preload.push(Op::Add {
                id: id + 10,
                side: Side::Sell,
                price: MID + 1 + level,
                lots: 1,
            });
        }
    }
    let ops = (0..300u64)
        .map(|i| Op::Aggress {
            id: 1_000_000 + i,
            side: if i % 2 == 0 { Side::Buy } else { Side::Sell },
            lots: 25,
        })
        .collect();
    let aggressive = Workload {
        name: "aggressive_walk",
        preload,
        ops,
    };

    let preload: Vec<Op> = (0..5_000).map(|i| passive(&mut rng, i, 200)).collect();
    let mut live: Vec<u64> = (0..5_000).collect();
    let mut ops = Vec::with_capacity(n as usize);
    for i in 0..n {
        let id = 10_000 + i;
        let r = rng.next_u64() % 100;
        ops.push(match r {
            0..70 => {
                live.push(id);
                passive(&mut rng, id, 200)
            }
            70..90 if !live.is_empty() => {
                let k = (rng.next_u64() % live.len() as u64) as usize;
                Op::Cancel {
                    id: live.swap_remove(k),
                }
            }
            _ => Op::Aggress {
                id,
                side: if i % 2 == 0 { Side::Buy } else { Side::Sell },
                lots: 1 + rng.next_u64() % 10,
            },
        });
    }
    let mixed = Workload {
        name: "mixed_70_20_10",
        preload,
        ops,
    };
    vec![add_only, cancel_only, aggressive, mixed]
}

fn loaded<V: Venue + Default>(w: &Workload) -> V {
    let mut v = V::default();
    for op in &w.preload {
        v.apply(*op);
    }
    v
}

/// One timed pass: orders per second and p50/p99 nanoseconds per operation.
fn latencies<V: Venue + Default>(w: &Workload) -> (f64, u128, u128) {
    let mut v: V = loaded(w);
    let mut ns: Vec<u128> = Vec::with_capacity(w.ops.len());
    let started = Instant::now();
    for op in &w.ops {
        let t = Instant::now();
        v.apply(*op);
        ns.push(t.elapsed().as_nanos());
    }
    let total = started.elapsed().as_secs_f64();
    ns.sort_unstable();
    (
        w.ops.len() as f64 / total,
        ns[ns.len() / 2],
        ns[ns.len() * 99 / 100],
    )
}

/// Live heap bytes per resting order with `n` orders resting (ids mapped, as an engine would).
fn bytes_per_order<V: Venue + Default>(n: u64) -> f64 {
    let mut rng = SimRng::from_seed(7);
    let before = LIVE.load(Relaxed);
    let mut v = V::default();
    for id in 0..n {
        v.apply(passive(&mut rng, id, 20_000));
    }
    let after = LIVE.load(Relaxed);
    drop(v);
    (after - before) as f64 / n as f64
}

fn report() {
    println!(
        "\n{:<16} {:>14} {:>9} {:>9}   {:>14} {:>9} {:>9}",
        "workload", "perpsim ops/s", "p50 ns", "p99 ns", "orderbook-rs", "p50 ns", "p99 ns"
    );
    for w in workloads() {
        let (a, a50, a99) = latencies::<Perpsim>(&w);
        let (b, b50, b99) = latencies::<Reference>(&w);
        println!(
            "{:<16} {:>14.0} {:>9} {:>9}   {:>14.0} {:>9} {:>9}   ratio {:.2}×",
            w.name,
            a,
            a50,
            a99,
            b,
            b50,
            b99,
            a / b
        );
    }
    let ours = bytes_per_order::<Perpsim>(1_000_000);
    let theirs = bytes_per_order::<Reference>(1_000_000);
    println!(
        "memory per resting order at 1 000 000: perpsim {ours:.0} B (book + id map), orderbook-rs {theirs:.0} B\n"
    );
}

/// Commands applied per engine tick, as the host batches them.
const TICK: usize = 1_000;
const CUSTOMERS: u64 = 16;

/// A genesis engine with funded customers, and the workload as command batches.
struct EngineRun {
    engine: Engine,
    customers: Vec<CustomerCode>,
    batches: Vec<Vec<Command>>,
}

fn engine_command(op: Op, customers: &[CustomerCode]) -> Command {
    let tick = Decimal::new(1, 1);
    let lot = Decimal::new(1, 4);
    let entry = |id: u64, side, kind, lots: u64, price: Option<i64>| OrderEntry {
        amount: Some(Decimal::from(lots) * lot),
        limit_price: price.map(|p| Decimal::from(p) * tick),
        ..OrderEntry::new(side, kind, format!("o{id}"))
    };
    let who = |id: u64| customers[(id % CUSTOMERS) as usize];
    match op {
        Op::Add {
            id,
            side,
            price,
            lots,
        } => Command::PlaceOrder(PlaceOrder {
            customer: who(id),
            symbol: "BTC-USDC-PERP".into(),
            entry: Box::new(entry(id, side, OrderType::Limit, lots, Some(price))),
        }),
        Op::Cancel { id } => Command::CancelOrder(CancelOrder {
            customer: who(id),
            reference_id: format!("o{id}"),
        }),
        Op::Aggress { id, side, lots } => Command::PlaceOrder(PlaceOrder {
            customer: who(id),
            symbol: "BTC-USDC-PERP".into(),
            entry: Box::new(entry(id, side, OrderType::Market, lots, None)),
        }),
    }
}

fn engine_loaded(w: &Workload) -> EngineRun {
    let start = Timestamp::from_millis(1_767_225_600_000);
    let mut engine = Engine::genesis(Genesis {
        seed: 1,
        clock_mode: ClockMode::Manual,
        start,
        instruments: default_instruments(),
        simulation: perpsim_core::simulation::Simulation::quiet(&default_instruments()),
    });
    let out = engine.tick(
        start,
        vec![
            Command::CreateBroker(CreateBroker {
                name: "bench".into(),
                public_key: PublicKey([9; 32]),
            }),
            // 1 000 000 resting orders over 16 customers: past the D4 default bound.
            unbounded(),
        ],
    );
    let Ok(Outcome::Broker(b)) = &out.results()[0] else {
        panic!("broker")
    };
    let create = create_customers(b.code, CUSTOMERS as usize);
    let results = engine.tick(start, create).results();
    let customers = created(results.into_iter().map(|r| r.expect("customer")));
    let deposits = instant_deposits(&customers, Decimal::from(1_000_000_000_000i64));
    engine.tick(start, deposits);
    engine.tick(start.plus_millis(1), vec![]);
    engine.set_publishing(false);
    engine.set_listening(Listening::MarginStates);
    engine.owe_ended_digests();
    let preload: Vec<Command> = w
        .preload
        .iter()
        .map(|op| engine_command(*op, &customers))
        .collect();
    for batch in preload.chunks(TICK) {
        engine.tick(start.plus_millis(1), batch.to_vec());
    }
    let ops: Vec<Command> = w
        .ops
        .iter()
        .map(|op| engine_command(*op, &customers))
        .collect();
    EngineRun {
        engine,
        customers,
        batches: ops.chunks(TICK).map(<[Command]>::to_vec).collect(),
    }
}

fn run_engine(mut run: EngineRun) -> Engine {
    let at = run.engine.clock().now;
    for batch in run.batches {
        let out = run.engine.tick(at, batch);
        debug_assert!(out.results().iter().all(|r| r.is_ok()));
    }
    run.engine
}

fn engine_report() {
    for w in workloads() {
        let run = engine_loaded(&w);
        let started = Instant::now();
        let engine = run_engine(run);
        let secs = started.elapsed().as_secs_f64();
        println!(
            "{:<16} engine {:>12.0} orders/s",
            w.name,
            w.ops.len() as f64 / secs
        );
        drop(engine);
    }
    let engine_only = engine_bytes_per_order(1_000_000, false);
    let serving = engine_bytes_per_order(1_000_000, true);
    println!(
        "memory per resting order at 1 000 000 through the engine: {engine_only:.0} B (order record, reference index, book); {serving:.0} B serving (plus the read view's copy)"
    );
    let ended = engine_bytes_per_ended_order(200_000);
    println!(
        "memory per ended order (placed, then cancelled) at 200 000, serving: {ended:.0} B (the engine keeps none: the count, and the live orders' index; the read view keeps none)"
    );
    let customer = engine_bytes_per_customer(100_000);
    println!(
        "memory per customer at 100 000 (one broker's D4 bound), serving: {customer:.0} B (entity, indexes, the read view's record and list entry)\n"
    );
}

/// Live heap bytes per customer with `n` created under one broker, the read view kept up
/// (what the D4 bound on customers per broker bounds).
fn engine_bytes_per_customer(n: usize) -> f64 {
    let mut run = funded_engine(false);
    let broker = run.engine.view().customers[&run.customers[0]].broker;
    let at = run.engine.clock().now;
    let before = LIVE.load(Relaxed);
    for _ in 0..n / TICK {
        run.engine.tick(at, create_customers(broker, TICK));
    }
    let after = LIVE.load(Relaxed);
    (after - before) as f64 / (n / TICK * TICK) as f64
}

/// An engine with its funded customers and nothing else, for the memory measurements;
/// `publishing`: the read view kept up.
fn funded_engine(publishing: bool) -> EngineRun {
    let empty = Workload {
        name: "memory",
        preload: vec![],
        ops: vec![],
    };
    let mut run = engine_loaded(&empty);
    run.engine.set_publishing(publishing);
    run
}

/// Live heap bytes per order with `n` placed and cancelled, the read view kept up: what the
/// history of ended orders costs in memory (issue 37). Each tick places a thousand orders and
/// cancels them.
fn engine_bytes_per_ended_order(n: u64) -> f64 {
    let mut rng = SimRng::from_seed(7);
    let mut run = funded_engine(true);
    let at = run.engine.clock().now;
    let before = LIVE.load(Relaxed);
    for first in (0..n).step_by(TICK) {
        let ids = first..(first + TICK as u64).min(n);
        let place = ids
            .clone()
            .map(|i| engine_command(passive(&mut rng, i, 20_000), &run.customers));
        let cancel = ids.map(|id| engine_command(Op::Cancel { id }, &run.customers));
        run.engine.tick(at, place.chain(cancel).collect());
    }
    let after = LIVE.load(Relaxed);
    (after - before) as f64 / n as f64
}

/// Live heap bytes per resting order with `n` resting in the engine: every order record, its
/// reference index entry and its book slot, and with `publishing` the read view's persistent
/// copy too. Commands are built a tick at a time and dropped, so they do not count.
fn engine_bytes_per_order(n: u64, publishing: bool) -> f64 {
    let mut rng = SimRng::from_seed(7);
    let mut run = funded_engine(publishing);
    let at = run.engine.clock().now;
    let before = LIVE.load(Relaxed);
    let mut id = 0;
    while id < n {
        let batch = (id..(id + TICK as u64).min(n))
            .map(|i| engine_command(passive(&mut rng, i, 20_000), &run.customers))
            .collect();
        run.engine.tick(at, batch);
        id += TICK as u64;
    }
    let after = LIVE.load(Relaxed);
    (after - before) as f64 / n as f64
}

fn compare(c: &mut Criterion) {
    // Without the report a profiler's run holds only the workload it filters for (the
    // figures' instruction counts: benches/README.md).
    if std::env::var_os("PERPSIM_BOOK_NO_REPORT").is_none() {
        report();
        engine_report();
    }
    for w in workloads() {
        let mut group = c.benchmark_group(format!("book/{}", w.name));
        group
            .sample_size(20)
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(4));
        group.throughput(Throughput::Elements(w.ops.len() as u64));
        group.bench_function("perpsim", |b| {
            b.iter_batched(
                || loaded::<Perpsim>(&w),
                |mut v| w.ops.iter().for_each(|op| v.apply(*op)),
                BatchSize::LargeInput,
            )
        });
        group.bench_function("engine", |b| {
            b.iter_batched(|| engine_loaded(&w), run_engine, BatchSize::LargeInput)
        });
        group.bench_function("orderbook-rs", |b| {
            b.iter_batched(
                || loaded::<Reference>(&w),
                |mut v| w.ops.iter().for_each(|op| v.apply(*op)),
                BatchSize::LargeInput,
            )
        });
        group.finish();
    }
}

criterion_group!(benches, compare);
criterion_main!(benches);
