//! `report.html`: one self-contained page (inline CSS and SVG, no script, no link out) with
//! the report's tables and charts: price per instrument with liquidation and notice marks,
//! equity and leverage ratio per customer.

use std::fmt::Write as _;

use perpsim_core::Decimal;
use perpsim_core::time::Timestamp;
use rust_decimal::prelude::ToPrimitive;

use super::Report;
use super::charts::{self, Line, Marks};
use crate::replay::run::Observed;

/// Customers drawn as charts: the worst by PnL first (every figure is in the tables).
const CHARTED_CUSTOMERS: usize = 12;
/// Refusals listed on the page (all are in report.json).
const LISTED_REFUSALS: usize = 200;

fn f(d: Decimal) -> f64 {
    d.to_f64().unwrap_or(0.0)
}

pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

pub fn page(report: &Report, observed: &Observed) -> String {
    let mut h = String::new();
    let s = &report.scenario;
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{name} — perpsim replay</title><style>{CSS}</style></head><body><h1>{name}</h1><p>seed {seed} · {start} → {end} · {ticks} ticks, {commands} commands · {samples} samples every {every} s</p><p>state hash <code>{hash}</code></p>",
        name = esc(&s.name),
        seed = s.seed,
        start = s.start,
        end = s.end,
        ticks = report.ticks,
        commands = report.commands,
        samples = s.samples,
        every = s.sample_every_ms / 1_000,
        hash = report.state_hash,
    );
    venue(&mut h, report);
    instruments(&mut h, report, observed);
    customers(&mut h, report);
    customer_charts(&mut h, report, observed);
    refusals(&mut h, report);
    h.push_str("</body></html>\n");
    h
}

pub const CSS: &str = "body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;margin:8px 0 24px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}code{font-size:12px}.charts{display:flex;flex-wrap:wrap;gap:8px}";

fn table(h: &mut String, head: &[&str], rows: impl Iterator<Item = Vec<String>>) {
    h.push_str("<table><tr>");
    for c in head {
        let _ = write!(h, "<th>{c}</th>");
    }
    h.push_str("</tr>");
    for row in rows {
        h.push_str("<tr>");
        for c in row {
            let _ = write!(h, "<td>{}</td>", esc(&c));
        }
        h.push_str("</tr>");
    }
    h.push_str("</table>");
}

fn venue(h: &mut String, r: &Report) {
    h.push_str("<h2>Venue</h2>");
    table(
        h,
        &["asset", "fees", "clearing", "insurance"],
        r.venue.iter().map(|v| {
            vec![
                v.asset.clone(),
                v.fees.clone(),
                v.clearing.clone(),
                v.insurance.clone(),
            ]
        }),
    );
    h.push_str("<h3>Market maker</h3>");
    table(
        h,
        &[
            "asset",
            "balance",
            "realised PnL",
            "fees",
            "funding",
            "settlement",
            "equity",
        ],
        r.market_maker.iter().map(|c| {
            vec![
                c.asset.clone(),
                c.balance.clone(),
                c.realised_pnl.clone(),
                c.fees.clone(),
                c.funding.clone(),
                c.settlement.clone(),
                c.equity.clone(),
            ]
        }),
    );
}

fn instruments(h: &mut String, r: &Report, observed: &Observed) {
    h.push_str("<h2>Instruments</h2>");
    table(
        h,
        &[
            "symbol",
            "trades",
            "volume",
            "notional",
            "open interest",
            "index first",
            "last",
            "min",
            "max",
        ],
        r.instruments.iter().map(|i| {
            vec![
                i.symbol.clone(),
                i.trades.to_string(),
                i.volume.clone(),
                i.notional.clone(),
                i.open_interest.clone(),
                i.index_first.clone(),
                i.index_last.clone(),
                i.index_min.clone(),
                i.index_max.clone(),
            ]
        }),
    );
    let span = span(observed);
    h.push_str("<div class=\"charts\">");
    for (m, i) in r.instruments.iter().enumerate() {
        h.push_str(&price_chart(observed, m, &i.symbol, span));
    }
    h.push_str("</div>");
}

/// Market `m`'s chart: its index and mark over the samples, with its forced fills and
/// notices marked.
fn price_chart(observed: &Observed, m: usize, symbol: &str, (start, end): (i64, i64)) -> String {
    let series = |mark: bool| {
        observed
            .samples
            .iter()
            .map(|s| {
                (
                    s.at.millis(),
                    f(if mark {
                        s.prices[m].mark
                    } else {
                        s.prices[m].index
                    }),
                )
            })
            .collect()
    };
    let marks = observed.logs.markets.get(m);
    let points = |marks: &[(Timestamp, Decimal)]| -> Vec<_> {
        marks
            .iter()
            .map(|&(at, price)| (at.millis(), f(price)))
            .collect()
    };
    let forced = marks.map(|t| points(&t.forced)).unwrap_or_default();
    let notices = marks.map(|t| points(&t.notices)).unwrap_or_default();
    charts::chart(
        &format!("{symbol} price"),
        start,
        end,
        &[
            Line {
                label: "index",
                color: charts::INDEX,
                points: series(false),
            },
            Line {
                label: "mark",
                color: charts::MARK,
                points: series(true),
            },
        ],
        &[
            Marks {
                label: "liquidation / ADL fill",
                color: charts::LIQUIDATION,
                points: forced,
            },
            Marks {
                label: "depreciation notice",
                color: charts::NOTICE,
                points: notices,
            },
        ],
    )
}

