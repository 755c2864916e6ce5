//! Recorded market data as a scenario's market (D11, issue 39 item 1): a file in a format
//! risk teams hold, mapped to one instrument, into the steps the admin API's `price` and
//! `funding` would be, and the recorded book the market maker quotes — so a recorded day drives margin, funding, liquidation and insurance
//! through the venue's own engine.
//!
//! - Rows are the file's symbol's only, from the event's `at` to the scenario's `end`; their
//!   times never go back (several rows may share one).
//! - Index and mark: each recorded price times `price_scale`, rounded half-even to the venue's
//!   10 decimals, trailing zeros dropped. A row sets what it records and keeps the rest (an
//!   empty field updates nothing); a step is planned when the pair changes, once an index is
//!   known (the mark is the index until one is recorded).
//! - Funding: a recorded rate is for `funding_interval` (8 h on most venues); the venue funds
//!   each hour, so the hour's rate is the recorded rate × 1 h / interval, rounded half-even
//!   to 10 decimals, set as the running hour's preliminary rate when it changes and again in
//!   each new hour (a settled hour starts the next one without a rate). The hour settles at
//!   the latest rate recorded before it ends.
//! - Numbers are plain decimals (no exponent), each refusal at its line and column.
//!
//! - Books: Tardis.dev's `book_snapshot_N` and `incremental_book_L2` and Binance's
//!   `bookTicker` rows plan the book the market maker quotes (`book`); Tardis's `trades` and Binance's `aggTrades` rows the
//!   trades that fill resting orders by the queue model (`trades`).
//!
//! Formats: Tardis.dev's `derivative_ticker` (here), Binance's public klines and funding
//! files (`binance`), the two book formats (`book`), the two trade formats (`trades`).

use std::path::{Path, PathBuf};

use serde_saphyr::Spanned;

use perpsim_core::decimal::Sign;
use perpsim_core::time::{HOUR_MS, Timestamp};
use perpsim_core::{Decimal, RoundingStrategy};
use perpsim_systems::Command;
use perpsim_systems::command::{SetFundingRate, SetInstrumentPrice};

use super::files;
use super::format::{Recorded, RecordedFormat};
use super::plan::{Ctx, ScenarioError, Step};
use super::table::{Columns, Table};
use super::timeline::Timeline;
use super::timing::parse_duration;
use crate::requests::instruments::{checked_price, checked_rate};

mod binance;
mod book;
mod trades;

/// Tardis.dev `derivative_ticker`: every column it writes, those read required.
const TARDIS_TICKER: &Columns = &[
    ("exchange", false),
    ("symbol", true),
    ("timestamp", true),
    ("local_timestamp", false),
    ("funding_timestamp", false),
    ("funding_rate", true),
    ("predicted_funding_rate", false),
    ("open_interest", false),
    ("last_price", false),
    ("index_price", true),
    ("mark_price", true),
];
const SYMBOL: usize = 1;
const TIMESTAMP: usize = 2;
const FUNDING_RATE: usize = 5;
const INDEX: usize = 9;
const MARK: usize = 10;

/// Decimals the venue keeps of a price and of a set funding rate.
const DECIMALS: u32 = 10;

/// What a recorded file maps to: the instrument, where the event starts, how prices and
/// rates convert.
pub(super) struct Mapping<'a> {
    pub instrument: &'a str,
    pub from: Timestamp,
    pub event: usize,
    pub price_scale: Decimal,
    /// Hours the recorded rates are for.
    pub funding_hours: Decimal,
    /// The instrument's tick and lot, which a recorded book's levels are put on.
    pub tick: Decimal,
    pub lot: Decimal,
}

