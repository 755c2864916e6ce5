//! Recorded books (issue 39 item 1): Tardis.dev's `book_snapshot_N` (any N up to 50) and
//! Binance's USDⓈ-M `bookTicker` daily files, each row the book's best levels at its time
//! (and Tardis's `incremental_book_L2`, rebuilt into such rows: `incremental`),
//! planned as `SetRecordedBook` steps: the market maker quotes exactly those levels
//! (`perpsim_systems::simulation::recorded`), so customers meet the recorded liquidity.
//!
//! - Prices times `price_scale`, then onto the instrument's tick away from the other side
//!   (bids down, asks up: the venue never shows a better price than the recording did);
//!   amounts rounded down to the lot, a level left with nothing dropped; levels that meet
//!   on one tick summed; at most 50 a side, best first.
//! - A row whose book comes out crossed (best bid at or above best ask) plans nothing: the
//!   book before stands until an uncrossed row.
//! - A step is planned when the book changes. Times never go back (several rows may share
//!   one): Tardis's `timestamp` in µs, Binance's `transaction_time` in ms (or µs).

use std::sync::LazyLock;

use perpsim_core::Decimal;
use perpsim_core::decimal::Sign;
use perpsim_core::time::Timestamp;
use perpsim_systems::Command;
use perpsim_systems::command::{BookLevel, MAX_BOOK_LEVELS as MAX_LEVELS, SetRecordedBook};

use super::{Mapping, Market, Opened, decimal, micros, push};

mod incremental;
use crate::replay::plan::{Ctx, ScenarioError};
use crate::replay::table::{Columns, Table};
use crate::replay::timeline::Timeline;
pub(super) use incremental::tardis_incremental;

/// Tardis.dev `book_snapshot_N`: `exchange, symbol, timestamp, local_timestamp`, then per
/// level k from 0 `asks[k].price, asks[k].amount, bids[k].price, bids[k].amount`; the first
/// level required, the others up to [`MAX_LEVELS`] optional.
static TARDIS_SNAPSHOT: LazyLock<Vec<(&'static str, bool)>> = LazyLock::new(|| {
    let mut columns = vec![
        ("exchange", false),
        ("symbol", true),
        ("timestamp", true),
        ("local_timestamp", false),
    ];
    for k in 0..MAX_LEVELS {
        for name in [
            "asks[k].price",
            "asks[k].amount",
            "bids[k].price",
            "bids[k].amount",
        ] {
            let name: &'static str = name.replace("[k]", &format!("[{k}]")).leak();
            columns.push((name, k == 0));
        }
    }
    columns
});
const SNAPSHOT_SYMBOL: usize = 1;
/// Column of level k's ask price: `FIRST_LEVEL + 4k`; its amount, the bid's price and
/// amount follow.
const FIRST_LEVEL: usize = 4;

/// Binance `bookTicker`, as data.binance.vision writes it; those read required.
const BINANCE_TICKER: &Columns = &[
    ("update_id", false),
    ("best_bid_price", true),
    ("best_bid_qty", true),
    ("best_ask_price", true),
    ("best_ask_qty", true),
    ("transaction_time", true),
    ("event_time", false),
];
const BEST_BID: usize = 1;
const BEST_ASK: usize = 3;
const TRANSACTION_TIME: usize = 5;

/// The book a file's rows last planned, and what each row reads into.
#[derive(Default)]
pub(super) struct Books {
    market: Market,
    planned: Option<[Vec<BookLevel>; 2]>,
    /// The row's levels as recorded and scaled, per side (reused).
    recorded: [Vec<(Decimal, Decimal)>; 2],
}

