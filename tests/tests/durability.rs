//! The journal's promise: an acknowledged command survives `kill -9`, recovery reaches the
//! state a fresh replay of the journal reaches, and the same seed with the same commands
//! gives the same ids and the same state hash.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use perpsim_tests::{START, Server, advance, metric, now_ns, replay_hash};
use serde_json::json;

fn random_below(n: u64) -> u64 {
    u64::from_le_bytes(perpsim_tests::random_bytes()[..8].try_into().unwrap()) % n
}

#[test]
fn every_acknowledged_command_survives_kill_9_and_recovery_equals_a_fresh_replay() {
    let dir = tempfile::tempdir().unwrap();
    // Small snapshot interval, so recovery exercises snapshot + tail replay.
    let flags = ["--snapshot-every", "25"];
    let acknowledged = Arc::new(Mutex::new(Vec::<String>::new()));
    for round in 0..4 {
        let mut server = Server::start_in(dir.path(), &flags);
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let (client, stop, acked) = (server.demo(), stop.clone(), acknowledged.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let body = json!({"external_id": format!("r{round}w{w}")}).to_string();
                        // Four writers share one key: two of them reading the same nanosecond
                        // would reuse a nonce (401), so each keeps to its own residue mod 4.
                        let nonce = now_ns() / 4 * 4 + w as u128;
                        match client.try_send_with_nonce(
                            "POST",
                            "/v1/customers",
                            body.as_bytes(),
                            &nonce.to_string(),
                        ) {
                            Ok(r) if r.status == 201 => acked
                                .lock()
                                .unwrap()
                                .push(r.json()["customer_code"].as_str().unwrap().to_owned()),
                            Ok(r) => assert!(
                                r.status >= 500 || r.status == 429,
                                "unexpected answer {}: {}",
                                r.status,
                                r.text
                            ),
                            Err(_) => return, // the server is gone
                        }
                    }
                })
            })
            .collect();
        // The kill comes at a random moment once the round has done some work, however busy
        // the machine (a fixed window saw almost nothing acknowledged under load).
        let before = acknowledged.lock().unwrap().len();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while acknowledged.lock().unwrap().len() < before + 8 {
            assert!(std::time::Instant::now() < deadline, "no progress in 30 s");
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(random_below(300)));
        server.kill9();
        stop.store(true, Ordering::Relaxed);
        for w in writers {
            w.join().unwrap();
        }
    }
    let acked = acknowledged.lock().unwrap().clone();
    assert!(
        acked.len() > 20,
        "the writers got work done: {}",
        acked.len()
    );
    // The check reads every acknowledged customer back: more than one key's rate limit admits
    // when the writers were fast, and the rate limit is not what this test is about.
    let mut check_flags = flags.to_vec();
    check_flags.extend(["--rate-limit", "100000", "--rate-burst", "100000"]);
    let mut server = Server::start_in(dir.path(), &check_flags);
    let client = server.demo();
    for code in &acked {
        let r = client.send("GET", &format!("/v1/customers/{code}"), None);
        assert_eq!(
            r.status, 200,
            "acknowledged customer {code} was lost: {}",
            r.text
        );
    }
    let (_, commands, live_hash) = server.state();
    assert!(
        commands > acked.len() as u64,
        "the demo broker plus every acknowledged customer"
    );
    assert!(server.terminate().success());
    assert_eq!(
        replay_hash(dir.path()),
        live_hash,
        "recovery and a fresh replay reach the same state"
    );
}

