//! Money (D7): `ledger` is the double-entry ledger (accounts, movements, flows), `accounts`
//! the commands on money and account settings and the completion of due transfers.

use bevy_ecs::prelude::{IntoScheduleConfigs, Schedule, World};

use crate::sets::FillSystems;

pub mod accounts;
pub mod ledger;
#[cfg(test)]
mod ledger_tests;

/// Transfers whose delay has passed are booked in `FillSystems`.
pub(crate) fn plugin(_world: &mut World, schedule: &mut Schedule) {
    schedule.add_systems(accounts::complete_due_transfers.in_set(FillSystems));
}
