//! `report.html`: one self-contained page (inline CSS and SVG, no script, no link out) for a
//! risk analyst: what happened, in order (margin calls, liquidations, auto-deleveraging
//! against whom, what insurance paid), then the tables and charts — price per instrument
//! that traded (the mark dashed over the index; liquidation and ADL fills, notices and
//! funding settlements marked apart), the venue's insurance fund, fees and clearing over the
//! run, equity from the account's first funds and the leverage ratio against its profile's
//! thresholds per account. Every axis says what it measures, in what unit.

use std::fmt::Write as _;

use perpsim_core::Decimal;
use perpsim_core::ids::CustomerCode;
use perpsim_core::instrument::Asset;
use perpsim_core::time::Timestamp;
use rust_decimal::prelude::ToPrimitive;

use super::charts::{self, Chart, Level, Line, Marks};
use super::streamed::MarketTally;
use super::{CustomerReport, InstrumentReport, Report};
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
    narrative(&mut h, report, observed);
    venue(&mut h, report);
    venue_charts(&mut h, observed);
    instruments(&mut h, report, observed);
    customers(&mut h, report);
    customer_charts(&mut h, report, observed);
    refusals(&mut h, report);
    h.push_str("</body></html>\n");
    h
}

/// Events the narrative tells at most (report.json holds every figure).
const TOLD: usize = 60;

/// "What happened": each first margin call of an account, each liquidation, each
/// auto-deleveraging fill (who against whom, how much, at what price), in time order; then
/// what insurance paid and to whom, and how many requests were refused. Told from the
/// margin-state changes and the trade and ledger rows the report's figures sum.
fn narrative(h: &mut String, r: &Report, observed: &Observed) {
    let mut told = risk_events(r, observed);
    told.sort_by_key(|(at, _)| *at);
    h.push_str("<h2>What happened</h2><ul class=\"story\">");
    if told.is_empty() {
        h.push_str("<li>No margin call, liquidation or auto-deleveraging.</li>");
    }
    for (at, line) in told.iter().take(TOLD) {
        let _ = write!(h, "<li><b>{at}</b> {}</li>", esc(line));
    }
    if told.len() > TOLD {
        let _ = write!(
            h,
            "<li>… and {} more (report.json).</li>",
            told.len() - TOLD
        );
    }
    let _ = write!(h, "<li>{}</li>", esc(&insurance_line(r)));
    let o = &r.outcomes;
    let _ = write!(
        h,
        "<li>{} of {} events applied; {} refused, {} of the customers' setup (listed below).</li></ul>",
        o.applied, o.events, o.refused, o.setup_refused
    );
}

/// The margin calls (each account's first), liquidations and ADL fills, each with its time.
fn risk_events(r: &Report, observed: &Observed) -> Vec<(Timestamp, String)> {
    use perpsim_core::risk::MarginState;
    let name = |code| {
        let found = observed.customers.iter().find(|(_, c)| *c == code);
        found.map_or_else(|| super::MAKER_NAME.to_owned(), |(n, _)| n.clone())
    };
    let mut called = std::collections::BTreeSet::new();
    let mut told = Vec::new();
    for x in &observed.margin {
        let who = format!("{} ({})", name(x.customer), x.asset.as_str());
        let ratio = x.leverage_ratio.normalize();
        match x.state {
            MarginState::MarginCall if called.insert((x.customer, x.asset)) => told.push((
                x.time,
                format!("{who} went into margin call: leverage ratio {ratio}"),
            )),
            MarginState::Liquidation => told.push((
                x.time,
                format!("{who} was liquidated at leverage ratio {ratio}: its orders cancelled, its positions closed"),
            )),
            _ => {}
        }
    }
    for fill in observed.logs.deleveraged.chunk_by(|a, b| a.fill == b.fill) {
        let symbol = r
            .instruments
            .get(fill[0].market as usize)
            .map_or("?", |i| &i.symbol);
        let sides: Vec<String> = fill
            .iter()
            .map(|d| {
                let verb = match d.side {
                    perpsim_core::order::Side::Buy => "bought",
                    perpsim_core::order::Side::Sell => "sold",
                };
                format!("{} {verb} {}", name(d.customer), d.amount.normalize())
            })
            .collect();
        let price = fill[0].price.normalize();
        let line = format!(
            "auto-deleveraging on {symbol} at {price}: {}",
            sides.join(", ")
        );
        told.push((fill[0].at, line));
    }
    told
}

