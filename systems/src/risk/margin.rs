//! The margin pass (MarginSystems, first): every open position's valuation summed per
//! (customer, settlement currency), against that currency's balance, into a margin state
//! (D10). A change of state is recorded for the `liquidations` channel; a liquidation is
//! handed to `liquidation::liquidate`, next in the set.
//!
//! The sums live in dense slots, one per (customer, currency) that ever held a position,
//! which each position entity names through its [`Holder`]. A run in which a mark moved adds
//! every position into freshly zeroed sums in one scan, reading only the valuation and the
//! slot; any other run sums again only the slots something touched: a position whose
//! valuation or rate changed, one that closed (an `on_remove` hook), or a balance that
//! changed ([`Collateral`] on the account entity), each through the position index. Either
//! way the sums are rebuilt from the valuations, never carried forward, so they cannot drift.
//!
//! Sums and judgments are fixed point ([`perpsim_core::fixed`]), integer arithmetic, where
//! every figure is exact there; a slot holding a figure that is not is judged in decimals.
//!
//! Slots are derived: a restore rebuilds them in the run after its own (see [`Rebuild`]).
//! Their order reaches nothing: changes are sorted by customer.

use std::collections::BTreeMap;

use bevy_ecs::lifecycle::HookContext;
use bevy_ecs::prelude::{
    Changed, Commands, Component, Entity, Query, Res, ResMut, Resource, Without,
};
use bevy_ecs::world::DeferredWorld;
use perpsim_core::Decimal;
use perpsim_core::fixed;
use perpsim_core::ids::{BrokerCode, CustomerCode};
use perpsim_core::instrument::Asset;
use perpsim_core::risk::{self, MarginState};

use super::liquidation::Liquidating;
use super::{MarginStates, RiskLog};
use crate::clock::SimClock;
use crate::money::store::AccountIndex;
use crate::positions::PositionIndex;
use crate::positions::{MarginRate, Valuation};
use crate::records::ids::RiskSeq;
use crate::records::market::MARKET_MAKER;
use crate::records::money::{AccountId, Balance};
use crate::records::position::Position;
use crate::records::risk::RiskRecord;
use crate::records::venue::{Customer, InstrumentState, MarketId, MarketSlot};
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

/// A closed position (despawned) leaves its slot to be summed again.
fn position_closed(mut world: DeferredWorld, ctx: HookContext) {
    let Some(&Holder(slot)) = world.get::<Holder>(ctx.entity) else {
        return;
    };
    if let Some(mut book) = world.get_resource_mut::<MarginBook>() {
        book.touch(slot);
    }
}

/// Per slot, what every pass adds to and judges: 64 bytes, kept apart from the rest of the
/// account so a pass over a million slots streams only these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sums {
    /// Σ unrealised PnL and Σ |size| × mark of the open positions, fixed point.
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

/// The risk pass's slots. Derived: not state, rebuilt after a restore.
#[derive(Resource, Debug, Default)]
pub struct MarginBook {
    slots: BTreeMap<(CustomerCode, Asset), u32>,
    sums: Vec<Sums>,
    accounts: Vec<MarginAccount>,
    /// Slots to judge in the next pass, each once (bounded by the slot count).
    dirty: Vec<u32>,
    /// The marks the sums were taken at, by market.
    marks: Vec<Decimal>,
    /// The distinct margin rates slots hold (one per leverage profile), with their
    /// thresholds in fixed point: a slot names its own by index, so judging reads nothing
    /// outside the slot's sums.
    rates: Vec<(MarginRate, Option<risk::Thresholds>)>,
    /// Where a restore left the book (see [`Rebuild`]).
    rebuild: Rebuild,
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

impl MarginBook {
    /// The book of a restored engine: rebuilt by the runs after it (see [`Rebuild`]).
    pub(crate) fn restored() -> Self {
        MarginBook {
            rebuild: Rebuild::Deferred,
            ..MarginBook::default()
        }
    }

    /// A (customer, currency)'s equity (collateral + Σ unrealised PnL) and notional
    /// (Σ |size| × mark) as the last pass left them.
    pub fn figures(&self, customer: CustomerCode, asset: Asset) -> Option<(Decimal, Decimal)> {
        let slot = *self.slots.get(&(customer, asset))? as usize;
        Some(self.figures_of(slot))
    }

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

    /// A new balance for the slot's collateral.
    fn fund(&mut self, slot: u32, b: &Balance) {
        let collateral = match b.pending.is_zero() {
            true => b.total,
            false => b.total - b.pending,
        };
        self.accounts[slot as usize].collateral = collateral;
        let s = &mut self.sums[slot as usize];
        (s.collateral, s.collateral_exact) = match fixed::from_decimal(collateral) {
            Some(c) => (c, true),
            None => (0, false),
        };
        self.touch(slot);
    }

    /// The slot of a (customer, currency), opened with its account when new.
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
        // A fill opened the account before the position.
        let balance = index.0[&AccountId::customer(customer, asset)];
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
        (slot, Some(balance))
    }

    /// D10, in fixed point while every figure is exact there and nothing overflows, else in
    /// decimals (for a slot with inexact positions, `decimal` summed first).
    fn judge(&self, slot: usize) -> MarginState {
        let s = &self.sums[slot];
        if s.maker || s.positions == 0 {
            // The market maker is never liquidated (D10); no position, no margin.
            return MarginState::Normal;
        }
        let (rate, thresholds) = &self.rates[s.rate as usize];
        let fast = match (s.inexact == 0 && s.collateral_exact, thresholds) {
            (true, Some(t)) => s
                .collateral
                .checked_add(s.unrealised)
                .and_then(|equity| risk::margin_state_fixed(equity, s.notional, t)),
            _ => None,
        };
        fast.unwrap_or_else(|| {
            let (equity, notional) = self.figures_of(slot);
            risk::margin_state(equity, notional, rate.maintenance, rate.liquidation)
        })
    }
}

