//! Open positions as entities (D6). Each open net position is an entity with three
//! components, each written by one concern:
//! - [`Position`]: size, prices and locked margin, written by fills (and by a profile change,
//!   which re-locks margin);
//! - [`MarginRate`]: the initial and maintenance fractions of its customer's profile, set at
//!   open and by a profile change, so a pass over positions never looks up the customer;
//! - [`ValuationBasis`]: the position's size and entry as integers, rebuilt only by
//!   [`value_positions`] when the position changes.
//!
//! A position's [`Valuation`] at a mark is derived where it is read ([`valuation_at`]): the
//! margin pass values only the accounts a mark move can change, and nothing values every
//! position every second.
//!
//! A position that closes is despawned: what it traded stays in the trade log. Systems reach
//! positions by their stable key (customer, market) through [`OpenPositions`], over the
//! [`PositionIndex`]; an `Entity` never reaches output, snapshots or the state hash.
//!
//! The read side derives a position's unrealised PnL with the same pure function the valuation
//! uses (`Position::unrealised_pnl` at the published mark, which the valuation of the same run
//! used): republishing every position on every one-second mark move would cost a million map
//! writes a second at the bound, for the same numbers.
//!
//! Systems that open, move and close positions in one run (fills, in `MatchSystems` and
//! `TriggerSystems`) go through `OpenPositions`, which stages a position opened during the run
//! with its reserved entity until the system's `flush`, so the run's later fills see it at
//! once; the schedule's sync point inserts the components before the next system. A position's
//! valuation (unrealised PnL and notional at a mark) is not kept: it is derived where it is
//! read (`valuation_at`: the margin pass for the accounts it judges, the figures a report
//! samples, REST from the published mark), so a mark move values nothing by itself.
//! `value_positions` only rebuilds the 32-byte `ValuationBasis` (size and entry at a common
//! price scale, as 64-bit mantissas with their scale shifts) of a position that changed, and
//! lists it in `MovedPositions`, which the margin pass and the depreciation triggers read
//! instead of each scanning every position for a change. Which positions changed is listed by
//! their writers (`OpenPositions`, midnight, a notice, a restore: `MovedPositions::wrote`), not
//! found by bevy's `Changed<Position>`, which compares every position's change tick on every
//! run; balances the same way (`money::store::WrittenBalances`, listed by every `AccountStore`
//! write and read by the margin pass). At a million positions those scans were almost all of a
//! risk tick; the valuation holds no margin figure, so a profile change revalues nothing. A
//! valuation from the basis is integer arithmetic: 64×64→128-bit products, divisions by a power
//! of ten as constant-divisor arms, half-even at 10 decimals. It gives exactly `Valuation::of`
//! (the decimal reference: proptests over everyday and extreme inputs, and the debug invariant
//! after every run); where the integers would not hold a value it steps aside and the decimal
//! arithmetic decides (linear in the positions: `benches/README.md`).

use std::collections::BTreeMap;

use bevy_ecs::prelude::{
    Commands, Component, Entity, IntoScheduleConfigs, Local, Mut, Query, Res, ResMut, Resource,
    Schedule, World,
};
use bevy_ecs::system::SystemParam;
use perpsim_core::Decimal;
use perpsim_core::decimal::{POW10_64, div_pow10_half_even, ledger_mantissa};
use perpsim_core::ids::CustomerCode;
use perpsim_core::instrument::Asset;
use perpsim_core::money::margin_profile;

use crate::records::lookup::Lookup;
use crate::records::position::{Position, PositionKey};
use crate::records::venue::{Instrument, InstrumentState, MarketId, MarketSlot};
use crate::sets::{Revaluation, ValuationPass};

/// Open positions by (customer, market) — see `positions::OpenPositions`. Its own resource,
/// since fills write it while order handling reads the registry. Two ways in, kept together
/// by [`PositionIndex::insert`] and [`PositionIndex::remove`]: the map in key order, for the
/// passes that walk or search it in that order (where a B-tree finds the last search's path
/// in cache), and a hashed lookup for the one position each side of a fill moves.
#[derive(Resource, Debug, Default)]
pub struct PositionIndex {
    map: BTreeMap<PositionKey, Entity>,
    lookup: Lookup<PositionKey, Entity>,
}

impl PositionIndex {
    /// The entity of the open position `key`, found by hash.
    pub fn get(&self, key: &PositionKey) -> Option<Entity> {
        self.lookup.get(key).copied()
    }

