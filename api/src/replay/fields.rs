//! An event's body as written: an object's fields in a list, or any other value. The API's
//! types read a body from a `serde_json::Value`; an object there is a B-tree of owned keys
//! that the type then takes apart field by field, which was half of planning a million
//! orders. `OrderRequest`, the body of nearly every event, is read here from the list, by the
//! same field parsers in the same order as its derived `parse_from_json`; every other body,
//! and an order body the list cannot settle (a field repeated or unknown), goes through the
//! `Value` exactly as before. An object whose keys are all an order's fields, each given once
//! with a string (nearly every body), is held by the fields' places, not a key of its own each.

use std::fmt;

use poem_openapi::types::{ParseError, ParseFromJSON, ParseResult};
use serde::de::value::{
    BoolDeserializer, F64Deserializer, I64Deserializer, I128Deserializer, SeqAccessDeserializer,
    StrDeserializer, U64Deserializer, U128Deserializer, UnitDeserializer,
};
use serde::de::{Deserialize, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::requests::orders::OrderRequest;

/// A body as written.
#[derive(Debug, Clone, PartialEq)]
pub enum Fields {
    /// An object: its fields in the order written.
    Object(Vec<(String, Value)>),
    /// An object whose every key is one of an order's fields ([`ORDER_FIELDS`], by index),
    /// given once, with a string: its values in the order written. Nearly every body of a
    /// scenario is one, and read so it costs no key of its own and no object to search.
    Named(Vec<(u8, String)>),
    Other(Value),
}

impl Default for Fields {
    fn default() -> Self {
        Fields::Other(Value::Null)
    }
}

impl Fields {
    /// The `Value` `serde_json` reads the same text as (a key written twice: its last value).
    pub fn into_value(self) -> Value {
        match self {
            Fields::Object(fields) => Value::Object(fields.into_iter().collect::<Map<_, _>>()),
            Fields::Named(named) => Value::Object(named.into_iter().map(entry).collect()),
            Fields::Other(value) => value,
        }
    }
}

/// A named field as an object's entry.
fn entry((field, text): (u8, String)) -> (String, Value) {
    (ORDER_FIELDS[field as usize].to_owned(), Value::String(text))
}

/// Keys by which `serde_json` (with `arbitrary_precision`) hands a number or a raw value over
/// as a map of one entry, the text as its value.
const NUMBER: &str = "$serde_json::private::Number";
const RAW: &str = "$serde_json::private::RawValue";

impl<'de> Deserialize<'de> for Fields {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FieldsVisitor)
    }
}

/// A map into a list; anything else handed to `Value`'s own visitor.
struct FieldsVisitor;

/// Visits of a scalar, each handing it to `Value`'s visitor through serde's own deserializer
/// of that scalar.
macro_rules! scalars {
    ($($visit:ident($ty:ty) => $de:ident,)*) => {$(
        fn $visit<E: serde::de::Error>(self, v: $ty) -> Result<Fields, E> {
            other($de::new(v))
        }
    )*};
}

fn other<'de, D: Deserializer<'de>>(d: D) -> Result<Fields, D::Error> {
    Value::deserialize(d).map(Fields::Other)
}

