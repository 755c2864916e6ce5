//! The invariants money and trading depend on, checked after every run of the schedule while
//! the engine audits (`records::audit::Auditing`: debug and test builds by default, release
//! builds when a host turns it on), the scans of what exists on the cadence of
//! `CheckedUpTo::scans`. A violation stops the engine loudly. The checks themselves live with
//! the state they read (`Ledger::check_invariants`, `Exchange::check_fills` and `check_live`,
//! `positions::check_positions`); this concern only runs them, last in `PublishSystems`.
//!
//! The invariants: money is conserved — per asset, the sum of all accounts equals completed
//! deposits plus the venue's capital minus completed withdrawals (the running sum on every tick, in
//! every build; the accounts themselves against it on the scans' cadence, below); the fees account
//! never goes below zero (D7: rebates come out of the same fill's taker fee); no customer holds a
//! negative balance in a currency it has no open position in; no locked or pending amount is
//! negative, and every figure has at most 10 decimals (a customer's `available`, derived, can go
//! negative only through trading losses, which liquidation will bound); trading is consistent — no
//! book crossed, positions summing to zero per market, every fill in the trades twice (one record
//! per side) and each record in the ledger once, locked margin equal to positions' margin plus
//! resting reserves; the position index and entities agree one to one (positions, accounts and
//! orders), each position held under its customer's profile, its valuation basis current and
//! valuing it as the decimals do; every live order open and either resting or waiting, exactly the
//! waiting ones armed in their market's trigger index and marked `Waiting`, the open orders counted
//! per customer (the D4 bound's count) summing to the live set. While the engine audits, all of
//! these are asserted in `PublishSystems` and stop it loudly on a violation; every build asserts
//! the ledger's money guards (balanced postings, conservation per asset) whether it audits or not.
//! What follows what changed (books, new fills and their ledger rows, money per asset, open counts)
//! is checked after every run; a scan of what exists (the order index and reference table, every
//! order ever; the live orders, positions, accounts and locked balances) on every run up to 128
//! items and on every 64th past that — a corruption is still caught within a simulated minute, and
//! on every run the scans were two thirds of a simulated week. The `seven_days` test runs them
//! through a simulated week of 200 customers and liquidating shocks, and replays its journal,
//! streamed to a second engine on the other core, to the same hash.

use bevy_ecs::prelude::{Query, Res, ResMut, Schedule, With, World};
use bevy_ecs::system::SystemParam;
use perpsim_core::Decimal;

use crate::clock::SimClock;
use crate::money::ledger::Ledger;
use crate::money::periodic::funding_row;
use crate::money::store::AccountIndex;
use crate::positions::PositionIndex;
use crate::positions::{MarginRate, Mark, ValuationBasis, valuation_at};
use crate::records::audit::{Auditing, auditing};
use crate::records::money::{AccountId, Balance, Owner, VenueAccount};
use crate::records::periodic::PeriodicPasses;
use crate::records::position::Position;
use crate::records::venue::{Customer, Instrument, InstrumentState, MarketId, MarketSlot};
use crate::registry::Registry;
use crate::trading::exchange::{CheckedUpTo, Exchange};
use crate::trading::orders::{LiveOrder, OrderRecords, Waiting};
use perpsim_core::instrument::Asset;

pub(crate) fn plugin(world: &mut World, schedule: &mut Schedule) {
    world.init_resource::<Auditing>();
    world.init_resource::<CheckedUpTo>();
    if world.resource::<Auditing>().0 {
        scheduled(world, schedule);
    }
}

/// Whether the audit's systems are on the schedule: added the first time the engine audits,
/// so an engine that never does (a release build's default) pays nothing for them on each
/// run, not even their run condition (a day of one-second runs is 86 400 of them).
#[derive(bevy_ecs::prelude::Resource)]
struct Scheduled;

/// Puts the audit's systems on the schedule unless they are there already.
pub(crate) fn scheduled(world: &mut World, schedule: &mut Schedule) {
    use bevy_ecs::prelude::IntoScheduleConfigs;

    use crate::sets::Audit;

    if world.contains_resource::<Scheduled>() {
        return;
    }
    world.insert_resource(Scheduled);
    schedule.add_systems(
        (assert_money_invariants, assert_trading_invariants)
            .chain()
            .in_set(Audit)
            .run_if(auditing),
    );
}

