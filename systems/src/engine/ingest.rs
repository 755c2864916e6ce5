//! IngestSystems: the run's commands taken one by one, in arrival order: order requests
//! queued for the desk (MatchSystems), every other family applied here.

use bevy_ecs::prelude::{Resource, World};
use perpsim_core::Decimal;

use crate::command::{
    AdminCommand, Answers, MoneyCommand, OrderCommand, RegistryCommand, RequestTransfer, Scheduled,
    TransferKind,
};
use crate::faults::Faults;
use crate::money::accounts;
use crate::records::money::MovementKind;
use crate::registry;
use crate::trading::desk::OrderRequests;

/// Commands of the current run with their position in the tick, in arrival order.
#[derive(Resource, Debug, Default)]
pub struct Inbox(pub Vec<(usize, Scheduled)>);

pub fn ingest_commands(world: &mut World) {
    // The run's vectors are taken out once (a resource lookup costs about as much as queueing
    // an order request) and put back at the end; the families' handlers never touch them.
    let mut commands = std::mem::take(&mut world.resource_mut::<Inbox>().0);
    let mut answers = std::mem::take(&mut *world.resource_mut::<Answers>());
    let mut requests = std::mem::take(&mut world.resource_mut::<OrderRequests>().0);
    for (at, command) in commands.drain(..) {
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
    world.resource_mut::<Inbox>().0 = commands;
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
    }
}
