//! What a broker's key must not be able to do through the engine (issue 23): mint money with
//! rebates (D7), grow a customer's open orders or a broker's customers without bound (D4),
//! or place an order for less than one lot.

use perpsim_core::entry::OrderEntry;
use perpsim_core::instrument::Asset;
use perpsim_core::limits::VenueLimits;
use perpsim_core::order::{OrderStatus, OrderType, Side, TimeInForce};
use perpsim_core::{Decimal, ErrorCode};

use crate::command::{AmendOrder, CancelOrder, CreateCustomer, SetFees, SetLimits};
use crate::records::money::VenueAccount;
use crate::testkit::{d, engine, entry, funded, limit, market, order, place, run};
use crate::{Command, CommandResult, Engine, Outcome};

fn refusal(r: &CommandResult) -> (ErrorCode, &str) {
    let e = r.as_ref().expect_err("expected a refusal");
    (e.code, e.message.as_str())
}

fn set_limits(e: &mut Engine, max_open_orders: u32, max_customers: u32) {
    let limits = VenueLimits {
        max_open_orders,
        max_customers,
    };
    let r = run(e, vec![Command::SetLimits(SetLimits { limits })]);
    assert_eq!(r[0], Ok(Outcome::Limits(limits)));
}

/// D7: two customers of one broker with the largest rebates trading back and forth cannot
/// take money out of the venue: each fill's rebate is at most its taker fee, so the fees
/// account never goes below zero and nobody ends richer than the trades made them.
#[test]
fn rebates_cannot_mint_money_by_trading_customers_against_each_other_d7() {
    let mut e = engine(31);
    let c = funded(&mut e, 2, "100000");
    let rebate = |customer| {
        Command::SetFees(SetFees {
            customer,
            symbol: None,
            maker_bps: Some(d("-10000")),
            // The API refuses a negative taker fee; the engine applies none even if one came.
            taker_bps: Some(d("-10000")),
        })
    };
    run(&mut e, vec![rebate(c[0]), rebate(c[1])]);
    // 1 BTC at 60 000 back and forth twice, each side making in turn.
    for round in 0..4 {
        let (maker, taker) = if round % 2 == 0 {
            (c[0], c[1])
        } else {
            (c[1], c[0])
        };
        let r = run(
            &mut e,
            vec![
                place(maker, limit(Side::Sell, &format!("m{round}"), "1", "60000")),
                place(taker, market(Side::Buy, &format!("t{round}"), "1")),
            ],
        );
        assert_eq!(order(&r[1]).status, OrderStatus::Filled);
    }
    let v = e.view();
    for trade in e.trades().iter() {
        assert_eq!(
            trade.fee,
            Decimal::ZERO,
            "a rebate is capped at a zero taker fee"
        );
    }
    let total: Decimal = c.iter().map(|c| v.balances[c][&Asset::Usdc].total).sum();
    assert_eq!(total, d("200000"), "no money from nothing");
    assert!(v.venue[&(VenueAccount::Fees, Asset::Usdc)].total >= Decimal::ZERO);
}

/// D7: a maker's rebate is paid out of the same fill's taker fee, and the fee actually
/// applied is what the trade record shows.
#[test]
fn a_makers_rebate_is_cut_to_the_taker_fee_of_its_fill_d7() {
    let mut e = engine(32);
    let c = funded(&mut e, 2, "100000");
    run(
        &mut e,
        vec![Command::SetFees(SetFees {
            customer: c[0],
            symbol: None,
            maker_bps: Some(d("-8")),
            taker_bps: None,
        })],
    );
    run(
        &mut e,
        vec![
            place(c[0], limit(Side::Sell, "m", "1", "60000")),
            place(c[1], market(Side::Buy, "t", "1")),
        ],
    );
    let v = e.view();
    let fees: Vec<(Decimal, bool)> = e
        .trades()
        .iter()
        .map(|t| (t.fee, t.customer == c[0]))
        .collect();
    // Taker 5 bps of 60 000 = 30; the maker's 8 bps rebate (48) is cut to 30.
    assert_eq!(fees, vec![(d("30"), false), (d("-30"), true)]);
    assert_eq!(v.venue[&(VenueAccount::Fees, Asset::Usdc)].total, d("0"));
}

/// D4: past the bound a new order that could stay open is refused naming it; orders that
/// end in their own request still pass, and a cancel makes room again.
#[test]
fn a_customer_holds_at_most_the_bound_of_open_orders_d4() {
    let mut e = engine(33);
    let c = funded(&mut e, 2, "1000000");
    set_limits(&mut e, 3, 100);
    let resting = |i: usize| place(c[0], limit(Side::Buy, &format!("r{i}"), "0.001", "50000"));
    let r = run(&mut e, (0..4).map(resting).collect());
    assert!(r[..3].iter().all(|r| order(r).status == OrderStatus::Open));
    let (code, message) = refusal(&r[3]);
    assert_eq!(code, ErrorCode::OrderRejected);
    assert!(message.contains("max open orders 3"), "{message}");
    let stop = OrderEntry {
        amount: Some(d("0.001")),
        trigger_price: Some(d("70000")),
        ..entry(Side::Buy, OrderType::StopLoss, "s")
    };
    assert_eq!(
        refusal(&run(&mut e, vec![place(c[0], stop)])[0]).0,
        ErrorCode::OrderRejected,
        "a conditional order waits open too"
    );
    // Another customer is not affected; an IOC of the full one ends in its request.
    run(
        &mut e,
        vec![place(c[1], limit(Side::Sell, "ask", "1", "60000"))],
    );
    let ioc = OrderEntry {
        time_in_force: Some(TimeInForce::Ioc),
        ..limit(Side::Buy, "ioc", "0.001", "60000")
    };
    let r = run(
        &mut e,
        vec![
            place(c[0], ioc),
            place(c[0], market(Side::Buy, "mk", "0.001")),
        ],
    );
    assert!(r.iter().all(|r| order(r).status == OrderStatus::Filled));
    let r = run(
        &mut e,
        vec![
            Command::CancelOrder(CancelOrder {
                customer: c[0],
                reference_id: "r0".into(),
            }),
            resting(9),
        ],
    );
    assert_eq!(
        order(&r[1]).status,
        OrderStatus::Open,
        "a cancel makes room"
    );
}

