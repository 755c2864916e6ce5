//! `perpsim scenario from-journal` (D11, issue 39 item 4): a recorded session — a live
//! server's journal or a run's — as a scenario that replays it through the same engine and
//! can then be perturbed (shocks, latency, other seeds).
//!
//! The journal is re-run from genesis (customer codes are drawn by the engine, so only the
//! engine knows whose an order is); each command becomes the event the scenario format has
//! for it, at its tick's time: orders, cancels, amends, deposits and withdrawals (which
//! complete at once in a scenario), prices, funding rates and statuses. A customer's leverage
//! and fee profile set before its first order become its setup. What a scenario cannot say —
//! brokers and keys, a later leverage or fee change, a fee for one symbol, limits, faults,
//! provisioning, the transfers switch, clock modes — is left out and counted in the file's
//! head comment. Nothing grows with the journal's length in memory: the history the re-run
//! makes is let go as it goes, and the events are spilled to a file beside the output as
//! they come (the customers they name are written first, and are known only at the end).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use perpsim_core::ids::CustomerCode;
use perpsim_core::time::Timestamp;
use perpsim_systems::command::{Outcome, PlaceOrder, TransferKind};
use perpsim_systems::{Command, Engine, Genesis};
use serde_json::{Value, json};

use super::output::open_journal;
use super::run::replaying;

/// A scenario being written: its customers by code, their setup, what was left out; its
/// events go to `events` as they come (a journal's length is not held in memory).
struct Writer<W> {
    names: BTreeMap<CustomerCode, usize>,
    customers: Vec<Value>,
    /// Whether each customer has sent an order yet (its setup is closed then).
    trading: Vec<bool>,
    events: W,
    written: u64,
    failed: Option<std::io::Error>,
    skipped: BTreeMap<&'static str, u64>,
}

/// Writes to `out` (which must not exist) the scenario that replays the journal at `path`.
/// Its events are written beside it first (`out` with `.events` appended, removed after),
/// since the customers they name come before them and are known only at the end.
pub fn write_scenario(path: &Path, out: &Path) -> Result<(), String> {
    let shown = |e: std::io::Error| format!("{}: {e}", out.display());
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(out)
        .map_err(shown)?;
    let spill = out.with_extension("events.tmp");
    let written = write_through(path, (file, &spill));
    let _ = std::fs::remove_file(&spill);
    if written.is_err() {
        let _ = std::fs::remove_file(out);
    }
    written
}

/// [`write_scenario`]'s work: the journal re-run, its events spilled to `spill`, then the
/// scenario written to `file`: its head, then the events copied.
fn write_through(path: &Path, (file, spill): (std::fs::File, &Path)) -> Result<(), String> {
    let shown = |e: std::io::Error| format!("{}: {e}", spill.display());
    let events = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(spill)
        .map_err(shown)?;
    let mut w = Writer::new(std::io::BufWriter::new(events));
    let (genesis, end) = rerun(path, &mut w)?;
    let head = w.head(path, &genesis, end);
    if let Some(e) = w.failed.take() {
        return Err(shown(e));
    }
    let mut events = w.events.into_inner().map_err(|e| shown(e.into_error()))?;
    let mut out = std::io::BufWriter::new(file);
    std::io::Write::write_all(&mut out, head.as_bytes()).map_err(shown)?;
    std::io::Seek::rewind(&mut events).map_err(shown)?;
    std::io::copy(&mut events, &mut out).map_err(shown)?;
    std::io::Write::flush(&mut out).map_err(shown)
}

/// The journal at `path` re-run from genesis into `w`: its genesis and the instant it ends.
fn rerun<W: std::io::Write>(
    path: &Path,
    w: &mut Writer<W>,
) -> Result<(Genesis, Timestamp), String> {
    let journal = open_journal(path)?;
    let genesis = journal
        .genesis()
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("{} holds no genesis", path.display()))?;
    let mut engine = replaying(Engine::genesis(genesis.clone()));
    let mut end = genesis.start;
    journal
        .for_each_tick_after(0, |tick, record| {
            end = end.max(record.time);
            for command in &record.commands {
                w.before(command, record.time);
            }
            let out = engine.tick(record.time, record.commands);
            for result in out.answers.into_results() {
                if let Ok(Outcome::Customer(c)) = result {
                    w.customer(c.code, c.external_id.as_deref());
                }
            }
            if tick % 4_096 == 0 {
                drop(engine.take_history());
            }
            Ok(())
        })
        .map_err(|e| e.to_string())?;
    Ok((genesis, end.max(engine.clock().now)))
}

impl<W: std::io::Write> Writer<W> {
    fn new(events: W) -> Self {
        Writer {
            names: BTreeMap::new(),
            customers: Vec::new(),
            trading: Vec::new(),
            events,
            written: 0,
            failed: None,
            skipped: BTreeMap::new(),
        }
    }

