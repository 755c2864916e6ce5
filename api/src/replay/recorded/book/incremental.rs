//! Tardis.dev's `incremental_book_L2` (issue 39 item 1): the book rebuilt from its updates,
//! and its best 50 levels a side planned after each instant's updates, as a
//! `book_snapshot_N` row would be (`super`: onto the tick and lot, a crossed book passed
//! over, a step only when the book changes).
//!
//! - Rows are `exchange, symbol, timestamp, local_timestamp, is_snapshot, side, price,
//!   amount`: `side` `bid` or `ask`, `amount` the level's new total (0 removes it).
//! - An `is_snapshot` row after updates starts a new book (the old one dropped); updates
//!   before the first snapshot are passed over, as Tardis's documentation says to.
//! - The updates of one `timestamp` are one change: the book is planned once they are all
//!   applied. The rebuilt book holds at most [`MAX_BOOK_LEVELS_HELD`] levels a side.

use std::collections::BTreeMap;

use perpsim_core::Decimal;
use perpsim_core::decimal::Sign;
use perpsim_core::time::Timestamp;
use perpsim_systems::command::MAX_BOOK_LEVELS as MAX_LEVELS;

use super::{Books, plan};
use crate::replay::plan::{Ctx, ScenarioError};
use crate::replay::recorded::{Mapping, Opened, decimal, micros};
use crate::replay::table::{Columns, Table};
use crate::replay::timeline::Timeline;

/// Levels a side of the rebuilt book may hold: a deeper book is refused.
pub const MAX_BOOK_LEVELS_HELD: usize = 100_000;

/// Tardis.dev `incremental_book_L2`; those read required.
const COLUMNS: &Columns = &[
    ("exchange", false),
    ("symbol", true),
    ("timestamp", true),
    ("local_timestamp", false),
    ("is_snapshot", true),
    ("side", true),
    ("price", true),
    ("amount", true),
];
const SYMBOL: usize = 1;
const IS_SNAPSHOT: usize = 4;
const SIDE: usize = 5;
const PRICE: usize = 6;
const AMOUNT: usize = 7;

/// The book as rebuilt so far: levels by recorded price per side (bids, asks), whether the
/// last row was a snapshot's, whether a snapshot was seen, and the instant of the updates
/// not planned yet.
#[derive(Default)]
struct Rebuilt {
    sides: [BTreeMap<Decimal, Decimal>; 2],
    in_snapshot: bool,
    started: bool,
    pending: Option<Timestamp>,
}

/// A Tardis `incremental_book_L2` file's rows for `symbol`.
pub(in crate::replay::recorded) fn tardis_incremental(
    ctx: &Ctx,
    opened: Opened,
    symbol: &str,
    mapping: &Mapping,
    steps: &mut Timeline,
) -> Result<(), ScenarioError> {
    let mut table = Table::read((&opened.0, opened.1), COLUMNS, ctx.limits)?;
    let mut books = Books::default();
    let mut book = Rebuilt::default();
    while table.next_row()? {
        if table.required(SYMBOL)?.0 != symbol {
            continue;
        }
        let at = books.market.time(&table, micros(&table)?)?;
        if let Some(before) = book.pending.filter(|before| *before != at) {
            flush(
                ctx,
                &table,
                (mapping, before),
                (&mut book, &mut books),
                steps,
            )?;
        }
        update(&table, &mut book)?;
        book.pending = book.started.then_some(at);
    }
    if let Some(before) = book.pending {
        flush(
            ctx,
            &table,
            (mapping, before),
            (&mut book, &mut books),
            steps,
        )?;
    }
    match books.market.seen {
        true => Ok(()),
        false => Err(table.whole(format!("no row of the file is for the symbol {symbol:?}"))),
    }
}

/// Applies the row to the book: a snapshot after updates starts it anew; an update before
/// any snapshot is passed over.
fn update(table: &Table, book: &mut Rebuilt) -> Result<(), ScenarioError> {
    let (text, i) = table.required(IS_SNAPSHOT)?;
    let snapshot = match text {
        "true" => true,
        "false" => false,
        _ => return Err(table.at(i, "is_snapshot: expected true or false")),
    };
    if snapshot && !book.in_snapshot {
        book.sides.iter_mut().for_each(BTreeMap::clear);
        book.started = true;
    }
    book.in_snapshot = snapshot;
    let (text, i) = table.required(SIDE)?;
    let side = match text {
        "bid" => 0,
        "ask" => 1,
        _ => return Err(table.at(i, "side: expected bid or ask")),
    };
    table.required(PRICE)?;
    table.required(AMOUNT)?;
    let number = |c| decimal(table, c, Sign::Unsigned).map(|v| v.expect("a field there"));
    let ((price, _), (amount, i)) = (number(PRICE)?, number(AMOUNT)?);
    if !book.started {
        return Ok(());
    }
    let levels = &mut book.sides[side];
    if amount.is_zero() {
        levels.remove(&price);
    } else if levels.insert(price, amount).is_none() && levels.len() > MAX_BOOK_LEVELS_HELD {
        let message =
            format!("the rebuilt book holds more than {MAX_BOOK_LEVELS_HELD} levels a side");
        return Err(table.at(i, message));
    }
    Ok(())
}

