//! Slow and idle clients cannot take the service off the air: headers that never end and
//! idle keep-alive connections are closed after their timeouts while others are served, and
//! past the connection bound a new connection is refused with the D4 body.

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use perpsim_tests::sockets::{begin_request, closed_within, connect, served_once};
use perpsim_tests::{Resp, Server, metric, raw};

fn healthy(server: &Server) -> Resp {
    raw("GET", &format!("{}/healthz", server.url), &[], b"")
}

#[test]
fn headers_that_never_end_are_closed_after_the_header_timeout_while_others_are_served() {
    let server = Server::start(&["--header-read-timeout", "1", "--idle-timeout", "30"]);
    let mut slow: Vec<TcpStream> = (0..50).map(|_| connect(&server)).collect();
    for s in slow.iter_mut().step_by(2) {
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            .unwrap(); // never finished
    }
    // The others sent nothing at all. Meanwhile a normal client is served at once.
    for _ in 0..5 {
        assert_eq!(healthy(&server).status, 200);
    }
    for s in &mut slow {
        let took = closed_within(s, Duration::from_secs(5)).expect("closed by the server");
        assert!(
            took <= Duration::from_millis(3_000),
            "closed after {took:?}"
        );
    }
    assert_eq!(healthy(&server).status, 200);
    // The server counts a connection once its task ends, a moment after the client sees it
    // closed: the count is read until it settles, within a bound.
    let counted = Instant::now();
    let mut timed_out = metric(&server, "perpsim_connections_timed_out_total");
    while timed_out < 50 && counted.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(20));
        timed_out = metric(&server, "perpsim_connections_timed_out_total");
    }
    assert_eq!(timed_out, 50);
}

#[test]
fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout_not_before() {
    let server = Server::start(&["--header-read-timeout", "1", "--idle-timeout", "3"]);
    let mut s = served_once(&server);
    // Idle for longer than the header timeout: still open, the idle timeout governs here.
    assert_eq!(closed_within(&mut s, Duration::from_millis(1_800)), None);
    let took = closed_within(&mut s, Duration::from_secs(5)).expect("closed when idle");
    assert!(
        took <= Duration::from_millis(2_500),
        "closed {took:?} later"
    );
}

#[test]
fn a_body_that_never_ends_is_closed_after_the_timeout() {
    let server = Server::start(&["--header-read-timeout", "1"]);
    let c = server.demo();
    let nonce = perpsim_tests::now_ns().to_string();
    let body = br#"{"external_id":"slow"}"#;
    let sig = c.signature(&nonce, "POST", "/v1/customers", body);
    let mut s = connect(&server);
    let head = format!(
        "POST /v1/customers HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nX-Public-Key: {}\r\nX-Nonce: {nonce}\r\nX-Signature: {sig}\r\n\r\n",
        body.len(),
        c.public_key()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(&body[..5]).unwrap(); // and the rest never comes
    let took = closed_within(&mut s, Duration::from_secs(5)).expect("closed by the server");
    assert!(
        took <= Duration::from_millis(3_000),
        "closed after {took:?}"
    );
    let r = c.send("GET", "/v1/customers", None);
    assert_eq!(
        r.json()["data"],
        serde_json::json!([]),
        "nothing was created"
    );
}

#[test]
fn past_the_connection_bound_a_connection_is_refused_with_503_and_served_again_below_it() {
    let server = Server::start(&["--max-connections", "4"]);
    // Each held connection is served once, so accepted for sure, then begins a request that
    // never ends: busy, so none gives way to a newcomer.
    let mut held: Vec<TcpStream> = (0..4).map(|_| served_once(&server)).collect();
    held.iter_mut().for_each(begin_request);
    std::thread::sleep(Duration::from_millis(200));
    let refused = healthy(&server);
    let message = refused.assert_error(503, "EXCHANGE_ERROR");
    assert!(message.contains("too many open connections"), "{message}");
    assert!(message.contains('4'), "names the bound: {message}");
    assert_eq!(refused.header("retry-after"), Some("1"));
    held.pop();
    // A closed connection holds its slot until the server's task for it ends, a moment after
    // the client closes: until then a newcomer is refused as above, and each refusal counts.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut refused_reads = 0;
    loop {
        let r = healthy(&server);
        if r.status == 200 {
            break;
        }
        r.assert_error(503, "EXCHANGE_ERROR");
        refused_reads += 1;
        assert!(Instant::now() < deadline, "never served again: {}", r.text);
        std::thread::sleep(Duration::from_millis(50));
    }
    // The same holds for the last request's connection, so the metrics read can be refused.
    let text = loop {
        let r = raw("GET", &format!("{}/metrics", server.url), &[], b"");
        if r.status == 200 {
            break r.text;
        }
        r.assert_error(503, "EXCHANGE_ERROR");
        refused_reads += 1;
        assert!(Instant::now() < deadline, "metrics never served");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        text.contains(&format!(
            "perpsim_connections_refused_total {}\n",
            1 + refused_reads
        )),
        "{text}"
    );
}
