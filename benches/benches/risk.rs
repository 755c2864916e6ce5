//! The risk systems (issue 13), driven through the engine as its host drives it.
//!
//! - `risk/tick/{n}`: one realtime tick of one second over `n` open positions (one per
//!   customer, half at leverage 2) on the four default instruments: the random walk moves
//!   every mark, every position is revalued and every account's margin state judged at the
//!   due instant (the tick's command run, as the host's tick has one, judges again only what
//!   changed since), and the depreciation check runs (a 1 s notice interval, so every tick
//!   has one). Target: ≤ 50 ms at 1 000 000, linear in `n`.
//! - `risk/cascade/10000`: 10 000 accounts at leverage 2, each long 0.01 BTC from 1 000
//!   short holders, cross the liquidation threshold in one price move: their orders are
//!   cancelled, the resting bids absorb half the size (some at prices that leave balances
//!   negative, which insurance covers) and auto-deleveraging closes the rest at the mark.
//!   Timed: the tick of the price move, until every account is closed.
//!
//! - `risk/hour/{n}`: the longest tick of a funding hour over the same `n` positions (its
//!   pass is booked over ticks at the hour's instant, `records::periodic::ROWS_PER_TICK` rows
//!   each; the ticks' count and their sum printed once), as a server's engine runs it; and
//!   `risk/midnight/{n}` the same at 00:00 UTC, where settlement's pass and funding's share
//!   the ticks (publishing, projecting, the channels listening, the view before held as
//!   a reader holds it): every position pays funding, every account it wrote is judged again,
//!   the read view takes the changed balances and the history rows are handed out (their
//!   digests computed and the rows dropped untimed, as the journal's writer does). Untimed:
//!   the ticks up to the hour's last second, which set a rate on every market (prices fixed,
//!   so those are a few runs, not one a second).
//!
//! - `risk/idle`: a tick with nothing to do, one millisecond after the last, in the default
//!   venue with its market maker quoting fixed prices, as a replay's engine runs it (the
//!   read view off, only margin states listened to): what a run of the schedule costs
//!   before any work, which every instant of a replay pays (a recorded day has 1.3 M).
//!
//! Run: `cargo bench -p perpsim-benches --bench risk`.

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use perpsim_benches::{START, broker_command, create_customers, created, deposits_of, unbounded};
use perpsim_core::Decimal;
use perpsim_core::entry::OrderEntry;
use perpsim_core::ids::CustomerCode;
use perpsim_core::instrument::{Asset, default_instruments};
use perpsim_core::order::{OrderType, Side};
use perpsim_core::simulation::{PriceFeed, Simulation};
use perpsim_core::time::{DAY_MS, HOUR_MS, Timestamp};
use perpsim_systems::command::{PlaceOrder, SetFundingRate, SetInstrumentPrice, SetLeverage};
use perpsim_systems::publish::events::Listening;
use perpsim_systems::records::money::MovementKind;
use perpsim_systems::{Command, Engine, Genesis, Outcome};
use std::time::{Duration, Instant};

/// The allocator the service runs with (`api/src/main.rs`): a funding hour appends a million
/// rows, and what the allocator does with the pages freed after the last one is part of it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Commands per setup tick: bounds the inbox and results of one tick.
const CHUNK: usize = 50_000;

fn venue(simulation: Simulation) -> Engine {
    let instruments = default_instruments();
    let mut e = Engine::genesis(Genesis {
        simulation,
        instruments,
        ..perpsim_benches::genesis()
    });
    let out = e.tick(START, vec![broker_command(), unbounded()]);
    assert!(out.results().iter().all(Result::is_ok));
    e
}

fn broker_of(e: &Engine) -> perpsim_core::ids::BrokerCode {
    *e.view().brokers.keys().next().expect("the broker")
}