impl<'a> Mapping<'a> {
    /// The mapping `recorded` asks for, for the event `event` at `from` on `instrument`.
    pub fn of(
        ctx: &Ctx,
        recorded: &Recorded,
        (instrument, from, event): (&'a str, Timestamp, usize),
    ) -> Result<Self, ScenarioError> {
        let price_scale = match &recorded.price_scale {
            Some(scale) if scale.value.0 <= Decimal::ZERO => {
                return Err(ctx.error(scale.referenced, "price_scale must be above zero"));
            }
            Some(scale) => scale.value.0,
            None => Decimal::ONE,
        };
        let funding_hours = match &recorded.funding_interval {
            Some(text) => parse_duration(&text.value)
                .filter(|ms| *ms > 0 && ms % HOUR_MS == 0)
                .map(|ms| Decimal::from(ms / HOUR_MS))
                .ok_or_else(|| {
                    let expected = "a whole number of hours such as 8h or 1h";
                    ctx.error(
                        text.referenced,
                        format!("funding_interval: expected {expected}"),
                    )
                })?,
            None => Decimal::from(8),
        };
        let spec = ctx
            .specs
            .iter()
            .find(|s| s.symbol == instrument)
            .expect("the event's instrument is the scenario's");
        Ok(Mapping {
            instrument,
            from,
            event,
            price_scale,
            funding_hours,
            tick: spec.tick_size,
            lot: spec.lot_size,
        })
    }
}

/// The tests' file `name` in `dir`, holding `text`, opened.
#[cfg(test)]
fn written(dir: &Path, name: &str, text: &str) -> Opened {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    (path, file)
}

#[cfg(test)]
impl Mapping<'static> {
    /// The tests' mapping: the event at `from` on BTC-USDC-PERP (tick 0.1, lot 0.0001),
    /// prices times `price_scale`, 8-hour rates.
    pub fn for_tests(from: Timestamp, price_scale: Decimal) -> Self {
        Mapping {
            instrument: "BTC-USDC-PERP",
            from,
            event: 0,
            price_scale,
            funding_hours: Decimal::from(8),
            tick: Decimal::new(1, 1),
            lot: Decimal::new(1, 4),
        }
    }
}

/// The steps of the `recorded` event mapped by `mapping`; each file read is added to
/// `inputs` (the manifest hashes them).
pub(super) fn plan(
    ctx: &Ctx,
    recorded: &Recorded,
    mapping: &Mapping,
    (steps, inputs): (&mut Timeline, &mut Vec<PathBuf>),
) -> Result<(), ScenarioError> {
    let mut open = |file: &Spanned<String>| -> Result<Opened, ScenarioError> {
        let path = files::resolve(ctx.file, &file.value)
            .map_err(|m| ctx.error(file.referenced, format!("recorded: {m}")))?;
        let opened = files::open(&path, ctx.limits.max_file_bytes).map_err(|m| {
            ctx.error(
                file.referenced,
                format!("recorded: {}: {m}", path.display()),
            )
        })?;
        inputs.push(path.clone());
        Ok((path, opened))
    };
    match recorded.format {
        RecordedFormat::TardisDerivativeTicker => {
            let extra = [&recorded.index_file, &recorded.funding_file];
            if let Some(file) = extra.into_iter().flatten().next() {
                let message = "a tardis-derivative-ticker file holds index and funding itself";
                return Err(ctx.error(file.referenced, message));
            }
            let (path, file) = open(&recorded.file)?;
            let symbol = recorded.symbol.value.as_str();
            tardis_ticker(ctx, (&path, file), symbol, mapping, steps)
        }
        RecordedFormat::BinanceKlines => {
            let files = binance::Files {
                mark: open(&recorded.file)?,
                index: recorded.index_file.as_ref().map(&mut open).transpose()?,
                funding: recorded.funding_file.as_ref().map(&mut open).transpose()?,
            };
            binance::read(ctx, files, mapping, steps)
        }
        format => {
            let extra = [&recorded.index_file, &recorded.funding_file];
            if let Some(file) = extra.into_iter().flatten().next() {
                let message = "a book or trades file holds only that: index and funding come \
                               from a ticker or klines event of their own";
                return Err(ctx.error(file.referenced, message));
            }
            let opened = open(&recorded.file)?;
            let symbol = recorded.symbol.value.as_str();
            match format {
                RecordedFormat::TardisBookSnapshot => {
                    book::tardis_snapshot(ctx, opened, symbol, mapping, steps)
                }
                RecordedFormat::BinanceBookTicker => {
                    book::binance_ticker(ctx, opened, mapping, steps)
                }
                RecordedFormat::TardisIncrementalBook => {
                    book::tardis_incremental(ctx, opened, symbol, mapping, steps)
                }
                RecordedFormat::TardisTrades => trades::tardis(ctx, opened, symbol, mapping, steps),
                _ => trades::binance(ctx, opened, mapping, steps),
            }
        }
    }
}

