//! The periodic passes (issues 11, 12 and 36) over 10 000, 100 000 and 1 000 000 open
//! positions spread over the default instruments, run as the engine orders them:
//! `settle_daily` and its pass's walk (on midnight), `value_positions` (the bases of the
//! positions midnight changed), `settle_funding` and its walk (on the hour), each pass walked
//! whole in the one run (a server books it over ticks: `--bench risk`'s `hour`). Every mark moves before each pass. A mark move
//! alone values nothing (the margin pass values what it judges: `--bench risk`).
//!
//! - `funding_hour/{n}`: on the hour with a rate set on every market, so every position
//!   books a `funding` movement (one ledger row each).
//! - `midnight/{n}`: at 00:00 UTC: every position books a `settlement` movement (its PnL
//!   since the last midnight, the margin re-locked at the mark) and a `funding` one.
//!
//! Every customer has an account with a deposit, as one holding a position has.
//! Half the entries are weighted averages at 10 decimals, so half the positions need rounding.
//! The ledger runs as a server's does: its movements go to the journal's projection at the end
//! of each pass (timed, as the engine's tick does it), and the ledger lets go of them; the rows
//! handed out are digested and dropped untimed, as a server's journal writer does off the
//! engine thread. The read view's balances are published after the pass (timed, as the
//! engine's tick does it), while the view published before is held, as readers hold it. Run: `cargo bench -p perpsim-benches --bench
//! valuation`.

use std::time::{Duration, Instant};

use bevy_ecs::prelude::{IntoScheduleConfigs, Res, Schedule, World};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use perpsim_core::Decimal;
use perpsim_core::clock::ClockMode;
use perpsim_core::ids::{BrokerCode, CustomerCode, PositionCode};
use perpsim_core::instrument::{InstrumentSpec, InstrumentStatus, default_instruments};
use perpsim_core::rng::SimRng;
use perpsim_core::time::{DAY_MS, Timestamp};
use perpsim_systems::clock::{DueEvents, SimClock, due};
use std::collections::BTreeMap;

use perpsim_systems::money::ledger::{Ledger, LedgerState};
use perpsim_systems::money::store::{AccountIndex, WrittenBalances};
use perpsim_systems::positions::{MarginRate, ValuationBasis, value_positions};
use perpsim_systems::positions::{MovedPositions, PositionIndex};
use perpsim_systems::publish::view::{ReadView, publish_ledger};
use perpsim_systems::records::clock::ClockView;
use perpsim_systems::records::clock::ScheduledEvent;
use perpsim_systems::records::log::ProjectedLog;
use perpsim_systems::records::money::AccountId;
use perpsim_systems::records::money::Balance;
use perpsim_systems::records::periodic::PeriodicPasses;
use perpsim_systems::records::position::Position;
use perpsim_systems::records::venue::{Instrument, InstrumentState};
use perpsim_systems::registry::{Registry, spawn_instrument};
use perpsim_systems::rng::EngineRng;
use perpsim_systems::settlement::daily::settle_daily;
use perpsim_systems::settlement::funding::{FundingState, set_rate, settle_funding};
use perpsim_systems::settlement::passes::{continue_daily, continue_funding};
use perpsim_systems::trading::exchange::Exchange;

/// The allocator the service runs with (`api/src/main.rs`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// 2026-01-02T00:00:00Z: a midnight, and so also a whole hour.
const MIDNIGHT: Timestamp = Timestamp::from_millis(1_767_225_600_000 + DAY_MS);

