//! `crash-campaign`: the documented long run of the crash campaign (docs/operations.md,
//! "Durability").
//!
//!     cargo run -p perpsim-tests --bin crash-campaign -- 1000
//!
//! Arguments: rounds (default 1000), then optionally the seed (default: from the clock,
//! printed, so a failing run can be repeated). Starts the `perpsim` of its own profile, which
//! cargo builds first, with its engine auditing money conservation and the trading invariants
//! after every tick (`PERPSIM_AUDIT=on`).

use std::time::Instant;

use perpsim_tests::campaign::{Settings, run};

/// Kills the real server mid-load, round after round, and proves after each restart that
/// every acknowledged request is there once and every replayed one is refused.
#[derive(clap::Parser)]
#[command(name = "crash-campaign")]
struct Cli {
    /// Rounds: a kill and a restart each.
    #[arg(default_value_t = 1_000, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,
    /// The campaign's seed (default: from the clock, printed, so a failing run can be
    /// repeated).
    seed: Option<u64>,
}

fn main() {
    let cli: Cli = clap::Parser::parse();
    let rounds = cli.rounds;
    let seed = cli.seed.unwrap_or_else(|| perpsim_tests::now_ns() as u64);
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
