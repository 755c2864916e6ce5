//! The living market's settings and its one random draw (D1, D10).
//!
//! Pure values: what the price feed and the market maker do per instrument, with the D1
//! defaults, and the geometric-Brownian step of the random walk. The floating point of the
//! draw stays inside [`gbm_factor`] (libm's functions, so every platform gives the same bits);
//! what leaves it is a decimal with a fixed number of places.

use rust_decimal::{Decimal, RoundingStrategy};
use serde::{Deserialize, Serialize};

use crate::decimal::{from_units, per_ten_thousand, round_units};
use crate::instrument::InstrumentSpec;
use crate::rng::SimRng;

/// How index prices move (D1 `--price-feed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PriceFeed {
    /// One geometric-Brownian step per simulated second (D10).
    RandomWalk,
    /// Prices move only through the admin API (or a scenario).
    Fixed,
}

impl PriceFeed {
    pub fn as_str(self) -> &'static str {
        match self {
            PriceFeed::RandomWalk => "random-walk",
            PriceFeed::Fixed => "fixed",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [PriceFeed::RandomWalk, PriceFeed::Fixed]
            .into_iter()
            .find(|f| f.as_str() == text)
    }
}

/// One instrument's walk and quotes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstrumentSimulation {
    pub symbol: String,
    /// Annualised volatility of the index, a fraction (0.60 = 60 %).
    #[serde(with = "crate::decimal::bin")]
    pub volatility: Decimal,
    /// Levels quoted on each side.
    pub levels: u32,
    /// Distance from the index to the best bid and to the best ask, in basis points.
    #[serde(with = "crate::decimal::bin")]
    pub half_spread_bps: Decimal,
    /// Distance between neighbouring levels, in basis points of the start price: the levels
    /// sit on a fixed grid of that many ticks (see [`InstrumentSimulation::grid`]).
    #[serde(with = "crate::decimal::bin")]
    pub level_step_bps: Decimal,
    /// Amount quoted at each level (a multiple of the lot size).
    #[serde(with = "crate::decimal::bin")]
    pub size: Decimal,
    /// The largest absolute position the maker takes on; at it, the side that would grow it
    /// is not quoted.
    #[serde(with = "crate::decimal::bin")]
    pub max_inventory: Decimal,
}

/// Everything the living market does, fixed at genesis (the journal's head carries it, so a
/// replay runs the same market).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Simulation {
    pub price_feed: PriceFeed,
    pub market_maker: bool,
    /// What the market maker's account is funded with at genesis, per settlement asset.
    #[serde(with = "crate::decimal::bin")]
    pub maker_funding: Decimal,
    /// One entry per instrument, in the instruments' order.
    pub instruments: Vec<InstrumentSimulation>,
    /// What the venue's insurance account holds at genesis, per settlement asset (D10): it
    /// covers negative balances left by liquidations, and may itself go negative.
    #[serde(with = "crate::decimal::bin")]
    pub insurance_funding: Decimal,
    /// Simulation time between two depreciation evaluations (D9: 60 s by default), in
    /// milliseconds, a whole number of seconds.
    pub notice_interval_ms: i64,
}

/// Upper bound on quoted levels per side: the maker's re-quote is a loop over them.
pub const MAX_LEVELS: u32 = 100;

/// The maker's default funding per asset.
pub const DEFAULT_MAKER_FUNDING: i64 = 100_000_000;

/// The insurance account's default funding per asset.
pub const DEFAULT_INSURANCE_FUNDING: i64 = 10_000_000;

/// D9: depreciation is evaluated every 60 s of simulation time unless configured.
pub const DEFAULT_NOTICE_INTERVAL_MS: i64 = 60_000;

/// The longest configurable time between depreciation evaluations: one day.
pub const MAX_NOTICE_INTERVAL_MS: i64 = 86_400_000;

impl Simulation {
    /// The D1 defaults: random walk and market maker on, settings per default instrument.
    pub fn defaults(instruments: &[InstrumentSpec]) -> Self {
        Simulation {
            price_feed: PriceFeed::RandomWalk,
            market_maker: true,
            maker_funding: Decimal::from(DEFAULT_MAKER_FUNDING),
            instruments: instruments
                .iter()
                .map(InstrumentSimulation::default_for)
                .collect(),
            insurance_funding: Decimal::from(DEFAULT_INSURANCE_FUNDING),
            notice_interval_ms: DEFAULT_NOTICE_INTERVAL_MS,
        }
    }

    /// A venue where nothing moves by itself: fixed prices, no market maker (tests of the
    /// trading core, benchmarks of one concern).
    pub fn quiet(instruments: &[InstrumentSpec]) -> Self {
        Simulation {
            price_feed: PriceFeed::Fixed,
            market_maker: false,
            ..Simulation::defaults(instruments)
        }
    }