    /// A customer the engine created: named by its external id (made unique), else its code.
    fn customer(&mut self, code: CustomerCode, external_id: Option<&str>) {
        if self.names.contains_key(&code) {
            return;
        }
        let base = external_id.map_or_else(|| code.to_string(), str::to_owned);
        let taken = |n: &str| self.customers.iter().any(|c| c["name"] == n);
        let mut name = base.clone();
        for k in 2.. {
            if !taken(&name) {
                break;
            }
            name = format!("{base}-{k}");
        }
        self.names.insert(code, self.customers.len());
        self.customers.push(json!({"name": name}));
        self.trading.push(false);
    }

    fn skip(&mut self, what: &'static str) {
        *self.skipped.entry(what).or_default() += 1;
    }

    fn event(&mut self, at: Timestamp, fields: Value) {
        let mut event = json!({"at": at.to_string()});
        event
            .as_object_mut()
            .expect("an object")
            .extend(fields.as_object().expect("an event's fields").clone());
        let written = writeln!(self.events, "  - {event}");
        match written {
            Ok(()) => self.written += 1,
            Err(e) => {
                self.failed.get_or_insert(e);
            }
        }
    }

    /// A command as its event (or setup), before the engine applies it: a customer it names
    /// was created by an earlier tick.
    fn before(&mut self, command: &Command, at: Timestamp) {
        match command {
            Command::PlaceOrder(p) => self.order(p, at),
            Command::CancelOrder(c) => {
                self.for_customer(c.customer, at, json!({"cancel": c.reference_id}))
            }
            Command::AmendOrder(a) => {
                let body = amend_body(&a.amend);
                self.for_customer(
                    a.customer,
                    at,
                    json!({"reference_id": a.reference_id, "amend": body}),
                );
            }
            Command::RequestTransfer(t) => {
                let kind = match t.kind {
                    TransferKind::Deposit => "deposit",
                    TransferKind::Withdrawal => "withdrawal",
                };
                let body = json!({"asset": t.asset.as_str(), "amount": t.amount.to_string()});
                self.for_customer(t.customer, at, json!({ kind: body }));
            }
            Command::SetLeverage(l) => self.setup(
                l.customer,
                "leverage",
                json!(l.leverage),
                "a leverage change after trading",
            ),
            Command::SetFees(f) if f.symbol.is_none() => {
                let fees = json!({"maker_fee": f.maker_bps.map(|d| d.to_string()), "taker_fee": f.taker_bps.map(|d| d.to_string())});
                self.setup(f.customer, "fees", fees, "a fee change after trading");
            }
            Command::SetFees(_) => self.skip("a fee for one symbol"),
            other => self.venue(other, at),
        }
    }

    /// The venue's own commands: prices, funding and statuses; the rest left out.
    fn venue(&mut self, command: &Command, at: Timestamp) {
        let fields = match command {
            Command::SetInstrumentPrice(p) => {
                json!({"symbol": p.symbol, "price": {"index_price": p.index_price.to_string(), "mark_price": p.mark_price.to_string()}})
            }
            Command::SetFundingRate(f) => {
                json!({"symbol": f.symbol, "funding": {"preliminary_rate": f.rate.to_string()}})
            }
            Command::SetInstrumentStatus(s) => {
                json!({"symbol": s.symbol, "status": {"status": s.status.as_str()}})
            }
            Command::AdvanceClock(_) | Command::CreateCustomer(_) => return,
            Command::CreateBroker(_) | Command::AddBrokerKey(_) | Command::RevokeBrokerKey(_) => {
                return self.skip("broker and key commands");
            }
            Command::SetClockMode(_) => return self.skip("clock modes"),
            Command::SetLimits(_) => return self.skip("limits"),
            Command::SetFaults(_) => return self.skip("fault plans"),
            Command::SetRecordedBook(_) => return self.skip("recorded books"),
            Command::PrintRecordedTrade(_) => return self.skip("recorded trades"),
            Command::SetProvisioned(_) => return self.skip("provisioning"),
            Command::SetTransfersAvailable(_) => return self.skip("the transfers switch"),
            Command::CancelTransfer(_) => return self.skip("transfer cancellations"),
            _ => return self.skip("other commands"),
        };
        self.event(at, fields);
    }

    fn order(&mut self, p: &PlaceOrder, at: Timestamp) {
        if let Some(&c) = self.names.get(&p.customer) {
            self.trading[c] = true;
        }
        self.for_customer(p.customer, at, json!({"order": order_body(p)}));
    }

    /// An event of customer `code`'s; a customer the journal never created is left out.
    fn for_customer(&mut self, code: CustomerCode, at: Timestamp, mut fields: Value) {
        let Some(&c) = self.names.get(&code) else {
            return self.skip("requests for unknown customers");
        };
        fields["customer"] = self.customers[c]["name"].clone();
        self.event(at, fields);
    }