/// Runs a fixed script of commands against a fresh manual-clock server with `seed`, reusing
/// the demo key from `key_from` so both runs register the same broker key.
fn scripted_run(
    seed: &str,
    key_from: Option<&std::path::Path>,
) -> (tempfile::TempDir, Vec<String>, String) {
    let dir = tempfile::tempdir().unwrap();
    if let Some(src) = key_from {
        std::fs::copy(
            src.join("demo-broker.key"),
            dir.path().join("demo-broker.key"),
        )
        .unwrap();
    }
    let mut server = Server::start_in(
        dir.path(),
        &[
            "--clock",
            "manual",
            "--start",
            perpsim_tests::START,
            "--seed",
            seed,
        ],
    );
    let client = server.demo();
    let mut codes = Vec::new();
    for i in 0..12 {
        let code = client.create_customer(Some(&format!("c{i}")))["customer_code"]
            .as_str()
            .unwrap()
            .to_owned();
        // Money moves too: a deposit, and once it has completed a withdrawal still pending.
        let deposit = json!({"asset": "USDC", "amount": format!("{}.25", 100 + i)});
        assert_eq!(
            client
                .send(
                    "POST",
                    &format!("/v1/customers/{code}/deposits"),
                    Some(deposit)
                )
                .status,
            201
        );
        server.admin(
            "POST",
            "/admin/v1/clock/advance",
            Some(json!({"seconds": 2})),
        );
        let withdrawal = json!({"asset": "USDC", "amount": "10.5"});
        assert_eq!(
            client
                .send(
                    "POST",
                    &format!("/v1/customers/{code}/withdrawals"),
                    Some(withdrawal)
                )
                .status,
            201
        );
        codes.push(code);
        if i % 4 == 0 {
            server.admin(
                "POST",
                "/admin/v1/clock/advance",
                Some(json!({"seconds": 3_700})),
            );
            server.admin(
                "PUT",
                "/admin/v1/instruments/SOL-USDC-PERP/price",
                Some(json!({"index_price": format!("15{i}.5")})),
            );
        }
    }
    let (_, _, hash) = server.state();
    assert!(server.terminate().success());
    (dir, codes, hash)
}

#[test]
fn two_fresh_runs_with_the_same_seed_and_commands_end_with_the_same_ids_and_hash() {
    let (first_dir, first_codes, first_hash) = scripted_run("42", None);
    let (_second_dir, second_codes, second_hash) = scripted_run("42", Some(first_dir.path()));
    assert_eq!(first_codes, second_codes);
    assert_eq!(first_hash, second_hash);
    let (_third_dir, third_codes, third_hash) = scripted_run("43", Some(first_dir.path()));
    assert_ne!(third_codes, first_codes, "ids come from the seed");
    assert_ne!(third_hash, first_hash);
    assert_eq!(replay_hash(first_dir.path()), first_hash);
}

/// Issue 28 and D1: what a data dir fixed at creation (seed, the manual clock's start, clock
/// mode, the living market) is never silently dropped: a restart asking for something else
/// is refused with what to do, and one that leaves the settings out goes on with the dir's.
#[test]
fn a_restart_that_contradicts_the_data_dir_is_refused_saying_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let created = ["--seed", "1", "--clock", "manual", "--start", START];
    let mut server = Server::start_in(dir.path(), &created);
    advance(&server, 90);
    assert!(server.terminate().success());
    let refused = [
        (&["--seed", "2"][..], "created with seed 1"),
        (
            &["--clock", "manual", "--start", "2027-01-01T00:00:00Z"],
            "began at 2026-01-01T00:00:00.000Z",
        ),
        (&["--clock", "realtime"], "runs the manual clock"),
        (&["--volatility", "0.9"], "keeps the market settings"),
    ];
    for (flags, says) in refused {
        let data_dir = dir.path().to_str().unwrap();
        let mut args = vec!["serve", "--listen", "127.0.0.1:0", "--data-dir", data_dir];
        args.extend(flags);
        let (code, _, stderr) = perpsim_tests::perpsim(&args);
        assert_eq!(code, 2, "{flags:?}: {stderr}");
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
        assert!(
            stderr.contains("leave") && stderr.contains("new data dir"),
            "{stderr}"
        );
    }
    // The same settings again, or none: the dir goes on where its manual clock stood.
    for flags in [&created[..], &[][..]] {
        let mut server = Server::start_in(dir.path(), flags);
        let clock = server.admin("GET", "/admin/v1/clock", None).json();
        assert_eq!(clock["mode"], "manual", "{flags:?}");
        assert_eq!(clock["now"], "2026-01-01T00:01:30.000Z", "{flags:?}");
        assert!(server.terminate().success());
    }
}

