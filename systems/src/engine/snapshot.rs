//! The canonical form of the whole engine state: every collection sorted by its stable id,
//! encoded with postcard. Snapshots store it; the state hash is SHA-256 over all of it but
//! the history rows the engine holds ([`HeldHistory`]), which it reads as each log's count
//! and digest instead: two engines with the same hash hold the same state and have made the
//! same history, bit for bit, whichever of its rows each still holds.
//!
//! The hash and a snapshot's bytes are encoded from borrowed views of the world (`StateRef` and
//! the ledger's, exchange's and risk's `…StateRef`, field for field the owned `EngineState`, a
//! test compares the bytes), never from a copy of the state with its history. Live orders are
//! written from their entities in id order, and of the ended ones their count and the running
//! digest; of the ledger's movements and the trade records their count and `RowsDigest`, so the
//! hash does not depend on which rows the engine still holds. The rows held travel in the
//! snapshot outside the hash, as one byte string after the version (`HeldHistory`, with the
//! digests of those let go; `StateHash::of_snapshot` skips it, and a snapshot whose rows do not
//! sum to their digests is not restored) (STATE_VERSION 16; it also holds the risk state, the
//! feed's generator and levels, the maker's quotes and the funding state); a restore re-spawns
//! the live ones and rebuilds the books and the reference index. Open positions are written
//! from their entities in key order and re-spawned on restore (their `MarginRate` from the
//! customer's leverage, their `ValuationBasis` by the first run), so the encoding did not
//! change when they became entities.

use std::collections::BTreeMap;

use bevy_ecs::prelude::World;
use perpsim_core::rng::SimRng;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::clock::{Scheduler, SimClock};
use crate::command::Genesis;
use crate::engine::Counters;
use crate::money::ledger::{Ledger, LedgerState, LedgerStateRef};
use crate::money::store::all_accounts;
use crate::positions::PositionIndex;
use crate::positions::{MarginRate, MovedPositions, ValuationBasis};
use crate::records::funding::FundingRecord;
use crate::records::log::{Held, LogDigest, ProjectedLog, RowsDigest};
use crate::records::money::Movement;
use crate::records::periodic::PeriodicPasses;
use crate::records::position::{Position, PositionKey};
use crate::records::risk::{Notification, RiskRecord};
use crate::records::trade::{PublicFill, TradeRecord};
use crate::records::venue::{Broker, BrokerKeys, Customer, Instrument, InstrumentState};
use crate::registry::{Limits, Registry};
use crate::risk::RiskLog;
use crate::risk::notices::Notifications;
use crate::rng::EngineRng;
use crate::settlement::funding::{FundingBodyRef, FundingState};
use crate::trading::exchange::{Exchange, ExchangeState, ExchangeStateRef};

/// Bumped whenever the encoding changes; a snapshot of another version is not restored (the
/// journal is replayed instead). 12: the ledger's movements hashed by their digest, their
/// rows carried outside the hash. 13: the trade records likewise. 14: the depreciation
/// notices and the margin state changes likewise. 15: the public fills likewise, with the
/// candles and latest fills they made kept as state (the exchange's tape). 16: the funding
/// settlements likewise, each with its sequence number. 17: a held log names the first row
/// it holds, not how many chunks of a fixed size it let go (a server's window is set). 18: the
/// tape keeps the last day's one-minute candles only (every interval's candles are folded by
/// the journal's projection from the public fills, so the state no longer grows with them).
/// 19: the periodic passes in progress (the hour's and midnight's rows are booked over ticks
/// when the positions are many, so a pass can be in progress at a snapshot). 20: the recorded
/// books the market maker quotes (issue 39, `simulation::recorded`).
pub const STATE_VERSION: u32 = 20;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineState {
    pub version: u32,
    /// Outside the state hash (see the module's header).
    pub held: HeldHistory,
    pub genesis: Genesis,
    pub counters: Counters,
    pub clock: SimClock,
    pub rng: SimRng,
    pub scheduler: Scheduler,
    /// Sorted by broker code.
    pub brokers: Vec<(Broker, BrokerKeys)>,
    /// Sorted by customer code.
    pub customers: Vec<Customer>,
    /// Sorted by symbol.
    pub instruments: Vec<(Instrument, InstrumentState)>,
    pub ledger: LedgerState,
    pub exchange: ExchangeState,
    /// The price feed's walk and the market maker's quotes.
    pub market: crate::simulation::MarketState,
    pub funding: crate::settlement::funding::FundingBody,
    /// The hour's and midnight's passes in progress (issue 36).
    pub passes: PeriodicPasses,
    /// Margin states, their changes and the depreciation notices.
    pub risk: crate::risk::RiskState,
    /// The D4 bounds in force.
    pub limits: Limits,
    /// The fault plan in force and its generator (issue 25).
    pub faults: crate::faults::Faults,
}

