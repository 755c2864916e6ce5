//! A block bootstrap of a scenario's price moves (D11, issue 39 item 4), drawn per run: the
//! moves of the prices a scenario sets for an instrument in a window (each price over the one
//! before, index and mark apart) are redrawn as blocks of consecutive moves, each block's
//! start uniform with replacement, and the path rebuilt from the price at the window's start
//! at the same instants. Exact: a move is a decimal quotient and each rebuilt price is
//! rounded half-even to the venue's 10 decimals, never below its smallest price.

use perpsim_core::rng::SimRng;
use perpsim_core::time::Timestamp;
use perpsim_core::{Decimal, RoundingStrategy};
use perpsim_systems::Command;

use super::format::Scenario;
use super::plan::{Ctx, ScenarioError};
use super::timeline::Timeline;

/// An (index, mark) pair.
type Prices = (Decimal, Decimal);

/// The longest block a scenario may ask for.
const MAX_BLOCK: u32 = 100_000;

/// A bootstrap, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedBootstrap {
    pub symbol: String,
    pub from: Timestamp,
    pub until: Timestamp,
    pub block: usize,
}

/// The bootstraps `scenario` asks for, checked.
pub(super) fn resolve(
    ctx: &Ctx,
    scenario: &Scenario,
) -> Result<Vec<PlannedBootstrap>, ScenarioError> {
    let mut planned = Vec::with_capacity(scenario.bootstrap.len());
    for b in &scenario.bootstrap {
        let (from, until) = ctx.window((&b.from, b.until.as_ref()), "a bootstrap")?;
        let block = match &b.block {
            Some(n) if n.value == 0 || n.value > MAX_BLOCK => {
                return Err(ctx.error(n.referenced, format!("block: expected 1 to {MAX_BLOCK}")));
            }
            Some(n) => n.value as usize,
            None => 10,
        };
        planned.push(PlannedBootstrap {
            symbol: ctx.symbol(&b.symbol)?,
            from,
            until,
            block,
        });
    }
    Ok(planned)
}

/// Each bootstrap redrawn from `rng`, in the scenario's order.
pub fn apply(timeline: &mut Timeline, bootstraps: &[PlannedBootstrap], rng: &mut SimRng) {
    for b in bootstraps {
        let (anchor, path) = window(timeline, b);
        if path.is_empty() {
            continue;
        }
        let redrawn = redraw(anchor, &path, b.block, rng);
        let mut next = redrawn.into_iter();
        let covered = |at: Timestamp| at > b.from && at <= b.until;
        *timeline = std::mem::take(timeline).map_steps(|mut step| {
            if let Command::SetInstrumentPrice(p) = &mut step.command
                && p.symbol == b.symbol
                && covered(step.at)
                && let Some((index, mark)) = next.next()
            {
                (p.index_price, p.mark_price) = (index, mark);
            }
            step
        });
    }
}

/// The (index, mark) set at or last before `from`, and each one set in `(from, until]`.
fn window(timeline: &Timeline, b: &PlannedBootstrap) -> (Option<Prices>, Vec<Prices>) {
    let (mut anchor, mut path) = (None, Vec::new());
    for step in timeline.iter() {
        let Command::SetInstrumentPrice(p) = step.command else {
            continue;
        };
        if p.symbol != b.symbol || step.at > b.until {
            continue;
        }
        match step.at <= b.from {
            true => anchor = Some((p.index_price, p.mark_price)),
            false => path.push((p.index_price, p.mark_price)),
        }
    }
    (anchor, path)
}

/// `path` rebuilt from `anchor` (its own first price without one) with its moves redrawn in
/// blocks of `block`.
fn redraw(anchor: Option<Prices>, path: &[Prices], block: usize, rng: &mut SimRng) -> Vec<Prices> {
    let start = anchor.unwrap_or(path[0]);
    let moves: Vec<Prices> = std::iter::once(&start)
        .chain(path)
        .zip(path)
        .map(|(before, now)| (now.0 / before.0, now.1 / before.1))
        .collect();
    let block = block.min(moves.len());
    let starts = (moves.len() - block + 1) as u128;
    let mut drawn = Vec::with_capacity(moves.len());
    while drawn.len() < moves.len() {
        let at = ((rng.next_u64() as u128 * starts) >> 64) as usize;
        drawn.extend_from_slice(&moves[at..at + block]);
    }
    drawn.truncate(moves.len());
    let step = |price: Decimal, ratio: Decimal| {
        let floor = Decimal::new(1, 10);
        (price * ratio)
            .round_dp_with_strategy(10, RoundingStrategy::MidpointNearestEven)
            .max(floor)
            .normalize()
    };
    let mut now = start;
    drawn
        .into_iter()
        .map(|(index, mark)| {
            now = (step(now.0, index), step(now.1, mark));
            now
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    /// D11 (issue 39 item 4): the redrawn path has the path's length, is rebuilt from the
    /// anchor by moves the path made (whole blocks of them), and differs by seed.
    #[test]
    fn a_redrawn_path_is_built_from_the_paths_own_moves() {
        let path: Vec<(Decimal, Decimal)> = ["110", "99", "108.9", "98.01", "107.811"]
            .iter()
            .map(|p| (d(p), d(p)))
            .collect();
        let anchor = Some((d("100"), d("100")));
        let moves = [d("1.1"), d("0.9")];
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..20 {
            let redrawn = redraw(anchor, &path, 2, &mut SimRng::from_seed(seed));
            assert_eq!(redrawn.len(), path.len());
            let mut before = d("100");
            for (index, mark) in &redrawn {
                assert_eq!(index, mark);
                let ratio = (*index / before).round_dp(8);
                assert!(moves.contains(&ratio), "seed {seed}: {ratio}");
                before = *index;
            }
            seen.insert(redrawn);
        }
        assert!(seen.len() > 1, "seeds draw other paths");
        let whole = redraw(anchor, &path, 5, &mut SimRng::from_seed(1));
        assert_eq!(whole, path, "one block of every move is the path itself");
    }
}
