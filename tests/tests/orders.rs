//! Issue 4 through the real binary: order entry rules 1–14 (§4.3, D5), the lifecycle of §3.1,
//! each order type and time in force, positions (§2.4, D6), trades (§2.10, D5) and market
//! data (§4.1, D8). The binary is a debug build, so the engine also checks the trading and
//! money invariants after every run of its schedule.

use perpsim_tests::{Client, Resp, Server, advance, funded, manual};
use serde_json::{Value, json};

const BTC: &str = "BTC-USDC-PERP";

fn post(c: &Client, code: &str, body: Value) -> Resp {
    c.send("POST", &format!("/v1/customers/{code}/orders"), Some(body))
}

fn order(c: &Client, code: &str, fields: Value) -> Resp {
    let mut body = json!({"symbol": BTC, "reference_id": "r1"});
    for (k, v) in fields.as_object().unwrap() {
        body[k] = v.clone();
    }
    post(c, code, body)
}

fn get(c: &Client, path: &str) -> Value {
    let r = c.send("GET", path, None);
    assert_eq!(r.status, 200, "{path}: {}", r.text);
    r.json()
}

fn setup() -> (Server, Client, String, String) {
    let server = manual();
    let c = server.demo();
    let a = funded(&server, &c, "USDC", "1000000");
    let b = funded(&server, &c, "USDC", "1000000");
    (server, c, a, b)
}