/// SHA-256 of the canonical encoding, printed as lower-case hex.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateHash(pub [u8; 32]);

impl std::fmt::Display for StateHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl EngineState {
    pub fn encode(&self) -> Vec<u8> {
        postcard::to_stdvec(self).expect("engine state always encodes")
    }

    /// The state of a snapshot's bytes, if they are of this version and the history rows
    /// they carry are those their digests name.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        postcard::from_bytes::<EngineState>(bytes)
            .ok()
            .filter(|s| s.version == STATE_VERSION)
            .filter(|s| s.held.digests() == s.named_digests())
    }

    /// The state hash: [`StateHash::of_snapshot`] of [`EngineState::encode`]'s bytes.
    pub fn hash(&self) -> StateHash {
        StateHash::of_snapshot(&self.encode())
    }
}

/// The history rows the engine holds: of the ledger's movements, the trade records, the
/// public fills, the depreciation notices, the margin state changes and the funding
/// settlements, those the journal's projection does not hold yet (and pending transfers,
/// which change again), each log with the digest of those let go. Encoded as one byte string (postcard's length and bytes), so the part of a
/// snapshot's bytes the state hash covers is found without decoding them
/// ([`StateHash::of_snapshot`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeldHistory {
    pub movements: ProjectedLog<Movement>,
    pub trades: ProjectedLog<TradeRecord>,
    pub fills: ProjectedLog<PublicFill>,
    pub notices: ProjectedLog<Notification>,
    pub margin: ProjectedLog<RiskRecord>,
    pub funding: ProjectedLog<FundingRecord>,
}

/// Each held log's digest, as the state hash reads it: of the rows let go and those held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldDigests {
    pub movements: LogDigest,
    pub trades: LogDigest,
    pub fills: LogDigest,
    pub notices: LogDigest,
    pub margin: LogDigest,
    pub funding: LogDigest,
}

impl HeldHistory {
    pub fn digests(&self) -> HeldDigests {
        HeldDigests {
            movements: self.movements.digest(),
            trades: self.trades.digest(),
            fills: self.fills.digest(),
            notices: self.notices.digest(),
            margin: self.margin.digest(),
            funding: self.funding.digest(),
        }
    }
}

impl EngineState {
    /// The digests the state's body names for its held logs.
    fn named_digests(&self) -> HeldDigests {
        HeldDigests {
            movements: self.ledger.movements,
            trades: self.exchange.trades,
            fills: self.exchange.fills,
            notices: self.risk.notifications,
            margin: self.risk.log,
            funding: self.funding.history,
        }
    }
}

/// [`HeldHistory`] borrowed from the engine: the same bytes.
struct HeldHistoryRef<'a> {
    movements: &'a ProjectedLog<Movement>,
    trades: &'a ProjectedLog<TradeRecord>,
    fills: &'a ProjectedLog<PublicFill>,
    notices: &'a ProjectedLog<Notification>,
    margin: &'a ProjectedLog<RiskRecord>,
    funding: &'a ProjectedLog<FundingRecord>,
}

impl HeldHistoryRef<'_> {
    fn of(world: &World) -> HeldHistoryRef<'_> {
        HeldHistoryRef {
            movements: world.resource::<Ledger>().movements(),
            trades: &world.resource::<Exchange>().trades,
            fills: &world.resource::<Exchange>().fills,
            notices: &world.resource::<Notifications>().0,
            margin: &world.resource::<RiskLog>().0,
            funding: &world.resource::<FundingState>().history,
        }
    }

    fn to_owned(&self) -> HeldHistory {
        HeldHistory {
            movements: self.movements.clone(),
            trades: self.trades.clone(),
            fills: self.fills.clone(),
            notices: self.notices.clone(),
            margin: self.margin.clone(),
            funding: self.funding.clone(),
        }
    }
}

