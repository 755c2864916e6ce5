//! The living market through the real binary on the manual clock (issue 12): the market
//! maker and the random walk (D1, D10), funding (D7, §2.12, §4.1 rules 1–5) and daily
//! settlement (D6).

use perpsim_tests::{Client, Resp, Server, advance, funded, living, manual};
use serde_json::{Value, json};

const BTC: &str = "BTC-USDC-PERP";

fn get(c: &Client, path: &str) -> Value {
    let r = c.send("GET", path, None);
    assert_eq!(r.status, 200, "{path}: {}", r.text);
    r.json()
}

fn order(c: &Client, code: &str, body: Value) -> Resp {
    c.send("POST", &format!("/v1/customers/{code}/orders"), Some(body))
}

/// D1, D10: the default venue quotes both sides of every instrument, a market order fills
/// against the maker, and the index walks.
#[test]
fn the_market_maker_quotes_every_instrument_and_a_market_order_fills_against_it() {
    let server = living(&["--seed", "11"]);
    let c = server.demo();
    let tickers = get(&c, "/v1/tickers");
    for t in tickers.as_array().unwrap() {
        let (bid, ask): (f64, f64) = (
            t["best_bid"].as_str().unwrap().parse().unwrap(),
            t["best_ask"].as_str().unwrap().parse().unwrap(),
        );
        assert!(bid < ask, "{t}");
    }
    let code = funded(&server, &c, "USDC", "100000");
    let r = order(
        &c,
        &code,
        json!({"symbol": BTC, "reference_id": "m1", "side": "buy", "type": "market", "amount": "0.1"}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.json()["status"], "filled", "{}", r.text);
    let before = get(&c, &format!("/v1/tickers/{BTC}"))["index_price"].clone();
    advance(&server, 600);
    let after = get(&c, &format!("/v1/tickers/{BTC}"))["index_price"].clone();
    assert_ne!(before, after, "ten minutes of the walk move the index");
}

/// A quiet venue where c0 is short and c1 long 0.001 BTC at 60 000.
fn two_positions() -> (Server, Client, String, String) {
    let server = manual();
    let c = server.demo();
    let (short, long) = (
        funded(&server, &c, "USDC", "100000"),
        funded(&server, &c, "USDC", "100000"),
    );
    let r = order(
        &c,
        &short,
        json!({"symbol": BTC, "reference_id": "s", "side": "sell", "type": "limit", "amount": "0.001", "limit_price": "60000"}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let r = order(
        &c,
        &long,
        json!({"symbol": BTC, "reference_id": "b", "side": "buy", "type": "market", "amount": "0.001"}),
    );
    assert_eq!(r.json()["status"], "filled", "{}", r.text);
    (server, c, short, long)
}

fn set_rate(server: &Server, rate: &str) -> Resp {
    server.admin(
        "PUT",
        &format!("/admin/v1/instruments/{BTC}/funding"),
        Some(json!({"preliminary_rate": rate})),
    )
}

/// D3, D7, §2.12: a set rate is the predicted rate; on the hour it settles with exact
/// amounts, longs paying shorts, and is recorded.
#[test]
fn a_funding_hour_with_a_set_rate_pays_exact_amounts_and_is_recorded() {
    let (server, c, short, long) = two_positions();
    let path = format!("/v1/funding_rates/{BTC}");
    c.send("GET", &path, None).assert_error(404, "NOT_FOUND");
    let r = set_rate(&server, "0.000123");
    assert_eq!(r.status, 200, "{}", r.text);
    let latest = get(&c, &path);
    assert_eq!(
        latest["funding_rate"], "0.00012300",
        "no settlement yet: the preliminary rate"
    );
    assert_eq!(
        latest["funding_time"], "2026-01-01T00:00:00.000Z",
        "the interval's start"
    );
    assert_eq!(latest["predicted_rate"], "0.00012300");
    assert_eq!(latest["next_funding_time"], "2026-01-01T01:00:00.000Z");
    let ticker = get(&c, &format!("/v1/tickers/{BTC}"));
    assert_eq!(ticker["predicted_rate"], "0.00012300");
    advance(&server, 3_600);
    let rows = |code: &str| {
        get(
            &c,
            &format!("/v1/customers/transactions?customer_code={code}"),
        )["data"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["type"] == "funding")
            .cloned()
            .collect::<Vec<_>>()
    };
    // 0.001 × 60000 × 0.000123 = 0.00738.
    let (paid, received) = (rows(&long), rows(&short));
    assert_eq!(paid.len(), 1);
    assert_eq!(paid[0]["total_amount"], "0.0073800000");
    assert_eq!(paid[0]["direction"], "debit", "the long pays");
    assert_eq!(received[0]["direction"], "credit", "the short receives");
    assert_eq!(paid[0]["funding_rate"], "0.00012300");
    assert_eq!(paid[0]["symbol"], BTC);
    assert_eq!(
        paid[0]["created_at"], "2026-01-01T01:00:00.000Z",
        "exactly on the hour"
    );
    let latest = get(&c, &path);
    assert_eq!(latest["funding_time"], "2026-01-01T01:00:00.000Z");
    assert_eq!(latest["mark_price"], "60000.0");
    assert_eq!(
        latest["predicted_rate"],
        Value::Null,
        "nothing yet in the new interval"
    );
    let list = get(&c, "/v1/funding_rates");
    assert_eq!(
        list["data"],
        json!([{"symbol": BTC, "funding_rate": "0.00012300", "funding_time": "2026-01-01T01:00:00.000Z", "mark_price": "60000.0"}])
    );
    // A second hour without a rate settles nothing.
    advance(&server, 3_600);
    assert_eq!(rows(&long).len(), 1);
    assert_eq!(
        get(&c, "/v1/funding_rates")["data"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

/// §4.1 rules 1–5 and D8 on the history.
#[test]
fn the_funding_history_keeps_rules_one_to_five() {
    let (server, c, _, _) = two_positions();
    for hour in 0..3 {
        set_rate(&server, &format!("0.000{}", hour + 1));
        advance(&server, 3_600);
    }
    let h1 = 1_767_229_200_000i64; // 01:00
    let page = |q: &str| c.send("GET", &format!("/v1/funding_rates?{q}"), None);
    let all = page("").json();
    assert_eq!(all["data"].as_array().unwrap().len(), 3);
    assert_eq!(all["data"][0]["funding_rate"], "0.00030000", "newest first");
    // The window is [start, end).
    let w = page(&format!("start={h1}&end={}", h1 + 2 * 3_600_000)).json();
    assert_eq!(w["data"].as_array().unwrap().len(), 2);
    // Rule 1: start >= end is an empty page.
    assert_eq!(
        page(&format!("start={h1}&end={h1}")).json()["data"],
        json!([])
    );
    // Rule 2: a negative start or an end past year 9999.
    page("start=-1").assert_error(400, "VALIDATION_ERROR");
    page("end=253402300800000").assert_error(400, "VALIDATION_ERROR");
    // Rule 3: a cursor belongs to its window.
    let first = page(&format!("start={h1}&limit=1")).json();
    let cursor = first["response_metadata"]["end_cursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let next = page(&format!("start={h1}&limit=1&after={cursor}")).json();
    assert_eq!(next["data"].as_array().unwrap().len(), 1);
    page(&format!("start={}&limit=1&after={cursor}", h1 + 1)).assert_error(400, "VALIDATION_ERROR");
    // Rule 5: an unknown symbol; an instrument with no funding data.
    page("symbol=NOPE-USDC-PERP").assert_error(404, "NOT_FOUND");
    c.send("GET", "/v1/funding_rates/ETH-USDC-PERP", None)
        .assert_error(404, "NOT_FOUND");
    assert_eq!(page("symbol=ETH-USDC-PERP").json()["data"], json!([]));
    // The admin API refuses a rate out of range.
    set_rate(&server, "1.5").assert_error(400, "VALIDATION_ERROR");
}

/// D6: at 00:00 UTC the unrealised PnL is booked as settlement with the mark; entry_price
/// becomes the mark, avg_fill_price stays.
#[test]
fn midnight_settlement_books_unrealised_pnl_and_resets_the_entry_price() {
    let (server, c, _, long) = two_positions();
    let r = server.admin(
        "PUT",
        &format!("/admin/v1/instruments/{BTC}/price"),
        Some(json!({"index_price": "61000"})),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    advance(&server, 86_400);
    let rows = get(
        &c,
        &format!("/v1/customers/transactions?customer_code={long}"),
    )["data"]
        .clone();
    let settled: Vec<_> = rows
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["type"] == "settlement")
        .collect();
    assert_eq!(settled.len(), 1);
    assert_eq!(settled[0]["total_amount"], "1.0000000000");
    assert_eq!(settled[0]["mark_price"], "61000.0");
    assert_eq!(settled[0]["created_at"], "2026-01-02T00:00:00.000Z");
    let p = &get(&c, &format!("/v1/customers/{long}/positions"))[0];
    assert_eq!(
        (p["entry_price"].as_str(), p["avg_fill_price"].as_str()),
        (Some("61000.0"), Some("60000.0"))
    );
    assert_eq!(p["unrealised_pnl"], "0.0000000000");
}

/// An amount as integer units of its last decimal (the test's own sums, no floats).
fn units(amount: &Value) -> i64 {
    amount.as_str().unwrap().replace('.', "").parse().unwrap()
}

/// D8, issue 37: the candles of every interval are the fills folded per period, read from the
/// journal's projection while every commit's rows wait in its backlog (`--projection-batch
/// 0`), and read the same after `kill -9` and recovery, which projects again whatever the
/// backlog had not written; the ticker's 24 h volume is the same fills'.
#[test]
fn the_candles_of_every_interval_fold_the_fills_and_read_the_same_after_kill_9() {
    let data = tempfile::tempdir().unwrap();
    let start = perpsim_tests::START;
    let flags = [
        "--clock",
        "manual",
        "--start",
        start,
        "--market-maker",
        "on",
        "--price-feed",
        "random-walk",
        "--seed",
        "5",
        "--projection-batch",
        "0",
    ];
    let mut server = Server::start_in(data.path(), &flags);
    let c = server.demo();
    let code = funded(&server, &c, "USDC", "1000000");
    // A market order 433 s after the one before, twelve times: every one in its own minute.
    const STEP: i64 = 433;
    for round in 0..12 {
        let side = if round % 2 == 0 { "buy" } else { "sell" };
        let body = json!({"symbol": BTC, "reference_id": format!("m{round}"), "side": side,
                          "type": "market", "amount": "0.0100"});
        let r = order(&c, &code, body);
        assert_eq!(r.status, 201, "{}", r.text);
        advance(&server, STEP);
    }
    let intervals = [
        ("1m", 60),
        ("5m", 300),
        ("15m", 900),
        ("1h", 3_600),
        ("4h", 14_400),
    ];
    let read = |c: &Client| -> Vec<Value> {
        let all = intervals.iter().chain(&[("1d", 86_400)]);
        let ohlc = |(name, _): &(&str, i64)| {
            get(
                c,
                &format!("/v1/ohlc?symbol={BTC}&interval={name}&from={start}"),
            )
        };
        all.map(ohlc).collect()
    };
    let before = read(&c);
    for (candles, (name, seconds)) in before.iter().zip(intervals) {
        let candles = candles.as_array().unwrap();
        let mut periods: Vec<i64> = (0..12).map(|r| r * STEP / seconds).collect();
        periods.dedup();
        assert_eq!(candles.len(), periods.len(), "{name}: {candles:?}");
        let volume: i64 = candles.iter().map(|k| units(&k["volume"])).sum();
        assert_eq!(volume, 1_200, "{name}: twelve orders of 0.0100");
        for k in candles {
            let (high, low) = (units(&k["high"]), units(&k["low"]));
            assert!(low <= units(&k["open"]).min(units(&k["close"])), "{k}");
            assert!(high >= units(&k["open"]).max(units(&k["close"])), "{k}");
        }
    }
    let ticker = get(&c, &format!("/v1/tickers/{BTC}"));
    assert_eq!(units(&ticker["volume_24h"]), 1_200, "{ticker}");

    server.kill9();
    let server = Server::start_in(data.path(), &flags);
    let c = server.demo();
    assert_eq!(read(&c), before, "the candles read the same after kill -9");
    assert_eq!(get(&c, &format!("/v1/tickers/{BTC}")), ticker);
}
