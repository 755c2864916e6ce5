//! Scenario replay for risk teams (D11, issue 26): a scenario file through the engine the
//! service runs, on its manual clock, into a directory holding the journal, `report.json`,
//! `ledger.csv`, `trades.csv`, `report.html` and a `manifest.json` of their hashes; a
//! recorded journal into the same report; Monte-Carlo over a seed range, in worker processes
//! or as shards of a cluster scheduler's array job, merged into one summary.
//!
//! It drives the engine and the journal directly (no HTTP), and reads every event body with
//! the API's own request types and turns it into the command the API would send.

pub mod events;
pub mod format;
pub mod montecarlo;
pub mod output;
pub mod plan;
pub mod report;
pub mod run;
pub mod schema;
pub mod summary;
pub mod timing;

use std::path::Path;

use self::format::Scenario;
use self::plan::{Plan, ScenarioError, located};

/// The largest scenario file read: 1 GiB (a million orders in YAML is about 150 MiB).
const MAX_SCENARIO_BYTES: u64 = 1 << 30;

/// Reads and resolves a scenario file (YAML or JSON).
pub fn read(file: &Path) -> Result<Plan, ScenarioError> {
    let origin = serde_saphyr::Location::UNKNOWN;
    let size = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
    if size > MAX_SCENARIO_BYTES {
        return Err(located(
            file,
            origin,
            format!("the file is {size} bytes; a scenario holds at most {MAX_SCENARIO_BYTES}"),
        ));
    }
    let text = std::fs::read_to_string(file)
        .map_err(|e| located(file, origin, format!("cannot read the scenario: {e}")))?;
    if let Some(plan) = json_fast_path(file, &text) {
        return Ok(plan);
    }
    plan::plan(file, parse(file, &text)?)
}

/// A JSON scenario read by serde_json, an order of magnitude faster than the YAML reader but
/// without locations: used only when it and the plan accept the file (and no object repeats a
/// key, which serde_json would read as its last). Anything refused is read again by the YAML
/// reader, which says where.
fn json_fast_path(file: &Path, text: &str) -> Option<Plan> {
    if !text.trim_start().starts_with('{') {
        return None;
    }
    crate::contract::strict_json::refuse_duplicate_keys(text.as_bytes()).ok()?;
    let scenario = serde_json::from_str::<Scenario>(text).ok()?;
    plan::plan(file, scenario).ok()
}

/// The scenario as written, or where and why it is not one.
pub fn parse(file: &Path, text: &str) -> Result<Scenario, ScenarioError> {
    let mut options = serde_saphyr::Options::default();
    options.with_snippet = false;
    // Bounded by the file size instead: a million-order scenario passes every default budget.
    options.budget = None;
    serde_saphyr::from_str_with_options(text, options).map_err(|e| {
        let at = e.location().unwrap_or(serde_saphyr::Location::UNKNOWN);
        located(file, at, message_of(&e))
    })
}

/// The reader's message without the position it appends (the error names it up front).
fn message_of(e: &serde_saphyr::Error) -> String {
    let full = e.to_string();
    match full.rfind(" at line ") {
        Some(i) => full[..i].to_owned(),
        None => full,
    }
}
