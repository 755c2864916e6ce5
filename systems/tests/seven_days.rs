//! Issues 12 and 13's seeded simulation: the market maker and the random walk with 200
//! customers sending orders of every type, cancels, amends, deposits, withdrawals and leverage
//! changes over 7 simulated days. One customer in five trades at leverage 2 on thin collateral
//! and reopens every six hours, and each day at noon one market is shocked (an admin price
//! move of −45 % or +45 %, as a risk team rehearses a crash): margin calls and liquidations
//! into the maker's book happen (the maker's depth has so far absorbed every forced close,
//! so auto-deleveraging and insurance covers are proven by the risk tests). The engine's
//! invariants (money conserved per asset through funding, settlement, forced fills and
//! insurance payouts; clearing against unrealised PnL; no negative balance left flat; the
//! trading checks) run after every run of the schedule in this debug build (the scans of the
//! whole live state on every 64th); at the end the
//! journal — the ticks as sent — replays to the same state hash.

use perpsim_core::Decimal;
use perpsim_core::clock::ClockMode;
use perpsim_core::entry::{Amend, OrderEntry};
use perpsim_core::ids::{CustomerCode, PublicKey};
use perpsim_core::instrument::{Asset, default_instruments};
use perpsim_core::order::{OrderType, Side, TimeInForce, TriggerPriceType};
use perpsim_core::risk::MarginState;
use perpsim_core::rng::SimRng;
use perpsim_core::simulation::Simulation;
use perpsim_core::time::{DAY_MS, MINUTE_MS, Timestamp};
use perpsim_systems::command::TransferKind;
use perpsim_systems::command::{
    AdvanceClock, AmendOrder, CancelOrder, CreateBroker, CreateCustomer, PlaceOrder,
    RequestTransfer, SetInstrumentPrice, SetLeverage,
};
use perpsim_systems::publish::events::Listening;
use perpsim_systems::{Command, Engine, Genesis, Outcome};

const START: Timestamp = Timestamp::from_millis(1_767_225_600_000);
const CUSTOMERS: usize = 200;
/// References each customer cycles through: rule 11 then bounds its open orders, so the live
/// state (and the invariants' cost per run) stays that of a busy venue, not of a week's pile.
const REFERENCES: u64 = 20;
/// Every this many customers, one trades at leverage 2 on thin collateral.
const LEVERAGED_EVERY: usize = 5;
const THIN_COLLATERAL: i64 = 2_000;

/// Days simulated: 7, or `PERPSIM_SIM_DAYS` for a longer soak.
fn days() -> i64 {
    std::env::var("PERPSIM_SIM_DAYS")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(7)
}

fn genesis() -> Genesis {
    let instruments = default_instruments();
    let mut simulation = Simulation::defaults(&instruments);
    for i in &mut simulation.instruments {
        i.volatility = Decimal::new(150, 2); // a lively week
    }
    Genesis {
        seed: 42,
        clock_mode: ClockMode::Manual,
        start: START,
        simulation,
        instruments,
    }
}

/// A journal entry: the tick's instant and its commands, as the host would record them.
type Tick = (Timestamp, Vec<Command>);

struct Sim {
    engine: Engine,
    /// The journal, streamed to the replay as it is written: the replay runs on the other
    /// core while the week is simulated, instead of after it.
    journal: std::sync::mpsc::Sender<Tick>,
    rng: SimRng,
    customers: Vec<CustomerCode>,
    next_ref: u64,
}

impl Sim {
    fn tick(&mut self, commands: Vec<Command>) -> Vec<perpsim_systems::CommandResult> {
        let now = self.engine.clock().now;
        self.journal
            .send((now, commands.clone()))
            .expect("the replay reads to the end");
        self.engine.tick(now, commands).results()
    }

    fn pick(&mut self, n: u64) -> u64 {
        self.rng.next_u64() % n
    }

    fn price(&self, symbol_index: usize) -> Decimal {
        let v = self.engine.view();
        let spec = &default_instruments()[symbol_index];
        v.instruments[&spec.symbol].mark_price
    }

    /// Each leveraged customer's order for about 1.9 × its collateral in notional, long or
    /// short by turns, on its own market (refused once its margin is used: that is fine).
    fn leveraged_orders(&self) -> Vec<Command> {
        let instruments = default_instruments();
        (0..CUSTOMERS)
            .step_by(LEVERAGED_EVERY)
            .map(|who| {
                let market = who / LEVERAGED_EVERY % instruments.len();
                let (spec, mark) = (&instruments[market], self.price(market));
                let notional = Decimal::from(THIN_COLLATERAL * 19 / 10);
                let amount =
                    (notional / mark / spec.lot_size).floor().max(Decimal::ONE) * spec.lot_size;
                let side = match who / LEVERAGED_EVERY / instruments.len() % 2 {
                    0 => Side::Buy,
                    _ => Side::Sell,
                };
                Command::PlaceOrder(PlaceOrder {
                    customer: self.customers[who],
                    symbol: spec.symbol.clone(),
                    entry: Box::new(OrderEntry {
                        amount: Some(amount),
                        ..OrderEntry::new(side, OrderType::Market, "lev")
                    }),
                })
            })
            .collect()
    }