/// D4: a broker creates at most the bound of customers; the bound is journaled, so a replay
/// from the commands refuses the same customer.
#[test]
fn a_broker_holds_at_most_the_bound_of_customers_d4() {
    let mut e = engine(34);
    let c = funded(&mut e, 2, "1");
    set_limits(&mut e, 10, 2);
    let broker = e.view().customers[&c[0]].broker;
    let r = run(
        &mut e,
        vec![Command::CreateCustomer(CreateCustomer {
            broker,
            external_id: None,
        })],
    );
    let (code, message) = refusal(&r[0]);
    assert_eq!(code, ErrorCode::Validation);
    assert!(message.contains("max customers 2"), "{message}");
    let restored = Engine::restore(&e.state());
    assert_eq!(restored.limits().max_customers, 2, "the bound is state");
    assert_eq!(restored.state_hash(), e.state_hash());
}

/// Issue 23: a cash order whose cash buys less than one lot is refused naming cash_amount,
/// whatever the book; one that buys a lot is taken.
#[test]
fn a_cash_order_for_less_than_one_lot_is_refused() {
    let mut e = engine(35);
    let c = funded(&mut e, 2, "1000000");
    let cash = |amount: &str, reference: &str| OrderEntry {
        cash_amount: Some(d(amount)),
        ..entry(Side::Buy, OrderType::Market, reference)
    };
    // An empty book: one lot at the mark (60 000 × 0.0001 = 6).
    let r = run(
        &mut e,
        vec![place(c[1], cash("0.0000000000000000000000000001", "a"))],
    );
    let (code, message) = refusal(&r[0]);
    assert_eq!(code, ErrorCode::OrderRejected);
    assert!(
        message.contains("cash_amount") && message.contains("one lot"),
        "{message}"
    );
    run(
        &mut e,
        vec![place(c[0], limit(Side::Sell, "ask", "1", "61000"))],
    );
    // 6.05 buys a lot at the mark but not at the best ask (6.10).
    assert_eq!(
        refusal(&run(&mut e, vec![place(c[1], cash("6.05", "b"))])[0]).0,
        ErrorCode::OrderRejected
    );
    let r = run(&mut e, vec![place(c[1], cash("6.1", "c"))]);
    assert_eq!(
        (order(&r[0]).status, order(&r[0]).amount),
        (OrderStatus::Filled, d("0.0001"))
    );
}

fn timers(e: &mut Engine) -> usize {
    e.world_mut().resource::<crate::clock::Scheduler>().len()
}

/// Issue 23: a GTD order holds one timer at most. Placing and cancelling GTD orders with a
/// far expiry, or amending one's expiry again and again, leaves no timers behind (on main
/// each left one, so a key could fill the scheduler to its bound and stop the engine).
#[test]
fn gtd_orders_leave_no_timers_behind_when_they_end_or_move_their_expiry() {
    let mut e = engine(36);
    let c = funded(&mut e, 1, "1000000");
    let base = timers(&mut e);
    let far = crate::testkit::now(&e).plus_millis(365 * 86_400_000);
    let gtd = |reference: &str| OrderEntry {
        time_in_force: Some(TimeInForce::Gtd),
        expire_time: Some(far),
        ..limit(Side::Buy, reference, "0.001", "50000")
    };
    for i in 0..50 {
        let reference = format!("g{i}");
        run(&mut e, vec![place(c[0], gtd(&reference))]);
        assert_eq!(timers(&mut e), base + 1);
        run(
            &mut e,
            vec![Command::CancelOrder(CancelOrder {
                customer: c[0],
                reference_id: reference,
            })],
        );
        assert_eq!(timers(&mut e), base, "the cancel took its timer");
    }
    run(&mut e, vec![place(c[0], gtd("kept"))]);
    for i in 1..50 {
        let amend = perpsim_core::entry::Amend {
            expire_time: Some(far.plus_millis(i)),
            ..Default::default()
        };
        let r = run(
            &mut e,
            vec![Command::AmendOrder(AmendOrder {
                customer: c[0],
                reference_id: "kept".into(),
                amend,
            })],
        );
        assert!(r[0].is_ok(), "{r:?}");
    }
    assert_eq!(timers(&mut e), base + 1, "one timer for the one GTD order");
}
