//! The margin pass (MarginSystems, first): per (customer, settlement currency), the
//! valuations of its open positions summed against that currency's balance into a margin
//! state (D10). A change of state is recorded for the `liquidations` channel; a liquidation is
//! handed to `liquidation::liquidate`, next in the set.
//!
//! The pass judges only the accounts something can have changed: a slot (one per (customer,
//! currency) that ever held a position, named by each position's [`Holder`]) is judged when
//! one of its positions changed or closed (an `on_remove` hook), its collateral changed
//! ([`Collateral`] on the account entity: total − pending; an order that only locks or
//! releases margin judges nothing), its rate changed, or a mark move left the slot's
//! safe box ([`Triggers`]). A judgment sums the slot's positions valued at the current marks
//! from scratch, never carried forward, so sums cannot drift; it then gives the slot, per
//! market it holds, the open interval of marks within which no threshold can be crossed while
//! every other mark also stays in its own ([`safe_box`]), and files the interval's ends in the
//! market's ordered index. A mark move reads the index from the old mark to the new one: what
//! it returns are the only slots that can have changed.
//!
//! Sums and judgments are fixed point ([`perpsim_core::fixed`]), integer arithmetic, where
//! every figure is exact there; a slot holding a figure that is not is judged in decimals.
//!
//! Slots are derived: a restore rebuilds them in the run after its own (see [`Rebuild`]).
//! Their order reaches nothing: changes are sorted by customer.
//!
//! The margin pass works per slot, one per (customer, currency) that ever held a position
//! (`MarginBook`: a 64-byte `Sums` per slot, apart from the cold account data), named by a
//! derived `Holder` on each position and a `Collateral` on the account entity. It judges only
//! the slots something can have changed: a changed position or rate, a changed collateral
//! (total − pending: an order that only locks or releases margin is not judged), a closed
//! position (the `Holder`'s `on_remove` hook), or a mark move that left the slot's safe box. A
//! judgment sums the slot's positions at the pass's marks from scratch (never carried forward,
//! so sums cannot drift; the slot keeps its positions' entities per market, set when a position
//! gets its `Holder` and cleared by the hook, so a judgment searches no position index), then
//! gives the slot, per market it holds, the open interval of that mark within which neither
//! threshold can be crossed while the other marks stay in theirs: each threshold's `equity − k
//! × notional` is linear in the marks but for each position's PnL rounding, so its distance to
//! zero, less that rounding, split among the markets and divided by each market's slope, bounds
//! each move (`margin::safe_box`; for a slot of exact figures in fixed point,
//! `margin::safe_box_fixed`, each threshold scaled out so the bound is integer arithmetic and
//! each width rounded down, and the interval's keys worked out from the mark in integers,
//! `margin::keys_around`). The intervals' ends sit in an ordered index per market; a mark
//! move reads the range between the old mark and the new one, and those are the only slots
//! judged. A judgment whose new intervals each hold the slot's filed one keeps the filed ones
//! (an interval inside a safe one is safe; a mark leaving it wakes the slot early, to the same
//! state), so most judgments after a fill touch no index. The intervals are filed a 32nd
//! narrower at each end than safe (`margin::narrowed`), so a filed one stays inside the next
//! while that narrows by less: a funding payment, about its rate, leaves the payers' filed.
//! While the engine audits, it checks the passes against a full rescan (every slot summed and
//! judged: on every pass up to 64 slots, on every 16th past that, as the order scans do), and
//! `risk::rescan_tests` drives random sessions through it. `MarginBook::figures` derives a
//! slot's figures at the pass's marks; after a pass that called liquidations it answers the
//! figures that pass saw, which the auto-deleveraging ranks read. They and the judgment are
//! fixed point (`core::fixed`: 18 decimals, values under 2¹⁰⁰, thresholds prepared once per
//! profile as `core::risk::Thresholds`), integer arithmetic that is exact or refuses; a slot
//! with a figure fixed point refuses is judged in decimals, to the same answer. The
//! depreciation check works per unit the same way (`drop / initial = sign × (avg − mark) /
//! avg`, the size cancels), and reads only the positions whose next threshold the mark reached:
//! each position's is a mark (a long's at or below `avg × (9 − noticed) / 10`, a short's at or
//! above `avg × (11 + noticed) / 10`), filed per market when the position changes and read as a
//! range at each check (an auditing engine checks every position too). Criterion (`cargo bench
//! -p perpsim-benches --bench risk`, `tick/{n}`: a realtime one-second tick with every mark
//! moved and a depreciation check, both schedule runs) costs what the move crossed. A
//! liquidation changes positions and balances after its run's judgment, so the run after it
//! judges again (the liquidated account back to normal, its counterparties). The book and the
//! triggers are derived, so a restore must not move those judgments to the restore's own run,
//! nor lose the account that no longer holds a position: the restore's run judges nothing, and
//! the next one opens a slot for every account `MarginStates` holds outside normal before
//! judging every slot and filing its box (an untouched slot judges to its own state). A restore
//! after any run of a liquidating path has the uninterrupted future, bit for bit
//! (`risk::tests`).

use std::collections::BTreeSet;

use bevy_ecs::lifecycle::HookContext;
use bevy_ecs::prelude::{Commands, Component, Entity, Query, Res, ResMut, Resource, Without};
use bevy_ecs::system::SystemParam;
use bevy_ecs::world::DeferredWorld;
use perpsim_core::fixed;
use perpsim_core::ids::{BrokerCode, CustomerCode};
use perpsim_core::instrument::Asset;
use perpsim_core::risk::{self, MarginState};
use perpsim_core::{Decimal, decimal};

use super::liquidation::Liquidating;
use super::{MarginStates, RiskLog};
use crate::clock::SimClock;
use crate::money::store::{AccountIndex, WrittenBalances};
use crate::positions::{
    MarginRate, Mark, MovedPositions, PositionIndex, Valuation, ValuationBasis, valuation_at,
};
use crate::records::audit::Auditing;
use crate::records::ids::RiskSeq;
use crate::records::lookup::Lookup;
use crate::records::money::{AccountId, Balance};
use crate::records::position::Position;
use crate::records::risk::RiskRecord;
use crate::records::simulation::MARKET_MAKER;
use crate::records::venue::{Customer, Instrument, InstrumentState, MarketId, MarketSlot};
use crate::registry::Registry;
use crate::trading::exchange::Exchange;

/// On a position entity: the slot of its (customer, settlement currency) in the
/// [`MarginBook`]. Derived.
#[derive(Component, Debug, Clone, Copy, PartialEq, Eq)]
#[component(on_remove = position_closed)]
pub struct Holder(u32);

