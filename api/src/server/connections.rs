//! HTTP/1.1 connections, with a bound on what any one client may hold.
//!
//! poem's own server keeps a connection whose headers never end open for ever, so a small
//! script holding a few thousand of them takes the service off the air. Here each connection
//! has a watchdog with one deadline at a time, moved by what the connection does:
//! - from accept, and from the first byte of every later request, the headers must be
//!   complete within the header-read timeout;
//! - from the end of the headers, the body must be read within that timeout again (the
//!   middleware reports when it has read it, [`ConnectionWatch::body_read`]);
//! - while a handler works there is no deadline: waiting for the engine is not the client's
//!   doing;
//! - from the end of a response, the next request must begin within the idle timeout.
//!
//! A connection past its deadline is dropped. Who may open one is [`ConnectionAdmission`]'s to say: at
//! most `max_connections` are open, each address holds at most its share, and at a bound an
//! idle connection is closed to admit the new one; only with none idle is a connection
//! answered `503 EXCHANGE_ERROR` naming the bound, then closed.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use perpsim_core::ErrorCode;
use poem::http::uri::Scheme;
use poem::web::{LocalAddr, RemoteAddr};
use poem::{Endpoint, Response};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, Semaphore, watch};
use tokio::time::Instant;

use crate::errors::error_response;
use crate::server::admission::{ConnectionAdmission, Refusal, Ticket};
use crate::state::config::ConnectionLimits;
use crate::state::metrics;
use crate::ws::WsShared;
use crate::ws::session::Standing;
use crate::ws::upgrade;

/// Refusals being written at once; past it a connection over the bound is closed unanswered.
const REFUSALS_AT_ONCE: usize = 256;
/// Time a refusal may take: reading the request it answers, then writing the answer.
const REFUSAL_TIME: Duration = Duration::from_secs(1);
/// Pause after a failed accept (out of file descriptors, say), so the loop never spins.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
/// Time open connections get to finish their requests once shutdown begins.
const DRAIN_TIME: Duration = Duration::from_secs(5);

const AWAITING_HEAD: u8 = 0;
const READING_BODY: u8 = 1;
const HANDLING: u8 = 2;
const IDLE: u8 = 3;
/// Closed to admit another connection (see [`ConnectionAdmission`]); never leaves this phase.
const EVICTED: u8 = 4;

/// Where one connection stands and its deadline (milliseconds after `opened`).
pub struct ConnectionWatch {
    opened: Instant,
    phase: AtomicU8,
    deadline_ms: AtomicU64,
    limits: ConnectionLimits,
    evicted: Notify,
}

impl ConnectionWatch {
    pub(crate) fn new(limits: ConnectionLimits) -> Self {
        let watch = ConnectionWatch {
            opened: Instant::now(),
            phase: AtomicU8::new(AWAITING_HEAD),
            deadline_ms: AtomicU64::new(0),
            limits,
            evicted: Notify::new(),
        };
        watch.enter(AWAITING_HEAD, limits.header_read_timeout);
        watch
    }

    fn enter(&self, phase: u8, allowed: Duration) {
        let deadline = self.opened.elapsed() + allowed;
        self.deadline_ms
            .store(deadline.as_millis() as u64, Ordering::Release);
        self.phase.store(phase, Ordering::Release);
    }

    /// The request's body is in: from here the handler works without a deadline.
    pub fn body_read(&self) {
        self.phase.store(HANDLING, Ordering::Release);
    }

    fn head_read(&self) {
        self.enter(READING_BODY, self.limits.header_read_timeout);
    }

    fn response_ready(&self) {
        self.enter(IDLE, self.limits.idle_timeout);
    }

    /// When the connection became idle, if it is idle now (between requests).
    pub(crate) fn idle_since(&self) -> Option<Instant> {
        if self.phase.load(Ordering::Acquire) != IDLE {
            return None;
        }
        let deadline = Duration::from_millis(self.deadline_ms.load(Ordering::Acquire));
        Some(self.opened + deadline.saturating_sub(self.limits.idle_timeout))
    }