    /// Every open position's entity, in key order.
    pub fn map(&self) -> &BTreeMap<PositionKey, Entity> {
        &self.map
    }

    /// Indexes an open position; the one open before under `key`, if any.
    pub fn insert(&mut self, key: PositionKey, entity: Entity) -> Option<Entity> {
        self.lookup.insert(key, entity);
        self.map.insert(key, entity)
    }

    /// Unindexes the position `key` as it closes; its entity, if it was open.
    pub fn remove(&mut self, key: &PositionKey) -> Option<Entity> {
        self.lookup.remove(key);
        self.map.remove(key)
    }
}

#[cfg(test)]
mod tests;

/// The bases of changed positions are rebuilt in `MarkToMarketSystems` (`ValuationPass`), and
/// once more in `MarginSystems` (`Revaluation`) when a liquidation moved positions after it.
pub(crate) fn plugin(world: &mut World, schedule: &mut Schedule) {
    world.init_resource::<PositionIndex>();
    world.init_resource::<MovedPositions>();
    schedule.add_systems(value_positions.in_set(ValuationPass));
    schedule.add_systems(
        revalue_positions
            .run_if(|moved: Res<MovedPositions>| !moved.pending.is_empty())
            .in_set(Revaluation),
    );
}

/// The positions the run's valuation pass found changed, and those a liquidation moved after
/// it: what the margin pass touches and the depreciation triggers refile, read here rather
/// than each scanning every position for a change (at a million positions the scans were
/// most of a risk tick). Entities of live positions when listed; a later close may despawn
/// one, which readers skip. Derived, replaced by each run's first valuation pass.
#[derive(Resource, Debug, Default)]
pub struct MovedPositions {
    pub list: Vec<Entity>,
    /// Every position written since the valuation pass last ran, as each writer listed it
    /// (repeats included): what the next pass rebuilds, and after the pass what a
    /// liquidation wrote (the revaluation runs when there is some). Bevy's `Changed<Position>` finds the
    /// same by comparing every position's change tick on every run, a cost that grows with
    /// the positions held rather than with those written. Drained by each run's valuation
    /// pass, so it holds at most one run's writes.
    pending: Vec<Entity>,
}

impl MovedPositions {
    /// Lists a position written outside [`OpenPositions`] (a settlement, a notice), or
    /// spawned by a restore, for the next valuation pass.
    pub fn wrote(&mut self, entity: Entity) {
        self.pending.push(entity);
    }
}

/// The margin fractions of the customer's profile (D8) a position is held under.
#[derive(Component, Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarginRate {
    pub initial: Decimal,
    /// Also the margin-call threshold of `leverage_ratio` (D10).
    pub maintenance: Decimal,
    /// The liquidation threshold of `leverage_ratio` (D10).
    pub liquidation: Decimal,
}

impl MarginRate {
    pub fn of_leverage(leverage: u32) -> Self {
        let profile = margin_profile(leverage).expect("customers hold a valid leverage");
        MarginRate {
            initial: profile.initial,
            maintenance: profile.maintenance,
            liquidation: profile.liquidation,
        }
    }
}

/// A position valued at its market's mark price: what the margin pass weighs (D10). The
/// margin a rate asks of it is the notional times the rate, taken by the margin pass per
/// account, so a profile change revalues nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Valuation {
    /// `size × (mark − entry)`, at the ledger's 10 decimals.
    pub unrealised_pnl: Decimal,
    /// `|size| × mark`, exact.
    pub notional: Decimal,
}

impl Valuation {
    /// Pure: the valuation of `p` at `mark`.
    pub fn of(p: &Position, mark: Decimal) -> Self {
        Valuation {
            unrealised_pnl: p.unrealised_pnl(mark),
            notional: p.size.abs() * mark,
        }
    }
}

/// What the valuation pass needs of a position, as integers, rebuilt only when it changes.
/// A pass after a mark move reads these 32 bytes, not the whole `Position`
/// (codes, timestamps: ~130 bytes), and values them with 64-bit integer arithmetic.
///
/// Prices are compared at one scale `E`: the entry's own scale or the market's price scale
/// `S` (its tick's decimals), whichever is larger; the mark arrives at scale `S`. Written only
/// by [`value_positions`]; not state (derived, rebuilt after a restore).
#[derive(Component, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ValuationBasis {
    market: MarketId,
    /// The integers fit: the integer path applies. Otherwise [`Valuation::of`] does.
    exact: bool,
    /// `E − S`: the mark is scaled by 10^this to meet the entry.
    entry_shift: u8,
    /// `10 − (size scale + E)`: the unrealised PnL product's distance to the ledger scale.
    pnl_shift: i8,
    /// `size scale + S`: the notional's scale.
    notional_scale: u8,
    /// Signed size, at its own scale.
    size: i64,
    /// Entry price at scale `E`.
    entry: i64,
}

