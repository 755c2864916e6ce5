//! Commands: every change to the engine's state is one of these. They are journaled as they
//! arrive and applied in order, so replaying the journal rebuilds the state bit for bit.

use bevy_ecs::prelude::Resource;
use perpsim_core::Decimal;
use perpsim_core::clock::ClockMode;
use perpsim_core::ids::{BrokerCode, CustomerCode, MovementCode, PublicKey};
use perpsim_core::instrument::{Asset, InstrumentSpec, InstrumentStatus};
use perpsim_core::limits::VenueLimits;
use perpsim_core::simulation::Simulation;
use perpsim_core::time::Timestamp;

use crate::records::clock::ScheduledEvent;
use serde::{Deserialize, Serialize};

use perpsim_core::entry::{Amend, OrderEntry};

use crate::records::clock::ClockView;
use crate::records::depth::LevelChange;
use crate::records::money::Movement;
use crate::records::order::Order;
use crate::records::venue::{BrokerView, CustomerView, InstrumentView, MarketId};

/// What a fresh engine starts from; stored once at the head of the journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Genesis {
    pub seed: u64,
    pub clock_mode: ClockMode,
    pub start: Timestamp,
    pub instruments: Vec<InstrumentSpec>,
    /// The living market: price feed and market maker (D1, D10).
    pub simulation: Simulation,
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
    /// A deposit or withdrawal, pending until `delay_ms` of simulation time has passed. The
    /// delay travels with the command so a replay schedules exactly what the live run did.
    RequestTransfer {
        customer: CustomerCode,
        kind: TransferKind,
        asset: Asset,
        #[serde(with = "perpsim_core::decimal::bin")]
        amount: Decimal,
        delay_ms: i64,
    },
    CancelTransfer {
        code: MovementCode,
    },
    SetTransfersAvailable {
        available: bool,
    },
    SetProvisioned {
        customer: CustomerCode,
        provisioned: bool,
    },
    SetLeverage {
        customer: CustomerCode,
        leverage: u32,
    },
    /// Fees in basis points for one symbol, or every instrument when `symbol` is None.
    SetFees {
        customer: CustomerCode,
        symbol: Option<String>,
        #[serde(with = "perpsim_core::decimal::bin_opt")]
        maker_bps: Option<Decimal>,
        #[serde(with = "perpsim_core::decimal::bin_opt")]
        taker_bps: Option<Decimal>,
    },
    /// Manual clock only: run every scheduled event up to `to`, in time order.
    AdvanceClock {
        to: Timestamp,
    },
    /// Switches the clock mode of an existing engine (a restart with another `--clock`).
    SetClockMode {
        mode: ClockMode,
    },
    /// D3: the preliminary funding rate of the running interval, overriding the premium
    /// samples until the interval settles.
    SetFundingRate {
        symbol: String,
        #[serde(with = "perpsim_core::decimal::bin")]
        rate: Decimal,
    },
    /// An order entry as sent (§4.3); the rules run in the engine against its prices.
    PlaceOrder {
        customer: CustomerCode,
        symbol: String,
        entry: Box<OrderEntry>,
    },
    /// DELETE: cancels the open order of a reference.
    CancelOrder {
        customer: CustomerCode,
        reference_id: String,
    },
    /// PATCH (D5): amends the open order of a reference.
    AmendOrder {
        customer: CustomerCode,
        reference_id: String,
        amend: Amend,
    },
    /// D4: the bounds on open orders per customer and customers per broker, from this
    /// command on (a start with other `--max-open-orders` or `--max-customers`).
    SetLimits {
        limits: VenueLimits,
    },
    /// Issue 25: the fault plan an integrator rehearses against, or none (faults off).
    SetFaults {
        plan: Option<crate::records::fault_plan::FaultPlan>,
    },
}

impl Command {
    /// The customer and reference a cancel or amend names: what names its answer when none
    /// is open under it (`perpsim_core::order::not_open`).
    pub fn order_reference(&self) -> Option<(CustomerCode, &str)> {
        match self {
            Command::CancelOrder {
                customer,
                reference_id,
            }
            | Command::AmendOrder {
                customer,
                reference_id,
                ..
            } => Some((*customer, reference_id)),
            _ => None,
        }
    }
}

#[cfg(test)]
#[path = "command_tests.rs"]
mod tests;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TransferKind {
    Deposit,
    Withdrawal,
}

/// What a command produced, answered to its sender after the tick is durable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Broker(BrokerView),
    Customer(CustomerView),
    Instrument(InstrumentView),
    Clock(ClockView),
    Movement(Movement),
    TransfersAvailable(bool),
    /// The order's record as the request left it, shared with the engine and the view (no
    /// copy per reply).
    Order(std::sync::Arc<Order>),
    /// A market's funding as it stands after the request.
    Funding(crate::records::funding::FundingView),
    Limits(VenueLimits),
    /// The fault plan now in force.
    Faults(Option<Box<crate::records::fault_plan::FaultPlan>>),
}

pub type CommandResult = Result<Outcome, perpsim_core::Error>;

/// One result per command of the inbox, same order. Order requests (and leverage changes,
/// which move margin) are answered by MatchSystems, which fills in their slot.
#[derive(Resource, Debug, Default)]
pub struct Results(pub Vec<Option<CommandResult>>);

/// Something that happened during a tick, for the push channels and observers (D9).
///
/// Derived from state, never journaled: the same journal gives the same events in the same
/// order, live or replayed. A history row (a movement, a trade record, a notice, a margin
/// state change), which the read view does not hold, is carried whole, and an order's
/// update its record as it stood at the end of the run that changed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineEvent {
    /// A timed event ran at its instant.
    TimerFired {
        at: Timestamp,
        event: ScheduledEvent,
    },
    /// A ledger movement reached a terminal status (the balance-changes channel, §2.1 and §6
    /// rule 1): a transfer completed or cancelled, or a movement booked completed (trades,
    /// forced fills, funding, settlement, insurance covers). It carries the row as it stood
    /// then: the read view keeps no movements (the journal's projection does, issue 37).
    Movement(std::sync::Arc<Movement>),
    /// An order was placed, amended, cancelled, triggered, filled or expired in a run: its
    /// record at the end of that run (the orders channel, §6 rule 3).
    Order(std::sync::Arc<Order>),
    /// One side's trade record (the trades channel, D5), which the view does not hold.
    Trade(std::sync::Arc<crate::records::trade::TradeRecord>),
    /// A public fill (the market-trades channel, D8 PublicTrade).
    PublicTrade(std::sync::Arc<crate::records::trade::PublicFill>),
    /// A position depreciation notice (the notifications channel, §2.2), which the view does
    /// not hold.
    Notice(std::sync::Arc<crate::records::risk::Notification>),
    /// A margin state change (the liquidations channel, §6 rules 4–5); rare, so it carries
    /// its record.
    MarginState(crate::records::risk::RiskRecord),
    /// A market's book changes of the whole tick, one atomic batch (§6 rule 6).
    Book {
        market: MarketId,
        changes: Vec<LevelChange>,
    },
    /// Something a market's ticker shows changed during the tick.
    Ticker(MarketId),
    /// A 5-second boundary of simulation time passed during the tick: positions and margin
    /// are pushed as the view of this tick shows them, both at this instant (§6, §8).
    Valuation { at: Timestamp },
}

/// Events collected during a tick.
#[derive(Resource, Debug, Default)]
pub struct TickEvents(pub Vec<EngineEvent>);
