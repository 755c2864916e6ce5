//! Wire types for decimals, times and leverage, documented exactly in the OpenAPI schema and
//! parsed strictly at the edge (D4).
//!
//! A body field's JSON type is checked before any handler (`request_guard`, from the
//! document); its content is checked here, in the handler, where the field's name is known:
//! every refusal says which field and why. Numbers keep their exact text
//! (serde_json's `arbitrary_precision`), so a JSON number is never read through a float.

use std::borrow::Cow;

use perpsim_core::decimal::{self, Sign};
use perpsim_core::money::MAX_LEVERAGE;
use perpsim_core::time::{MAX_QUERY_MILLIS_DIGITS, TimeBound, Timestamp};
use perpsim_core::{Decimal, Error};
use poem_openapi::registry::{MetaSchema, MetaSchemaRef};
use poem_openapi::types::{ParseFromJSON, ParseResult, ToJSON, Type};
use serde_json::Value;

const DECIMAL_PATTERN: &str = r"^-?[0-9]+(\.[0-9]+)?$";

fn decimal_schema(description: &'static str, example: &str) -> MetaSchema {
    MetaSchema {
        format: Some("decimal"),
        pattern: Some(DECIMAL_PATTERN.to_owned()),
        example: Some(Value::String(example.to_owned())),
        description: Some(description),
        ..MetaSchema::new("string")
    }
}

macro_rules! wire_type {
    ($ty:ident, $name:literal, $schema:expr, parse: $parse:expr, json: $json:expr) => {
        impl Type for $ty {
            const IS_REQUIRED: bool = true;
            type RawValueType = Self;
            type RawElementValueType = Self;

            fn name() -> Cow<'static, str> {
                $name.into()
            }

            fn schema_ref() -> MetaSchemaRef {
                MetaSchemaRef::Inline(Box::new($schema))
            }

            fn as_raw_value(&self) -> Option<&Self> {
                Some(self)
            }

            fn raw_element_iter<'a>(&'a self) -> Box<dyn Iterator<Item = &'a Self> + 'a> {
                Box::new(self.as_raw_value().into_iter())
            }
        }

        impl ParseFromJSON for $ty {
            fn parse_from_json(value: Option<Value>) -> ParseResult<Self> {
                #[allow(clippy::redundant_closure_call)]
                Ok($parse(value.unwrap_or(Value::Null)))
            }
        }

        impl ToJSON for $ty {
            fn to_json(&self) -> Option<Value> {
                #[allow(clippy::redundant_closure_call)]
                Some($json(self))
            }
        }
    };
}

/// A decimal in a response: a JSON string in plain notation, never rounded (§2.4, §2.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecimalOut(pub String);

impl DecimalOut {
    /// `value` with at least `min_decimals` decimals.
    pub fn new(value: Decimal, min_decimals: u32) -> Self {
        DecimalOut(decimal::format(value, min_decimals))
    }

    /// At the ledger precision of 10 decimals (§2.5).
    pub fn ledger(value: Decimal) -> Self {
        Self::new(value, decimal::LEDGER_DECIMALS)
    }
}

wire_type!(
    DecimalOut,
    "DecimalString",
    decimal_schema("Decimal in plain notation as a string; never rounded.", "1.5000000000"),
    parse: |v: Value| DecimalOut(v.as_str().unwrap_or_default().to_owned()),
    json: |s: &DecimalOut| Value::String(s.0.clone())
);

/// A decimal input that must be a JSON string (D4).
#[derive(Debug, Clone, PartialEq)]
pub struct DecimalIn(Value);

wire_type!(
    DecimalIn,
    "DecimalInput",
    decimal_schema("Decimal in plain notation as a JSON string: digits, one optional point; no exponent, no '+'.", "100.25"),
    parse: DecimalIn,
    json: |s: &DecimalIn| s.0.clone()
);

impl DecimalIn {
    /// A decimal string, for documentation examples.
    pub fn example_text(text: &str) -> Self {
        DecimalIn(Value::String(text.to_owned()))
    }

    pub fn parse(&self, field: &str, sign: Sign) -> Result<Decimal, Error> {
        match &self.0 {
            Value::String(text) => Ok(decimal::parse(field, text, sign)?),
            other => Err(Error::validation(format!(
                "{field} must be a JSON string holding a decimal such as \"1.5\", got {other}"
            ))),
        }
    }
}

/// A decimal the interface calls a number (fee values, cash_amount): a decimal string or a
/// JSON number, read from its exact text (D4).
#[derive(Debug, Clone, PartialEq)]
pub struct NumberIn(Value);

wire_type!(
    NumberIn,
    "DecimalOrNumber",
    MetaSchema {
        one_of: vec![
            MetaSchemaRef::Inline(Box::new(decimal_schema("Decimal string in plain notation.", "2.5"))),
            MetaSchemaRef::Inline(Box::new(MetaSchema { description: Some("JSON number, read from its exact text (exponent notation included), never through a float; a value with more than 28 decimals or 28 significant digits is refused."), ..MetaSchema::new("number") })),
        ],
        ..MetaSchema::ANY
    },
    parse: NumberIn,
    json: |s: &NumberIn| s.0.clone()
);

impl NumberIn {
    /// A decimal string, for documentation examples.
    pub fn example_text(text: &str) -> Self {
        NumberIn(Value::String(text.to_owned()))
    }