/// One refusal per rule (§4.3), each naming the field and, where numbered, the rule; and an
/// accepted form of each.
#[test]
fn every_entry_rule_refuses_its_violation_and_accepts_its_valid_form() {
    let (_s, c, a, _) = setup();
    let refused: &[(u16, &str, Value, &str)] = &[
        (
            400,
            "VALIDATION_ERROR",
            json!({"side": "buy", "type": "limit", "limit_price": "59000"}),
            "rule 1",
        ),
        (
            400,
            "VALIDATION_ERROR",
            json!({"side": "buy", "type": "market", "amount": "1", "cash_amount": "10"}),
            "rule 1",
        ),
        (
            400,
            "VALIDATION_ERROR",
            json!({"side": "buy", "type": "market", "cash_amount": "10", "time_in_force": "FOK"}),
            "rule 2",
        ),
        (
            400,
            "VALIDATION_ERROR",
            json!({"side": "buy", "type": "stop_loss", "cash_amount": "10", "trigger_price": "61000"}),
            "rule 2",
        ),
        (
            400,
            "VALIDATION_ERROR",
            json!({"side": "buy", "type": "limit", "amount": "1"}),
            "rule 3",
        ),
        (
            400,
            "VALIDATION_ERROR",
            json!({"side": "buy", "type": "market", "amount": "1", "limit_price": "1"}),
            "rule 3",
        ),
        (
            400,
            "VALIDATION_ERROR",
            json!({"side": "buy", "type": "stop_loss", "amount": "1"}),
            "rule 4",
        ),
        (
            400,
            "VALIDATION_ERROR",
            json!({"side": "buy", "type": "limit", "amount": "1", "limit_price": "1", "trigger_price": "1"}),
            "rule 4",
        ),
        (
            400,
            "VALIDATION_ERROR",
            json!({"side": "buy", "type": "limit", "amount": "1", "limit_price": "1", "take_profit_price": "1"}),
            "rule 5",
        ),
        (
            400,
            "VALIDATION_ERROR",
            json!({"side": "buy", "type": "limit", "amount": "1", "limit_price": "1", "trigger_price_type": "trade_price"}),
            "rule 6",
        ),
        (
            400,
            "VALIDATION_ERROR",
            json!({"side": "sell", "type": "take_profit_stop_loss", "amount": "1", "take_profit_price": "61000", "stop_loss_price": "59000", "trigger_price_type": "trade_price"}),
            "rule 6",
        ),
        (
            400,
            "VALIDATION_ERROR",
            json!({"side": "buy", "type": "stop_loss", "amount": "1", "trigger_price": "61000", "time_in_force": "GTC"}),
            "rule 7",
        ),
        (
            400,
            "VALIDATION_ERROR",
            json!({"side": "buy", "type": "stop_loss", "amount": "1", "trigger_price": "59000"}),
            "rule 8",
        ),
        (
            400,
            "VALIDATION_ERROR",
            json!({"side": "sell", "type": "take_profit", "amount": "1", "trigger_price": "59000"}),
            "rule 8",
        ),
        (
            400,
            "VALIDATION_ERROR",
            json!({"side": "buy", "type": "market", "amount": "0.1", "leverage": 3}),
            "rule 9",
        ),
        (
            400,
            "VALIDATION_ERROR",
            json!({"side": "buy", "type": "market", "amount": "0.1", "leverage": "02"}),
            "leverage",
        ),
        (
            400,
            "VALIDATION_ERROR",
            json!({"side": "buy", "type": "market", "amount": "0.1", "customer_ip": "10.0.0.1:80"}),
            "customer_ip",
        ),
        (
            400,
            "VALIDATION_ERROR",
            json!({"side": "buy", "type": "market", "amount": "0.1", "customer_ip": "10.0.0.0/8"}),
            "rule 10",
        ),
        (
            400,
            "VALIDATION_ERROR",
            json!({"side": "buy", "type": "market", "amount": "0.1", "customer_ip": "fe80::1%eth0"}),
            "rule 10",
        ),
        (
            400,
            "VALIDATION_ERROR",
            json!({"side": "buy", "type": "market", "amount": "0.1", "stop_price": "1"}),
            "stop_price",
        ),
        (
            400,
            "VALIDATION_ERROR",
            json!({"side": "buy", "type": "limit", "amount": "1", "limit_price": "59000", "time_in_force": "GTD"}),
            "rule 13",
        ),
        (
            400,
            "VALIDATION_ERROR",
            json!({"side": "buy", "type": "limit", "amount": "1", "limit_price": "59000", "expire_time": "2030-01-01T00:00:00Z"}),
            "rule 13",
        ),
        (
            400,
            "VALIDATION_ERROR",
            json!({"side": "buy", "type": "limit", "amount": "1", "limit_price": "59000", "reference_id": "has space"}),
            "reference_id",
        ),
        (
            400,
            "VALIDATION_ERROR",
            json!({"side": "buy", "type": "limit", "amount": "1", "limit_price": "59000", "reference_id": "x".repeat(41)}),
            "reference_id",
        ),
        (
            400,
            "VALIDATION_ERROR",
            json!({"side": "buy", "type": "limit", "amount": "-1", "limit_price": "59000"}),
            "amount",
        ),
        (
            400,
            "VALIDATION_ERROR",
            json!({"side": "buy", "type": "limit", "amount": "1e2", "limit_price": "59000"}),
            "amount",
        ),
        (
            400,
            "ORDER_REJECTED",
            json!({"side": "buy", "type": "limit", "amount": "1", "limit_price": "59000.05"}),
            "tick",
        ),
        (
            400,
            "ORDER_REJECTED",
            json!({"side": "buy", "type": "limit", "amount": "0.00001", "limit_price": "59000"}),
            "lot",
        ),
        (
            400,
            "ORDER_REJECTED",
            json!({"side": "buy", "type": "limit", "amount": "200", "limit_price": "59000"}),
            "maximum",
        ),
        (
            400,
            "INSUFFICIENT_FUNDS",
            json!({"side": "buy", "type": "limit", "amount": "20", "limit_price": "59000"}),
            "initial margin",
        ),
        (
            404,
            "NOT_FOUND",
            json!({"side": "buy", "type": "market", "amount": "1", "symbol": "DOGE-USDC-PERP"}),
            "DOGE",
        ),
    ];
    for (status, code, body, names) in refused {
        let message = order(&c, &a, body.clone()).assert_error(*status, code);
        assert!(
            message.contains(names),
            "{body}: {message} should name {names}"
        );
        // A refused order leaves nothing behind (§3.1).
        let r = c.send("GET", &format!("/v1/customers/{a}/orders/r1"), None);
        r.assert_error(404, "NOT_FOUND");
    }
    let accepted: &[Value] = &[
        json!({"side": "buy", "type": "limit", "amount": "0.5", "limit_price": "59000"}),
        json!({"side": "buy", "type": "limit", "amount": "0.5", "limit_price": "59000", "time_in_force": "GTD", "expire_time": "2026-01-02T00:00:00Z"}),
        json!({"side": "buy", "type": "stop_loss", "amount": "0.5", "trigger_price": "61000", "trigger_price_type": "trade_price"}),
        json!({"side": "buy", "type": "stop_loss_limit", "amount": "0.5", "trigger_price": "61000", "limit_price": "61100", "time_in_force": "GTC"}),
        json!({"side": "sell", "type": "take_profit", "amount": "0.5", "trigger_price": "61000"}),
        json!({"side": "sell", "type": "take_profit_limit", "amount": "0.5", "trigger_price": "61000", "limit_price": "60900"}),
        json!({"side": "sell", "type": "take_profit_stop_loss", "amount": "0.5", "take_profit_price": "61000", "stop_loss_price": "59000"}),
        json!({"side": "buy", "type": "limit", "amount": "0.5", "limit_price": "59000", "leverage": "2", "customer_ip": "2001:db8::1", "post_only": true}),
    ];
    for (i, body) in accepted.iter().enumerate() {
        let mut body = body.clone();
        body["reference_id"] = json!(format!("ok-{i}"));
        let r = order(&c, &a, body.clone());
        assert_eq!(r.status, 201, "{body}: {}", r.text);
        let o = r.json();
        // Rule 14: the POST answers the requested type; customer_ip is never echoed.
        assert_eq!(o["type"], body["type"]);
        assert!(o.get("customer_ip").is_none());
        assert_eq!(o["status"], "open");
    }
    // Rule 14 and D5: reads report the stored type and post_only false.
    let read = |r: &str| get(&c, &format!("/v1/customers/{a}/orders/{r}"));
    assert_eq!(read("ok-2")["type"], "stop_market");
    assert_eq!(read("ok-3")["type"], "stop_limit");
    assert_eq!(read("ok-6")["type"], "take_profit_stop_loss");
    assert_eq!(read("ok-7")["post_only"], false);
    // Rule 13: GTD reports its time in force and expire_time; others null.
    assert_eq!(read("ok-1")["time_in_force"], "GTD");
    assert_eq!(read("ok-1")["expire_time"], "2026-01-02T00:00:00.000Z");
    assert_eq!(read("ok-0")["expire_time"], Value::Null);
    // Rule 9: leverage 2 became the account-wide profile.
    assert_eq!(
        get(&c, &format!("/v1/customers/{a}/margin-profile"))["leverage"],
        2
    );
    // Rule 11: a second order on an open reference is 409; the open-orders list has all 8.
    order(&c, &a, json!({"side": "buy", "type": "limit", "amount": "0.5", "limit_price": "59000", "reference_id": "ok-0"}))
        .assert_error(409, "DUPLICATE_REFERENCE_ID");
    assert_eq!(
        get(&c, &format!("/v1/customers/{a}/orders"))["data"]
            .as_array()
            .unwrap()
            .len(),
        8
    );
}

