//! Brokers, their keys, customers and instruments (interface §4.2, §4.3; D3, D4): the
//! commands that create and change them, the stable-id → `Entity` index of each ([`Registry`])
//! and the venue's bounds ([`Limits`]). Their components and views are records
//! (`records::venue`); the other concerns index their own entities (positions, accounts,
//! orders). Indexes are keyed by stable ids, and an `Entity` never leaves the engine: it is
//! not stable across a snapshot restore.

use std::collections::BTreeMap;

use bevy_ecs::prelude::{Entity, Resource, World};
use perpsim_core::ids::{BrokerCode, CustomerCode, PublicKey};
use perpsim_core::instrument::{InstrumentSpec, InstrumentStatus};
use perpsim_core::limits::VenueLimits;
use perpsim_core::money::DEFAULT_LEVERAGE;
use perpsim_core::time::Timestamp;
use perpsim_core::{Decimal, Error};
use serde::{Deserialize, Serialize};

use crate::clock::SimClock;
use crate::command::Answer;
use crate::records::lookup::Lookup;
use crate::records::venue::{
    Broker, BrokerKeys, BrokerView, Customer, CustomerView, Instrument, InstrumentState,
    InstrumentView, MAX_KEYS_PER_BROKER, MarketId, MarketSlot,
};
use crate::rng::EngineRng;

#[derive(Resource, Debug, Default)]
pub struct Registry {
    pub brokers: BTreeMap<BrokerCode, Entity>,
    pub keys: BTreeMap<PublicKey, BrokerCode>,
    pub customers: Lookup<CustomerCode, Entity>,
    pub instruments: BTreeMap<String, Entity>,
    /// The same entities by market id: the order path reads an instrument's state per
    /// request, where a look-up by symbol compares strings.
    pub markets: Vec<Entity>,
    /// Customers per broker, for the D4 bound; derived (rebuilt at a restore).
    pub customer_counts: BTreeMap<BrokerCode, u32>,
}

/// The venue's bounds on what a broker's key can make it hold (D4), set by
/// `Command::SetLimits` so a replay applies the bounds the live run applied.
#[derive(Resource, Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits(pub VenueLimits);

fn now(world: &World) -> Timestamp {
    world.resource::<SimClock>().now
}

fn broker_view(world: &World, entity: Entity) -> BrokerView {
    let broker = world
        .get::<Broker>(entity)
        .expect("indexed broker has its component");
    let keys = world
        .get::<BrokerKeys>(entity)
        .expect("indexed broker has keys");
    BrokerView::new(broker, keys)
}

fn key_free(world: &World, key: &PublicKey) -> Result<(), Error> {
    match world.resource::<Registry>().keys.contains_key(key) {
        true => Err(Error::conflict(
            "public_key is already registered to a broker",
        )),
        false => Ok(()),
    }
}

fn broker_entity(world: &World, code: BrokerCode) -> Result<Entity, Error> {
    world
        .resource::<Registry>()
        .brokers
        .get(&code)
        .copied()
        .ok_or_else(|| Error::not_found(format!("broker {code} does not exist")))
}

pub fn customer_entity(world: &World, code: CustomerCode) -> Result<Entity, Error> {
    world
        .resource::<Registry>()
        .customers
        .get(&code)
        .copied()
        .ok_or_else(|| Error::not_found(format!("customer {code} does not exist")))
}

pub fn instrument_entity(world: &World, symbol: &str) -> Result<Entity, Error> {
    world
        .resource::<Registry>()
        .instruments
        .get(symbol)
        .copied()
        .ok_or_else(|| Error::not_found(format!("symbol {symbol} does not exist")))
}

pub fn create_broker(world: &mut World, name: &str, key: PublicKey) -> Answer<BrokerView> {
    key_free(world, &key)?;
    let code = BrokerCode(world.resource_mut::<EngineRng>().0.uuid());
    let broker = Broker {
        code,
        name: name.to_owned(),
        created_at: now(world),
    };
    let entity = world.spawn((broker, BrokerKeys(vec![key]))).id();
    let mut registry = world.resource_mut::<Registry>();
    registry.brokers.insert(code, entity);
    registry.keys.insert(key, code);
    Ok(broker_view(world, entity))
}

pub fn add_broker_key(world: &mut World, code: BrokerCode, key: PublicKey) -> Answer<BrokerView> {
    let entity = broker_entity(world, code)?;
    key_free(world, &key)?;
    let mut keys = world
        .get_mut::<BrokerKeys>(entity)
        .expect("indexed broker has keys");
    if keys.0.len() >= MAX_KEYS_PER_BROKER {
        return Err(Error::conflict(format!(
            "a broker holds at most {MAX_KEYS_PER_BROKER} keys; revoke one first"
        )));
    }
    keys.0.push(key);
    world.resource_mut::<Registry>().keys.insert(key, code);
    Ok(broker_view(world, entity))
}

