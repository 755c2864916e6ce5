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

pub use self::files::Limits;
use self::format::Scenario;
use self::plan::{Plan, ScenarioError, located};

/// Reads and resolves a scenario file (YAML or JSON), within `limits`: nothing it holds or
/// names makes the run read or hold more than they allow, and every refusal names its flag.
pub fn read(file: &Path, limits: &Limits) -> Result<Plan, ScenarioError> {
    let origin = serde_saphyr::Location::UNKNOWN;
    let bytes = files::read(file, limits.max_file_bytes)
        .map_err(|m| located(file, origin, format!("cannot read the scenario: {m}")))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| located(file, origin, "the scenario is not UTF-8 text"))?;
    // JSON is read by serde_json, an order of magnitude faster than the YAML reader but
    // without locations, and its plan stands only if no object repeats a key (serde_json
    // reads the last). That check is a pass of its own over the text: it runs beside the read.
    let json = text.trim_start().starts_with('{');
    let streamed = std::thread::scope(|s| {
        let unique = json.then(|| {
            s.spawn(|| crate::contract::strict_json::refuse_duplicate_keys(text.as_bytes()))
        });
        let plan = stream::plan(file, &text, json, limits);
        match unique.map(|u| u.join().is_ok_and(|r| r.is_ok())) {
            Some(false) => None,
            _ => plan,
        }
    });
    if let Some(plan) = streamed {
        return Ok(plan);
    }
    // Refused, or written in an order the one pass does not take: read again the whole way,
    // by the YAML reader, which says where.
    plan::plan((file, &text), parse(file, &text, limits)?, limits)
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
