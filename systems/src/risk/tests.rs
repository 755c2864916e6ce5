//! Margin calls, liquidation, auto-deleveraging, insurance and depreciation notices on the
//! manual clock (D9, D10, §2.2, §3.3, §6 rules 4–5; issue 13). BTC starts at 60 000.

use perpsim_core::Decimal;
use perpsim_core::ids::CustomerCode;
use perpsim_core::instrument::Asset;
use perpsim_core::order::{EndReason, OrderStatus, Side};
use perpsim_core::risk::MarginState;

use super::RiskLog;
use super::notices::Notifications;
use crate::Engine;
use crate::command::{AdvanceClock, RequestTransfer, SetInstrumentPrice, SetLeverage};
use crate::command::{Command, TransferKind};
use crate::records::money::{AccountId, MovementKind, VenueAccount};
use crate::records::trade::TradeKind;
use crate::testkit::*;

fn deposit(e: &mut Engine, c: CustomerCode, usdc: &str) {
    let r = run(
        e,
        vec![Command::RequestTransfer(RequestTransfer {
            customer: c,
            kind: TransferKind::Deposit,
            asset: Asset::Usdc,
            amount: d(usdc),
            delay_ms: 0,
        })],
    );
    assert!(r[0].is_ok(), "{r:?}");
    advance(e, 1);
}

fn ok(e: &mut Engine, cmds: Vec<Command>) {
    let r = run(e, cmds);
    assert!(r.iter().all(|r| r.is_ok()), "{r:?}");
}

/// `seller` sells 0.01 BTC at `price` to `buyer`'s market order: a long and a short opened.
fn cross(e: &mut Engine, seller: CustomerCode, buyer: CustomerCode, price: &str) {
    let (sell, buy) = (format!("s{price}"), format!("b{price}"));
    ok(
        e,
        vec![
            place(seller, limit(Side::Sell, &sell, "0.01", price)),
            place(buyer, market(Side::Buy, &buy, "0.01")),
        ],
    );
}

fn size(e: &Engine, c: CustomerCode) -> Decimal {
    let v = e.view();
    v.trading
        .positions
        .get(&c)
        .and_then(|p| p.get(&0))
        .map_or(Decimal::ZERO, |p| p.size)
}

fn total(e: &Engine, c: CustomerCode) -> Decimal {
    e.view().balances[&c][&Asset::Usdc].total
}

fn states(e: &mut Engine, c: CustomerCode) -> Vec<MarginState> {
    let w = e.world_mut();
    let log = w.resource::<RiskLog>();
    log.0
        .iter()
        .filter(|r| r.customer == c)
        .map(|r| r.state)
        .collect()
}

/// A customer at leverage 2 (initial 0.50, margin call below 0.30, liquidation below 0.20)
/// with 320 USDC, long 0.01 BTC at 60 000 from a well-funded seller, and a buy resting at
/// 30 000. Its leverage_ratio is (320 + 0.01 × (P − 60 000)) / (0.01 × P): margin call
/// below 40 000, liquidation below 35 000.
fn leveraged_long() -> (Engine, Vec<CustomerCode>) {
    let mut e = engine(3);
    let cs = customers(&mut e, 5);
    let (long, seller) = (cs[0], cs[1]);
    deposit(&mut e, long, "320");
    deposit(&mut e, seller, "1000000");
    ok(
        &mut e,
        vec![
            Command::SetLeverage(SetLeverage {
                customer: long,
                leverage: 2,
            }),
            place(seller, limit(Side::Sell, "s", "0.01", "60000")),
            place(long, market(Side::Buy, "b", "0.01")),
            place(long, limit(Side::Buy, "rest", "0.0001", "30000")),
        ],
    );
    assert_eq!(size(&e, long), d("0.01"));
    (e, cs)
}

/// D10, §6 rule 4: below the margin-call threshold the account is called once, and keeps
/// its positions and orders; margin_deficit is 0 while available margin is not negative.
#[test]
fn a_margin_call_is_recorded_once_and_keeps_positions_and_orders() {
    let (mut e, cs) = leveraged_long();
    let long = cs[0];
    set_price(&mut e, "38000");
    set_price(&mut e, "37900");
    assert_eq!(states(&mut e, long), vec![MarginState::MarginCall]);
    let w = e.world_mut();
    let log = &w.resource::<RiskLog>().0;
    let record = log[log.len() - 1].clone();
    // (320 − 0.30 taker fee − 220) / 380 = 0.26236… → 0.2623.
    assert_eq!(record.leverage_ratio.to_string(), "0.2623");
    assert_eq!(record.margin_deficit, Some(Decimal::ZERO));
    assert_eq!(size(&e, long), d("0.01"), "the position is kept");
    let v = e.view();
    assert_eq!(v.trading.open_orders[&long].len(), 1, "the order is kept");
    set_price(&mut e, "45000");
    assert_eq!(
        states(&mut e, long),
        vec![MarginState::MarginCall, MarginState::Normal],
        "recovery is recorded, with no deficit"
    );
}

