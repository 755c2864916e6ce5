//! The hour's and midnight's passes booked over ticks (issue 36 item 2; D6, D7): with fewer
//! rows a tick than positions, a pass ends as one pass would have, the clock held at its
//! instant; a fill on a position it has not reached pays first; a snapshot taken meanwhile
//! restores it.

use perpsim_core::Decimal;
use perpsim_core::ids::CustomerCode;
use perpsim_core::instrument::Asset;
use perpsim_core::order::Side;
use perpsim_core::time::{DAY_MS, HOUR_MS, Timestamp};

use crate::Engine;
use crate::command::{Command, SetFundingRate};
use crate::records::money::{MovementKind, VenueAccount};
use crate::risk::notices::NoticeTriggers;
use crate::testkit::*;

/// `n` pairs, each a short and a long of its own size at 60 000, a customer with nothing
/// beside them, the mark at 61 000.3 and a funding rate set; `rows` booked a tick.
fn pairs(n: usize, rows: usize) -> (Engine, Vec<CustomerCode>) {
    let mut e = engine(7);
    e.set_rows_per_tick(rows);
    let cs = funded(&mut e, 2 * n + 1, "1000000");
    for k in 0..n {
        let amount = format!("0.00{}", k + 1);
        let (short, long) = (cs[2 * k], cs[2 * k + 1]);
        run(
            &mut e,
            vec![
                place(short, limit(Side::Sell, "s", &amount, "60000")),
                place(long, market(Side::Buy, "b", &amount)),
            ],
        );
    }
    set_price(&mut e, "61000.3");
    set_rate(&mut e);
    (e, cs)
}

fn set_rate(e: &mut Engine) {
    let rate = Command::SetFundingRate(SetFundingRate {
        symbol: BTC.into(),
        rate: d("0.000123"),
    });
    assert!(run(e, vec![rate])[0].is_ok());
}

/// Advances the manual clock to `ms` after the start, exactly on the hour or midnight.
fn advance_to(e: &mut Engine, ms: i64) {
    let to = START.plus_millis(ms);
    advance(e, to.millis() - now(e).millis());
    assert_eq!(now(e), to);
}

/// Ticks at the engine's instant until its passes end, as a host does; how many it took.
fn settle(e: &mut Engine) -> usize {
    let at = now(e);
    let mut ticks = 0;
    while e.settling() {
        e.tick(at, Vec::new());
        ticks += 1;
        assert!(ticks < 1_000, "a pass ends");
    }
    assert_eq!(now(e), at, "the clock stays at the pass's instant");
    ticks
}

/// Each row of `kind`: its customer, amount and instant.
fn booked(e: &Engine, kind: MovementKind) -> Vec<(CustomerCode, Decimal, Timestamp)> {
    let rows = e.movements().iter().filter(|m| m.kind == kind);
    rows.map(|m| (m.customer, m.amount, m.created_at)).collect()
}

fn figures(e: &Engine, cs: &[CustomerCode]) -> Vec<(Decimal, Decimal, Decimal)> {
    let mut all: Vec<_> = cs
        .iter()
        .map(|c| e.account_figures(*c, Asset::Usdc))
        .map(|f| (f.total, f.equity, f.notional))
        .collect();
    all.push((
        e.venue_balance(VenueAccount::Clearing, Asset::Usdc),
        Decimal::ZERO,
        Decimal::ZERO,
    ));
    all
}

#[test]
fn an_hour_and_a_midnight_booked_a_few_rows_a_tick_end_as_one_pass_would_d6_d7() {
    let (mut whole, cs) = pairs(6, usize::MAX);
    let (mut spread, _) = pairs(6, 3);
    for e in [&mut whole, &mut spread] {
        advance_to(e, HOUR_MS);
    }
    assert!(!whole.settling(), "twelve rows fit one tick");
    assert!(spread.settling(), "three rows a tick");
    assert!(booked(&spread, MovementKind::Funding).len() < 12);
    assert!(settle(&mut spread) >= 3, "twelve rows, three a tick");
    let paid = booked(&whole, MovementKind::Funding);
    assert_eq!(paid.len(), 12, "every position paid the hour");
    assert_eq!(booked(&spread, MovementKind::Funding), paid);
    // Midnight: the day's settlement and the hour's funding fall due together.
    for e in [&mut whole, &mut spread] {
        set_rate(e);
        advance_to(e, DAY_MS);
    }
    settle(&mut spread);
    for kind in [MovementKind::Funding, MovementKind::Settlement] {
        assert_eq!(booked(&spread, kind), booked(&whole, kind), "{kind:?}");
    }
    assert_eq!(booked(&whole, MovementKind::Settlement).len(), 12);
    assert_eq!(figures(&spread, &cs), figures(&whole, &cs));
    assert_eq!(
        spread.view().trading.positions,
        whole.view().trading.positions
    );
}

