//! Scenario replay (D11, issue 26), black-box through the `perpsim` binary: every field and
//! event kind applied, every error class located, byte-identical runs, a report that
//! reconciles with its ledger, Monte-Carlo in processes and in shards, `verify`, a recorded
//! journal, and the worked examples' checked-in hashes.

use std::collections::BTreeMap;
use std::path::Path;

use perpsim_tests::replay::{csv_rows, example, files, replay_ok, report, run, run_example};
use perpsim_tests::{Server, perpsim};
use rust_decimal::Decimal;
use serde_json::Value;

fn dec(v: &str) -> Decimal {
    v.parse()
        .unwrap_or_else(|_| panic!("{v:?} is not a decimal"))
}

fn customer<'r>(report: &'r Value, name: &str) -> &'r Value {
    report["customers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap()
}

/// D11: every scenario field and every event kind, each observed in the outputs.
#[test]
fn every_field_and_event_kind_is_applied() {
    let (_tmp, out) = run_example("every-kind/every-kind.yaml");
    let r = report(&out);
    let sol = r["instruments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["symbol"] == "SOL-USDC-PERP")
        .unwrap();
    let at = |t: &str| {
        sol["path"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p[0] == t)
            .unwrap_or_else(|| panic!("no sample at {t}"))
            .clone()
    };
    // instruments override start_price; price, prices (CSV with and without a mark).
    assert_eq!(
        at("2026-02-01T00:00:00.000Z"),
        serde_json::json!(["2026-02-01T00:00:00.000Z", "200", "200"])
    );
    assert_eq!(
        at("2026-02-01T00:05:00.000Z"),
        serde_json::json!(["2026-02-01T00:05:00.000Z", "210", "211"])
    );
    assert_eq!(
        at("2026-02-01T00:10:00.000Z"),
        serde_json::json!(["2026-02-01T00:10:00.000Z", "220", "220"])
    );
    assert_eq!(
        at("2026-02-01T00:15:00.000Z"),
        serde_json::json!(["2026-02-01T00:15:00.000Z", "230", "231"])
    );
    assert_eq!(r["scenario"]["sample_every_ms"], 300_000);
    // market: the maker's funding and the insurance fund.
    let maker_usdc = r["market_maker"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["asset"] == "USDC")
        .unwrap();
    assert_eq!(maker_usdc["deposits"], "5000000");
    let venue_usdc = r["venue"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["asset"] == "USDC")
        .unwrap();
    assert_eq!(venue_usdc["insurance"], "123456");
    let trades = csv_rows(&out.join("trades.csv"));
    let of = |who: &str, reference: &str| {
        trades
            .iter()
            .filter(|t| t["customer"] == who && t["reference_id"] == reference)
            .cloned()
            .collect::<Vec<_>>()
    };
    // leverage 2: 300 × 190 needs 28 500 at 50 % initial margin (57 000 at leverage 1).
    let refusals = r["refusals"].as_array().unwrap();
    assert!(
        refusals
            .iter()
            .all(|x| x["customer"] != "ann" || x["event"] == 10),
        "{refusals:?}"
    );
    // fees: ann's taker fee is 10 bps of each fill's notional.
    let a1 = of("ann", "a1");
    // The maker's overrides: levels on a 0.2 grid (10 bps of 200, tick 0.01), the best ask
    // the first past a 5 bps half spread, 10 a level: ann's 10 fill at one price.
    assert_eq!(a1.len(), 1, "{a1:?}");
    assert_eq!(
        (a1[0]["price"].as_str(), a1[0]["amount"].as_str()),
        ("200.2", "10")
    );
    // lot_size 0.1: 0.05 is off the lot grid (SOL's default lot, 0.01, would take it).
    let lot = refusals
        .iter()
        .find(|x| x["event"] == 16)
        .expect("the order off the lot grid is refused");
    assert_eq!(lot["code"], "ORDER_REJECTED", "{lot}");
    for t in &a1 {
        assert_eq!(
            dec(&t["fee"]),
            (dec(&t["price"]) * dec(&t["amount"]) * dec("0.001")).normalize(),
            "{t:?}"
        );
    }
    // amend: ben's bid moved above the ask and filled; cancel: b2 was open and cancelled.
    assert!(!of("ben", "b1").is_empty(), "the amended order filled");
    assert!(of("ben", "b2").is_empty());
    assert!(
        refusals.iter().all(|x| x["event"] != 5),
        "the cancel of an open order is accepted"
    );
    // §3.1: a second cancel names the status of the order it ended (409); an amend of a
    // reference never used is 404 — as the API answers, though the engine keeps nothing of
    // ended orders' references (issue 37).
    let again = |event: u64| refusals.iter().find(|x| x["event"] == event).unwrap();
    assert_eq!(
        (again(17)["code"].as_str(), again(17)["message"].as_str()),
        (
            Some("ORDER_NOT_CANCELLABLE"),
            Some("order b2 is canceled and cannot be cancelled")
        )
    );
    assert_eq!(
        (again(18)["code"].as_str(), again(18)["message"].as_str()),
        (Some("NOT_FOUND"), Some("order never does not exist"))
    );
    // status: trade_halt refuses ann's order (event 10); active again lets a3 trade.
    let halted = refusals
        .iter()
        .find(|x| x["event"] == 10)
        .expect("the order in trade_halt is refused");
    assert_eq!(halted["code"], "ORDER_REJECTED", "{halted}");
    assert!(!of("ann", "a3").is_empty(), "trading resumed");
    // funding: the hour after the preliminary rate pays at that rate.
    let ledger = csv_rows(&out.join("ledger.csv"));
    assert!(ledger.iter().any(|m| m["type"] == "funding"
        && m["customer"] == "ann"
        && dec(&m["funding_rate"]) == dec("0.002")));
    // deposit and withdrawal, completed.
    assert!(ledger.iter().any(|m| m["customer"] == "ben"
        && m["type"] == "deposit"
        && m["amount"] == "500"
        && m["status"] == "completed"));
    assert!(ledger.iter().any(|m| m["customer"] == "ben"
        && m["type"] == "withdrawal"
        && m["amount"] == "-700"
        && m["status"] == "completed"));
    let ann = customer(&r, "ann");
    assert_eq!(
        ann["currencies"].as_array().unwrap().len(),
        2,
        "deposits in two assets: {ann}"
    );
}

/// D11: the report's money is the ledger's — each customer's completed rows in an asset sum
/// to the balance the report gives, and each part to its own column.
#[test]
fn the_report_reconciles_with_the_ledger_csv() {
    let (_tmp, out) = run_example("flash-crash.yaml");
    let r = report(&out);
    let ledger = csv_rows(&out.join("ledger.csv"));
    let mut sums: BTreeMap<(String, String, &str), Decimal> = BTreeMap::new();
    for m in ledger.iter().filter(|m| m["status"] == "completed") {
        let key = |part| (m["customer"].clone(), m["asset"].clone(), part);
        *sums.entry(key("balance")).or_default() += dec(&m["amount"]);
        match m["type"].as_str() {
            "deposit" => *sums.entry(key("deposits")).or_default() += dec(&m["amount"]),
            "funding" => *sums.entry(key("funding")).or_default() += dec(&m["amount"]),
            "settlement" => *sums.entry(key("settlement")).or_default() += dec(&m["amount"]),
            _ if !m["trade_code"].is_empty() => {
                *sums.entry(key("fees")).or_default() += dec(&m["fee"]);
                *sums.entry(key("realised_pnl")).or_default() += dec(&m["realised_pnl"]);
            }
            "liquidation" => *sums.entry(key("insurance")).or_default() += dec(&m["amount"]),
            _ => {}
        }
    }
    let mut checked = 0;
    for c in r["customers"].as_array().unwrap() {
        for cur in c["currencies"].as_array().unwrap() {
            let name = c["name"].as_str().unwrap().to_owned();
            let asset = cur["asset"].as_str().unwrap().to_owned();
            for part in [
                "balance",
                "deposits",
                "funding",
                "settlement",
                "fees",
                "realised_pnl",
                "insurance",
            ] {
                let from_rows = sums
                    .get(&(name.clone(), asset.clone(), part))
                    .copied()
                    .unwrap_or_default();
                assert_eq!(
                    dec(cur[part].as_str().unwrap()),
                    from_rows,
                    "{name} {asset} {part}"
                );
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 4 * 7);
    let alice = &customer(&r, "alice")["currencies"][0];
    assert!(
        dec(alice["insurance"].as_str().unwrap()) > Decimal::ZERO,
        "the crash leaves alice covered by insurance"
    );
    assert!(
        customer(&r, "alice")["auto_deleveraging_fills"]
            .as_u64()
            .unwrap()
            > 0
    );
}

/// D11: same scenario, same build → same files, byte for byte; the YAML and JSON forms of
/// one scenario give the same hash.
#[test]
fn a_rerun_writes_the_same_bytes_and_json_equals_yaml() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b, c) = (
        tmp.path().join("a"),
        tmp.path().join("b"),
        tmp.path().join("c"),
    );
    let scenario = example("flash-crash.yaml");
    let hash = run(&scenario, &a, &[]);
    assert_eq!(run(&scenario, &b, &[]), hash);
    assert_eq!(files(&a), files(&b));
    assert_eq!(
        files(&a).len(),
        7,
        "journal, report.json, two CSV, report.html, manifest, DONE"
    );
    let yaml: Value = serde_saphyr::from_str(&std::fs::read_to_string(&scenario).unwrap()).unwrap();
    let json = tmp.path().join("flash-crash.json");
    std::fs::write(&json, serde_json::to_string_pretty(&yaml).unwrap()).unwrap();
    std::fs::copy(
        example("flash-crash.csv"),
        tmp.path().join("flash-crash.csv"),
    )
    .unwrap();
    assert_eq!(run(&json, &c, &[]), hash);
    let html = String::from_utf8(files(&a)["report.html"].clone()).unwrap();
    assert!(
        html.contains("<svg") && !html.contains("src=\"http") && !html.contains("<script"),
        "self-contained"
    );
    // docs/replay.md's picture is this report's price chart.
    let picture = std::fs::read_to_string(example("flash-crash-price.svg")).unwrap();
    assert!(
        html.contains(picture.trim_end()),
        "tests/scenarios/flash-crash-price.svg is the report's chart"
    );
}

/// D11: the manifest's hash of each file is the SHA-256 of the file as it lies on disk
/// (the run hashes each but the journal as it writes it, not reading it back), and it lists
/// every file.
#[test]
fn the_manifest_hashes_every_file_as_it_lies_on_disk() {
    use sha2::{Digest, Sha256};
    let (_tmp, out) = run_example("flash-crash.yaml");
    let written = files(&out);
    let manifest: Value = serde_json::from_slice(&written["manifest.json"]).unwrap();
    let hashes = manifest["files"].as_object().unwrap();
    let names: Vec<_> = hashes.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "journal.redb",
            "ledger.csv",
            "report.html",
            "report.json",
            "trades.csv"
        ]
    );
    for (name, hash) in hashes {
        let digest: String = Sha256::digest(&written[name])
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(hash.as_str(), Some(digest.as_str()), "{name}");
    }
    assert!(
        csv_rows(&out.join("ledger.csv")).len() > 10,
        "the hashed files hold the run"
    );
}

