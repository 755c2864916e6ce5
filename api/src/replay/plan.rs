//! From a scenario as read to the plan a run applies: every name resolved, every body read by
//! the API's own types and turned into the command the API would send, every time placed in
//! start..end. Anything wrong is refused here, naming the file, line and column, before a
//! single file is written.

use std::path::{Path, PathBuf};

use perpsim_core::Decimal;
use perpsim_core::clock::ClockMode;
use perpsim_core::ids::CustomerCode;
use perpsim_core::instrument::{InstrumentSpec, default_instruments};
use perpsim_core::simulation::{PriceFeed, Simulation};
use perpsim_core::time::Timestamp;
use perpsim_systems::command::TransferKind;
use perpsim_systems::{Command, Genesis};
use poem_openapi::types::ParseFromJSON;
use rapidhash::RapidHashMap;
use serde_json::{Value, json};
use serde_saphyr::{Location, Spanned};
use sha2::Sha256;

use super::fields::{Fields, FromFields};
use super::files::Limits;
use super::format::{Body, CustomerSpec, Dec, Event, InstrumentOverride, Market, Plain, Scenario};
use super::timeline::Timeline;
use super::timing::{self, parse_at};
use crate::contract::schema_check;
use crate::requests::instruments::{PriceRequest, funding_command, price_command, status_command};
use crate::requests::money::{TransferRequest, transfer_command};
use crate::requests::orders::{OrderRequest, amend_command, place_command};
use crate::requests::profiles::fees_command;
use perpsim_systems::command::{CancelOrder, SetLeverage};

/// A scenario ready to run.
#[derive(Debug, Clone)]
pub struct Plan {
    pub name: String,
    pub genesis: Genesis,
    pub end: Timestamp,
    /// Between two report samples.
    pub sample_every_ms: i64,
    pub customers: Vec<PlannedCustomer>,
    /// The scenario's events (a `prices` event is one, whatever its rows).
    pub events: usize,
    /// How long customers' requests take to reach the venue, drawn when the run starts.
    pub latency: Option<perpsim_core::latency::LatencyModel>,
    /// Shocks and volatility scaled by factors drawn when the run starts.
    pub what_if: super::whatif::WhatIf,
    /// The price files the events name, in the order named (the manifest hashes them).
    pub inputs: Vec<PathBuf>,
    /// In time order; one instant's steps in the order written.
    pub steps: Timeline,
    /// The SHA-256 of the scenario's text as it was read, where the reader took it (the
    /// manifest's first input; otherwise the file is hashed again when the run is over).
    pub text_sha256: Option<Sha256>,
}

#[derive(Debug, Clone)]
pub struct PlannedCustomer {
    pub name: String,
    /// Leverage, fees and deposits, for this customer, applied at `start`.
    pub setup: Vec<Command>,
}

/// One command of the timeline.
#[derive(Debug, Clone)]
pub struct Step {
    pub at: Timestamp,
    /// The event's position in the file (0-based), for the report's refusals.
    pub event: usize,
    /// The customer (by position) the command is for, bound to its code at run time.
    pub customer: Option<usize>,
    pub command: Command,
}

/// A refusal of the scenario: where, and what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    pub file: PathBuf,
    pub line: u64,
    pub column: u64,
    pub message: String,
}

impl std::fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let (file, line, column) = (self.file.display(), self.line, self.column);
        write!(f, "{file}:{line}:{column}: {}", self.message)
    }
}

/// A customer code no one holds: commands are built with it and bound at run time.
pub const UNBOUND: CustomerCode = CustomerCode(uuid::Uuid::nil());

/// The longest a scenario may run: a year of simulation time.
const MAX_SPAN_MS: i64 = 366 * perpsim_core::time::DAY_MS;

/// Report samples of a scenario: at most this many, and at least a second apart.
const SAMPLES: i64 = 500;