/// A file resolved and opened: its path (for messages) and the file.
pub(super) type Opened = (PathBuf, std::fs::File);

/// A Tardis `derivative_ticker` file's rows for `symbol`.
fn tardis_ticker(
    ctx: &Ctx,
    opened: (&Path, std::fs::File),
    symbol: &str,
    mapping: &Mapping,
    steps: &mut Timeline,
) -> Result<(), ScenarioError> {
    let mut table = Table::read(opened, TARDIS_TICKER, ctx.limits)?;
    let mut market = Market::default();
    while table.next_row()? {
        if table.required(SYMBOL)?.0 != symbol {
            continue;
        }
        let at = market.time(&table, micros(&table)?)?;
        if at < mapping.from || at > ctx.end {
            continue;
        }
        let price = |c: usize, name: &str| {
            let recorded = decimal(&table, c, Sign::Unsigned)?;
            recorded
                .map(|v| scaled(&table, mapping, v, name))
                .transpose()
        };
        let pair = (price(INDEX, "index_price")?, price(MARK, "mark_price")?);
        let rate = decimal(&table, FUNDING_RATE, Sign::Signed)?
            .map(|r| hourly(&table, mapping.funding_hours, r, "funding_rate"))
            .transpose()?;
        let planned = [
            market.prices(mapping, pair),
            rate.and_then(|r| market.rate(mapping, at, r)),
        ];
        push(
            ctx,
            &table,
            (mapping, at),
            planned.into_iter().flatten(),
            steps,
        )?;
    }
    match market.seen {
        true => Ok(()),
        false => Err(table.whole(format!("no row of the file is for the symbol {symbol:?}"))),
    }
}

/// The recorded market so far: what its last rows set and what the steps planned.
#[derive(Default)]
struct Market {
    seen: bool,
    last_time: Option<Timestamp>,
    index: Option<Decimal>,
    mark: Option<Decimal>,
    /// The prices and the (rate, hour) last planned.
    planned_prices: Option<(Decimal, Decimal)>,
    planned_rate: Option<(Decimal, i64)>,
}

impl Market {
    /// The row's time, which never goes back.
    fn time(&mut self, table: &Table, at: (Timestamp, usize)) -> Result<Timestamp, ScenarioError> {
        let (at, i) = at;
        if let Some(last) = self.last_time.filter(|last| at < *last) {
            let message =
                format!("timestamp: expected {last} or later (rows in time order), got {at}");
            return Err(table.at(i, message));
        }
        self.seen = true;
        self.last_time = Some(at);
        Ok(at)
    }

    /// The price step recorded (index, mark) plan, if the pair changed: each updates what it
    /// records, the mark is the index until one is recorded.
    fn prices(&mut self, mapping: &Mapping, (index, mark): Pair) -> Option<Command> {
        self.index = index.or(self.index);
        self.mark = mark.or(self.mark);
        let prices = self.index.map(|index| (index, self.mark.unwrap_or(index)));
        if prices == self.planned_prices {
            return None;
        }
        self.planned_prices = prices;
        prices.map(|(index_price, mark_price)| {
            Command::from(SetInstrumentPrice {
                symbol: mapping.instrument.to_owned(),
                index_price,
                mark_price,
            })
        })
    }

    /// The hour's rate step an hourly rate plans at `at`, if it is new to that hour.
    fn rate(&mut self, mapping: &Mapping, at: Timestamp, hourly: Decimal) -> Option<Command> {
        let hour = at.millis().div_euclid(HOUR_MS);
        if self.planned_rate == Some((hourly, hour)) {
            return None;
        }
        self.planned_rate = Some((hourly, hour));
        Some(Command::from(SetFundingRate {
            symbol: mapping.instrument.to_owned(),
            rate: hourly,
        }))
    }
}

/// An (index, mark) a row records, each scaled and checked.
type Pair = (Option<Decimal>, Option<Decimal>);

/// A recorded price times the mapping's scale, rounded half-even to the venue's decimals
/// (trailing zeros dropped), checked as the admin API checks a price; refused at field `i`.
fn scaled(
    table: &Table,
    mapping: &Mapping,
    (v, i): (Decimal, usize),
    name: &str,
) -> Result<Decimal, ScenarioError> {
    let v = (v * mapping.price_scale)
        .round_dp_with_strategy(DECIMALS, RoundingStrategy::MidpointNearestEven)
        .normalize();
    checked_price(name, v)
        .map_err(|e| table.at(i, format!("{} (scaled by price_scale)", e.message)))
}

