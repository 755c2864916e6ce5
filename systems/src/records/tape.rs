//! The market data the public fills make (D8) that live state keeps: per market, its one-minute
//! candles of the last day (the ticker's 24 h figures) and its latest fills, and the latest
//! fills of every market. Bounded (at most [`DAY_CANDLES`] candles and [`RECENT_FILLS`] fills
//! a list) however long the venue runs; kept in snapshots, so neither a restore nor the read
//! view needs the fills' history. A persistent map and chunks behind `Arc`s
//! ([`RecentFills`]), so the read view shares them.
//!
//! The candles of every interval and period are history: the journal's projection folds them
//! from the public fills it holds (issue 37), with [`Candle::of`] and [`Candle::add`].

use std::collections::VecDeque;
use std::sync::Arc;

use imbl::OrdMap;
use perpsim_core::Decimal;
use perpsim_core::time::{DAY_MS, HOUR_MS, MINUTE_MS, Timestamp};
use serde::{Deserialize, Serialize};

use crate::records::trade::PublicFill;

/// Candle intervals of D8, in milliseconds, with their wire names.
pub const INTERVALS: [(&str, i64); 6] = [
    ("1m", MINUTE_MS),
    ("5m", 5 * MINUTE_MS),
    ("15m", 15 * MINUTE_MS),
    ("1h", HOUR_MS),
    ("4h", 4 * HOUR_MS),
    ("1d", DAY_MS),
];

/// Public fills kept, overall and per market: what the recent-trades list can show (its
/// `limit` is at most this).
pub const RECENT_FILLS: usize = 1_000;

/// One-minute candles a market keeps: a day's, what the ticker's 24 h figures read.
pub const DAY_CANDLES: usize = (DAY_MS / MINUTE_MS) as usize;

/// The open time of the period of `interval` milliseconds that `time` falls in.
pub fn period_open(time: Timestamp, interval: i64) -> i64 {
    time.millis().div_euclid(interval) * interval
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candle {
    #[serde(with = "perpsim_core::decimal::bin")]
    pub open: Decimal,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub high: Decimal,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub low: Decimal,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub close: Decimal,
    #[serde(with = "perpsim_core::decimal::bin")]
    pub volume: Decimal,
}

impl Candle {
    /// The candle of a period whose first fill is `fill`.
    pub fn of(fill: &PublicFill) -> Self {
        Candle {
            open: fill.price,
            high: fill.price,
            low: fill.price,
            close: fill.price,
            volume: fill.amount,
        }
    }

    /// Folds in the period's next fill.
    pub fn add(&mut self, fill: &PublicFill) {
        self.high = self.high.max(fill.price);
        self.low = self.low.min(fill.price);
        self.close = fill.price;
        self.volume += fill.amount;
    }
}

/// One market's data.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarketTape {
    /// The one-minute candles before the newest, by open time: those that opened less than a
    /// day before it (at most [`DAY_CANDLES`]); only periods with trades.
    day: OrdMap<i64, Candle>,
    /// The newest one-minute candle and its open time: what a fill almost always adds to,
    /// without a map's look-up.
    newest: Option<(i64, Candle)>,
    /// Its latest public fills, at most [`RECENT_FILLS`], oldest first.
    pub fills: RecentFills,
}

impl MarketTape {
    /// The one-minute candles of the last day, by open time: every one that opened less than
    /// a day before the newest, the newest included.
    pub fn day_candles(&self) -> OrdMap<i64, Candle> {
        let mut candles = self.day.clone();
        if let Some((at, candle)) = self.newest {
            candles.insert(at, candle);
        }
        candles
    }

