//! Commands: every change to the engine's state is one of these. They are journaled as they
//! arrive and applied in order, so replaying the journal rebuilds the state bit for bit.

//!
//! A command is one typed struct per kind, in a family by where the engine applies it
//! (`orders`, `money`, `registry`, `clock`, `admin`; [`Command::route`]), with the type of its
//! answer ([`Submit`], `answers`).

use bevy_ecs::prelude::Resource;
use perpsim_core::clock::ClockMode;
use perpsim_core::ids::CustomerCode;
use perpsim_core::instrument::InstrumentSpec;
use perpsim_core::limits::VenueLimits;
use perpsim_core::simulation::Simulation;
use perpsim_core::time::Timestamp;

use crate::records::clock::ScheduledEvent;
use serde::{Deserialize, Serialize};

mod admin;
mod answers;
mod clock;
mod money;
mod orders;
mod registry;

pub use admin::*;
pub use answers::{Answer, Answerable, Answers, Lane, Submit};
pub use clock::*;
pub use money::*;
pub use orders::*;
pub use registry::*;

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

/// A state-changing request as the journal holds it: one variant per kind, each the typed
/// command of its family ([`Routed`]). The variants' order is the journal's encoding (a
/// variant's tag and its fields', which a newtype of a struct encodes as the struct variant
/// it was): append only, never reordered (ARCHITECTURE.md; `tests.rs` pins the bytes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    CreateBroker(CreateBroker),
    AddBrokerKey(AddBrokerKey),
    RevokeBrokerKey(RevokeBrokerKey),
    CreateCustomer(CreateCustomer),
    SetInstrumentStatus(SetInstrumentStatus),
    SetInstrumentPrice(SetInstrumentPrice),
    RequestTransfer(RequestTransfer),
    CancelTransfer(CancelTransfer),
    SetTransfersAvailable(SetTransfersAvailable),
    SetProvisioned(SetProvisioned),
    SetLeverage(SetLeverage),
    SetFees(SetFees),
    AdvanceClock(AdvanceClock),
    SetClockMode(SetClockMode),
    SetFundingRate(SetFundingRate),
    PlaceOrder(PlaceOrder),
    CancelOrder(CancelOrder),
    AmendOrder(AmendOrder),
    SetLimits(SetLimits),
    SetFaults(SetFaults),
    SetRecordedBook(SetRecordedBook),
    PrintRecordedTrade(PrintRecordedTrade),
}

/// A command by where the engine applies it: the clock's between runs of the schedule, the
/// rest within a run ([`Scheduled`]). [`Command::route`] is the one place that decides.
#[derive(Debug)]
pub enum Routed {
    Clock(ClockCommand),
    Scheduled(Scheduled),
}

/// A command applied within a run of the schedule: order requests queued for the desk
/// (MatchSystems), the others applied as IngestSystems takes them.
#[derive(Debug)]
pub enum Scheduled {
    Orders(OrderCommand),
    Money(MoneyCommand),
    Registry(RegistryCommand),
    Admin(AdminCommand),
}

