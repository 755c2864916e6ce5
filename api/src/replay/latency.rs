//! A scenario's latency model (D11, issue 39 item 3) resolved from what the file writes into
//! the engine-free model `perpsim_core::latency` draws from, and applied to a run's timeline:
//! every customer request takes effect its drawn delay after its `at` (at most at `end`),
//! drawn in the timeline's order from a generator of its own seeded by the run's seed, so
//! the engine's own draws are unchanged and each Monte-Carlo seed draws its own delays.

use std::path::{Path, PathBuf};

use perpsim_core::Decimal;
use perpsim_core::latency::{LatencyModel, MAX_LATENCY_MS};
use perpsim_core::rng::SimRng;
use perpsim_core::simulation::decimal_to_f64;
use perpsim_core::time::Timestamp;
use serde_saphyr::Spanned;

use super::files::{self, Limits};
use super::format::LatencyModel as Written;
use super::plan::{Ctx, ScenarioError};
use super::table::{Columns, Table};
use super::timeline::Timeline;
use super::timing::parse_duration;

/// What the latency's seed is mixed with, so its draws are not the engine's.
const STREAM: u64 = 0x6c61_7465_6e63_7921;

/// The empirical file's one column.
const EMPIRICAL: &Columns = &[("latency_ms", true)];

/// The distributions, for messages.
const DISTRIBUTIONS: &str = "constant, normal, log-normal, empirical";

/// The model `written` describes; an empirical file read is added to `inputs`.
pub(super) fn resolve(
    ctx: &Ctx,
    written: &Written,
    inputs: &mut Vec<PathBuf>,
) -> Result<LatencyModel, ScenarioError> {
    let d = &written.distribution;
    let ms = |field: &Option<Spanned<String>>, name: &str| -> Result<f64, ScenarioError> {
        let Some(text) = field else {
            let message = format!("a {} latency needs `{name}`", d.value);
            return Err(ctx.error(d.referenced, message));
        };
        delay(&text.value).map(|ms| ms as f64).ok_or_else(|| {
            ctx.error(
                text.referenced,
                format!("{name}: expected a delay such as 20ms or 1s, at most a minute"),
            )
        })
    };
    match d.value.as_str() {
        "constant" => Ok(LatencyModel::Constant(ms(&written.value, "value")? as i64)),
        "normal" => Ok(LatencyModel::Normal {
            mean: ms(&written.value, "value")?,
            stddev: ms(&written.stddev, "stddev")?,
        }),
        "log-normal" => {
            let sigma = written
                .sigma
                .as_ref()
                .ok_or_else(|| ctx.error(d.referenced, "a log-normal latency needs `sigma`"))?;
            let median = ms(&written.value, "value")?;
            log_normal(median, sigma.value.0)
                .ok_or_else(|| ctx.error(sigma.referenced, format!("sigma: {SIGMAS}")))
        }
        "empirical" => empirical(ctx, written, inputs),
        other => Err(ctx.error(
            d.referenced,
            format!("distribution: expected one of {DISTRIBUTIONS}, got {other:?}"),
        )),
    }
}

/// A delay as a scenario writes one (`20ms`, `1s`), within a minute.
fn delay(text: &str) -> Option<i64> {
    parse_duration(text).filter(|ms| *ms <= MAX_LATENCY_MS)
}

/// The observed delays of an empirical model's file.
fn empirical(
    ctx: &Ctx,
    written: &Written,
    inputs: &mut Vec<PathBuf>,
) -> Result<LatencyModel, ScenarioError> {
    let d = &written.distribution;
    let file = written
        .file
        .as_ref()
        .ok_or_else(|| ctx.error(d.referenced, "an empirical latency needs `file`"))?;
    let path = files::resolve(ctx.file, &file.value)
        .map_err(|m| ctx.error(file.referenced, format!("file: {m}")))?;
    let opened = files::open(&path, ctx.limits.max_file_bytes)
        .map_err(|m| ctx.error(file.referenced, format!("file: {}: {m}", path.display())))?;
    let observed = observed_delays(ctx.limits, (&path, opened))?;
    inputs.push(path);
    Ok(LatencyModel::Empirical(observed))
}

