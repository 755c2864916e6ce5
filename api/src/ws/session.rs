//! One WebSocket connection: its ops (D9), its queue of frames, its heartbeat, and what it
//! may do before it authenticates.
//!
//! Replies to its own ops (authenticated, pong, errors) are written at once; everything
//! the hub sends (acknowledgements of subscriptions with their snapshots, data frames)
//! comes through the connection's bounded queue ([`Inbox`]) in the order the hub queued it.
//! Queued frames are written before the next op is read, so a client that sends ops faster
//! than it reads the answers is held back by its own socket instead of growing a queue.
//!
//! A bad op is answered with an error and never closes the connection. What does (each
//! with its close code and reason):
//! - neither an authenticate nor a subscribe within `--ws-auth-timeout`: 1008;
//! - more frames than `--ws-op-rate` and `--ws-op-burst` allow: an error, then 1008;
//! - [`MAX_FAILED_AUTHENTICATIONS`] failed authenticates: an error, then 1008;
//! - the key it authenticated with revoked: 1008 (the hub sees it at the next tick);
//! - at the bound of connections, having no credentials: 1013, giving way to a newcomer
//!   ([`Standing`], judged by `server::admission`);
//! - a frame over 64 KiB: 1009; text that is not UTF-8: 1007; a broken frame: 1002.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU8;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};
use std::time::Duration;

use futures_util::stream::SplitSink;
use futures_util::{SinkExt, StreamExt};
use perpsim_core::ErrorCode;
use perpsim_core::ids::{BrokerCode, PublicKey};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use super::WsShared;
use super::frames::{Frame, OpReply, frame};
use super::hub::{Close, ConnId, Control, Signal};
use super::ops::{Op, Refusal, parse};
use super::outbox::{self, Inbox};
use super::topic::{Topic, TopicError};
use crate::signing::{Attempt, Bucket, ClientAddress, SignedHeaders};
use crate::state::host::wall_clock_ns;
use crate::state::metrics::{self, Api};

/// Most queued frames written (and flushed) together.
const WRITE_BATCH: usize = 256;

/// Failed authenticates a connection may make; the last is answered, then it is closed.
pub const MAX_FAILED_AUTHENTICATIONS: u32 = 5;

/// The canonical request an authenticate signs (D9): `{nonce}\nGET\n/v1/ws\n`.
pub const SIGNED_PATH: &str = "/v1/ws";
/// Time a close frame may take to leave before the socket is simply dropped: a slow
/// consumer's frame waits behind what its socket already holds, so it gets a few seconds.
const CLOSE_TIME: Duration = Duration::from_secs(5);

const HEARTBEAT: Close = Close {
    code: 1001,
    reason: "heartbeat timeout: nothing heard from the client",
    label: "heartbeat",
};
const AUTH_TIMEOUT: Close = Close {
    code: 1008,
    reason: "authentication timeout",
    label: "auth_timeout",
};
const GAVE_WAY: Close = Close {
    code: 1013,
    reason: "too many connections: a connection without credentials gives way; retry later",
    label: "gave_way",
};
const OP_RATE: Close = Close {
    code: 1008,
    reason: "op rate exceeded",
    label: "op_rate",
};
const FAILED_AUTHENTICATIONS: Close = Close {
    code: 1008,
    reason: "too many failed authentications",
    label: "failed_authentications",
};
pub const KEY_REVOKED: Close = Close {
    code: 1008,
    reason: "key revoked",
    label: "key_revoked",
};
const TOO_LARGE: Close = Close {
    code: 1009,
    reason: "frame too large: at most 65536 bytes",
    label: "frame_too_large",
};
const NOT_UTF8: Close = Close {
    code: 1007,
    reason: "text frames must be UTF-8",
    label: "not_utf8",
};
const BROKEN: Close = Close {
    code: 1002,
    reason: "protocol error",
    label: "protocol_error",
};

const WAITING: u8 = 0;
const AUTHENTICATED: u8 = 1;
const EVICTED: u8 = 2;

/// Whether a connection holds credentials, as the connection bound judges it: one without
/// may give way to a newcomer at the bound, one that authenticated never does.
pub struct Standing {
    opened: Instant,
    state: AtomicU8,
    evicted: Notify,
}

impl Default for Standing {
    fn default() -> Self {
        Standing {
            opened: Instant::now(),
            state: AtomicU8::new(WAITING),
            evicted: Notify::new(),
        }
    }
}