/// The fills are checked from where the engine stands: at a restore, what came before was
/// checked when it was made (and the ledger rows the projection holds are not held); when
/// auditing is turned on, what came before was not audited.
pub(crate) fn start_here(world: &mut World) {
    let trades = world.resource::<Exchange>().trades.len();
    let movements = world
        .resource::<crate::money::ledger::Ledger>()
        .movements()
        .len();
    world.insert_resource(CheckedUpTo::starting_at(trades, movements));
}

/// Every indexed account with its balance; a violation if the index and the account
/// entities do not agree one to one.
fn indexed_balances<'a>(
    index: &'a AccountIndex,
    balances: &'a Query<&Balance>,
) -> Result<Vec<(&'a AccountId, &'a Balance)>, String> {
    let entities = balances.iter().count();
    if entities != index.accounts().len() {
        return Err(format!(
            "{entities} account entities but {} indexed",
            index.accounts().len()
        ));
    }
    index
        .accounts()
        .iter()
        .map(|(id, &e)| {
            let balance = balances
                .get(e)
                .map_err(|_| format!("indexed account {id:?} is not an entity"))?;
            Ok((id, balance))
        })
        .collect()
}

/// The money invariants (D7; issue 3 item 6): every account, on the scans' cadence. Per asset,
/// the accounts' running sum is held to the boundary's flows on every tick in every build
/// (`Ledger::assert_conserved`); this scan holds the accounts to the running sum and each to
/// its own rules. On every pass it was half of a simulated week's engine thread (perf).
pub fn assert_money_invariants(
    ledger: Res<Ledger>,
    clock: Res<SimClock>,
    index: Res<AccountIndex>,
    balances: Query<&Balance>,
    done: Res<CheckedUpTo>,
) {
    if !done.scans(index.accounts().len() as u64) {
        return;
    }
    let checked = indexed_balances(&index, &balances)
        .and_then(|accounts| ledger.check_invariants(accounts.into_iter()));
    if let Err(violation) = checked {
        panic!("money invariant violated at {}: {violation}", clock.now);
    }
}

/// D7: per asset, the clearing account holds exactly what the open positions' unrealised
/// PnL will settle (it paid every realised PnL out, so its balance is minus the realised sum,
/// which is the unrealised sum of a zero-sum market): what it owes plus the unrealised PnL of
/// every open position (market maker included) is zero but for rounding. Each booked
/// movement and each valuation rounds once, by at most half a unit of the 10th decimal, so
/// `roundings` of them bound the residue.
fn check_clearing(
    accounts: &[(&AccountId, &Balance)],
    unrealised: impl Iterator<Item = (Asset, Decimal)>,
    roundings: usize,
) -> Result<(), String> {
    let mut sums: std::collections::BTreeMap<Asset, Decimal> = Default::default();
    for (asset, u) in unrealised {
        *sums.entry(asset).or_default() -= u;
    }
    for (AccountId { owner, asset }, b) in accounts {
        if *owner == Owner::Venue(VenueAccount::Clearing) {
            *sums.entry(*asset).or_default() += b.total;
        }
    }
    let bound = Decimal::new(5, 11) * Decimal::from(roundings);
    match sums.iter().find(|(_, s)| s.abs() > bound) {
        Some((asset, s)) => Err(format!(
            "{asset:?}: clearing plus unrealised PnL is {s}, beyond the rounding bound {bound}"
        )),
        None => Ok(()),
    }
}

/// D10: insurance covers what a liquidation (or any close) leaves below zero, so a customer
/// holds a negative balance only in a currency it still has positions in (whose equity the
/// margin pass watches).
fn check_no_negative_flat(
    accounts: &[(&AccountId, &Balance)],
    exposed: impl Fn(perpsim_core::ids::CustomerCode, Asset) -> bool,
) -> Result<(), String> {
    for (AccountId { owner, asset }, b) in accounts {
        // Net of pending withdrawals, which complete whatever happens meanwhile.
        if let Owner::Customer(code) = owner
            && b.total - b.pending < Decimal::ZERO
            && !exposed(*code, *asset)
        {
            return Err(format!(
                "customer {code} holds {} {asset:?} ({} pending out) with no position open in it",
                b.total, b.pending
            ));
        }
    }
    Ok(())
}

