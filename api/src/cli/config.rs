//! `perpsim serve` settings: flags, `PERPSIM_*` env variables and an optional TOML file, in
//! that order of precedence, over the embedded defaults (D1).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::replay::Limits;
use crate::replay::latency::parse_model;
use crate::signing::secrets::check_admin_token;
use crate::signing::{DEFAULT_MAX_NONCES_PER_KEY, RateLimit};
use crate::state::config::{
    ConnectionLimits, Latencies, MAX_SPEED, MarketData, ServeConfig, WsLimits,
};

use clap::Args;
use perpsim_core::Decimal;
use perpsim_core::clock::ClockMode;
use perpsim_core::decimal::Sign;
use perpsim_core::instrument::default_instruments;
use perpsim_core::limits::{DEFAULT_MAX_CUSTOMERS, DEFAULT_MAX_OPEN_ORDERS, VenueLimits};
use perpsim_core::simulation::{InstrumentSimulation, PriceFeed, Simulation};
use perpsim_core::time::Timestamp;
use perpsim_storage::{DEFAULT_PROJECTION_BATCH, MAX_PROJECTION_BATCH};
use perpsim_systems::records::log::{DEFAULT_WINDOW_BITS, WINDOW_BITS};
use serde::Deserialize;
use std::collections::BTreeMap;

/// The longest `--snapshot-interval`: a year of simulation time between snapshots.
const MAX_SNAPSHOT_INTERVAL_SECS: i64 = 366 * 86_400;