/// On a customer's account entity: the slot its balance is the collateral of. Derived.
#[derive(Component, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Collateral(u32);

/// A closed position (despawned) leaves its slot, to be judged again. A despawn runs every
/// component's hook before it removes any, so the position is still there to name its market.
fn position_closed(mut world: DeferredWorld, ctx: HookContext) {
    let Some(&Holder(slot)) = world.get::<Holder>(ctx.entity) else {
        return;
    };
    let market = world.get::<Position>(ctx.entity).map(|p| p.market);
    if let Some(mut book) = world.get_resource_mut::<MarginBook>() {
        if let Some(market) = market {
            book.release(slot, market, ctx.entity);
        }
        book.touch(slot);
    }
}

/// Per slot, what a judgment sums and decides: kept apart from the rest of the account so a
/// pass over many slots streams only these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sums {
    /// Σ unrealised PnL and Σ |size| × mark of the open positions at the judgment's marks,
    /// fixed point.
    unrealised: i128,
    notional: i128,
    /// total − pending, fixed point, when `collateral_exact`.
    collateral: i128,
    positions: u32,
    /// Positions whose figures are not exact in fixed point: the slot is judged in decimals,
    /// as it is when the collateral is not.
    inexact: u32,
    collateral_exact: bool,
    /// The market maker's slot: never liquidated (D10).
    maker: bool,
    /// The slot's margin rate, by its place in [`MarginBook::rates`].
    rate: u8,
    state: MarginState,
    /// Queued for judgment in this run.
    dirty: bool,
}

impl Sums {
    const EMPTY: Sums = Sums {
        unrealised: 0,
        notional: 0,
        collateral: 0,
        positions: 0,
        inexact: 0,
        collateral_exact: true,
        maker: false,
        rate: 0,
        state: MarginState::Normal,
        dirty: false,
    };

    /// Zeroes the positions' part.
    fn clear(&mut self) {
        (self.unrealised, self.notional) = (0, 0);
        (self.positions, self.inexact) = (0, 0);
    }

    fn add(&mut self, v: &Valuation) {
        self.positions += 1;
        match (
            fixed::from_decimal(v.unrealised_pnl),
            fixed::from_decimal(v.notional),
        ) {
            (Some(u), Some(n)) => {
                (self.unrealised, self.notional) = (self.unrealised + u, self.notional + n)
            }
            _ => self.inexact += 1,
        }
    }
}

/// One (customer, currency): who it is, and its figures in decimals.
#[derive(Debug, Clone)]
struct MarginAccount {
    customer: CustomerCode,
    broker: BrokerCode,
    asset: Asset,
    /// The customer's account entity in the currency (accounts never go).
    balance: Entity,
    /// total − pending: the collateral on the ledger basis, as of the last balance change.
    collateral: Decimal,
    /// Σ unrealised PnL and Σ notional in decimals, summed when the slot holds a position
    /// whose figures are not exact in fixed point (and only read then).
    decimal: Option<(Decimal, Decimal)>,
}

/// Per market, the ends of every slot's safe interval of that market's mark, ordered: a move
/// up reads the upper ends it passed, a move down the lower ones. A slot with no interval in
/// a market (no position there, or nothing to cross) is in neither. The ends are integer keys
/// ([`key`]), each rounded into its interval, and a mark is rounded out of it when compared:
/// a slot wakes wherever the exact ends would wake it, and a hair earlier at most, to be
/// judged to the same state. A B-tree of `Decimal`s rescaled at every comparison, and a
/// fill's refiling was most of its slot's judgment.
#[derive(Debug, Default)]
struct Triggers {
    lower: BTreeSet<(i64, u32)>,
    upper: BTreeSet<(i64, u32)>,
}

/// A mark or an interval's end as a key of [`Triggers`] (and the depreciation triggers' first
/// key, `notices`): in 10^-9 units (`decimal::nanos`), rounded down or, with `up`, up, and
/// held to an i64 (prices to 9.2 × 10^9). Holding is monotone like the rounding, so a key
/// rounded into an interval stays in it and one rounded out stays out: past the range a slot
/// only wakes more often.
pub(super) fn key(value: Decimal, up: bool) -> i64 {
    let nanos = decimal::nanos(value, up);
    nanos.clamp(i64::MIN.into(), i64::MAX.into()) as i64
}

/// The risk pass's slots. Derived: not state, rebuilt after a restore.
#[derive(Resource, Debug, Default)]
pub struct MarginBook {
    /// By hash: a report's samples find every customer's slot at each (a B-tree's search of
    /// them was a tenth of a sample), and the pass never reads them in order.
    slots: Lookup<(CustomerCode, Asset), u32>,
    sums: Vec<Sums>,
    accounts: Vec<MarginAccount>,
    /// Slots to judge in the next pass, each once (bounded by the slot count).
    dirty: Vec<u32>,
    /// The marks of the last pass, by market.
    marks: Vec<Mark>,
    /// Per market, the slots' safe intervals; per slot and market (`slot × markets +
    /// market`), the interval filed there.
    triggers: Vec<Triggers>,
    boxes: Vec<Option<(i64, i64)>>,
    /// Per slot and market (the same layout), the entity of the slot's open position there:
    /// a judgment reads its positions without a search of the position index per market (a
    /// cache miss each at a million positions, most of a funding hour's margin pass).
    held: Vec<Option<Entity>>,
    /// The distinct margin rates slots hold (one per leverage profile), with their
    /// thresholds in fixed point: a slot names its own by index, so judging reads nothing
    /// outside the slot's sums.
    rates: Vec<(MarginRate, Option<risk::Thresholds>)>,
    /// Every slot's figures as the last pass saw them, kept when that pass called
    /// liquidations: they change the positions after the pass, and the auto-deleveraging
    /// ranks and the observers read the figures the pass judged.
    frozen: Option<Vec<(Decimal, Decimal)>>,
    /// Where a restore left the book (see [`Rebuild`]).
    rebuild: Rebuild,
    /// Passes so far, for the oracle's pace (while the engine audits).
    passes: u64,
}

/// How a restored engine's book is rebuilt so its future equals the uninterrupted one's.
/// A liquidation changes positions and balances after the run's judgment, so the run after
/// it judges again (the liquidated account back to normal, its counterparties); a snapshot
/// taken in between must not move those judgments to the restore, nor lose them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Rebuild {
    #[default]
    Done,
    /// The restore's own run: nothing is judged, as the uninterrupted engine has no run
    /// there.
    Deferred,
    /// The first run after a restore: a slot for every account not in the normal state,
    /// positions or none, then every slot judged (an untouched slot judges to its own
    /// state, so judging all records exactly what judging the touched ones would).
    Due,
}

