//! Monte-Carlo over a seed range: each seed an independent run in a worker process (at most
//! `--jobs` at once), written to `seed-<S>` exactly as a single run with that seed writes it;
//! shards of the range for a cluster scheduler's array job (`--index`/`--count`, or the index
//! Kubernetes, Slurm or AWS Batch sets), skipping seeds already finished; and the summary of
//! finished seed directories, from one machine or merged from any number of shards.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use perpsim_core::Decimal;
use serde::Serialize;

use super::output::{self, DONE};
use super::report::{Report, text};

/// The most seeds one range may name.
pub const MAX_SEEDS: u64 = 1_000_000;
/// The most worker processes at once.
pub const MAX_JOBS: usize = 256;

/// The environment variables that carry an array job's index, in the order read.
pub const INDEX_VARIABLES: [&str; 3] = [
    "JOB_COMPLETION_INDEX",
    "SLURM_ARRAY_TASK_ID",
    "AWS_BATCH_JOB_ARRAY_INDEX",
];

/// `A..B` (B excluded) or `A..=B` (B included).
pub fn parse_seeds(text: &str) -> Result<Vec<u64>, String> {
    let bad = || format!("--seeds takes A..B (B excluded) or A..=B, got {text:?}");
    let (a, b, inclusive) = match text.split_once("..=") {
        Some((a, b)) => (a, b, true),
        None => text
            .split_once("..")
            .map(|(a, b)| (a, b, false))
            .ok_or_else(bad)?,
    };
    let (a, b): (u64, u64) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
    let end = if inclusive {
        b.checked_add(1).ok_or_else(bad)?
    } else {
        b
    };
    if end <= a || end - a > MAX_SEEDS {
        return Err(format!(
            "--seeds must name 1 to {MAX_SEEDS} seeds, got {text:?}"
        ));
    }
    Ok((a..end).collect())
}

/// This shard's index: `--index`, else the scheduler's variable.
pub fn shard_index(
    given: Option<u64>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<u64>, String> {
    if given.is_some() {
        return Ok(given);
    }
    for name in INDEX_VARIABLES {
        if let Some(v) = env(name) {
            return v
                .trim()
                .parse()
                .map(Some)
                .map_err(|_| format!("{name}={v:?} is not an index"));
        }
    }
    Ok(None)
}

/// The seeds of shard `index` of `count`: every `count`-th from position `index`.
pub fn shard(seeds: &[u64], index: u64, count: u64) -> Result<Vec<u64>, String> {
    if count == 0 || index >= count {
        return Err(format!("shard index {index} must be below --count {count}"));
    }
    Ok(seeds
        .iter()
        .enumerate()
        .filter(|(i, _)| *i as u64 % count == index)
        .map(|(_, s)| *s)
        .collect())
}

pub fn seed_dir(out: &Path, seed: u64) -> PathBuf {
    out.join(format!("seed-{seed}"))
}

/// Runs each seed not yet finished in `out` in a worker process (this binary, `replay
/// SCENARIO --seed S --out out/seed-S` and the run's `bounds` flags), at most `jobs` at
/// once. Fails if any worker did.
pub fn run_seeds(
    scenario: &Path,
    seeds: &[u64],
    jobs: usize,
    out: &Path,
    bounds: &[String],
) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let mut todo = seeds
        .iter()
        .filter(|s| !seed_dir(out, **s).join(DONE).exists())
        .copied();
    let mut running: Vec<(u64, Child)> = Vec::new();
    let mut failed = Vec::new();
    loop {
        while running.len() < jobs.clamp(1, MAX_JOBS) {
            let Some(seed) = todo.next() else { break };
            let child = Command::new(&exe)
                .args(["replay", "--quiet", "--seed", &seed.to_string(), "--out"])
                .arg(seed_dir(out, seed))
                .args(bounds)
                .arg(scenario)
                // Each worker's line names its directory; the caller prints the range's.
                .stdout(std::process::Stdio::null())
                .spawn()
                .map_err(|e| format!("cannot start a worker: {e}"))?;
            running.push((seed, child));
        }
        if running.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
        let mut k = 0;
        while k < running.len() {
            match running[k].1.try_wait().map_err(|e| e.to_string())? {
                Some(status) => {
                    let (seed, _) = running.swap_remove(k);
                    if !status.success() {
                        failed.push(seed);
                    }
                }
                None => k += 1,
            }
        }
    }
    match failed.is_empty() {
        true => Ok(()),
        false => Err(format!("the runs of seeds {failed:?} failed")),
    }
}

/// Every finished seed directory under `dirs` (a run directory itself, or one holding
/// `seed-*` directories), by seed; a seed found twice must have the same state hash.
pub fn finished(dirs: &[PathBuf]) -> Result<Vec<(u64, Report)>, String> {
    let mut found: std::collections::BTreeMap<u64, (Report, PathBuf)> = Default::default();
    for dir in dirs {
        let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut runs: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join(DONE).exists())
            .collect();
        runs.sort();
        for run in runs {
            let manifest = output::manifest(&run)?;
            let file = run.join("report.json");
            let text =
                std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            let report: Report =
                serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
            if let Some((first, other)) = found.values().next() {
                fits(&report, first)
                    .map_err(|m| format!("{}: {m} in {}", file.display(), other.display()))?;
            } else {
                fits(&report, &report).map_err(|m| format!("{}: {m}", file.display()))?;
            }
            if let Some((other, _)) = found.get(&manifest.seed)
                && other.state_hash != report.state_hash
            {
                return Err(format!(
                    "seed {} was run twice with different results ({})",
                    manifest.seed,
                    run.display()
                ));
            }
            found.insert(manifest.seed, (report, file));
        }
    }
    if found.is_empty() {
        return Err("no finished seed directories found".into());
    }
    Ok(found.into_iter().map(|(seed, (r, _))| (seed, r)).collect())
}

