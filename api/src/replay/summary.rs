//! `summary.json` and `summary.html` of a Monte-Carlo: per customer and currency the
//! distribution of final equity, PnL, max drawdown and liquidations across seeds; per
//! instrument the price range. Computed from the seeds' `report.json` alone, so the summary
//! of shards merged is the one-machine summary.

use std::fmt::Write as _;
use std::path::Path;

use perpsim_core::Decimal;
use rust_decimal::prelude::ToPrimitive;
use serde::Serialize;

use super::files;
use super::montecarlo::{Distribution, distribution};
use super::report::charts::{self, Line};
use super::report::html::{CSS, esc};
use super::report::{Report, text};
use perpsim_core::time::Timestamp;

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Summary {
    pub scenario: String,
    pub runs: usize,
    pub seeds: Vec<u64>,
    pub customers: Vec<CustomerSummary>,
    pub instruments: Vec<InstrumentSummary>,
    /// The venue's loss: per settlement asset, what insurance paid across the seeds.
    pub insurance_drawn: Vec<AssetSummary>,
    /// Each shock's drawn factor across the seeds, in the scenario's order.
    pub shock_factors: Vec<Distribution>,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct AssetSummary {
    pub asset: String,
    pub drawn: Distribution,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct CustomerSummary {
    pub name: String,
    pub asset: String,
    pub final_equity: Distribution,
    pub pnl: Distribution,
    pub max_drawdown: Distribution,
    pub liquidations: Distribution,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct InstrumentSummary {
    pub symbol: String,
    /// The lowest and highest index sampled in any seed.
    pub index_min: String,
    pub index_max: String,
    pub index_last: Distribution,
}

/// A figure of a report `montecarlo::finished` accepted: it checked every one parses.
fn dec(s: &str) -> Decimal {
    s.parse().expect("montecarlo::finished checked the figure")
}

pub fn summarize(runs: &[(u64, Report)]) -> Summary {
    let first = &runs[0].1;
    let mut customers = Vec::new();
    for (c, customer) in first.customers.iter().enumerate() {
        for (k, currency) in customer.currencies.iter().enumerate() {
            let of =
                |f: &dyn Fn(&Report) -> Decimal| runs.iter().map(|(_, r)| f(r)).collect::<Vec<_>>();
            let field = |get: fn(&super::report::Currency) -> &String| {
                move |r: &Report| {
                    r.customers
                        .get(c)
                        .and_then(|x| x.currencies.get(k))
                        .map(|x| dec(get(x)))
                        .unwrap_or_default()
                }
            };
            customers.push(CustomerSummary {
                name: customer.name.clone(),
                asset: currency.asset.clone(),
                final_equity: distribution(of(&field(|x| &x.equity)), true),
                pnl: distribution(of(&field(|x| &x.pnl)), true),
                max_drawdown: distribution(of(&field(|x| &x.max_drawdown)), false),
                liquidations: distribution(
                    of(&|r: &Report| {
                        Decimal::from(r.customers.get(c).map(|x| x.liquidations).unwrap_or(0))
                    }),
                    false,
                ),
            });
        }
    }
    let instruments = first
        .instruments
        .iter()
        .enumerate()
        .map(|(i, inst)| {
            let all = |f: fn(&super::report::InstrumentReport) -> &String| {
                runs.iter().map(move |(_, r)| dec(f(&r.instruments[i])))
            };
            InstrumentSummary {
                symbol: inst.symbol.clone(),
                index_min: text(all(|x| &x.index_min).min().unwrap_or_default()),
                index_max: text(all(|x| &x.index_max).max().unwrap_or_default()),
                index_last: distribution(all(|x| &x.index_last).collect(), true),
            }
        })
        .collect();
    Summary {
        scenario: first.scenario.name.clone(),
        runs: runs.len(),
        seeds: runs.iter().map(|(s, _)| *s).collect(),
        customers,
        instruments,
        insurance_drawn: insurance_drawn(runs),
        shock_factors: (0..first.scenario.shock_factors.len())
            .map(|k| {
                let drawn = runs.iter().map(|(_, r)| dec(&r.scenario.shock_factors[k]));
                distribution(drawn.collect(), false)
            })
            .collect(),
    }
}

/// Per asset, what insurance paid in each seed (its loss: higher is worse).
fn insurance_drawn(runs: &[(u64, Report)]) -> Vec<AssetSummary> {
    let assets = runs[0].1.outcomes.insurance_drawn.keys();
    assets
        .map(|asset| {
            let paid = |r: &Report| {
                r.outcomes
                    .insurance_drawn
                    .get(asset)
                    .map_or(Decimal::ZERO, |d| dec(d))
            };
            AssetSummary {
                asset: asset.clone(),
                drawn: distribution(runs.iter().map(|(_, r)| paid(r)).collect(), false),
            }
        })
        .collect()
}

/// Writes `summary.json` and `summary.html` into `out`, each through a new temporary file
/// renamed into place (a link planted in `out` is replaced, never written through).
pub fn write(out: &Path, runs: &[(u64, Report)]) -> Result<(), String> {
    let summary = summarize(runs);
    let json = serde_json::to_string_pretty(&summary).expect("a summary encodes") + "\n";
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    files::write_new(out, "summary.json", json.as_bytes())?;
    files::write_new(out, "summary.html", page(&summary, runs).as_bytes())
}

fn page(s: &Summary, runs: &[(u64, Report)]) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{0} — Monte-Carlo</title><style>{CSS}</style></head><body><h1>{0}</h1><p>{1} runs, seeds {2}…{3}</p>",
        esc(&s.scenario),
        s.runs,
        s.seeds.first().unwrap_or(&0),
        s.seeds.last().unwrap_or(&0)
    );
    h.push_str("<h2>Customers</h2><table><tr><th>customer</th><th>asset</th><th>figure</th><th>p1</th><th>p5</th><th>p50</th><th>p95</th><th>p99</th><th>worst</th></tr>");
    for c in &s.customers {
        for (figure, d) in [
            ("final equity", &c.final_equity),
            ("PnL", &c.pnl),
            ("max drawdown", &c.max_drawdown),
            ("liquidations", &c.liquidations),
        ] {
            let (name, asset) = (esc(&c.name), esc(&c.asset));
            let cells = cells(d);
            let _ = write!(
                h,
                "<tr><td>{name}</td><td>{asset}</td><td>{figure}</td>{cells}</tr>"
            );
        }
    }
    h.push_str("</table><h2>The venue's loss: insurance paid</h2><table><tr><th>asset</th><th>p1</th><th>p5</th><th>p50</th><th>p95</th><th>p99</th><th>worst</th></tr>");
    for a in &s.insurance_drawn {
        let _ = write!(h, "<tr><td>{}</td>{}</tr>", esc(&a.asset), cells(&a.drawn));
    }
    h.push_str("</table><h2>Instruments</h2><table><tr><th>symbol</th><th>index min</th><th>index max</th><th>last p1</th><th>last p50</th><th>last p99</th></tr>");
    for i in &s.instruments {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&i.symbol),
            i.index_min,
            i.index_max,
            i.index_last.p1,
            i.index_last.p50,
            i.index_last.p99
        );
    }
    h.push_str("</table><h2>Index across seeds</h2><p>p5, p50 and p95 of the index at each sample.</p><div class=\"charts\">");
    for (i, inst) in s.instruments.iter().enumerate() {
        h.push_str(&fan(&inst.symbol, i, runs));
    }
    h.push_str("</div></body></html>\n");
    h
}