/// A recorded rate for `hours` as the venue's hourly rate, rounded half-even to 10 decimals,
/// checked as the admin API checks a rate; refused at field `i`.
fn hourly(
    table: &Table,
    hours: Decimal,
    (rate, i): (Decimal, usize),
    name: &str,
) -> Result<Decimal, ScenarioError> {
    let hourly = (rate / hours)
        .round_dp_with_strategy(DECIMALS, RoundingStrategy::MidpointNearestEven)
        .normalize();
    checked_rate(hourly).map_err(|e| table.at(i, format!("{name}: {}", e.message)))
}

/// Appends `commands` at `at` as the mapping's event's steps.
fn push(
    ctx: &Ctx,
    table: &Table,
    (mapping, at): (&Mapping, Timestamp),
    commands: impl IntoIterator<Item = Command>,
    steps: &mut Timeline,
) -> Result<(), ScenarioError> {
    for command in commands {
        super::events::room(ctx, steps).map_err(|m| table.at(0, m))?;
        steps.push(Step {
            at,
            event: mapping.event,
            customer: None,
            command,
        });
    }
    Ok(())
}

/// Appends `commands` at `at` as the mapping's event's steps, their room already counted.
fn push_all(
    mapping: &Mapping,
    at: Timestamp,
    commands: impl IntoIterator<Item = Command>,
    steps: &mut Timeline,
) {
    for command in commands {
        steps.push(Step {
            at,
            event: mapping.event,
            customer: None,
            command,
        });
    }
}

/// Column `c` as a plain decimal, if the row records it.
fn decimal(table: &Table, c: usize, sign: Sign) -> Result<Option<(Decimal, usize)>, ScenarioError> {
    let Some((text, i)) = table.field(c) else {
        return Ok(None);
    };
    let v = perpsim_core::decimal::parse("value", text, sign).map_err(|_| {
        let name = table.name(c);
        let what = match sign {
            Sign::Unsigned => "a decimal in plain notation",
            Sign::Signed => "a decimal in plain notation, with an optional leading '-'",
        };
        table.at(i, format!("{name}: expected {what}"))
    })?;
    Ok(Some((v, i)))
}

