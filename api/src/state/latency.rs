//! `perpsim serve --order-latency` (issue 39 item 3): each order entry (place, cancel, amend)
//! reaches the venue a drawn delay after it arrives, as it would over a real network, so a
//! broker's client meets the races a venue's latency makes: a quote moved before the order
//! lands, a cancel that comes too late.
//!
//! - Delays are drawn from `perpsim_core::latency`'s models, from a generator seeded by the
//!   data dir's seed (mixed with a stream of its own), one per entry in the order entries
//!   arrive. What the engine applies is journaled when it applies it, so a replay of the
//!   journal is the same venue whatever the draws were.
//! - Realtime clock: the entry waits its delay on the wall clock, then goes to the engine.
//! - Manual clock: the entry is held at `now + delay` on the simulation clock until an advance
//!   reaches that instant (`admin::simulation` stops there and sends it), so it acts at its
//!   own time, between the seconds around it; its request is answered then. An entry that
//!   arrives while an advance runs is sent at the end of the advance's current step at the
//!   latest. A zero delay goes at once.
//! - The answer is the entry's own, as without latency; the request's nonce is spent with the
//!   command, when it is applied (an entry still held when the server stops is never applied,
//!   and its nonce not spent: the client may send it again).
//!
//! Bounds: a delay is at most a minute (`MAX_LATENCY_MS`); held entries are requests in
//! flight, bounded as connections are (`--max-connections`), a boxed command each.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use perpsim_core::latency::LatencyModel;
use perpsim_core::rng::SimRng;
use perpsim_core::time::Timestamp;
use tokio::sync::oneshot;

use crate::state::metrics;

/// What the delays' seed is mixed with, so they are not the engine's draws.
const STREAM: u64 = 0x6f72_6465_722d_6c61;

/// An entry held for an advance: sends its command when run.
type Held = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// The model, its generator and the entries held on the manual clock.
pub struct OrderLatency {
    model: LatencyModel,
    rng: Mutex<SimRng>,
    /// By (due instant, arrival): one instant's entries in the order they arrived.
    held: Mutex<BTreeMap<(Timestamp, u64), Held>>,
    arrivals: AtomicU64,
}

impl OrderLatency {
    pub fn new(model: LatencyModel, seed: u64) -> Self {
        OrderLatency {
            model,
            rng: Mutex::new(SimRng::from_seed(seed ^ STREAM)),
            held: Mutex::new(BTreeMap::new()),
            arrivals: AtomicU64::new(0),
        }
    }

    /// One entry's delay, in milliseconds.
    fn draw(&self) -> i64 {
        self.model.draw(&mut self.rng.lock().expect("not poisoned"))
    }

    /// Runs `send` once the entry's delay has passed: on the wall clock (`manual` false), or
    /// when an advance of the manual clock, now at `now`, reaches `now + delay`. `None` when
    /// the entry was dropped unsent (the server stopping).
    pub async fn enter<T, F>(&self, manual: bool, now: Timestamp, send: F) -> Option<T>
    where
        T: Send + 'static,
        F: Future<Output = T> + Send + 'static,
    {
        let delay = self.draw();
        if !manual || delay == 0 {
            let wait = std::time::Duration::from_millis(delay.unsigned_abs());
            tokio::time::sleep(wait).await;
            return Some(send.await);
        }
        let (tx, rx) = oneshot::channel();
        let held: Held = Box::new(move || {
            Box::pin(async move {
                let _ = tx.send(send.await);
            })
        });
        let arrival = self.arrivals.fetch_add(1, Ordering::Relaxed);
        let due = now.plus_millis(delay);
        {
            let mut entries = self.held.lock().expect("not poisoned");
            entries.insert((due, arrival), held);
            metrics::held_entries(entries.len());
        }
        rx.await.ok()
    }

    /// When the first held entry falls due on the manual clock.
    pub fn next_due(&self) -> Option<Timestamp> {
        let held = self.held.lock().expect("not poisoned");
        held.keys().next().map(|(due, _)| *due)
    }

    /// Sends the held entries due at `now`, in order, each once its command is answered.
    pub async fn send_due(&self, now: Timestamp) {
        loop {
            let entry = {
                let mut held = self.held.lock().expect("not poisoned");
                let due = match held.first_entry() {
                    Some(e) if e.key().0 <= now => Some(e.remove()),
                    _ => None,
                };
                metrics::held_entries(held.len());
                due
            };
            match entry {
                Some(send) => send().await,
                None => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Issue 39 item 3: on the manual clock an entry waits for its instant and entries go in
    /// the order of their instants, whatever order they arrived in.
    #[tokio::test]
    async fn held_entries_go_when_the_clock_reaches_them_in_the_order_of_their_instants() {
        let latency = Arc::new(OrderLatency::new(LatencyModel::Constant(40), 1));
        let start = Timestamp::from_millis(1_000);
        let sent = Arc::new(Mutex::new(Vec::new()));
        let mut waiting = Vec::new();
        for (i, now) in [(0, start.plus_millis(5)), (1, start)] {
            let (latency, sent) = (latency.clone(), sent.clone());
            waiting.push(tokio::spawn(async move {
                let send = async move {
                    sent.lock().unwrap().push(i);
                    i
                };
                latency.enter(true, now, send).await
            }));
            tokio::task::yield_now().await;
        }
        while latency.held.lock().unwrap().len() < 2 {
            tokio::task::yield_now().await;
        }
        assert_eq!(latency.next_due(), Some(start.plus_millis(40)));
        latency.send_due(start.plus_millis(39)).await;
        assert!(sent.lock().unwrap().is_empty(), "not due yet");
        latency.send_due(start.plus_millis(45)).await;
        assert_eq!(*sent.lock().unwrap(), [1, 0]);
        let answers: Vec<_> = futures_join(waiting).await;
        assert_eq!(answers, [Some(0), Some(1)]);
        assert_eq!(latency.next_due(), None);
    }

    async fn futures_join(tasks: Vec<tokio::task::JoinHandle<Option<i32>>>) -> Vec<Option<i32>> {
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap());
        }
        out
    }
}
