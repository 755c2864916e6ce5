//! Funding and daily settlement on the manual clock (D6, D7, §2.12; issue 12 items 3, 4).

use perpsim_core::Decimal;
use perpsim_core::ids::CustomerCode;
use perpsim_core::order::Side;
use perpsim_core::time::{DAY_MS, HOUR_MS};

use crate::Engine;
use crate::command::Command;
use crate::command::{AdvanceClock, CancelOrder, SetFundingRate};
use crate::records::money::{Movement, MovementKind};
use crate::testkit::*;

/// c0 short and c1 long `amount` BTC at 60 000.
fn two_sided(amount: &str) -> (Engine, Vec<CustomerCode>) {
    let mut e = engine(1);
    let cs = funded(&mut e, 3, "1000000");
    run(
        &mut e,
        vec![
            place(cs[0], limit(Side::Sell, "s", amount, "60000")),
            place(cs[1], market(Side::Buy, "b", amount)),
        ],
    );
    (e, cs)
}

fn rows(e: &Engine, kind: MovementKind) -> Vec<Movement> {
    e.movements()
        .iter()
        .filter(|m| m.kind == kind)
        .cloned()
        .collect()
}

/// D7: on the hour, payment = amount × mark × rate, booked exactly at 10 decimals; longs pay
/// shorts when the rate is positive; the rate is recorded with the mark.
#[test]
fn a_funding_hour_with_a_set_rate_books_exact_amounts_with_the_sign_and_records() {
    let (mut e, cs) = two_sided("0.0003");
    set_price(&mut e, "60000.1");
    let r = run(
        &mut e,
        vec![Command::SetFundingRate(SetFundingRate {
            symbol: BTC.into(),
            rate: d("0.000123"),
        })],
    );
    assert!(r[0].is_ok());
    assert_eq!(e.view().funding[0].preliminary, Some(d("0.000123")));
    advance(&mut e, HOUR_MS);
    let paid = rows(&e, MovementKind::Funding);
    // 0.0003 × 60000.1 × 0.000123 = 0.00221400369 → 0.0022140037 (half-even).
    let by = |c: CustomerCode| paid.iter().find(|m| m.customer == c).unwrap();
    assert_eq!(by(cs[1]).amount, d("-0.0022140037"), "the long pays");
    assert_eq!(by(cs[0]).amount, d("0.0022140037"), "the short receives");
    let info = by(cs[1]).periodic.as_ref().unwrap();
    assert_eq!(
        (info.funding_rate, &*info.symbol),
        (Some(d("0.000123")), BTC)
    );
    assert_eq!(
        by(cs[1]).created_at,
        START.plus_millis(HOUR_MS),
        "exactly on the hour"
    );
    let v = e.view();
    assert_eq!(e.funding_history().len(), 1, "only BTC had a rate");
    let record = &e.funding_history()[0];
    assert_eq!(record.seq.0, 0);
    assert_eq!(
        (record.rate, record.mark_price),
        (d("0.000123"), d("60000.1"))
    );
    assert_eq!(v.funding[0].latest.as_ref(), Some(record));
    assert_eq!(
        v.funding[0].preliminary, None,
        "a settled interval starts over"
    );
}

/// D7: with no set rate, the preliminary rate is the minutes' mean premium of the mid over
/// the mark, clamped to ±0.5 %.
#[test]
fn a_skewed_book_gives_a_sampled_rate_clamped_to_half_a_percent() {
    let (mut e, cs) = two_sided("0.001");
    run(
        &mut e,
        vec![
            place(cs[2], limit(Side::Buy, "bid", "0.001", "60030")),
            place(cs[2], limit(Side::Sell, "ask", "0.001", "60090")),
        ],
    );
    advance(&mut e, 30 * 60_000);
    // mid 60060 over mark 60000: 0.1 %.
    assert_eq!(e.view().funding[0].preliminary, Some(d("0.00100000")));
    advance(&mut e, 30 * 60_000);
    let paid = rows(&e, MovementKind::Funding);
    let long = paid.iter().find(|m| m.customer == cs[1]).unwrap();
    assert_eq!(long.amount, d("-0.06"), "0.001 × 60000 × 0.001");
    // A mid 2 % over the mark clamps to 0.5 %.
    run(
        &mut e,
        vec![
            Command::CancelOrder(CancelOrder {
                customer: cs[2],
                reference_id: "bid".into(),
            }),
            Command::CancelOrder(CancelOrder {
                customer: cs[2],
                reference_id: "ask".into(),
            }),
            place(cs[2], limit(Side::Buy, "bid2", "0.001", "61000")),
            place(cs[2], limit(Side::Sell, "ask2", "0.001", "61400")),
        ],
    );
    advance(&mut e, 2 * 60_000);
    assert_eq!(e.view().funding[0].preliminary, Some(d("0.005")));
}

