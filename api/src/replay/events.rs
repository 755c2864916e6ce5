//! A scenario's events into steps: the one action each names, the siblings that action takes
//! and no other, and the rows of a `prices` CSV as price events of their own (`prices`).

use serde_saphyr::{Location, Spanned};

use super::format::{Event, Plain, PlainAction, Recorded};
use super::plan::{Ctx, ScenarioError, Step, action, cancel_command, order_command};
use super::timeline::Timeline;
use super::{files, prices, recorded};

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
        let opened = files::open(&csv, ctx.limits.max_file_bytes)
            .map_err(|m| ctx.error(file.referenced, format!("prices: {}: {m}", csv.display())))?;
        inputs.push(csv.clone());
        return prices::read(ctx, (&csv, opened), (&symbol.value, at, index), steps);
    }
    if let Some(recorded) = &v.recorded {
        return plan_recorded(ctx, (index, at), e, recorded, (steps, inputs));
    }
    let (customer, command) = action(ctx, e)?;
    let step = Step {
        at,
        event: index,
        customer,
        command,
    };
    push_step(ctx, steps, step, e.referenced)
}

/// Appends the step of plain event `index` (see [`Plain`]): what [`plan_event`] makes of the
/// same event read as an [`Event`].
pub(super) fn plan_plain(
    ctx: &Ctx,
    index: usize,
    e: Plain,
    steps: &mut Timeline,
) -> Result<(), ScenarioError> {
    let unknown = Location::UNKNOWN;
    let at = ctx.instant_at(e.at, unknown, ctx.start)?;
    let command = match e.action {
        PlainAction::Order(fields) => order_command(ctx, fields, unknown)?,
        PlainAction::Cancel(reference) => cancel_command(reference.to_owned()),
    };
    let customer = ctx.customer_at(e.customer, unknown)?;
    let step = Step {
        at,
        event: index,
        customer: Some(customer),
        command,
    };
    push_step(ctx, steps, step, unknown)
}

/// Appends an event's one step, if the timeline has room for it (refused at `at` if not).
fn push_step(
    ctx: &Ctx,
    steps: &mut Timeline,
    step: Step,
    at: Location,
) -> Result<(), ScenarioError> {
    room(ctx, steps).map_err(|m| ctx.error(at, m))?;
    steps.push(step);
    Ok(())
}

/// Appends the steps of a `recorded` event (event `index`, at `at`).
fn plan_recorded(
    ctx: &Ctx,
    (index, at): (usize, perpsim_core::time::Timestamp),
    e: &Spanned<Box<Event>>,
    recorded: &Recorded,
    (steps, inputs): (&mut Timeline, &mut Vec<std::path::PathBuf>),
) -> Result<(), ScenarioError> {
    let symbol = e
        .value
        .symbol
        .as_ref()
        .ok_or_else(|| ctx.error(e.referenced, "a recorded event needs `symbol`"))?;
    let instrument = ctx.symbol(symbol)?;
    let mapping = recorded::Mapping::of(ctx, recorded, (&instrument, at, index))?;
    recorded::plan(ctx, recorded, &mapping, (steps, inputs))
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
        ("recorded", v.recorded.is_some(), Needs::Symbol),
        ("funding", v.funding.is_some(), Needs::Symbol),
        ("status", v.status.is_some(), Needs::Symbol),
        ("deposit", v.deposit.is_some(), Needs::Customer),
        ("withdrawal", v.withdrawal.is_some(), Needs::Customer),
    ];
    let mut given = actions.iter().filter(|a| a.1);
    let first = given.next();
    if given.next().is_some() {
        // Collected only for the refusal: an event's first check allocates nothing.
        let names: Vec<_> = actions.iter().filter(|a| a.1).map(|a| a.0).collect();
        return Err(ctx.error(
            e.referenced,
            format!(
                "an event holds one action, this one holds {}",
                names.join(" and ")
            ),
        ));
    }
    if let Some((name, _, needs)) = first {
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
pub(super) fn room(ctx: &Ctx, steps: &Timeline) -> Result<(), String> {
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
