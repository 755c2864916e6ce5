//! The walk of a pass in progress (`records::periodic`): each run books the next rows of
//! midnight's pass (in `Settlement`) and of the hour's (in `FundingSystems`), in key order,
//! within what the tick may still book. A pass whose walk reaches the last position ends.

use std::ops::Bound;
use std::sync::Arc;

use bevy_ecs::prelude::{Entity, Local, Query, Res, ResMut};
use perpsim_core::Decimal;

use crate::money::periodic::{funding_row, settlement_row};
use crate::positions::{MarginRate, MovedPositions, PositionIndex};
use crate::records::money::{AccountId, PeriodicInfo};
use crate::records::periodic::{Pass, PeriodicPasses};
use crate::records::position::{Position, PositionKey};
use crate::trading::exchange::Exchange;

use super::PeriodicBooking;

/// The next positions `pass` books, in key order, at most `budget` of them walked: their keys
/// and entities into `rows`. Moves the walk on past them (dropping the settled keys it
/// passes); returns the rows walked, and whether the walk reached the end.
fn walk(
    pass: &mut Pass,
    index: &PositionIndex,
    budget: usize,
    rows: &mut Vec<(PositionKey, Entity)>,
) -> (usize, bool) {
    rows.clear();
    let from = pass.next.map_or(Bound::Unbounded, Bound::Included);
    let mut walked = 0;
    for (&key, &entity) in index.map().range((from, Bound::Unbounded)) {
        if walked == budget {
            pass.next = Some(key);
            return (walked, false);
        }
        walked += 1;
        let owes = pass.terms[key.1 as usize].is_some();
        if !pass.settled.remove(&key) && owes {
            rows.push((key, entity));
        }
    }
    (walked, true)
}

/// Takes the next rows of a pass from the tick's budget, and the terms they are booked at;
/// `None` when it has none left. A pass whose walk ended is taken out.
fn next_rows(
    pass: &mut Option<Pass>,
    budget: &mut usize,
    index: &PositionIndex,
    rows: &mut Vec<(PositionKey, Entity)>,
) -> Option<Vec<Option<Arc<PeriodicInfo>>>> {
    let walking = pass.as_mut().filter(|_| *budget > 0)?;
    let (walked, ended) = walk(walking, index, *budget, rows);
    *budget -= walked.min(*budget);
    match ended {
        true => pass.take().map(|p| p.terms),
        false => Some(walking.terms.clone()),
    }
}

/// FundingSystems, while the hour's pass is in progress: its next rows.
pub fn continue_funding(
    mut booking: PeriodicBooking,
    (index, exchange): (Res<PositionIndex>, Res<Exchange>),
    positions: Query<&Position>,
    mut passes: ResMut<PeriodicPasses>,
    mut rows: Local<Vec<(PositionKey, Entity)>>,
    mut payers: Local<Vec<Position>>,
) {
    let passes = &mut *passes;
    let Some(terms) = next_rows(&mut passes.funding, &mut passes.budget, &index, &mut rows) else {
        return;
    };
    payers.clear();
    payers.extend(
        rows.iter()
            .map(|(_, e)| positions.get(*e).expect("indexed").clone()),
    );
    let asset = |p: &Position| exchange.markets[p.market as usize].spec.settlement;
    let account = |p: &Position| AccountId::customer(p.customer, asset(p));
    booking.book_all(&payers, account, |p| {
        let info = terms[p.market as usize].as_ref()?;
        Some((funding_row(p, info, asset(p)), info))
    });
}

/// Settlement, while midnight's pass is in progress: its next rows, and each settled
/// position's entry and margin written back.
pub fn continue_daily(
    mut booking: PeriodicBooking,
    (index, mut moved): (Res<PositionIndex>, ResMut<MovedPositions>),
    mut positions: Query<(&mut Position, &MarginRate)>,
    mut exchange: ResMut<Exchange>,
    mut passes: ResMut<PeriodicPasses>,
    mut rows: Local<Vec<(PositionKey, Entity)>>,
    mut held: Local<Vec<(Position, MarginRate)>>,
) {
    let passes = &mut *passes;
    let Some(terms) = next_rows(&mut passes.daily, &mut passes.budget, &index, &mut rows) else {
        return;
    };
    held.clear();
    held.extend(rows.iter().map(|(_, e)| {
        let (p, rate) = positions.get(*e).expect("indexed");
        (p.clone(), *rate)
    }));
    let assets: Vec<_> = exchange.markets.iter().map(|m| m.spec.settlement).collect();
    let asset = |p: &Position| assets[p.market as usize];
    let account = |(p, _): &(Position, MarginRate)| AccountId::customer(p.customer, asset(p));
    // Each row's new margin, or `None` where settling changed nothing.
    let mut margins: Vec<Option<Decimal>> = Vec::with_capacity(held.len());
    booking.book_all(&held, account, |(p, rate)| {
        let info = terms[p.market as usize].as_ref().expect("walked rows owe");
        let row = settlement_row(p, rate.initial, info, asset(p));
        margins.push(row.as_ref().map(|(_, margin)| *margin));
        row.map(|(side, _)| (side, info))
    });
    let now = booking.now();
    for ((key, entity), margin) in rows.iter().zip(margins) {
        let Some(margin) = margin else { continue };
        let (mut live, _) = positions.get_mut(*entity).expect("indexed");
        live.entry_price = terms[key.1 as usize].as_ref().expect("owed").mark_price;
        live.margin = margin;
        live.updated_at = now;
        moved.wrote(*entity);
        exchange.dirty.positions.push(*key);
    }
}
