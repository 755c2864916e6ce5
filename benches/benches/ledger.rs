//! Ledger bookings per second inside the engine: deposits requested through `Engine::tick`
//! and completed by the scheduler, with balances, flows and the read view's dirty sets
//! updated on every booking. Target (issue 3): ≥ 1 000 000 bookings/s.
//! Run: `cargo bench -p perpsim-benches --bench ledger`.

use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use perpsim_benches::engine_with_broker;
use perpsim_core::Decimal;
use perpsim_core::instrument::Asset;
use perpsim_core::time::SECOND_MS;
use perpsim_systems::command::TransferKind;
use perpsim_systems::command::{AdvanceClock, CreateCustomer, RequestTransfer};
use perpsim_systems::{Command, Outcome};

const CUSTOMERS: usize = 10_000;
const PER_TICK: usize = 1_000;

fn bookings(c: &mut Criterion) {
    // Serving: the read view is updated every tick. Replay: it is not (built once at the end).
    for (name, publishing) in [("serving", true), ("replay", false)] {
        run(c, name, publishing);
    }
}

fn run(c: &mut Criterion, name: &str, publishing: bool) {
    let (mut engine, broker) = engine_with_broker();
    engine.set_publishing(publishing);
    let now = engine.clock().now;
    let out = engine.tick(
        now,
        (0..CUSTOMERS)
            .map(|_| {
                Command::CreateCustomer(CreateCustomer {
                    broker,
                    external_id: None,
                })
            })
            .collect(),
    );
    let customers: Vec<_> = out
        .results()
        .into_iter()
        .map(|r| match r {
            Ok(Outcome::Customer(c)) => c.code,
            other => panic!("{other:?}"),
        })
        .collect();
    let mut next = 0usize;
    let mut group = c.benchmark_group("ledger");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    // Each deposit is two bookings: the pending request, then its completion.
    group.throughput(Throughput::Elements(2 * PER_TICK as u64));
    group.bench_function(
        format!("{name}/deposit_request_and_completion_ticks_of_1000"),
        |b| {
            b.iter(|| {
                let mut commands: Vec<Command> = (0..PER_TICK)
                    .map(|i| {
                        Command::RequestTransfer(RequestTransfer {
                            customer: customers[(next + i) % CUSTOMERS],
                            kind: TransferKind::Deposit,
                            asset: if i % 2 == 0 { Asset::Usdc } else { Asset::Usdt },
                            amount: Decimal::new(1_234_567 + i as i64, 4),
                            delay_ms: SECOND_MS,
                        })
                    })
                    .collect();
                next += PER_TICK;
                let to = engine.clock().now.plus_millis(SECOND_MS);
                commands.push(Command::AdvanceClock(AdvanceClock { to }));
                let now = engine.clock().now;
                let out = engine.tick(now, commands);
                assert!(out.results().iter().all(Result::is_ok));
                out
            })
        },
    );
    group.finish();
}

criterion_group!(benches, bookings);
criterion_main!(benches);