/// Flags of `perpsim serve`; every one also reads `PERPSIM_<NAME>` and the TOML key `<name>`.
#[derive(Args, Debug, Default, Clone)]
pub struct ServeArgs {
    /// TOML file with any of the settings below (keys as the flags, with `_`).
    #[arg(long, env = "PERPSIM_CONFIG")]
    pub config: Option<PathBuf>,
    /// Address to listen on [default: 127.0.0.1:8080].
    #[arg(long, env = "PERPSIM_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// Directory of the journal and the secrets [default: ./data].
    #[arg(long, env = "PERPSIM_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// realtime or manual [default: realtime].
    #[arg(long, env = "PERPSIM_CLOCK")]
    pub clock: Option<String>,
    /// Start of the manual clock, RFC 3339 [default: the wall clock at first start].
    #[arg(long, env = "PERPSIM_START")]
    pub start: Option<String>,
    /// Admin API token [default: <data-dir>/admin.token, created on first start].
    #[arg(long, env = "PERPSIM_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// Built-in market maker: on or off [default: on].
    #[arg(long, env = "PERPSIM_MARKET_MAKER")]
    pub market_maker: Option<String>,
    /// Price feed: random-walk or fixed [default: random-walk].
    #[arg(long, env = "PERPSIM_PRICE_FEED")]
    pub price_feed: Option<String>,
    /// Annualised volatility of the random walk, a fraction: `0.8` for every instrument or
    /// `SYMBOL=0.8` for one; repeatable [default: BTC 0.60, ETH 0.75, SOL 1.00].
    #[arg(long, value_delimiter = ',', env = "PERPSIM_VOLATILITY")]
    pub volatility: Vec<String>,
    /// Market maker's levels each side: `N` or `SYMBOL=N`; repeatable [default: 10].
    #[arg(long, value_delimiter = ',', env = "PERPSIM_MAKER_LEVELS")]
    pub maker_levels: Vec<String>,
    /// Distance in basis points from the index to the best bid and ask: `BPS` or
    /// `SYMBOL=BPS`; repeatable [default: 1].
    #[arg(long, value_delimiter = ',', env = "PERPSIM_MAKER_HALF_SPREAD_BPS")]
    pub maker_half_spread_bps: Vec<String>,
    /// Basis points between neighbouring levels: `BPS` or `SYMBOL=BPS` [default: 1].
    #[arg(long, value_delimiter = ',', env = "PERPSIM_MAKER_LEVEL_STEP_BPS")]
    pub maker_level_step_bps: Vec<String>,
    /// Amount quoted per level: `SYMBOL=AMOUNT`; repeatable [default: BTC 0.5, ETH 5, SOL 100].
    #[arg(long, value_delimiter = ',', env = "PERPSIM_MAKER_SIZE")]
    pub maker_size: Vec<String>,
    /// Largest absolute position the maker takes on: `SYMBOL=AMOUNT`; repeatable
    /// [default: 20 levels' size].
    #[arg(long, value_delimiter = ',', env = "PERPSIM_MAKER_MAX_INVENTORY")]
    pub maker_max_inventory: Vec<String>,
    /// Let `perpsim replay --journal` read the journal while the server runs: on or off
    /// (redb's single-writer mode: each durable commit costs ~0.13 ms more) [default: off].
    #[arg(long, env = "PERPSIM_JOURNAL_READERS")]
    pub journal_readers: Option<String>,
    /// A market-only scenario file (its `price`, `prices`, `recorded`, `funding` and `status`
    /// events; no customers) whose prices, funding rates and statuses the venue takes as its
    /// clock reaches them, the file's `start` at the data dir's start (issue 39). With it a
    /// new data dir's price feed is fixed unless --price-feed says otherwise.
    #[arg(long, env = "PERPSIM_MARKET_DATA")]
    pub market_data: Option<PathBuf>,
    /// How much faster than recorded the --market-data file plays: 1 to 100000 [default: 1].
    #[arg(long, env = "PERPSIM_MARKET_DATA_SPEED")]
    pub market_data_speed: Option<u32>,
    /// Order entries (place, cancel, amend) reach the venue a delay drawn from the seed after
    /// they arrive: constant:40ms, normal:50ms,10ms, log-normal:40ms,0.5 or empirical:FILE
    /// (a CSV of latency_ms) [default: none].
    #[arg(long, env = "PERPSIM_ORDER_LATENCY")]
    pub order_latency: Option<String>,
    /// The push channels deliver each tick a delay drawn from the seed after the engine made
    /// it (wall time), in the --order-latency forms [default: none].
    #[arg(long, env = "PERPSIM_MARKET_DATA_LATENCY")]
    pub market_data_latency: Option<String>,
    /// What the market maker's account holds at start, per settlement asset
    /// [default: 100000000].
    #[arg(long, env = "PERPSIM_MAKER_FUNDING")]
    pub maker_funding: Option<String>,
    /// What the venue's insurance account holds at start, per settlement asset; it covers
    /// negative balances left by liquidations and may go negative [default: 10000000].
    #[arg(long, env = "PERPSIM_INSURANCE_FUNDING")]
    pub insurance_funding: Option<String>,
    /// Seconds of simulation time between two depreciation evaluations [default: 60].
    #[arg(long, env = "PERPSIM_NOTICE_INTERVAL")]
    pub notice_interval: Option<u64>,
    /// Seed of all randomness; same seed and commands, same run [default: random at first start].
    #[arg(long, env = "PERPSIM_SEED")]
    pub seed: Option<u64>,
    /// Seconds until a deposit or withdrawal completes [default: 1].
    #[arg(long, env = "PERPSIM_TRANSFER_DELAY")]
    pub transfer_delay: Option<u64>,
    /// Snapshot after this many journaled commands [default: 100000].
    #[arg(long, env = "PERPSIM_SNAPSHOT_EVERY")]
    pub snapshot_every: Option<u64>,
    /// ... or after this many seconds of simulation time, however few commands [default: 3600].
    #[arg(long, env = "PERPSIM_SNAPSHOT_INTERVAL")]
    pub snapshot_interval: Option<u64>,
    /// Rows of each history (ledger movements, trades, public fills, notices, margin state
    /// changes, funding settlements) the engine holds in memory besides the journal's
    /// projection, at most: a power of two from 256 to 16777216 [default: 65536].
    #[arg(long, env = "PERPSIM_HISTORY_WINDOW")]
    pub history_window: Option<u64>,
    /// History rows a commit writes to the journal's projection in its own transaction, at
    /// most, while nothing waits before them: a commit of more (a funding hour's) waits in
    /// the projection's backlog and is projected a share at a time beside the answers that
    /// follow it; 0 to 1048576 [default: 8192].
    #[arg(long, env = "PERPSIM_PROJECTION_BATCH")]
    pub projection_batch: Option<u64>,
    /// Requests per second per public key [default: 100].
    #[arg(long, env = "PERPSIM_RATE_LIMIT")]
    pub rate_limit: Option<u32>,
    /// Burst per public key [default: 200].
    #[arg(long, env = "PERPSIM_RATE_BURST")]
    pub rate_burst: Option<u32>,
    /// Failed authentications (REST 401s and WebSocket authenticates) one client address may
    /// make a second; past the burst its requests are answered 429 before any signature is
    /// checked. A failure is charged to its address, never to the key it names [default: 10].
    #[arg(long, env = "PERPSIM_AUTH_FAILURE_RATE")]
    pub auth_failure_rate: Option<u32>,
    /// Failed authentications one client address may make in a burst [default: 100].
    #[arg(long, env = "PERPSIM_AUTH_FAILURE_BURST")]
    pub auth_failure_burst: Option<u32>,
    /// Hard cap on the nonces one public key may have spent inside the 35 s window; the bound
    /// in force is the smaller of this and what the rate limit admits in the window
    /// [default: 1048576].
    #[arg(long, env = "PERPSIM_MAX_NONCES_PER_KEY")]
    pub max_nonces_per_key: Option<u64>,
    /// Seconds a client has to send a request's headers, and its body, once it started
    /// [default: 10].
    #[arg(long, env = "PERPSIM_HEADER_READ_TIMEOUT")]
    pub header_read_timeout: Option<u64>,
    /// Seconds a keep-alive connection may sit idle between requests [default: 60].
    #[arg(long, env = "PERPSIM_IDLE_TIMEOUT")]
    pub idle_timeout: Option<u64>,
    /// Open connections at the most; at it an idle keep-alive connection is closed to admit
    /// a new one, and only with none idle is a connection answered 503 [default: 4096].
    #[arg(long, env = "PERPSIM_MAX_CONNECTIONS")]
    pub max_connections: Option<u32>,
    /// Share of --max-connections one client address may hold (an IPv6 address counts by
    /// its /64); at it that address's own idle connection makes room [default: 1024].
    #[arg(long, env = "PERPSIM_MAX_CONNECTIONS_PER_ADDRESS")]
    pub max_connections_per_address: Option<u32>,
    /// Open orders one customer may hold; past it a new order that could stay open is
    /// refused ORDER_REJECTED [default: 1000].
    #[arg(long, env = "PERPSIM_MAX_OPEN_ORDERS")]
    pub max_open_orders: Option<u32>,
    /// Customers one broker may create; past it 400 VALIDATION_ERROR [default: 100000].
    #[arg(long, env = "PERPSIM_MAX_CUSTOMERS")]
    pub max_customers: Option<u32>,
    /// WebSocket connections open at once (D9); past it the upgrade answers 503 [default: 4096].
    #[arg(long, env = "PERPSIM_MAX_WS_CONNECTIONS")]
    pub max_ws_connections: Option<u32>,
    /// Topics one WebSocket connection may subscribe to at once [default: 256].
    #[arg(long, env = "PERPSIM_MAX_WS_SUBSCRIPTIONS")]
    pub max_ws_subscriptions: Option<u32>,
    /// Frames queued for one WebSocket connection; past it the connection is closed with
    /// 1008 `slow consumer` [default: 4096].
    #[arg(long, env = "PERPSIM_WS_QUEUE")]
    pub ws_queue: Option<u32>,
    /// Bytes queued for one WebSocket connection; past it, as past --ws-queue
    /// [default: 4194304].
    #[arg(long, env = "PERPSIM_WS_QUEUE_BYTES")]
    pub ws_queue_bytes: Option<u64>,
    /// Seconds a WebSocket connection has to authenticate or subscribe before it is closed
    /// with 1008 `authentication timeout` [default: 10].
    #[arg(long, env = "PERPSIM_WS_AUTH_TIMEOUT")]
    pub ws_auth_timeout: Option<u64>,
    /// Frames a WebSocket client may send a second (ops, pings, pongs); past the burst it is
    /// answered with an error and closed with 1008 [default: 20].
    #[arg(long, env = "PERPSIM_WS_OP_RATE")]
    pub ws_op_rate: Option<u32>,
    /// Frames a WebSocket client may send in a burst [default: 40].
    #[arg(long, env = "PERPSIM_WS_OP_BURST")]
    pub ws_op_burst: Option<u32>,
    /// Seconds a WebSocket connection may stay silent (no frame, ping or pong) before it is
    /// closed; the server pings every third of it [default: 30].
    #[arg(long, env = "PERPSIM_WS_HEARTBEAT_TIMEOUT")]
    pub ws_heartbeat_timeout: Option<u64>,
}

