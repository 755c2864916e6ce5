//! The tick's system sets, named for what they do and ordered in this one place.
//!
//! Every run of the schedule goes through them in this order; a set with nothing in it yet is
//! where its capability plugs in when it lands. The executor is single-threaded and ambiguity
//! detection is an error, so the order of any two systems touching the same data is explicit.

use bevy_ecs::prelude::{IntoScheduleConfigs, Schedule, SystemSet};
use bevy_ecs::schedule::{LogLevel, ScheduleBuildSettings, SingleThreadedExecutor};

use crate::{accounts, clock, desk, ingest, positions, view};

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

pub fn build_schedule() -> Schedule {
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
    schedule.add_systems(ingest::ingest_commands.in_set(IngestSystems));
    schedule.add_systems(
        (desk::handle_order_requests, desk::expire_orders)
            .chain()
            .in_set(MatchSystems),
    );
    schedule.add_systems(desk::fire_triggers.in_set(TriggerSystems));
    schedule.add_systems(accounts::complete_due_transfers.in_set(FillSystems));
    schedule.add_systems(positions::value_positions.in_set(MarkToMarketSystems));
    schedule.add_systems(clock::rearm_funding_hour.in_set(FundingSystems));
    schedule.add_systems(
        (
            view::publish_clock,
            view::publish_brokers,
            view::publish_customers,
            view::publish_instruments,
            view::publish_ledger,
            crate::market_view::publish_trading,
        )
            .chain()
            .in_set(PublishSystems)
            .run_if(view::publishing_enabled),
    );
    // Debug and test builds check the money invariants after every run; release builds
    // (benchmarks, production) trust the arithmetic the tests proved.
    #[cfg(debug_assertions)]
    schedule.add_systems(
        accounts::assert_money_invariants
            .in_set(PublishSystems)
            .after(view::publish_ledger),
    );
    #[cfg(debug_assertions)]
    schedule.add_systems(
        crate::exchange::assert_trading_invariants
            .in_set(PublishSystems)
            .after(accounts::assert_money_invariants)
            .after(crate::market_view::publish_trading),
    );
    schedule
}