/// What a judgment reads: the marks of a pass, the positions by key, and each position with
/// its basis by entity.
pub struct Valuer<'a> {
    pub exchange: &'a Exchange,
    pub held: &'a PositionIndex,
    pub position: &'a dyn Fn(Entity) -> (&'a Position, &'a ValuationBasis),
    pub marks: &'a [Mark],
}

impl Valuer<'_> {
    /// The open positions of a (customer, currency) with their markets' marks, by market.
    fn held_in(
        &self,
        (customer, asset): (CustomerCode, Asset),
    ) -> impl Iterator<Item = (MarketId, &Position, &ValuationBasis, Mark)> + '_ {
        let markets = self.exchange.markets.iter().enumerate();
        markets
            .filter(move |(_, m)| m.spec.settlement == asset)
            .filter_map(move |(m, _)| {
                let entity = self.held.get(&(customer, m as MarketId))?;
                let (p, basis) = (self.position)(entity);
                Some((m as MarketId, p, basis, self.marks[m]))
            })
    }

    /// A (customer, currency)'s collateral + Σ unrealised PnL and Σ notional at the marks.
    pub fn figures(&self, key: (CustomerCode, Asset), collateral: Decimal) -> (Decimal, Decimal) {
        summed(
            collateral,
            self.held_in(key)
                .map(|(_, p, basis, mark)| valuation_at(p, basis, mark)),
        )
    }
}

/// `collateral` + Σ unrealised PnL and Σ notional of `valuations`, added in their order (a
/// sum's scale is its terms' largest, so every reader adds them in market order).
fn summed(collateral: Decimal, valuations: impl Iterator<Item = Valuation>) -> (Decimal, Decimal) {
    valuations.fold((collateral, Decimal::ZERO), |(e, n), v| {
        (e + v.unrealised_pnl, n + v.notional)
    })
}

impl MarginBook {
    /// The book of a restored engine: rebuilt by the runs after it (see [`Rebuild`]).
    pub(crate) fn restored() -> Self {
        MarginBook {
            rebuild: Rebuild::Deferred,
            ..MarginBook::default()
        }
    }

