//! Liquidation (MarginSystems, after the margin pass; D10). Each (customer, currency) the
//! pass found below its liquidation threshold, in customer order: its open orders in that
//! currency's instruments cancelled, then each position closed by forced IOC fills against
//! the book (`liquidation`), and what the book could not absorb closed at the mark against
//! opposite positions in auto-deleveraging rank (`auto_deleveraging`). Last, every
//! customer a booking left below zero with no position open in that currency is covered by
//! the insurance account.
//!
//! Auto-deleveraging rank (BitMEX-style), highest first, ties by customer code: an opposite
//! position's profit is `unrealised PnL / (|size| × entry price)` and its account's
//! effective leverage `notional / equity` in that currency; winners (profit > 0, equity > 0)
//! rank by profit × effective leverage, above every other position with positive equity,
//! ranked by profit / effective leverage, above those with no positive equity, ranked by
//! profit.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bevy_ecs::prelude::{Res, ResMut, Resource};
use perpsim_core::Decimal;
use perpsim_core::ids::CustomerCode;
use perpsim_core::instrument::Asset;

use super::margin::MarginBook;
use crate::money::ledger::Ledger;
use crate::records::venue::MarketId;
use crate::trading::desk::Desk;

/// The (customer, currency) pairs to liquidate in this run, from the margin pass.
#[derive(Resource, Debug, Default)]
pub struct Liquidating(pub BTreeSet<(CustomerCode, Asset)>);

/// The run condition of [`liquidate`]: an account to liquidate, or one a booking left below
/// zero to cover.
pub fn anything_to_do(liquidating: Res<Liquidating>, ledger: Res<Ledger>) -> bool {
    !liquidating.0.is_empty() || ledger.any_went_negative()
}

/// MarginSystems, after `assess_margin`.
pub fn liquidate(mut liquidating: ResMut<Liquidating>, book: Res<MarginBook>, mut desk: Desk) {
    let targets = std::mem::take(&mut liquidating.0);
    if !targets.is_empty() {
        desk.cancel_for_liquidation(&targets);
        let mut ranks = Ranks::default();
        for &(customer, asset) in &targets {
            for market in 0..desk.market_count() {
                if desk.market(market).0.settlement != asset
                    || desk.position_size(customer, market).is_zero()
                {
                    continue;
                }
                let left = desk.liquidate_on_book(customer, market);
                if left > 0 {
                    deleverage(&mut desk, &book, &mut ranks, customer, market);
                }
            }
        }
    }
    let mut negative: BTreeMap<(CustomerCode, Asset), Arc<str>> = BTreeMap::new();
    for (customer, asset, symbol) in desk.take_went_negative() {
        negative.insert((customer, asset), symbol); // the last booking's instrument
    }
    for ((customer, asset), symbol) in negative {
        desk.cover_negative(customer, asset, &symbol);
    }
    desk.flush();
}

/// The auto-deleveraging queues of this run, by (market, whether they are long), computed
/// when first needed.
#[derive(Default)]
struct Ranks(BTreeMap<(MarketId, bool), Vec<CustomerCode>>);

/// Closes what is left of `customer`'s position in `market` against the ranked opposite
/// positions at the mark. Positions sum to zero per market, so the opposite side always
/// holds enough; a queue found short (positions opened since it was ranked) is ranked again.
fn deleverage(
    desk: &mut Desk,
    book: &MarginBook,
    ranks: &mut Ranks,
    customer: CustomerCode,
    market: MarketId,
) {
    let long = desk.position_size(customer, market) > Decimal::ZERO;
    let mark = desk.market(market).1.mark_price;
    for fresh in [false, true] {
        if fresh || !ranks.0.contains_key(&(market, !long)) {
            ranks
                .0
                .insert((market, !long), rank(desk, book, market, !long));
        }
        for &counterparty in &ranks.0[&(market, !long)] {
            let size = desk.position_size(customer, market);
            if size.is_zero() {
                return;
            }
            let theirs = desk.position_size(counterparty, market);
            if counterparty == customer || theirs.is_zero() || (theirs > Decimal::ZERO) == long {
                continue;
            }
            let lots = desk.lots_of(market, size).min(desk.lots_of(market, theirs));
            desk.deleverage(customer, counterparty, market, lots, mark);
        }
    }
    assert!(
        desk.position_size(customer, market).is_zero(),
        "the opposite side of a market always holds the liquidated size"
    );
}

/// The holders of `long` (or short) positions in `market`, best rank first.
fn rank(desk: &Desk, book: &MarginBook, market: MarketId, long: bool) -> Vec<CustomerCode> {
    let (spec, state) = desk.market(market);
    let (asset, mark) = (spec.settlement, state.mark_price);
    let mut ranked: Vec<((u8, Decimal), CustomerCode)> = desk
        .open_positions()
        .filter(|p| p.market == market && !p.size.is_zero() && (p.size > Decimal::ZERO) == long)
        .map(|p| {
            let profit = p
                .unrealised_pnl(mark)
                .checked_div(p.size.abs() * p.entry_price)
                .unwrap_or(Decimal::ZERO);
            let (equity, notional) = book
                .judged_figures((p.customer, asset))
                .unwrap_or((Decimal::ZERO, Decimal::ZERO));
            let key = if equity > Decimal::ZERO {
                let leverage = notional.checked_div(equity).unwrap_or(Decimal::MAX);
                match profit > Decimal::ZERO {
                    true => (2, profit.checked_mul(leverage).unwrap_or(Decimal::MAX)),
                    false => (1, profit.checked_div(leverage).unwrap_or(Decimal::ZERO)),
                }
            } else {
                (0, profit)
            };
            (key, p.customer)
        })
        .collect();
    ranked.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    ranked.into_iter().map(|(_, c)| c).collect()
}
