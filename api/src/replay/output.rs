//! A run's directory: written under a temporary name beside it and renamed when complete,
//! with a `DONE` marker, so a reader (or a retried shard) never sees half a run. It holds
//! `journal.redb`, `report.json`, `ledger.csv`, `trades.csv`, `report.html` and
//! `manifest.json` (the binary's version, the scenario's hash, the seed, each file's hash).

use perpsim_core::ids::hex;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use perpsim_storage::Journal;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::files::{self, Limits};
use super::plan::Plan;
use super::report::{self, Report, RunInfo};
use super::run::{self, Observed};
use perpsim_systems::Engine;
use perpsim_systems::command::AdvanceClock;

/// The files a run writes, in the manifest's order (the manifest itself last).
pub const FILES: [&str; 5] = [
    "journal.redb",
    "report.json",
    "ledger.csv",
    "trades.csv",
    "report.html",
];
pub const MANIFEST: &str = "manifest.json";
pub const DONE: &str = "DONE";

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    pub perpsim: String,
    /// The scenario as given on the command line, made absolute; `replay verify` reads it.
    pub scenario: Option<String>,
    /// SHA-256 of the scenario file and every price file it names, in that order.
    pub scenario_sha256: Option<String>,
    /// The same files one by one: the scenario's name, then each file by its path in the
    /// scenario's directory; `replay verify` checks them before it reads the scenario.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<InputHash>,
    pub seed: u64,
    pub state_hash: String,
    /// SHA-256 of each file, by name.
    pub files: BTreeMap<String, String>,
}

/// SHA-256 of a file, read in blocks within `max_bytes`, as a hasher to finalise; each block
/// also goes to `also` where one is given (the hash of several files in a row). Hashing is
/// most of a read from the page cache, so no block is hashed where nothing reads the hash.
fn file_sha256(
    path: &Path,
    max_bytes: u64,
    mut also: Option<&mut Sha256>,
) -> Result<Sha256, String> {
    let mut one = Sha256::new();
    files::for_each_block(path, max_bytes, |block| {
        one.update(block);
        if let Some(also) = also.as_deref_mut() {
            also.update(block);
        }
    })
    .map_err(|m| format!("{}: {m}", path.display()))?;
    Ok(one)
}

/// One input of a run and its hash.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct InputHash {
    pub file: String,
    pub sha256: String,
}

/// The scenario's inputs, each with its hash (the scenario by its name, the files it names
/// by their path in its directory), and the hash of all of them in that order. Each is read
/// within `--max-file-bytes`, as planning read it; the scenario's only where its `read` hash
/// (of the text planned) is not given.
pub fn input_hashes(
    file: &Path,
    (plan_inputs, read): (&[PathBuf], Option<&Sha256>),
    limits: &Limits,
) -> Result<(String, Vec<InputHash>), String> {
    let dir = files::directory_of(file)?;
    let name = file.file_name().map(|n| n.to_string_lossy().into_owned());
    let mut all = Sha256::new();
    let mut each = Vec::new();
    for (i, p) in std::iter::once(file)
        .chain(plan_inputs.iter().map(PathBuf::as_path))
        .enumerate()
    {
        let digest = match i {
            // Nothing comes before the first input: the hash of all so far is its own.
            0 => {
                let digest = match read {
                    Some(read) => read.clone(),
                    None => file_sha256(p, limits.max_file_bytes, None)?,
                };
                all = digest.clone();
                digest
            }
            _ => file_sha256(p, limits.max_file_bytes, Some(&mut all))?,
        };
        let sha256 = hex(&digest.finalize());
        let relative = match i {
            0 => name.clone().unwrap_or_default(),
            _ => p.strip_prefix(&dir).unwrap_or(p).display().to_string(),
        };
        each.push(InputHash {
            file: relative,
            sha256,
        });
    }
    Ok((hex(&all.finalize()), each))
}

