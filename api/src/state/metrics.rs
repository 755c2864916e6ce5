//! The service's metrics, recorded through the `metrics` facade and rendered at `/metrics` in
//! the Prometheus text format by `metrics-exporter-prometheus`. Every name is declared here,
//! with its unit and help text (docs/metrics.md lists them); the parts of the service record
//! through the small functions below and know nothing of the exporter.
//!
//! The recorder is process-wide: `perpsim serve` installs it; anywhere else (replay, tests
//! that build parts of the service) the functions record into nothing.

use std::borrow::Cow;
use std::sync::OnceLock;
use std::time::Duration;

use metrics::{
    Counter, Gauge, Histogram, Unit, counter, describe_counter, describe_gauge, describe_histogram,
    gauge, histogram,
};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

pub const HTTP_REQUEST: &str = "perpsim_http_request_duration_seconds";
pub const AUTH_FAILURES: &str = "perpsim_auth_failures_total";
pub const TICKS: &str = "perpsim_engine_ticks_total";
pub const COMMANDS: &str = "perpsim_engine_commands_total";
pub const TICK: &str = "perpsim_engine_tick_duration_seconds";
pub const TICK_COMMANDS: &str = "perpsim_engine_commands_per_tick";
pub const QUEUE: &str = "perpsim_engine_queue_depth";
pub const PUBLISH: &str = "perpsim_view_publish_duration_seconds";
pub const COMMIT: &str = "perpsim_journal_commit_duration_seconds";
pub const JOURNAL_TICK: &str = "perpsim_journal_tick";
pub const JOURNAL_LAG: &str = "perpsim_journal_lag_ticks";
pub const JOURNAL_BYTES: &str = "perpsim_journal_file_bytes";
pub const ARCHIVE_BYTES: &str = "perpsim_journal_archive_bytes";
pub const PROJECTION_BACKLOG: &str = "perpsim_projection_backlog_writes";
pub const SNAPSHOTS: &str = "perpsim_snapshots_total";
pub const NONCES: &str = "perpsim_nonce_store_entries";
pub const NONCE_KEYS: &str = "perpsim_nonce_store_keys";
pub const CONNECTIONS: &str = "perpsim_connections_open";
pub const REFUSED: &str = "perpsim_connections_refused_total";
pub const EVICTED: &str = "perpsim_connections_evicted_total";
pub const TIMED_OUT: &str = "perpsim_connections_timed_out_total";
pub const WS_CONNECTIONS: &str = "perpsim_ws_connections_open";
pub const WS_SENT: &str = "perpsim_ws_frames_sent_total";
pub const WS_DROPPED: &str = "perpsim_ws_frames_dropped_total";
pub const WS_SLOW: &str = "perpsim_ws_slow_consumer_closes_total";
pub const WS_CLOSES: &str = "perpsim_ws_closes_total";
pub const MARKET_STEPS: &str = "perpsim_market_data_steps_total";
pub const HELD_ENTRIES: &str = "perpsim_order_entries_held";

/// Latency buckets, seconds: 50 µs to 10 s.
const LATENCY: [f64; 16] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 10.0,
];
/// Commands-per-tick buckets: powers of two up to the host's bound.
const BATCH: [f64; 13] = [
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0,
];