/// D10: below the liquidation threshold the customer's orders are cancelled and the
/// position is closed by a forced IOC fill at the bids (type liquidation, no reference).
#[test]
fn a_liquidation_with_depth_cancels_orders_and_fills_at_the_bids() {
    let (mut e, cs) = leveraged_long();
    let (long, bidder) = (cs[0], cs[2]);
    deposit(&mut e, bidder, "1000000");
    ok(
        &mut e,
        vec![place(bidder, limit(Side::Buy, "bid", "0.01", "33900"))],
    );
    set_price(&mut e, "34000");
    assert_eq!(size(&e, long), Decimal::ZERO, "closed");
    assert_eq!(size(&e, bidder), d("0.01"), "the bid absorbed it");
    let v = e.view();
    assert!(v.trading.live_order_by_ref(long, "rest").is_none(), "ended");
    let rest = e.order_by_ref(long, "rest").unwrap();
    assert_eq!(
        (rest.status, rest.reason),
        (OrderStatus::Canceled, Some(EndReason::Liquidation))
    );
    let forced: Vec<_> = e.trades().iter().filter(|t| t.customer == long).collect();
    let last = forced.last().unwrap();
    assert_eq!(
        (last.kind, last.price, last.reference_id.clone()),
        (TradeKind::Liquidation, d("33900"), None)
    );
    let bid_side = e.trades().iter().rfind(|t| t.customer == bidder).unwrap();
    assert_eq!(
        bid_side.kind,
        TradeKind::Trade,
        "the resting side is an ordinary trade"
    );
    // 320 − 0.30 − 0.01 × 26 100 − 5 bps of 339 = 58.5305: nothing for insurance to cover.
    assert_eq!(total(&e, long), d("58.5305"));
    assert_eq!(states(&mut e, long)[0], MarginState::Liquidation);
    let locked = v.balances[&long][&Asset::Usdc].locked;
    assert_eq!(locked, Decimal::ZERO, "no margin left locked");
}

/// D10: what the book cannot absorb is closed at the mark against the opposite positions
/// in rank order: the more leveraged winner first, though another's profit is larger.
#[test]
fn without_depth_auto_deleveraging_takes_the_top_ranked_opposite_position_at_the_mark() {
    let (mut e, cs) = leveraged_long();
    let (long, seller, short2, buyer2) = (cs[0], cs[1], cs[2], cs[3]);
    deposit(&mut e, short2, "1000");
    deposit(&mut e, buyer2, "1000000");
    set_price(&mut e, "40000");
    cross(&mut e, short2, buyer2, "40000");
    set_price(&mut e, "34000");
    assert_eq!(size(&e, long), Decimal::ZERO);
    // short2: profit 6 000 / 40 000 = 0.15 × leverage 340 / 1 060; the seller: 0.43 × ~0.
    assert_eq!(
        size(&e, short2),
        Decimal::ZERO,
        "the top-ranked short is deleveraged"
    );
    assert_eq!(
        size(&e, seller),
        d("-0.01"),
        "the richer, unlevered short is not"
    );
    let adl: Vec<_> = e
        .trades()
        .iter()
        .filter(|t| t.kind == TradeKind::AutoDeleveraging)
        .collect();
    assert_eq!(adl.len(), 2, "both sides, one fill");
    assert!(adl.iter().all(|t| t.price == d("34000") && t.fee.is_zero()));
    assert!(adl.iter().any(|t| t.customer == short2) && adl.iter().any(|t| t.customer == long));
}

