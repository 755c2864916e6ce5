//! The recorded book as the liquidity customers meet (issue 39 item 1, D11).

use perpsim_core::ErrorCode;
use perpsim_core::order::{OrderStatus, Side};
use perpsim_core::time::SECOND_MS;

use crate::command::{BookLevel, Command, PrintRecordedTrade, SetRecordedBook};
use crate::records::simulation::MARKET_MAKER;
use crate::testkit::*;
use crate::{CommandResult, Engine};

fn levels(levels: &[(&str, &str)]) -> Vec<BookLevel> {
    let level = |&(price, amount): &(&str, &str)| BookLevel {
        price: d(price),
        amount: d(amount),
    };
    levels.iter().map(level).collect()
}

/// BTC's recorded book set to `bids` and `asks`, (price, amount) best first.
fn set_book(e: &mut Engine, bids: &[(&str, &str)], asks: &[(&str, &str)]) -> CommandResult {
    let book = SetRecordedBook {
        symbol: BTC.into(),
        bids: levels(bids),
        asks: levels(asks),
    };
    run(e, vec![Command::SetRecordedBook(book)]).remove(0)
}

/// BTC's book as the read view shows it: (price, amount) per side, best first.
fn book(e: &Engine) -> [Vec<(String, String)>; 2] {
    let depth = &e.view().trading.books[0];
    let side = |levels: &[crate::records::depth::Level]| {
        let level = |l: &crate::records::depth::Level| {
            (
                l.price.normalize().to_string(),
                l.amount.normalize().to_string(),
            )
        };
        levels.iter().map(level).collect()
    };
    [side(&depth.bids), side(&depth.asks)]
}

fn owned(levels: &[(&str, &str)]) -> Vec<(String, String)> {
    let level = |&(p, a): &(&str, &str)| (p.to_owned(), a.to_owned());
    levels.iter().map(level).collect()
}

/// A side's levels as written: (price, amount), best first.
type Levels<'a> = &'a [(&'a str, &'a str)];

const BIDS: &[(&str, &str)] = &[("59990.5", "0.25"), ("59990", "1.5"), ("59980", "0.75")];
const ASKS: &[(&str, &str)] = &[("59991", "0.4"), ("59992.5", "0.6")];

/// D11: the maker quotes the recorded levels exactly — its ladder gone —, and a customer's
/// market order sweeps them at the recorded prices; the maker quotes them again whole in the
/// same run (no market impact: the recording is what the market does).
#[test]
fn the_maker_quotes_the_recorded_book_and_a_market_order_sweeps_its_levels() {
    let mut e = living(1);
    e.set_auditing(true); // every run checked: money, fills, books
    set_book(&mut e, BIDS, ASKS).expect("a valid book");
    assert_eq!(book(&e), [owned(BIDS), owned(ASKS)]);
    let c = funded(&mut e, 1, "1000000")[0];
    let r = run(&mut e, vec![place(c, market(Side::Buy, "m1", "0.5"))]);
    let o = order(&r[0]);
    assert_eq!(o.status, OrderStatus::Filled);
    assert_eq!(
        o.filled_quote,
        d("59991") * d("0.4") + d("59992.5") * d("0.1")
    );
    assert_eq!(
        book(&e),
        [owned(BIDS), owned(ASKS)],
        "the run ends with the recorded book whole: customers' fills do not move the recording"
    );
}

/// D11: a new book moves the quotes: levels that survive keep their orders (volume added a
/// new quote behind them), the others move or go, and the new levels are placed.
#[test]
fn a_new_recorded_book_keeps_surviving_levels_and_moves_the_rest() {
    let mut e = living(2);
    set_book(&mut e, BIDS, ASKS).expect("a valid book");
    let kept_bid = |e: &Engine| {
        let v = e.view();
        let ids = &v.trading.open_orders[&MARKET_MAKER];
        ids.iter()
            .map(|(_, id)| &v.trading.orders[id])
            .find(|o| o.limit_price == Some(d("59990")))
            .map(|o| o.id)
    };
    let before = kept_bid(&e).expect("a quote at 59990");
    let bids = [("59990", "2"), ("59985", "1")];
    let asks = [("59990.5", "0.3")];
    set_book(&mut e, &bids, &asks).expect("a valid book");
    assert_eq!(book(&e), [owned(&bids), owned(&asks)]);
    assert_eq!(
        kept_bid(&e),
        Some(before),
        "the surviving level kept its order"
    );
    let quotes = e.view().trading.open_orders[&MARKET_MAKER].len();
    assert_eq!(
        quotes,
        4 + 3 * 2 * 10,
        "BTC's three levels (59990's 0.5 more a quote of its own) and the ladders elsewhere"
    );
}

