//! The WebSocket channels under load (issue 25), against the release binary on loopback,
//! with the clients in this process on the same cores.
//!
//! 1. Fan-out: for 1, 100 and 1 000 subscribers to the four books, the ticker and BTC's
//!    market trades, a driver makes the market busy on the manual clock (a signed market
//!    order against the maker, then a one-second advance: a trade, four book updates, four
//!    tickers a step) as fast as it can for `--seconds`. Reported: frames delivered a second
//!    (all subscribers together) and latency from the driver sending the advance to each
//!    subscriber holding its ticker frame (an upper bound of engine event → frame: it also
//!    holds the request, the tick and its journal commit), p50/p99/p99.9.
//!    With `--rate STEPS`, each count runs a second time with the driver paced to that many
//!    steps a second, to read the latency at a given load rather than at saturation.
//! 2. Order entry: 16 workers, each a broker's key, place a resting limit order and cancel
//!    it, every request ed25519-signed, for `--seconds`, with no subscriber and then with the
//!    largest count attached to the markets the workers do not trade: requests a second and
//!    latency percentiles.
//!
//! Run:
//!
//! ```text
//! cargo build --release -p perpsim-api -p perpsim-benches
//! target/release/ws-load [--seconds 10] [--subscribers 1,100,1000] [--rate 28]
//! ```
//!
//! Targets: ≥ 250 000 frames/s at 1 000 subscribers with p99 ≤ 5 ms; order entry with 1 000
//! subscribers within 10 % of none.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use futures_util::{SinkExt, StreamExt};
use hdrhistogram::Histogram;
use perpsim_benches::load::client::{Auth, Http, public_key, worker_key};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

const BOOKS: [&str; 4] = [
    "orderbook-stream:BTC-USDC-PERP",
    "orderbook-stream:ETH-USDC-PERP",
    "orderbook-stream:SOL-USDC-PERP",
    "orderbook-stream:BTC-USDT-PERP",
];
const START_MS: i64 = 1_767_225_600_000;
const WORKERS: usize = 16;

struct Server {
    child: Child,
    url: String,
    data: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn binary() -> PathBuf {
    let exe = std::env::current_exe().expect("executable path");
    exe.parent().expect("target/release").join("perpsim")
}

fn start(perpsim: &Path, living: bool) -> Server {
    let data = tempfile::tempdir().expect("temp dir");
    let market: &[&str] = match living {
        true => &["--market-maker", "on", "--price-feed", "random-walk"],
        false => &["--market-maker", "off", "--price-feed", "fixed"],
    };
    let mut child = Process::new(perpsim)
        .args(["serve", "--listen", "127.0.0.1:0", "--clock", "manual"])
        .args(["--start", "2026-01-01T00:00:00Z", "--rate-limit", "100000"])
        .args([
            "--rate-burst",
            "100000",
            "--max-connections-per-address",
            "4096",
        ])
        .args(["--max-ws-connections", "4096", "--ws-queue", "65536"])
        .args(["--max-open-orders", "100000", "--data-dir"])
        .arg(data.path())
        .args(market)
        .env("PERPSIM_LOG", "warn,perpsim_api::server::serve=info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start perpsim (cargo build --release -p perpsim-api)");
    let stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let mut url = None;
    for line in stderr.lines().map_while(Result::ok) {
        if let Some(a) = line.split("address=http://").nth(1) {
            url = Some(format!("http://{}", a.trim()));
            break;
        }
    }
    let url = url.expect("perpsim listened");
    Server { child, url, data }
}

fn admin(server: &Server) -> Auth {
    let token = std::fs::read_to_string(server.data.path().join("admin.token")).expect("token");
    Auth::Admin(token.trim().to_owned())
}

/// A new broker's key, with one customer holding `usdc`.
fn broker(http: &Http, admin: &Auth, seed: u8) -> (Auth, String) {
    let key = worker_key(seed);
    let public = public_key(&key);
    let body = json!({"name": format!("load {seed}"), "public_key": public});
    let (status, _) = http.json("POST", "/admin/v1/brokers", Some(&body), admin);
    assert_eq!(status, 201, "broker created");
    let auth = Auth::Key(key);
    let (_, customer) = http.json("POST", "/v1/customers", Some(&json!({})), &auth);
    let code = customer["customer_code"]
        .as_str()
        .expect("a customer")
        .to_owned();
    let deposit = json!({"asset": "USDC", "amount": "10000000"});
    let (status, _) = http.json(
        "POST",
        &format!("/v1/customers/{code}/deposits"),
        Some(&deposit),
        &auth,
    );
    assert_eq!(status, 201, "deposit");
    (auth, code)
}

/// What the subscribers measured.
#[derive(Default)]
struct Tally {
    frames: AtomicU64,
    latency: Mutex<Option<Histogram<u64>>>,
}

/// Opens `n` connections, each subscribed to `topics` (authenticated first with `key` when
/// given); each counts its frames and, for tickers, records the latency from `sent` (the
/// driver's send time per simulated second).
async fn subscribers(
    ws_url: &str,
    n: usize,
    topics: Vec<String>,
    sent: Arc<Mutex<Vec<Option<Instant>>>>,
    tally: Arc<Tally>,
    stop: Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = Vec::with_capacity(n);
    for _ in 0..n {
        let host = ws_url
            .trim_start_matches("ws://")
            .split('/')
            .next()
            .expect("a host");
        let tcp = tokio::net::TcpStream::connect(host).await.expect("connect");
        tcp.set_nodelay(true).expect("nodelay");
        // A 16 KiB read buffer: tungstenite zeroes the free space of its buffer before each
        // read, and its 128 KiB default would make the clients, not the server, the bottleneck.
        let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
            .read_buffer_size(16 * 1024);
        let (mut ws, _) = tokio_tungstenite::client_async_with_config(ws_url, tcp, Some(config))
            .await
            .expect("upgrade");
        let ask = json!({"op": "subscribe", "args": topics}).to_string();
        ws.send(Message::Text(ask.into())).await.expect("subscribe");
        let (sent, tally, stop) = (sent.clone(), tally.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut local = Histogram::<u64>::new(3).expect("histogram");
            let mut frames = 0u64;
            while !stop.load(Relaxed) {
                let next = tokio::time::timeout(Duration::from_millis(100), ws.next()).await;
                let Ok(Some(Ok(Message::Text(text)))) = next else {
                    continue;
                };
                let got = Instant::now();
                frames += 1;
                if text.starts_with("{\"channel\":\"ticker\"") {
                    let v: Value = serde_json::from_str(&text).expect("json");
                    let sim = v["data"]["timestamp"].as_str().unwrap_or_default();
                    let second = seconds_since_start(sim);
                    let at = sent.lock().expect("lock").get(second).copied().flatten();
                    if let Some(at) = at {
                        let _ = local.record(got.duration_since(at).as_micros() as u64);
                    }
                }
            }
            tally.frames.fetch_add(frames, Relaxed);
            let mut all = tally.latency.lock().expect("lock");
            match all.as_mut() {
                Some(h) => h.add(&local).expect("same bounds"),
                None => *all = Some(local),
            }
        }));
    }
    tasks
}

