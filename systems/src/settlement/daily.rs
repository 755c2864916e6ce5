//! Daily settlement (D6): at 00:00 UTC each open position's unrealised PnL at the mark is
//! booked as a `settlement` movement, and its entry price becomes that mark (its average fill
//! price stays). The locked margin follows the new entry price (§2.5: amount × entry ×
//! initial margin), in the same booking.

use std::sync::Arc;

use crate::records::position::locked_margin;
use bevy_ecs::prelude::{Entity, Local, Query, Res, ResMut};
use perpsim_core::Decimal;
use perpsim_core::ids::{BrokerCode, CustomerCode};

use crate::money::ledger::CustomerSide;
use crate::positions::{KeyOrder, MarginRate, MovedPositions, PositionIndex};
use crate::records::money::{AccountId, MovementKind, PeriodicInfo};
use crate::records::position::{Position, unrealised_pnl};
use crate::records::venue::MarketId;
use crate::trading::exchange::Exchange;

use super::{Marks, PeriodicBooking};

/// MarkToMarketSystems, at midnight, before the valuation (which then values every settled
/// position at zero unrealised PnL).
pub fn settle_daily(
    mut booking: PeriodicBooking,
    (index, mut moved): (Res<PositionIndex>, ResMut<MovedPositions>),
    marks: Marks,
    mut positions: Query<(Entity, &mut Position, &MarginRate)>,
    mut exchange: ResMut<Exchange>,
    mut held: Local<KeyOrder<Held>>,
) {
    let now = booking.now();
    let marks = marks.by_market();
    // One description per market, shared by its rows.
    let infos: Vec<Arc<PeriodicInfo>> = marks
        .iter()
        .map(|(mark, symbol, _)| {
            Arc::new(PeriodicInfo {
                symbol: Arc::clone(symbol),
                mark_price: *mark,
                funding_rate: None,
            })
        })
        .collect();
    let held = &mut *held;
    held.read(
        &index,
        positions.iter().map(|(e, p, rate)| (e, Held::of(p, rate))),
    );
    let account = |row: &Held| AccountId::customer(row.customer, marks[row.market as usize].2);
    booking.book_all(&held.rows, account, |row| {
        let (mark, _, asset) = &marks[row.market as usize];
        let margin = settled_margin(row.size, row.entry_price, row.margin, *mark, row.initial)?;
        exchange.dirty.positions.push((row.customer, row.market));
        let side = CustomerSide {
            customer: (row.customer, row.broker),
            asset: *asset,
            kind: MovementKind::Settlement,
            amount: unrealised_pnl(row.size, row.entry_price, *mark),
            locked_delta: margin - row.margin,
        };
        Some((side, &infos[row.market as usize]))
    });
    // Written back after the bookings, in the positions' own order: judged again from each
    // position's own figures, which is cheaper than finding each settled one by its entity.
    for (entity, mut p, rate) in &mut positions {
        let mark = marks[p.market as usize].0;
        if let Some(margin) = settled_margin(p.size, p.entry_price, p.margin, mark, rate.initial) {
            p.entry_price = mark;
            p.margin = margin;
            p.updated_at = now;
            moved.wrote(entity);
        }
    }
}

/// The margin a position locks once settled at `mark`, if settling changes it: its entry
/// becomes the mark, so a position already entered at the mark with that margin locked has
/// nothing to settle (its unrealised PnL is zero).
fn settled_margin(
    size: Decimal,
    entry_price: Decimal,
    margin: Decimal,
    mark: Decimal,
    initial: Decimal,
) -> Option<Decimal> {
    let settled = locked_margin(size, mark, initial);
    (entry_price != mark || settled != margin).then_some(settled)
}

/// What midnight reads of each position, in the index's order (see [`KeyOrder`]).
#[derive(Clone, Copy)]
pub struct Held {
    customer: CustomerCode,
    broker: BrokerCode,
    market: MarketId,
    size: Decimal,
    entry_price: Decimal,
    margin: Decimal,
    initial: Decimal,
}

impl Held {
    fn of(p: &Position, rate: &MarginRate) -> Self {
        Held {
            customer: p.customer,
            broker: p.broker,
            market: p.market,
            size: p.size,
            entry_price: p.entry_price,
            margin: p.margin,
            initial: rate.initial,
        }
    }
}
