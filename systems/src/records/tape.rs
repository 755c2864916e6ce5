//! The market data the public fills make (D8): per market, its OHLC candles per interval and
//! its latest fills, and the latest fills of every market. Live state, bounded (a candle per
//! interval period that had a trade; [`RECENT_FILLS`] fills a list), kept in snapshots, so
//! neither a restore nor the read view needs the fills' history, which the journal's
//! projection holds (issue 37). Persistent maps and vectors, so the read view shares them.

use imbl::{OrdMap, Vector};
use perpsim_core::Decimal;
use perpsim_core::time::{DAY_MS, HOUR_MS, MINUTE_MS};
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
    fn of(fill: &PublicFill) -> Self {
        Candle {
            open: fill.price,
            high: fill.price,
            low: fill.price,
            close: fill.price,
            volume: fill.amount,
        }
    }

    fn add(&mut self, fill: &PublicFill) {
        self.high = self.high.max(fill.price);
        self.low = self.low.min(fill.price);
        self.close = fill.price;
        self.volume += fill.amount;
    }
}

/// One market's data.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarketTape {
    /// Per interval of [`INTERVALS`], the candles before the newest, by open time; only
    /// periods with trades.
    closed: [OrdMap<i64, Candle>; INTERVALS.len()],
    /// Per interval, the newest candle and its open time: what a fill almost always adds
    /// to, without a map's look-up.
    newest: [Option<(i64, Candle)>; INTERVALS.len()],
    /// Its latest public fills, at most [`RECENT_FILLS`], oldest first.
    pub fills: Vector<PublicFill>,
}

impl MarketTape {
    /// The candles of interval `i` of [`INTERVALS`], by open time.
    pub fn candles(&self, i: usize) -> OrdMap<i64, Candle> {
        let mut candles = self.closed[i].clone();
        if let Some((at, candle)) = self.newest[i] {
            candles.insert(at, candle);
        }
        candles
    }

    fn record(&mut self, fill: &PublicFill) {
        let time = fill.timestamp.millis();
        for (i, (_, interval)) in INTERVALS.into_iter().enumerate() {
            let at = time.div_euclid(interval) * interval;
            match &mut self.newest[i] {
                Some((open, candle)) if *open == at => candle.add(fill),
                Some((open, _)) if *open > at => match self.closed[i].get_mut(&at) {
                    // Fills come in time order; kept right should one not.
                    Some(candle) => candle.add(fill),
                    None => {
                        self.closed[i].insert(at, Candle::of(fill));
                    }
                },
                newest => {
                    if let Some((open, candle)) = newest.replace((at, Candle::of(fill))) {
                        self.closed[i].insert(open, candle);
                    }
                }
            }
        }
        keep_recent(&mut self.fills, fill);
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tape {
    /// By market id; a market that never traded may have none.
    pub markets: Vec<MarketTape>,
    /// The latest public fills of every market, at most [`RECENT_FILLS`], oldest first.
    pub fills: Vector<PublicFill>,
}

/// Appends `fill`, dropping the oldest past [`RECENT_FILLS`].
fn keep_recent(fills: &mut Vector<PublicFill>, fill: &PublicFill) {
    if fills.len() == RECENT_FILLS {
        fills.pop_front();
    }
    fills.push_back(fill.clone());
}

impl Tape {
    /// Adds a fill to its market's candles and to the latest fills.
    pub fn record(&mut self, fill: &PublicFill) {
        let market = fill.market as usize;
        if self.markets.len() <= market {
            self.markets.resize_with(market + 1, MarketTape::default);
        }
        self.markets[market].record(fill);
        keep_recent(&mut self.fills, fill);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use perpsim_core::ids::FillCode;
    use perpsim_core::order::Side;
    use perpsim_core::rng::SimRng;
    use perpsim_core::time::Timestamp;

    use super::*;
    use crate::records::ids::FillSeq;

    /// Each interval's candles folded from every fill, the way D8 defines them.
    fn folded(fills: &[PublicFill], market: u32, interval: i64) -> BTreeMap<i64, Candle> {
        let mut candles = BTreeMap::new();
        for f in fills.iter().filter(|f| f.market == market) {
            let at = f.timestamp.millis().div_euclid(interval) * interval;
            candles
                .entry(at)
                .and_modify(|c: &mut Candle| c.add(f))
                .or_insert_with(|| Candle::of(f));
        }
        candles
    }

    /// D8: the tape's candles (the newest kept apart) are the fills folded per period, for
    /// every interval and market, across period boundaries; the latest fills are the last
    /// [`RECENT_FILLS`], overall and per market.
    #[test]
    fn the_tape_holds_every_periods_candle_and_the_latest_fills() {
        let mut rng = SimRng::from_seed(8);
        let mut tape = Tape::default();
        let mut fills = Vec::new();
        let mut at = 1_767_225_600_000i64;
        for seq in 0..5_000u64 {
            at += (rng.next_u64() % 90_000) as i64;
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
            for (i, (_, interval)) in INTERVALS.into_iter().enumerate() {
                let got: BTreeMap<i64, Candle> = m.candles(i).into_iter().collect();
                assert_eq!(got, folded(&fills, market, interval), "market {market} {i}");
            }
            let mine: Vec<_> = fills.iter().filter(|f| f.market == market).collect();
            let latest: Vec<_> = m.fills.iter().collect();
            assert_eq!(latest, mine[mine.len() - RECENT_FILLS..]);
        }
        let latest: Vec<_> = tape.fills.iter().cloned().collect();
        assert_eq!(latest, fills[fills.len() - RECENT_FILLS..]);
    }
}