/// D10: a negative balance left after the close is covered by the insurance account, in a
/// `liquidation` row with no trade; the insurance balance shows the loss.
#[test]
fn insurance_covers_the_negative_balance_a_liquidation_leaves() {
    let (mut e, cs) = leveraged_long();
    let long = cs[0];
    set_price(&mut e, "25000");
    assert_eq!(size(&e, long), Decimal::ZERO);
    // Closed at the mark by auto-deleveraging: 320 − 0.30 − 0.01 × 35 000 = −30.30, covered.
    assert_eq!(total(&e, long), Decimal::ZERO);
    let cover = e
        .movements()
        .iter()
        .rfind(|m| m.customer == long)
        .unwrap()
        .clone();
    assert_eq!(
        (cover.kind, cover.amount),
        (MovementKind::Liquidation, d("30.30"))
    );
    let info = cover.trade.as_ref().unwrap();
    assert_eq!(
        (info.trade_code, info.realised_pnl, info.fee),
        (None, d("30.30"), d("0"))
    );
    let w = e.world_mut();
    let accounts = crate::money::store::all_accounts(w);
    let insurance = accounts[&AccountId::venue(VenueAccount::Insurance, Asset::Usdc)].total;
    assert_eq!(
        insurance,
        d("9999969.70"),
        "10 000 000 funded at genesis, 30.30 paid out"
    );
}

fn withdraw(e: &mut Engine, c: CustomerCode, usdc: &str, delay_ms: i64) -> crate::CommandResult {
    let cmd = Command::RequestTransfer(RequestTransfer {
        customer: c,
        kind: TransferKind::Withdrawal,
        asset: Asset::Usdc,
        amount: d(usdc),
        delay_ms,
    });
    run(e, vec![cmd]).remove(0)
}

/// D7, §3.2: a withdrawal is held to what leaves the open positions their initial margin
/// at the mark price with their unrealised PnL, besides the available balance (which counts
/// margin at entry and no unrealised loss): a losing account cannot withdraw itself into a
/// margin call, and the refusal says how much could go.
#[test]
fn a_withdrawal_that_would_leave_positions_short_of_initial_margin_at_the_mark_is_refused() {
    let (mut e, cs) = leveraged_long();
    let long = cs[0];
    // Available: 319.70 − 300 locked − 1.50 for the resting buy = 18.20.
    set_price(&mut e, "42000");
    // Leverage ratio (319.70 − 180) / 420 = 0.3326: normal, and 15 more out would call it.
    let refused = withdraw(&mut e, long, "15", 0).unwrap_err();
    assert_eq!(refused.code, perpsim_core::ErrorCode::InsufficientFunds);
    assert!(
        refused.message.contains("initial margin at the mark price")
            && refused.message.contains("at most 0 can be withdrawn"),
        "{refused}"
    );
    assert_eq!(total(&e, long), d("319.70"), "a refusal leaves no trace");
    // At 70 000 the position holds 350 at the mark less 100 of profit: 69.70 would be free,
    // the available balance still bounds it.
    set_price(&mut e, "70000");
    let over = withdraw(&mut e, long, "18.21", 0).unwrap_err();
    assert!(over.message.contains("available balance 18.20"), "{over}");
    assert!(withdraw(&mut e, long, "18.20", 0).is_ok());
    advance(&mut e, 1);
    assert_eq!(total(&e, long), d("301.50"));
    assert!(states(&mut e, long).is_empty(), "never called");
}

/// D10: a withdrawal accepted before a crash still completes, and the insurance cover of
/// the liquidation nets it: the account ends at zero, never below.
#[test]
fn a_pending_withdrawal_across_a_liquidation_is_covered_and_never_leaves_a_negative_balance() {
    let (mut e, cs) = leveraged_long();
    let long = cs[0];
    assert!(withdraw(&mut e, long, "18", 5_000).is_ok());
    set_price(&mut e, "25000");
    assert_eq!(size(&e, long), Decimal::ZERO);
    // Closed at the mark: 319.70 − 350 = −30.30, and 18 promised out: 48.30 covered.
    let v = e.view();
    let balance = v.balances[&long][&Asset::Usdc];
    assert_eq!((balance.total, balance.pending), (d("18.00"), d("18")));
    advance(&mut e, 10_000);
    assert_eq!(total(&e, long), Decimal::ZERO, "the withdrawal completed");
    let w = e.world_mut();
    let accounts = crate::money::store::all_accounts(w);
    let insurance = accounts[&AccountId::venue(VenueAccount::Insurance, Asset::Usdc)].total;
    assert_eq!(insurance, d("9999951.70"));
}

/// §4.2: a leverage change that would put an open position into margin call is refused.
#[test]
fn a_leverage_change_into_margin_call_is_refused() {
    let (mut e, cs) = leveraged_long();
    let long = cs[0];
    set_price(&mut e, "50000");
    // (320 − 100) / 500 = 0.44: normal at leverage 2 (0.30), a margin call at 1 (0.50).
    let r = run(
        &mut e,
        vec![Command::SetLeverage(SetLeverage {
            customer: long,
            leverage: 1,
        })],
    );
    let err = r[0].as_ref().unwrap_err();
    assert!(err.message.contains("margin call"), "{err}");
}