/// Applies `commands` in ticks of at most [`CHUNK`], every one accepted; their outcomes.
fn apply(e: &mut Engine, commands: Vec<Command>) -> Vec<Outcome> {
    let mut outcomes = Vec::with_capacity(commands.len());
    let mut commands = commands.into_iter().peekable();
    while commands.peek().is_some() {
        let chunk: Vec<Command> = commands.by_ref().take(CHUNK).collect();
        let now = e.clock().now;
        for r in e.tick(now, chunk).results() {
            outcomes.push(r.expect("every setup command is accepted"));
        }
    }
    outcomes
}

fn customers(e: &mut Engine, n: usize) -> Vec<CustomerCode> {
    let broker = broker_of(e);
    created(apply(e, create_customers(broker, n)))
}

fn place(customer: CustomerCode, symbol: &str, entry: OrderEntry) -> Command {
    Command::PlaceOrder(PlaceOrder {
        customer,
        symbol: symbol.into(),
        entry: Box::new(entry),
    })
}

/// An order of `amount`; its reference_id names its kind (a customer's open orders each
/// hold their own).
fn order(side: Side, kind: OrderType, amount: Decimal, limit: Option<Decimal>) -> OrderEntry {
    let price = limit.unwrap_or_default().to_string().replace('.', "_");
    let reference = format!("{kind:?}-{price}");
    OrderEntry {
        amount: Some(amount),
        limit_price: limit,
        ..OrderEntry::new(side, kind, reference)
    }
}

/// `n` customers, each holding one open position: pairs trade a seeded size at a seeded
/// price near the start, the seller resting a limit and the buyer taking it.
fn positions_venue(n: usize) -> Engine {
    let instruments = default_instruments();
    positions_venue_of(
        n,
        Simulation {
            price_feed: PriceFeed::RandomWalk,
            notice_interval_ms: 1_000,
            ..Simulation::quiet(&instruments)
        },
    )
}

/// `n` open positions as [`positions_venue`] opens them, in a venue of `simulation`.
fn positions_venue_of(n: usize, simulation: Simulation) -> Engine {
    let instruments = default_instruments();
    let mut e = venue(simulation);
    e.set_publishing(false);
    let cs = customers(&mut e, n);
    let pairs = n / 2;
    let market_of = |k: usize| &instruments[k % instruments.len()];
    let deposits = cs
        .iter()
        .enumerate()
        .flat_map(|(i, c)| deposits_of(&[*c], market_of(i / 2).settlement, 1_000_000.into()))
        .collect();
    apply(&mut e, deposits);
    let leverage = cs
        .iter()
        .step_by(2)
        .map(|&customer| {
            Command::SetLeverage(SetLeverage {
                customer,
                leverage: 2,
            })
        })
        .collect();
    apply(&mut e, leverage);
    let mut rng = perpsim_core::rng::SimRng::from_seed(5);
    let mut orders = Vec::with_capacity(2 * pairs);
    for k in 0..pairs {
        let spec = market_of(k);
        let lots = Decimal::from(rng.next_u64() % 1_000 + 1);
        let ticks = Decimal::from(rng.next_u64() % 2_000) - Decimal::from(1_000);
        let amount = spec.lot_size * lots;
        let price = spec.start_price + spec.tick_size * ticks;
        let (seller, buyer) = (cs[2 * k], cs[2 * k + 1]);
        orders.push(place(
            seller,
            &spec.symbol,
            order(Side::Sell, OrderType::Limit, amount, Some(price)),
        ));
        orders.push(place(
            buyer,
            &spec.symbol,
            order(Side::Buy, OrderType::Market, amount, None),
        ));
    }
    apply(&mut e, orders);
    e
}

fn tick(c: &mut Criterion) {
    let mut group = c.benchmark_group("risk");
    group.sample_size(10);
    for n in [10_000, 100_000, 1_000_000] {
        // Built on the first call, so a filtered run builds only what it measures.
        let mut venue = None;
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(format!("tick/{n}"), |b| {
            let e = venue.get_or_insert_with(|| positions_venue(n));
            b.iter(|| {
                let next = e.clock().now.plus_millis(1_000);
                let out = e.tick(next, Vec::new());
                assert!(out.events.len() >= 2, "the price step and the check fired");
            })
        });
    }
    group.finish();
}

