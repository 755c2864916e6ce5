//! Exact fixed point at 18 decimals: the risk pass's sums and comparisons over a million
//! positions as integer arithmetic, where `Decimal` spends most of its time aligning scales.
//!
//! Every conversion is exact or refused: a value with more than 18 decimals, or of 2¹⁰⁰
//! units of 10⁻¹⁸ or more (about 1.27 × 10¹² in units), is `None`, and so is an operation
//! that would overflow; the caller then decides with `Decimal`, so the two paths never
//! disagree. The bound leaves room: sums of fewer than 2²⁶ values cannot overflow.

use rust_decimal::Decimal;

use crate::decimal::POW10_64;

/// Decimals of a fixed-point value: more than any price, size or ledger amount carries.
pub const SCALE: u32 = 18;

/// Every fixed-point value converted from a decimal is below this in magnitude.
pub const BOUND: u128 = 1 << 100;

/// Per number of decimals `k` short of [`SCALE`], the largest mantissa that stays under
/// [`BOUND`] once scaled by 10^k.
const MANTISSA_LIMIT: [u128; 19] = {
    let mut limits = [0u128; 19];
    let mut k = 0;
    while k < 19 {
        limits[k] = (BOUND - 1) / POW10_64[k] as u128;
        k += 1;
    }
    limits
};

/// `d` as an integer count of 10⁻¹⁸, when exact and under [`BOUND`].
#[inline]
pub fn from_decimal(d: Decimal) -> Option<i128> {
    let up = SCALE.checked_sub(d.scale())? as usize;
    let mantissa = d.mantissa();
    (mantissa.unsigned_abs() <= MANTISSA_LIMIT[up]).then(|| mantissa * POW10_64[up] as i128)
}

/// `a × b`, None on overflow. Operands whose bit lengths sum to at most 126 cannot
/// overflow and take a plain multiplication.
#[inline]
pub fn mul(a: i128, b: i128) -> Option<i128> {
    if a.unsigned_abs().leading_zeros() + b.unsigned_abs().leading_zeros() >= 130 {
        Some(a * b)
    } else {
        a.checked_mul(b)
    }
}

/// The decimal of a fixed-point value: exact whenever a `Decimal` holds it (trailing zeros
/// are dropped until it fits); otherwise rounded half-even to the 28 digits a `Decimal` has,
/// as a `Decimal` sum of the same values would have been.
pub fn to_decimal(value: i128) -> Decimal {
    let mut scale = SCALE;
    let mut v = value;
    while v % 10 == 0 && scale > 0 && Decimal::try_from_i128_with_scale(v, scale).is_err() {
        v /= 10;
        scale -= 1;
    }
    Decimal::try_from_i128_with_scale(v, scale).unwrap_or_else(|_| {
        let whole = Decimal::from_i128_with_scale(value / POW10_64[18] as i128, 0);
        let part = Decimal::from_i128_with_scale(value % POW10_64[18] as i128, SCALE);
        whole + part
    })
}

/// A fraction `m / 10^s` prepared for comparisons against fixed-point products: the bounds
/// under which its products cannot overflow are worked out once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fraction {
    mantissa: i128,
    shift: i128,
    /// |value| at most this: `value × 10^s` fits.
    value_max: u128,
    /// |of| at most this: `m × of` fits.
    of_max: u128,
}

impl Fraction {
    /// None for a fraction with more than 18 decimals.
    pub fn new(fraction: Decimal) -> Option<Fraction> {
        let shift = i128::from(*POW10_64.get(fraction.scale() as usize)?);
        let mantissa = fraction.mantissa();
        Some(Fraction {
            mantissa,
            shift,
            value_max: i128::MAX as u128 / shift as u128,
            of_max: match mantissa.unsigned_abs() {
                0 => u128::MAX,
                m => i128::MAX as u128 / m,
            },
        })
    }

    /// Whether `value < fraction × of`, exactly: `value × 10^s < m × of`. None where a
    /// product would overflow.
    #[inline]
    pub fn below(&self, value: i128, of: i128) -> Option<bool> {
        if value.unsigned_abs() > self.value_max || of.unsigned_abs() > self.of_max {
            return None;
        }
        Some(value * self.shift < self.mantissa * of)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    #[test]
    fn conversions_are_exact_or_refused() {
        assert_eq!(from_decimal(d("1.5")), Some(1_500_000_000_000_000_000));
        assert_eq!(from_decimal(d("-0.000000000000000001")), Some(-1));
        assert_eq!(from_decimal(d("0.0000000000000000001")), None); // 19 decimals
        assert_eq!(from_decimal(Decimal::MAX), None);
        // At 10 decimals, the largest mantissa under the bound converts, the next does not.
        let largest = MANTISSA_LIMIT[8] as i128;
        let at_ten = |m: i128| from_decimal(Decimal::from_i128_with_scale(m, 10));
        assert_eq!(at_ten(largest), Some(largest * 100_000_000));
        assert!(at_ten(largest).unwrap() < BOUND as i128);
        assert_eq!(at_ten(largest + 1), None);
        for s in [
            "0",
            "60000.1",
            "-320.0000000001",
            "123456789012.123456789012345678",
        ] {
            let v = d(s);
            assert_eq!(to_decimal(from_decimal(v).unwrap()), v, "{s}");
        }
        // Past a Decimal's 96-bit mantissa at 18 decimals, trailing zeros give way.
        let big = from_decimal(d("100000000000")).unwrap() * 1_000;
        assert_eq!(to_decimal(big), d("100000000000000"));
    }

    #[test]
    fn products_are_plain_below_the_bound_and_checked_above_it() {
        assert_eq!(mul(-(1 << 62), 1 << 62), Some(-(1 << 124)));
        assert_eq!(mul(i128::MAX, 1), Some(i128::MAX));
        assert_eq!(mul(i128::MAX, 2), None);
        assert_eq!(mul(i128::MIN, -1), None);
        assert_eq!(mul(1 << 100, -(1 << 26)), Some(-(1 << 126)));
        assert_eq!(mul(1 << 100, 1 << 27), None);
    }

    #[test]
    fn fractions_compare_by_multiplication_at_the_edge() {
        let thirty = Fraction::new(d("0.30")).unwrap();
        let hundred = from_decimal(d("100")).unwrap();
        assert_eq!(
            thirty.below(from_decimal(d("30")).unwrap(), hundred),
            Some(false)
        );
        let just_under = from_decimal(d("29.999999999999999999")).unwrap();
        assert_eq!(thirty.below(just_under, hundred), Some(true));
        assert_eq!(thirty.below(i128::MAX, hundred), None);
        assert_eq!(thirty.below(0, i128::MAX), None);
        assert_eq!(Fraction::new(d("0.0000000000000000001")), None);
    }
}