fn notices(e: &mut Engine, c: CustomerCode) -> Vec<(u32, Decimal)> {
    let w = e.world_mut();
    let n = w.resource::<Notifications>();
    n.0.iter()
        .filter(|n| n.customer == c)
        .map(|n| (n.threshold_pct, n.mark_price))
        .collect()
}

/// §3.3: a 25 % fall gives one notice at 20; a recovery and a fall to the same depth none;
/// 35 % gives 30; an increase starts a new baseline.
#[test]
fn depreciation_notices_the_highest_threshold_once_per_baseline() {
    let mut e = engine(5);
    let cs = funded(&mut e, 2, "1000000");
    let (long, seller) = (cs[0], cs[1]);
    ok(
        &mut e,
        vec![
            place(seller, limit(Side::Sell, "s", "0.02", "60000")),
            place(long, market(Side::Buy, "b", "0.01")),
        ],
    );
    set_price(&mut e, "45000");
    advance(&mut e, 60_000);
    assert_eq!(notices(&mut e, long), vec![(20, d("45000"))]);
    set_price(&mut e, "50000");
    advance(&mut e, 60_000);
    set_price(&mut e, "45000");
    advance(&mut e, 60_000);
    assert_eq!(notices(&mut e, long).len(), 1, "no repeat after a recovery");
    set_price(&mut e, "39000");
    advance(&mut e, 60_000);
    assert_eq!(notices(&mut e, long)[1], (30, d("39000")));
    // An increase (0.01 more from the seller's ask at 60 000) starts a new baseline: the
    // average stays 60 000, and the 35 % drop reaches 30 again, noticed afresh.
    ok(&mut e, vec![place(long, market(Side::Buy, "more", "0.01"))]);
    advance(&mut e, 60_000);
    assert_eq!(notices(&mut e, long)[2], (30, d("39000")));
    let w = e.world_mut();
    let n = w.resource::<Notifications>().0[0].clone();
    assert_eq!(n.avg_fill_price, d("60000"));
    assert!(
        n.mark_time <= n.created_at,
        "valued at a mark set before the evaluation"
    );
}

/// §2.2: a short depreciates when the price rises.
#[test]
fn a_short_is_noticed_when_the_price_rises() {
    let mut e = engine(6);
    let cs = funded(&mut e, 2, "1000000");
    let (short, buyer) = (cs[0], cs[1]);
    cross(&mut e, short, buyer, "60000");
    set_price(&mut e, "73000");
    advance(&mut e, 60_000);
    assert_eq!(notices(&mut e, short), vec![(20, d("73000"))]);
    assert!(notices(&mut e, buyer).is_empty(), "the long gained");
}

/// Replaying from a snapshot taken after any run of a volatile path (a margin call, two
/// liquidations, auto-deleveraging and an insurance cover) gives the uninterrupted future,
/// bit for bit: the journal's recovery never moves or loses a risk record.
#[test]
fn a_restore_after_any_run_of_a_liquidating_path_has_the_same_future() {
    let (mut e, cs) = leveraged_long();
    let (long, seller, short2, buyer2, buyer3) = (cs[0], cs[1], cs[2], cs[3], cs[4]);
    for (c, usdc) in [(short2, "300"), (buyer2, "1000000"), (buyer3, "250")] {
        deposit(&mut e, c, usdc);
    }
    let lever = |c| {
        Command::SetLeverage(SetLeverage {
            customer: c,
            leverage: 2,
        })
    };
    ok(&mut e, vec![lever(short2), lever(buyer3)]);
    type Step = Box<dyn Fn(&mut Engine)>;
    let price = |p: &'static str| -> Step { Box::new(move |e: &mut Engine| set_price(e, p)) };
    let steps: Vec<Step> = vec![
        price("50000"),
        price("38000"),
        price("40000"),
        Box::new(move |e: &mut Engine| cross(e, short2, buyer2, "40000")),
        price("34000"),
        Box::new(|e: &mut Engine| advance(e, 1_000)),
        Box::new(move |e: &mut Engine| cross(e, seller, buyer3, "34000")),
        price("45000"),
        price("11000"),
        Box::new(|e: &mut Engine| advance(e, 1_000)),
    ];
    let mut snapshots = Vec::new();
    for step in &steps {
        snapshots.push(e.state().encode());
        step(&mut e);
    }
    let liquidated: Vec<_> = [long, buyer3]
        .into_iter()
        .map(|c| states(&mut e, c).contains(&MarginState::Liquidation))
        .collect();
    assert_eq!(liquidated, [true, true], "the path liquidates both");
    assert_eq!(
        states(&mut e, long)[1..],
        [MarginState::Liquidation, MarginState::Normal],
        "back to normal in the run after the liquidation"
    );
    let log = |e: &mut Engine| e.world_mut().resource::<RiskLog>().clone();
    let expected = (log(&mut e), e.state_hash());
    for (k, bytes) in snapshots.iter().enumerate() {
        let mut restored = Engine::restore(&crate::EngineState::decode(bytes).unwrap());
        steps[k..].iter().for_each(|step| step(&mut restored));
        assert_eq!(
            (log(&mut restored), restored.state_hash()),
            expected,
            "restored before step {k}"
        );
    }
}