    /// Closes the connection if it is still idle, and says whether it did: a request that
    /// began meanwhile is served.
    pub(crate) fn evict(&self) -> bool {
        let closed = self
            .phase
            .compare_exchange(IDLE, EVICTED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if closed {
            // Stores a permit when the connection's task is not waiting yet.
            self.evicted.notify_one();
        }
        closed
    }

    #[cfg(test)]
    pub(crate) fn idle_now(&self) {
        self.response_ready();
    }

    #[cfg(test)]
    pub(crate) fn was_evicted(&self) -> bool {
        self.phase.load(Ordering::Acquire) == EVICTED
    }

    /// Bytes arrived: on an idle connection they begin a request, whose headers now have
    /// their own deadline.
    fn bytes_read(&self) {
        if self
            .phase
            .compare_exchange(IDLE, AWAITING_HEAD, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            self.enter(AWAITING_HEAD, self.limits.header_read_timeout);
        }
    }

    /// Resolves when the connection has outstayed its deadline.
    async fn expired(&self) {
        loop {
            let phase = self.phase.load(Ordering::Acquire);
            let deadline = Duration::from_millis(self.deadline_ms.load(Ordering::Acquire));
            if phase != HANDLING && self.opened.elapsed() >= deadline {
                return;
            }
            // Deadlines only move later, so waking at the one seen (or, while a handler works,
            // after a header timeout) and looking again never misses one.
            let wake = match phase {
                HANDLING => self.opened.elapsed() + self.limits.header_read_timeout,
                _ => deadline,
            };
            tokio::time::sleep_until(self.opened + wake).await;
        }
    }
}

/// The socket, telling the watch when bytes arrive, and giving hyper's own answer to a
/// request it cannot parse the documented JSON body.
struct Watched {
    socket: TcpStream,
    watch: Arc<ConnectionWatch>,
    /// The rewritten answer being written and how much of it is out.
    rewritten: Option<(Vec<u8>, usize)>,
}

/// hyper answers a request it cannot parse (a malformed request line or header line, headers
/// or a URI too long) itself, below the application: a bare head, `content-length: 0`. No
/// answer of the application's is an error without a body, so such a head is hyper's; it
/// becomes the same head with the D4 JSON body. `None` for every other write.
fn parse_error_answer(write: &[u8]) -> Option<Vec<u8>> {
    // Cheap tests first: this looks at every write of every answer.
    let error = write.starts_with(b"HTTP/1.1 4") || write.starts_with(b"HTTP/1.1 5");
    if !error || !write.ends_with(b"\r\n\r\n") {
        return None;
    }
    let head = std::str::from_utf8(write).ok()?;
    let status = head.strip_prefix("HTTP/1.1 ")?.get(..3)?;
    let message = match status {
        "400" => "the request is not valid HTTP/1.1: a malformed request line or header line",
        "414" => "the request's URI is too long",
        "431" => "the request's header lines are too large",
        _ => return None,
    };
    if !head.contains("\r\ncontent-length: 0\r\n") {
        return None;
    }
    let body = crate::errors::body_text(ErrorCode::Validation, message);
    let fields = format!(
        "\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
        body.len()
    );
    Some(
        format!(
            "{}{body}",
            head.replacen("\r\ncontent-length: 0\r\n", &fields, 1)
        )
        .into_bytes(),
    )
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.socket).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.watch.bytes_read();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.rewritten.is_none()
            && let Some(answer) = parse_error_answer(buf)
        {
            self.rewritten = Some((answer, 0));
        }
        let this = &mut *self;
        let Some((answer, sent)) = this.rewritten.as_mut() else {
            return Pin::new(&mut this.socket).poll_write(cx, buf);
        };
        // hyper's bare head is taken whole; what goes out is the answer in its place.
        while *sent < answer.len() {
            match Pin::new(&mut this.socket).poll_write(cx, &answer[*sent..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => *sent += n,
                other => return other,
            }
        }
        this.rewritten = None;
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.socket).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.socket).poll_shutdown(cx)
    }
}

