//! The projection's candles (issue 37, D8): every market's OHLC candle of every interval and
//! period that had a trade, folded from the public fills as the projection takes them, keyed
//! (market, interval, open time) for `/ohlc`'s ranges. The engine keeps none but the last
//! day's one-minute candles, so its state no longer grows with them.
//!
//! A row carries the sequence number of the last fill folded into it (`through`), and a fill
//! is folded only past it. A candle's fills are folded in sequence order (a commit's fills in
//! the order they were made, the backlog's batches oldest first), so a row always holds a
//! prefix of its candle's fills, and projecting the same fills again — a backlog's share
//! written twice, recovery projecting the ticks after a crash's mark in other commits than
//! before — changes nothing: the projection is a pure function of the fills it has taken,
//! however they were cut.
//!
//! A read is a range of the table in one read transaction, with the backlog's fills (taken
//! before it began) folded in past each row's `through`: together they hold every fill of
//! every tick the read view has.

use std::collections::BTreeMap;
use std::ops::RangeInclusive;

use perpsim_systems::records::tape::{Candle, INTERVALS, period_open};
use perpsim_systems::records::trade::PublicFill;
use perpsim_systems::records::venue::MarketId;
use redb::{ReadableTable, TableDefinition, WriteTransaction};
use serde::{Deserialize, Serialize};

use crate::backlog::Pending;
use crate::journal::JournalError;

/// (market, interval's index in [`INTERVALS`], open time) → an encoded [`Folded`].
pub(crate) const CANDLES: TableDefinition<(u32, u8, i64), &[u8]> = TableDefinition::new("candles");

type Key = (u32, u8, i64);

/// A candle and the last fill folded into it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Folded {
    through: u64,
    candle: Candle,
}

/// Folds `fill` into `row` unless it holds it already; whether the row changed.
fn fold(row: &mut Option<Folded>, fill: &PublicFill) -> bool {
    match row {
        Some(r) if fill.seq.0 <= r.through => false,
        Some(r) => {
            r.candle.add(fill);
            r.through = fill.seq.0;
            true
        }
        None => {
            *row = Some(Folded {
                through: fill.seq.0,
                candle: Candle::of(fill),
            });
            true
        }
    }
}

/// The key of `fill`'s candle of interval `i`.
fn key(fill: &PublicFill, i: usize) -> Key {
    (
        fill.market,
        i as u8,
        period_open(fill.timestamp, INTERVALS[i].1),
    )
}

fn decode(key: Key, bytes: &[u8]) -> Result<Folded, JournalError> {
    postcard::from_bytes(bytes).map_err(|e| JournalError::Corrupt(format!("candle {key:?}: {e}")))
}

/// Folds `fills` (in sequence order) into their candles of every interval: one read and one
/// write per candle they touch, not per fill.
pub(crate) fn write<'a>(
    txn: &WriteTransaction,
    fills: impl Iterator<Item = &'a PublicFill>,
) -> Result<(), JournalError> {
    let fills: Vec<&PublicFill> = fills.collect();
    let mut table = txn.open_table(CANDLES)?;
    let mut touched: Vec<(Key, &PublicFill)> = Vec::with_capacity(fills.len() * INTERVALS.len());
    for i in 0..INTERVALS.len() {
        touched.extend(fills.iter().map(|&f| (key(f, i), f)));
    }
    // Stable: each candle's fills stay in sequence order.
    touched.sort_by_key(|&(k, _)| k);
    for run in touched.chunk_by(|a, b| a.0 == b.0) {
        let k = run[0].0;
        let mut row = match table.get(k)? {
            Some(v) => Some(decode(k, v.value())?),
            None => None,
        };
        let mut changed = false;
        for &(_, fill) in run {
            changed |= fold(&mut row, fill);
        }
        if changed && let Some(row) = row {
            let encoded = postcard::to_stdvec(&row).expect("candles always encode");
            table.insert(k, encoded.as_slice())?;
        }
    }
    Ok(())
}

/// `market`'s candles of interval `i` of [`INTERVALS`] that open within `opens`, by open time:
/// the table's through a read transaction begun after `pending` was taken, and the backlog's
/// fills folded in.
pub(crate) fn read(
    pending: &Pending,
    txn: &redb::ReadTransaction,
    (market, i): (MarketId, usize),
    opens: RangeInclusive<i64>,
) -> Result<Vec<(i64, Candle)>, JournalError> {
    if opens.is_empty() {
        return Ok(Vec::new());
    }
    let mut rows: BTreeMap<i64, Option<Folded>> = BTreeMap::new();
    match txn.open_table(CANDLES) {
        Ok(table) => {
            let (lo, hi) = (
                (market, i as u8, *opens.start()),
                (market, i as u8, *opens.end()),
            );
            for entry in table.range(lo..=hi)? {
                let (k, v) = entry?;
                let k = k.value();
                rows.insert(k.2, Some(decode(k, v.value())?));
            }
        }
        Err(redb::TableError::TableDoesNotExist(_)) => {}
        Err(e) => return Err(e.into()),
    }
    for fill in pending.fills().filter(|f| f.market == market) {
        let open = key(fill, i).2;
        if opens.contains(&open) {
            fold(rows.entry(open).or_default(), fill);
        }
    }
    let candles = rows
        .into_iter()
        .filter_map(|(open, row)| Some((open, row?.candle)));
    Ok(candles.collect())
}

