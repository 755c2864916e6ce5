//! Counters exposed at `/metrics` in the Prometheus text format.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[derive(Default)]
pub struct Metrics {
    pub ticks: AtomicU64,
    pub commands: AtomicU64,
    pub journal_commit_ns: AtomicU64,
    pub journal_commit_max_ns: AtomicU64,
    pub snapshots: AtomicU64,
    /// HTTP responses by status class: index 1 = 1xx … 5 = 5xx.
    pub responses: [AtomicU64; 6],
    pub unauthorized: AtomicU64,
    pub rate_limited: AtomicU64,
    pub connections_open: AtomicU64,
    /// Connections answered 503 at a connection bound with none idle to give way.
    pub connections_refused: AtomicU64,
    /// Idle keep-alive connections closed to admit a new one at a bound.
    pub connections_evicted: AtomicU64,
    /// Connections closed past their header, body or idle deadline.
    pub connections_timed_out: AtomicU64,
    pub ws_connections_open: AtomicU64,
    /// Frames queued for WebSocket connections (one per connection that receives it).
    pub ws_frames: AtomicU64,
    /// WebSocket connections closed with 1008 `slow consumer`.
    pub ws_slow_consumers: AtomicU64,
}

impl Metrics {
    pub fn record_commit(&self, ns: u64) {
        self.journal_commit_ns.fetch_add(ns, Relaxed);
        self.journal_commit_max_ns.fetch_max(ns, Relaxed);
    }

    pub fn record_response(&self, status: u16) {
        let class = usize::from(status / 100).min(5);
        self.responses[class].fetch_add(1, Relaxed);
    }

    pub fn render(&self, journal_tick: u64) -> String {
        let mut out = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, value: String| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        };
        let secs = |ns: u64| format!("{:.9}", ns as f64 / 1e9);
        metric(
            "perpsim_engine_ticks_total",
            "counter",
            "Ticks applied and journaled.",
            self.ticks.load(Relaxed).to_string(),
        );
        metric(
            "perpsim_engine_commands_total",
            "counter",
            "Commands applied and journaled.",
            self.commands.load(Relaxed).to_string(),
        );
        metric(
            "perpsim_journal_tick",
            "gauge",
            "Number of the last journaled tick.",
            journal_tick.to_string(),
        );
        metric(
            "perpsim_journal_commit_seconds_total",
            "counter",
            "Time spent in durable journal commits.",
            secs(self.journal_commit_ns.load(Relaxed)),
        );
        metric(
            "perpsim_journal_commit_seconds_max",
            "gauge",
            "Longest durable journal commit.",
            secs(self.journal_commit_max_ns.load(Relaxed)),
        );
        metric(
            "perpsim_snapshots_total",
            "counter",
            "Snapshots written.",
            self.snapshots.load(Relaxed).to_string(),
        );
        metric(
            "perpsim_auth_unauthorized_total",
            "counter",
            "Requests refused with 401.",
            self.unauthorized.load(Relaxed).to_string(),
        );
        metric(
            "perpsim_auth_rate_limited_total",
            "counter",
            "Requests refused with 429.",
            self.rate_limited.load(Relaxed).to_string(),
        );
        metric(
            "perpsim_connections_open",
            "gauge",
            "HTTP connections open now.",
            self.connections_open.load(Relaxed).to_string(),
        );
        metric(
            "perpsim_connections_refused_total",
            "counter",
            "Connections refused at a connection bound with none idle to give way.",
            self.connections_refused.load(Relaxed).to_string(),
        );
        metric(
            "perpsim_connections_evicted_total",
            "counter",
            "Idle keep-alive connections closed to admit a new one at a connection bound.",
            self.connections_evicted.load(Relaxed).to_string(),
        );
        metric(
            "perpsim_connections_timed_out_total",
            "counter",
            "Connections closed past their header, body or idle deadline.",
            self.connections_timed_out.load(Relaxed).to_string(),
        );
        metric(
            "perpsim_ws_connections_open",
            "gauge",
            "WebSocket connections open now.",
            self.ws_connections_open.load(Relaxed).to_string(),
        );
        metric(
            "perpsim_ws_frames_total",
            "counter",
            "Frames queued for WebSocket connections, one per receiving connection.",
            self.ws_frames.load(Relaxed).to_string(),
        );
        metric(
            "perpsim_ws_slow_consumers_total",
            "counter",
            "WebSocket connections closed with 1008 slow consumer.",
            self.ws_slow_consumers.load(Relaxed).to_string(),
        );
        let _ = writeln!(
            out,
            "# HELP perpsim_http_responses_total HTTP responses by status class.\n# TYPE perpsim_http_responses_total counter"
        );
        for class in 1..=5 {
            let _ = writeln!(
                out,
                "perpsim_http_responses_total{{class=\"{class}xx\"}} {}",
                self.responses[class].load(Relaxed)
            );
        }
        out
    }
}
