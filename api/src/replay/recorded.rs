//! Recorded market data as a scenario's market (D11, issue 39 item 1): a file in a format
//! risk teams hold, mapped to one instrument, into the steps the admin API's `price` and
//! `funding` would be — so a recorded day drives margin, funding, liquidation and insurance
//! through the venue's own engine.
//!
//! - Rows are the file's symbol's only, from the event's `at` to the scenario's `end`; their
//!   times never go back (several rows may share one).
//! - Index and mark: each recorded price times `price_scale`, rounded half-even to the venue's
//!   10 decimals, trailing zeros dropped. A row sets what it records and keeps the rest (an empty field updates
//!   nothing); a step is planned when the pair changes, once an index is known (the mark is
//!   the index until one is recorded).
//! - Funding: a recorded rate is for `funding_interval` (8 h on most venues); the venue funds
//!   each hour, so the hour's rate is the recorded rate × 1 h / interval, rounded half-even
//!   to 10 decimals, set as the running hour's preliminary rate when it changes and again in
//!   each new hour (a settled hour starts the next one without a rate). The hour settles at
//!   the latest rate recorded before it ends.
//! - Numbers are plain decimals (no exponent), each refusal at its line and column.

use std::path::Path;

use perpsim_core::decimal::Sign;
use perpsim_core::time::{HOUR_MS, Timestamp};
use perpsim_core::{Decimal, RoundingStrategy};
use perpsim_systems::Command;
use perpsim_systems::command::{SetFundingRate, SetInstrumentPrice};

use super::format::{Recorded, RecordedFormat};
use super::plan::{Ctx, ScenarioError, Step};
use super::table::{Columns, Table};
use super::timeline::Timeline;
use super::timing::parse_duration;
use crate::requests::instruments::{checked_price, checked_rate};

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
        Ok(Mapping {
            instrument,
            from,
            event,
            price_scale,
            funding_hours,
        })
    }
}

/// The steps of the recorded file `opened`, in `format`, for the rows of `symbol`.
pub(super) fn read(
    ctx: &Ctx,
    opened: (&Path, std::fs::File),
    (format, symbol): (RecordedFormat, &str),
    mapping: &Mapping,
    steps: &mut Timeline,
) -> Result<(), ScenarioError> {
    match format {
        RecordedFormat::TardisDerivativeTicker => {
            tardis_ticker(ctx, opened, symbol, mapping, steps)
        }
    }
}

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
        let price = |c: usize| decimal(&table, c, Sign::Unsigned);
        let (index, mark) = (price(INDEX)?, price(MARK)?);
        let rate = decimal(&table, FUNDING_RATE, Sign::Signed)?;
        let planned = market.row(&table, mapping, at, (index, mark, rate))?;
        for command in planned.into_iter().flatten() {
            super::events::room(ctx, steps).map_err(|m| table.at(0, m))?;
            steps.push(Step {
                at,
                event: mapping.event,
                customer: None,
                command,
            });
        }
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

    /// The commands a row's recorded (index, mark, funding rate) plan at `at`.
    fn row(
        &mut self,
        table: &Table,
        mapping: &Mapping,
        at: Timestamp,
        (index, mark, rate): Field3,
    ) -> Result<[Option<Command>; 2], ScenarioError> {
        let scaled = |(v, i): (Decimal, usize), name: &str| {
            let v = (v * mapping.price_scale)
                .round_dp_with_strategy(DECIMALS, RoundingStrategy::MidpointNearestEven)
                .normalize();
            checked_price(name, v)
                .map_err(|e| table.at(i, format!("{} (scaled by price_scale)", e.message)))
        };
        if let Some(index) = index {
            self.index = Some(scaled(index, "index_price")?);
        }
        if let Some(mark) = mark {
            self.mark = Some(scaled(mark, "mark_price")?);
        }
        let prices = self.index.map(|index| (index, self.mark.unwrap_or(index)));
        let price = (prices != self.planned_prices)
            .then_some(prices)
            .flatten()
            .map(|(i, m)| {
                self.planned_prices = Some((i, m));
                Command::from(SetInstrumentPrice {
                    symbol: mapping.instrument.to_owned(),
                    index_price: i,
                    mark_price: m,
                })
            });
        let funding = match rate {
            Some((rate, i)) => self.rate(table, mapping, at, (rate, i))?,
            None => None,
        };
        Ok([price, funding])
    }

    /// The hour's rate a recorded `rate` sets, if it is new to the hour.
    fn rate(
        &mut self,
        table: &Table,
        mapping: &Mapping,
        at: Timestamp,
        (rate, i): (Decimal, usize),
    ) -> Result<Option<Command>, ScenarioError> {
        let hourly = (rate / mapping.funding_hours)
            .round_dp_with_strategy(DECIMALS, RoundingStrategy::MidpointNearestEven)
            .normalize();
        let hourly = checked_rate(hourly)
            .map_err(|e| table.at(i, format!("funding_rate: {}", e.message)))?;
        let hour = at.millis().div_euclid(HOUR_MS);
        if self.planned_rate == Some((hourly, hour)) {
            return Ok(None);
        }
        self.planned_rate = Some((hourly, hour));
        Ok(Some(Command::from(SetFundingRate {
            symbol: mapping.instrument.to_owned(),
            rate: hourly,
        })))
    }
}

/// A row's three recorded figures, each with where it is, where the row records it.
type Field3 = (
    Option<(Decimal, usize)>,
    Option<(Decimal, usize)>,
    Option<(Decimal, usize)>,
);

/// Column `c` as a plain decimal, if the row records it.
fn decimal(table: &Table, c: usize, sign: Sign) -> Result<Option<(Decimal, usize)>, ScenarioError> {
    let Some((text, i)) = table.field(c) else {
        return Ok(None);
    };
    let v = perpsim_core::decimal::parse("value", text, sign).map_err(|_| {
        let name = TARDIS_TICKER[c].0;
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
    use std::collections::HashMap;
    use std::io::Write;

    use perpsim_core::instrument::default_instruments;

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
        let ctx = Ctx {
            file: &path,
            limits: &limits,
            start,
            end: start.plus_millis(2 * HOUR_MS),
            specs: default_instruments(),
            names: Vec::new(),
            by_name: HashMap::new(),
            source: None,
        };
        let mapping = Mapping {
            instrument: "BTC-USDC-PERP",
            from: start,
            event: 0,
            price_scale: scale.parse().unwrap(),
            funding_hours: Decimal::from(8),
        };
        let opened = std::fs::File::open(&path).unwrap();
        let mut steps = Timeline::default();
        let format = (RecordedFormat::TardisDerivativeTicker, "BTCUSDT");
        read(&ctx, (&path, opened), format, &mapping, &mut steps)
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