    /// Day `day`'s noon shock: one market moved −45 % (odd days) or +45 % (even days).
    fn shock(&self, day: i64) -> Command {
        let instruments = default_instruments();
        let market = day as usize % instruments.len();
        let spec = &instruments[market];
        let factor = match day % 2 {
            1 => Decimal::new(55, 2),
            _ => Decimal::new(145, 2),
        };
        let price = (self.price(market) * factor / spec.tick_size).round() * spec.tick_size;
        Command::SetInstrumentPrice(SetInstrumentPrice {
            symbol: spec.symbol.clone(),
            index_price: price,
            mark_price: price,
        })
    }

    /// A random request of any kind from a random customer.
    fn command(&mut self) -> Command {
        let who = self.pick(CUSTOMERS as u64) as usize;
        let customer = self.customers[who];
        let market = self.pick(4) as usize;
        let spec = default_instruments()[market].clone();
        let mark = self.price(market);
        let ticks_off =
            Decimal::from(self.pick(40) as i64 - 20) * spec.tick_size * Decimal::from(50);
        let price = ((mark + ticks_off) / spec.tick_size).round() * spec.tick_size;
        let lots = Decimal::from(1 + self.pick(20) as i64);
        let amount = lots * spec.lot_size * Decimal::from(10);
        let side = if self.pick(2) == 0 {
            Side::Buy
        } else {
            Side::Sell
        };
        self.next_ref += 1;
        let reference = format!("r{}", self.next_ref % REFERENCES);
        let place = |entry: OrderEntry| {
            Command::PlaceOrder(PlaceOrder {
                customer,
                symbol: spec.symbol.clone(),
                entry: Box::new(entry),
            })
        };
        let base = |kind| OrderEntry {
            amount: Some(amount),
            ..OrderEntry::new(side, kind, reference.clone())
        };
        match self.pick(12) {
            0..=2 => place(OrderEntry {
                limit_price: Some(price),
                ..base(OrderType::Limit)
            }),
            3 => place(base(OrderType::Market)),
            4 => place(OrderEntry {
                limit_price: Some(price),
                time_in_force: Some(if self.pick(2) == 0 {
                    TimeInForce::Ioc
                } else {
                    TimeInForce::Fok
                }),
                ..base(OrderType::Limit)
            }),
            5 => place(OrderEntry {
                limit_price: Some(price),
                time_in_force: Some(TimeInForce::Gtd),
                expire_time: Some(self.engine.clock().now.plus_millis(30 * MINUTE_MS)),
                ..base(OrderType::Limit)
            }),
            6 => {
                let trigger = match side {
                    Side::Buy => mark + spec.tick_size * Decimal::from(200),
                    Side::Sell => mark - spec.tick_size * Decimal::from(200),
                };
                place(OrderEntry {
                    trigger_price: Some(
                        ((trigger / spec.tick_size).round() * spec.tick_size).max(spec.tick_size),
                    ),
                    trigger_price_type: Some(TriggerPriceType::MarkPrice),
                    ..base(OrderType::StopLoss)
                })
            }
            7 => Command::CancelOrder(CancelOrder {
                customer,
                reference_id: format!("r{}", self.pick(REFERENCES)),
            }),
            8 => Command::AmendOrder(AmendOrder {
                customer,
                reference_id: format!("r{}", self.pick(REFERENCES)),
                amend: Amend {
                    amount: None,
                    limit_price: Some(price),
                    trigger_price: None,
                    expire_time: None,
                },
            }),
            9 => Command::RequestTransfer(RequestTransfer {
                customer,
                kind: if self.pick(3) == 0 {
                    TransferKind::Withdrawal
                } else {
                    TransferKind::Deposit
                },
                asset: spec.settlement,
                amount: Decimal::from(100 + self.pick(10_000) as i64),
                delay_ms: 1_000,
            }),
            10 => Command::SetLeverage(SetLeverage {
                customer,
                leverage: 1 + self.pick(2) as u32,
            }),
            _ => place(OrderEntry {
                limit_price: Some(price),
                post_only: true,
                ..base(OrderType::Limit)
            }),
        }
    }
}

