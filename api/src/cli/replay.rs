//! `perpsim replay`: a scenario into a run directory, Monte-Carlo over seeds (in worker
//! processes, or one shard of a cluster array job), a recorded journal into the same report
//! or checked against its snapshots, `verify` and `summarize`.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use serde_json::json;

use crate::replay::{self, Limits, montecarlo, output, summary};

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ReplayArgs {
    #[command(subcommand)]
    pub action: Option<ReplayCmd>,
    /// The scenario file, YAML or JSON (D11; format: openapi/scenario.schema.json).
    pub scenario: Option<PathBuf>,
    /// A recorded journal (a data dir's journal.redb) to re-run instead of a scenario: with
    /// --out, its report; without, a check that it reaches every recorded snapshot hash.
    #[arg(long, conflicts_with_all = ["scenario", "seed", "seeds"])]
    pub journal: Option<PathBuf>,
    /// The directory to write (must be new or empty); with --seeds, one seed-<S> directory
    /// per seed and the summary.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Run with this seed instead of the scenario's.
    #[arg(long, conflicts_with = "seeds")]
    pub seed: Option<u64>,
    /// Monte-Carlo over seeds A..B (B excluded) or A..=B, each an independent run.
    #[arg(long)]
    pub seeds: Option<String>,
    /// Worker processes at once for --seeds, 1 to 256 [default: 1].
    #[arg(long, requires = "seeds")]
    pub jobs: Option<usize>,
    /// This shard's index (0-based) of --count; when unset, JOB_COMPLETION_INDEX (Kubernetes
    /// Indexed Job), SLURM_ARRAY_TASK_ID (Slurm array) or AWS_BATCH_JOB_ARRAY_INDEX.
    #[arg(long, requires = "count")]
    pub index: Option<u64>,
    /// Split --seeds into this many shards and run only this one's (see --index); merge the
    /// shards' directories with `perpsim replay summarize`.
    #[arg(long, requires = "seeds")]
    pub count: Option<u64>,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// Exit 3 (after writing the run) when the venue refused any of the scenario's requests,
    /// a customer's setup included; with --seeds, any seed's.
    #[arg(long, conflicts_with = "journal")]
    pub strict: bool,
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// Bounds on what a scenario may make a run read and hold: a scenario is someone else's
/// file (D11). Each refusal names its flag.
#[derive(Args, Debug, Clone, Default)]
pub struct LimitArgs {
    /// Bytes of the scenario file and of each file it names [default: 268435456].
    #[arg(long)]
    pub max_file_bytes: Option<u64>,
    /// Bytes of one line of a file the scenario names [default: 65536].
    #[arg(long)]
    pub max_record_bytes: Option<u64>,
    /// Bytes of the scenario's text once its YAML aliases are expanded [default: 536870912].
    #[arg(long)]
    pub max_expanded_bytes: Option<u64>,
    /// Steps of the timeline, events and price rows together [default: 5000000].
    #[arg(long)]
    pub max_steps: Option<u64>,
    /// Report samples times the customers and instruments sampled [default: 5000000].
    #[arg(long)]
    pub max_samples: Option<u64>,
}

impl LimitArgs {
    pub fn resolve(&self) -> Limits {
        let d = Limits::default();
        Limits {
            max_file_bytes: self.max_file_bytes.unwrap_or(d.max_file_bytes),
            max_record_bytes: self.max_record_bytes.unwrap_or(d.max_record_bytes),
            max_expanded_bytes: self.max_expanded_bytes.unwrap_or(d.max_expanded_bytes),
            max_steps: self.max_steps.unwrap_or(d.max_steps),
            max_samples: self.max_samples.unwrap_or(d.max_samples),
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum ReplayCmd {
    /// Re-run a finished run directory from its scenario (or journal) and check that every
    /// file is the same, byte for byte.
    Verify {
        /// A run directory (holding manifest.json and DONE).
        dir: PathBuf,
        /// The scenario, if it moved since the run (its hash must still match).
        #[arg(long)]
        scenario: Option<PathBuf>,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Merge finished seed directories (from any number of shards) into summary.json and
    /// summary.html, the summary one machine writes.
    Summarize {
        /// Directories holding seed-<S> directories.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Where to write the summary.
        #[arg(long)]
        out: PathBuf,
    },
}

pub fn run(args: ReplayArgs) -> Result<i32, String> {
    match args.action {
        Some(ReplayCmd::Verify {
            dir,
            scenario,
            limits,
        }) => return verify(&dir, scenario.as_deref(), &limits.resolve()),
        Some(ReplayCmd::Summarize { dirs, out }) => {
            let runs = montecarlo::finished(&dirs)?;
            summary::write(&out, &runs)?;
            println!(
                "{}",
                json!({"runs": runs.len(), "out": out.display().to_string()})
            );
            return Ok(0);
        }
        None => {}
    }
    if let Some(journal) = &args.journal {
        return match &args.out {
            Some(out) => {
                let hash = output::journal_run(journal, out)?;
                println!(
                    "{}",
                    json!({"state_hash": hash, "out": out.display().to_string()})
                );
                Ok(0)
            }
            None => check_journal(journal),
        };
    }
    let scenario = args
        .scenario
        .clone()
        .ok_or("give a SCENARIO file, or --journal FILE")?;
    let out = args
        .out
        .clone()
        .ok_or("give --out DIR: where the run's files go")?;
    let limits = args.limits.resolve();
    match &args.seeds {
        Some(seeds) => {
            // Read (and refused, if it must be) before any worker starts.
            replay::read(&scenario, &limits).map_err(|e| e.to_string())?;
            monte_carlo(&args, seeds, &scenario, &out)
        }
        None => {
            let code = single(&scenario, &out, &limits, args.seed, args.quiet)?;
            Ok(strict_code(args.strict, [&code]))
        }
    }
}

/// One run, made as the scenario is read (`replay::feed`; a refused scenario leaves nothing
/// written); prints its hash and where the wall time went: reading the scenario until the run
/// could start, the engine, the journal's commits (beside the engine, on a thread of their
/// own), the report files (the benchmark's split; in no file, which stay byte-identical).
fn single(
    scenario: &Path,
    out: &Path,
    limits: &Limits,
    seed: Option<u64>,
    quiet: bool,
) -> Result<replay::report::Outcomes, String> {
    let started = std::time::Instant::now();
    let bar = progress(0, quiet);
    let read = std::sync::Mutex::new(0.0);
    let (plan, done) = replay::run_as_read(scenario, limits, |plan, fed| {
        if let Some(seed) = seed {
            plan.genesis.seed = seed;
        }
        *read.lock().expect("one run at a time") = started.elapsed().as_secs_f64();
        let progress = |n, known| {
            if bar.length() != Some(known) {
                bar.set_length(known);
            }
            bar.set_position(n);
        };
        output::scenario_run(scenario, plan, out, limits, fed, &progress)
    })?;
    let read = read.into_inner().expect("one run at a time");
    bar.finish_and_clear();
    let seconds = json!({
        "read": read,
        "engine": done.engine_seconds,
        "journal": done.journal_seconds,
        "report": done.report_seconds,
        "total": started.elapsed().as_secs_f64(),
    });
    let out = out.display().to_string();
    eprintln!("perpsim: {}", done.outcomes);
    println!(
        "{}",
        json!({"state_hash": done.state_hash, "seed": plan.genesis.seed, "out": out,
            "outcomes": done.outcomes, "seconds": seconds})
    );
    Ok(done.outcomes)
}

/// The exit code of runs whose outcomes are `outcomes`: 3 under `--strict` when any request
/// was refused, else 0 (refused requests are outcomes of a run, not errors).
fn strict_code<'a>(
    strict: bool,
    outcomes: impl IntoIterator<Item = &'a replay::report::Outcomes>,
) -> i32 {
    let refused = outcomes
        .into_iter()
        .any(|o| o.refused + o.setup_refused > 0);
    match strict && refused {
        true => 3,
        false => 0,
    }
}

/// The seeds of `--seeds` (this shard's, with `--count`) in worker processes; the summary
/// when the whole range ran here.
fn monte_carlo(args: &ReplayArgs, seeds: &str, scenario: &Path, out: &Path) -> Result<i32, String> {
    let seeds = montecarlo::parse_seeds(seeds)?;
    let index = montecarlo::shard_index(args.index, |v| std::env::var(v).ok())?;
    let mine = match (args.count, index) {
        (Some(count), Some(index)) => montecarlo::shard(&seeds, index, count)?,
        (Some(_), None) => return Err("--count needs --index or a scheduler's index variable (JOB_COMPLETION_INDEX, SLURM_ARRAY_TASK_ID, AWS_BATCH_JOB_ARRAY_INDEX)".into()),
        (None, _) => seeds,
    };
    let jobs = args.jobs.unwrap_or(1);
    if !(1..=montecarlo::MAX_JOBS).contains(&jobs) {
        return Err(format!(
            "--jobs must be 1 to {}, got {jobs}",
            montecarlo::MAX_JOBS
        ));
    }
    let bounds = worker_limits(&args.limits.resolve());
    montecarlo::run_seeds(scenario, &mine, jobs, out, &bounds)?;
    let runs = montecarlo::finished(&[out.to_path_buf()])?;
    if args.count.is_none() {
        summary::write(out, &runs)?;
    }
    println!(
        "{}",
        json!({"seeds": mine, "out": out.display().to_string()})
    );
    Ok(strict_code(
        args.strict,
        runs.iter().map(|(_, r)| &r.outcomes),
    ))
}

/// The progress bar on stderr: hidden when asked, and by indicatif when stderr is not a
/// terminal.
fn progress(len: u64, quiet: bool) -> indicatif::ProgressBar {
    if quiet {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(len),
        indicatif::ProgressDrawTarget::stderr(),
    );
    bar.set_style(
        indicatif::ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} events")
            .expect("a valid template"),
    );
    bar
}

/// The bounds a worker runs with: this run's, as flags.
fn worker_limits(l: &Limits) -> Vec<String> {
    [
        ("--max-file-bytes", l.max_file_bytes),
        ("--max-record-bytes", l.max_record_bytes),
        ("--max-expanded-bytes", l.max_expanded_bytes),
        ("--max-steps", l.max_steps),
        ("--max-samples", l.max_samples),
    ]
    .into_iter()
    .flat_map(|(flag, v)| [flag.to_owned(), v.to_string()])
    .collect()
}

/// Re-runs a run directory into a sibling and compares every file.
fn verify(dir: &Path, scenario: Option<&Path>, limits: &Limits) -> Result<i32, String> {
    let manifest = output::manifest(dir)?;
    let again = dir.with_file_name(format!(".verify-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&again);
    let file = scenario
        .map(Path::to_path_buf)
        .or(manifest.scenario.as_ref().map(PathBuf::from));
    let result = match file {
        Some(file) if manifest.scenario_sha256.is_some() => rerun(&file, &manifest, &again, limits),
        _ => output::journal_run(&dir.join(output::FILES[0]), &again),
    };
    let differ = result.map(|_| compare(dir, &again));
    let _ = std::fs::remove_dir_all(&again);
    let differ = differ?;
    println!(
        "{}",
        json!({"dir": dir.display().to_string(), "identical": differ.is_empty(), "differ": differ})
    );
    Ok(if differ.is_empty() { 0 } else { 1 })
}

/// The scenario of a manifest run again into `again`: its inputs are checked against the
/// manifest's hashes before anything reads the scenario (someone else's run directory may
/// name any file), then the scenario is read and run with the manifest's seed.
fn rerun(
    file: &Path,
    manifest: &output::Manifest,
    again: &Path,
    limits: &Limits,
) -> Result<String, String> {
    output::check_inputs(file, &manifest.inputs, limits)?;
    let mut plan = replay::read(file, limits).map_err(|e| e.to_string())?;
    // The file itself, hashed again: it is what the manifest is checked against.
    let (found, _) = output::input_hashes(file, (&plan.inputs, None), limits)?;
    if Some(&found) != manifest.scenario_sha256.as_ref() {
        return Err(format!(
            "{} is not the scenario this run was made from (its hash changed)",
            file.display()
        ));
    }
    plan.genesis.seed = manifest.seed;
    output::scenario_run(file, &mut plan, again, limits, None, &|_, _| {}).map(|f| f.state_hash)
}

/// The files of `a` whose bytes differ in `b` (or are missing there).
fn compare(a: &Path, b: &Path) -> Vec<String> {
    output::FILES
        .iter()
        .chain([&output::MANIFEST])
        .filter(|name| std::fs::read(a.join(name)).ok() != std::fs::read(b.join(name)).ok())
        .map(|name| name.to_string())
        .collect()
}

/// Without --out: re-runs the journal from genesis and checks every recorded snapshot hash.
fn check_journal(path: &Path) -> Result<i32, String> {
    let journal = output::open_journal(path)?;
    let started = std::time::Instant::now();
    let replayed = perpsim_storage::replay_from_genesis(&journal)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("{} holds no genesis", path.display()))?;
    let counters = replayed.engine.counters();
    let mismatched: Vec<u64> = replayed
        .verified
        .iter()
        .filter(|(_, ok)| !ok)
        .map(|(s, _)| s.tick)
        .collect();
    println!(
        "{}",
        json!({
            "ticks": counters.ticks,
            "commands": counters.commands,
            "state_hash": replayed.engine.state_hash().to_string(),
            "snapshots_checked": replayed.verified.len(),
            "snapshots_mismatched": mismatched,
            "seconds": started.elapsed().as_secs_f64(),
        })
    );
    Ok(if mismatched.is_empty() { 0 } else { 2 })
}
