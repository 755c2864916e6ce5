//! Issue 3 through the real binary: transfers (D7, §3.2), balances (§2.5), the transaction
//! ledger (§2.9, §4.2) with D4 pagination. The binary under test is a debug build, so the
//! engine asserts the money invariants after every run of its schedule as well.

use perpsim_tests::{Client, Server, advance, customer, funded, manual, transfer};
use serde_json::{Value, json};

fn balances(c: &Client, code: &str, query: &str) -> Value {
    let r = c.send(
        "GET",
        &format!("/v1/customers/{code}/balances{query}"),
        None,
    );
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()
}

#[test]
fn a_deposit_answers_201_pending_and_completes_after_the_transfer_delay_with_the_same_code() {
    let server = manual();
    let c = server.demo();
    let code = customer(&c);
    let r = transfer(
        &c,
        &code,
        "deposits",
        json!({"asset": "USDC", "amount": "100.25"}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let row = r.json();
    assert_eq!(
        (
            row["status"].as_str(),
            row["type"].as_str(),
            row["direction"].as_str()
        ),
        (Some("pending"), Some("deposit"), Some("credit"))
    );
    assert_eq!(
        (row["total_amount"].as_str(), row["amount"].as_str()),
        (Some("100.2500000000"), Some("100.2500000000"))
    );
    assert_eq!(
        balances(&c, &code, "")[0]["total"],
        "0.0000000000",
        "not money until completed"
    );
    advance(&server, 1);
    let rows = c
        .send(
            "GET",
            &format!("/v1/customers/transactions?customer_code={code}"),
            None,
        )
        .json();
    assert_eq!(
        rows["data"][0]["code"], row["code"],
        "the code is stable through the lifecycle"
    );
    assert_eq!(rows["data"][0]["status"], "completed");
    assert_eq!(rows["data"][0]["updated_at"], "2026-01-01T00:00:01.000Z");
    assert_eq!(
        balances(&c, &code, ""),
        json!([{"asset": "USDC", "total": "100.2500000000", "available": "100.2500000000", "locked": "0.0000000000", "pending": "0.0000000000"}])
    );
}

#[test]
fn a_pending_withdrawal_is_held_in_pending_and_beyond_available_is_insufficient_funds() {
    let server = manual();
    let c = server.demo();
    let code = funded(&server, &c, "USDT", "50");
    let r = transfer(
        &c,
        &code,
        "withdrawals",
        json!({"asset": "USDT", "amount": "20.5"}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(
        (r.json()["status"].as_str(), r.json()["direction"].as_str()),
        (Some("pending"), Some("debit"))
    );
    let b = &balances(&c, &code, "?asset=USDT")[0];
    assert_eq!(
        (
            b["total"].as_str(),
            b["available"].as_str(),
            b["pending"].as_str()
        ),
        (
            Some("50.0000000000"),
            Some("29.5000000000"),
            Some("20.5000000000")
        )
    );
    transfer(
        &c,
        &code,
        "withdrawals",
        json!({"asset": "USDT", "amount": "29.5000000001"}),
    )
    .assert_error(400, "INSUFFICIENT_FUNDS");
    transfer(
        &c,
        &code,
        "withdrawals",
        json!({"asset": "USDC", "amount": "1"}),
    )
    .assert_error(400, "INSUFFICIENT_FUNDS");
    advance(&server, 1);
    let b = &balances(&c, &code, "?asset=USDT")[0];
    assert_eq!(
        (b["total"].as_str(), b["pending"].as_str()),
        (Some("29.5000000000"), Some("0.0000000000"))
    );
    assert_eq!(
        balances(&c, &code, "?asset=USDC"),
        json!([]),
        "a refused withdrawal leaves no row"
    );
}

#[test]
fn every_bad_transfer_input_is_refused_naming_the_field_and_nothing_is_booked() {
    let server = manual();
    let c = server.demo();
    let code = customer(&c);
    let bad_amounts = [
        json!("1.00000000001"),
        json!("0"),
        json!("-5"),
        json!("1e3"),
        json!("+1"),
        // At or past 10^12 (a balance must never be able to overflow a decimal).
        json!("1000000000000"),
        json!("9999999999999999999999999999"),
        json!(""),
        json!(" 1"),
        json!(10),
        json!(null),
    ];
    for amount in bad_amounts {
        let msg = transfer(
            &c,
            &code,
            "deposits",
            json!({"asset": "USDC", "amount": amount}),
        )
        .assert_error(400, "VALIDATION_ERROR");
        assert!(msg.contains("amount"), "{amount}: {msg}");
    }
    let msg = transfer(
        &c,
        &code,
        "deposits",
        json!({"asset": "EUR", "amount": "1"}),
    )
    .assert_error(400, "VALIDATION_ERROR");
    assert!(msg.contains("asset"), "{msg}");
    let msg = transfer(
        &c,
        &code,
        "deposits",
        json!({"asset": "USDC", "amount": "1", "memo": "x"}),
    )
    .assert_error(400, "VALIDATION_ERROR");
    assert!(msg.contains("memo"), "{msg}");
    transfer(
        &c,
        "00000000-0000-4000-8000-000000000000",
        "deposits",
        json!({"asset": "USDC", "amount": "1"}),
    )
    .assert_error(404, "NOT_FOUND");
    let other = server.new_broker("other");
    transfer(
        &other,
        &code,
        "deposits",
        json!({"asset": "USDC", "amount": "1"}),
    )
    .assert_error(404, "NOT_FOUND");
    transfer(
        &other,
        &code,
        "withdrawals",
        json!({"asset": "USDC", "amount": "1"}),
    )
    .assert_error(404, "NOT_FOUND");
    let rows = c.send("GET", "/v1/customers/transactions", None).json();
    assert_eq!(rows["data"], json!([]));
}

#[test]
fn the_admin_switch_answers_503_with_nothing_booked() {
    let server = manual();
    let c = server.demo();
    let code = customer(&c);
    let r = server.admin(
        "PUT",
        "/admin/v1/transfers",
        Some(json!({"available": false})),
    );
    assert_eq!(r.json(), json!({"available": false}));
    transfer(
        &c,
        &code,
        "deposits",
        json!({"asset": "USDC", "amount": "1"}),
    )
    .assert_error(503, "EXCHANGE_ERROR");
    transfer(
        &c,
        &code,
        "withdrawals",
        json!({"asset": "USDC", "amount": "1"}),
    )
    .assert_error(503, "EXCHANGE_ERROR");
    assert_eq!(
        c.send("GET", "/v1/customers/transactions", None).json()["data"],
        json!([])
    );
    assert_eq!(balances(&c, &code, ""), json!([]));
    server.admin(
        "PUT",
        "/admin/v1/transfers",
        Some(json!({"available": true})),
    );
    assert_eq!(
        transfer(
            &c,
            &code,
            "deposits",
            json!({"asset": "USDC", "amount": "1"})
        )
        .status,
        201
    );
}

#[test]
fn a_cancelled_transfer_ends_cancelled_and_releases_its_hold() {
    let server = manual();
    let c = server.demo();
    let code = funded(&server, &c, "USDC", "10");
    let w = transfer(
        &c,
        &code,
        "withdrawals",
        json!({"asset": "USDC", "amount": "4"}),
    )
    .json();
    let r = server.admin(
        "POST",
        &format!("/admin/v1/transfers/{}/cancel", w["code"].as_str().unwrap()),
        None,
    );
    assert_eq!(r.json()["status"], "cancelled");
    server
        .admin(
            "POST",
            &format!("/admin/v1/transfers/{}/cancel", w["code"].as_str().unwrap()),
            None,
        )
        .assert_error(404, "NOT_FOUND");
    advance(&server, 5);
    let b = &balances(&c, &code, "")[0];
    assert_eq!(
        (b["total"].as_str(), b["available"].as_str()),
        (Some("10.0000000000"), Some("10.0000000000"))
    );
}

#[test]
fn balances_filter_by_asset_and_refuse_unknown_assets() {
    let server = manual();
    let c = server.demo();
    let code = customer(&c);
    assert_eq!(
        balances(&c, &code, ""),
        json!([]),
        "an empty array, not null"
    );
    transfer(
        &c,
        &code,
        "deposits",
        json!({"asset": "USDC", "amount": "1"}),
    );
    assert_eq!(balances(&c, &code, "?asset=USDT"), json!([]));
    assert_eq!(balances(&c, &code, "?asset=USDC")[0]["asset"], "USDC");
    c.send(
        "GET",
        &format!("/v1/customers/{code}/balances?asset=BTC"),
        None,
    )
    .assert_error(400, "VALIDATION_ERROR");
    c.send(
        "GET",
        "/v1/customers/00000000-0000-4000-8000-000000000000/balances",
        None,
    )
    .assert_error(404, "NOT_FOUND");
}

#[test]
fn transactions_are_newest_first_filtered_by_customer_and_time_and_paginated() {
    transactions_listed(manual());
}

/// Issue 37: with every commit's history rows left to the projection's backlog
/// (`--projection-batch 0`), a list read right after its write finds its rows in the backlog
/// or, once the idle writer has projected them, in the tables: it answers exactly the same.
#[test]
fn transactions_list_the_same_while_the_projection_has_a_backlog() {
    let flags = ["--clock", "manual", "--start", perpsim_tests::START];
    transactions_listed(Server::start(
        &[&flags[..], &["--projection-batch", "0"]].concat(),
    ));
}

fn transactions_listed(server: Server) {
    let c = server.demo();
    let (a, b) = (customer(&c), customer(&c));
    let mut codes = Vec::new();
    for i in 0..6 {
        let who = if i % 2 == 0 { &a } else { &b };
        codes.push(
            transfer(
                &c,
                who,
                "deposits",
                json!({"asset": "USDC", "amount": format!("{}", i + 1)}),
            )
            .json()["code"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
        advance(&server, 60);
    }
    let list = |q: &str| c.send("GET", &format!("/v1/customers/transactions{q}"), None);
    let codes_of = |v: &Value| -> Vec<String> {
        v["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["code"].as_str().unwrap().to_owned())
            .collect()
    };
    let newest_first: Vec<String> = codes.iter().rev().cloned().collect();
    assert_eq!(codes_of(&list("").json()), newest_first);
    assert_eq!(
        codes_of(&list(&format!("?customer_code={a}")).json()),
        vec![codes[4].clone(), codes[2].clone(), codes[0].clone()]
    );
    let deprecated = c
        .send("GET", &format!("/v1/customers/{a}/transactions"), None)
        .json();
    assert_eq!(
        codes_of(&deprecated),
        vec![codes[4].clone(), codes[2].clone(), codes[0].clone()]
    );
    // Deposits were created at minutes 0..5; RFC 3339 and milliseconds name the same instants.
    let window = list("?created_from=2026-01-01T00:01:00Z&created_to=1767225780000").json();
    assert_eq!(
        codes_of(&window),
        vec![codes[3].clone(), codes[2].clone(), codes[1].clone()]
    );
    list("?created_from=yesterday").assert_error(400, "VALIDATION_ERROR");
    // Pagination walks the same order.
    let p1 = list("?limit=4").json();
    assert_eq!(codes_of(&p1), newest_first[..4]);
    let end = p1["response_metadata"]["end_cursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let p2 = list(&format!("?limit=4&after={end}")).json();
    assert_eq!(codes_of(&p2), newest_first[4..]);
    assert_eq!(
        (
            p2["response_metadata"]["has_previous"].as_bool(),
            p2["response_metadata"]["has_next"].as_bool()
        ),
        (Some(true), Some(false))
    );
    let start = p2["response_metadata"]["start_cursor"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        codes_of(&list(&format!("?limit=4&before={start}")).json()),
        newest_first[..4]
    );
    // Bad cursors and limits.
    let mut t = end.clone().into_bytes();
    t[3] = if t[3] == b'A' { b'B' } else { b'A' };
    list(&format!("?after={}", String::from_utf8(t).unwrap()))
        .assert_error(400, "VALIDATION_ERROR");
    list(&format!("?customer_code={a}&after={end}")).assert_error(400, "VALIDATION_ERROR");
    list(&format!("?after={end}&before={start}")).assert_error(400, "VALIDATION_ERROR");
    list("?limit=0").assert_error(400, "VALIDATION_ERROR");
    list("?limit=1001").assert_error(400, "VALIDATION_ERROR");
    let other = server.new_broker("other");
    other
        .send(
            "GET",
            &format!("/v1/customers/transactions?after={end}"),
            None,
        )
        .assert_error(400, "VALIDATION_ERROR");
    other
        .send(
            "GET",
            &format!("/v1/customers/transactions?customer_code={a}"),
            None,
        )
        .assert_error(404, "NOT_FOUND");
    assert_eq!(
        other.send("GET", "/v1/customers/transactions", None).json()["data"],
        json!([])
    );
}