    pub fn instrument(&self, symbol: &str) -> Option<&InstrumentSimulation> {
        self.instruments.iter().find(|i| i.symbol == symbol)
    }

    /// Every setting in range; the message names the first one that is not.
    pub fn check(&self, specs: &[InstrumentSpec]) -> Result<(), String> {
        if self.maker_funding <= Decimal::ZERO
            || !crate::decimal::is_ledger_rounded(self.maker_funding)
        {
            return Err("market maker funding must be positive with at most 10 decimals".into());
        }
        if self.insurance_funding < Decimal::ZERO
            || !crate::decimal::is_ledger_rounded(self.insurance_funding)
        {
            return Err("insurance funding must not be negative, with at most 10 decimals".into());
        }
        if self.notice_interval_ms < 1_000
            || self.notice_interval_ms > MAX_NOTICE_INTERVAL_MS
            || self.notice_interval_ms % 1_000 != 0
        {
            return Err("the notice interval must be whole seconds within 1 s and 1 day".into());
        }
        if self.instruments.len() != specs.len() {
            return Err("one simulation entry per instrument".into());
        }
        for (sim, spec) in self.instruments.iter().zip(specs) {
            let s = &sim.symbol;
            if *s != spec.symbol {
                return Err(format!(
                    "simulation entry {s} is not instrument {}",
                    spec.symbol
                ));
            }
            if sim.volatility < Decimal::ZERO || sim.volatility > Decimal::from(10) {
                return Err(format!("{s}: volatility must be within 0 and 10 (1000 %)"));
            }
            if sim.levels == 0 || sim.levels > MAX_LEVELS {
                return Err(format!("{s}: levels must be within 1 and {MAX_LEVELS}"));
            }
            let bps = Decimal::from(10_000);
            if sim.half_spread_bps <= Decimal::ZERO
                || sim.level_step_bps <= Decimal::ZERO
                || sim.half_spread_bps + sim.level_step_bps * Decimal::from(sim.levels) >= bps
            {
                return Err(format!(
                    "{s}: half spread and level step must be positive and keep every level above zero"
                ));
            }
            if sim.size <= Decimal::ZERO || !spec.on_lot(sim.size) {
                return Err(format!(
                    "{s}: quote size must be a positive multiple of the lot size {}",
                    spec.lot_size
                ));
            }
            if sim.max_inventory < Decimal::ZERO {
                return Err(format!("{s}: max inventory must not be negative"));
            }
        }
        Ok(())
    }
}

impl InstrumentSimulation {
    /// Sensible defaults: a volatility by underlying, ten levels 1 bp apart starting 1 bp
    /// from the index, about 30 000 of the quote currency a level for BTC and 15 000 for the
    /// others, and an inventory of twenty levels.
    pub fn default_for(spec: &InstrumentSpec) -> Self {
        let (volatility, size) = match spec.underlying.as_str() {
            "BTC" => (Decimal::new(60, 2), Decimal::new(5, 1)),
            "ETH" => (Decimal::new(75, 2), Decimal::from(5)),
            "SOL" => (Decimal::ONE, Decimal::from(100)),
            // Any other instrument: about 15 000 of notional a level at its start price.
            _ => (
                Decimal::new(80, 2),
                round_to_unit(Decimal::from(15_000) / spec.start_price, spec.lot_size)
                    .max(spec.lot_size),
            ),
        };
        InstrumentSimulation {
            symbol: spec.symbol.clone(),
            volatility,
            levels: 10,
            half_spread_bps: Decimal::ONE,
            level_step_bps: Decimal::ONE,
            size,
            max_inventory: size * Decimal::from(20),
        }
    }

    /// The distance between neighbouring levels, in price: the level step at the start
    /// price, a whole number of ticks (at least one). A fixed grid, not one that moves with
    /// the index: when the index moves, the levels still on the grid's side of it survive and
    /// only the ladder's ends change (the maker amends one or two orders, not every one).
    pub fn grid(&self, spec: &InstrumentSpec) -> Decimal {
        let step = spec.start_price * self.level_step_bps / Decimal::from(10_000);
        round_to_unit(step, spec.tick_size).max(spec.tick_size)
    }