/// Plans the book's best levels at `at` (the instant its last updates were at).
fn flush(
    ctx: &Ctx,
    table: &Table,
    (mapping, at): (&Mapping, Timestamp),
    (book, books): (&mut Rebuilt, &mut Books),
    steps: &mut Timeline,
) -> Result<(), ScenarioError> {
    book.pending = None;
    if at < mapping.from || at > ctx.end {
        return Ok(());
    }
    let scaled = |(&p, &a): (&Decimal, &Decimal)| (p * mapping.price_scale, a);
    let [bids, asks] = &book.sides;
    books.recorded[0].clear();
    books.recorded[0].extend(bids.iter().rev().take(MAX_LEVELS).map(scaled));
    books.recorded[1].clear();
    books.recorded[1].extend(asks.iter().take(MAX_LEVELS).map(scaled));
    plan(ctx, table, (mapping, at), books, steps)
}

#[cfg(test)]
mod tests {

    use super::*;

    /// 2024-01-01T00:00:00Z in ms.
    const T0: i64 = 1_704_067_200_000;
    const HEADER: &str =
        "exchange,symbol,timestamp,local_timestamp,is_snapshot,side,price,amount\n";

    fn row(ms: i64, snapshot: bool, side: &str, price: &str, amount: &str) -> String {
        let t = (T0 + ms) * 1000;
        format!("binance-futures,BTCUSDT,{t},{t},{snapshot},{side},{price},{amount}\n")
    }

    fn planned(text: &str) -> Result<Vec<(i64, String, String)>, String> {
        super::super::planned_books(text, "1", |ctx, file, mapping, steps| {
            tardis_incremental(ctx, file, "BTCUSDT", mapping, steps)
        })
    }

    /// D11 (issue 39 item 1): updates before the first snapshot passed over; a snapshot's
    /// rows one book; each instant's updates applied together (0 removing a level) and the
    /// book planned after them; a new snapshot starts the book anew.
    #[test]
    fn an_incremental_book_is_rebuilt_and_planned_after_each_instants_updates() {
        let text = [
            HEADER.to_owned(),
            row(0, false, "bid", "41000", "9"),
            row(1, true, "bid", "42000", "1"),
            row(1, true, "bid", "41999.5", "2"),
            row(1, true, "ask", "42000.5", "3"),
            row(5, false, "bid", "42000", "0"),
            row(5, false, "bid", "42000.2", "0.5"),
            row(5, false, "ask", "42000.5", "0"),
            row(5, false, "ask", "42001", "1"),
            row(7, false, "bid", "42000.2", "0.5"),
            row(9, true, "ask", "42100", "4"),
        ]
        .concat();
        let expected = vec![
            (1, "42000×1 41999.5×2".into(), "42000.5×3".into()),
            (5, "42000.2×0.5 41999.5×2".into(), "42001×1".into()),
            (9, String::new(), "42100×4".into()),
        ];
        assert_eq!(planned(&text).unwrap(), expected);
    }

    /// D11 (issue 39 item 2): an incremental file's errors are refused at their line and
    /// column.
    #[test]
    fn every_bad_incremental_row_is_refused_at_its_line_and_column() {
        let cases = [
            (row(0, true, "buy", "1", "1"), "side: expected bid or ask"),
            (
                row(0, true, "bid", "1", "1").replace(",true,", ",yes,"),
                "is_snapshot: expected true or false",
            ),
            (
                row(0, true, "bid", "1", "-1"),
                "amount: expected a decimal in plain notation",
            ),
            (
                format!(
                    "{}{}",
                    row(5, true, "bid", "1", "1"),
                    row(4, true, "bid", "1", "1")
                ),
                "b.csv:3:25: timestamp: expected 2024-01-01T00:00:00.005Z or later",
            ),
        ];
        for (rows, says) in cases {
            let text = format!("{HEADER}{rows}");
            let refused = planned(&text).expect_err(&text);
            assert!(
                refused.contains(says),
                "{text:?}: expected {says}, got {refused}"
            );
        }
    }
}
