//! What the engine's tests share: an engine on the manual clock at a fixed start, a broker
//! with funded customers, order entries and commands, and one run of the schedule.

use perpsim_core::Decimal;
use perpsim_core::clock::ClockMode;
use perpsim_core::entry::OrderEntry;
use perpsim_core::ids::{CustomerCode, PublicKey};
use perpsim_core::instrument::{Asset, default_instruments};
use perpsim_core::order::{OrderType, Side};
use perpsim_core::time::Timestamp;

use crate::command::TransferKind;
use crate::command::{
    AdvanceClock, CreateBroker, CreateCustomer, PlaceOrder, RequestTransfer, SetInstrumentPrice,
};
use crate::records::order::Order;
use crate::{Command, CommandResult, Engine, Genesis, Outcome};

pub(crate) const START: Timestamp = Timestamp::from_millis(1_767_225_600_000);

pub(crate) fn engine(seed: u64) -> Engine {
    Engine::genesis(Genesis {
        seed,
        clock_mode: ClockMode::Manual,
        start: START,
        instruments: default_instruments(),
        simulation: perpsim_core::simulation::Simulation::quiet(&default_instruments()),
    })
}

/// An engine with the living market of D1: random walk and market maker on.
pub(crate) fn living(seed: u64) -> Engine {
    Engine::genesis(Genesis {
        seed,
        clock_mode: ClockMode::Manual,
        start: START,
        instruments: default_instruments(),
        simulation: perpsim_core::simulation::Simulation::defaults(&default_instruments()),
    })
}

/// Advances the manual clock by `ms` in one command.
pub(crate) fn advance(e: &mut Engine, ms: i64) {
    let to = now(e).plus_millis(ms);
    let t = now(e);
    let r = e
        .tick(t, vec![Command::AdvanceClock(AdvanceClock { to })])
        .results();
    assert!(r[0].is_ok(), "{r:?}");
}

/// A broker with `n` customers; returns their codes.
pub(crate) fn customers(engine: &mut Engine, n: usize) -> Vec<CustomerCode> {
    let out = engine.tick(
        START,
        vec![Command::CreateBroker(CreateBroker {
            name: "b".into(),
            public_key: PublicKey([1; 32]),
        })],
    );
    let Ok(Outcome::Broker(b)) = &out.results()[0] else {
        panic!()
    };
    let cmds = (0..n)
        .map(|_| {
            Command::CreateCustomer(CreateCustomer {
                broker: b.code,
                external_id: None,
            })
        })
        .collect();
    engine
        .tick(START, cmds)
        .results()
        .into_iter()
        .map(|r| match r {
            Ok(Outcome::Customer(c)) => c.code,
            other => panic!("{other:?}"),
        })
        .collect()
}

pub(crate) const BTC: &str = "BTC-USDC-PERP";

pub(crate) fn d(s: &str) -> Decimal {
    s.parse().unwrap()
}

/// `n` customers with `usdc` each, deposits completed.
pub(crate) fn funded(e: &mut Engine, n: usize, usdc: &str) -> Vec<CustomerCode> {
    let cs = customers(e, n);
    let cmds = cs
        .iter()
        .map(|c| {
            Command::RequestTransfer(RequestTransfer {
                customer: *c,
                kind: TransferKind::Deposit,
                asset: Asset::Usdc,
                amount: d(usdc),
                delay_ms: 0,
            })
        })
        .collect();
    e.tick(START, cmds);
    e.tick(START.plus_millis(1), vec![]);
    cs
}

pub(crate) fn entry(side: Side, kind: OrderType, reference: &str) -> OrderEntry {
    OrderEntry::new(side, kind, reference)
}

pub(crate) fn limit(side: Side, reference: &str, amount: &str, price: &str) -> OrderEntry {
    OrderEntry {
        amount: Some(d(amount)),
        limit_price: Some(d(price)),
        ..entry(side, OrderType::Limit, reference)
    }
}

pub(crate) fn market(side: Side, reference: &str, amount: &str) -> OrderEntry {
    OrderEntry {
        amount: Some(d(amount)),
        ..entry(side, OrderType::Market, reference)
    }
}

pub(crate) fn place(customer: CustomerCode, entry: OrderEntry) -> Command {
    Command::PlaceOrder(PlaceOrder {
        customer,
        symbol: BTC.into(),
        entry: Box::new(entry),
    })
}

/// Sets BTC's index and mark price through the admin command.
pub(crate) fn set_price(e: &mut Engine, price: &str) {
    let r = run(
        e,
        vec![Command::SetInstrumentPrice(SetInstrumentPrice {
            symbol: BTC.into(),
            index_price: d(price),
            mark_price: d(price),
        })],
    );
    assert!(r[0].is_ok(), "{r:?}");
}

pub(crate) fn now(e: &Engine) -> Timestamp {
    e.clock().now
}

pub(crate) fn run(e: &mut Engine, cmds: Vec<Command>) -> Vec<CommandResult> {
    let t = now(e);
    e.tick(t, cmds).results()
}

pub(crate) fn order(r: &CommandResult) -> &Order {
    match r {
        Ok(Outcome::Order(o)) => o,
        other => panic!("expected an order, got {other:?}"),
    }
}