pub(super) struct Ctx<'a> {
    pub file: &'a Path,
    pub limits: &'a Limits,
    pub start: Timestamp,
    pub end: Timestamp,
    pub specs: Vec<InstrumentSpec>,
    /// The customers' names in the scenario's order (what an unknown name's refusal lists),
    /// and each name's place in it (what every event's look-up reads: hashed, as a million
    /// searches of a B-tree of names compared strings a tenth of the read; by rapidhash,
    /// randomly seeded, where std's SipHash was a twentieth of it).
    pub names: Vec<String>,
    pub by_name: RapidHashMap<String, usize>,
    /// The scenario's text, where a refusal is said: a body's refusal then names its field
    /// as the API does and points at it. The one-pass read has none (it gives up on any
    /// refusal, and the whole read says where).
    pub source: Option<&'a str>,
}

impl Ctx<'_> {
    pub fn error(&self, at: Location, message: impl Into<String>) -> ScenarioError {
        located(self.file, at, message)
    }

    /// An instant within start..end.
    pub fn instant(
        &self,
        text: &Spanned<String>,
        base: Timestamp,
    ) -> Result<Timestamp, ScenarioError> {
        self.instant_at(&text.value, text.referenced, base)
    }

    /// [`Ctx::instant`] of `text` written at `place`.
    pub(super) fn instant_at(
        &self,
        text: &str,
        place: Location,
        base: Timestamp,
    ) -> Result<Timestamp, ScenarioError> {
        let at = parse_at(text, base).map_err(|m| self.error(place, m))?;
        if at < self.start || at > self.end {
            let (start, end) = (self.start, self.end);
            return Err(self.error(
                place,
                format!("{at} is outside the scenario's {start}..{end}"),
            ));
        }
        Ok(at)
    }

    /// A what-if's window: `from`, and `until` (default `end`) not before it; `what` names it.
    pub(super) fn window(
        &self,
        (from, until): (&Spanned<String>, Option<&Spanned<String>>),
        what: &str,
    ) -> Result<(Timestamp, Timestamp), ScenarioError> {
        let start = self.instant(from, self.start)?;
        let end = match until {
            Some(until) => self.instant(until, self.start)?,
            None => self.end,
        };
        match end < start {
            true => Err(self.error(
                from.referenced,
                format!("{what}'s until is before its from"),
            )),
            false => Ok((start, end)),
        }
    }

    pub(super) fn symbol(&self, symbol: &Spanned<String>) -> Result<String, ScenarioError> {
        self.known_symbol(&symbol.value, symbol.referenced)?;
        Ok(symbol.value.clone())
    }

    /// `symbol`, written at `at`, names one of the venue's instruments.
    fn known_symbol(&self, symbol: &str, at: Location) -> Result<(), ScenarioError> {
        match self.specs.iter().any(|s| s.symbol == symbol) {
            true => Ok(()),
            false => Err(self.error(
                at,
                format!(
                    "unknown symbol {symbol:?}; known: {}",
                    known(self.specs.iter().map(|s| s.symbol.as_str()))
                ),
            )),
        }
    }

    pub(super) fn customer(&self, name: &Spanned<String>) -> Result<usize, ScenarioError> {
        self.customer_at(&name.value, name.referenced)
    }

    /// [`Ctx::customer`] named `name`, written at `place`.
    pub(super) fn customer_at(&self, name: &str, place: Location) -> Result<usize, ScenarioError> {
        self.by_name.get(name).copied().ok_or_else(|| {
            self.error(
                place,
                format!(
                    "unknown customer {name:?}; known: {}",
                    known(self.names.iter().map(String::as_str))
                ),
            )
        })
    }

    /// Reads a body with the API's type (taking its JSON: a body is read once). A refusal
    /// says what the API's would: the field against the operation's schema (unknown fields
    /// with the allowed set, enum values listed) at the field, else the type's own message.
    pub fn body<T: FromFields>(&self, field: &str, body: &mut Body<T>) -> Result<T, ScenarioError> {
        let fields = std::mem::take(&mut body.json.value);
        self.fields(field, fields, body.json.referenced)
    }

    /// [`Ctx::body`] of the `fields` of a body written at `at`.
    fn fields<T: FromFields>(
        &self,
        field: &str,
        fields: Fields,
        at: Location,
    ) -> Result<T, ScenarioError> {
        if self.source.is_none() {
            return T::from_fields(fields)
                .map_err(|e| self.error(at, format!("{field}: {}", message(e))));
        }
        let written = fields.clone().into_value();
        T::from_fields(fields).map_err(|e| match explain::<T>(&written) {
            Some(why) => {
                let key = why.field.split(['.', '[']).next().unwrap_or_default();
                self.at_field(at, key, format!("{field}: {}", why.message))
            }
            None => self.error(at, format!("{field}: {}", message(e))),
        })
    }

    /// A refusal at the field `key` of the body written at `at` where the text shows it,
    /// else at the body.
    fn at_field(&self, at: Location, key: &str, message: String) -> ScenarioError {
        let body = (at.line(), at.column());
        let found = self
            .source
            .and_then(|text| super::fields::locate(text, body, key));
        let (line, column) = found.unwrap_or(body);
        ScenarioError {
            file: self.file.to_path_buf(),
            line,
            column,
            message,
        }
    }
}

