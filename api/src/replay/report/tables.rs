//! `ledger.csv` (every ledger movement, in ledger order) and `trades.csv` (every trade
//! record: one per side of each fill), with customers named as in the scenario.

use std::collections::BTreeMap;
use std::path::Path;

use perpsim_core::ids::CustomerCode;
use perpsim_systems::ReadView;
use perpsim_systems::records::market::MARKET_MAKER;

use super::{MAKER_NAME, text};
use crate::v1::money::{funding_rate, settlement_mark, symbol};

/// Names by code: the scenario's customers and the market maker.
pub fn names(customers: &[(String, CustomerCode)]) -> BTreeMap<CustomerCode, String> {
    let mut names: BTreeMap<_, _> = customers.iter().map(|(n, c)| (*c, n.clone())).collect();
    names.insert(MARKET_MAKER, MAKER_NAME.to_owned());
    names
}

fn name(names: &BTreeMap<CustomerCode, String>, code: &CustomerCode) -> String {
    names.get(code).cloned().unwrap_or_else(|| code.to_string())
}

/// A CSV file of a header and rows of as many fields.
fn write_csv<const N: usize>(
    path: &Path,
    header: [&str; N],
    rows: impl Iterator<Item = [String; N]>,
) -> Result<(), String> {
    let fail = |e: csv::Error| format!("{}: {e}", path.display());
    let mut w = csv::Writer::from_path(path).map_err(fail)?;
    w.write_record(header).map_err(fail)?;
    for row in rows {
        w.write_record(row).map_err(fail)?;
    }
    w.flush().map_err(|e| format!("{}: {e}", path.display()))
}

pub fn write_ledger(
    path: &Path,
    view: &ReadView,
    names: &BTreeMap<CustomerCode, String>,
) -> Result<(), String> {
    let opt = |v: Option<String>| v.unwrap_or_default();
    let header = [
        "seq",
        "code",
        "customer",
        "customer_code",
        "type",
        "status",
        "asset",
        "amount",
        "balance_after",
        "created_at",
        "updated_at",
        "symbol",
        "realised_pnl",
        "fee",
        "trade_code",
        "reference_id",
        "mark_price",
        "funding_rate",
    ];
    let rows = view.movements.values().map(|m| {
        let trade = m.trade.as_deref();
        [
            m.seq.to_string(),
            m.code.to_string(),
            name(names, &m.customer),
            m.customer.to_string(),
            m.kind.as_str().to_owned(),
            m.status.as_str().to_owned(),
            m.asset.as_str().to_owned(),
            text(m.amount),
            opt(m.balance_after.map(text)),
            m.created_at.to_string(),
            m.updated_at.to_string(),
            opt(symbol(m)),
            opt(trade.map(|t| text(t.realised_pnl))),
            opt(trade.map(|t| text(t.fee))),
            opt(trade.and_then(|t| t.trade_code).map(|c| c.to_string())),
            opt(trade
                .and_then(|t| t.reference_id.as_ref())
                .map(|r| r.to_string())),
            opt(settlement_mark(m).map(|d| d.0)),
            opt(funding_rate(m).map(|d| d.0)),
        ]
    });
    write_csv(path, header, rows)
}

pub fn write_trades(
    path: &Path,
    view: &ReadView,
    names: &BTreeMap<CustomerCode, String>,
) -> Result<(), String> {
    let header = [
        "seq",
        "code",
        "customer",
        "customer_code",
        "symbol",
        "side",
        "type",
        "price",
        "amount",
        "fee",
        "realised_pnl",
        "liquidity",
        "reference_id",
        "position_code",
        "timestamp",
        "ledger_seq",
    ];
    let rows = view.trading.trades.iter().map(|t| {
        [
            t.seq.to_string(),
            t.code.to_string(),
            name(names, &t.customer),
            t.customer.to_string(),
            view.trading.symbol(t.market).to_owned(),
            t.side.as_str().to_owned(),
            t.kind.as_str().to_owned(),
            text(t.price),
            text(t.amount),
            text(t.fee),
            text(t.realised_pnl),
            t.liquidity.as_str().to_owned(),
            t.reference_id
                .as_ref()
                .map(|r| r.to_string())
                .unwrap_or_default(),
            t.position_code.to_string(),
            t.timestamp.to_string(),
            t.movement.to_string(),
        ]
    });
    write_csv(path, header, rows)
}