/// D11: a book that does not fit the instrument is refused, naming what is wrong, and the
/// book before stands.
#[test]
fn a_recorded_book_off_the_tick_or_lot_unordered_crossed_or_too_deep_is_refused() {
    let mut e = living(3);
    set_book(&mut e, BIDS, ASKS).expect("a valid book");
    let deep: Vec<(String, &str)> = (0..51).map(|k| (format!("{}", 50_000 - k), "1")).collect();
    let deep: Vec<(&str, &str)> = deep.iter().map(|(p, a)| (p.as_str(), *a)).collect();
    let cases: [(Levels, Levels, &str); 5] = [
        (
            &[("59990.55", "1")],
            &[],
            "bids[0]: price 59990.55 is not a positive multiple of the tick size",
        ),
        (
            &[],
            &[("59991", "0.00001")],
            "asks[0]: amount 0.00001 is not a positive multiple of the lot size",
        ),
        (
            &[("59990", "1"), ("59991", "1")],
            &[],
            "bids[1]: prices must be strictly descending",
        ),
        (
            &[("59991", "1")],
            &[("59991", "1")],
            "must not be crossed: best bid 59991 at or above best ask 59991",
        ),
        (&deep, &[], "at most 50 levels a side, got 51"),
    ];
    for (bids, asks, says) in cases {
        let refused = set_book(&mut e, bids, asks).expect_err(says);
        assert_eq!(refused.code, ErrorCode::Validation, "{says}");
        assert!(
            refused.message.contains(says),
            "{says}: {}",
            refused.message
        );
    }
    assert_eq!(
        book(&e),
        [owned(BIDS), owned(ASKS)],
        "the book before stands"
    );
}

/// D11: the recorded book is state: a restored engine quotes the same book.
#[test]
fn a_restored_engine_quotes_the_same_recorded_book() {
    let mut e = living(4);
    set_book(&mut e, BIDS, ASKS).expect("a valid book");
    let mut restored = Engine::restore(&e.state());
    assert_eq!(restored.state_hash(), e.state_hash());
    advance(&mut e, SECOND_MS);
    advance(&mut restored, SECOND_MS);
    assert_eq!(book(&restored), [owned(BIDS), owned(ASKS)]);
    assert_eq!(restored.state_hash(), e.state_hash());
}

/// A recorded trade of `amount` at `price` in BTC, its aggressor on `side`.
fn trade(e: &mut Engine, side: Side, price: &str, amount: &str) {
    let t = PrintRecordedTrade {
        symbol: BTC.into(),
        side,
        price: d(price),
        amount: d(amount),
    };
    let r = run(e, vec![Command::PrintRecordedTrade(t)]);
    assert!(r[0].is_ok(), "{r:?}");
}

/// The customer's BTC position size, as a string.
fn held(e: &Engine, c: perpsim_core::ids::CustomerCode) -> String {
    let v = e.view();
    let size = v
        .trading
        .positions
        .get(&c)
        .and_then(|p| p.get(&0))
        .map(|p| p.size);
    size.unwrap_or_default().normalize().to_string()
}