/// `n` open positions spread over the markets, long and short in turn, each with its own
/// customer and broker.
fn positions(n: usize, specs: &[InstrumentSpec]) -> Vec<(Position, MarginRate, ValuationBasis)> {
    let mut rng = SimRng::from_seed(11);
    (0..n)
        .map(|i| {
            let market = i % specs.len();
            let spec = &specs[market];
            let lots = (rng.next_u64() % 1_000) as i64 + 1;
            let size = spec.lot_size * Decimal::from(if i % 2 == 0 { lots } else { -lots });
            let ticks = (rng.next_u64() % 2_000) as i64 - 1_000;
            // Half the entries on the tick grid (one fill), half weighted averages at the
            // ledger's 10 decimals (several fills), which the pass must round.
            let on_grid = spec.start_price + spec.tick_size * Decimal::from(ticks);
            let averaged = Decimal::new((rng.next_u64() % 10_000_000_000) as i64, 10);
            let entry = if i % 4 < 2 {
                on_grid
            } else {
                on_grid + averaged
            };
            let position = Position {
                code: PositionCode(rng.uuid()),
                customer: CustomerCode(rng.uuid()),
                broker: BrokerCode(rng.uuid()),
                market: market as u32,
                size,
                entry_price: entry,
                avg_fill_price: entry,
                margin: Decimal::ZERO,
                created_at: Timestamp::EPOCH,
                updated_at: Timestamp::EPOCH,
                noticed: 0,
            };
            let rate = MarginRate::of_leverage(1 + (i % 2) as u32);
            (position, rate, ValuationBasis::default())
        })
        .collect()
}

/// A world holding what the three systems read and write, and `n` open positions of seeded
/// sizes and entries, each its own customer's.
fn world_with(n: usize) -> (World, Schedule) {
    let mut world = World::new();
    let specs = default_instruments();
    world.insert_resource(Registry::default());
    world.insert_resource(AccountIndex::default());
    world.insert_resource(WrittenBalances::default());
    world.insert_resource(PositionIndex::default());
    world.insert_resource(MovedPositions::default());
    world.insert_resource(DueEvents::default());
    world.insert_resource(SimClock {
        mode: ClockMode::Manual,
        now: MIDNIGHT,
    });
    world.insert_resource(EngineRng(SimRng::from_seed(12)));
    world.insert_resource(Exchange::new(specs.iter().cloned()));
    world.insert_resource(FundingState::new(specs.len(), MIDNIGHT));
    world.insert_resource(PeriodicPasses::default());
    world.insert_resource(ReadView::new(ClockView {
        mode: ClockMode::Manual,
        now: MIDNIGHT,
    }));
    for (market, spec) in specs.iter().enumerate() {
        let state = InstrumentState {
            status: InstrumentStatus::Active,
            index_price: spec.start_price,
            mark_price: spec.start_price,
            price_time: Timestamp::EPOCH,
        };
        spawn_instrument(&mut world, spec.clone(), state, market as u32);
    }
    let positions = positions(n, &specs);
    let keys: Vec<_> = positions
        .iter()
        .map(|(p, _, _)| (p.customer, p.market))
        .collect();
    let funded: Vec<_> = keys
        .iter()
        .map(|&(customer, market)| AccountId::customer(customer, specs[market as usize].settlement))
        .collect();
    fund(&mut world, funded);
    let entities: Vec<_> = world.spawn_batch(positions).collect();
    let mut moved = world.resource_mut::<MovedPositions>();
    for &entity in &entities {
        moved.wrote(entity);
    }
    let mut index = world.resource_mut::<PositionIndex>();
    for (key, entity) in keys.into_iter().zip(entities) {
        index.insert(key, entity);
    }
    let mut schedule = Schedule::default();
    // Gated as the engine's plugins gate them: each pass runs only on its instant.
    schedule.add_systems(
        (
            settle_daily.run_if(due(ScheduledEvent::DailySettlement)),
            continue_daily.run_if(|p: Res<PeriodicPasses>| p.daily.is_some()),
            value_positions,
            settle_funding.run_if(due(ScheduledEvent::FundingHour)),
            continue_funding.run_if(|p: Res<PeriodicPasses>| p.funding.is_some()),
            publish_ledger,
        )
            .chain(),
    );
    schedule.run(&mut world); // every position's basis built (nothing due)
    assert_eq!(
        world.resource::<MovedPositions>().list.len(),
        n,
        "every basis built"
    );
    (world, schedule)
}

