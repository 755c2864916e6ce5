//! A `prices` CSV (D11): a header line naming its columns — `time` and `index_price`, and
//! `mark_price` if the file sets the mark too — read by name, in any order; then one row per
//! price, as many fields as the header, each `time` an offset from the event's `at` or a
//! timestamp, strictly after the row before. A price is read by the admin API's price body
//! (plain notation only). An empty `mark_price` leaves the mark to the index, as a price event
//! without one does.
//!
//! The file is someone else's: it is read within the bounds ([`files::Bounded`]), and no
//! refusal quotes it. Each names `file:line:column` and what was expected; a column the
//! header does not know is named by its place and the known column it is nearest to.

use std::path::Path;

use perpsim_core::time::Timestamp;

use super::plan::{Ctx, ScenarioError, Step, price_row};
use super::table::{Columns, Table};
use super::timeline::Timeline;
use super::timing::{EXPECTED_AT, parse_at};

/// The columns a price file may have, and whether each is required.
const COLUMNS: &Columns = &[("time", true), ("index_price", true), ("mark_price", false)];
const TIME: usize = 0;
const INDEX: usize = 1;
const MARK: usize = 2;

/// What a price in a CSV must be (as the admin API's price body takes it).
const EXPECTED_PRICE: &str =
    "a positive decimal in plain notation below 1000000000000 with at most 10 decimals";

/// The price steps of the CSV at `path` for `symbol`, each time read against `base` (the
/// event's `at`), appended to `steps` as event `event`'s.
pub(super) fn read(
    ctx: &Ctx,
    opened: (&Path, std::fs::File),
    (symbol, base, event): (&str, Timestamp, usize),
    steps: &mut Timeline,
) -> Result<(), ScenarioError> {
    let mut table = Table::read(opened, COLUMNS, ctx.limits)?;
    let mut last: Option<Timestamp> = None;
    while table.next_row()? {
        let (at, command) = row(ctx, &table, (symbol, base), last)?;
        last = Some(at);
        super::events::room(ctx, steps).map_err(|m| table.at(0, m))?;
        steps.push(Step {
            at,
            event,
            customer: None,
            command,
        });
    }
    Ok(())
}

