//! Binance's public USDⓈ-M files (data.binance.vision) as a recorded market: a
//! `markPriceKlines` file (the mark), an `indexPriceKlines` one (the index) and a monthly
//! `fundingRate` one, each with the header line Binance writes.
//!
//! - A kline's `close` is the price at its `close_time` + 1 ms: the next minute's open, the
//!   first instant the close is known. Times are ms since the epoch, or µs where a file
//!   writes µs (a value of 10¹⁴ or more); they never go back within a file.
//! - A `fundingRate` row is the rate settled at `calc_time` for the `funding_interval_hours`
//!   before it: each of those hours is set the rate / the interval's hours, at the hour's
//!   start (a settled hour starts the next one without a rate), so the venue's hours settle
//!   what Binance's interval did, pro rata.
//! - The files are merged by time; at one instant the index, then the mark, then the rate.
//!   Without an index file the mark stands for the index.

use perpsim_core::Decimal;
use perpsim_core::decimal::Sign;
use perpsim_core::time::{HOUR_MS, Timestamp};

use super::{Mapping, Market, Opened, decimal, hourly, push_all, scaled};
use crate::replay::plan::{Ctx, ScenarioError};
use crate::replay::table::{Columns, Table};
use crate::replay::timeline::Timeline;

/// A kline file's columns, as Binance names them; those read required.
const KLINES: &Columns = &[
    ("open_time", false),
    ("open", false),
    ("high", false),
    ("low", false),
    ("close", true),
    ("volume", false),
    ("close_time", true),
    ("quote_volume", false),
    ("count", false),
    ("taker_buy_volume", false),
    ("taker_buy_quote_volume", false),
    ("ignore", false),
];
const CLOSE: usize = 4;
const CLOSE_TIME: usize = 6;

/// A funding file's columns.
const FUNDING: &Columns = &[
    ("calc_time", true),
    ("funding_interval_hours", true),
    ("last_funding_rate", true),
];

/// The longest funding interval a row may name.
const MAX_INTERVAL_HOURS: i64 = 24;

/// A time at or above this is µs since the epoch, below it ms.
const MICROS_FROM: i64 = 100_000_000_000_000;

/// The files of a `binance-klines` event.
pub(in crate::replay) struct Files {
    pub mark: Opened,
    pub index: Option<Opened>,
    pub funding: Option<Opened>,
}

/// One recorded update, in the merge's order at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Update {
    Index(Decimal),
    Mark(Decimal),
    Rate(Decimal),
}

/// The steps of `files`, merged by time.
pub(super) fn read(
    ctx: &Ctx,
    files: Files,
    mapping: &Mapping,
    steps: &mut Timeline,
) -> Result<(), ScenarioError> {
    let mut updates: Vec<(Timestamp, Update)> = Vec::new();
    let room = |updates: &Vec<(Timestamp, Update)>| {
        (steps.len() + updates.len()) as u64 <= ctx.limits.max_steps
    };
    let mut bounded = |table: &Table, updates: &mut Vec<(Timestamp, Update)>, u| {
        updates.push(u);
        match room(updates) {
            true => Ok(()),
            false => Err(table.at(
                0,
                "more rows than --max-steps, events and recorded rows together",
            )),
        }
    };
    // Without an index file, the mark stands for the index.
    let mark_only = files.index.is_none();
    klines(
        ctx,
        files.mark,
        mapping,
        Update::Mark,
        &mut updates,
        &mut bounded,
    )?;
    if let Some(index) = files.index {
        klines(
            ctx,
            index,
            mapping,
            Update::Index,
            &mut updates,
            &mut bounded,
        )?;
    }
    if let Some(funding) = files.funding {
        rates(ctx, funding, mapping, &mut updates, &mut bounded)?;
    }
    updates.sort_unstable_by_key(|&(at, u)| (at, u));
    let mut market = Market::default();
    for instant in updates.chunk_by(|a, b| a.0 == b.0) {
        let at = instant[0].0;
        let mut pair = (None, None);
        let mut rate = None;
        for (_, u) in instant {
            match *u {
                Update::Index(v) => pair.0 = Some(v),
                Update::Mark(v) => {
                    pair.1 = Some(v);
                    pair.0 = pair.0.or(mark_only.then_some(v));
                }
                Update::Rate(r) => rate = Some(r),
            }
        }
        let planned = [
            market.prices(mapping, pair),
            rate.and_then(|r| market.rate(mapping, at, r)),
        ];
        push_all(mapping, at, planned.into_iter().flatten(), steps);
    }
    Ok(())
}

