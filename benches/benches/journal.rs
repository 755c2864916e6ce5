//! Durable commands per second through engine + journal, by tick size; replay speed.
//!
//! Targets (issue 2): ≥ 50 000 durable commands/s in ticks of 1 000; replay ≥ 1 000 000
//! commands/s. `journal/nonces` prices the at-most-once rule (issue 14): a tick of 1 000
//! commands with and without their nonces, and nonce-only group commits of 1 and 1 000 (what
//! reads wait for). `journal/archive` prices one archive call (issue 37), and the replay
//! group a replay from the archive. `journal/project` prices what a server's journal writer
//! does at the funding hour of a million positions (issue 36): the hour's tick and the next
//! one committed, its million funding movements waiting in the projection's backlog, and the
//! backlog projected. `journal/commit_by_size` prices a group commit of a few reads' nonces
//! (what each signed read waits for) as the file grows with history (issue 37: a cost that
//! must not grow with it), and prints the bytes each commit sends to storage. Run: `cargo bench
//! -p perpsim-benches --bench journal`.

use std::ops::Bound;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use perpsim_benches::load::target::written_bytes;
use perpsim_benches::{
    START, broker_command, engine_with_broker, genesis, mixed_commands, unbounded,
};
use perpsim_core::Decimal;
use perpsim_core::ids::{BrokerCode, CustomerCode, MovementCode, PublicKey};
use perpsim_core::instrument::Asset;
use perpsim_core::rng::SimRng;
use perpsim_storage::{
    Holder, Journal, NonceWrites, Projected, SEGMENT_TICKS, TickRecord, UsedNonce, recover,
    replay_from_genesis,
};
use perpsim_systems::records::history::HandedHistory;
use perpsim_systems::records::ids::MovementSeq;
use perpsim_systems::records::log::Handed;
use perpsim_systems::records::money::{Movement, MovementKind, MovementStatus, PeriodicInfo};

/// The allocator the service runs with (`api/src/main.rs`), so replay and recovery are
/// measured as `perpsim` runs them.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The host's path for one tick: encode, apply, append durably (with `nonces`).
fn durable_tick_with(
    engine: &mut perpsim_systems::Engine,
    journal: &Journal,
    commands: Vec<perpsim_systems::Command>,
    nonces: NonceWrites<'_>,
) {
    let at = engine.counters();
    let encoded = TickRecord::encode(START, at.commands, &commands);
    let out = engine.tick(START, commands);
    journal
        .append(at.ticks + 1, &encoded, nonces)
        .expect("append");
    assert!(out.results().iter().all(Result::is_ok));
}

fn durable_tick(
    engine: &mut perpsim_systems::Engine,
    journal: &Journal,
    commands: Vec<perpsim_systems::Command>,
) {
    durable_tick_with(engine, journal, commands, NonceWrites::default());
}

/// `n` fresh nonces of 16 keys after `*next`, and the floor a host would forget below.
fn nonces(next: &mut u64, n: usize) -> (Vec<UsedNonce>, u64) {
    let used = (0..n)
        .map(|i| {
            *next += 1;
            UsedNonce {
                key: PublicKey([(i % 16) as u8; 32]),
                nonce: *next,
            }
        })
        .collect();
    // Forgetting keeps the table at about 35 s of traffic; here, the last 100 000 nonces.
    (used, next.saturating_sub(100_000))
}

fn nonce_costs(c: &mut Criterion) {
    let mut group = c.benchmark_group("journal/nonces");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    const TICK: usize = 1_000;
    for with_nonces in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (journal, mut engine, broker) = new_journal(&dir);
        let (mut offset, mut next) = (0, 1u64 << 60);
        group.throughput(Throughput::Elements(TICK as u64));
        let name = if with_nonces {
            "tick_1000_with_nonces"
        } else {
            "tick_1000_without"
        };
        group.bench_function(name, |b| {
            b.iter_batched(
                || {
                    offset += TICK;
                    let n = if with_nonces { TICK } else { 0 };
                    (mixed_commands(broker, TICK, offset), nonces(&mut next, n))
                },
                |(commands, (used, forget_below))| {
                    let writes = NonceWrites {
                        used: &used,
                        forget_below,
                    };
                    durable_tick_with(&mut engine, &journal, commands, writes)
                },
                criterion::BatchSize::PerIteration,
            )
        });
    }
    for per_commit in [1usize, 1_000] {
        let dir = tempfile::tempdir().unwrap();
        let (journal, _, _) = new_journal(&dir);
        let mut next = 1u64 << 60;
        group.throughput(Throughput::Elements(per_commit as u64));
        group.bench_function(BenchmarkId::new("nonce_only_commit", per_commit), |b| {
            b.iter_batched(
                || nonces(&mut next, per_commit),
                |(used, forget_below)| {
                    journal
                        .record_nonces(NonceWrites {
                            used: &used,
                            forget_below,
                        })
                        .expect("nonces")
                },
                criterion::BatchSize::PerIteration,
            )
        });
    }
    group.finish();
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
            &TickRecord::encode(START, 0, &[broker_command(), unbounded()]),
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
    // The same replay once every tick is in the archive (issue 37): gzip segments read in
    // place of the journal's rows. Archiving needs a snapshot, which `replay_from_genesis`
    // would check (a state hash the run above does not pay), so this is its loop alone.
    journal
        .write_snapshot(engine.counters().ticks, engine.encode_state())
        .unwrap();
    assert_eq!(journal.archive(u64::MAX).unwrap().remaining, 0);
    group.bench_function("from_genesis_200k_commands_archived", |b| {
        b.iter(|| {
            let mut replayed = perpsim_systems::Engine::genesis(genesis());
            replayed.set_publishing(false);
            replayed.set_listening(perpsim_systems::publish::events::Listening::MarginStates);
            journal
                .for_each_tick_after(0, |_, record| {
                    replayed.tick(record.time, record.commands);
                    Ok(())
                })
                .unwrap();
            assert_eq!(replayed.counters().ticks as usize, TICKS + 1);
            replayed
        })
    });
    group.finish();
    assert_eq!(
        recover(&journal).unwrap().unwrap().engine.state_hash(),
        expected,
        "replay reaches the live state"
    );
}