/// The TOML file: the same settings, all optional; unknown keys are refused.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    listen: Option<SocketAddr>,
    data_dir: Option<PathBuf>,
    clock: Option<String>,
    start: Option<String>,
    admin_token: Option<String>,
    market_maker: Option<String>,
    price_feed: Option<String>,
    maker_funding: Option<String>,
    insurance_funding: Option<String>,
    notice_interval: Option<u64>,
    /// Per-instrument settings of the living market, by symbol.
    #[serde(default)]
    instruments: BTreeMap<String, InstrumentFile>,
    seed: Option<u64>,
    transfer_delay: Option<u64>,
    snapshot_every: Option<u64>,
    snapshot_interval: Option<u64>,
    history_window: Option<u64>,
    projection_batch: Option<u64>,
    rate_limit: Option<u32>,
    rate_burst: Option<u32>,
    auth_failure_rate: Option<u32>,
    auth_failure_burst: Option<u32>,
    max_nonces_per_key: Option<u64>,
    header_read_timeout: Option<u64>,
    idle_timeout: Option<u64>,
    max_connections: Option<u32>,
    max_connections_per_address: Option<u32>,
    max_open_orders: Option<u32>,
    max_customers: Option<u32>,
    max_ws_connections: Option<u32>,
    max_ws_subscriptions: Option<u32>,
    ws_queue: Option<u32>,
    ws_queue_bytes: Option<u64>,
    ws_auth_timeout: Option<u64>,
    ws_op_rate: Option<u32>,
    ws_op_burst: Option<u32>,
    ws_heartbeat_timeout: Option<u64>,
    journal_readers: Option<String>,
    market_data: Option<PathBuf>,
    market_data_speed: Option<u32>,
    order_latency: Option<String>,
    market_data_latency: Option<String>,
}

