//! The WebSocket handshake for `GET /v1/ws` (RFC 6455 §4.2). The upgrade itself needs no
//! signature headers: a connection authenticates with the `authenticate` op (D9).

use std::sync::Arc;

use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use perpsim_core::ErrorCode;
use poem::Response;
use poem::http::{HeaderValue, Method, StatusCode, header};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};

use super::WsShared;
use super::session::{self, Standing};
use crate::errors::error_response;

/// The channels' address (D9).
pub const PATH: &str = "/v1/ws";
/// Largest client frame: the REST body limit (D4); a larger one closes the connection (1009).
const MAX_FRAME: usize = 64 * 1024;
/// The read buffer of a connection (tungstenite's default is 128 KiB).
const READ_BUFFER: usize = 4 * 1024;

fn has_token(req: &hyper::Request<Incoming>, name: header::HeaderName, token: &str) -> bool {
    req.headers()
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// What makes a request not an upgrade this server takes, with the error it answers.
pub fn refusal(req: &hyper::Request<Incoming>) -> Option<Response> {
    if req.method() != Method::GET {
        return Some(error_response(
            ErrorCode::MethodNotAllowed,
            format!("{PATH} answers GET only (a WebSocket upgrade)"),
        ));
    }
    let missing = if !has_token(req, header::UPGRADE, "websocket") {
        Some("Upgrade: websocket")
    } else if !has_token(req, header::CONNECTION, "upgrade") {
        Some("Connection: Upgrade")
    } else if !req.headers().contains_key(header::SEC_WEBSOCKET_KEY) {
        Some("Sec-WebSocket-Key")
    } else {
        None
    };
    if let Some(missing) = missing {
        return Some(error_response(
            ErrorCode::Validation,
            format!("{PATH} is a WebSocket endpoint: missing header {missing}"),
        ));
    }
    let version = req.headers().get(header::SEC_WEBSOCKET_VERSION);
    if version.and_then(|v| v.to_str().ok()) != Some("13") {
        let mut resp = error_response(ErrorCode::Validation, "Sec-WebSocket-Version must be 13");
        resp.headers_mut().insert(
            header::SEC_WEBSOCKET_VERSION,
            HeaderValue::from_static("13"),
        );
        return Some(resp);
    }
    None
}

/// Answers `req`, an upgrade [`refusal`] let through and admitted under the bound: 101, and
/// a session on the upgraded connection held by `standing`, which lets go of `place` when
/// it ends.
pub fn accept(
    shared: &Arc<WsShared>,
    mut req: hyper::Request<Incoming>,
    remote: std::net::IpAddr,
    standing: Arc<Standing>,
    place: impl Send + 'static,
) -> Response {
    let key = req.headers()[header::SEC_WEBSOCKET_KEY].as_bytes().to_vec();
    let on_upgrade = hyper::upgrade::on(&mut req);
    let shared = Arc::clone(shared);
    tokio::spawn(async move {
        match on_upgrade.await {
            Ok(upgraded) => {
                // Clients send small frames: tungstenite zeroes its read buffer's free space
                // before each read, so a small buffer keeps that cheap (measured: with the
                // default 128 KiB, memset was 19 % of the server at 100 subscribers).
                let config = WebSocketConfig::default()
                    .read_buffer_size(READ_BUFFER)
                    .max_message_size(Some(MAX_FRAME))
                    .max_frame_size(Some(MAX_FRAME));
                let io = TokioIo::new(upgraded);
                let ws = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
                session::run(ws, shared, standing, place, remote).await;
            }
            Err(e) => tracing::debug!(error = %e, "WebSocket upgrade failed"),
        }
    });
    Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(header::UPGRADE, "websocket")
        .header(header::CONNECTION, "Upgrade")
        .header(header::SEC_WEBSOCKET_ACCEPT, derive_accept_key(&key))
        .finish()
}
