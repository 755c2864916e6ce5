//! The periodic money flows over open positions: daily settlement (`daily`, D6, in
//! MarkToMarketSystems before the valuation) and hourly funding (`funding`, D7, §2.12, in
//! FundingSystems). Both book against the clearing account, so the ledger still sums
//! exactly, and both walk the open positions in key order (customer, market), so the
//! movements' order and ids are the same in every run.

use bevy_ecs::prelude::{IntoScheduleConfigs, Schedule, World};

use crate::sets::{FundingSystems, MarkToMarketSystems};

pub mod daily;
pub mod funding;
#[cfg(test)]
mod tests;

pub(crate) fn plugin(world: &mut World, schedule: &mut Schedule) {
    world.init_resource::<funding::FundingState>();
    schedule.add_systems(
        daily::settle_daily
            .in_set(MarkToMarketSystems)
            .before(crate::positions::value_positions),
    );
    schedule.add_systems(
        (funding::settle_funding, funding::sample_premium)
            .chain()
            .in_set(FundingSystems),
    );
}
