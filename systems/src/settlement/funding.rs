//! Hourly funding (interface §1, §2.12, §4.1; D3, D7).
//!
//! The preliminary rate of the running hour is the time-weighted premium of the book's mid
//! over the mark — one sample each whole minute the book has both sides, so every sample
//! weighs one minute — clamped to ±0.5 %, unless the admin API set a rate for the interval.
//! On the hour each open position pays `amount × mark × rate` (longs pay shorts when it is
//! positive), booked against the clearing account, and the rate is recorded; an hour with no
//! preliminary rate settles nothing and records nothing.

use std::sync::Arc;

use bevy_ecs::prelude::{Mut, Res, ResMut, Resource, World};
use perpsim_core::time::{HOUR_MS, Timestamp};
use perpsim_core::{Decimal, RoundingStrategy};
use serde::{Deserialize, Serialize};

use super::Marks;
use crate::clock::SimClock;
use crate::command::Answer;
use crate::records::funding::{
    FundingRecord, FundingView, MAX_RATE_DECIMALS, RATE_CLAMP, RATE_DECIMALS,
};
use crate::records::ids::FundingSeq;
use crate::records::log::{LogDigest, ProjectedLog};
use crate::records::money::PeriodicInfo;
use crate::records::periodic::{Pass, PeriodicPasses};
use crate::records::venue::{MarketId, MarketSlot};
use crate::trading::exchange::Exchange;

/// Decimals a premium sample keeps.
const PREMIUM_DECIMALS: u32 = 12;

/// The running interval of one market.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Interval {
    #[serde(with = "perpsim_core::decimal::bin")]
    premium_sum: Decimal,
    samples: u32,
    #[serde(with = "perpsim_core::decimal::bin_opt")]
    set_rate: Option<Decimal>,
}

impl Interval {
    /// Pure: the set rate, else the mean premium clamped and rounded, else none.
    fn preliminary(&self) -> Option<Decimal> {
        self.set_rate.or_else(|| {
            (self.samples > 0).then(|| {
                (self.premium_sum / Decimal::from(self.samples))
                    .clamp(-RATE_CLAMP, RATE_CLAMP)
                    .round_dp_with_strategy(RATE_DECIMALS, RoundingStrategy::MidpointNearestEven)
            })
        })
    }
}

/// Funding's state: the running interval per market and every settlement so far, in
/// settlement order (by time, then market id). The settlements are history: a server's
/// engine lets them go once the journal's projection holds them (their digest stays).
#[derive(Resource, Debug, Clone, Default, PartialEq, Eq)]
pub struct FundingState {
    /// Start of the running interval (the last whole hour).
    interval_start: Timestamp,
    /// Indexed by market id.
    intervals: Vec<Interval>,
    /// Per market, its latest settlement.
    latest: Vec<Option<FundingRecord>>,
    pub history: ProjectedLog<FundingRecord>,
}

/// What a snapshot keeps of [`FundingState`] under the state hash: all but the settlements'
/// rows, which it carries outside (`engine::snapshot::HeldHistory`), named by their digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FundingBody {
    interval_start: Timestamp,
    intervals: Vec<Interval>,
    latest: Vec<Option<FundingRecord>>,
    pub history: LogDigest,
}

/// [`FundingBody`] as the world holds it, field for field (it encodes to the same bytes).
#[derive(Serialize)]
pub struct FundingBodyRef<'a> {
    interval_start: Timestamp,
    intervals: &'a [Interval],
    latest: &'a [Option<FundingRecord>],
    history: LogDigest,
}

impl FundingState {
    pub fn new(markets: usize, start: Timestamp) -> Self {
        FundingState {
            interval_start: Timestamp::from_millis(start.millis().div_euclid(HOUR_MS) * HOUR_MS),
            intervals: vec![Interval::default(); markets],
            latest: vec![None; markets],
            history: ProjectedLog::default(),
        }
    }

    /// How many markets; their ids are `0..markets()`.
    pub fn markets(&self) -> MarketId {
        self.intervals.len() as MarketId
    }

