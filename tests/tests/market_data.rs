//! `perpsim serve --market-data` (issue 39 item 1): a recorded market driving a live venue,
//! each recorded step at its own instant on the manual clock, played on the wall clock on the
//! realtime one, kept across a restart; and the files and settings it refuses. `serve
//! --order-latency` (item 3): order entries reaching the venue their drawn delay later.

use std::path::Path;
use std::time::{Duration, Instant};

use perpsim_tests::ws::Ws;
use perpsim_tests::{
    Client, Server, customer, funded, metric, refused_within_a_minute, replay_hash,
};
use serde_json::{Value, json};

const BTC: &str = "BTC-USDC-PERP";
const START: &str = "2024-01-01T00:00:00Z";

/// Four rows of a Tardis `derivative_ticker` recording: at +0 s, +30 s, +90 s and 00:59:30,
/// the funding rate moving at the last two (8-hour rates: 0.0001, 0.0002 and 0.0003 an hour).
const TICKER: &str = "\
exchange,symbol,timestamp,local_timestamp,funding_timestamp,funding_rate,predicted_funding_rate,open_interest,last_price,index_price,mark_price
binance-futures,BTCUSDT,1704067200000000,1704067200100000,1704096000000000,0.0008,0.0008,,42000.0,42000.0,42001.5
binance-futures,ETHUSDT,1704067200000000,1704067200100000,1704096000000000,0.0001,0.0001,,2300.0,2300.0,2300.5
binance-futures,BTCUSDT,1704067230000000,1704067230100000,1704096000000000,0.0008,0.0008,,42100.0,42100.0,42102.5
binance-futures,BTCUSDT,1704067290000000,1704067290100000,1704096000000000,0.0016,0.0016,,41900.0,41900.0,41903.5
binance-futures,BTCUSDT,1704070770000000,1704070770100000,1704096000000000,0.0024,0.0024,,41800.0,41800.0,41800.5
";