/// The live state the scans of the trading audit read.
#[derive(SystemParam)]
pub struct LiveState<'w, 's> {
    registry: Res<'w, Registry>,
    index: Res<'w, PositionIndex>,
    instruments: Query<
        'w,
        's,
        (
            &'static MarketSlot,
            &'static InstrumentState,
            &'static Instrument,
        ),
    >,
    customers: Query<'w, 's, &'static Customer>,
    positions: Query<
        'w,
        's,
        (
            &'static Position,
            &'static MarginRate,
            &'static ValuationBasis,
        ),
    >,
    waiting: Query<'w, 's, &'static LiveOrder, With<Waiting>>,
    account_index: Res<'w, AccountIndex>,
    balances: Query<'w, 's, &'static Balance>,
    passes: Res<'w, PeriodicPasses>,
}

/// Every order ever against its index and the reference table (rule 11), on the cadence of
/// [`CheckedUpTo::scans`].
fn check_order_index(orders: &OrderRecords, done: &CheckedUpTo) -> Result<(), String> {
    orders.check_open_counts()?;
    if done.scans(orders.count()) {
        orders.check_index()?;
        if !orders.refs().is_consistent(orders) {
            return Err("the reference index does not match the orders".to_owned());
        }
    }
    Ok(())
}

/// The trading and position invariants (issue 4 item 7, issue 11): what changed on every
/// pass, the live state on the cadence of [`CheckedUpTo::scans`].
pub fn assert_trading_invariants(
    exchange: Res<Exchange>,
    orders: OrderRecords,
    ledger: Res<Ledger>,
    mut done: ResMut<CheckedUpTo>,
    clock: Res<SimClock>,
    live: LiveState,
) {
    done.next_pass();
    let checked = exchange
        .check_fills(&ledger, &mut done)
        .and_then(|()| check_order_index(&orders, &done))
        .and_then(|()| {
            let items = live.positions.count() + orders.live_count();
            match done.scans(items as u64) {
                true => check_live(&live, &exchange, &orders, &ledger),
                false => Ok(()),
            }
        });
    if let Err(violation) = checked {
        panic!("trading invariant violated at {}: {violation}", clock.now);
    }
}

/// The scans of the live state: positions valued as their decimals say and held under their
/// profile, locked margin, clearing against unrealised PnL, no negative balance left flat,
/// the waiting marks.
fn check_live(
    live: &LiveState,
    exchange: &Exchange,
    orders: &OrderRecords,
    ledger: &Ledger,
) -> Result<(), String> {
    let mut marks = vec![(Decimal::ZERO, 0); live.instruments.iter().len()];
    for (slot, state, instrument) in &live.instruments {
        marks[slot.0 as usize] = (state.mark_price, instrument.0.tick_size.scale());
    }
    let leverage = |c| {
        live.customers
            .get(live.registry.customers[&c])
            .expect("positions belong to customers")
            .leverage
    };
    crate::positions::check_positions(&live.index, &live.positions, &marks, leverage)?;
    let accounts = indexed_balances(&live.account_index, &live.balances)?;
    let open: Vec<&Position> = live.positions.iter().map(|(p, _, _)| p).collect();
    exchange.check_live(orders, &open, &accounts)?;
    // By the basis, which `check_positions` just found to value as the decimals do.
    let unrealised = live.positions.iter().map(|(p, _, basis)| {
        let (mark, scale) = marks[p.market as usize];
        (
            exchange.markets[p.market as usize].spec.settlement,
            valuation_at(p, basis, Mark::new(mark, scale)).unrealised_pnl,
        )
    });
    // The hour's pass in progress has paid clearing what the positions it has not reached
    // yet will be paid out of it (funding is zero-sum over the whole pass only).
    let owed = live.positions.iter().filter_map(|(p, _, _)| {
        let pass = live.passes.funding.as_ref()?;
        let info = pass.owed((p.customer, p.market))?;
        let asset = exchange.markets[p.market as usize].spec.settlement;
        Some((asset, funding_row(p, info, asset).amount))
    });
    let roundings = ledger.movements().len() + 2 * open.len();
    check_clearing(&accounts, unrealised.chain(owed), roundings)?;
    // Asked only of a negative account (rare): a set of every exposure built on every run
    // was a tenth of a simulated week's audit.
    let exposed = |customer, asset| {
        let markets = (customer, MarketId::MIN)..=(customer, MarketId::MAX);
        live.index
            .map()
            .range(markets)
            .any(|(&(_, market), _)| exchange.markets[market as usize].spec.settlement == asset)
    };
    check_no_negative_flat(&accounts, exposed)?;
    let marked = (live.waiting.iter())
        .filter(|o| o.record().is_some_and(|o| o.waiting()))
        .count();
    let waits = orders.live().filter(|o| o.waiting()).count();
    match (marked, live.waiting.iter().len()) {
        (m, all) if m == waits && all == waits => Ok(()),
        (_, all) => Err(format!(
            "{all} orders marked waiting but {waits} live orders wait"
        )),
    }
}