#[cfg(test)]
mod tests {
    use perpsim_core::Decimal;
    use perpsim_core::ids::FillCode;
    use perpsim_core::order::Side;
    use perpsim_core::rng::SimRng;
    use perpsim_core::time::Timestamp;
    use perpsim_systems::records::history::HandedHistory;
    use perpsim_systems::records::ids::FillSeq;

    use super::*;
    use crate::recovery::tests::{START, fresh};
    use crate::{Journal, NonceWrites, Projected, TickRecord};

    const MARKETS: u32 = 3;

    /// Fills of three markets over about four days, minutes to an hour apart.
    fn random_fills(rng: &mut SimRng, n: u64) -> Vec<PublicFill> {
        let mut at = START.millis();
        (0..n)
            .map(|seq| {
                at += (rng.next_u64() % 5_400_000) as i64 / (1 + (rng.next_u64() % 40) as i64);
                PublicFill {
                    seq: FillSeq(seq),
                    code: FillCode(perpsim_core::Uuid::from_u128(u128::from(seq))),
                    market: (rng.next_u64() % u64::from(MARKETS)) as u32,
                    price: Decimal::new(600_000 + (rng.next_u64() % 2_000) as i64, 1),
                    amount: Decimal::new((1 + rng.next_u64() % 100) as i64, 4),
                    taker_side: Side::Sell,
                    timestamp: Timestamp::from_millis(at),
                }
            })
            .collect()
    }

    /// D8's candles of `fills`, folded one by one: the oracle.
    fn oracle(fills: &[PublicFill], market: u32, i: usize) -> Vec<(i64, Candle)> {
        let mut candles: BTreeMap<i64, Candle> = BTreeMap::new();
        for f in fills.iter().filter(|f| f.market == market) {
            candles
                .entry(period_open(f.timestamp, INTERVALS[i].1))
                .and_modify(|c| c.add(f))
                .or_insert_with(|| Candle::of(f));
        }
        candles.into_iter().collect()
    }

    /// Every market's candles of every interval, as a read sees them, against the oracle of
    /// `fills`; also a window cut out of the middle.
    fn assert_reads(journal: &Journal, fills: &[PublicFill]) {
        let projection = journal.projection().unwrap();
        for market in 0..MARKETS {
            for (i, (_, interval)) in INTERVALS.iter().enumerate() {
                let want = oracle(fills, market, i);
                let got = projection.candles(market, i, i64::MIN..=i64::MAX).unwrap();
                assert_eq!(got, want, "market {market}, interval {i}");
                let Some(&(mid, _)) = want.get(want.len() / 2) else {
                    continue;
                };
                let window = mid - 3 * interval..=mid + interval;
                let got = projection.candles(market, i, window.clone()).unwrap();
                let want: Vec<_> = want.into_iter().filter(|c| window.contains(&c.0)).collect();
                assert_eq!(got, want, "market {market}, interval {i}, {window:?}");
            }
        }
    }

    /// `fills` as one commit of a tick (no commands), projected as a server's writer does.
    fn commit(journal: &Journal, tick: u64, fills: &[PublicFill]) {
        let rows = Projected {
            ended: Vec::new(),
            history: HandedHistory {
                fills: fills.to_vec().into(),
                ..HandedHistory::default()
            },
        };
        let record = TickRecord::encode(START, 0, &[]);
        let nonces = NonceWrites::default();
        journal
            .append_batch(tick, &[record], Some(rows), nonces)
            .unwrap();
    }

    /// Issue 37, D8: the projection's candles of every market, interval and period are the
    /// public fills folded, whether a commit's fills went into its own transaction or waited
    /// in the backlog a few writes at a time (a read then folds the backlog's in), and
    /// folding fills again that a row already holds — a share written twice, recovery
    /// projecting ticks after a crash — changes nothing.
    #[test]
    fn the_projected_candles_are_the_fills_folded_however_the_projection_cuts_them() {
        for backlog in [false, true] {
            let (_dir, journal, _) = fresh();
            if backlog {
                journal.set_backlog_limits(crate::backlog::Limits {
                    inline: 0,
                    slice: 7,
                    linger: 1,
                });
            }
            let mut rng = SimRng::from_seed(37);
            let fills = random_fills(&mut rng, 3_000);
            let (mut made, mut tick) = (0, journal.last_tick().unwrap());
            while made < fills.len() {
                let n = (1 + rng.next_u64() % 60) as usize;
                let to = (made + n).min(fills.len());
                tick += 1;
                commit(&journal, tick, &fills[made..to]);
                made = to;
                if rng.next_u64().is_multiple_of(10) {
                    assert_reads(&journal, &fills[..made]);
                }
            }
            assert_eq!(journal.backlog() > 0, backlog, "the backlog is behind");
            assert_reads(&journal, &fills);
            while journal.project_backlog().unwrap() {}
            // Some fills again, as recovery projects the ticks after a crash's mark.
            let again = fills.len() / 3..fills.len() / 2;
            journal
                .write_history(|txn| write(txn, fills[again].iter()))
                .unwrap();
            assert_reads(&journal, &fills);
            let (days, hours) = (oracle(&fills, 0, 5).len(), oracle(&fills, 0, 3).len());
            assert!(
                days >= 4 && hours > 40,
                "{days} days, {hours} hours of candles"
            );
        }
    }
}
