//! Simulation time and the scheduler of timed events (D1, D3 clock advance).
//!
//! Time never comes from the machine: each tick carries its instant, and the scheduler fires
//! due events in (time, insertion) order, each instant as its own run of the schedule, so a
//! manual advance over a span behaves exactly as if the time had passed.

use std::collections::BTreeMap;

use bevy_ecs::prelude::Resource;
use perpsim_core::clock::ClockMode;
use perpsim_core::time::{HOUR_MS, Timestamp};
use serde::{Deserialize, Serialize};

/// The clock as the read view and the clock commands report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockView {
    pub mode: ClockMode,
    pub now: Timestamp,
}

#[derive(Resource, Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimClock {
    pub mode: ClockMode,
    pub now: Timestamp,
}

/// A timed event. Capabilities add variants as they land (transfer completion, GTD expiry,
/// daily settlement, depreciation evaluation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScheduledEvent {
    /// The whole hour at which funding settles (interface §1); re-arms itself for the next.
    FundingHour,
    /// A pending deposit or withdrawal reaches created_at + transfer delay (D7); carries the
    /// movement's ledger sequence number, so completion needs no lookup.
    TransferDue(u64),
    /// A GTD order reaches its expire_time (D5); carries the order id. An amend that moves
    /// the time schedules anew, and a stale event finds the order's time unchanged-or-later.
    OrderExpiry(u64),
}

/// Upper bound on pending timed events; a scheduler this full means a runaway producer.
pub const MAX_SCHEDULED: usize = 10_000_000;

#[derive(Resource, Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scheduler {
    /// Keyed by (due time, insertion sequence): ties fire in insertion order.
    queue: BTreeMap<(Timestamp, u64), ScheduledEvent>,
    next_seq: u64,
}

impl Scheduler {
    pub fn schedule(&mut self, at: Timestamp, event: ScheduledEvent) {
        assert!(self.queue.len() < MAX_SCHEDULED, "scheduler bound reached");
        self.queue.insert((at, self.next_seq), event);
        self.next_seq += 1;
    }

    /// Time of the earliest pending event.
    pub fn next_due(&self) -> Option<Timestamp> {
        self.queue.first_key_value().map(|((at, _), _)| *at)
    }

    /// Removes and returns every event due exactly at the earliest time, if that is ≤ `until`.
    pub fn pop_earliest_batch(
        &mut self,
        until: Timestamp,
    ) -> Option<(Timestamp, Vec<ScheduledEvent>)> {
        let at = self.next_due().filter(|at| *at <= until)?;
        let mut batch = Vec::new();
        while let Some(entry) = self.queue.first_entry() {
            if entry.key().0 != at {
                break;
            }
            batch.push(entry.remove());
        }
        Some((at, batch))
    }
}

/// Events due at the current run's instant, consumed by the systems of their domain.
#[derive(Resource, Debug, Default)]
pub struct DueEvents(pub Vec<ScheduledEvent>);

/// Re-arms the hourly funding timer after it fired (FundingSystems).
pub fn rearm_funding_hour(
    clock: bevy_ecs::prelude::Res<SimClock>,
    due: bevy_ecs::prelude::Res<DueEvents>,
    mut scheduler: bevy_ecs::prelude::ResMut<Scheduler>,
) {
    if due.0.contains(&ScheduledEvent::FundingHour) {
        scheduler.schedule(
            clock.now.next_multiple_of(HOUR_MS),
            ScheduledEvent::FundingHour,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_batches_in_time_then_insertion_order() {
        let mut s = Scheduler::default();
        let t = |ms| Timestamp::from_millis(ms);
        s.schedule(t(20), ScheduledEvent::FundingHour);
        s.schedule(t(10), ScheduledEvent::FundingHour);
        s.schedule(t(20), ScheduledEvent::FundingHour);
        assert_eq!(s.pop_earliest_batch(t(5)), None);
        assert_eq!(
            s.pop_earliest_batch(t(30)).unwrap(),
            (t(10), vec![ScheduledEvent::FundingHour])
        );
        let (at, batch) = s.pop_earliest_batch(t(30)).unwrap();
        assert_eq!((at, batch.len()), (t(20), 2));
        assert_eq!(s.next_due(), None);
    }
}
