//! Position depreciation notices (§2.2, §3.3; D9), DepreciationSystems, every notice
//! interval of simulation time. A position whose drop since entry (at its average fill
//! price, the baseline) reaches a 10 % threshold above the highest already noticed for its
//! baseline gets one notice, for the highest threshold reached; a recovery and a new fall
//! repeat nothing. Fills start a new baseline (`Position::noticed` back to 0) on an increase,
//! a flip or a reopen; a reduction keeps it.
//!
//! A check reads only the positions it can notice: each position's next threshold is a mark
//! (a long's at `avg × (9 − noticed) / 10` or below, a short's at `avg × (11 + noticed) / 10`
//! or above), filed per market in an ordered index ([`NoticeTriggers`]) whenever the position
//! changes, so a check takes the range the mark reached and decides those exactly. Debug
//! and test builds check every position too, and require the same notices.
//!
//! A position's threshold is a function of its side, its average fill price and what it
//! noticed, so a position that moves many times between two checks (a market maker's, at
//! every fill) is refiled once, at the check: each run only notes the keys it moved off the
//! baseline they filed from. A write that kept it notes none, as midnight's settlement of
//! every position (its entry price) does: noted, a million keys in one pass grew the set,
//! rehashing it in ticks of up to 164 ms. The index orders a mark by its whole 10⁻⁹ first (an
//! integer, rounded down: it orders as the marks do), so its searches compare integers and
//! a `Decimal` only between marks in the same 10⁻⁹: the order, and every range read, is the
//! marks' own.

use std::collections::BTreeSet;

use bevy_ecs::prelude::{Query, Res, ResMut, Resource};
use perpsim_core::Decimal;
use perpsim_core::fixed;
use perpsim_core::ids::{CustomerCode, NotificationCode};
use perpsim_core::risk::depreciation_level_at;
use perpsim_core::time::Timestamp;

use crate::clock::{DueEvents, SimClock};
use crate::positions::{MovedPositions, PositionIndex};
use crate::records::audit::Auditing;
use crate::records::clock::ScheduledEvent;
use crate::records::ids::NoticeSeq;
use crate::records::log::ProjectedLog;
use crate::records::lookup::Lookup;
use crate::records::position::{Position, PositionKey};
use crate::records::risk::Notification;
use crate::records::venue::{InstrumentState, MarketId, MarketSlot};
use crate::rng::EngineRng;

/// Every notice, in creation order (`seq` is the position). State, append-only; a server's
/// engine lets the notices go once the journal's projection holds them (its digest stays).
#[derive(Resource, Debug, Clone, Default, PartialEq, Eq)]
pub struct Notifications(pub ProjectedLog<Notification>);

/// Per market, the marks at which open positions reach their next threshold: longs' at or
/// below, shorts' at or above (each filed a part in 10¹² wide of its exact mark, so the
/// range read is never short of one). Derived: rebuilt from the positions after a restore.
#[derive(Resource, Debug, Default)]
pub struct NoticeTriggers {
    longs: Vec<BTreeSet<Trigger>>,
    shorts: Vec<BTreeSet<Trigger>>,
    /// What each position's filed threshold was worked out from, by key.
    filed: Lookup<PositionKey, Baseline>,
    /// The keys of the positions moved since the last check away from what they filed,
    /// refiled by the next in key order (at most one per (customer, market) a position was
    /// held in since). A write that kept a position's baseline (midnight's settlement sets
    /// its entry price, a million rows at the bound) is not one: its threshold is the same.
    stale: Lookup<PositionKey, ()>,
}

/// What a position's next threshold is worked out from: its side, the highest threshold
/// noticed and its baseline, the average fill price. Two are the same when their average
/// prices are the same to the encoding, so the same threshold follows to the last bit.
#[derive(Debug, Clone, Copy)]
struct Baseline {
    long: bool,
    noticed: u8,
    avg: Decimal,
}

impl Baseline {
    /// Pure: `p`'s, or None where it is closed or its baseline is not a price.
    fn of(p: &Position) -> Option<Self> {
        (!p.size.is_zero() && p.avg_fill_price > Decimal::ZERO).then(|| Baseline {
            long: p.size > Decimal::ZERO,
            noticed: p.noticed,
            avg: p.avg_fill_price,
        })
    }

