//! A CSV someone else wrote, read by its header (D11): the header line names the columns,
//! read by name in any order (a column not known, named twice, or required and missing is
//! refused); every row has as many fields as the header. A `.gz` file is read through gzip,
//! its inflated bytes within the same bounds as a plain file's ([`files::Bounded`]).
//!
//! No refusal quotes the file: each names `file:line:column` and what was expected, and a
//! column the header does not know is named by its place and the known name nearest to it.

use std::io::Read;
use std::path::Path;

use super::files::{self, Limits};
use super::plan::ScenarioError;

/// A file's columns: each name, and whether a file must have it.
pub(super) type Columns = [(&'static str, bool)];

/// A file being read, at its latest row.
pub(super) struct Table<'a> {
    file: &'a Path,
    columns: &'static Columns,
    reader: csv::Reader<files::Bounded<Box<dyn Read>>>,
    /// Where each of `columns` is in a row, if the header names it.
    place: Vec<Option<usize>>,
    width: usize,
    record: csv::StringRecord,
    /// The line of the row read last (a quoted field may span lines).
    line: u64,
}

impl<'a> Table<'a> {
    /// The file `opened` (at `path`) with its header read: `columns` are what it may have.
    pub fn read(
        (path, opened): (&'a Path, std::fs::File),
        columns: &'static Columns,
        limits: &Limits,
    ) -> Result<Self, ScenarioError> {
        let inner: Box<dyn Read> = match path.extension().is_some_and(|e| e == "gz") {
            true => Box::new(flate2::read::MultiGzDecoder::new(opened)),
            false => Box::new(opened),
        };
        let reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .from_reader(files::Bounded::new(inner, limits));
        let mut table = Table {
            file: path,
            columns,
            reader,
            place: vec![None; columns.len()],
            width: 0,
            record: csv::StringRecord::new(),
            line: 0,
        };
        if !table.read_record()? {
            return Err(table.error(1, 1, format!("the file is empty; {}", table.expected())));
        }
        table.header()?;
        Ok(table)
    }

    /// What the header must be, for messages.
    fn expected(&self) -> String {
        let named: Vec<String> = self
            .columns
            .iter()
            .map(|(name, required)| match required {
                true => name.to_string(),
                false => format!("[{name}]"),
            })
            .collect();
        format!(
            "expected a header line naming the columns {}",
            named.join(", ")
        )
    }

    fn read_record(&mut self) -> Result<bool, ScenarioError> {
        match self.reader.read_record(&mut self.record) {
            Ok(false) => Ok(false),
            Ok(true) => {
                self.line = self.record.position().map_or(self.line + 1, |p| p.line());
                Ok(true)
            }
            Err(e) => {
                let line = e.position().map_or(self.line + 1, csv::Position::line);
                Err(self.error(line, 1, row_error(&e)))
            }
        }
    }

    /// The header's columns by name.
    fn header(&mut self) -> Result<(), ScenarioError> {
        for i in 0..self.record.len() {
            let name = self.record[i].trim();
            let Some(known) = self.columns.iter().position(|(c, _)| *c == name) else {
                let message = format!("{}; {}", self.unknown(i, name), self.expected());
                return Err(self.at(i, message));
            };
            if self.place[known].replace(i).is_some() {
                return Err(self.at(i, format!("the header names {name} twice")));
            }
        }
        let missing = self
            .columns
            .iter()
            .zip(&self.place)
            .find(|((_, required), found)| *required && found.is_none());
        if let Some(((name, _), _)) = missing {
            let message = format!("the header lacks {name}; {}", self.expected());
            return Err(self.error(self.line, 1, message));
        }
        self.width = self.record.len();
        Ok(())
    }

    /// Column `i` is none of the known: said by its place and the known name nearest to it
    /// (its own text is the file's, never quoted).
    fn unknown(&self, i: usize, name: &str) -> String {
        let known: Vec<&str> = self.columns.iter().map(|(c, _)| *c).collect();
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
            "column {} of the header is not one of {}{hint}",
            i + 1,
            known.join(", ")
        )
    }

    /// The next row, checked to be as wide as the header; `false` at the end.
    pub fn next_row(&mut self) -> Result<bool, ScenarioError> {
        if !self.read_record()? {
            return Ok(false);
        }
        if self.record.len() != self.width {
            let message = format!(
                "expected {} fields, as the header has, got {}",
                self.width,
                self.record.len()
            );
            return Err(self.at(0, message));
        }
        Ok(true)
    }

    /// Known column `c`'s field of the row, trimmed, with its place; `None` where the header
    /// lacks the column or the field is empty.
    pub fn field(&self, c: usize) -> Option<(&str, usize)> {
        let i = self.place[c]?;
        let text = self.record.get(i)?.trim();
        (!text.is_empty()).then_some((text, i))
    }

    /// Known column `c`'s name.
    pub fn name(&self, c: usize) -> &'static str {
        self.columns[c].0
    }

    /// Known column `c`'s field, which must be there: else refused naming it.
    pub fn required(&self, c: usize) -> Result<(&str, usize), ScenarioError> {
        self.field(c).ok_or_else(|| {
            let i = self.place[c].unwrap_or(0);
            self.at(i, format!("{} is empty", self.columns[c].0))
        })
    }

    /// A refusal at field `i` of the row read last.
    pub fn at(&self, i: usize, message: impl Into<String>) -> ScenarioError {
        let column = columns(&self.record).nth(i).unwrap_or(1);
        self.error(self.line, column, message)
    }

    /// A refusal of the file as a whole, at its start.
    pub fn whole(&self, message: impl Into<String>) -> ScenarioError {
        self.error(1, 1, message)
    }

    fn error(&self, line: u64, column: u64, message: impl Into<String>) -> ScenarioError {
        ScenarioError {
            file: self.file.to_path_buf(),
            line,
            column,
            message: message.into(),
        }
    }
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

/// Why a row could not be read, without quoting it.
fn row_error(e: &csv::Error) -> String {
    match e.kind() {
        csv::ErrorKind::Io(io) if io.to_string() == files::LONG_LINE => files::LONG_LINE.into(),
        csv::ErrorKind::Io(io) => format!("cannot read the file: {io}"),
        csv::ErrorKind::Utf8 { .. } => "not UTF-8 text".into(),
        _ => "not a CSV row".into(),
    }
}
