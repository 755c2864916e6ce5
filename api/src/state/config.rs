//! The server's resolved configuration: what `perpsim serve` runs with, whichever of flags,
//! `PERPSIM_*` variables, the TOML file and the embedded defaults it came from (the CLI
//! resolves them; the server only reads the result).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use perpsim_core::clock::ClockMode;
use perpsim_core::limits::VenueLimits;
use perpsim_core::simulation::Simulation;
use perpsim_core::time::Timestamp;

use crate::signing::RateLimit;

/// Resolved settings.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    /// The clock mode asked for; `None` keeps an existing data dir's (a new one runs realtime).
    pub clock: Option<ClockMode>,
    pub start: Option<Timestamp>,
    pub admin_token: Option<String>,
    pub seed: Option<u64>,
    /// The living market of a new data dir (an existing one keeps its genesis settings).
    pub simulation: Simulation,
    /// Whether any market setting was given: only then may it disagree with a data dir's.
    pub market_given: bool,
    pub transfer_delay_secs: u64,
    pub snapshot_every: u64,
    pub snapshot_interval_secs: i64,
    /// Each history log's window, as a power of two (`Engine::set_history_window`).
    pub history_window_bits: u32,
    /// History rows a commit projects in its own transaction while the projection has no
    /// backlog (`Journal::set_projection_batch`).
    pub projection_batch: usize,
    pub rate_limit: u32,
    pub rate_burst: u32,
    /// Failed authentications each client address may make (D9): a second, and in a burst.
    pub auth_failures: RateLimit,
    pub max_nonces_per_key: u64,
    pub connections: ConnectionLimits,
    pub websocket: WsLimits,
    /// The D4 bounds the engine applies (journaled when they change).
    pub limits: VenueLimits,
    /// Other processes may read the journal while the server writes it (`perpsim replay
    /// --journal` on a running server); each durable commit costs a little more.
    pub journal_readers: bool,
    /// Recorded prices, rates and statuses the venue takes as its clock reaches them.
    pub market_data: Option<MarketData>,
    pub latencies: Latencies,
}

/// The network a server plays: how late order entries reach the venue (`state::latency`)
/// and the push channels reach clients (`ws::delay`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Latencies {
    pub order_entry: Option<perpsim_core::latency::LatencyModel>,
    pub market_data: Option<perpsim_core::latency::LatencyModel>,
}

/// `--market-data`: a market-only scenario file and how much faster than recorded it plays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarketData {
    pub path: std::path::PathBuf,
    pub speed: u32,
}

/// The fastest a market data file plays: a recorded day in under a second.
pub const MAX_SPEED: u32 = 100_000;

/// Bounds on what clients may hold open (slow and idle clients cannot take the service down).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// From a request's first byte to the end of its headers, and again for its body.
    pub header_read_timeout: Duration,
    /// Between the end of a response and the first byte of the next request.
    pub idle_timeout: Duration,
    pub max_connections: u32,
    /// What one client address (an IPv6 /64) may hold of `max_connections`.
    pub max_per_address: u32,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 4_096,
            max_per_address: 1_024,
        }
    }
}

/// Bounds of the WebSocket channels (D9): upgraded connections count here, not against
/// [`ConnectionLimits`]' bound, and in their address's share of both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WsLimits {
    /// At the bound a connection that has not authenticated gives way to a newcomer; only
    /// with every one authenticated is an upgrade answered 503.
    pub max_connections: u32,
    /// Topics one connection may hold at once.
    pub max_subscriptions: u32,
    /// Frames waiting to be written to one connection; a consumer that lets more pile up is
    /// closed with 1008 `slow consumer`, so the engine never waits for a socket.
    pub queue_frames: u32,
    /// ... and bytes waiting, likewise.
    pub queue_bytes: u64,
    /// A connection that sends nothing (frames, pings or pongs) this long is closed; the
    /// server pings every third of it, and a client that answers pings stays open.
    pub heartbeat_timeout: Duration,
    /// A connection that has neither authenticated nor subscribed this long after it
    /// opened is closed with 1008 `authentication timeout`.
    pub auth_timeout: Duration,
    /// Frames a client may send a second, and in a burst; past it an error, then 1008.
    pub ops_per_second: u32,
    pub ops_burst: u32,
}

impl WsLimits {
    pub fn op_rate(&self) -> RateLimit {
        RateLimit {
            per_second: self.ops_per_second,
            burst: self.ops_burst,
        }
    }
}

impl Default for WsLimits {
    fn default() -> Self {
        WsLimits {
            max_connections: 4_096,
            max_subscriptions: 256,
            queue_frames: 4_096,
            queue_bytes: 4 << 20,
            heartbeat_timeout: Duration::from_secs(30),
            auth_timeout: Duration::from_secs(10),
            ops_per_second: 20,
            ops_burst: 40,
        }
    }
}

/// `PERPSIM_AUDIT`: `on` or `off` turns the engine's checks of itself on or off (the audit
/// after every run and the risk passes' oracles, `records::audit` in `systems`); unset, the
/// build's default (on in debug builds, off in release ones). What a test run of a release
/// build sets, so it checks every invariant a debug run does; anything else is refused.
pub fn audit_switch() -> Result<Option<bool>, String> {
    match std::env::var("PERPSIM_AUDIT") {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Ok(v) if v == "on" => Ok(Some(true)),
        Ok(v) if v == "off" => Ok(Some(false)),
        Ok(v) => Err(format!("PERPSIM_AUDIT is {v:?}; it is on or off")),
        Err(e) => Err(format!("PERPSIM_AUDIT: {e}")),
    }
}

/// The engine's checks as `PERPSIM_AUDIT` says (refused at the start of every command, so
/// read here it is valid).
pub fn audited(mut engine: perpsim_systems::Engine) -> perpsim_systems::Engine {
    if let Ok(Some(on)) = audit_switch() {
        engine.set_auditing(on);
    }
    engine
}