    fn same(&self, other: &Baseline) -> bool {
        (self.long, self.noticed, self.avg.serialize())
            == (other.long, other.noticed, other.avg.serialize())
    }

    /// Pure: the mark at which the drop reaches the threshold above the one noticed,
    /// widened outwards by a part in 10¹²; None where no positive mark reaches it.
    fn threshold(&self) -> Option<Decimal> {
        let noticed = Decimal::from(self.noticed);
        let tenths = match self.long {
            true => Decimal::from(9) - noticed,
            false => Decimal::from(11).checked_add(noticed)?,
        };
        if tenths <= Decimal::ZERO {
            return None; // a long's drop beyond its whole value needs a mark below zero
        }
        let exact = self.avg.checked_mul(tenths)? / Decimal::TEN;
        let slack = exact * Decimal::new(1, 12);
        Some(if self.long {
            exact + slack
        } else {
            exact - slack
        })
    }
}

impl NoticeTriggers {
    /// Files `p`'s next threshold in place of what its key filed before; one filed from the
    /// same baseline (a fill that reduced the position keeps its average fill price, and so
    /// its threshold) stays.
    fn refile(&mut self, p: &Position) {
        let key = (p.customer, p.market);
        let base = Baseline::of(p);
        if self.kept(key, base) {
            return;
        }
        self.unfile(key);
        let Some((base, mark)) = base.and_then(|b| Some((b, b.threshold()?))) else {
            return;
        };
        let market = p.market as usize;
        if self.longs.len() <= market {
            self.longs.resize_with(market + 1, BTreeSet::new);
            self.shorts.resize_with(market + 1, BTreeSet::new);
        }
        let side = if base.long {
            &mut self.longs
        } else {
            &mut self.shorts
        };
        side[market].insert(trigger(mark, p.customer));
        self.filed.insert(key, base);
    }

    /// Whether `key` filed its threshold from `base`.
    fn kept(&self, key: PositionKey, base: Option<Baseline>) -> bool {
        matches!((self.filed.get(&key), base), (Some(filed), Some(base)) if filed.same(&base))
    }

    /// Refiles every key moved since the last check: its open position's threshold, or
    /// nothing where it closed.
    fn refile_stale(&mut self, index: &PositionIndex, positions: &Query<&mut Position>) {
        for (key, ()) in std::mem::take(&mut self.stale).sorted() {
            match index.get(&key).and_then(|e| positions.get(e).ok()) {
                Some(p) => self.refile(p),
                None => self.unfile(key),
            }
        }
    }

    fn unfile(&mut self, key: PositionKey) {
        if let Some(base) = self.filed.remove(&key) {
            let mark = base.threshold().expect("filed with its threshold");
            let side = if base.long {
                &mut self.longs
            } else {
                &mut self.shorts
            };
            side[key.1 as usize].remove(&trigger(mark, key.0));
        }
    }

    /// The keys whose threshold `mark` reached in `market`.
    fn reached(&self, market: MarketId, mark: Decimal) -> Vec<PositionKey> {
        let m = market as usize;
        let longs = self
            .longs
            .get(m)
            .into_iter()
            .flat_map(|s| s.range(trigger(mark, CustomerCode(perpsim_core::Uuid::nil()))..));
        let shorts = self.shorts.get(m).into_iter().flat_map(|s| {
            s.range(..=trigger(mark, CustomerCode(perpsim_core::Uuid::from_u128(u128::MAX))))
        });
        longs.chain(shorts).map(|&(_, _, c)| (c, market)).collect()
    }
}

#[cfg(test)]
impl NoticeTriggers {
    /// How many keys the next check refiles.
    pub(crate) fn noted(&self) -> usize {
        self.stale.len()
    }
}

/// A filed threshold as its market's index orders it: the mark's whole 10⁻⁹ (rounded down,
/// so it orders as the marks do), the mark (between marks in the same 10⁻⁹), the customer.
type Trigger = (i64, Decimal, CustomerCode);

