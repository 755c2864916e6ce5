//! Daily settlement (D6): at 00:00 UTC each open position's unrealised PnL at the mark is
//! booked as a `settlement` movement, and its entry price becomes that mark (its average fill
//! price stays). The locked margin follows the new entry price (§2.5: amount × entry ×
//! initial margin), in the same booking.

use std::sync::Arc;

use bevy_ecs::prelude::{Query, Res, ResMut};
use perpsim_core::decimal::round_ledger;

use crate::clock::{DueEvents, SimClock};
use crate::money::ledger::{Books, CustomerSide, Ledger};
use crate::money::store::Accounts;
use crate::positions::MarginRate;
use crate::positions::PositionIndex;
use crate::records::clock::ScheduledEvent;
use crate::records::money::{MovementKind, PeriodicInfo};
use crate::records::position::Position;
use crate::rng::EngineRng;
use crate::trading::exchange::Exchange;

use super::Marks;

/// MarkToMarketSystems, at midnight, before the valuation (which then values every settled
/// position at zero unrealised PnL).
#[allow(clippy::too_many_arguments)] // one pass: positions, prices, the ledger
pub fn settle_daily(
    due: Res<DueEvents>,
    clock: Res<SimClock>,
    index: Res<PositionIndex>,
    marks: Marks,
    mut positions: Query<(&mut Position, &MarginRate)>,
    mut exchange: ResMut<Exchange>,
    mut ledger: ResMut<Ledger>,
    mut accounts: Accounts,
    mut rng: ResMut<EngineRng>,
) {
    if !due.has(ScheduledEvent::DailySettlement) {
        return;
    }
    let now = clock.now;
    let marks = marks.by_market();
    for (&key, &entity) in &index.0 {
        let (mut p, rate) = positions.get_mut(entity).expect("indexed position");
        let (mark, symbol, asset) = &marks[key.1 as usize];
        let pnl = p.unrealised_pnl(*mark);
        let margin = round_ledger(p.size.abs() * *mark * rate.initial);
        if pnl.is_zero() && margin == p.margin && p.entry_price == *mark {
            continue;
        }
        let mut books = Books {
            accounts: &mut accounts,
            rng: &mut rng.0,
            now,
        };
        let row = CustomerSide {
            customer: (p.customer, p.broker),
            asset: *asset,
            kind: MovementKind::Settlement,
            amount: pnl,
            locked_delta: margin - p.margin,
        };
        ledger.book_periodic(
            &mut books,
            row,
            PeriodicInfo {
                symbol: Arc::clone(symbol),
                mark_price: *mark,
                funding_rate: None,
            },
        );
        p.entry_price = *mark;
        p.margin = margin;
        p.updated_at = now;
        exchange.dirty.positions.push(key);
    }
    accounts.flush();
}