/// D11, the queue model (hftbacktest's risk-averse one): an order placed behind 1.5 recorded
/// at its price fills only once trades at that price have consumed the 1.5; volume the
/// recording adds to the level queues behind it.
#[test]
fn a_resting_order_fills_by_recorded_trades_after_the_volume_ahead_of_it() {
    let mut e = living(5);
    e.set_auditing(true); // every run checked: money, fills, books
    set_book(&mut e, BIDS, ASKS).expect("a valid book");
    let c = funded(&mut e, 1, "1000000")[0];
    let r = run(
        &mut e,
        vec![place(c, limit(Side::Buy, "q", "0.5", "59990"))],
    );
    assert_eq!(order(&r[0]).status, OrderStatus::Open);
    trade(&mut e, Side::Sell, "59990", "1");
    assert_eq!(held(&e, c), "0", "0.5 of the 1.5 ahead is left");
    set_book(&mut e, BIDS, ASKS).expect("the same book");
    trade(&mut e, Side::Sell, "59990", "0.75");
    assert_eq!(held(&e, c), "0.25", "0.5 ahead, then 0.25 of the order");
    trade(&mut e, Side::Sell, "59990", "0.25");
    assert_eq!(
        held(&e, c),
        "0.5",
        "nothing ahead: the refilled 1 queues behind"
    );
    let fills = e.view().trading.fills.clone();
    let last = fills.iter().next_back().expect("a public fill");
    assert_eq!((last.price, last.amount), (d("59990"), d("0.25")));
}

/// D11, the queue model: a level shrinking below the volume ahead of an order takes the
/// volume ahead down with it (the recording is cut from the back first).
#[test]
fn a_recorded_level_shrinking_below_the_queue_ahead_brings_the_order_forward() {
    let mut e = living(6);
    e.set_auditing(true); // every run checked: money, fills, books
    set_book(&mut e, BIDS, ASKS).expect("a valid book");
    let c = funded(&mut e, 1, "1000000")[0];
    run(
        &mut e,
        vec![place(c, limit(Side::Buy, "q", "0.5", "59990"))],
    );
    let shrunk = [("59990.5", "0.25"), ("59990", "0.4")];
    set_book(&mut e, &shrunk, ASKS).expect("a valid book");
    trade(&mut e, Side::Sell, "59990", "0.6");
    assert_eq!(held(&e, c), "0.2", "0.4 ahead, then 0.2 of the order");
}

/// D11, the queue model: a trade printed through an order's price (a sell below a bid)
/// went through everything there: the order fills whole, at its own price, whatever the
/// trade's amount.
#[test]
fn a_recorded_trade_through_an_orders_price_fills_it_whole() {
    let mut e = living(7);
    e.set_auditing(true); // every run checked: money, fills, books
    set_book(&mut e, BIDS, ASKS).expect("a valid book");
    let c = funded(&mut e, 1, "1000000")[0];
    run(
        &mut e,
        vec![place(c, limit(Side::Buy, "q", "0.5", "59990.7"))],
    );
    trade(&mut e, Side::Buy, "59991", "5");
    assert_eq!(
        held(&e, c),
        "0",
        "a buy trade reaches the asks, not the bids"
    );
    trade(&mut e, Side::Sell, "59990.5", "0.0001");
    assert_eq!(held(&e, c), "0.5");
    let fills = e.view().trading.fills.clone();
    assert_eq!(
        fills.iter().next_back().map(|f| f.price),
        Some(d("59990.7"))
    );
    assert_eq!(
        book(&e),
        [owned(BIDS), owned(ASKS)],
        "the maker's quotes untouched"
    );
}

/// D11: a venue without the market maker has no one to quote a recorded book or take a
/// recorded trade's other side: both are refused, saying so.
#[test]
fn a_recorded_book_or_trade_without_the_market_maker_is_refused() {
    let mut e = engine(8);
    let refused = set_book(&mut e, BIDS, ASKS).expect_err("no maker");
    assert!(
        refused.message.contains("need the market maker"),
        "{}",
        refused.message
    );
    let t = PrintRecordedTrade {
        symbol: BTC.into(),
        side: Side::Sell,
        price: d("59990"),
        amount: d("1"),
    };
    let r = run(&mut e, vec![Command::PrintRecordedTrade(t)]);
    assert!(
        matches!(&r[0], Err(e) if e.message.contains("need the market maker")),
        "{r:?}"
    );
}