/// Inputs whose product would overflow a decimal, at entry or on an amend, are refused by
/// the venue maximum notional (§7 ORDER_REJECTED) and the engine goes on serving.
#[test]
fn oversized_amounts_and_prices_are_refused_at_entry_and_on_amend_and_the_engine_lives() {
    let (_server, c, a, _b) = setup();
    let huge = json!({"side": "buy", "type": "limit", "amount": "9999999999999999999",
        "limit_price": "99999999999999999"});
    let msg = order(&c, &a, huge).assert_error(400, "ORDER_REJECTED");
    assert!(msg.contains("venue maximum"), "{msg}");
    let open = json!({"reference_id": "small", "side": "buy", "type": "limit",
        "amount": "0.010", "limit_price": "50000"});
    assert_eq!(order(&c, &a, open).status, 201);
    let path = format!("/v1/customers/{a}/orders/small");
    for (amend, words) in [
        (json!({"amount": "9999999999999999999"}), "notional"),
        (
            json!({"limit_price": "99999999999999999999999999"}),
            "too high",
        ),
    ] {
        let msg = c
            .send("PATCH", &path, Some(amend.clone()))
            .assert_error(400, "ORDER_REJECTED");
        assert!(
            msg.contains(words) && msg.contains("venue maximum"),
            "{amend}: {msg}"
        );
    }
    let kept = get(&c, &path);
    assert_eq!(
        (kept["amount"].as_str(), kept["limit_price"].as_str()),
        (Some("0.0100"), Some("50000.0"))
    );
}

