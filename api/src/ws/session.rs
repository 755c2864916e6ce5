//! One WebSocket connection: its ops (D9), its queue of frames, its heartbeat.
//!
//! Replies to its own ops (authenticated, pong, errors) are written at once; everything
//! the hub sends (acknowledgements of subscriptions with their snapshots, data frames)
//! comes through the connection's bounded queue in the order the hub queued it. A bad frame
//! is answered with an error and never closes the connection.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use perpsim_core::ErrorCode;
use perpsim_core::ids::BrokerCode;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{OwnedSemaphorePermit, mpsc, watch};
use tokio::time::Instant;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use super::WsShared;
use super::frames::{Frame, OpReply, frame};
use super::hub::{Close, ConnId, Control, Signal};
use super::ops::{Op, Refusal, parse};
use super::topic::{Topic, TopicError};
use crate::signing::{AuthError, SignedHeaders};
use crate::state::host::wall_clock_ns;
use crate::state::metrics::{self, Api};

/// Most queued frames written (and flushed) together.
const WRITE_BATCH: usize = 256;

/// Why a connection the client let go silent is closed.
const HEARTBEAT: Close = Close {
    code: 1001,
    reason: "heartbeat timeout: nothing heard from the client",
};

/// The canonical request an authenticate signs (D9): `{nonce}\nGET\n/v1/ws\n`.
pub const SIGNED_PATH: &str = "/v1/ws";
/// Time a close frame may take to leave before the socket is simply dropped: a slow
/// consumer's frame waits behind what its socket already holds, so it gets a few seconds.
const CLOSE_TIME: Duration = Duration::from_secs(5);

struct Session {
    id: ConnId,
    shared: Arc<WsShared>,
    broker: Option<BrokerCode>,
    /// The topics held, as the hub holds them, to keep the bound without asking it.
    topics: BTreeSet<Topic>,
}

/// Serves one upgraded connection until either side ends it.
pub async fn run<S>(
    ws: WebSocketStream<S>,
    shared: Arc<WsShared>,
    permit: OwnedSemaphorePermit,
    remote: IpAddr,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let id = shared.next_id.fetch_add(1, Relaxed);
    let limits = shared.limits;
    let (frames_tx, mut frames) = mpsc::channel(limits.queue_frames as usize);
    let (signal_tx, mut signals) = watch::channel(None);
    let open = Control::Open {
        id,
        remote,
        frames: frames_tx,
        signal: signal_tx,
    };
    if shared.control.send(open).await.is_err() {
        return;
    }
    metrics::ws_opened();
    let (mut sink, mut stream) = ws.split();
    let mut session = Session {
        id,
        shared: Arc::clone(&shared),
        broker: None,
        topics: BTreeSet::new(),
    };
    let mut heartbeat = tokio::time::interval(limits.heartbeat_timeout / 3);
    let mut heard = Instant::now();
    let end: Option<Signal> = loop {
        let out: Vec<Message> = tokio::select! {
            // The hub's signals first: a stall or a close takes effect before the next frame.
            biased;
            _ = signals.changed() => match latest(&signals) {
                Some(Signal::Stall(pause)) => {
                    // The fault plan's stall: nothing sent, nothing read, no pings.
                    tokio::time::sleep(pause).await;
                    heard = Instant::now();
                    Vec::new()
                }
                signal => break signal,
            },
            incoming = stream.next() => match incoming {
                Some(Ok(Message::Text(text))) => {
                    heard = Instant::now();
                    session.handle(&text).await.into_iter().map(Message::Text).collect()
                }
                Some(Ok(Message::Binary(_))) => {
                    heard = Instant::now();
                    let refusal = Refusal::new(ErrorCode::Validation, "frames are JSON text, not binary");
                    vec![Message::Text(refusal.frame())]
                }
                // tungstenite answers a ping with a pong on the next write: flush below.
                Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {
                    heard = Instant::now();
                    Vec::new()
                }
                Some(Ok(Message::Close(_)) | Err(_)) | None => break None,
            },
            Some(f) = frames.recv() => {
                // Whatever else is queued goes in the same write: one syscall for a burst.
                let mut out = vec![Message::Text(f)];
                while out.len() < WRITE_BATCH {
                    match frames.try_recv() {
                        Ok(f) => out.push(Message::Text(f)),
                        Err(_) => break,
                    }
                }
                out
            }
            _ = heartbeat.tick() => match heard.elapsed() > limits.heartbeat_timeout {
                true => break Some(Signal::Close(HEARTBEAT)),
                false => vec![Message::Ping(Default::default())],
            },
        };
        // A socket that takes no more must not keep the hub's signals waiting.
        let ended: Option<Option<Signal>> = tokio::select! {
            r = async {
                for m in out {
                    sink.feed(m).await?;
                }
                sink.flush().await
            } => r.err().map(|_| None),
            _ = signals.changed() => match latest(&signals) {
                Some(Signal::Stall(pause)) => {
                    tokio::time::sleep(pause).await;
                    heard = Instant::now();
                    None
                }
                signal => Some(signal),
            },
        };
        if let Some(end) = ended {
            break end;
        }
    };
    if let Some(Signal::Close(c)) = end {
        let frame = CloseFrame {
            code: CloseCode::from(c.code),
            reason: c.reason.into(),
        };
        let _ = tokio::time::timeout(CLOSE_TIME, sink.send(Message::Close(Some(frame)))).await;
    }
    let _ = shared.control.send(Control::Gone { id }).await;
    metrics::ws_closed();
    drop(permit);
}