/// A distribution's cells: p1, p5, p50, p95, p99 and the worst.
fn cells(d: &Distribution) -> String {
    let values = [&d.p1, &d.p5, &d.p50, &d.p95, &d.p99, &d.worst];
    values.iter().map(|v| format!("<td>{v}</td>")).collect()
}

/// The p5/p50/p95 of an instrument's index at each sample instant, across seeds.
fn fan(symbol: &str, i: usize, runs: &[(u64, Report)]) -> String {
    let path = &runs[0].1.instruments[i].path;
    if path.is_empty() {
        return String::new();
    }
    let at = |k: usize| {
        Timestamp::parse_rfc3339(&path[k][0])
            .map(|t| t.millis())
            .unwrap_or(0)
    };
    let band = |p: usize| {
        (0..path.len())
            .map(|k| {
                let mut v: Vec<Decimal> = runs
                    .iter()
                    .filter_map(|(_, r)| r.instruments[i].path.get(k))
                    .map(|x| dec(&x[1]))
                    .collect();
                v.sort();
                let idx = (v.len() * p).div_ceil(100).clamp(1, v.len()) - 1;
                (at(k), v[idx].to_f64().unwrap_or(0.0))
            })
            .collect()
    };
    let (start, end) = (at(0), at(path.len().saturating_sub(1)));
    let line = |label, color, p| Line {
        label,
        color,
        points: band(p),
        dashed: false,
    };
    let chart = charts::Chart {
        title: format!("{symbol} index across the seeds"),
        y: format!("index, {}", runs[0].1.instruments[i].settlement),
        lines: vec![
            line("p5", charts::LIQUIDATION, 5),
            line("p50", charts::INDEX, 50),
            line("p95", charts::EQUITY, 95),
        ],
        marks: Vec::new(),
        levels: Vec::new(),
    };
    charts::chart(&chart, (start, end))
}
