//! The scenario file (D11), as read: YAML or JSON (JSON is YAML's flow style, so one reader
//! takes both and they give the same scenario). Every field that can be wrong keeps where it
//! was written (`Spanned`), so an error names the file, line and column. Event bodies are the
//! API's own request bodies ([`Body`]), read by the same types the service reads them with.
//! The JSON Schema (`openapi/scenario.schema.json`) is generated from these types.
//!
//! The types are serde's with `deny_unknown_fields`, every field that can be wrong `Spanned`
//! (its line and column), an event's body a `Body<T>` (its fields as written, with its span)
//! read later by `T`, the API type that reads that operation's body (`fields`: through the
//! `Value` serde_json reads, except an order, read from the list by the same field parsers in
//! the same order as its derived reader, a test holding the two equal refusal for refusal).

use std::borrow::Cow;
use std::marker::PhantomData;

use perpsim_core::Decimal;
use perpsim_core::decimal::Sign;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer};
use serde_saphyr::Spanned;

/// A scenario: the venue at `start`, its customers, and what happens until `end`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Shown in the report.
    pub name: String,
    /// Seeds the engine: ids, the random walk, the maker; `--seed` or `--seeds` override it.
    pub seed: u64,
    /// RFC 3339, e.g. `2026-01-01T00:00:00Z`.
    #[schemars(with = "String")]
    pub start: Spanned<String>,
    /// An offset from `start` (`+90s`, `+2h`, `+1d`, `+1h30m`) or an RFC 3339 timestamp.
    #[schemars(with = "String")]
    pub end: Spanned<String>,
    /// Overrides of the D8 instruments' specs and of their living market, by symbol.
    #[serde(default)]
    #[schemars(with = "Vec<InstrumentOverride>")]
    pub instruments: Vec<Spanned<InstrumentOverride>>,
    /// The price feed, the market maker and the venue's funding.
    #[serde(default)]
    #[schemars(with = "Option<Market>")]
    pub market: Option<Spanned<Market>>,
    /// How often the report samples prices and every customer's equity [default: the
    /// scenario's length / 500, at least 1 s].
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub sample_every: Option<Spanned<String>>,
    #[schemars(with = "Vec<CustomerSpec>")]
    pub customers: Vec<Spanned<CustomerSpec>>,
    /// A seeded latency model: how long the customers' requests take to reach the venue.
    #[serde(default)]
    pub latency: Option<Latency>,
    /// What-if: price moves scaled by a factor each run draws (each Monte-Carlo seed its own).
    #[serde(default)]
    pub shocks: Vec<Shock>,
    /// What-if: every instrument's random-walk volatility times a factor each run draws.
    #[serde(default)]
    pub volatility_scale: Option<Range>,
    /// What-if: price moves resampled in blocks, each run its own draw.
    #[serde(default)]
    pub bootstrap: Vec<Bootstrap>,
    /// In any order: events at one instant run in the order written.
    // Boxed: an event is a kilobyte (a slot per action), and a list of a million grows by
    // copying what it holds.
    #[serde(default)]
    #[schemars(with = "Vec<Event>")]
    pub events: Vec<Spanned<Box<Event>>>,
}

/// One instrument's overrides; every field is optional.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct InstrumentOverride {
    /// One of the D8 symbols.
    #[schemars(with = "String")]
    pub symbol: Spanned<String>,
    pub start_price: Option<Dec>,
    pub tick_size: Option<Dec>,
    pub lot_size: Option<Dec>,
    pub init_margin_req: Option<Dec>,
    pub maint_margin_req: Option<Dec>,
    /// Annualised volatility of the random walk, a fraction (0.6 = 60 %).
    pub volatility: Option<Dec>,
    /// The market maker's levels each side.
    pub levels: Option<u32>,
    pub half_spread_bps: Option<Dec>,
    pub level_step_bps: Option<Dec>,
    /// Amount quoted at each level.
    pub size: Option<Dec>,
    pub max_inventory: Option<Dec>,
}

/// The living market (D1, D10).
#[derive(Deserialize, JsonSchema, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct Market {
    /// `random-walk` or `fixed` [default: random-walk].
    #[schemars(with = "Option<String>")]
    pub price_feed: Option<Spanned<String>>,
    /// [default: true]
    pub market_maker: Option<bool>,
    pub maker_funding: Option<Dec>,
    pub insurance_funding: Option<Dec>,
    /// Between two depreciation evaluations, e.g. `60s` [default: 60s].
    #[schemars(with = "Option<String>")]
    pub notice_interval: Option<Spanned<String>>,
}

