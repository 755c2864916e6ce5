//! Margin states and the figures behind them (interface §2.6, §6 rules 4–5; D10), and the
//! depreciation thresholds of §2.2 and §3.3. Pure arithmetic over decimals, shared by the
//! engine's risk pass and the read side, so both give the same figures from the same inputs.

use rust_decimal::{Decimal, RoundingStrategy};
use serde::{Deserialize, Serialize};

use crate::fixed;

/// An account's margin state in one settlement currency (D10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum MarginState {
    /// `leverage_ratio` at or above the margin-call threshold.
    Normal,
    /// Below the margin-call threshold: a `liquidations` message, nothing closed.
    MarginCall,
    /// Below the liquidation threshold: orders cancelled, positions closed.
    Liquidation,
}

impl MarginState {
    pub fn as_str(self) -> &'static str {
        match self {
            MarginState::Normal => "normal",
            MarginState::MarginCall => "margin_call",
            MarginState::Liquidation => "liquidation",
        }
    }
}

/// The state of an account whose equity (collateral + unrealised PnL) stands against a
/// position notional, under a profile's thresholds. Decided without dividing:
/// `equity / notional < t` ⟺ `equity < t × notional` (notional is positive), and the 4-decimal
/// `leverage_ratio` rounded down compares with a 2-decimal threshold the same way.
pub fn margin_state(
    equity: Decimal,
    notional: Decimal,
    margin_call: Decimal,
    liquidation: Decimal,
) -> MarginState {
    if notional.is_zero() {
        MarginState::Normal
    } else if equity < liquidation * notional {
        MarginState::Liquidation
    } else if equity < margin_call * notional {
        MarginState::MarginCall
    } else {
        MarginState::Normal
    }
}

/// §2.6: (collateral + unrealised PnL) / position notional, rounded down to 4 decimals;
/// 1.0000 with no open position.
pub fn leverage_ratio(equity: Decimal, notional: Decimal) -> Decimal {
    let ratio = if notional.is_zero() {
        Decimal::ONE
    } else {
        (equity / notional).round_dp_with_strategy(4, RoundingStrategy::ToZero)
    };
    with_scale(ratio, 4)
}

/// §2.6 (deprecated): used margin / total equity, 4 decimals half-even; 0 when equity is zero.
pub fn margin_ratio(used: Decimal, equity: Decimal) -> Decimal {
    let ratio = if equity.is_zero() {
        Decimal::ZERO
    } else {
        (used / equity).round_dp_with_strategy(4, RoundingStrategy::MidpointNearestEven)
    };
    with_scale(ratio, 4)
}

/// §6 rule 4: the amount needed to restore initial margin, `used − collateral` on the
/// ledger basis, 0 when available margin is not negative.
pub fn margin_deficit(collateral: Decimal, used: Decimal) -> Decimal {
    (used - collateral).max(Decimal::ZERO)
}

fn with_scale(mut value: Decimal, scale: u32) -> Decimal {
    value.rescale(scale);
    value
}

/// A position's depreciation (§2.2) at a mark: `initial_value = amount × avg_fill_price`,
/// `current_value` = initial value plus the PnL since entry at the mark (a short depreciates
/// when the price rises), and the drop as a percentage of the initial value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Depreciation {
    pub initial_value: Decimal,
    pub current_value: Decimal,
    /// Rounded down to 4 decimals, so it never shows a threshold not yet reached.
    pub depreciation_pct: Decimal,
}

impl Depreciation {
    /// `size` is signed (long positive); every value exact but the percentage.
    pub fn of(size: Decimal, avg_fill_price: Decimal, mark: Decimal) -> Self {
        let initial_value = size.abs() * avg_fill_price;
        let current_value = initial_value + size * (mark - avg_fill_price);
        let drop = initial_value - current_value;
        let pct = if initial_value.is_zero() {
            Decimal::ZERO
        } else {
            (drop * Decimal::ONE_HUNDRED / initial_value)
                .round_dp_with_strategy(4, RoundingStrategy::ToZero)
        };
        Depreciation {
            initial_value,
            current_value,
            depreciation_pct: with_scale(pct, 4),
        }
    }
}

/// A profile's two thresholds prepared for [`margin_state_fixed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    margin_call: fixed::Fraction,
    liquidation: fixed::Fraction,
}

impl Thresholds {
    /// None for thresholds finer than fixed point.
    pub fn new(margin_call: Decimal, liquidation: Decimal) -> Option<Thresholds> {
        Some(Thresholds {
            margin_call: fixed::Fraction::new(margin_call)?,
            liquidation: fixed::Fraction::new(liquidation)?,
        })
    }
}

/// [`margin_state`] over fixed-point figures ([`crate::fixed`]), the same decision by the
/// same multiplications; None where a product would overflow (then decide with decimals).
pub fn margin_state_fixed(equity: i128, notional: i128, t: &Thresholds) -> Option<MarginState> {
    Some(if notional == 0 {
        MarginState::Normal
    } else if t.liquidation.below(equity, notional)? {
        MarginState::Liquidation
    } else if t.margin_call.below(equity, notional)? {
        MarginState::MarginCall
    } else {
        MarginState::Normal
    })
}

/// §3.3: the highest 10 % threshold a position's drop has reached (1 = 10 %, 2 = 20 %, ...),
/// 0 when under 10 %; a drop equal to a threshold reaches it (D9). The size cancels out:
/// `drop / initial = sign × (avg − mark) / avg`, so this is decided per unit, in fixed point
/// where the prices fit (exact integer arithmetic), else in decimals.
pub fn depreciation_level(size: Decimal, avg_fill_price: Decimal, mark: Decimal) -> u8 {
    depreciation_level_at(size, avg_fill_price, (mark, fixed::from_decimal(mark)))
}