    /// A (customer, currency)'s equity (collateral + Σ unrealised PnL) and notional
    /// (Σ |size| × mark) as the last pass saw them: its positions valued at that pass's marks
    /// (which only a pass moves), or, after a pass that called liquidations, as that pass
    /// left them. None for an account that never held a position. The positions are the
    /// slot's own, by market, as a judgment reads them: a report samples every customer a few
    /// hundred times a run, and a search of the position index per market was a third of
    /// each customer's figures (the pass's oracle holds the slot's positions to the index's).
    pub fn figures<'a>(
        &'a self,
        key: (CustomerCode, Asset),
        position: &dyn Fn(Entity) -> (&'a Position, &'a ValuationBasis),
    ) -> Option<(Decimal, Decimal)> {
        let slot = *self.slots.get(&key)? as usize;
        if let Some(frozen) = &self.frozen {
            return Some(frozen[slot]);
        }
        let held = self.held[self.row(slot)].iter();
        let valuations = held.zip(&self.marks).filter_map(|(entity, mark)| {
            let (p, basis) = position((*entity)?);
            Some(valuation_at(p, basis, *mark))
        });
        Some(summed(self.accounts[slot].collateral, valuations))
    }

    /// The figures of a pass that called liquidations, as it saw them (see
    /// [`MarginBook::figures`]): what the auto-deleveraging queues rank by.
    pub fn judged_figures(&self, key: (CustomerCode, Asset)) -> Option<(Decimal, Decimal)> {
        let slot = *self.slots.get(&key)? as usize;
        let frozen = self.frozen.as_ref();
        Some(frozen.expect("a pass that calls liquidations keeps its figures")[slot])
    }

    /// The figures of a slot as its last judgment summed them.
    fn figures_of(&self, slot: usize) -> (Decimal, Decimal) {
        let (s, a) = (&self.sums[slot], &self.accounts[slot]);
        let decimal = a.decimal.filter(|_| s.inexact > 0);
        let (unrealised, notional) = decimal.unwrap_or_else(|| {
            (
                fixed::to_decimal(s.unrealised),
                fixed::to_decimal(s.notional),
            )
        });
        (a.collateral + unrealised, notional)
    }

    /// Sets the slot's margin rate.
    fn set_rate(&mut self, slot: u32, rate: MarginRate) {
        let index = match self.rates.iter().position(|(r, _)| *r == rate) {
            Some(i) => i,
            None => {
                let thresholds = risk::Thresholds::new(rate.maintenance, rate.liquidation);
                self.rates.push((rate, thresholds));
                self.rates.len() - 1
            }
        };
        self.sums[slot as usize].rate = u8::try_from(index).expect("a rate per leverage profile");
    }

    /// Queues the slot for judgment.
    fn touch(&mut self, slot: u32) {
        let s = &mut self.sums[slot as usize];
        if !s.dirty {
            s.dirty = true;
            self.dirty.push(slot);
        }
    }

    /// A new balance for the slot's collateral: the slot is judged again only if its
    /// collateral moved. Most balance changes only lock or release margin (an order placed,
    /// amended or cancelled), which no judgment reads.
    fn fund(&mut self, slot: u32, b: &Balance) {
        let collateral = match b.pending.is_zero() {
            true => b.total,
            false => b.total - b.pending,
        };
        let account = &mut self.accounts[slot as usize];
        // Kept even when equal: its scale is what the figures read from it print.
        let moved = account.collateral != collateral;
        account.collateral = collateral;
        let s = &mut self.sums[slot as usize];
        (s.collateral, s.collateral_exact) = match fixed::from_decimal(collateral) {
            Some(c) => (c, true),
            None => (0, false),
        };
        if moved {
            self.touch(slot);
        }
    }

    /// The slot of a (customer, currency), opened with its account when new.
    /// Whether this pass judges, and whether it opens every slot first (the first run after
    /// a restore); `None` in the restore's own run, which judges nothing but leaves every
    /// slot it opens next to be funded afresh.
    fn begin_pass(&mut self, written: &mut Vec<Entity>) -> Option<bool> {
        match self.rebuild {
            Rebuild::Done => Some(false),
            Rebuild::Deferred => {
                self.rebuild = Rebuild::Due;
                written.clear(); // the next pass funds every slot it opens
                None
            }
            Rebuild::Due => {
                self.rebuild = Rebuild::Done;
                Some(true)
            }
        }
    }

    fn open(
        &mut self,
        (customer, asset): (CustomerCode, Asset),
        broker: BrokerCode,
        states: &MarginStates,
        index: &AccountIndex,
    ) -> (u32, Option<Entity>) {
        let key = (customer, asset);
        if let Some(&slot) = self.slots.get(&key) {
            return (slot, None);
        }
        let slot = u32::try_from(self.accounts.len()).expect("fewer than 2³² accounts");
        let balance = index
            .get(&AccountId::customer(customer, asset))
            .expect("a fill opened the account before the position");
        self.slots.insert(key, slot);
        self.accounts.push(MarginAccount {
            customer,
            broker,
            asset,
            balance,
            collateral: Decimal::ZERO,
            decimal: None,
        });
        self.sums.push(Sums {
            maker: customer == MARKET_MAKER,
            state: states.0.get(&key).copied().unwrap_or(MarginState::Normal),
            ..Sums::EMPTY
        });
        let markets = self.triggers.len();
        self.boxes.extend(std::iter::repeat_n(None, markets));
        self.held.extend(std::iter::repeat_n(None, markets));
        (slot, Some(balance))
    }

    /// The slot holds `entity` as its position in market `m` (a position new to the book).
    fn hold(&mut self, slot: u32, m: MarketId, entity: Entity) {
        let at = self.row(slot as usize).start + m as usize;
        self.held[at] = Some(entity);
    }

    /// The slot's position in market `m` closed, if `entity` is still the one it holds there
    /// (a position of the same market opened since is another entity).
    fn release(&mut self, slot: u32, m: MarketId, entity: Entity) {
        let at = self.row(slot as usize).start + m as usize;
        let held = self.held.get_mut(at);
        if let Some(held) = held.filter(|h| **h == Some(entity)) {
            *held = None;
        }
    }

    /// The slot's entries in `held` and `boxes`: one per market, in market order.
    fn row(&self, slot: usize) -> std::ops::Range<usize> {
        let markets = self.triggers.len();
        slot * markets..(slot + 1) * markets
    }

    /// D10 for the slot as its last judgment summed it.
    fn judge(&self, slot: usize) -> MarginState {
        judge(&self.rates, &self.sums[slot], || self.figures_of(slot))
    }

    /// Sums the slot's positions at this pass's marks, judges it and files its safe box.
    /// Returns its state.
    fn assess(&mut self, slot: usize, valuer: &Valuer) -> MarginState {
        let key = (self.accounts[slot].customer, self.accounts[slot].asset);
        let row = self.row(slot);
        let s = &mut self.sums[slot];
        s.clear();
        let mut sizes = [(0, Decimal::ZERO); MAX_BOX_MARKETS];
        for (m, &entity) in self.held[row.clone()].iter().enumerate() {
            let Some(entity) = entity else { continue };
            let (p, basis) = (valuer.position)(entity);
            if let Some(size) = sizes.get_mut(s.positions as usize) {
                *size = (m as MarketId, p.size);
            }
            s.add(&valuation_at(p, basis, valuer.marks[m]));
        }
        let held = s.positions as usize;
        // Decimals only for a slot fixed point cannot sum.
        self.accounts[slot].decimal = (s.inexact > 0).then(|| valuer.figures(key, Decimal::ZERO));
        let state = self.judge(slot);
        let s = &self.sums[slot];
        if s.maker || held == 0 {
            self.unfile(slot);
            return state; // never judged otherwise: nothing to trigger
        }
        let keys = sizes
            .get(..held)
            .and_then(|sizes| self.box_keys(slot, sizes, valuer.marks));
        match keys {
            Some(keys) => self.refile(slot, &keys[..held]),
            // Judged at every move of any of its marks.
            None => {
                self.unfile(slot);
                for m in 0..row.len() {
                    if self.held[row.start + m].is_some() {
                        let mark = valuer.marks[m].price;
                        self.file(slot, m as MarketId, inner_keys((mark, mark)));
                    }
                }
            }
        }
        state
    }

    /// The keys of the slot's safe box per market it holds (`sizes`): from its exact sums in
    /// fixed point where they are ([`safe_box_fixed`], the keys in integers), else from its
    /// figures in decimals. None where neither bounds it (it is judged at every move).
    fn box_keys(
        &self,
        slot: usize,
        sizes: &[(MarketId, Decimal)],
        marks: &[Mark],
    ) -> Option<[(MarketId, (i64, i64)); MAX_BOX_MARKETS]> {
        let s = &self.sums[slot];
        let rate = self.rates[s.rate as usize].0;
        let mut keys = [(0, (0, 0)); MAX_BOX_MARKETS];
        let exact = (s.inexact == 0 && s.collateral_exact)
            .then(|| s.collateral.checked_add(s.unrealised))
            .flatten();
        if let Some(half) = exact.and_then(|e| safe_box_fixed((e, s.notional), rate, sizes)) {
            for ((k, &(m, _)), half) in keys.iter_mut().zip(sizes).zip(half) {
                *k = (m, keys_around(marks[m as usize].price, half));
            }
            return Some(keys);
        }
        let (equity, notional) = self.figures_of(slot);
        let half = safe_box(equity, notional, rate, sizes)?;
        for ((k, &(m, _)), half) in keys.iter_mut().zip(sizes).zip(half) {
            *k = (m, inner_keys(around(marks[m as usize].price, half)));
        }
        Some(keys)
    }

    /// Files the slot's boxes (`keys`: per market it holds, the open interval of the mark as
    /// [`inner_keys`] gives it),
    /// unless each box filed lies inside its new one: a box inside a safe box is safe too, and
    /// most judgments (a fill's fee, a deposit) move a box by a hair. A mark that leaves the
    /// kept box wakes the slot early, which is judged then to the same state; a mark that
    /// leaves the new box leaves the kept one too.
    fn refile(&mut self, slot: usize, keys: &[(MarketId, (i64, i64))]) {
        let filed = &self.boxes[self.row(slot)];
        // A kept key at or above the new `lo`'s key (rounded up) wakes the slot wherever the
        // new one would: the box filed is inside the new box.
        let inside = |&(m, (lo, hi)): &(MarketId, (i64, i64))| matches!(filed[m as usize], Some((l, h)) if l >= lo && h <= hi);
        if filed.iter().flatten().count() == keys.len() && keys.iter().all(inside) {
            return;
        }
        self.unfile(slot);
        for &(m, bounds) in keys {
            self.file(slot, m, narrowed(bounds));
        }
    }

    /// Judges every queued slot; the slots whose state changed.
    fn judge_dirty(&mut self, valuer: &Valuer) -> Vec<usize> {
        let mut changed = Vec::new();
        for slot in std::mem::take(&mut self.dirty) {
            let slot = slot as usize;
            let state = self.assess(slot, valuer);
            let s = &mut self.sums[slot];
            s.dirty = false;
            if state != s.state {
                s.state = state;
                changed.push(slot);
            }
        }
        changed
    }

    /// Keeps every slot's figures as this pass sees them (see [`MarginBook::frozen`]).
    fn freeze(&mut self, valuer: &Valuer) {
        let figures = self
            .accounts
            .iter()
            .map(|a| valuer.figures((a.customer, a.asset), a.collateral));
        self.frozen = Some(figures.collect());
    }

    /// Files the open interval `(lo, hi)` of market `m`'s mark for the slot.
    fn file(&mut self, slot: usize, m: MarketId, (lo, hi): (i64, i64)) {
        let at = self.row(slot).start + m as usize;
        let t = &mut self.triggers[m as usize];
        t.lower.insert((lo, slot as u32));
        t.upper.insert((hi, slot as u32));
        self.boxes[at] = Some((lo, hi));
    }

    /// Takes the slot's intervals out of the index.
    fn unfile(&mut self, slot: usize) {
        let row = self.row(slot);
        for m in 0..row.len() {
            if let Some((lo, hi)) = self.boxes[row.start + m].take() {
                let t = &mut self.triggers[m];
                t.lower.remove(&(lo, slot as u32));
                t.upper.remove(&(hi, slot as u32));
            }
        }
    }

    /// Queues every slot whose interval of a market the move from the last pass's marks to
    /// `marks` left (a mark on an interval's end has left it).
    fn crossed(&mut self, marks: &[Mark]) {
        if marks.len() != self.triggers.len() {
            // The first pass (or a market listed since): every slot is judged and filed anew.
            for slot in 0..self.sums.len() {
                self.touch(slot as u32);
            }
            let (was, now) = (self.triggers.len(), marks.len());
            self.triggers = (0..now).map(|_| Triggers::default()).collect();
            self.boxes = vec![None; self.sums.len() * now];
            // The positions held stay, laid out anew (markets are listed, never removed).
            let mut held = vec![None; self.sums.len() * now];
            let kept = was.min(now);
            for (slot, row) in self.held.chunks(was.max(1)).enumerate() {
                held[slot * now..slot * now + kept].copy_from_slice(&row[..kept]);
            }
            self.held = held;
            return;
        }
        let mut crossed = Vec::new();
        for (m, (old, new)) in self.marks.iter().zip(marks).enumerate() {
            let t = &self.triggers[m];
            if new.price > old.price {
                let up = key(new.price, true);
                crossed.extend(t.upper.range(..=(up, u32::MAX)).map(|&(_, s)| s));
            } else if new.price < old.price {
                let down = key(new.price, false);
                crossed.extend(t.lower.range((down, 0)..).map(|&(_, s)| s));
            }
        }
        for slot in crossed {
            self.touch(slot);
        }
    }
}

