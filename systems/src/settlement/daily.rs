//! Daily settlement (D6): at 00:00 UTC each open position's unrealised PnL at the mark is
//! booked as a `settlement` movement, and its entry price becomes that mark (its average fill
//! price stays). The locked margin follows the new entry price (§2.5: amount × entry ×
//! initial margin), in the same booking.

use std::sync::Arc;

use bevy_ecs::prelude::{Res, ResMut};

use super::Marks;
use crate::clock::SimClock;
use crate::records::money::PeriodicInfo;
use crate::records::periodic::{Pass, PeriodicPasses};

/// MarkToMarketSystems, at midnight, before the valuation (which then values every settled
/// position at zero unrealised PnL): the pass over every market's positions at its mark,
/// whose rows `passes::continue_daily` books.
pub fn settle_daily(clock: Res<SimClock>, marks: Marks, mut passes: ResMut<PeriodicPasses>) {
    let terms = marks
        .by_market()
        .into_iter()
        .map(|(mark, symbol, _)| {
            Some(Arc::new(PeriodicInfo {
                symbol,
                mark_price: mark,
                funding_rate: None,
            }))
        })
        .collect();
    assert!(
        passes.daily.is_none(),
        "a pass ends before the clock moves on"
    );
    passes.daily = Some(Pass::new(clock.now, terms));
}