#[test]
fn a_week_of_the_living_market_keeps_every_invariant_and_replays_to_the_same_hash() {
    // The journal — the ticks as sent — replayed from genesis, alongside.
    let (journal, ticks) = std::sync::mpsc::channel::<Tick>();
    let replay = std::thread::spawn(move || {
        let mut replay = Engine::genesis(genesis());
        replay.set_publishing(false);
        replay.set_listening(Listening::MarginStates);
        for (now, commands) in ticks {
            replay.tick(now, commands);
        }
        replay.state_hash()
    });
    let mut sim = Sim {
        engine: Engine::genesis(genesis()),
        journal,
        rng: SimRng::from_seed(4242),
        customers: Vec::new(),
        next_ref: 0,
    };
    let r = sim.tick(vec![Command::CreateBroker(CreateBroker {
        name: "b".into(),
        public_key: PublicKey([7; 32]),
    })]);
    let Ok(Outcome::Broker(b)) = &r[0] else {
        panic!("{r:?}")
    };
    let broker = b.code;
    let r = sim.tick(
        (0..CUSTOMERS)
            .map(|_| {
                Command::CreateCustomer(CreateCustomer {
                    broker,
                    external_id: None,
                })
            })
            .collect(),
    );
    sim.customers = r
        .into_iter()
        .map(|r| match r {
            Ok(Outcome::Customer(c)) => c.code,
            other => panic!("{other:?}"),
        })
        .collect();
    let deposits = sim
        .customers
        .iter()
        .enumerate()
        .flat_map(|(who, &customer)| {
            let amount = match who % LEVERAGED_EVERY {
                0 => THIN_COLLATERAL,
                _ => 50_000,
            };
            Asset::ALL.map(|asset| {
                Command::RequestTransfer(RequestTransfer {
                    customer,
                    kind: TransferKind::Deposit,
                    asset,
                    amount: Decimal::from(amount),
                    delay_ms: 0,
                })
            })
        })
        .collect();
    sim.tick(deposits);
    let leverage = (0..CUSTOMERS)
        .step_by(LEVERAGED_EVERY)
        .map(|who| {
            Command::SetLeverage(SetLeverage {
                customer: sim.customers[who],
                leverage: 2,
            })
        })
        .collect();
    sim.tick(leverage);
    let end = START.plus_millis(days() * DAY_MS);
    let mut accepted = 0usize;
    while sim.engine.clock().now < end {
        let to = sim.engine.clock().now.plus_millis(MINUTE_MS);
        sim.tick(vec![Command::AdvanceClock(AdvanceClock { to })]);
        let since_start = to.millis() - START.millis();
        if since_start % (6 * 60 * MINUTE_MS) == 0 {
            let orders = sim.leveraged_orders();
            sim.tick(orders);
        }
        if since_start % DAY_MS == DAY_MS / 2 {
            let shock = sim.shock(since_start / DAY_MS + 1);
            let r = sim.tick(vec![shock]);
            assert!(r[0].is_ok(), "{r:?}");
        }
        let n = 1 + sim.pick(4) as usize;
        let commands = (0..n).map(|_| sim.command()).collect();
        accepted += sim.tick(commands).iter().filter(|r| r.is_ok()).count();
    }
    let d = days() as usize;
    assert!(
        accepted > 1_000 * d,
        "the customers were busy: {accepted} requests accepted"
    );
    assert!(
        sim.engine.trades().len() > 500 * d,
        "{} trades",
        sim.engine.trades().len()
    );
    assert_eq!(
        sim.engine.funding_history().len() as i64,
        days() * 24 * 4,
        "every hour settled every market"
    );
    let kinds = |k: &str| {
        sim.engine
            .movements()
            .iter()
            .filter(|m| m.kind.as_str() == k)
            .count()
    };
    assert!(
        kinds("settlement") > 0 && kinds("funding") > 0,
        "settlement and funding were booked"
    );
    // Risk acted: margin calls and liquidations recorded, forced fills booked.
    let held = sim.engine.state().held;
    let states = |state: MarginState| held.margin.iter().filter(|r| r.state == state).count();
    let (calls, liquidations) = (
        states(MarginState::MarginCall),
        states(MarginState::Liquidation),
    );
    let covers = sim
        .engine
        .movements()
        .iter()
        .filter(|m| m.kind.as_str() == "liquidation" && m.trade.is_none())
        .count();
    eprintln!(
        "risk: {calls} margin calls, {liquidations} liquidations, {} liquidation rows \
         ({covers} insurance covers), {} auto_deleveraging rows",
        kinds("liquidation"),
        kinds("auto_deleveraging")
    );
    assert!(
        calls > 0 && liquidations > 0,
        "{calls} calls, {liquidations} liquidations"
    );
    assert!(kinds("liquidation") > 0, "forced fills were booked");
    // The journal replays to the same state.
    let Sim {
        engine, journal, ..
    } = sim;
    drop(journal);
    let replayed = replay.join().expect("the replay ran to the end");
    assert_eq!(replayed, engine.state_hash());
}
