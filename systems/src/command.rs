//! Commands: every change to the engine's state is one of these. They are journaled as they
//! arrive and applied in order, so replaying the journal rebuilds the state bit for bit.

use perpsim_core::Decimal;
use perpsim_core::clock::ClockMode;
use perpsim_core::ids::{BrokerCode, PublicKey};
use perpsim_core::instrument::{InstrumentSpec, InstrumentStatus};
use perpsim_core::time::Timestamp;
use serde::{Deserialize, Serialize};

use crate::view::{BrokerView, ClockView, CustomerView, InstrumentView};

/// What a fresh engine starts from; stored once at the head of the journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Genesis {
    pub seed: u64,
    pub clock_mode: ClockMode,
    pub start: Timestamp,
    pub instruments: Vec<InstrumentSpec>,
}

/// A state-changing request. New capabilities add variants; a variant's encoding never
/// changes once journaled (append only, see ARCHITECTURE.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    CreateBroker {
        name: String,
        public_key: PublicKey,
    },
    AddBrokerKey {
        broker: BrokerCode,
        public_key: PublicKey,
    },
    RevokeBrokerKey {
        broker: BrokerCode,
        public_key: PublicKey,
    },
    CreateCustomer {
        broker: BrokerCode,
        external_id: Option<String>,
    },
    SetInstrumentStatus {
        symbol: String,
        status: InstrumentStatus,
    },
    SetInstrumentPrice {
        symbol: String,
        #[serde(with = "perpsim_core::decimal::bin")]
        index_price: Decimal,
        #[serde(with = "perpsim_core::decimal::bin")]
        mark_price: Decimal,
    },
    /// Manual clock only: run every scheduled event up to `to`, in time order.
    AdvanceClock {
        to: Timestamp,
    },
    /// Switches the clock mode of an existing engine (a restart with another `--clock`).
    SetClockMode {
        mode: ClockMode,
    },
}

/// What a command produced, answered to its sender after the tick is durable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Broker(BrokerView),
    Customer(CustomerView),
    Instrument(InstrumentView),
    Clock(ClockView),
}

pub type CommandResult = Result<Outcome, perpsim_core::Error>;
