//! The periodic money flows over open positions: daily settlement (`daily`, D6, in
//! MarkToMarketSystems before the valuation) and hourly funding (`funding`, D7, §2.12, in
//! FundingSystems). Both book against the clearing account, so the ledger still sums
//! exactly, and both walk the open positions in key order (customer, market), so the
//! movements' order and ids are the same in every run.
//!
//! Funding and settlement book against the clearing account, each movement rounded once, the
//! clearing side of each tick's share of a pass owed in a `VenueBatch` and posted once
//! when it closes (nothing reads clearing between its rows; a batch dropped unclosed stops
//! the engine). A pass fixes its terms when it falls due and books at most
//! `records::periodic::ROWS_PER_TICK` rows a tick (`passes`), walking the position index from
//! where it stopped, so at a million positions no tick holds the engine for the whole pass;
//! a fill on a position the walk has not reached books its row first (`trading::fills`).
//! Each amount is `round_ledger_product`, the decimal expression computed on the mantissas
//! where it is exact (the passes' cost at a million positions: `benches/README.md`);
//! the audit checks, per asset, that the clearing account's balance equals the open positions'
//! unrealised PnL within half a unit of the 10th decimal per rounding (movements plus
//! valuations): clearing paid every realised PnL out, and the market is zero-sum.

use std::sync::Arc;

use bevy_ecs::prelude::{Entity, IntoScheduleConfigs, Local, Query, Res, ResMut, Schedule, World};
use bevy_ecs::system::SystemParam;
use perpsim_core::Decimal;
use perpsim_core::instrument::Asset;

use crate::clock::{SimClock, due};
use crate::money::ledger::{Books, CustomerSide, Ledger};
use crate::money::store::Accounts;
use crate::records::clock::ScheduledEvent;
use crate::records::money::{AccountId, PeriodicInfo};
use crate::records::periodic::PeriodicPasses;
use crate::records::venue::{Instrument, InstrumentState, MarketSlot};
use crate::rng::EngineRng;

use crate::sets::{FundingSystems, Settlement};

pub mod daily;
pub mod funding;
#[cfg(test)]
mod pass_tests;
pub mod passes;
#[cfg(test)]
mod tests;

pub(crate) fn plugin(world: &mut World, schedule: &mut Schedule) {
    world.init_resource::<funding::FundingState>();
    world.init_resource::<PeriodicPasses>();
    schedule.add_systems(
        (
            daily::settle_daily.run_if(due(ScheduledEvent::DailySettlement)),
            passes::continue_daily.run_if(|p: Res<PeriodicPasses>| p.daily.is_some()),
        )
            .chain()
            .in_set(Settlement),
    );
    schedule.add_systems(
        (
            funding::settle_funding.run_if(due(ScheduledEvent::FundingHour)),
            passes::continue_funding.run_if(|p: Res<PeriodicPasses>| p.funding.is_some()),
            funding::sample_premium.run_if(due(ScheduledEvent::FundingSample)),
        )
            .chain()
            .in_set(FundingSystems),
    );
}

/// Each market's mark, symbol and settlement asset, by market id.
#[derive(SystemParam)]
pub struct Marks<'w, 's> {
    instruments: Query<
        'w,
        's,
        (
            &'static MarketSlot,
            &'static Instrument,
            &'static InstrumentState,
        ),
    >,
}

impl Marks<'_, '_> {
    /// The marks carry at least their tick's decimals (§2.4), as the rows show them.
    pub fn by_market(&self) -> Vec<(Decimal, Arc<str>, Asset)> {
        let mut marks: Vec<_> = self
            .instruments
            .iter()
            .map(|(slot, i, s)| {
                let mut mark = s.mark_price;
                if mark.scale() < i.0.price_decimals() {
                    mark.rescale(i.0.price_decimals());
                }
                (
                    slot.0,
                    (mark, Arc::from(i.0.symbol.as_str()), i.0.settlement),
                )
            })
            .collect();
        marks.sort_unstable_by_key(|(market, _)| *market);
        marks.into_iter().map(|(_, m)| m).collect()
    }
}

/// What a periodic pass books with: the instant, the ledger, the accounts (found by one walk
/// of their index in the rows' key order) and the generator its rows' codes are drawn from.
#[derive(SystemParam)]
pub struct PeriodicBooking<'w, 's> {
    clock: Res<'w, SimClock>,
    ledger: ResMut<'w, Ledger>,
    accounts: Accounts<'w, 's>,
    rng: ResMut<'w, EngineRng>,
    /// Each row's account entity, kept between passes (a million at the bound).
    found: Local<'s, Vec<Option<Entity>>>,
}

impl PeriodicBooking<'_, '_> {
    pub fn now(&self) -> perpsim_core::time::Timestamp {
        self.clock.now
    }

    /// Books the row `booking` makes of each of `rows` (in key order) that owes one, with its
    /// market's description, against the clearing account in one batch posted at the end.
    pub fn book_all<'i, R>(
        &mut self,
        rows: &[R],
        account: impl Fn(&R) -> AccountId,
        mut booking: impl FnMut(&R) -> Option<(CustomerSide, &'i Arc<PeriodicInfo>)>,
    ) {
        let now = self.clock.now;
        self.ledger.reserve_rows(rows.len());
        let mut batch = self.ledger.open_venue_batch();
        self.accounts
            .find_in_order(rows.iter().map(&account), &mut self.found);
        for (row, &entity) in rows.iter().zip(self.found.iter()) {
            let Some((side, info)) = booking(row) else {
                continue;
            };
            let mut books = Books {
                accounts: &mut self.accounts.knowing(account(row), entity),
                rng: &mut self.rng.0,
                now,
            };
            self.ledger
                .book_periodic(&mut books, side, info, &mut batch);
        }
        self.ledger
            .close_venue_batch(&mut self.accounts, batch, now);
        self.accounts.flush();
    }
}
