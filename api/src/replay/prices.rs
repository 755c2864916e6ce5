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

use super::files;
use super::plan::{Ctx, ScenarioError, Step, price_row};
use super::timeline::Timeline;
use super::timing::{EXPECTED_AT, parse_at};

/// The columns a price file may have, and whether each is required.
const COLUMNS: [(&str, bool); 3] = [("time", true), ("index_price", true), ("mark_price", false)];

/// What a header must be, for messages.
const EXPECTED_HEADER: &str = "a header line naming the columns time, index_price[, mark_price]";

/// What a price in a CSV must be (as the admin API's price body takes it).
const EXPECTED_PRICE: &str =
    "a positive decimal in plain notation below 1000000000000 with at most 10 decimals";

/// Where a refusal points: the file, the line and the column (1-based).
pub(super) struct At<'a> {
    pub file: &'a Path,
    pub line: u64,
    pub column: u64,
}

impl At<'_> {
    fn error(&self, message: impl Into<String>) -> ScenarioError {
        ScenarioError {
            file: self.file.to_path_buf(),
            line: self.line,
            column: self.column,
            message: message.into(),
        }
    }
}

/// Where each known column is in a row (by [`COLUMNS`]' order), and how many fields a row has.
#[derive(Debug, PartialEq)]
struct Header {
    place: [Option<usize>; COLUMNS.len()],
    width: usize,
}

/// The 1-based column each field of `record` starts at (the text as the reader read it:
/// a quoted field is counted without its quotes).
fn columns(record: &csv::StringRecord) -> impl Iterator<Item = u64> + '_ {
    record.iter().scan(1u64, |next, field| {
        // A blank field is pointed at where it starts; any other where its text does.
        let start = match field.trim().is_empty() {
            true => *next,
            false => *next + (field.len() - field.trim_start().len()) as u64,
        };
        *next += field.len() as u64 + 1;
        Some(start)
    })
}

/// The header's columns by name: an unknown, repeated or missing column is refused.
fn header(file: &Path, record: &csv::StringRecord, line: u64) -> Result<Header, ScenarioError> {
    let mut place = [None; COLUMNS.len()];
    for ((i, name), column) in record.iter().enumerate().zip(columns(record)) {
        let at = At { file, line, column };
        let name = name.trim();
        let Some(known) = COLUMNS.iter().position(|(c, _)| *c == name) else {
            return Err(at.error(unknown_column(i, name)));
        };
        if place[known].replace(i).is_some() {
            return Err(at.error(format!("the header names {name} twice")));
        }
    }
    let missing = COLUMNS
        .iter()
        .zip(&place)
        .find(|((_, required), found)| *required && found.is_none());
    if let Some(((name, _), _)) = missing {
        let at = At {
            file,
            line,
            column: 1,
        };
        return Err(at.error(format!(
            "the header lacks {name}; expected {EXPECTED_HEADER}"
        )));
    }
    Ok(Header {
        place,
        width: record.len(),
    })
}

/// Column `i` is none of [`COLUMNS`]: said by its place and the known name nearest to it
/// (its own text is the file's, never quoted).
fn unknown_column(i: usize, name: &str) -> String {
    let known: Vec<&str> = COLUMNS.iter().map(|(c, _)| *c).collect();
    let nearest = known
        .iter()
        .map(|c| (strsim::levenshtein(c, name), *c))
        .min()
        .filter(|(distance, _)| *distance <= 3);
    let hint = match nearest {
        Some((_, c)) => format!(" (did you mean {c}?)"),
        None => String::new(),
    };
    format!(
        "column {} of the header is not one of {}{hint}; expected {EXPECTED_HEADER}",
        i + 1,
        known.join(", ")
    )
}

