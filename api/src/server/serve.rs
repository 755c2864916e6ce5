//! `perpsim serve`: recover the engine from the data dir, start its host thread, serve HTTP
//! until SIGINT or SIGTERM, then write a final snapshot.
//!
//! Start-up: recover or create, the demo broker and secrets with mode 0600, signal handlers
//! before binding, a final snapshot on SIGINT/SIGTERM. What a data dir fixed at creation —
//! seed, the manual clock's start, clock mode, the living market — is compared with what a
//! restart asks for (`serve::agrees_with_data_dir`): a setting given that differs refuses the
//! start saying what to do; one left out keeps the dir's.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use perpsim_core::clock::ClockMode;
use perpsim_core::ids::PublicKey;
use perpsim_core::instrument::default_instruments;
use perpsim_core::simulation::PriceFeed;
use perpsim_core::time::{SECOND_MS, Timestamp};
use perpsim_storage::{Journal, UsedNonce, recover};
use perpsim_systems::{Engine, Genesis};

use crate::pagination::Cursors;
use crate::replay::Limits;
use crate::replay::market::{MarketFeed, Played, play_realtime, read_market};
use crate::server::app::app;
use crate::server::connections;
use crate::signing::secrets;
use crate::signing::{Authenticator, BEHIND_NS, RateLimit};
use crate::state::AppState;
use crate::state::config::{self, ServeConfig};
use crate::state::host::{self, EngineHandle, HostLimits};
use crate::state::latency::OrderLatency;
use crate::state::metrics::{self, Exporter};
use crate::ws::delay::FrameDelay;
use perpsim_systems::command::{CreateBroker, SetLimits};

/// Commits whose history rows wait together before one transaction of the projection's file
/// takes them (`perpsim_storage::backlog`): a busy server's commits are a place or a cancel
/// each, and the transaction cost as much as their rows. An idle writer projects them sooner;
/// reads find them in the backlog meanwhile.
const PROJECTION_LINGER: usize = 32;

/// What an existing data dir fixed at its creation — seed, the manual clock's start, clock
/// mode, the living market — against what this start asks for: a setting given that
/// disagrees refuses the start, saying what to do, rather than being dropped.
fn agrees_with_data_dir(
    cfg: &ServeConfig,
    genesis: &Genesis,
    mode: ClockMode,
) -> Result<(), String> {
    let dir = cfg.data_dir.display();
    let fresh = format!("start on a new data dir (another --data-dir, or remove {dir})");
    if let Some(seed) = cfg.seed.filter(|s| *s != genesis.seed) {
        return Err(format!(
            "{dir} was created with seed {}; --seed {seed} differs: leave --seed out to go on, or {fresh}",
            genesis.seed
        ));
    }
    if let Some(start) = cfg.start.filter(|s| *s != genesis.start) {
        return Err(format!(
            "{dir} began at {}; --start {start} applies only to a new data dir: leave --start out to go on from where its clock is, or {fresh}",
            genesis.start
        ));
    }
    if let Some(asked) = cfg.clock.filter(|c| *c != mode) {
        return Err(format!(
            "{dir} runs the {} clock; --clock {} differs: leave --clock out to go on, or {fresh}",
            mode.as_str(),
            asked.as_str()
        ));
    }
    if cfg.market_given && genesis.simulation != cfg.simulation {
        return Err(format!(
            "{dir} keeps the market settings it was created with (price feed, market maker, volatility, …) and the ones given differ (they are compared as a whole: give them all as at creation, or none): leave them out to go on, or {fresh}"
        ));
    }
    Ok(())
}

/// Opens or creates the engine of the data dir. Returns it and whether it is new.
fn open_engine(cfg: &ServeConfig, journal: &Journal) -> Result<(Engine, bool), String> {
    if let Some(r) = recover(journal).map_err(|e| e.to_string())? {
        agrees_with_data_dir(cfg, r.engine.genesis_config(), r.engine.clock().mode)?;
        tracing::info!(
            snapshot_tick = r.snapshot.map(|s| s.tick),
            replayed_ticks = r.replayed_ticks,
            ticks = r.engine.counters().ticks,
            ended_orders_projected = r.projected,
            "recovered from the journal"
        );
        return Ok((config::audited(r.engine), false));
    }
    let now = host::wall_clock_ms();
    let start = cfg
        .start
        .unwrap_or(Timestamp::from_millis(now.millis() / SECOND_MS * SECOND_MS));
    let seed = cfg
        .seed
        .unwrap_or_else(|| u64::from_le_bytes(secrets::random_bytes::<8>()));
    let genesis = Genesis {
        seed,
        clock_mode: cfg.clock.unwrap_or(ClockMode::Realtime),
        start,
        instruments: default_instruments(),
        simulation: cfg.simulation.clone(),
    };
    journal.init(&genesis).map_err(|e| e.to_string())?;
    tracing::info!(
        seed,
        start = %start,
        clock = genesis.clock_mode.as_str(),
        price_feed = cfg.simulation.price_feed.as_str(),
        market_maker = cfg.simulation.market_maker,
        "new data dir"
    );
    Ok((config::audited(Engine::genesis(genesis)), true))
}