/// One instrument's table in the TOML file: `[instruments."BTC-USDC-PERP"]`.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct InstrumentFile {
    volatility: Option<String>,
    levels: Option<u32>,
    half_spread_bps: Option<String>,
    level_step_bps: Option<String>,
    size: Option<String>,
    max_inventory: Option<String>,
}

fn read_file(path: &Path) -> Result<FileConfig, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read config {}: {e}", path.display()))?;
    toml::from_str(&text).map_err(|e| format!("config {}: {e}", path.display()))
}

/// The living market: D1 defaults, then the file's settings, then the flags.
fn simulation(args: &ServeArgs, file: &FileConfig) -> Result<Simulation, String> {
    let specs = default_instruments();
    let mut sim = Simulation::defaults(&specs);
    market_settings(&mut sim, args, file)?;
    for (symbol, table) in &file.instruments {
        instrument_table(instrument_mut(&mut sim, symbol)?, symbol, table)?;
    }
    instrument_flags(&mut sim, args)?;
    sim.check(&specs)?;
    Ok(sim)
}

/// The settings of the whole market: the feed, the maker, the venue's funding, the notice
/// interval.
fn market_settings(
    sim: &mut Simulation,
    args: &ServeArgs,
    file: &FileConfig,
) -> Result<(), String> {
    let feed = args.price_feed.clone().or(file.price_feed.clone());
    if let Some(text) = feed {
        sim.price_feed = PriceFeed::parse(&text)
            .ok_or_else(|| format!("--price-feed must be random-walk or fixed, got {text:?}"))?;
    }
    match args
        .market_maker
        .as_deref()
        .or(file.market_maker.as_deref())
    {
        None | Some("on") => {}
        Some("off") => sim.market_maker = false,
        Some(other) => return Err(format!("--market-maker must be on or off, got {other:?}")),
    }
    if let Some(text) = args
        .maker_funding
        .as_deref()
        .or(file.maker_funding.as_deref())
    {
        sim.maker_funding = positive("--maker-funding", text)?;
    }
    if let Some(text) = args
        .insurance_funding
        .as_deref()
        .or(file.insurance_funding.as_deref())
    {
        sim.insurance_funding = decimal("--insurance-funding", text)?;
    }
    if let Some(seconds) = args.notice_interval.or(file.notice_interval) {
        sim.notice_interval_ms = i64::try_from(seconds)
            .ok()
            .and_then(|s| s.checked_mul(1_000))
            .ok_or("--notice-interval is out of range")?;
    }
    Ok(())
}