impl ValuationBasis {
    /// Pure: the basis of `p`, in a market whose prices have `price_scale` decimals.
    pub fn of(p: &Position, price_scale: u32) -> Self {
        let fallback = ValuationBasis {
            market: p.market,
            ..ValuationBasis::default()
        };
        let e = p.entry_price.scale().max(price_scale);
        let mut entry = p.entry_price;
        entry.rescale(e);
        let parts = (
            i64::try_from(p.size.mantissa()),
            i64::try_from(entry.mantissa()),
        );
        let (Ok(size), Ok(entry_m)) = parts else {
            return fallback;
        };
        let (pnl_scale, notional_scale) = (p.size.scale() + e, p.size.scale() + price_scale);
        // Beyond 28 decimals a `Decimal` product rounds; the decimal path decides there.
        if entry.scale() != e || pnl_scale > 28 || notional_scale > 28 || e - price_scale > 18 {
            return fallback;
        }
        ValuationBasis {
            market: p.market,
            exact: true,
            entry_shift: (e - price_scale) as u8,
            pnl_shift: (10 - pnl_scale as i32) as i8,
            notional_scale: notional_scale as u8,
            size,
            entry: entry_m,
        }
    }

    /// The valuation at `mark`, given as `at`, its mantissa at the market's price scale: the
    /// same values as [`Valuation::of`], or None where the integers would not hold it (the
    /// decimal arithmetic decides there, so the two never disagree).
    fn value(&self, at: i64) -> Option<Valuation> {
        if !self.exact {
            return None;
        }
        let difference = at
            .checked_mul(POW10_64[self.entry_shift as usize])?
            .checked_sub(self.entry)?;
        let pnl = i128::from(self.size) * i128::from(difference);
        let notional = i128::from(self.size.unsigned_abs()) * i128::from(at);
        Some(Valuation {
            unrealised_pnl: to_ledger(pnl, self.pnl_shift)?,
            notional: Decimal::try_from_i128_with_scale(notional, self.notional_scale.into())
                .ok()?,
        })
    }
}

/// A product at scale `10 − shift` as a ledger decimal (10 places, half-even), or None past
/// what a `Decimal` holds exactly (96 bits: beyond it a decimal product would round).
fn to_ledger(product: i128, shift: i8) -> Option<Decimal> {
    const DECIMAL_MANTISSA: u128 = 1 << 96;
    if product.unsigned_abs() >= DECIMAL_MANTISSA {
        return None;
    }
    let ledger = match (i64::try_from(product), shift) {
        (Ok(small), 0..=10) => i128::from(small) * i128::from(POW10_64[shift as usize]),
        (Ok(small), -18..=-1) => i128::from(div_pow10_half_even(small, shift.unsigned_abs())),
        _ => ledger_mantissa(product, (10 - i32::from(shift)) as u32)?,
    };
    Decimal::try_from_i128_with_scale(ledger, 10).ok()
}

/// `mark`'s mantissa at `price_scale`, when it has no more decimals than that and fits.
pub fn at_scale(mark: Decimal, price_scale: u32) -> Option<i64> {
    let up = price_scale.checked_sub(mark.scale())?;
    i64::try_from(mark.mantissa())
        .ok()?
        .checked_mul(*POW10_64.get(up as usize)?)
}

/// A market's mark as a valuation reads it: the decimal, and its mantissa at the market's
/// price scale where it has no more decimals than that ([`at_scale`]), converted once per pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    pub price: Decimal,
    pub at: Option<i64>,
}

impl Mark {
    pub fn new(price: Decimal, price_scale: u32) -> Self {
        Mark {
            price,
            at: at_scale(price, price_scale),
        }
    }
}

/// Pure: `p`'s valuation at `mark`, by its integer basis where that holds it, else in
/// decimals — the same values either way ([`Valuation::of`]).
pub fn valuation_at(p: &Position, basis: &ValuationBasis, mark: Mark) -> Valuation {
    mark.at
        .and_then(|at| basis.value(at))
        .unwrap_or_else(|| Valuation::of(p, mark.price))
}

/// The positions a valuation pass reads and rebases.
type Bases<'w, 's> = Query<'w, 's, (Entity, &'static Position, &'static mut ValuationBasis)>;