    pub fn parse(&self, field: &str, sign: Sign) -> Result<Decimal, Error> {
        match &self.0 {
            Value::String(text) => Ok(decimal::parse(field, text, sign)?),
            Value::Number(n) => Ok(decimal::parse_json_number(field, &n.to_string(), sign)?),
            other => Err(Error::validation(format!(
                "{field} must be a decimal string or a JSON number, got {other}"
            ))),
        }
    }
}

/// Leverage as a JSON integer ≥ 1 or a string matching `^[1-9][0-9]*$` (D4). The document
/// states the range the rules accept, 1 to max_leverage (§8: currently 2, one digit, so the
/// string form is one character); the parser reads up to 9 digits so a larger value gets the
/// rule's own message.
#[derive(Debug, Clone, PartialEq)]
pub struct LeverageIn(Value);

const _: () = assert!(MAX_LEVERAGE <= 9, "the documented string form is one digit");

wire_type!(
    LeverageIn,
    "Leverage",
    MetaSchema {
        one_of: vec![
            MetaSchemaRef::Inline(Box::new(MetaSchema { minimum: Some(1.0), maximum: Some(f64::from(MAX_LEVERAGE)), format: Some("int32"), ..MetaSchema::new("integer") })),
            MetaSchemaRef::Inline(Box::new(MetaSchema { pattern: Some(format!("^[1-{MAX_LEVERAGE}]$")), ..MetaSchema::new("string") })),
        ],
        example: Some(Value::from(2)),
        ..MetaSchema::ANY
    },
    parse: LeverageIn,
    json: |s: &LeverageIn| s.0.clone()
);

impl LeverageIn {
    /// An integer leverage, for documentation examples.
    pub fn example_value(leverage: u32) -> Self {
        LeverageIn(Value::from(leverage))
    }

    pub fn parse(&self, field: &str) -> Result<u32, Error> {
        let text = match &self.0 {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            other => {
                return Err(Error::validation(format!(
                    "{field} must be an integer or a digit string, got {other}"
                )));
            }
        };
        let ok = !text.is_empty()
            && !text.starts_with('0')
            && text.len() <= 9
            && text.bytes().all(|b| b.is_ascii_digit());
        match ok {
            true => Ok(text.parse().expect("at most 9 digits")),
            false => Err(Error::validation(format!(
                "{field} must be a positive whole number (^[1-9][0-9]*$), got {text}"
            ))),
        }
    }
}

/// A timestamp in a response: RFC 3339 UTC with `Z`, millisecond precision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Time(pub String);

impl From<Timestamp> for Time {
    fn from(t: Timestamp) -> Self {
        Time(t.to_rfc3339())
    }
}

wire_type!(
    Time,
    "Timestamp",
    MetaSchema {
        format: Some("date-time"),
        example: Some(Value::String("2026-01-01T00:00:00.000Z".to_owned())),
        description: Some("RFC 3339 in UTC with a Z suffix (simulation time)."),
        ..MetaSchema::new("string")
    },
    parse: |v: Value| Time(v.as_str().unwrap_or_default().to_owned()),
    json: |t: &Time| Value::String(t.0.clone())
);

/// An inclusive query time bound: RFC 3339 or milliseconds since the epoch (see
/// [`Timestamp::parse_query_bound`]; the document states the same in `contract::params`).
pub fn query_time(
    field: &str,
    value: Option<&str>,
    bound: TimeBound,
) -> Result<Option<Timestamp>, Error> {
    value
        .map(|v| {
            Timestamp::parse_query_bound(v, bound).ok_or_else(|| {
                Error::validation(format!(
                    "{field} must be an RFC 3339 date-time or 1 to {MAX_QUERY_MILLIS_DIGITS} \
                     digits of milliseconds since the epoch, got {v:?}"
                ))
            })
        })
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_keep_their_exact_text_and_strings_are_strict() {
        // 27 significant digits: far beyond what an f64 could carry.
        let n: Value = serde_json::from_str("0.100000000000000005551115123").unwrap();
        let exact = NumberIn(n).parse("maker_fee", Sign::Signed).unwrap();
        assert_eq!(exact.to_string(), "0.100000000000000005551115123");
        // JSON's exponent form is a number's exact text too: 1e3 is exactly 1000.
        let exponent = NumberIn(serde_json::from_str("1e-7").unwrap());
        assert_eq!(
            exponent
                .parse("maker_fee", Sign::Signed)
                .unwrap()
                .to_string(),
            "0.0000001"
        );
        assert!(
            DecimalIn(serde_json::json!(5))
                .parse("amount", Sign::Unsigned)
                .unwrap_err()
                .message
                .starts_with("amount must be a JSON string")
        );
        assert_eq!(
            DecimalIn(serde_json::json!("5.50"))
                .parse("amount", Sign::Unsigned)
                .unwrap()
                .to_string(),
            "5.50"
        );
    }

    #[test]
    fn leverage_is_an_integer_or_a_digit_string() {
        let p = |v: Value| LeverageIn(v).parse("leverage");
        assert_eq!(p(serde_json::json!(2)).unwrap(), 2);
        assert_eq!(p(serde_json::json!("2")).unwrap(), 2);
        for bad in [
            serde_json::json!(0),
            serde_json::json!("02"),
            serde_json::json!(1.5),
            serde_json::json!("-1"),
            serde_json::json!(true),
            serde_json::json!(""),
        ] {
            assert!(p(bad.clone()).is_err(), "{bad}");
        }
    }
}
