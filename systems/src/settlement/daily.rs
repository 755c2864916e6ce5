//! Daily settlement (D6): at 00:00 UTC each open position's unrealised PnL at the mark is
//! booked as a `settlement` movement, and its entry price becomes that mark (its average fill
//! price stays). The locked margin follows the new entry price (§2.5: amount × entry ×
//! initial margin), in the same booking.

use std::sync::Arc;

use bevy_ecs::prelude::{Entity, Local, Query, Res, ResMut};
use perpsim_core::Decimal;
use perpsim_core::decimal::round_ledger;
use perpsim_core::ids::{BrokerCode, CustomerCode};

use crate::clock::{DueEvents, SimClock};
use crate::money::ledger::{Books, CustomerSide, Ledger};
use crate::money::store::Accounts;
use crate::positions::MarginRate;
use crate::positions::PositionIndex;
use crate::records::clock::ScheduledEvent;
use crate::records::money::{MovementKind, PeriodicInfo};
use crate::records::position::{Position, unrealised_pnl};
use crate::records::venue::MarketId;
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
    mut scratch: Local<Scratch>,
) {
    if !due.has(ScheduledEvent::DailySettlement) {
        return;
    }
    let now = clock.now;
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
    let mut batch = ledger.open_clearing_batch(index.0.len());
    let Scratch { held, settled } = &mut *scratch;
    gather(&index, &positions, held);
    settled.clear();
    settled.reserve(held.len());
    for held in held.iter() {
        let (mark, _, asset) = &marks[held.market as usize];
        let pnl = unrealised_pnl(held.size, held.entry_price, *mark);
        let margin = round_ledger(held.size.abs() * *mark * held.initial);
        if pnl.is_zero() && margin == held.margin && held.entry_price == *mark {
            continue;
        }
        let mut books = Books {
            accounts: &mut accounts,
            rng: &mut rng.0,
            now,
        };
        let row = CustomerSide {
            customer: (held.customer, held.broker),
            asset: *asset,
            kind: MovementKind::Settlement,
            amount: pnl,
            locked_delta: margin - held.margin,
        };
        ledger.book_periodic(&mut books, row, &infos[held.market as usize], &mut batch);
        settled.push((held.entity, *mark, margin));
        exchange.dirty.positions.push((held.customer, held.market));
    }
    ledger.close_clearing_batch(&mut accounts, batch, now);
    accounts.flush();
    // Written back after the bookings, in one tight loop of their own (see `gather`).
    for &(entity, mark, margin) in settled.iter() {
        let (mut p, _) = positions.get_mut(entity).expect("indexed position");
        p.entry_price = mark;
        p.margin = margin;
        p.updated_at = now;
    }
}

/// What midnight reads of each position, in the index's order.
struct Held {
    entity: Entity,
    customer: CustomerCode,
    broker: BrokerCode,
    market: MarketId,
    size: Decimal,
    entry_price: Decimal,
    margin: Decimal,
    initial: Decimal,
}

/// The pass's working lists, kept from one midnight to the next: at a million positions
/// they are 150 MB, which fresh each night cost the pass a page fault per 4 KiB. Derived;
/// bounded by the open positions.
#[derive(Default)]
pub struct Scratch {
    held: Vec<Held>,
    /// The positions settled, with their new entry price and margin.
    settled: Vec<(Entity, Decimal, Decimal)>,
}

/// Every indexed position's [`Held`] into `into`, read in one tight loop before any
/// booking: the index orders positions by customer, not as they lie in memory, so each read
/// is a cache miss, and only a loop that does nothing else lets the processor have many in
/// flight at once.
fn gather(
    index: &PositionIndex,
    positions: &Query<(&mut Position, &MarginRate)>,
    into: &mut Vec<Held>,
) {
    into.clear();
    into.extend(index.0.values().map(|&entity| {
        let (p, rate) = positions.get(entity).expect("indexed position");
        Held {
            entity,
            customer: p.customer,
            broker: p.broker,
            market: p.market,
            size: p.size,
            entry_price: p.entry_price,
            margin: p.margin,
            initial: rate.initial,
        }
    }));
}