/// The hub's last signal (the borrow ends here, before any await).
fn latest(signals: &watch::Receiver<Option<Signal>>) -> Option<Signal> {
    *signals.borrow()
}

fn reply(op: &str) -> Frame {
    frame(&OpReply {
        op: op.into(),
        args: None,
    })
}

impl Session {
    /// The frames that answer one client frame at once (the hub answers subscriptions).
    async fn handle(&mut self, text: &str) -> Vec<Frame> {
        let op = match parse(text) {
            Ok(op) => op,
            Err(refusal) => return vec![refusal.frame()],
        };
        let result = match op {
            Op::Ping(_) => Ok(vec![reply("pong")]),
            Op::Authenticate(a) => {
                self.authenticate(&a.public_key, &a.nonce, &a.signature)
                    .await
            }
            Op::Subscribe(ask) => Ok(self.subscribe(ask.args, true).await),
            Op::Unsubscribe(ask) => Ok(self.subscribe(ask.args, false).await),
        };
        result.unwrap_or_else(|refusal| vec![refusal.frame()])
    }

    /// D9: the REST checks over `{nonce}\nGET\n/v1/ws\n`, the nonce spent durably through
    /// the same path as a REST request's (one namespace per key, across restarts too).
    async fn authenticate(
        &mut self,
        public_key: &str,
        nonce: &str,
        signature: &str,
    ) -> Result<Vec<Frame>, Refusal> {
        if self.broker.is_some() {
            return Err(Refusal::new(
                ErrorCode::Validation,
                "this connection is already authenticated",
            ));
        }
        let state = &self.shared.state;
        let headers = SignedHeaders {
            public_key: Some(public_key),
            nonce: Some(nonce),
            signature: Some(signature),
        };
        let view = state.engine.view();
        let lookup = |k: &_| view.keys.get(k).copied();
        let verdict =
            state
                .auth
                .authenticate(&headers, lookup, "GET", SIGNED_PATH, b"", wall_clock_ns());
        let admission = verdict.map_err(|e| match e {
            AuthError::Unauthorized(message) => {
                metrics::auth_failure(Api::WebSocket, "unauthorized");
                Refusal::new(ErrorCode::Unauthorized, message)
            }
            AuthError::RateLimited { .. } => {
                metrics::auth_failure(Api::WebSocket, "rate_limited");
                Refusal::new(ErrorCode::RateLimited, "rate limit exceeded; retry later")
            }
            AuthError::NonceMemoryFull { .. } => {
                metrics::auth_failure(Api::WebSocket, "nonce_memory_full");
                Refusal::new(ErrorCode::RateLimited, "rate limit exceeded; retry later")
            }
        })?;
        state
            .engine
            .spend_nonce(&admission)
            .await
            .map_err(|e| Refusal::new(e.code, e.message))?;
        self.broker = Some(admission.broker);
        let told = Control::Authenticated {
            id: self.id,
            broker: admission.broker,
        };
        let _ = self.shared.control.send(told).await;
        Ok(vec![reply("authenticated")])
    }

    /// Subscribes (or unsubscribes) the topics that parse, within the bound; an error frame,
    /// naming its topic, for each that does not.
    async fn subscribe(&mut self, args: Vec<String>, on: bool) -> Vec<Frame> {
        let view = self.shared.state.engine.view();
        let max = self.shared.limits.max_subscriptions as usize;
        let mut errors = Vec::new();
        let mut topics: Vec<(Topic, String)> = Vec::new();
        for name in args {
            if topics.iter().any(|(_, n)| *n == name) {
                continue;
            }
            let topic = match Topic::parse(&name, &view, self.broker) {
                Ok(t) => t,
                Err(e) => {
                    errors.push(topic_refusal(&e).on(&name).frame());
                    continue;
                }
            };
            if on && !self.topics.contains(&topic) && self.topics.len() >= max {
                let message = format!(
                    "a connection holds at most {max} subscriptions (--max-ws-subscriptions)"
                );
                errors.push(
                    Refusal::new(ErrorCode::Validation, message)
                        .on(&name)
                        .frame(),
                );
                continue;
            }
            match on {
                true => self.topics.insert(topic),
                false => self.topics.remove(&topic),
            };
            topics.push((topic, name));
        }
        if !topics.is_empty() {
            let id = self.id;
            let c = match on {
                true => Control::Subscribe { id, topics },
                false => Control::Unsubscribe { id, topics },
            };
            let _ = self.shared.control.send(c).await;
        }
        errors
    }
}

fn topic_refusal(e: &TopicError) -> Refusal {
    let code = match e {
        TopicError::Unknown(_) => ErrorCode::Validation,
        TopicError::Private => ErrorCode::Unauthorized,
        TopicError::NoSuchCustomer(_) => ErrorCode::NotFound,
    };
    Refusal::new(code, e.to_string())
}