/// D7: an hour with no preliminary rate settles nothing and records nothing.
#[test]
fn an_hour_with_no_rate_settles_nothing() {
    let (mut e, _) = two_sided("0.001");
    advance(&mut e, HOUR_MS);
    assert!(rows(&e, MovementKind::Funding).is_empty());
    let v = e.view();
    assert!(e.funding_history().is_empty());
    assert_eq!(
        (v.funding[0].latest.as_ref(), v.funding[0].preliminary),
        (None, None)
    );
}

/// D6: at 00:00 UTC the unrealised PnL at the mark is booked as settlement with the mark;
/// entry_price becomes the mark, avg_fill_price stays, the margin follows the entry.
#[test]
fn midnight_settlement_books_the_unrealised_pnl_and_resets_the_entry() {
    let (mut e, cs) = two_sided("0.0003");
    set_price(&mut e, "61000.3");
    advance(&mut e, DAY_MS);
    let booked = rows(&e, MovementKind::Settlement);
    let by = |c: CustomerCode| booked.iter().find(|m| m.customer == c).unwrap();
    // 0.0003 × 1000.3 = 0.30009.
    assert_eq!(by(cs[1]).amount, d("0.30009"));
    assert_eq!(by(cs[0]).amount, d("-0.30009"));
    assert_eq!(
        by(cs[1]).created_at,
        START.plus_millis(DAY_MS),
        "exactly at 00:00"
    );
    assert_eq!(
        by(cs[1]).periodic.as_ref().unwrap().mark_price,
        d("61000.3")
    );
    let v = e.view();
    let p = &v.trading.positions[&cs[1]][&0];
    assert_eq!(
        (p.entry_price, p.avg_fill_price),
        (d("61000.3"), d("60000"))
    );
    assert_eq!(
        p.margin,
        d("0.0003") * d("61000.3"),
        "leverage 1: the whole notional"
    );
    assert_eq!(p.unrealised_pnl(d("61000.3")), Decimal::ZERO);
}

/// Issue 37: a server's engine hands its funding settlements to the projection as they are
/// made and hashes as one that holds them all; a restore from its snapshot agrees.
#[test]
fn a_projecting_engine_hands_out_its_funding_settlements_and_hashes_as_one_that_holds_them() {
    let (mut holding, _) = two_sided("0.0003");
    let (mut projecting, _) = two_sided("0.0003");
    projecting.set_projecting(true);
    let mut handed = crate::records::history::HandedHistory::default();
    for hour in 0..3 {
        let rate = vec![Command::SetFundingRate(SetFundingRate {
            symbol: BTC.into(),
            rate: d(&format!("0.00012{hour}")),
        })];
        for cmds in [rate, Vec::new()] {
            let to = now(&holding).plus_millis(if cmds.is_empty() { HOUR_MS } else { 0 });
            let cmds = match cmds.is_empty() {
                true => vec![Command::AdvanceClock(AdvanceClock { to })],
                false => cmds,
            };
            holding.tick(now(&holding), cmds.clone());
            let mut out = projecting.tick(now(&projecting), cmds);
            handed.append(&mut out.history);
        }
    }
    let settled: Vec<_> = holding.funding_history().iter().cloned().collect();
    assert_eq!(settled.len(), 3, "three hours settled BTC");
    assert_eq!(
        settled.iter().map(|r| r.seq.0).collect::<Vec<_>>(),
        [0, 1, 2]
    );
    assert_eq!(handed.funding.iter().cloned().collect::<Vec<_>>(), settled);
    assert_eq!(projecting.state_hash(), holding.state_hash());
    let restored =
        crate::Engine::restore(&crate::EngineState::decode(&projecting.encode_state()).unwrap());
    assert_eq!(restored.state_hash(), holding.state_hash());
    assert_eq!(restored.view().funding[0].latest.as_ref(), settled.last());
}