/// Whether `report` holds every figure the summary reads, as decimals, in the shape of
/// `first` (the same customers, currencies and instruments, every path row a time and two
/// prices): a report is a file someone may have crafted, and the summary must not panic on it.
fn fits(report: &Report, first: &Report) -> Result<(), String> {
    let decimal = |what: &str, text: &str| {
        text.parse::<Decimal>()
            .map(|_| ())
            .map_err(|_| format!("{what} is not a decimal"))
    };
    let shape = |what: &str, a: usize, b: usize| match a == b {
        true => Ok(()),
        false => Err(format!(
            "holds {a} {what}, not a run of the same scenario as the {b} {what}"
        )),
    };
    shape("customers", report.customers.len(), first.customers.len())?;
    for (c, f) in report.customers.iter().zip(&first.customers) {
        shape("currencies", c.currencies.len(), f.currencies.len())?;
        for x in &c.currencies {
            decimal("equity", &x.equity)?;
            decimal("pnl", &x.pnl)?;
            decimal("max_drawdown", &x.max_drawdown)?;
        }
    }
    shape(
        "instruments",
        report.instruments.len(),
        first.instruments.len(),
    )?;
    for i in &report.instruments {
        for figure in [&i.index_min, &i.index_max, &i.index_last] {
            decimal("an instrument's index", figure)?;
        }
        for row in &i.path {
            decimal("a path's index", &row[1])?;
        }
    }
    let (factors, first_factors) = (
        &report.scenario.shock_factors,
        &first.scenario.shock_factors,
    );
    shape("shock factors", factors.len(), first_factors.len())?;
    for f in factors {
        decimal("a shock factor", f)?;
    }
    let (drawn, first_drawn) = (
        &report.outcomes.insurance_drawn,
        &first.outcomes.insurance_drawn,
    );
    shape("insurance assets", drawn.len(), first_drawn.len())?;
    for (asset, paid) in drawn {
        shape(
            "insurance assets named alike",
            first_drawn.contains_key(asset) as usize,
            1,
        )?;
        decimal("insurance drawn", paid)?;
    }
    Ok(())
}

/// p1, p5, p50, p95, p99 (nearest rank) and the worst of one figure across seeds.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Distribution {
    pub p1: String,
    pub p5: String,
    pub p50: String,
    pub p95: String,
    pub p99: String,
    pub worst: String,
}

/// `low_is_bad`: equity and PnL are worst at their minimum, drawdowns and liquidation
/// counts at their maximum.
pub fn distribution(mut values: Vec<Decimal>, low_is_bad: bool) -> Distribution {
    assert!(!values.is_empty(), "a distribution of at least one run");
    values.sort();
    let rank = |p: u32| {
        let n = values.len();
        let i = (n * p as usize).div_ceil(100).clamp(1, n) - 1;
        text(values[i])
    };
    let worst = if low_is_bad {
        values[0]
    } else {
        values[values.len() - 1]
    };
    Distribution {
        p1: rank(1),
        p5: rank(5),
        p50: rank(50),
        p95: rank(95),
        p99: rank(99),
        worst: text(worst),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_ranges_are_half_open_or_inclusive() {
        assert_eq!(parse_seeds("3..6"), Ok(vec![3, 4, 5]));
        assert_eq!(parse_seeds("3..=6"), Ok(vec![3, 4, 5, 6]));
        for bad in ["6..3", "3..3", "a..b", "3", "0..2000000"] {
            assert!(parse_seeds(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn shards_partition_the_seeds() {
        let seeds: Vec<u64> = (10..20).collect();
        let mut all: Vec<u64> = (0..3).flat_map(|i| shard(&seeds, i, 3).unwrap()).collect();
        all.sort();
        assert_eq!(all, seeds);
        assert!(shard(&seeds, 3, 3).is_err());
    }

    #[test]
    fn the_index_comes_from_the_flag_then_the_schedulers_variables() {
        let env = |name: &str| (name == "SLURM_ARRAY_TASK_ID").then(|| "2".to_owned());
        assert_eq!(shard_index(None, env), Ok(Some(2)));
        assert_eq!(shard_index(Some(1), env), Ok(Some(1)));
        assert_eq!(shard_index(None, |_| None), Ok(None));
        assert!(shard_index(None, |_| Some("x".into())).is_err());
    }

    #[test]
    fn percentiles_are_nearest_rank_and_worst_follows_the_figure() {
        let values: Vec<Decimal> = (1..=100).map(Decimal::from).collect();
        let d = distribution(values.clone(), true);
        assert_eq!(
            (
                d.p1.as_str(),
                d.p5.as_str(),
                d.p50.as_str(),
                d.p99.as_str(),
                d.worst.as_str()
            ),
            ("1", "5", "50", "99", "1")
        );
        assert_eq!(distribution(values, false).worst, "100");
        assert_eq!(distribution(vec![Decimal::from(7)], true).p99, "7");
    }
}
