//! An attacker with a broker's key, or with no credentials at all, against the real binary
//! (issue 23): no money from nothing (D7), no lockout by idle connections, a bound on what a
//! key can grow (D4), strict JSON (D4), no zero-size order, secrets and data at rest.

use std::net::{Ipv4Addr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use perpsim_tests::sockets::{
    assert_refused_naming, begin_request, closed_by_server, get_healthz, served_once_from,
};
use perpsim_tests::{Client, Resp, Server, customer, funded, manual, metric, perpsim, transfer};
use serde_json::{Value, json};

const BTC: &str = "BTC-USDC-PERP";

fn order(c: &Client, code: &str, body: Value) -> Resp {
    c.send("POST", &format!("/v1/customers/{code}/orders"), Some(body))
}

fn resting(reference: &str) -> Value {
    json!({"symbol": BTC, "side": "buy", "type": "limit", "reference_id": reference,
           "amount": "0.0001", "limit_price": "50000"})
}

fn balance(c: &Client, code: &str) -> String {
    let r = c.send("GET", &format!("/v1/customers/{code}/balances"), None);
    r.json()[0]["total"].as_str().unwrap().to_owned()
}

/// D7: a negative taker fee is refused naming it; the largest maker rebate on both sides of
/// trades back and forth is paid out of the taker fee, so no balance grows, the fees account
/// never goes below zero, and the withdrawal that drained the venue on main is refused.
#[test]
fn two_customers_of_one_broker_cannot_mint_money_with_rebates() {
    let server = manual();
    let c = server.demo();
    let a = funded(&server, &c, "USDC", "100000");
    let b = funded(&server, &c, "USDC", "100000");
    for code in [&a, &b] {
        let path = format!("/v1/customers/{code}/fee-profile");
        let both = json!({"maker_fee": "-10000", "taker_fee": "-10000"});
        let message = c
            .send("PUT", &path, Some(both))
            .assert_error(400, "VALIDATION_ERROR");
        assert!(message.contains("taker_fee"), "{message}");
        let r = c.send("PUT", &path, Some(json!({"maker_fee": "-10000"})));
        assert_eq!(r.status, 200, "{}", r.text);
    }
    for round in 0..4 {
        let (maker, taker) = if round % 2 == 0 { (&a, &b) } else { (&b, &a) };
        let sell = json!({"symbol": BTC, "side": "sell", "type": "limit",
                          "reference_id": format!("m{round}"), "amount": "1", "limit_price": "60000"});
        assert_eq!(order(&c, maker, sell).status, 201);
        let buy = json!({"symbol": BTC, "side": "buy", "type": "market",
                         "reference_id": format!("t{round}"), "amount": "1"});
        let r = order(&c, taker, buy);
        assert_eq!(r.json()["status"], "filled", "{}", r.text);
    }
    // Each fill: taker pays 30, the maker's rebate is cut to those 30.
    assert_eq!(balance(&c, &a), "100000.0000000000");
    assert_eq!(balance(&c, &b), "100000.0000000000");
    let venue = server.admin("GET", "/admin/v1/venue/accounts", None).json();
    let fees = venue
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["account"] == "fees" && v["asset"] == "USDC")
        .unwrap();
    assert_eq!(fees["total"], "0.0000000000", "{venue}");
    let r = transfer(
        &c,
        &a,
        "withdrawals",
        json!({"asset": "USDC", "amount": "340000"}),
    );
    r.assert_error(400, "INSUFFICIENT_FUNDS");
}

/// The idle connections of hoarders at five loopback addresses, `per_address` each.
fn hoard(server: &Server, per_address: usize) -> Vec<std::net::TcpStream> {
    let mut held = Vec::new();
    for host in 2..7 {
        let source = Ipv4Addr::new(127, 0, 0, host);
        held.extend((0..per_address).filter_map(|_| served_once_from(server, source)));
    }
    held
}

/// Issue 23: with the bound held by idle keep-alive connections (more of them than the bound,
/// from several addresses), a signed client is still served at once: an idle connection gives
/// way; the measured case of the issue, 5 000 idle at the default bound of 4 096.
#[test]
fn idle_connections_held_at_the_bound_never_lock_out_a_signed_client() {
    let server = Server::start(&[]);
    let held = hoard(&server, 1_000);
    assert_eq!(
        held.len(),
        5_000,
        "every hoarder connection was served once"
    );
    let started = Instant::now();
    let r = server.demo().send("GET", "/v1/customers", None);
    let took = started.elapsed();
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(took < Duration::from_secs(1), "served after {took:?}");
    assert!(metric(&server, "perpsim_connections_evicted_total") >= 5_000 - 4_096);
    assert_eq!(metric(&server, "perpsim_connections_refused_total"), 0);
    drop(held);
}

