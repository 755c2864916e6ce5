//! A scenario's events into steps: the one action each names, the siblings that action takes
//! and no other, and the rows of a `prices` CSV as price events of their own.

use std::path::Path;

use perpsim_core::time::Timestamp;
use serde_saphyr::Spanned;

use super::files;
use super::format::Event;
use super::plan::{Ctx, ScenarioError, Step, action, price_row};
use super::timeline::Timeline;
use super::timing::{EXPECTED_AT, parse_at};

/// Appends the steps of event `index`.
pub(super) fn plan_event(
    ctx: &Ctx,
    index: usize,
    e: &mut Spanned<Box<Event>>,
    steps: &mut Timeline,
    inputs: &mut Vec<std::path::PathBuf>,
) -> Result<(), ScenarioError> {
    let v = &e.value;
    let at = ctx.instant(&v.at, ctx.start)?;
    check_action(ctx, e)?;
    if let Some(file) = &v.prices {
        let symbol = v
            .symbol
            .as_ref()
            .ok_or_else(|| ctx.error(e.referenced, "a prices event needs `symbol`"))?;
        ctx.symbol(symbol)?;
        let csv = files::resolve(ctx.file, &file.value)
            .map_err(|m| ctx.error(file.referenced, format!("prices: {m}")))?;
        inputs.push(csv.clone());
        return price_path(ctx, &csv, &symbol.value, at, index, steps).map_err(|err| match err {
            PathError::Open(m) => ctx.error(file.referenced, m),
            PathError::Row(err) => err,
        });
    }
    let (customer, command) = action(ctx, e)?;
    room(ctx, steps).map_err(|m| ctx.error(e.referenced, m))?;
    steps.push(Step {
        at,
        event: index,
        customer,
        command,
    });
    Ok(())
}

/// An event holds one action, with the siblings that action takes and no other.
fn check_action(ctx: &Ctx, e: &Spanned<Box<Event>>) -> Result<(), ScenarioError> {
    let v = &e.value;
    let actions = [
        ("order", v.order.is_some(), Needs::Customer),
        ("cancel", v.cancel.is_some(), Needs::Customer),
        ("amend", v.amend.is_some(), Needs::Amend),
        ("price", v.price.is_some(), Needs::Symbol),
        ("prices", v.prices.is_some(), Needs::Symbol),
        ("funding", v.funding.is_some(), Needs::Symbol),
        ("status", v.status.is_some(), Needs::Symbol),
        ("deposit", v.deposit.is_some(), Needs::Customer),
        ("withdrawal", v.withdrawal.is_some(), Needs::Customer),
    ];
    let given: Vec<_> = actions.iter().filter(|a| a.1).collect();
    if given.len() > 1 {
        let names: Vec<_> = given.iter().map(|a| a.0).collect();
        return Err(ctx.error(
            e.referenced,
            format!(
                "an event holds one action, this one holds {}",
                names.join(" and ")
            ),
        ));
    }
    if let Some((name, _, needs)) = given.first() {
        let extra = [
            (
                "customer",
                v.customer.is_some(),
                !matches!(needs, Needs::Symbol),
            ),
            ("symbol", v.symbol.is_some(), matches!(needs, Needs::Symbol)),
            (
                "reference_id",
                v.reference_id.is_some(),
                matches!(needs, Needs::Amend),
            ),
        ];
        if let Some((field, ..)) = extra.iter().find(|(_, given, allowed)| *given && !allowed) {
            return Err(ctx.error(e.referenced, format!("a {name} event takes no `{field}`")));
        }
    }
    Ok(())
}

/// Whether the timeline has room for one more step within `--max-steps`.
fn room(ctx: &Ctx, steps: &Timeline) -> Result<(), String> {
    match (steps.len() as u64) < ctx.limits.max_steps {
        true => Ok(()),
        false => Err(format!(
            "the timeline holds more than {} steps, events and price rows together (--max-steps)",
            ctx.limits.max_steps
        )),
    }
}

enum Needs {
    Customer,
    Amend,
    Symbol,
}

enum PathError {
    Open(String),
    Row(ScenarioError),
}

/// The rows of a price CSV: `time,index_price[,mark_price]`, an optional header row, each
/// time an offset from the event's `at` or a timestamp. The file is someone else's: it is
/// read within the bounds, and no refusal quotes it.
fn price_path(
    ctx: &Ctx,
    path: &Path,
    symbol: &str,
    base: Timestamp,
    event: usize,
    steps: &mut Timeline,
) -> Result<(), PathError> {
    let mut reader = price_reader(ctx, path)?;
    for (i, record) in reader.records().enumerate() {
        let line = i as u64 + 1;
        let fail = |column: u64, m: String| {
            PathError::Row(ScenarioError {
                file: path.to_path_buf(),
                line,
                column,
                message: m,
            })
        };
        let record = record.map_err(|e| fail(1, row_error(&e)))?;
        if i == 0 && record.get(0) == Some("time") {
            continue;
        }
        let column = |n: usize| {
            1 + record
                .iter()
                .take(n)
                .map(|f| f.len() as u64 + 1)
                .sum::<u64>()
        };
        if record.len() < 2 || record.len() > 3 {
            return Err(fail(
                1,
                format!(
                    "expected time,index_price[,mark_price], got {} fields",
                    record.len()
                ),
            ));
        }
        let at = parse_at(&record[0], base)
            .map_err(|_| fail(1, format!("time: expected {EXPECTED_AT}")))?;
        if at < ctx.start || at > ctx.end {
            return Err(fail(
                1,
                format!("{at} is outside the scenario's {}..{}", ctx.start, ctx.end),
            ));
        }
        // The refusal names its field; only the field is said, never the value.
        let command = price_row(symbol, &record[1], record.get(2)).map_err(|m| {
            let (n, field) = match m.contains("mark_price") {
                true => (2, "mark_price"),
                false => (1, "index_price"),
            };
            fail(column(n), format!("{field}: expected {EXPECTED_PRICE}"))
        })?;
        room(ctx, steps).map_err(|m| fail(1, m))?;
        steps.push(Step {
            at,
            event,
            customer: None,
            command,
        });
    }
    Ok(())
}

/// A price CSV opened within the bounds, its fields trimmed, its rows of any length (each is
/// checked, naming its line).
fn price_reader(
    ctx: &Ctx,
    path: &Path,
) -> Result<csv::Reader<files::Bounded<std::fs::File>>, PathError> {
    let file = files::open(path, ctx.limits.max_file_bytes)
        .map_err(|m| PathError::Open(format!("prices: {}: {m}", path.display())))?;
    Ok(csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(files::Bounded::new(file, ctx.limits)))
}

/// What a price in a CSV must be (as the admin API's price body takes it).
const EXPECTED_PRICE: &str =
    "a positive decimal in plain notation below 1000000000000 with at most 10 decimals";

/// Why a row could not be read, without quoting it.
fn row_error(e: &csv::Error) -> String {
    match e.kind() {
        csv::ErrorKind::Io(io) if io.to_string() == files::LONG_LINE => files::LONG_LINE.into(),
        csv::ErrorKind::Io(io) => format!("cannot read the file: {io}"),
        csv::ErrorKind::Utf8 { .. } => "not UTF-8 text".into(),
        _ => "not a CSV row".into(),
    }
}