/// A customer of the scenario's broker, named for the events.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct CustomerSpec {
    #[schemars(with = "String")]
    pub name: Spanned<String>,
    /// Completed at `start`, per asset: `{USDC: "10000"}`.
    #[serde(default)]
    pub deposits: std::collections::BTreeMap<String, Dec>,
    /// The margin profile: 1 or 2 [default: 1].
    pub leverage: Option<u32>,
    /// The fee profile for every instrument, as `PUT …/fee-profile` takes it.
    pub fees: Option<Body<crate::requests::profiles::FeeProfileRequest>>,
}

/// One event: `at`, what it applies to, and exactly one action, whose body is the request
/// body of the API operation that does the same.
// Every optional field is boxed (not in the doc comment, which is the schema's): an event
// holds one or two of its twelve, each a hundred bytes or more with its two locations, and a
// scenario holds a million events at once while it is read.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct Event {
    /// An offset from `start` (`+90s`) or an RFC 3339 timestamp, within start..end.
    #[schemars(with = "String")]
    pub at: Spanned<String>,
    /// The customer (by name) of an order, cancel, amend, deposit or withdrawal.
    #[schemars(with = "Option<String>")]
    pub customer: Option<Box<Spanned<String>>>,
    /// The instrument of a price, prices, funding or status event.
    #[schemars(with = "Option<String>")]
    pub symbol: Option<Box<Spanned<String>>>,
    /// The order an amend applies to.
    #[schemars(with = "Option<String>")]
    pub reference_id: Option<Box<Spanned<String>>>,
    /// `POST /v1/customers/{code}/orders`.
    pub order: Option<Box<Body<crate::requests::orders::OrderRequest>>>,
    /// The reference_id of the open order to cancel (`DELETE …/orders/{reference_id}`).
    #[schemars(with = "Option<String>")]
    pub cancel: Option<Box<Spanned<String>>>,
    /// `PATCH …/orders/{reference_id}`, with `reference_id` beside it.
    pub amend: Option<Box<Body<crate::requests::orders::AmendRequest>>>,
    /// `PUT /admin/v1/instruments/{symbol}/price`.
    pub price: Option<Box<Body<crate::requests::instruments::PriceRequest>>>,
    /// A CSV file (relative to the scenario): a header line naming its columns, `time` and
    /// `index_price` and optionally `mark_price`, in any order; then rows of as many fields,
    /// each time an offset from this event's `at` or an RFC 3339 timestamp, strictly
    /// increasing (an empty `mark_price` leaves the mark to the index).
    #[schemars(with = "Option<String>")]
    pub prices: Option<Box<Spanned<String>>>,
    /// A recorded market for the instrument: its index, mark and funding rates from a file
    /// in a format risk teams hold.
    pub recorded: Option<Box<Recorded>>,
    /// `PUT /admin/v1/instruments/{symbol}/funding`.
    pub funding: Option<Box<Body<crate::requests::instruments::FundingRequest>>>,
    /// `PUT /admin/v1/instruments/{symbol}/status`.
    pub status: Option<Box<Body<crate::requests::instruments::StatusRequest>>>,
    /// `POST …/deposits`; completes at once.
    pub deposit: Option<Box<Body<crate::requests::money::TransferRequest>>>,
    /// `POST …/withdrawals`; completes at once.
    pub withdrawal: Option<Box<Body<crate::requests::money::TransferRequest>>>,
}

/// An event of the plain shape nearly every event of a large JSON scenario takes (an order or
/// a cancel for a customer, every value a string without an escape), its strings as written in
/// the text: what planning reads of such an event, without an [`Event`] built for it (a box
/// and a string of its own for each of its fields, a sixth of reading a million orders).
#[derive(Debug)]
pub struct Plain<'t> {
    pub at: &'t str,
    pub customer: &'t str,
    pub action: PlainAction<'t>,
}

/// A [`Plain`] event's action.
#[derive(Debug)]
pub enum PlainAction<'t> {
    /// An order's body, by field.
    Order(super::fields::Fields),
    /// The reference of the order to cancel.
    Cancel(&'t str),
}

impl Event {
    /// An event at `at` with no action yet.
    #[cfg(test)]
    pub fn new(at: Spanned<String>) -> Self {
        Event {
            at,
            customer: None,
            symbol: None,
            reference_id: None,
            order: None,
            cancel: None,
            amend: None,
            price: None,
            prices: None,
            recorded: None,
            funding: None,
            status: None,
            deposit: None,
            withdrawal: None,
        }
    }
}

