//! Scenario replay for risk teams (D11, issue 26): a scenario file through the engine the
//! service runs, on its manual clock, into a directory holding the journal, `report.json`,
//! `ledger.csv`, `trades.csv`, `report.html` and a `manifest.json` of their hashes; a
//! recorded journal into the same report; Monte-Carlo over a seed range, in worker processes
//! or as shards of a cluster scheduler's array job, merged into one summary.
//!
//! It drives the engine and the journal directly (no HTTP), and reads every event body with
//! the API's own request types and turns it into the command the API would send.

pub mod bootstrap;
pub mod events;
pub mod feed;
pub mod fields;
pub mod files;
pub mod format;
pub mod from_journal;
pub mod latency;
pub mod market;
pub mod montecarlo;
pub mod output;
pub mod plan;
mod prices;
mod recorded;
pub mod report;
pub mod run;
pub mod schema;
mod stream;
pub mod summary;
mod table;
pub mod timeline;
pub mod timing;
pub mod whatif;

use std::path::Path;

use sha2::{Digest, Sha256};

use self::feed::{Fed, Feeder, ReadOver};
pub use self::files::Limits;
use self::format::Scenario;
use self::plan::{Plan, ScenarioError, located};

/// Reads and resolves a scenario file (YAML or JSON), within `limits`: nothing it holds or
/// names makes the run read or hold more than they allow, and every refusal names its flag.
pub fn read(file: &Path, limits: &Limits) -> Result<Plan, ScenarioError> {
    planned(file, &text(file, limits)?, limits)
}

/// The plan of a scenario's `text` (see [`read`]).
fn planned(file: &Path, text: &str, limits: &Limits) -> Result<Plan, ScenarioError> {
    if let Some(plan) = one_pass(file, text, is_json(text), limits, None) {
        return Ok(plan);
    }
    // Refused, or written in an order the one pass does not take: read again the whole way,
    // by the YAML reader, which says where.
    plan::plan((file, text), parse(file, text, limits)?, limits)
}

/// JSON (YAML's flow style), which serde_json reads, or YAML.
fn is_json(text: &str) -> bool {
    text.trim_start().starts_with('{')
}

/// Reads `file` and runs it as it is read (`feed`): `run` gets the plan with its steps to
/// come from the feed, on this thread while one of its own reads; where the feed gives up,
/// `run` is called again here with the whole plan of the same text ([`read`]'s, or its
/// refusal) — as a scenario the feed never starts on is read and run on this thread alone,
/// its memory reused. The plan as run, and what `run` made of it.
pub fn run_as_read<T>(
    file: &Path,
    limits: &Limits,
    mut run: impl FnMut(&mut Plan, Option<&mut Fed>) -> Result<T, String>,
) -> Result<(Plan, T), String> {
    let text = text(file, limits).map_err(|e| e.to_string())?;
    let (to_run, from_reader) = std::sync::mpsc::channel();
    let (fed_run, whole) = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            give_way_to_the_run();
            // Dropped at the end: no start is coming after it, and a run waiting for one ends.
            let mut feeder = Feeder::new(to_run);
            one_pass(file, &text, is_json(&text), limits, Some(&mut feeder))
        });
        let mut fed = Fed::new(from_reader);
        let fed_run = fed.start().and_then(|mut plan| {
            let made = run(&mut plan, Some(&mut fed));
            (!fed.gave_up()).then_some((made, plan))
        });
        // Dropped with the run: the reader's next hand-out finds no one and stops.
        drop(fed);
        (fed_run, reader.join().expect("the read does not panic"))
    });
    if let Some((made, plan)) = fed_run {
        return made.map(|made| (plan, made));
    }
    let mut plan = match whole {
        Some(plan) => plan,
        // The text read once: planned again the whole way, which says where for a refusal.
        None => planned(file, &text, limits).map_err(|e| e.to_string())?,
    };
    plan.text_sha256 = Some(Sha256::new_with_prefix(&text));
    drop(text);
    let made = run(&mut plan, None)?;
    Ok((plan, made))
}

/// How much less of the processor the reading thread asks for than the run's threads: a
/// nice value this much higher (Linux's scheduler then gives it about a tenth of a core it
/// shares with one of them).
const READER_NICE: i32 = 10;

/// The reader is done within the first seventh of a long run, and ahead of it all the way;
/// on a machine with fewer cores than the run's threads (the engine, two writers) and the
/// reader's two, a fair share cost the engine a fifth of its first seconds. So the reading
/// thread lowers its own priority, and the check it spawns inherits it (on Linux a nice value
/// is a thread's; elsewhere nothing is asked). Only ever lowered, so never refused.
fn give_way_to_the_run() {
    #[cfg(target_os = "linux")]
    if let Ok(now) = rustix::process::getpriority_process(None) {
        // A scheduling hint: where it is not taken, the read just shares as before.
        let _ = rustix::process::setpriority_process(None, (now + READER_NICE).min(19));
    }
}