/// An open interval of a mark as the keys of [`Triggers`]: its ends rounded inwards, so the
/// keys' interval lies inside it.
pub(super) fn inner_keys((lo, hi): (Decimal, Decimal)) -> (i64, i64) {
    (key(lo, true), key(hi, false))
}

/// A safe box's keys as they are filed: narrowed by a 32nd of their width at each end, so the
/// box filed stays inside the next safe box while that one narrows by less. A funding hour
/// moves every payer's box by about its rate (a part in 10⁴), and each refiling is four
/// searches of a B-tree of every slot's ends (a cache miss each at a million slots); the
/// narrower box wakes the slot a little early, to be judged to the same state. Keys that
/// cross (a box narrower than 10^-9) stay as they are.
fn narrowed((lo, hi): (i64, i64)) -> (i64, i64) {
    // At most half the width in all: the ends stay within theirs.
    let margin = ((i128::from(hi) - i128::from(lo)).max(0) / 32) as i64;
    (lo + margin, hi - margin)
}

/// The open interval of a mark `half` either side of `mark`.
pub(super) fn around(mark: Decimal, half: Decimal) -> (Decimal, Decimal) {
    (mark - half, mark.checked_add(half).unwrap_or(Decimal::MAX))
}

/// D10, in fixed point while every figure is exact there and nothing overflows, else in
/// decimals (`figures`: the slot's equity and notional, read only then).
fn judge(
    rates: &[(MarginRate, Option<risk::Thresholds>)],
    s: &Sums,
    figures: impl FnOnce() -> (Decimal, Decimal),
) -> MarginState {
    if s.maker || s.positions == 0 {
        // The market maker is never liquidated (D10); no position, no margin.
        return MarginState::Normal;
    }
    let (rate, thresholds) = &rates[s.rate as usize];
    let fast = match (s.inexact == 0 && s.collateral_exact, thresholds) {
        (true, Some(t)) => s
            .collateral
            .checked_add(s.unrealised)
            .and_then(|equity| risk::margin_state_fixed(equity, s.notional, t)),
        _ => None,
    };
    fast.unwrap_or_else(|| {
        let (equity, notional) = figures();
        risk::margin_state(equity, notional, rate.maintenance, rate.liquidation)
    })
}

/// Positions a slot may hold for its safe box to be computed; a slot holding more (more
/// markets in one currency than this) is judged at every move of its marks.
const MAX_BOX_MARKETS: usize = 16;