impl<'a> Ctx<'a> {
    /// A context of `file` over `start..end`, with the default instruments and no customers
    /// yet (the planner overrides the one and adds the other).
    pub fn bare(file: &'a Path, limits: &'a Limits, (start, end): (Timestamp, Timestamp)) -> Self {
        Ctx {
            file,
            limits,
            start,
            end,
            specs: default_instruments(),
            names: Vec::new(),
            by_name: RapidHashMap::default(),
            source: None,
        }
    }
}

/// What `written` breaks of the schema of `T` as the API's documents write it (the REST
/// API's request guard holds a body to the same schema before any handler reads it).
fn explain<T: poem_openapi::types::Type>(written: &Value) -> Option<schema_check::Why> {
    static SCHEMAS: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    let schemas =
        SCHEMAS.get_or_init(|| crate::contract::request_schemas(&super::schema::bodies()));
    let schema = json!({"$ref": format!("#/components/schemas/{}", T::name())});
    schema_check::explain(written, &schema, schemas)
}

pub(super) fn located(file: &Path, at: Location, message: impl Into<String>) -> ScenarioError {
    ScenarioError {
        file: file.to_path_buf(),
        line: at.line(),
        column: at.column(),
        message: message.into(),
    }
}

fn known<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names.collect::<Vec<_>>().join(", ")
}

/// A body read by `T` as the service reads it; the message without the type's Rust name.
pub(super) fn read_body<T: ParseFromJSON>(json: Value) -> Result<T, String> {
    T::parse_from_json(Some(json)).map_err(message)
}

/// A body's refusal without the type's Rust name.
fn message<T: poem_openapi::types::Type>(e: poem_openapi::types::ParseError<T>) -> String {
    let message = e.into_message();
    let message = match message.split_once("\": ") {
        Some((head, rest)) if head.starts_with("failed to parse \"") => rest.to_owned(),
        _ => message,
    };
    match message.split_once(" (occurred while parsing") {
        Some((head, _)) => head.to_owned(),
        None => message,
    }
}

/// Resolves a scenario read from `file` into its plan, within `limits`.
pub fn plan(
    (file, source): (&Path, &str),
    mut scenario: Scenario,
    limits: &Limits,
) -> Result<Plan, ScenarioError> {
    let events = std::mem::take(&mut scenario.events);
    let mut planner = Planner::new(file, scenario, limits)?;
    planner.ctx.source = Some(source);
    planner.reserve(events.len());
    // Each event is freed once planned: the events as read (a kilobyte each, with their
    // bodies' JSON) and the steps they become are never all held at once.
    for mut event in events {
        planner.event(&mut event)?;
    }
    Ok(planner.finish())
}

/// A plan under way: the scenario's venue and customers resolved, its events planned one at a
/// time in the order written, so a reader can hand each over as it reads it and hold none.
pub(super) struct Planner<'a> {
    ctx: Ctx<'a>,
    name: String,
    seed: u64,
    simulation: Simulation,
    sample_every_ms: i64,
    customers: Vec<PlannedCustomer>,
    inputs: Vec<PathBuf>,
    steps: Timeline,
    /// Events planned so far: the next one's position in the file.
    events: usize,
    latency: Option<perpsim_core::latency::LatencyModel>,
    what_if: super::whatif::WhatIf,
}

