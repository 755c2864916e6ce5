//! The living market on the manual clock (D10; issue 12 items 1, 2).

use perpsim_core::order::{OrderStatus, Side};
use perpsim_core::time::{HOUR_MS, SECOND_MS};

use super::feed::step;
use crate::Engine;
use crate::records::simulation::MARKET_MAKER;
use crate::testkit::*;

fn index_prices(e: &Engine) -> Vec<perpsim_core::Decimal> {
    let v = e.view();
    v.instruments.values().map(|i| i.index_price).collect()
}

/// D10: the maker quotes its levels on both sides of every index, and a market order fills
/// against it.
#[test]
fn the_market_maker_quotes_both_sides_of_every_instrument_and_a_market_order_fills() {
    let mut e = living(1);
    let v = e.view();
    for m in &v.trading.markets {
        let index = v.instruments[&m.symbol].index_price;
        let (bid, ask) = (m.best_bid.unwrap(), m.best_ask.unwrap());
        assert!(
            bid < index && index < ask,
            "{}: {bid} {index} {ask}",
            m.symbol
        );
    }
    let quotes = v.trading.open_orders.get(&MARKET_MAKER).unwrap();
    assert_eq!(
        quotes.len(),
        4 * 2 * 10,
        "ten levels a side, four instruments"
    );
    let best_ask = v.trading.markets[0].best_ask.unwrap();
    let c = funded(&mut e, 1, "100000")[0];
    let r = run(&mut e, vec![place(c, market(Side::Buy, "m1", "0.1"))]);
    let o = order(&r[0]);
    assert_eq!(o.status, OrderStatus::Filled);
    assert_eq!(o.filled_quote, best_ask * d("0.1"));
}

/// D10: the price path is the seed's; another seed walks another path.
#[test]
fn the_same_seed_gives_the_same_price_path_and_another_seed_another() {
    let path = |seed| {
        let mut e = living(seed);
        (0..5)
            .map(|_| {
                advance(&mut e, 60 * SECOND_MS);
                index_prices(&e)
            })
            .collect::<Vec<_>>()
    };
    let (a, b, c) = (path(7), path(7), path(8));
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_ne!(a[0], a[4], "the walk moves");
}

/// D3: one advance of an hour runs the 3 600 steps (and the maker's re-quotes, the premium
/// samples and the funding hour) exactly as 3 600 advances of a second do.
#[test]
fn one_advance_of_an_hour_equals_3600_advances_of_a_second() {
    let mut once = living(3);
    advance(&mut once, HOUR_MS);
    let mut stepwise = living(3);
    for _ in 0..3_600 {
        advance(&mut stepwise, SECOND_MS);
    }
    let (mut a, mut b) = (once.state(), stepwise.state());
    assert_ne!(a.counters, b.counters, "different tick counts");
    a.counters = Default::default();
    b.counters = Default::default();
    assert_eq!(a.market, b.market);
    assert_eq!(a.funding, b.funding);
    assert_eq!(a.scheduler, b.scheduler);
    assert_eq!(a.instruments, b.instruments);
    assert_eq!(a.rng, b.rng);
    assert_eq!(a.ledger, b.ledger);
    assert_eq!(a.exchange, b.exchange);
    assert_eq!(a.hash(), b.hash());
    assert_eq!(a.held.funding.len(), 4, "the hour settled every market");
    assert!(
        once.trades().is_empty(),
        "the maker never meets its own quotes"
    );
}

/// D10: the mark keeps its distance to the index; an index the admin API moved restarts
/// the walk from there.
#[test]
fn a_step_keeps_the_basis_and_restarts_from_a_moved_index() {
    let tick = d("0.1");
    let (level, index, mark) = step(d("100.04"), d("100.0"), d("101.0"), d("1.001"), tick);
    assert_eq!(
        (level, index, mark),
        (d("100.14004"), d("100.1"), d("101.1"))
    );
    // The admin API set the index to 200: the level restarts there.
    let (level, index, _) = step(d("100.04"), d("200.0"), d("200.0"), d("1.0005"), tick);
    assert_eq!((level, index), (d("200.1"), d("200.1")));
}

/// D10: a re-quote skipped because neither the ladder nor a quote moved ends where the full
/// re-quote ends, and so does one that trusts its memory of its quotes' levels and reads
/// only the quotes the desk names as changed since. A restored engine knows nothing
/// of its last re-quote and re-quotes in full, reading every quote, so an engine restored
/// every second, with market orders eating into the maker's quotes, must stay equal to the
/// one that ran on.
#[test]
fn a_requote_skipped_when_nothing_moved_ends_where_a_full_requote_ends() {
    let mut on = living(11);
    let c = funded(&mut on, 1, "1000000")[0];
    let mut restored = Engine::restore(&on.state());
    for second in 0..600 {
        if second % 7 == 0 {
            let side = [Side::Buy, Side::Sell][second / 7 % 2];
            let entry = market(side, &format!("m{second}"), "0.3");
            let a = run(&mut on, vec![place(c, entry.clone())]);
            let b = run(&mut restored, vec![place(c, entry)]);
            assert_eq!(a, b);
        }
        advance(&mut on, SECOND_MS);
        advance(&mut restored, SECOND_MS);
        restored = Engine::restore(&restored.state());
    }
    let (a, b) = (on.state(), restored.state());
    assert!(a.held.trades.len() > 80, "the orders traded");
    assert_eq!(a.market, b.market);
    assert_eq!(a.held.trades, b.held.trades);
    assert_eq!(a.hash(), b.hash(), "orders, books, ledger and RNG alike");
}
