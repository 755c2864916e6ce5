//! Publishing the read view (`view`, `market_view`) from what changed (`crate::dirty`), in
//! `PublishSystems` (its `ViewPublishing` part), unless publishing is off (a replay).

use bevy_ecs::prelude::{IntoScheduleConfigs, Schedule, World};

use crate::sets::{EventPublishing, ViewPublishing};

pub mod events;
pub mod market_view;
pub mod view;

pub(crate) fn plugin(world: &mut World, schedule: &mut Schedule) {
    world.init_resource::<events::EventCursors>();
    world.init_resource::<events::StreamState>();
    world.init_resource::<events::MarketStates>();
    schedule.add_systems(events::emit_events.in_set(EventPublishing));
    schedule.add_systems(
        (
            view::publish_clock,
            view::publish_brokers,
            view::publish_customers,
            view::publish_instruments,
            view::publish_funding,
            view::publish_ledger,
            view::publish_faults,
            market_view::publish_trading,
        )
            .chain()
            .in_set(ViewPublishing)
            .run_if(view::publishing_enabled),
    );
}
#[cfg(test)]
mod events_tests;
