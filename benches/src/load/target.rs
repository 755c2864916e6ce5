//! The servers a load run drives, each a child process on loopback: `perpsim serve` (this
//! build or another binary, e.g. an older commit's) or the bare server of [`super::bare`].

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::json;

use super::client::{Auth, Http, public_key, worker_key};

/// What to start.
#[derive(Debug, Clone)]
pub enum Target {
    /// `perpsim serve` from `binary`, realtime clock; `living`: market maker and random walk.
    Perpsim {
        name: String,
        binary: PathBuf,
        living: bool,
    },
    /// The same HTTP stack and signature check answering a constant.
    Bare,
}

impl Target {
    pub fn name(&self) -> &str {
        match self {
            Target::Perpsim { name, .. } => name,
            Target::Bare => "bare server",
        }
    }
}

/// A started server; killed when dropped.
pub struct Running {
    child: Child,
    pub url: String,
    /// The data dir of a perpsim server (removed with it).
    data: Option<tempfile::TempDir>,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One load worker's identity: its broker key and customer.
pub struct Account {
    pub auth: Auth,
    pub customer: String,
}

/// The flags that lift the per-key bounds a load run would otherwise meet (D4 rate limit,
/// open orders, connections per address): the run measures speed, not the limits.
const UNBOUNDED: [&str; 12] = [
    "--rate-limit",
    "1000000",
    "--rate-burst",
    "1000000",
    "--max-connections-per-address",
    "4096",
    "--max-open-orders",
    "100000",
    "--transfer-delay",
    "0",
    "--clock",
    "realtime",
];

/// The pairs of [`UNBOUNDED`] that `binary serve` knows: an older build may lack a bound (and
/// the flag that lifts it).
fn unbounded_for(binary: &Path) -> Vec<&'static str> {
    let help = Command::new(binary)
        .args(["serve", "--help"])
        .output()
        .expect("perpsim serve --help");
    let help = String::from_utf8_lossy(&help.stdout);
    UNBOUNDED
        .chunks(2)
        .filter(|pair| help.contains(pair[0]))
        .flatten()
        .copied()
        .collect()
}

/// `command` run by `taskset -c cpus`, which sets the affinity and executes it in place (the
/// child's pid stays the server's, for the `/proc` figures).
fn pinned(command: Command, cpus: &str) -> Command {
    let mut taskset = Command::new("taskset");
    taskset
        .args(["-c", cpus])
        .arg(command.get_program())
        .args(command.get_args());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => taskset.env(key, value),
            None => taskset.env_remove(key),
        };
    }
    taskset
}

/// The listening address a server logs on stderr, in either spelling of the log line.
fn listening(line: &str) -> Option<String> {
    let rest = line.split(" address=").nth(1)?;
    let addr = rest.split_whitespace().next()?.trim_matches('"');
    let addr = addr
        .trim_start_matches("socket://")
        .trim_start_matches("http://");
    Some(format!("http://{addr}"))
}

/// Bytes process `pid` has handed to `write` and `pwrite`, all its threads (Linux `/proc`,
/// `wchar`): for a process that writes only its files, what it asks the disk to hold.
pub fn written_bytes(pid: u32) -> u64 {
    wchar(&format!("/proc/{pid}/io"))
}

/// The same for the threads of process `pid` named `thread` (the server's journal writer and
/// group log: its sockets are written by other threads). Not `write_bytes`, which Linux
/// counts a page-cache folio at a time as pages are dirtied: over a 7-minute soak here the
/// journal thread's rose from 1.1× its `wchar` to 10×, while the disk's own count of sectors
/// written (`/proc/diskstats`) stayed 1.1× (2026-12-03; a 4 KiB write into a large folio
/// counts whole).
pub fn written_by_thread(pid: u32, thread: &str) -> u64 {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("/proc/<pid>/task");
    tasks
        .filter_map(Result::ok)
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim_end() == thread)
        })
        .map(|t| wchar(&t.path().join("io").to_string_lossy()))
        .sum()
}

