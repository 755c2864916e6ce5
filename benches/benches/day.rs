//! One simulated day of the living market (issue 12): the market maker and the random walk on
//! every default instrument, 1 000 customers each holding an open position and a resting
//! order; the day is one manual advance (86 400 price steps, the maker's re-quotes, 1 440
//! premium samples, 24 funding hours and a daily settlement). Target: ≤ 5 s of wall time.
//! The figure to quote is the median, and simulated days per wall second = 1 / median.

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use perpsim_benches::{START, broker_command, create_customers, created, deposits_of};
use perpsim_core::Decimal;
use perpsim_core::entry::OrderEntry;
use perpsim_core::instrument::{Asset, default_instruments};
use perpsim_core::order::{OrderType, Side};
use perpsim_core::simulation::Simulation;
use perpsim_core::time::DAY_MS;
use perpsim_systems::command::{AdvanceClock, PlaceOrder};
use perpsim_systems::publish::events::Listening;
use perpsim_systems::{Command, Engine, Genesis, Outcome};

const CUSTOMERS: usize = 1_000;

/// The venue at the start of the day: customers funded, each long or short a little of one
/// instrument against the maker, with a limit order resting away from the market.
fn venue() -> Engine {
    let instruments = default_instruments();
    let mut e = Engine::genesis(Genesis {
        simulation: Simulation::defaults(&instruments),
        instruments: instruments.clone(),
        ..perpsim_benches::genesis()
    });
    e.set_publishing(false);
    e.set_listening(Listening::MarginStates);
    let out = e.tick(START, vec![broker_command()]);
    let Ok(Outcome::Broker(b)) = &out.results()[0] else {
        panic!("broker")
    };
    let broker = b.code;
    let results = e.tick(START, create_customers(broker, CUSTOMERS)).results();
    let customers = created(results.into_iter().map(|r| r.expect("customer")));
    let deposits = Asset::ALL
        .into_iter()
        .flat_map(|asset| deposits_of(&customers, asset, Decimal::from(1_000_000)))
        .collect();
    e.tick(START, deposits);
    let mut orders = Vec::new();
    for (n, &customer) in customers.iter().enumerate() {
        let spec = &instruments[n % instruments.len()];
        let side = if n % 2 == 0 { Side::Buy } else { Side::Sell };
        let amount = spec.lot_size * Decimal::from(10);
        let far = match side {
            Side::Buy => spec.start_price * Decimal::new(80, 2),
            Side::Sell => spec.start_price * Decimal::new(120, 2),
        };
        let place = |kind, reference: &str, limit: Option<Decimal>| {
            Command::PlaceOrder(PlaceOrder {
                customer,
                symbol: spec.symbol.clone(),
                entry: Box::new(OrderEntry {
                    amount: Some(amount),
                    limit_price: limit.map(|p| (p / spec.tick_size).round() * spec.tick_size),
                    ..OrderEntry::new(side, kind, reference)
                }),
            })
        };
        orders.push(place(OrderType::Market, "open", None));
        orders.push(place(OrderType::Limit, "rest", Some(far)));
    }
    let out = e.tick(START.plus_millis(1), orders);
    assert!(
        out.results().iter().all(|r| r.is_ok()),
        "every order accepted"
    );
    e
}

fn one_day(c: &mut Criterion) {
    let mut group = c.benchmark_group("day");
    group.sample_size(10);
    group.bench_function("living_market_1000_customers", |b| {
        b.iter_batched(
            venue,
            |mut e| {
                let to = e.clock().now.plus_millis(DAY_MS);
                let now = e.clock().now;
                let out = e.tick(now, vec![Command::AdvanceClock(AdvanceClock { to })]);
                assert!(out.results()[0].is_ok());
                e
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

criterion_group!(benches, one_day);
criterion_main!(benches);