    pub fn view(&self, market: MarketId) -> FundingView {
        FundingView {
            market,
            latest: self.latest[market as usize].clone(),
            preliminary: self.intervals[market as usize].preliminary(),
            interval_start: self.interval_start,
        }
    }

    pub fn body(&self) -> FundingBody {
        FundingBody {
            interval_start: self.interval_start,
            intervals: self.intervals.clone(),
            latest: self.latest.clone(),
            history: self.history.digest(),
        }
    }

    pub fn body_ref(&self) -> FundingBodyRef<'_> {
        FundingBodyRef {
            interval_start: self.interval_start,
            intervals: &self.intervals,
            latest: &self.latest,
            history: self.history.digest(),
        }
    }

    /// A restore's funding: a snapshot's body with the settlements it still held
    /// (`EngineState::decode` checked them against the body's digest).
    pub fn restored(body: FundingBody, history: ProjectedLog<FundingRecord>) -> Self {
        FundingState {
            interval_start: body.interval_start,
            intervals: body.intervals,
            latest: body.latest,
            history,
        }
    }
}

/// FundingSystems, on the hour: every market with a preliminary rate settles it. Its rate is
/// recorded now; its rows are booked by the pass it starts (`passes::continue_funding`).
pub fn settle_funding(
    clock: Res<SimClock>,
    marks: Marks,
    mut state: ResMut<FundingState>,
    mut passes: ResMut<PeriodicPasses>,
) {
    let now = clock.now;
    let marks = marks.by_market();
    let rates: Vec<Option<Decimal>> = state.intervals.iter().map(Interval::preliminary).collect();
    let terms: Vec<Option<Arc<PeriodicInfo>>> = rates
        .iter()
        .zip(&marks)
        .map(|(rate, (mark, symbol, _))| {
            rate.map(|rate| {
                Arc::new(PeriodicInfo {
                    symbol: Arc::clone(symbol),
                    mark_price: *mark,
                    funding_rate: Some(rate),
                })
            })
        })
        .collect();
    for (market, rate) in rates.into_iter().enumerate() {
        if let Some(rate) = rate {
            let record = FundingRecord {
                seq: FundingSeq(state.history.len() as u64),
                market: market as MarketId,
                rate,
                time: now,
                mark_price: marks[market].0,
            };
            state.history.push(record.clone());
            state.latest[market] = Some(record);
        }
        state.intervals[market] = Interval::default();
    }
    state.interval_start = now;
    assert!(
        passes.funding.is_none(),
        "a pass ends before the clock moves on"
    );
    if terms.iter().any(Option::is_some) {
        passes.funding = Some(Pass::new(now, terms));
    }
}

/// FundingSystems, each whole minute, after the hour's settlement (a sample on the hour
/// belongs to the interval it opens): the premium of every two-sided book.
pub fn sample_premium(marks: Marks, exchange: Res<Exchange>, mut state: ResMut<FundingState>) {
    let marks = marks.by_market();
    for (market, m) in exchange.markets.iter().enumerate() {
        let (Some((bid, _)), Some((ask, _))) = (m.book.best_bid(), m.book.best_ask()) else {
            continue;
        };
        let mid = (m.price(bid) + m.price(ask)) / Decimal::TWO;
        let mark = marks[market].0;
        let premium = ((mid - mark) / mark)
            .round_dp_with_strategy(PREMIUM_DECIMALS, RoundingStrategy::MidpointNearestEven);
        let interval = &mut state.intervals[market];
        interval.premium_sum += premium;
        interval.samples += 1;
    }
}

/// D3 admin: the preliminary rate of the running interval for `symbol`.
pub fn set_rate(world: &mut World, symbol: &str, rate: Decimal) -> Answer<FundingView> {
    let entity = crate::registry::instrument_entity(world, symbol)?;
    let market = world
        .get::<MarketSlot>(entity)
        .expect("indexed instrument")
        .0;
    assert!(
        rate.scale() <= MAX_RATE_DECIMALS && rate.abs() < Decimal::ONE,
        "rates are validated at the edge"
    );
    let view = world.resource_scope(|_, mut state: Mut<FundingState>| {
        state.intervals[market as usize].set_rate = Some(rate);
        state.view(market)
    });
    Ok(view)
}