/// Issue 37: an engine whose notices and margin state changes are projected hands each out
/// once, in order, as the engine that holds them all made it, and hashes as that engine
/// does; its snapshot restores to the same hash.
#[test]
fn a_projecting_engine_hands_out_its_notices_and_margin_changes_and_hashes_as_one_that_holds_them()
{
    let (mut holding, _) = leveraged_long();
    let (mut projecting, _) = leveraged_long();
    let start = |e: &mut Engine| {
        let w = e.world_mut();
        (
            w.resource::<Notifications>().0.len(),
            w.resource::<RiskLog>().0.len(),
        )
    };
    let from = start(&mut holding);
    projecting.set_projecting(true);
    let mut handed = crate::records::history::HandedHistory::default();
    let price = |p: &str| {
        Command::SetInstrumentPrice(SetInstrumentPrice {
            symbol: BTC.into(),
            index_price: d(p),
            mark_price: d(p),
        })
    };
    for p in ["50000", "45000", "38000", "40000", "11000"] {
        for cmds in [vec![price(p)], Vec::new()] {
            let at = now(&holding).plus_millis(if cmds.is_empty() { 60_000 } else { 0 });
            let cmds = match cmds.is_empty() {
                true => vec![Command::AdvanceClock(AdvanceClock { to: at })],
                false => cmds,
            };
            holding.tick(now(&holding), cmds.clone());
            let mut out = projecting.tick(now(&projecting), cmds);
            handed.append(&mut out.history);
        }
    }
    let w = holding.world_mut();
    let notices: Vec<_> = w
        .resource::<Notifications>()
        .0
        .iter_from(from.0)
        .cloned()
        .collect();
    let margin: Vec<_> = w
        .resource::<RiskLog>()
        .0
        .iter_from(from.1)
        .cloned()
        .collect();
    assert!(
        !notices.is_empty() && !margin.is_empty(),
        "the path notices and calls"
    );
    assert_eq!(handed.notices.iter().cloned().collect::<Vec<_>>(), notices);
    assert_eq!(handed.margin.iter().cloned().collect::<Vec<_>>(), margin);
    assert_eq!(projecting.state_hash(), holding.state_hash());
    let restored =
        Engine::restore(&crate::EngineState::decode(&projecting.encode_state()).unwrap());
    assert_eq!(restored.state_hash(), holding.state_hash());
}

