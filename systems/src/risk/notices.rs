//! Position depreciation notices (§2.2, §3.3; D9), DepreciationSystems, every notice
//! interval of simulation time. A position whose drop since entry (at its average fill
//! price, the baseline) reaches a 10 % threshold above the highest already noticed for its
//! baseline gets one notice, for the highest threshold reached; a recovery and a new fall
//! repeat nothing. Fills start a new baseline (`Position::noticed` back to 0) on an increase,
//! a flip or a reopen; a reduction keeps it.

use std::sync::Arc;

use bevy_ecs::prelude::{Query, Res, ResMut, Resource};
use perpsim_core::Decimal;
use perpsim_core::fixed;
use perpsim_core::ids::NotificationCode;
use perpsim_core::risk::depreciation_level_at;
use perpsim_core::time::Timestamp;
use serde::{Deserialize, Serialize};

use crate::clock::{DueEvents, Scheduler, SimClock};
use crate::records::clock::ScheduledEvent;
use crate::records::ids::NoticeSeq;
use crate::records::market::SimulationSettings;
use crate::records::position::Position;
use crate::records::risk::Notification;
use crate::records::venue::{InstrumentState, MarketId, MarketSlot};
use crate::rng::EngineRng;

/// Every notice, in creation order (`seq` is the position). State, append-only.
#[derive(Resource, Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notifications(pub Vec<Arc<Notification>>);

/// DepreciationSystems: on a DepreciationCheck, every open position against its baseline.
#[allow(clippy::too_many_arguments)] // one pass: positions, prices, the log, the timer
pub fn check_depreciation(
    due: Res<DueEvents>,
    clock: Res<SimClock>,
    settings: Res<SimulationSettings>,
    instruments: Query<(&MarketSlot, &InstrumentState)>,
    mut positions: Query<&mut Position>,
    mut notifications: ResMut<Notifications>,
    mut scheduler: ResMut<Scheduler>,
    mut rng: ResMut<EngineRng>,
) {
    if !due.has(ScheduledEvent::DepreciationCheck) {
        return;
    }
    let now = clock.now;
    scheduler.schedule(
        now.next_multiple_of(settings.0.notice_interval_ms),
        ScheduledEvent::DepreciationCheck,
    );
    // Per market: its mark (the one every position was just valued at), in fixed point
    // where it fits, converted once for all its positions, and when it was set.
    let mut marks: Vec<(MarketId, (Decimal, Option<i128>), Timestamp)> = instruments
        .iter()
        .map(|(m, s)| {
            let mark = s.mark_price;
            (m.0, (mark, fixed::from_decimal(mark)), s.price_time)
        })
        .collect();
    marks.sort_unstable_by_key(|m| m.0);
    let mut due_notices = Vec::new();
    for mut p in &mut positions {
        let (_, (mark, mark_fixed), mark_time) = marks[p.market as usize];
        let level = depreciation_level_at(p.size, p.avg_fill_price, (mark, mark_fixed));
        if level <= p.noticed {
            continue;
        }
        p.noticed = level;
        due_notices.push(Notification {
            seq: NoticeSeq(0),
            code: NotificationCode(perpsim_core::Uuid::nil()),
            customer: p.customer,
            broker: p.broker,
            created_at: now,
            market: p.market,
            size: p.size,
            avg_fill_price: p.avg_fill_price,
            mark_price: mark,
            mark_time,
            threshold_pct: u32::from(level) * 10,
        });
    }
    // Entity order is not stable across a restore: codes are drawn in key order.
    due_notices.sort_unstable_by_key(|n| (n.customer, n.market));
    for mut n in due_notices {
        n.seq = NoticeSeq(notifications.0.len() as u64);
        n.code = NotificationCode(rng.0.uuid());
        notifications.0.push(Arc::new(n));
    }
}
