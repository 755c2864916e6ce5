//! Money (D7): `ledger` is the double-entry ledger (movements, flows, and every rule of a
//! booking), `store` the balances as account entities, `accounts` the commands on money and
//! account settings and the completion of due transfers.

use bevy_ecs::prelude::{IntoScheduleConfigs, Schedule, World};

use crate::clock::due_any;
use crate::records::clock::ScheduledEvent;
use crate::sets::TransferSystems;

pub mod accounts;
pub mod ledger;
#[cfg(test)]
mod ledger_tests;
pub mod periodic;
pub mod store;

/// Transfers whose delay has passed are booked in `TransferSystems`.
pub(crate) fn plugin(world: &mut World, schedule: &mut Schedule) {
    world.init_resource::<crate::money::store::AccountIndex>();
    world.init_resource::<crate::money::store::WrittenBalances>();
    let transfers = |e: &ScheduledEvent| matches!(e, ScheduledEvent::TransferDue(_));
    schedule.add_systems(
        accounts::complete_due_transfers
            .run_if(due_any(transfers))
            .in_set(TransferSystems),
    );
}
