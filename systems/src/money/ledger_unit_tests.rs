//! The ledger's bookings on their own, over a plain map of balances: deposits, withdrawals,
//! the transfer switch and the invariants (D7, §3.2).

use super::*;
use perpsim_core::Uuid;

fn who() -> (CustomerCode, BrokerCode) {
    (
        CustomerCode(Uuid::from_u128(1)),
        BrokerCode(Uuid::from_u128(2)),
    )
}

fn d(s: &str) -> Decimal {
    s.parse().unwrap()
}

/// A new ledger with the venue's accounts, a seeded RNG and the instant the tests book at.
fn fresh() -> (Ledger, BTreeMap<AccountId, Balance>, SimRng, Timestamp) {
    (
        Ledger::new(),
        venue_accounts(),
        SimRng::from_seed(1),
        Timestamp::from_millis(1_000),
    )
}

#[test]
fn a_deposit_books_only_when_completed_and_keeps_its_code() {
    let (mut l, mut a, mut rng, t) = fresh();
    let (code, seq) = l
        .request_transfer(
            &mut Books {
                accounts: &mut a,
                rng: &mut rng,
                now: t,
            },
            who(),
            (MovementKind::Deposit, Decimal::ZERO),
            Asset::Usdc,
            d("100.5"),
        )
        .map(|m| (m.code, m.seq))
        .unwrap();
    let id = AccountId::customer(who().0, Asset::Usdc);
    assert_eq!(
        a.get(&id).unwrap().total,
        Decimal::ZERO,
        "pending deposits are not money yet"
    );
    let m = l
        .complete_transfer(&mut a, seq, t.plus_millis(1_000))
        .unwrap();
    assert_eq!(
        (m.code, m.status, m.balance_after),
        (code, MovementStatus::Completed, Some(d("100.5")))
    );
    assert_eq!(a.get(&id).unwrap().total, d("100.5"));
    assert!(
        l.complete_transfer(&mut a, seq, t).is_err(),
        "a completed transfer cannot complete again"
    );
    l.check_invariants(a.iter()).unwrap();
}

#[test]
fn a_withdrawal_is_held_in_pending_and_refused_beyond_available() {
    let (mut l, mut a, mut rng, t) = fresh();
    let dep = l
        .request_transfer(
            &mut Books {
                accounts: &mut a,
                rng: &mut rng,
                now: t,
            },
            who(),
            (MovementKind::Deposit, Decimal::ZERO),
            Asset::Usdt,
            d("10"),
        )
        .unwrap()
        .seq;
    l.complete_transfer(&mut a, dep, t).unwrap();
    let w = l
        .request_transfer(
            &mut Books {
                accounts: &mut a,
                rng: &mut rng,
                now: t,
            },
            who(),
            (MovementKind::Withdrawal, Decimal::ZERO),
            Asset::Usdt,
            d("7"),
        )
        .unwrap()
        .code;
    let id = AccountId::customer(who().0, Asset::Usdt);
    let b = *a.get(&id).unwrap();
    assert_eq!(
        (b.total, b.pending, b.available()),
        (d("10"), d("7"), d("3"))
    );
    let err = l
        .request_transfer(
            &mut Books {
                accounts: &mut a,
                rng: &mut rng,
                now: t,
            },
            who(),
            (MovementKind::Withdrawal, Decimal::ZERO),
            Asset::Usdt,
            d("3.0000000001"),
        )
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::InsufficientFunds);
    l.cancel_transfer(&mut a, w, t).unwrap();
    assert_eq!(a.get(&id).unwrap().available(), d("10"));
    let w = l
        .request_transfer(
            &mut Books {
                accounts: &mut a,
                rng: &mut rng,
                now: t,
            },
            who(),
            (MovementKind::Withdrawal, Decimal::ZERO),
            Asset::Usdt,
            d("10"),
        )
        .unwrap()
        .seq;
    l.complete_transfer(&mut a, w, t).unwrap();
    assert_eq!(
        *a.get(&id).unwrap(),
        Balance {
            as_of: t,
            ..Balance::default()
        }
    );
    assert_eq!(
        l.flows[&Asset::Usdt],
        Flows {
            deposited: d("10"),
            withdrawn: d("10"),
            capital: d("0"),
        }
    );
    l.check_invariants(a.iter()).unwrap();
}

#[test]
fn the_switch_refuses_transfers_with_nothing_booked() {
    let (mut l, mut a, mut rng, t) = fresh();
    l.set_transfers_available(false);
    let err = l
        .request_transfer(
            &mut Books {
                accounts: &mut a,
                rng: &mut rng,
                now: t,
            },
            who(),
            (MovementKind::Deposit, Decimal::ZERO),
            Asset::Usdc,
            d("1"),
        )
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::ExchangeUnavailable);
    assert!(l.movements().is_empty());
}

#[test]
fn invariants_catch_money_that_appears_from_nowhere() {
    let (l, mut a) = (Ledger::new(), venue_accounts());
    a.get_mut(&AccountId::venue(VenueAccount::Fees, Asset::Usdc))
        .unwrap()
        .total = d("0.01");
    assert!(
        l.check_invariants(a.iter())
            .unwrap_err()
            .contains("deposits + capital − withdrawals")
    );
}