/// One `[instruments."SYMBOL"]` table of the config file.
fn instrument_table(
    i: &mut InstrumentSimulation,
    symbol: &str,
    table: &InstrumentFile,
) -> Result<(), String> {
    let field = |name: &str| format!("[instruments.{symbol:?}] {name}");
    if let Some(v) = &table.volatility {
        i.volatility = decimal(&field("volatility"), v)?;
    }
    if let Some(v) = table.levels {
        i.levels = v;
    }
    if let Some(v) = &table.half_spread_bps {
        i.half_spread_bps = positive(&field("half_spread_bps"), v)?;
    }
    if let Some(v) = &table.level_step_bps {
        i.level_step_bps = positive(&field("level_step_bps"), v)?;
    }
    if let Some(v) = &table.size {
        i.size = positive(&field("size"), v)?;
    }
    if let Some(v) = &table.max_inventory {
        i.max_inventory = decimal(&field("max_inventory"), v)?;
    }
    Ok(())
}

/// How a per-instrument flag sets its value.
type Apply = fn(&mut InstrumentSimulation, &str, &str) -> Result<(), String>;

/// The per-instrument flags, each `VALUE` for every instrument (where allowed) or
/// `SYMBOL=VALUE`, in the order given.
fn instrument_flags(sim: &mut Simulation, args: &ServeArgs) -> Result<(), String> {
    let flags: [(&str, &[String], bool, Apply); 6] = [
        ("--volatility", &args.volatility, true, |i, f, v| {
            i.volatility = decimal(f, v)?;
            Ok(())
        }),
        ("--maker-levels", &args.maker_levels, true, |i, f, v| {
            i.levels = v
                .parse()
                .map_err(|_| format!("{f} must be a whole number, got {v:?}"))?;
            Ok(())
        }),
        (
            "--maker-half-spread-bps",
            &args.maker_half_spread_bps,
            true,
            |i, f, v| {
                i.half_spread_bps = positive(f, v)?;
                Ok(())
            },
        ),
        (
            "--maker-level-step-bps",
            &args.maker_level_step_bps,
            true,
            |i, f, v| {
                i.level_step_bps = positive(f, v)?;
                Ok(())
            },
        ),
        ("--maker-size", &args.maker_size, false, |i, f, v| {
            i.size = positive(f, v)?;
            Ok(())
        }),
        (
            "--maker-max-inventory",
            &args.maker_max_inventory,
            false,
            |i, f, v| {
                i.max_inventory = decimal(f, v)?;
                Ok(())
            },
        ),
    ];
    for (flag, values, all_allowed, apply) in flags {
        for value in values {
            match value.split_once('=') {
                Some((symbol, v)) => apply(instrument_mut(sim, symbol)?, flag, v)?,
                None if all_allowed => {
                    for i in &mut sim.instruments {
                        apply(i, flag, value)?;
                    }
                }
                None => return Err(format!("{flag} takes SYMBOL=VALUE, got {value:?}")),
            }
        }
    }
    Ok(())
}

/// Whether any setting of the living market was given (flag, variable or file): an existing
/// data dir refuses settings that differ from its own, and keeps its own when none is given.
fn market_given(args: &ServeArgs, file: &FileConfig) -> bool {
    let flags = [
        &args.volatility,
        &args.maker_levels,
        &args.maker_half_spread_bps,
        &args.maker_level_step_bps,
        &args.maker_size,
        &args.maker_max_inventory,
    ];
    let texts = [
        &args.price_feed,
        &args.market_maker,
        &args.maker_funding,
        &args.insurance_funding,
        &file.price_feed,
        &file.market_maker,
        &file.maker_funding,
        &file.insurance_funding,
    ];
    flags.iter().any(|v| !v.is_empty())
        || texts.iter().any(|t| t.is_some())
        || args.notice_interval.or(file.notice_interval).is_some()
        || !file.instruments.is_empty()
}

fn instrument_mut<'a>(
    sim: &'a mut Simulation,
    symbol: &str,
) -> Result<&'a mut InstrumentSimulation, String> {
    sim.instruments
        .iter_mut()
        .find(|i| i.symbol == symbol)
        .ok_or_else(|| format!("unknown instrument {symbol:?} in the market settings"))
}

/// A decimal without a sign: zero or more.
fn decimal(field: &str, text: &str) -> Result<Decimal, String> {
    perpsim_core::decimal::parse(field, text, Sign::Unsigned).map_err(|e| e.to_string())
}