/// D10's safe box in fixed point (`margin::safe_box_fixed`, what the pass files for a slot of
/// exact figures) is never wider than the exact bound the decimal box shrinks from, and no
/// narrower than the decimal box by more than the last decimal it rounds to: both keep every
/// threshold uncrossed inside, so the pass judges the same states whichever it files.
#[test]
fn the_fixed_point_safe_box_is_the_decimal_one_without_its_shrinking_d10() {
    use super::margin::{half_decimal, safe_box, safe_box_fixed};
    use crate::positions::MarginRate;
    use perpsim_core::fixed;
    let mut rng = perpsim_core::rng::SimRng::from_seed(11);
    let mut draw = |below: u64| rng.next_u64() % below;
    let (mut compared, mut zero) = (0, 0);
    for _ in 0..20_000 {
        let rate = MarginRate::of_leverage(1 + draw(2) as u32);
        let held = 1 + draw(4) as usize;
        let sizes: Vec<(u32, Decimal)> = (0..held)
            .map(|m| {
                let size = Decimal::new(draw(2_000_000) as i64 - 1_000_000, draw(7) as u32);
                (m as u32, size)
            })
            .collect();
        let notional = Decimal::new(draw(1 << 36) as i64, draw(9) as u32);
        // Some on a threshold or a hair above it: no budget, a closed box.
        let equity = match draw(8) {
            0 => rate.maintenance * notional,
            1 => rate.liquidation * notional + Decimal::new(1, 10),
            _ => Decimal::new(draw(1 << 36) as i64 - (1 << 34), draw(11) as u32),
        };
        let exact = (
            fixed::from_decimal(equity).unwrap(),
            fixed::from_decimal(notional).unwrap(),
        );
        let (Some(fast), Some(slow)) = (
            safe_box_fixed(exact, rate, &sizes),
            safe_box(equity, notional, rate, &sizes),
        ) else {
            panic!("figures this small fit both: {equity} {notional} {sizes:?}");
        };
        for (f, d) in fast.map(half_decimal).iter().zip(&slow).take(held) {
            if *d == Decimal::MAX || d.is_zero() {
                assert_eq!(f, d, "the same markets unbounded or closed: {sizes:?}");
                zero += usize::from(d.is_zero());
                continue;
            }
            // The decimal box is the exact bound less a part in 10⁹ (and its 28 digits'
            // rounding); the fixed one the exact bound rounded down to 12 decimals.
            let exact_above = *d + *d * Decimal::new(2, 9);
            assert!(*f <= exact_above, "wider than the bound: {f} against {d}");
            assert!(
                *f + Decimal::new(1, 12) >= *d,
                "narrower than the rounding: {f} against {d}"
            );
            compared += 1;
        }
    }
    assert!(
        compared > 10_000 && zero > 100,
        "both kinds drawn: {compared} {zero}"
    );
}

/// A slot's safe box is filed as keys worked out in integers (`margin::keys_around`, with
/// `margin::width`'s one division where the digits allow): they are the keys of the decimal
/// interval, end for end, so the pass wakes exactly the slots it woke in decimals (D10).
#[test]
fn a_safe_boxs_keys_in_integers_are_the_decimal_intervals_keys_d10() {
    use super::margin::{UNBOUNDED, around, half_decimal, inner_keys, keys_around, width};
    let mut rng = perpsim_core::rng::SimRng::from_seed(17);
    let mut draw = |below: u64| rng.next_u64() % below;
    let wide = i128::from(i64::MAX);
    let edges = [
        0,
        1,
        999,
        1_000,
        1_001,
        UNBOUNDED,
        10i128.pow(27),
        wide - 7_000,
        wide + 1,
    ];
    for k in 0..50_000 {
        let mark = match draw(4) {
            0 => Decimal::new(draw(1 << 40) as i64, draw(29) as u32),
            _ => Decimal::new(draw(10_000_000) as i64, draw(6) as u32),
        };
        let half = match k % 5 {
            0 => edges[k / 5 % edges.len()],
            _ => width(
                draw(1 << 62) as i128 * draw(1 << 40) as i128,
                1 + draw(1 << 50) as i128,
            ),
        };
        let decimal = inner_keys(around(mark, half_decimal(half)));
        assert_eq!(keys_around(mark, half), decimal, "{mark} ± {half}");
    }
    // The one division is the whole part's and the remainder's, and caps alike.
    let two = |budget: i128, slope: i128| {
        let unit = 10i128.pow(12);
        let (whole, rest) = (budget / slope, budget % slope);
        match whole >= 1_000_000_000_000_000 {
            true => 1_000_000_000_000_000 * unit,
            false => whole * unit + rest * unit / slope,
        }
    };
    for _ in 0..50_000 {
        let budget = draw(1 << 63) as i128 * draw(1 << 40) as i128 + 1;
        let slope = (draw(1 << 63) as i128 >> draw(63)) + 1;
        assert_eq!(
            width(budget, slope),
            two(budget, slope),
            "{budget} / {slope}"
        );
    }
    // A slope past the remainder's digits: scaled down by tenths first, then the same.
    let unit = 10i128.pow(12);
    for _ in 0..50_000 {
        let budget = draw(1 << 63) as i128 * draw(1 << 63) as i128 + 1;
        let slope = ((draw(1 << 63) as i128) << 30) + (1 << 88);
        let (mut b, mut s) = (budget, slope);
        while s > i128::MAX / unit {
            (b, s) = (b / 10, s / 10 + 1);
        }
        assert_eq!(width(budget, slope), two(b, s), "{budget} / {slope}");
    }
}