/// Per market a slot holds (`sizes`: the market and the position's size), the half-width of
/// the open interval of that market's mark within which, while every other held market's
/// mark also stays within its own, neither threshold can be crossed: None where the
/// decimals would not hold the bound (the slot is then judged at every move).
///
/// Why it holds: for a threshold `k`, `g = equity − k × notional` is linear in the marks
/// but for the rounding of each position's PnL to 10 decimals: `g(M') = g(M) +
/// Σ (size − k|size|) (M'ₘ − Mₘ) + r` with `|r| ≤ n × 10⁻¹⁰` over `n` positions. The state
/// changes only where some `g` changes sign; it cannot while `Σ |size − k|size|| |ΔMₘ| <
/// |g(M)| − n × 10⁻¹⁰`, which each market's share of that budget, divided by its slope,
/// bounds. The budget is shrunk further by a relative 10⁻¹⁸ for the decimals' own rounding.
pub(super) fn safe_box(
    equity: Decimal,
    notional: Decimal,
    rate: MarginRate,
    sizes: &[(MarketId, Decimal)],
) -> Option<[Decimal; MAX_BOX_MARKETS]> {
    if notional.is_zero() {
        // No notional, no margin: any move that gives it one is judged.
        return Some([Decimal::ZERO; MAX_BOX_MARKETS]);
    }
    let n = Decimal::from(sizes.len() as u64);
    let rounding = Decimal::new(1, 10) * n;
    let mut half = [Decimal::MAX; MAX_BOX_MARKETS];
    for k in [rate.liquidation, rate.maintenance] {
        let required = k.checked_mul(notional)?;
        let g = equity.checked_sub(required)?;
        let noise = (equity.abs().checked_add(required.abs())?) * Decimal::new(1, 18);
        let budget = g.abs() - rounding - noise;
        if budget <= Decimal::ZERO {
            return Some([Decimal::ZERO; MAX_BOX_MARKETS]);
        }
        let share = budget / n;
        for (h, &(_, size)) in half.iter_mut().zip(sizes) {
            let slope = (size - k * size.abs()).abs();
            if slope.is_zero() {
                continue;
            }
            let width = share.checked_div(slope)?;
            // A quotient rounds in its last digit: shrunk by a part in 10⁹, it stays inside.
            *h = (*h).min(width - width * Decimal::new(1, 9));
        }
    }
    Some(half)
}

/// [`safe_box`] in fixed point, from a slot's exact sums (`equity`, `notional`: units of
/// 10⁻¹⁸): the same bound, each threshold `k = m / 10ˢ` scaled out so that `g × 10ˢ` and
/// every slope are exact integers, and each width rounded down ([`width`]), so no relative
/// shrinking is needed: a box no wider than the exact one is safe. None where a size is not
/// exact in fixed point or a product would overflow (the decimals decide then). A funding
/// hour judges every payer: in decimals the box was most of each judgment. The half-widths
/// are units of 10^-[`WIDTH_DECIMALS`], [`UNBOUNDED`] where no threshold bounds a market
/// (`Decimal::MAX` in [`safe_box`]); [`keys_around`] files them without a decimal.
pub(super) fn safe_box_fixed(
    (equity, notional): (i128, i128),
    rate: MarginRate,
    sizes: &[(MarketId, Decimal)],
) -> Option<[i128; MAX_BOX_MARKETS]> {
    if notional == 0 {
        return Some([0; MAX_BOX_MARKETS]);
    }
    let n = sizes.len() as i128;
    let mut exact = [0i128; MAX_BOX_MARKETS];
    for (f, &(_, size)) in exact.iter_mut().zip(sizes) {
        *f = fixed::from_decimal(size)?;
    }
    let mut half = [UNBOUNDED; MAX_BOX_MARKETS];
    for k in [rate.liquidation, rate.maintenance] {
        let (m, scale) = (k.mantissa(), k.scale());
        let unit = decimal::pow10(scale)?;
        // Units of 10^-(18 + s): g, the positions' rounding (10⁻¹⁰ each) and the slopes.
        let g = equity
            .checked_mul(unit)?
            .checked_sub(m.checked_mul(notional)?)?;
        let rounding = n.checked_mul(decimal::pow10(8 + scale)?)?;
        let budget = g.checked_abs()?.checked_sub(rounding)?;
        if budget <= 0 {
            return Some([0; MAX_BOX_MARKETS]);
        }
        for (h, &size) in half.iter_mut().zip(&exact[..sizes.len()]) {
            let slope = size
                .checked_mul(unit)?
                .checked_sub(m.checked_mul(size.checked_abs()?)?)?;
            if slope == 0 {
                continue;
            }
            *h = (*h).min(width(budget, n.checked_mul(slope.checked_abs()?)?));
        }
    }
    Some(half)
}

/// Decimals of a width [`safe_box_fixed`] gives: finer than any price's tick.
const WIDTH_DECIMALS: u32 = 12;

/// A width's unit: 10^[`WIDTH_DECIMALS`] of them make one.
const WIDTH_UNIT: i128 = 10i128.pow(WIDTH_DECIMALS);

/// Widths at most this many whole units (a box wider than any mark can move is as good as a
/// wider one).
const WIDTH_MAX: i128 = 1_000_000_000_000_000;

/// A half-width of [`safe_box_fixed`] that no threshold bounds.
pub(super) const UNBOUNDED: i128 = i128::MAX;

/// `budget / slope` (both positive) rounded down to [`WIDTH_DECIMALS`], at most
/// [`WIDTH_MAX`], in units of 10^-[`WIDTH_DECIMALS`]. A slope too large for its remainder's
/// digits to fit becomes its tenth plus one (at least its tenth rounded up, and no overflow)
/// and the budget its tenth rounded down, until it fits: the quotient only shrinks. Where the
/// budget's digits fit too, one division gives what the whole part and the remainder's
/// would: `⌊b·u/s⌋ = ⌊b/s⌋·u + ⌊(b mod s)·u/s⌋` (it was two 128-bit divisions a width).
pub(super) fn width(mut budget: i128, mut slope: i128) -> i128 {
    if slope <= i128::MAX / WIDTH_UNIT
        && let Some(scaled) = budget.checked_mul(WIDTH_UNIT)
    {
        return (scaled / slope).min(WIDTH_MAX * WIDTH_UNIT);
    }
    while slope > i128::MAX / WIDTH_UNIT {
        (budget, slope) = (budget / 10, slope / 10 + 1);
    }
    // The remainder by a multiplication: each 128-bit division is a library call.
    let whole = budget / slope;
    let rest = budget - whole * slope;
    if whole >= WIDTH_MAX {
        return WIDTH_MAX * WIDTH_UNIT;
    }
    whole * WIDTH_UNIT + rest * WIDTH_UNIT / slope
}

/// A half-width of [`safe_box_fixed`] as a decimal, as [`safe_box`] gives its own.
pub(super) fn half_decimal(half: i128) -> Decimal {
    match half {
        UNBOUNDED => Decimal::MAX,
        h => Decimal::from_i128_with_scale(h, WIDTH_DECIMALS),
    }
}

