//! What-if (D11, issue 39 item 4): a scenario's market perturbed per run — each shock's
//! price moves scaled by a factor the run draws, every instrument's random-walk volatility
//! scaled by another — so a Monte-Carlo over seeds varies the shock itself, not only the
//! walk. The factors are drawn when the run starts, from a generator of their own seeded by
//! the run's seed (the engine's draws are unchanged), uniform over their range to 4 decimals,
//! in decimals: a price stays exact.

use perpsim_core::rng::SimRng;
use perpsim_core::time::Timestamp;
use perpsim_core::{Decimal, RoundingStrategy};
use perpsim_systems::command::SetInstrumentPrice;
use perpsim_systems::{Command, Genesis};

use super::format::{Range, Scenario};
use super::plan::{Ctx, ScenarioError, Step};
use super::timeline::Timeline;

/// What the what-if's seed is mixed with, so its draws are not the engine's or latency's.
const STREAM: u64 = 0x7768_6174_2d69_6621;

/// Decimals a drawn factor has.
const FACTOR_DECIMALS: u32 = 4;

/// The largest factor a range may reach.
const MAX_FACTOR: i64 = 100;

/// A factor's range, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FactorRange {
    pub min: Decimal,
    pub max: Decimal,
}

impl FactorRange {
    /// One factor: `min + k / 10⁴` for `k` uniform in `0..=(max − min) × 10⁴`.
    fn draw(&self, rng: &mut SimRng) -> Decimal {
        let unit = Decimal::new(1, FACTOR_DECIMALS);
        let steps = ((self.max - self.min) / unit).trunc();
        let steps = u64::try_from(steps.mantissa()).unwrap_or(0) + 1;
        let k = ((rng.next_u64() as u128 * steps as u128) >> 64) as i64;
        self.min + Decimal::from(k) * unit
    }
}

/// A shock, resolved: an instrument's price steps in `from..=until` scaled.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedShock {
    pub symbol: String,
    pub from: Timestamp,
    pub until: Timestamp,
    pub scale: FactorRange,
}

/// A scenario's what-if, resolved.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WhatIf {
    pub shocks: Vec<PlannedShock>,
    pub volatility: Option<FactorRange>,
    pub bootstraps: Vec<super::bootstrap::PlannedBootstrap>,
}

impl WhatIf {
    /// Whether it changes nothing: no shock, no volatility scaled, no bootstrap.
    pub fn is_empty(&self) -> bool {
        self.shocks.is_empty() && self.volatility.is_none() && self.bootstraps.is_empty()
    }
}

/// What a run drew: each shock's factor, in order, and the volatility's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Drawn {
    pub shocks: Vec<Decimal>,
    pub volatility: Option<Decimal>,
}

/// The what-if `scenario` asks for, checked.
pub(super) fn resolve(ctx: &Ctx, scenario: &Scenario) -> Result<WhatIf, ScenarioError> {
    let mut shocks = Vec::with_capacity(scenario.shocks.len());
    for s in &scenario.shocks {
        let (from, until) = ctx.window((&s.from, s.until.as_ref()), "a shock")?;
        shocks.push(PlannedShock {
            symbol: ctx.symbol(&s.symbol)?,
            from,
            until,
            scale: range(ctx, &s.scale)?,
        });
    }
    let volatility = scenario
        .volatility_scale
        .as_ref()
        .map(|r| range(ctx, r))
        .transpose()?;
    let bootstraps = super::bootstrap::resolve(ctx, scenario)?;
    Ok(WhatIf {
        shocks,
        volatility,
        bootstraps,
    })
}

/// A range as written: `0 ≤ min ≤ max ≤ 100`, each with at most 4 decimals.
fn range(ctx: &Ctx, r: &Range) -> Result<FactorRange, ScenarioError> {
    let (min, max) = (r.min.value.0, r.max.value.0);
    let fits = |v: Decimal| {
        v >= Decimal::ZERO
            && v <= Decimal::from(MAX_FACTOR)
            && v.normalize().scale() <= FACTOR_DECIMALS
    };
    if !fits(min) {
        return Err(ctx.error(r.min.referenced, format!("min: expected a factor from 0 to {MAX_FACTOR} with at most {FACTOR_DECIMALS} decimals")));
    }
    if !fits(max) || max < min {
        return Err(ctx.error(r.max.referenced, format!("max: expected a factor from min to {MAX_FACTOR} with at most {FACTOR_DECIMALS} decimals")));
    }
    Ok(FactorRange { min, max })
}

