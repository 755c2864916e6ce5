//! The registry family: brokers, their keys, customers and instruments (§4.2, §4.3, D3),
//! applied as IngestSystems takes them.

use perpsim_core::Decimal;
use perpsim_core::ids::{BrokerCode, PublicKey};
use perpsim_core::instrument::InstrumentStatus;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateBroker {
    pub name: String,
    pub public_key: PublicKey,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddBrokerKey {
    pub broker: BrokerCode,
    pub public_key: PublicKey,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevokeBrokerKey {
    pub broker: BrokerCode,
    pub public_key: PublicKey,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateCustomer {
    pub broker: BrokerCode,
    pub external_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetInstrumentStatus {
    pub symbol: String,
    pub status: InstrumentStatus,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetInstrumentPrice {
    pub symbol: String,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub index_price: Decimal,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub mark_price: Decimal,
}

#[derive(Debug)]
pub enum RegistryCommand {
    CreateBroker(CreateBroker),
    AddBrokerKey(AddBrokerKey),
    RevokeBrokerKey(RevokeBrokerKey),
    CreateCustomer(CreateCustomer),
    SetInstrumentStatus(SetInstrumentStatus),
    SetInstrumentPrice(SetInstrumentPrice),
}