/// A quiet venue snapshots on simulation time: once `--snapshot-interval` has passed since
/// the last snapshot, however few commands came, so a restart replays at most that span.
#[test]
fn a_quiet_venue_snapshots_on_simulation_time_and_recovers_from_it() {
    let dir = tempfile::tempdir().unwrap();
    let flags = [
        "--clock",
        "manual",
        "--start",
        START,
        "--snapshot-interval",
        "60",
    ];
    let mut server = Server::start_in(dir.path(), &flags);
    let snapshots = |server: &Server| metric(server, "perpsim_snapshots_total");
    let before = snapshots(&server);
    advance(&server, 59);
    assert_eq!(snapshots(&server), before, "59 s is inside the interval");
    advance(&server, 1);
    // The reply comes before the snapshot is written: wait for it.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while snapshots(&server) == before {
        assert!(std::time::Instant::now() < deadline, "no snapshot at 60 s");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(snapshots(&server), before + 1, "one snapshot, two commands");
    let (ticks, _, hash) = server.state();
    server.kill9();
    let server = Server::start_in(dir.path(), &flags);
    let logs = server.logs();
    assert!(
        logs.contains(&format!("snapshot_tick={ticks}")) && logs.contains("replayed_ticks=0"),
        "recovery starts from the snapshot at tick {ticks}: {logs}"
    );
    assert_eq!(server.state().2, hash);
}

/// Issue 37 (disk, too, is managed): the ticks no kept snapshot needs move out of the journal
/// file into the archive beside it, by the admin API and the CLI; the server restarts from its
/// snapshot without the archive, and `replay --journal` still reads every tick from genesis
/// to the server's state hash.
#[test]
fn archived_ticks_leave_the_journal_and_a_replay_still_reads_them_from_genesis() {
    let data = tempfile::tempdir().unwrap();
    // The manual clock: on the realtime one, a whole minute passing between the state read
    // and the restart fires a funding sample at start, and the hashes differ by it.
    let flags = [
        "--snapshot-every",
        "5",
        "--clock",
        "manual",
        "--start",
        START,
    ];
    let mut server = Server::start_in(data.path(), &flags);
    let broker = server.demo();
    let early: Vec<String> = (0..30)
        .map(|i| broker.create_customer(Some(&format!("early{i}")))["customer_code"].to_string())
        .collect();
    let answer = server.admin("POST", "/admin/v1/journal/archive", None);
    assert_eq!(answer.status, 200, "{}", answer.text);
    let first = answer.json();
    let segment = &first["segment"];
    assert_eq!(segment["first_tick"], 1, "{first}");
    let through = segment["last_tick"].as_u64().unwrap();
    assert!(
        through > 20,
        "the ticks before the older kept snapshot: {first}"
    );
    assert_eq!(first["archived_through"], through);
    assert_eq!(first["remaining_ticks"], 0);
    let file = data.path().join(segment["file"].as_str().unwrap());
    assert!(
        segment["file"]
            .as_str()
            .unwrap()
            .starts_with("journal-archive/")
    );
    assert_eq!(std::fs::metadata(&file).unwrap().len(), segment["bytes"]);
    assert_eq!(
        metric(&server, "perpsim_journal_archive_bytes"),
        first["archive_bytes"].as_u64().unwrap()
    );
    let again = server
        .admin("POST", "/admin/v1/journal/archive", None)
        .json();
    assert_eq!(
        again["segment"],
        serde_json::Value::Null,
        "nothing older is left"
    );

    for i in 0..30 {
        broker.create_customer(Some(&format!("late{i}")));
    }
    let token = server.admin_token();
    let (code, stdout, stderr) = perpsim_tests::perpsim(&[
        "admin",
        "--url",
        &server.url,
        "--token",
        &token,
        "archive-journal",
        "--all",
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!("\"first_tick\": {}", through + 1)),
        "{stdout}"
    );
    let (_, _, hash) = server.state();
    assert!(server.terminate().success());
    assert_eq!(
        replay_hash(data.path()),
        hash,
        "from genesis, through the archive"
    );

    // Recovery needs only the newest snapshot and the ticks after it.
    let moved = data.path().join("moved-away");
    std::fs::rename(data.path().join("journal-archive"), &moved).unwrap();
    let server = Server::start_in(data.path(), &flags);
    assert_eq!(server.state().2, hash);
    let path = format!("/v1/customers/{}", early[0].trim_matches('"'));
    assert_eq!(server.demo().send("GET", &path, None).status, 200);
    // Archiving goes on with the old segments elsewhere.
    let next = server.admin("POST", "/admin/v1/journal/archive", None);
    assert_eq!(next.status, 200, "{}", next.text);
}