/// A Tardis `book_snapshot_N` file's rows for `symbol`.
pub(super) fn tardis_snapshot(
    ctx: &Ctx,
    opened: Opened,
    symbol: &str,
    mapping: &Mapping,
    steps: &mut Timeline,
) -> Result<(), ScenarioError> {
    let mut table = Table::read((&opened.0, opened.1), &TARDIS_SNAPSHOT, ctx.limits)?;
    let mut books = Books::default();
    while table.next_row()? {
        if table.required(SNAPSHOT_SYMBOL)?.0 != symbol {
            continue;
        }
        let at = books.market.time(&table, micros(&table)?)?;
        if at < mapping.from || at > ctx.end {
            continue;
        }
        for (side, offset) in [(0, 2), (1, 0)] {
            books.recorded[side].clear();
            for k in 0..MAX_LEVELS {
                let c = FIRST_LEVEL + 4 * k + offset;
                let Some(level) = level(&table, mapping, (c, c + 1))? else {
                    break;
                };
                books.recorded[side].push(level);
            }
        }
        plan(ctx, &table, (mapping, at), &mut books, steps)?;
    }
    match books.market.seen {
        true => Ok(()),
        false => Err(table.whole(format!("no row of the file is for the symbol {symbol:?}"))),
    }
}

/// A Binance `bookTicker` file's rows (the file is one symbol's).
pub(super) fn binance_ticker(
    ctx: &Ctx,
    opened: Opened,
    mapping: &Mapping,
    steps: &mut Timeline,
) -> Result<(), ScenarioError> {
    let mut table = Table::read((&opened.0, opened.1), BINANCE_TICKER, ctx.limits)?;
    let mut books = Books::default();
    while table.next_row()? {
        let at = super::binance::time(&table, TRANSACTION_TIME, &mut books.market.last_time)?;
        books.market.seen = true;
        if at < mapping.from || at > ctx.end {
            continue;
        }
        for (side, c) in [(0, BEST_BID), (1, BEST_ASK)] {
            books.recorded[side].clear();
            books.recorded[side].extend(level(&table, mapping, (c, c + 1))?);
        }
        plan(ctx, &table, (mapping, at), &mut books, steps)?;
    }
    match books.market.seen {
        true => Ok(()),
        false => Err(table.whole("the file holds no row")),
    }
}

/// A level's price (scaled) and amount from columns `(price, amount)`; `None` where the
/// row records no price there (the side ends), refused where it records one without the
/// other.
fn level(
    table: &Table,
    mapping: &Mapping,
    (price, amount): (usize, usize),
) -> Result<Option<(Decimal, Decimal)>, ScenarioError> {
    let (p, a) = (
        decimal(table, price, Sign::Unsigned)?,
        decimal(table, amount, Sign::Unsigned)?,
    );
    match (p, a) {
        (Some((p, _)), Some((a, _))) => Ok(Some((p * mapping.price_scale, a))),
        (None, None) => Ok(None),
        (Some((_, i)), None) | (None, Some((_, i))) => {
            let (name, other) = match p.is_some() {
                true => (table.name(price), table.name(amount)),
                false => (table.name(amount), table.name(price)),
            };
            Err(table.at(i, format!("{name}: expected {other} beside it")))
        }
    }
}

/// Plans the row's book at `at` if it is uncrossed and not the book planned last.
pub(super) fn plan(
    ctx: &Ctx,
    table: &Table,
    (mapping, at): (&Mapping, Timestamp),
    books: &mut Books,
    steps: &mut Timeline,
) -> Result<(), ScenarioError> {
    let sides = [0, 1].map(|i| on_grid(&books.recorded[i], i == 0, mapping));
    if let (Some(bid), Some(ask)) = (sides[0].first(), sides[1].first())
        && bid.price >= ask.price
    {
        return Ok(()); // crossed: the book before stands
    }
    if books.planned.as_ref() == Some(&sides) {
        return Ok(());
    }
    let [bids, asks] = sides.clone();
    books.planned = Some(sides);
    let command = Command::from(SetRecordedBook {
        symbol: mapping.instrument.to_owned(),
        bids,
        asks,
    });
    push(ctx, table, (mapping, at), [command], steps)
}

/// One side's recorded levels on the instrument's tick and lot: prices rounded away from
/// the other side (`bid`: down), amounts down to the lot, empty levels dropped, levels on
/// one tick summed, at most [`MAX_LEVELS`] (the best), best first.
fn on_grid(recorded: &[(Decimal, Decimal)], bid: bool, mapping: &Mapping) -> Vec<BookLevel> {
    let mut levels: Vec<BookLevel> = Vec::with_capacity(recorded.len());
    for &(price, amount) in recorded {
        let ticks = price / mapping.tick;
        let ticks = match bid {
            true => ticks.floor(),
            false => ticks.ceil(),
        };
        let price = (ticks * mapping.tick).normalize();
        let amount = ((amount / mapping.lot).floor() * mapping.lot).normalize();
        if price > Decimal::ZERO && amount > Decimal::ZERO {
            levels.push(BookLevel { price, amount });
        }
    }
    match bid {
        true => levels.sort_by_key(|l| std::cmp::Reverse(l.price)),
        false => levels.sort_by_key(|l| l.price),
    }
    levels.dedup_by(|next, kept| {
        let same = next.price == kept.price;
        if same {
            kept.amount += next.amount;
        }
        same
    });
    levels.truncate(MAX_LEVELS);
    levels
}

