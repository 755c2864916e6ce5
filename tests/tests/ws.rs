//! The WebSocket channels against the real binary (interface §5, §6; D9; issue 25): ops,
//! errors, the nonce namespace shared with REST, every topic and its scope, the book stream
//! with its checksum, and the bounds.

use std::time::Duration;

use perpsim_tests::ws::Ws;
use perpsim_tests::*;
use serde_json::{Value, json};

fn op_error(v: &Value) -> (&str, Option<&str>) {
    assert_eq!(v["op"], "error", "{v}");
    assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
    (v["code"].as_str().unwrap(), v["channel"].as_str())
}

/// D9: the upgrade needs no signature headers; ping answers pong. A plain GET is the D4
/// error naming the missing upgrade header.
#[test]
fn the_upgrade_needs_no_signature_and_ping_answers_pong() {
    let server = manual();
    let mut ws = Ws::connect(&server);
    ws.send(json!({"op": "ping"}));
    assert_eq!(ws.frame(), json!({"op": "pong"}));
    let plain = raw("GET", &format!("{}/v1/ws", server.url), &[], b"");
    let message = plain.assert_error(400, "VALIDATION_ERROR");
    assert!(message.contains("Upgrade: websocket"), "{message}");
}

/// D9: a bad frame is answered with an error, never a close: malformed JSON, an unknown op,
/// an unknown topic, a private topic before authentication (UNAUTHORIZED, naming it).
#[test]
fn a_bad_frame_is_answered_with_an_error_and_the_connection_stays_open() {
    let server = manual();
    let mut ws = Ws::connect(&server);
    ws.send_text("not json");
    assert_eq!(op_error(&ws.frame()), ("VALIDATION_ERROR", None));
    ws.send(json!({"op": "dance"}));
    assert_eq!(op_error(&ws.frame()), ("VALIDATION_ERROR", None));
    ws.send(json!({"op": "subscribe", "args": ["weather"]}));
    assert_eq!(op_error(&ws.frame()), ("VALIDATION_ERROR", Some("weather")));
    ws.send(json!({"op": "subscribe", "args": ["orderbook-stream:DOGE-USDC-PERP"]}));
    let v = ws.frame();
    assert_eq!(op_error(&v).0, "VALIDATION_ERROR");
    assert!(
        v["message"].as_str().unwrap().contains("DOGE-USDC-PERP"),
        "{v}"
    );
    ws.send(json!({"op": "subscribe", "args": ["orders"]}));
    assert_eq!(op_error(&ws.frame()), ("UNAUTHORIZED", Some("orders")));
    ws.send(json!({"op": "ping", "extra": true}));
    let v = ws.frame();
    assert!(v["message"].as_str().unwrap().contains("extra"), "{v}");
    ws.send(json!({"op": "ping"}));
    assert_eq!(ws.frame(), json!({"op": "pong"}));
}

/// §5 and D9: authenticate signs `{nonce}\nGET\n/v1/ws\n`; the nonce is spent in the one
/// namespace REST uses, both ways and across a restart; a failed authenticate (a JSON number
/// as the nonce, a bad signature) leaves the connection open for another try.
#[test]
fn authenticate_shares_the_rest_nonce_namespace_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let flags = ["--clock", "manual", "--start", START];
    let mut server = Server::start_in(dir.path(), &flags);
    let demo = server.demo();
    let mut ws = Ws::connect(&server);
    ws.send(json!({"op": "authenticate", "public_key": demo.public_key(), "nonce": 1, "signature": "x"}));
    assert_eq!(op_error(&ws.frame()).0, "UNAUTHORIZED");
    let wrong = now_ns().to_string();
    ws.send(json!({"op": "authenticate", "public_key": demo.public_key(), "nonce": wrong, "signature": demo.signature(&wrong, "GET", "/v1/other", b"")}));
    let v = ws.frame();
    assert_eq!(op_error(&v).0, "UNAUTHORIZED");
    assert!(v["message"].as_str().unwrap().contains("signature"), "{v}");
    // Spent on REST, refused on the channel.
    let rest_nonce = now_ns().to_string();
    assert_eq!(
        demo.send_with_nonce("GET", "/v1/instruments", b"", &rest_nonce)
            .status,
        200
    );
    let v = ws.authenticate_with(&demo, &rest_nonce);
    assert!(v["message"].as_str().unwrap().contains("reused"), "{v}");
    // Spent on the channel, refused on REST, after a restart too.
    let ws_nonce = now_ns().to_string();
    assert_eq!(
        ws.authenticate_with(&demo, &ws_nonce),
        json!({"op": "authenticated"})
    );
    ws.send(json!({"op": "subscribe", "args": ["orders"]}));
    assert_eq!(ws.frame(), json!({"op": "subscribed", "args": ["orders"]}));
    server.terminate();
    let server = Server::start_in(dir.path(), &flags);
    let r = server
        .demo()
        .send_with_nonce("GET", "/v1/instruments", b"", &ws_nonce);
    assert!(r.assert_error(401, "UNAUTHORIZED").contains("reused"));
}

