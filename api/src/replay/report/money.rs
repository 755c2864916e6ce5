//! A customer's money in one currency from its ledger rows alone, and the reconciliation the
//! report promises: every figure is a sum of rows of `ledger.csv`, and they add up to the
//! balance exactly. Pure.

use perpsim_core::Decimal;
use perpsim_core::time::Timestamp;
use perpsim_systems::records::money::{Movement, MovementKind, MovementStatus};

/// Σ of a customer's completed rows in one currency, split by what moved the money.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Flows {
    pub deposits: Decimal,
    pub withdrawals: Decimal,
    /// Realised PnL of fills (trades, forced fills, auto-deleveraging).
    pub realised_pnl: Decimal,
    /// Fees paid (negative: rebates received).
    pub fees: Decimal,
    pub funding: Decimal,
    pub settlement: Decimal,
    /// Insurance covers of a balance a liquidation left negative.
    pub insurance: Decimal,
    /// Σ of every completed row: the balance.
    pub balance: Decimal,
    /// Pending transfers (not in the balance).
    pub pending: Decimal,
}

impl Flows {
    /// Adds one ledger row.
    pub fn add(&mut self, m: &Movement) {
        if m.status != MovementStatus::Completed {
            if m.status == MovementStatus::Pending {
                self.pending += m.amount;
            }
            return;
        }
        self.balance += m.amount;
        match (m.kind, &m.trade) {
            (MovementKind::Deposit, _) => self.deposits += m.amount,
            (MovementKind::Withdrawal, _) => self.withdrawals -= m.amount,
            (MovementKind::Funding, _) => self.funding += m.amount,
            (MovementKind::Settlement, _) => self.settlement += m.amount,
            (_, Some(t)) if t.trade_code.is_some() => {
                self.realised_pnl += t.realised_pnl;
                self.fees += t.fee;
            }
            _ => self.insurance += m.amount,
        }
    }

    /// The parts summed: must equal the balance, or the report would not reconcile.
    pub fn parts(&self) -> Decimal {
        self.deposits - self.withdrawals + self.realised_pnl - self.fees
            + self.funding
            + self.settlement
            + self.insurance
    }
}

/// Completed deposits less withdrawals up to each instant: what equity owes to transfers,
/// not to trading. `transfers` are (completion time, signed amount), in time order.
pub fn net_transfers_at(transfers: &[(Timestamp, Decimal)], at: Timestamp) -> Decimal {
    transfers
        .iter()
        .take_while(|(t, _)| *t <= at)
        .map(|(_, a)| *a)
        .sum()
}

/// The largest fall of `values` from a running peak (zero when it never fell).
pub fn max_drawdown(values: impl Iterator<Item = Decimal>) -> Decimal {
    let mut peak: Option<Decimal> = None;
    let mut worst = Decimal::ZERO;
    for v in values {
        let p = *peak.get_or_insert(v);
        if v > p {
            peak = Some(v);
        }
        worst = worst.max(peak.unwrap_or(v) - v);
    }
    worst
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drawdown_is_the_largest_fall_from_a_running_peak() {
        let d = |v: &[i64]| max_drawdown(v.iter().map(|x| Decimal::from(*x)));
        assert_eq!(d(&[]), Decimal::ZERO);
        assert_eq!(d(&[5, 6, 7]), Decimal::ZERO);
        assert_eq!(d(&[10, 4, 12, 9, 15, 1]), Decimal::from(14));
        assert_eq!(d(&[10, 7, 9, 6]), Decimal::from(4));
    }

    #[test]
    fn transfers_count_up_to_and_including_the_instant() {
        let t = |ms| Timestamp::from_millis(ms);
        let flows = [(t(10), Decimal::from(100)), (t(20), Decimal::from(-30))];
        assert_eq!(net_transfers_at(&flows, t(9)), Decimal::ZERO);
        assert_eq!(net_transfers_at(&flows, t(10)), Decimal::from(100));
        assert_eq!(net_transfers_at(&flows, t(25)), Decimal::from(70));
    }
}