/// The row's instant (after `last`) and its price command.
fn row(
    ctx: &Ctx,
    table: &Table,
    (symbol, base): (&str, Timestamp),
    last: Option<Timestamp>,
) -> Result<(Timestamp, perpsim_systems::Command), ScenarioError> {
    let (time, t) = table.required(TIME)?;
    let at =
        parse_at(time, base).map_err(|_| table.at(t, format!("time: expected {EXPECTED_AT}")))?;
    if let Some(last) = last.filter(|last| at <= *last) {
        return Err(table.at(
            t,
            format!("time: expected an instant after the row before's {last}, got {at}"),
        ));
    }
    if at < ctx.start || at > ctx.end {
        let span = format!("{}..{}", ctx.start, ctx.end);
        return Err(table.at(t, format!("{at} is outside the scenario's {span}")));
    }
    let (index, x) = table.required(INDEX)?;
    let mark = table.field(MARK);
    // The refusal names its field; only the field is said, never the value.
    let command = price_row(symbol, index, mark.map(|(m, _)| m)).map_err(|m| {
        let (i, name) = match (m.contains("mark_price"), mark) {
            (true, Some((_, i))) => (i, "mark_price"),
            _ => (x, "index_price"),
        };
        table.at(i, format!("{name}: expected {EXPECTED_PRICE}"))
    })?;
    Ok((at, command))
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::replay::files::Limits;

    /// The steps a price file `text` plans for BTC-USDC-PERP at an event at +1m, or its
    /// refusal as printed (the file's name without its directory).
    fn planned(text: impl AsRef<[u8]>) -> Result<Vec<(i64, String)>, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.csv");
        std::fs::write(&path, text).unwrap();
        let limits = Limits::default();
        let start = Timestamp::from_millis(0);
        let ctx = Ctx::bare(&path, &limits, (start, start.plus_millis(3_600_000)));
        let file = std::fs::File::open(&path).unwrap();
        let mut steps = Timeline::default();
        let event = ("BTC-USDC-PERP", start.plus_millis(60_000), 0);
        read(&ctx, (&path, file), event, &mut steps).map_err(|e| {
            let shown = e.to_string();
            shown.replace(&format!("{}", path.display()), "p.csv")
        })?;
        Ok(steps
            .iter()
            .map(|s| (s.at.millis(), format!("{:?}", s.command)))
            .collect())
    }

    /// D11: columns are read by name, in any order, with spaces around them, and an empty
    /// `mark_price` leaves the mark to the index (as a price event without one).
    #[test]
    fn columns_are_read_by_name_in_any_order() {
        let standard = planned("time,index_price,mark_price\n+0s,100,101\n+1m,102,\n").unwrap();
        let swapped = planned(" mark_price , time,index_price\n101,+0s,100\n,+1m,102\n").unwrap();
        assert_eq!(standard, swapped);
        assert_eq!(standard[0].0, 60_000);
        assert_eq!(standard[1].0, 120_000);
        let without = planned("time,index_price\n+1m,102\n").unwrap();
        assert_eq!(without[0].1, standard[1].1, "an empty mark is no mark");
        assert!(standard[0].1.contains("101"), "{}", standard[0].1);
    }

    /// D11 (issue 39 item 2): every class of bad price file is refused at its line and
    /// column, saying what was expected, never quoting the file.
    #[test]
    fn every_bad_price_file_is_refused_at_its_line_and_column() {
        let cases = [
            ("", "p.csv:1:1: the file is empty; expected a header line"),
            (
                "time,index_prce,mark_price\n+1s,1,\n",
                "p.csv:1:6: column 2 of the header is not one of time, index_price, mark_price (did you mean index_price?)",
            ),
            (
                "time,index_price,time\n+1s,1,+2s\n",
                "p.csv:1:18: the header names time twice",
            ),
            (
                "time,mark_price\n+1s,1\n",
                "p.csv:1:1: the header lacks index_price",
            ),
            (
                "+0s,60000\n",
                "p.csv:1:1: column 1 of the header is not one of time",
            ),
            (
                "time,index_price\n+5m,2,700\n",
                "p.csv:2:1: expected 2 fields, as the header has, got 3",
            ),
            (
                "time,index_price,mark_price\n+5m,2\n",
                "p.csv:2:1: expected 3 fields, as the header has, got 2",
            ),
            (
                "time,index_price\n+5m,2\n+4m,3\n",
                "p.csv:3:1: time: expected an instant after the row before's 1970-01-01T00:06:00.000Z, got 1970-01-01T00:05:00.000Z",
            ),
            (
                "time,index_price\n+5m,2\n+5m,3\n",
                "p.csv:3:1: time: expected an instant after the row before's",
            ),
            (
                "time,index_price\nsoon,2\n",
                "p.csv:2:1: time: expected an offset",
            ),
            (
                "time,index_price\n+2h,2\n",
                "p.csv:2:1: 1970-01-01T02:01:00.000Z is outside",
            ),
            (
                "time,index_price\n+1s,1e3\n",
                "p.csv:2:5: index_price: expected a positive decimal in plain notation",
            ),
            (
                "time,index_price\n+1s,\"2,700\"\n",
                "p.csv:2:5: index_price: expected a positive decimal in plain notation",
            ),
            (
                "time,index_price,mark_price\n+1s,2,-1\n",
                "p.csv:2:7: mark_price: expected a positive decimal",
            ),
            (
                "time,index_price\n+1s, \n",
                "p.csv:2:5: index_price is empty",
            ),
        ];
        for (text, says) in cases {
            let refused = planned(text).expect_err(text);
            assert!(
                refused.starts_with(says),
                "{text:?}: expected {says}, got {refused}"
            );
        }
        let bytes = planned(b"time,index_price\n+1s,1\n\xff,2\n").unwrap_err();
        assert_eq!(bytes, "p.csv:3:1: not UTF-8 text");
    }
}
