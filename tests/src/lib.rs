//! Black-box harness: starts the real `perpsim` binary on loopback in a fresh data dir and
//! talks to it over HTTP, signing requests as a broker SDK would (D2).

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::pkcs8::DecodePrivateKey;
use ed25519_dalek::{Signer, SigningKey};
use serde_json::{Value, json};

pub mod campaign;
pub mod layers;
pub mod replay;
pub mod schema;
pub mod sockets;
pub mod ws;

/// A fixed manual-clock start for reproducible runs: 2026-01-01T00:00:00Z.
pub const START: &str = "2026-01-01T00:00:00Z";

/// The `perpsim` binary of this run's profile, built fresh (see [`built`]).
pub fn binary() -> PathBuf {
    built("perpsim")
}

/// The `perpsim` binary as a command, its engine checking itself (`PERPSIM_AUDIT=on`): a
/// release build's audit is off unless asked for, and a test run asks.
pub fn command() -> Command {
    let mut command = Command::new(binary());
    command.env("PERPSIM_AUDIT", "on");
    command
}

/// The binary `bin` of this executable's profile (`target/<profile>/`, beside a tool or one
/// folder above a test), brought up to date by cargo the first time a process asks:
/// `cargo test -p perpsim-tests` builds no other package's binary, and a black-box test must
/// never pass against yesterday's. Cargo is asked exactly what `cargo test --workspace`
/// builds (`--no-run`), so after that command it has nothing to do, and it resolves the
/// dependencies' features as that command does (a build of one package resolves them
/// differently, and would compile the dependencies a second time). Panics, with cargo's own
/// message above, if the workspace does not build.
pub fn built(bin: &str) -> PathBuf {
    static BUILT: OnceLock<()> = OnceLock::new();
    let exe = std::env::current_exe().expect("executable path");
    let mut profile_dir = exe.parent().expect("target/<profile>");
    if profile_dir.ends_with("deps") {
        profile_dir = profile_dir.parent().expect("target/<profile>");
    }
    BUILT.get_or_init(|| build_workspace(profile_dir));
    let path = profile_dir.join(bin);
    assert!(
        path.exists(),
        "cargo built the workspace, yet {} is missing",
        path.display()
    );
    path
}

/// `cargo test --workspace --no-run` in the profile whose folder is `profile_dir`.
fn build_workspace(profile_dir: &Path) {
    // `debug/` holds what a plain `cargo test` builds: no flag, so cargo picks its profiles
    // as that command does.
    let profile: &[&str] = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => &[],
        Some(name) => &["--profile", name],
        None => panic!("no profile folder at {}", profile_dir.display()),
    };
    let target_dir = profile_dir.parent().expect("target");
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    // Under cargo, the same cargo; a tool run by hand, the one on the PATH.
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(&cargo)
        .args(["test", "--quiet", "--workspace", "--no-run"])
        .args(profile)
        .arg("--manifest-path")
        .arg(&workspace)
        .arg("--target-dir")
        .arg(target_dir)
        .stdout(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("cannot run {cargo:?} to build the workspace: {e}"));
    assert!(status.success(), "the workspace does not build: {status}");
}

pub fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

pub struct Server {
    child: Option<Child>,
    pub url: String,
    pub data_dir: PathBuf,
    _temp: Option<tempfile::TempDir>,
    logs: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// Starts a server in a new temporary data dir with extra `serve` flags.
    pub fn start(flags: &[&str]) -> Server {
        let temp = tempfile::tempdir().unwrap();
        let mut server = Server::start_in(temp.path(), flags);
        server._temp = Some(temp);
        server
    }

    /// Starts a server on `data_dir` (kept by the caller, e.g. across restarts). Unless the
    /// flags say otherwise, the venue is quiet — fixed prices, no market maker — so a test
    /// of the trading core sees only its own orders; the living market's tests turn it on.
    pub fn start_in(data_dir: &Path, flags: &[&str]) -> Server {
        Server::launch(command(), data_dir, flags)
    }

    /// Like [`Server::start_in`], with the process's umask set to `umask` first (what an
    /// operator's shell may hand it).
    pub fn start_under_umask(data_dir: &Path, flags: &[&str], umask: u32) -> Server {
        let mut shell = Command::new("sh");
        shell
            .arg("-c")
            .arg(format!("umask {umask:03o} && exec \"$0\" \"$@\""))
            .arg(binary());
        Server::launch(shell, data_dir, flags)
    }