#[test]
fn lifecycle_rows_of_section_3_1_cancel_expire_fill_and_amend() {
    let (server, c, a, b) = setup();
    let limit = |who: &str, r: &str, side: &str, amount: &str, price: &str| {
        order(
            &c,
            who,
            json!({"reference_id": r, "side": side, "type": "limit", "amount": amount, "limit_price": price}),
        )
    };
    // open → partially_filled by a partial execution.
    assert_eq!(
        limit(&a, "m", "sell", "1", "60000").json()["status"],
        "open"
    );
    assert_eq!(
        limit(&b, "t", "buy", "0.4", "60000").json()["status"],
        "filled"
    );
    let m = get(&c, &format!("/v1/customers/{a}/orders/m"));
    assert_eq!(
        (
            m["status"].as_str(),
            m["filled_amount"].as_str(),
            m["avg_fill_price"].as_str()
        ),
        (Some("partially_filled"), Some("0.4000"), Some("60000.0"))
    );
    // partially_filled → canceled by DELETE, reason USER_INITIATED, fills kept.
    let d = c.send("DELETE", &format!("/v1/customers/{a}/orders/m"), None);
    assert_eq!(d.status, 200, "{}", d.text);
    let d = d.json();
    assert_eq!(
        (
            d["status"].as_str(),
            d["reason"].as_str(),
            d["filled_amount"].as_str()
        ),
        (Some("canceled"), Some("USER_INITIATED"), Some("0.4000"))
    );
    // DELETE again: 409 naming the status; unknown: 404.
    let msg = c
        .send("DELETE", &format!("/v1/customers/{a}/orders/m"), None)
        .assert_error(409, "ORDER_NOT_CANCELLABLE");
    assert!(msg.contains("canceled"), "{msg}");
    c.send("DELETE", &format!("/v1/customers/{a}/orders/nope"), None)
        .assert_error(404, "NOT_FOUND");
    // open → canceled.
    limit(&a, "o", "buy", "0.1", "50000");
    assert_eq!(
        c.send("DELETE", &format!("/v1/customers/{a}/orders/o"), None)
            .json()["status"],
        "canceled"
    );
    // open → expired (GTD), reason EXPIRED; expire_time null once expired.
    let r = order(
        &c,
        &a,
        json!({"reference_id": "g", "side": "buy", "type": "limit", "amount": "0.1", "limit_price": "50000", "time_in_force": "GTD", "expire_time": "2026-01-01T00:00:30Z"}),
    );
    assert_eq!(r.json()["expire_time"], "2026-01-01T00:00:30.000Z");
    advance(&server, 60);
    let g = get(&c, &format!("/v1/customers/{a}/orders/g"));
    assert_eq!(
        (
            g["status"].as_str(),
            g["reason"].as_str(),
            &g["expire_time"]
        ),
        (Some("expired"), Some("EXPIRED"), &Value::Null)
    );
    // Amend by PATCH; 409 ORDER_NOT_AMENDABLE once ended.
    limit(&a, "p", "buy", "0.1", "50000");
    let p = c.send(
        "PATCH",
        &format!("/v1/customers/{a}/orders/p"),
        Some(json!({"amount": "0.2", "limit_price": "50100"})),
    );
    assert_eq!(p.status, 200, "{}", p.text);
    assert_eq!(
        (
            p.json()["amount"].as_str(),
            p.json()["limit_price"].as_str()
        ),
        (Some("0.2000"), Some("50100.0"))
    );
    c.send(
        "PATCH",
        &format!("/v1/customers/{a}/orders/g"),
        Some(json!({"amount": "0.2"})),
    )
    .assert_error(409, "ORDER_NOT_AMENDABLE");
    c.send(
        "PATCH",
        &format!("/v1/customers/{a}/orders/p"),
        Some(json!({})),
    )
    .assert_error(400, "VALIDATION_ERROR");
    // GET orders: status other than open → 400.
    c.send(
        "GET",
        &format!("/v1/customers/{a}/orders?status=filled"),
        None,
    )
    .assert_error(400, "VALIDATION_ERROR");
}

