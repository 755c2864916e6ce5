//! Durable commands per second through engine + journal, by tick size; replay speed.
//!
//! Targets (issue 2): ≥ 50 000 durable commands/s in ticks of 1 000; replay ≥ 1 000 000
//! commands/s. Run: `cargo bench -p perpsim-benches --bench journal`.

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use perpsim_benches::{START, broker_command, engine_with_broker, genesis, mixed_commands};
use perpsim_storage::{Journal, NonceWrites, TickRecord, recover, replay_from_genesis};

/// The host's path for one tick: encode, apply, append durably.
fn durable_tick(
    engine: &mut perpsim_systems::Engine,
    journal: &Journal,
    commands: Vec<perpsim_systems::Command>,
) {
    let at = engine.counters();
    let encoded = TickRecord::encode(START, at.commands, &commands);
    let out = engine.tick(START, commands);
    journal
        .append(at.ticks + 1, &encoded, NonceWrites::default())
        .expect("append");
    assert!(out.results.iter().all(Result::is_ok));
}

fn new_journal(
    dir: &tempfile::TempDir,
) -> (
    Journal,
    perpsim_systems::Engine,
    perpsim_core::ids::BrokerCode,
) {
    let journal = Journal::open(&dir.path().join("journal.redb")).unwrap();
    journal.init(&genesis()).unwrap();
    let (engine, broker) = engine_with_broker();
    journal
        .append(
            1,
            &TickRecord::encode(START, 0, &[broker_command()]),
            NonceWrites::default(),
        )
        .unwrap();
    (journal, engine, broker)
}

fn durable_commands(c: &mut Criterion) {
    let mut group = c.benchmark_group("journal/durable");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    for tick_size in [1usize, 100, 1_000, 10_000] {
        let dir = tempfile::tempdir().unwrap();
        let (journal, mut engine, broker) = new_journal(&dir);
        let mut offset = 0;
        group.throughput(Throughput::Elements(tick_size as u64));
        group.bench_function(BenchmarkId::new("commands_per_tick", tick_size), |b| {
            b.iter_batched(
                || {
                    offset += tick_size;
                    mixed_commands(broker, tick_size, offset)
                },
                |commands| durable_tick(&mut engine, &journal, commands),
                criterion::BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

fn replay(c: &mut Criterion) {
    const TICKS: usize = 200;
    const PER_TICK: usize = 1_000;
    let dir = tempfile::tempdir().unwrap();
    let (journal, mut engine, broker) = new_journal(&dir);
    for t in 0..TICKS {
        durable_tick(
            &mut engine,
            &journal,
            mixed_commands(broker, PER_TICK, t * PER_TICK),
        );
    }
    let expected = engine.state_hash();
    let mut group = c.benchmark_group("journal/replay");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    group.throughput(Throughput::Elements((TICKS * PER_TICK + 1) as u64));
    // The journal replay itself: decode and apply every command (what `perpsim replay
    // --journal` does).
    group.bench_function("from_genesis_200k_commands", |b| {
        b.iter(|| {
            let replayed = replay_from_genesis(&journal).unwrap().unwrap();
            assert_eq!(replayed.replayed_ticks as usize, TICKS + 1);
            replayed
        })
    });
    // Recovery to a serving state: the same replay plus the one-time build of the read view,
    // a cost proportional to the final state (here 180 000 customers), not to the commands.
    group.bench_function("recover_to_serving_200k_commands", |b| {
        b.iter(|| {
            let recovered = recover(&journal).unwrap().unwrap();
            assert_eq!(recovered.replayed_ticks as usize, TICKS + 1);
            recovered
        })
    });
    group.finish();
    assert_eq!(
        recover(&journal).unwrap().unwrap().engine.state_hash(),
        expected,
        "replay reaches the live state"
    );
}

criterion_group!(benches, durable_commands, replay);
criterion_main!(benches);
