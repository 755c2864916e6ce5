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

/// Places an order for `code`, which must be accepted.
fn place(c: &Client, code: &str, body: Value) {
    let r = c.send("POST", &format!("/v1/customers/{code}/orders"), Some(body));
    assert_eq!(r.status, 201, "{}", r.text);
}

/// `seller` rests a sell of `amount` BTC at `price` and `buyer` takes it at market.
fn cross(c: &Client, (seller, buyer): (&str, &str), amount: &str, price: &str, reference: &str) {
    place(
        c,
        seller,
        json!({"symbol": BTC, "reference_id": reference, "side": "sell", "type": "limit", "amount": amount, "limit_price": price}),
    );
    place(
        c,
        buyer,
        json!({"symbol": BTC, "reference_id": reference, "side": "buy", "type": "market", "amount": amount}),
    );
}

/// Two funded customers; the second buys 0.5 BTC from the first at 60 000: (short, long).
fn long_half_a_btc_at_60000(server: &Server, c: &Client) -> (String, String) {
    let (short, long) = (
        funded(server, c, "USDC", "100000"),
        funded(server, c, "USDC", "100000"),
    );
    cross(c, (&short, &long), "0.5", "60000", "t1");
    (short, long)
}

/// §2.2, §3.3: a 25 % fall of a long is one notice at 20 with exact values; the list
/// filters by customer, type, symbol and creation time, and refuses an unknown type.
#[test]
fn a_fall_of_a_quarter_is_one_notice_at_twenty_on_the_notifications_list() {
    let server = manual();
    let c = server.demo();
    let (short, long) = long_half_a_btc_at_60000(&server, &c);
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

/// A customer at leverage 2 with 320 USDC, long 0.01 BTC bought with `order`, and a buy
/// resting far below.
fn leveraged_long(server: &Server, c: &Client, order: Value) -> String {
    let long = funded(server, c, "USDC", "320");
    let r = c.send(
        "PUT",
        &format!("/v1/customers/{long}/margin-profile"),
        Some(json!({"leverage": 2})),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    place(c, &long, order);
    place(
        c,
        &long,
        json!({"symbol": BTC, "reference_id": "rest", "side": "buy", "type": "limit", "amount": "0.0001", "limit_price": "20000"}),
    );
    long
}

fn positions(c: &Client, code: &str) -> Vec<Value> {
    get(c, &format!("/v1/customers/{code}/positions"))
        .as_array()
        .unwrap()
        .clone()
}

/// Newest first.
fn transactions(c: &Client, code: &str) -> Vec<Value> {
    get(
        c,
        &format!("/v1/customers/transactions?customer_code={code}"),
    )["data"]
        .as_array()
        .unwrap()
        .clone()
}

/// README's tour (D10, §3.3, §6 rules 4–5), with the market maker and the walk on: at
/// 39 000 a margin call keeps the position and the order; a minute later one depreciation
/// notice at 30 %; at 34 000 the liquidation cancels the order and closes the position by a
/// forced fill at the maker's bids (type `liquidation`, reference_id null).
#[test]
fn a_margin_call_keeps_positions_and_a_liquidation_sells_into_the_book() {
    let server = Server::start(&[
        "--clock",
        "manual",
        "--start",
        perpsim_tests::START,
        "--market-maker",
        "on",
        "--price-feed",
        "random-walk",
    ]);
    let c = server.demo();
    let market = json!({"symbol": BTC, "reference_id": "lev", "side": "buy", "type": "market", "amount": "0.01"});
    let long = leveraged_long(&server, &c, market);
    set_price(&server, "39000");
    let summary = get(&c, &format!("/v1/customers/{long}/account-summary"));
    assert_eq!(summary["margin_state"], "margin_call", "{summary}");
    assert_eq!(
        positions(&c, &long).len(),
        1,
        "a margin call closes nothing"
    );
    let open = get(&c, &format!("/v1/customers/{long}/orders"));
    assert_eq!(open["data"][0]["reference_id"], "rest");

    advance(&server, 60);
    let notices = get(
        &c,
        &format!("/v1/customers/notifications?customer_code={long}"),
    );
    let data = notices["data"].as_array().unwrap();
    assert_eq!(data.len(), 1, "{notices}");
    assert_eq!(
        data[0]["data"]["threshold_pct"], 30,
        "35 % down: only the highest"
    );

    set_price(&server, "34000");
    assert_eq!(positions(&c, &long), Vec::<Value>::new(), "closed");
    let rest = get(&c, &format!("/v1/customers/{long}/orders/rest"));
    assert_eq!(
        (&rest["status"], &rest["reason"]),
        (&json!("canceled"), &json!("LIQUIDATION"))
    );
    let rows = transactions(&c, &long);
    let forced = rows
        .iter()
        .find(|t| t["type"] == "liquidation")
        .expect("a liquidation row");
    assert_eq!(forced["reference_id"], Value::Null, "{forced}");
    let trades = get(&c, &format!("/v1/trades?customer_code={long}&sort=asc"));
    let sold = trades["data"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (&sold["type"], &sold["side"]),
        (&json!("liquidation"), &json!("sell")),
        "{sold}"
    );
    let price: f64 = sold["price"].as_str().unwrap().parse().unwrap();
    assert!(
        (33_000.0..34_000.0).contains(&price),
        "at the maker's bids: {price}"
    );
    let summary = get(&c, &format!("/v1/customers/{long}/account-summary"));
    assert_eq!(summary["margin_state"], "normal", "flat again");
}

/// D10: with no bids the position is closed at the mark against the most profitable
/// opposite position (auto-deleveraging), and the balance it leaves below zero is covered by
/// insurance: a `liquidation` row with no trade, the customer back at zero.
#[test]
fn without_depth_the_most_profitable_short_is_deleveraged_and_insurance_covers_the_loss() {
    let server = manual();
    let c = server.demo();
    let (near, far, buyer) = (
        funded(&server, &c, "USDC", "100000"),
        funded(&server, &c, "USDC", "100000"),
        funded(&server, &c, "USDC", "100000"),
    );
    // `far` sold at 62 000, `near` at 60 000: at any lower price `far` has the larger profit.
    cross(&c, (&far, &buyer), "0.01", "62000", "f");
    place(
        &c,
        &near,
        json!({"symbol": BTC, "reference_id": "n", "side": "sell", "type": "limit", "amount": "0.01", "limit_price": "60000"}),
    );
    let market = json!({"symbol": BTC, "reference_id": "lev", "side": "buy", "type": "market", "amount": "0.01"});
    let long = leveraged_long(&server, &c, market);
    // (320 − 0.3 fee − 350) / 250 < 0: liquidation, and the close at 25 000 loses 350.
    set_price(&server, "25000");
    assert_eq!(positions(&c, &long), Vec::<Value>::new());
    assert_eq!(
        positions(&c, &far),
        Vec::<Value>::new(),
        "the best-ranked short closed"
    );
    assert_eq!(positions(&c, &near).len(), 1, "the other short kept");
    let trades = get(&c, &format!("/v1/trades?customer_code={far}&sort=asc"));
    let adl = trades["data"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (&adl["type"], &adl["price"]),
        (&json!("auto_deleveraging"), &json!("25000.0")),
        "{adl}"
    );
    let rows = transactions(&c, &long);
    let cover = &rows[0];
    assert_eq!(
        (&cover["type"], &cover["amount"]),
        (&json!("liquidation"), &json!("30.3000000000")),
        "{cover}"
    );
    assert_eq!(cover["trade_code"], Value::Null);
    let balances = get(&c, &format!("/v1/customers/{long}/balances?asset=USDC"));
    let usdc = balances
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["asset"] == "USDC")
        .unwrap()
        .clone();
    assert_eq!(usdc["total"], "0.0000000000", "{usdc}");
    // The venue's loss is on its insurance account, in the admin API.
    let r = server.admin("GET", "/admin/v1/venue/accounts", None);
    assert_eq!(r.status, 200, "{}", r.text);
    let accounts = r.json();
    let insurance = accounts
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["account"] == "insurance" && a["asset"] == "USDC")
        .unwrap()
        .clone();
    assert_eq!(insurance["total"], "9999969.7000000000", "{accounts}");
}

