//! The tick's system sets, named for what they do and ordered in this one place.
//!
//! Every run of the schedule goes through them in this order; a set with nothing in it yet is
//! where its capability plugs in when it lands. Where a concern must run before or after
//! another's systems inside one set, a named sub-set says so here, so no concern names
//! another's function. This module is a leaf: it imports no concern, and the engine composes
//! the concerns' plugins onto the schedule it makes. The executor is single-threaded and
//! ambiguity detection is an error, so the order of any two systems touching the same data is
//! explicit.

use bevy_ecs::prelude::{IntoScheduleConfigs, Schedule, SystemSet};
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
/// Transfers whose delay has passed completed (a fill is booked where it happens, in
/// `MatchSystems` and `TriggerSystems`).
#[derive(SystemSet, Debug, Clone, PartialEq, Eq, Hash)]
pub struct TransferSystems;
/// Daily settlement at the marks, then the valuation bases of the positions that changed.
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

/// Inside `IngestSystems`: the tick's commands, then the price feed's step (a price command
/// and the walk's step of the same instant compose in that order).
#[derive(SystemSet, Debug, Clone, PartialEq, Eq, Hash)]
pub struct CommandIngest;
#[derive(SystemSet, Debug, Clone, PartialEq, Eq, Hash)]
pub struct PriceSteps;
/// Inside `MatchSystems`: the recorded market's trades and books of the run (issue 39), so
/// at one instant the recording acts before the customers' orders; then order requests and
/// expiry; then the market maker's re-quote, so a run ends with its ladder quoted.
#[derive(SystemSet, Debug, Clone, PartialEq, Eq, Hash)]
pub struct RecordedMarket;
#[derive(SystemSet, Debug, Clone, PartialEq, Eq, Hash)]
pub struct OrderHandling;
#[derive(SystemSet, Debug, Clone, PartialEq, Eq, Hash)]
pub struct Quoting;
/// Inside `MarkToMarketSystems`: daily settlement books at the marks, then the bases of the
/// positions it and the fills changed are rebuilt.
#[derive(SystemSet, Debug, Clone, PartialEq, Eq, Hash)]
pub struct Settlement;
#[derive(SystemSet, Debug, Clone, PartialEq, Eq, Hash)]
pub struct ValuationPass;
/// Inside `MarginSystems`: margin states judged and liquidations run, then the bases of the
/// positions they moved rebuilt.
#[derive(SystemSet, Debug, Clone, PartialEq, Eq, Hash)]
pub struct MarginAssessment;
#[derive(SystemSet, Debug, Clone, PartialEq, Eq, Hash)]
pub struct Revaluation;
/// Inside `PublishSystems`: the run's events for the push channels (always, a replay too),
/// the read view, then the invariants (while the engine audits).
#[derive(SystemSet, Debug, Clone, PartialEq, Eq, Hash)]
pub struct EventPublishing;
#[derive(SystemSet, Debug, Clone, PartialEq, Eq, Hash)]
pub struct ViewPublishing;
#[derive(SystemSet, Debug, Clone, PartialEq, Eq, Hash)]
pub struct Audit;

/// The documented order (ARCHITECTURE.md, "The tick").
pub const ORDER: [&str; 9] = [
    "IngestSystems",
    "MatchSystems",
    "TriggerSystems",
    "TransferSystems",
    "MarkToMarketSystems",
    "FundingSystems",
    "MarginSystems",
    "DepreciationSystems",
    "PublishSystems",
];

/// An empty schedule with the sets and sub-sets in their one order; the engine adds each
/// concern's plugin to it.
pub fn schedule() -> Schedule {
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
            TransferSystems,
            MarkToMarketSystems,
            FundingSystems,
            MarginSystems,
            DepreciationSystems,
            PublishSystems,
        )
            .chain(),
    );
    schedule.configure_sets((CommandIngest, PriceSteps).chain().in_set(IngestSystems));
    schedule.configure_sets(
        (RecordedMarket, OrderHandling, Quoting)
            .chain()
            .in_set(MatchSystems),
    );
    schedule.configure_sets(
        (Settlement, ValuationPass)
            .chain()
            .in_set(MarkToMarketSystems),
    );
    schedule.configure_sets(
        (MarginAssessment, Revaluation)
            .chain()
            .in_set(MarginSystems),
    );
    schedule.configure_sets(
        (EventPublishing, ViewPublishing, Audit)
            .chain()
            .in_set(PublishSystems),
    );
    schedule
}