/// The scenario's text, within `limits`.
fn text(file: &Path, limits: &Limits) -> Result<String, ScenarioError> {
    let origin = serde_saphyr::Location::UNKNOWN;
    let bytes = files::read(file, limits.max_file_bytes)
        .map_err(|m| located(file, origin, format!("cannot read the scenario: {m}")))?;
    String::from_utf8(bytes).map_err(|_| located(file, origin, "the scenario is not UTF-8 text"))
}

/// The plan of the one pass (`stream`), fed to `feeder` as it is read if there is one: `None`
/// where the pass gives up or refuses, or where the steps went to the feeder.
///
/// JSON is read by serde_json, an order of magnitude faster than the YAML reader but without
/// locations, and its plan stands only if no object repeats a key (serde_json reads the last).
/// That check is a pass of its own over the text: it runs beside the read.
fn one_pass(
    file: &Path,
    text: &str,
    json: bool,
    limits: &Limits,
    mut feeder: Option<&mut Feeder>,
) -> Option<Plan> {
    std::thread::scope(|s| {
        let unique =
            json.then(|| s.spawn(|| crate::contract::strict_json::refuse_duplicate_keys_in(text)));
        let plan = stream::plan(file, text, json, limits, feeder.as_deref_mut());
        let unique = unique.is_none_or(|u| u.join().is_ok_and(|r| r.is_ok()));
        match (plan, feeder) {
            (Some(mut plan), Some(f)) if f.handed() => {
                let inputs = std::mem::take(&mut plan.inputs);
                // Hashed here, with the run well behind: its manifest needs it only at the end.
                let done = || ReadOver {
                    events: plan.events,
                    inputs,
                    text_sha256: Sha256::new_with_prefix(text),
                };
                f.done(&mut plan.steps, done, unique);
                None
            }
            (Some(plan), _) if unique => Some(plan),
            (_, f) => {
                f.map(Feeder::give_up);
                None
            }
        }
    })
}

/// The scenario as written, or where and why it is not one.
pub fn parse(file: &Path, text: &str, limits: &Limits) -> Result<Scenario, ScenarioError> {
    serde_saphyr::from_str_with_options(text, yaml_options(limits)).map_err(|e| {
        let at = e.location().unwrap_or(serde_saphyr::Location::UNKNOWN);
        located(file, at, message_of(&e, limits))
    })
}

/// The YAML reader's options: no snippet of the file in a refusal, and [`budget`].
fn yaml_options(limits: &Limits) -> serde_saphyr::Options {
    let mut options = serde_saphyr::Options::default();
    options.with_snippet = false;
    options.budget = Some(budget(limits));
    options
}

/// The YAML reader's bounds: events and nodes are bounded by the file's bytes (a million
/// orders pass), what aliases replay by the reader's own caps on their events, and the text
/// they expand to by `--max-expanded-bytes`.
fn budget(limits: &Limits) -> serde_saphyr::Budget {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_events = usize::MAX;
    budget.max_nodes = usize::MAX;
    budget.max_total_scalar_bytes =
        usize::try_from(limits.max_expanded_bytes).unwrap_or(usize::MAX);
    // Bytes are what is bounded: a scenario may alias one order body a thousand times.
    budget.enforce_alias_anchor_ratio = false;
    budget
}

/// The reader's message without the position it appends (the error names it up front); a
/// bound's refusal names its flag.
fn message_of(e: &serde_saphyr::Error, limits: &Limits) -> String {
    use serde_saphyr::budget::BudgetBreach;
    match e {
        // A bound met while an alias was replayed: the bound is the message.
        serde_saphyr::Error::AliasError { error, .. } => return message_of(error, limits),
        serde_saphyr::Error::AliasReplayLimitExceeded { .. }
        | serde_saphyr::Error::AliasExpansionLimitExceeded { .. } => {
            return "the scenario's aliases expand past the YAML reader's bound on replayed events"
                .into();
        }
        _ => {}
    }
    if let serde_saphyr::Error::Budget { breach, .. } = e {
        return match breach {
            BudgetBreach::ScalarBytes { .. } => format!(
                "the scenario's text, its aliases expanded, is more than {} bytes (--max-expanded-bytes)",
                limits.max_expanded_bytes
            ),
            BudgetBreach::Aliases { aliases } => format!(
                "the scenario uses more than {} YAML aliases (the reader's bound)",
                aliases.saturating_sub(1)
            ),
            other => format!("the scenario is beyond what the YAML reader takes: {other:?}"),
        };
    }
    let full = e.to_string();
    match full.rfind(" at line ") {
        Some(i) => full[..i].to_owned(),
        None => full,
    }
}