impl Serialize for HeldHistory {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let held = HeldHistoryRef {
            movements: &self.movements,
            trades: &self.trades,
            fills: &self.fills,
            notices: &self.notices,
            margin: &self.margin,
            funding: &self.funding,
        };
        held.serialize(s)
    }
}

impl Serialize for HeldHistoryRef<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let rows = (
            self.movements.held(),
            self.trades.held(),
            self.fills.held(),
            self.notices.held(),
            self.margin.held(),
            self.funding.held(),
        );
        let bytes = postcard::to_stdvec(&rows).map_err(serde::ser::Error::custom)?;
        s.serialize_bytes(&bytes)
    }
}

/// The held form of one log: its rows and the digest of those let go.
type HeldLog<T> = (Held<T>, RowsDigest);

impl<'de> Deserialize<'de> for HeldHistory {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Bytes;
        impl serde::de::Visitor<'_> for Bytes {
            type Value = HeldHistory;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("the held history's bytes")
            }

            fn visit_bytes<E: serde::de::Error>(self, bytes: &[u8]) -> Result<HeldHistory, E> {
                type Logs = (
                    HeldLog<Movement>,
                    HeldLog<TradeRecord>,
                    HeldLog<PublicFill>,
                    HeldLog<Notification>,
                    HeldLog<RiskRecord>,
                    HeldLog<FundingRecord>,
                );
                let (movements, trades, fills, notices, margin, funding): Logs =
                    postcard::from_bytes(bytes).map_err(E::custom)?;
                fn log<T, E: serde::de::Error>(
                    held: HeldLog<T>,
                    what: &str,
                ) -> Result<ProjectedLog<T>, E> {
                    ProjectedLog::from_held(held)
                        .ok_or_else(|| E::custom(format!("the held {what} contradict each other")))
                }
                Ok(HeldHistory {
                    movements: log(movements, "movements")?,
                    trades: log(trades, "trades")?,
                    fills: log(fills, "public fills")?,
                    notices: log(notices, "notices")?,
                    margin: log(margin, "margin state changes")?,
                    funding: log(funding, "funding settlements")?,
                })
            }
        }
        d.deserialize_bytes(Bytes)
    }
}

/// SHA-256 of a value's postcard encoding, fed to the hasher as it is encoded.
fn digest(value: &impl Serialize) -> StateHash {
    let digest = postcard::serialize_with_flavor(value, Digesting::default())
        .expect("engine state always encodes");
    StateHash(digest.finalize().into())
}

impl StateHash {
    /// SHA-256 of `bytes` (a genesis record's, whose digest the journal's archive keeps).
    pub fn of_encoding(bytes: &[u8]) -> Self {
        StateHash(Sha256::digest(bytes).into())
    }

    /// The state hash of a snapshot's bytes, the same as [`EngineState::hash`]: SHA-256 of
    /// them less the held history (the version's varint, then the history's length and
    /// bytes). Bytes too short to hold both are hashed whole.
    pub fn of_snapshot(bytes: &[u8]) -> Self {
        let varint_end = |from: usize| {
            let rest = bytes.get(from..)?;
            let n = rest.iter().position(|b| b & 0x80 == 0)? + 1;
            let value = rest[..n.min(10)]
                .iter()
                .rev()
                .fold(0u64, |v, b| v << 7 | u64::from(b & 0x7f));
            Some((from + n, value))
        };
        let held = varint_end(0).and_then(|(version_end, _)| {
            let (len_end, len) = varint_end(version_end)?;
            let held_end = len_end.checked_add(usize::try_from(len).ok()?)?;
            (held_end <= bytes.len()).then_some((version_end, held_end))
        });
        let mut hasher = Sha256::new();
        match held {
            Some((version_end, held_end)) => {
                hasher.update(&bytes[..version_end]);
                hasher.update(&bytes[held_end..]);
            }
            None => hasher.update(bytes),
        }
        StateHash(hasher.finalize().into())
    }
}

/// A postcard output that feeds SHA-256 through a buffer of [`Digesting::CHUNK`] bytes:
/// postcard writes a byte at a time, which the hasher takes best in blocks.
struct Digesting {
    hasher: Sha256,
    pending: Vec<u8>,
}

