//! An operator's slips against the real binary (issue 35 item 5, D3): an advance beyond 366
//! days is refused naming the bound, a long one runs in steps while the venue answers, and
//! numbers that would overflow are refused before any arithmetic; the journal's archive
//! (issue 37) writes only its segments, whatever is sent to it.

use std::time::{Duration, Instant};

use perpsim_tests::{START, Server, living, manual};
use serde_json::{Value, json};

fn advance(server: &Server, body: Value) -> perpsim_tests::Resp {
    server.admin("POST", "/admin/v1/clock/advance", Some(body))
}

/// D3: one advance spans at most 366 days, by `seconds` or by `to`; beyond it is a 400
/// naming the bound, and the clock has not moved. On main `{"seconds":100000000}` was
/// accepted and the venue answered no signed request for as long as it ran.
#[test]
fn an_advance_beyond_366_days_is_refused_naming_the_bound() {
    let server = manual();
    for body in [
        json!({"seconds": 100_000_000}),
        json!({"seconds": 31_622_401}),
        json!({"to": "2027-01-02T00:00:00.001Z"}),
        json!({"seconds": i64::MAX}),
    ] {
        let message = advance(&server, body.clone()).assert_error(400, "VALIDATION_ERROR");
        assert!(message.contains("366 days"), "{body}: {message}");
    }
    let clock = server.admin("GET", "/admin/v1/clock", None).json();
    assert_eq!(clock["now"], "2026-01-01T00:00:00.000Z");
}

/// D3: a long advance runs in journaled steps of at most an hour: while twelve hours of the
/// living market pass, signed reads are answered meanwhile, each within a third of the whole
/// advance (one that waited for the advance would take all of it), more of them than there
/// are steps (a read's nonce goes to the journal's writer, so it no longer waits for the step
/// being applied: one read a step is what that wait allowed), and the clock is seen between
/// its ends; the advance ends where it was asked to. The bounds are the advance's own, not a
/// wall-clock figure, so a slow or busy machine does not fail it: on a 2-core CI machine a
/// debug build's step of the living market took over a second.
#[test]
fn a_long_advance_runs_in_steps_and_the_venue_answers_meanwhile() {
    let server = living(&[]);
    let c = server.demo();
    let url = server.url.clone();
    let token = server.admin_token();
    let began = Instant::now();
    let advancing = std::thread::spawn(move || {
        let r = perpsim_tests::raw(
            "POST",
            &format!("{url}/admin/v1/clock/advance"),
            &[
                ("Authorization", &format!("Bearer {token}")),
                ("Content-Type", "application/json"),
            ],
            br#"{"seconds":43200}"#,
        );
        (r.status, r.json())
    });
    let mut slowest = Duration::ZERO;
    let mut between = Vec::new();
    while !advancing.is_finished() {
        let started = Instant::now();
        assert_eq!(c.send("GET", "/v1/instruments", None).status, 200);
        slowest = slowest.max(started.elapsed());
        let now = server.admin("GET", "/admin/v1/clock", None).json()["now"].clone();
        between.push(now);
        std::thread::sleep(Duration::from_millis(50));
    }
    let whole = began.elapsed();
    let (status, clock) = advancing.join().unwrap();
    assert_eq!(status, 200, "{clock}");
    assert_eq!(clock["now"], "2026-01-01T12:00:00.000Z");
    let inside = between
        .iter()
        .filter(|t| *t != &json!("2026-01-01T00:00:00.000Z") && *t != &clock["now"])
        .count();
    assert!(
        inside > 0,
        "no instant between the ends was seen: {between:?}"
    );
    let answered = between.len();
    assert!(
        answered > 12 && slowest * 3 < whole,
        "{answered} signed reads answered while the advance ran for {whole:?}, the slowest \
         waited {slowest:?}"
    );
}