/// The row's `timestamp`, µs since the epoch, as the venue's millisecond time.
fn micros(table: &Table) -> Result<(Timestamp, usize), ScenarioError> {
    let (text, i) = table.required(TIMESTAMP)?;
    let micros: i64 = text
        .parse()
        .ok()
        .filter(|_| text.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| {
            table.at(
                i,
                "timestamp: expected microseconds since the epoch, such as 1704067200000000",
            )
        })?;
    Ok((Timestamp::from_millis(micros.div_euclid(1000)), i))
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::replay::files::Limits;

    const HEADER: &str = "exchange,symbol,timestamp,local_timestamp,funding_timestamp,funding_rate,predicted_funding_rate,open_interest,last_price,index_price,mark_price\n";

    /// 2024-01-01T00:00:00Z in µs.
    const T0: i64 = 1_704_067_200_000_000;

    /// A row of `symbol` at `seconds` past T0.
    fn row(symbol: &str, seconds: i64, rate: &str, index: &str, mark: &str) -> String {
        let t = T0 + seconds * 1_000_000;
        format!("binance-futures,{symbol},{t},{t},,{rate},,,,{index},{mark}\n")
    }

    /// The steps (ms past T0, command) the file `name` holding `bytes` plans from +0s, with
    /// `scale` and an 8-hour interval; or the refusal as printed.
    fn planned(name: &str, bytes: &[u8], scale: &str) -> Result<Vec<(i64, String)>, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let limits = Limits::default();
        let start = Timestamp::from_millis(T0 / 1000);
        let ctx = Ctx::bare(&path, &limits, (start, start.plus_millis(2 * HOUR_MS)));
        let mapping = Mapping::for_tests(start, scale.parse().unwrap());
        let opened = std::fs::File::open(&path).unwrap();
        let mut steps = Timeline::default();
        tardis_ticker(&ctx, (&path, opened), "BTCUSDT", &mapping, &mut steps)
            .map_err(|e| e.to_string().replace(&path.display().to_string(), name))?;
        let t0 = start.millis();
        Ok(steps
            .iter()
            .map(|s| (s.at.millis() - t0, format!("{:?}", s.command)))
            .collect())
    }

    fn price(index: &str, mark: &str) -> String {
        format!(
            "{:?}",
            Command::from(SetInstrumentPrice {
                symbol: "BTC-USDC-PERP".into(),
                index_price: index.parse().unwrap(),
                mark_price: mark.parse().unwrap(),
            })
        )
    }

    fn rate(rate: &str) -> String {
        format!(
            "{:?}",
            Command::from(SetFundingRate {
                symbol: "BTC-USDC-PERP".into(),
                rate: rate.parse().unwrap(),
            })
        )
    }

    /// D11 (issue 39 item 1): the symbol's rows only, in time; prices scaled and kept where a
    /// row leaves them empty, a step only when they change; the 8-hour rate pro rata as the
    /// hour's, set again in each new hour; plain or gzip alike.
    #[test]
    fn a_recorded_ticker_sets_prices_and_the_hours_funding() {
        let text = [
            HEADER.to_owned(),
            row("BTCUSDT", 0, "0.0001", "42000.5", "42010"),
            row("ETHUSDT", 1, "0.0003", "2200", "2201"),
            row("BTCUSDT", 1, "", "", ""),
            row("BTCUSDT", 2, "0.0001", "42000.5", "42010"),
            row("BTCUSDT", 2, "0.00012", "", "42020"),
            row("BTCUSDT", 3_600, "0.00012", "41000", ""),
        ]
        .concat();
        let steps = planned("t.csv", text.as_bytes(), "0.5").unwrap();
        let expected = vec![
            (0, price("21000.25", "21005")),
            (0, rate("0.0000125")),
            (2_000, price("21000.25", "21010")),
            (2_000, rate("0.000015")),
            (3_600_000, price("20500", "21010")),
            (3_600_000, rate("0.000015")),
        ];
        assert_eq!(steps, expected);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(text.as_bytes()).unwrap();
        let zipped = planned("t.csv.gz", &gz.finish().unwrap(), "0.5").unwrap();
        assert_eq!(zipped, expected, "gzip reads as plain");
    }

    /// D11 (issue 39 item 2): a recorded file's every error class is refused at its line and
    /// column.
    #[test]
    fn every_bad_recorded_row_is_refused_at_its_line_and_column() {
        let good = row("BTCUSDT", 0, "0.0001", "42000", "42000");
        let cases = [
            (
                format!("{HEADER}{good}{}", row("BTCUSDT", -1, "", "1", "1")),
                "t.csv:3:25: timestamp: expected 2024-01-01T00:00:00.000Z or later",
            ),
            (
                format!("{HEADER}{}", row("BTCUSDT", 0, "1e-4", "1", "1")),
                "t.csv:2:60: funding_rate: expected a decimal in plain notation",
            ),
            (
                format!("{HEADER}{}", row("ETHUSDT", 0, "", "1", "1")),
                "t.csv:1:1: no row of the file is for the symbol \"BTCUSDT\"",
            ),
            (
                format!("{HEADER}binance-futures,BTCUSDT,soon,1,,,,,,1,1\n"),
                "t.csv:2:25: timestamp: expected microseconds since the epoch",
            ),
            (
                format!("{HEADER}{}", row("BTCUSDT", 0, "", "-5", "1")),
                "t.csv:2:64: index_price: expected a decimal in plain notation",
            ),
            (
                format!("{HEADER}{}", row("BTCUSDT", 0, "8.5", "1", "1")),
                "funding_rate: preliminary_rate must be below 1",
            ),
            (HEADER.replace("mark_price", "mark"), "t.csv:1:"),
            (
                format!("{HEADER}{}", good.replace(",42000\n", "\n")),
                "t.csv:2:1: expected 11 fields",
            ),
        ];
        for (text, says) in cases {
            let refused = planned("t.csv", text.as_bytes(), "1").expect_err(&text);
            assert!(
                refused.contains(says),
                "{text:?}: expected {says}, got {refused}"
            );
        }
    }
}