fn positive(field: &str, text: &str) -> Result<Decimal, String> {
    let v = decimal(field, text)?;
    match v > Decimal::ZERO {
        true => Ok(v),
        false => Err(format!("{field} must be positive, got {text:?}")),
    }
}

/// The WebSocket bounds: flags over the file over the defaults; each must be positive.
fn ws_limits(args: &ServeArgs, file: &FileConfig) -> Result<WsLimits, String> {
    let d = WsLimits::default();
    let secs = |flag: Option<u64>, toml: Option<u64>, default: Duration| {
        flag.or(toml).map_or(default, Duration::from_secs)
    };
    let limits = WsLimits {
        max_connections: args
            .max_ws_connections
            .or(file.max_ws_connections)
            .unwrap_or(d.max_connections),
        max_subscriptions: args
            .max_ws_subscriptions
            .or(file.max_ws_subscriptions)
            .unwrap_or(d.max_subscriptions),
        queue_frames: args.ws_queue.or(file.ws_queue).unwrap_or(d.queue_frames),
        queue_bytes: args
            .ws_queue_bytes
            .or(file.ws_queue_bytes)
            .unwrap_or(d.queue_bytes),
        heartbeat_timeout: secs(
            args.ws_heartbeat_timeout,
            file.ws_heartbeat_timeout,
            d.heartbeat_timeout,
        ),
        auth_timeout: secs(args.ws_auth_timeout, file.ws_auth_timeout, d.auth_timeout),
        ops_per_second: args
            .ws_op_rate
            .or(file.ws_op_rate)
            .unwrap_or(d.ops_per_second),
        ops_burst: args.ws_op_burst.or(file.ws_op_burst).unwrap_or(d.ops_burst),
    };
    let zero = limits.max_connections == 0
        || limits.max_subscriptions == 0
        || limits.queue_frames == 0
        || limits.queue_bytes == 0
        || limits.heartbeat_timeout.is_zero()
        || limits.auth_timeout.is_zero()
        || limits.ops_per_second == 0
        || limits.ops_burst == 0;
    match zero {
        true => Err(
            "--max-ws-connections, --max-ws-subscriptions, --ws-queue, --ws-queue-bytes, \
             --ws-heartbeat-timeout, --ws-auth-timeout, --ws-op-rate and --ws-op-burst must \
             be positive"
                .into(),
        ),
        false => Ok(limits),
    }
}

/// The failed authentications a client address may make: flags over the file over the
/// defaults (10 a second, bursts of 100); both must be positive.
fn auth_failures(args: &ServeArgs, file: &FileConfig) -> Result<RateLimit, String> {
    let rate = RateLimit {
        per_second: args
            .auth_failure_rate
            .or(file.auth_failure_rate)
            .unwrap_or(10),
        burst: args
            .auth_failure_burst
            .or(file.auth_failure_burst)
            .unwrap_or(100),
    };
    match rate.per_second > 0 && rate.burst > 0 {
        true => Ok(rate),
        false => Err("--auth-failure-rate and --auth-failure-burst must be positive".into()),
    }
}

impl ServeArgs {
    pub fn resolve(self) -> Result<ServeConfig, String> {
        let file = match &self.config {
            Some(path) => read_file(path)?,
            None => FileConfig::default(),
        };
        let mut simulation = simulation(&self, &file)?;
        let (market_data, latencies) = market_and_latency(&self, &file, &mut simulation)?;
        let market_given = market_given(&self, &file);
        let websocket = ws_limits(&self, &file)?;
        let auth_failures = auth_failures(&self, &file)?;
        let (clock, start) = clock_and_start(&self, &file)?;
        let (snapshot_every, snapshot_interval_secs) = snapshots(&self, &file)?;
        let history_window_bits = history_window_bits(self.history_window.or(file.history_window))?;
        let projection_batch = projection_batch(self.projection_batch.or(file.projection_batch))?;
        let rate_limit = self.rate_limit.or(file.rate_limit).unwrap_or(100);
        let rate_burst = self.rate_burst.or(file.rate_burst).unwrap_or(200);
        let max_nonces_per_key = self
            .max_nonces_per_key
            .or(file.max_nonces_per_key)
            .unwrap_or(DEFAULT_MAX_NONCES_PER_KEY);
        let connections = connection_limits(&self, &file);
        let limits = venue_limits(&self, &file)?;
        let admin_token = self
            .admin_token
            .as_deref()
            .or(file.admin_token.as_deref())
            .map(|t| check_admin_token(t, "--admin-token (or PERPSIM_ADMIN_TOKEN)"))
            .transpose()?;
        let rates = [rate_limit, rate_burst].map(u64::from);
        let counts = [snapshot_every, rates[0], rates[1], max_nonces_per_key];
        check_positive(counts, &connections)?;
        let journal_readers = journal_readers(&self, &file)?;
        Ok(ServeConfig {
            listen: self
                .listen
                .or(file.listen)
                .unwrap_or_else(|| "127.0.0.1:8080".parse().expect("valid default")),
            data_dir: self
                .data_dir
                .or(file.data_dir)
                .unwrap_or_else(|| PathBuf::from("./data")),
            clock,
            start,
            admin_token,
            seed: self.seed.or(file.seed),
            simulation,
            market_given,
            transfer_delay_secs: self.transfer_delay.or(file.transfer_delay).unwrap_or(1),
            snapshot_every,
            snapshot_interval_secs,
            history_window_bits,
            projection_batch,
            rate_limit,
            rate_burst,
            auth_failures,
            max_nonces_per_key,
            connections,
            websocket,
            limits,
            journal_readers,
            market_data,
            latencies,
        })
    }
}