/// Every metric's kind, unit and help, for docs/metrics.md and the exporter's `# HELP` lines.
pub const CATALOGUE: [(&str, &str, &str, &str); 28] = [
    (
        HTTP_REQUEST,
        "histogram",
        "seconds",
        "Time from a request's arrival at the application to its answer, by api, route (the document's path), method and status.",
    ),
    (
        AUTH_FAILURES,
        "counter",
        "requests",
        "Requests refused by authentication, by api (broker, admin, ws) and reason (unauthorized, rate_limited, nonce_memory_full, too_many_failures).",
    ),
    (TICKS, "counter", "ticks", "Ticks applied and journaled."),
    (
        COMMANDS,
        "counter",
        "commands",
        "Commands applied and journaled.",
    ),
    (
        TICK,
        "histogram",
        "seconds",
        "Time the engine took to apply a tick's commands and the systems that run with them.",
    ),
    (
        TICK_COMMANDS,
        "histogram",
        "commands",
        "Commands in a tick.",
    ),
    (
        QUEUE,
        "gauge",
        "requests",
        "Requests waiting for the engine when it took the last tick's batch.",
    ),
    (
        PUBLISH,
        "histogram",
        "seconds",
        "Time to build and publish the read view after a tick.",
    ),
    (
        COMMIT,
        "histogram",
        "seconds",
        "Durable journal commit of the ticks waiting for it, one or more (or of nonces alone).",
    ),
    (
        JOURNAL_TICK,
        "gauge",
        "ticks",
        "Number of the last journaled tick.",
    ),
    (
        JOURNAL_LAG,
        "gauge",
        "ticks",
        "Ticks the engine has applied that are not yet durable (waiting for the journal's writer, or in its commit); their answers wait with them.",
    ),
    (
        PROJECTION_BACKLOG,
        "gauge",
        "writes",
        "History rows and index entries of durable ticks that the history projection's tables do not hold yet (reads find them in the backlog meanwhile): a commit of more than `--projection-batch` rows (a funding hour's) waits there and is projected a share a commit and while the writer is idle; smaller commits' rows wait there together, 32 commits' at most, and are projected in one transaction.",
    ),
    (
        JOURNAL_BYTES,
        "gauge",
        "bytes",
        "Size of the journal file (ticks, snapshots, spent nonces), read after each commit: how the data dir grows.",
    ),
    (
        ARCHIVE_BYTES,
        "gauge",
        "bytes",
        "Size of the journal's archive segments still in their folder (ticks moved out of the journal file), read at start and after each archive: with the journal file's size, the data dir's.",
    ),
    (SNAPSHOTS, "counter", "snapshots", "Snapshots written."),
    (
        NONCES,
        "gauge",
        "nonces",
        "Spent nonces remembered inside the replay window, every key together.",
    ),
    (
        NONCE_KEYS,
        "gauge",
        "keys",
        "Public keys with authentication state (rate bucket and nonces).",
    ),
    (
        CONNECTIONS,
        "gauge",
        "connections",
        "HTTP connections open now.",
    ),
    (
        REFUSED,
        "counter",
        "connections",
        "Connections refused at a connection bound with none idle to give way.",
    ),
    (
        EVICTED,
        "counter",
        "connections",
        "Idle keep-alive connections closed to admit a new one at a connection bound.",
    ),
    (
        TIMED_OUT,
        "counter",
        "connections",
        "Connections closed past their header, body or idle deadline.",
    ),
    (
        WS_CONNECTIONS,
        "gauge",
        "connections",
        "WebSocket connections open now.",
    ),
    (
        WS_SENT,
        "counter",
        "frames",
        "Frames queued for WebSocket connections, one per receiving connection, by topic.",
    ),
    (
        WS_DROPPED,
        "counter",
        "frames",
        "Frames not delivered, by topic and reason (slow_consumer: the queue was full; fault: the fault plan dropped it).",
    ),
    (
        WS_SLOW,
        "counter",
        "connections",
        "WebSocket connections closed with 1008 slow consumer, by the topic of the frame that overflowed.",
    ),
    (
        WS_CLOSES,
        "counter",
        "connections",
        "WebSocket connections the server closed, by reason (auth_timeout, gave_way, op_rate, failed_authentications, key_revoked, slow_consumer, heartbeat, frame_too_large, not_utf8, protocol_error, fault, fell_behind, stopping).",
    ),
    (
        MARKET_STEPS,
        "counter",
        "steps",
        "Steps of the --market-data file sent to the engine, by outcome (applied, refused).",
    ),
    (
        HELD_ENTRIES,
        "gauge",
        "requests",
        "Order entries held for --order-latency on the manual clock, waiting for an advance to reach their instant.",
    ),
];

fn unit(name: &str) -> Unit {
    match name {
        "seconds" => Unit::Seconds,
        _ => Unit::Count,
    }
}

/// The installed recorder's handle: what `/metrics` renders.
#[derive(Clone)]
pub struct Exporter(PrometheusHandle);

