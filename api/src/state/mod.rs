//! What every layer above shares: the application state handlers read (the engine handle,
//! the signing state, the cursor key, the metrics), the engine host thread behind the handle,
//! and the server's resolved configuration. It knows no route and no handler.

pub mod config;
pub mod host;
pub mod latency;
pub mod metrics;
mod published;
mod writer;

#[cfg(test)]
mod testing;

use std::sync::atomic::AtomicBool;

use self::metrics::Exporter;
use crate::pagination::Cursors;
use crate::signing::Authenticator;
use host::EngineHandle;

/// The state every handler is given (poem `Data`).
pub struct AppState {
    pub engine: EngineHandle,
    /// Simulation time from a transfer's request to its completion (D7 `--transfer-delay`).
    pub transfer_delay_ms: i64,
    pub auth: Authenticator,
    pub cursors: Cursors,
    pub admin_token: String,
    /// `/metrics`: the installed recorder (none when this process did not install one).
    pub exporter: Option<Exporter>,
    pub ready: AtomicBool,
    /// Held by the clock advance running (the admin API's), so two run one after the other.
    pub advancing: tokio::sync::Mutex<()>,
    /// `--order-latency`: order entries held for their drawn delay (`latency`).
    pub latency: Option<std::sync::Arc<latency::OrderLatency>>,
}

impl AppState {
    pub fn new(
        engine: EngineHandle,
        auth: Authenticator,
        cursors: Cursors,
        admin_token: String,
        exporter: Option<Exporter>,
        transfer_delay_ms: i64,
        latency: Option<std::sync::Arc<latency::OrderLatency>>,
    ) -> Self {
        AppState {
            engine,
            transfer_delay_ms,
            auth,
            cursors,
            admin_token,
            exporter,
            ready: AtomicBool::new(false),
            advancing: tokio::sync::Mutex::new(()),
            latency,
        }
    }
}