impl Command {
    /// The family that applies the command, by move.
    pub fn route(self) -> Routed {
        use Scheduled::{Admin, Money, Orders, Registry};
        let scheduled = match self {
            Command::AdvanceClock(c) => return Routed::Clock(ClockCommand::AdvanceClock(c)),
            Command::SetClockMode(c) => return Routed::Clock(ClockCommand::SetClockMode(c)),
            Command::PlaceOrder(c) => Orders(OrderCommand::PlaceOrder(c)),
            Command::CancelOrder(c) => Orders(OrderCommand::CancelOrder(c)),
            Command::AmendOrder(c) => Orders(OrderCommand::AmendOrder(c)),
            Command::SetLeverage(c) => Orders(OrderCommand::SetLeverage(c)),
            Command::RequestTransfer(c) => Money(MoneyCommand::RequestTransfer(c)),
            Command::CancelTransfer(c) => Money(MoneyCommand::CancelTransfer(c)),
            Command::SetProvisioned(c) => Money(MoneyCommand::SetProvisioned(c)),
            Command::SetFees(c) => Money(MoneyCommand::SetFees(c)),
            Command::CreateBroker(c) => Registry(RegistryCommand::CreateBroker(c)),
            Command::AddBrokerKey(c) => Registry(RegistryCommand::AddBrokerKey(c)),
            Command::RevokeBrokerKey(c) => Registry(RegistryCommand::RevokeBrokerKey(c)),
            Command::CreateCustomer(c) => Registry(RegistryCommand::CreateCustomer(c)),
            Command::SetInstrumentStatus(c) => Registry(RegistryCommand::SetInstrumentStatus(c)),
            Command::SetInstrumentPrice(c) => Registry(RegistryCommand::SetInstrumentPrice(c)),
            Command::SetFundingRate(c) => Admin(AdminCommand::SetFundingRate(c)),
            Command::SetTransfersAvailable(c) => Admin(AdminCommand::SetTransfersAvailable(c)),
            Command::SetLimits(c) => Admin(AdminCommand::SetLimits(c)),
            Command::SetFaults(c) => Admin(AdminCommand::SetFaults(c)),
            Command::SetRecordedBook(c) => Admin(AdminCommand::SetRecordedBook(c)),
            Command::PrintRecordedTrade(c) => Admin(AdminCommand::PrintRecordedTrade(c)),
        };
        Routed::Scheduled(scheduled)
    }

    /// A clock command as its family, or the command back.
    pub fn into_clock(self) -> Result<ClockCommand, Command> {
        match self {
            Command::AdvanceClock(c) => Ok(ClockCommand::AdvanceClock(c)),
            Command::SetClockMode(c) => Ok(ClockCommand::SetClockMode(c)),
            other => Err(other),
        }
    }

    /// The customer and reference a cancel or amend names: what names its answer when none
    /// is open under it (`perpsim_core::order::not_open`).
    pub fn order_reference(&self) -> Option<(CustomerCode, &str)> {
        match self {
            Command::CancelOrder(c) => Some(c.reference()),
            Command::AmendOrder(c) => Some(c.reference()),
            _ => None,
        }
    }

    /// Appends this command's encoding to `out`, given `encoded`, the encoding of the same
    /// command for another customer (a replay's plan encodes a customer's command for a
    /// placeholder, and binds it to the customer's code as the run goes), `customer` being
    /// its own: postcard writes a variant as its tag (a varint) and then its fields in order,
    /// every command [`Command::customer_mut`] names holds its customer first, and a customer
    /// code is its length (16, a byte) and its 16 bytes, so only those 16 bytes differ (a
    /// whole encoding again was 2 % of a 24-hour scenario's run). Encodes the command anew
    /// where `encoded` is not so laid out.
    pub fn encode_rebound(&self, encoded: &[u8], customer: CustomerCode, out: &mut Vec<u8>) {
        let start = out.len();
        let tag = encoded.iter().position(|b| b & 0x80 == 0);
        match tag.map(|t| t + 1) {
            Some(at) if encoded.get(at) == Some(&16) && encoded.len() > at + 16 => {
                out.extend_from_slice(&encoded[..=at]);
                out.extend_from_slice(customer.0.as_bytes());
                out.extend_from_slice(&encoded[at + 17..]);
            }
            _ => postcard::to_io(self, &mut *out)
                .map(drop)
                .expect("commands always encode"),
        }
        debug_assert_eq!(
            out[start..],
            postcard::to_stdvec(self).expect("commands always encode"),
            "a command bound by its bytes encodes as itself"
        );
    }

    /// The customer a customer's command acts for (an order request, a transfer, a setting).
    pub fn customer_mut(&mut self) -> Option<&mut CustomerCode> {
        match self {
            Command::PlaceOrder(PlaceOrder { customer, .. })
            | Command::CancelOrder(CancelOrder { customer, .. })
            | Command::AmendOrder(AmendOrder { customer, .. })
            | Command::SetLeverage(SetLeverage { customer, .. })
            | Command::RequestTransfer(RequestTransfer { customer, .. })
            | Command::SetProvisioned(SetProvisioned { customer, .. })
            | Command::SetFees(SetFees { customer, .. }) => Some(customer),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests;

/// Any command's answer, for a host that reads a tick's answers by position
/// ([`Answers::into_results`]: a replay, the tests); a sender hears its command's own type
/// ([`Submit::Answer`]).
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
