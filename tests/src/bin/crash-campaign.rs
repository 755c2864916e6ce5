//! `crash-campaign`: the documented long run of the crash campaign (README, "Durability").
//!
//!     cargo build -p perpsim-api && cargo run -p perpsim-tests --bin crash-campaign -- 1000
//!
//! Arguments: rounds (default 1000), then optionally the seed (default: from the clock,
//! printed, so a failing run can be repeated). Uses the debug `perpsim` binary, whose engine
//! asserts money conservation and the trading invariants after every tick.

use std::time::Instant;

use perpsim_tests::campaign::{Settings, run};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rounds = args
        .first()
        .map_or(1_000, |a| a.parse().expect("rounds: a number"));
    let seed = args.get(1).map_or_else(
        || perpsim_tests::now_ns() as u64,
        |a| a.parse().expect("seed: a number"),
    );
    let settings = Settings {
        rounds,
        rounds_per_dir: 25,
        workers: 3,
        seed,
    };
    println!("crash campaign: {rounds} rounds, seed {seed}");
    let root = tempfile::tempdir().expect("temporary dir");
    let started = Instant::now();
    let report = run(settings, root.path(), |round, r| {
        if round % 25 == 0 || round == rounds {
            println!(
                "round {round}: {} acknowledged, {} in flight at kills, {} replays refused, \
                 {} in-flight requests accepted once on replay ({:.0} s)",
                r.acknowledged,
                r.in_flight_at_kill,
                r.replays_refused,
                r.in_flight_accepted_on_replay,
                started.elapsed().as_secs_f64()
            );
        }
    });
    println!(
        "passed: {} rounds, {} commands journaled, {} archive segments, {:.0} s wall",
        report.rounds,
        report.commands_journaled,
        report.segments_archived,
        started.elapsed().as_secs_f64()
    );
}
