//! Raw client sockets for the connection tests: connections from a chosen loopback source
//! address (127.0.0.0/8 is all this machine's, so one test can be many clients), served
//! once and then idle, or busy mid-request.

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
