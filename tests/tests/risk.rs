//! Risk through the real binary on the manual clock (issue 13): depreciation notices on
//! `GET /v1/customers/notifications` (§2.2, §3.3, D4, D9) and the margin state on the
//! account summary (§2.6, D10).

use perpsim_tests::{Client, Server, advance, funded, manual};
use serde_json::{Value, json};

const BTC: &str = "BTC-USDC-PERP";

fn get(c: &Client, path: &str) -> Value {
    let r = c.send("GET", path, None);
    assert_eq!(r.status, 200, "{path}: {}", r.text);
    r.json()
}

fn set_price(server: &Server, price: &str) {
    let r = server.admin(
        "PUT",
        &format!("/admin/v1/instruments/{BTC}/price"),
        Some(json!({"index_price": price})),
    );
    assert_eq!(r.status, 200, "{}", r.text);
}

/// §2.2, §3.3: a 25 % fall of a long is one notice at 20 with exact values; the list
/// filters by customer, type, symbol and creation time, and refuses an unknown type.
#[test]
fn a_fall_of_a_quarter_is_one_notice_at_twenty_on_the_notifications_list() {
    let server = manual();
    let c = server.demo();
    let (short, long) = (
        funded(&server, &c, "USDC", "100000"),
        funded(&server, &c, "USDC", "100000"),
    );
    for (code, body) in [
        (
            &short,
            json!({"symbol": BTC, "reference_id": "s", "side": "sell", "type": "limit", "amount": "0.5", "limit_price": "60000"}),
        ),
        (
            &long,
            json!({"symbol": BTC, "reference_id": "b", "side": "buy", "type": "market", "amount": "0.5"}),
        ),
    ] {
        let r = c.send("POST", &format!("/v1/customers/{code}/orders"), Some(body));
        assert_eq!(r.status, 201, "{}", r.text);
    }
    set_price(&server, "45000");
    advance(&server, 60);
    let page = get(
        &c,
        &format!("/v1/customers/notifications?customer_code={long}"),
    );
    let data = page["data"].as_array().unwrap();
    assert_eq!(data.len(), 1, "{page}");
    let n = &data[0];
    assert_eq!(n["type"], "position_depreciation");
    assert_eq!(n["customer_code"], long.as_str());
    let d = &n["data"];
    assert_eq!(
        (&d["symbol"], &d["side"], &d["amount"], &d["currency"]),
        (
            &json!(BTC),
            &json!("long"),
            &json!("0.5000"),
            &json!("USDC")
        )
    );
    assert_eq!(d["avg_fill_price"], "60000.0");
    assert_eq!(d["initial_value"], "30000.0000000000");
    assert_eq!(d["mark_price"], "45000.0");
    assert_eq!(d["current_value"], "22500.0000000000");
    assert_eq!(d["depreciation_pct"], "25.0000");
    assert_eq!(d["threshold_pct"], 20);
    assert_eq!(d["evaluated_at"], n["created_at"]);
    // The same record through each filter, and none outside them.
    for q in [
        "type=position_depreciation".to_owned(),
        format!("symbol={BTC}"),
        format!("created_from={}", n["created_at"].as_str().unwrap()),
    ] {
        let page = get(&c, &format!("/v1/customers/notifications?{q}"));
        assert_eq!(page["data"][0]["code"], n["code"], "{q}");
    }
    let none = get(&c, "/v1/customers/notifications?symbol=ETH-USDC-PERP");
    assert_eq!(none["data"], json!([]));
    let none = get(
        &c,
        &format!("/v1/customers/notifications?customer_code={short}"),
    );
    assert_eq!(none["data"], json!([]), "the short gained");
    let r = c.send("GET", "/v1/customers/notifications?type=margin_call", None);
    assert_eq!(
        (r.status, r.json()["code"].clone()),
        (400, json!("VALIDATION_ERROR"))
    );
    // A recovery and the same fall again repeat nothing.
    set_price(&server, "55000");
    advance(&server, 60);
    set_price(&server, "45000");
    advance(&server, 60);
    let page = get(
        &c,
        &format!("/v1/customers/notifications?customer_code={long}"),
    );
    assert_eq!(page["data"].as_array().unwrap().len(), 1);
    let summary = get(&c, &format!("/v1/customers/{long}/account-summary"));
    assert_eq!(
        summary["margin_state"], "normal",
        "a 1× long is never called"
    );
}