/// Midnight's rows set entry prices, which no depreciation threshold follows: a pass booked
/// over ticks notes no position for the next check to refile (noted, a million positions
/// grew the set in ticks of up to 164 ms); a fill, which moves a baseline, is noted.
#[test]
fn a_midnight_booked_over_ticks_moves_no_depreciation_threshold_d6_d9() {
    let (mut spread, cs) = pairs(6, 3);
    advance_to(&mut spread, DAY_MS);
    assert!(spread.settling(), "three rows a tick");
    settle(&mut spread);
    assert_eq!(booked(&spread, MovementKind::Settlement).len(), 12);
    let noted = |e: &mut Engine| e.world_mut().resource::<NoticeTriggers>().noted();
    assert_eq!(noted(&mut spread), 0, "every threshold as it was filed");
    let fill = vec![
        place(cs[12], limit(Side::Sell, "more", "0.005", "61000.3")),
        place(cs[1], market(Side::Buy, "more", "0.005")),
    ];
    assert!(run(&mut spread, fill).iter().all(Result::is_ok));
    assert!(
        noted(&mut spread) >= 1,
        "the fill's positions moved off their baselines"
    );
}

#[test]
fn a_fill_on_a_position_the_pass_has_not_reached_pays_on_the_size_it_had_d7() {
    let (mut whole, cs) = pairs(3, usize::MAX);
    let (mut spread, _) = pairs(3, 1);
    for e in [&mut whole, &mut spread] {
        advance_to(e, HOUR_MS);
    }
    // The walk goes by customer code: the greatest is reached last.
    let last = *cs[..6].iter().max().expect("six positions");
    let held = spread.view().trading.positions[&last][&0].clone();
    let (side, taker) = match held.size.is_sign_positive() {
        true => (Side::Sell, Side::Buy),
        false => (Side::Buy, Side::Sell),
    };
    let fresh = cs[6];
    let fill = vec![
        place(fresh, limit(side, "more", "0.005", "61000.3")),
        place(last, market(taker, "more", "0.005")),
    ];
    assert!(run(&mut spread, fill).iter().all(Result::is_ok));
    assert!(
        spread.settling(),
        "the fill came before the walk reached it"
    );
    settle(&mut spread);
    let mut paid = booked(&spread, MovementKind::Funding);
    let mut expected = booked(&whole, MovementKind::Funding);
    paid.sort();
    expected.sort();
    assert_eq!(
        paid, expected,
        "each position paid once, at its size on the hour"
    );
    assert!(
        paid.iter().all(|(c, _, _)| *c != fresh),
        "a position opened during the pass owes it nothing"
    );
    let kinds: Vec<_> = spread
        .movements()
        .iter()
        .filter(|m| m.customer == last)
        .map(|m| m.kind)
        .collect();
    let funding = kinds.iter().position(|k| *k == MovementKind::Funding);
    assert!(
        funding < kinds.iter().rposition(|k| *k != MovementKind::Funding),
        "its row comes before the fill's: {kinds:?}"
    );
}

#[test]
fn a_snapshot_taken_during_a_pass_restores_it_and_the_clock_moves_only_once_it_ends() {
    let (mut spread, _) = pairs(4, 2);
    advance_to(&mut spread, HOUR_MS);
    assert!(spread.settling());
    let state = crate::EngineState::decode(&spread.encode_state()).expect("decodes");
    let mut restored = Engine::restore(&state);
    restored.set_rows_per_tick(2);
    assert_eq!(restored.state_hash(), spread.state_hash());
    settle(&mut spread);
    settle(&mut restored);
    assert_eq!(restored.state_hash(), spread.state_hash());
    // The clock asked to move on while a pass books ends the pass at its instant first.
    let (mut moved, _) = pairs(4, 2);
    advance_to(&mut moved, HOUR_MS);
    let hour = now(&moved);
    advance(&mut moved, 1_000);
    assert!(!moved.settling());
    let paid = booked(&moved, MovementKind::Funding);
    assert_eq!(paid, booked(&spread, MovementKind::Funding));
    assert!(paid.iter().all(|(_, _, at)| *at == hour), "{paid:?}");
}