/// An address holds at most its share: past it its own idle connection gives way, and with
/// none idle it is refused naming the share, while another address is served.
#[test]
fn one_address_holds_at_most_its_share_of_the_connections() {
    let flags = [
        "--max-connections",
        "20",
        "--max-connections-per-address",
        "3",
    ];
    let server = Server::start(&flags);
    let hoarder = Ipv4Addr::new(127, 0, 0, 2);
    let mut held: Vec<_> = (0..3)
        .map(|_| served_once_from(&server, hoarder).unwrap())
        .collect();
    let fourth = served_once_from(&server, hoarder).expect("its idle one gives way");
    assert_eq!(metric(&server, "perpsim_connections_evicted_total"), 1);
    // The evicted one is closed once its task sees the eviction: waited for, not raced.
    let deadline = Instant::now() + Duration::from_secs(5);
    let open = |held: &[TcpStream]| {
        let within = Duration::from_millis(50);
        held.iter().filter(|s| !closed_by_server(s, within)).count()
    };
    while open(&held) > 2 && Instant::now() < deadline {}
    held.retain(|s| !closed_by_server(s, Duration::ZERO));
    assert_eq!(held.len(), 2, "the evicted connection is closed");
    assert!(
        held.iter_mut().all(|s| get_healthz(s).is_some()),
        "the others are served"
    );
    let mut busy = held;
    busy.push(fourth);
    busy.iter_mut().for_each(begin_request);
    std::thread::sleep(Duration::from_millis(200));
    assert_refused_naming(&server, hoarder, "--max-connections-per-address 3");
    let r = server.demo().send("GET", "/v1/customers", None);
    assert_eq!(r.status, 200, "another address is served: {}", r.text);
}

/// D4: the open orders of one customer are bounded (1 000 by default): past it a new
/// resting order is ORDER_REJECTED naming the bound, while a market order still trades.
#[test]
fn a_customer_holds_at_most_a_thousand_open_orders_by_default() {
    let server = Server::start(&[
        "--clock",
        "manual",
        "--rate-limit",
        "100000",
        "--rate-burst",
        "100000",
    ]);
    let c = server.demo();
    let code = funded(&server, &c, "USDC", "1000000");
    for i in 0..1_000 {
        let r = order(&c, &code, resting(&format!("r{i}")));
        assert_eq!(r.status, 201, "order {i}: {}", r.text);
    }
    let message = order(&c, &code, resting("over")).assert_error(400, "ORDER_REJECTED");
    assert!(message.contains("max open orders 1000"), "{message}");
    let r = c.send("DELETE", &format!("/v1/customers/{code}/orders/r0"), None);
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        order(&c, &code, resting("again")).status,
        201,
        "a cancel makes room"
    );
}

/// D4: a broker's customers are bounded (here 2): past it 400 VALIDATION_ERROR naming the
/// bound, and the bound holds across a restart (it is journaled).
#[test]
fn a_broker_creates_at_most_its_bound_of_customers() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start_in(dir.path(), &["--max-customers", "2"]);
    let c = server.demo();
    customer(&c);
    customer(&c);
    let over = c.send("POST", "/v1/customers", Some(json!({})));
    let message = over.assert_error(400, "VALIDATION_ERROR");
    assert!(message.contains("max customers 2"), "{message}");
    assert!(server.terminate().success());
    let server = Server::start_in(dir.path(), &["--max-customers", "3"]);
    let c = server.demo();
    customer(&c);
    let over = c.send("POST", "/v1/customers", Some(json!({})));
    over.assert_error(400, "VALIDATION_ERROR");
}

/// D4: a duplicated key is refused naming it, on the broker and admin APIs, and nothing is
/// booked (main read the last occurrence and booked 2).
#[test]
fn a_body_with_a_duplicated_key_is_refused_naming_it() {
    let server = manual();
    let c = server.demo();
    let code = customer(&c);
    let body = br#"{"asset":"USDC","amount":"1","amount":"2"}"#;
    let path = format!("/v1/customers/{code}/deposits");
    let nonce = perpsim_tests::now_ns().to_string();
    let r = c.send_with_nonce("POST", &path, body, &nonce);
    let message = r.assert_error(400, "VALIDATION_ERROR");
    assert!(message.contains("duplicate key amount"), "{message}");
    let rows = c.send(
        "GET",
        &format!("/v1/customers/transactions?customer_code={code}"),
        None,
    );
    assert_eq!(rows.json()["data"], json!([]), "nothing booked");
    let token = format!("Bearer {}", server.admin_token());
    let r = perpsim_tests::raw(
        "PUT",
        &format!("{}/admin/v1/instruments/{BTC}/price", server.url),
        &[
            ("Authorization", &token),
            ("Content-Type", "application/json"),
        ],
        br#"{"index_price":"1","index_price":"2"}"#,
    );
    let message = r.assert_error(400, "VALIDATION_ERROR");
    assert!(message.contains("duplicate key index_price"), "{message}");
}

/// Issue 23: a cash order too small to buy one lot is refused naming cash_amount (main
/// accepted it with amount "0.0000").
#[test]
fn a_cash_order_too_small_for_one_lot_is_refused() {
    let server = manual();
    let c = server.demo();
    let code = funded(&server, &c, "USDC", "1000");
    let tiny = json!({"symbol": BTC, "side": "buy", "type": "market", "reference_id": "z",
                      "cash_amount": "0.0000000000000000000000000001"});
    let message = order(&c, &code, tiny).assert_error(400, "ORDER_REJECTED");
    assert!(message.contains("cash_amount"), "{message}");
    let r = c.send("GET", &format!("/v1/customers/{code}/orders/z"), None);
    r.assert_error(404, "NOT_FOUND");
}

