//! IngestSystems: the tick's commands applied one by one, in arrival order.

use bevy_ecs::prelude::{Resource, World};
use perpsim_core::Decimal;

use crate::command::TransferKind;
use crate::command::{Command, CommandResult, Results};
use crate::faults::Faults;
use crate::money::accounts;
use crate::records::money::MovementKind;
use crate::registry;
use crate::trading::desk::OrderRequests;

/// Commands of the current run, in sequence order.
#[derive(Resource, Debug, Default)]
pub struct Inbox(pub Vec<Command>);

pub fn ingest_commands(world: &mut World) {
    // The run's vectors are taken out once (a resource lookup costs about as much as queueing
    // an order request) and put back at the end; `apply` never touches them.
    let commands = std::mem::take(&mut world.resource_mut::<Inbox>().0);
    let mut results = std::mem::take(&mut world.resource_mut::<Results>().0);
    let mut requests = std::mem::take(&mut world.resource_mut::<OrderRequests>().0);
    results.reserve(commands.len());
    for command in commands {
        let index = results.len();
        let result = match command {
            // The fault plan's share of refused entries never reaches the desk.
            Command::PlaceOrder { .. }
                if world.resource::<Faults>().judges_orders()
                    && world.resource_mut::<Faults>().refuses_order() =>
            {
                Some(Err(crate::faults::refusal()))
            }
            Command::PlaceOrder { .. }
            | Command::CancelOrder { .. }
            | Command::AmendOrder { .. }
            | Command::SetLeverage { .. } => {
                requests.push((index, command));
                None
            }
            other => Some(apply(world, &other)),
        };
        results.push(result);
    }
    world.resource_mut::<Results>().0 = results;
    world.resource_mut::<OrderRequests>().0 = requests;
}

fn apply(world: &mut World, command: &Command) -> CommandResult {
    match command {
        Command::CreateBroker { name, public_key } => {
            registry::create_broker(world, name, *public_key)
        }
        Command::AddBrokerKey { broker, public_key } => {
            registry::add_broker_key(world, *broker, *public_key)
        }
        Command::RevokeBrokerKey { broker, public_key } => {
            registry::revoke_broker_key(world, *broker, *public_key)
        }
        Command::CreateCustomer {
            broker,
            external_id,
        } => registry::create_customer(world, *broker, external_id.clone()),
        Command::SetInstrumentStatus { symbol, status } => {
            registry::set_instrument_status(world, symbol, *status)
        }
        Command::SetInstrumentPrice {
            symbol,
            index_price,
            mark_price,
        } => registry::set_instrument_price(world, symbol, *index_price, *mark_price),
        Command::SetFundingRate { symbol, rate } => {
            crate::settlement::funding::set_rate(world, symbol, *rate)
        }
        Command::RequestTransfer {
            customer,
            kind,
            asset,
            amount,
            delay_ms,
        } => {
            let kind = match kind {
                TransferKind::Deposit => (MovementKind::Deposit, Decimal::ZERO),
                TransferKind::Withdrawal => (
                    MovementKind::Withdrawal,
                    crate::positions::committed_at_marks(world, *customer, *asset),
                ),
            };
            accounts::request_transfer(world, *customer, kind, *asset, *amount, *delay_ms)
        }
        Command::CancelTransfer { code } => accounts::cancel_transfer(world, *code),
        Command::SetTransfersAvailable { available } => {
            accounts::set_transfers_available(world, *available)
        }
        Command::SetProvisioned {
            customer,
            provisioned,
        } => accounts::set_provisioned(world, *customer, *provisioned),
        Command::SetFees {
            customer,
            symbol,
            maker_bps,
            taker_bps,
        } => accounts::set_fees(world, *customer, symbol.as_deref(), *maker_bps, *taker_bps),
        Command::SetLimits { limits } => registry::set_limits(world, *limits),
        Command::SetFaults { plan } => crate::faults::set(world, plan.clone()),
        Command::PlaceOrder { .. }
        | Command::CancelOrder { .. }
        | Command::AmendOrder { .. }
        | Command::SetLeverage { .. } => unreachable!("order requests are queued for MatchSystems"),
        Command::AdvanceClock { .. } | Command::SetClockMode { .. } => {
            unreachable!("clock commands are applied by Engine::tick between runs of the schedule")
        }
    }
}