pub fn serve(cfg: ServeConfig) -> Result<(), String> {
    secrets::ensure_dir(&cfg.data_dir)?;
    // Before anything starts: a token no client could send refuses the start (issue 23).
    let admin_token = match cfg.admin_token.clone() {
        Some(token) => token,
        None => secrets::admin_token(&cfg.data_dir)?,
    };
    let journal_path = cfg.data_dir.join(secrets::JOURNAL_FILE);
    let journal = match cfg.journal_readers {
        true => Journal::open_shared(&journal_path),
        false => Journal::open_logged(&journal_path),
    }
    .map_err(|e| format!("{}: {e}", journal_path.display()))?;
    let (engine, fresh) = open_engine(&cfg, &journal)?;
    let feed = market_feed(&cfg, &engine)?;
    let seed = engine.genesis_config().seed;
    let latency = cfg.latencies.order_entry.clone().map(|model| {
        tracing::info!(?model, "order latency");
        Arc::new(OrderLatency::new(model, seed))
    });
    let delay = cfg.latencies.market_data.clone().map(|model| {
        tracing::info!(?model, "market data latency");
        FrameDelay::new(model, seed)
    });
    // The nonces spent inside the window before this start stay spent (D2, at most once).
    let spent = journal
        .nonces_since(host::wall_clock_ns().saturating_sub(BEHIND_NS))
        .map_err(|e| format!("reading spent nonces: {e}"))?;
    let limits_changed = engine.limits() != cfg.limits;
    let limits = HostLimits {
        snapshot_every: cfg.snapshot_every,
        snapshot_interval_ms: cfg.snapshot_interval_secs * SECOND_MS,
        history_window_bits: cfg.history_window_bits,
        ..HostLimits::default()
    };
    journal.set_projection_batch(cfg.projection_batch);
    journal.set_projection_linger(PROJECTION_LINGER);
    let exporter = Exporter::install()?;
    let (handle, thread) = host::start(engine, journal, limits);
    first_commands(&cfg, &handle, fresh, limits_changed)?;
    let cursors = Cursors::new(secrets::cursor_secret(&cfg.data_dir)?);
    let auth = authenticator(&cfg, spent);
    let limits = cfg.connections;
    raise_open_files(u64::from(limits.max_connections) + u64::from(cfg.websocket.max_connections));
    tracing::info!(
        header_read_timeout_secs = limits.header_read_timeout.as_secs(),
        idle_timeout_secs = limits.idle_timeout.as_secs(),
        max_connections = limits.max_connections,
        max_connections_per_address = limits.max_per_address,
        "connection limits"
    );
    let transfer_delay_ms =
        i64::try_from(cfg.transfer_delay_secs.saturating_mul(1_000)).unwrap_or(i64::MAX);
    let state = Arc::new(AppState::new(
        handle.clone(),
        auth,
        cursors,
        admin_token,
        Some(exporter),
        transfer_delay_ms,
        latency,
    ));
    let served = listen(&cfg, (state, handle), Played(feed), delay);
    let engine_result = thread
        .join()
        .map_err(|_| "the engine thread panicked".to_owned())?;
    engine_result.map_err(|e| format!("engine: {e}"))?;
    served
}

/// What a start journals before it serves: the demo broker of a new data dir, and the venue
/// bounds when the configuration changed them; then what the venue runs with, logged.
fn first_commands(
    cfg: &ServeConfig,
    handle: &EngineHandle,
    fresh: bool,
    limits_changed: bool,
) -> Result<(), String> {
    if fresh {
        let key = secrets::demo_key(&cfg.data_dir)?;
        let public_key = PublicKey(key.verifying_key().to_bytes());
        handle
            .submit_blocking(CreateBroker {
                name: "demo".into(),
                public_key,
            })
            .map_err(|e| e.to_string())?;
    }
    if limits_changed {
        handle
            .submit_blocking(SetLimits { limits: cfg.limits })
            .map_err(|e| e.to_string())?;
    }
    tracing::info!(
        max_open_orders = cfg.limits.max_open_orders,
        max_customers = cfg.limits.max_customers,
        "venue limits"
    );
    tracing::info!(path = %cfg.data_dir.join(secrets::DEMO_KEY_FILE).display(), "demo broker key");
    tracing::info!(path = %cfg.data_dir.join(secrets::ADMIN_TOKEN_FILE).display(), "admin token");
    tracing::info!(
        transfer_delay_secs = cfg.transfer_delay_secs,
        "transfer delay"
    );
    Ok(())
}