    /// Part of customer `code`'s setup while it has not traded; after, left out as `late`.
    fn setup(&mut self, code: CustomerCode, field: &str, value: Value, late: &'static str) {
        match self.names.get(&code) {
            Some(&c) if !self.trading[c] => self.customers[c][field] = value,
            Some(_) => self.skip(late),
            None => self.skip("requests for unknown customers"),
        }
    }
}

/// An order's body as the API takes it (`POST …/orders`), from the entry it was sent with.
fn order_body(p: &PlaceOrder) -> Value {
    let e = &p.entry;
    let mut body = json!({
        "symbol": p.symbol,
        "side": e.side.as_str(),
        "type": e.kind.as_str(),
        "reference_id": e.reference_id,
    });
    let decimals = [
        ("amount", e.amount),
        ("cash_amount", e.cash_amount),
        ("limit_price", e.limit_price),
        ("trigger_price", e.trigger_price),
        ("take_profit_price", e.take_profit_price),
        ("stop_loss_price", e.stop_loss_price),
    ];
    for (field, value) in decimals {
        if let Some(v) = value {
            body[field] = json!(v.to_string());
        }
    }
    if let Some(t) = e.trigger_price_type {
        body["trigger_price_type"] = json!(t.as_str());
    }
    if let Some(t) = e.time_in_force {
        body["time_in_force"] = json!(t.as_str());
    }
    if let Some(t) = e.expire_time {
        body["expire_time"] = json!(t.to_string());
    }
    if e.post_only {
        body["post_only"] = json!(true);
    }
    if let Some(l) = e.leverage {
        body["leverage"] = json!(l);
    }
    body
}

/// An amend's body as the API takes it (`PATCH …/orders/{reference_id}`).
fn amend_body(a: &perpsim_core::entry::Amend) -> Value {
    let mut body = json!({});
    let decimals = [
        ("amount", a.amount),
        ("limit_price", a.limit_price),
        ("trigger_price", a.trigger_price),
    ];
    for (field, value) in decimals {
        if let Some(v) = value {
            body[field] = json!(v.to_string());
        }
    }
    if let Some(t) = a.expire_time {
        body["expire_time"] = json!(t.to_string());
    }
    body
}

impl<W> Writer<W> {
    /// The scenario's head as YAML, up to its `events:` key: a comment, the genesis as the
    /// venue and the customers (JSON mappings, which YAML reads as written); the events
    /// follow, last, as the one-pass reader takes them.
    fn head(&self, path: &Path, genesis: &Genesis, end: Timestamp) -> String {
        let mut t = String::new();
        let name = path.display().to_string();
        let _ = writeln!(t, "# Made by `perpsim scenario from-journal` from {name}.");
        for (what, n) in &self.skipped {
            let _ = writeln!(t, "# Left out, a scenario cannot say it: {n} × {what}.");
        }
        let _ = writeln!(t, "name: {}", json!(format!("from {name}")));
        let _ = writeln!(t, "seed: {}", genesis.seed);
        let _ = writeln!(t, "start: {}\nend: {end}", genesis.start);
        t.push_str("instruments:\n");
        for line in instruments(genesis) {
            let _ = writeln!(t, "  - {line}");
        }
        let _ = writeln!(t, "market: {}", market(genesis));
        t.push_str("customers:\n");
        for c in &self.customers {
            let _ = writeln!(t, "  - {c}");
        }
        t.push_str(match self.written {
            0 => "events: []\n",
            _ => "events:\n",
        });
        t
    }
}

/// Each instrument's spec and living market as the genesis has them, as overrides.
fn instruments(genesis: &Genesis) -> Vec<String> {
    let simulated = &genesis.simulation.instruments;
    genesis
        .instruments
        .iter()
        .zip(simulated)
        .map(|(spec, sim)| {
            json!({
                "symbol": spec.symbol,
                "start_price": spec.start_price.to_string(),
                "tick_size": spec.tick_size.to_string(),
                "lot_size": spec.lot_size.to_string(),
                "init_margin_req": spec.init_margin_req.to_string(),
                "maint_margin_req": spec.maint_margin_req.to_string(),
                "volatility": sim.volatility.to_string(),
                "levels": sim.levels,
                "half_spread_bps": sim.half_spread_bps.to_string(),
                "level_step_bps": sim.level_step_bps.to_string(),
                "size": sim.size.to_string(),
                "max_inventory": sim.max_inventory.to_string(),
            })
            .to_string()
        })
        .collect()
}

/// The genesis' living market as the scenario's `market`.
fn market(genesis: &Genesis) -> Value {
    let s = &genesis.simulation;
    json!({
        "price_feed": s.price_feed.as_str(),
        "market_maker": s.market_maker,
        "maker_funding": s.maker_funding.to_string(),
        "insurance_funding": s.insurance_funding.to_string(),
        "notice_interval": format!("{}ms", s.notice_interval_ms),
    })
}
