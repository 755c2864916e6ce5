//! The OpenAPI document is the contract (issue "An exact contract for client developers"):
//! real answers of every broker operation match the document served at `/openapi.json` —
//! nullable exactly where the service answers `null`, required exactly where a field is always
//! there — every 405 lists what the path allows (RFC 9110 §15.5.6), and a body field of the
//! wrong JSON type is refused naming it (D4).

use perpsim_tests::schema::Document;
use perpsim_tests::{Client, Resp, advance, customer, funded, manual, raw};
use serde_json::{Value, json};

const BTC: &str = "BTC-USDC-PERP";

/// Sends a request and checks its answer against the document; returns the answer.
fn call(doc: &Document, c: &Client, method: &str, path: &str, body: Option<Value>) -> Resp {
    let r = c.send(method, path, body);
    doc.check(method, path, &r);
    r
}

#[test]
fn every_operation_answers_in_the_shape_the_document_declares() {
    let server = manual();
    let c = server.demo();
    let doc = Document::served(&server);
    let get = |path: &str| call(&doc, &c, "GET", path, None);

    // A customer with nothing yet: empty pages carry null cursors.
    let fresh = call(&doc, &c, "POST", "/v1/customers", Some(json!({}))).json();
    let fresh = fresh["customer_code"].as_str().unwrap();
    let empty = get(&format!("/v1/customers/transactions?customer_code={fresh}")).json();
    assert_eq!(empty["response_metadata"]["start_cursor"], Value::Null);
    get(&format!("/v1/customers/{fresh}/orders"));
    get(&format!("/v1/customers/{fresh}/trades"));

    let a = funded(&server, &c, "USDC", "1000000");
    let b = funded(&server, &c, "USDC", "1000000");
    for path in [
        "/v1/instruments".to_owned(),
        "/v1/tickers".to_owned(),
        format!("/v1/tickers/{BTC}"),
        "/v1/customers?limit=2".to_owned(),
        format!("/v1/customers/{a}"),
        format!("/v1/customers/{a}/balances"),
        format!("/v1/customers/{a}/account-summary"),
        format!("/v1/customers/{a}/margin-profile"),
        format!("/v1/customers/{a}/fee-profile"),
        format!("/v1/customers/{a}/transactions"),
    ] {
        get(&path);
    }
    call(
        &doc,
        &c,
        "PUT",
        &format!("/v1/customers/{a}/fee-profile/{BTC}"),
        Some(json!({"maker_fee": "1.5"})),
    );
    // Issue 35: what is set for one instrument reads back from its own path.
    let item = get(&format!("/v1/customers/{a}/fee-profile/{BTC}")).json();
    assert_eq!(
        (&item["symbol"], &item["maker_fee"]),
        (&json!(BTC), &json!("1.5")),
        "{item}"
    );
    call(
        &doc,
        &c,
        "PUT",
        &format!("/v1/customers/{a}/fee-profile"),
        Some(json!({"taker_fee": "4"})),
    );
    call(
        &doc,
        &c,
        "PUT",
        &format!("/v1/customers/{a}/margin-profile"),
        Some(json!({"leverage": 1})),
    );
    call(
        &doc,
        &c,
        "POST",
        &format!("/v1/customers/{a}/withdrawals"),
        Some(json!({"asset": "USDC", "amount": "1"})),
    );

    // Orders: one resting (expire_time, avg_fill_price and reason null), a GTD one, a stop
    // waiting on its trigger, then a trade between a and b.
    let orders = format!("/v1/customers/{a}/orders");
    for body in [
        json!({"reference_id": "rest", "side": "buy", "type": "limit", "amount": "0.01",
               "limit_price": "50000"}),
        json!({"reference_id": "gtd", "side": "buy", "type": "limit", "amount": "0.01",
               "limit_price": "50000", "time_in_force": "GTD",
               "expire_time": "2026-01-02T00:00:00Z"}),
        json!({"reference_id": "stop", "side": "sell", "type": "stop_loss", "amount": "0.01",
               "trigger_price": "40000"}),
        json!({"reference_id": "ask", "side": "sell", "type": "limit", "amount": "0.5",
               "limit_price": "60000"}),
    ] {
        let mut body = body;
        body["symbol"] = json!(BTC);
        let r = call(&doc, &c, "POST", &orders, Some(body));
        assert_eq!(r.status, 201, "{}", r.text);
    }
    call(
        &doc,
        &c,
        "POST",
        &format!("/v1/customers/{b}/orders"),
        Some(
            json!({"symbol": BTC, "reference_id": "take", "side": "buy", "type": "market",
                    "amount": "0.25"}),
        ),
    );
    get(&format!("{orders}/rest"));
    get(&format!("{orders}?limit=2"));
    call(
        &doc,
        &c,
        "PATCH",
        &format!("{orders}/rest"),
        Some(json!({"limit_price": "50100"})),
    );
    call(&doc, &c, "DELETE", &format!("{orders}/rest"), None);
    get(&format!("{orders}/rest"));

    let positions = get(&format!("/v1/customers/{b}/positions")).json();
    let position = positions[0]["position_code"].as_str().unwrap();
    get(&format!("/v1/customers/{b}/positions/{position}"));
    let trades = get(&format!("/v1/customers/{b}/trades")).json();
    let trade = trades["data"][0]["code"].as_str().unwrap();
    get(&format!("/v1/customers/{b}/trades/{trade}"));
    advance(&server, 60);
    for path in [
        "/v1/trades?sort=asc".to_owned(),
        format!("/v1/market-trades?symbol={BTC}"),
        format!("/v1/ohlc?symbol={BTC}&interval=1m"),
        format!("/v1/tickers/{BTC}"),
        format!("/v1/customers/transactions?customer_code={b}"),
        format!("/v1/customers/{b}/account-summary"),
    ] {
        get(&path);
    }

    // Errors are answers too: each status the document lists for the operation.
    for (method, path, body) in [
        ("GET", format!("{orders}/nope"), None),
        ("DELETE", format!("{orders}/rest"), None),
        ("POST", orders.clone(), Some(json!({"symbol": BTC}))),
        ("GET", "/v1/customers/not-a-customer".to_owned(), None),
    ] {
        let r = call(&doc, &c, method, &path, body);
        assert!(r.status >= 400, "{method} {path}: {}", r.text);
    }
}

