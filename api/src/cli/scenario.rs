//! `perpsim scenario`: the worked examples of scenario replay, written where a reader wants
//! them, so the README's tour runs from any directory with nothing but the binary; a
//! scenario read as a run reads it, and not run (`check`); a recorded session turned into a
//! scenario (`from-journal`).

use std::path::{Path, PathBuf};

use clap::Subcommand;
use serde_json::json;

use super::replay::LimitArgs;
use crate::replay::Limits;

/// The worked examples (`tests/scenarios/`, whose state hashes `cargo test` checks), as the
/// binary carries them: each file by name.
const EXAMPLES: [(&str, &[u8]); 9] = [
    (
        "flash-crash.yaml",
        include_bytes!("../../../tests/scenarios/flash-crash.yaml"),
    ),
    (
        "flash-crash.csv",
        include_bytes!("../../../tests/scenarios/flash-crash.csv"),
    ),
    (
        "funding-week.yaml",
        include_bytes!("../../../tests/scenarios/funding-week.yaml"),
    ),
    (
        "depreciation-ladder.yaml",
        include_bytes!("../../../tests/scenarios/depreciation-ladder.yaml"),
    ),
    (
        "recorded-hour.yaml",
        include_bytes!("../../../tests/scenarios/recorded-hour.yaml"),
    ),
    (
        "recorded-hour.csv.gz",
        include_bytes!("../../../tests/scenarios/recorded-hour.csv.gz"),
    ),
    (
        "recorded-book.yaml",
        include_bytes!("../../../tests/scenarios/recorded-book.yaml"),
    ),
    (
        "recorded-book.csv.gz",
        include_bytes!("../../../tests/scenarios/recorded-book.csv.gz"),
    ),
    (
        "recorded-trades.csv.gz",
        include_bytes!("../../../tests/scenarios/recorded-trades.csv.gz"),
    ),
];

#[derive(Subcommand, Debug)]
pub enum ScenarioCmd {
    /// Write the worked examples (the flash crash with its price file, a funding-heavy week,
    /// a depreciation ladder, a recorded hour with its recording, the same hour's recorded
    /// book and trades) into --out; a file already there is left alone and refused.
    Examples {
        /// The directory to write them to (created if missing).
        #[arg(long)]
        out: PathBuf,
    },
    /// Read a scenario as `perpsim replay` reads it, within the same bounds, and run nothing:
    /// what it holds as JSON on stdout (its name, seed, span, instruments, customers, events,
    /// the steps they make and the files they name) and how long the read took, or where and
    /// why it is refused, as the run would refuse it (exit 2). Nothing is written.
    Check {
        /// The scenario file, YAML or JSON (D11; format: openapi/scenario.schema.json).
        scenario: PathBuf,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Turn a recorded session (a server's data dir's journal.redb, or a run's) into a
    /// scenario that replays it, to perturb with shocks, latency or other seeds.
    FromJournal {
        /// The journal to read (a running server's too, as `replay --journal` reads one).
        journal: PathBuf,
        /// The scenario file to write (YAML; must not exist).
        #[arg(long)]
        out: PathBuf,
    },
}

pub fn run(cmd: ScenarioCmd) -> Result<i32, String> {
    match cmd {
        ScenarioCmd::Examples { out } => examples(&out).map(|_| 0),
        ScenarioCmd::Check { scenario, limits } => check(&scenario, &limits.resolve()),
        ScenarioCmd::FromJournal { journal, out } => {
            crate::replay::from_journal::write_scenario(&journal, &out)?;
            println!("{}", out.display());
            Ok(0)
        }
    }
}

/// The whole read of a replay (the text, its one pass or the YAML reader's, every event
/// planned and every file it names read), timed: what a scenario's author checks before a
/// long run or a Monte-Carlo, and the read's own figure (`benches/README.md`).
fn check(scenario: &Path, limits: &Limits) -> Result<i32, String> {
    let started = std::time::Instant::now();
    let plan = crate::replay::read(scenario, limits).map_err(|e| e.to_string())?;
    let read = started.elapsed().as_secs_f64();
    let instruments: Vec<&str> = plan
        .genesis
        .instruments
        .iter()
        .map(|i| i.symbol.as_str())
        .collect();
    let inputs: Vec<String> = plan
        .inputs
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    println!(
        "{}",
        json!({
            "scenario": plan.name,
            "seed": plan.genesis.seed,
            "start": plan.genesis.start.to_rfc3339(),
            "end": plan.end.to_rfc3339(),
            "instruments": instruments,
            "customers": plan.customers.len(),
            "events": plan.events,
            "steps": plan.steps.len(),
            "inputs": inputs,
            "seconds": {"read": read},
        })
    );
    Ok(0)
}

fn examples(out: &Path) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    for (name, bytes) in EXAMPLES {
        let path = out.join(name);
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, bytes));
        written.map_err(|e| format!("{}: {e}", path.display()))?;
        println!("{}", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The examples the binary carries are the checked-in ones, and they are all of them.
    #[test]
    fn the_binary_carries_every_worked_example() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios");
        let hashes = std::fs::read_to_string(dir.join("hashes.txt")).unwrap();
        for line in hashes.lines().filter(|l| !l.starts_with('#')) {
            let name = line.split_whitespace().nth(1).unwrap();
            assert!(EXAMPLES.iter().any(|(n, _)| *n == name), "{name}");
        }
        let out = tempfile::tempdir().unwrap();
        examples(out.path()).unwrap();
        for (name, bytes) in EXAMPLES {
            assert_eq!(std::fs::read(out.path().join(name)).unwrap(), bytes);
        }
        assert!(
            examples(out.path()).is_err(),
            "a file already there is refused"
        );
    }
}
