//! The fields of a ledger movement that the transactions row, the balance-changes frame and
//! a replay's ledger.csv show alike.

use perpsim_systems::records::money::{Movement, MovementKind};

use crate::wire::DecimalOut;

/// A movement's instrument: trade-family, funding and settlement movements have one (the
/// transactions row and the balance-changes frame both show it).
pub fn symbol(m: &Movement) -> Option<&str> {
    let trade = m.trade.as_ref().map(|t| &*t.symbol);
    trade.or_else(|| m.periodic.as_ref().map(|p| &*p.symbol))
}

/// A settlement movement's mark price, at the decimals the engine booked it with (its
/// tick's at least, §2.4).
pub fn settlement_mark(m: &Movement) -> Option<DecimalOut> {
    let periodic = m
        .periodic
        .as_ref()
        .filter(|_| m.kind == MovementKind::Settlement);
    periodic.map(|p| DecimalOut::new(p.mark_price, p.mark_price.scale()))
}

/// A funding movement's rate.
pub fn funding_rate(m: &Movement) -> Option<DecimalOut> {
    let rate = m.periodic.as_ref().and_then(|p| p.funding_rate);
    rate.map(|r| DecimalOut::new(r, 8))
}