    fn launch(mut command: Command, data_dir: &Path, flags: &[&str]) -> Server {
        let mut quiet = Vec::new();
        if !flags.contains(&"--market-maker") {
            quiet.extend(["--market-maker", "off"]);
        }
        if !flags.contains(&"--price-feed") {
            quiet.extend(["--price-feed", "fixed"]);
        }
        let mut child = command
            .arg("serve")
            .args(["--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir)
            .args(quiet)
            .args(flags)
            .env("PERPSIM_LOG", "info")
            .env("PERPSIM_AUDIT", "on")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start perpsim");
        let logs = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        let sink = logs.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(addr) = line.split("address=http://").nth(1) {
                    let _ = tx.send(addr.trim().to_owned());
                }
                sink.lock().unwrap().push(line);
            }
        });
        let addr = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(addr) => addr,
            Err(_) => {
                let _ = child.kill();
                panic!(
                    "perpsim did not start:\n{}",
                    logs.lock().unwrap().join("\n")
                );
            }
        };
        Server {
            child: Some(child),
            url: format!("http://{addr}"),
            data_dir: data_dir.to_owned(),
            _temp: None,
            logs,
        }
    }

    /// A handle on a server another handle started (for a second thread): it stops nothing
    /// when dropped.
    pub fn at(url: &str) -> Server {
        Server {
            child: None,
            url: url.to_owned(),
            data_dir: PathBuf::new(),
            _temp: None,
            logs: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// The server's resident memory now, in bytes (`VmRSS` of `/proc/<pid>/status`).
    pub fn rss(&self) -> u64 {
        let pid = self.child.as_ref().expect("running").id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS in /proc/<pid>/status");
        kib * 1024
    }

    pub fn logs(&self) -> String {
        self.logs.lock().unwrap().join("\n")
    }

    pub fn demo_key(&self) -> SigningKey {
        let pem = std::fs::read_to_string(self.data_dir.join("demo-broker.key")).unwrap();
        SigningKey::from_pkcs8_pem(&pem).unwrap()
    }

    pub fn demo(&self) -> Client {
        Client {
            url: self.url.clone(),
            key: self.demo_key(),
        }
    }

    /// `GET /admin/v1/state`: `(ticks, commands, state_hash)`.
    pub fn state(&self) -> (u64, u64, String) {
        let s = self.admin("GET", "/admin/v1/state", None).json();
        (
            s["ticks"].as_u64().unwrap(),
            s["commands"].as_u64().unwrap(),
            s["state_hash"].as_str().unwrap().to_owned(),
        )
    }

    pub fn admin_token(&self) -> String {
        std::fs::read_to_string(self.data_dir.join("admin.token"))
            .unwrap()
            .trim()
            .to_owned()
    }

    /// An admin API request with the right token.
    pub fn admin(&self, method: &str, path: &str, body: Option<Value>) -> Resp {
        let auth = format!("Bearer {}", self.admin_token());
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        raw(
            method,
            &format!("{}{path}", self.url),
            &[
                ("Authorization", &auth),
                ("Content-Type", "application/json"),
            ],
            body.as_bytes(),
        )
    }

    /// Registers a new broker with a fresh key and returns its signed client.
    pub fn new_broker(&self, name: &str) -> Client {
        let key = SigningKey::from_bytes(&random_bytes());
        let public = STANDARD.encode(key.verifying_key().as_bytes());
        let r = self.admin(
            "POST",
            "/admin/v1/brokers",
            Some(serde_json::json!({"name": name, "public_key": public})),
        );
        assert_eq!(r.status, 201, "{}", r.text);
        Client {
            url: self.url.clone(),
            key,
        }
    }

    /// SIGKILL: no shutdown, no final snapshot.
    pub fn kill9(&mut self) {
        let mut child = self.child.take().expect("running");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// SIGTERM and wait for the clean exit.
    pub fn terminate(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        signal(&child, libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "perpsim did not stop on SIGTERM:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[allow(unsafe_code)]
fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: kill(2) with the pid of a child we spawned and still own.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, sig) };
    assert_eq!(rc, 0, "kill failed");
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub fn random_bytes() -> [u8; 32] {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b).unwrap();
    b
}

/// An HTTP answer.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub text: String,
    pub headers: Vec<(String, String)>,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Asserts the D4 error body: exactly `code` and `message`, JSON, with a Date header.
    pub fn assert_error(&self, status: u16, code: &str) -> String {
        assert_eq!(self.status, status, "{}", self.text);
        let body = self.json();
        let obj = body.as_object().expect("error body is an object");
        assert_eq!(obj.len(), 2, "exactly code and message: {body}");
        assert_eq!(body["code"], code, "{body}");
        assert!(
            self.header("content-type")
                .unwrap_or("")
                .starts_with("application/json")
        );
        assert!(
            self.header("date").is_some(),
            "Date header on every response"
        );
        body["message"].as_str().unwrap().to_owned()
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into()
}

/// Sends a request with exactly the given headers and body.
pub fn raw(method: &str, url: &str, headers: &[(&str, &str)], body: &[u8]) -> Resp {
    try_raw(method, url, headers, body).unwrap_or_else(|e| panic!("{method} {url}: {e}"))
}

/// Like [`raw`], but a transport failure (server gone) is an `Err`, not a panic.
pub fn try_raw(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<Resp, ureq::Error> {
    let mut req = ureq::http::Request::builder().method(method).uri(url);
    for (n, v) in headers {
        req = req.header(*n, *v);
    }
    let mut resp = agent().run(req.body(body.to_vec()).unwrap())?;
    let headers = resp
        .headers()
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or("").to_owned()))
        .collect();
    let text = resp.body_mut().read_to_string()?;
    Ok(Resp {
        status: resp.status().as_u16(),
        text,
        headers,
    })
}

/// A broker's signed client.
#[derive(Clone)]
pub struct Client {
    pub url: String,
    pub key: SigningKey,
}

impl Client {
    pub fn public_key(&self) -> String {
        STANDARD.encode(self.key.verifying_key().as_bytes())
    }

    pub fn signature(&self, nonce: &str, method: &str, path: &str, body: &[u8]) -> String {
        let mut msg = format!("{nonce}\n{method}\n{path}\n").into_bytes();
        msg.extend_from_slice(body);
        STANDARD.encode(self.key.sign(&msg).to_bytes())
    }

    /// A correctly signed request with a fresh nanosecond nonce.
    pub fn send(&self, method: &str, path: &str, body: Option<Value>) -> Resp {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        self.send_with_nonce(method, path, body.as_bytes(), &now_ns().to_string())
    }

    pub fn send_with_nonce(&self, method: &str, path: &str, body: &[u8], nonce: &str) -> Resp {
        self.try_send_with_nonce(method, path, body, nonce)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    pub fn try_send_with_nonce(
        &self,
        method: &str,
        path: &str,
        body: &[u8],
        nonce: &str,
    ) -> Result<Resp, ureq::Error> {
        let sig = self.signature(nonce, method, path, body);
        let pk = self.public_key();
        let mut headers = vec![
            ("X-Public-Key", pk.as_str()),
            ("X-Nonce", nonce),
            ("X-Signature", sig.as_str()),
        ];
        if !body.is_empty() {
            headers.push(("Content-Type", "application/json"));
        }
        try_raw(method, &format!("{}{path}", self.url), &headers, body)
    }

    pub fn create_customer(&self, external_id: Option<&str>) -> Value {
        let r = self.send(
            "POST",
            "/v1/customers",
            Some(serde_json::json!({ "external_id": external_id })),
        );
        assert_eq!(r.status, 201, "{}", r.text);
        r.json()
    }
}

/// Runs `perpsim` with `args`: (exit code, stdout, stderr).
pub fn perpsim(args: &[&str]) -> (i32, String, String) {
    let out = command()
        .args(args)
        .env("PERPSIM_LOG", "warn")
        .output()
        .expect("run perpsim");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `perpsim` with `args`, which must end refused within a minute (a `serve` that is
/// not refused would serve for ever): its stderr.
pub fn refused_within_a_minute(args: &[&str]) -> String {
    let mut child = command()
        .args(args)
        .env("PERPSIM_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run perpsim");
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("{args:?} was not refused: it served");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(!status.success(), "{args:?} must be refused: {err}");
    err
}

/// `perpsim replay --journal` on a stopped server's data dir: the final state hash.
pub fn replay_hash(data_dir: &Path) -> String {
    let journal = data_dir.join("journal.redb");
    let (code, stdout, stderr) = perpsim(&["replay", "--journal", journal.to_str().unwrap()]);
    assert_eq!(code, 0, "replay failed: {stdout}{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        report["snapshots_mismatched"],
        serde_json::json!([]),
        "{report}"
    );
    report["state_hash"].as_str().unwrap().to_owned()
}

/// The value of a counter or gauge on the server's `/metrics`.
/// A metric's value at `/metrics`: the sum of its series over every label set (0 while a
/// labelled metric has no series yet).
pub fn metric(server: &Server, name: &str) -> u64 {
    let text = raw("GET", &format!("{}/metrics", server.url), &[], b"").text;
    text.lines()
        .filter(|l| l.starts_with(&format!("{name} ")) || l.starts_with(&format!("{name}{{")))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap() as u64)
        .sum()
}

/// A server on the manual clock at [`START`].
pub fn manual() -> Server {
    Server::start(&["--clock", "manual", "--start", crate::START])
}

/// A server on the manual clock at [`START`] with the living market (the market maker and
/// the random walk on), and any `extra` flags.
pub fn living(extra: &[&str]) -> Server {
    let mut flags = vec!["--clock", "manual", "--start", crate::START];
    flags.extend(["--market-maker", "on", "--price-feed", "random-walk"]);
    flags.extend(extra);
    Server::start(&flags)
}

pub fn customer(c: &Client) -> String {
    c.create_customer(None)["customer_code"]
        .as_str()
        .unwrap()
        .to_owned()
}

pub fn transfer(c: &Client, code: &str, kind: &str, body: Value) -> crate::Resp {
    c.send("POST", &format!("/v1/customers/{code}/{kind}"), Some(body))
}

pub fn advance(server: &Server, seconds: i64) {
    let r = server.admin(
        "POST",
        "/admin/v1/clock/advance",
        Some(json!({"seconds": seconds})),
    );
    assert_eq!(r.status, 200, "{}", r.text);
}

/// A new customer holding `amount` of `asset`, its deposit completed.
pub fn funded(server: &Server, c: &Client, asset: &str, amount: &str) -> String {
    let code = customer(c);
    let r = transfer(
        c,
        &code,
        "deposits",
        json!({"asset": asset, "amount": amount}),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    advance(server, 1);
    code
}
