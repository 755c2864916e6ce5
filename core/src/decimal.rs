//! Decimal strings in and out (interface §2.4, §2.5; D4, D7).
//!
//! Input is strict plain notation: an optional `-` (only where the field allows a sign),
//! digits, and optionally a point followed by digits. No exponent, no `+`, no whitespace, no
//! NaN or infinity, no leading or trailing point. Output pads to a minimum number of decimals
//! and never rounds a digit away; the only rounding in the system is [`round_ledger`], applied
//! once when a movement is booked.

use rust_decimal::{Decimal, RoundingStrategy};

/// Ledger precision of every settlement currency (D7).
pub const LEDGER_DECIMALS: u32 = 10;

/// Whether a parsed value may carry a leading `-`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sign {
    Unsigned,
    Signed,
}

/// Why a decimal string was refused; rendered with the field's name by [`parse`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecimalError {
    #[error(
        "{field} must be a decimal string in plain notation (digits, optionally one '.' followed by digits{sign}), got {got:?}"
    )]
    Syntax {
        field: String,
        got: String,
        sign: &'static str,
    },
    #[error(
        "{field} has more digits than can be represented exactly (at most 28 significant digits)"
    )]
    TooLarge { field: String },
}

/// Longest input we look at; anything longer cannot be an exact 96-bit decimal anyway and
/// bounding it keeps error messages short.
const MAX_INPUT_LEN: usize = 64;

/// Parses `text` as a strict plain-notation decimal; `field` names the field in the error.
pub fn parse(field: &str, text: &str, sign: Sign) -> Result<Decimal, DecimalError> {
    let syntax = || DecimalError::Syntax {
        field: field.to_owned(),
        got: text.chars().take(MAX_INPUT_LEN).collect(),
        sign: match sign {
            Sign::Unsigned => "",
            Sign::Signed => ", with an optional leading '-'",
        },
    };
    if text.len() > MAX_INPUT_LEN {
        return Err(DecimalError::TooLarge {
            field: field.to_owned(),
        });
    }
    let digits = match (sign, text.strip_prefix('-')) {
        (Sign::Signed, Some(rest)) => rest,
        (Sign::Unsigned, Some(_)) => return Err(syntax()),
        (_, None) => text,
    };
    let (int, frac) = match digits.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (digits, None),
    };
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !all_digits(int) || frac.is_some_and(|f| !all_digits(f)) {
        return Err(syntax());
    }
    // The syntax is now exactly what rust_decimal's exact parser accepts; any error left is
    // about size, never about form.
    Decimal::from_str_exact(text).map_err(|_| DecimalError::TooLarge {
        field: field.to_owned(),
    })
}

/// Number of decimals a value carries after removing trailing zeros.
pub fn scale_of(value: Decimal) -> u32 {
    value.normalize().scale()
}

/// Prints `value` with at least `min_decimals` decimals. Digits beyond that are kept (trailing
/// zeros removed), never rounded; negative zero prints as zero.
pub fn format(value: Decimal, min_decimals: u32) -> String {
    let mut v = value.normalize();
    if v.is_zero() {
        v = Decimal::ZERO;
    }
    if v.scale() < min_decimals {
        v.rescale(min_decimals);
        // rescale only ever adds zeros here, so no digit was lost.
        debug_assert_eq!(v, value);
    }
    v.to_string()
}

/// Rounds a movement once, at booking, to the ledger precision, half to even (D7).
pub fn round_ledger(value: Decimal) -> Decimal {
    value.round_dp_with_strategy(LEDGER_DECIMALS, RoundingStrategy::MidpointNearestEven)
}

/// Serde adapter storing a decimal as its 16-byte binary form: compact and exact, used by the
/// journal and snapshots where no human reads the bytes.
pub mod bin {
    use rust_decimal::Decimal;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(value: &Decimal, s: S) -> Result<S::Ok, S::Error> {
        value.serialize().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Decimal, D::Error> {
        <[u8; 16]>::deserialize(d).map(Decimal::deserialize)
    }
}

/// [`bin`] for optional decimals.
pub mod bin_opt {
    use rust_decimal::Decimal;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(value: &Option<Decimal>, s: S) -> Result<S::Ok, S::Error> {
        value.map(|d| d.serialize()).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Decimal>, D::Error> {
        Ok(Option::<[u8; 16]>::deserialize(d)?.map(Decimal::deserialize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn d(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    #[test]
    fn accepts_plain_notation() {
        for ok in [
            "0",
            "1",
            "10.5",
            "0.0000000001",
            "123456789.123456789",
            "007.10",
        ] {
            assert_eq!(parse("amount", ok, Sign::Unsigned).unwrap(), d(ok), "{ok}");
        }
        assert_eq!(parse("fee", "-2.5", Sign::Signed).unwrap(), d("-2.5"));
    }

    #[test]
    fn refuses_every_other_form_naming_the_field() {
        for bad in [
            "", " 1", "1 ", "+1", "1e5", "1E5", "1.5e-3", "NaN", "inf", ".5", "5.", "1.2.3", "1,5",
            "0x10", "--1", "-", "١",
        ] {
            let err = parse("amount", bad, Sign::Signed).unwrap_err();
            assert!(err.to_string().starts_with("amount "), "{bad}: {err}");
        }
    }

    #[test]
    fn refuses_a_sign_where_the_field_is_unsigned() {
        let err = parse("amount", "-1", Sign::Unsigned).unwrap_err();
        assert!(matches!(err, DecimalError::Syntax { .. }));
    }

    #[test]
    fn refuses_values_too_large_to_be_exact() {
        let err = parse("amount", "123456789012345678901234567890", Sign::Unsigned).unwrap_err();
        assert_eq!(
            err,
            DecimalError::TooLarge {
                field: "amount".into()
            }
        );
        let long = "1".repeat(65);
        assert!(matches!(
            parse("amount", &long, Sign::Unsigned),
            Err(DecimalError::TooLarge { .. })
        ));
    }

    #[test]
    fn format_pads_to_the_minimum_and_never_rounds() {
        assert_eq!(format(d("0"), 10), "0.0000000000");
        assert_eq!(format(d("-0.000"), 2), "0.00");
        assert_eq!(format(d("1.5"), 4), "1.5000");
        assert_eq!(format(d("1.123456789"), 2), "1.123456789");
        assert_eq!(format(d("60000"), 1), "60000.0");
        assert_eq!(format(d("2.50000"), 1), "2.5");
        assert_eq!(format(d("-3.25"), 0), "-3.25");
    }

    #[test]
    fn ledger_rounding_is_half_even_at_ten_decimals() {
        assert_eq!(round_ledger(d("0.00000000005")), d("0.0000000000"));
        assert_eq!(round_ledger(d("0.00000000015")), d("0.0000000002"));
        assert_eq!(round_ledger(d("0.00000000025")), d("0.0000000002"));
        assert_eq!(round_ledger(d("-0.00000000035")), d("-0.0000000004"));
        assert_eq!(round_ledger(d("1.000000000049")), d("1.0000000000"));
        assert_eq!(round_ledger(d("1.23")), d("1.23"));
    }

    #[test]
    fn binary_form_round_trips_exactly() {
        #[derive(serde::Serialize, serde::Deserialize)]
        struct W(#[serde(with = "super::bin")] Decimal);
        for s in [
            "0",
            "1.50",
            "-0.0000000001",
            "79228162514264337593543950335",
        ] {
            let json = serde_json::to_string(&W(d(s))).unwrap();
            let back: W = serde_json::from_str(&json).unwrap();
            assert_eq!(back.0.to_string(), d(s).to_string());
        }
    }
}
