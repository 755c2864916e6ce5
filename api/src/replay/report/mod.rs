//! The report of a run (D11): `report.json`, `ledger.csv`, `trades.csv` and `report.html`,
//! built from the state the run ends in ([`Closing`]: the engine's live state, borrowed,
//! never copied into the read view), its logs as they streamed out of the engine during the
//! run (`streamed`, which writes the CSV files then) and what the run observed. Every money
//! figure is a sum of `ledger.csv` rows; `build` asserts they add up to each balance before
//! the report is written.
//!
//! Per customer and currency, `Flows` summed from its ledger rows (`report/money`: each part by
//! movement kind, reconciled to the balance with an `assert!` kept in release builds before any
//! file is written), drawdown over the samples net of transfers; `tables` writes the rows of
//! `ledger.csv` and `trades.csv` (the `csv` crate, with the transactions endpoint's own column
//! functions); `html` and `charts` write one offline page, charts drawn by plotters as inline
//! SVG (`f64` only for drawing). `output` writes a run under a temporary name (`Staging`,
//! removed with everything in it if the run fails), renames it when complete with a `DONE`
//! marker and a `manifest.json` of hashes (the state hash on a thread of its own beside the
//! journal's; each file but the journal hashed as it is written, not read back) — of all inputs
//! together, and of each one, which `verify` checks before it reads the scenario; `journal_run`
//! does the same for a recorded journal, re-journaling the ticks it reads.

pub mod charts;
pub mod html;
pub mod money;
pub mod streamed;
pub mod tables;

use std::collections::BTreeMap;

use perpsim_core::Decimal;
use perpsim_core::ids::CustomerCode;
use perpsim_core::instrument::Asset;
use perpsim_core::money::DEFAULT_LEVERAGE;
use perpsim_core::risk::MarginState;
use perpsim_core::time::Timestamp;
use perpsim_systems::records::money::{AccountId, VenueAccount};
use perpsim_systems::records::position::Position;
use perpsim_systems::records::simulation::MARKET_MAKER;
use perpsim_systems::records::venue::MarketId;
use perpsim_systems::{Closing, ClosingMarket, Engine};
use serde::{Deserialize, Serialize};

use self::money::{Flows, max_drawdown, net_transfers_at};
use self::streamed::LogTallies;
use super::run::Observed;

/// The name the market maker goes by in the report and the CSV files.
pub const MAKER_NAME: &str = "market-maker";

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Report {
    pub scenario: Meta,
    pub state_hash: String,
    pub ticks: u64,
    pub commands: u64,
    pub outcomes: Outcomes,
    pub customers: Vec<CustomerReport>,
    pub market_maker: Vec<Currency>,
    pub instruments: Vec<InstrumentReport>,
    pub venue: Vec<VenueReport>,
    pub refusals: Vec<RefusalRow>,
}

/// What the run came to, at a glance (D11): printed beside the state hash, and what
/// `--strict` reads. Refused events are outcomes of the run, not errors of the scenario.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Outcomes {
    /// The scenario's events (a recorded journal's: its commands); those applied whole, and
    /// those with a request the venue refused (listed in `refusals`).
    pub events: usize,
    pub applied: usize,
    pub refused: usize,
    /// Customers' setup requests (leverage, fees, deposits at `start`) refused.
    pub setup_refused: usize,
    /// Margin-state changes into margin call and into liquidation, every customer's.
    pub margin_calls: usize,
    pub liquidations: usize,
    /// Auto-deleveraging fills (each once, though two positions take part).
    pub auto_deleveraging_fills: usize,
    /// Per settlement asset: what the insurance fund paid to cover balances gone below zero.
    pub insurance_drawn: BTreeMap<String, String>,
}

