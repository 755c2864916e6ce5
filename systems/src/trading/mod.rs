//! Trading (interface §3.1, §4.3; D5, D6): `exchange` is the state — the markets with their
//! books, the trade records and public fills; `orders` the live orders (entities); `ended`
//! what is kept of ended ones; `book` one limit order book; `refs` the reference index of
//! open orders; `desk` order handling and matching; `fills` the booking of an execution.

use bevy_ecs::prelude::{IntoScheduleConfigs, Res, Schedule, World};

use crate::clock::due_any;
use crate::records::clock::ScheduledEvent;
use crate::sets::{OrderHandling, TriggerSystems};

#[cfg(test)]
mod abuse_tests;
pub mod book;
pub mod desk;
pub mod ended;
pub mod exchange;
pub mod fills;
pub mod orders;
#[cfg(test)]
mod orders_tests;
pub mod refs;
#[cfg(test)]
mod tests;

/// Order requests then GTD expiry in `MatchSystems`, each only in a run that has some (a run
/// of the living market every simulated second has neither, and the desk's parameters cost
/// more to fetch than checking); triggers in `TriggerSystems`, while any order waits on one.
pub(crate) fn plugin(world: &mut World, schedule: &mut Schedule) {
    world.init_resource::<desk::OrderRequests>();
    world.init_resource::<crate::trading::orders::OrderIndex>();
    world.init_resource::<ended::EndedOrders>();
    world.init_resource::<orders::OpenCounts>();
    world.init_resource::<orders::MakerOrderChanges>();
    world.init_resource::<refs::RefIndex>();
    schedule.add_systems(
        (
            desk::handle_order_requests.run_if(|r: Res<desk::OrderRequests>| !r.0.is_empty()),
            desk::expire_orders.run_if(due_any(|e| matches!(e, ScheduledEvent::OrderExpiry(_)))),
        )
            .chain()
            .in_set(OrderHandling),
    );
    schedule.add_systems(
        desk::fire_triggers
            .run_if(|exchange: Res<exchange::Exchange>| {
                exchange.markets.iter().any(|m| !m.triggers.is_empty())
            })
            .in_set(TriggerSystems),
    );
}
