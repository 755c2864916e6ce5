//! The WebSocket push channels (interface §6, D9) at `GET /v1/ws`.
//!
//! - [`upgrade`]: the handshake, on the HTTP connection `server::connections` drives; the
//!   upgraded connection leaves the HTTP bound for `--max-ws-connections`, where
//!   `server::admission` judges it by its [`session::Standing`].
//! - [`session`]: one connection — ops and their rate, its deadline to authenticate, its
//!   heartbeat; [`outbox`]: its queue, bounded in frames and bytes.
//! - [`hub`]: the one task that fans the engine's tick events out to the subscriptions,
//!   rendering each event once ([`render`], [`book`]) into [`frames`] whose bytes every
//!   receiving connection shares.
//! - [`topic`]: the ten topics and who may hear them; [`ops`]: what clients send.
//! - [`strikes`]: the fault plan's channel faults as the hub strikes them, and the recovery
//!   report.
//!
//! It knows the engine only through the events and the read view the host publishes; it
//! never waits on the engine, and the engine never waits on it.

pub mod asyncapi;
pub mod book;
pub mod delay;
pub mod frames;
pub mod hub;
pub mod ops;
pub mod outbox;
pub mod render;
pub mod session;
pub mod strikes;
pub mod topic;
pub mod upgrade;

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use tokio::sync::mpsc;

use crate::state::AppState;
use crate::state::config::WsLimits;

/// Control messages waiting for the hub; a connection waits when it is full.
const CONTROL_QUEUE: usize = 4_096;

/// What every connection shares: the service's state, the bounds and the hub's inbox.
pub struct WsShared {
    pub state: Arc<AppState>,
    pub limits: WsLimits,
    control: mpsc::Sender<hub::Control>,
    next_id: AtomicU64,
}

/// Starts the hub on the current runtime. It subscribes to the engine's ticks before it reads
/// the view it starts from, so no tick falls between the two.
pub fn start(
    state: Arc<AppState>,
    limits: WsLimits,
    delay: Option<delay::FrameDelay>,
) -> Arc<WsShared> {
    let ticks = state.engine.subscribe();
    let hub = hub::Hub::new(state.engine.clone());
    let (control, inbox) = mpsc::channel(CONTROL_QUEUE);
    tokio::spawn(hub.run(inbox, ticks, delay));
    Arc::new(WsShared {
        state,
        limits,
        control,
        next_id: AtomicU64::new(0),
    })
}

impl WsShared {
    /// The fault plan's recovery report, from the hub; None once the hub has stopped.
    pub async fn report(&self) -> Option<strikes::RecoveryReport> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.control.send(hub::Control::Report(reply)).await.ok()?;
        answer.await.ok()
    }
}