impl std::fmt::Display for Outcomes {
    /// One line: `12 events: 9 applied, 3 refused (report.json lists them); 1 margin call, …`.
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let plural = |n: usize, one: &str, many: &str| match n {
            1 => format!("1 {one}"),
            n => format!("{n} {many}"),
        };
        write!(
            f,
            "{}: {} applied, {} refused",
            plural(self.events, "event", "events"),
            self.applied,
            self.refused
        )?;
        if self.setup_refused > 0 {
            write!(f, ", {} of the customers' setup", self.setup_refused)?;
        }
        if self.refused + self.setup_refused > 0 {
            f.write_str(" (report.json lists each refusal)")?;
        }
        let drawn: Vec<String> = self
            .insurance_drawn
            .iter()
            .filter(|(_, amount)| amount.as_str() != "0")
            .map(|(asset, amount)| format!("{amount} {asset}"))
            .collect();
        write!(
            f,
            "; {}, {}, {}; insurance drawn: {}",
            plural(self.margin_calls, "margin call", "margin calls"),
            plural(self.liquidations, "liquidation", "liquidations"),
            plural(
                self.auto_deleveraging_fills,
                "auto-deleveraging fill",
                "auto-deleveraging fills"
            ),
            match drawn.is_empty() {
                true => "none".to_owned(),
                false => drawn.join(", "),
            }
        )
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Meta {
    pub name: String,
    pub seed: u64,
    pub start: String,
    pub end: String,
    pub sample_every_ms: i64,
    pub samples: usize,
    /// What-if: the factor each shock drew for this run, in the scenario's order, and the
    /// volatility's (null when the scenario scales none).
    pub shock_factors: Vec<String>,
    pub volatility_factor: Option<String>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct CustomerReport {
    pub name: String,
    pub code: String,
    /// The leverage of its margin profile at the end (D8): its margin-call and liquidation
    /// thresholds.
    pub leverage: u32,
    pub currencies: Vec<Currency>,
    pub trades: usize,
    /// Forced IOC fills of its liquidations, and auto-deleveraging fills (its own or as the
    /// counterparty taken).
    pub liquidation_fills: usize,
    pub auto_deleveraging_fills: usize,
    /// Margin-state changes into margin call and into liquidation.
    pub margin_calls: usize,
    pub liquidations: usize,
    pub notices: usize,
    pub refused: usize,
}

/// A customer's money in one settlement currency (figures are decimal strings).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Currency {
    pub asset: String,
    pub deposits: String,
    pub withdrawals: String,
    pub realised_pnl: String,
    pub fees: String,
    pub funding: String,
    pub settlement: String,
    pub insurance: String,
    /// deposits − withdrawals + realised_pnl − fees + funding + settlement + insurance.
    pub balance: String,
    pub pending: String,
    pub unrealised_pnl: String,
    pub equity: String,
    /// equity − (deposits − withdrawals): what trading made or lost.
    pub pnl: String,
    pub leverage_ratio: String,
    /// The largest fall of equity less net transfers from a running peak, at the samples.
    pub max_drawdown: String,
    pub positions: Vec<PositionRow>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct PositionRow {
    pub symbol: String,
    pub size: String,
    pub entry_price: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct InstrumentReport {
    pub symbol: String,
    pub settlement: String,
    /// Public fills (one per match).
    pub trades: usize,
    /// Σ amount of the fills, in contracts, and Σ price × amount.
    pub volume: String,
    pub notional: String,
    pub open_interest: String,
    pub index_first: String,
    pub index_last: String,
    pub index_min: String,
    pub index_max: String,
    /// (time, index, mark) at every sample.
    pub path: Vec<[String; 3]>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct VenueReport {
    pub asset: String,
    pub fees: String,
    pub clearing: String,
    pub insurance: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct RefusalRow {
    pub at: String,
    /// Position in the scenario's events (0-based); null for a customer's setup.
    pub event: Option<usize>,
    pub customer: Option<String>,
    pub code: String,
    pub message: String,
}

/// What the run was, for the report's head.
pub struct RunInfo {
    pub name: String,
    pub seed: u64,
    pub end: Timestamp,
    pub sample_every_ms: i64,
    /// The scenario's events; `None` for a recorded journal (its commands are counted).
    pub events: Option<usize>,
}

/// Decimal text as the report prints it: trailing zeros dropped.
pub fn text(d: Decimal) -> String {
    d.normalize().to_string()
}

/// The report of the run `engine` ended, from its closing state `view` (which the charts
/// read too), what it observed (its logs' tallies among it) and its `state_hash`, asked for
/// last (it is computed beside the report).
pub fn build(
    engine: &Engine,
    view: &Closing,
    observed: &Observed,
    info: &RunInfo,
    state_hash: impl FnOnce() -> String,
) -> Report {
    let counters = engine.counters();
    let genesis = engine.genesis_config();
    let tallies = Tallies::of(observed);
    let customers: Vec<CustomerReport> = observed
        .customers
        .iter()
        .enumerate()
        .map(|(i, (name, code))| {
            let leverage = engine.leverage_of(*code).unwrap_or(DEFAULT_LEVERAGE);
            customer(view, observed, &tallies, (i, name, *code, leverage))
        })
        .collect();
    let market_maker = currencies(view, observed, &tallies, None, MARKET_MAKER);
    let events = info.events.unwrap_or(counters.commands as usize);
    Report {
        scenario: Meta {
            name: info.name.clone(),
            seed: info.seed,
            start: genesis.start.to_string(),
            end: info.end.to_string(),
            sample_every_ms: info.sample_every_ms,
            samples: observed.samples.len(),
            shock_factors: observed.drawn.shocks.iter().map(|f| text(*f)).collect(),
            volatility_factor: observed.drawn.volatility.map(text),
        },
        ticks: counters.ticks,
        commands: counters.commands,
        outcomes: outcomes(events, observed, (&customers, &market_maker)),
        customers,
        market_maker,
        instruments: instruments(view, observed),
        venue: venue(view, &observed.assets),
        refusals: observed
            .refusals
            .iter()
            .map(|r| RefusalRow {
                at: r.at.to_string(),
                event: r.event,
                customer: r.customer.clone(),
                code: r.code.to_owned(),
                message: r.message.clone(),
            })
            .collect(),
        // Last: the fields are made in the order written here, not the order they are shown.
        state_hash: state_hash(),
    }
}

/// The run's [`Outcomes`] from what it observed and the customers' (and the maker's) figures.
fn outcomes(
    events: usize,
    observed: &Observed,
    (customers, maker): (&[CustomerReport], &[Currency]),
) -> Outcomes {
    let refused: std::collections::BTreeSet<usize> =
        observed.refusals.iter().filter_map(|r| r.event).collect();
    let mut drawn: BTreeMap<String, Decimal> = BTreeMap::new();
    let currencies = customers.iter().flat_map(|c| &c.currencies).chain(maker);
    for c in currencies {
        let paid: Decimal = c.insurance.parse().expect("the report's own decimal text");
        *drawn.entry(c.asset.clone()).or_default() += paid;
    }
    Outcomes {
        events,
        applied: events.saturating_sub(refused.len()),
        refused: refused.len(),
        setup_refused: observed
            .refusals
            .iter()
            .filter(|r| r.event.is_none())
            .count(),
        margin_calls: customers.iter().map(|c| c.margin_calls).sum(),
        liquidations: customers.iter().map(|c| c.liquidations).sum(),
        auto_deleveraging_fills: observed.logs.auto_deleveraging_fills,
        insurance_drawn: drawn.into_iter().map(|(a, d)| (a, text(d))).collect(),
    }
}

/// Per customer: margin calls, liquidations and refusals as observed, and what the logs
/// tallied as they streamed out (`Observed::logs`: trades by kind, money, notices).
struct Tallies<'a> {
    logs: &'a LogTallies,
    calls: BTreeMap<CustomerCode, usize>,
    liquidations: BTreeMap<CustomerCode, usize>,
    refused: BTreeMap<String, usize>,
}

impl<'a> Tallies<'a> {
    fn of(observed: &'a Observed) -> Self {
        let mut t = Tallies {
            logs: &observed.logs,
            calls: BTreeMap::new(),
            liquidations: BTreeMap::new(),
            refused: BTreeMap::new(),
        };
        for r in &observed.margin {
            match r.state {
                MarginState::MarginCall => *t.calls.entry(r.customer).or_default() += 1,
                MarginState::Liquidation => *t.liquidations.entry(r.customer).or_default() += 1,
                MarginState::Normal => {}
            }
        }
        for r in &observed.refusals {
            if let Some(name) = &r.customer {
                *t.refused.entry(name.clone()).or_default() += 1;
            }
        }
        t
    }
}

fn customer(
    view: &Closing,
    observed: &Observed,
    tallies: &Tallies,
    (i, name, code, leverage): (usize, &str, CustomerCode, u32),
) -> CustomerReport {
    let [trades, liquidation_fills, auto_deleveraging_fills] =
        tallies.logs.trades.get(&code).copied().unwrap_or_default();
    let count = |m: &BTreeMap<CustomerCode, usize>| m.get(&code).copied().unwrap_or(0);
    CustomerReport {
        name: name.to_owned(),
        code: code.to_string(),
        leverage,
        currencies: currencies(view, observed, tallies, Some(i), code),
        trades,
        liquidation_fills,
        auto_deleveraging_fills,
        margin_calls: count(&tallies.calls),
        liquidations: count(&tallies.liquidations),
        notices: count(&tallies.logs.notices),
        refused: tallies.refused.get(name).copied().unwrap_or(0),
    }
}

/// Every currency the customer's ledger touches, sorted.
fn currencies(
    view: &Closing,
    observed: &Observed,
    tallies: &Tallies,
    sampled: Option<usize>,
    code: CustomerCode,
) -> Vec<Currency> {
    tallies
        .logs
        .money
        .get(&code)
        .into_iter()
        .flatten()
        .map(|(&asset, (f, transfers))| {
            let b = view.balances.get(&AccountId::customer(code, asset));
            let (total, withdrawing) = b.map(|b| (b.total, b.pending)).unwrap_or_default();
            // The money invariant the report rests on, kept in release builds.
            assert_eq!(
                f.balance, total,
                "the ledger rows of {code} in {asset:?} sum to its balance"
            );
            assert_eq!(
                f.parts(),
                f.balance,
                "the report's parts of {code} in {asset:?} add up to its balance"
            );
            let equity_base = f.balance - withdrawing;
            currency(
                view,
                observed,
                (sampled, code, asset),
                f,
                equity_base,
                transfers,
            )
        })
        .collect()
}

/// `collateral`: the balance less pending withdrawals.
fn currency(
    view: &Closing,
    observed: &Observed,
    (sampled, code, asset): (Option<usize>, CustomerCode, Asset),
    f: &Flows,
    collateral: Decimal,
    transfers: &[(Timestamp, Decimal)],
) -> Currency {
    let positions: Vec<&Position> = view
        .positions
        .range((code, 0)..=(code, MarketId::MAX))
        .map(|(_, p)| *p)
        .filter(|p| instrument(view, p.market).spec.settlement == asset)
        .collect();
    let mark = |p: &Position| instrument(view, p.market).mark_price;
    let unrealised: Decimal = positions.iter().map(|p| p.unrealised_pnl(mark(p))).sum();
    let notional: Decimal = positions.iter().map(|p| p.size.abs() * mark(p)).sum();
    let equity = collateral + unrealised;
    let a = observed.assets.iter().position(|x| *x == asset);
    let series = sampled.zip(a).map(|(c, a)| {
        observed
            .samples
            .iter()
            .filter_map(move |s| Some(s.figures(c, a)?.equity - net_transfers_at(transfers, s.at)))
    });
    let drawdown = series.map(max_drawdown).unwrap_or_default();
    let net = f.deposits - f.withdrawals;
    Currency {
        asset: asset.as_str().to_owned(),
        deposits: text(f.deposits),
        withdrawals: text(f.withdrawals),
        realised_pnl: text(f.realised_pnl),
        fees: text(f.fees),
        funding: text(f.funding),
        settlement: text(f.settlement),
        insurance: text(f.insurance),
        balance: text(f.balance),
        pending: text(f.pending),
        unrealised_pnl: text(unrealised),
        equity: text(equity),
        pnl: text(equity - net),
        leverage_ratio: text(perpsim_core::risk::leverage_ratio(equity, notional)),
        max_drawdown: text(drawdown),
        positions: positions
            .iter()
            .map(|p| PositionRow {
                symbol: instrument(view, p.market).spec.symbol.clone(),
                size: text(p.size),
                entry_price: text(p.entry_price),
            })
            .collect(),
    }
}

fn instruments(view: &Closing, observed: &Observed) -> Vec<InstrumentReport> {
    view.markets
        .iter()
        .enumerate()
        .map(|(m, current)| {
            let fills = observed.logs.markets.get(m).cloned().unwrap_or_default();
            let index: Vec<Decimal> = observed.samples.iter().map(|s| s.prices[m].index).collect();
            let first_last = |v: Option<&Decimal>| text(v.copied().unwrap_or(current.index_price));
            InstrumentReport {
                symbol: current.spec.symbol.clone(),
                settlement: current.spec.settlement.as_str().to_owned(),
                trades: fills.fills,
                volume: text(fills.volume),
                notional: text(fills.notional),
                open_interest: text(current.open_interest),
                index_first: first_last(index.first()),
                index_last: first_last(index.last()),
                index_min: first_last(index.iter().min()),
                index_max: first_last(index.iter().max()),
                path: observed
                    .samples
                    .iter()
                    .map(|s| {
                        [
                            s.at.to_string(),
                            text(s.prices[m].index),
                            text(s.prices[m].mark),
                        ]
                    })
                    .collect(),
            }
        })
        .collect()
}

fn instrument<'v>(view: &'v Closing, market: MarketId) -> &'v ClosingMarket<'v> {
    &view.markets[market as usize]
}

fn venue(view: &Closing, assets: &[Asset]) -> Vec<VenueReport> {
    assets
        .iter()
        .map(|asset| {
            let of = |a: VenueAccount| {
                text(
                    view.balances
                        .get(&AccountId::venue(a, *asset))
                        .map(|b| b.total)
                        .unwrap_or_default(),
                )
            };
            VenueReport {
                asset: asset.as_str().to_owned(),
                fees: of(VenueAccount::Fees),
                clearing: of(VenueAccount::Clearing),
                insurance: of(VenueAccount::Insurance),
            }
        })
        .collect()
}