/// A market data file over [`TICKER`] in `dir`, with `extra` YAML lines at its top level.
fn market_file(dir: &Path, extra: &str) -> String {
    std::fs::write(dir.join("ticker.csv"), TICKER).unwrap();
    let path = dir.join("market.yaml");
    let recorded = "{format: tardis-derivative-ticker, file: ticker.csv, symbol: BTCUSDT, funding_interval: 8h}";
    let text = format!(
        "name: recorded market\nseed: 1\nstart: {START}\nend: +2h\n{extra}customers: []\nevents:\n  - {{at: +0s, symbol: {BTC}, recorded: {recorded}}}\n"
    );
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

fn ticker(c: &Client) -> Value {
    let r = c.send("GET", &format!("/v1/tickers/{BTC}"), None);
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()
}

fn prices(c: &Client) -> (String, String, String) {
    let t = ticker(c);
    let text = |k: &str| t[k].as_str().unwrap_or_default().to_owned();
    (
        text("index_price"),
        text("mark_price"),
        text("predicted_rate"),
    )
}

fn advance(server: &Server, seconds: i64) -> String {
    let r = server.admin(
        "POST",
        "/admin/v1/clock/advance",
        Some(json!({ "seconds": seconds })),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()["now"].as_str().unwrap().to_owned()
}

fn price(index: &str, mark: &str, rate: &str) -> (String, String, String) {
    (index.into(), mark.into(), rate.into())
}

/// Issue 39 item 1: on the manual clock the venue takes the file's first row at its start,
/// each later row when an advance reaches its time (the advance goes on past it), the
/// recorded 8-hour rate pro rata as the hour's; a restart keeps where the file is.
#[test]
fn a_recorded_market_drives_a_manual_venue_row_by_row_and_across_a_restart() {
    let files = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let file = market_file(files.path(), "");
    let flags = [
        "--clock",
        "manual",
        "--start",
        START,
        "--market-data",
        &file,
    ];
    let mut server = Server::start_in(data.path(), &flags);
    let c = server.demo();
    assert_eq!(prices(&c), price("42000.0", "42001.5", "0.00010000"));
    assert_eq!(advance(&server, 29), "2024-01-01T00:00:29.000Z");
    assert_eq!(prices(&c), price("42000.0", "42001.5", "0.00010000"));
    assert_eq!(
        advance(&server, 16),
        "2024-01-01T00:00:45.000Z",
        "the advance goes on past the row"
    );
    assert_eq!(prices(&c), price("42100.0", "42102.5", "0.00010000"));
    advance(&server, 60);
    assert_eq!(prices(&c), price("41900.0", "41903.5", "0.00020000"));
    assert_eq!(
        metric(&server, "perpsim_market_data_steps_total"),
        5,
        "a price and a rate at the start, a price at 30 s, a price and a rate at 90 s"
    );
    assert_eq!(server.terminate().code(), Some(0));

    let mut server = Server::start_in(data.path(), &flags);
    let c = server.demo();
    assert_eq!(prices(&c), price("41900.0", "41903.5", "0.00020000"));
    assert_eq!(advance(&server, 60), "2024-01-01T00:02:45.000Z");
    assert_eq!(prices(&c), price("41900.0", "41903.5", "0.00020000"));
    // One advance over 00:59:30 and the hour: the row acts at its instant, so the hour
    // settles at its rate (applied after the advance, it would settle at 0.0002).
    assert_eq!(advance(&server, 3_465), "2024-01-01T01:00:30.000Z");
    let r = c.send("GET", &format!("/v1/funding_rates/{BTC}"), None);
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["funding_rate"], "0.00030000", "{}", r.text);
    assert_eq!(ticker(&c)["mark_price"], "41800.5");
    let logs = server.logs();
    assert!(logs.contains("market data"), "{logs}");
    // Every step was journaled as an admin command: the journal alone rebuilds the venue.
    let (_, _, hash) = server.state();
    assert_eq!(server.terminate().code(), Some(0));
    std::fs::remove_file(files.path().join("ticker.csv")).unwrap();
    assert_eq!(replay_hash(data.path()), hash);
}

/// Issue 39 item 1: on the realtime clock the file plays on the wall clock, here 500 times
/// faster than recorded: its last row (59 min 30 s in) is the venue's 7.14 s after the start.
#[test]
fn a_recorded_market_plays_on_the_realtime_clock_at_its_speed() {
    let files = tempfile::tempdir().unwrap();
    let file = market_file(files.path(), "");
    let server = Server::start(&["--market-data", &file, "--market-data-speed", "500"]);
    let c = server.demo();
    assert_ne!(
        ticker(&c)["mark_price"],
        "41800.5",
        "played on the clock, not at once"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while ticker(&c)["mark_price"] != "41800.5" {
        assert!(Instant::now() < deadline, "not played: {:?}", prices(&c));
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What a market data file and its settings may not be: each refusal says what to do.
#[test]
fn serve_refuses_market_data_it_could_only_half_obey() {
    let files = tempfile::tempdir().unwrap();
    let serve = |flags: &[&str]| {
        let data = tempfile::tempdir().unwrap();
        let dir = data.path().to_string_lossy().into_owned();
        let mut args = vec!["serve", "--listen", "127.0.0.1:0", "--data-dir", &dir];
        args.extend(flags);
        refused_within_a_minute(&args)
    };
    let customers = market_file(files.path(), "");
    let text = std::fs::read_to_string(&customers)
        .unwrap()
        .replace("customers: []", "customers: [{name: ann}]");
    std::fs::write(&customers, text).unwrap();
    let err = serve(&["--market-data", &customers]);
    assert!(err.contains("declares no customers"), "{err}");

    let maker = market_file(files.path(), "market: {market_maker: false}\n");
    let err = serve(&["--market-data", &maker]);
    assert!(
        err.contains("sets no instrument or market: settings"),
        "{err}"
    );

    let good = market_file(files.path(), "");
    let err = serve(&["--market-data", &good, "--price-feed", "random-walk"]);
    assert!(err.contains("runs a random walk"), "{err}");
    let err = serve(&["--market-data", &good, "--market-data-speed", "0"]);
    assert!(
        err.contains("--market-data-speed must be 1 to 100000"),
        "{err}"
    );
    let err = serve(&["--market-data-speed", "2"]);
    assert!(
        err.contains("--market-data-speed needs --market-data"),
        "{err}"
    );
    std::fs::write(files.path().join("ticker.csv"), "time,index_price\n").unwrap();
    let err = serve(&["--market-data", &good]);
    assert!(err.contains("ticker.csv:1:"), "located: {err}");
}

fn place(c: &Client, code: &str, reference: &str) -> Value {
    let body = json!({"symbol": BTC, "reference_id": reference, "side": "buy", "type": "limit", "amount": "0.001", "limit_price": "50000"});
    let r = c.send("POST", &format!("/v1/customers/{code}/orders"), Some(body));
    assert_eq!(r.status, 201, "{}", r.text);
    r.json()
}

/// Issue 39 item 3: with `--order-latency` on the manual clock an order entry is held until
/// an advance reaches its instant, acts there (its `created` is that instant, inside the
/// advance) and is answered then; on the realtime clock it waits its delay on the wall clock.
#[test]
fn order_entries_reach_the_venue_their_latency_after_they_arrive() {
    let server = Server::start(&[
        "--clock",
        "manual",
        "--start",
        START,
        "--order-latency",
        "constant:250ms",
    ]);
    let c = server.demo();
    let code = funded(&server, &c, "USDC", "10000");
    let in_flight = {
        let c = Client {
            url: c.url.clone(),
            key: c.key.clone(),
        };
        let code = code.clone();
        std::thread::spawn(move || place(&c, &code, "late"))
    };
    std::thread::sleep(Duration::from_millis(500));
    assert!(!in_flight.is_finished(), "held until the clock reaches it");
    assert_eq!(metric(&server, "perpsim_order_entries_held"), 1);
    assert_eq!(advance(&server, 2), "2024-01-01T00:00:03.000Z");
    let order = in_flight.join().unwrap();
    assert_eq!(order["status"], "open");
    assert_eq!(order["created"], "2024-01-01T00:00:01.250Z", "{order}");
    assert_eq!(metric(&server, "perpsim_order_entries_held"), 0);

    let server = Server::start(&["--order-latency", "constant:300ms"]);
    let c = server.demo();
    let code = customer(&c);
    let sent = Instant::now();
    let r = c.send("DELETE", &format!("/v1/customers/{code}/orders/none"), None);
    assert_eq!(r.status, 404, "{}", r.text);
    assert!(
        sent.elapsed() >= Duration::from_millis(300),
        "{:?}",
        sent.elapsed()
    );
}

/// Issue 39 item 3: with `--market-data-latency` the push channels deliver a tick its drawn
/// delay after the engine made it (REST has it at once), a subscription's snapshot and the
/// updates after it from the same delayed view.
#[test]
fn push_channels_deliver_each_tick_its_market_data_latency_late() {
    let server = Server::start(&[
        "--clock",
        "manual",
        "--start",
        START,
        "--market-data-latency",
        "constant:700ms",
    ]);
    let mut ws = Ws::connect(&server);
    ws.subscribe(&["ticker"]);
    let path = format!("/admin/v1/instruments/{BTC}/price");
    let r = server.admin("PUT", &path, Some(json!({"index_price": "61000"})));
    assert_eq!(r.status, 200, "{}", r.text);
    let set = Instant::now();
    assert_eq!(ticker(&server.demo())["index_price"], "61000.0");
    ws.until("the ticker at the new price", |v| {
        v["channel"] == "ticker" && v["data"]["index_price"] == "61000.0"
    });
    assert!(
        set.elapsed() >= Duration::from_millis(600),
        "{:?}",
        set.elapsed()
    );
}
