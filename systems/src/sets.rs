//! The tick's system sets, named for what they do and ordered in this one place.
//!
//! Every run of the schedule goes through them in this order; a set with nothing in it yet is
//! where its capability plugs in when it lands. The executor is single-threaded and ambiguity
//! detection is an error, so the order of any two systems touching the same data is explicit.

use bevy_ecs::prelude::{IntoScheduleConfigs, Schedule, SystemSet, World};
use bevy_ecs::schedule::{LogLevel, ScheduleBuildSettings, SingleThreadedExecutor};

/// Commands of the tick applied in arrival order; due timers handed to their domains.
#[derive(SystemSet, Debug, Clone, PartialEq, Eq, Hash)]
pub struct IngestSystems;
/// Order books matched.
#[derive(SystemSet, Debug, Clone, PartialEq, Eq, Hash)]
pub struct MatchSystems;
/// Stop and take-profit triggers checked against the new prices.
#[derive(SystemSet, Debug, Clone, PartialEq, Eq, Hash)]
pub struct TriggerSystems;
/// Fills booked: positions, fees, ledger movements.
#[derive(SystemSet, Debug, Clone, PartialEq, Eq, Hash)]
pub struct FillSystems;
/// Open positions valued at the mark price (daily settlement lands here too).
#[derive(SystemSet, Debug, Clone, PartialEq, Eq, Hash)]
pub struct MarkToMarketSystems;
/// Hourly funding.
#[derive(SystemSet, Debug, Clone, PartialEq, Eq, Hash)]
pub struct FundingSystems;
/// Margin states, margin calls, liquidation.
#[derive(SystemSet, Debug, Clone, PartialEq, Eq, Hash)]
pub struct MarginSystems;
/// Position depreciation notices.
#[derive(SystemSet, Debug, Clone, PartialEq, Eq, Hash)]
pub struct DepreciationSystems;
/// The read view updated from what changed.
#[derive(SystemSet, Debug, Clone, PartialEq, Eq, Hash)]
pub struct PublishSystems;

/// The documented order (ARCHITECTURE.md, "The tick").
pub const ORDER: [&str; 9] = [
    "IngestSystems",
    "MatchSystems",
    "TriggerSystems",
    "FillSystems",
    "MarkToMarketSystems",
    "FundingSystems",
    "MarginSystems",
    "DepreciationSystems",
    "PublishSystems",
];

/// The schedule, with each concern's systems and default resources registered by its
/// plugin. The set order above is the only order between concerns.
pub fn build(world: &mut World) -> Schedule {
    let mut schedule = Schedule::default();
    schedule.set_executor(SingleThreadedExecutor::new());
    schedule.set_build_settings(ScheduleBuildSettings {
        ambiguity_detection: LogLevel::Error,
        ..Default::default()
    });
    schedule.configure_sets(
        (
            IngestSystems,
            MatchSystems,
            TriggerSystems,
            FillSystems,
            MarkToMarketSystems,
            FundingSystems,
            MarginSystems,
            DepreciationSystems,
            PublishSystems,
        )
            .chain(),
    );
    crate::engine::plugin(world, &mut schedule);
    crate::trading::plugin(world, &mut schedule);
    crate::money::plugin(world, &mut schedule);
    crate::positions::plugin(world, &mut schedule);
    crate::market::plugin(world, &mut schedule);
    crate::settlement::plugin(world, &mut schedule);
    crate::risk::plugin(world, &mut schedule);
    crate::publish::plugin(world, &mut schedule);
    crate::audit::plugin(world, &mut schedule);
    schedule
}