/// D11: each class of bad input names its file, line and column, exits non-zero and writes
/// nothing; `scenario check` refuses each with the same words (exit 2).
#[test]
fn bad_input_is_located_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let head = "name: x\nseed: 1\nstart: 2026-01-01T00:00:00Z\nend: +1h\ncustomers:\n  - {name: a, deposits: {USDC: \"100\"}}\nevents:\n";
    std::fs::write(
        tmp.path().join("bad.csv"),
        "time,index_price\n+1s,100\n+2s,abc\n",
    )
    .unwrap();
    std::fs::write(
        tmp.path().join("misspelt.csv"),
        "time,index_prce,mark_price\n+1s,100,\n",
    )
    .unwrap();
    let order =
        "order: {symbol: BTC-USDC-PERP, side: buy, type: market, reference_id: x, amount: \"0.01\"";
    let cases: Vec<(String, &str, &str)> = vec![
        (format!("  - {{at: +1m, customer: a, {order}}}, foo: 1}}"), "s.yaml:8:", "unknown field `foo`"),
        ("  - {at: 90s, customer: a, cancel: x}".into(), "s.yaml:8:10:", "expected an offset such as +90s"),
        ("  - {at: +2h, customer: a, cancel: x}".into(), "s.yaml:8:10:", "outside the scenario"),
        ("  - {at: +1m, customer: zed, cancel: x}".into(), "s.yaml:8:25:", "unknown customer \"zed\""),
        ("  - {at: +1m, customer: a, order: {symbol: NOPE, side: buy, type: market, reference_id: x, amount: \"1\"}}".into(), "s.yaml:8:35:", "unknown symbol \"NOPE\""),
        (format!("  - {{at: +1m, customer: a, {order}, bar: 1}}}}"), "s.yaml:8:117:", "order: unknown field bar; the body takes amount, cash_amount,"),
        ("  - {at: +1m, customer: a, order: {symbol: BTC-USDC-PERP, side: buy, type: market, refrence_id: x, amount: \"1\"}}".into(), "s.yaml:8:84:", "order: unknown field refrence_id; the body takes"),
        ("  - {at: +1m, customer: a, order: {symbol: BTC-USDC-PERP, side: Sell, type: market, reference_id: x, amount: \"1\"}}".into(), "s.yaml:8:59:", "order: side must be one of buy, sell; got \"Sell\""),
        ("  - at: +1m\n    customer: a\n    order:\n      symbol: BTC-USDC-PERP\n      type: market\n      reference_id: x\n      amount: \"1\"\n      side: Sell".into(), "s.yaml:15:7:", "order: side must be one of buy, sell"),
        ("  - {at: +1m, customer: a, order: {symbol: BTC-USDC-PERP, side: buy, type: market, reference_id: x, amount: 0.01}}".into(), "s.yaml:8:101:", "amount must be a JSON string holding a decimal"),
        ("  - {at: +1m, symbol: BTC-USDC-PERP, status: {status: halted}}".into(), "s.yaml:8:47:", "status: status must be one of active, post_only, trade_halt"),
        ("  - {at: +1m, symbol: BTC-USDC-PERP, prices: bad.csv}".into(), "bad.csv:3:5:", "index_price: expected a positive decimal"),
        ("  - {at: +1m, symbol: BTC-USDC-PERP, prices: none.csv}".into(), "s.yaml:8:46:", "cannot read"),
        ("  - {at: +1m, symbol: BTC-USDC-PERP, prices: misspelt.csv}".into(), "misspelt.csv:1:6:", "column 2 of the header is not one of time, index_price, mark_price (did you mean index_price?)"),
        ("  - {at: +1m, customer: a, cancel: x, deposit: {asset: USDC, amount: \"1\"}}".into(), "s.yaml:8:5:", "one action"),
        ("  - {at: +1m, symbol: BTC-USDC-PERP, customer: a, price: {index_price: \"1\"}}".into(), "s.yaml:8:5:", "takes no `customer`"),
        ("  - {at: +1m, customer: a, withdrawal: {asset: XYZ, amount: \"1\"}}".into(), "s.yaml:8:41:", "asset must be one of USDC, USDT"),
        ("  - [not, a, map]".into(), "s.yaml:8:5:", "expected"),
    ];
    for (event, at, message) in cases {
        let file = tmp.path().join("s.yaml");
        std::fs::write(&file, format!("{head}{event}\n")).unwrap();
        let out = tmp.path().join("out");
        let (code, stdout, stderr) = perpsim(&[
            "replay",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_ne!(code, 0, "{event}: {stdout}");
        assert!(
            stderr.contains(at) && stderr.contains(message),
            "{event}: expected {at} … {message}, got {stderr}"
        );
        assert!(!out.exists(), "{event}: nothing is written");
        let (code, _, checked) = perpsim(&["scenario", "check", file.to_str().unwrap()]);
        assert_eq!((code, checked.as_str()), (2, stderr.as_str()), "{event}");
    }
}

/// D11: `scenario check` reads a scenario as a run does and runs nothing: the worked flash
/// crash's name, seed, span, instrument, customers and events as the file has them, a step
/// for each event but the price file's, which makes one a row, the file it names, the read's
/// time; nothing is written beside them, and they are left as they were.
#[test]
fn check_says_what_a_scenario_holds_and_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, stderr) = perpsim(&[
        "scenario",
        "examples",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let before = files(dir.path());
    let file = dir.path().join("flash-crash.yaml");
    let (code, stdout, stderr) = perpsim(&["scenario", "check", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let held: Value = serde_json::from_str(&stdout).unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    let events = text.lines().filter(|l| l.starts_with("  - {at: ")).count();
    let rows = csv_rows(&dir.path().join("flash-crash.csv")).len();
    assert_eq!(events, 10, "the example as written");
    assert_eq!(held["scenario"], "flash crash");
    assert_eq!(held["seed"], 7);
    assert_eq!(held["start"], "2026-01-01T00:00:00.000Z");
    assert_eq!(held["end"], "2026-01-01T04:00:00.000Z");
    assert_eq!(held["instruments"][0], "BTC-USDC-PERP");
    assert_eq!(held["customers"], 4);
    assert_eq!(held["events"], events);
    assert_eq!(held["steps"], events - 1 + rows, "{held}");
    let inputs = held["inputs"].as_array().unwrap();
    assert_eq!(inputs.len(), 1, "{held}");
    assert!(
        inputs[0].as_str().unwrap().ends_with("flash-crash.csv"),
        "{held}"
    );
    assert!(held["seconds"]["read"].as_f64().unwrap() > 0.0, "{held}");
    assert!(files(dir.path()) == before, "nothing is written or changed");
}

/// D11 (issue 39 item 2): refused requests are outcomes, not errors: the run prints how
/// many events were applied and refused, with the margin calls, liquidations, ADL fills and
/// insurance drawn (report.json holds the same); `--strict` exits 3 when any request was
/// refused, having written the whole run, and 0 when none was.
#[test]
fn a_run_says_what_was_refused_and_strict_exits_non_zero() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = example("flash-crash.yaml");
    let out = tmp.path().join("strict");
    let args = [
        "replay",
        scenario.to_str().unwrap(),
        "--quiet",
        "--strict",
        "--out",
    ];
    let (code, stdout, stderr) = perpsim(&[&args[..], &[out.to_str().unwrap()]].concat());
    assert_eq!(code, 3, "{stdout}{stderr}");
    assert!(
        stderr.contains("10 events: 9 applied, 1 refused (report.json lists each refusal)")
            && stderr.contains("1 liquidation, 1 auto-deleveraging fill; insurance drawn: "),
        "{stderr}"
    );
    let printed: Value = serde_json::from_str(stdout.trim()).unwrap();
    let written = report(&out);
    assert_eq!(printed["outcomes"], written["outcomes"]);
    let outcomes = &written["outcomes"];
    assert_eq!(outcomes["refused"], 1);
    assert_eq!(written["refusals"].as_array().unwrap().len(), 1);
    assert_eq!(outcomes["liquidations"], 1);
    assert_eq!(outcomes["auto_deleveraging_fills"], 1);
    // What insurance drew is what the customers' ledgers were covered with.
    let covered: Decimal = written["customers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["currencies"].as_array().unwrap())
        .filter(|c| c["asset"] == "USDC")
        .map(|c| dec(c["insurance"].as_str().unwrap()))
        .sum();
    let drawn = dec(outcomes["insurance_drawn"]["USDC"].as_str().unwrap());
    assert!(
        drawn > Decimal::ZERO && drawn == covered,
        "{drawn} {covered}"
    );
    assert!(
        stderr.contains(&format!("insurance drawn: {drawn} USDC")),
        "{stderr}"
    );
    assert!(
        out.join("DONE").exists(),
        "a strict run still writes the run"
    );
    let seeds = tmp.path().join("seeds");
    let (code, ..) = perpsim(
        &[
            &args[..4],
            &["--seeds", "0..2", "--out", seeds.to_str().unwrap()],
        ]
        .concat(),
    );
    assert_eq!(code, 3, "a Monte-Carlo with a refusal in any seed");
    let lenient = tmp.path().join("lenient");
    let (code, ..) = perpsim(&[&args[..3], &["--out", lenient.to_str().unwrap()]].concat());
    assert_eq!(code, 0, "refusals alone do not fail a run");
    let quiet = tmp.path().join("q.yaml");
    std::fs::write(
        &quiet,
        "name: q\nseed: 1\nstart: 2026-01-01T00:00:00Z\nend: +1h\ncustomers:\n  - {name: a, deposits: {USDC: \"100\"}}\nevents: []\n",
    )
    .unwrap();
    let clean = tmp.path().join("clean");
    let (code, _, stderr) = perpsim(&[
        "replay",
        quiet.to_str().unwrap(),
        "--strict",
        "--out",
        clean.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("0 events: 0 applied, 0 refused; 0 margin calls"),
        "{stderr}"
    );
}

/// D11 (issue 39 item 1): a recorded market drives the venue. The worked recorded hour (a
/// Tardis.dev derivative_ticker recording, gzip) sets BTC-USDC-PERP's index and mark from
/// its BTCUSDT rows only; the fall it records calls and then liquidates Carol's leveraged
/// long; and the hour at 01:00 settles at the recorded 8-hour rate pro rata, on the last
/// mark recorded before it: Dave's short of 1 receives 28 696.3 × 0.0001 / 8.
#[test]
fn a_recorded_market_sets_prices_funding_and_what_follows() {
    let (_tmp, out) = run_example("recorded-hour.yaml");
    let report = report(&out);
    let path = report["instruments"][0]["path"].as_array().unwrap();
    assert_eq!(report["instruments"][0]["symbol"], "BTC-USDC-PERP");
    let at = |time: &str| path.iter().find(|p| p[0] == time).unwrap();
    // The sample at 00:01 shows the row recorded at 00:01:00: index 41 995.1, mark 41 987.6.
    let minute = at("2024-01-01T00:01:00.000Z");
    assert_eq!(
        (&minute[1], &minute[2]),
        (&"41995.1".into(), &"41987.6".into())
    );
    assert!(dec(at("2024-01-01T00:46:00.000Z")[1].as_str().unwrap()) < dec("26000"));
    let carol = customer(&report, "carol");
    assert_eq!(
        (&carol["margin_calls"], &carol["liquidations"]),
        (&1.into(), &1.into())
    );
    let dave = customer(&report, "dave");
    let paid = dec("28696.3") * dec("0.0001") / dec("8");
    assert_eq!(
        dec(dave["currencies"][0]["funding"].as_str().unwrap()),
        paid
    );
    assert_eq!(report["outcomes"]["liquidations"], 1);
}

/// D11 (issue 39 item 1, 6): the worked recorded book (Tardis.dev book_snapshot_5 and trades
/// recordings of the recorded hour's BTCUSDT, gzip). Erin's offer of 0.3 at 00:10:05 waits
/// behind the 2.268 recorded at its price: the recorded buys there and the level's shrinking
/// to 0.266 leave 0.115 ahead of her, so the buy of 0.23 at 00:10:24.5 fills 0.115 of hers;
/// the book moving up through her price at 00:10:25 fills the rest, at her price. Frank's
/// market orders fill at recorded levels only.
#[test]
fn the_worked_recorded_book_fills_by_the_queue_model() {
    let (_tmp, out) = run_example("recorded-book.yaml");
    let trades = std::fs::read_to_string(out.join("trades.csv")).unwrap();
    let rows: Vec<Vec<String>> = trades
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(str::to_owned).collect())
        .collect();
    let of = |name: &str| rows.iter().filter(|r| r[2] == name).collect::<Vec<_>>();
    let erin: Vec<(&str, &str, &str, &str)> = of("erin")
        .iter()
        .map(|r| (r[14].as_str(), r[7].as_str(), r[8].as_str(), r[11].as_str()))
        .collect();
    assert_eq!(
        erin,
        [
            ("2024-01-01T00:10:24.500Z", "42076", "0.115", "maker"),
            ("2024-01-01T00:10:25.000Z", "42076", "0.185", "maker"),
        ]
    );
    let frank = of("frank");
    let bought: Decimal = frank
        .iter()
        .filter(|r| r[5] == "buy")
        .map(|r| dec(&r[8]))
        .sum();
    assert_eq!(bought, dec("2"));
    assert!(
        frank.iter().all(|r| r[11] == "taker"),
        "frank takes the recorded levels"
    );
    let report = report(&out);
    assert_eq!(report["outcomes"]["refused"], 0);
}

/// D11 (issue 39 item 5): report.html tells a risk analyst what happened before its tables
/// (the liquidation, the ADL fill with both its sides, what insurance paid and to whom, as
/// the ledger has it), every chart's y axis says what it measures and in what unit, the
/// leverage-ratio charts carry the account's thresholds and say higher is safer, liquidation
/// and ADL fills are marked apart, the mark is told from the index, and an instrument that
/// never traded gets no chart.
#[test]
fn the_report_page_tells_what_happened_and_labels_its_charts() {
    let (_tmp, out) = run_example("flash-crash.yaml");
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    let report = report(&out);
    let drawn = report["customers"][0]["currencies"][0]["insurance"]
        .as_str()
        .unwrap()
        .to_owned();
    let told = [
        "<h2>What happened</h2>",
        "alice (USDC) was liquidated at leverage ratio -0.0681",
        "auto-deleveraging on BTC-USDC-PERP at 25000: alice sold 0.25, bob bought 0.25",
        &format!("Insurance paid {drawn} USDC (to alice {drawn})"),
        "9 of 10 events applied; 1 refused",
        "price, USDC",
        "mark (dashed)",
        "liquidation fill",
        "ADL fill",
        "equity, USDC",
        "alice leverage ratio (USDC): higher is safer",
        "equity / notional",
        "margin call below",
        "liquidation below",
        "insurance fund (USDC)",
        "fees and clearing (USDC)",
        "funding settled",
    ];
    for text in told {
        assert!(page.contains(text), "report.html lacks {text:?}");
    }
    assert!(page.find("What happened") < page.find("<h2>Venue</h2>"));
    assert_eq!(customer(&report, "alice")["leverage"], 2);
    assert!(!page.contains("ETH-USDC-PERP price"), "ETH never traded");
}

/// D11 (issue 39 item 3): a seeded latency model delays each customer request by its draw:
/// a constant 1.5 s puts a market order sent at +1m on the tape at +1m1.5s, while the price
/// event at the same instant is not delayed; a log-normal model draws from the run's seed,
/// the same delays for the same seed and others for another; an empirical model draws the
/// file's rows; a model the file gets wrong is refused where it is written.
#[test]
fn a_latency_model_delays_each_request_by_its_seeded_draw() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = |latency: &str| {
        let file = tmp.path().join("l.yaml");
        let text = format!(
            "name: l\nseed: 3\nstart: 2026-01-01T00:00:00Z\nend: +10m\nlatency: {{order_entry: {latency}}}\ncustomers:\n  - {{name: a, deposits: {{USDC: \"100000\"}}}}\nevents:\n  - {{at: +1m, customer: a, order: {{symbol: BTC-USDC-PERP, side: buy, type: market, reference_id: m1, amount: \"0.01\"}}}}\n  - {{at: +1m, symbol: BTC-USDC-PERP, price: {{index_price: \"60100\"}}}}\n  - {{at: +2m, customer: a, order: {{symbol: BTC-USDC-PERP, side: sell, type: market, reference_id: m2, amount: \"0.01\"}}}}\n"
        );
        std::fs::write(&file, text).unwrap();
        file
    };
    let taker_times = |out: &Path| -> Vec<String> {
        csv_rows(&out.join("trades.csv"))
            .into_iter()
            .filter(|r| r["customer"] == "a")
            .map(|r| r["timestamp"].clone())
            .collect()
    };
    let constant = tmp.path().join("constant");
    run(
        &scenario("{distribution: constant, value: 1500ms}"),
        &constant,
        &[],
    );
    assert_eq!(
        taker_times(&constant),
        ["2026-01-01T00:01:01.500Z", "2026-01-01T00:02:01.500Z"]
    );
    let lognormal = "{distribution: log-normal, value: 200ms, sigma: \"0.8\"}";
    let (a, b, c) = (
        tmp.path().join("a"),
        tmp.path().join("b"),
        tmp.path().join("c"),
    );
    let hash_a = run(&scenario(lognormal), &a, &[]);
    assert_eq!(
        run(&scenario(lognormal), &b, &[]),
        hash_a,
        "the same seed, the same run"
    );
    assert_eq!(taker_times(&a), taker_times(&b));
    run(&scenario(lognormal), &c, &["--seed", "4"]);
    assert_ne!(
        taker_times(&a),
        taker_times(&c),
        "another seed draws other delays"
    );
    std::fs::write(tmp.path().join("seen.csv"), "latency_ms\n250\n").unwrap();
    let seen = tmp.path().join("seen");
    run(
        &scenario("{distribution: empirical, file: seen.csv}"),
        &seen,
        &[],
    );
    assert_eq!(taker_times(&seen)[0], "2026-01-01T00:01:00.250Z");
    for (latency, says) in [
        (
            "{distribution: uniform, value: 1s}",
            "distribution: expected one of constant, normal, log-normal, empirical",
        ),
        (
            "{distribution: normal, value: 1s}",
            "a normal latency needs `stddev`",
        ),
        (
            "{distribution: constant, value: 2m}",
            "value: expected a delay such as 20ms or 1s, at most a minute",
        ),
    ] {
        let out = tmp.path().join("refused");
        let (code, _, stderr) = perpsim(&[
            "replay",
            scenario(latency).to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_ne!(code, 0);
        assert!(
            stderr.contains("l.yaml:5:") && stderr.contains(says),
            "{latency}: {stderr}"
        );
    }
}

/// D11 (issue 39 item 4): a shock scales the flash crash's price moves by a factor each run
/// draws, so a Monte-Carlo varies the crash itself: at half the move the index falls to
/// 60 000 − 35 000 / 2; across seeds Alice's PnL is no longer the same at every percentile,
/// each seed's report says the factor it drew, and the summary gives the factors and what
/// insurance paid (the venue's loss) per percentile.
#[test]
fn a_shock_scales_the_crash_by_a_factor_each_seed_draws() {
    let tmp = tempfile::tempdir().unwrap();
    let crash = std::fs::read_to_string(example("flash-crash.yaml")).unwrap();
    std::fs::copy(
        example("flash-crash.csv"),
        tmp.path().join("flash-crash.csv"),
    )
    .unwrap();
    let shocked = |scale: &str| {
        let file = tmp.path().join("shocked.yaml");
        let shock = format!(
            "shocks:\n  - {{symbol: BTC-USDC-PERP, from: +1h, scale: {scale}}}\ncustomers:"
        );
        std::fs::write(&file, crash.replacen("customers:", &shock, 1)).unwrap();
        file
    };
    let half = tmp.path().join("half");
    run(&shocked("{min: \"0.5\", max: \"0.5\"}"), &half, &[]);
    let halved = report(&half);
    assert_eq!(
        halved["scenario"]["shock_factors"],
        serde_json::json!(["0.5"])
    );
    // The crash's low row (25 000 at 01:03) moved half as far from its 60 000 anchor.
    let path = halved["instruments"][0]["path"].as_array().unwrap();
    let low = path
        .iter()
        .find(|p| p[0] == "2026-01-01T01:03:00.000Z")
        .unwrap();
    assert_eq!(low[1], "42500");
    let mc = tmp.path().join("mc");
    let file = shocked("{min: \"0.3\", max: \"1.3\"}");
    replay_ok(&[
        file.to_str().unwrap(),
        "--seeds",
        "0..8",
        "--jobs",
        "2",
        "--out",
        mc.to_str().unwrap(),
    ]);
    let summary: Value =
        serde_json::from_slice(&std::fs::read(mc.join("summary.json")).unwrap()).unwrap();
    let factors = &summary["shock_factors"][0];
    assert_ne!(
        factors["p1"], factors["p99"],
        "each seed draws its own factor"
    );
    let alice = summary["customers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "alice")
        .unwrap();
    assert_ne!(
        alice["pnl"]["p1"], alice["pnl"]["p99"],
        "the crash's depth varies the loss"
    );
    assert_eq!(summary["insurance_drawn"][0]["asset"], "USDC");
    for seed in 0..8 {
        let drawn =
            report(&mc.join(format!("seed-{seed}")))["scenario"]["shock_factors"][0].clone();
        let f = dec(drawn.as_str().unwrap());
        assert!(f >= dec("0.3") && f <= dec("1.3"), "seed {seed}: {f}");
    }
    let html = std::fs::read_to_string(mc.join("summary.html")).unwrap();
    assert!(html.contains("The venue's loss: insurance paid"));
    // A block bootstrap redraws the crash's moves per seed: the low differs between seeds,
    // and each sampled price is still one the crash's moves make from 60 000.
    let file = tmp.path().join("bootstrap.yaml");
    let redraw =
        "bootstrap:\n  - {symbol: BTC-USDC-PERP, from: +1h, until: +2h, block: 1}\ncustomers:";
    std::fs::write(&file, crash.replacen("customers:", redraw, 1)).unwrap();
    let lows: Vec<Value> = (1..=3)
        .map(|seed| {
            let out = tmp.path().join(format!("bootstrap-{seed}"));
            run(&file, &out, &["--seed", &seed.to_string()]);
            report(&out)["instruments"][0]["index_min"].clone()
        })
        .collect();
    assert!(lows.iter().any(|low| *low != lows[0]), "{lows:?}");
}

/// D11 (issue 39 item 1): Binance's public files drive an instrument: mark and index klines
/// (gzip too) at their closes, a fundingRate file's 8-hour rate paid pro rata each hour.
#[test]
fn binance_files_drive_prices_and_funding() {
    use std::io::Write;
    let tmp = tempfile::tempdir().unwrap();
    let header = "open_time,open,high,low,close,volume,close_time,quote_volume,count,taker_buy_volume,taker_buy_quote_volume,ignore\n";
    let t0: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z
    let klines = |close: &dyn Fn(i64) -> String| -> String {
        let rows: String = (0..120)
            .map(|m| {
                let open = t0 + m * 60_000;
                format!("{open},1,1,1,{},0,{},0,0,0,0,0\n", close(m), open + 59_999)
            })
            .collect();
        format!("{header}{rows}")
    };
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(klines(&|m| format!("{}.5", 60_000 + m)).as_bytes())
        .unwrap();
    std::fs::write(tmp.path().join("mark.csv.gz"), gz.finish().unwrap()).unwrap();
    std::fs::write(
        tmp.path().join("index.csv"),
        klines(&|m| format!("{}", 60_000 + m)),
    )
    .unwrap();
    let funding = format!(
        "calc_time,funding_interval_hours,last_funding_rate\n{},8,0.00080000\n",
        t0 + 8 * 3_600_000
    );
    std::fs::write(tmp.path().join("funding.csv"), funding).unwrap();
    let file = tmp.path().join("b.yaml");
    std::fs::write(&file, "name: b\nseed: 1\nstart: 2026-01-01T00:00:00Z\nend: +1h30m\nsample_every: 1m\nmarket: {price_feed: fixed}\ncustomers:\n  - {name: a, deposits: {USDC: \"100000\"}}\nevents:\n  - {at: +0s, symbol: BTC-USDC-PERP, recorded: {format: binance-klines, symbol: BTCUSDT, file: mark.csv.gz, index_file: index.csv, funding_file: funding.csv}}\n  - {at: +5m, customer: a, order: {symbol: BTC-USDC-PERP, side: sell, type: market, reference_id: s, amount: \"1\"}}\n").unwrap();
    let out = tmp.path().join("out");
    run(&file, &out, &[]);
    let report = report(&out);
    let path = report["instruments"][0]["path"].as_array().unwrap();
    let at = |time: &str| path.iter().find(|p| p[0] == time).unwrap().clone();
    // The kline of 00:09 closes at 00:10:00.000: index 60 009, mark 60 009.5.
    let ten = at("2026-01-01T00:10:00.000Z");
    assert_eq!((&ten[1], &ten[2]), (&"60009".into(), &"60009.5".into()));
    // A short of 1 receives the hour's 0.0008 / 8 of the mark at 01:00 (the 00:58 kline's
    // close: the 00:59 one's lands at 01:00, just after the hour settles).
    let funding = dec(customer(&report, "a")["currencies"][0]["funding"]
        .as_str()
        .unwrap());
    assert_eq!(funding, dec("60058.5") * dec("0.0001"));
}

/// D11 (issue 39 item 1): a recorded book is the liquidity customers meet. A Tardis
/// `book_snapshot_2` file (the index from a `price` event): a market buy of 0.3 at 00:01
/// sweeps the recorded asks of then (0.2 at 60 000.5, then 60 001), one at 00:03 the book
/// recorded at 00:02; the maker quotes nothing else.
#[test]
fn a_recorded_book_is_the_liquidity_customers_meet() {
    let tmp = tempfile::tempdir().unwrap();
    let t0: i64 = 1_767_225_600_000_000; // 2026-01-01T00:00:00Z in µs
    let header = "exchange,symbol,timestamp,local_timestamp,asks[0].price,asks[0].amount,bids[0].price,bids[0].amount,asks[1].price,asks[1].amount,bids[1].price,bids[1].amount\n";
    let row = |minute: i64, levels: &str| {
        let t = t0 + minute * 60_000_000;
        format!("binance-futures,BTCUSDT,{t},{t},{levels}\n")
    };
    let book = [
        header.to_owned(),
        row(0, "60000.5,0.2,59999.5,1,60001,5,59999,2"),
        row(2, "59000.5,0.1,58999.5,1,59001,5,58999,2"),
    ]
    .concat();
    std::fs::write(tmp.path().join("book.csv"), book).unwrap();
    let file = tmp.path().join("b.yaml");
    std::fs::write(&file, "name: b\nseed: 1\nstart: 2026-01-01T00:00:00Z\nend: +5m\nmarket: {price_feed: fixed}\ncustomers:\n  - {name: a, deposits: {USDC: \"100000\"}}\nevents:\n  - {at: +0s, symbol: BTC-USDC-PERP, price: {index_price: \"60000\"}}\n  - {at: +0s, symbol: BTC-USDC-PERP, recorded: {format: tardis-book-snapshot, symbol: BTCUSDT, file: book.csv}}\n  - {at: +1m, customer: a, order: {symbol: BTC-USDC-PERP, side: buy, type: market, reference_id: b1, amount: \"0.3\"}}\n  - {at: +3m, customer: a, order: {symbol: BTC-USDC-PERP, side: buy, type: market, reference_id: b2, amount: \"0.3\"}}\n").unwrap();
    let out = tmp.path().join("out");
    run(&file, &out, &[]);
    let trades = std::fs::read_to_string(out.join("trades.csv")).unwrap();
    let fills: Vec<(String, String, String)> = trades
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|f| f[2] == "a")
        .map(|f| (f[12].to_owned(), f[7].to_owned(), f[8].to_owned()))
        .collect();
    let fill = |r: &str, p: &str, a: &str| (r.to_owned(), p.to_owned(), a.to_owned());
    assert_eq!(
        fills,
        [
            fill("b1", "60000.5", "0.2"),
            fill("b1", "60001", "0.1"),
            fill("b2", "59000.5", "0.1"),
            fill("b2", "59001", "0.2"),
        ]
    );
}

/// D11 (issue 39 item 1): a customer's resting order fills by recorded trades, after the
/// volume recorded ahead of it (the queue model). Bob bids 0.5 at 59 999.5 behind the 1
/// recorded there: a recorded sell of 0.8 there leaves 0.2 ahead, one of 0.5 fills 0.3 of
/// his, one at 59 998 goes through his price and fills the rest; a Binance aggTrades file.
#[test]
fn recorded_trades_fill_a_resting_order_after_the_volume_ahead() {
    let tmp = tempfile::tempdir().unwrap();
    let t0: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z in ms
    let book = format!(
        "update_id,best_bid_price,best_bid_qty,best_ask_price,best_ask_qty,transaction_time,event_time\n1,59999.5,1,60000.5,2,{t0},{t0}\n"
    );
    std::fs::write(tmp.path().join("book.csv"), book).unwrap();
    let trade = |minute: i64, price: &str, amount: &str| {
        let t = t0 + minute * 60_000;
        format!("{minute},{price},{amount},1,1,{t},true\n")
    };
    let trades = [
        "agg_trade_id,price,quantity,first_trade_id,last_trade_id,transact_time,is_buyer_maker\n"
            .to_owned(),
        trade(2, "59999.5", "0.8"),
        trade(3, "59999.5", "0.5"),
        trade(4, "59998", "0.1"),
    ]
    .concat();
    std::fs::write(tmp.path().join("trades.csv"), trades).unwrap();
    let file = tmp.path().join("q.yaml");
    std::fs::write(&file, "name: q\nseed: 1\nstart: 2026-01-01T00:00:00Z\nend: +5m\nmarket: {price_feed: fixed}\ncustomers:\n  - {name: bob, deposits: {USDC: \"100000\"}}\nevents:\n  - {at: +0s, symbol: BTC-USDC-PERP, price: {index_price: \"60000\"}}\n  - {at: +0s, symbol: BTC-USDC-PERP, recorded: {format: binance-book-ticker, symbol: BTCUSDT, file: book.csv}}\n  - {at: +0s, symbol: BTC-USDC-PERP, recorded: {format: binance-agg-trades, symbol: BTCUSDT, file: trades.csv}}\n  - {at: +1m, customer: bob, order: {symbol: BTC-USDC-PERP, side: buy, type: limit, reference_id: q, amount: \"0.5\", limit_price: \"59999.5\"}}\n").unwrap();
    let out = tmp.path().join("out");
    run(&file, &out, &[]);
    let trades = std::fs::read_to_string(out.join("trades.csv")).unwrap();
    let fills: Vec<(String, String, String, String)> = trades
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|f| f[2] == "bob")
        .map(|f| {
            (
                f[14][..19].to_owned(),
                f[7].to_owned(),
                f[8].to_owned(),
                f[11].to_owned(),
            )
        })
        .collect();
    let fill = |at: &str, amount: &str| {
        let at = format!("2026-01-01T00:0{at}");
        (
            at,
            "59999.5".to_owned(),
            amount.to_owned(),
            "maker".to_owned(),
        )
    };
    assert_eq!(fills, [fill("3:00", "0.3"), fill("4:00", "0.2")]);
}

/// D11 (issue 39 item 4): a recorded session becomes a scenario that replays it: the flash
/// crash's journal, turned back into a scenario by `scenario from-journal`, replays to the
/// same balances, trades, liquidations and insurance drawn for every customer (the codes the
/// engine draws come in another order, so the state hash is not the same); what a scenario
/// cannot say is counted in the file's head.
#[test]
fn a_journal_becomes_a_scenario_that_replays_the_session() {
    let (tmp, original) = run_example("flash-crash.yaml");
    let file = tmp.path().join("from-journal.yaml");
    let journal = original.join("journal.redb");
    let (code, _, stderr) = perpsim(&[
        "scenario",
        "from-journal",
        journal.to_str().unwrap(),
        "--out",
        file.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains("# Left out, a scenario cannot say it: 1 × broker and key commands."),
        "{text}"
    );
    let names: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names.iter().any(|n| n.ends_with(".tmp")),
        "no spill left: {names:?}"
    );
    let (code, ..) = perpsim(&[
        "scenario",
        "from-journal",
        journal.to_str().unwrap(),
        "--out",
        file.to_str().unwrap(),
    ]);
    assert_ne!(
        code, 0,
        "a file already there is refused, never overwritten"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
    let again = tmp.path().join("again");
    run(&file, &again, &[]);
    let (before, after) = (report(&original), report(&again));
    for (b, a) in before["customers"]
        .as_array()
        .unwrap()
        .iter()
        .zip(after["customers"].as_array().unwrap())
    {
        for field in ["name", "trades", "liquidations", "auto_deleveraging_fills"] {
            assert_eq!(b[field], a[field], "{field}");
        }
        let money = |r: &Value| {
            r["currencies"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| (c["balance"].clone(), c["insurance"].clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(money(b), money(a), "{}", b["name"]);
    }
    assert_eq!(
        before["outcomes"]["insurance_drawn"],
        after["outcomes"]["insurance_drawn"]
    );
}

/// A JSON scenario takes serde_json; what it refuses is located like YAML's.
#[test]
fn bad_json_is_located_too() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("s.json");
    let text = r#"{"name":"x","seed":1,"start":"2026-01-01T00:00:00Z","end":"+1h",
"customers":[{"name":"a","deposits":{"USDC":"100"}}],
"events":[{"at":"+1m","customer":"zed","cancel":"x"}]}"#;
    std::fs::write(&file, text).unwrap();
    let out = tmp.path().join("out");
    let (code, _, stderr) = perpsim(&[
        "replay",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("s.json:3:34: unknown customer \"zed\""),
        "{stderr}"
    );
    let duplicate = text.replace(r#""cancel":"x""#, r#""customer":"a","cancel":"x""#);
    std::fs::write(&file, duplicate).unwrap();
    let (code, _, stderr) = perpsim(&[
        "replay",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_ne!(code, 0, "a repeated key is refused, never read as its last");
    assert!(
        stderr.contains("s.json:3:") && stderr.contains("customer"),
        "{stderr}"
    );
    assert!(!out.exists());
}

/// D11 Monte-Carlo: `--jobs 2` writes for each seed exactly what a run of that seed alone
/// writes; shards run as separate processes under each scheduler's index variable merge
/// into the one-machine summary.
#[test]
fn monte_carlo_in_processes_and_in_shards_equals_seeds_run_one_by_one() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = example("flash-crash.yaml");
    let (s, mc) = (scenario.to_str().unwrap(), tmp.path().join("mc"));
    let seeds = replay_ok(&[
        s,
        "--seeds",
        "20..=23",
        "--jobs",
        "2",
        "--out",
        mc.to_str().unwrap(),
    ]);
    assert_eq!(seeds["seeds"], serde_json::json!([20, 21, 22, 23]));
    for seed in 20..=23 {
        let alone = tmp.path().join(format!("alone-{seed}"));
        run(&scenario, &alone, &["--seed", &seed.to_string()]);
        assert_eq!(
            files(&alone),
            files(&mc.join(format!("seed-{seed}"))),
            "seed {seed}"
        );
    }
    let summary: Value =
        serde_json::from_slice(&std::fs::read(mc.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["runs"], 4);
    assert!(summary["customers"][0]["pnl"]["p50"].is_string());
    let mut shard_dirs = Vec::new();
    for (index, variable) in [
        "JOB_COMPLETION_INDEX",
        "SLURM_ARRAY_TASK_ID",
        "AWS_BATCH_JOB_ARRAY_INDEX",
    ]
    .iter()
    .enumerate()
    {
        let dir = tmp.path().join(format!("shard-{index}"));
        let status = perpsim_tests::command()
            .args([
                "replay",
                "--quiet",
                s,
                "--seeds",
                "20..=23",
                "--count",
                "3",
                "--out",
                dir.to_str().unwrap(),
            ])
            .env(variable, index.to_string())
            .status()
            .unwrap();
        assert!(status.success());
        shard_dirs.push(dir);
    }
    // A retried shard skips what it finished.
    let before = std::fs::metadata(shard_dirs[0].join("seed-20/report.json"))
        .unwrap()
        .modified()
        .unwrap();
    let again = perpsim_tests::command()
        .args([
            "replay",
            "--quiet",
            s,
            "--seeds",
            "20..=23",
            "--count",
            "3",
            "--index",
            "0",
            "--out",
            shard_dirs[0].to_str().unwrap(),
        ])
        .status()
        .unwrap();
    assert!(again.success());
    assert_eq!(
        std::fs::metadata(shard_dirs[0].join("seed-20/report.json"))
            .unwrap()
            .modified()
            .unwrap(),
        before
    );
    let merged = tmp.path().join("merged");
    let mut args = vec!["summarize", "--out", merged.to_str().unwrap()];
    args.extend(shard_dirs.iter().map(|d| d.to_str().unwrap()));
    replay_ok(&args);
    for name in ["summary.json", "summary.html"] {
        assert_eq!(
            std::fs::read(merged.join(name)).unwrap(),
            std::fs::read(mc.join(name)).unwrap(),
            "{name}"
        );
    }
}

/// D11: `replay verify` re-runs a directory and catches a changed byte.
#[test]
fn verify_passes_a_run_and_catches_a_changed_byte() {
    let (_tmp, out) = run_example("depreciation-ladder.yaml");
    assert_eq!(
        replay_ok(&["verify", out.to_str().unwrap()])["identical"],
        true
    );
    let ledger = out.join("ledger.csv");
    let mut bytes = std::fs::read(&ledger).unwrap();
    let last = bytes.len() - 2;
    bytes[last] ^= 1;
    std::fs::write(&ledger, bytes).unwrap();
    let (code, stdout, _) = perpsim(&["replay", "verify", out.to_str().unwrap()]);
    assert_eq!(code, 1);
    let answer: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(answer["differ"], serde_json::json!(["ledger.csv"]));
}

/// D11: `--journal` reads the journal of a server serving with `--journal-readers on` beside
/// it (without its lock, without changing a byte) into the report a scenario run writes, at
/// the server's state hash; a server holding its journal alone is refused with what to do.
#[test]
fn a_running_servers_journal_replays_into_a_report() {
    let exclusive = Server::start(&["--clock", "manual", "--start", perpsim_tests::START]);
    let held = exclusive.data_dir.join("journal.redb");
    let refused = tempfile::tempdir().unwrap();
    let out_arg = refused.path().join("r");
    let (code, _, stderr) = perpsim(&[
        "replay",
        "--journal",
        held.to_str().unwrap(),
        "--out",
        out_arg.to_str().unwrap(),
    ]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("stop the server") && stderr.contains("--journal-readers on"),
        "{stderr}"
    );
    assert!(!out_arg.exists());
    drop(exclusive);
    let data = tempfile::tempdir().unwrap();
    let flags = [
        "--clock",
        "manual",
        "--start",
        perpsim_tests::START,
        "--journal-readers",
        "on",
    ];
    let mut server = Server::start_in(data.path(), &flags);
    let broker = server.demo();
    let code = perpsim_tests::funded(&server, &broker, "USDC", "5000");
    perpsim_tests::advance(&server, 3_600);
    let journal = data.path().join("journal.redb");
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("report");
    let answer = replay_ok(&[
        "--journal",
        journal.to_str().unwrap(),
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(answer["state_hash"], server.state().2.as_str());
    let r = report(&dir);
    let c = r["customers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["code"] == code.as_str())
        .unwrap();
    assert_eq!(c["currencies"][0]["balance"], "5000");
    // The server goes on serving and journaling after the read.
    perpsim_tests::advance(&server, 60);
    server.terminate();
    assert_eq!(
        replay_ok(&["verify", dir.to_str().unwrap()])["identical"],
        true
    );
}

/// D11, issue 26 item 6: the worked examples reach their checked-in state hashes.
#[test]
fn the_worked_examples_reach_their_checked_in_hashes() {
    let expected = std::fs::read_to_string(example("hashes.txt")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for line in expected
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (hash, file) = line.split_once("  ").unwrap();
        let out = tmp.path().join(file);
        assert_eq!(run(&example(file), &out, &[]), hash, "{file}");
        checked += 1;
    }
    assert_eq!(checked, 5);
}

/// D11: the checked-in JSON Schema accepts every example and refuses what the reader
/// refuses (an unknown field, an event body the API would refuse by shape).
#[test]
fn the_scenario_schema_accepts_the_examples_and_refuses_unknown_fields() {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../openapi/scenario.schema.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let validator = jsonschema::draft202012::new(&schema).expect("a valid schema");
    for file in [
        "flash-crash.yaml",
        "funding-week.yaml",
        "depreciation-ladder.yaml",
        "every-kind/every-kind.yaml",
    ] {
        let scenario: Value =
            serde_saphyr::from_str(&std::fs::read_to_string(example(file)).unwrap()).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&scenario)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{file}: {errors:?}");
    }
    let mut bad: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(example("flash-crash.yaml")).unwrap())
            .unwrap();
    bad["events"][0]["order"]["colour"] = "red".into();
    assert!(!validator.is_valid(&bad));
    bad["events"][0]["order"]
        .as_object_mut()
        .unwrap()
        .remove("colour");
    bad["extra"] = 1.into();
    assert!(!validator.is_valid(&bad));
}