impl Standing {
    /// Since when it could give way: while it has no credentials, since it opened.
    pub fn without_credentials_since(&self) -> Option<Instant> {
        (self.state.load(Acquire) == WAITING).then_some(self.opened)
    }

    /// Closes it if it still has no credentials; whether it did.
    pub fn evict(&self) -> bool {
        let evicted = self
            .state
            .compare_exchange(WAITING, EVICTED, AcqRel, Acquire)
            .is_ok();
        if evicted {
            // Stores a permit when the session is not waiting on it yet.
            self.evicted.notify_one();
        }
        evicted
    }

    /// It authenticated, unless it was closed to admit another first.
    fn authenticated(&self) -> bool {
        self.state
            .compare_exchange(WAITING, AUTHENTICATED, AcqRel, Acquire)
            .is_ok()
    }
}

struct Session {
    id: ConnId,
    shared: Arc<WsShared>,
    from: ClientAddress,
    standing: Arc<Standing>,
    /// The broker and the key it authenticated with.
    credentials: Option<(BrokerCode, PublicKey)>,
    /// Whether it ever authenticated or subscribed: the deadline is over.
    admitted: bool,
    failed_authentications: u32,
    /// The topics held, as the hub holds them, to keep the bound without asking it.
    topics: BTreeSet<Topic>,
    /// Frames the client may still send, and since when it is counted.
    ops: Bucket,
    opened: Instant,
}

/// What answers one client frame: frames to write, then perhaps a close.
#[derive(Default)]
struct Answer {
    frames: Vec<Frame>,
    close: Option<Close>,
}

impl From<Vec<Frame>> for Answer {
    fn from(frames: Vec<Frame>) -> Self {
        Answer {
            frames,
            close: None,
        }
    }
}

/// Serves one upgraded connection until either side ends it; `place` (its place under the
/// connection bound) is let go when it ends.
pub async fn run<S>(
    ws: WebSocketStream<S>,
    shared: Arc<WsShared>,
    standing: Arc<Standing>,
    place: impl Send,
    remote: IpAddr,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let id = shared.next_id.fetch_add(1, Relaxed);
    let limits = shared.limits;
    let (outbox, mut inbox) = outbox::queue(limits.queue_frames, limits.queue_bytes);
    let (signal_tx, signals) = watch::channel(None);
    let open = Control::Open {
        id,
        remote,
        outbox,
        signal: signal_tx,
    };
    if shared.control.send(open).await.is_err() {
        return;
    }
    metrics::ws_opened();
    let session = Session {
        id,
        shared: Arc::clone(&shared),
        from: ClientAddress::from(remote),
        standing,
        credentials: None,
        admitted: false,
        failed_authentications: 0,
        topics: BTreeSet::new(),
        ops: Bucket::full_of(limits.op_rate()),
        opened: Instant::now(),
    };
    let end = session.serve(ws, &mut inbox, signals).await;
    let _ = shared.control.send(Control::Gone { id }).await;
    metrics::ws_closed(end.map(|c| c.label));
    drop(place);
}

/// The hub's last signal (the borrow ends here, before any await).
fn latest(signals: &watch::Receiver<Option<Signal>>) -> Option<Signal> {
    *signals.borrow()
}

/// The close a read error asks for; `None` when the connection is simply gone.
fn read_error(e: &WsError) -> Option<Close> {
    match e {
        WsError::Capacity(_) => Some(TOO_LARGE),
        WsError::Utf8(_) => Some(NOT_UTF8),
        WsError::Protocol(_) => Some(BROKEN),
        _ => None,
    }
}

fn reply(op: &str) -> Frame {
    frame(&OpReply {
        op: op.into(),
        args: None,
    })
}

/// Up to [`WRITE_BATCH`] frames: `first` and whatever else is queued, one write for a burst.
fn batch(first: Frame, inbox: &mut Inbox) -> Vec<Message> {
    let mut out = vec![Message::Text(first)];
    while out.len() < WRITE_BATCH {
        match inbox.try_recv() {
            Some(f) => out.push(Message::Text(f)),
            None => break,
        }
    }
    out
}

