//! The rows a periodic pass books for one position (D6 settlement, D7 funding), shared by the
//! pass's walk (`settlement`) and by a fill that reaches a position the pass has not booked
//! yet (`trading`; see `records::periodic`).

use std::sync::Arc;

use perpsim_core::Decimal;
use perpsim_core::decimal::round_ledger_product;
use perpsim_core::instrument::Asset;

use crate::money::ledger::{AccountStore, Books, CustomerSide, Ledger};
use crate::records::money::{MovementKind, PeriodicInfo};
use crate::records::position::{Position, settled_margin, unrealised_pnl};

/// The hour's row of a position: longs pay when the rate is positive, so the customer's side
/// is −size × mark × rate.
pub fn funding_row(p: &Position, info: &PeriodicInfo, asset: Asset) -> CustomerSide {
    let rate = info.funding_rate.expect("a funding pass has a rate");
    CustomerSide {
        customer: (p.customer, p.broker),
        asset,
        kind: MovementKind::Funding,
        amount: round_ledger_product(&[-p.size, info.mark_price, rate]),
        locked_delta: Decimal::ZERO,
    }
}

/// Midnight's row of a position held at `initial` margin, with the margin it locks once
/// settled, if settling changes anything: its unrealised PnL at the mark is booked and its
/// entry becomes the mark (the margin follows, §2.5).
pub fn settlement_row(
    p: &Position,
    initial: Decimal,
    info: &PeriodicInfo,
    asset: Asset,
) -> Option<(CustomerSide, Decimal)> {
    let mark = info.mark_price;
    let margin = settled_margin(p.size, p.entry_price, p.margin, mark, initial)?;
    let side = CustomerSide {
        customer: (p.customer, p.broker),
        asset,
        kind: MovementKind::Settlement,
        amount: unrealised_pnl(p.size, p.entry_price, mark),
        locked_delta: margin - p.margin,
    };
    Some((side, margin))
}

/// Books one row outside a pass's walk, its clearing side posted at once.
pub fn book_one(
    ledger: &mut Ledger,
    books: &mut Books<'_, impl AccountStore>,
    side: CustomerSide,
    info: &Arc<PeriodicInfo>,
) {
    let mut batch = ledger.open_venue_batch();
    ledger.book_periodic(books, side, info, &mut batch);
    ledger.close_venue_batch(books.accounts, batch, books.now);
}
