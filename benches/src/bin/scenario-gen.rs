//! Writes a large scenario for the replay benchmark (issue 26): `--customers` customers, each
//! well funded, and `--orders` orders spread over `--hours` hours at whole seconds, on the
//! three USDC instruments with the market maker and the random walk on. Deterministic for a
//! `--seed`. Orders: 45 % market, 40 % IOC limits within 2 % of the start price, 15 % GTC
//! limits 0.5–1.5 % away, each cancelled ten minutes later (the cancels are events of their
//! own, not counted as orders).
//!
//!     cargo build --release -p perpsim-api -p perpsim-benches
//!     target/release/scenario-gen --out /tmp/big.json
//!     target/release/perpsim replay /tmp/big.json --out /tmp/big-run

use std::fmt::Write as _;
use std::io::Write as _;

use clap::Parser;
use perpsim_core::rng::SimRng;

/// Writes a large scenario for the replay benchmark (see the file's header).
#[derive(Parser)]
#[command(name = "scenario-gen")]
struct Args {
    /// Customers, each funded with 5 000 000 USDC.
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..))]
    customers: u64,
    /// Orders, spread over the hours at whole seconds.
    #[arg(long, default_value_t = 1_000_000)]
    orders: u64,
    /// The scenario's length in hours.
    #[arg(long, default_value_t = 24, value_parser = clap::value_parser!(u64).range(1..=8_784))]
    hours: u64,
    /// The seed of the orders' draws (and the scenario's own).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Where the scenario (JSON) is written.
    #[arg(long, default_value = "big.json")]
    out: String,
}

/// (symbol, start price, tick decimals, decimals of the order unit, units per order at most)
const MARKETS: [(&str, u64, u32, u32, u64); 3] = [
    ("BTC-USDC-PERP", 60_000, 1, 3, 20),
    ("ETH-USDC-PERP", 3_000, 2, 2, 40),
    ("SOL-USDC-PERP", 150, 3, 1, 50),
];

/// `units` of 10^-decimals, in plain notation.
fn fixed(units: u64, decimals: u32) -> String {
    let scale = 10u64.pow(decimals);
    format!(
        "{}.{:0width$}",
        units / scale,
        units % scale,
        width = decimals as usize
    )
}

fn main() {
    let a = Args::parse();
    let mut rng = SimRng::from_seed(a.seed);
    let mut pick = |n: u64| rng.next_u64() % n;
    let span = a.hours * 3_600;
    let mut times: Vec<u64> = (0..a.orders).map(|_| 1 + pick(span - 1)).collect();
    times.sort_unstable();
    let mut events = String::with_capacity(a.orders as usize * 160);
    for (i, t) in times.iter().enumerate() {
        let customer = pick(a.customers);
        let (symbol, price, decimals, unit, max_units) = MARKETS[pick(3) as usize];
        let side = if pick(2) == 0 { "buy" } else { "sell" };
        let amount = fixed(1 + pick(max_units), unit);
        let kind = pick(100);
        let head = format!(
            "{{\"at\":\"+{t}s\",\"customer\":\"c{customer}\",\"order\":{{\"symbol\":\"{symbol}\",\"side\":\"{side}\",\"reference_id\":\"o{i}\",\"amount\":\"{amount}\""
        );
        let step = 10u64.pow(decimals);
        let limit = |bps_off: i64| {
            let ticks = (price * step) as i64 * (10_000 + bps_off) / 10_000;
            fixed(ticks as u64, decimals)
        };
        let sign = if side == "buy" { 1 } else { -1 };
        match kind {
            0..45 => {
                let _ = writeln!(events, "{head},\"type\":\"market\"}}}},");
            }
            45..85 => {
                let p = limit(sign * (pick(200) as i64));
                let _ = writeln!(
                    events,
                    "{head},\"type\":\"limit\",\"limit_price\":\"{p}\",\"time_in_force\":\"IOC\"}}}},"
                );
            }
            _ => {
                let p = limit(-sign * (50 + pick(100) as i64));
                let _ = writeln!(
                    events,
                    "{head},\"type\":\"limit\",\"limit_price\":\"{p}\"}}}},"
                );
                let cancel_at = (t + 600).min(span);
                let _ = writeln!(
                    events,
                    "{{\"at\":\"+{cancel_at}s\",\"customer\":\"c{customer}\",\"cancel\":\"o{i}\"}},"
                );
            }
        }
    }
    let events = events.trim_end().trim_end_matches(',');
    let customers: Vec<String> = (0..a.customers)
        .map(|c| format!("{{\"name\":\"c{c}\",\"deposits\":{{\"USDC\":\"5000000\"}}}}"))
        .collect();
    let mut f = std::io::BufWriter::new(std::fs::File::create(&a.out).expect("the output file"));
    write!(
        f,
        "{{\"name\":\"load {} orders\",\"seed\":{},\"start\":\"2026-01-01T00:00:00Z\",\"end\":\"+{}h\",\"customers\":[\n{}\n],\"events\":[\n{}\n]}}\n",
        a.orders, a.seed, a.hours, customers.join(",\n"), events
    )
    .expect("written");
    f.flush().expect("flushed");
    eprintln!(
        "wrote {} ({} customers, {} orders over {} h)",
        a.out, a.customers, a.orders, a.hours
    );
}