#[test]
fn a_body_field_of_the_wrong_json_type_is_refused_naming_the_field() {
    let server = manual();
    let c = server.demo();
    let a = funded(&server, &c, "USDC", "1000");
    let cases = [
        (
            "/v1/customers".to_owned(),
            json!({"external_id": false}),
            "external_id",
        ),
        (
            "/v1/customers".to_owned(),
            json!({"external_id": 12}),
            "external_id",
        ),
        (
            format!("/v1/customers/{a}/deposits"),
            json!({"asset": 1, "amount": "1"}),
            "asset",
        ),
        (
            format!("/v1/customers/{a}/orders"),
            json!({"symbol": true, "side": "buy", "type": "market", "reference_id": "x",
                   "amount": "0.001"}),
            "symbol",
        ),
        (
            format!("/v1/customers/{a}/orders"),
            json!({"symbol": BTC, "side": "buy", "type": "market", "reference_id": 7,
                   "amount": "0.001"}),
            "reference_id",
        ),
    ];
    for (path, body, field) in cases {
        let r = c.send("POST", &path, Some(body.clone()));
        let message = r.assert_error(400, "VALIDATION_ERROR");
        assert!(message.contains(field), "{body}: {message}");
    }
    let customers = c.send("GET", "/v1/customers", None).json();
    assert!(
        customers["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["external_id"] != "false" && c["external_id"] != "12"),
        "nothing was stored from a refused body"
    );
}

#[test]
fn every_405_carries_an_allow_header_naming_the_paths_methods() {
    let server = manual();
    let c = server.demo();
    let code = customer(&c);
    for (method, path, allow) in [
        ("TRACE", "/v1/customers".to_owned(), "GET, POST"),
        (
            "PUT",
            format!("/v1/customers/{code}/orders/r1"),
            "DELETE, GET, PATCH",
        ),
        ("DELETE", "/v1/instruments".to_owned(), "GET"),
    ] {
        let r = c.send(method, &path, None);
        r.assert_error(405, "METHOD_NOT_ALLOWED");
        assert_eq!(r.header("allow"), Some(allow), "{method} {path}");
    }
    for path in ["/healthz", "/openapi.json", "/docs"] {
        let r = raw("POST", &format!("{}{path}", server.url), &[], b"");
        r.assert_error(405, "METHOD_NOT_ALLOWED");
        assert_eq!(r.header("allow"), Some("GET"), "POST {path}");
    }
    let r = server.admin("DELETE", "/admin/v1/clock", None);
    r.assert_error(405, "METHOD_NOT_ALLOWED");
    assert_eq!(r.header("allow"), Some("GET"));
}

/// Every constraint the document states of a parameter (`api/src/contract/params.rs`) is the
/// one the service checks: its edges, just inside and just outside.
#[test]
fn every_stated_parameter_constraint_is_exactly_what_the_service_checks() {
    let server = manual();
    let c = server.demo();
    let code = customer(&c);
    let orders = format!("/v1/customers/{code}/orders");
    let accented = |n: usize| "%C3%A9".repeat(n); // é, two bytes each
    let cases = [
        ("/v1/customers?limit=1".to_owned(), true),
        ("/v1/customers?limit=1000".to_owned(), true),
        ("/v1/customers?limit=0".to_owned(), false),
        ("/v1/customers?limit=1001".to_owned(), false),
        ("/v1/customers?after=".to_owned(), false),
        ("/v1/customers?before=".to_owned(), false),
        (format!("/v1/ohlc?symbol={BTC}&interval=60m"), true),
        (format!("/v1/ohlc?symbol={BTC}&interval=1d"), true),
        (format!("/v1/ohlc?symbol={BTC}&interval=2h"), false),
        (format!("/v1/ohlc?symbol={BTC}&interval=1H"), false),
        (format!("/v1/customers/{code}/balances?asset=USDT"), true),
        (format!("/v1/customers/{code}/balances?asset=usdc"), false),
        (format!("{orders}?status=open"), true),
        (format!("{orders}?status=OPEN"), false),
        (format!("{orders}/{}", "x".repeat(40)), true),
        (format!("{orders}/{}", "x".repeat(41)), false),
        (format!("{orders}/a.b"), false),
        ("/v1/instruments?symbol=btc-*%7Ceth-*".to_owned(), true),
        ("/v1/instruments?symbol=a%7C%7Cb".to_owned(), false),
        ("/v1/instruments?symbol=a%7C".to_owned(), false),
        (format!("/v1/tickers?underlying={}", accented(256)), true),
        (format!("/v1/tickers?underlying={}", accented(257)), false),
        // Time bounds: any RFC 3339 instant (before 1970, finer than a millisecond, any
        // offset) or 1 to 15 digits of milliseconds.
        ("/v1/trades?from=0001-01-01T00:00:00Z".to_owned(), true),
        (
            "/v1/trades?to=2026-01-01T00:00:00.123456789%2B05:30".to_owned(),
            true,
        ),
        ("/v1/trades?from=999999999999999".to_owned(), true),
        ("/v1/trades?from=1000000000000000".to_owned(), false),
        ("/v1/trades?to=2026-01-01".to_owned(), false),
        (
            "/v1/customers/transactions?created_from=-1".to_owned(),
            false,
        ),
        // Funding-rate windows: 0 to 253402300799999 ms (§4.1 rule 2).
        ("/v1/funding_rates?start=0".to_owned(), true),
        ("/v1/funding_rates?end=253402300799999".to_owned(), true),
        ("/v1/funding_rates?start=-1".to_owned(), false),
        ("/v1/funding_rates?end=253402300800000".to_owned(), false),
        ("/v1/funding_rates?start=".to_owned(), false),
    ];
    for (path, accepted) in cases {
        let r = c.send("GET", &path, None);
        if accepted {
            assert!(r.status == 200 || r.status == 404, "{path}: {}", r.text);
        } else {
            r.assert_error(400, "VALIDATION_ERROR");
        }
    }
}

/// Every constraint the document states of a request body field beyond its type
/// (`api/src/contract/params.rs`) is the one the service checks, at its edges.
#[test]
fn every_stated_body_constraint_is_exactly_what_the_service_checks() {
    let server = manual();
    let c = server.demo();
    let code = customer(&c);
    let deposit = |amount: &str, asset: &str| json!({"asset": asset, "amount": amount});
    let fees = |body: Value| (format!("/v1/customers/{code}/fee-profile"), "PUT", body);
    let cases = [
        (
            (
                "/v1/customers".to_owned(),
                "POST",
                json!({"external_id": "x".repeat(64)}),
            ),
            true,
        ),
        (
            (
                "/v1/customers".to_owned(),
                "POST",
                json!({"external_id": "x".repeat(65)}),
            ),
            false,
        ),
        (
            (
                "/v1/customers".to_owned(),
                "POST",
                json!({"external_id": ""}),
            ),
            false,
        ),
        (
            (
                "/v1/customers".to_owned(),
                "POST",
                json!({"external_id": "a\u{85}b"}),
            ),
            false,
        ),
        (
            (
                "/v1/customers".to_owned(),
                "POST",
                json!({"external_id": "é ü"}),
            ),
            true,
        ),
        (
            (
                format!("/v1/customers/{code}/deposits"),
                "POST",
                deposit("0.0000000001", "USDC"),
            ),
            true,
        ),
        (
            (
                format!("/v1/customers/{code}/deposits"),
                "POST",
                deposit("000999999999999.5", "USDT"),
            ),
            true,
        ),
        (
            (
                format!("/v1/customers/{code}/deposits"),
                "POST",
                deposit("1000000000000", "USDC"),
            ),
            false,
        ),
        (
            (
                format!("/v1/customers/{code}/deposits"),
                "POST",
                deposit("0.00000000000", "USDC"),
            ),
            false,
        ),
        (
            (
                format!("/v1/customers/{code}/deposits"),
                "POST",
                deposit("1", "usdc"),
            ),
            false,
        ),
        (fees(json!({"maker_fee": "-10000.0"})), true),
        (fees(json!({"taker_fee": 9999.5})), true),
        (fees(json!({"maker_fee": "10000.01"})), false),
        (fees(json!({"taker_fee": -10001})), false),
        (fees(json!({})), false),
        (
            (
                format!("/v1/customers/{code}/margin-profile"),
                "PUT",
                json!({"leverage": "2"}),
            ),
            true,
        ),
        (
            (
                format!("/v1/customers/{code}/margin-profile"),
                "PUT",
                json!({"leverage": 3}),
            ),
            false,
        ),
    ];
    for ((path, method, body), accepted) in cases {
        let r = c.send(method, &path, Some(body.clone()));
        if accepted {
            assert!(r.status < 300, "{method} {path} {body}: {}", r.text);
        } else {
            r.assert_error(400, "VALIDATION_ERROR");
        }
    }
}
