//! The valuation pass (issue 11 item 3): `positions::value_positions`, the system of
//! `MarkToMarketSystems` that writes every open position's mark price, unrealised PnL and
//! maintenance margin, over 10 000, 100 000 and 1 000 000 position entities spread over the
//! default instruments. Every mark moves before each pass, so every position is revalued:
//! the worst case (a tick whose marks stand still revalues only what fills changed). Half the
//! entries are weighted averages at 10 decimals, so half the positions need rounding.
//! Run: `cargo bench -p perpsim-benches --bench valuation`.

use bevy_ecs::prelude::{Schedule, World};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use perpsim_core::Decimal;
use perpsim_core::ids::{BrokerCode, CustomerCode, PositionCode};
use perpsim_core::instrument::{InstrumentStatus, default_instruments};
use perpsim_core::rng::SimRng;
use perpsim_core::time::Timestamp;
use perpsim_systems::positions::{MarginRate, Position, Valuation, ValuedMarks, value_positions};
use perpsim_systems::registry::{InstrumentState, Registry, spawn_instrument};

/// A world holding what the pass reads, and `n` open positions of seeded sizes and entries.
fn world_with(n: usize) -> (World, Schedule) {
    let mut world = World::new();
    let specs = default_instruments();
    world.insert_resource(Registry::default());
    world.insert_resource(ValuedMarks::default());
    for (market, spec) in specs.iter().enumerate() {
        let state = InstrumentState {
            status: InstrumentStatus::Active,
            index_price: spec.start_price,
            mark_price: spec.start_price,
            price_time: Timestamp::EPOCH,
        };
        spawn_instrument(&mut world, spec.clone(), state, market as u32);
    }
    let mut rng = SimRng::from_seed(11);
    let positions: Vec<_> = (0..n)
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
            };
            let rate = MarginRate::of_leverage(1 + (i % 2) as u32);
            (position, rate, Valuation::default())
        })
        .collect();
    world.spawn_batch(positions);
    let mut schedule = Schedule::default();
    schedule.add_systems(value_positions);
    schedule.run(&mut world); // the first valuation of every position
    (world, schedule)
}

/// Moves every market's mark by one tick, up or down by turns.
fn move_marks(world: &mut World, up: bool) {
    let mut states =
        world.query::<(&perpsim_systems::registry::Instrument, &mut InstrumentState)>();
    for (instrument, mut state) in states.iter_mut(world) {
        let tick = instrument.0.tick_size;
        state.mark_price += if up { tick } else { -tick };
    }
}

fn valuation(c: &mut Criterion) {
    let mut group = c.benchmark_group("valuation");
    group.sample_size(10);
    for n in [10_000, 100_000, 1_000_000] {
        let (mut world, mut schedule) = world_with(n);
        group.throughput(Throughput::Elements(n as u64));
        let mut up = true;
        group.bench_function(format!("every_position_revalued/{n}"), |b| {
            b.iter(|| {
                move_marks(&mut world, up);
                up = !up;
                schedule.run(&mut world);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, valuation);
criterion_main!(benches);