/// [`depreciation_level`] at a mark given with its fixed-point form (None where it has
/// none), which a pass over many positions of one market converts once.
#[inline]
pub fn depreciation_level_at(
    size: Decimal,
    avg_fill_price: Decimal,
    (mark, mark_fixed): (Decimal, Option<i128>),
) -> u8 {
    if size.is_zero() {
        return 0;
    }
    let long = size > Decimal::ZERO;
    let fixed = mark_fixed
        .zip(fixed::from_decimal(avg_fill_price))
        .and_then(|(mark, avg)| depreciation_level_fixed(long, avg, mark));
    if let Some(level) = fixed {
        return level;
    }
    let initial = size.abs() * avg_fill_price;
    // The drop: what the position lost since entry at the mark.
    let drop = size * (avg_fill_price - mark);
    if initial.is_zero() || drop * Decimal::TEN < initial {
        return 0;
    }
    let level = (drop * Decimal::TEN / initial).floor();
    u8::try_from(level).unwrap_or(u8::MAX)
}

/// [`depreciation_level`] of a long (or short) position over fixed-point prices: exact
/// integer arithmetic, so the floor is never moved by a rounded quotient. None where a
/// product would overflow.
fn depreciation_level_fixed(long: bool, avg_fill_price: i128, mark: i128) -> Option<u8> {
    if avg_fill_price <= 0 {
        return Some(0);
    }
    let drop = match long {
        true => avg_fill_price.checked_sub(mark)?,
        false => mark.checked_sub(avg_fill_price)?,
    };
    let tenfold = fixed::mul(drop, 10)?;
    if tenfold < avg_fill_price {
        return Some(0);
    }
    Some(u8::try_from(tenfold / avg_fill_price).unwrap_or(u8::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    #[test]
    fn states_follow_the_thresholds_at_their_edges_d10() {
        let (call, liq) = (d("0.50"), d("0.30"));
        assert_eq!(
            margin_state(d("50"), d("100"), call, liq),
            MarginState::Normal
        );
        assert_eq!(
            margin_state(d("49.99"), d("100"), call, liq),
            MarginState::MarginCall
        );
        assert_eq!(
            margin_state(d("30"), d("100"), call, liq),
            MarginState::MarginCall
        );
        assert_eq!(
            margin_state(d("29.99"), d("100"), call, liq),
            MarginState::Liquidation
        );
        assert_eq!(
            margin_state(d("-1"), d("0"), call, liq),
            MarginState::Normal
        );
    }

    #[test]
    fn fixed_point_states_agree_with_decimal_ones_d10() {
        let (call, liq) = (d("0.50"), d("0.30"));
        for (equity, notional) in [
            ("50", "100"),
            ("49.99", "100"),
            ("30", "100"),
            ("29.99", "100"),
            ("-1", "0"),
            ("-5", "100"),
        ] {
            let (e, n) = (d(equity), d(notional));
            let fx = |v| crate::fixed::from_decimal(v).unwrap();
            let t = Thresholds::new(call, liq).unwrap();
            assert_eq!(
                margin_state_fixed(fx(e), fx(n), &t),
                Some(margin_state(e, n, call, liq)),
                "{equity} / {notional}"
            );
        }
        let t = Thresholds::new(call, liq).unwrap();
        assert_eq!(margin_state_fixed(i128::MAX, 1, &t), None);
    }

    #[test]
    fn leverage_ratio_rounds_down_to_four_decimals_and_is_one_when_flat_2_6() {
        assert_eq!(leverage_ratio(d("2"), d("3")).to_string(), "0.6666");
        assert_eq!(leverage_ratio(d("-2"), d("3")).to_string(), "-0.6666");
        assert_eq!(leverage_ratio(d("5"), d("0")).to_string(), "1.0000");
        assert_eq!(margin_ratio(d("1"), d("3")).to_string(), "0.3333");
        assert_eq!(margin_ratio(d("1"), d("0")).to_string(), "0.0000");
        assert_eq!(margin_deficit(d("10"), d("12.5")), d("2.5"));
        assert_eq!(margin_deficit(d("10"), d("8")), d("0"));
    }

    #[test]
    fn depreciation_levels_count_a_threshold_reached_exactly_3_3() {
        assert_eq!(depreciation_level(d("2"), d("100"), d("90.01")), 0);
        assert_eq!(depreciation_level(d("2"), d("100"), d("90")), 1);
        assert_eq!(depreciation_level(d("2"), d("100"), d("75")), 2);
        assert_eq!(depreciation_level(d("2"), d("100"), d("65")), 3);
        // A short depreciates when the price rises.
        assert_eq!(depreciation_level(d("-1"), d("100"), d("120")), 2);
        assert_eq!(depreciation_level(d("-1"), d("100"), d("80")), 0);
        // Prices past the fixed point's 18 decimals take the decimal path, to the same level.
        assert_eq!(
            depreciation_level(d("1"), d("100.0000000000000000001"), d("80")),
            2
        );
        assert_eq!(depreciation_level_fixed(true, 100, 90), Some(1));
        assert_eq!(depreciation_level_fixed(false, 100, 129), Some(2));
        assert_eq!(depreciation_level_fixed(true, i128::MAX, -1), None);
        let dep = Depreciation::of(d("-1.5"), d("100"), d("123.4567"));
        assert_eq!(dep.initial_value, d("150"));
        assert_eq!(dep.current_value, d("114.81495"));
        assert_eq!(dep.depreciation_pct.to_string(), "23.4567");
    }
}