/// The tests' reading: `read` over a file holding `text` for BTC-USDC-PERP (tick 0.1, lot
/// 0.0001) from 2024-01-01T00:00:00Z for two hours, prices times `scale`; the books planned,
/// as (ms past the start, bids, asks), each side "price×amount" best first, or the refusal
/// as printed.
#[cfg(test)]
fn planned_books(
    text: &str,
    scale: &str,
    read: impl FnOnce(&Ctx, Opened, &Mapping, &mut Timeline) -> Result<(), ScenarioError>,
) -> Result<Vec<(i64, String, String)>, String> {
    use perpsim_core::time::HOUR_MS;
    let dir = tempfile::tempdir().unwrap();
    let limits = crate::replay::files::Limits::default();
    let start = Timestamp::from_millis(1_704_067_200_000);
    let scenario = dir.path().join("s.yaml");
    let ctx = Ctx::bare(&scenario, &limits, (start, start.plus_millis(2 * HOUR_MS)));
    let mapping = Mapping::for_tests(start, scale.parse().unwrap());
    let file = super::written(dir.path(), "b.csv", text);
    let mut steps = Timeline::default();
    read(&ctx, file, &mapping, &mut steps).map_err(|e| {
        e.to_string()
            .replace(&dir.path().display().to_string(), ".")
    })?;
    let side = |levels: &[BookLevel]| {
        let level = |l: &BookLevel| format!("{}×{}", l.price, l.amount);
        levels.iter().map(level).collect::<Vec<_>>().join(" ")
    };
    let t0 = start.millis();
    let described = |s: &crate::replay::plan::Step| match &s.command {
        Command::SetRecordedBook(b) => (s.at.millis() - t0, side(&b.bids), side(&b.asks)),
        other => panic!("a book step, not {other:?}"),
    };
    Ok(steps.iter().map(|s| described(&s)).collect())
}

#[cfg(test)]
mod tests {

    use super::*;

    /// 2024-01-01T00:00:00Z in ms.
    const T0: i64 = 1_704_067_200_000;

    const SNAPSHOT_2: &str = "exchange,symbol,timestamp,local_timestamp,asks[0].price,asks[0].amount,bids[0].price,bids[0].amount,asks[1].price,asks[1].amount,bids[1].price,bids[1].amount\n";
    const TICKER: &str = "update_id,best_bid_price,best_bid_qty,best_ask_price,best_ask_qty,transaction_time,event_time\n";

    /// A `book_snapshot_2` row of `symbol` at `seconds` past T0: (ask, amount) and (bid,
    /// amount) per level.
    fn snapshot(symbol: &str, seconds: i64, levels: [(&str, &str, &str, &str); 2]) -> String {
        let t = (T0 + seconds * 1000) * 1000;
        let [a, b] = levels.map(|(ap, aa, bp, ba)| format!("{ap},{aa},{bp},{ba}"));
        format!("binance-futures,{symbol},{t},{t},{a},{b}\n")
    }

    /// The (ms past T0, bids, asks) the file plans for BTC-USDC-PERP (tick 0.1, lot 0.0001)
    /// with `scale`, each side as "price×amount" best first; or the refusal as printed.
    fn planned(
        text: &str,
        tardis: bool,
        scale: &str,
    ) -> Result<Vec<(i64, String, String)>, String> {
        planned_books(text, scale, |ctx, file, mapping, steps| match tardis {
            true => tardis_snapshot(ctx, file, "BTCUSDT", mapping, steps),
            false => binance_ticker(ctx, file, mapping, steps),
        })
    }