/// Issue 35 item 5: numbers that would overflow are refused with 400 before any
/// arithmetic: a fault rate of 1e23 (on main: `Multiplication overflowed`, the connection
/// dropped unanswered), prices of a trillion or with more than 10 decimals; and the venue
/// answers afterwards.
#[test]
fn numbers_that_would_overflow_are_refused_before_any_arithmetic() {
    let server = Server::start(&["--clock", "manual", "--start", START]);
    for rate in [
        json!("100000000000000000000000"),
        json!(1e23),
        json!("79228162514264337593543950335"),
    ] {
        let plan = json!({"channel": [{"kind": "drop", "rate": rate}]});
        let r = server.admin("PUT", "/admin/v1/faults", Some(plan));
        let message = r.assert_error(400, "VALIDATION_ERROR");
        assert!(message.contains("channel[0].rate"), "{rate}: {message}");
    }
    let price = "/admin/v1/instruments/BTC-USDC-PERP/price";
    for index in [
        "1000000000000",
        "79228162514264337593543950335",
        "0.00000000001",
    ] {
        let r = server.admin("PUT", price, Some(json!({"index_price": index})));
        let message = r.assert_error(400, "VALIDATION_ERROR");
        assert!(message.contains("index_price"), "{index}: {message}");
    }
    let r = server.admin("PUT", price, Some(json!({"index_price": "999999999999.9"})));
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(server.admin("GET", "/admin/v1/clock", None).status, 200);
}

/// Issue 37 (the journal's archive): the archive call takes no input, so what an abuser can
/// try is calling it without the token, with a hostile body, or in a burst. Without the token
/// it is refused and writes nothing; a body is not read (one past the 64 KiB bound is refused
/// first); a burst of concurrent calls moves each tick once, into contiguous segments, and
/// nothing but segments lands anywhere; a replay from genesis still reaches the state.
#[test]
fn archive_calls_without_the_token_with_a_hostile_body_or_in_a_burst_write_only_segments() {
    let data = tempfile::tempdir().unwrap();
    let mut server = Server::start_in(data.path(), &["--snapshot-every", "3"]);
    let broker = server.demo();
    for i in 0..40 {
        broker.create_customer(Some(&format!("a{i}")));
    }
    let before: Vec<String> = entries(data.path());
    let url = format!("{}/admin/v1/journal/archive", server.url);
    let refused = perpsim_tests::raw("POST", &url, &[], b"");
    assert_eq!(refused.status, 401, "{}", refused.text);
    assert!(!data.path().join("journal-archive").exists());

    let auth = format!("Bearer {}", server.admin_token());
    let headers = [
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
    ];
    let aimed = br#"{"dir":"../../outside","file":"/etc/passwd","first_tick":0}"#;
    let r = perpsim_tests::raw("POST", &url, &headers, aimed);
    assert_eq!(r.status, 200, "{}", r.text);
    let oversized = vec![b'x'; 65 * 1024];
    let r = perpsim_tests::raw("POST", &url, &headers, &oversized);
    assert_eq!(r.status, 413, "{}", r.text);

    for i in 40..80 {
        broker.create_customer(Some(&format!("a{i}")));
    }
    let burst: Vec<_> = (0..8)
        .map(|_| {
            let (url, auth) = (url.clone(), auth.clone());
            std::thread::spawn(move || {
                (0..4)
                    .map(|_| {
                        let r = perpsim_tests::raw("POST", &url, &[("Authorization", &auth)], b"");
                        assert_eq!(r.status, 200, "{}", r.text);
                        r.json()
                    })
                    .collect::<Vec<Value>>()
            })
        })
        .collect();
    let mut moved: Vec<(u64, u64)> = burst
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .filter(|a| !a["segment"].is_null())
        .map(|a| {
            let s = &a["segment"];
            (
                s["first_tick"].as_u64().unwrap(),
                s["last_tick"].as_u64().unwrap(),
            )
        })
        .collect();
    moved.sort();
    assert!(!moved.is_empty());
    for pair in moved.windows(2) {
        assert_eq!(pair[1].0, pair[0].1 + 1, "each tick moved once: {moved:?}");
    }

    let mut after = entries(data.path());
    after.retain(|e| !before.contains(e));
    assert_eq!(
        after,
        vec!["journal-archive".to_owned()],
        "only the archive's folder is new"
    );
    for segment in entries(&data.path().join("journal-archive")) {
        assert!(
            segment.starts_with("ticks-") && segment.ends_with(".gz"),
            "{segment}"
        );
    }
    let (_, _, hash) = server.state();
    assert!(server.terminate().success());
    assert_eq!(perpsim_tests::replay_hash(data.path()), hash);
}

fn entries(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