impl<'de> Visitor<'de> for FieldsVisitor {
    type Value = Fields;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    scalars! {
        visit_bool(bool) => BoolDeserializer,
        visit_i64(i64) => I64Deserializer,
        visit_u64(u64) => U64Deserializer,
        visit_i128(i128) => I128Deserializer,
        visit_u128(u128) => U128Deserializer,
        visit_f64(f64) => F64Deserializer,
        visit_str(&str) => StrDeserializer,
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Fields, E> {
        other(UnitDeserializer::new())
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Fields, E> {
        other(UnitDeserializer::new())
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Fields, D::Error> {
        other(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Fields, A::Error> {
        other(SeqAccessDeserializer::new(seq))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields, A::Error> {
        let Some(first) = map.next_key::<Key>()? else {
            return Ok(Fields::Object(Vec::new()));
        };
        if let Key::Other(token) = &first
            && (token == NUMBER || token == RAW)
        {
            let text: String = map.next_value()?;
            let value = match token == NUMBER {
                true => text.parse().map(Value::Number).map_err(A::Error::custom)?,
                false => serde_json::from_str(&text).map_err(A::Error::custom)?,
            };
            return Ok(Fields::Other(value));
        }
        let (mut named, mut given) = (Vec::with_capacity(8), 0u32);
        let mut key = Some(first);
        while let Some(k) = key {
            let value: Value = map.next_value()?;
            match (k, value) {
                (Key::Named(f), Value::String(text)) if given & (1 << f) == 0 => {
                    given |= 1 << f;
                    named.push((f, text));
                }
                (k, value) => return written(map, named, (k.into_string(), value)),
            }
            key = map.next_key()?;
        }
        Ok(Fields::Named(named))
    }
}

/// An object read as [`Fields::Named`] until `entry`, which that cannot hold, and the rest
/// of `map` after it: every field in the order written.
fn written<'de, A: MapAccess<'de>>(
    mut map: A,
    named: Vec<(u8, String)>,
    entry: (String, Value),
) -> Result<Fields, A::Error> {
    let mut fields: Vec<_> = named.into_iter().map(self::entry).collect();
    fields.push(entry);
    while let Some(entry) = map.next_entry()? {
        fields.push(entry);
    }
    Ok(Fields::Object(fields))
}

/// An object's key: one of an order's fields by index, or any other text.
enum Key {
    Named(u8),
    Other(String),
}

impl Key {
    fn into_string(self) -> String {
        match self {
            Key::Named(f) => ORDER_FIELDS[f as usize].to_owned(),
            Key::Other(text) => text,
        }
    }

    fn of(text: &str) -> Option<Key> {
        order_field(text).map(Key::Named)
    }
}

impl<'de> Deserialize<'de> for Key {
    /// What `String` reads a key from, a known one without a copy of its own.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Text;
        impl Visitor<'_> for Text {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Key, E> {
                Ok(Key::of(text).unwrap_or_else(|| Key::Other(text.to_owned())))
            }
            fn visit_string<E: serde::de::Error>(self, text: String) -> Result<Key, E> {
                Ok(Key::of(&text).unwrap_or(Key::Other(text)))
            }
            fn visit_bytes<E: serde::de::Error>(self, bytes: &[u8]) -> Result<Key, E> {
                let text = std::str::from_utf8(bytes)
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Bytes(bytes), &self))?;
                self.visit_str(text)
            }
            fn visit_byte_buf<E: serde::de::Error>(self, bytes: Vec<u8>) -> Result<Key, E> {
                match String::from_utf8(bytes) {
                    Ok(text) => self.visit_string(text),
                    Err(e) => Err(E::invalid_value(
                        serde::de::Unexpected::Bytes(&e.into_bytes()),
                        &self,
                    )),
                }
            }
        }
        d.deserialize_string(Text)
    }
}

/// A body type, read from a body as written.
pub trait FromFields: ParseFromJSON {
    fn from_fields(fields: Fields) -> ParseResult<Self> {
        Self::parse_from_json(Some(fields.into_value()))
    }
}

impl FromFields for crate::requests::orders::AmendRequest {}
impl FromFields for crate::requests::money::TransferRequest {}
impl FromFields for crate::requests::profiles::FeeProfileRequest {}
impl FromFields for crate::requests::instruments::PriceRequest {}
impl FromFields for crate::requests::instruments::FundingRequest {}
impl FromFields for crate::requests::instruments::StatusRequest {}

/// `OrderRequest`'s fields by their JSON names, in its declaration order.
pub const ORDER_FIELDS: [&str; 16] = [
    "symbol",
    "side",
    "type",
    "reference_id",
    "amount",
    "cash_amount",
    "limit_price",
    "trigger_price",
    "trigger_price_type",
    "take_profit_price",
    "stop_loss_price",
    "time_in_force",
    "expire_time",
    "post_only",
    "leverage",
    "customer_ip",
];

/// The index in [`ORDER_FIELDS`] of the field named `key`, if an order has one. A match, not a
/// search of the list: a key is read for each field of a million orders.
pub fn order_field(key: &str) -> Option<u8> {
    Some(match key {
        "symbol" => 0,
        "side" => 1,
        "type" => 2,
        "reference_id" => 3,
        "amount" => 4,
        "cash_amount" => 5,
        "limit_price" => 6,
        "trigger_price" => 7,
        "trigger_price_type" => 8,
        "take_profit_price" => 9,
        "stop_loss_price" => 10,
        "time_in_force" => 11,
        "expire_time" => 12,
        "post_only" => 13,
        "leverage" => 14,
        "customer_ip" => 15,
        _ => return None,
    })
}

impl FromFields for OrderRequest {
    /// What the derived `parse_from_json` makes of the object: each field, in declaration
    /// order, read by its type from the value given (or none) and its error propagated;
    /// then, unknown fields refused. With every key known and given once, the list holds
    /// what the object would, and that last step has nothing to refuse.
    fn from_fields(fields: Fields) -> ParseResult<Self> {
        let mut slots: [Option<Value>; ORDER_FIELDS.len()] = Default::default();
        match fields {
            Fields::Named(named) => {
                for (f, text) in named {
                    slots[f as usize] = Some(Value::String(text));
                }
            }
            Fields::Object(list) => {
                let (mut given, mut field_of) = (0u32, [0; ORDER_FIELDS.len()]);
                for (i, (key, _)) in list.iter().enumerate() {
                    match order_field(key).map(usize::from) {
                        Some(f) if given & (1 << f) == 0 => {
                            (given, field_of[i]) = (given | 1 << f, f)
                        }
                        _ => return Self::parse_from_json(Some(Fields::Object(list).into_value())),
                    }
                }
                for ((_, value), &f) in list.into_iter().zip(&field_of) {
                    slots[f] = Some(value);
                }
            }
            Fields::Other(value) => return Self::parse_from_json(Some(value)),
        }
        let mut s = slots.iter_mut();
        Ok(OrderRequest {
            symbol: field(s.next())?,
            side: field(s.next())?,
            kind: field(s.next())?,
            reference_id: field(s.next())?,
            amount: optional(s.next())?,
            cash_amount: optional(s.next())?,
            limit_price: optional(s.next())?,
            trigger_price: optional(s.next())?,
            trigger_price_type: optional(s.next())?,
            take_profit_price: optional(s.next())?,
            stop_loss_price: optional(s.next())?,
            time_in_force: optional(s.next())?,
            expire_time: optional(s.next())?,
            post_only: optional(s.next())?,
            leverage: optional(s.next())?,
            customer_ip: optional(s.next())?,
        })
    }
}

/// One field of an object read as the derived `parse_from_json` reads it.
fn field<T: ParseFromJSON>(
    slot: Option<&mut Option<Value>>,
) -> Result<T, ParseError<OrderRequest>> {
    let value = slot.and_then(Option::take);
    T::parse_from_json(value).map_err(ParseError::propagate)
}

/// An optional field of an object read as the derived `parse_from_json` reads it: one not
/// given is none, as `Option`'s reader says, without asking it (eleven of an order's sixteen).
fn optional<T: ParseFromJSON>(
    slot: Option<&mut Option<Value>>,
) -> Result<Option<T>, ParseError<OrderRequest>> {
    match slot.and_then(Option::take) {
        None => Ok(None),
        given => Option::<T>::parse_from_json(given).map_err(ParseError::propagate),
    }
}

/// Where, in `text`, the body that starts at (`line`, `column`) writes its field `key`: the
/// first key of that name at the body's own level (a flow mapping `{…}` or a block of keys
/// at the body's indentation), or `None`. Only a refusal reads this, so it scans the text.
pub fn locate(text: &str, (line, column): (u64, u64), key: &str) -> Option<(u64, u64)> {
    let line_start: usize = text
        .split_inclusive('\n')
        .take(usize::try_from(line).ok()?.checked_sub(1)?)
        .map(str::len)
        .sum();
    let from = line_start
        + text
            .get(line_start..)?
            .char_indices()
            .nth(column.checked_sub(1)? as usize)?
            .0;
    let mut scan = Scan {
        at: (line, column),
        depth: 0,
        indent: column - 1,
        previous: ' ',
        quote: None,
        flow: text[from..].starts_with('{'),
    };
    for (i, c) in text[from..].char_indices() {
        if scan.quote.is_none()
            && scan.depth <= 1
            && scan.is_key_start(c)
            && key_at(&text[from + i..], key)
        {
            return Some(scan.at);
        }
        if !scan.step(c, &text[from + i + c.len_utf8()..]) {
            return None;
        }
    }
    None
}

/// Where a scan of a body is: its place, how deep in brackets, inside which quote.
struct Scan {
    at: (u64, u64),
    depth: i32,
    /// The body's indentation: a block body ends at a line indented less.
    indent: u64,
    previous: char,
    quote: Option<char>,
    /// Written `{…}`: the body ends where its brace closes.
    flow: bool,
}

impl Scan {
    /// Whether a key may start at `c`: after the body's `{`, a `,`, or white space.
    fn is_key_start(&self, c: char) -> bool {
        matches!(self.previous, '{' | ',' | ' ' | '\t' | '\n') && !matches!(c, ' ' | '\t' | '\n')
    }