fn span(observed: &Observed) -> (i64, i64) {
    let at = |s: Option<&crate::replay::run::Sample>| s.map(|s| s.at.millis()).unwrap_or(0);
    (at(observed.samples.first()), at(observed.samples.last()))
}

fn customers(h: &mut String, r: &Report) {
    h.push_str("<h2>Customers</h2>");
    let rows = r.customers.iter().flat_map(|c| {
        c.currencies.iter().map(move |m| {
            vec![
                c.name.clone(),
                m.asset.clone(),
                m.deposits.clone(),
                m.balance.clone(),
                m.equity.clone(),
                m.pnl.clone(),
                m.realised_pnl.clone(),
                m.fees.clone(),
                m.funding.clone(),
                m.settlement.clone(),
                m.insurance.clone(),
                m.max_drawdown.clone(),
                m.leverage_ratio.clone(),
                c.liquidations.to_string(),
                c.notices.to_string(),
                c.refused.to_string(),
            ]
        })
    });
    table(
        h,
        &[
            "customer",
            "asset",
            "deposits",
            "balance",
            "equity",
            "PnL",
            "realised",
            "fees",
            "funding",
            "settlement",
            "insurance",
            "max drawdown",
            "leverage ratio",
            "liquidations",
            "notices",
            "refused",
        ],
        rows,
    );
}

fn customer_charts(h: &mut String, r: &Report, observed: &Observed) {
    let order = worst_first(r, observed);
    if order.is_empty() {
        return;
    }
    let shown = order.len().min(CHARTED_CUSTOMERS);
    let _ = write!(
        h,
        "<h2>Equity and leverage ratio</h2><p>{shown} of {} accounts, worst PnL first.</p><div class=\"charts\">",
        order.len()
    );
    let span = span(observed);
    for (_, c, a) in order.into_iter().take(CHARTED_CUSTOMERS) {
        account_charts(h, observed, (&r.customers[c].name, c, a), span);
    }
    h.push_str("</div>");
}

/// Every (customer, currency) account the run observed, as (PnL, customer, asset) indexes,
/// worst PnL first.
fn worst_first(r: &Report, observed: &Observed) -> Vec<(Decimal, usize, usize)> {
    let mut order: Vec<(Decimal, usize, usize)> = Vec::new();
    for (c, report) in r.customers.iter().enumerate() {
        for m in &report.currencies {
            let pnl: Decimal = m.pnl.parse().unwrap_or_default();
            if let Some(a) = observed.assets.iter().position(|x| x.as_str() == m.asset) {
                order.push((pnl, c, a));
            }
        }
    }
    order.sort();
    order
}

/// One account's equity chart and its leverage-ratio chart with its margin calls and
/// liquidations marked.
fn account_charts(
    h: &mut String,
    observed: &Observed,
    (name, c, a): (&str, usize, usize),
    (start, end): (i64, i64),
) {
    let asset = observed.assets[a];
    let figures = || {
        observed
            .samples
            .iter()
            .filter_map(|s| Some((s.at.millis(), s.figures(c, a)?)))
    };
    let equity = figures().map(|(t, x)| (t, f(x.equity))).collect();
    let ratio = figures()
        .filter(|(_, x)| !x.notional.is_zero())
        .map(|(t, x)| {
            (
                t,
                f(perpsim_core::risk::leverage_ratio(x.equity, x.notional)),
            )
        })
        .collect();
    let margin = |state| {
        observed
            .margin
            .iter()
            .filter(|x| {
                x.customer == observed.customers[c].1 && x.asset == asset && x.state == state
            })
            .map(|x| (x.time.millis(), f(x.leverage_ratio)))
            .collect()
    };
    use perpsim_core::risk::MarginState;
    h.push_str(&charts::chart(
        &format!("{name} equity ({})", asset.as_str()),
        start,
        end,
        &[Line {
            label: "equity",
            color: charts::EQUITY,
            points: equity,
        }],
        &[],
    ));
    h.push_str(&charts::chart(
        &format!("{name} leverage ratio ({})", asset.as_str()),
        start,
        end,
        &[Line {
            label: "leverage ratio",
            color: charts::INDEX,
            points: ratio,
        }],
        &[
            Marks {
                label: "liquidation",
                color: charts::LIQUIDATION,
                points: margin(MarginState::Liquidation),
            },
            Marks {
                label: "margin call",
                color: charts::MARK,
                points: margin(MarginState::MarginCall),
            },
        ],
    ));
}

fn refusals(h: &mut String, r: &Report) {
    if r.refusals.is_empty() {
        return;
    }
    let _ = write!(
        h,
        "<h2>Refused requests</h2><p>{} refused; the first {LISTED_REFUSALS} are listed, all are in report.json.</p>",
        r.refusals.len()
    );
    let rows = r.refusals.iter().take(LISTED_REFUSALS).map(|x| {
        vec![
            x.at.clone(),
            x.event.map(|e| e.to_string()).unwrap_or_default(),
            x.customer.clone().unwrap_or_default(),
            x.code.clone(),
            x.message.clone(),
        ]
    });
    table(h, &["at", "event", "customer", "code", "message"], rows);
}