impl<'a> Planner<'a> {
    /// Resolves everything but `scenario.events`, which it leaves unread.
    pub fn new(
        file: &'a Path,
        mut scenario: Scenario,
        limits: &'a Limits,
    ) -> Result<Self, ScenarioError> {
        let mut ctx = Ctx::bare(file, limits, span(file, &scenario)?);
        let mut simulation = Simulation::defaults(&ctx.specs);
        for o in &scenario.instruments {
            override_instrument(&ctx, o, &mut simulation)?;
            let specs = std::mem::take(&mut ctx.specs);
            ctx.specs = apply_spec(&ctx, o, specs)?;
        }
        if let Some(market) = &scenario.market {
            apply_market(&ctx, market, &mut simulation)?;
        }
        simulation
            .check(&ctx.specs)
            .map_err(|m| located(file, scenario.start.referenced, m))?;
        let sample_every_ms = sample_every(&ctx, &scenario)?;
        let customers = customers(&mut ctx, &mut scenario.customers)?;
        samples_within_bound(&ctx, &scenario, sample_every_ms, customers.len())?;
        let mut inputs = Vec::new();
        let latency = scenario
            .latency
            .as_ref()
            .map(|l| super::latency::resolve(&ctx, &l.order_entry, &mut inputs))
            .transpose()?;
        let what_if = super::whatif::resolve(&ctx, &scenario)?;
        Ok(Planner {
            ctx,
            name: scenario.name,
            seed: scenario.seed,
            simulation,
            sample_every_ms,
            customers,
            inputs,
            steps: Timeline::default(),
            events: 0,
            latency,
            what_if,
        })
    }

    /// Room for the steps of `events` more events, within `--max-steps`.
    pub fn reserve(&mut self, events: usize) {
        let bound = usize::try_from(self.ctx.limits.max_steps).unwrap_or(usize::MAX);
        self.steps.reserve(events.min(bound));
    }

    /// Plans the next event in the order written.
    pub fn event(&mut self, event: &mut Spanned<Box<Event>>) -> Result<(), ScenarioError> {
        let (ctx, steps, inputs) = (&self.ctx, &mut self.steps, &mut self.inputs);
        super::events::plan_event(ctx, self.events, event, steps, inputs)?;
        self.events += 1;
        Ok(())
    }

    /// [`Planner::event`] of an event read in the plain shape (an order or a cancel).
    pub(super) fn plain_event(&mut self, event: Plain) -> Result<(), ScenarioError> {
        super::events::plan_plain(&self.ctx, self.events, event, &mut self.steps)?;
        self.events += 1;
        Ok(())
    }

    /// The steps planned so far (and not handed out).
    pub fn steps_len(&self) -> usize {
        self.steps.len()
    }

    /// Hands `feeder` what it takes of the steps after an event, which found `before` steps
    /// (the steps are sorted only by [`Planner::finish`]).
    pub fn feed(&mut self, feeder: &mut super::feed::Feeder, before: usize) {
        feeder.after_event(&mut self.steps, before);
    }

    /// The plan as it stands, without its steps: what a fed run starts with.
    pub fn header(&self) -> Plan {
        Plan {
            name: self.name.clone(),
            genesis: Genesis {
                seed: self.seed,
                clock_mode: ClockMode::Manual,
                start: self.ctx.start,
                instruments: self.ctx.specs.clone(),
                simulation: self.simulation.clone(),
            },
            end: self.ctx.end,
            sample_every_ms: self.sample_every_ms,
            customers: self.customers.clone(),
            events: self.events,
            latency: self.latency.clone(),
            what_if: self.what_if.clone(),
            inputs: self.inputs.clone(),
            steps: Timeline::default(),
            text_sha256: None,
        }
    }

    /// The plan: its steps in time order, one instant's in the order written.
    pub fn finish(mut self) -> Plan {
        self.steps.sort();
        let steps = std::mem::take(&mut self.steps);
        Plan {
            steps,
            ..self.header()
        }
    }
}