/// §4.2: a leverage change that would put an open position into margin call is refused
/// with the figures; one that would not is accepted.
#[test]
fn a_leverage_change_into_margin_call_is_refused_with_the_ratio() {
    let server = manual();
    let c = server.demo();
    let seller = funded(&server, &c, "USDC", "100000");
    let r = c.send(
        "POST",
        &format!("/v1/customers/{seller}/orders"),
        Some(json!({"symbol": BTC, "reference_id": "s", "side": "sell", "type": "limit", "amount": "0.01", "limit_price": "60000"})),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let market = json!({"symbol": BTC, "reference_id": "lev", "side": "buy", "type": "market", "amount": "0.01"});
    let long = leveraged_long(&server, &c, market);
    // At 55 000: (320 − 0.3 − 50) / 550 = 0.4903…, under leverage 1's 0.50, over 2's 0.30.
    set_price(&server, "55000");
    let path = format!("/v1/customers/{long}/margin-profile");
    let r = c.send("PUT", &path, Some(json!({"leverage": 1})));
    assert_eq!(
        (r.status, r.json()["code"].clone()),
        (400, json!("VALIDATION_ERROR")),
        "{}",
        r.text
    );
    assert!(r.text.contains("0.4903"), "{}", r.text);
    let r = c.send("PUT", &path, Some(json!({"leverage": 2})));
    assert_eq!(r.status, 200, "{}", r.text);
    let summary = get(&c, &format!("/v1/customers/{long}/account-summary"));
    assert_eq!(summary["margin_state"], "normal");
}

fn notices_of(c: &Client, code: &str) -> Vec<Value> {
    get(
        c,
        &format!("/v1/customers/notifications?customer_code={code}"),
    )["data"]
        .as_array()
        .unwrap()
        .clone()
}

/// §3.3, D9: a short depreciates on a rise (20 % up: a notice at 20), and an increase starts
/// a new baseline at the new average (66 000), so a rise past 20 % of it notices 20 again.
#[test]
fn a_short_is_noticed_on_a_rise_and_an_increase_starts_a_new_baseline() {
    let server = manual();
    let c = server.demo();
    let (short, buyer) = (
        funded(&server, &c, "USDC", "1000000"),
        funded(&server, &c, "USDC", "1000000"),
    );
    let trade = |price: &str, reference: &str| cross(&c, (&short, &buyer), "0.5", price, reference);
    trade("60000", "t1");
    set_price(&server, "72000");
    advance(&server, 60);
    let notices = notices_of(&c, &short);
    assert_eq!(notices.len(), 1);
    let d = &notices[0]["data"];
    assert_eq!(
        (&d["side"], &d["threshold_pct"]),
        (&json!("short"), &json!(20))
    );
    assert_eq!(d["depreciation_pct"], "20.0000");
    assert!(notices_of(&c, &buyer).is_empty(), "the long gained");

    trade("72000", "t2"); // short 1.0 at an average of 66 000: a new baseline
    advance(&server, 60);
    assert_eq!(
        notices_of(&c, &short).len(),
        1,
        "9.09 % above the new average: nothing"
    );
    set_price(&server, "80000");
    advance(&server, 60);
    let notices = notices_of(&c, &short);
    assert_eq!(notices.len(), 2, "20 % again, on the new baseline");
    let d = &notices[0]["data"]; // newest first
    assert_eq!(
        (&d["avg_fill_price"], &d["amount"]),
        (&json!("66000.0"), &json!("1.0000"))
    );
    assert_eq!(
        (&d["threshold_pct"], &d["depreciation_pct"]),
        (&json!(20), &json!("21.2121"))
    );
}

/// Issue 28 item 6, §2.4 and §2.6: a position's record and its account summary carry the mark
/// and what follows from it, so a new mark — set by the admin, or a step of the random walk
/// during an advance — moves their `updated_at` to the instant of that mark.
#[test]
fn updated_at_moves_with_every_mark_that_moves_the_values() {
    let server = manual();
    let c = server.demo();
    let (_short, long) = long_half_a_btc_at_60000(&server, &c);
    let now = |server: &Server| server.admin("GET", "/admin/v1/clock", None).json()["now"].clone();
    let seen = |c: &Client| seen_for(c, &long);
    let (summary, position) = seen(&c);
    assert_eq!(summary["updated_at"], now(&server), "the fill's instant");
    advance(&server, 60);
    let (same, unmoved) = seen(&c);
    assert_eq!(
        same, summary,
        "nothing moved: the same record, the same instant"
    );
    assert_eq!(unmoved, position);
    set_price(&server, "61000");
    let (summary, position) = seen(&c);
    assert_ne!(summary["unrealised_pnl"], same["unrealised_pnl"]);
    assert_eq!(summary["updated_at"], now(&server));
    assert_eq!(position["updated_at"], now(&server));
    assert_ne!(position["unrealised_pnl"], unmoved["unrealised_pnl"]);
    drop(server);
    // The living market: an advance walks the marks; the records follow them.
    let server = perpsim_tests::living(&[]);
    let c = server.demo();
    let long = funded(&server, &c, "USDC", "100000");
    place(
        &c,
        &long,
        json!({"symbol": BTC, "reference_id": "m1", "side": "buy", "type": "market", "amount": "0.01"}),
    );
    let (before, _) = seen_for(&c, &long);
    advance(&server, 60);
    let (after, position) = seen_for(&c, &long);
    assert_ne!(
        after["unrealised_pnl"], before["unrealised_pnl"],
        "the walk moved the mark"
    );
    assert_eq!(after["updated_at"], now(&server));
    assert_eq!(position["updated_at"], now(&server));
    // Issue 28 item 7: the maker's account is listed beside the venue's own.
    let venue = server.admin("GET", "/admin/v1/venue/accounts", None).json();
    let names: Vec<&str> = venue
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["account"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "fees",
            "fees",
            "clearing",
            "clearing",
            "insurance",
            "insurance",
            "market_maker",
            "market_maker"
        ]
    );
    let maker: f64 = venue[6]["total"].as_str().unwrap().parse().unwrap();
    assert!(
        maker > 99_000_000.0,
        "the maker's USDC, funded with 100 000 000: {venue}"
    );
}