/// Each row's `latency_ms`: whole milliseconds, at most a minute; at least one row.
fn observed_delays(
    limits: &Limits,
    opened: (&Path, std::fs::File),
) -> Result<Vec<i64>, ScenarioError> {
    let mut table = Table::read(opened, EMPIRICAL, limits)?;
    let mut observed = Vec::new();
    while table.next_row()? {
        let (text, i) = table.required(0)?;
        let ms = text
            .parse::<i64>()
            .ok()
            .filter(|ms| {
                (0..=MAX_LATENCY_MS).contains(ms) && text.bytes().all(|b| b.is_ascii_digit())
            })
            .ok_or_else(|| {
                table.at(
                    i,
                    format!("latency_ms: expected whole milliseconds, 0 to {MAX_LATENCY_MS}"),
                )
            })?;
        if observed.len() as u64 >= limits.max_steps {
            return Err(table.at(i, "more rows than --max-steps"));
        }
        observed.push(ms);
    }
    match observed.is_empty() {
        true => Err(table.whole("the file holds no delay")),
        false => Ok(observed),
    }
}

/// What a log-normal model's sigma may be, for messages.
const SIGMAS: &str = "expected 0 to 5";

/// A log-normal model of `median` ms and `sigma`, if sigma is within 0 to 5: the one rule a
/// scenario's model and `serve`'s flags are held to, so the two cannot drift apart.
fn log_normal(median: f64, sigma: Decimal) -> Option<LatencyModel> {
    (Decimal::ZERO..=Decimal::from(5))
        .contains(&sigma)
        .then(|| LatencyModel::LogNormal {
            median,
            sigma: decimal_to_f64(sigma),
        })
}

/// A model as `serve`'s `flag` (`--order-latency`, `--market-data-latency`) writes it:
/// `constant:40ms`, `normal:50ms,10ms` (mean, standard deviation), `log-normal:40ms,0.5`
/// (median, sigma) or `empirical:FILE` (a CSV of `latency_ms`, as a scenario's), each delay
/// within a minute.
pub fn parse_model(flag: &str, text: &str, limits: &Limits) -> Result<LatencyModel, String> {
    let expected = || {
        format!(
            "{flag}: expected constant:40ms, normal:50ms,10ms, log-normal:40ms,0.5 or empirical:FILE (delays at most a minute), got {text:?}"
        )
    };
    let (distribution, args) = text.split_once(':').ok_or_else(expected)?;
    let ms = |t: &str| delay(t).map(|ms| ms as f64).ok_or_else(expected);
    match (distribution, args.split_once(',')) {
        ("constant", None) => Ok(LatencyModel::Constant(ms(args)? as i64)),
        ("normal", Some((mean, stddev))) => Ok(LatencyModel::Normal {
            mean: ms(mean)?,
            stddev: ms(stddev)?,
        }),
        ("log-normal", Some((median, sigma))) => {
            let median = ms(median)?;
            Decimal::from_str_exact(sigma)
                .ok()
                .and_then(|s| log_normal(median, s))
                .ok_or_else(|| format!("{flag}: sigma: {SIGMAS}, got {sigma:?}"))
        }
        ("empirical", _) => {
            let path = Path::new(args);
            let opened = files::open(path, limits.max_file_bytes)
                .map_err(|m| format!("{flag}: {}: {m}", path.display()))?;
            let observed = observed_delays(limits, (path, opened)).map_err(|e| e.to_string())?;
            Ok(LatencyModel::Empirical(observed))
        }
        _ => Err(expected()),
    }
}

/// Delays every customer request of `timeline` by a draw of `model` from `seed`'s stream,
/// none past `end`.
pub fn delay_requests(timeline: &mut Timeline, model: &LatencyModel, seed: u64, end: Timestamp) {
    let mut rng = SimRng::from_seed(seed ^ STREAM);
    timeline.delay_customers(|at| at.plus_millis(model.draw(&mut rng)).min(end));
}
