//! What every layer above shares: the application state handlers read (the engine handle,
//! the signing state, the cursor key, the metrics), the engine host thread behind the handle,
//! and the server's resolved configuration. It knows no route and no handler.

pub mod config;
pub mod host;
pub mod metrics;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use crate::pagination::Cursors;
use crate::signing::Authenticator;
use host::EngineHandle;
use metrics::Metrics;

/// The state every handler is given (poem `Data`).
pub struct AppState {
    pub engine: EngineHandle,
    /// Simulation time from a transfer's request to its completion (D7 `--transfer-delay`).
    pub transfer_delay_ms: i64,
    pub auth: Authenticator,
    pub cursors: Cursors,
    pub admin_token: String,
    pub metrics: Arc<Metrics>,
    pub ready: AtomicBool,
}

impl AppState {
    pub fn new(
        engine: EngineHandle,
        auth: Authenticator,
        cursors: Cursors,
        admin_token: String,
        metrics: Arc<Metrics>,
        transfer_delay_ms: i64,
    ) -> Self {
        AppState {
            engine,
            transfer_delay_ms,
            auth,
            cursors,
            admin_token,
            metrics,
            ready: AtomicBool::new(false),
        }
    }
}
