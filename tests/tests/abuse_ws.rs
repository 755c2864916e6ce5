//! The WebSocket channels against an attacker, each attack of issue 35 items 1–4 and 7 as it
//! was tried on the real binary (D9): connections without credentials never lock a broker
//! out and are closed at their deadline, an address's share counts its WebSockets, a revoked
//! key's sessions end at once, a flood of frames is answered and closed, a reader that falls
//! behind is closed at its bytes, garbage naming a key never spends its owner's budget, and
//! broken frames get their close codes.

use std::io::Write;
use std::net::{Ipv4Addr, TcpStream};
use std::time::{Duration, Instant};

use base64::Engine as _;
use perpsim_tests::sockets::{
    assert_refused_naming, client_frame, close_frame, connect_from, send_text, upgrade_from,
};
use perpsim_tests::ws::{Read, Ws};
use perpsim_tests::{Client, START, Server, funded, living, manual, metric, now_ns, random_bytes};
use serde_json::{Value, json};

/// A public topic that stays quiet on a venue without a market maker: its subscribers get a
/// snapshot and then nothing.
const QUIET: &str = "orderbook-stream:SOL-USDC-PERP";

/// A quiet server on the manual clock whose connections have `seconds` to authenticate or
/// subscribe.
fn with_deadline(seconds: &str) -> Server {
    Server::start(&[
        "--clock",
        "manual",
        "--start",
        START,
        "--ws-auth-timeout",
        seconds,
    ])
}

fn subscribe_frame(topics: &[&str]) -> String {
    json!({"op": "subscribe", "args": topics}).to_string()
}

/// Sessions without credentials at five loopback addresses, `per_address` each, every one
/// subscribed to a public topic so that no deadline ends it.
fn hoard(server: &Server, per_address: usize) -> Vec<TcpStream> {
    let mut held = Vec::new();
    for host in 2..7 {
        let source = Ipv4Addr::new(127, 0, 0, host);
        for _ in 0..per_address {
            let (mut s, status) = upgrade_from(server, source);
            assert!(status.starts_with("HTTP/1.1 101"), "{status}");
            send_text(&mut s, &subscribe_frame(&[QUIET]));
            held.push(s);
        }
    }
    held
}

fn order(c: &Client, code: &str, reference: &str) -> Value {
    let body = json!({"symbol": "BTC-USDC-PERP", "side": "buy", "type": "limit",
                      "reference_id": reference, "amount": "0.001", "limit_price": "50000"});
    let r = c.send("POST", &format!("/v1/customers/{code}/orders"), Some(body));
    assert_eq!(r.status, 201, "{}", r.text);
    r.json()
}

/// Issue 35 item 1, D9: 5 000 sessions without credentials (more than the 4 096 the server
/// holds, subscribed so no deadline ends them) from five addresses; a broker still connects,
/// authenticates and hears its order within a second, because such sessions give way at the
/// bound. On main its upgrade was answered 503 for as long as they were held.
#[test]
fn five_thousand_sessions_without_credentials_never_lock_out_a_broker() {
    let server = with_deadline("600");
    let c = server.demo();
    let code = funded(&server, &c, "USDC", "100000");
    let held = hoard(&server, 1_000);
    assert_eq!(held.len(), 5_000, "every upgrade was answered 101");
    let started = Instant::now();
    let mut ws = Ws::connect(&server);
    ws.authenticate(&c);
    ws.subscribe(&["orders"]);
    order(&c, &code, "through");
    let heard = ws.until("the broker's order", |v| v["channel"] == "orders");
    let took = started.elapsed();
    assert_eq!(heard["data"]["reference_id"], "through", "{heard}");
    assert!(took < Duration::from_secs(1), "heard after {took:?}");
    let gave_way = metric(&server, "perpsim_ws_closes_total");
    assert!(gave_way > 5_000 - 4_096, "{gave_way} sessions gave way");
    drop(held);
}

/// D9: a connection that neither authenticates nor subscribes within `--ws-auth-timeout` is
/// closed with 1008 `authentication timeout`; one that subscribed and one that authenticated
/// stay. On main all three stayed for as long as they answered pings.
#[test]
fn a_connection_that_neither_authenticates_nor_subscribes_is_closed_at_its_deadline() {
    let server = with_deadline("1");
    let (mut silent, status) = upgrade_from(&server, Ipv4Addr::LOCALHOST);
    assert!(status.starts_with("HTTP/1.1 101"), "{status}");
    let (mut subscribed, _) = upgrade_from(&server, Ipv4Addr::LOCALHOST);
    send_text(&mut subscribed, &subscribe_frame(&[QUIET]));
    let mut authenticated = Ws::connect(&server);
    authenticated.authenticate(&server.demo());
    let started = Instant::now();
    let close = close_frame(&mut silent, Duration::from_secs(5));
    assert_eq!(close, Some((1008, "authentication timeout".into())));
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        close_frame(&mut subscribed, Duration::from_millis(300)),
        None
    );
    authenticated.send(json!({"op": "ping"}));
    assert_eq!(
        authenticated.until("pong", |v| v["op"] == "pong"),
        json!({"op": "pong"})
    );
}

