//! Interface §5 rule 3 and D2 across restarts: a signed request is accepted at most once,
//! whether the server stopped cleanly (SIGTERM) or died (`kill -9`), while a nonce never used
//! stays acceptable inside the window, out of order too.

use perpsim_tests::{Client, Server, funded, now_ns};
use serde_json::json;

/// A signed request exactly as it went over the wire, to be sent again byte for byte.
struct Captured {
    method: &'static str,
    path: String,
    body: String,
    nonce: String,
}

impl Captured {
    fn send(&self, c: &Client) -> perpsim_tests::Resp {
        c.send_with_nonce(self.method, &self.path, self.body.as_bytes(), &self.nonce)
    }
}

fn capture(method: &'static str, path: String, body: serde_json::Value) -> Captured {
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    Captured {
        method,
        path,
        body,
        nonce: now_ns().to_string(),
    }
}

fn transaction_count(c: &Client, customer: &str, kind: &str) -> usize {
    let r = c.send(
        "GET",
        &format!("/v1/customers/transactions?customer_code={customer}&limit=1000"),
        None,
    );
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["type"] == kind)
        .count()
}

/// Sends a withdrawal, an order, its cancel and a read once each, restarts the server with
/// `stop`, and sends the very same bytes again.
fn replayed_after_restart_are_refused(stop: impl FnOnce(&mut Server)) {
    let dir = tempfile::tempdir().unwrap();
    let flags = ["--clock", "manual", "--start", perpsim_tests::START];
    let mut server = Server::start_in(dir.path(), &flags);
    let c = server.demo();
    let customer = funded(&server, &c, "USDC", "1000");
    let withdrawal = capture(
        "POST",
        format!("/v1/customers/{customer}/withdrawals"),
        json!({"asset": "USDC", "amount": "10"}),
    );
    let order = capture(
        "POST",
        format!("/v1/customers/{customer}/orders"),
        json!({"symbol": "BTC-USDC-PERP", "side": "buy", "type": "limit",
               "reference_id": "once", "amount": "0.001", "limit_price": "50000"}),
    );
    let read = capture(
        "GET",
        format!("/v1/customers/{customer}/balances"),
        json!(null),
    );
    assert_eq!(withdrawal.send(&c).status, 201);
    assert_eq!(order.send(&c).status, 201);
    let cancel = capture(
        "DELETE",
        format!("/v1/customers/{customer}/orders/once"),
        json!(null),
    );
    assert_eq!(cancel.send(&c).status, 200);
    assert_eq!(read.send(&c).status, 200);

    stop(&mut server);
    let server = Server::start_in(dir.path(), &flags);
    let c = server.demo();
    for captured in [&withdrawal, &order, &cancel, &read] {
        let message = captured.send(&c).assert_error(401, "UNAUTHORIZED");
        assert!(
            message.contains("reused"),
            "{} {}: {message}",
            captured.method,
            captured.path
        );
    }
    assert_eq!(
        transaction_count(&c, &customer, "withdrawal"),
        1,
        "one withdrawal, not two"
    );
    let r = c.send(
        "GET",
        &format!("/v1/customers/{customer}/orders/once"),
        None,
    );
    assert_eq!(r.json()["status"], "canceled", "{}", r.text);
}

#[test]
fn signed_writes_and_reads_replayed_after_sigterm_are_refused_as_reused() {
    replayed_after_restart_are_refused(|s| assert!(s.terminate().success()));
}

#[test]
fn signed_writes_and_reads_replayed_after_kill_9_are_refused_as_reused() {
    replayed_after_restart_are_refused(Server::kill9);
}

#[test]
fn a_nonce_never_used_stays_acceptable_after_a_restart_even_out_of_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start_in(dir.path(), &[]);
    let c = server.demo();
    let used = now_ns();
    let r = c.send_with_nonce(
        "POST",
        "/v1/customers",
        br#"{"external_id":"a"}"#,
        &used.to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    server.kill9();
    let server = Server::start_in(dir.path(), &[]);
    let c = server.demo();
    // One second older than the nonce spent before the restart: inside the window, never used.
    let older = (used - 1_000_000_000).to_string();
    let r = c.send_with_nonce("POST", "/v1/customers", br#"{"external_id":"b"}"#, &older);
    assert_eq!(r.status, 201, "{}", r.text);
    let again = c.send_with_nonce(
        "POST",
        "/v1/customers",
        br#"{"external_id":"a"}"#,
        &used.to_string(),
    );
    assert!(again.assert_error(401, "UNAUTHORIZED").contains("reused"));
}

#[test]
fn the_nonce_bound_refuses_with_its_own_message_when_the_rate_limit_is_raised() {
    let server = Server::start(&[
        "--rate-limit",
        "100000",
        "--rate-burst",
        "100000",
        "--max-nonces-per-key",
        "40",
    ]);
    let c = server.demo();
    for i in 0..40 {
        let r = c.send("GET", "/v1/instruments", None);
        assert_eq!(r.status, 200, "request {i}: {}", r.text);
    }
    let r = c.send("GET", "/v1/instruments", None);
    let message = r.assert_error(429, "RATE_LIMITED");
    assert!(message.contains("nonce memory full"), "{message}");
    assert!(message.contains("40"), "names the bound: {message}");
    let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=31).contains(&retry), "retry after {retry} s");
}