/// The scenario's `start` and `end`, or why they are not a span the venue runs.
fn span(file: &Path, scenario: &Scenario) -> Result<(Timestamp, Timestamp), ScenarioError> {
    let start = Timestamp::parse_rfc3339(&scenario.start.value).ok_or_else(|| {
        located(
            file,
            scenario.start.referenced,
            format!(
                "start: expected an RFC 3339 timestamp, got {:?}",
                scenario.start.value
            ),
        )
    })?;
    let end = parse_at(&scenario.end.value, start)
        .map_err(|m| located(file, scenario.end.referenced, format!("end: {m}")))?;
    if end <= start || end.millis() - start.millis() > MAX_SPAN_MS {
        return Err(located(
            file,
            scenario.end.referenced,
            "end: must be after start, and at most 366 days after it",
        ));
    }
    Ok((start, end))
}

/// Between two report samples: as written, or the scenario's length over [`SAMPLES`].
fn sample_every(ctx: &Ctx, scenario: &Scenario) -> Result<i64, ScenarioError> {
    let (start, end) = (ctx.start.millis(), ctx.end.millis());
    match &scenario.sample_every {
        Some(text) => timing::parse_duration(&text.value)
            .filter(|ms| *ms >= 1_000)
            .ok_or_else(|| {
                ctx.error(
                    text.referenced,
                    "sample_every: expected a duration of at least 1s, such as 5m",
                )
            }),
        None => Ok(((end - start) / SAMPLES).max(1_000)),
    }
}

/// Whether the report's samples stay within `--max-samples`.
fn samples_within_bound(
    ctx: &Ctx,
    scenario: &Scenario,
    sample_every_ms: i64,
    customers: usize,
) -> Result<(), ScenarioError> {
    let samples = (ctx.end.millis() - ctx.start.millis()) / sample_every_ms + 1;
    let points = samples as u64 * (customers + ctx.specs.len()) as u64;
    if points <= ctx.limits.max_samples {
        return Ok(());
    }
    let at = scenario
        .sample_every
        .as_ref()
        .map_or(scenario.end.referenced, |s| s.referenced);
    Err(ctx.error(
        at,
        format!(
            "the report would sample {samples} times {customers} customers and {} instruments, \
             {points} points; at most {} (--max-samples): sample less often or raise it",
            ctx.specs.len(),
            ctx.limits.max_samples
        ),
    ))
}

fn override_instrument(
    ctx: &Ctx,
    o: &Spanned<InstrumentOverride>,
    sim: &mut Simulation,
) -> Result<(), ScenarioError> {
    let symbol = ctx.symbol(&o.value.symbol)?;
    let i = sim
        .instruments
        .iter_mut()
        .find(|i| i.symbol == symbol)
        .expect("one entry per instrument");
    let v = &o.value;
    let set = |target: &mut Decimal, value: &Option<Dec>| {
        if let Some(Dec(d)) = value {
            *target = *d;
        }
    };
    set(&mut i.volatility, &v.volatility);
    set(&mut i.half_spread_bps, &v.half_spread_bps);
    set(&mut i.level_step_bps, &v.level_step_bps);
    set(&mut i.size, &v.size);
    set(&mut i.max_inventory, &v.max_inventory);
    if let Some(levels) = v.levels {
        i.levels = levels;
    }
    Ok(())
}

fn apply_spec(
    ctx: &Ctx,
    o: &Spanned<InstrumentOverride>,
    mut specs: Vec<InstrumentSpec>,
) -> Result<Vec<InstrumentSpec>, ScenarioError> {
    let v = &o.value;
    let spec = specs
        .iter_mut()
        .find(|s| s.symbol == v.symbol.value)
        .expect("checked");
    for (target, value) in [
        (&mut spec.start_price, &v.start_price),
        (&mut spec.tick_size, &v.tick_size),
        (&mut spec.lot_size, &v.lot_size),
        (&mut spec.init_margin_req, &v.init_margin_req),
        (&mut spec.maint_margin_req, &v.maint_margin_req),
    ] {
        if let Some(Dec(d)) = value {
            *target = *d;
        }
    }
    let valid = spec.tick_size > Decimal::ZERO
        && spec.lot_size > Decimal::ZERO
        && spec.start_price > Decimal::ZERO
        && spec.on_tick(spec.start_price)
        && spec.maint_margin_req > Decimal::ZERO
        && spec.maint_margin_req < spec.init_margin_req
        && spec.init_margin_req <= Decimal::ONE;
    match valid {
        true => Ok(specs),
        false => Err(ctx.error(o.referenced, format!("{}: tick_size, lot_size and start_price must be positive with start_price on the tick, and 0 < maint_margin_req < init_margin_req ≤ 1", v.symbol.value))),
    }
}