/// The settings that must be positive: snapshot commands, the rate limit and burst, the
/// nonces a key may hold, and the connection deadlines and bounds.
fn check_positive(counts: [u64; 4], connections: &ConnectionLimits) -> Result<(), String> {
    if counts.contains(&0)
        || connections.header_read_timeout.is_zero()
        || connections.idle_timeout.is_zero()
        || connections.max_connections == 0
        || connections.max_per_address == 0
    {
        return Err(
            "--snapshot-every, --rate-limit, --rate-burst, --max-nonces-per-key, \
                    --header-read-timeout, --idle-timeout, --max-connections and \
                    --max-connections-per-address must be positive"
                .into(),
        );
    }
    Ok(())
}

/// The clock mode and the manual clock's start, if given; a start needs the manual clock.
fn clock_and_start(
    args: &ServeArgs,
    file: &FileConfig,
) -> Result<(Option<ClockMode>, Option<Timestamp>), String> {
    let clock = args
        .clock
        .as_deref()
        .or(file.clock.as_deref())
        .map(|text| {
            ClockMode::parse(text)
                .ok_or_else(|| format!("--clock must be realtime or manual, got {text:?}"))
        })
        .transpose()?;
    let start = args
        .start
        .as_deref()
        .or(file.start.as_deref())
        .map(|t| {
            Timestamp::parse_rfc3339(t)
                .ok_or_else(|| format!("--start must be an RFC 3339 timestamp, got {t:?}"))
        })
        .transpose()?;
    if start.is_some() && clock != Some(ClockMode::Manual) {
        return Err("--start sets the manual clock's start; use it with --clock manual".into());
    }
    Ok((clock, start))
}

/// Commands between snapshots (100 000 unless set) and the seconds of simulation time
/// between them (3 600 unless set, 1 to [`MAX_SNAPSHOT_INTERVAL_SECS`]).
fn snapshots(args: &ServeArgs, file: &FileConfig) -> Result<(u64, i64), String> {
    let snapshot_every = args
        .snapshot_every
        .or(file.snapshot_every)
        .unwrap_or(100_000);
    let snapshot_interval = args
        .snapshot_interval
        .or(file.snapshot_interval)
        .unwrap_or(3_600);
    let snapshot_interval_secs = i64::try_from(snapshot_interval)
        .ok()
        .filter(|s| (1..=MAX_SNAPSHOT_INTERVAL_SECS).contains(s))
        .ok_or_else(|| {
            format!(
                "--snapshot-interval must be 1 to {MAX_SNAPSHOT_INTERVAL_SECS} seconds, got {snapshot_interval}"
            )
        })?;
    Ok((snapshot_every, snapshot_interval_secs))
}

/// The connection bounds and deadlines: flags over the file over the defaults.
fn connection_limits(args: &ServeArgs, file: &FileConfig) -> ConnectionLimits {
    let defaults = ConnectionLimits::default();
    let header_read_timeout = args.header_read_timeout.or(file.header_read_timeout);
    let idle_timeout = args.idle_timeout.or(file.idle_timeout);
    ConnectionLimits {
        header_read_timeout: header_read_timeout
            .map_or(defaults.header_read_timeout, Duration::from_secs),
        idle_timeout: idle_timeout.map_or(defaults.idle_timeout, Duration::from_secs),
        max_connections: args
            .max_connections
            .or(file.max_connections)
            .unwrap_or(defaults.max_connections),
        max_per_address: args
            .max_connections_per_address
            .or(file.max_connections_per_address)
            .unwrap_or(defaults.max_per_address),
    }
}