/// Recorded market data for an event's instrument: the rows of `file` for `symbol`, from the
/// event's `at` to the scenario's `end` (rows outside are skipped). Each row's index and mark
/// (times `price_scale`) become the instrument's prices at the row's time; each recorded
/// funding rate, pro rata from `funding_interval` to the venue's hour, becomes the running
/// hour's rate (as `funding` sets it), so the hour settles at the recorded rate.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct Recorded {
    pub format: RecordedFormat,
    /// A file beside the scenario; a name ending `.gz` is read through gzip.
    #[schemars(with = "String")]
    pub file: Spanned<String>,
    /// The symbol as the file writes it (`BTCUSDT`); rows of other symbols are skipped.
    #[schemars(with = "String")]
    pub symbol: Spanned<String>,
    /// What every recorded price is multiplied by, where the venue's instrument differs
    /// (`"0.001"` for a 1000-unit contract) [default: 1].
    #[schemars(with = "Option<Dec>")]
    pub price_scale: Option<Spanned<Dec>>,
    /// The interval the recorded rates are for (`8h` on most venues) [default: 8h].
    #[schemars(with = "Option<String>")]
    pub funding_interval: Option<Spanned<String>>,
    /// binance-klines: an `indexPriceKlines` file beside `file`'s mark-price klines.
    #[schemars(with = "Option<String>")]
    pub index_file: Option<Spanned<String>>,
    /// binance-klines: a `fundingRate` file (each row's rate for its own interval).
    #[schemars(with = "Option<String>")]
    pub funding_file: Option<Spanned<String>>,
}

/// The recorded formats a scenario reads.
#[derive(Deserialize, JsonSchema, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum RecordedFormat {
    /// Tardis.dev's `derivative_ticker` CSV: `exchange, symbol, timestamp, local_timestamp,
    /// funding_timestamp, funding_rate, predicted_funding_rate, open_interest, last_price,
    /// index_price, mark_price`, times in µs since the epoch; an empty field is a value
    /// the row does not update.
    TardisDerivativeTicker,
    /// Binance's public USDⓈ-M files (data.binance.vision), with their header line: `file`
    /// a `markPriceKlines` file, `index_file` an `indexPriceKlines` one, each kline's
    /// `close` at its `close_time` + 1 ms (ms, or µs where a file writes µs), and
    /// `funding_file` a `fundingRate` file (`calc_time, funding_interval_hours,
    /// last_funding_rate`): each rate paid pro rata over the hours of its interval.
    /// `symbol` is not read (the files are per symbol).
    BinanceKlines,
    /// Tardis.dev's `book_snapshot_N` CSV (N up to 50): `exchange, symbol, timestamp,
    /// local_timestamp`, then per level k `asks[k].price, asks[k].amount, bids[k].price,
    /// bids[k].amount`, times in µs; each row the book the market maker quotes from then on.
    TardisBookSnapshot,
    /// Tardis.dev's `incremental_book_L2` CSV: `exchange, symbol, timestamp,
    /// local_timestamp, is_snapshot, side, price, amount` (`side` `bid` or `ask`, `amount`
    /// the level's new total, 0 removing it), times in µs: the book rebuilt, its best 50
    /// levels a side the book the market maker quotes after each instant's updates.
    TardisIncrementalBook,
    /// Binance's public USDⓈ-M `bookTicker` file: `update_id, best_bid_price, best_bid_qty,
    /// best_ask_price, best_ask_qty, transaction_time, event_time` (ms, or µs): the best bid
    /// and ask the market maker quotes. `symbol` is not read (the file is per symbol).
    BinanceBookTicker,
    /// Tardis.dev's `trades` CSV: `exchange, symbol, timestamp, local_timestamp, id, side,
    /// price, amount` (`side` the aggressor's: `buy`, `sell` or `unknown`, passed over),
    /// times in µs: each trade fills the resting orders it reaches by the queue model.
    TardisTrades,
    /// Binance's public USDⓈ-M `aggTrades` file: `agg_trade_id, price, quantity,
    /// first_trade_id, last_trade_id, transact_time, is_buyer_maker` (ms, or µs; `true`: the
    /// seller took). `symbol` is not read (the file is per symbol).
    BinanceAggTrades,
}

/// A shock (D11 what-if): from `from` to `until`, every price the scenario sets for `symbol`
/// (by `price`, `prices` or `recorded`) moves from where the price stood at `from` by its
/// recorded move times a factor drawn from `scale` for the run: `anchor + f × (price −
/// anchor)`, index and mark each from their own anchor, never below 1 % of it.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct Shock {
    #[schemars(with = "String")]
    pub symbol: Spanned<String>,
    /// An offset from `start` or a timestamp: the anchor is the last price set at or before.
    #[schemars(with = "String")]
    pub from: Spanned<String>,
    /// [default: end]
    #[schemars(with = "Option<String>")]
    pub until: Option<Spanned<String>>,
    pub scale: Range,
}