/// Seconds since 2026-01-01T00:00:00Z of an RFC 3339 `…T00:MM:SS.000Z` simulation time.
fn seconds_since_start(text: &str) -> usize {
    let t = perpsim_core::time::Timestamp::parse_rfc3339(text).map_or(0, |t| t.millis());
    ((t - START_MS) / 1_000).max(0) as usize
}

fn percentiles(h: &Histogram<u64>) -> String {
    let ms = |q: f64| h.value_at_quantile(q) as f64 / 1_000.0;
    format!(
        "p50 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms",
        ms(0.5),
        ms(0.99),
        ms(0.999)
    )
}

/// `rate`: steps a second the driver keeps to (none: as fast as it can).
async fn fanout(perpsim: &Path, n: usize, seconds: u64, rate: Option<f64>) {
    let server = start(perpsim, true);
    let http = Arc::new(Http::new(&server.url));
    let admin = admin(&server);
    let (trader, customer) = broker(&http, &admin, 1);
    let ws_url = format!("{}/v1/ws", server.url.replace("http://", "ws://"));
    let mut topics: Vec<String> = BOOKS.iter().map(|t| t.to_string()).collect();
    topics.extend([
        "ticker".to_owned(),
        "market-trades:BTC-USDC-PERP".to_owned(),
    ]);
    let sent = Arc::new(Mutex::new(vec![None; 1 << 20]));
    let (tally, stop) = (Arc::new(Tally::default()), Arc::new(AtomicBool::new(false)));
    let tasks = subscribers(
        &ws_url,
        n,
        topics,
        sent.clone(),
        tally.clone(),
        stop.clone(),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let driver = tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let mut second = 0usize;
        while started.elapsed() < Duration::from_secs(seconds) {
            second += 1;
            if let Some(rate) = rate {
                let due = started + Duration::from_secs_f64(second as f64 / rate);
                std::thread::sleep(due.saturating_duration_since(Instant::now()));
            }
            let side = if second.is_multiple_of(2) {
                "buy"
            } else {
                "sell"
            };
            let order = json!({"symbol": "BTC-USDC-PERP", "side": side, "type": "market",
                "reference_id": format!("m{second}"), "amount": "0.001"});
            http.json(
                "POST",
                &format!("/v1/customers/{customer}/orders"),
                Some(&order),
                &trader,
            );
            sent.lock().expect("lock")[second] = Some(Instant::now());
            let (status, _) = http.json(
                "POST",
                "/admin/v1/clock/advance",
                Some(&json!({"seconds": 1})),
                &admin,
            );
            assert_eq!(status, 200, "advance");
        }
        (second, started.elapsed())
    });
    let (steps, took) = driver.await.expect("driver");
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    // The subscriptions' snapshots (a book each, four tickers) count too: a few per client.
    let frames = tally.frames.load(Relaxed);
    let latency = tally
        .latency
        .lock()
        .expect("lock")
        .take()
        .expect("recorded");
    let paced = rate.map_or("as fast as it goes".to_owned(), |r| {
        format!("paced at {r} steps/s")
    });
    println!(
        "fan-out, {n:>4} subscribers, {paced}: {:>9.0} frames/s ({frames} frames, {steps} steps in {:.1} s), tick → ticker frame {}",
        frames as f64 / took.as_secs_f64(),
        took.as_secs_f64(),
        percentiles(&latency)
    );
}