/// `--market-data`: the file read and mapped onto the data dir's time. Refused where the
/// venue's own random walk would move the prices it sets.
fn market_feed(cfg: &ServeConfig, engine: &Engine) -> Result<Option<Arc<MarketFeed>>, String> {
    let Some(data) = &cfg.market_data else {
        return Ok(None);
    };
    let genesis = engine.genesis_config();
    if genesis.simulation.price_feed != PriceFeed::Fixed {
        return Err(format!(
            "--market-data sets the prices: {} runs a random walk, which would move them between rows; start on a new data dir (its price feed is then fixed)",
            cfg.data_dir.display()
        ));
    }
    let plan = read_market(&data.path, &Limits::default())?;
    tracing::info!(
        path = %data.path.display(),
        steps = plan.steps.len(),
        speed = data.speed,
        "market data"
    );
    Ok(Some(Arc::new(MarketFeed::new(
        plan,
        genesis.start,
        data.speed,
    ))))
}

/// Sends what the market data has due now, before anyone is served; on the realtime clock
/// the rest then plays on a task of its own (on the manual clock, advances play it).
async fn start_feed(played: &Played, handle: &EngineHandle) -> Result<(), String> {
    let Some(feed) = &played.0 else {
        return Ok(());
    };
    let clock = handle.view().clock;
    let skipped = feed
        .catch_up(handle, clock.now)
        .await
        .map_err(|e| e.to_string())?;
    tracing::info!(skipped, "market data: caught up with the clock");
    if clock.mode == ClockMode::Realtime {
        tokio::spawn(play_realtime(feed.clone(), handle.clone()));
    }
    Ok(())
}

/// The signing checks' state, with the nonces spent inside the window before this start.
fn authenticator(cfg: &ServeConfig, spent: Vec<UsedNonce>) -> Authenticator {
    let auth = Authenticator::new(
        RateLimit {
            per_second: cfg.rate_limit,
            burst: cfg.rate_burst,
        },
        cfg.auth_failures,
        cfg.max_nonces_per_key,
    );
    tracing::info!(
        restored = spent.len(),
        bound_per_key = auth.nonce_bound(),
        "spent nonces inside the window"
    );
    auth.restore(spent);
    auth
}

/// Serves until a signal or the engine stops, then writes the final snapshot.
fn listen(
    cfg: &ServeConfig,
    (state, handle): (Arc<AppState>, EngineHandle),
    played: Played,
    delay: Option<FrameDelay>,
) -> Result<(), String> {
    let limits = cfg.connections;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        // Registered before the socket is bound: a signal that arrives as soon as we listen
        // must already find our handler, or the process dies without its final snapshot.
        let signals =
            Signals::register().map_err(|e| format!("cannot install signal handlers: {e}"))?;
        start_feed(&played, &handle).await?;
        let listener = tokio::net::TcpListener::bind(cfg.listen)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", cfg.listen))?;
        let local = listener.local_addr().map_err(|e| e.to_string())?;
        tracing::info!(address = %format!("http://{local}"), "listening");
        state.ready.store(true, Relaxed);
        let prune = tokio::spawn(prune_keys(state.clone()));
        let stop = {
            let handle = handle.clone();
            async move {
                tokio::select! {
                    _ = signals.recv() => tracing::info!("shutting down"),
                    _ = handle.stopped() => tracing::error!("the engine stopped; shutting down"),
                }
            }
        };
        let ws = crate::ws::start(state.clone(), cfg.websocket, delay);
        let endpoint = app(state.clone(), ws.clone(), local, played);
        let result = connections::serve(listener, endpoint, ws, limits, stop)
            .await
            .map_err(|e| e.to_string());
        state.ready.store(false, Relaxed);
        prune.abort();
        let snapshot = handle.shutdown().await;
        result.and(snapshot.or_else(|e| {
            if e.contains("already stopped") {
                Ok(())
            } else {
                Err(e)
            }
        }))
    })
}

/// Room for every allowed connection, the journal and the process's own files: the soft
/// open-files limit is raised towards the hard one when it is lower (a warning if it cannot be).
fn raise_open_files(connections: u64) {
    // The journal and the process's own files, and room for the sockets being refused or
    // still closing after giving way to a new connection.
    const OWN_FILES: u64 = 64;
    const CLOSING: u64 = 512;
    let wanted = connections + OWN_FILES + CLOSING;
    match rlimit::increase_nofile_limit(wanted) {
        Ok(got) if got >= wanted => {}
        Ok(got) => tracing::warn!(
            open_files = got,
            wanted,
            "open-files limit is below --max-connections; accept will back off when it is reached"
        ),
        Err(e) => tracing::warn!(error = %e, "cannot read or raise the open-files limit"),
    }
}

/// Every few seconds: drops authentication state of revoked keys, bounding it to live keys;
/// reports the nonce store's size; drains the metrics' histogram samples into their buckets.
async fn prune_keys(state: Arc<AppState>) {
    let mut every = tokio::time::interval(Duration::from_secs(5));
    loop {
        every.tick().await;
        let view = state.engine.view();
        state
            .auth
            .prune(|k| view.keys.contains_key(k), host::wall_clock_ns());
        metrics::nonce_store(state.auth.tracked_keys(), state.auth.nonces());
        if let Some(exporter) = &state.exporter {
            exporter.upkeep();
        }
    }
}

/// SIGINT and SIGTERM, both of which stop the service cleanly.
struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl Signals {
    fn register() -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    async fn recv(mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
    }
}