/// `inner_keys(around(mark, half_decimal(half)))`, in integers where the mark's digits allow
/// (a decimal's subtraction, addition and two roundings to 10^-9 were a third of a slot's
/// judgment): the interval's ends in units of 10^-[`WIDTH_DECIMALS`], the lower one rounded
/// up and the upper one down to 10^-9, each held to an i64 as [`key`] holds them. The same
/// keys wherever a decimal holds the ends exactly (marks below 7.9 × 10^16); above, where
/// the decimals' 28 digits would round the ends, these are the exact interval's own keys,
/// inside it as the index needs.
pub(super) fn keys_around(mark: Decimal, half: i128) -> (i64, i64) {
    let scale = mark.scale();
    let exact = (half != UNBOUNDED && scale <= WIDTH_DECIMALS)
        .then(|| {
            mark.mantissa()
                .checked_mul(10i128.pow(WIDTH_DECIMALS - scale))
        })
        .flatten()
        .and_then(|m| Some((m.checked_sub(half)?, m.checked_add(half)?)));
    let Some((lo, hi)) = exact else {
        return inner_keys(around(mark, half_decimal(half)));
    };
    let per_nano = 10i128.pow(WIDTH_DECIMALS - decimal::NANO_DECIMALS);
    if let (Ok(lo), Ok(hi)) = (i64::try_from(lo), i64::try_from(hi)) {
        // Ends within an i64 (marks and widths to 9.2 × 10^6): the same quotients by a 64-bit
        // division by a constant, a multiplication, where the 128-bit one was a call (two a
        // judgment, 5 % of the margin pass).
        let per = per_nano as i64;
        let ceil = lo.div_euclid(per) + i64::from(lo.rem_euclid(per) != 0);
        return (ceil, hi.div_euclid(per));
    }
    let hold = |v: i128| v.clamp(i64::MIN.into(), i64::MAX.into()) as i64;
    (
        hold(-(-lo).div_euclid(per_nano)),
        hold(hi.div_euclid(per_nano)),
    )
}

/// What a judgment values with: the markets, their marks and the positions.
#[derive(SystemParam)]
pub struct Valuing<'w, 's> {
    exchange: Res<'w, Exchange>,
    instruments: Query<
        'w,
        's,
        (
            &'static MarketSlot,
            &'static InstrumentState,
            &'static Instrument,
        ),
    >,
    held: Res<'w, PositionIndex>,
    positions: Query<'w, 's, (&'static Position, &'static ValuationBasis)>,
}

impl Valuing<'_, '_> {
    /// Each market's mark, by market id.
    fn marks(&self) -> Vec<Mark> {
        let mut marks = vec![Mark::new(Decimal::ZERO, 0); self.exchange.markets.len()];
        for (slot, state, instrument) in &self.instruments {
            marks[slot.0 as usize] = Mark::new(state.mark_price, instrument.0.tick_size.scale());
        }
        marks
    }
}

/// Where the pass learns which slots to open, fund and judge: the accounts and their
/// balances, the customers, the positions new to it and those the run moved.
#[derive(SystemParam)]
pub struct SlotSources<'w, 's> {
    index: Res<'w, AccountIndex>,
    registry: Res<'w, Registry>,
    customers: Query<'w, 's, &'static Customer>,
    balances: Query<'w, 's, &'static Balance>,
    funded: Query<'w, 's, (&'static Collateral, &'static Balance)>,
    written: ResMut<'w, WrittenBalances>,
    fresh: Query<'w, 's, (Entity, &'static Position, &'static MarginRate), Without<Holder>>,
    holders: Query<'w, 's, (&'static Holder, &'static MarginRate)>,
    moved: Res<'w, MovedPositions>,
    commands: Commands<'w, 's>,
}

impl SlotSources<'_, '_> {
    /// Every slot to judge this pass opened, rated and funded: the moved positions' rates
    /// (a rate changes only with its position written, a re-lock), after a restore every
    /// account `MarginStates` holds outside normal and every slot, the positions new to the
    /// pass, and the collateral of the accounts written since the last.
    fn prepare(
        &mut self,
        book: &mut MarginBook,
        states: &MarginStates,
        reopen: bool,
        exchange: &Exchange,
    ) {
        let Self {
            index,
            registry,
            customers,
            balances,
            funded,
            written,
            fresh,
            holders,
            moved,
            commands,
        } = self;
        // The slot of `key`, opened (and funded) if it has none; touched to be judged.
        let open = |book: &mut MarginBook, commands: &mut Commands, key, broker| {
            let (slot, opened) = book.open(key, broker, states, index);
            if let Some(account) = opened {
                let balance = balances.get(account).expect("indexed accounts are live");
                book.fund(slot, balance);
                commands.entity(account).insert(Collateral(slot));
            }
            book.touch(slot);
            slot
        };
        for &entity in &moved.list {
            if let Ok((&Holder(slot), rate)) = holders.get(entity) {
                book.set_rate(slot, *rate);
                book.touch(slot);
            }
        }
        if reopen {
            for &(customer, asset) in states.0.keys() {
                let entity = registry.customers[&customer];
                let broker = customers.get(entity).expect("customers never go").broker;
                open(book, commands, (customer, asset), broker);
            }
            for slot in 0..book.sums.len() {
                book.touch(slot as u32);
            }
        }
        for (entity, p, rate) in fresh.iter() {
            let asset = exchange.markets[p.market as usize].spec.settlement;
            let slot = open(book, commands, (p.customer, asset), p.broker);
            commands.entity(entity).insert(Holder(slot));
            book.hold(slot, p.market, entity);
            book.set_rate(slot, *rate);
        }
        fund_written(book, funded, &mut written.0);
    }
}

/// What the pass decides: the states, their records and the accounts to liquidate.
#[derive(SystemParam)]
pub struct MarginOutcome<'w> {
    states: ResMut<'w, MarginStates>,
    log: ResMut<'w, RiskLog>,
    liquidating: ResMut<'w, Liquidating>,
}

/// MarginSystems, first: the margin state of every (customer, currency) whose positions,
/// balance or rate changed, or whose safe box a mark move left.
pub fn assess_margin(
    clock: Res<SimClock>,
    auditing: Res<Auditing>,
    valuing: Valuing,
    mut sources: SlotSources,
    mut book: ResMut<MarginBook>,
    mut outcome: MarginOutcome,
) {
    let book = &mut *book;
    book.frozen = None;
    let Some(reopen) = book.begin_pass(&mut sources.written.0) else {
        return;
    };
    let marks = valuing.marks();
    book.crossed(&marks);
    book.marks = marks;
    sources.prepare(book, &outcome.states, reopen, &valuing.exchange);
    let marks = std::mem::take(&mut book.marks);
    let position = |e| {
        valuing
            .positions
            .get(e)
            .expect("indexed positions are live")
    };
    let valuer = Valuer {
        exchange: &valuing.exchange,
        held: &valuing.held,
        position: &position,
        marks: &marks,
    };
    let changed = book.judge_dirty(&valuer);
    if auditing.0 {
        audit_pass(book, &valuer, &sources.funded);
    }
    let MarginOutcome {
        states,
        log,
        liquidating,
    } = &mut outcome;
    record(
        book,
        changed,
        &clock,
        &sources.balances,
        (states, log, liquidating),
    );
    if !liquidating.0.is_empty() {
        book.freeze(&valuer);
    }
    book.marks = marks;
}