/// Each account in `ids` opened with a deposit no funding or settlement here exhausts, as a
/// customer holding a position has one: no booking leaves it below zero.
fn fund(world: &mut World, ids: Vec<AccountId>) {
    let balance = Balance {
        total: Decimal::from(100_000_000),
        ..Balance::default()
    };
    let accounts: BTreeMap<AccountId, Balance> = ids.into_iter().map(|id| (id, balance)).collect();
    let state = LedgerState {
        accounts,
        transfers_available: true,
        ..LedgerState::default()
    };
    let (ledger, accounts) = Ledger::from_state(state, ProjectedLog::default());
    world.insert_resource(ledger);
    world.resource_mut::<Ledger>().track_movements(true, false);
    for (id, balance) in accounts {
        let entity = world.spawn(balance).id();
        world.resource_mut::<AccountIndex>().insert(id, entity);
    }
}

/// Moves every market's mark by one tick, up or down by turns.
fn move_marks(world: &mut World, up: bool) {
    let mut states = world.query::<(&Instrument, &mut InstrumentState)>();
    for (instrument, mut state) in states.iter_mut(world) {
        let tick = instrument.0.tick_size;
        state.mark_price += if up { tick } else { -tick };
    }
}

/// Untimed: the marks moved, `due` due, and (on the hour) a rate set on every market for the
/// interval that ends.
fn prepare(world: &mut World, up: bool, due: &[ScheduledEvent]) {
    // What the engine drains every run after these passes (not part of them): the margin
    // pass the balances written (keeping the list's memory) and the accounts gone below
    // zero. The read view's ledger part is published in the timed run, as the engine does.
    world.resource_mut::<WrittenBalances>().0.clear();
    drop(world.resource_mut::<Ledger>().take_went_negative());
    move_marks(world, up);
    world.resource_mut::<DueEvents>().0 = due.to_vec();
    // The whole pass in one run: what it costs in all (`--bench risk`'s `hour` times the
    // longest of the ticks a server books it over).
    world.resource_mut::<PeriodicPasses>().budget = usize::MAX;
    if due.contains(&ScheduledEvent::FundingHour) {
        let symbols: Vec<String> = default_instruments()
            .into_iter()
            .map(|s| s.symbol)
            .collect();
        for (k, symbol) in symbols.iter().enumerate() {
            let rate = Decimal::new(if k % 2 == 0 { 125 } else { -75 }, 6);
            set_rate(world, symbol, rate).expect("listed instrument");
        }
    }
}

fn valuation(c: &mut Criterion) {
    let cases: [(&str, &[ScheduledEvent]); 2] = [
        ("funding_hour", &[ScheduledEvent::FundingHour]),
        (
            "midnight",
            &[ScheduledEvent::DailySettlement, ScheduledEvent::FundingHour],
        ),
    ];
    let mut group = c.benchmark_group("valuation");
    group.sample_size(10);
    for n in [10_000, 100_000, 1_000_000] {
        let (mut world, mut schedule) = world_with(n);
        group.throughput(Throughput::Elements(n as u64));
        for (name, due) in cases {
            let mut up = true;
            group.bench_function(format!("{name}/{n}"), |b| {
                b.iter_custom(|iters| {
                    let mut spent = Duration::ZERO;
                    for _ in 0..iters {
                        prepare(&mut world, up, due);
                        up = !up;
                        // The view published before the pass, which readers hold meanwhile
                        // (the engine publishes a clone each tick): the pass's changes copy
                        // what they touch of it.
                        let published = world.resource::<ReadView>().clone();
                        let started = Instant::now();
                        schedule.run(&mut world);
                        let rows = world.resource_mut::<Ledger>().take_changed_movements();
                        spent += started.elapsed();
                        // A server's journal writer digests the rows let go and drops them,
                        // not the engine thread.
                        rows.settle(usize::MAX);
                        drop(published);
                        // A row a position for each pass due (but the few amounts that round
                        // to zero), and none for a pass that is not due.
                        let most = n * due.len();
                        assert!(rows.len() <= most && rows.len() * 100 >= most * 99);
                        drop(rows);
                    }
                    spent
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, valuation);
criterion_main!(benches);