impl Exporter {
    /// Installs the process-wide recorder (once per process: `perpsim serve`).
    pub fn install() -> Result<Self, String> {
        let handle = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &LATENCY)
            .and_then(|b| b.set_buckets_for_metric(Matcher::Full(TICK_COMMANDS.into()), &BATCH))
            .and_then(PrometheusBuilder::install_recorder)
            .map_err(|e| format!("cannot install the metrics recorder: {e}"))?;
        for (name, kind, u, help) in CATALOGUE {
            match kind {
                "counter" => describe_counter!(name, unit(u), help),
                "gauge" => describe_gauge!(name, unit(u), help),
                _ => describe_histogram!(name, unit(u), help),
            }
        }
        // Series without labels are shown from the start, at zero, not from their first event.
        for name in [TICKS, COMMANDS, SNAPSHOTS, REFUSED, EVICTED, TIMED_OUT] {
            counter!(name).absolute(0);
        }
        for name in [
            QUEUE,
            JOURNAL_TICK,
            JOURNAL_LAG,
            JOURNAL_BYTES,
            ARCHIVE_BYTES,
            NONCES,
            NONCE_KEYS,
            CONNECTIONS,
            WS_CONNECTIONS,
            HELD_ENTRIES,
        ] {
            gauge!(name).set(0.0);
        }
        // Installed once a process: a second install fails above, before this.
        let _ = HOT.set(Hot::register());
        Ok(Exporter(handle))
    }

    pub fn render(&self) -> String {
        self.0.render()
    }

    /// Drains recorded histogram samples into their buckets; run every few seconds so memory
    /// stays bounded when nobody scrapes.
    pub fn upkeep(&self) {
        self.0.run_upkeep();
    }
}

/// Which API a request or refusal belongs to.
#[derive(Debug, Clone, Copy)]
pub enum Api {
    Broker,
    Admin,
    WebSocket,
    Other,
}

impl Api {
    fn label(self) -> &'static str {
        match self {
            Api::Broker => "broker",
            Api::Admin => "admin",
            Api::WebSocket => "ws",
            Api::Other => "other",
        }
    }
}

pub fn request(
    api: Api,
    route: Cow<'static, str>,
    method: &'static str,
    status: u16,
    took: Duration,
) {
    histogram!(HTTP_REQUEST, "api" => api.label(), "route" => route, "method" => method, "status" => status.to_string())
        .record(took.as_secs_f64());
}

/// `reason`: `unauthorized`, `rate_limited`, `nonce_memory_full` or `too_many_failures`.
pub fn auth_failure(api: Api, reason: &'static str) {
    counter!(AUTH_FAILURES, "api" => api.label(), "reason" => reason).increment(1);
}

/// The handles of the series every tick and commit records, registered once when the
/// recorder is installed: a macro looks its series up in the registry at each call (the
/// name hashed, a map searched), which was 5 % of a serving engine thread's samples.
struct Hot {
    ticks: Counter,
    commands: Counter,
    tick: Histogram,
    tick_commands: Histogram,
    queue: Gauge,
    publish: Histogram,
    commit: Histogram,
    journal_tick: Gauge,
    journal_lag: Gauge,
    backlog: Gauge,
}

/// Set by [`Exporter::install`]; unset, the functions below record nothing, as the macros
/// do without a recorder.
static HOT: OnceLock<Hot> = OnceLock::new();

impl Hot {
    fn register() -> Self {
        Hot {
            ticks: counter!(TICKS),
            commands: counter!(COMMANDS),
            tick: histogram!(TICK),
            tick_commands: histogram!(TICK_COMMANDS),
            queue: gauge!(QUEUE),
            publish: histogram!(PUBLISH),
            commit: histogram!(COMMIT),
            journal_tick: gauge!(JOURNAL_TICK),
            journal_lag: gauge!(JOURNAL_LAG),
            backlog: gauge!(PROJECTION_BACKLOG),
        }
    }
}

/// A tick applied: how long the engine took, its commands, and the queue behind it.
pub fn tick(took: Duration, commands: usize, queued: usize) {
    let Some(hot) = HOT.get() else { return };
    hot.ticks.increment(1);
    hot.commands.increment(commands as u64);
    hot.tick.record(took.as_secs_f64());
    hot.tick_commands.record(commands as f64);
    hot.queue.set(queued as f64);
}

pub fn publish(took: Duration) {
    if let Some(hot) = HOT.get() {
        hot.publish.record(took.as_secs_f64());
    }
}

/// A tick handed to the journal's writer.
pub fn handed() {
    if let Some(hot) = HOT.get() {
        hot.journal_lag.increment(1.0);
    }
}

/// A commit of `ticks` ticks (none: nonces alone), the last numbered `tick`.
pub fn commit(took: Duration, ticks: usize, tick: u64) {
    let Some(hot) = HOT.get() else { return };
    hot.commit.record(took.as_secs_f64());
    hot.journal_tick.set(tick as f64);
    hot.journal_lag.decrement(ticks as f64);
}