fn trigger(mark: Decimal, customer: CustomerCode) -> Trigger {
    (super::margin::key(mark, false), mark, customer)
}

/// A market's mark as the check reads it: the decimal with its fixed-point form (None where it
/// has none), and when it was set.
type CheckMark = (MarketId, (Decimal, Option<i128>), Timestamp);

/// DepreciationSystems, every run: the triggers of the positions that changed; on a
/// DepreciationCheck, the positions whose threshold the mark reached, each decided exactly.
pub fn check_depreciation(
    due: Res<DueEvents>,
    clock: Res<SimClock>,
    instruments: Query<(&MarketSlot, &InstrumentState)>,
    (index, mut moved, mut triggers, auditing): (
        Res<PositionIndex>,
        ResMut<MovedPositions>,
        ResMut<NoticeTriggers>,
        Res<Auditing>,
    ),
    mut positions: Query<&mut Position>,
    (mut notifications, mut rng): (ResMut<Notifications>, ResMut<EngineRng>),
) {
    // The run's moved positions off their filed baseline; one a liquidation closed since is
    // unfiled when reached.
    for &entity in &moved.list {
        if let Ok(p) = positions.get(entity) {
            let key = (p.customer, p.market);
            if !triggers.kept(key, Baseline::of(p)) {
                triggers.stale.insert(key, ());
            }
        }
    }
    if !due.has(ScheduledEvent::DepreciationCheck) {
        return;
    }
    triggers.refile_stale(&index, &positions);
    let now = clock.now;
    let marks = check_marks(&instruments);
    let reached: Vec<PositionKey> = marks
        .iter()
        .flat_map(|&(m, (mark, _), _)| triggers.reached(m, mark))
        .collect();
    if auditing.0 {
        check_against_scan(&positions, &marks, &reached);
    }
    let mut due_notices = Vec::new();
    for key in reached {
        let Some(entity) = index.get(&key) else {
            triggers.unfile(key); // closed since it was filed
            continue;
        };
        let mut p = positions
            .get_mut(entity)
            .expect("indexed positions are live");
        let (_, (mark, mark_fixed), mark_time) = marks[p.market as usize];
        let level = depreciation_level_at(p.size, p.avg_fill_price, (mark, mark_fixed));
        if level <= p.noticed {
            continue;
        }
        p.noticed = level;
        moved.wrote(entity);
        triggers.refile(&p);
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
    record_notices(due_notices, &mut notifications, &mut rng);
}

/// Per market: its mark, in fixed point where it fits, converted once for all its
/// positions, and when it was set; by market id.
fn check_marks(instruments: &Query<(&MarketSlot, &InstrumentState)>) -> Vec<CheckMark> {
    let mut marks: Vec<CheckMark> = instruments
        .iter()
        .map(|(m, s)| {
            let mark = s.mark_price;
            (m.0, (mark, fixed::from_decimal(mark)), s.price_time)
        })
        .collect();
    marks.sort_unstable_by_key(|m| m.0);
    marks
}

/// The check's notices into the log, numbered and coded in key order, whatever order the
/// index gave them in.
fn record_notices(
    mut due: Vec<Notification>,
    notifications: &mut Notifications,
    rng: &mut EngineRng,
) {
    due.sort_unstable_by_key(|n| (n.customer, n.market));
    for mut n in due {
        n.seq = NoticeSeq(notifications.0.len() as u64);
        n.code = NotificationCode(rng.0.uuid());
        notifications.0.push(n);
    }
}

/// The oracle of the triggers (while the engine audits, every check): every position a scan
/// of all would notice is among those the index returned.
fn check_against_scan(
    positions: &Query<&mut Position>,
    marks: &[CheckMark],
    reached: &[PositionKey],
) {
    let reached: BTreeSet<&PositionKey> = reached.iter().collect();
    for p in positions {
        let (_, mark, _) = marks[p.market as usize];
        if depreciation_level_at(p.size, p.avg_fill_price, mark) > p.noticed {
            assert!(
                reached.contains(&(p.customer, p.market)),
                "position {} reaches a threshold its trigger did not",
                p.code
            );
        }
    }
}