fn wchar(io: &str) -> u64 {
    std::fs::read_to_string(io)
        .unwrap_or_else(|e| panic!("{io}: {e}"))
        .lines()
        .find_map(|l| l.strip_prefix("wchar:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("wchar")
}

impl Running {
    /// Starts `target`, on the CPUs `cpus` names (a `taskset -c` list) when given: a run with
    /// the clients pinned elsewhere (`taskset -c 8-15 load --server-cpus 0-7`) keeps them off
    /// the server's cores, as a venue's clients are.
    pub fn start(target: &Target, cpus: Option<&str>) -> Running {
        let (mut command, data) = match target {
            Target::Perpsim { binary, living, .. } => {
                let data = tempfile::tempdir().expect("temp dir");
                let market: [&str; 4] = match living {
                    true => ["--market-maker", "on", "--price-feed", "random-walk"],
                    false => ["--market-maker", "off", "--price-feed", "fixed"],
                };
                let mut command = Command::new(binary);
                command
                    .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
                    .arg(data.path())
                    .args(unbounded_for(binary))
                    .args(market)
                    .env("PERPSIM_LOG", "warn,perpsim_api::server::serve=info");
                (command, Some(data))
            }
            Target::Bare => {
                let mut command = Command::new(std::env::current_exe().expect("this tool"));
                command.arg("--bare-serve");
                (command, None)
            }
        };
        if let Some(cpus) = cpus {
            command = pinned(command, cpus);
        }
        let mut child = command
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", target.name()));
        let stderr = BufReader::new(child.stderr.take().expect("stderr"));
        let mut lines = stderr.lines().map_while(Result::ok);
        let url = lines
            .by_ref()
            .find_map(|line| listening(&line))
            .unwrap_or_else(|| panic!("{} did not say where it listens", target.name()));
        // The rest of the log is drained so the server never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Running { child, url, data }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resident memory of the server process, in KiB (Linux `/proc`).
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("the server's /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .expect("VmRSS")
    }

    /// CPU time the server process has used, all threads, user and system (Linux `/proc`).
    pub fn cpu(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid()))
            .expect("the server's /proc stat");
        // Fields after the command name (which may hold spaces, hence from its closing
        // parenthesis): utime and stime are the 12th and 13th, in clock ticks.
        let rest = stat.rsplit_once(')').expect("a stat line").1;
        let fields: Vec<u64> = rest
            .split_whitespace()
            .skip(11)
            .take(2)
            .map(|f| f.parse().expect("clock ticks"))
            .collect();
        // Linux reports them in USER_HZ, which its ABI fixes at 100 a second.
        Duration::from_millis((fields[0] + fields[1]) * 10)
    }

    /// Bytes the server's journal writer and group log thread have handed to the kernel for
    /// their files (the journal, snapshots, archive segments, the group log, the projection):
    /// [`written_by_thread`].
    pub fn written_bytes(&self) -> u64 {
        ["perpsim-journal", "perpsim-log"]
            .iter()
            .map(|thread| written_by_thread(self.pid(), thread))
            .sum()
    }

    /// `n` accounts, one broker key each: on perpsim a broker (admin API), a customer and a
    /// deposit each; the bare server knows no one, so its accounts are keys and a made-up code.
    pub fn accounts(&self, n: usize) -> Vec<Account> {
        let Some(data) = &self.data else {
            return (0..n)
                .map(|i| Account {
                    auth: Auth::Key(worker_key(10 + i as u8)),
                    customer: format!("00000000-0000-4000-8000-{i:012}"),
                })
                .collect();
        };
        let http = Http::new(&self.url);
        let admin = admin(data.path());
        let accounts: Vec<Account> = (0..n).map(|i| account(&http, &admin, i)).collect();
        wait_for_deposits(&http, &accounts);
        accounts
    }
}

fn admin(data: &Path) -> Auth {
    let token = std::fs::read_to_string(data.join("admin.token")).expect("admin token");
    Auth::Admin(token.trim().to_owned())
}

fn account(http: &Http, admin: &Auth, i: usize) -> Account {
    let key = worker_key(10 + i as u8);
    let body = json!({"name": format!("load {i}"), "public_key": public_key(&key)});
    let (status, answer) = http.json("POST", "/admin/v1/brokers", Some(&body), admin);
    assert_eq!(status, 201, "broker created: {answer}");
    let auth = Auth::Key(key);
    let (status, customer) = http.json("POST", "/v1/customers", Some(&json!({})), &auth);
    assert_eq!(status, 201, "customer created");
    let customer = customer["customer_code"]
        .as_str()
        .expect("a code")
        .to_owned();
    let deposit = json!({"asset": "USDC", "amount": "100000000"});
    let path = format!("/v1/customers/{customer}/deposits");
    let (status, _) = http.json("POST", &path, Some(&deposit), &auth);
    assert_eq!(status, 201, "deposit");
    Account { auth, customer }
}

/// Deposits complete on the engine's next tick (`--transfer-delay 0`): the run starts once
/// each account holds its money, within ten seconds.
fn wait_for_deposits(http: &Http, accounts: &[Account]) {
    for a in accounts {
        let path = format!("/v1/customers/{}/balances", a.customer);
        let funded = (0..100).any(|_| {
            let (_, balances) = http.json("GET", &path, None, &a.auth);
            let held = balances.to_string().contains("100000000");
            if !held {
                std::thread::sleep(Duration::from_millis(100));
            }
            held
        });
        assert!(funded, "the deposit of {} completed", a.customer);
    }
}
