//! Answers: what each command of a tick answered, in a lane per type of answer, so a host
//! hands each sender the answer its command's type names ([`Submit::Answer`]): nothing
//! matches an answer against a kind its command cannot produce.

use std::collections::VecDeque;
use std::sync::Arc;

use bevy_ecs::prelude::Resource;
use perpsim_core::Error;
use perpsim_core::limits::VenueLimits;

use super::*;
use crate::records::clock::ClockView;
use crate::records::fault_plan::FaultPlan;
use crate::records::funding::FundingView;
use crate::records::money::Movement;
use crate::records::order::Order;
use crate::records::venue::{BrokerView, CustomerView, InstrumentView};

/// A command's answer: what it made or changed, or why it was refused.
pub type Answer<T> = Result<T, Error>;

/// Answers of one type, each with its command's position in the tick.
pub type Lane<T> = VecDeque<(usize, Answer<T>)>;

/// A command as its sender submits it: the journal's variant it becomes, and the type of
/// its answer.
pub trait Submit: Into<Command> {
    type Answer: Answerable;
}

/// A type of answer, and its lane.
pub trait Answerable: Sized {
    fn lane(answers: &mut Answers) -> &mut Lane<Self>;
}

/// Each command's journal variant and answer.
macro_rules! requests {
    ($($command:ident => $answer:ty),* $(,)?) => {$(
        impl From<$command> for Command {
            fn from(c: $command) -> Command {
                Command::$command(c)
            }
        }

        impl Submit for $command {
            type Answer = $answer;
        }
    )*};
}

requests! {
    CreateBroker => BrokerView,
    AddBrokerKey => BrokerView,
    RevokeBrokerKey => BrokerView,
    CreateCustomer => CustomerView,
    SetInstrumentStatus => InstrumentView,
    SetInstrumentPrice => InstrumentView,
    RequestTransfer => Movement,
    CancelTransfer => Movement,
    SetTransfersAvailable => bool,
    SetProvisioned => CustomerView,
    SetLeverage => CustomerView,
    SetFees => CustomerView,
    AdvanceClock => ClockView,
    SetClockMode => ClockView,
    SetFundingRate => FundingView,
    PlaceOrder => Arc<Order>,
    CancelOrder => Arc<Order>,
    AmendOrder => Arc<Order>,
    SetLimits => VenueLimits,
    SetFaults => Option<Box<FaultPlan>>,
    SetRecordedBook => InstrumentView,
    PrintRecordedTrade => InstrumentView,
}

/// The answers of a tick, by type; every command of it has one.
#[derive(Resource, Debug, Default, Clone)]
pub struct Answers {
    /// An order's record as the request left it, shared with the engine and the view (no
    /// copy per reply).
    orders: Lane<Arc<Order>>,
    customers: Lane<CustomerView>,
    brokers: Lane<BrokerView>,
    instruments: Lane<InstrumentView>,
    movements: Lane<Movement>,
    clock: Lane<ClockView>,
    /// A market's funding as it stands after the request.
    funding: Lane<FundingView>,
    limits: Lane<VenueLimits>,
    /// The fault plan now in force.
    faults: Lane<Option<Box<FaultPlan>>>,
    transfers_available: Lane<bool>,
    count: usize,
}

macro_rules! lanes {
    ($($answer:ty => $lane:ident),* $(,)?) => {
        $(impl Answerable for $answer {
            fn lane(answers: &mut Answers) -> &mut Lane<Self> {
                &mut answers.$lane
            }
        })*

        impl Answers {
            /// Each lane in command order; a command answered later in the tick (an order
            /// request, by the desk) may have been put after one that follows it.
            pub(crate) fn seal(&mut self) {
                if self.count > 1 {
                    $(self.$lane.make_contiguous().sort_by_key(|(at, _)| *at);)*
                }
            }

            /// Every answer by position, as any command's [`Outcome`].
            pub fn into_results(self) -> Vec<CommandResult> {
                let mut results: Vec<Option<CommandResult>> = Vec::new();
                results.resize_with(self.count, || None);
                $(for (at, answer) in self.$lane {
                    results[at] = Some(answer.map(Into::into));
                })*
                results
                    .into_iter()
                    .map(|r| r.expect("every command of the tick has an answer"))
                    .collect()
            }
        }
    };
}

lanes! {
    Arc<Order> => orders,
    CustomerView => customers,
    BrokerView => brokers,
    InstrumentView => instruments,
    Movement => movements,
    ClockView => clock,
    FundingView => funding,
    VenueLimits => limits,
    Option<Box<FaultPlan>> => faults,
    bool => transfers_available,
}

impl Answers {
    /// Room for `requests` more answers to order requests, which the desk answers a run's
    /// worth at a time: the lane allocated once rather than grown.
    pub fn reserve_orders(&mut self, requests: usize) {
        self.orders.reserve(requests);
    }

    /// Answers the command at position `at` of the tick.
    pub fn put<T: Answerable>(&mut self, at: usize, answer: Answer<T>) {
        T::lane(self).push_back((at, answer));
        self.count += 1;
    }

    /// The answer of the command at `at`, whose answers are of type `T`. The lanes are
    /// sealed, and a host takes every answer in command order.
    pub fn take<T: Answerable>(&mut self, at: usize) -> Answer<T> {
        let (index, answer) = T::lane(self)
            .pop_front()
            .expect("every command of the tick has an answer");
        assert_eq!(index, at, "answers are taken in command order");
        answer
    }

    /// How many commands were answered.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

macro_rules! outcomes {
    ($($answer:ty => $variant:ident),* $(,)?) => {$(
        impl From<$answer> for Outcome {
            fn from(answer: $answer) -> Outcome {
                Outcome::$variant(answer)
            }
        }
    )*};
}

outcomes! {
    Arc<Order> => Order,
    CustomerView => Customer,
    BrokerView => Broker,
    InstrumentView => Instrument,
    Movement => Movement,
    ClockView => Clock,
    FundingView => Funding,
    VenueLimits => Limits,
    Option<Box<FaultPlan>> => Faults,
    bool => TransfersAvailable,
}
