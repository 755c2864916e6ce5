//! `/metrics` (issue 27 item 5): latency histograms per route and outcome, authentication
//! failures per API (the admin API's included), the engine's and the journal's figures.

use perpsim_tests::{Server, funded, manual, raw};
use serde_json::json;

/// The value of the one series of `name` whose labels include every pair in `labels`.
fn series(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<f64> = text
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .filter(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(found.len(), 1, "one series of {name} {labels:?}:\n{text}");
    found[0]
}

fn scrape(server: &Server) -> String {
    let r = raw("GET", &format!("{}/metrics", server.url), &[], b"");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/plain; version=0.0.4"));
    r.text
}

#[test]
fn request_latency_is_a_histogram_by_route_and_status_and_auth_failures_count_per_api() {
    let server = manual();
    let broker = server.demo();
    let customer = funded(&server, &broker, "USDC", "1000");
    let order = json!({"symbol": "BTC-USDC-PERP", "side": "buy", "type": "limit",
        "reference_id": "m1", "amount": "0.001", "limit_price": "50000"});
    let path = format!("/v1/customers/{customer}/orders");
    assert_eq!(broker.send("POST", &path, Some(order.clone())).status, 201);
    assert_eq!(broker.send("POST", &path, Some(order)).status, 409);
    // An unsigned request, a wrong admin token and a missing one.
    raw("GET", &format!("{}/v1/instruments", server.url), &[], b"")
        .assert_error(401, "UNAUTHORIZED");
    let wrong = [("Authorization", "Bearer wrong")];
    raw(
        "GET",
        &format!("{}/admin/v1/clock", server.url),
        &wrong,
        b"",
    )
    .assert_error(401, "UNAUTHORIZED");
    raw("GET", &format!("{}/admin/v1/clock", server.url), &[], b"")
        .assert_error(401, "UNAUTHORIZED");
    raw(
        "GET",
        &format!("{}/v1/no/such/route/{customer}", server.url),
        &[],
        b"",
    );
    raw("GET", &format!("{}/no-such-page", server.url), &[], b"");
    let health = raw("GET", &format!("{}/healthz", server.url), &[], b"");
    assert_eq!(health.status, 200);

    let text = scrape(&server);
    let route = "/v1/customers/{code}/orders";
    let placed = [("route", route), ("method", "POST"), ("status", "201")];
    let count = "perpsim_http_request_duration_seconds_count";
    assert_eq!(series(&text, count, &placed), 1.0);
    let duplicate = [("route", route), ("method", "POST"), ("status", "409")];
    assert_eq!(series(&text, count, &duplicate), 1.0);
    let bucket = "perpsim_http_request_duration_seconds_bucket";
    let inf = [placed.as_slice(), &[("le", "+Inf")]].concat();
    assert_eq!(
        series(&text, bucket, &inf),
        1.0,
        "the +Inf bucket holds every request"
    );
    // Paths no document declares share one label, whatever the client sent.
    assert!(text.contains("route=\"unmatched\""), "{text}");
    assert!(!text.contains("/v1/no/such/route"), "{text}");
    assert!(!text.contains("no-such-page"), "{text}");
    // The router's own routes are counted under their path.
    let health = [("api", "other"), ("route", "/healthz"), ("status", "200")];
    assert_eq!(series(&text, count, &health), 1.0);
    let failures = "perpsim_auth_failures_total";
    let admin = [("api", "admin"), ("reason", "unauthorized")];
    assert_eq!(series(&text, failures, &admin), 2.0);
    let broker_refused = [("api", "broker"), ("reason", "unauthorized")];
    assert!(series(&text, failures, &broker_refused) >= 2.0, "{text}");
    // The engine, the journal and the view each report their own timings.
    for name in [
        "perpsim_engine_tick_duration_seconds_count",
        "perpsim_engine_commands_per_tick_count",
        "perpsim_journal_commit_duration_seconds_count",
        "perpsim_view_publish_duration_seconds_count",
    ] {
        assert!(series(&text, name, &[]) >= 3.0, "{name}: {text}");
    }
    assert!(series(&text, "perpsim_engine_commands_total", &[]) >= 4.0);
    assert_eq!(series(&text, "perpsim_connections_refused_total", &[]), 0.0);
    // Ticks waiting for the journal's writer: at most its pipeline (a timer's tick may be in
    // flight now), never negative; the journal's file size as last read (issue 37).
    let lag = series(&text, "perpsim_journal_lag_ticks", &[]);
    assert!(
        (0.0..=64.0).contains(&lag) && lag.fract() == 0.0,
        "{lag}: {text}"
    );
    let journal = std::fs::metadata(server.data_dir.join("journal.redb")).unwrap();
    let bytes = series(&text, "perpsim_journal_file_bytes", &[]);
    assert!(
        bytes > 0.0 && bytes <= journal.len() as f64,
        "{bytes}: {text}"
    );
}