/// Serves `ep` on `listener` until `stop` resolves, then gives open connections
/// [`DRAIN_TIME`] to finish. Counts open, refused, evicted and timed-out connections.
pub async fn serve<E>(
    listener: TcpListener,
    ep: E,
    ws: Arc<WsShared>,
    limits: ConnectionLimits,
    stop: impl Future<Output = ()>,
) -> io::Result<()>
where
    E: Endpoint<Output = Response> + 'static,
{
    let ep = Arc::new(ep);
    let local = listener.local_addr()?;
    let admission = ConnectionAdmission::new(limits, ws.limits.max_connections);
    let refusing = Arc::new(Semaphore::new(REFUSALS_AT_ONCE));
    let (shutdown, shutting_down) = watch::channel(false);
    // One clone per connection task: the drain waits until only this one is left.
    let tasks = Arc::new(());
    tokio::pin!(stop);
    loop {
        let (socket, remote) = tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed; backing off");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        let watch = Arc::new(ConnectionWatch::new(limits));
        let ticket = match admission.admit(remote.ip(), watch.clone()) {
            Ok((ticket, evicted)) => {
                metrics::connections_evicted(evicted);
                ticket
            }
            Err(refusal) => {
                metrics::connection_refused();
                if let Ok(slot) = refusing.clone().try_acquire_owned() {
                    tokio::spawn(async move {
                        refuse(socket, refusal).await;
                        drop(slot);
                    });
                }
                continue;
            }
        };
        let (ep, ws, task) = (ep.clone(), ws.clone(), tasks.clone());
        let shutting_down = shutting_down.clone();
        metrics::connection_opened();
        tokio::spawn(async move {
            let peer = Peer { local, remote };
            let ticket = Arc::new(ticket);
            let timed_out =
                connection(socket, peer, (watch, &ticket), (ep, ws), shutting_down).await;
            metrics::connection_closed(timed_out);
            drop((ticket, task));
        });
    }
    let _ = shutdown.send(true);
    let drained = async {
        while Arc::strong_count(&tasks) > 1 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    let _ = tokio::time::timeout(DRAIN_TIME, drained).await;
    Ok(())
}

/// Both ends of a connection.
#[derive(Clone, Copy)]
struct Peer {
    local: SocketAddr,
    remote: SocketAddr,
}

/// Serves one connection until it ends; `true` when it was dropped past its deadline.
async fn connection<E>(
    socket: TcpStream,
    Peer { local, remote }: Peer,
    (watch, ticket): (Arc<ConnectionWatch>, &Arc<Ticket>),
    (ep, ws): (Arc<E>, Arc<WsShared>),
    mut shutting_down: watch::Receiver<bool>,
) -> bool
where
    E: Endpoint<Output = Response> + 'static,
{
    let _ = socket.set_nodelay(true);
    let service = service_fn({
        let (watch, ticket) = (watch.clone(), ticket.clone());
        move |mut req: poem::http::Request<Incoming>| {
            let (ep, ws, watch) = (ep.clone(), ws.clone(), watch.clone());
            let ticket = ticket.clone();
            async move {
                watch.head_read();
                // The channels' address is served below poem: the upgraded connection is
                // ours to drive (D9), and it leaves the HTTP bound for the WebSocket one.
                if req.uri().path() == upgrade::PATH {
                    let mut resp = websocket(&ws, req, remote, &ticket);
                    resp.headers_mut()
                        .insert(poem::http::header::DATE, crate::server::app::http_date());
                    watch.response_ready();
                    return Ok::<_, Infallible>(hyper::Response::from(resp));
                }
                req.extensions_mut().insert(watch.clone());
                let addrs = (LocalAddr(local.into()), RemoteAddr(remote.into()));
                let req = poem::Request::from((req, addrs.0, addrs.1, Scheme::HTTP));
                let resp = ep.get_response(req).await;
                watch.response_ready();
                Ok::<_, Infallible>(hyper::Response::from(resp))
            }
        }
    });
    let io = TokioIo::new(Watched {
        socket,
        watch: watch.clone(),
        rewritten: None,
    });
    let conn = http1::Builder::new()
        .serve_connection(io, service)
        .with_upgrades();
    tokio::pin!(conn);
    let mut draining = false;
    loop {
        tokio::select! {
            _ = &mut conn => return false,
            _ = watch.expired() => {
                tracing::debug!(%remote, "connection past its deadline; closed");
                return true;
            }
            _ = watch.evicted.notified() => {
                tracing::debug!(%remote, "idle connection closed to admit another");
                return false;
            }
            _ = shutting_down.changed(), if !draining => {
                draining = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// The answer to an upgrade: refused as the handshake requires, or admitted under the
/// WebSocket bound (a session without credentials giving way where it is reached), or 503.
fn websocket(
    ws: &Arc<WsShared>,
    req: hyper::Request<Incoming>,
    remote: SocketAddr,
    ticket: &Arc<Ticket>,
) -> Response {
    if let Some(refused) = upgrade::refusal(&req) {
        return refused;
    }
    let standing = Arc::new(Standing::default());
    match ticket.admission().upgrade(ticket, standing.clone()) {
        Ok((place, evicted)) => {
            metrics::connections_evicted(evicted);
            upgrade::accept(ws, req, remote.ip(), standing, place)
        }
        Err(refusal) => {
            metrics::connection_refused();
            let mut resp = error_response(ErrorCode::ExchangeUnavailable, refusal.message());
            resp.headers_mut().insert(
                poem::http::header::RETRY_AFTER,
                poem::http::HeaderValue::from_static("1"),
            );
            resp
        }
    }
}

/// Answers a connection over a bound: reads what request it sent (so closing does not reset
/// the answer away), writes a 503 with the D4 body, closes. Bounded by [`REFUSAL_TIME`].
async fn refuse(mut socket: TcpStream, refusal: Refusal) {
    let body = crate::errors::body_text(ErrorCode::ExchangeUnavailable, &refusal.message());
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nretry-after: 1\r\nconnection: close\r\ndate: {}\r\n\r\n{body}",
        body.len(),
        crate::server::app::http_date().to_str().unwrap_or_default(),
    );
    let _ = tokio::time::timeout(REFUSAL_TIME, async {
        let mut request = [0u8; 4096];
        let _ = tokio::time::timeout(REFUSAL_TIME / 4, socket.read(&mut request)).await;
        socket.write_all(answer.as_bytes()).await?;
        socket.shutdown().await
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::parse_error_answer;

    /// Issue 28 item 4: hyper's bare answer to an unparsable request gets the D4 body; an
    /// answer of the application's (it always has a body) is left alone.
    #[test]
    fn hypers_bare_parse_error_answer_gets_the_documented_body() {
        let bare = "HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\ndate: Wed, 25 Nov 2026 22:40:36 GMT\r\n\r\n";
        let answer = String::from_utf8(parse_error_answer(bare.as_bytes()).unwrap()).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\nconnection: close\r\n"));
        assert!(head.contains("content-type: application/json"));
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["code"], "VALIDATION_ERROR");
        assert!(
            body["message"]
                .as_str()
                .unwrap()
                .contains("not valid HTTP/1.1")
        );
        let ours = "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
        assert_eq!(parse_error_answer(ours.as_bytes()), None);
        let ok = "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(parse_error_answer(ok.as_bytes()), None);
    }
}