#[test]
fn each_time_in_force_and_order_type_executes_as_d5_says() {
    let (_s, c, a, b) = setup();
    let ask = |r: &str, amount: &str, price: &str| {
        order(
            &c,
            &a,
            json!({"reference_id": r, "side": "sell", "type": "limit", "amount": amount, "limit_price": price}),
        )
    };
    ask("a1", "1", "60000");
    ask("a2", "1", "60100");
    let buy = |fields: Value| order(&c, &b, fields).json();
    // IOC: keeps what it filled, ends expired TIME_IN_FORCE.
    let ioc = buy(
        json!({"reference_id": "ioc", "side": "buy", "type": "limit", "amount": "1.5", "limit_price": "60000", "time_in_force": "IOC"}),
    );
    assert_eq!(
        (
            ioc["status"].as_str(),
            ioc["reason"].as_str(),
            ioc["filled_amount"].as_str()
        ),
        (Some("expired"), Some("TIME_IN_FORCE"), Some("1.0000"))
    );
    // FOK: all or nothing.
    let fok = buy(
        json!({"reference_id": "fok", "side": "buy", "type": "market", "amount": "2", "time_in_force": "FOK"}),
    );
    assert_eq!(
        (fok["status"].as_str(), fok["filled_amount"].as_str()),
        (Some("expired"), Some("0.0000"))
    );
    // Cash market order: resolved to whole lots, IOC; cash_amount present only on it.
    let cash =
        buy(json!({"reference_id": "cash", "side": "buy", "type": "market", "cash_amount": 601}));
    assert_eq!(
        (
            cash["amount"].as_str(),
            cash["cash_amount"].as_str(),
            cash["status"].as_str()
        ),
        (Some("0.0100"), Some("601"), Some("filled"))
    );
    assert!(ioc.get("cash_amount").is_none());
    // GTC limit rests; post_only that would take is ORDER_REJECTED.
    let gtc = buy(
        json!({"reference_id": "gtc", "side": "buy", "type": "limit", "amount": "0.1", "limit_price": "59000"}),
    );
    assert_eq!(
        (gtc["status"].as_str(), gtc["time_in_force"].as_str()),
        (Some("open"), Some("GTC"))
    );
    order(&c, &b, json!({"reference_id": "po", "side": "buy", "type": "limit", "amount": "0.1", "limit_price": "60100", "post_only": true})).assert_error(400, "ORDER_REJECTED");
    // Market sweeps the rest of the book; a stop buy at 60100 was already reached → refused.
    order(&c, &b, json!({"reference_id": "st", "side": "buy", "type": "stop_loss", "amount": "0.1", "trigger_price": "60000"})).assert_error(400, "VALIDATION_ERROR");
    let mkt = buy(json!({"reference_id": "mkt", "side": "buy", "type": "market", "amount": "0.5"}));
    assert_eq!(
        (mkt["status"].as_str(), mkt["avg_fill_price"].as_str()),
        (Some("filled"), Some("60100.0"))
    );
}