/// The valuations of a (customer, currency)'s open positions, through the position index.
fn valuations_of<'a>(
    exchange: &'a Exchange,
    held: &'a PositionIndex,
    valuations: &'a Query<&Valuation>,
    (customer, asset): (CustomerCode, Asset),
) -> impl Iterator<Item = &'a Valuation> + 'a {
    let markets = exchange.markets.iter().enumerate();
    markets
        .filter(move |(_, m)| m.spec.settlement == asset)
        .filter_map(move |(m, _)| held.0.get(&(customer, m as MarketId)))
        .map(|&e| valuations.get(e).expect("indexed positions are valued"))
}

/// MarginSystems, first: the margin state of every (customer, currency) whose positions,
/// marks or balance changed.
#[allow(clippy::too_many_arguments)] // one pass: positions, balances, the states and records
pub fn assess_margin(
    clock: Res<SimClock>,
    exchange: Res<Exchange>,
    accounts: (Res<AccountIndex>, Res<Registry>, Query<&Customer>),
    held: Res<PositionIndex>,
    instruments: Query<(&MarketSlot, &InstrumentState)>,
    balances: Query<&Balance>,
    funded: Query<(&Collateral, &Balance), Changed<Balance>>,
    fresh: Query<(Entity, &Position, &Valuation, &MarginRate), Without<Holder>>,
    rerated: Query<(&Holder, &MarginRate), Changed<MarginRate>>,
    revalued: Query<&Holder, Changed<Valuation>>,
    valued: Query<(&Valuation, &Holder)>,
    valuations: Query<&Valuation>,
    mut book: ResMut<MarginBook>,
    outcome: (ResMut<MarginStates>, ResMut<RiskLog>, ResMut<Liquidating>),
    mut commands: Commands,
) {
    let (mut states, mut log, mut liquidating) = outcome;
    let (index, registry, customers) = accounts;
    let book = &mut *book;
    let mut reopen = false;
    match book.rebuild {
        Rebuild::Done => {}
        Rebuild::Deferred => {
            book.rebuild = Rebuild::Due;
            return;
        }
        Rebuild::Due => (book.rebuild, reopen) = (Rebuild::Done, true),
    }
    let mut marks = vec![Decimal::ZERO; exchange.markets.len()];
    for (slot, state) in &instruments {
        marks[slot.0 as usize] = state.mark_price;
    }
    let rescan = marks != book.marks;
    if rescan {
        // A mark moved: every slot summed again from every valuation, in one scan.
        for s in &mut book.sums {
            s.clear();
        }
        for (valuation, &Holder(slot)) in &valued {
            book.sums[slot as usize].add(valuation);
        }
        book.marks = marks;
    } else {
        for &Holder(slot) in &revalued {
            book.touch(slot);
        }
    }
    let open = |book: &mut MarginBook, commands: &mut Commands, key, broker| {
        let (slot, opened) = book.open(key, broker, &states, &index);
        if let Some(account) = opened {
            let balance = balances.get(account).expect("indexed accounts are live");
            book.fund(slot, balance);
            commands.entity(account).insert(Collateral(slot));
        }
        book.touch(slot);
        slot
    };
    if reopen {
        for &(customer, asset) in states.0.keys() {
            let entity = registry.customers[&customer];
            let broker = customers.get(entity).expect("customers never go").broker;
            open(book, &mut commands, (customer, asset), broker);
        }
    }
    for (entity, p, valuation, rate) in &fresh {
        let asset = exchange.markets[p.market as usize].spec.settlement;
        let slot = open(book, &mut commands, (p.customer, asset), p.broker);
        commands.entity(entity).insert(Holder(slot));
        if rescan {
            book.sums[slot as usize].add(valuation); // not yet among `valued`
        }
        book.set_rate(slot, *rate);
    }
    for (&Holder(slot), rate) in &rerated {
        book.set_rate(slot, *rate);
        book.touch(slot);
    }
    for (&Collateral(slot), b) in &funded {
        book.fund(slot, b);
    }
    let mut changed = Vec::new();
    let dirty = std::mem::take(&mut book.dirty);
    let slots: Box<dyn Iterator<Item = usize>> = match rescan {
        true => Box::new(0..book.sums.len()),
        false => Box::new(dirty.iter().map(|&slot| slot as usize)),
    };
    for slot in slots {
        let key = |book: &MarginBook| (book.accounts[slot].customer, book.accounts[slot].asset);
        if !rescan {
            // Without a rescan, a touched slot is summed again from its positions.
            let positions = valuations_of(&exchange, &held, &valuations, key(book));
            let s = &mut book.sums[slot];
            s.clear();
            positions.for_each(|v| s.add(v));
        }
        if book.sums[slot].inexact > 0 {
            let positions = valuations_of(&exchange, &held, &valuations, key(book));
            book.accounts[slot].decimal =
                Some(positions.fold((Decimal::ZERO, Decimal::ZERO), |(u, n), v| {
                    (u + v.unrealised_pnl, n + v.notional)
                }));
        }
        let state = book.judge(slot);
        let s = &mut book.sums[slot];
        s.dirty = false;
        if state != s.state {
            s.state = state;
            changed.push(slot);
        }
    }
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