fn apply_market(
    ctx: &Ctx,
    market: &Spanned<Market>,
    sim: &mut Simulation,
) -> Result<(), ScenarioError> {
    let m = &market.value;
    if let Some(feed) = &m.price_feed {
        sim.price_feed = PriceFeed::parse(&feed.value).ok_or_else(|| {
            ctx.error(
                feed.referenced,
                format!(
                    "price_feed: expected random-walk or fixed, got {:?}",
                    feed.value
                ),
            )
        })?;
    }
    if let Some(on) = m.market_maker {
        sim.market_maker = on;
    }
    if let Some(Dec(d)) = m.maker_funding {
        sim.maker_funding = d;
    }
    if let Some(Dec(d)) = m.insurance_funding {
        sim.insurance_funding = d;
    }
    if let Some(text) = &m.notice_interval {
        sim.notice_interval_ms = timing::parse_duration(&text.value).ok_or_else(|| {
            ctx.error(
                text.referenced,
                "notice_interval: expected a duration such as 60s",
            )
        })?;
    }
    Ok(())
}

fn customers(
    ctx: &mut Ctx,
    specs: &mut [Spanned<CustomerSpec>],
) -> Result<Vec<PlannedCustomer>, ScenarioError> {
    let mut planned = Vec::new();
    for c in specs {
        let name = &c.value.name;
        if name.value.is_empty() || name.value.len() > 64 || ctx.by_name.contains_key(&name.value) {
            return Err(ctx.error(
                name.referenced,
                format!(
                    "customer name {:?}: expected 1 to 64 characters, unique in the scenario",
                    name.value
                ),
            ));
        }
        ctx.by_name.insert(name.value.clone(), ctx.names.len());
        ctx.names.push(name.value.clone());
        planned.push(PlannedCustomer {
            name: name.value.clone(),
            setup: setup(ctx, c)?,
        });
    }
    Ok(planned)
}

fn setup(ctx: &Ctx, c: &mut Spanned<CustomerSpec>) -> Result<Vec<Command>, ScenarioError> {
    let mut setup = Vec::new();
    let here = |m: String| ctx.error(c.referenced, m);
    if let Some(leverage) = c.value.leverage {
        perpsim_core::money::margin_profile(leverage)
            .ok_or_else(|| here(format!("leverage: expected 1 or 2, got {leverage}")))?;
        setup.push(Command::SetLeverage(SetLeverage {
            customer: UNBOUND,
            leverage,
        }));
    }
    if let Some(fees) = &mut c.value.fees {
        let body = ctx.body("fees", fees)?;
        setup.push(
            fees_command(UNBOUND, None, &body)
                .map_err(|e| ctx.error(fees.json.referenced, format!("fees: {}", e.message)))?
                .into(),
        );
    }
    for (asset, Dec(amount)) in &c.value.deposits {
        let body: TransferRequest =
            read_body(json!({"asset": asset, "amount": amount.to_string()}))
                .map_err(|m| here(format!("deposits: {m}")))?;
        let command = transfer_command(UNBOUND, TransferKind::Deposit, &body, 0)
            .map_err(|e| here(format!("deposits: {}", e.message)))?;
        setup.push(command.into());
    }
    Ok(setup)
}

/// The price event of one CSV row, read by the admin API's price body.
pub(super) fn price_row(symbol: &str, index: &str, mark: Option<&str>) -> Result<Command, String> {
    let mut body = json!({"index_price": index});
    if let Some(mark) = mark {
        body["mark_price"] = json!(mark);
    }
    let body: PriceRequest = read_body(body)?;
    price_command(symbol.to_owned(), &body)
        .map(Command::from)
        .map_err(|e| e.message)
}