/// The price steps of the CSV at `path` for `symbol`, each time read against `base` (the
/// event's `at`), appended to `steps` as event `event`'s.
pub(super) fn read(
    ctx: &Ctx,
    (path, file): (&Path, std::fs::File),
    (symbol, base, event): (&str, Timestamp, usize),
    steps: &mut Timeline,
) -> Result<(), ScenarioError> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(files::Bounded::new(file, ctx.limits));
    let mut record = csv::StringRecord::new();
    let mut header_row: Option<Header> = None;
    let mut last: Option<Timestamp> = None;
    // The line of the row read last (a quoted field may span lines).
    let mut line = 0;
    loop {
        let read = reader.read_record(&mut record).map_err(|e| {
            let line = e.position().map_or(line + 1, csv::Position::line);
            At {
                file: path,
                line,
                column: 1,
            }
            .error(row_error(&e))
        });
        if !read? {
            break;
        }
        line = record.position().map_or(line, |p| p.line());
        let Some(header) = &header_row else {
            header_row = Some(header(path, &record, line)?);
            continue;
        };
        let row = Row {
            file: path,
            line,
            record: &record,
            header,
        };
        let (instant, command) = row.read(ctx, (symbol, base), last)?;
        last = Some(instant);
        super::events::room(ctx, steps).map_err(|m| row.at(0).error(m))?;
        steps.push(Step {
            at: instant,
            event,
            customer: None,
            command,
        });
    }
    match header_row {
        Some(_) => Ok(()),
        None => Err(At {
            file: path,
            line: 1,
            column: 1,
        }
        .error(format!("the file is empty; expected {EXPECTED_HEADER}"))),
    }
}

/// One row of the file, after its header.
struct Row<'a> {
    file: &'a Path,
    line: u64,
    record: &'a csv::StringRecord,
    header: &'a Header,
}

impl Row<'_> {
    /// Where field `i` starts.
    fn at(&self, i: usize) -> At<'_> {
        let column = columns(self.record).nth(i).unwrap_or(1);
        At {
            file: self.file,
            line: self.line,
            column,
        }
    }

    /// The field of known column `c` (by [`COLUMNS`]' order), trimmed, with where it is;
    /// `None` where the header lacks the column or the field is empty.
    fn field(&self, c: usize) -> Option<(&str, usize)> {
        let i = self.header.place[c]?;
        let text = self.record.get(i)?.trim();
        (!text.is_empty()).then_some((text, i))
    }

    /// The row's instant (after `last`) and its price command.
    fn read(
        &self,
        ctx: &Ctx,
        (symbol, base): (&str, Timestamp),
        last: Option<Timestamp>,
    ) -> Result<(Timestamp, perpsim_systems::Command), ScenarioError> {
        if self.record.len() != self.header.width {
            return Err(self.at(0).error(format!(
                "expected {} fields, as the header has, got {}",
                self.header.width,
                self.record.len()
            )));
        }
        let required = |c: usize| {
            self.field(c).ok_or_else(|| {
                let i = self.header.place[c].expect("a required column is in the header");
                self.at(i).error(format!("{} is empty", COLUMNS[c].0))
            })
        };
        let (time, t) = required(0)?;
        let instant = parse_at(time, base)
            .map_err(|_| self.at(t).error(format!("time: expected {EXPECTED_AT}")))?;
        if last.is_some_and(|last| instant <= last) {
            let last = last.expect("checked");
            return Err(self.at(t).error(format!(
                "time: expected an instant after the row before's {last}, got {instant}"
            )));
        }
        if instant < ctx.start || instant > ctx.end {
            return Err(self.at(t).error(format!(
                "{instant} is outside the scenario's {}..{}",
                ctx.start, ctx.end
            )));
        }
        let (index, x) = required(1)?;
        let mark = self.field(2);
        // The refusal names its field; only the field is said, never the value.
        let command = price_row(symbol, index, mark.map(|(m, _)| m)).map_err(|m| {
            let (i, name) = match (m.contains("mark_price"), mark) {
                (true, Some((_, i))) => (i, "mark_price"),
                _ => (x, "index_price"),
            };
            self.at(i)
                .error(format!("{name}: expected {EXPECTED_PRICE}"))
        })?;
        Ok((instant, command))
    }
}

/// Why a row could not be read, without quoting it.
fn row_error(e: &csv::Error) -> String {
    match e.kind() {
        csv::ErrorKind::Io(io) if io.to_string() == files::LONG_LINE => files::LONG_LINE.into(),
        csv::ErrorKind::Io(io) => format!("cannot read the file: {io}"),
        csv::ErrorKind::Utf8 { .. } => "not UTF-8 text".into(),
        _ => "not a CSV row".into(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use perpsim_core::instrument::default_instruments;

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
        let ctx = Ctx {
            file: &path,
            limits: &limits,
            start,
            end: start.plus_millis(3_600_000),
            specs: default_instruments(),
            names: Vec::new(),
            by_name: HashMap::new(),
            source: None,
        };
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