/// D9: an address's WebSockets count in its share with its HTTP connections: at the share its
/// own session without credentials gives way (1013), and with every one authenticated the
/// next connection from it is refused 503 naming the share, while another address is served.
#[test]
fn an_address_holds_its_share_in_websockets_and_http_together() {
    let flags = ["--max-connections-per-address", "3"];
    let server = Server::start(&flags);
    let source = Ipv4Addr::new(127, 0, 0, 2);
    let demo = server.demo();
    let mut sessions: Vec<Ws> = (0..2)
        .map(|_| {
            let mut ws = Ws::try_connect_from(&server, source).expect("upgraded");
            ws.authenticate(&demo);
            ws
        })
        .collect();
    let (mut unauthenticated, status) = upgrade_from(&server, source);
    assert!(status.starts_with("HTTP/1.1 101"), "{status}");
    let mut third = Ws::try_connect_from(&server, source).expect("its own gives way");
    let close = close_frame(&mut unauthenticated, Duration::from_secs(5)).expect("a close");
    assert_eq!(close.0, 1013, "{close:?}");
    third.authenticate(&demo);
    sessions.push(third);
    assert_refused_naming(&server, source, "--max-connections-per-address 3");
    let r = server.demo().send("GET", "/v1/customers", None);
    assert_eq!(r.status, 200, "another address is served: {}", r.text);
    for ws in &mut sessions {
        ws.send(json!({"op": "ping"}));
        assert_eq!(
            ws.until("pong", |v| v["op"] == "pong"),
            json!({"op": "pong"})
        );
    }
}