/// A journal of one full segment of ticks of `per_tick` mixed commands (recorded, not
/// applied: the archive copies rows) and a snapshot after them.
fn full_segment(per_tick: usize) -> (tempfile::TempDir, Journal) {
    let dir = tempfile::tempdir().unwrap();
    let (journal, engine, broker) = new_journal(&dir);
    let mut rows = Vec::with_capacity(4_096);
    let mut seq = 2;
    for tick in 2..=SEGMENT_TICKS + 1 {
        let commands = mixed_commands(broker, per_tick, seq as usize);
        rows.push(TickRecord::encode(START, seq, &commands));
        seq += per_tick as u64;
        if rows.len() == 4_096 || tick == SEGMENT_TICKS + 1 {
            let first = tick + 1 - rows.len() as u64;
            journal
                .append_batch(first, &rows, None, NonceWrites::default())
                .unwrap();
            rows.clear();
        }
    }
    journal
        .write_snapshot(SEGMENT_TICKS + 1, engine.encode_state())
        .unwrap();
    (dir, journal)
}

/// What one archive call holds the journal's writer for (issue 37): a full segment of
/// 65 536 ticks read, compressed, written and synced, and deleted from the journal.
fn archive(c: &mut Criterion) {
    let mut group = c.benchmark_group("journal/archive");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    for per_tick in [1usize, 8] {
        group.throughput(Throughput::Elements(SEGMENT_TICKS));
        group.bench_function(
            BenchmarkId::new("segment_commands_per_tick", per_tick),
            |b| {
                b.iter_batched(
                    || full_segment(per_tick),
                    |(dir, journal)| {
                        let done = journal.archive(SEGMENT_TICKS).unwrap();
                        assert_eq!(done.archived_through, SEGMENT_TICKS);
                        (dir, journal)
                    },
                    criterion::BatchSize::PerIteration,
                )
            },
        );
    }
    group.finish();
}

/// A funding hour's rows: one `funding` movement for each of `holders` (customer, broker),
/// numbered from `*seq` on.
fn funding_rows(holders: &[(CustomerCode, BrokerCode)], seq: &mut u64) -> HandedHistory {
    let info = Arc::new(PeriodicInfo {
        symbol: Arc::from("BTC-USDC-PERP"),
        mark_price: Decimal::new(6_000_000, 2),
        funding_rate: Some(Decimal::new(125, 6)),
    });
    let movements: Vec<Movement> = holders
        .iter()
        .map(|&(customer, broker)| {
            *seq += 1;
            Movement {
                seq: MovementSeq(*seq),
                code: MovementCode(perpsim_core::Uuid::from_u128(u128::from(*seq))),
                customer,
                broker,
                kind: MovementKind::Funding,
                status: MovementStatus::Completed,
                asset: Asset::Usdc,
                amount: Decimal::new(-75_000_000 - (*seq % 1_000) as i64, 10),
                created_at: START,
                updated_at: START,
                balance_after: Some(Decimal::new(99_925_000, 3)),
                trade: None,
                periodic: Some(Arc::clone(&info)),
            }
        })
        .collect();
    HandedHistory {
        movements: Handed::from(movements),
        ..HandedHistory::default()
    }
}