/// What insurance paid, per asset and to whom (the customers' insurance rows).
fn insurance_line(r: &Report) -> String {
    let mut paid = Vec::new();
    for (asset, total) in r.outcomes.insurance_drawn.iter().filter(|(_, t)| *t != "0") {
        let to: Vec<String> = r
            .customers
            .iter()
            .flat_map(|c| c.currencies.iter().map(move |m| (c, m)))
            .filter(|(_, m)| &m.asset == asset && m.insurance != "0")
            .map(|(c, m)| format!("{} {}", c.name, m.insurance))
            .collect();
        paid.push(format!("{total} {asset} (to {})", to.join(", ")));
    }
    match paid.is_empty() {
        true => "Insurance paid nothing.".into(),
        false => format!(
            "Insurance paid {} to cover balances left below zero.",
            paid.join(" and ")
        ),
    }
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

/// Per settlement asset whose venue accounts moved: the insurance fund over the run, and the fees and
/// clearing accounts (apart: the fund's scale would flatten them).
fn venue_charts(h: &mut String, observed: &Observed) {
    let span = span(observed);
    h.push_str("<div class=\"charts\">");
    for (a, asset) in observed.assets.iter().enumerate() {
        let first = observed.samples.first().and_then(|s| s.venue.get(a));
        if observed.samples.iter().all(|s| s.venue.get(a) == first) {
            continue; // nothing moved in this asset: its tables say so
        }
        let series = |k: usize| -> Vec<(i64, f64)> {
            let samples = observed.samples.iter();
            samples
                .filter_map(|s| Some((s.at.millis(), f(s.venue.get(a)?[k]))))
                .collect()
        };
        let line = |label, color, k| Line {
            label,
            color,
            points: series(k),
            dashed: false,
        };
        let unit = asset.as_str();
        let chart = |title: String, lines| Chart {
            title,
            y: format!("balance, {unit}"),
            lines,
            marks: Vec::new(),
            levels: Vec::new(),
        };
        let fund = chart(
            format!("insurance fund ({unit})"),
            vec![line("insurance", charts::LIQUIDATION, 2)],
        );
        let accounts = vec![
            line("fees", charts::EQUITY, 0),
            line("clearing", charts::INDEX, 1),
        ];
        h.push_str(&charts::chart(&fund, span));
        h.push_str(&charts::chart(
            &chart(format!("fees and clearing ({unit})"), accounts),
            span,
        ));
    }
    h.push_str("</div>");
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
    let traded = r
        .instruments
        .iter()
        .enumerate()
        .filter(|(_, i)| i.trades > 0);
    h.push_str(
        "<p>Instruments that traded; the mark is dashed over the index.</p><div class=\"charts\">",
    );
    for (m, i) in traded {
        h.push_str(&price_chart(observed, (m, i), span));
    }
    h.push_str("</div>");
}

/// Market `m`'s chart: its index and (dashed) mark over the samples, its liquidation and
/// auto-deleveraging fills and its notices marked.
fn price_chart(
    observed: &Observed,
    (m, i): (usize, &InstrumentReport),
    span: (i64, i64),
) -> String {
    let series = |mark: bool| {
        let price = |s: &crate::replay::run::Sample| match mark {
            true => s.prices[m].mark,
            false => s.prices[m].index,
        };
        observed
            .samples
            .iter()
            .map(|s| (s.at.millis(), f(price(s))))
            .collect()
    };
    let line = |label, color, mark: bool| Line {
        label,
        color,
        points: series(mark),
        dashed: mark,
    };
    let chart = Chart {
        title: format!("{} price", i.symbol),
        y: format!("price, {}", i.settlement),
        lines: vec![
            line("index", charts::INDEX, false),
            line("mark (dashed)", charts::MARK, true),
        ],
        marks: market_marks(observed.logs.markets.get(m)),
        levels: Vec::new(),
    };
    charts::chart(&chart, span)
}

/// A market's events as marks at their prices: liquidation fills, ADL fills (triangles),
/// depreciation notices and funding settlements.
fn market_marks(tally: Option<&MarketTally>) -> Vec<Marks<'static>> {
    type Pick = fn(&MarketTally) -> &Vec<(Timestamp, Decimal)>;
    let kinds: [(&str, _, Pick, bool); 4] = [
        (
            "liquidation fill",
            charts::LIQUIDATION,
            |t| &t.liquidation_fills,
            false,
        ),
        (
            "ADL fill",
            charts::DELEVERAGING,
            |t| &t.deleveraging_fills,
            true,
        ),
        ("depreciation notice", charts::NOTICE, |t| &t.notices, false),
        ("funding settled", charts::FUNDING, |t| &t.funding, false),
    ];
    kinds
        .into_iter()
        .map(|(label, color, pick, triangle)| {
            let marks = tally.map(pick).map(Vec::as_slice).unwrap_or_default();
            let points = marks.iter().map(|&(at, p)| (at.millis(), f(p))).collect();
            Marks {
                label,
                color,
                points,
                triangle,
            }
        })
        .collect()
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
        "<h2>Equity and leverage ratio</h2><p>{shown} of {} accounts, worst PnL first. The leverage ratio is equity / notional: higher is safer; the dashed levels are the account's margin-call and liquidation thresholds (its margin profile's maintenance and liquidation fractions).</p><div class=\"charts\">",
        order.len()
    );
    let span = span(observed);
    for (_, c, a) in order.into_iter().take(CHARTED_CUSTOMERS) {
        account_charts(h, (r, observed), (c, a), span);
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

/// One account's equity chart (from its first funds on) and its leverage-ratio chart with
/// its profile's thresholds, its margin calls and liquidations marked, and the
/// auto-deleveraging fills it took part in (either side) on both.
fn account_charts(
    h: &mut String,
    (report, observed): (&Report, &Observed),
    (c, a): (usize, usize),
    span: (i64, i64),
) {
    let (asset, customer) = (observed.assets[a], &report.customers[c]);
    // From the first sample the account holds anything: before its deposit lands it is 0.
    let figures = || {
        observed
            .samples
            .iter()
            .filter_map(|s| Some((s.at.millis(), s.figures(c, a)?)))
            .skip_while(|(_, x)| x.equity.is_zero() && x.notional.is_zero())
    };
    let equity: Vec<(i64, f64)> = figures().map(|(t, x)| (t, f(x.equity))).collect();
    let ratio: Vec<(i64, f64)> = figures()
        .filter(|(_, x)| !x.notional.is_zero())
        .map(|(t, x)| {
            (
                t,
                f(perpsim_core::risk::leverage_ratio(x.equity, x.notional)),
            )
        })
        .collect();
    let code = observed.customers[c].1;
    let line = |label, color, points| Line {
        label,
        color,
        points,
        dashed: false,
    };
    let unit = asset.as_str();
    let chart = Chart {
        title: format!("{} equity ({unit})", customer.name),
        y: format!("equity, {unit}"),
        marks: vec![adl_marks(observed, code, &equity)],
        lines: vec![line("equity", charts::EQUITY, equity)],
        levels: Vec::new(),
    };
    h.push_str(&charts::chart(&chart, span));
    let mut chart = ratio_chart(customer, unit, adl_marks(observed, code, &ratio));
    chart
        .lines
        .push(line("leverage ratio", charts::INDEX, ratio));
    chart.marks.extend(margin_marks(observed, code, asset));
    h.push_str(&charts::chart(&chart, span));
}

/// The ADL fills customer `code` took part in (either side), on `line` where it stood then.
fn adl_marks(observed: &Observed, code: CustomerCode, line: &[(i64, f64)]) -> Marks<'static> {
    let told = observed
        .logs
        .deleveraged
        .iter()
        .filter(|d| d.customer == code);
    let at = |t: i64| Some((t, at_or_before(line, t)?));
    Marks {
        label: "ADL fill",
        color: charts::DELEVERAGING,
        points: told.filter_map(|d| at(d.at.millis())).collect(),
        triangle: true,
    }
}