/// The broker code of `c`'s broker.
fn broker_code(c: &Client) -> String {
    c.create_customer(None)["broker_code"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Issue 35 item 2, D9: revoking a key closes every session it authenticated with 1008
/// `key revoked` at once; the broker's other key keeps its session and hears the order
/// the revoked one does not. On main the revoked session went on receiving every private
/// frame and a new private subscribe was acknowledged.
#[test]
fn revoking_a_key_closes_the_sessions_it_authenticated_at_once() {
    let server = manual();
    let demo = server.demo();
    let broker = broker_code(&demo);
    let second = Client {
        url: server.url.clone(),
        key: ed25519_dalek::SigningKey::from_bytes(&random_bytes()),
    };
    let path = format!("/admin/v1/brokers/{broker}/keys");
    let r = server.admin(
        "POST",
        &path,
        Some(json!({"public_key": second.public_key()})),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let code = funded(&server, &demo, "USDC", "100000");
    let topics = ["orders", "trades", "balance-changes"];
    let mut revoked = Ws::connect(&server);
    revoked.authenticate(&second);
    revoked.subscribe(&topics);
    let mut kept = Ws::connect(&server);
    kept.authenticate(&demo);
    kept.subscribe(&topics);
    let key = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(second.key.verifying_key().as_bytes());
    let r = server.admin("DELETE", &format!("{path}/{key}"), None);
    assert_eq!(r.status, 200, "{}", r.text);
    match revoked.read(Duration::from_secs(2)) {
        Read::Closed(Some(close)) => {
            assert_eq!(
                (u16::from(close.code), close.reason.as_str()),
                (1008, "key revoked")
            );
        }
        other => panic!("expected the close, got {other:?}"),
    }
    order(&demo, &code, "after");
    let heard = kept.until("the order", |v| v["channel"] == "orders");
    assert_eq!(heard["data"]["reference_id"], "after");
    second
        .send("GET", "/v1/instruments", None)
        .assert_error(401, "UNAUTHORIZED");
    assert!(metric(&server, "perpsim_ws_closes_total") >= 1);
}

/// Issue 35 item 3, D9: frames past `--ws-op-rate` (a burst of 40 by default) are answered
/// with a RATE_LIMITED error naming the bound, then the connection is closed with 1008. On
/// main a connection could send pings without end, taking about a core.
#[test]
fn a_flood_of_frames_is_answered_with_an_error_then_closed() {
    let server = manual();
    let (mut s, status) = upgrade_from(&server, Ipv4Addr::LOCALHOST);
    assert!(status.starts_with("HTTP/1.1 101"), "{status}");
    let ping = client_frame(0x1, br#"{"op":"ping"}"#);
    let flood: Vec<u8> = (0..50).flat_map(|_| ping.clone()).collect();
    s.write_all(&flood).unwrap();
    let mut bytes = Vec::new();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = std::io::Read::read_to_end(&mut s, &mut bytes);
    let text = String::from_utf8_lossy(&bytes);
    assert_eq!(text.matches(r#"{"op":"pong"}"#).count(), 40, "{text}");
    assert!(
        text.contains("RATE_LIMITED") && text.contains("--ws-op-rate"),
        "{text}"
    );
    let mut rest = &bytes[bytes.len().saturating_sub(64)..];
    let close = close_frame_in(&mut rest);
    assert_eq!(close, Some((1008, "op rate exceeded".into())), "{text}");
}

/// The close frame among bytes already read.
fn close_frame_in(bytes: &mut &[u8]) -> Option<(u16, String)> {
    let at = bytes.windows(2).rposition(|w| w[0] == 0x88)?;
    let body = &bytes[at + 2..];
    Some((
        u16::from_be_bytes([body[0], body[1]]),
        String::from_utf8_lossy(&body[2..]).into_owned(),
    ))
}

/// A raw upgraded connection whose receive buffer is a few KiB: a reader that falls behind.
fn slow_reader(server: &Server) -> TcpStream {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let addr: std::net::SocketAddr = server.url.trim_start_matches("http://").parse().unwrap();
    socket.connect(&addr.into()).unwrap();
    let mut s: TcpStream = socket.into();
    s.write_all(
        b"GET /v1/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    .unwrap();
    s
}

/// Issue 35 item 3, D9: a connection's queue is bounded in bytes as well as frames: a reader
/// that falls behind the living market's four books is closed with 1008 `slow consumer`
/// once 64 KiB wait for it, long before a million frames would. On main only frames counted.
#[test]
fn a_reader_that_falls_behind_is_closed_at_its_bytes() {
    // A hundred levels a side and a wild walk: every tick moves the whole ladder, so each
    // book update is kilobytes and the socket's buffers fill within seconds.
    let server = living(&[
        "--ws-queue-bytes",
        "65536",
        "--ws-queue",
        "1000000",
        "--maker-levels",
        "100",
        "--volatility",
        "5",
    ]);
    let mut s = slow_reader(&server);
    let books = [
        "orderbook-stream:BTC-USDC-PERP",
        "orderbook-stream:ETH-USDC-PERP",
        "orderbook-stream:SOL-USDC-PERP",
        "orderbook-stream:BTC-USDT-PERP",
    ];
    std::thread::sleep(Duration::from_millis(200));
    send_text(&mut s, &subscribe_frame(&books));
    // Each advance of a second is a tick: one update frame per book.
    for round in 0..1_000 {
        perpsim_tests::advance(&server, 1);
        if round % 20 == 0 && metric(&server, "perpsim_ws_slow_consumer_closes_total") > 0 {
            break;
        }
    }
    assert_eq!(metric(&server, "perpsim_ws_slow_consumer_closes_total"), 1);
    let close = close_frame(&mut s, Duration::from_secs(10));
    assert_eq!(close, Some((1008, "slow consumer".into())));
}

/// A raw HTTP request signed with `key`'s name but a signature of garbage, from `source`.
fn forged_rest(server: &Server, source: Ipv4Addr, public_key: &str) -> String {
    let mut s = connect_from(server, source);
    let nonce = now_ns().to_string();
    let garbage = base64::engine::general_purpose::STANDARD.encode([7u8; 64]);
    let request = format!(
        "GET /v1/instruments HTTP/1.1\r\nHost: x\r\nX-Public-Key: {public_key}\r\n\
         X-Nonce: {nonce}\r\nX-Signature: {garbage}\r\nConnection: close\r\n\r\n"
    );
    s.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = std::io::Read::read_to_string(&mut s, &mut answer);
    answer
}

/// Issue 35 item 4, D9: garbage authenticates and forged REST requests naming a broker's
/// key, from another address as fast as it can send them, never spend that key's budget:
/// the owner's 78 calls all answer 200 while its attacker is charged, closed after five
/// failed authenticates a connection, and then refused 429 before any signature is
/// checked. On main 59 of the owner's 78 calls answered 429.
#[test]
fn garbage_naming_a_key_never_spends_its_owners_budget() {
    let server = manual();
    let owner = server.demo();
    let victim = owner.public_key();
    let attacker = Ipv4Addr::new(127, 0, 0, 9);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flood = {
        let (server_url, victim, stop) = (server.url.clone(), victim.clone(), stop.clone());
        std::thread::spawn(move || attack(&server_url, attacker, &victim, &stop))
    };
    std::thread::sleep(Duration::from_millis(300));
    let mut statuses = Vec::new();
    for _ in 0..78 {
        statuses.push(owner.send("GET", "/v1/instruments", None).status);
        std::thread::sleep(Duration::from_millis(25));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let seen = flood.join().unwrap();
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    assert!(seen.closed_after_five > 0, "{seen:?}");
    assert!(seen.refused_before_checking > 0, "{seen:?}");
    // The address's failure budget refills at 10 a second, bursts of 100: whatever refilled
    // since the flood stopped (on a loaded machine, joining it can take a while) is spent by
    // forged requests, each a 401 charged to the address, and then the address is refused
    // before any signature is checked. Never anything but those two answers.
    let forged = (0..200)
        .map(|_| forged_rest(&server, attacker, &victim))
        .find(|answer| !answer.starts_with("HTTP/1.1 401"))
        .expect("the address's failure budget runs out within a burst");
    assert!(forged.starts_with("HTTP/1.1 429"), "{forged}");
    assert!(
        forged.contains("too many failed authentications"),
        "{forged}"
    );
    let other = forged_rest(&server, Ipv4Addr::new(127, 0, 0, 10), &victim);
    assert!(
        other.starts_with("HTTP/1.1 401"),
        "another address is still heard: {other}"
    );
}

#[derive(Debug, Default)]
struct Seen {
    closed_after_five: u32,
    refused_before_checking: u32,
}

/// Garbage authenticates naming `victim`, on connection after connection from `source`.
fn attack(url: &str, source: Ipv4Addr, victim: &str, stop: &std::sync::atomic::AtomicBool) -> Seen {
    let server = Server::at(url);
    let mut seen = Seen::default();
    let garbage = base64::engine::general_purpose::STANDARD.encode([7u8; 64]);
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let (mut s, status) = upgrade_from(&server, source);
        if !status.starts_with("HTTP/1.1 101") {
            continue;
        }
        let frames: Vec<u8> = (0..5)
            .flat_map(|_| {
                let op = json!({"op": "authenticate", "public_key": victim,
                                "nonce": now_ns().to_string(), "signature": garbage});
                client_frame(0x1, op.to_string().as_bytes())
            })
            .collect();
        s.write_all(&frames).unwrap();
        let mut bytes = Vec::new();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = std::io::Read::read_to_end(&mut s, &mut bytes);
        let text = String::from_utf8_lossy(&bytes);
        seen.refused_before_checking +=
            text.matches("too many failed authentications from").count() as u32;
        if text.contains("too many failed authentications") {
            seen.closed_after_five += 1;
        }
    }
    seen
}

/// Issue 35 item 7: a frame over 64 KiB is closed with 1009 and text that is not UTF-8 with
/// 1007, each with its reason; an unknown topic's error lists the topics. On main both closed
/// the connection without a close frame.
#[test]
fn broken_frames_get_their_close_codes_and_an_unknown_topic_lists_the_topics() {
    let server = manual();
    let (mut big, _) = upgrade_from(&server, Ipv4Addr::LOCALHOST);
    // Only the header of a 70 000-byte frame: its length alone refuses it.
    let mut header = vec![0x81, 0x80 | 127];
    header.extend_from_slice(&70_000u64.to_be_bytes());
    header.extend_from_slice(&[0, 0, 0, 0]);
    big.write_all(&header).unwrap();
    let close = close_frame(&mut big, Duration::from_secs(5));
    assert_eq!(
        close,
        Some((1009, "frame too large: at most 65536 bytes".into()))
    );
    let (mut bad, _) = upgrade_from(&server, Ipv4Addr::LOCALHOST);
    bad.write_all(&client_frame(0x1, &[0x7B, 0xFF, 0xFE, 0x7D]))
        .unwrap();
    let close = close_frame(&mut bad, Duration::from_secs(5));
    assert_eq!(close, Some((1007, "text frames must be UTF-8".into())));
    let mut ws = Ws::connect(&server);
    ws.send(json!({"op": "subscribe", "args": ["tickers"]}));
    let error = ws.until("the error", |v| v["op"] == "error");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("orderbook-stream:{symbol}") && message.contains("balance-changes"),
        "{message}"
    );
}

/// Issue 35 item 3: the flood that took the server from 67 MB to 2.9 GB — a thousand
/// connections from five addresses each sending 1 200 subscribe and unsubscribe ops for the
/// four books of the living market without reading — leaves memory where it found it: each
/// connection is closed at its op burst, nothing it asked for stays queued.
#[test]
fn a_subscription_flood_leaves_memory_where_it_found_it() {
    let server = living(&[]);
    perpsim_tests::advance(&server, 60);
    let books = [
        "orderbook-stream:BTC-USDC-PERP",
        "orderbook-stream:ETH-USDC-PERP",
        "orderbook-stream:SOL-USDC-PERP",
        "orderbook-stream:BTC-USDT-PERP",
    ];
    let ops: Vec<u8> = (0..600)
        .flat_map(|_| {
            let on = client_frame(0x1, subscribe_frame(&books).as_bytes());
            let off = json!({"op": "unsubscribe", "args": books}).to_string();
            [on, client_frame(0x1, off.as_bytes())].concat()
        })
        .collect();
    let baseline = server.rss();
    let mut peak = baseline;
    let mut held = Vec::new();
    for host in 2..7 {
        for _ in 0..200 {
            let (mut s, status) = upgrade_from(&server, Ipv4Addr::new(127, 0, 0, host));
            assert!(status.starts_with("HTTP/1.1 101"), "{status}");
            let _ = s.write_all(&ops);
            held.push(s);
        }
        peak = peak.max(server.rss());
    }
    // Held open, unread, while the server reads what they sent.
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(200));
        peak = peak.max(server.rss());
    }
    drop(held);
    std::thread::sleep(Duration::from_secs(2));
    let after = server.rss();
    eprintln!("rss: baseline {baseline}, peak {peak}, after {after}");
    assert!(peak < baseline + (256 << 20), "peak {peak} from {baseline}");
    assert!(
        after < baseline + (64 << 20),
        "after {after} from {baseline}"
    );
    let new = Instant::now();
    let mut ws = Ws::connect(&server);
    ws.subscribe(&books[..1]);
    assert!(
        new.elapsed() < Duration::from_millis(200),
        "{:?}",
        new.elapsed()
    );
}

/// The 90th percentile of `n` signed ticker reads, one after another: a tail that one scheduling hiccup on two shared
/// cores does not move (the 99th, the 4th slowest of 400, failed a CI run by 0.02 ms).
fn read_p90(c: &Client, n: usize) -> Duration {
    let mut took: Vec<Duration> = (0..n)
        .map(|_| {
            let started = Instant::now();
            assert_eq!(c.send("GET", "/v1/tickers", None).status, 200);
            started.elapsed()
        })
        .collect();
    took.sort();
    took[n * 9 / 10]
}

/// Issue 35 item 3: one client flooding pings — reconnecting as soon as it is closed —
/// moves another client's p90 by a bounded factor. Before the fix one such connection took
/// about a core and moved REST p99 from 10.8 to 48.8 ms with three of them. The bound asserted is
/// generous (3× and 5 ms: a test on two shared cores); the closing note of issue 35 has the
/// figures measured in one run.
#[test]
fn a_flood_on_one_connection_barely_moves_another_clients_latency() {
    let server = living(&["--rate-limit", "10000", "--rate-burst", "20000"]);
    let c = server.demo();
    read_p90(&c, 50);
    let quiet = read_p90(&c, 400);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flood = {
        let (url, stop) = (server.url.clone(), stop.clone());
        std::thread::spawn(move || {
            let server = Server::at(&url);
            let ping = client_frame(0x1, br#"{"op":"ping"}"#);
            let frames: Vec<u8> = (0..2_000).flat_map(|_| ping.clone()).collect();
            let mut connections = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let (mut s, _) = upgrade_from(&server, Ipv4Addr::new(127, 0, 0, 3));
                let _ = s.write_all(&frames);
                let _ = std::io::Read::read_to_end(&mut s, &mut Vec::new());
                connections += 1;
            }
            connections
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    let flooded = read_p90(&c, 400);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let connections = flood.join().unwrap();
    eprintln!("p90 quiet {quiet:?}, flooded {flooded:?} ({connections} flooding connections)");
    assert!(connections > 0);
    assert!(
        flooded <= quiet * 3 + Duration::from_millis(5),
        "p90 {quiet:?} → {flooded:?}"
    );
}
