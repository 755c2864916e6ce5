//! Decimal strings in and out (interface §2.4, §2.5; D4, D7).
//!
//! Input is strict plain notation: an optional `-` (only where the field allows a sign),
//! digits, and optionally a point followed by digits. No exponent, no `+`, no whitespace, no
//! NaN or infinity, no leading or trailing point. A JSON number (where D4 admits one) may
//! also carry JSON's exponent, read exactly ([`parse_json_number`]). Output pads to a minimum number of decimals
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
    #[error("{field} has more decimals than can be represented exactly (at most 28), got {got}")]
    TooPrecise { field: String, got: String },
}

/// Longest input we look at; anything longer cannot be an exact 96-bit decimal anyway and
/// bounding it keeps error messages short.
pub const MAX_INPUT_LEN: usize = 64;

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

/// Parses the text of a JSON number, read exactly (D4: never through a float): plain
/// notation as [`parse`] takes it, or JSON's exponent form (`1e-7`, `-2.5E+3`), whose exact
/// value is taken. A value a decimal cannot hold exactly is refused, never rounded: more than
/// 28 decimals (`5e-324`) or more than 28 significant digits.
pub fn parse_json_number(field: &str, text: &str, sign: Sign) -> Result<Decimal, DecimalError> {
    let Some((mantissa, exponent)) = text.split_once(['e', 'E']) else {
        return parse(field, text, sign);
    };
    let too_precise = || DecimalError::TooPrecise {
        field: field.to_owned(),
        got: text.chars().take(MAX_INPUT_LEN).collect(),
    };
    let too_large = || DecimalError::TooLarge {
        field: field.to_owned(),
    };
    let mantissa = parse(field, mantissa, sign)?;
    // JSON allows a sign and any digits; past ±28 nothing representable remains anyway.
    let exponent: i64 = exponent.parse().map_err(|_| too_large())?;
    if exponent >= 0 {
        let shift = u32::try_from(exponent).map_err(|_| too_large())?;
        let factor = 10i128.checked_pow(shift).ok_or_else(too_large)?;
        let factor = Decimal::try_from_i128_with_scale(factor, 0).map_err(|_| too_large())?;
        return mantissa.checked_mul(factor).ok_or_else(too_large);
    }
    let scale = u64::from(mantissa.scale()) + exponent.unsigned_abs();
    let scale = u32::try_from(scale)
        .ok()
        .filter(|s| *s <= 28)
        .ok_or_else(too_precise)?;
    let mut value = mantissa;
    value.set_scale(scale).map_err(|_| too_precise())?;
    Ok(value)
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

/// Powers of ten up to 10^38, every one an i128 holds (a `Decimal`'s scale is at most 28).
const POW10: [i128; 39] = {
    let mut table = [1i128; 39];
    let mut i = 1;
    while i < table.len() {
        table[i] = table[i - 1] * 10;
        i += 1;
    }
    table
};

/// 10^`exp`, None past what an i128 holds: `checked_pow`'s answer by a look-up, where that
/// was a loop of overflow-checked 128-bit multiplications (a margin judgment raised four).
pub fn pow10(exp: u32) -> Option<i128> {
    POW10.get(exp as usize).copied()
}

/// 10^0 ..= 10^18, the powers of ten an i64 holds.
pub const POW10_64: [i64; 19] = {
    let mut table = [1i64; 19];
    let mut i = 1;
    while i < table.len() {
        table[i] = table[i - 1] * 10;
        i += 1;
    }
    table
};

/// `x / 10^k` rounded half-even, `k` in 1..=18: one arm per divisor, so each division by a
/// constant compiles to a multiply (a 64-bit division by a variable costs ~10 times more).
pub fn div_pow10_half_even(x: i64, k: u8) -> i64 {
    #[inline(always)]
    fn by(x: i64, unit: i64) -> i64 {
        let (q, r) = (x / unit, x % unit);
        // |r| < unit ≤ 10^18, so twice it fits.
        let twice = 2 * r.abs();
        if twice > unit || (twice == unit && q % 2 != 0) {
            q + x.signum()
        } else {
            q
        }
    }
    match k {
        1 => by(x, 10),
        2 => by(x, 100),
        3 => by(x, 1_000),
        4 => by(x, 10_000),
        5 => by(x, 100_000),
        6 => by(x, 1_000_000),
        7 => by(x, 10_000_000),
        8 => by(x, 100_000_000),
        9 => by(x, 1_000_000_000),
        10 => by(x, 10_000_000_000),
        11 => by(x, 100_000_000_000),
        12 => by(x, 1_000_000_000_000),
        13 => by(x, 10_000_000_000_000),
        14 => by(x, 100_000_000_000_000),
        15 => by(x, 1_000_000_000_000_000),
        16 => by(x, 10_000_000_000_000_000),
        17 => by(x, 100_000_000_000_000_000),
        18 => by(x, 1_000_000_000_000_000_000),
        _ => unreachable!("k is in 1..=18"),
    }
}

/// `value / unit` as a quotient of integers at a common scale: `(m_v / 10^sv) / (m_u /
/// 10^su) = m_v · 10^su / (m_u · 10^sv)`. None when a term leaves i128. `unit` must be
/// positive.
fn quotient_terms(value: Decimal, unit: Decimal) -> Option<(i128, i128)> {
    // Sign and zero tests, not a comparison: this runs several times per order.
    assert!(
        unit.is_sign_positive() && !unit.is_zero(),
        "a unit is positive"
    );
    let (num, den) = (value.mantissa(), unit.mantissa());
    let (sv, su) = (value.scale() as usize, unit.scale() as usize);
    match su >= sv {
        true => Some((num.checked_mul(POW10[su - sv])?, den)),
        false => Some((num, den.checked_mul(POW10[sv - su])?)),
    }
}

/// `value / unit` when it is a whole number, computed exactly on the mantissas with integer
/// arithmetic: the matching path turns every price into ticks and every amount into lots,
/// and a `Decimal` division there costs more than the rest of an order's book work. None
/// when the quotient is not whole, or (beyond any instrument's grid) when the scaled
/// mantissa leaves i128. `unit` must be positive.
pub fn whole_units(value: Decimal, unit: Decimal) -> Option<i128> {
    if let Some(answer) = whole_units_64(value, unit) {
        return answer;
    }
    wide_whole_units(value, unit)
}

/// [`whole_units`] in 64-bit integers, where both mantissas and the scaled term fit them
/// (every price and amount of an instrument's grid): the answer, or None for the 128-bit
/// path. An order's price and amount turn into ticks and lots several times on its way
/// through the desk, and the 128-bit overflow checks were most of each conversion.
fn whole_units_64(value: Decimal, unit: Decimal) -> Option<Option<i128>> {
    let (v, u) = (value.unpack(), unit.unpack());
    assert!(
        !u.negative && (u.lo | u.mid | u.hi) != 0,
        "a unit is positive"
    );
    let (mut num, mut den) = (magnitude(v.hi, v.mid, v.lo)?, magnitude(u.hi, u.mid, u.lo)?);
    match u.scale >= v.scale {
        true => num = num.checked_mul(*POW10_64.get((u.scale - v.scale) as usize)?)?,
        false => den = den.checked_mul(*POW10_64.get((v.scale - u.scale) as usize)?)?,
    }
    let whole = (num % den == 0).then(|| i128::from(num / den));
    Some(whole.map(|q| if v.negative { -q } else { q }))
}

/// Whether `a × b` is at most `max`, decided on the mantissas where the `Decimal` product is
/// exact (its mantissa within 96 bits, its scale at most 28), so compares as it would; None
/// where it is not. Every entry and amend checks a notional or two against the venue
/// maximum, and the `Decimal` product and comparison were most of each check.
pub fn product_at_most(a: Decimal, b: Decimal, max: u64) -> Option<bool> {
    let (x, y) = (a.unpack(), b.unpack());
    let scale = x.scale + y.scale;
    let m = |hi: u32, mid: u32, lo: u32| u64::try_from(magnitude(hi, mid, lo)?).ok();
    let product = u128::from(m(x.hi, x.mid, x.lo)?) * u128::from(m(y.hi, y.mid, y.lo)?);
    if product > MAX_MANTISSA || scale > Decimal::MAX_SCALE {
        return None;
    }
    if product == 0 || x.negative != y.negative {
        return Some(true);
    }
    let bound = u128::from(max).checked_mul(u128::try_from(POW10[scale as usize]).ok()?)?;
    Some(product <= bound)
}

/// Decimals of [`nanos`]: every `Decimal` (at most 7.9 × 10^28) is below 2^127 in them.
pub const NANO_DECIMALS: u32 = 9;

/// `value` in whole units of 10^-9, rounded down or, with `up`, up: an integer key that
/// orders as the values do, for indices that only need to bound a value from one side (the
/// margin pass's trigger marks), where a B-tree of `Decimal`s rescales at every comparison.
pub fn nanos(value: Decimal, up: bool) -> i128 {
    // A mantissa is below 2^96 in magnitude: the scaling below cannot overflow.
    let (m, scale) = (value.mantissa(), value.scale());
    if scale <= NANO_DECIMALS {
        return m * POW10[(NANO_DECIMALS - scale) as usize];
    }
    let (q, r) = div_rem(m, POW10[(scale - NANO_DECIMALS) as usize]);
    match (r.signum(), up) {
        (1, true) => q + 1,
        (-1, false) => q - 1,
        _ => q,
    }
}

/// A mantissa's magnitude from its three 32-bit words, where it fits an i64.
fn magnitude(hi: u32, mid: u32, lo: u32) -> Option<i64> {
    match hi {
        0 => i64::try_from(u64::from(mid) << 32 | u64::from(lo)).ok(),
        _ => None,
    }
}

/// [`whole_units`] in 128-bit integers.
fn wide_whole_units(value: Decimal, unit: Decimal) -> Option<i128> {
    let (num, den) = quotient_terms(value, unit)?;
    let (q, r) = div_rem(num, den);
    (r == 0).then_some(q)
}

/// `value / unit` rounded to a whole number by `strategy`: the same number as
/// `(value / unit).round_dp_with_strategy(0, strategy)`, computed exactly on the mantissas.
/// The price feed rounds every market's index to its tick and the maker finds its ladder in
/// grid steps every simulated second, where a `Decimal` division cost more than the rest of
/// the step. None where the integers cannot prove that sameness: beyond i128, a strategy
/// other than floor, ceiling and half-even, or a quotient so large or a unit so fine that a
/// `Decimal` quotient (28 significant digits) could round across a whole number or a half.
/// The exact quotient `num / den` that is not on a half is at least `1 / (2·den)` from one;
/// a `Decimal` quotient of 28 digits is within `(|q| + 1) · 10⁻²⁷` of it, so asking
/// `2 · den · (|q| + 1) < 10²⁶` leaves a margin of ten. `unit` must be positive.
pub fn round_units(value: Decimal, unit: Decimal, strategy: RoundingStrategy) -> Option<i128> {
    let (num, den) = quotient_terms(value, unit)?;
    let (q, r) = div_rem(num, den);
    let reach = den.checked_mul(2)?.checked_mul(q.checked_abs()? + 1)?;
    if reach >= POW10[26] {
        return None;
    }
    let step = num.signum();
    let away = match strategy {
        RoundingStrategy::ToNegativeInfinity => r != 0 && step < 0,
        RoundingStrategy::ToPositiveInfinity => r != 0 && step > 0,
        RoundingStrategy::MidpointNearestEven => away_half_even((q, r), den),
        _ => return None,
    };
    Some(if away { q + step } else { q })
}

/// `value / 10 000` (a value in basis points as a fraction), exactly: the same value as the
/// `Decimal` division, by moving the decimal point where the scale has room (a division is
/// the costliest step of a maker's ladder, which runs every simulated second).
pub fn per_ten_thousand(value: Decimal) -> Decimal {
    match value.scale() + 4 <= Decimal::MAX_SCALE {
        true => Decimal::from_i128_with_scale(value.mantissa(), value.scale() + 4),
        false => value / Decimal::from(10_000),
    }
}

/// `value` is a whole multiple of `unit` (exact; falls back to `Decimal` remainder only where
/// [`whole_units`] cannot tell).
pub fn is_multiple(value: Decimal, unit: Decimal) -> bool {
    whole_units(value, unit).is_some() || (value % unit).is_zero()
}

/// `n` units of `unit`, with the unit's scale: the same value and representation as
/// `Decimal::from(n) * unit`, without the general multiplication.
pub fn from_units(n: i64, unit: Decimal) -> Decimal {
    if n == 0 {
        // A zero product carries no scale.
        return Decimal::ZERO;
    }
    Decimal::from_i128_with_scale(i128::from(n) * unit.mantissa(), unit.scale())
}

/// `mantissa × 10^-scale` rounded half-even to the ledger's 10 decimals, as the mantissa at
/// scale 10: [`round_ledger`] in integers, for passes that value every open position. Exact,
/// and the same value as `round_ledger` of the same number. None when the result leaves
/// i128 or `scale` is beyond what a product of two decimals carries (56).
pub fn ledger_mantissa(mantissa: i128, scale: u32) -> Option<i128> {
    let scale = scale as usize;
    if scale <= LEDGER_DECIMALS as usize {
        return mantissa.checked_mul(POW10[LEDGER_DECIMALS as usize - scale]);
    }
    let unit = *POW10.get(scale - LEDGER_DECIMALS as usize)?;
    let (q, r) = div_rem(mantissa, unit);
    // |r| < unit ≤ 10^28, so twice it fits.
    Some(half_even(mantissa, (q, r), unit))
}

/// `n / d` and `n % d` (truncated) for a positive `d`, divided in 64 bits where both fit: most
/// mantissas and units do, and an i128 division is a library call several times the machine's.
fn div_rem(n: i128, d: i128) -> (i128, i128) {
    match (i64::try_from(n), i64::try_from(d)) {
        (Ok(n), Ok(d)) => (i128::from(n / d), i128::from(n % d)),
        _ => (n / d, n % d),
    }
}

/// `n / d` rounded half-even, for a positive `d`, from its truncated quotient and remainder
/// (`2|r|` must fit an i128).
fn half_even(n: i128, (q, r): (i128, i128), d: i128) -> i128 {
    if away_half_even((q, r), d) {
        q + n.signum()
    } else {
        q
    }
}

/// Whether half-even rounding of `q + r / d` (truncated quotient and remainder, `d`
/// positive, `2|r|` fitting an i128) moves it one away from zero.
fn away_half_even((q, r): (i128, i128), d: i128) -> bool {
    let twice = 2 * r.abs();
    twice > d || (twice == d && q % 2 != 0)
}

/// `a × b` where it fits an i128: widened without a check where both fit 64 bits (their
/// product always fits), the checked 128-bit multiplication only past that.
fn checked_product(a: i128, b: i128) -> Option<i128> {
    match (i64::try_from(a), i64::try_from(b)) {
        (Ok(a), Ok(b)) => Some(i128::from(a) * i128::from(b)),
        _ => a.checked_mul(b),
    }
}

/// The largest mantissa a `Decimal` holds: 2⁹⁶ − 1.
const MAX_MANTISSA: u128 = (1 << 96) - 1;

/// `round_ledger(factors[0] × factors[1] × …)`: the same value and representation (scale
/// and sign, zeros included) as the `Decimal` expression, computed on the mantissas in
/// integers wherever each partial product is exact in a `Decimal` (its mantissa within 96
/// bits, its scale at most 28), and by the `Decimal` arithmetic where one is not. A periodic
/// pass books one such product per open position: funding's `size × mark × rate`,
/// settlement's `|size| × mark × initial`; the general multiplications and the rounding were
/// most of what the pass computed.
pub fn round_ledger_product(factors: &[Decimal]) -> Decimal {
    let exact = factors.iter().try_fold((1i128, 0u32), |(m, s), f| {
        let m = checked_product(m, f.mantissa())?;
        let s = s + f.scale();
        (m.unsigned_abs() <= MAX_MANTISSA && s <= 28).then_some((m, s))
    });
    let Some((mantissa, scale)) = exact else {
        let product = factors.iter().fold(Decimal::ONE, |p, f| p * f);
        return round_ledger(product);
    };
    if mantissa == 0 {
        // A `Decimal` product with a zero factor is a plain zero.
        return Decimal::ZERO;
    }
    if scale <= LEDGER_DECIMALS {
        return Decimal::from_i128_with_scale(mantissa, scale);
    }
    let rounded = ledger_mantissa(mantissa, scale).expect("a 96-bit mantissa rounds in i128");
    // A product that rounds to zero is a plain zero at the ledger's scale, as `round_dp` makes it.
    Decimal::from_i128_with_scale(rounded, LEDGER_DECIMALS)
}

/// `round_ledger(num / den)` for a positive `den`: the same value and representation as the
/// `Decimal` division rounded to the ledger, computed on the mantissas in integers where they
/// prove it, and by the `Decimal` arithmetic where they do not. A position's weighted entry
/// price is one such quotient per adding fill, and the general division was most of what a
/// fill's position move cost.
///
/// The integers decide a quotient that is not whole at 10 decimals, `N / D` in 10⁻¹⁰ units:
/// it is at least `1 / (2D)` units from every half, where half-even rounding changes its
/// answer. The `Decimal` quotient has 28 significant digits (or its scale is 28), so it is
/// within `(|x| + 1) · 10⁻¹⁷` units of the exact `x`; asking `2D · (|x| + 1) < 10¹⁶` (margin
/// ten) puts both on the same side of every half and leaves the `Decimal` quotient with a
/// digit past the tenth decimal, so its rounding has the ledger's scale. A quotient whole at
/// 10 decimals keeps the scale the `Decimal` division's own trimming gives it, which the
/// integers do not model: that case, and a zero, go to the `Decimal` arithmetic.
pub fn ledger_quotient(num: Decimal, den: Decimal) -> Decimal {
    assert!(
        den.is_sign_positive() && !den.is_zero(),
        "a ledger quotient's divisor is positive"
    );
    integer_ledger_quotient(num, den).unwrap_or_else(|| round_ledger(num / den))
}

/// [`ledger_quotient`]'s integers, or None where they do not decide it.
fn integer_ledger_quotient(num: Decimal, den: Decimal) -> Option<Decimal> {
    let shift = LEDGER_DECIMALS as i64 + i64::from(den.scale()) - i64::from(num.scale());
    let (n, d) = match shift >= 0 {
        true => (
            checked_product(num.mantissa(), *POW10.get(shift as usize)?)?,
            den.mantissa(),
        ),
        false => (
            num.mantissa(),
            checked_product(den.mantissa(), POW10[(-shift) as usize])?,
        ),
    };
    let (q, r) = div_rem(n, d);
    let whole = div_rem(q.checked_abs()?, POW10[LEDGER_DECIMALS as usize]).0 + 2;
    if r == 0 || d.checked_mul(2)?.checked_mul(whole)? >= POW10[16] {
        return None;
    }
    let rounded = half_even(n, (q, r), d);
    // A quotient that rounds to zero keeps the `Decimal` rounding's sign of zero.
    (rounded != 0).then(|| Decimal::from_i128_with_scale(rounded, LEDGER_DECIMALS))
}

/// Whether `value` is already at the ledger precision: what [`round_ledger`] leaves alone. A
/// scale within the precision answers without rounding (the bookings assert this on every
/// movement).
pub fn is_ledger_rounded(value: Decimal) -> bool {
    value.scale() <= LEDGER_DECIMALS || round_ledger(value) == value
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
    use proptest::prelude::*;
    use std::str::FromStr;

    fn d(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    /// Any decimal: mantissas from a few digits to the full 96 bits, every scale.
    fn any_decimal() -> impl Strategy<Value = Decimal> {
        let digits = prop_oneof![
            3 => 0u128..1_000,
            3 => 0u128..10_000_000_000,
            1 => 0u128..=MAX_MANTISSA
        ];
        (digits, 0u32..=28, any::<bool>()).prop_map(|(m, scale, negative)| {
            let mut d = Decimal::from_i128_with_scale(m as i128, scale);
            d.set_sign_negative(negative);
            d
        })
    }

    proptest! {
        // Products beyond a `Decimal` are drawn and skipped.
        #![proptest_config(ProptestConfig { max_global_rejects: 1 << 20, ..ProptestConfig::default() })]
        #[test]
        fn a_ledger_product_is_the_decimal_expression_bit_for_bit_d7(
            factors in proptest::collection::vec(any_decimal(), 1..=3)
        ) {
            let product = factors.iter().try_fold(Decimal::ONE, |p, f| p.checked_mul(*f));
            // Beyond a `Decimal`, both panic alike.
            prop_assume!(product.is_some());
            let expected = round_ledger(product.expect("assumed"));
            let product = round_ledger_product(&factors);
            prop_assert_eq!(product.serialize(), expected.serialize(), "{:?}", factors);
        }
    }

    /// A positive unit of a few digits at a price's or a grid's scale.
    fn any_unit() -> impl Strategy<Value = Decimal> {
        (1i64..100_000, 0u32..=12).prop_map(|(m, scale)| Decimal::new(m, scale))
    }

    proptest! {
        #[test]
        fn rounded_units_are_the_decimal_quotient_rounded_or_none(
            value in any_decimal(),
            unit in any_unit(),
            // Values a hair (10⁻²⁰ or 10⁻²⁸) off a whole number or a half of units: where a
            // decimal quotient could round across it.
            near in (1i64..1_000_000_000, 0i64..=2, -3i64..=3),
        ) {
            let (whole, halves, hair) = near;
            let on = unit * (Decimal::from(whole) + Decimal::new(halves * 5, 1));
            let values = [value, on + Decimal::new(hair, 20), on + Decimal::new(hair, 28)];
            for v in values {
                for strategy in [
                    RoundingStrategy::ToNegativeInfinity,
                    RoundingStrategy::ToPositiveInfinity,
                    RoundingStrategy::MidpointNearestEven,
                ] {
                    let Some(n) = round_units(v, unit, strategy) else { continue };
                    let expected = (v / unit).round_dp_with_strategy(0, strategy);
                    prop_assert_eq!(Decimal::from(n), expected, "{} / {} {:?}", v, unit, strategy);
                }
            }
        }
    }

    /// A weighted price as a position's adding fill makes it: `(held × |s| + price × |q|) /
    /// |s + q|`, prices and sizes at the grids' scales.
    fn weighted_price() -> impl Strategy<Value = (Decimal, Decimal)> {
        let price = (1i64..100_000_000, 0u32..=4).prop_map(|(m, s)| Decimal::new(m, s));
        let size = (1i64..1_000_000, 0u32..=8).prop_map(|(m, s)| Decimal::new(m, s));
        (price.clone(), size.clone(), price, size)
            .prop_map(|(held, s, price, q)| (held * s + price * q, s + q))
    }

    proptest! {
        // Quotients beyond a `Decimal` are drawn and skipped.
        #![proptest_config(ProptestConfig {
            cases: 20_000, max_global_rejects: 1 << 20, ..ProptestConfig::default()
        })]
        #[test]
        fn a_ledger_quotient_is_the_decimal_division_rounded_bit_for_bit_d7(
            any in (any_decimal(), any_unit()),
            weighted in weighted_price(),
            // A hair (10⁻²⁰ or 10⁻²⁸ of the divisor) off a half at the tenth decimal: where
            // a decimal quotient could round across it.
            near in (1i64..1_000_000_000, -3i64..=3),
        ) {
            let (whole, hair) = near;
            let den = any.1;
            let half = den * (Decimal::new(whole, 10) + Decimal::new(5, 11));
            let halves = [half + den * Decimal::new(hair, 20), half + den * Decimal::new(hair, 28)];
            let cases = [any, weighted, (halves[0], den), (halves[1], den), (half, den)];
            for (num, den) in cases {
                let Some(quotient) = num.checked_div(den) else { continue };
                let expected = round_ledger(quotient);
                let got = ledger_quotient(num, den);
                prop_assert_eq!(got.serialize(), expected.serialize(), "{} / {}", num, den);
            }
        }
    }

    #[test]
    fn a_weighted_price_is_found_by_the_integers_a_whole_or_a_zero_by_the_decimals() {
        let decided = |num: &str, den: &str| integer_ledger_quotient(d(num), d(den)).is_some();
        // (100 × 0.3 + 101 × 0.4) / 0.7 = 100.571428…: not whole at 10 decimals.
        assert!(decided("70.4", "0.7"));
        assert_eq!(ledger_quotient(d("70.4"), d("0.7")), d("100.5714285714"));
        // Whole at 10 decimals: the `Decimal` division's scale, which the integers leave to it.
        assert!(!decided("300.00", "3"));
        assert_eq!(ledger_quotient(d("300.00"), d("3")).scale(), 2);
        // Rounds to zero: the `Decimal` rounding's zero.
        assert!(!decided("0.00000000001", "3"));
    }

    proptest! {
        #[test]
        fn a_value_per_ten_thousand_is_the_decimal_quotient(value in any_decimal()) {
            prop_assert_eq!(per_ten_thousand(value), value / Decimal::from(10_000));
        }
    }

    #[test]
    fn rounded_units_round_as_asked_and_refuse_what_they_cannot_prove() {
        let floor = RoundingStrategy::ToNegativeInfinity;
        let ceil = RoundingStrategy::ToPositiveInfinity;
        let even = RoundingStrategy::MidpointNearestEven;
        assert_eq!(round_units(d("60000.35"), d("0.1"), floor), Some(600_003));
        assert_eq!(round_units(d("60000.35"), d("0.1"), ceil), Some(600_004));
        assert_eq!(round_units(d("60000.35"), d("0.1"), even), Some(600_004));
        assert_eq!(round_units(d("60000.25"), d("0.1"), even), Some(600_002));
        assert_eq!(round_units(d("-0.25"), d("0.1"), floor), Some(-3));
        assert_eq!(round_units(d("-0.25"), d("0.1"), ceil), Some(-2));
        assert_eq!(round_units(d("-0.25"), d("0.1"), even), Some(-2));
        assert_eq!(round_units(d("7.5"), d("2.5"), floor), Some(3));
        assert_eq!(
            round_units(d("1"), d("0.1"), RoundingStrategy::MidpointAwayFromZero),
            None
        );
        // A unit so fine, or a quotient so large, that 28 digits could round across a half.
        assert_eq!(
            round_units(d("1"), d("0.0000000000000000000000000003"), floor),
            None
        );
        assert_eq!(
            round_units(d("79228162514264337593543950335"), d("3"), floor),
            None
        );
    }

    #[test]
    fn a_ledger_product_rounds_half_to_even_and_a_tiny_loss_to_a_plain_zero_d7() {
        let p = |f: &[&str]| round_ledger_product(&f.iter().map(|s| d(s)).collect::<Vec<_>>());
        assert_eq!(p(&["0.00005", "0.000001"]).to_string(), "0.0000000000");
        assert_eq!(p(&["0.00015", "0.000001"]).to_string(), "0.0000000002");
        assert_eq!(p(&["0.000015", "0.00001"]).to_string(), "0.0000000002");
        assert_eq!(p(&["0.000025", "0.00001"]).to_string(), "0.0000000002");
        let tiny = p(&["-0.000001", "0.00001"]);
        assert_eq!(
            tiny.serialize(),
            round_ledger(d("-0.00000000001")).serialize()
        );
        assert_eq!(p(&["1.5", "0"]).serialize(), Decimal::ZERO.serialize());
    }

    #[test]
    fn json_numbers_with_an_exponent_are_read_exactly_or_refused_d4() {
        let n = |t: &str| parse_json_number("maker_fee", t, Sign::Signed);
        assert_eq!(n("1e-7").unwrap().to_string(), "0.0000001");
        assert_eq!(n("-2.5E+3").unwrap(), d("-2500"));
        assert_eq!(n("7.25").unwrap().to_string(), "7.25");
        assert_eq!(n("1E0").unwrap(), d("1"));
        assert_eq!(n("1e-28").unwrap(), d("0.0000000000000000000000000001"));
        // Not held exactly: refused, never rounded.
        assert!(matches!(n("5e-324"), Err(DecimalError::TooPrecise { .. })));
        assert!(matches!(n("1.5e-28"), Err(DecimalError::TooPrecise { .. })));
        assert!(matches!(n("1e29"), Err(DecimalError::TooLarge { .. })));
        assert!(matches!(
            n("1e99999999999"),
            Err(DecimalError::TooLarge { .. })
        ));
        // The mantissa keeps the plain-notation rules, the sign rule included.
        assert!(n(".5e1").is_err());
        assert!(parse_json_number("cash_amount", "-1e2", Sign::Unsigned).is_err());
    }

    #[test]
    fn is_ledger_rounded_is_what_rounding_leaves_alone() {
        for v in [
            "1.2345678901",
            "1.23456789010000",
            "0.00000000005",
            "-7",
            "1.00000000001",
        ] {
            let v = d(v);
            assert_eq!(is_ledger_rounded(v), round_ledger(v) == v, "{v}");
        }
    }

    #[test]
    fn whole_units_is_the_exact_quotient_or_none() {
        assert_eq!(whole_units(d("60000"), d("0.1")), Some(600_000));
        assert_eq!(whole_units(d("60000.30"), d("0.1")), Some(600_003));
        assert_eq!(whole_units(d("60000.35"), d("0.1")), None);
        assert_eq!(whole_units(d("0.0025"), d("0.0001")), Some(25));
        assert_eq!(whole_units(d("150.001"), d("0.001")), Some(150_001));
        assert_eq!(whole_units(d("-0.3"), d("0.1")), Some(-3));
        assert_eq!(whole_units(d("0"), d("0.01")), Some(0));
        // Units whose mantissa is not 1 go through the division.
        assert_eq!(whole_units(d("7.5"), d("2.5")), Some(3));
        assert_eq!(whole_units(d("7.6"), d("2.5")), None);
        assert_eq!(whole_units(d("1.25"), d("0.25")), Some(5));
        // Wide values take the 128-bit path and stay exact.
        let wide = Decimal::from_i128_with_scale(79_228_162_514_264_337_593_543_950_335, 0);
        assert_eq!(
            whole_units(wide, d("1")),
            Some(79_228_162_514_264_337_593_543_950_335)
        );
        assert_eq!(
            whole_units(wide, d("5")),
            Some(15_845_632_502_852_867_518_708_790_067)
        );
        assert_eq!(whole_units(wide, d("2")), None);
    }

    proptest! {
        #[test]
        fn a_product_at_most_a_bound_is_the_decimal_comparison_or_none(
            a in any_decimal(),
            b in any_decimal(),
            max in prop_oneof![Just(10_000_000u64), 0u64..1_000_000_000_000],
        ) {
            if let Some(at_most) = product_at_most(a, b, max) {
                let product = a.checked_mul(b).expect("an exact product is a decimal");
                prop_assert_eq!(at_most, product <= Decimal::from(max), "{} × {}", a, b);
            }
        }
    }

    #[test]
    fn pow10_is_checked_pow_for_every_exponent() {
        for exp in 0..=64 {
            assert_eq!(pow10(exp), 10i128.checked_pow(exp), "10^{exp}");
        }
    }

    proptest! {
        #[test]
        fn nanos_are_the_value_times_a_billion_rounded_down_or_up(
            value in any_decimal(),
            up in any::<bool>(),
        ) {
            let (n, billion) = (nanos(value, up), Decimal::from(1_000_000_000));
            if let Some(exact) = value.checked_mul(billion) {
                let rounded = if up { exact.ceil() } else { exact.floor() };
                prop_assert_eq!(Decimal::from_i128_with_scale(n, 0), rounded, "{}", value);
            } else {
                // Beyond a `Decimal`: so large a value has at most 8 decimals, and its key
                // is exact either way.
                let unit = 1_000_000_000i128;
                let whole = Decimal::from_i128_with_scale(n.div_euclid(unit), 0);
                let part = Decimal::from_i128_with_scale(n.rem_euclid(unit), NANO_DECIMALS);
                prop_assert_eq!(whole + part, value);
            }
        }
    }

    proptest! {
        #[test]
        fn whole_units_in_64_bits_are_those_in_128_or_none(
            value in any_decimal(),
            unit in any_unit(),
            whole in (-1_000_000_000i64..1_000_000_000, 0u32..=12),
        ) {
            // Multiples of the unit too, since most values drawn are not.
            let (n, scale) = whole;
            let multiple = unit * Decimal::new(n, scale).trunc();
            for v in [value, multiple] {
                if let Some(answer) = whole_units_64(v, unit) {
                    prop_assert_eq!(answer, wide_whole_units(v, unit), "{} / {}", v, unit);
                }
            }
        }
    }

    #[test]
    fn whole_units_agrees_with_decimal_division() {
        let values = [
            "0", "1", "0.1", "60000", "59999.9", "0.0001", "123.456", "1e-3", "42.000",
        ];
        let units = [
            "0.1", "0.01", "0.001", "0.0001", "1", "0.5", "0.25", "2.5", "10",
        ];
        for v in values {
            let v = Decimal::from_scientific(v).unwrap_or_else(|_| d(v));
            for u in units {
                let u = d(u);
                let q = v / u;
                let expected = q
                    .fract()
                    .is_zero()
                    .then(|| q.trunc().mantissa() / 10i128.pow(q.trunc().scale()));
                assert_eq!(whole_units(v, u), expected, "{v} / {u}");
                assert_eq!(is_multiple(v, u), (v % u).is_zero(), "{v} % {u}");
            }
        }
    }

    #[test]
    fn from_units_matches_multiplication_in_value_and_scale() {
        for (n, unit) in [
            (600_003i64, "0.1"),
            (25, "0.0001"),
            (-3, "0.01"),
            (3, "2.5"),
            (0, "0.001"),
        ] {
            let unit = d(unit);
            let expected = Decimal::from(n) * unit;
            let got = from_units(n, unit);
            assert_eq!((got, got.scale()), (expected, expected.scale()));
        }
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

    #[test]
    fn ledger_mantissa_is_round_ledger_in_integers_d7() {
        let cases = [
            ("0.00000000005", "0.0000000000"),
            ("0.00000000015", "0.0000000002"),
            ("-0.00000000025", "-0.0000000002"),
            ("-0.000000000251", "-0.0000000003"),
            ("123.456", "123.456"),
            ("-7", "-7"),
            ("0.1234567890123456789012345678", "0.1234567890"),
        ];
        for (value, rounded) in cases {
            let v = d(value);
            let m = ledger_mantissa(v.mantissa(), v.scale()).unwrap();
            assert_eq!(Decimal::from_i128_with_scale(m, 10), d(rounded), "{value}");
            assert_eq!(
                Decimal::from_i128_with_scale(m, 10),
                round_ledger(v),
                "{value}"
            );
        }
        // Either side of the 64-bit division's edge, every scale that rounds.
        let edges = [
            i64::MAX as i128,
            i64::MIN as i128,
            i64::MAX as i128 + 1,
            -(1i128 << 64),
        ];
        for (m, scale) in edges
            .into_iter()
            .flat_map(|m| (11..=28).map(move |s| (m, s)))
        {
            let v = Decimal::from_i128_with_scale(m, scale);
            let rounded = ledger_mantissa(m, scale).unwrap();
            assert_eq!(
                Decimal::from_i128_with_scale(rounded, 10),
                round_ledger(v),
                "{v}"
            );
        }
        assert_eq!(ledger_mantissa(1, 57), None, "beyond a product's scale");
        assert_eq!(ledger_mantissa(i128::MAX, 0), None, "overflow");
    }

    #[test]
    fn division_by_a_constant_power_of_ten_rounds_half_even_like_the_ledger_d7() {
        for x in [
            0i64,
            5,
            15,
            25,
            -25,
            -35,
            149,
            150,
            151,
            -150,
            i64::MAX,
            i64::MIN + 1,
        ] {
            for k in 1..=18u8 {
                let want = ledger_mantissa(i128::from(x), 10 + u32::from(k)).unwrap();
                assert_eq!(i128::from(div_pow10_half_even(x, k)), want, "{x} / 10^{k}");
            }
        }
    }
}
