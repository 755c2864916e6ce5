//! Risk (D10, §2.2, §2.6, §3.3, §6 rules 4–5): each run, after mark-to-market and funding,
//! the margin state per settlement currency of every account that run can have changed
//! (`margin`), the liquidations it calls for and the insurance covers after them
//! (`liquidation`), and, every notice interval, the position depreciation notices of the
//! positions whose threshold the mark reached (`notices`).
//!
//! Each settlement currency margins its own instruments: its balance is the collateral of the
//! positions settling in it, as the D5 placement check already takes margin in the
//! instrument's currency, so a loss in one currency is never met by the other.
//!
//! `leverage_ratio` and the state are decided by multiplication (`equity < threshold ×
//! notional`), never a division per account; the read side derives the account summary's
//! `margin_state` and `leverage_ratio` with the same pure functions (`core::risk`) from the
//! figures it publishes. A liquidation's forced fills have no order (`FillSide::order` is
//! `None`, reference_id null); the insurance account is funded at genesis as venue capital
//! (`Flows::capital`) and covers, in a `liquidation` row with no trade, any balance a booking
//! left below zero, net of pending withdrawals (which the margin pass already weighs as gone
//! and which complete whatever happens meanwhile), once no position in that currency is open
//! (the ledger lists such accounts as it books). Depreciation levels live on the position
//! (`Position::noticed`, reset by fills on an increase, flip or reopen).

use std::collections::BTreeMap;

use bevy_ecs::prelude::{IntoScheduleConfigs, Resource, Schedule, World};
use perpsim_core::ids::CustomerCode;
use perpsim_core::instrument::Asset;
use perpsim_core::risk::MarginState;
use serde::{Deserialize, Serialize};

use crate::records::log::{LogDigest, ProjectedLog};
use crate::records::risk::{Notification, RiskRecord};
use crate::sets::{DepreciationSystems, MarginAssessment};

pub mod liquidation;
pub mod margin;
pub mod notices;
#[cfg(test)]
mod rescan_tests;
#[cfg(test)]
mod tests;

pub(crate) fn plugin(world: &mut World, schedule: &mut Schedule) {
    world.init_resource::<MarginStates>();
    world.init_resource::<RiskLog>();
    world.init_resource::<margin::MarginBook>();
    world.init_resource::<liquidation::Liquidating>();
    world.init_resource::<notices::Notifications>();
    world.init_resource::<notices::NoticeTriggers>();
    schedule.add_systems(
        (
            margin::assess_margin,
            liquidation::liquidate.run_if(liquidation::anything_to_do),
        )
            .chain()
            .in_set(MarginAssessment),
    );
    schedule.add_systems(notices::check_depreciation.in_set(DepreciationSystems));
}

/// Accounts not in the normal state, by (customer, settlement currency): what a margin state
/// change is judged against, so a margin call is recorded once, on entry. State.
#[derive(Resource, Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarginStates(pub BTreeMap<(CustomerCode, Asset), MarginState>);

/// Every margin state change, in the order they happened. State, append-only; a server's
/// engine lets the records go once the journal's projection holds them (its digest stays).
#[derive(Resource, Debug, Clone, Default, PartialEq, Eq)]
pub struct RiskLog(pub ProjectedLog<RiskRecord>);

/// What risk keeps between runs (snapshots hold it): the margin states, and the digests of
/// its two logs, whose rows a snapshot carries outside the state hash
/// (`engine::snapshot::HeldHistory`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RiskState {
    pub states: MarginStates,
    /// The margin state changes'.
    pub log: LogDigest,
    pub notifications: LogDigest,
}

/// A restore's risk state, with the rows its logs still hold (`EngineState::decode` checked
/// them against the state's digests); the margin book is rebuilt by the runs that follow.
pub(crate) fn insert(
    world: &mut World,
    state: RiskState,
    (log, notifications): (ProjectedLog<RiskRecord>, ProjectedLog<Notification>),
) {
    world.insert_resource(margin::MarginBook::restored());
    world.insert_resource(notices::NoticeTriggers::default());
    world.insert_resource(state.states);
    world.insert_resource(RiskLog(log));
    world.insert_resource(notices::Notifications(notifications));
}

pub(crate) fn extract(world: &World) -> RiskState {
    let RiskStateRef {
        states,
        log,
        notifications,
    } = borrow(world);
    RiskState {
        states: states.clone(),
        log,
        notifications,
    }
}

/// [`RiskState`] as the world holds it, field for field (it encodes to the same bytes).
#[derive(Serialize)]
pub(crate) struct RiskStateRef<'a> {
    states: &'a MarginStates,
    log: LogDigest,
    notifications: LogDigest,
}

pub(crate) fn borrow(world: &World) -> RiskStateRef<'_> {
    RiskStateRef {
        states: world.resource::<MarginStates>(),
        log: world.resource::<RiskLog>().0.digest(),
        notifications: world.resource::<notices::Notifications>().0.digest(),
    }
}