/// The journal file holds `bytes`.
pub fn journal_bytes(bytes: u64) {
    gauge!(JOURNAL_BYTES).set(bytes as f64);
}

/// What the projection's backlog holds after a commit or a share of it projected.
pub fn backlog(writes: usize) {
    if let Some(hot) = HOT.get() {
        hot.backlog.set(writes as f64);
    }
}

/// The archive's size after an archive call (or at start).
pub fn archive(bytes: Option<u64>) {
    if let Some(bytes) = bytes {
        gauge!(ARCHIVE_BYTES).set(bytes as f64);
    }
}

pub fn snapshot() {
    counter!(SNAPSHOTS).increment(1);
}

/// A `--market-data` step sent: applied, or refused by the venue.
pub fn market_step(applied: bool) {
    let outcome = if applied { "applied" } else { "refused" };
    counter!(MARKET_STEPS, "outcome" => outcome).increment(1);
}

/// Order entries held for their latency on the manual clock.
pub fn held_entries(held: usize) {
    gauge!(HELD_ENTRIES).set(held as f64);
}

pub fn nonce_store(keys: usize, nonces: usize) {
    gauge!(NONCE_KEYS).set(keys as f64);
    gauge!(NONCES).set(nonces as f64);
}

pub fn connection_opened() {
    gauge!(CONNECTIONS).increment(1.0);
}

pub fn connection_closed(timed_out: bool) {
    gauge!(CONNECTIONS).decrement(1.0);
    if timed_out {
        counter!(TIMED_OUT).increment(1);
    }
}

pub fn connection_refused() {
    counter!(REFUSED).increment(1);
}

pub fn connections_evicted(n: u32) {
    counter!(EVICTED).increment(u64::from(n));
}

pub fn ws_opened() {
    gauge!(WS_CONNECTIONS).increment(1.0);
}

/// `reason`: the label of the close the server sent, if it sent one.
pub fn ws_closed(reason: Option<&'static str>) {
    gauge!(WS_CONNECTIONS).decrement(1.0);
    if let Some(reason) = reason {
        counter!(WS_CLOSES, "reason" => reason).increment(1);
    }
}

/// The channels' kinds (AsyncAPI): a frame's topic label is one of these or `control`.
const TOPICS: [&str; 10] = [
    "orderbook-stream",
    "ticker",
    "market-trades",
    "trades",
    "orders",
    "positions",
    "margin",
    "liquidations",
    "balance-changes",
    "notifications",
];

/// The topic of a frame: its `channel` without the instrument or customer after `:`
/// (`orderbook-stream`, `ticker`, …), `control` for acknowledgements and errors. A label of
/// a fixed set, borrowed from it: counting a frame allocates nothing.
pub fn topic_of(frame: &str) -> &'static str {
    let kind = frame
        .strip_prefix("{\"channel\":\"")
        .and_then(|rest| rest.split(['"', ':']).next());
    kind.and_then(|k| TOPICS.into_iter().find(|t| *t == k))
        .unwrap_or("control")
}

pub fn ws_sent(topic: &'static str) {
    counter!(WS_SENT, "topic" => topic).increment(1);
}

/// `reason`: `slow_consumer` or `fault`.
pub fn ws_dropped(topic: &'static str, reason: &'static str) {
    counter!(WS_DROPPED, "topic" => topic, "reason" => reason).increment(1);
}

pub fn ws_slow_consumer(topic: &'static str) {
    counter!(WS_SLOW, "topic" => topic).increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_is_counted_under_its_channel_kind_and_control_frames_apart() {
        assert_eq!(topic_of(r#"{"channel":"ticker","data":{}}"#), "ticker");
        assert_eq!(
            topic_of(r#"{"channel":"orderbook-stream:BTC-USDC-PERP","data":{}}"#),
            "orderbook-stream"
        );
        assert_eq!(topic_of(r#"{"op":"subscribed","args":[]}"#), "control");
        assert_eq!(topic_of(r#"{"channel":"no-such","data":{}}"#), "control");
    }

    /// Issue 27 item 5: every metric is documented (docs/metrics.md) with its kind and unit.
    #[test]
    fn every_metric_is_documented_with_its_kind_and_unit() {
        let page = include_str!("../../../docs/metrics.md");
        for (name, kind, unit, _) in CATALOGUE {
            let row = format!("| `{name}` | {kind} | {unit} |");
            assert!(page.contains(&row), "docs/metrics.md lacks the row {row}");
        }
    }
}