/// Draws the run's factors from `seed`: the volatility's scales `genesis`' instruments (before
/// the journal records it), the shocks' scale the timeline's price steps.
pub fn apply(what_if: &WhatIf, seed: u64, genesis: &mut Genesis, timeline: &mut Timeline) -> Drawn {
    let mut rng = SimRng::from_seed(seed ^ STREAM);
    let volatility = what_if.volatility.map(|r| r.draw(&mut rng));
    if let Some(f) = volatility {
        for i in &mut genesis.simulation.instruments {
            i.volatility = (i.volatility * f).normalize();
        }
    }
    let factors: Vec<Decimal> = what_if
        .shocks
        .iter()
        .map(|s| s.scale.draw(&mut rng))
        .collect();
    if !factors.is_empty() {
        let mut anchors = vec![None; factors.len()];
        let shocks = (&what_if.shocks[..], &factors[..]);
        *timeline = std::mem::take(timeline).map_steps(|step| shocked(step, shocks, &mut anchors));
    }
    super::bootstrap::apply(timeline, &what_if.bootstraps, &mut rng);
    Drawn {
        shocks: factors,
        volatility,
    }
}

/// Each shock's anchor: the (index, mark) last set at or before its `from`.
type Anchor = Option<(Decimal, Decimal)>;

/// `step` with every shock that covers it applied (a price step of the shock's symbol after
/// its `from`); a price step at or before a `from` sets that shock's anchor.
fn shocked(
    mut step: Step,
    (shocks, factors): (&[PlannedShock], &[Decimal]),
    anchors: &mut [Anchor],
) -> Step {
    let Command::SetInstrumentPrice(price) = &mut step.command else {
        return step;
    };
    for ((shock, f), anchor) in shocks.iter().zip(factors).zip(anchors.iter_mut()) {
        if price.symbol != shock.symbol || step.at > shock.until {
            continue;
        }
        if step.at <= shock.from {
            *anchor = Some((price.index_price, price.mark_price));
            continue;
        }
        let (index, mark) = *anchor.get_or_insert((price.index_price, price.mark_price));
        *price = SetInstrumentPrice {
            symbol: std::mem::take(&mut price.symbol),
            index_price: moved(index, price.index_price, *f),
            mark_price: moved(mark, price.mark_price, *f),
        };
    }
    step
}

/// `anchor + f × (price − anchor)`, rounded half-even to 10 decimals, never below 1 % of the
/// anchor (nor below the smallest price the venue takes).
fn moved(anchor: Decimal, price: Decimal, f: Decimal) -> Decimal {
    let round = |v: Decimal| v.round_dp_with_strategy(10, RoundingStrategy::MidpointNearestEven);
    let floor = round(anchor / Decimal::from(100)).max(Decimal::new(1, 10));
    round(anchor + f * (price - anchor)).max(floor).normalize()
}

#[cfg(test)]
mod tests {
    use perpsim_core::clock::ClockMode;
    use perpsim_core::instrument::default_instruments;
    use perpsim_core::simulation::Simulation;

    use super::*;

    fn genesis() -> Genesis {
        let instruments = default_instruments();
        Genesis {
            seed: 1,
            clock_mode: ClockMode::Manual,
            start: Timestamp::from_millis(0),
            simulation: Simulation::defaults(&instruments),
            instruments,
        }
    }

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    /// D11 (issue 39 item 4): a factor is drawn within its range to 4 decimals, the same for
    /// the same seed; a volatility factor scales every instrument's walk in the genesis.
    #[test]
    fn factors_fall_in_their_range_and_scale_the_volatility() {
        let range = FactorRange {
            min: d("0.5"),
            max: d("1.5"),
        };
        let mut rng = SimRng::from_seed(9);
        let drawn: Vec<Decimal> = (0..2_000).map(|_| range.draw(&mut rng)).collect();
        assert!(
            drawn
                .iter()
                .all(|f| *f >= range.min && *f <= range.max && f.scale() <= 4)
        );
        assert!(drawn.iter().any(|f| *f < d("0.6")) && drawn.iter().any(|f| *f > d("1.4")));
        let what_if = WhatIf {
            shocks: Vec::new(),
            volatility: Some(FactorRange {
                min: d("2"),
                max: d("2"),
            }),
            bootstraps: Vec::new(),
        };
        let (mut g, before) = (genesis(), genesis());
        let got = apply(&what_if, 1, &mut g, &mut Timeline::default());
        assert_eq!(got.volatility, Some(d("2")));
        for (after, before) in g
            .simulation
            .instruments
            .iter()
            .zip(&before.simulation.instruments)
        {
            assert_eq!(after.volatility, before.volatility * d("2"));
        }
    }

    /// A shocked price moves from its anchor by the factor, never below 1 % of the anchor.
    #[test]
    fn a_shocked_price_moves_from_its_anchor_by_the_factor() {
        assert_eq!(moved(d("60000"), d("25000"), d("0.5")), d("42500"));
        assert_eq!(moved(d("60000"), d("25000"), d("2")), d("600"), "the floor");
        assert_eq!(moved(d("100"), d("110"), d("1.2345")), d("112.345"));
    }
}