/// An account's changes into liquidation and into margin call, at the ratio they were at.
fn margin_marks(observed: &Observed, code: CustomerCode, asset: Asset) -> Vec<Marks<'static>> {
    use perpsim_core::risk::MarginState;
    let kinds = [
        ("liquidation", charts::LIQUIDATION, MarginState::Liquidation),
        ("margin call", charts::MARGIN_CALL, MarginState::MarginCall),
    ];
    kinds
        .into_iter()
        .map(|(label, color, state)| {
            let changes = observed.margin.iter();
            let of = changes.filter(|x| x.customer == code && x.asset == asset && x.state == state);
            Marks {
                label,
                color,
                points: of.map(|x| (x.time.millis(), f(x.leverage_ratio))).collect(),
                triangle: false,
            }
        })
        .collect()
}

/// A leverage-ratio chart's frame: its title saying higher is safer, and the thresholds of
/// the customer's margin profile as levels.
fn ratio_chart<'a>(customer: &CustomerReport, unit: &str, adl: Marks<'a>) -> Chart<'a> {
    let profile = perpsim_core::money::margin_profile(customer.leverage);
    let level = |label, color, value: Option<Decimal>| {
        value.map(|v| Level {
            label,
            color,
            value: f(v),
        })
    };
    Chart {
        title: format!("{} leverage ratio ({unit}): higher is safer", customer.name),
        y: "equity / notional".into(),
        lines: Vec::new(),
        marks: vec![adl],
        levels: [
            level(
                "margin call below",
                charts::MARGIN_CALL,
                profile.map(|p| p.maintenance),
            ),
            level(
                "liquidation below",
                charts::LIQUIDATION,
                profile.map(|p| p.liquidation),
            ),
        ]
        .into_iter()
        .flatten()
        .collect(),
    }
}

/// The value of `line` at its last point at or before `t` (its first, before any).
fn at_or_before(line: &[(i64, f64)], t: i64) -> Option<f64> {
    let before = line.iter().take_while(|(at, _)| *at <= t).last();
    before.or(line.first()).map(|p| p.1)
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