/// While the engine audits: every pass up to [`RESCAN_ALWAYS_UP_TO`] slots, every
/// [`RESCAN_EVERY`]th past that, the judgments against a full rescan and the slots'
/// collateral against the accounts.
fn audit_pass(book: &mut MarginBook, valuer: &Valuer, funded: &Query<(&Collateral, &Balance)>) {
    book.passes += 1;
    let every = book.sums.len() <= RESCAN_ALWAYS_UP_TO || book.passes.is_multiple_of(RESCAN_EVERY);
    if every {
        check_against_rescan(book, valuer);
        check_collateral(book, funded);
    }
}

/// The collateral of every slot whose account was written since the last pass, once each,
/// in entity order (an account of no slot is skipped); `written` is left empty. Where the
/// writes outnumber half the slots (a funding hour or midnight writes them all) every slot
/// is funded, in storage order: one pass costs less than sorting the writes, and funding
/// an unchanged account changes nothing.
fn fund_written(
    book: &mut MarginBook,
    funded: &Query<(&Collateral, &Balance)>,
    written: &mut Vec<Entity>,
) {
    if written.len() > book.accounts.len() / 2 {
        for (&Collateral(slot), b) in funded {
            book.fund(slot, b);
        }
        written.clear();
        return;
    }
    written.sort_unstable();
    written.dedup();
    for entity in written.drain(..) {
        if let Ok((&Collateral(slot), b)) = funded.get(entity) {
            book.fund(slot, b);
        }
    }
}

/// The oracle of [`WrittenBalances`] (while the engine audits, with the rescan's): every
/// slot's collateral is its account's, as funding every account on every pass would leave it.
fn check_collateral(book: &MarginBook, funded: &Query<(&Collateral, &Balance)>) {
    for (&Collateral(slot), b) in funded {
        assert_eq!(
            book.accounts[slot as usize].collateral,
            b.total - b.pending,
            "slot {slot}: a balance was written and not listed"
        );
    }
}

/// Up to this many slots the oracle runs on every pass; past it on every [`RESCAN_EVERY`]th,
/// which still finds a judgment the triggers missed within seconds of simulation time (a
/// state left wrong stays wrong until the slot is judged) and keeps a simulated week of a
/// few hundred accounts from spending most of its time in the oracle.
const RESCAN_ALWAYS_UP_TO: usize = 64;
const RESCAN_EVERY: u64 = 16;

/// The oracle of the event-driven judgments (while the engine audits, at the pace of
/// [`RESCAN_ALWAYS_UP_TO`]): every slot summed from its positions at this pass's marks and
/// judged, as a pass over everything would, has the state the pass left it in.
fn check_against_rescan(book: &MarginBook, valuer: &Valuer) {
    let markets = book.triggers.len();
    for (slot, (a, s)) in book.accounts.iter().zip(&book.sums).enumerate() {
        let key = (a.customer, a.asset);
        let mut scratch = *s;
        scratch.clear();
        let mut indexed = vec![None; markets];
        for (m, p, basis, mark) in valuer.held_in(key) {
            scratch.add(&valuation_at(p, basis, mark));
            indexed[m as usize] = valuer.held.map().get(&(p.customer, m)).copied();
        }
        assert_eq!(
            book.held[book.row(slot)],
            indexed[..],
            "slot {slot}: the positions it holds are the position index's"
        );
        let full = judge(&book.rates, &scratch, || valuer.figures(key, a.collateral));
        assert_eq!(
            s.state,
            full,
            "slot {slot} ({} {:?}): the pass left {:?}, a full rescan judges {full:?} at {:?}",
            a.customer,
            a.asset,
            s.state,
            valuer.figures(key, a.collateral)
        );
    }
}

/// The changes of state of this pass, in customer order: the states, the liquidations to
/// make, and a record each.
fn record(
    book: &MarginBook,
    mut changed: Vec<usize>,
    clock: &SimClock,
    balances: &Query<&Balance>,
    (states, log, liquidating): (&mut MarginStates, &mut RiskLog, &mut Liquidating),
) {
    changed.sort_unstable_by_key(|&slot| {
        let a = &book.accounts[slot];
        (a.customer, a.asset)
    });
    for slot in changed {
        let (a, state) = (&book.accounts[slot], book.sums[slot].state);
        let key = (a.customer, a.asset);
        match state {
            MarginState::Normal => states.0.remove(&key),
            state => states.0.insert(key, state),
        };
        if state == MarginState::Liquidation {
            liquidating.0.insert(key);
        }
        let used = balances
            .get(a.balance)
            .expect("indexed accounts are live")
            .locked;
        let (equity, notional) = book.figures_of(slot);
        let seq = RiskSeq(log.0.len() as u64);
        log.0.push(RiskRecord {
            seq,
            customer: a.customer,
            broker: a.broker,
            asset: a.asset,
            state,
            margin_deficit: (state != MarginState::Normal)
                .then(|| risk::margin_deficit(a.collateral, used)),
            leverage_ratio: risk::leverage_ratio(equity, notional),
            margin_ratio: risk::margin_ratio(used, equity),
            time: clock.now,
        });
    }
}

#[cfg(test)]
mod trigger_key_tests {
    use super::*;
    use proptest::prelude::*;

    /// Prices of a few decimals, and some beyond the keys' i64 range (9.2 × 10^9).
    fn price() -> impl Strategy<Value = Decimal> {
        let mantissa = prop_oneof![0i64..1_000_000_000, 0i64..i64::MAX];
        (mantissa, 0u32..=12).prop_map(|(m, scale)| Decimal::new(m, scale))
    }

    proptest! {
        /// A mark that leaves a safe interval (a mark on an end has left it) passes the keys
        /// filed for it, whatever the rounding and holding of the keys did.
        #[test]
        fn a_mark_leaving_a_safe_interval_crosses_its_filed_keys(
            ends in (price(), price()),
            mark in price(),
        ) {
            let (lo, hi) = (ends.0.min(ends.1), ends.0.max(ends.1));
            let (lower, upper) = narrowed(inner_keys((lo, hi)));
            if mark <= lo {
                prop_assert!(key(mark, false) <= lower, "{} ≤ {}", mark, lo);
            }
            if mark >= hi {
                prop_assert!(key(mark, true) >= upper, "{} ≥ {}", mark, hi);
            }
        }
    }
}
