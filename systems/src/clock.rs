//! Simulation time and the scheduler of timed events (D1, D3 clock advance).
//!
//! Time never comes from the machine: each tick carries its instant, and the scheduler fires
//! due events in (time, insertion) order, each instant as its own run of the schedule, so a
//! manual advance over a span behaves exactly as if the time had passed.

use std::collections::BTreeMap;

use crate::records::clock::ScheduledEvent;
use crate::records::simulation::SimulationSettings;
use bevy_ecs::prelude::{Res, Resource};
use perpsim_core::clock::ClockMode;
use perpsim_core::simulation::{PriceFeed, Simulation};
use perpsim_core::time::{DAY_MS, HOUR_MS, MINUTE_MS, SECOND_MS, Timestamp};
use serde::{Deserialize, Serialize};

#[derive(Resource, Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimClock {
    pub mode: ClockMode,
    pub now: Timestamp,
}

/// Upper bound on pending timed events; a scheduler this full means a runaway producer.
pub const MAX_SCHEDULED: usize = 10_000_000;
/// Room kept for the venue's own timers (the periodic events and their re-arms): past
/// `MAX_SCHEDULED` less this, requests that would schedule (a GTD order, a transfer) are
/// refused instead of the engine stopping at the bound.
const RESERVED_FOR_VENUE: usize = 1_000;

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

    /// Whether a request may still schedule an event (see [`RESERVED_FOR_VENUE`]); if not,
    /// 503 EXCHANGE_ERROR, as for any capacity the venue has run out of.
    pub fn room_for_request(&self) -> Result<(), perpsim_core::Error> {
        match self.queue.len() < MAX_SCHEDULED - RESERVED_FOR_VENUE {
            true => Ok(()),
            false => Err(perpsim_core::Error::new(
                perpsim_core::ErrorCode::ExchangeUnavailable,
                format!("the venue's timer queue is full ({MAX_SCHEDULED} pending); retry later"),
            )),
        }
    }

    /// Removes a pending `event` due at `at`, if there is one: an order that ends or moves its
    /// expiry takes its old timer with it, so each GTD order holds one timer at most and
    /// placing, amending or cancelling cannot pile timers up.
    pub fn cancel(&mut self, at: Timestamp, event: ScheduledEvent) -> bool {
        let found = self
            .queue
            .range((at, 0)..=(at, u64::MAX))
            .find(|(_, e)| **e == event)
            .map(|(key, _)| *key);
        found.is_some_and(|key| self.queue.remove(&key).is_some())
    }

    /// Pending events.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.queue.len()
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

impl DueEvents {
    pub fn has(&self, event: ScheduledEvent) -> bool {
        self.0.contains(&event)
    }
}

/// A run condition: `event` is due in this run. A system that has work only then skips the
/// other runs — every simulated second of the living market is one — without fetching its
/// parameters, which cost more than this look.
pub fn due(event: ScheduledEvent) -> impl FnMut(Res<DueEvents>) -> bool + Clone {
    move |due: Res<DueEvents>| due.has(event)
}

/// A run condition: some event `kind` picks (one that carries its order or movement) is due.
pub fn due_any(kind: fn(&ScheduledEvent) -> bool) -> impl FnMut(Res<DueEvents>) -> bool + Clone {
    move |due: Res<DueEvents>| due.0.iter().any(kind)
}

/// The periodic timers of a fresh engine: funding each hour, premium samples each minute,
/// settlement each midnight, a depreciation check each notice interval and, with the random
/// walk, a price step each second. Each is re-armed for its next instant when it fires, by
/// [`rearm`] alone.
pub fn arm_periodic(scheduler: &mut Scheduler, start: Timestamp, simulation: &Simulation) {
    for (period, event) in periodic(simulation) {
        scheduler.schedule(start.next_multiple_of(period), event);
    }
}

/// Each periodic timer with its period, in the order they are armed (the order of a tie at
/// one instant, which the scheduler's encoding keeps).
fn periodic(simulation: &Simulation) -> impl Iterator<Item = (i64, ScheduledEvent)> {
    let random_walk = simulation.price_feed == PriceFeed::RandomWalk;
    [
        (SECOND_MS, ScheduledEvent::PriceStep),
        (MINUTE_MS, ScheduledEvent::FundingSample),
        (HOUR_MS, ScheduledEvent::FundingHour),
        (DAY_MS, ScheduledEvent::DailySettlement),
        (
            simulation.notice_interval_ms,
            ScheduledEvent::DepreciationCheck,
        ),
    ]
    .into_iter()
    .filter(move |(_, e)| random_walk || *e != ScheduledEvent::PriceStep)
}

/// Re-arms each periodic timer that fired in this run, at its next whole period
/// (FundingSystems, after every consumer of the instant but the depreciation check, which
/// reads nothing of the scheduler).
pub fn rearm(
    clock: Res<SimClock>,
    due: Res<DueEvents>,
    settings: Res<SimulationSettings>,
    mut scheduler: bevy_ecs::prelude::ResMut<Scheduler>,
) {
    for (period, event) in periodic(&settings.0) {
        if due.has(event) {
            scheduler.schedule(clock.now.next_multiple_of(period), event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::ids::OrderId;

    /// Issue 23: a cancelled timer is the one event named at its instant; others at the same
    /// instant, and the same event at another, stay.
    #[test]
    fn cancel_removes_only_the_named_event_at_its_instant() {
        let t = |s: i64| Timestamp::from_millis(s * 1_000);
        let mut s = Scheduler::default();
        s.schedule(t(5), ScheduledEvent::OrderExpiry(OrderId(1)));
        s.schedule(t(5), ScheduledEvent::OrderExpiry(OrderId(2)));
        s.schedule(t(6), ScheduledEvent::OrderExpiry(OrderId(1)));
        assert!(s.cancel(t(5), ScheduledEvent::OrderExpiry(OrderId(1))));
        assert!(
            !s.cancel(t(5), ScheduledEvent::OrderExpiry(OrderId(1))),
            "already gone"
        );
        assert!(!s.cancel(t(7), ScheduledEvent::OrderExpiry(OrderId(2))));
        assert_eq!(s.len(), 2);
        assert_eq!(
            s.pop_earliest_batch(t(6)),
            Some((t(5), vec![ScheduledEvent::OrderExpiry(OrderId(2))]))
        );
        assert!(s.room_for_request().is_ok());
    }

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