/// The journal's writer at a funding hour of a million positions, a customer each, under 16
/// brokers, each hour after the last in the same journal: the hour's tick and its million
/// movements (the rows, and their per-customer and per-broker index entries) handed to
/// `append_batch` as the server's writer hands them, then the next tick's commit.
/// `hour_and_next_commit` times the two commits: what an answer handed just after the hour
/// waits for. `first_list_read` and `next_list_read` time a customer's transaction list read
/// while the hour's rows wait in the backlog: the first makes the batch's lists, the next
/// finds its own. `drain` times the rest of the projection (the backlog's shares, as the
/// idle writer works them off): the writer's work for the hour beside the answers.
fn project_funding_hour(c: &mut Criterion) {
    const ROWS: usize = 1_000_000;
    let mut group = c.benchmark_group("journal/project");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(1))
        .measurement_time(Duration::from_secs(30));
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::open(&dir.path().join("journal.redb")).unwrap();
    journal.init(&genesis()).unwrap();
    let mut rng = SimRng::from_seed(5);
    let brokers: Vec<BrokerCode> = (0..16).map(|_| BrokerCode(rng.uuid())).collect();
    let holders: Vec<_> = (0..ROWS)
        .map(|i| (CustomerCode(rng.uuid()), brokers[i % brokers.len()]))
        .collect();
    let (mut tick, mut seq) = (0, 0);
    let projection = journal.projection().unwrap();
    // One hour: the two commits, the first read of a customer's list while the hour's rows
    // wait (it makes the batch's lists), a second customer's, and the drain.
    let mut hour = || {
        let history = funding_rows(&holders, &mut seq);
        let mut commit = |rows: Projected| {
            tick += 1;
            let encoded = [TickRecord::encode(START, 0, &[])];
            let started = Instant::now();
            journal
                .append_batch(tick, &encoded, Some(rows), NonceWrites::default())
                .unwrap();
            started.elapsed()
        };
        let hour = commit(Projected {
            ended: Vec::new(),
            history,
        });
        let next = commit(Projected::default());
        let read = |k: usize| {
            let started = Instant::now();
            let list = (Holder::Customer(holders[k].0), None);
            let all = (Bound::Unbounded, Bound::Unbounded);
            let page = projection.movements().unwrap().seqs(list, all, true, 100);
            assert!(!page.unwrap().is_empty(), "the hour's row is listed");
            started.elapsed()
        };
        let (first, second) = (read(7), read(ROWS / 2));
        let started = Instant::now();
        while journal.project_backlog().unwrap() {}
        [hour + next, first, second, started.elapsed()]
    };
    group.throughput(Throughput::Elements(ROWS as u64));
    let mut timed = |name: &str, pick: usize| {
        group.bench_function(BenchmarkId::new(name, ROWS), |b| {
            b.iter_custom(|iters| (0..iters).map(|_| hour()[pick]).sum())
        });
    };
    timed("hour_and_next_commit", 0);
    timed("first_list_read", 1);
    timed("next_list_read", 2);
    timed("drain", 3);
    group.finish();
}

/// A journal whose file holds about `mib` MiB of ticks before the timed commits: history a
/// server accumulates (ticks and their projection share one file).
fn journal_of(dir: &tempfile::TempDir, mib: usize) -> Journal {
    let (journal, _, _) = new_journal(dir);
    let filler = vec![0x5au8; 1 << 20];
    for done in (0..mib).step_by(64) {
        let records = vec![filler.as_slice(); (mib - done).min(64)];
        journal
            .append_batch(2 + done as u64, &records, None, NonceWrites::default())
            .expect("filler ticks");
    }
    journal
}

fn commit_by_size(c: &mut Criterion) {
    let mut group = c.benchmark_group("journal/commit_by_size");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    const READS: usize = 8;
    for mib in [16usize, 256, 1024] {
        let dir = tempfile::tempdir().unwrap();
        let journal = journal_of(&dir, mib);
        let mut next = 1u64 << 60;
        let (mut commits, mut bytes) = (0u64, 0u64);
        group.throughput(Throughput::Elements(READS as u64));
        group.bench_function(BenchmarkId::new("nonce_commit_mib", mib), |b| {
            b.iter_custom(|iters| {
                let written = written_bytes(std::process::id());
                let started = Instant::now();
                for _ in 0..iters {
                    let (used, forget_below) = nonces(&mut next, READS);
                    let writes = NonceWrites {
                        used: &used,
                        forget_below,
                    };
                    journal.record_nonces(writes).expect("nonces");
                }
                let took = started.elapsed();
                (commits, bytes) = (
                    commits + iters,
                    bytes + written_bytes(std::process::id()) - written,
                );
                took
            })
        });
        let file = std::fs::metadata(dir.path().join("journal.redb"))
            .unwrap()
            .len();
        println!(
            "journal/commit_by_size/{mib}: file {} MiB, {:.1} KiB written a commit",
            file >> 20,
            bytes as f64 / 1024.0 / commits.max(1) as f64
        );
    }
    group.finish();
}

criterion_group!(
    benches,
    durable_commands,
    nonce_costs,
    replay,
    archive,
    project_funding_hour,
    commit_by_size
);
criterion_main!(benches);