#[cfg(test)]
mod tests {
    use bevy_ecs::system::RunSystemOnce;
    use perpsim_core::order::Side;

    use super::*;
    use crate::testkit::{engine, funded, limit, place, run};

    /// An engine where customer 1 holds a long, customer 0 a short with 0.3 still resting and
    /// customer 2 nothing, and then customer `who`'s USDC balance corrupted by `corrupt`; the
    /// audit's violation, if any.
    fn audit_after(who: usize, corrupt: impl FnOnce(&mut Balance)) -> Option<String> {
        let mut e = engine(1);
        let c = funded(&mut e, 3, "100000");
        run(
            &mut e,
            vec![
                place(c[0], limit(Side::Sell, "m", "0.5", "60000")),
                place(c[1], limit(Side::Buy, "t", "0.2", "60010")),
            ],
        );
        let world = e.world_mut();
        let account = AccountId::customer(c[who], Asset::Usdc);
        let entity = world
            .resource::<AccountIndex>()
            .get(&account)
            .expect("an open account");
        corrupt(&mut world.get_mut::<Balance>(entity).expect("an account"));
        let audit = || world.run_system_once(assert_trading_invariants);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(audit));
        caught
            .err()
            .map(|p| *p.downcast::<String>().expect("a message"))
    }

    #[test]
    fn the_audit_passes_a_sound_engine_and_catches_a_locked_margin_off_by_a_unit_d6() {
        assert_eq!(audit_after(1, |_| {}), None);
        let caught = audit_after(1, |b| b.locked += Decimal::new(1, 10)).expect("caught");
        assert!(
            caught.contains("locked 12000.0000000001 but positions and orders hold 12000"),
            "{caught}"
        );
    }

    #[test]
    fn the_audit_catches_a_negative_balance_only_where_no_position_is_open_d6() {
        assert_eq!(audit_after(1, |b| b.total = Decimal::NEGATIVE_ONE), None);
        let caught = audit_after(2, |b| b.total = Decimal::NEGATIVE_ONE).expect("caught");
        assert!(caught.contains("with no position open in it"), "{caught}");
    }

    /// Issue 38 item 6: an engine that does not audit (a release build's default) carries no
    /// audit system on its schedule; the first time it audits they are added, once.
    #[test]
    fn the_audit_systems_join_the_schedule_the_first_time_the_engine_audits() {
        let (mut world, mut schedule) = (World::new(), Schedule::default());
        world.insert_resource(Auditing(false));
        plugin(&mut world, &mut schedule);
        assert_eq!(schedule.systems_len(), 0);
        scheduled(&mut world, &mut schedule);
        scheduled(&mut world, &mut schedule);
        assert_eq!(schedule.systems_len(), 2);
        let (mut world, mut schedule) = (World::new(), Schedule::default());
        world.insert_resource(Auditing(true));
        plugin(&mut world, &mut schedule);
        assert_eq!(schedule.systems_len(), 2);
    }
}
