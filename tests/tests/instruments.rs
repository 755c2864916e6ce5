//! Interface §4.1 instrument filters and D8 defaults, through the real server.

use perpsim_tests::Server;

fn symbols(server: &Server, query: &str) -> Vec<String> {
    let r = server
        .demo()
        .send("GET", &format!("/v1/instruments{query}"), None);
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["symbol"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn lists_the_four_default_instruments_with_every_field_of_d8() {
    let server = Server::start(&[]);
    assert_eq!(
        symbols(&server, ""),
        [
            "BTC-USDC-PERP",
            "BTC-USDT-PERP",
            "ETH-USDC-PERP",
            "SOL-USDC-PERP"
        ]
    );
    let r = server
        .demo()
        .send("GET", "/v1/instruments?symbol=SOL-USDC-PERP", None)
        .json();
    let sol = &r[0];
    let expected = serde_json::json!({
        "symbol": "SOL-USDC-PERP", "underlying": "SOL", "quote_currency": "USDC",
        "settlement_currency": "USDC", "type": "perpetual", "status": "active",
        "funding_interval": "1h", "lot_size": "0.01", "tick_size": "0.001",
        "init_margin_req": "0.50", "maint_margin_req": "0.30", "max_leverage": ""
    });
    assert_eq!(sol, &expected);
}

#[test]
fn filters_are_pipe_separated_wildcards_case_insensitive_and_anchored() {
    let server = Server::start(&[]);
    assert_eq!(symbols(&server, "?symbol=btc-usdc-perp"), ["BTC-USDC-PERP"]);
    assert_eq!(
        symbols(&server, "?symbol=BTC"),
        Vec::<String>::new(),
        "anchored"
    );
    assert_eq!(
        symbols(&server, "?symbol=BTC-*"),
        ["BTC-USDC-PERP", "BTC-USDT-PERP"]
    );
    assert_eq!(
        symbols(&server, "?underlying=eth|sol"),
        ["ETH-USDC-PERP", "SOL-USDC-PERP"]
    );
    assert_eq!(symbols(&server, "?quote_currency=*T"), ["BTC-USDT-PERP"]);
    assert_eq!(
        symbols(&server, "?symbol=*USDC*&underlying=B*"),
        ["BTC-USDC-PERP"]
    );
    assert_eq!(symbols(&server, "?symbol=*"), symbols(&server, ""));
}

#[test]
fn the_status_filter_follows_admin_status_changes_and_refuses_unknown_values() {
    let server = Server::start(&[]);
    let r = server.admin(
        "PUT",
        "/admin/v1/instruments/ETH-USDC-PERP/status",
        Some(serde_json::json!({"status": "trade_halt"})),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(symbols(&server, "?status=trade_halt"), ["ETH-USDC-PERP"]);
    assert_eq!(symbols(&server, "?status=active").len(), 3);
    server
        .demo()
        .send("GET", "/v1/instruments?status=settled", None)
        .assert_error(400, "VALIDATION_ERROR");
    server
        .demo()
        .send("GET", "/v1/instruments?symbol=A||B", None)
        .assert_error(400, "VALIDATION_ERROR");
}