    /// The ladder of one side of `index`: its first level the first grid point at least the
    /// half spread away from the index, then a grid step further each level, never below
    /// `grid`.
    pub fn ladder(&self, index: Decimal, bid: bool, grid: Decimal) -> Ladder {
        let half = per_ten_thousand(index * self.half_spread_bps);
        let (edge, strategy) = match bid {
            true => (index - half, RoundingStrategy::ToNegativeInfinity),
            false => (index + half, RoundingStrategy::ToPositiveInfinity),
        };
        let steps = round_units(edge, grid, strategy)
            .unwrap_or_else(|| (edge / grid).round_dp_with_strategy(0, strategy).mantissa());
        let first = i64::try_from(steps).expect("a price is far within i64 grid steps");
        // Bids step down and stop above zero; asks step up from a first level above zero.
        let len = match (first < 1, bid) {
            (true, _) => 0,
            (false, true) => first.min(i64::from(self.levels)) as usize,
            (false, false) => self.levels as usize,
        };
        Ladder { first, len, bid }
    }
}

/// One side's ladder in whole grid steps, so a re-quote places its quotes by integer
/// arithmetic: level `k` (best first) is `first − k` steps for bids, `first + k` for asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ladder {
    /// The best level, in grid steps.
    pub first: i64,
    /// How many levels there are (none when the first would be below one step).
    pub len: usize,
    pub bid: bool,
}

impl Ladder {
    /// Level `k`'s price in grid steps.
    pub fn steps(&self, k: usize) -> i64 {
        match self.bid {
            true => self.first - k as i64,
            false => self.first + k as i64,
        }
    }

    /// Which level a price of `steps` grid steps is on, if it is on one.
    pub fn level_of(&self, steps: i64) -> Option<usize> {
        let k = match self.bid {
            true => self.first - steps,
            false => steps - self.first,
        };
        (0..self.len as i64).contains(&k).then_some(k as usize)
    }

    /// Level `k`'s price, with the grid's scale.
    pub fn price(&self, k: usize, grid: Decimal) -> Decimal {
        from_units(self.steps(k), grid)
    }
}

/// `value` to a whole multiple of `unit`, half-even; a price "rounded to the tick".
pub fn round_to_unit(value: Decimal, unit: Decimal) -> Decimal {
    let even = RoundingStrategy::MidpointNearestEven;
    // Whole units in integers where they are exact; a zero, or a sign, keeps the decimal
    // product's representation.
    match round_units(value, unit, even).and_then(|n| i64::try_from(n).ok()) {
        Some(n) if n > 0 => from_units(n, unit),
        _ => (value / unit).round_dp_with_strategy(0, even) * unit,
    }
}

/// Seconds in the year the volatility is annualised over (365 days).
const YEAR_SECONDS: f64 = 31_536_000.0;

/// Decimals of a step factor: far below any tick at any price the venue quotes.
pub const FACTOR_DECIMALS: u32 = 12;

/// One second of geometric Brownian motion with annualised volatility `sigma` and no drift:
/// `exp(−σ²dt/2 + σ√dt·Z)` with `Z` standard normal (Box–Muller over two 53-bit uniforms),
/// as a decimal with [`FACTOR_DECIMALS`] places. Draws exactly two words from `rng`.
pub fn gbm_factor(rng: &mut SimRng, sigma: Decimal) -> Decimal {
    let z = standard_normal(rng);
    let sigma = decimal_to_f64(sigma);
    let dt = 1.0 / YEAR_SECONDS;
    let factor = libm::exp(-0.5 * sigma * sigma * dt + sigma * libm::sqrt(dt) * z);
    let scaled = libm::round(factor * 1e12) as i64;
    Decimal::new(scaled, FACTOR_DECIMALS)
}

/// A standard normal draw: Box–Muller over two 53-bit uniforms, with libm's functions (the
/// same bits on every platform). Draws exactly two words from `rng`.
pub fn standard_normal(rng: &mut SimRng) -> f64 {
    const UNIT: f64 = 1.0 / (1u64 << 53) as f64;
    // (0, 1]: ln never sees zero.
    let u1 = ((rng.next_u64() >> 11) + 1) as f64 * UNIT;
    let u2 = (rng.next_u64() >> 11) as f64 * UNIT;
    libm::sqrt(-2.0 * libm::log(u1)) * libm::cos(2.0 * core::f64::consts::PI * u2)
}

