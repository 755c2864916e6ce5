//! Raw client sockets for the connection tests: connections from a chosen loopback source
//! address (127.0.0.0/8 is all this machine's, so one test can be many clients), served
//! once and then idle, or busy mid-request; WebSocket upgrades and frames written by hand,
//! as an attacker's script would, thousands at a time.

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use socket2::{Domain, Socket, Type};

use crate::Server;

fn server_addr(server: &Server) -> SocketAddr {
    server.url.trim_start_matches("http://").parse().unwrap()
}

/// A connection to `server` from `source` (a loopback address).
pub fn connect_from(server: &Server, source: Ipv4Addr) -> TcpStream {
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    socket
        .bind(&SocketAddr::from((source, 0)).into())
        .unwrap_or_else(|e| panic!("bind {source}: {e}"));
    socket.connect(&server_addr(server).into()).unwrap();
    socket.into()
}

pub fn connect(server: &Server) -> TcpStream {
    connect_from(server, Ipv4Addr::LOCALHOST)
}

/// Sends one `GET /healthz` and reads its answer's first bytes: the status line, or `None`
/// if the server closed the connection instead.
pub fn get_healthz(s: &mut TcpStream) -> Option<String> {
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .ok()?;
    let mut buf = [0u8; 1024];
    let n = s.read(&mut buf).ok().filter(|n| *n > 0)?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// Whether the server closed `s` (its end read as end of file) within `within`, reading
/// nothing off it otherwise: a close follows an eviction asynchronously.
pub fn closed_by_server(s: &TcpStream, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    s.set_read_timeout(Some(Duration::from_millis(20)))
        .expect("a read timeout");
    let mut byte = [0u8; 1];
    let closed = loop {
        match s.peek(&mut byte) {
            Ok(0) => break true,
            Ok(_) => break false,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => break true,
        }
        if Instant::now() >= deadline {
            break false;
        }
    };
    s.set_read_timeout(None).expect("no read timeout");
    closed
}

/// A keep-alive connection from `source` that has been served one request, so accepted for
/// sure, and now idle; `None` if it was refused.
pub fn served_once_from(server: &Server, source: Ipv4Addr) -> Option<TcpStream> {
    let mut s = connect_from(server, source);
    let answer = get_healthz(&mut s)?;
    answer.starts_with("HTTP/1.1 200").then_some(s)
}

pub fn served_once(server: &Server) -> TcpStream {
    served_once_from(server, Ipv4Addr::LOCALHOST).expect("served")
}

/// A new connection from `source` is answered 503 naming `bound` (the address's share, or a
/// global bound), then closed.
pub fn assert_refused_naming(server: &Server, source: Ipv4Addr, bound: &str) {
    let mut refused = connect_from(server, source);
    let answer = get_healthz(&mut refused).unwrap_or_default();
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains(bound), "{answer}");
}

/// Makes an idle connection busy: the first line of a request whose headers never end.
pub fn begin_request(s: &mut TcpStream) {
    s.write_all(b"GET /healthz HTTP/1.1\r\n").unwrap();
}

/// Waits for the server to close `socket`: the time it took, or `None` if still open at
/// `limit`.
pub fn closed_within(socket: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        let left = limit.checked_sub(started.elapsed())?;
        socket
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .unwrap();
        match socket.read(&mut buf) {
            Ok(0) => return Some(started.elapsed()),
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return None;
            }
            Err(_) => return Some(started.elapsed()), // reset: closed too
        }
    }
}

/// The upgrade request of `GET /v1/ws` (RFC 6455 §4.1), with no signature headers.
const UPGRADE: &[u8] = b"GET /v1/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\
Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
Sec-WebSocket-Version: 13\r\n\r\n";

/// A WebSocket upgrade from `source`: the socket and the answer's status line.
pub fn upgrade_from(server: &Server, source: Ipv4Addr) -> (TcpStream, String) {
    let mut s = connect_from(server, source);
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(UPGRADE).unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => break,
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let status = head.lines().next().unwrap_or_default().to_owned();
    (s, status)
}

/// A client frame as RFC 6455 §5.2 writes it: FIN, `opcode`, masked (with a zero key, which
/// leaves the payload as it is).
pub fn client_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x80 | opcode];
    match payload.len() {
        n if n < 126 => f.push(0x80 | n as u8),
        n if n <= 0xFFFF => {
            f.push(0x80 | 126);
            f.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            f.push(0x80 | 127);
            f.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    f.extend_from_slice(&[0, 0, 0, 0]);
    f.extend_from_slice(payload);
    f
}

/// Writes a text frame by hand.
pub fn send_text(s: &mut TcpStream, text: &str) {
    s.write_all(&client_frame(0x1, text.as_bytes())).unwrap();
}

/// The server's close frame among what it sent until it closed (or `limit`): its code and
/// reason, or `None` if the socket ended without one.
pub fn close_frame(s: &mut TcpStream, limit: Duration) -> Option<(u16, String)> {
    let started = Instant::now();
    let mut bytes = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = limit.checked_sub(started.elapsed())?;
        s.set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .unwrap();
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => bytes.extend_from_slice(&buf[..n]),
        }
        if let Some(close) = find_close(&bytes) {
            return Some(close);
        }
    }
    find_close(&bytes)
}

/// Walks unmasked server frames (RFC 6455 §5.2) to the first close frame, past the upgrade's
/// answer if it is still there.
fn find_close(bytes: &[u8]) -> Option<(u16, String)> {
    let mut at = 0;
    if bytes.starts_with(b"HTTP/") {
        at = bytes.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    }
    while at + 2 <= bytes.len() {
        let opcode = bytes[at] & 0x0F;
        let (len, head) = match bytes[at + 1] & 0x7F {
            126 if at + 4 <= bytes.len() => (
                usize::from(u16::from_be_bytes([bytes[at + 2], bytes[at + 3]])),
                4,
            ),
            127 if at + 10 <= bytes.len() => {
                let mut n = [0u8; 8];
                n.copy_from_slice(&bytes[at + 2..at + 10]);
                (u64::from_be_bytes(n) as usize, 10)
            }
            126 | 127 => return None,
            n => (usize::from(n), 2),
        };
        let body = bytes.get(at + head..at + head + len)?;
        if opcode == 0x8 && body.len() >= 2 {
            let code = u16::from_be_bytes([body[0], body[1]]);
            return Some((code, String::from_utf8_lossy(&body[2..]).into_owned()));
        }
        at += head + len;
    }
    None
}
