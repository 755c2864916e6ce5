//! D1: `perpsim curl` signs with the demo key and reports like curl; keygen and admin work.

use perpsim_tests::{Server, perpsim};

#[test]
fn curl_prints_the_json_answer_and_exits_non_zero_on_http_errors() {
    let server = Server::start(&[]);
    let key = server.data_dir.join("demo-broker.key");
    let key = key.to_str().unwrap();
    let (code, stdout, stderr) = perpsim(&[
        "curl",
        "GET",
        "/v1/instruments?symbol=ETH-*",
        "--url",
        &server.url,
        "--key",
        key,
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("HTTP 200"));
    let body: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(body[0]["symbol"], "ETH-USDC-PERP");
    // Issue 28 item 5: a path without its leading slash means the same path.
    let (code, stdout, stderr) = perpsim(&[
        "curl",
        "GET",
        "v1/instruments?symbol=ETH-*",
        "--url",
        &server.url,
        "--key",
        key,
    ]);
    assert_eq!(code, 0, "{stderr}");
    let same: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(same[0]["symbol"], "ETH-USDC-PERP");
    let (code, stdout, stderr) = perpsim(&[
        "curl",
        "POST",
        "/v1/customers",
        "{\"external_id\":\"via-cli\"}",
        "--url",
        &server.url,
        "--key",
        key,
    ]);
    assert_eq!((code, stderr.contains("HTTP 201")), (0, true), "{stderr}");
    assert!(stdout.contains("via-cli"));
    let (code, stdout, stderr) = perpsim(&[
        "curl",
        "GET",
        "/v1/customers?bogus=1",
        "--url",
        &server.url,
        "--key",
        key,
    ]);
    assert_eq!(code, 1);
    assert!(stderr.contains("HTTP 400") && stdout.contains("VALIDATION_ERROR"));
}

#[test]
fn keygen_writes_an_owner_only_key_that_admin_can_register() {
    use std::os::unix::fs::PermissionsExt;
    let server = Server::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("broker.key");
    let (code, public, _) = perpsim(&["keygen", "--out", key.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let token = server.admin_token();
    let (code, stdout, stderr) = perpsim(&[
        "admin",
        "--url",
        &server.url,
        "--token",
        &token,
        "create-broker",
        "acme",
        public.trim(),
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let (code, _, stderr) = perpsim(&[
        "curl",
        "GET",
        "/v1/customers",
        "--url",
        &server.url,
        "--key",
        key.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
}

/// Issue 28 item 2: a setting given through `PERPSIM_*` is validated as its flag is: garbage
/// refuses the start, naming the flag, rather than being dropped.
#[test]
fn garbage_in_an_environment_variable_refuses_the_start_as_the_flag_would() {
    let dir = tempfile::tempdir().unwrap();
    for (name, value, says) in [
        ("PERPSIM_VOLATILITY", "garbage", "--volatility"),
        ("PERPSIM_MAKER_LEVELS", "garbage", "--maker-levels"),
        ("PERPSIM_MAKER_SIZE", "BTC-USDC-PERP=-1", "--maker-size"),
        ("PERPSIM_CLOCK", "sundial", "--clock"),
        ("PERPSIM_HISTORY_WINDOW", "1000", "--history-window"),
        ("PERPSIM_PROJECTION_BATCH", "2000000", "--projection-batch"),
    ] {
        let out = perpsim_tests::command()
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path().join("data"))
            .env(name, value)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}={value}: {stderr}");
        assert!(stderr.contains(says), "{name}={value}: {stderr}");
        assert!(!dir.path().join("data").exists(), "nothing created: {name}");
    }
}

/// Issue 35, a newcomer's first hour: `perpsim admin` takes its options after the subcommand
/// as `curl` does (on main `admin state --data-dir X` was refused), and a command with
/// nothing listening names the URL it tried and how to change it (on main: only
/// `Connection refused (os error 111)`).
#[test]
fn admin_takes_its_options_after_the_subcommand_and_a_refused_connection_names_the_url() {
    let server = Server::start(&[]);
    let dir = server.data_dir.to_str().unwrap();
    let (code, stdout, stderr) =
        perpsim(&["admin", "state", "--data-dir", dir, "--url", &server.url]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("state_hash"), "{stdout}");
    let nowhere = "http://127.0.0.1:9";
    for args in [
        vec![
            "curl",
            "GET",
            "v1/instruments",
            "--data-dir",
            dir,
            "--url",
            nowhere,
        ],
        vec!["admin", "clock", "--data-dir", dir, "--url", nowhere],
    ] {
        let (code, _, stderr) = perpsim(&args);
        assert_ne!(code, 0);
        assert!(
            stderr.contains(nowhere) && stderr.contains("PERPSIM_URL"),
            "{args:?}: {stderr}"
        );
    }
}

/// Every tool of the workspace: `perpsim` and each bench and test tool in a `src/bin` folder.
fn tools() -> Vec<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut tools = vec!["perpsim".to_owned()];
    for folder in ["benches", "tests"] {
        for entry in std::fs::read_dir(root.join(folder).join("src/bin")).unwrap() {
            let path = entry.unwrap().path();
            tools.push(path.file_stem().unwrap().to_str().unwrap().to_owned());
        }
    }
    tools.sort();
    tools
}

/// Issue 38 item 6: `--help` of every tool prints its usage and exits 0 (two tools panicked
/// on it, their arguments parsed by hand), and an unknown flag is refused with exit 2 and
/// the usage, not a panic.
#[test]
fn every_tool_answers_help_with_its_usage_and_refuses_an_unknown_flag() {
    let tools = tools();
    assert!(tools.len() >= 6, "perpsim and the tools: {tools:?}");
    for bin in tools {
        let path = perpsim_tests::built(&bin);
        let help = std::process::Command::new(&path)
            .arg("--help")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&help.stdout);
        assert!(help.status.success(), "{bin} --help: {help:?}");
        assert!(stdout.contains("Usage:"), "{bin} --help: {stdout}");
        let wrong = std::process::Command::new(&path)
            .arg("--no-such-flag")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&wrong.stderr);
        assert_eq!(wrong.status.code(), Some(2), "{bin}: {stderr}");
        assert!(stderr.contains("Usage:"), "{bin}: {stderr}");
        assert!(!stderr.contains("panicked"), "{bin}: {stderr}");
    }
}

/// Issue 38 item 6: `PERPSIM_AUDIT` (what a test run of a release build sets so its engine
/// checks every invariant) is on or off; anything else refuses every command before it does
/// anything, naming the variable.
#[test]
fn an_audit_switch_other_than_on_or_off_refuses_the_command_before_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("broker.key");
    let out = perpsim_tests::command()
        .env("PERPSIM_AUDIT", "yes")
        .arg("keygen")
        .arg("--out")
        .arg(&key)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("PERPSIM_AUDIT is \"yes\"; it is on or off"),
        "{stderr}"
    );
    assert!(!key.exists(), "nothing ran");
    let out = perpsim_tests::command()
        .arg("keygen")
        .arg("--out")
        .arg(&key)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(key.exists());
}