/// A broker, its WebSocket authenticated and subscribed to `topics`.
fn listening(server: &Server, client: &Client, topics: &[&str]) -> Ws {
    let mut ws = Ws::connect(server);
    ws.authenticate(client);
    ws.subscribe(topics);
    ws
}

/// `seller` rests a sell of `amount` BTC at 60 000 and `buyer` takes it at market.
fn cross(c: &Client, seller: &str, buyer: &str, amount: &str) {
    let sell = json!({"symbol": "BTC-USDC-PERP", "side": "sell", "type": "limit", "reference_id": "s", "amount": amount, "limit_price": "60000"});
    order(c, seller, sell);
    let buy = json!({"symbol": "BTC-USDC-PERP", "side": "buy", "type": "market", "reference_id": "b", "amount": amount});
    order(c, buyer, buy);
}

fn order(c: &Client, customer: &str, body: Value) -> Value {
    let r = c.send(
        "POST",
        &format!("/v1/customers/{customer}/orders"),
        Some(body),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    r.json()
}

/// §6 rules 1 and 3, §2.1, D5, D9: a fill pushes each order's update (the read shape with
/// `order_type`), one trade record per side and one completed balance change per side with
/// total_amount = realised_pnl − fee; a deposit is pushed when it completes, with its balance.
/// Another broker hears none of it, and cannot subscribe to this broker's customer.
#[test]
fn a_fill_pushes_orders_trades_and_balance_changes_to_its_broker_only() {
    let server = manual();
    let (a, b) = (server.demo(), server.new_broker("other"));
    let topics = ["orders", "trades", "balance-changes"];
    let mut mine = listening(&server, &a, &topics);
    let mut theirs = listening(&server, &b, &topics);
    let seller = funded(&server, &a, "USDC", "100000");
    let deposit = mine.until("the deposit", |v| v["channel"] == "balance-changes");
    assert_eq!(
        (
            &deposit["transaction_type"],
            &deposit["status"],
            &deposit["total_amount"],
            &deposit["balance"],
            &deposit["customer_code"]
        ),
        (
            &json!("deposit"),
            &json!("completed"),
            &json!("100000.0000000000"),
            &json!("100000.0000000000"),
            &json!(seller)
        ),
        "{deposit}"
    );
    assert!(
        deposit["balance_as_of"].is_string() && deposit.get("trade_code").is_none(),
        "{deposit}"
    );
    let buyer = funded(&server, &a, "USDC", "100000");
    let sell = json!({"symbol": "BTC-USDC-PERP", "side": "sell", "type": "limit", "reference_id": "s1", "amount": "0.01", "limit_price": "60000"});
    order(&a, &seller, sell);
    let resting = mine.until("the resting order", |v| v["channel"] == "orders");
    assert_eq!(
        (&resting["data"]["order_type"], &resting["data"]["status"]),
        (&json!("limit"), &json!("open")),
        "{resting}"
    );
    assert!(resting["data"].get("type").is_none(), "{resting}");
    order(
        &a,
        &buyer,
        json!({"symbol": "BTC-USDC-PERP", "side": "buy", "type": "market", "reference_id": "b1", "amount": "0.01"}),
    );
    let frames = mine.drain(Duration::from_millis(500));
    let on = |channel: &str| {
        frames
            .iter()
            .filter(|v| v["channel"] == channel)
            .collect::<Vec<_>>()
    };
    let statuses: Vec<_> = on("orders")
        .iter()
        .map(|v| {
            (
                v["data"]["reference_id"].clone(),
                v["data"]["status"].clone(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        vec![
            (json!("s1"), json!("filled")),
            (json!("b1"), json!("filled"))
        ]
    );
    let trades = on("trades");
    assert_eq!(trades.len(), 2, "{frames:?}");
    let changes = on("balance-changes");
    assert_eq!(changes.len(), 2, "{frames:?}");
    for change in changes {
        let code = change["trade_code"].as_str().unwrap();
        assert!(trades.iter().any(|t| t["data"]["code"] == code), "{change}");
        let d = |k: &str| change[k].as_str().unwrap().parse::<f64>().unwrap();
        assert!(
            (d("total_amount") - (d("realised_pnl") - d("fee"))).abs() < 1e-9,
            "{change}"
        );
        assert_eq!(change["transaction_type"], "trade");
    }
    let leaked = theirs.drain(Duration::from_millis(300));
    assert!(leaked.is_empty(), "another broker heard {leaked:?}");
    theirs.send(json!({"op": "subscribe", "args": [format!("positions:{seller}")]}));
    assert_eq!(
        op_error(&theirs.frame()),
        ("NOT_FOUND", Some(format!("positions:{seller}").as_str()))
    );
}

/// A client's book: price text → amount text, per side, as the frames carry them.
#[derive(Default)]
struct LocalBook {
    bids: Vec<(String, String)>,
    asks: Vec<(String, String)>,
}

fn price(text: &str) -> f64 {
    text.parse().unwrap()
}

impl LocalBook {
    fn levels(v: &Value) -> Vec<(String, String)> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|l| {
                (
                    l["price"].as_str().unwrap().to_owned(),
                    l["amount"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    }

    /// The best bid and ask as the ticker writes them.
    fn top(&self) -> (Value, Value) {
        (json!(self.bids[0].0), json!(self.asks[0].0))
    }

    fn apply(&mut self, changes: &Value) {
        for c in changes.as_array().unwrap() {
            let side = match c["type"].as_str().unwrap() {
                "bid" => &mut self.bids,
                "ask" => &mut self.asks,
                other => panic!("type {other}"),
            };
            let p = c["price"].as_str().unwrap();
            let existed = side.iter().any(|(q, _)| q == p);
            side.retain(|(q, _)| q != p);
            match c["action"].as_str().unwrap() {
                "delete" => {
                    assert!(existed, "delete of a level never shown: {c}");
                    assert_eq!(price(c["amount"].as_str().unwrap()), 0.0, "{c}");
                }
                "new" => {
                    assert!(!existed, "new level already shown: {c}");
                    side.push((p.to_owned(), c["amount"].as_str().unwrap().to_owned()));
                }
                "change" => {
                    assert!(existed, "change of a level never shown: {c}");
                    side.push((p.to_owned(), c["amount"].as_str().unwrap().to_owned()));
                }
                other => panic!("action {other}"),
            }
        }
        self.bids
            .sort_by(|a, b| price(&b.0).total_cmp(&price(&a.0)));
        self.asks
            .sort_by(|a, b| price(&a.0).total_cmp(&price(&b.0)));
    }

    /// The documented checksum: CRC-32 of the best 10 asks then the best 10 bids, each
    /// `price:amount`, joined by `|`.
    fn checksum(&self) -> u32 {
        let text: Vec<String> = self
            .asks
            .iter()
            .take(10)
            .chain(self.bids.iter().take(10))
            .map(|(p, a)| format!("{p}:{a}"))
            .collect();
        crc32fast::hash(text.join("|").as_bytes())
    }
}

/// §6 rule 6 and D9: a snapshot, then one update per tick with `sequence` exactly +1; a
/// client applying the changes holds the book the checksum proves on every frame, and after
/// an hour of the maker re-quoting its best levels are REST's best bid and ask.
#[test]
fn the_book_stream_rebuilds_the_book_its_checksum_proves() {
    let server = living(&[]);
    let mut ws = Ws::connect(&server);
    let topic = "orderbook-stream:BTC-USDC-PERP";
    ws.subscribe(&[topic]);
    let snap = ws.frame();
    assert_eq!(
        (&snap["channel"], &snap["type"], &snap["symbol"]),
        (&json!(topic), &json!("snapshot"), &json!("BTC-USDC-PERP"))
    );
    let mut book = LocalBook {
        bids: LocalBook::levels(&snap["bids"]),
        asks: LocalBook::levels(&snap["asks"]),
    };
    assert_eq!(book.bids.len(), 10, "the maker's ten levels: {snap}");
    assert_eq!(snap["checksum"].as_u64().unwrap() as u32, book.checksum());
    let mut sequence = snap["sequence"].as_u64().unwrap();
    let mut updates = 0;
    let mut seen = (sequence, updates);
    let mut take = |v: Value, book: &mut LocalBook| {
        assert_eq!(v["type"], "update", "{v}");
        sequence += 1;
        assert_eq!(v["sequence"].as_u64(), Some(sequence), "no gap: {v}");
        book.apply(&v["changes"]);
        assert_eq!(
            v["checksum"].as_u64().unwrap() as u32,
            book.checksum(),
            "{v}"
        );
        updates += 1;
        (sequence, updates)
    };
    let demo = server.demo();
    let rest_top = || {
        let t = demo.send("GET", "/v1/tickers/BTC-USDC-PERP", None).json();
        (t["best_bid"].clone(), t["best_ask"].clone())
    };
    for _ in 0..12 {
        // Five minutes of the walk usually moves the maker's ladder, not always (the index
        // can end where it began): the frames are read until the client's book shows the
        // top REST shows, which they follow from the hub, later on a loaded machine.
        advance(&server, 300);
        let want = rest_top();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while book.top() != want {
            assert!(
                std::time::Instant::now() < deadline,
                "the book never reached {want:?}"
            );
            seen = take(ws.frame(), &mut book);
        }
    }
    assert!(
        seen.1 >= 6,
        "an hour of the walk re-quotes the book: {seen:?}"
    );
    // Re-subscribing is how a client resyncs: a fresh snapshot at the stream's position
    // (updates still in flight arrive before it and its acknowledgement).
    ws.send(json!({"op": "subscribe", "args": [topic]}));
    let again = loop {
        let v = ws.frame();
        match (v["op"].as_str(), v["type"].as_str()) {
            (Some("subscribed"), _) => continue,
            (_, Some("snapshot")) => break v,
            _ => seen = take(v, &mut book),
        }
    };
    assert_eq!(book.top(), rest_top());
    assert_eq!(again["sequence"].as_u64(), Some(seen.0));
    assert_eq!(LocalBook::levels(&again["bids"]), book.bids);
}

/// §6 and §8: positions and margin are pushed every 5 s of simulation time (on the manual
/// clock too), both at the same instant; a subscription starts with the current ones.
#[test]
fn positions_and_margin_arrive_together_every_five_seconds() {
    let server = manual();
    let a = server.demo();
    let seller = funded(&server, &a, "USDC", "100000");
    let buyer = funded(&server, &a, "USDC", "100000");
    cross(&a, &seller, &buyer, "0.01");
    let positions = format!("positions:{buyer}");
    let mut ws = listening(&server, &a, &[&positions, "margin"]);
    let start: Vec<Value> = ws.drain(Duration::from_millis(300));
    assert!(
        start.iter().any(|v| v["channel"] == positions.as_str()),
        "{start:?}"
    );
    advance(&server, 5);
    let frames = ws.drain(Duration::from_millis(500));
    let held = frames
        .iter()
        .find(|v| v["channel"] == positions.as_str())
        .expect("positions pushed");
    assert_eq!(
        (
            &held["type"],
            &held["data"][0]["side"],
            &held["data"][0]["amount"]
        ),
        (&json!("snapshot"), &json!("long"), &json!("0.0100")),
        "{held}"
    );
    let margins: Vec<_> = frames.iter().filter(|v| v["channel"] == "margin").collect();
    assert_eq!(
        margins.len(),
        2,
        "both customers hold positions: {frames:?}"
    );
    for m in &margins {
        assert_eq!(m["timestamp"], held["timestamp"], "the same instant");
        assert!(
            m["data"]["leverage_ratio"].is_string() && m["data"]["customer_code"].is_string(),
            "{m}"
        );
    }
    assert_eq!(held["timestamp"], "2026-01-01T00:00:07.000Z");
}

/// §6: the ticker (every instrument, with next_funding_time) and one market-trades envelope
/// per trade are public: no authentication needed.
#[test]
fn ticker_and_market_trades_are_public() {
    let server = manual();
    let mut ws = Ws::connect(&server);
    ws.subscribe(&["ticker", "market-trades:BTC-USDC-PERP"]);
    let snapshots: Vec<Value> = (0..4).map(|_| ws.frame()).collect();
    let symbols: Vec<_> = snapshots
        .iter()
        .map(|v| v["data"]["symbol"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        symbols,
        [
            "BTC-USDC-PERP",
            "ETH-USDC-PERP",
            "SOL-USDC-PERP",
            "BTC-USDT-PERP"
        ]
    );
    assert!(
        snapshots.iter().all(|v| v["type"] == "snapshot"
            && v["data"]["next_funding_time"] == "2026-01-01T01:00:00.000Z"),
        "{snapshots:?}"
    );
    let a = server.demo();
    let seller = funded(&server, &a, "USDC", "100000");
    let buyer = funded(&server, &a, "USDC", "100000");
    cross(&a, &seller, &buyer, "0.02");
    let trade = ws.until("a market trade", |v| {
        v["channel"] == "market-trades:BTC-USDC-PERP"
    });
    assert_eq!(
        (
            &trade["type"],
            &trade["data"]["price"],
            &trade["data"]["amount"],
            &trade["data"]["taker_side"]
        ),
        (
            &json!("update"),
            &json!("60000.0"),
            &json!("0.0200"),
            &json!("buy")
        ),
        "{trade}"
    );
    let ticker = ws.until("the ticker after the trade", |v| {
        v["channel"] == "ticker" && v["data"]["last_price"] == "60000.0"
    });
    assert_eq!(ticker["type"], "update");
}

fn set_btc_price(server: &Server, price: &str) {
    let r = server.admin(
        "PUT",
        "/admin/v1/instruments/BTC-USDC-PERP/price",
        Some(json!({"index_price": price})),
    );
    assert_eq!(r.status, 200, "{}", r.text);
}

/// §2.2, §6 rules 2, 4, 5 and D9: a depreciation notice is pushed flat, equal to its REST
/// record (with `timestamp` for `created_at`); a margin call is pushed on liquidations with
/// margin_deficit and leverage_ratio at 4 decimals.
#[test]
fn notifications_equal_their_rest_record_and_margin_calls_reach_liquidations() {
    let server = manual();
    let a = server.demo();
    let mut ws = listening(&server, &a, &["notifications", "liquidations"]);
    let short = funded(&server, &a, "USDC", "100000");
    let long = funded(&server, &a, "USDC", "320");
    let r = a.send(
        "PUT",
        &format!("/v1/customers/{long}/margin-profile"),
        Some(json!({"leverage": 2})),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    order(
        &a,
        &short,
        json!({"symbol": "BTC-USDC-PERP", "side": "sell", "type": "limit", "reference_id": "s", "amount": "0.01", "limit_price": "60000"}),
    );
    order(
        &a,
        &long,
        json!({"symbol": "BTC-USDC-PERP", "side": "buy", "type": "market", "reference_id": "b", "amount": "0.01"}),
    );
    set_btc_price(&server, "39000");
    let call = ws.until("a margin state change", |v| v["channel"] == "liquidations");
    let data = &call["data"];
    assert_eq!(
        (&call["type"], &data["customer_code"], &data["currency"]),
        (&json!("update"), &json!(long), &json!("USDC")),
        "{call}"
    );
    assert!(
        ["margin_call", "liquidation"].contains(&data["margin_state"].as_str().unwrap()),
        "{call}"
    );
    assert!(data["margin_deficit"].is_string(), "{call}");
    let ratio = data["leverage_ratio"].as_str().unwrap();
    assert_eq!(ratio.split('.').nth(1).map(str::len), Some(4), "{call}");
    advance(&server, 60);
    let pushed = ws.until("a notice", |v| v["channel"] == "notifications");
    let page = a
        .send(
            "GET",
            &format!("/v1/customers/notifications?customer_code={long}"),
            None,
        )
        .json();
    let mut rest = page["data"][0].clone();
    let fields = rest.as_object_mut().unwrap();
    let created = fields.remove("created_at").unwrap();
    fields.insert("timestamp".into(), created);
    fields.insert("channel".into(), json!("notifications"));
    assert_eq!(pushed, rest);
}

/// D9, issue 25 item 3: the connection and subscription bounds answer clearly (503 on the
/// upgrade once every session holds credentials, VALIDATION_ERROR naming the bound), and a
/// connection silent past the heartbeat timeout is closed, while one that answers pings stays.
#[test]
fn connections_subscriptions_and_silence_are_bounded() {
    let server = Server::start(&[
        "--clock",
        "manual",
        "--start",
        START,
        "--max-ws-connections",
        "2",
        "--max-ws-subscriptions",
        "2",
        "--ws-heartbeat-timeout",
        "1",
    ]);
    let mut first = Ws::connect(&server);
    first.authenticate(&server.demo());
    first.subscribe(&["ticker", "market-trades:BTC-USDC-PERP"]);
    first.send(json!({"op": "subscribe", "args": ["orderbook-stream:BTC-USDC-PERP"]}));
    let refused = first.until("the bound", |v| v["op"] == "error");
    assert_eq!(
        op_error(&refused),
        ("VALIDATION_ERROR", Some("orderbook-stream:BTC-USDC-PERP"))
    );
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("--max-ws-subscriptions"),
        "{refused}"
    );
    let mut _second = Ws::connect(&server);
    _second.authenticate(&server.demo());
    let err = Ws::try_connect(&server)
        .err()
        .expect("a third connection is refused");
    match err {
        tungstenite::Error::Http(resp) => {
            assert_eq!(resp.status(), 503);
            let body = String::from_utf8(resp.body().clone().unwrap_or_default()).unwrap();
            assert!(body.contains("--max-ws-connections"), "{body}");
        }
        other => panic!("{other}"),
    }
    // `first` reads (and so answers pings); `silent` reads nothing, so it answers none and
    // is closed within ~1.3 s: its socket holds the server's pings, then the close frame.
    let mut silent = _second;
    first.drain(Duration::from_millis(2_500));
    let received = silent.raw_bytes(Duration::from_secs(1));
    let reason = b"heartbeat timeout: nothing heard from the client";
    let mut close = vec![0x88, (2 + reason.len()) as u8, 0x03, 0xE9]; // FIN|close, 1001
    close.extend_from_slice(reason);
    assert!(
        received.windows(close.len()).any(|w| w == close.as_slice()),
        "no 1001 close in {received:?}"
    );
    first.send(json!({"op": "ping"}));
    assert_eq!(
        first.until("pong", |v| v["op"] == "pong"),
        json!({"op": "pong"})
    );
}

/// D9, issue 25 item 3: a reader that stalls is closed with 1008 `slow consumer` once its
/// queue is full, and a client that reads keeps receiving each tick's frames at once.
#[test]
fn a_stalled_reader_is_closed_with_1008_and_others_are_not_slowed() {
    let server = living(&["--ws-queue", "64"]);
    let books = [
        "orderbook-stream:BTC-USDC-PERP",
        "orderbook-stream:ETH-USDC-PERP",
        "orderbook-stream:SOL-USDC-PERP",
        "orderbook-stream:BTC-USDT-PERP",
    ];
    let mut stalled = Ws::connect(&server);
    stalled.subscribe(&books);
    let mut reader = Ws::connect(&server);
    reader.subscribe(&["ticker"]);
    reader.drain(Duration::from_millis(200));
    let mut slowest = Duration::ZERO;
    let mut rounds = 0;
    while metric(&server, "perpsim_ws_slow_consumer_closes_total") == 0 {
        rounds += 1;
        assert!(rounds <= 3_000, "the stalled reader was never closed");
        advance(&server, 30);
        let asked = std::time::Instant::now();
        let clock = server.admin("GET", "/admin/v1/clock", None).json()["now"].clone();
        reader.until("this tick's ticker", |v| v["data"]["timestamp"] == clock);
        slowest = slowest.max(asked.elapsed());
    }
    assert!(
        slowest < Duration::from_secs(1),
        "a reading client waited {slowest:?} for a tick"
    );
    let received = stalled.raw_bytes(Duration::from_secs(10));
    let mut close = vec![0x88, 15, 0x03, 0xF0]; // FIN|close, 2 + 13 bytes, 1008
    close.extend_from_slice(b"slow consumer");
    assert!(
        received.ends_with(&close),
        "the stream ends with the 1008 close ({} bytes read)",
        received.len()
    );
    reader.send(json!({"op": "ping"}));
    assert_eq!(
        reader.until("pong", |v| v["op"] == "pong"),
        json!({"op": "pong"})
    );
}

/// Issue 25: a thousand connections held at once each receive the tick's frame, and the
/// server counts them.
#[test]
fn a_thousand_connections_are_held_and_each_is_served() {
    let server = manual();
    let mut all: Vec<Ws> = (0..1_000)
        .map(|_| {
            let mut ws = Ws::connect(&server);
            ws.send(json!({"op": "subscribe", "args": ["ticker"]}));
            ws
        })
        .collect();
    for ws in &mut all {
        ws.until("the acknowledgement", |v| v["op"] == "subscribed");
    }
    assert_eq!(metric(&server, "perpsim_ws_connections_open"), 1_000);
    set_btc_price(&server, "61000");
    for ws in &mut all {
        let v = ws.until("the new ticker", |v| v["type"] == "update");
        assert_eq!(v["data"]["index_price"], "61000.0", "{v}");
    }
    // Issue 27 item 5: frames are counted per topic, the subscriptions' acknowledgements apart;
    // each connection got at least its snapshot's tickers and this update.
    let text = raw("GET", &format!("{}/metrics", server.url), &[], b"").text;
    let sent = |topic: &str| -> u64 {
        let series = format!("perpsim_ws_frames_sent_total{{topic=\"{topic}\"}} ");
        let line = text.lines().find(|l| l.starts_with(&series));
        line.map_or(0, |l| l[series.len()..].parse().unwrap())
    };
    assert!(sent("ticker") >= 2_000, "{text}");
    assert_eq!(sent("control"), 1_000, "one acknowledgement each: {text}");
    drop(all);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(metric(&server, "perpsim_ws_connections_open"), 0);
}

/// Issue 25 item 5: the frames the tests read are checked against the AsyncAPI document —
/// and the check is real: an undocumented field, a missing one, or a frame on no channel is
/// refused.
#[test]
fn the_document_refuses_frames_it_does_not_describe() {
    let refused = |frame: Value| {
        std::panic::catch_unwind(|| perpsim_tests::ws::assert_documented(&frame)).is_err()
    };
    assert!(!refused(json!({"op": "pong"})));
    assert!(refused(json!({"op": "pong", "extra": 1})));
    assert!(refused(
        json!({"channel": "ticker", "type": "update", "data": {"symbol": "BTC-USDC-PERP"}})
    ));
    assert!(refused(json!({"channel": "weather", "type": "update"})));
    let server = manual();
    let served = raw("GET", &format!("{}/asyncapi.yaml", server.url), &[], b"");
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../openapi/asyncapi.yaml");
    let mut served: Value = serde_saphyr::from_str(&served.text).unwrap();
    let mut checked_in: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    // Issue 28 item 3: the served copy names where this service listens.
    let host = server.url.trim_start_matches("http://");
    assert_eq!(served["servers"]["local"]["host"], host);
    assert_eq!(checked_in["servers"]["local"]["host"], "127.0.0.1:8080");
    served["servers"].take();
    checked_in["servers"].take();
    assert_eq!(
        served, checked_in,
        "served as checked in, but for its server"
    );
}