    fn record(&mut self, fill: &PublicFill) {
        let at = period_open(fill.timestamp, MINUTE_MS);
        match &mut self.newest {
            Some((open, candle)) if *open == at => candle.add(fill),
            // Fills come in time order; kept right should one not.
            Some((open, _)) if *open > at => match self.day.get_mut(&at) {
                Some(candle) => candle.add(fill),
                None => {
                    self.day.insert(at, Candle::of(fill));
                }
            },
            newest => {
                if let Some((open, candle)) = newest.replace((at, Candle::of(fill))) {
                    self.day.insert(open, candle);
                }
            }
        }
        let newest = self.newest.map_or(at, |(open, _)| open);
        while let Some(&(open, _)) = self.day.get_min()
            && open <= newest - DAY_MS
        {
            self.day.remove(&open);
        }
        assert!(self.day.len() < DAY_CANDLES, "a day's candles at most");
        self.fills.push(fill);
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tape {
    /// By market id; a market that never traded may have none.
    pub markets: Vec<MarketTape>,
    /// The latest public fills of every market, at most [`RECENT_FILLS`], oldest first.
    pub fills: RecentFills,
}

impl Tape {
    /// Adds a fill to its market's candles and to the latest fills.
    pub fn record(&mut self, fill: &PublicFill) {
        let market = fill.market as usize;
        if self.markets.len() <= market {
            self.markets.resize_with(market + 1, MarketTape::default);
        }
        self.markets[market].record(fill);
        self.fills.push(fill);
    }
}

/// Fills a chunk of [`RecentFills`] holds. The list's oldest chunk is only let go whole, so
/// the list holds fewer than this past [`RECENT_FILLS`].
const CHUNK: usize = 64;
const _: () = assert!(
    CHUNK <= RECENT_FILLS,
    "only the oldest chunk holds fills let go"
);

/// The latest public fills, at most [`RECENT_FILLS`], oldest first, in chunks of [`CHUNK`]
/// behind `Arc`s. A clone (the read view's, each tick that traded) copies a few pointers; a
/// push copies at most the newest chunk, once after a clone shares it, and drops the oldest
/// chunk whole once all of it is past the bound. The persistent vector it replaced paid a
/// tree's push and pop a fill in each of a fill's two lists (its market's and every market's);
/// `benches/README.md` has what this saves. Serialized as the sequence of its fills, as the
/// persistent vector was, so a snapshot's encoding did not change.
#[derive(Clone, Default)]
pub struct RecentFills {
    /// Every chunk full but the newest; none empty.
    chunks: VecDeque<Arc<Vec<PublicFill>>>,
    /// Fills of the oldest chunk past the bound, no longer in the list.
    dropped: usize,
    len: usize,
}

impl RecentFills {
    /// Oldest first; reversible, for the newest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &PublicFill> {
        let dropped = self.dropped;
        self.chunks
            .iter()
            .enumerate()
            .flat_map(move |(i, c)| c[if i == 0 { dropped } else { 0 }..].iter())
    }

    /// Appends `fill`, letting the oldest go past [`RECENT_FILLS`].
    pub fn push(&mut self, fill: &PublicFill) {
        let newest = match self.chunks.back_mut() {
            Some(chunk) if chunk.len() < CHUNK => chunk,
            _ => {
                self.chunks.push_back(Arc::new(Vec::with_capacity(CHUNK)));
                self.chunks.back_mut().expect("just pushed")
            }
        };
        if Arc::get_mut(newest).is_none() {
            // Shared with a read view: the copy gets a whole chunk's room, not the length's.
            let mut own = Vec::with_capacity(CHUNK);
            own.extend_from_slice(newest);
            *newest = Arc::new(own);
        }
        Arc::get_mut(newest).expect("owned").push(fill.clone());
        self.len += 1;
        if self.len > RECENT_FILLS {
            self.len -= 1;
            self.dropped += 1;
            if self.dropped == CHUNK {
                self.chunks.pop_front();
                self.dropped = 0;
            }
        }
    }
}

impl PartialEq for RecentFills {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl Eq for RecentFills {}

impl std::fmt::Debug for RecentFills {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Serialize for RecentFills {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.len))?;
        for fill in self.iter() {
            seq.serialize_element(fill)?;
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for RecentFills {
    /// More than [`RECENT_FILLS`] keeps the newest of them.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let fills = Vec::<PublicFill>::deserialize(d)?;
        let mut recent = RecentFills::default();
        fills.iter().for_each(|f| recent.push(f));
        Ok(recent)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use perpsim_core::ids::FillCode;
    use perpsim_core::order::Side;
    use perpsim_core::rng::SimRng;

    use super::*;
    use crate::records::ids::FillSeq;

    /// A market's one-minute candles folded from every fill, the way D8 defines them.
    fn folded(fills: &[PublicFill], market: u32) -> BTreeMap<i64, Candle> {
        let mut candles = BTreeMap::new();
        for f in fills.iter().filter(|f| f.market == market) {
            candles
                .entry(period_open(f.timestamp, MINUTE_MS))
                .and_modify(|c: &mut Candle| c.add(f))
                .or_insert_with(|| Candle::of(f));
        }
        candles
    }

    /// A clone (the read view's, taken each tick that traded) keeps the fills it was taken
    /// with while the list goes on, whichever chunk it shared; and the list encodes as the
    /// sequence of its fills, byte for byte as the persistent vector it replaced did, so the
    /// snapshots' encoding and the state hash are unchanged.
    #[test]
    fn recent_fills_shared_with_a_view_stay_as_taken_and_encode_as_before() {
        let fill = |seq: u64| PublicFill {
            seq: FillSeq(seq),
            code: FillCode(perpsim_core::Uuid::from_u128(u128::from(seq))),
            market: 0,
            price: Decimal::from(50_000 + seq % 1_000),
            amount: Decimal::new(1 + (seq % 100) as i64, 4),
            taker_side: Side::Sell,
            timestamp: Timestamp::from_millis(1_767_225_600_000 + seq as i64),
        };
        let (mut recent, mut all, mut views) = (RecentFills::default(), Vec::new(), Vec::new());
        for seq in 0..2_500u64 {
            recent.push(&fill(seq));
            all.push(fill(seq));
            if seq % 7 == 0 || seq % 64 == 63 {
                views.push((all.len(), recent.clone()));
            }
        }
        for (n, view) in &views {
            let want = &all[n.saturating_sub(RECENT_FILLS)..*n];
            assert_eq!(view.iter().count(), want.len());
            assert!(view.iter().eq(want.iter()), "the view of {n} fills");
            assert!(view.iter().rev().eq(want.iter().rev()));
        }
        let bytes = postcard::to_stdvec(&recent).expect("encodes");
        let vector: imbl::Vector<PublicFill> =
            all[all.len() - RECENT_FILLS..].iter().cloned().collect();
        assert_eq!(bytes, postcard::to_stdvec(&vector).expect("encodes"));
        let decoded: RecentFills = postcard::from_bytes(&bytes).expect("decodes");
        assert_eq!(decoded, recent);
    }

    /// D8: the tape's one-minute candles (the newest kept apart) are the fills folded per
    /// minute, of the day before the newest only, across minute boundaries and three days of
    /// fills; the latest fills are the last [`RECENT_FILLS`], overall and per market.
    #[test]
    fn the_tape_holds_the_last_days_minute_candles_and_the_latest_fills() {
        let mut rng = SimRng::from_seed(8);
        let mut tape = Tape::default();
        let mut fills = Vec::new();
        let mut at = 1_767_225_600_000i64;
        for seq in 0..5_000u64 {
            at += (rng.next_u64() % 150_000) as i64;
            let fill = PublicFill {
                seq: FillSeq(seq),
                code: FillCode(perpsim_core::Uuid::from_u128(u128::from(seq))),
                market: (rng.next_u64() % 3) as u32,
                price: Decimal::from(50_000 + rng.next_u64() % 1_000),
                amount: Decimal::new((1 + rng.next_u64() % 100) as i64, 4),
                taker_side: Side::Buy,
                timestamp: Timestamp::from_millis(at),
            };
            tape.record(&fill);
            fills.push(fill);
        }
        for market in 0..3u32 {
            let m = &tape.markets[market as usize];
            let got: BTreeMap<i64, Candle> = m.day_candles().into_iter().collect();
            let mut want = folded(&fills, market);
            let newest = *want.keys().next_back().unwrap();
            want.retain(|&open, _| open > newest - DAY_MS);
            assert!(want.len() > 100 && *want.keys().next().unwrap() > newest - DAY_MS);
            assert_eq!(got, want, "market {market}");
            let mine: Vec<_> = fills.iter().filter(|f| f.market == market).collect();
            let latest: Vec<_> = m.fills.iter().collect();
            assert_eq!(latest, mine[mine.len() - RECENT_FILLS..]);
        }
        assert!(
            at - 1_767_225_600_000 > 2 * DAY_MS,
            "days of fills, candles let go"
        );
        let latest: Vec<_> = tape.fills.iter().cloned().collect();
        assert_eq!(latest, fills[fills.len() - RECENT_FILLS..]);
    }
}