impl Digesting {
    const CHUNK: usize = 64 * 1024;
}

impl Default for Digesting {
    fn default() -> Self {
        Digesting {
            hasher: Sha256::new(),
            pending: Vec::with_capacity(Self::CHUNK),
        }
    }
}

impl postcard::ser_flavors::Flavor for Digesting {
    type Output = Sha256;

    fn try_push(&mut self, byte: u8) -> postcard::Result<()> {
        if self.pending.len() == Self::CHUNK {
            self.hasher.update(&self.pending);
            self.pending.clear();
        }
        self.pending.push(byte);
        Ok(())
    }

    fn try_extend(&mut self, bytes: &[u8]) -> postcard::Result<()> {
        if self.pending.len() + bytes.len() > Self::CHUNK {
            self.hasher.update(&self.pending);
            self.pending.clear();
        }
        match bytes.len() > Self::CHUNK {
            true => self.hasher.update(bytes),
            false => self.pending.extend_from_slice(bytes),
        }
        Ok(())
    }

    fn finalize(mut self) -> postcard::Result<Sha256> {
        self.hasher.update(&self.pending);
        Ok(self.hasher)
    }
}

pub(crate) fn extract(world: &World, genesis: &Genesis) -> EngineState {
    let (brokers, customers, instruments) = entities(world);
    let brokers = brokers
        .into_iter()
        .map(|(b, k)| (b.clone(), k.clone()))
        .collect();
    let customers = customers.into_iter().cloned().collect();
    let instruments = instruments
        .into_iter()
        .map(|(i, s)| (i.clone(), s.clone()))
        .collect();
    let held = HeldHistoryRef::of(world);
    EngineState {
        version: STATE_VERSION,
        held: held.to_owned(),
        genesis: genesis.clone(),
        counters: *world.resource::<Counters>(),
        clock: *world.resource::<SimClock>(),
        rng: world.resource::<EngineRng>().0.clone(),
        scheduler: world.resource::<Scheduler>().clone(),
        brokers,
        customers,
        instruments,
        ledger: world.resource::<Ledger>().state(all_accounts(world)),
        exchange: world.resource::<Exchange>().state(
            crate::trading::orders::extract(world),
            open_positions(world)
                .into_iter()
                .map(|(k, p)| (k, p.clone()))
                .collect(),
        ),
        market: crate::simulation::extract(world),
        funding: world.resource::<FundingState>().body(),
        passes: world.resource::<PeriodicPasses>().clone(),
        risk: crate::risk::extract(world),
        limits: *world.resource::<Limits>(),
        faults: world.resource::<crate::faults::Faults>().clone(),
    }
}

/// The open positions by key (the index's order), out of their entities.
fn open_positions(world: &World) -> BTreeMap<PositionKey, &Position> {
    world
        .resource::<PositionIndex>()
        .map()
        .iter()
        .map(|(key, &e)| (*key, world.get::<Position>(e).expect("indexed")))
        .collect()
}

/// [`EngineState`] as the world holds it, field for field: it encodes to exactly the bytes
/// of [`extract`]'s state (a test says so), so the state hash reads it without first
/// copying the history — every ledger row, trade, fill, ended order and risk record.
struct StateRef<'a> {
    held: HeldHistoryRef<'a>,
    body: BodyRef<'a>,
}

/// Everything of [`StateRef`] the state hash covers: all but the held history.
#[derive(Serialize)]
struct BodyRef<'a> {
    genesis: &'a Genesis,
    counters: Counters,
    clock: SimClock,
    rng: &'a SimRng,
    scheduler: &'a Scheduler,
    brokers: Vec<(&'a Broker, &'a BrokerKeys)>,
    customers: Vec<&'a Customer>,
    instruments: Vec<(&'a Instrument, &'a InstrumentState)>,
    ledger: LedgerStateRef<'a>,
    exchange: ExchangeStateRef<'a>,
    market: crate::simulation::MarketState,
    funding: FundingBodyRef<'a>,
    passes: &'a PeriodicPasses,
    risk: crate::risk::RiskStateRef<'a>,
    limits: Limits,
    faults: &'a crate::faults::Faults,
}

