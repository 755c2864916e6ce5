//! End-to-end load on loopback (issue 27): signed order entry and a broker's mixed profile
//! against the release `perpsim` (and, to compare, other binaries and the bare server — the
//! same HTTP stack and signature check answering a constant), with the clients in this
//! process on the same cores. Throughput and p50/p99/p99.9/max per request kind, medians of
//! several runs, ratios to the bare server and to the first binary.
//!
//! ```text
//! cargo build --release -p perpsim-api -p perpsim-benches
//! target/release/load [--seconds 10 | --count N] [--workers 16] [--runs 3]
//!                     [--profile entry|mixed|both] [--baseline OTHER/perpsim]... [--no-bare]
//!                     [--server-cpus 0-7]   (with the tool itself under `taskset -c 8-15`)
//! target/release/load soak [--minutes 30 | --seconds S] [--sample 10] [--fraction 0.8]
//! ```

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use perpsim_benches::load::compare::compare;
use perpsim_benches::load::drive::{Plan, Profile, Stop};
use perpsim_benches::load::soak::{SoakPlan, soak};
use perpsim_benches::load::target::Target;

#[derive(Parser)]
#[command(
    about = "End-to-end load on loopback: signed order entry, a mixed broker profile, a soak"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Mode>,
    #[command(flatten)]
    load: LoadArgs,
    /// Internal: run as the bare server (what the load tool starts to compare with).
    #[arg(long, hide = true)]
    bare_serve: bool,
}

#[derive(Subcommand)]
enum Mode {
    /// The living market at a fraction of its measured maximum for a long time, sampled.
    Soak(SoakArgs),
}

#[derive(Args)]
struct LoadArgs {
    /// Seconds each run lasts.
    #[arg(long, default_value_t = 10, conflicts_with = "count")]
    seconds: u64,
    /// Requests each run sends in all, instead of a duration.
    #[arg(long)]
    count: Option<u64>,
    /// Workers, each a broker key on its own connection.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u8).range(1..=200))]
    workers: u8,
    /// Runs per target; the figures are their medians.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=100))]
    runs: u16,
    /// The workload: place+cancel (`entry`), the broker's mixed profile, or both.
    #[arg(long, default_value = "entry", value_parser = ["entry", "mixed", "both"])]
    profile: String,
    /// Another perpsim binary to run the same load against (e.g. an older commit's build).
    #[arg(long)]
    baseline: Vec<PathBuf>,
    /// Leave out the bare server.
    #[arg(long)]
    no_bare: bool,
    /// Run perpsim with the market maker and random walk on.
    #[arg(long)]
    living: bool,
    /// Start every server on these CPUs (a `taskset -c` list, e.g. `0-7`); run this tool
    /// itself on the others (`taskset -c 8-15 load ...`) to keep the clients off them.
    #[arg(long)]
    server_cpus: Option<String>,
}

#[derive(Args)]
struct SoakArgs {
    /// How long the soak lasts, in minutes.
    #[arg(long, default_value_t = 30, conflicts_with = "seconds")]
    minutes: u64,
    /// How long the soak lasts, in seconds (instead of minutes).
    #[arg(long)]
    seconds: Option<u64>,
    /// Seconds between samples.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    sample: u64,
    /// Share of the measured maximum the soak runs at.
    #[arg(long, default_value_t = 0.8)]
    fraction: f64,
    /// Seconds of the unpaced run that measures the maximum.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    probe: u64,
    /// Workers, each a broker key on its own connection.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u8).range(1..=200))]
    workers: u8,
    /// Start the server on these CPUs (a `taskset -c` list), as `load --server-cpus` does.
    #[arg(long)]
    server_cpus: Option<String>,
}

/// The allocator perpsim serves with, so the bare server (this binary) runs the same stack.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The `perpsim` built beside this tool.
fn perpsim() -> PathBuf {
    let exe = std::env::current_exe().expect("executable path");
    exe.parent().expect("target/<profile>").join("perpsim")
}

fn main() {
    let cli = Cli::parse();
    if cli.bare_serve {
        perpsim_benches::load::bare::serve();
        return;
    }
    match cli.command {
        Some(Mode::Soak(args)) => {
            assert!(
                args.fraction > 0.0 && args.fraction <= 1.0,
                "--fraction in (0, 1]"
            );
            let plan = SoakPlan {
                binary: perpsim(),
                workers: usize::from(args.workers),
                probe: Duration::from_secs(args.probe),
                duration: Duration::from_secs(args.seconds.unwrap_or(args.minutes * 60)),
                sample: Duration::from_secs(args.sample),
                fraction: args.fraction,
                server_cpus: args.server_cpus,
            };
            soak(&plan).print();
        }
        None => load(cli.load),
    }
}

fn load(args: LoadArgs) {
    let mut targets = vec![Target::Perpsim {
        name: "perpsim (this build)".into(),
        binary: perpsim(),
        living: args.living,
    }];
    targets.extend(args.baseline.iter().map(|b| Target::Perpsim {
        name: format!("perpsim ({})", b.display()),
        binary: b.clone(),
        living: args.living,
    }));
    if !args.no_bare {
        targets.push(Target::Bare);
    }
    let stop = match args.count {
        Some(n) => Stop::Count(n),
        None => Stop::After(Duration::from_secs(args.seconds)),
    };
    let profiles: &[Profile] = match args.profile.as_str() {
        "entry" => &[Profile::Entry],
        "mixed" => &[Profile::Mixed],
        _ => &[Profile::Entry, Profile::Mixed],
    };
    for &profile in profiles {
        let plan = Plan {
            profile,
            stop,
            rate: None,
        };
        compare(
            &targets,
            &plan,
            usize::from(args.workers),
            usize::from(args.runs),
            args.server_cpus.as_deref(),
        );
    }
}