fn idle(c: &mut Criterion) {
    let instruments = default_instruments();
    let mut e = venue(Simulation {
        price_feed: PriceFeed::Fixed,
        ..Simulation::defaults(&instruments)
    });
    e.set_publishing(false);
    e.set_listening(Listening::MarginStates);
    let mut group = c.benchmark_group("risk");
    group.bench_function("idle", |b| {
        b.iter(|| {
            let next = e.clock().now.plus_millis(1);
            let out = e.tick(next, Vec::new());
            assert!(out.events.is_empty(), "nothing happened");
        })
    });
    group.finish();
}

/// What the ticks of one funding hour cost: each timed, as the host ticks them at the
/// hour's instant until its pass ends; their history handed out and dropped untimed.
struct PassTicks {
    ticks: usize,
    rows: usize,
    total: Duration,
    longest: Duration,
}

fn pass_ticks(e: &mut Engine, at: Timestamp) -> PassTicks {
    let mut pass = PassTicks {
        ticks: 0,
        rows: 0,
        total: Duration::ZERO,
        longest: Duration::ZERO,
    };
    while pass.ticks == 0 || e.settling() {
        let started = Instant::now();
        let out = e.tick(at, Vec::new());
        let spent = started.elapsed();
        pass.ticks += 1;
        pass.total += spent;
        pass.longest = pass.longest.max(spent);
        pass.rows += out.history.movements.len();
        out.history.settle(usize::MAX);
    }
    pass
}

fn hour(c: &mut Criterion) {
    let mut group = c.benchmark_group("risk");
    group.sample_size(10);
    for n in [10_000, 100_000, 1_000_000] {
        let mut venue = None;
        group.throughput(Throughput::Elements(n as u64));
        for (name, period) in [("hour", HOUR_MS), ("midnight", DAY_MS)] {
            let mut reported = false;
            group.bench_function(format!("{name}/{n}"), |b| {
                let e = venue.get_or_insert_with(|| {
                    // Prices fixed, so the ticks up to the hour are one run each, not one a
                    // second (which `risk/tick` measures).
                    let quiet = Simulation::quiet(&default_instruments());
                    let mut e = positions_venue_of(n, quiet);
                    e.set_projecting(true);
                    e.set_publishing(true);
                    e
                });
                b.iter_custom(|iters| {
                    let mut spent = Duration::ZERO;
                    for _ in 0..iters {
                        let pass = periodic_pass(e, period);
                        spent += pass.longest;
                        assert!(pass.rows >= n * 99 / 100, "every position paid");
                        if !reported {
                            eprintln!(
                                "risk/{name}/{n}: {} ticks, {:?} in all, the longest {:?}",
                                pass.ticks, pass.total, pass.longest
                            );
                            reported = true;
                        }
                    }
                    spent
                })
            });
        }
    }
    group.finish();
}

/// Untimed, the ticks up to a second before the next multiple of `period` (a rate set on
/// every market), then the ticks of its passes, timed, the view before them held.
fn periodic_pass(e: &mut Engine, period: i64) -> PassTicks {
    let at = (e.clock().now.millis() / period + 1) * period;
    let rates = default_instruments()
        .into_iter()
        .map(|i| {
            Command::SetFundingRate(SetFundingRate {
                symbol: i.symbol,
                rate: Decimal::new(1, 4),
            })
        })
        .collect();
    let before = e.tick(Timestamp::from_millis(at - 1_000), rates);
    before.history.settle(usize::MAX);
    let held = e.view();
    let pass = pass_ticks(e, Timestamp::from_millis(at));
    drop(held);
    pass
}

const VICTIMS: usize = 10_000;
const SHORTS: usize = 1_000;
const BTC: &str = "BTC-USDC-PERP";

/// Whom the cascade involves, besides the engine.
struct Cascade {
    engine: Engine,
    victims: Vec<CustomerCode>,
}