fn seen_for(c: &Client, code: &str) -> (Value, Value) {
    let summary = get(c, &format!("/v1/customers/{code}/account-summary"));
    let positions = get(c, &format!("/v1/customers/{code}/positions"));
    (summary, positions[0].clone())
}

/// D7, §3.2, §6 (INSUFFICIENT_FUNDS): a withdrawal is held to what leaves the open positions
/// their initial margin at the mark with their unrealised PnL counted, besides the available
/// balance, so a losing account cannot withdraw itself into a margin call; the refusal says
/// how much could go, and that much goes.
#[test]
fn a_withdrawal_that_would_leave_a_losing_position_short_of_initial_margin_is_insufficient_funds() {
    let server = manual();
    let c = server.demo();
    let (short, long) = (
        funded(&server, &c, "USDC", "100000"),
        funded(&server, &c, "USDC", "100000"),
    );
    let r = c.send(
        "PUT",
        &format!("/v1/customers/{long}/margin-profile"),
        Some(json!({"leverage": 2})),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    cross(&c, (&short, &long), "0.5", "60000", "t1");
    set_price(&server, "45000");
    // 99 985 after the 15 taker fee; available 84 985 (15 000 locked at entry). At 45 000 the
    // position needs 11 250 of initial margin and has lost 7 500: 81 235 can go.
    let withdraw = |amount: &str| {
        let body = json!({"asset": "USDC", "amount": amount});
        c.send(
            "POST",
            &format!("/v1/customers/{long}/withdrawals"),
            Some(body),
        )
    };
    let refused = withdraw("81235.0000000001").assert_error(400, "INSUFFICIENT_FUNDS");
    assert!(
        refused.contains("initial margin at the mark price") && refused.contains("at most 81235"),
        "{refused}"
    );
    let r = withdraw("81235");
    assert_eq!(r.status, 201, "{}", r.text);
    advance(&server, 1);
    let summary = get(&c, &format!("/v1/customers/{long}/account-summary"));
    assert_eq!(
        (&summary["margin_state"], &summary["leverage_ratio"]),
        (&json!("normal"), &json!("0.5000")),
        "{summary}"
    );
}