/// D4's bounds on what a key can make the venue hold, checked.
fn venue_limits(args: &ServeArgs, file: &FileConfig) -> Result<VenueLimits, String> {
    let limits = VenueLimits {
        max_open_orders: args
            .max_open_orders
            .or(file.max_open_orders)
            .unwrap_or(DEFAULT_MAX_OPEN_ORDERS),
        max_customers: args
            .max_customers
            .or(file.max_customers)
            .unwrap_or(DEFAULT_MAX_CUSTOMERS),
    };
    limits.check()?;
    Ok(limits)
}

/// Whether replays may read the journal while the server writes it (off unless set).
fn journal_readers(args: &ServeArgs, file: &FileConfig) -> Result<bool, String> {
    match args
        .journal_readers
        .as_deref()
        .or(file.journal_readers.as_deref())
    {
        None | Some("off") => Ok(false),
        Some("on") => Ok(true),
        Some(other) => Err(format!(
            "--journal-readers must be on or off, got {other:?}"
        )),
    }
}

/// `--market-data` (with it a new data dir's feed is fixed unless one is given), and the
/// latencies: `--order-latency` and `--market-data-latency`.
fn market_and_latency(
    args: &ServeArgs,
    file: &FileConfig,
    simulation: &mut Simulation,
) -> Result<(Option<MarketData>, Latencies), String> {
    let market_data = market_data(args, file)?;
    if market_data.is_some() && args.price_feed.is_none() && file.price_feed.is_none() {
        // Recorded prices drive the instruments: a random walk would move them between rows.
        simulation.price_feed = PriceFeed::Fixed;
    }
    let model = |flag: &str, given: &Option<String>, in_file: &Option<String>| {
        given
            .as_deref()
            .or(in_file.as_deref())
            .map(|text| parse_model(flag, text, &Limits::default()))
            .transpose()
    };
    let latencies = Latencies {
        order_entry: model("--order-latency", &args.order_latency, &file.order_latency)?,
        market_data: model(
            "--market-data-latency",
            &args.market_data_latency,
            &file.market_data_latency,
        )?,
    };
    Ok((market_data, latencies))
}

/// The market data file and its speed, flags over the file; the speed 1 to [`MAX_SPEED`].
fn market_data(args: &ServeArgs, file: &FileConfig) -> Result<Option<MarketData>, String> {
    let speed = args.market_data_speed.or(file.market_data_speed);
    let Some(path) = args.market_data.clone().or(file.market_data.clone()) else {
        return match speed {
            Some(_) => Err("--market-data-speed needs --market-data".into()),
            None => Ok(None),
        };
    };
    let speed = speed.unwrap_or(1);
    if !(1..=MAX_SPEED).contains(&speed) {
        return Err(format!(
            "--market-data-speed must be 1 to {MAX_SPEED}, got {speed}"
        ));
    }
    Ok(Some(MarketData { path, speed }))
}

/// The history window's rows as a power of two's exponent, the default's unless given.
fn history_window_bits(rows: Option<u64>) -> Result<u32, String> {
    let Some(rows) = rows else {
        return Ok(DEFAULT_WINDOW_BITS);
    };
    Some(rows)
        .filter(|r| r.is_power_of_two() && WINDOW_BITS.contains(&r.trailing_zeros()))
        .map(u64::trailing_zeros)
        .ok_or_else(|| {
            format!("--history-window must be a power of two from 256 to 16777216 rows, got {rows}")
        })
}

/// The rows a commit projects in its own transaction, the default's unless given.
fn projection_batch(rows: Option<u64>) -> Result<usize, String> {
    let rows = rows.unwrap_or(DEFAULT_PROJECTION_BATCH as u64);
    usize::try_from(rows)
        .ok()
        .filter(|&r| r <= MAX_PROJECTION_BATCH)
        .ok_or_else(|| {
            format!("--projection-batch must be 0 to {MAX_PROJECTION_BATCH} rows, got {rows}")
        })
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