type Bound<'b> = dyn FnMut(&Table, &mut Vec<(Timestamp, Update)>, (Timestamp, Update)) -> Result<(), ScenarioError>
    + 'b;

/// A kline file's closes within the mapping's span, each as `update` of its price.
fn klines(
    ctx: &Ctx,
    (path, file): Opened,
    mapping: &Mapping,
    update: fn(Decimal) -> Update,
    updates: &mut Vec<(Timestamp, Update)>,
    bounded: &mut Bound,
) -> Result<(), ScenarioError> {
    let mut table = Table::read((&path, file), KLINES, ctx.limits)?;
    let mut last = None;
    while table.next_row()? {
        let at = time(&table, CLOSE_TIME, &mut last)?.plus_millis(1);
        if at < mapping.from || at > ctx.end {
            continue;
        }
        let close =
            decimal(&table, CLOSE, Sign::Unsigned)?.ok_or_else(|| table.at(0, "close is empty"))?;
        let price = scaled(&table, mapping, close, "close")?;
        bounded(&table, updates, (at, update(price)))?;
    }
    Ok(())
}

/// A funding file's rates, each set for every hour of its interval within the span.
fn rates(
    ctx: &Ctx,
    (path, file): Opened,
    mapping: &Mapping,
    updates: &mut Vec<(Timestamp, Update)>,
    bounded: &mut Bound,
) -> Result<(), ScenarioError> {
    let mut table = Table::read((&path, file), FUNDING, ctx.limits)?;
    let mut last = None;
    while table.next_row()? {
        let settled = time(&table, 0, &mut last)?;
        let (text, i) = table.required(1)?;
        let hours = text
            .parse::<i64>()
            .ok()
            .filter(|h| (1..=MAX_INTERVAL_HOURS).contains(h))
            .ok_or_else(|| {
                table.at(
                    i,
                    format!("funding_interval_hours: expected 1 to {MAX_INTERVAL_HOURS}"),
                )
            })?;
        let rate = decimal(&table, 2, Sign::Signed)?
            .ok_or_else(|| table.at(0, "last_funding_rate is empty"))?;
        let per_hour = hourly(&table, Decimal::from(hours), rate, "last_funding_rate")?;
        let settled_hour = settled.millis().div_euclid(HOUR_MS);
        for h in (settled_hour - hours)..settled_hour {
            let at = Timestamp::from_millis(h * HOUR_MS);
            if at >= mapping.from && at <= ctx.end {
                bounded(&table, updates, (at, Update::Rate(per_hour)))?;
            }
        }
    }
    Ok(())
}

/// Column `c`'s time (ms, or µs from [`MICROS_FROM`]), never before the row before's.
pub(super) fn time(
    table: &Table,
    c: usize,
    last: &mut Option<Timestamp>,
) -> Result<Timestamp, ScenarioError> {
    let (text, i) = table.required(c)?;
    let name = table.name(c);
    let value = text
        .parse::<i64>()
        .ok()
        .filter(|v| *v >= 0 && text.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| {
            table.at(
                i,
                format!("{name}: expected ms (or µs) since the epoch, such as 1704067259999"),
            )
        })?;
    let at = Timestamp::from_millis(match value >= MICROS_FROM {
        true => value / 1000,
        false => value,
    });
    if let Some(before) = last.filter(|before| at < *before) {
        return Err(table.at(
            i,
            format!("{name}: expected {before} or later (rows in time order), got {at}"),
        ));
    }
    *last = Some(at);
    Ok(at)
}

#[cfg(test)]
mod tests {
    use crate::replay::recorded::written;

    use perpsim_systems::Command;
    use perpsim_systems::command::{SetFundingRate, SetInstrumentPrice};

    use super::*;
    use crate::replay::files::Limits;

    const HEADER: &str = "open_time,open,high,low,close,volume,close_time,quote_volume,count,taker_buy_volume,taker_buy_quote_volume,ignore\n";
    /// 2024-01-01T00:00:00Z in ms.
    const T0: i64 = 1_704_067_200_000;

    fn kline(minute: i64, close: &str) -> String {
        let open = T0 + minute * 60_000;
        format!("{open},1,1,1,{close},0,{},0,0,0,0,0\n", open + 59_999)
    }

