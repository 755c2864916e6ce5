//! `ledger.csv` (every ledger movement, in ledger order) and `trades.csv` (every trade
//! record: one per side of each fill), with customers named as in the scenario: a row at a
//! time, as the run's history streams out of the engine (`streamed`).

use std::collections::BTreeMap;
use std::fmt::{Display, Write};
use std::io;
use std::path::Path;

use perpsim_core::ids::CustomerCode;
use perpsim_core::time::Timestamp;
use perpsim_systems::records::money::Movement;
use perpsim_systems::records::simulation::MARKET_MAKER;
use perpsim_systems::records::trade::TradeRecord;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::MAKER_NAME;
use crate::columns::{funding_rate, settlement_mark, symbol};

/// Names by code as a run starts: the market maker's (the scenario's customers are added as
/// they are created, `streamed`).
pub fn names() -> BTreeMap<CustomerCode, String> {
    BTreeMap::from([(MARKET_MAKER, MAKER_NAME.to_owned())])
}

/// A CSV row being written: each field formatted into one reused buffer and handed to the
/// writer, so a row of a million-row file allocates nothing.
pub struct Row<'a> {
    out: &'a mut csv::Writer<Hashed>,
    buffer: &'a mut String,
    /// The last instant written and its text: a tick's rows share their instants, and
    /// formatting one through the calendar was a seventh of writing the ledger.
    instant: &'a mut (Timestamp, String),
}

impl Row<'_> {
    fn time(&mut self, at: Timestamp) -> csv::Result<()> {
        if self.instant.0 != at {
            *self.instant = (at, at.to_rfc3339());
        }
        self.out.write_field(&self.instant.1)
    }

    /// A code in its hyphenated form, as `Display` writes it, without the formatter.
    fn code(&mut self, id: Uuid) -> csv::Result<()> {
        let mut text = [0; uuid::fmt::Hyphenated::LENGTH];
        self.out
            .write_field(id.hyphenated().encode_lower(&mut text).as_bytes())
    }

    fn text(&mut self, field: &str) -> csv::Result<()> {
        self.out.write_field(field)
    }

    fn show(&mut self, field: impl Display) -> csv::Result<()> {
        self.buffer.clear();
        write!(self.buffer, "{field}").expect("a String takes any text");
        self.out.write_field(&self.buffer)
    }

    /// An absent value is an empty field.
    fn maybe(&mut self, field: Option<impl Display>) -> csv::Result<()> {
        match field {
            Some(field) => self.show(field),
            None => self.text(""),
        }
    }

    fn name(
        &mut self,
        names: &BTreeMap<CustomerCode, String>,
        code: &CustomerCode,
    ) -> csv::Result<()> {
        match names.get(code) {
            Some(name) => self.text(name),
            None => self.code(code.0),
        }
    }
}

/// A file and the SHA-256 of what was written to it: the manifest's hash without reading
/// hundreds of megabytes back.
struct Hashed {
    file: std::fs::File,
    sha: Sha256,
}

impl io::Write for Hashed {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let n = self.file.write(bytes)?;
        self.sha.update(&bytes[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// A CSV file being written a row at a time, hashed as it is written; the writer refuses a
/// row whose field count is not the header's.
pub struct Csv {
    path: std::path::PathBuf,
    out: csv::Writer<Hashed>,
    buffer: String,
    /// The last instant written and its text (see [`Row`]).
    instant: (Timestamp, String),
}

impl Csv {
    /// The file at `path` with its `header` row.
    pub fn create(path: &Path, header: &[&str]) -> Result<Self, String> {
        let file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
        // A megabyte at a time: a few hundred writes (and hash updates) for a ledger of
        // hundreds of megabytes, not one per 8 KiB.
        let mut out = csv::WriterBuilder::new()
            .buffer_capacity(1 << 20)
            .from_writer(Hashed {
                file,
                sha: Sha256::new(),
            });
        out.write_record(header)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Csv {
            path: path.to_owned(),
            out,
            buffer: String::new(),
            instant: (
                Timestamp::from_millis(0),
                Timestamp::from_millis(0).to_rfc3339(),
            ),
        })
    }

    fn fail(&self, e: csv::Error) -> String {
        format!("{}: {e}", self.path.display())
    }

    /// One row, its fields written by `fields`.
    pub fn row<T>(
        &mut self,
        item: &T,
        fields: impl FnOnce(&mut Row<'_>, &T) -> csv::Result<()>,
    ) -> Result<(), String> {
        let mut row = Row {
            out: &mut self.out,
            buffer: &mut self.buffer,
            instant: &mut self.instant,
        };
        let written = fields(&mut row, item).and_then(|()| row.out.write_record(None::<&[u8]>));
        written.map_err(|e| self.fail(e))
    }

    /// Flushes the file; its SHA-256, in hex.
    pub fn finish(self) -> Result<String, String> {
        let path = self.path.display().to_string();
        let hashed = self
            .out
            .into_inner()
            .map_err(|e| format!("{path}: {}", e.error()))?;
        Ok(perpsim_core::ids::hex(&hashed.sha.finalize()))
    }
}

/// `ledger.csv`'s columns.
pub const LEDGER_HEADER: [&str; 18] = [
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

/// A movement's row of `ledger.csv`.
pub fn ledger_row(
    row: &mut Row<'_>,
    m: &Movement,
    names: &BTreeMap<CustomerCode, String>,
) -> csv::Result<()> {
    let trade = m.trade.as_deref();
    row.show(m.seq)?;
    row.code(m.code.0)?;
    row.name(names, &m.customer)?;
    row.code(m.customer.0)?;
    row.text(m.kind.as_str())?;
    row.text(m.status.as_str())?;
    row.text(m.asset.as_str())?;
    row.show(m.amount.normalize())?;
    row.maybe(m.balance_after.map(|b| b.normalize()))?;
    row.time(m.created_at)?;
    row.time(m.updated_at)?;
    row.maybe(symbol(m))?;
    row.maybe(trade.map(|t| t.realised_pnl.normalize()))?;
    row.maybe(trade.map(|t| t.fee.normalize()))?;
    match trade.and_then(|t| t.trade_code) {
        Some(code) => row.code(code.0)?,
        None => row.text("")?,
    }
    row.maybe(trade.and_then(|t| t.reference_id.as_ref()))?;
    row.maybe(settlement_mark(m).map(|d| d.0))?;
    row.maybe(funding_rate(m).map(|d| d.0))
}

/// `trades.csv`'s columns.
pub const TRADES_HEADER: [&str; 16] = [
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

/// A trade record's row of `trades.csv`; `symbols` by market id.
pub fn trade_row(
    row: &mut Row<'_>,
    t: &TradeRecord,
    (names, symbols): (&BTreeMap<CustomerCode, String>, &[String]),
) -> csv::Result<()> {
    row.show(t.seq)?;
    row.code(t.code.0)?;
    row.name(names, &t.customer)?;
    row.code(t.customer.0)?;
    row.text(&symbols[t.market as usize])?;
    row.text(t.side.as_str())?;
    row.text(t.kind.as_str())?;
    row.show(t.price.normalize())?;
    row.show(t.amount.normalize())?;
    row.show(t.fee.normalize())?;
    row.show(t.realised_pnl.normalize())?;
    row.text(t.liquidity.as_str())?;
    row.maybe(t.reference_id.as_ref())?;
    row.code(t.position_code.0)?;
    row.time(t.timestamp)?;
    row.show(t.movement)
}