/// 10 000 longs of 0.01 BTC at 60 000, 320 USDC each at leverage 2 (liquidation below
/// 35 000), sold to them by 1 000 shorts of 0.1; a resting buy of 0.0001 each far below
/// (cancelled by the liquidation); bids for 50 BTC, 0.1 at each of 500 levels from 34 000
/// down by 20, so the deeper fills leave a balance negative.
fn cascade_venue() -> Cascade {
    let mut e = venue(Simulation::quiet(&default_instruments()));
    let victims = customers(&mut e, VICTIMS);
    let shorts = customers(&mut e, SHORTS);
    let bidder = customers(&mut e, 1)[0];
    let mut deposits = deposits_of(&victims, Asset::Usdc, 320.into());
    deposits.extend(deposits_of(&shorts, Asset::Usdc, 10_000_000.into()));
    deposits.extend(deposits_of(&[bidder], Asset::Usdc, 10_000_000.into()));
    apply(&mut e, deposits);
    let mut commands: Vec<Command> = victims
        .iter()
        .map(|&customer| {
            Command::SetLeverage(SetLeverage {
                customer,
                leverage: 2,
            })
        })
        .collect();
    let d = |s: &str| s.parse::<Decimal>().expect("decimal");
    for &short in &shorts {
        commands.push(place(
            short,
            BTC,
            order(Side::Sell, OrderType::Limit, d("0.1"), Some(d("60000"))),
        ));
    }
    for &victim in &victims {
        commands.push(place(
            victim,
            BTC,
            order(Side::Buy, OrderType::Market, d("0.01"), None),
        ));
        commands.push(place(
            victim,
            BTC,
            order(Side::Buy, OrderType::Limit, d("0.0001"), Some(d("20000"))),
        ));
    }
    for level in 0..500 {
        let price = Decimal::from(34_000 - 20 * level);
        commands.push(place(
            bidder,
            BTC,
            order(Side::Buy, OrderType::Limit, d("0.1"), Some(price)),
        ));
    }
    apply(&mut e, commands);
    Cascade { engine: e, victims }
}

fn crash() -> Vec<Command> {
    vec![Command::SetInstrumentPrice(SetInstrumentPrice {
        symbol: BTC.into(),
        index_price: 34_500.into(),
        mark_price: 34_500.into(),
    })]
}

/// Once, untimed: the cascade does what the benchmark claims.
fn check_cascade() {
    let Cascade {
        mut engine,
        victims,
    } = cascade_venue();
    let now: Timestamp = engine.clock().now;
    assert!(engine.tick(now, crash()).results()[0].is_ok());
    let view = engine.view();
    let open = victims
        .iter()
        .filter(|&c| view.trading.positions.get(c).is_some_and(|p| !p.is_empty()))
        .count();
    assert_eq!(open, 0, "every account closed");
    let count = |kind| engine.movements().iter().filter(|m| m.kind == kind).count();
    let adl = count(MovementKind::AutoDeleveraging);
    let forced = count(MovementKind::Liquidation);
    assert!(adl >= VICTIMS / 2, "ADL closed half: {adl} rows");
    assert!(
        forced > VICTIMS / 2,
        "the book absorbed half, covers booked: {forced}"
    );
    eprintln!(
        "cascade: {forced} liquidation rows (fills and covers), {adl} auto_deleveraging rows"
    );
}

fn cascade(c: &mut Criterion) {
    let mut group = c.benchmark_group("risk");
    group.sample_size(10);
    group.throughput(Throughput::Elements(VICTIMS as u64));
    let mut checked = false;
    group.bench_function(format!("cascade/{VICTIMS}"), |b| {
        if !std::mem::replace(&mut checked, true) {
            check_cascade();
        }
        b.iter_batched(
            || {
                let mut cascade = cascade_venue();
                cascade.engine.set_publishing(false);
                cascade.engine.set_listening(Listening::MarginStates);
                cascade
            },
            |mut cascade| {
                let now = cascade.engine.clock().now;
                let out = cascade.engine.tick(now, crash());
                assert!(out.results()[0].is_ok());
                cascade
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

criterion_group!(benches, cascade, tick, hour, idle);
criterion_main!(benches);
