//! IngestSystems: the run's commands taken one by one, in arrival order, each routed once
//! (`Command::route`): order requests queued for the desk (MatchSystems), every other family
//! applied here, and a clock command left for the engine, which applies it between runs.

use std::collections::VecDeque;

use bevy_ecs::prelude::{Resource, World};
use perpsim_core::Decimal;

use crate::command::{
    AdminCommand, Answers, Command, MoneyCommand, OrderCommand, RegistryCommand, RequestTransfer,
    Routed, Scheduled, TransferKind,
};
use crate::faults::Faults;
use crate::money::accounts;
use crate::records::money::MovementKind;
use crate::registry;
use crate::trading::desk::OrderRequests;

/// The tick's commands not applied yet, in arrival order; `next` is the position in the tick
/// of the first.
#[derive(Resource, Debug, Default)]
pub struct Inbox {
    pub commands: VecDeque<Command>,
    pub next: usize,
}

pub fn ingest_commands(world: &mut World) {
    // Most runs have none (a manual advance's every second, a replay's market steps): one
    // look-up then, not the six below.
    if world.resource::<Inbox>().commands.is_empty() {
        return;
    }
    // The run's vectors are taken out once (a resource lookup costs about as much as queueing
    // an order request) and put back at the end; the families' handlers never touch them.
    let Inbox {
        mut commands,
        mut next,
    } = std::mem::take(&mut *world.resource_mut::<Inbox>());
    let mut answers = std::mem::take(&mut *world.resource_mut::<Answers>());
    let mut requests = std::mem::take(&mut world.resource_mut::<OrderRequests>().0);
    while let Some(command) = commands.pop_front() {
        let command = match command.route() {
            Routed::Scheduled(command) => command,
            // The run's commands end here: the engine applies it, then runs what follows.
            Routed::Clock(clock) => {
                commands.push_front(clock.into());
                break;
            }
        };
        let at = next;
        next += 1;
        match command {
            Scheduled::Orders(OrderCommand::PlaceOrder(_)) if refused_by_fault_plan(world) => {
                answers.put::<std::sync::Arc<_>>(at, Err(crate::faults::refusal()));
            }
            Scheduled::Orders(order) => requests.push((at, order)),
            Scheduled::Money(c) => apply_money(world, at, c, &mut answers),
            Scheduled::Registry(c) => apply_registry(world, at, c, &mut answers),
            Scheduled::Admin(c) => apply_admin(world, at, c, &mut answers),
        }
    }
    *world.resource_mut::<Answers>() = answers;
    world.resource_mut::<OrderRequests>().0 = requests;
    *world.resource_mut::<Inbox>() = Inbox { commands, next };
}

/// The fault plan's share of refused entries never reaches the desk.
fn refused_by_fault_plan(world: &mut World) -> bool {
    world.resource::<Faults>().judges_orders() && world.resource_mut::<Faults>().refuses_order()
}

fn apply_money(world: &mut World, at: usize, command: MoneyCommand, answers: &mut Answers) {
    match command {
        MoneyCommand::RequestTransfer(c) => answers.put(at, request_transfer(world, c)),
        MoneyCommand::CancelTransfer(c) => {
            answers.put(at, accounts::cancel_transfer(world, c.code))
        }
        MoneyCommand::SetProvisioned(c) => answers.put(
            at,
            accounts::set_provisioned(world, c.customer, c.provisioned),
        ),
        MoneyCommand::SetFees(c) => answers.put(
            at,
            accounts::set_fees(
                world,
                c.customer,
                c.symbol.as_deref(),
                c.maker_bps,
                c.taker_bps,
            ),
        ),
    }
}

fn request_transfer(
    world: &mut World,
    c: RequestTransfer,
) -> crate::command::Answer<crate::records::money::Movement> {
    let kind = match c.kind {
        TransferKind::Deposit => (MovementKind::Deposit, Decimal::ZERO),
        TransferKind::Withdrawal => (
            MovementKind::Withdrawal,
            crate::positions::committed_at_marks(world, c.customer, c.asset),
        ),
    };
    accounts::request_transfer(world, c.customer, kind, c.asset, c.amount, c.delay_ms)
}

fn apply_registry(world: &mut World, at: usize, command: RegistryCommand, answers: &mut Answers) {
    match command {
        RegistryCommand::CreateBroker(c) => {
            answers.put(at, registry::create_broker(world, &c.name, c.public_key))
        }
        RegistryCommand::AddBrokerKey(c) => {
            answers.put(at, registry::add_broker_key(world, c.broker, c.public_key))
        }
        RegistryCommand::RevokeBrokerKey(c) => answers.put(
            at,
            registry::revoke_broker_key(world, c.broker, c.public_key),
        ),
        RegistryCommand::CreateCustomer(c) => answers.put(
            at,
            registry::create_customer(world, c.broker, c.external_id),
        ),
        RegistryCommand::SetInstrumentStatus(c) => answers.put(
            at,
            registry::set_instrument_status(world, &c.symbol, c.status),
        ),
        RegistryCommand::SetInstrumentPrice(c) => answers.put(
            at,
            registry::set_instrument_price(world, &c.symbol, c.index_price, c.mark_price),
        ),
    }
}

fn apply_admin(world: &mut World, at: usize, command: AdminCommand, answers: &mut Answers) {
    match command {
        AdminCommand::SetFundingRate(c) => answers.put(
            at,
            crate::settlement::funding::set_rate(world, &c.symbol, c.rate),
        ),
        AdminCommand::SetTransfersAvailable(c) => {
            answers.put(at, accounts::set_transfers_available(world, c.available))
        }
        AdminCommand::SetLimits(c) => answers.put(at, registry::set_limits(world, c.limits)),
        AdminCommand::SetFaults(c) => answers.put(at, crate::faults::set(world, c.plan)),
        AdminCommand::SetRecordedBook(c) => {
            answers.put(at, crate::simulation::recorded::set_book(world, c))
        }
        AdminCommand::PrintRecordedTrade(c) => {
            answers.put(at, crate::simulation::recorded::take_trade(world, c))
        }
    }
}
