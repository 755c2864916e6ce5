//! How far the log's thread has published the engine's ticks (made them durable, then
//! answered them), and a bounded wait on it for the engine thread: the tick's linger.
//!
//! Why the engine lingers: a tick applied while an earlier one is still on its way to disk
//! cannot be answered before that one is durable (answers leave in order), so applying it at
//! once buys its senders nothing; waiting until the earlier tick is published, at most
//! [`TICK_LINGER`], lets the requests that arrive meanwhile join it, and every tick costs the
//! engine, the journal's writer and the log's thread a hand-off, a wake-up and a commit
//! whatever it holds. A request that finds nothing in flight is applied at once, so a lone
//! client's round trip does not change. PostgreSQL's `commit_delay` with `commit_siblings`
//! makes the same trade for the same reason.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// Longest a tick waits for the tick before it to be published.
pub(super) const TICK_LINGER: Duration = Duration::from_micros(200);

/// The engine's last tick published, and the engine thread while it waits for a later one.
pub(super) struct Published {
    ticks: AtomicU64,
    /// Whether the engine thread waits: only then does a publication wake it.
    waiting: AtomicBool,
    engine: OnceLock<Thread>,
}

impl Published {
    /// From `ticks`, the engine's last tick when the host starts (all durable by then).
    pub(super) fn new(ticks: u64) -> Published {
        Published {
            ticks: AtomicU64::new(ticks),
            waiting: AtomicBool::new(false),
            engine: OnceLock::new(),
        }
    }

    /// The log's thread published the engine's tick `tick` (its view's number): wakes the
    /// engine thread if it waits.
    pub(super) fn note(&self, tick: u64) {
        // Sequentially consistent with `wait_for`'s store and load: either the engine sees
        // this count, or this thread sees it waiting and wakes it (an unpark before its park
        // makes that park return at once).
        self.ticks.fetch_max(tick, SeqCst);
        if self.waiting.load(SeqCst)
            && let Some(engine) = self.engine.get()
        {
            engine.unpark();
        }
    }

    /// On the engine thread: waits until `tick` is published, at most `linger`; returns at
    /// once when it is already.
    pub(super) fn wait_for(&self, tick: u64, linger: Duration) {
        if self.ticks.load(SeqCst) >= tick {
            return;
        }
        self.engine.get_or_init(std::thread::current);
        let deadline = Instant::now() + linger;
        self.waiting.store(true, SeqCst);
        while self.ticks.load(SeqCst) < tick {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            // Returns early on an unpark, or spuriously: the loop looks again.
            std::thread::park_timeout(deadline - now);
        }
        self.waiting.store(false, SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn a_tick_with_nothing_in_flight_does_not_wait_issue_37() {
        let published = Published::new(7);
        let started = Instant::now();
        published.wait_for(7, Duration::from_secs(60));
        assert!(started.elapsed() < Duration::from_secs(30));
    }

    #[test]
    fn the_wait_ends_when_the_tick_before_is_published_not_at_the_linger_issue_37() {
        let published = Arc::new(Published::new(0));
        let log = Arc::clone(&published);
        let publisher = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            log.note(1);
        });
        let started = Instant::now();
        published.wait_for(1, Duration::from_secs(60));
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "woken by the note"
        );
        assert_eq!(published.ticks.load(SeqCst), 1);
        publisher.join().unwrap();
    }

    #[test]
    fn the_wait_ends_at_the_linger_when_nothing_is_published_issue_37() {
        let published = Published::new(3);
        let started = Instant::now();
        published.wait_for(4, Duration::from_millis(30));
        assert!(started.elapsed() >= Duration::from_millis(30));
        assert!(!published.waiting.load(SeqCst), "a later note wakes no one");
    }
}