/// Checks the inputs a manifest lists against `file` and the files beside it, before
/// anything reads them as a scenario: the first is `file` itself, the others resolve in its
/// directory as a scenario's do.
pub fn check_inputs(file: &Path, inputs: &[InputHash], limits: &Limits) -> Result<(), String> {
    for (i, input) in inputs.iter().enumerate() {
        let path = match i {
            0 => file.to_path_buf(),
            _ => files::resolve(file, &input.file)?,
        };
        if hex(&file_sha256(&path, limits.max_file_bytes, None)?.finalize()) != input.sha256 {
            return Err(format!(
                "{} is not the file this run was made from (its hash changed)",
                path.display()
            ));
        }
    }
    Ok(())
}

/// A sibling of `out` a run is built in, created anew: removed with everything in it unless
/// the run finished and renamed it to `out`, so a failed run leaves nothing behind.
struct Staging {
    path: PathBuf,
    finished: bool,
}

impl Staging {
    fn new(out: &Path) -> Result<Self, String> {
        let name = out
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "run".into());
        let path = out.with_file_name(format!(".{name}.partial-{}", std::process::id()));
        // A leftover of this pid, or a link planted at the name: removed, never followed.
        match path.symlink_metadata() {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&path),
            Ok(_) => std::fs::remove_file(&path),
            Err(_) => Ok(()),
        }
        .map_err(|e| format!("{}: {e}", path.display()))?;
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        std::fs::create_dir(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Staging {
            path,
            finished: false,
        })
    }

    /// Marks the run complete and moves it to `out` in one rename.
    fn finish(mut self, out: &Path) -> Result<(), String> {
        write(&self.path.join(DONE), b"")?;
        if out.exists() {
            // Empty (checked before the run): a directory the caller made for it.
            std::fs::remove_dir(out).map_err(|e| format!("{}: {e}", out.display()))?;
        }
        std::fs::rename(&self.path, out)
            .map_err(|e| format!("{} → {}: {e}", self.path.display(), out.display()))?;
        self.finished = true;
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.finished {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Refuses an `out` that already holds something, or is a link: a run never mixes with
/// another's files, nor writes where a link leads.
pub fn check_free(out: &Path) -> Result<(), String> {
    if out
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
    {
        return Err(format!(
            "{} is a symbolic link; give a new --out directory",
            out.display()
        ));
    }
    let empty = std::fs::read_dir(out)
        .map(|mut e| e.next().is_none())
        .unwrap_or(true);
    match empty {
        true => Ok(()),
        false => Err(format!(
            "{} is not empty; give a new --out directory",
            out.display()
        )),
    }
}

/// What a run printed: its state hash and where its wall time went.
#[derive(Debug, Clone)]
pub struct Finished {
    pub state_hash: String,
    /// Events applied and refused, and what the venue did about risk.
    pub outcomes: report::Outcomes,
    /// Seconds: the engine (every tick, and any wait for the journal's writer), the journal's
    /// commits (on a thread of their own, beside the engine), the report files.
    pub engine_seconds: f64,
    pub journal_seconds: f64,
    pub report_seconds: f64,
}

/// Runs `plan` into `out`, consuming its steps (see [`run::run`]).
pub fn scenario_run(
    file: &Path,
    plan: &mut Plan,
    out: &Path,
    limits: &Limits,
    fed: Option<&mut super::feed::Fed>,
    progress: &dyn Fn(u64, u64),
) -> Result<Finished, String> {
    check_free(out)?;
    let staging = Staging::new(out)?;
    let stage = staging.path.clone();
    let journal = Journal::open(&stage.join(FILES[0])).map_err(|e| e.to_string())?;
    let started = std::time::Instant::now();
    let (ledger, trades) = (stage.join(FILES[2]), stage.join(FILES[3]));
    let tables = (ledger.as_path(), trades.as_path());
    let (engine, mut observed, journal_time, streamed) =
        run::run(plan, fed, (&journal, tables), progress)?;
    observed.logs = streamed.tallies;
    let tables = [streamed.ledger, streamed.trades];
    drop(journal);
    let ran = started.elapsed();
    let info = RunInfo {
        name: plan.name.clone(),
        seed: plan.genesis.seed,
        end: plan.end,
        sample_every_ms: plan.sample_every_ms,
        events: Some(plan.events),
    };
    let absolute = std::path::absolute(file).map_err(|e| e.to_string())?;
    let read = plan.text_sha256.as_ref();
    let (all, each) = input_hashes(file, (&plan.inputs, read), limits)?;
    let scenario = Some(Scenario {
        path: absolute.display().to_string(),
        sha256: all,
        inputs: each,
    });
    let reporting = std::time::Instant::now();
    let report = write_reports(&stage, (&engine, tables), &observed, &info, scenario)?;
    staging.finish(out)?;
    Ok(Finished {
        state_hash: report.state_hash,
        outcomes: report.outcomes,
        engine_seconds: ran.as_secs_f64(),
        journal_seconds: journal_time.as_secs_f64(),
        report_seconds: reporting.elapsed().as_secs_f64(),
    })
}

/// The scenario a run was made from, for its manifest.
pub struct Scenario {
    pub path: String,
    pub sha256: String,
    pub inputs: Vec<InputHash>,
}

/// The report files and the manifest of a finished run in `dir`, whose `ledger.csv` and
/// `trades.csv` were written as it ran (`streamed`; `tables` are their SHA-256); the state
/// hash and the journal's, each computed on a thread of its own while the report is built.
pub fn write_reports(
    dir: &Path,
    (engine, tables): (&Engine, [String; 2]),
    observed: &Observed,
    info: &RunInfo,
    scenario: Option<Scenario>,
) -> Result<Report, String> {
    let view = engine.closing();
    let path = |name: &str| dir.join(name);
    let [ledger, trades] = tables;
    let (report, files) = std::thread::scope(|s| {
        let state_hash = s.spawn(|| engine.state_hash().to_string());
        let journal =
            s.spawn(|| file_sha256(&path(FILES[0]), u64::MAX, None).map(|d| hex(&d.finalize())));
        let state_hash = || {
            let hash = state_hash.join();
            hash.expect("the state hash is a pure function")
        };
        let report = report::build(engine, &view, observed, info, state_hash);
        let journal = journal.join().expect("hashing a file does not panic");
        let json = serde_json::to_string_pretty(&report).expect("a report encodes") + "\n";
        write(&path(FILES[1]), json.as_bytes())?;
        let page = report::html::page(&report, observed);
        write(&path(FILES[4]), page.as_bytes())?;
        let hashes = [
            journal?,
            sha256(json.as_bytes()),
            ledger,
            trades,
            sha256(page.as_bytes()),
        ];
        let files: BTreeMap<_, _> = FILES.iter().map(|f| f.to_string()).zip(hashes).collect();
        Ok::<_, String>((report, files))
    })?;
    let manifest = Manifest {
        perpsim: env!("CARGO_PKG_VERSION").to_owned(),
        scenario: scenario.as_ref().map(|s| s.path.clone()),
        scenario_sha256: scenario.as_ref().map(|s| s.sha256.clone()),
        inputs: scenario.map(|s| s.inputs).unwrap_or_default(),
        seed: info.seed,
        state_hash: report.state_hash.clone(),
        files,
    };
    write(
        &dir.join(MANIFEST),
        (serde_json::to_string_pretty(&manifest).expect("a manifest encodes") + "\n").as_bytes(),
    )?;
    Ok(report)
}

fn sha256(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    std::fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// Reads a finished run's manifest (`DONE` present).
pub fn manifest(dir: &Path) -> Result<Manifest, String> {
    if !dir.join(DONE).exists() {
        return Err(format!(
            "{} holds no finished run (no {DONE} marker)",
            dir.display()
        ));
    }
    let text = std::fs::read_to_string(dir.join(MANIFEST))
        .map_err(|e| format!("{}: {e}", dir.join(MANIFEST).display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", dir.join(MANIFEST).display()))
}

/// The report of a recorded journal (a server's data dir, running or not, or a run's), written
/// to `out` with the journal of the ticks it read (re-journaled tick by tick: a byte copy of
/// a file a server is writing could be caught mid-commit): the files a scenario run writes.
/// Samples are taken after each tick whose clock passed a sample instant.
pub fn journal_run(path: &Path, out: &Path) -> Result<String, String> {
    check_free(out)?;
    let source = open_journal(path)?;
    let genesis = source
        .genesis()
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("{} holds no genesis", path.display()))?;
    let end = last_instant(&source)?.max(genesis.start);
    let every = ((end.millis() - genesis.start.millis()) / 500).max(1_000);
    let staging = Staging::new(out)?;
    let stage = staging.path.clone();
    let copy = Journal::open(&stage.join(FILES[0])).map_err(|e| e.to_string())?;
    copy.init(&genesis).map_err(|e| e.to_string())?;
    let engine = run::replaying(Engine::genesis(genesis.clone()));
    let assets = run::settlement_assets(&engine);
    let (ledger, trades) = (stage.join(FILES[2]), stage.join(FILES[3]));
    let tables = (ledger.as_path(), trades.as_path());
    let ((engine, mut observed), _, streamed) = run::journaled(&copy, tables, |batches| {
        rerun(
            &source,
            run::Runner::new(engine, batches, assets),
            genesis.start,
            every,
        )
    })?;
    drop((copy, source));
    // The file's name, not its path: the same journal elsewhere reports the same.
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let info = RunInfo {
        name,
        seed: genesis.seed,
        end: engine.clock().now,
        sample_every_ms: every,
        events: None,
    };
    observed.logs = streamed.tallies;
    let tables = [streamed.ledger, streamed.trades];
    let hash = write_reports(&stage, (&engine, tables), &observed, &info, None)?.state_hash;
    staging.finish(out)?;
    Ok(hash)
}

/// Opens a journal to read without changing it: a running server's too when it serves with
/// `--journal-readers on` (redb's single-writer mode lets a reader follow its commits); any
/// other running server's is refused with what to do. A journal a crash left needing
/// recovery cannot be read so; it is opened to write, which repairs it, when no process
/// holds it.
pub fn open_journal(path: &Path) -> Result<Journal, String> {
    if !path.exists() {
        return Err(format!("no journal at {}", path.display()));
    }
    let in_use = |m: String| {
        format!(
            "{m}: held by a running perpsim server that does not share it: stop the server (everything it confirmed is in the journal) and run this again, or serve with --journal-readers on to replay while it runs"
        )
    };
    match Journal::open_read_only(path) {
        Ok(journal) => Ok(journal),
        Err(perpsim_storage::JournalError::InUse(m)) => Err(in_use(m)),
        Err(first) => Journal::open(path).map_err(|e| match e {
            // Held by a writer that shares it, and yet unreadable: say why.
            perpsim_storage::JournalError::InUse(_) => format!("{}: {first}", path.display()),
            other => format!("{}: {other}", path.display()),
        }),
    }
}

/// A recorded journal's ticks through `r`, sampled after each tick whose clock passed a
/// sample instant (every `every` ms from `start`).
fn rerun(
    source: &Journal,
    mut r: run::Runner,
    start: perpsim_core::time::Timestamp,
    every: i64,
) -> Result<(Engine, run::Observed), String> {
    r.sample();
    let mut next = start.plus_millis(every);
    let mut failed = None;
    source
        .for_each_tick_after(0, |_, record| {
            if let Err(e) = r.tick(record.time, record.commands) {
                failed.get_or_insert(e);
            }
            if r.engine.clock().now >= next {
                r.sample();
                while next <= r.engine.clock().now {
                    next = next.plus_millis(every);
                }
            }
            Ok(())
        })
        .map_err(|e| e.to_string())?;
    if let Some(e) = failed {
        return Err(e);
    }
    r.sample();
    r.flush()?;
    Ok(r.into_parts())
}

/// The instant a journal reaches: its last tick's time, or the end of its last advance.
fn last_instant(journal: &Journal) -> Result<perpsim_core::time::Timestamp, String> {
    let last = journal.last_tick().map_err(|e| e.to_string())?;
    let Some(record) = journal.tick(last).map_err(|e| e.to_string())? else {
        return Ok(perpsim_core::time::Timestamp::EPOCH);
    };
    let advanced = record.commands.iter().filter_map(|c| match c {
        perpsim_systems::Command::AdvanceClock(AdvanceClock { to }) => Some(*to),
        _ => None,
    });
    Ok(advanced.fold(record.time, perpsim_core::time::Timestamp::max))
}