/// Writes `out` to the socket; `Some` with how the connection ends if it must (the socket
/// failed, or the hub signalled meanwhile: a socket that takes no more must not keep the
/// hub's signals waiting). A stall signalled meanwhile is served here.
async fn write_out<S>(
    sink: &mut SplitSink<WebSocketStream<S>, Message>,
    out: Vec<Message>,
    signals: &mut watch::Receiver<Option<Signal>>,
    heard: &mut Instant,
) -> Option<Option<Signal>>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    tokio::select! {
        r = async {
            for m in out {
                sink.feed(m).await?;
            }
            sink.flush().await
        } => r.err().map(|_| None),
        _ = signals.changed() => match latest(signals) {
            Some(Signal::Stall(pause)) => {
                tokio::time::sleep(pause).await;
                *heard = Instant::now();
                None
            }
            signal => Some(signal),
        },
    }
}

impl Session {
    /// The connection's loop; the close it ended with, if the server closed it.
    async fn serve<S>(
        mut self,
        ws: WebSocketStream<S>,
        inbox: &mut Inbox,
        mut signals: watch::Receiver<Option<Signal>>,
    ) -> Option<Close>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let limits = self.shared.limits;
        let (mut sink, mut stream) = ws.split();
        let mut heartbeat = tokio::time::interval(limits.heartbeat_timeout / 3);
        let mut heard = Instant::now();
        let deadline = tokio::time::sleep(limits.auth_timeout);
        tokio::pin!(deadline);
        let standing = Arc::clone(&self.standing);
        let end: Option<Signal> = loop {
            let (out, close): (Vec<Message>, Option<Close>) = tokio::select! {
                // The hub's signals first: a stall or a close takes effect before the next frame.
                biased;
                _ = signals.changed() => match latest(&signals) {
                    Some(Signal::Stall(pause)) => {
                        // The fault plan's stall: nothing sent, nothing read, no pings.
                        tokio::time::sleep(pause).await;
                        heard = Instant::now();
                        (Vec::new(), None)
                    }
                    signal => break signal,
                },
                _ = standing.evicted.notified() => break Some(Signal::Close(GAVE_WAY)),
                _ = &mut deadline, if !self.admitted => break Some(Signal::Close(AUTH_TIMEOUT)),
                // What is queued for the client goes out before its next op is read.
                Some(f) = inbox.recv() => (batch(f, inbox), None),
                incoming = stream.next() => match incoming {
                    Some(Ok(Message::Close(_))) | None => break None,
                    Some(Ok(message)) => {
                        heard = Instant::now();
                        let answer = self.receive(message).await;
                        (answer.frames.into_iter().map(Message::Text).collect(), answer.close)
                    }
                    Some(Err(e)) => break read_error(&e).map(Signal::Close),
                },
                _ = heartbeat.tick() => match heard.elapsed() > limits.heartbeat_timeout {
                    true => break Some(Signal::Close(HEARTBEAT)),
                    false => (vec![Message::Ping(Default::default())], None),
                },
            };
            if let Some(end) = write_out(&mut sink, out, &mut signals, &mut heard).await {
                break end;
            }
            if let Some(close) = close {
                break Some(Signal::Close(close));
            }
        };
        let Some(Signal::Close(c)) = end else {
            return None;
        };
        let frame = CloseFrame {
            code: CloseCode::from(c.code),
            reason: c.reason.into(),
        };
        let _ = tokio::time::timeout(CLOSE_TIME, sink.send(Message::Close(Some(frame)))).await;
        Some(c)
    }

    /// One client frame, counted against the op rate: a frame past it is answered with an
    /// error and the connection closes.
    async fn receive(&mut self, message: Message) -> Answer {
        let rate = self.shared.limits.op_rate();
        let now_ns = self.opened.elapsed().as_nanos() as u64;
        if self.ops.take(rate, now_ns).is_err() {
            let message = format!(
                "more than {} frames a second (bursts of {}) on this connection \
                 (--ws-op-rate, --ws-op-burst); closing",
                rate.per_second, rate.burst
            );
            let refusal = Refusal::new(ErrorCode::RateLimited, message);
            return Answer {
                frames: vec![refusal.frame()],
                close: Some(OP_RATE),
            };
        }
        match message {
            Message::Text(text) => self.handle(&text).await,
            Message::Binary(_) => {
                let refusal =
                    Refusal::new(ErrorCode::Validation, "frames are JSON text, not binary");
                vec![refusal.frame()].into()
            }
            // tungstenite answers a ping with a pong on the next write.
            _ => Answer::default(),
        }
    }

    /// The frames that answer one op at once (the hub answers subscriptions).
    async fn handle(&mut self, text: &str) -> Answer {
        let op = match parse(text) {
            Ok(op) => op,
            Err(refusal) => return vec![refusal.frame()].into(),
        };
        match op {
            Op::Ping(_) => vec![reply("pong")].into(),
            Op::Authenticate(a) => {
                let headers = SignedHeaders {
                    public_key: Some(&a.public_key),
                    nonce: Some(&a.nonce),
                    signature: Some(&a.signature),
                };
                match self.authenticate(headers).await {
                    Ok(frames) => frames.into(),
                    Err(refusal) => self.failed(refusal),
                }
            }
            Op::Subscribe(ask) => self.subscribe(ask.args, true).await,
            Op::Unsubscribe(ask) => self.subscribe(ask.args, false).await,
        }
    }

    /// A failed authenticate is charged to the connection: past its bound it closes.
    fn failed(&mut self, refusal: Refusal) -> Answer {
        self.failed_authentications += 1;
        let close = (self.failed_authentications >= MAX_FAILED_AUTHENTICATIONS)
            .then_some(FAILED_AUTHENTICATIONS);
        Answer {
            frames: vec![refusal.frame()],
            close,
        }
    }

    /// D9: the REST checks over `{nonce}\nGET\n/v1/ws\n`, the nonce spent durably through
    /// the same path as a REST request's (one namespace per key, across restarts too); a
    /// failure is charged to this connection and its address, never to the key.
    async fn authenticate(&mut self, headers: SignedHeaders<'_>) -> Result<Vec<Frame>, Refusal> {
        if self.credentials.is_some() {
            return Err(Refusal::new(
                ErrorCode::Validation,
                "this connection is already authenticated",
            ));
        }
        let state = &self.shared.state;
        let attempt = Attempt {
            headers,
            method: "GET",
            path_and_query: SIGNED_PATH,
            body: b"",
            from: self.from,
        };
        let view = state.engine.view();
        let verdict =
            state
                .auth
                .authenticate(&attempt, |k| view.keys.get(k).copied(), wall_clock_ns());
        let admission = verdict.map_err(|e| {
            metrics::auth_failure(Api::WebSocket, e.reason());
            Refusal::new(e.code(), e.message())
        })?;
        state
            .engine
            .spend_nonce(&admission)
            .await
            .map_err(|e| Refusal::new(e.code, e.message))?;
        if !self.standing.authenticated() {
            // Closed to admit another meantime: the eviction ends the connection.
            return Ok(Vec::new());
        }
        let (broker, key) = (admission.broker, admission.used().key);
        self.credentials = Some((broker, key));
        self.admitted = true;
        let told = Control::Authenticated {
            id: self.id,
            broker,
            key,
        };
        let _ = self.shared.control.send(told).await;
        Ok(vec![reply("authenticated")])
    }

    /// Whether the key this connection authenticated with is still its broker's (D9: a
    /// subscription is checked against a live key).
    fn key_revoked(&self) -> bool {
        self.credentials.is_some_and(|(broker, key)| {
            self.shared.state.engine.view().keys.get(&key) != Some(&broker)
        })
    }

    /// Subscribes (or unsubscribes) the topics that parse, within the bound; an error frame,
    /// naming its topic, for each that does not.
    async fn subscribe(&mut self, args: Vec<String>, on: bool) -> Answer {
        if on && self.key_revoked() {
            let refusal = Refusal::new(
                ErrorCode::Unauthorized,
                "the key this connection authenticated with was revoked",
            );
            return Answer {
                frames: vec![refusal.frame()],
                close: Some(KEY_REVOKED),
            };
        }
        let view = self.shared.state.engine.view();
        let max = self.shared.limits.max_subscriptions as usize;
        let broker = self.credentials.map(|(b, _)| b);
        let mut errors = Vec::new();
        let mut topics: Vec<(Topic, String)> = Vec::new();
        for name in args {
            if topics.iter().any(|(_, n)| *n == name) {
                continue;
            }
            let topic = match Topic::parse(&name, &view, broker) {
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
            self.admitted |= on;
            let id = self.id;
            let c = match on {
                true => Control::Subscribe { id, topics },
                false => Control::Unsubscribe { id, topics },
            };
            let _ = self.shared.control.send(c).await;
        }
        errors.into()
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