/// A block bootstrap (D11 what-if): from `from` to `until`, the moves of the prices the
/// scenario sets for `symbol` (each price over the one before, index and mark apart) are
/// redrawn for the run as blocks of `block` consecutive moves, each block's start uniform
/// with replacement, and the path rebuilt from the price at `from` at the same instants.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct Bootstrap {
    #[schemars(with = "String")]
    pub symbol: Spanned<String>,
    #[schemars(with = "String")]
    pub from: Spanned<String>,
    /// [default: end]
    #[schemars(with = "Option<String>")]
    pub until: Option<Spanned<String>>,
    /// Moves a block holds [default: 10].
    #[schemars(with = "Option<u32>")]
    pub block: Option<Spanned<u32>>,
}

/// A factor's range: each run draws one, uniform, to 4 decimals (`{min: "0.5", max: "1.5"}`).
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct Range {
    #[schemars(with = "Dec")]
    pub min: Spanned<Dec>,
    #[schemars(with = "Dec")]
    pub max: Spanned<Dec>,
}

/// How long the customers' requests take to reach the venue (D11): each order, cancel,
/// amend, deposit and withdrawal takes effect its drawn delay after its `at` (at most at
/// `end`), the delays drawn from the run's seed, so each Monte-Carlo seed draws its own.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct Latency {
    pub order_entry: LatencyModel,
}

/// A distribution of delays, each a whole number of milliseconds up to a minute.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct LatencyModel {
    /// `constant`, `normal`, `log-normal` or `empirical`.
    #[schemars(with = "String")]
    pub distribution: Spanned<String>,
    /// constant: the delay; normal: the mean; log-normal: the median (`20ms`).
    #[schemars(with = "Option<String>")]
    pub value: Option<Spanned<String>>,
    /// normal: the standard deviation (`5ms`).
    #[schemars(with = "Option<String>")]
    pub stddev: Option<Spanned<String>>,
    /// log-normal: the standard deviation of the delay's logarithm (`0.5`).
    #[schemars(with = "Option<Dec>")]
    pub sigma: Option<Spanned<Dec>>,
    /// empirical: a CSV beside the scenario with a `latency_ms` column of observed delays;
    /// each request draws one of its rows.
    #[schemars(with = "Option<String>")]
    pub file: Option<Spanned<String>>,
}

/// A decimal written as a string or an integer (`"0.6"`, `60000`); a plain YAML scalar is
/// taken as written, so `0.1` is exactly 0.1, never a binary float.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dec(pub Decimal);

impl<'de> Deserialize<'de> for Dec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Dec;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a decimal such as \"0.6\" or 60000")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Dec, E> {
                perpsim_core::decimal::parse("value", text, Sign::Signed)
                    .map(Dec)
                    .map_err(|_| {
                        E::custom(format!(
                            "expected a decimal in plain notation such as 0.6 or 60000 (no exponent), got {text:?}"
                        ))
                    })
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Dec, E> {
                Ok(Dec(Decimal::from(v)))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Dec, E> {
                Ok(Dec(Decimal::from(v)))
            }
        }
        d.deserialize_str(V)
    }
}

impl JsonSchema for Dec {
    fn schema_name() -> Cow<'static, str> {
        "Decimal".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A decimal in plain notation, as a string or an integer.",
            "anyOf": [
                {"type": "string", "pattern": "^-?[0-9]+(\\.[0-9]+)?$"},
                {"type": "integer"}
            ]
        })
    }
}

/// An API request body inside a scenario: kept as JSON with where it was written, and read
/// by `T`, the type the service reads that operation's body with. Its schema is the
/// operation's (`#/$defs/<T>`, from the OpenAPI document's types).
#[derive(Debug)]
pub struct Body<T> {
    pub json: Spanned<super::fields::Fields>,
    of: PhantomData<T>,
}

impl<T> Body<T> {
    /// The body written as `json`.
    #[cfg(test)]
    pub fn new(json: Spanned<super::fields::Fields>) -> Self {
        Body {
            json,
            of: PhantomData,
        }
    }
}

impl<'de, T> Deserialize<'de> for Body<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Body {
            json: Spanned::deserialize(d)?,
            of: PhantomData,
        })
    }
}

impl<T: poem_openapi::types::Type> JsonSchema for Body<T> {
    fn schema_name() -> Cow<'static, str> {
        T::name()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"$ref": format!("#/$defs/{}", T::name())})
    }

    fn inline_schema() -> bool {
        true
    }
}