    /// Moves past `c` (`rest` is the text after it); false where the body has ended.
    fn step(&mut self, c: char, rest: &str) -> bool {
        match (self.quote, c) {
            (Some(q), c) if c == q => self.quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => self.quote = Some(c),
            (None, '{' | '[') => self.depth += 1,
            (None, '}' | ']') => self.depth -= 1,
            _ => {}
        }
        self.previous = c;
        if c == '\n' {
            self.at = (self.at.0 + 1, 1);
        } else {
            self.at.1 += 1;
        }
        // A flow body ends at its closing brace; a block body at a line indented less.
        let indent = rest.len() - rest.trim_start_matches(' ').len();
        let blank = rest[indent..].starts_with(['\n', '#']) || rest.len() == indent;
        let block_ended = self.depth == 0 && c == '\n' && !blank && (indent as u64) < self.indent;
        let flow_ended = self.flow && self.depth == 0;
        self.depth >= 0 && !block_ended && !flow_ended
    }
}

/// Whether `text` starts with `key` as a mapping key: bare or quoted, then `:`.
fn key_at(text: &str, key: &str) -> bool {
    let rest = match text.chars().next() {
        Some(q @ ('"' | '\'')) => text[1..].strip_prefix(key).and_then(|r| r.strip_prefix(q)),
        _ => text.strip_prefix(key),
    };
    rest.is_some_and(|r| r.trim_start_matches([' ', '\t']).starts_with(':'))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// JSON texts of every kind of value, numbers beyond 64 bits and a repeated key included.
    const VALUES: [&str; 12] = [
        r#"{"a": 1, "b": [1, 2.5, "x", {"k": null}], "a": 3}"#,
        "{}",
        "5",
        "-7",
        "2.50",
        "123456789012345678901234567890",
        "1e400",
        r#""text""#,
        "null",
        "true",
        "[]",
        r#"[1, {"k": [false]}]"#,
    ];

    /// D11: a body as written reads as the value serde_json and the YAML reader read the same
    /// text as, so a body the order's own reader does not settle reads exactly as before.
    #[test]
    fn a_body_as_written_is_the_value_either_reader_reads() {
        for text in VALUES {
            let fields: Fields = serde_json::from_str(text).unwrap();
            let value: Value = serde_json::from_str(text).unwrap();
            assert_eq!(fields.into_value(), value, "JSON {text}");
            if text.contains("\"a\"") || text == "1e400" {
                continue; // YAML refuses a repeated key; reads 1e400 as a float
            }
            let fields: Fields = serde_saphyr::from_str(text).unwrap();
            let value: Value = serde_saphyr::from_str(text).unwrap();
            assert_eq!(fields.into_value(), value, "YAML {text}");
        }
    }

    fn both_ways(text: &str) -> (String, String) {
        let fields: Fields = serde_json::from_str(text).unwrap();
        let value: Value = serde_json::from_str(text).unwrap();
        let show = |r: ParseResult<OrderRequest>| match r {
            Ok(order) => format!("{order:?}"),
            Err(e) => e.into_message(),
        };
        (
            show(OrderRequest::from_fields(fields)),
            show(OrderRequest::parse_from_json(Some(value))),
        )
    }

    /// An order's field is found by its name, each at its place in the list.
    #[test]
    fn each_order_field_is_found_at_its_place_and_nothing_else_is() {
        for (i, name) in ORDER_FIELDS.iter().enumerate() {
            assert_eq!(order_field(name), Some(i as u8), "{name}");
        }
        for other in ["", "Symbol", "symbol ", "at", "customer", "types"] {
            assert_eq!(order_field(other), None, "{other:?}");
        }
    }

    /// D11, §2.3: an order body read from its fields is what the API's derived reader makes
    /// of it, refusal for refusal: every field given, fields missing, null, of the wrong type,
    /// unknown, repeated, and a body that is not an object.
    #[test]
    fn an_order_body_reads_from_its_fields_as_the_api_reads_it() {
        let every = r#"{"customer_ip": "10.0.0.1", "leverage": 2, "post_only": false,
            "expire_time": "2026-01-02T00:00:00Z", "time_in_force": "GTD",
            "stop_loss_price": "90", "take_profit_price": "110", "trigger_price_type": "mark_price",
            "trigger_price": "100", "limit_price": "101", "cash_amount": 50, "amount": "0.5",
            "reference_id": "r-1", "type": "limit", "side": "buy", "symbol": "BTC-USDC-PERP"}"#;
        let bodies = [
            every,
            r#"{"symbol": "ETH-USDC-PERP", "side": "sell", "reference_id": "o0", "amount": "0.29", "type": "market"}"#,
            r#"{"symbol": "ETH-USDC-PERP", "side": "Sell", "reference_id": "o0", "type": "market"}"#,
            r#"{"symbol": "ETH-USDC-PERP", "side": "sell", "refrence_id": "o0", "type": "market"}"#,
            r#"{"symbol": "ETH-USDC-PERP", "side": "sell", "reference_id": "o0", "type": "market", "amount": 5}"#,
            r#"{"symbol": "ETH-USDC-PERP", "side": "sell", "reference_id": "o0", "type": "market", "amount": null}"#,
            r#"{"symbol": "ETH-USDC-PERP", "side": "sell", "reference_id": "o0", "type": "market", "amount": "1", "amount": "2"}"#,
            r#"{"symbol": null, "side": "sell", "reference_id": "o0", "type": "market"}"#,
            r#"{"side": "sell", "reference_id": 7, "type": "market"}"#,
            r#"{"symbol": "X", "side": "sell", "reference_id": "o0", "type": "limit", "post_only": "yes"}"#,
            "{}",
            "[]",
            "5",
            r#""an order""#,
        ];
        // Hostile: every field and then one again; forty fields no order has.
        let again = format!("{},\"symbol\": \"X\"}}", every.trim_end_matches('}'));
        let unknown = (0..40)
            .map(|i| format!("\"f{i}\": {i}"))
            .collect::<Vec<_>>();
        let unknown = format!("{{{}}}", unknown.join(", "));
        for body in bodies
            .iter()
            .copied()
            .chain([again.as_str(), unknown.as_str()])
        {
            let (fields, value) = both_ways(body);
            assert_eq!(fields, value, "{body}");
        }
        assert!(
            both_ways(every).0.contains("customer_ip: Some"),
            "every field read"
        );
    }