/// The state hash of the engine in `world`: [`EngineState::hash`] of [`extract`]'s state,
/// without building it or encoding the held history.
pub(crate) fn hash(world: &World, genesis: &Genesis) -> StateHash {
    digest(&(STATE_VERSION, &borrow(world, genesis).body))
}

/// [`EngineState::encode`] of [`extract`]'s state, without building it.
pub(crate) fn encode(world: &World, genesis: &Genesis) -> Vec<u8> {
    let state = borrow(world, genesis);
    postcard::to_stdvec(&(STATE_VERSION, &state.held, &state.body))
        .expect("engine state always encodes")
}

fn borrow<'a>(world: &'a World, genesis: &'a Genesis) -> StateRef<'a> {
    let (brokers, customers, instruments) = entities(world);
    StateRef {
        held: HeldHistoryRef::of(world),
        body: BodyRef {
            genesis,
            counters: *world.resource::<Counters>(),
            clock: *world.resource::<SimClock>(),
            rng: &world.resource::<EngineRng>().0,
            scheduler: world.resource::<Scheduler>(),
            brokers,
            customers,
            instruments,
            ledger: world.resource::<Ledger>().state_ref(all_accounts(world)),
            exchange: world
                .resource::<Exchange>()
                .state_ref(crate::trading::orders::borrow(world), open_positions(world)),
            market: crate::simulation::extract(world),
            funding: world.resource::<FundingState>().body_ref(),
            passes: world.resource::<PeriodicPasses>(),
            risk: crate::risk::borrow(world),
            limits: *world.resource::<Limits>(),
            faults: world.resource::<crate::faults::Faults>(),
        },
    }
}

type Entities<'a> = (
    Vec<(&'a Broker, &'a BrokerKeys)>,
    Vec<&'a Customer>,
    Vec<(&'a Instrument, &'a InstrumentState)>,
);

/// The brokers, customers and instruments, each in its registry's order.
fn entities(world: &World) -> Entities<'_> {
    let registry = world.resource::<Registry>();
    let get = |e| {
        (
            world.get::<Broker>(e).unwrap(),
            world.get::<BrokerKeys>(e).unwrap(),
        )
    };
    let brokers = registry.brokers.values().map(|&e| get(e)).collect();
    let customers = registry
        .customers
        .sorted()
        .into_iter()
        .map(|(_, e)| world.get::<Customer>(e).unwrap())
        .collect();
    let instruments = registry
        .instruments
        .values()
        .map(|&e| {
            let state = world.get::<InstrumentState>(e).unwrap();
            (world.get::<Instrument>(e).unwrap(), state)
        })
        .collect();
    (brokers, customers, instruments)
}

/// Spawns the state's entities into a world that holds the engine's resources.
pub(crate) fn restore_entities(world: &mut World, state: &EngineState) {
    for (broker, keys) in &state.brokers {
        let code = broker.code;
        let entity = world.spawn((broker.clone(), keys.clone())).id();
        let mut registry = world.resource_mut::<Registry>();
        registry.brokers.insert(code, entity);
        for key in &keys.0 {
            registry.keys.insert(*key, code);
        }
    }
    for customer in &state.customers {
        let entity = world.spawn(customer.clone()).id();
        crate::registry::index_customer(
            &mut world.resource_mut::<Registry>(),
            customer.code,
            customer.broker,
            entity,
        );
    }
    for (instrument, st) in &state.instruments {
        // Market ids are the genesis order, which the trading state keeps.
        let market = state
            .exchange
            .markets
            .iter()
            .position(|m| m.spec.symbol == instrument.0.symbol)
            .expect("every instrument has its market");
        crate::registry::spawn_instrument(
            world,
            instrument.0.clone(),
            st.clone(),
            market as crate::records::venue::MarketId,
        );
    }
    for (key, position) in &state.exchange.positions {
        let leverage = state.customers[state
            .customers
            .binary_search_by_key(&key.0, |c| c.code)
            .expect("positions belong to customers")]
        .leverage;
        let rate = MarginRate::of_leverage(leverage);
        // Valued by the first run of the schedule after the restore.
        let entity = world
            .spawn((position.clone(), rate, ValuationBasis::default()))
            .id();
        world.resource_mut::<PositionIndex>().insert(*key, entity);
        world.resource_mut::<MovedPositions>().wrote(entity);
    }
}