pub fn revoke_broker_key(
    world: &mut World,
    code: BrokerCode,
    key: PublicKey,
) -> Answer<BrokerView> {
    let entity = broker_entity(world, code)?;
    if world.resource::<Registry>().keys.get(&key) != Some(&code) {
        return Err(Error::not_found(format!(
            "broker {code} has no such public_key"
        )));
    }
    world
        .get_mut::<BrokerKeys>(entity)
        .expect("indexed broker has keys")
        .0
        .retain(|k| *k != key);
    world.resource_mut::<Registry>().keys.remove(&key);
    Ok(broker_view(world, entity))
}

pub fn create_customer(
    world: &mut World,
    broker: BrokerCode,
    external_id: Option<String>,
) -> Answer<CustomerView> {
    broker_entity(world, broker)?;
    let bound = world.resource::<Limits>().0.max_customers;
    let held = customer_count(world, broker);
    if held >= bound {
        return Err(Error::validation(format!(
            "the broker already has {held} customers, the most one broker may hold \
             (max customers {bound})"
        )));
    }
    let code = CustomerCode(world.resource_mut::<EngineRng>().0.uuid());
    let customer = Customer {
        code,
        broker,
        external_id,
        created_at: now(world),
        leverage: DEFAULT_LEVERAGE,
        provisioned: true,
        fees: BTreeMap::new(),
    };
    let view = CustomerView::from(&customer);
    let entity = world.spawn(customer).id();
    index_customer(&mut world.resource_mut::<Registry>(), code, broker, entity);
    Ok(view)
}

fn customer_count(world: &World, broker: BrokerCode) -> u32 {
    let counts = &world.resource::<Registry>().customer_counts;
    counts.get(&broker).copied().unwrap_or(0)
}

/// Indexes a customer's entity and counts it against its broker's bound.
pub fn index_customer(
    registry: &mut Registry,
    code: CustomerCode,
    broker: BrokerCode,
    entity: Entity,
) {
    registry.customers.insert(code, entity);
    *registry.customer_counts.entry(broker).or_default() += 1;
}

/// D4: the bounds in force from this command on.
pub fn set_limits(world: &mut World, limits: VenueLimits) -> Answer<VenueLimits> {
    limits.check().map_err(Error::validation)?;
    world.resource_mut::<Limits>().0 = limits;
    Ok(limits)
}

pub(crate) fn instrument_view(world: &World, entity: Entity) -> InstrumentView {
    let spec = world.get::<Instrument>(entity).expect("indexed instrument");
    let state = world
        .get::<InstrumentState>(entity)
        .expect("indexed instrument state");
    InstrumentView::new(&spec.0, state)
}

pub fn set_instrument_status(
    world: &mut World,
    symbol: &str,
    status: InstrumentStatus,
) -> Answer<InstrumentView> {
    let entity = instrument_entity(world, symbol)?;
    let mut state = world
        .get_mut::<InstrumentState>(entity)
        .expect("indexed instrument state");
    // Only mark it changed when it did change, so the read view is not rebuilt for nothing.
    if state.status != status {
        state.status = status;
    }
    Ok(instrument_view(world, entity))
}

pub fn set_instrument_price(
    world: &mut World,
    symbol: &str,
    index: Decimal,
    mark: Decimal,
) -> Answer<InstrumentView> {
    let entity = instrument_entity(world, symbol)?;
    assert!(
        index > Decimal::ZERO && mark > Decimal::ZERO,
        "prices are validated positive at the edge"
    );
    let at = now(world);
    let mut state = world
        .get_mut::<InstrumentState>(entity)
        .expect("indexed instrument state");
    state.index_price = index;
    state.mark_price = mark;
    state.price_time = at;
    Ok(instrument_view(world, entity))
}

/// Spawns an instrument at genesis or restore.
pub fn spawn_instrument(
    world: &mut World,
    spec: InstrumentSpec,
    state: InstrumentState,
    market: MarketId,
) {
    let symbol = spec.symbol.clone();
    let entity = world
        .spawn((Instrument(spec), state, MarketSlot(market)))
        .id();
    let mut registry = world.resource_mut::<Registry>();
    let previous = registry.instruments.insert(symbol, entity);
    assert!(previous.is_none(), "instrument symbols are unique");
    let at = market as usize;
    if registry.markets.len() <= at {
        registry.markets.resize(at + 1, Entity::PLACEHOLDER);
    }
    registry.markets[at] = entity;
}
