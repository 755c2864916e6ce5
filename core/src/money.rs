//! Money rules that are pure arithmetic: margin profiles (D8), fee rates (§2.8), and the
//! checks on amounts entering the ledger (§4.2, D7).

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::decimal::LEDGER_DECIMALS;
use crate::error::Error;

/// Highest leverage a customer may select (interface §2.7: currently 2).
pub const MAX_LEVERAGE: u32 = 2;

/// A margin profile of D8: fractions of notional.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarginProfile {
    pub leverage: u32,
    pub initial: Decimal,
    pub maintenance: Decimal,
    pub liquidation: Decimal,
}

/// The profile for a leverage, if one exists (1 and 2).
pub fn margin_profile(leverage: u32) -> Option<MarginProfile> {
    let p = |leverage, i, m, l| MarginProfile {
        leverage,
        initial: Decimal::new(i, 2),
        maintenance: Decimal::new(m, 2),
        liquidation: Decimal::new(l, 2),
    };
    match leverage {
        1 => Some(p(1, 100, 50, 30)),
        2 => Some(p(2, 50, 30, 20)),
        _ => None,
    }
}

/// New customers get leverage 1 (D8).
pub const DEFAULT_LEVERAGE: u32 = 1;

/// Maker and taker fees in basis points (2 = 0.02 %); negative is a rebate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeeRates {
    #[serde(with = "crate::decimal::bin")]
    pub maker_bps: Decimal,
    #[serde(with = "crate::decimal::bin")]
    pub taker_bps: Decimal,
}

/// Default fees: maker 2 bps, taker 5 bps (D7).
pub const DEFAULT_FEES: FeeRates = FeeRates {
    maker_bps: Decimal::from_parts(2, 0, 0, false, 0),
    taker_bps: Decimal::from_parts(5, 0, 0, false, 0),
};

/// Fee rates are bounded so a typo cannot book a fee larger than the notional: |bps| ≤ 10 000.
pub const MAX_FEE_BPS: i64 = 10_000;

/// Integer digits a transfer amount may have: amounts are below 10^12. With it every balance
/// stays many orders of magnitude inside a decimal's range (about 7.9 × 10^28) however many
/// transfers a customer makes, so no sum the ledger computes can overflow.
pub const MAX_TRANSFER_INTEGER_DIGITS: u32 = 12;

/// A transfer amount: strictly positive, below 10^12, at most the ledger's 10 decimals as
/// written (§4.2, §7): `1.50000000000` has 11 and is refused, so the rule is the same for
/// every client.
pub fn check_transfer_amount(field: &str, amount: Decimal) -> Result<Decimal, Error> {
    if amount <= Decimal::ZERO {
        return Err(Error::validation(format!(
            "{field} must be strictly positive"
        )));
    }
    if amount >= Decimal::from(10_i64.pow(MAX_TRANSFER_INTEGER_DIGITS)) {
        return Err(Error::validation(format!(
            "{field} must be below 10^{MAX_TRANSFER_INTEGER_DIGITS}"
        )));
    }
    if amount.scale() > LEDGER_DECIMALS {
        return Err(Error::validation(format!(
            "{field} has more than {LEDGER_DECIMALS} decimals"
        )));
    }
    Ok(amount)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    #[test]
    fn the_two_profiles_of_d8_and_no_others() {
        let one = margin_profile(1).unwrap();
        assert_eq!(
            (
                one.initial.to_string(),
                one.maintenance.to_string(),
                one.liquidation.to_string()
            ),
            ("1.00".into(), "0.50".into(), "0.30".into())
        );
        let two = margin_profile(2).unwrap();
        assert_eq!(
            (
                two.initial.to_string(),
                two.maintenance.to_string(),
                two.liquidation.to_string()
            ),
            ("0.50".into(), "0.30".into(), "0.20".into())
        );
        assert!(margin_profile(0).is_none() && margin_profile(3).is_none());
        assert_eq!(DEFAULT_FEES.maker_bps, Decimal::from(2));
        assert_eq!(DEFAULT_FEES.taker_bps, Decimal::from(5));
    }

    #[test]
    fn transfer_amounts_are_positive_below_10_pow_12_with_at_most_ten_decimals() {
        let d = |s| Decimal::from_str(s).unwrap();
        assert!(check_transfer_amount("amount", d("0.0000000001")).is_ok());
        assert!(check_transfer_amount("amount", d("1.5000000000")).is_ok());
        assert!(
            check_transfer_amount("amount", d("1.50000000000")).is_err(),
            "11 decimals as written"
        );
        assert!(
            check_transfer_amount("amount", d("0.00000000001"))
                .unwrap_err()
                .message
                .contains("10 decimals")
        );
        assert!(check_transfer_amount("amount", d("0")).is_err());
        assert!(check_transfer_amount("amount", d("-1")).is_err());
        assert!(check_transfer_amount("amount", d("999999999999.9999999999")).is_ok());
        assert!(check_transfer_amount("amount", d("1000000000000")).is_err());
    }
}