    /// D11 (issue 39 item 1): a snapshot's levels, scaled, onto the tick away from the other
    /// side and down to the lot, merged where they meet; the symbol's rows only; a step only
    /// when the book changes; a crossed book plans nothing; a side may end early.
    #[test]
    fn a_tardis_snapshot_plans_the_book_on_the_instruments_tick_and_lot() {
        let text = [
            SNAPSHOT_2.to_owned(),
            snapshot(
                "BTCUSDT",
                0,
                [
                    ("42001.03", "0.51234", "42000.07", "1.5"),
                    ("42001.05", "2", "41999.5", "0.25"),
                ],
            ),
            snapshot(
                "ETHUSDT",
                1,
                [("2201", "1", "2200", "1"), ("2202", "1", "2199", "1")],
            ),
            snapshot(
                "BTCUSDT",
                1,
                [
                    ("42001.03", "0.51234", "42000.07", "1.5"),
                    ("42001.05", "2", "41999.5", "0.25"),
                ],
            ),
            snapshot(
                "BTCUSDT",
                2,
                [("42000", "1", "42000", "1"), ("42001", "1", "41999", "1")],
            ),
            snapshot(
                "BTCUSDT",
                3,
                [("42002", "0.00001", "42000", "3"), ("42003", "1", "", "")],
            ),
        ]
        .concat();
        let steps = planned(&text, true, "1").unwrap();
        let expected = vec![
            (0, "42000×1.5 41999.5×0.25".into(), "42001.1×2.5123".into()),
            (3_000, "42000×3".into(), "42003×1".into()),
        ];
        assert_eq!(steps, expected);
        let halved = planned(&text, true, "0.5").unwrap();
        assert_eq!(
            halved[0].1, "21000×1.5 20999.7×0.25",
            "scaled, then on the tick"
        );
    }

    /// D11 (issue 39 item 1): a Binance bookTicker row is the best bid and ask at its
    /// transaction time.
    #[test]
    fn a_binance_book_ticker_plans_the_best_bid_and_ask() {
        let text = format!(
            "{TICKER}1,42000.1,2.5,42000.2,0.75,{},{}\n2,42000.1,2.5,42000.2,0.75,{},{}\n3,42000,1,42000.3,1,{},{}\n",
            T0,
            T0,
            T0 + 500,
            T0 + 500,
            T0 + 900,
            T0 + 901,
        );
        let steps = planned(&text, false, "1").unwrap();
        let expected = vec![
            (0, "42000.1×2.5".into(), "42000.2×0.75".into()),
            (900, "42000×1".into(), "42000.3×1".into()),
        ];
        assert_eq!(steps, expected);
    }

    /// D11 (issue 39 item 2): a book file's errors are refused at their line and column.
    #[test]
    fn every_bad_book_row_is_refused_at_its_line_and_column() {
        let good = snapshot("BTCUSDT", 5, [("2", "1", "1", "1"), ("3", "1", "0.5", "1")]);
        let cases = [
            (
                format!(
                    "{SNAPSHOT_2}{good}{}",
                    snapshot("BTCUSDT", 4, [("2", "1", "1", "1"), ("3", "1", "0.5", "1")])
                ),
                false,
                "b.csv:3:25: timestamp: expected 2024-01-01T00:00:05.000Z or later",
            ),
            (
                format!("{SNAPSHOT_2}{}", good.replace(",3,1,", ",3,,")),
                false,
                "asks[1].price: expected asks[1].amount beside it",
            ),
            (
                format!("{SNAPSHOT_2}{}", good.replace(",3,1,", ",3,1e2,")),
                false,
                "asks[1].amount: expected a decimal in plain notation",
            ),
            (
                SNAPSHOT_2.replace("bids[0].amount", "bids[0].amt"),
                false,
                "(did you mean bids[0].amount?)",
            ),
            (
                format!("{TICKER}1,1,1,2,1,soon,1\n"),
                true,
                "transaction_time: expected ms (or µs) since the epoch",
            ),
            (TICKER.to_owned(), true, "b.csv:1:1: the file holds no row"),
        ];
        for (text, binance, says) in cases {
            let refused = planned(&text, !binance, "1").expect_err(&text);
            assert!(
                refused.contains(says),
                "{text:?}: expected {says}, got {refused}"
            );
        }
    }
}