/// What a valuation pass reads and writes: the markets' price scales, how many positions are
/// open, the positions, and what was written and moved.
#[derive(SystemParam)]
pub struct Valuing<'w, 's> {
    instruments: Query<'w, 's, (&'static MarketSlot, &'static Instrument)>,
    index: Res<'w, PositionIndex>,
    positions: Bases<'w, 's>,
    moved: ResMut<'w, MovedPositions>,
}

impl Valuing<'_, '_> {
    /// Rebases the positions written since the last valuation pass and lists them as moved.
    fn rebase_written(&mut self) {
        let moved = &mut *self.moved;
        let written = (&mut moved.pending, self.index.map().len());
        rebuild_bases(
            &self.instruments,
            &mut self.positions,
            written,
            &mut moved.list,
        );
    }
}

/// MarkToMarketSystems: the basis of every position written since the pass last ran (a
/// fill, an open, a settlement, a liquidation after the last pass), listed as the run's
/// [`MovedPositions`]. A mark move rebuilds nothing.
pub fn value_positions(mut valuing: Valuing) {
    valuing.moved.list.clear();
    valuing.rebase_written();
    valuing.moved.pending.clear();
}

/// Revaluation, when a liquidation wrote positions after the run's valuation pass: their
/// bases, and their entities added to [`MovedPositions`]. They stay pending: the next run's
/// pass lists them again, so its margin pass sums their slots afresh.
pub fn revalue_positions(mut valuing: Valuing) {
    valuing.rebase_written();
}

/// Rebuilds the basis of each live position among `written` (once each, in entity order; a
/// position closed since is skipped; `written` is left sorted and without repeats) and lists
/// it in `moved`. Where the writes outnumber
/// half the `open` positions (midnight writes them all) every position is rebuilt and
/// listed, in storage order: one pass over them costs less than sorting the writes, and a
/// basis rebuilt unchanged, or a slot judged again, changes nothing.
fn rebuild_bases(
    instruments: &Query<(&MarketSlot, &Instrument)>,
    positions: &mut Bases,
    (written, open): (&mut Vec<Entity>, usize),
    moved: &mut Vec<Entity>,
) {
    if written.is_empty() {
        return;
    }
    let mut scales: Vec<(MarketId, u32)> = instruments
        .iter()
        .map(|(slot, instrument)| (slot.0, instrument.0.tick_size.scale()))
        .collect();
    scales.sort_unstable_by_key(|(id, _)| *id);
    let mut rebase = |(entity, p, mut basis): (Entity, &Position, Mut<ValuationBasis>)| {
        *basis = ValuationBasis::of(p, scales[p.market as usize].1);
        moved.push(entity);
    };
    if written.len() > open / 2 {
        positions.iter_mut().for_each(rebase);
        return;
    }
    written.sort_unstable();
    written.dedup();
    for &entity in written.iter() {
        if let Ok(row) = positions.get_mut(entity) {
            rebase(row);
        }
    }
}

/// What a customer's open positions settling in `asset` commit of its balance at the marks:
/// their initial margin at the mark less their unrealised PnL. A withdrawal must leave
/// `total − pending` at least this (D7 as the ledger applies it), so it can never itself put
/// an account into margin call; zero when no position is open in `asset`.
pub fn committed_at_marks(world: &mut World, customer: CustomerCode, asset: Asset) -> Decimal {
    let mut markets = world.query::<(&MarketSlot, &Instrument, &InstrumentState)>();
    let marks: BTreeMap<MarketId, Decimal> = markets
        .iter(world)
        .filter(|(_, i, _)| i.0.settlement == asset)
        .map(|(slot, _, state)| (slot.0, state.mark_price))
        .collect();
    let held: Vec<(MarketId, Entity)> = world
        .resource::<PositionIndex>()
        .map()
        .range((customer, 0)..=(customer, MarketId::MAX))
        .filter(|((_, market), _)| marks.contains_key(market))
        .map(|(&(_, market), &entity)| (market, entity))
        .collect();
    held.into_iter()
        .map(|(market, entity)| {
            let mark = marks[&market];
            let p = world
                .get::<Position>(entity)
                .expect("indexed positions are live");
            let rate = world
                .get::<MarginRate>(entity)
                .expect("positions carry a rate");
            p.size.abs() * mark * rate.initial - p.unrealised_pnl(mark)
        })
        .sum()
}

