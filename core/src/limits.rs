//! What one broker's key can make the venue hold (D4): every collection a key grows has a
//! bound, configurable, with a documented default. These two are the venue's rules, applied
//! by the engine; they travel in the journal (a command sets them), so a replay refuses
//! exactly what the live run refused.

use serde::{Deserialize, Serialize};

/// Open orders one customer may hold at once (D4 default).
pub const DEFAULT_MAX_OPEN_ORDERS: u32 = 1_000;
/// Customers one broker may create (D4 default).
pub const DEFAULT_MAX_CUSTOMERS: u32 = 100_000;
/// The largest value either bound may be set to: past it the bound would no longer protect
/// the memory it exists for (a resting order holds about 1 KB; a customer a few hundred
/// bytes).
pub const MAX_BOUND: u32 = 10_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct VenueLimits {
    /// Open orders per customer: resting limit orders and conditional orders waiting on
    /// their trigger. Past it a new order that could stay open is ORDER_REJECTED.
    pub max_open_orders: u32,
    /// Customers per broker. Past it POST /v1/customers is VALIDATION_ERROR.
    pub max_customers: u32,
}

impl Default for VenueLimits {
    fn default() -> Self {
        VenueLimits {
            max_open_orders: DEFAULT_MAX_OPEN_ORDERS,
            max_customers: DEFAULT_MAX_CUSTOMERS,
        }
    }
}

impl VenueLimits {
    /// Both bounds within 1..=[`MAX_BOUND`]; the error names the flag that is not.
    pub fn check(&self) -> Result<(), String> {
        for (flag, value) in [
            ("--max-open-orders", self.max_open_orders),
            ("--max-customers", self.max_customers),
        ] {
            if !(1..=MAX_BOUND).contains(&value) {
                return Err(format!("{flag} must be 1 to {MAX_BOUND}, got {value}"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_those_of_d4_and_bounds_outside_the_range_are_named() {
        let d = VenueLimits::default();
        assert_eq!((d.max_open_orders, d.max_customers), (1_000, 100_000));
        assert!(d.check().is_ok());
        let zero = VenueLimits {
            max_open_orders: 0,
            ..d
        };
        assert_eq!(
            zero.check().unwrap_err(),
            "--max-open-orders must be 1 to 10000000, got 0"
        );
        let huge = VenueLimits {
            max_customers: MAX_BOUND + 1,
            ..d
        };
        assert!(huge.check().unwrap_err().starts_with("--max-customers"));
    }
}