/// A small decimal as f64 through its exact mantissa and scale (no text, no platform path).
pub fn decimal_to_f64(value: Decimal) -> f64 {
    let mut f = value.mantissa() as f64;
    for _ in 0..value.scale() {
        f /= 10.0;
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instrument::default_instruments;

    /// D10: the draw is a pure function of the generator's state — the bits pinned here are
    /// what every platform must give.
    #[test]
    fn the_draw_is_pinned_to_exact_bits() {
        let mut rng = SimRng::from_seed(42);
        let factors: Vec<String> = (0..3)
            .map(|_| gbm_factor(&mut rng, Decimal::new(60, 2)).to_string())
            .collect();
        assert_eq!(factors, PINNED);
    }

    const PINNED: [&str; 3] = ["0.999827646738", "1.000083516463", "1.000001690038"];

    #[test]
    fn a_second_moves_by_about_sigma_root_dt() {
        let mut rng = SimRng::from_seed(1);
        let n = 20_000;
        let mut sum_sq = 0.0;
        for _ in 0..n {
            let f = decimal_to_f64(gbm_factor(&mut rng, Decimal::ONE)) - 1.0;
            sum_sq += f * f;
        }
        let sd = libm::sqrt(sum_sq / n as f64);
        let expected = libm::sqrt(1.0 / YEAR_SECONDS);
        assert!((sd / expected - 1.0).abs() < 0.05, "sd {sd} vs {expected}");
    }

    #[test]
    fn zero_volatility_never_moves() {
        let mut rng = SimRng::from_seed(3);
        assert_eq!(gbm_factor(&mut rng, Decimal::ZERO), Decimal::ONE);
    }

    #[test]
    fn default_levels_straddle_the_index_on_a_fixed_grid() {
        let specs = default_instruments();
        let sim = Simulation::defaults(&specs);
        sim.check(&specs).unwrap();
        let btc = &sim.instruments[0];
        let grid = btc.grid(&specs[0]);
        assert_eq!(grid, d("6.0"), "1 bp of the 60 000 start, on the 0.1 tick");
        let prices = |index: &str, bid: bool| {
            let ladder = btc.ladder(d(index), bid, grid);
            (0..ladder.len)
                .map(|k| ladder.price(k, grid))
                .collect::<Vec<_>>()
        };
        let (bids, asks) = (prices("60000", true), prices("60000", false));
        assert_eq!(
            (bids[0], bids[9], asks[0]),
            (d("59994"), d("59940"), d("60006"))
        );
        // A move within a grid step keeps the whole ladder; one past it, nine of ten levels.
        assert_eq!(prices("60004.3", true), bids);
        let moved = prices("60007", true);
        assert_eq!(moved[0], d("60000"));
        assert_eq!(moved[1..], bids[..9]);
    }

    /// A level's price is the grid point itself, as the decimal arithmetic writes it (the
    /// first level `round(edge / grid) × grid`, then `first − grid × k`): same value and same
    /// scale, so an order placed at it encodes as before. Bids stop above zero.
    #[test]
    fn a_ladder_in_grid_steps_prices_its_levels_as_the_decimal_formula_does() {
        let specs = default_instruments();
        let sim = Simulation::defaults(&specs);
        for (spec, s) in specs.iter().zip(&sim.instruments) {
            let grid = s.grid(spec);
            for index in [
                "0.5", "13", "149.987", "2999.995", "60000", "60004.3", "61234.56",
            ] {
                for bid in [true, false] {
                    let ladder = s.ladder(d(index), bid, grid);
                    let half = d(index) * s.half_spread_bps / Decimal::from(10_000);
                    let (edge, rounding) = match bid {
                        true => (d(index) - half, RoundingStrategy::ToNegativeInfinity),
                        false => (d(index) + half, RoundingStrategy::ToPositiveInfinity),
                    };
                    let best = (edge / grid).round_dp_with_strategy(0, rounding) * grid;
                    let formula: Vec<Decimal> = (0..s.levels)
                        .map(|k| match bid {
                            true => best - grid * Decimal::from(k),
                            false => best + grid * Decimal::from(k),
                        })
                        .take_while(|p| *p >= grid)
                        .collect();
                    let stepped: Vec<Decimal> =
                        (0..ladder.len).map(|k| ladder.price(k, grid)).collect();
                    let encoded =
                        |v: &[Decimal]| v.iter().map(|p| p.serialize()).collect::<Vec<_>>();
                    assert_eq!(
                        encoded(&stepped),
                        encoded(&formula),
                        "{} {index} {bid}",
                        spec.symbol
                    );
                    for (k, p) in stepped.iter().enumerate() {
                        let steps = crate::decimal::whole_units(*p, grid).unwrap() as i64;
                        assert_eq!(ladder.level_of(steps), Some(k));
                    }
                    assert_eq!(ladder.level_of(ladder.steps(ladder.len)), None);
                }
            }
        }
    }

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    #[test]
    fn out_of_range_settings_are_named() {
        let specs = default_instruments();
        let mut sim = Simulation::defaults(&specs);
        sim.instruments[1].size = Decimal::new(1, 4);
        let err = sim.check(&specs).unwrap_err();
        assert!(
            err.contains("ETH-USDC-PERP") && err.contains("lot size"),
            "{err}"
        );
    }
}