/// D7: the fees account never goes below zero through trading; a ledger that paid out more
/// rebates than it collected fails the invariants even when money still sums.
#[test]
fn invariants_catch_a_fees_account_below_zero() {
    let (l, mut a) = (Ledger::new(), venue_accounts());
    a.get_mut(&AccountId::venue(VenueAccount::Fees, Asset::Usdc))
        .unwrap()
        .total = d("-1");
    a.get_mut(&AccountId::venue(VenueAccount::Clearing, Asset::Usdc))
        .unwrap()
        .total = d("1");
    let violation = l.check_invariants(a.iter()).unwrap_err();
    assert!(
        violation.contains("the fees account holds -1"),
        "{violation}"
    );
}

fn funding_row(customer: u128, amount: &str) -> CustomerSide {
    CustomerSide {
        customer: (
            CustomerCode(Uuid::from_u128(customer)),
            BrokerCode(Uuid::from_u128(2)),
        ),
        asset: Asset::Usdc,
        kind: MovementKind::Funding,
        amount: d(amount),
        locked_delta: Decimal::ZERO,
    }
}

/// Issue 27: a pass's clearing side is posted once, when its batch closes — the same
/// balances, `as_of` included, as booking each row against clearing in turn, even when
/// the rows net to nothing (longs paid exactly what shorts received).
#[test]
fn a_venue_batch_posts_a_pass_clearing_side_once_and_touches_it_even_at_zero() {
    let (mut l, mut a, mut rng, t) = fresh();
    let info = Arc::new(PeriodicInfo {
        symbol: "BTC-USDC-PERP".into(),
        mark_price: d("60000"),
        funding_rate: Some(d("0.0001")),
    });
    let mut batch = l.open_venue_batch();
    for (customer, amount) in [(1, "-6.5"), (3, "6.5")] {
        let mut books = Books {
            accounts: &mut a,
            rng: &mut rng,
            now: t,
        };
        let booked = l.book_periodic(&mut books, funding_row(customer, amount), &info, &mut batch);
        assert!(booked.is_some());
    }
    l.close_venue_batch(&mut a, batch, t);
    let clearing = &a[&AccountId::venue(VenueAccount::Clearing, Asset::Usdc)];
    assert_eq!((clearing.total, clearing.as_of), (Decimal::ZERO, t));
    let payer = &a[&AccountId::customer(CustomerCode(Uuid::from_u128(1)), Asset::Usdc)];
    assert_eq!(payer.total, d("-6.5"));
    l.assert_conserved();
}

/// Its rows would not net to zero: a batch dropped unclosed stops the engine.
#[test]
#[should_panic(expected = "dropped unclosed")]
fn a_venue_batch_dropped_unclosed_panics() {
    let (mut l, mut a, mut rng, t) = fresh();
    let info = Arc::new(PeriodicInfo {
        symbol: "BTC-USDC-PERP".into(),
        mark_price: d("60000"),
        funding_rate: None,
    });
    let mut batch = l.open_venue_batch();
    let mut books = Books {
        accounts: &mut a,
        rng: &mut rng,
        now: t,
    };
    l.book_periodic(&mut books, funding_row(1, "1"), &info, &mut batch);
    drop(batch);
}

/// Issue 36: a sweep's fills owe their clearing and fees sides to one batch — nothing is
/// posted to the venue until it closes, then the sums booking row by row gave, in value and
/// in scale (an addition never lowers it) — and money still sums (D7).
#[test]
fn a_venue_batch_posts_a_sweeps_clearing_and_fees_once_with_the_row_by_row_sums() {
    let (mut l, mut a, mut rng, t) = fresh();
    let venue = |a: &BTreeMap<AccountId, Balance>, v| a[&AccountId::venue(v, Asset::Usdc)].total;
    let mut batch = l.open_venue_batch();
    for (customer, pnl, fee) in [(1, "12.5", "0.0600000000"), (3, "-12.5", "0.02")] {
        let info = TradeInfo {
            realised_pnl: d(pnl),
            fee: d(fee),
            reference_id: None,
            symbol: "BTC-USDC-PERP".into(),
            trade_code: None,
        };
        let mut books = Books {
            accounts: &mut a,
            rng: &mut rng,
            now: t,
        };
        let who = (
            CustomerCode(Uuid::from_u128(customer)),
            BrokerCode(Uuid::from_u128(2)),
        );
        let kind = (Asset::Usdc, MovementKind::Trade);
        l.book_trade(&mut books, who, kind, Decimal::ZERO, info, &mut batch);
    }
    assert_eq!(
        venue(&a, VenueAccount::Fees),
        Decimal::ZERO,
        "owed until it closes"
    );
    l.close_venue_batch(&mut a, batch, t);
    let fees = venue(&a, VenueAccount::Fees);
    assert_eq!((fees, fees.scale()), (d("0.08"), 10));
    assert_eq!(venue(&a, VenueAccount::Clearing), Decimal::ZERO);
    let payer = &a[&AccountId::customer(CustomerCode(Uuid::from_u128(3)), Asset::Usdc)];
    assert_eq!(payer.total, d("-12.52"));
    l.assert_conserved();
    l.check_invariants(a.iter()).unwrap();
}
