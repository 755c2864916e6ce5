//! The margin pass (MarginSystems, first): every open position's valuation summed per
//! (customer, settlement currency), against that currency's balance, into a margin state
//! (D10). A change of state is recorded for the `liquidations` channel; a liquidation is
//! handed to `liquidation::liquidate`, next in the set.
//!
//! The sums go to dense slots, one per (customer, currency) that ever held a position, which
//! each position entity names through its [`Holder`], so the pass is one scan of the
//! positions and one of the slots, with no map lookup per position. Slots are derived (a
//! restore rebuilds them); their order reaches nothing: changes are sorted by customer.

use std::collections::BTreeMap;

use bevy_ecs::prelude::{Commands, Component, Entity, Query, Res, ResMut, Resource};
use perpsim_core::Decimal;
use perpsim_core::ids::{BrokerCode, CustomerCode};
use perpsim_core::instrument::Asset;
use perpsim_core::risk::{self, MarginState};

use super::liquidation::Liquidating;
use super::{MarginStates, RiskLog, RiskRecord};
use crate::clock::SimClock;
use crate::market::maker::MARKET_MAKER;
use crate::money::ledger::{Balance, Owner};
use crate::positions::{MarginRate, Position, Valuation};
use crate::registry::AccountIndex;
use crate::trading::exchange::Exchange;

/// The slot of a position's (customer, settlement currency) in the [`MarginBook`]. Derived.
#[derive(Component, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holder(u32);

/// One (customer, currency)'s figures of the last pass.
#[derive(Debug, Clone)]
pub struct MarginAccount {
    pub customer: CustomerCode,
    pub broker: BrokerCode,
    pub asset: Asset,
    /// The customer's account entity in the currency, once it exists (accounts never go).
    balance: Option<Entity>,
    pub rate: MarginRate,
    /// Open positions counted in this pass.
    pub positions: u32,
    pub unrealised: Decimal,
    /// Σ |size| × mark.
    pub notional: Decimal,
    /// total − pending: the collateral on the ledger basis.
    pub collateral: Decimal,
    /// Initial margin locked (positions and resting orders).
    pub used: Decimal,
    pub state: MarginState,
}

impl MarginAccount {
    pub fn equity(&self) -> Decimal {
        self.collateral + self.unrealised
    }
}

/// The risk pass's slots. Derived: not state, rebuilt lazily after a restore.
#[derive(Resource, Debug, Default)]
pub struct MarginBook {
    slots: BTreeMap<(CustomerCode, Asset), u32>,
    pub accounts: Vec<MarginAccount>,
}

impl MarginBook {
    /// The figures of a (customer, currency) as the last pass left them.
    pub fn get(&self, customer: CustomerCode, asset: Asset) -> Option<&MarginAccount> {
        let slot = *self.slots.get(&(customer, asset))?;
        Some(&self.accounts[slot as usize])
    }

    fn slot_of(&mut self, p: &Position, asset: Asset, states: &MarginStates) -> u32 {
        let key = (p.customer, asset);
        if let Some(&slot) = self.slots.get(&key) {
            return slot;
        }
        let slot = u32::try_from(self.accounts.len()).expect("fewer than 2³² accounts");
        self.slots.insert(key, slot);
        self.accounts.push(MarginAccount {
            customer: p.customer,
            broker: p.broker,
            asset,
            balance: None,
            rate: MarginRate::of_leverage(1),
            positions: 0,
            unrealised: Decimal::ZERO,
            notional: Decimal::ZERO,
            collateral: Decimal::ZERO,
            used: Decimal::ZERO,
            state: states.0.get(&key).copied().unwrap_or(MarginState::Normal),
        });
        slot
    }
}

/// MarginSystems, first: the margin state of every (customer, currency) holding a position.
#[allow(clippy::too_many_arguments)] // one pass: positions, balances, the states and records
pub fn assess_margin(
    clock: Res<SimClock>,
    exchange: Res<Exchange>,
    index: Res<AccountIndex>,
    balances: Query<&Balance>,
    positions: Query<(Entity, &Position, &Valuation, &MarginRate, Option<&Holder>)>,
    mut book: ResMut<MarginBook>,
    mut states: ResMut<MarginStates>,
    mut log: ResMut<RiskLog>,
    mut liquidating: ResMut<Liquidating>,
    mut commands: Commands,
) {
    let book = &mut *book;
    for a in &mut book.accounts {
        a.positions = 0;
        a.unrealised = Decimal::ZERO;
        a.notional = Decimal::ZERO;
    }
    for (entity, p, valuation, rate, holder) in &positions {
        let slot = match holder {
            Some(h) => h.0,
            None => {
                let asset = exchange.markets[p.market as usize].spec.settlement;
                let slot = book.slot_of(p, asset, &states);
                commands.entity(entity).insert(Holder(slot));
                slot
            }
        };
        let a = &mut book.accounts[slot as usize];
        a.positions += 1;
        a.rate = *rate;
        a.unrealised += valuation.unrealised_pnl;
        a.notional += p.size.abs() * valuation.mark_price;
    }
    let mut changed = Vec::new();
    for (slot, a) in book.accounts.iter_mut().enumerate() {
        if a.positions == 0 && a.state == MarginState::Normal {
            continue;
        }
        let entity = *a.balance.get_or_insert_with(|| {
            index.0[&(Owner::Customer(a.customer), a.asset)] // a position's fill opened it
        });
        let b = balances.get(entity).expect("indexed accounts are live");
        a.collateral = b.total - b.pending;
        a.used = b.locked;
        let state = match a.customer == MARKET_MAKER {
            true => MarginState::Normal, // the market maker is never liquidated (D10)
            false => risk::margin_state(
                a.equity(),
                a.notional,
                a.rate.maintenance,
                a.rate.liquidation,
            ),
        };
        if state != a.state {
            a.state = state;
            changed.push(slot);
        }
    }
    changed.sort_unstable_by_key(|&slot| {
        let a = &book.accounts[slot];
        (a.customer, a.asset)
    });
    for slot in changed {
        let a = &book.accounts[slot];
        let key = (a.customer, a.asset);
        match a.state {
            MarginState::Normal => states.0.remove(&key),
            state => states.0.insert(key, state),
        };
        if a.state == MarginState::Liquidation {
            liquidating.0.insert(key);
        }
        let seq = log.0.len() as u64;
        log.0.push(RiskRecord {
            seq,
            customer: a.customer,
            broker: a.broker,
            asset: a.asset,
            state: a.state,
            margin_deficit: (a.state != MarginState::Normal)
                .then(|| risk::margin_deficit(a.collateral, a.used)),
            leverage_ratio: risk::leverage_ratio(a.equity(), a.notional),
            margin_ratio: risk::margin_ratio(a.used, a.equity()),
            time: clock.now,
        });
    }
}