async fn order_entry(perpsim: &Path, attached: usize, seconds: u64) {
    let server = start(perpsim, false);
    let http = Arc::new(Http::new(&server.url));
    let admin = admin(&server);
    let workers: Vec<(Auth, String)> = (0..WORKERS)
        .map(|i| broker(&http, &admin, 10 + i as u8))
        .collect();
    let (status, _) = http.json(
        "POST",
        "/admin/v1/clock/advance",
        Some(&json!({"seconds": 2})),
        &admin,
    );
    assert_eq!(status, 200, "deposits completed");
    let ws_url = format!("{}/v1/ws", server.url.replace("http://", "ws://"));
    // Attached to the markets the workers do not trade: they hear nothing, and the question
    // is whether holding them costs order entry (the hub's work per event not theirs).
    let mut topics: Vec<String> = BOOKS[1..].iter().map(|t| t.to_string()).collect();
    topics.push("market-trades:ETH-USDC-PERP".to_owned());
    let (tally, stop) = (Arc::new(Tally::default()), Arc::new(AtomicBool::new(false)));
    let sent = Arc::new(Mutex::new(Vec::new()));
    let tasks = subscribers(&ws_url, attached, topics, sent, tally.clone(), stop.clone()).await;
    let started = Instant::now();
    let runs: Vec<_> = workers
        .into_iter()
        .enumerate()
        .map(|(w, (auth, customer))| {
            let http = Http::new(&server.url);
            tokio::task::spawn_blocking(move || {
                let mut h = Histogram::<u64>::new(3).expect("histogram");
                let mut i = 0u64;
                while started.elapsed() < Duration::from_secs(seconds) {
                    i += 1;
                    let reference = format!("w{w}o{i}");
                    let order = json!({"symbol": "BTC-USDC-PERP", "side": "buy", "type": "limit",
                        "reference_id": reference, "amount": "0.001", "limit_price": "50000"});
                    let t = Instant::now();
                    let (s, _) = http.json(
                        "POST",
                        &format!("/v1/customers/{customer}/orders"),
                        Some(&order),
                        &auth,
                    );
                    let _ = h.record(t.elapsed().as_micros() as u64);
                    assert_eq!(s, 201, "placed");
                    let t = Instant::now();
                    let (s, _) = http.json(
                        "DELETE",
                        &format!("/v1/customers/{customer}/orders/{reference}"),
                        None,
                        &auth,
                    );
                    let _ = h.record(t.elapsed().as_micros() as u64);
                    assert_eq!(s, 200, "cancelled");
                }
                h
            })
        })
        .collect();
    let mut all = Histogram::<u64>::new(3).expect("histogram");
    for r in runs {
        all.add(r.await.expect("worker")).expect("same bounds");
    }
    let took = started.elapsed().as_secs_f64();
    stop.store(true, Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    println!(
        "order entry, {attached:>4} subscribers: {:>7.0} req/s ({} signed requests), {}",
        all.len() as f64 / took,
        all.len(),
        percentiles(&all)
    );
}

/// The WebSocket channels under load: fan-out to subscribers, then signed order entry with
/// and without them (see the file's header for what each figure means).
#[derive(Parser)]
#[command(name = "ws-load")]
struct Cli {
    /// How long each run lasts, in seconds.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    seconds: u64,
    /// Subscriber counts, one fan-out run each (comma-separated).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1,100,1000",
        value_parser = clap::value_parser!(usize)
    )]
    subscribers: Vec<usize>,
    /// Also run each count with the driver paced to this many steps a second.
    #[arg(long, value_parser = positive)]
    rate: Option<f64>,
}

/// A rate above zero.
fn positive(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(r) if r > 0.0 && r.is_finite() => Ok(r),
        _ => Err(format!(
            "{text:?} is not a number of steps a second above zero"
        )),
    }
}

fn main() {
    let Cli {
        seconds,
        subscribers: counts,
        rate,
    } = Cli::parse();
    let perpsim = binary();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        for &n in &counts {
            fanout(&perpsim, n, seconds, None).await;
            if let Some(r) = rate {
                fanout(&perpsim, n, seconds, Some(r)).await;
            }
        }
        let most = counts.iter().copied().max().unwrap_or(0);
        order_entry(&perpsim, 0, seconds).await;
        order_entry(&perpsim, most, seconds).await;
    });
}
