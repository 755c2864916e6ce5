//! `perpsim serve --market-data-latency` (issue 39 item 3): the push channels deliver each
//! tick a drawn delay after the engine made it, as a feed reaches a client over a network,
//! so a broker's client meets stale data: a quote it sees that has already moved.
//!
//! - One draw a tick, from the scenario's models (`perpsim_core::latency`), seeded by the
//!   data dir's seed (mixed with a stream of its own). A tick never overtakes the one before
//!   it: it goes at the later of its own due time and its predecessor's, so every channel's
//!   order and its book's `sequence` are kept, and a subscription's snapshot is rendered
//!   from the same delayed view as the updates that follow it.
//! - The delay is wall time on either clock: it is the client's network, not the venue's.
//!   Nothing of the engine's state changes: the journal and the REST reads are not delayed.
//! - Bound: [`MAX_WAITING`] ticks wait at most; past it the oldest goes at once (frames come
//!   early rather than memory growing).

use std::collections::VecDeque;

use perpsim_core::latency::LatencyModel;
use perpsim_core::rng::SimRng;
use tokio::time::{Duration, Instant};

use crate::state::host::TickEvents;

/// Ticks waiting for their time at most (a minute of a busy engine's ticks).
pub const MAX_WAITING: usize = 65_536;

/// What the delays' seed is mixed with, so they are not the engine's or the orders' draws.
const STREAM: u64 = 0x6d61_726b_6574_2d64;

/// The model, its generator and the ticks waiting.
pub struct FrameDelay {
    model: LatencyModel,
    rng: SimRng,
    waiting: VecDeque<(Instant, TickEvents)>,
}

impl FrameDelay {
    pub fn new(model: LatencyModel, seed: u64) -> Self {
        FrameDelay {
            model,
            rng: SimRng::from_seed(seed ^ STREAM),
            waiting: VecDeque::new(),
        }
    }

    /// Takes in a tick arrived at `now`; returns the oldest one, to go at once, when the
    /// bound is met.
    pub fn hold(&mut self, tick: TickEvents, now: Instant) -> Option<TickEvents> {
        let drawn = now + Duration::from_millis(self.model.draw(&mut self.rng).unsigned_abs());
        let due = self
            .waiting
            .back()
            .map_or(drawn, |(last, _)| drawn.max(*last));
        let early = match self.waiting.len() >= MAX_WAITING {
            true => self.waiting.pop_front().map(|(_, t)| t),
            false => None,
        };
        self.waiting.push_back((due, tick));
        early
    }

    /// When the first waiting tick is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.waiting.front().map(|(due, _)| *due)
    }

    /// The next waiting tick due at `now`.
    pub fn take_due(&mut self, now: Instant) -> Option<TickEvents> {
        match self.waiting.front() {
            Some((due, _)) if *due <= now => self.waiting.pop_front().map(|(_, t)| t),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use crate::state::host::TickBundle;
    use perpsim_systems::records::clock::ClockView;

    fn tick() -> TickEvents {
        Arc::new(TickBundle {
            view: Arc::new(perpsim_systems::ReadView::new(ClockView {
                mode: perpsim_core::clock::ClockMode::Manual,
                now: perpsim_core::time::Timestamp::EPOCH,
            })),
            events: Vec::new(),
        })
    }

    /// Issue 39 item 3: ticks go in the order they came, each at its draw or its
    /// predecessor's time, whichever is later; past the bound the oldest goes at once.
    #[test]
    fn ticks_wait_their_draw_in_order_and_the_bound_sends_the_oldest_early() {
        let model = LatencyModel::Empirical(vec![0, 500]);
        let mut delay = FrameDelay::new(model, 3);
        let start = Instant::now();
        for _ in 0..64 {
            assert!(delay.hold(tick(), start).is_none());
        }
        let dues: Vec<Instant> = delay.waiting.iter().map(|(due, _)| *due).collect();
        assert!(dues.windows(2).all(|w| w[0] <= w[1]), "never overtaken");
        let slow = start + Duration::from_millis(500);
        let first_slow = dues.iter().position(|d| *d == slow).expect("a 500 ms draw");
        assert!(
            dues[first_slow..].iter().all(|d| *d == slow),
            "later ones wait for it"
        );
        let mut sent = 0;
        while delay.take_due(start).is_some() {
            sent += 1;
        }
        assert_eq!(sent, first_slow, "the zero draws before it go at once");
        assert_eq!(delay.next_due(), Some(slow));
        while delay.waiting.len() < MAX_WAITING {
            delay.hold(tick(), start);
        }
        assert!(delay.hold(tick(), start).is_some(), "the oldest goes early");
        assert_eq!(delay.waiting.len(), MAX_WAITING);
    }
}