    /// D11: a refusal points at the field in the text, however the body is written: a flow
    /// mapping (bare or quoted keys, over lines), a block mapping; never at a key of the
    /// same name outside the body.
    #[test]
    fn a_field_is_found_where_its_body_writes_it() {
        let flow = "- {at: +1m, order: {symbol: X, \"side\": Sell,\n    type: market}, type: x}\n";
        assert_eq!(locate(flow, (1, 19), "side"), Some((1, 32)));
        assert_eq!(locate(flow, (1, 19), "type"), Some((2, 5)));
        assert_eq!(locate(flow, (1, 19), "at"), None, "outside the body");
        let block = "- at: +1m\n  order:\n    symbol: X\n    side: Sell\n- at: +2m\n  side: y\n";
        assert_eq!(locate(block, (3, 5), "side"), Some((4, 5)));
        assert_eq!(locate(block, (3, 5), "at"), None, "the next event");
        let json = r#"{"events": [{"order": {"symbol": "X", "side": "Sell"}}]}"#;
        assert_eq!(locate(json, (1, 23), "side"), Some((1, 39)));
        assert_eq!(locate(json, (1, 23), "missing"), None);
        assert_eq!(locate(json, (9, 1), "side"), None, "a place past the text");
        assert_eq!(locate("{a: 1}", (1, 1), ""), None);
    }
}
