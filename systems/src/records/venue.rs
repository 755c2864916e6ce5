//! Brokers, their keys, customers and instruments: the components their entities carry and
//! the views the engine answers commands with and publishes.

use std::collections::BTreeMap;
use std::sync::Arc;

use bevy_ecs::prelude::Component;
use perpsim_core::Decimal;
use perpsim_core::ids::{BrokerCode, CustomerCode, PublicKey};
use perpsim_core::instrument::{InstrumentSpec, InstrumentStatus};
use perpsim_core::money::{DEFAULT_FEES, FeeRates};
use perpsim_core::time::Timestamp;
use serde::{Deserialize, Serialize};

/// Most keys one broker may hold at once; bounds the auth index per broker.
pub const MAX_KEYS_PER_BROKER: usize = 16;

#[derive(Component, Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Broker {
    pub code: BrokerCode,
    pub name: String,
    pub created_at: Timestamp,
}

/// A broker's active public keys, in the order they were added.
#[derive(Component, Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerKeys(pub Vec<PublicKey>);

#[derive(Component, Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Customer {
    pub code: CustomerCode,
    pub broker: BrokerCode,
    pub external_id: Option<String>,
    pub created_at: Timestamp,
    /// Leverage of the assigned margin profile (D8), account-wide.
    pub leverage: u32,
    /// Whether the margin profile is provisioned at the venue (D3 admin switch).
    pub provisioned: bool,
    /// Fee overrides by symbol; instruments without one use the defaults.
    pub fees: BTreeMap<String, FeeRates>,
}

#[derive(Component, Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Instrument(pub InstrumentSpec);

/// Index of an instrument's market (genesis order; instruments never go away): the dense id
/// the trading state and positions use for it.
pub type MarketId = u32;

/// An instrument's market id, on its entity, so a pass over instruments needs no lookup.
/// Derived (from the genesis order), so not in snapshots.
#[derive(Component, Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarketSlot(pub MarketId);

/// The moving state of an instrument: status and prices.
#[derive(Component, Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstrumentState {
    pub status: InstrumentStatus,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub index_price: Decimal,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub mark_price: Decimal,
    pub price_time: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerView {
    pub code: BrokerCode,
    pub name: String,
    pub public_keys: Vec<PublicKey>,
    pub created_at: Timestamp,
}

impl BrokerView {
    pub fn new(broker: &Broker, keys: &BrokerKeys) -> Self {
        BrokerView {
            code: broker.code,
            name: broker.name.clone(),
            public_keys: keys.0.clone(),
            created_at: broker.created_at,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomerView {
    pub code: CustomerCode,
    pub broker: BrokerCode,
    pub external_id: Option<String>,
    pub created_at: Timestamp,
    pub leverage: u32,
    pub provisioned: bool,
    /// Fee overrides by symbol; others use [`perpsim_core::money::DEFAULT_FEES`].
    pub fees: Arc<BTreeMap<String, FeeRates>>,
}

impl From<&Customer> for CustomerView {
    fn from(c: &Customer) -> Self {
        CustomerView {
            code: c.code,
            broker: c.broker,
            external_id: c.external_id.clone(),
            created_at: c.created_at,
            leverage: c.leverage,
            provisioned: c.provisioned,
            fees: match c.fees.is_empty() {
                true => Arc::clone(&NO_FEE_OVERRIDES),
                false => Arc::new(c.fees.clone()),
            },
        }
    }
}

/// The fee overrides of a customer who has none (nearly every one), shared by every view of
/// one: a view is made for each customer created and each changed, and an allocation of an
/// empty map each was a tenth of replaying a journal of sign-ups.
static NO_FEE_OVERRIDES: std::sync::LazyLock<Arc<BTreeMap<String, FeeRates>>> =
    std::sync::LazyLock::new(|| Arc::new(BTreeMap::new()));

impl CustomerView {
    pub fn fee_rates(&self, symbol: &str) -> FeeRates {
        self.fees.get(symbol).copied().unwrap_or(DEFAULT_FEES)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstrumentView {
    pub spec: Arc<InstrumentSpec>,
    pub status: InstrumentStatus,
    pub index_price: Decimal,
    pub mark_price: Decimal,
    pub price_time: Timestamp,
}

impl InstrumentView {
    pub fn new(spec: &InstrumentSpec, state: &InstrumentState) -> Self {
        InstrumentView {
            spec: Arc::new(spec.clone()),
            status: state.status,
            index_price: state.index_price,
            mark_price: state.mark_price,
            price_time: state.price_time,
        }
    }
}