/// Issue 37: an ended order is read from the journal's projection, committed with the tick
/// that ended it, so a read answers it after `kill -9` and a restart exactly as before; the
/// data dir of a scenario replay, journaled without it, is projected whole when served.
#[test]
fn an_ended_order_reads_the_same_after_kill_9_and_a_replays_data_dir_is_projected_when_served() {
    let data = tempfile::tempdir().unwrap();
    let flags = ["--clock", "manual", "--start", START];
    let mut server = Server::start_in(data.path(), &flags);
    let broker = server.demo();
    let code = perpsim_tests::funded(&server, &broker, "USDC", "100000");
    let orders = format!("/v1/customers/{code}/orders");
    let place = |price: &str| {
        let body = json!({"symbol": "BTC-USDC-PERP", "reference_id": "a", "side": "buy",
                          "type": "limit", "amount": "0.01", "limit_price": price});
        let r = broker.send("POST", &orders, Some(body));
        assert_eq!(r.status, 201, "{}", r.text);
    };
    let cancel = || {
        let r = broker.send("DELETE", &format!("{orders}/a"), None);
        assert_eq!(r.status, 200, "{}", r.text);
    };
    place("50000");
    cancel();
    let first = broker.send("GET", &format!("{orders}/a"), None);
    assert_eq!(first.status, 200, "{}", first.text);
    assert_eq!(
        (&first.json()["status"], &first.json()["limit_price"]),
        (&json!("canceled"), &json!("50000.0"))
    );
    place("49000");
    cancel();
    let latest = broker.send("GET", &format!("{orders}/a"), None).json();
    assert_eq!(
        latest["limit_price"], "49000.0",
        "the latest under the reference"
    );
    let missing = broker.send("GET", &format!("{orders}/never"), None);
    missing.assert_error(404, "NOT_FOUND");
    // The ended orders' digest, which the journal's writer computes while serving, is the one
    // a recovery from the journal computes on the engine thread.
    let (_, _, live_hash) = server.state();

    server.kill9();
    let server = Server::start_in(data.path(), &flags);
    assert_eq!(server.state().2, live_hash, "the same state after kill -9");
    let broker = server.demo();
    let after = broker.send("GET", &format!("{orders}/a"), None);
    assert_eq!(after.json(), latest, "read back unchanged after kill -9");
    // A cancel names the latest's status from the projection: the engine keeps nothing of it.
    let again = broker.send("DELETE", &format!("{orders}/a"), None);
    let message = again.assert_error(409, "ORDER_NOT_CANCELLABLE");
    let status = latest["status"].as_str().unwrap();
    assert_eq!(
        message,
        format!("order a is {status} and cannot be cancelled")
    );
    broker
        .send("GET", &format!("{orders}/never"), None)
        .assert_error(404, "NOT_FOUND");
    broker
        .send("DELETE", &format!("{orders}/never"), None)
        .assert_error(404, "NOT_FOUND");
    drop(server);

    // A scenario replay journals without the projection; serving its data dir projects it.
    let examples = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let dir = examples.path().to_str().unwrap();
    let (code, stdout, stderr) = perpsim_tests::perpsim(&["scenario", "examples", "--out", dir]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let scenario = examples.path().join("funding-week.yaml");
    let replayed = out.path().join("run");
    let (code, stdout, stderr) = perpsim_tests::perpsim(&[
        "replay",
        scenario.to_str().unwrap(),
        "--out",
        replayed.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let recovered = |server: &Server| {
        let logs = server.logs();
        let line = logs
            .lines()
            .find(|l| l.contains("recovered from the journal"));
        line.unwrap_or_else(|| panic!("{logs}")).to_owned()
    };
    let mut served = Server::start_in(&replayed, &[]);
    let line = recovered(&served);
    assert!(!line.contains("ended_orders_projected=0"), "{line}");
    assert!(served.terminate().success());
    // Projected once: the next start finds it complete.
    let served = Server::start_in(&replayed, &[]);
    let line = recovered(&served);
    assert!(line.contains("ended_orders_projected=0"), "{line}");
}