/// Open positions by key, for the systems that open, move, re-lock and close them in one
/// run (fills, profile changes). A position opened during the run is staged here with its
/// reserved entity until [`OpenPositions::flush`], so the run's later fills see it at once;
/// every system using this calls `flush` before it returns.
#[derive(SystemParam)]
pub struct OpenPositions<'w, 's> {
    index: ResMut<'w, PositionIndex>,
    moved: ResMut<'w, MovedPositions>,
    live: Query<'w, 's, (&'static mut Position, &'static mut MarginRate)>,
    commands: Commands<'w, 's>,
    staged: Local<'s, BTreeMap<Entity, (Position, MarginRate)>>,
}

impl OpenPositions<'_, '_> {
    pub fn get(&self, key: PositionKey) -> Option<&Position> {
        let entity = self.index.get(&key)?;
        match self.staged.get(&entity) {
            Some((p, _)) => Some(p),
            None => Some(self.live.get(entity).expect("indexed positions are live").0),
        }
    }

    pub fn get_mut(&mut self, key: PositionKey) -> Option<(&mut Position, &mut MarginRate)> {
        let entity = self.index.get(&key)?;
        self.moved.pending.push(entity);
        if let Some((p, rate)) = self.staged.get_mut(&entity) {
            return Some((p, rate));
        }
        let (p, rate) = self
            .live
            .get_mut(entity)
            .expect("indexed positions are live");
        Some((p.into_inner(), rate.into_inner()))
    }

    /// Opens the position of `key` (none is open there).
    pub fn open(&mut self, key: PositionKey, position: Position, rate: MarginRate) {
        let entity = self.commands.spawn_empty().id();
        self.moved.pending.push(entity);
        let previous = self.index.insert(key, entity);
        assert!(
            previous.is_none(),
            "one open position per customer and market"
        );
        self.staged.insert(entity, (position, rate));
    }

    /// Closes the position of `key` and returns it.
    pub fn close(&mut self, key: PositionKey) -> Position {
        let entity = self.index.remove(&key).expect("closing an open position");
        self.commands.entity(entity).despawn();
        match self.staged.remove(&entity) {
            Some((p, _)) => p,
            None => self.live.get(entity).expect("indexed").0.clone(),
        }
    }

    /// Every open position (live and staged), in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &Position> {
        self.live
            .iter()
            .map(|(p, _)| p)
            .chain(self.staged.values().map(|(p, _)| p))
    }

    /// The keys of a customer's open positions, by market.
    pub fn keys_of(&self, customer: CustomerCode) -> Vec<PositionKey> {
        self.index
            .map()
            .range((customer, 0)..=(customer, MarketId::MAX))
            .map(|(k, _)| *k)
            .collect()
    }

    /// Gives the positions opened during this run their components.
    pub fn flush(&mut self) {
        for (entity, (position, rate)) in std::mem::take(&mut *self.staged) {
            self.commands
                .entity(entity)
                .insert((position, rate, ValuationBasis::default()));
        }
    }
}

/// The position invariants (while the engine audits, on its cadence): the index and the
/// entities agree one to one; each position is held under its customer's profile, and its
/// basis values it at its market's current mark as the decimal arithmetic does.
pub fn check_positions(
    index: &PositionIndex,
    positions: &Query<(&Position, &MarginRate, &ValuationBasis)>,
    marks: &[(Decimal, u32)],
    leverage: impl Fn(CustomerCode) -> u32,
) -> Result<(), String> {
    if positions.iter().count() != index.map().len() {
        return Err(format!(
            "{} position entities but {} indexed",
            positions.iter().count(),
            index.map().len()
        ));
    }
    for (&(customer, market), &entity) in index.map() {
        let (p, rate, basis) = positions
            .get(entity)
            .map_err(|_| format!("indexed position of {customer} in market {market} is gone"))?;
        if (p.customer, p.market) != (customer, market) {
            return Err(format!("position {} is indexed under another key", p.code));
        }
        if *rate != MarginRate::of_leverage(leverage(customer)) {
            return Err(format!("position {} is not held under its profile", p.code));
        }
        let (mark, price_scale) = marks[market as usize];
        if *basis != ValuationBasis::of(p, price_scale) {
            return Err(format!("position {}'s valuation basis is stale", p.code));
        }
        if valuation_at(p, basis, Mark::new(mark, price_scale)) != Valuation::of(p, mark) {
            return Err(format!(
                "position {}'s basis values it otherwise than its decimals",
                p.code
            ));
        }
    }
    Ok(())
}
