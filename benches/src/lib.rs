//! Workloads shared by the benchmarks: a genesis engine with one broker, and the commands the
//! journal benchmarks stream through it.

pub mod load;

use perpsim_core::Decimal;
use perpsim_core::clock::ClockMode;
use perpsim_core::ids::{BrokerCode, CustomerCode, PublicKey};
use perpsim_core::instrument::{Asset, default_instruments};
use perpsim_core::limits::{MAX_BOUND, VenueLimits};
use perpsim_core::time::Timestamp;
use perpsim_systems::command::TransferKind;
use perpsim_systems::command::{
    CreateBroker, CreateCustomer, RequestTransfer, SetInstrumentPrice, SetLimits,
};
use perpsim_systems::{Command, Engine, Genesis, Outcome};

/// 2026-01-01T00:00:00Z.
pub const START: Timestamp = Timestamp::from_millis(1_767_225_600_000);

pub fn genesis() -> Genesis {
    Genesis {
        seed: 7,
        clock_mode: ClockMode::Manual,
        start: START,
        instruments: default_instruments(),
        simulation: perpsim_core::simulation::Simulation::quiet(&default_instruments()),
    }
}

/// The D4 bounds raised to their ceiling: the benchmarks load one broker with more customers,
/// and one customer with more resting orders, than the defaults admit.
pub fn unbounded() -> Command {
    Command::SetLimits(SetLimits {
        limits: VenueLimits {
            max_open_orders: MAX_BOUND,
            max_customers: MAX_BOUND,
        },
    })
}

/// The first tick of every workload: one broker.
pub fn broker_command() -> Command {
    Command::CreateBroker(CreateBroker {
        name: "bench".into(),
        public_key: PublicKey([1; 32]),
    })
}

/// A fresh engine that has applied [`broker_command`], and the broker's code.
pub fn engine_with_broker() -> (Engine, BrokerCode) {
    let mut engine = Engine::genesis(genesis());
    let out = engine.tick(START, vec![broker_command(), unbounded()]);
    let Ok(Outcome::Broker(b)) = &out.results()[0] else {
        panic!("broker created")
    };
    let code = b.code;
    (engine, code)
}

/// `n` commands as a broker's traffic looks today: mostly customer creation, with a price
/// update every tenth command.
pub fn mixed_commands(broker: BrokerCode, n: usize, offset: usize) -> Vec<Command> {
    (offset..offset + n)
        .map(|i| match i % 10 {
            9 => Command::SetInstrumentPrice(SetInstrumentPrice {
                symbol: "BTC-USDC-PERP".into(),
                index_price: Decimal::new(600_000 + (i % 1_000) as i64, 1),
                mark_price: Decimal::new(600_005 + (i % 1_000) as i64, 1),
            }),
            _ => Command::CreateCustomer(CreateCustomer {
                broker,
                external_id: None,
            }),
        })
        .collect()
}

/// `n` new customers of `broker`, as one tick's commands.
pub fn create_customers(broker: BrokerCode, n: usize) -> Vec<Command> {
    (0..n)
        .map(|_| {
            Command::CreateCustomer(CreateCustomer {
                broker,
                external_id: None,
            })
        })
        .collect()
}

/// The codes of the customers a [`create_customers`] tick answered.
pub fn created(outcomes: impl IntoIterator<Item = Outcome>) -> Vec<CustomerCode> {
    outcomes
        .into_iter()
        .map(|o| match o {
            Outcome::Customer(c) => c.code,
            other => panic!("a customer was created, got {other:?}"),
        })
        .collect()
}

/// A deposit of `amount` USDC per customer, completing at the next instant (no delay).
pub fn instant_deposits(customers: &[CustomerCode], amount: Decimal) -> Vec<Command> {
    deposits_of(customers, Asset::Usdc, amount)
}

/// A deposit of `amount` of `asset` per customer, completing at the next instant.
pub fn deposits_of(customers: &[CustomerCode], asset: Asset, amount: Decimal) -> Vec<Command> {
    customers
        .iter()
        .map(|c| {
            Command::RequestTransfer(RequestTransfer {
                customer: *c,
                kind: TransferKind::Deposit,
                asset,
                amount,
                delay_ms: 0,
            })
        })
        .collect()
}