/// An event's command from its action, with the siblings the action needs: the customer
/// (by position) it is for, if any.
pub(super) fn action(
    ctx: &Ctx,
    e: &mut Spanned<Box<Event>>,
) -> Result<(Option<usize>, Command), ScenarioError> {
    let v = &mut e.value;
    let here = |m: &str| ctx.error(e.referenced, m.to_owned());
    if let Some(command) = customer_action(ctx, v, &here)? {
        let name = v
            .customer
            .as_ref()
            .ok_or_else(|| here("this event needs `customer`"))?;
        return Ok((Some(ctx.customer(name)?), command));
    }
    if let Some(command) = venue_action(ctx, v, &here)? {
        return Ok((None, command));
    }
    Err(here(
        "an event needs one of order, cancel, amend, price, prices, recorded, funding, status, deposit, withdrawal",
    ))
}

type Here<'a> = dyn Fn(&str) -> ScenarioError + 'a;

/// The API's refusal of a body written at `at`, at the field its message names first (the
/// API's messages begin with their field) where the body writes it, else at the body.
fn refused(ctx: &Ctx, at: Location) -> impl Fn(perpsim_core::Error) -> ScenarioError {
    move |err| {
        let named = err.message.split([' ', ':']).next().unwrap_or_default();
        ctx.at_field(at, named, err.message.clone())
    }
}

/// An order, cancel, amend, deposit or withdrawal, for a customer bound at run time.
fn customer_action(
    ctx: &Ctx,
    v: &mut Event,
    here: &Here,
) -> Result<Option<Command>, ScenarioError> {
    if let Some(order) = &mut v.order {
        let fields = std::mem::take(&mut order.json.value);
        return order_command(ctx, fields, order.json.referenced).map(Some);
    }
    if let Some(reference) = &v.cancel {
        return Ok(Some(cancel_command(reference.value.clone())));
    }
    if let Some(amend) = &mut v.amend {
        let reference = v
            .reference_id
            .as_ref()
            .ok_or_else(|| here("an amend needs `reference_id`"))?;
        let body = ctx.body("amend", amend)?;
        return amend_command(UNBOUND, reference.value.clone(), &body)
            .map(|c| Some(c.into()))
            .map_err(refused(ctx, amend.json.referenced));
    }
    for (kind, body) in [
        (TransferKind::Deposit, &mut v.deposit),
        (TransferKind::Withdrawal, &mut v.withdrawal),
    ] {
        if let Some(b) = body {
            let request = ctx.body("transfer", b)?;
            return transfer_command(UNBOUND, kind, &request, 0)
                .map(|c| Some(c.into()))
                .map_err(refused(ctx, b.json.referenced));
        }
    }
    Ok(None)
}

/// An order's command for a customer bound at run time, of the `fields` of its body written
/// at `at`.
pub(super) fn order_command(
    ctx: &Ctx,
    fields: Fields,
    at: Location,
) -> Result<Command, ScenarioError> {
    let body: OrderRequest = ctx.fields("order", fields, at)?;
    ctx.known_symbol(&body.symbol, at)?;
    place_command(UNBOUND, &body)
        .map(Into::into)
        .map_err(refused(ctx, at))
}

/// A cancel's command for a customer bound at run time.
pub(super) fn cancel_command(reference_id: String) -> Command {
    Command::CancelOrder(CancelOrder {
        customer: UNBOUND,
        reference_id,
    })
}

/// A price, funding or status event, for the instrument `symbol` names.
fn venue_action(ctx: &Ctx, v: &mut Event, here: &Here) -> Result<Option<Command>, ScenarioError> {
    let symbol = || {
        v.symbol
            .as_ref()
            .ok_or_else(|| here("this event needs `symbol`"))
            .and_then(|s| ctx.symbol(s))
    };
    if let Some(price) = &mut v.price {
        let body = ctx.body("price", price)?;
        return price_command(symbol()?, &body)
            .map(|c| Some(c.into()))
            .map_err(refused(ctx, price.json.referenced));
    }
    if let Some(funding) = &mut v.funding {
        let body = ctx.body("funding", funding)?;
        return funding_command(symbol()?, &body)
            .map(|c| Some(c.into()))
            .map_err(refused(ctx, funding.json.referenced));
    }
    if let Some(status) = &mut v.status {
        let body = ctx.body("status", status)?;
        return Ok(Some(status_command(symbol()?, &body).into()));
    }
    Ok(None)
}