    fn planned(
        mark: &str,
        index: Option<&str>,
        funding: Option<&str>,
    ) -> Result<Vec<(i64, String)>, String> {
        let dir = tempfile::tempdir().unwrap();
        let limits = Limits::default();
        let start = Timestamp::from_millis(T0);
        let scenario = dir.path().join("s.yaml");
        let ctx = Ctx::bare(&scenario, &limits, (start, start.plus_millis(2 * HOUR_MS)));
        let mapping = Mapping::for_tests(start, Decimal::ONE);
        let files = Files {
            mark: written(dir.path(), "mark.csv", mark),
            index: index.map(|t| written(dir.path(), "index.csv", t)),
            funding: funding.map(|t| written(dir.path(), "funding.csv", t)),
        };
        let mut steps = Timeline::default();
        read(&ctx, files, &mapping, &mut steps).map_err(|e| {
            let shown = e.to_string();
            shown.replace(&format!("{}/", dir.path().display()), "")
        })?;
        Ok(steps
            .iter()
            .map(|s| (s.at.millis() - T0, format!("{:?}", s.command)))
            .collect())
    }

    fn price(index: &str, mark: &str) -> String {
        let command = Command::from(SetInstrumentPrice {
            symbol: "BTC-USDC-PERP".into(),
            index_price: index.parse().unwrap(),
            mark_price: mark.parse().unwrap(),
        });
        format!("{command:?}")
    }

    fn rate(rate: &str) -> String {
        let command = Command::from(SetFundingRate {
            symbol: "BTC-USDC-PERP".into(),
            rate: rate.parse().unwrap(),
        });
        format!("{command:?}")
    }

    /// D11 (issue 39 item 1): mark and index klines merge by their close times (+1 ms), the
    /// index first at an instant; a fundingRate row's rate is set for each hour of its
    /// interval before its calc_time, pro rata.
    #[test]
    fn binance_klines_and_funding_merge_into_prices_and_hourly_rates() {
        let mark = [HEADER, &kline(0, "42010.5"), &kline(1, "42020")].concat();
        let index = [HEADER, &kline(0, "42000"), &kline(1, "42000")].concat();
        // Settled at 02:00 for the 2 hours before: 00:00 and 01:00 each pay 0.0002 / 2.
        let funding = format!(
            "calc_time,funding_interval_hours,last_funding_rate\n{},2,0.00020000\n",
            T0 + 2 * HOUR_MS
        );
        let steps = planned(&mark, Some(&index), Some(&funding)).unwrap();
        assert_eq!(
            steps,
            [
                (0, rate("0.0001")),
                (60_000, price("42000", "42010.5")),
                (120_000, price("42000", "42020")),
                (HOUR_MS, rate("0.0001")),
            ]
        );
        let alone = planned(&mark, None, None).unwrap();
        assert_eq!(
            alone[0],
            (60_000, price("42010.5", "42010.5")),
            "the mark stands for the index"
        );
    }

    /// Every error class of Binance's files, at its line and column.
    #[test]
    fn bad_binance_rows_are_refused_at_their_line_and_column() {
        let funding_head = "calc_time,funding_interval_hours,last_funding_rate\n";
        let cases = [
            (
                format!("{HEADER}{}{}", kline(1, "1"), kline(0, "1")),
                None,
                "mark.csv:3:",
                "close_time: expected 2024-01-01T00:01:59.999Z or later",
            ),
            (
                format!("{HEADER}{}", kline(0, "1e3")),
                None,
                "mark.csv:2:",
                "close: expected a decimal in plain notation",
            ),
            (
                "1704067200000,1,1,1,1,0,1704067259999,0,0,0,0,0\n".to_owned(),
                None,
                "mark.csv:1:1:",
                "column 1 of the header is not one of open_time",
            ),
            (
                format!("{HEADER}{}", kline(0, "1")),
                Some(format!("{funding_head}{T0},0,0.0001\n")),
                "funding.csv:2:15:",
                "funding_interval_hours: expected 1 to 24",
            ),
            (
                format!("{HEADER}{}", kline(0, "1")),
                Some(format!("{funding_head}soon,8,0.0001\n")),
                "funding.csv:2:1:",
                "calc_time: expected ms (or µs) since the epoch",
            ),
        ];
        for (mark, funding, at, says) in cases {
            let refused = planned(&mark, None, funding.as_deref()).expect_err(&mark);
            assert!(
                refused.starts_with(at) && refused.contains(says),
                "{mark}: expected {at} {says}, got {refused}"
            );
        }
    }
}