#[test]
fn instrument_status_trade_halt_and_post_only_gate_new_orders_d5() {
    let (server, c, a, _) = setup();
    let status = |s: &str| {
        let r = server.admin(
            "PUT",
            &format!("/admin/v1/instruments/{BTC}/status"),
            Some(json!({"status": s})),
        );
        assert_eq!(r.status, 200, "{}", r.text);
    };
    status("trade_halt");
    order(
        &c,
        &a,
        json!({"side": "buy", "type": "limit", "amount": "0.1", "limit_price": "59000"}),
    )
    .assert_error(400, "ORDER_REJECTED");
    status("post_only");
    order(
        &c,
        &a,
        json!({"side": "buy", "type": "market", "amount": "0.1"}),
    )
    .assert_error(400, "ORDER_REJECTED");
    let r = order(
        &c,
        &a,
        json!({"side": "buy", "type": "limit", "amount": "0.1", "limit_price": "59000"}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
}

#[test]
fn fills_make_positions_trades_ledger_rows_and_market_data() {
    let (_s, c, a, b) = setup();
    order(
        &c,
        &a,
        json!({"reference_id": "m", "side": "sell", "type": "limit", "amount": "1", "limit_price": "60000"}),
    );
    order(
        &c,
        &b,
        json!({"reference_id": "t", "side": "buy", "type": "market", "amount": "0.25"}),
    );
    // Positions (D6): one per symbol; amount at lot decimals, prices at tick decimals.
    let long = get(&c, &format!("/v1/customers/{b}/positions"));
    let p = &long[0];
    assert_eq!(
        (
            p["side"].as_str(),
            p["amount"].as_str(),
            p["entry_price"].as_str(),
            p["unrealised_pnl"].as_str()
        ),
        (
            Some("long"),
            Some("0.2500"),
            Some("60000.0"),
            Some("0.0000000000")
        )
    );
    let code = p["position_code"].as_str().unwrap();
    assert_eq!(
        get(&c, &format!("/v1/customers/{b}/positions/{code}"))["position_code"],
        code
    );
    assert_eq!(
        get(&c, &format!("/v1/customers/{b}/positions?side=short")),
        json!([])
    );
    assert_eq!(
        get(&c, &format!("/v1/customers/{a}/positions?symbol={BTC}"))[0]["side"],
        "short"
    );
    c.send("GET", &format!("/v1/customers/{a}/positions/{code}"), None)
        .assert_error(404, "NOT_FOUND");
    // Balances: locked = 0.25 × 60000 × 1.00; taker fee 5 bps of 15000 = 7.5.
    let bal = &get(&c, &format!("/v1/customers/{b}/balances"))[0];
    assert_eq!(
        (bal["locked"].as_str(), bal["total"].as_str()),
        (Some("15000.0000000000"), Some("999992.5000000000"))
    );
    // Trades (D5) and the ledger row: total_amount = realised_pnl − fee.
    let trades = get(&c, &format!("/v1/customers/{b}/trades"));
    let t = &trades["data"][0];
    assert_eq!(
        (
            t["liquidity"].as_str(),
            t["fee"].as_str(),
            t["reference_id"].as_str(),
            t["position_code"].as_str()
        ),
        (Some("taker"), Some("7.5000000000"), Some("t"), Some(code))
    );
    let tc = t["code"].as_str().unwrap();
    assert_eq!(
        get(&c, &format!("/v1/customers/{b}/trades/{tc}"))["code"],
        tc
    );
    let rows = get(&c, &format!("/v1/customers/transactions?customer_code={b}"));
    let row = &rows["data"][0];
    assert_eq!(
        (
            row["type"].as_str(),
            row["direction"].as_str(),
            row["total_amount"].as_str(),
            row["trade_code"].as_str()
        ),
        (Some("trade"), Some("debit"), Some("7.5000000000"), Some(tc))
    );
    // Broker-wide trades: both sides; filters; unknown symbol → empty page; unknown param → 400.
    assert_eq!(
        get(&c, "/v1/trades?sort=asc")["data"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(get(&c, "/v1/trades?symbol=NOPE")["data"], json!([]));
    assert_eq!(
        get(&c, "/v1/trades?from=2030-01-01T00:00:00Z")["data"],
        json!([])
    );
    let msg = c
        .send("GET", "/v1/trades?page=2", None)
        .assert_error(400, "VALIDATION_ERROR");
    assert!(msg.contains("page"), "{msg}");
    // Market data.
    let mt = get(&c, &format!("/v1/market-trades?symbol={BTC}"));
    assert_eq!(
        (mt[0]["price"].as_str(), mt[0]["taker_side"].as_str()),
        (Some("60000.0"), Some("buy"))
    );
    let tk = get(&c, &format!("/v1/tickers/{BTC}"));
    assert_eq!(
        (
            tk["last_price"].as_str(),
            tk["best_ask"].as_str(),
            tk["volume_24h"].as_str(),
            tk["open_interest"].as_str()
        ),
        (
            Some("60000.0"),
            Some("60000.0"),
            Some("0.2500"),
            Some("0.2500")
        )
    );
    assert_eq!(
        get(&c, "/v1/tickers?symbol=btc-*")
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let h = get(&c, &format!("/v1/ohlc?symbol={BTC}&interval=1h"));
    assert_eq!(h, get(&c, &format!("/v1/ohlc?symbol={BTC}&interval=60m")));
    assert_eq!(
        (
            h[0]["interval"].as_str(),
            h[0]["open"].as_str(),
            h[0]["volume"].as_str()
        ),
        (Some("1h"), Some("60000.0"), Some("0.2500"))
    );
    c.send("GET", &format!("/v1/ohlc?symbol={BTC}&interval=2h"), None)
        .assert_error(400, "VALIDATION_ERROR");
    // Account summary counts the position.
    let s = get(&c, &format!("/v1/customers/{b}/account-summary"));
    assert_eq!(s["used_margin"], "15000.0000000000");
}