/// Issue 23: an empty or whitespace admin token refuses the start with a clear message
/// (main started a server whose admin API refused everything).
#[test]
fn an_empty_admin_token_refuses_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    for token in ["", "   "] {
        let out = perpsim_tests::command()
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(&data)
            .env("PERPSIM_ADMIN_TOKEN", token)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "started with token {token:?}");
        assert!(
            stderr.contains("admin token") && stderr.contains("empty"),
            "{stderr}"
        );
    }
    let data = data.to_str().unwrap();
    let args = [
        "serve",
        "--admin-token",
        "two words",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        data,
    ];
    let (code, _, stderr) = perpsim(&args);
    assert_ne!(code, 0);
    assert!(stderr.contains("whitespace"), "{stderr}");
}

/// Issue 23: whatever the umask, the data dir is 0700 and the journal and its group log 0600
/// (main created the journal 0644 in a directory the operator made).
#[test]
fn the_data_dir_and_journal_are_private_whatever_the_umask() {
    let dir = tempfile::tempdir().unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let fresh = dir.path().join("fresh");
    let mut server = Server::start_under_umask(&fresh, &[], 0o000);
    assert_eq!(mode(&fresh), 0o700);
    assert_eq!(mode(&fresh.join("journal.redb")), 0o600);
    assert!(server.terminate().success());
    let made = dir.path().join("made");
    std::fs::create_dir(&made).unwrap();
    std::fs::set_permissions(&made, std::fs::Permissions::from_mode(0o755)).unwrap();
    let _server = Server::start_under_umask(&made, &[], 0o000);
    assert_eq!(mode(&made.join("journal.redb")), 0o600);
    for secret in [
        "admin.token",
        "demo-broker.key",
        "cursor.secret",
        "journal.log",
    ] {
        assert_eq!(mode(&made.join(secret)), 0o600, "{secret}");
    }
}

/// Issue 35 item 7: /docs runs only its own scripts (named by hash in its policy), talks only
/// to this service and is never framed; its signer signs this service's origins only. On
/// main it sent no policy and no X-Frame-Options, and signed a request to any origin.
#[test]
fn the_docs_page_runs_only_its_own_scripts_and_is_never_framed() {
    let server = Server::start(&[]);
    let r = perpsim_tests::raw("GET", &format!("{}/docs", server.url), &[], b"");
    assert_eq!(r.status, 200);
    let policy = r.header("content-security-policy").unwrap_or_default();
    let script_src = policy
        .split(';')
        .find(|d| d.trim().starts_with("script-src"))
        .unwrap();
    assert!(
        script_src.contains("'sha256-") && !script_src.contains("unsafe"),
        "{policy}"
    );
    assert!(
        policy.contains(&format!("connect-src 'self' {};", server.url)),
        "{policy}"
    );
    assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
    assert_eq!(r.header("x-frame-options"), Some("DENY"));
    assert!(
        r.text.contains("ownOrigins.has(url.origin)"),
        "signs its own origins only"
    );
}

/// Issue 40 items 1–2: /console and every file it loads are this service's own (embedded,
/// nothing from a CDN), each under a policy that runs this service's scripts only and lets the
/// page talk to this service only, never framed; a path the console does not serve is a 404.
#[test]
fn the_console_and_everything_it_loads_come_from_this_service_under_its_policy() {
    let server = Server::start(&[]);
    let get = |path: &str| perpsim_tests::raw("GET", &format!("{}{path}", server.url), &[], b"");
    let page = get("/console");
    assert_eq!(page.status, 200);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    let loaded: Vec<&str> = page
        .text
        .split(['"', '\''])
        .filter(|s| s.starts_with("/console/"))
        .collect();
    assert_eq!(loaded.len(), 5, "three scripts, two styles: {loaded:?}");
    assert!(!page.text.contains("//cdn") && !page.text.contains("https://"));
    for path in ["/console", "/console/"].into_iter().chain(loaded) {
        let r = get(path);
        assert_eq!(r.status, 200, "{path}");
        let policy = r.header("content-security-policy").unwrap_or_default();
        assert!(policy.contains("script-src 'self';"), "{path}: {policy}");
        assert!(policy.contains("connect-src 'self';"), "{path}: {policy}");
        assert!(!policy.contains("unsafe"), "{path}: {policy}");
        assert_eq!(r.header("x-frame-options"), Some("DENY"), "{path}");
        let kind = r.header("content-type").unwrap_or_default();
        let expected = match path.rsplit('.').next() {
            Some("js") => "text/javascript",
            Some("css") => "text/css",
            _ => "text/html",
        };
        assert!(kind.starts_with(expected), "{path}: {kind}");
    }
    assert!(get("/console/uPlot.iife.min.js").text.contains("(v1.6.32)"));
    assert_eq!(get("/console/../admin.token").status, 404);
    assert_eq!(get("/console/missing.js").status, 404);
}
