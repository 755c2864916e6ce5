//! Open positions as entities (issue 11): a fill opens one, its basis values it at the mark
//! (D6), a mark move or a profile change revalues it, and closing despawns it.

use perpsim_core::ids::CustomerCode;
use perpsim_core::order::{OrderStatus, Side};

use std::collections::BTreeMap;

use crate::command::{SetInstrumentPrice, SetLeverage};
use crate::positions::{MarginRate, Mark, Valuation, ValuationBasis, valuation_at};
use crate::records::position::Position;
use crate::records::venue::{Instrument, InstrumentState, MarketSlot};
use crate::testkit::{BTC, d, engine, funded, limit, order, place, run};
use crate::{Command, Engine};

/// Each open position's customer and valuation at its market's mark, by customer.
fn valuations(e: &mut Engine) -> Vec<(CustomerCode, Valuation, MarginRate)> {
    let world = e.world_mut();
    let mut instruments = world.query::<(&MarketSlot, &InstrumentState, &Instrument)>();
    let marks: BTreeMap<_, _> = instruments
        .iter(world)
        .map(|(m, s, i)| (m.0, Mark::new(s.mark_price, i.0.tick_size.scale())))
        .collect();
    let mut query = world.query::<(&Position, &ValuationBasis, &MarginRate)>();
    let mut all: Vec<_> = query
        .iter(world)
        .map(|(p, b, r)| (p.customer, valuation_at(p, b, marks[&p.market]), *r))
        .collect();
    all.sort_by_key(|(c, _, _)| *c);
    all
}

fn mark(e: &mut Engine, price: &str) {
    let set = Command::SetInstrumentPrice(SetInstrumentPrice {
        symbol: BTC.into(),
        index_price: d(price),
        mark_price: d(price),
    });
    assert!(run(e, vec![set])[0].is_ok());
}

#[test]
fn positions_are_entities_valued_at_the_mark_and_despawned_when_closed_d6() {
    let mut e = engine(3);
    let c = funded(&mut e, 2, "100000");
    let (short, long) = (c[0], c[1]);
    let r = run(
        &mut e,
        vec![
            place(short, limit(Side::Sell, "s", "0.2", "60000")),
            place(long, limit(Side::Buy, "l", "0.2", "60000")),
        ],
    );
    assert_eq!(order(&r[1]).status, OrderStatus::Filled);
    mark(&mut e, "61000");
    let expected = |customer, upnl: &str, leverage| {
        let valuation = Valuation {
            unrealised_pnl: d(upnl),
            notional: d("12200"), // 0.2 × 61000
        };
        (customer, valuation, MarginRate::of_leverage(leverage))
    };
    let mut want = vec![expected(long, "200", 1), expected(short, "-200", 1)];
    want.sort_by_key(|(c, _, _)| *c);
    assert_eq!(valuations(&mut e), want);

    // A profile change moves the rate; the valuation does not depend on it.
    let set = Command::SetLeverage(SetLeverage {
        customer: long,
        leverage: 2,
    });
    assert!(run(&mut e, vec![set])[0].is_ok());
    let mut want = vec![expected(long, "200", 2), expected(short, "-200", 1)];
    want.sort_by_key(|(c, _, _)| *c);
    assert_eq!(valuations(&mut e), want);

    // Both close against each other: no position entity is left.
    run(
        &mut e,
        vec![
            place(long, limit(Side::Sell, "l2", "0.2", "61000")),
            place(short, limit(Side::Buy, "s2", "0.2", "61000")),
        ],
    );
    assert_eq!(valuations(&mut e), vec![]);
}

mod integer_valuation {
    use perpsim_core::Decimal;
    use perpsim_core::Uuid;
    use perpsim_core::ids::{BrokerCode, CustomerCode, PositionCode};
    use perpsim_core::time::Timestamp;
    use proptest::prelude::*;

    use crate::positions::{Valuation, ValuationBasis, at_scale};
    use crate::records::position::Position;

    fn position(size: Decimal, entry: Decimal) -> Position {
        Position {
            code: PositionCode(Uuid::from_u128(1)),
            customer: CustomerCode(Uuid::from_u128(2)),
            broker: BrokerCode(Uuid::from_u128(3)),
            market: 0,
            size,
            entry_price: entry,
            avg_fill_price: entry,
            margin: Decimal::ZERO,
            created_at: Timestamp::EPOCH,
            updated_at: Timestamp::EPOCH,
            noticed: 0,
        }
    }

    proptest! {
        /// Everyday positions take the integer path and get exactly the decimal valuation
        /// (D6, D7: half-even at 10 decimals): lot-grid sizes, entries with up to 10 decimals
        /// (weighted averages), marks on the tick grid, prices below ten million.
        #[test]
        fn the_integer_valuation_is_the_decimal_one_d6(
            lots in -10_000_000i64..10_000_000,
            lot_scale in 0u32..9,
            units in 1i64..10_000_000,
            entry_digits in 0i64..10_000_000_000,
            entry_scale in 0u32..11,
            mark_units in 1i64..10_000_000,
            mark_digits in 0i64..10_000,
            price_scale in 0u32..5,
        ) {
            let size = Decimal::new(if lots == 0 { 1 } else { lots }, lot_scale);
            let fraction = Decimal::new(entry_digits % 10i64.pow(entry_scale), entry_scale);
            let p = position(size, Decimal::from(units) + fraction);
            let tick_part = Decimal::new(mark_digits % 10i64.pow(price_scale), price_scale);
            let mark = Decimal::from(mark_units) + tick_part;
            let basis = ValuationBasis::of(&p, price_scale);
            let at = at_scale(mark, price_scale).expect("a mark on the tick grid");
            prop_assert_eq!(basis.value(at), Some(Valuation::of(&p, mark)));
        }

        /// Anywhere else the integer path either gives the decimal valuation or steps aside
        /// (a product past 64 bits at a scale that needs rounding, or past what a decimal
        /// holds): it never disagrees.
        #[test]
        fn the_integer_valuation_never_disagrees(
            lots in i64::MIN / 2..i64::MAX / 2,
            lot_scale in 0u32..20,
            entry in 1i64..i64::MAX,
            entry_scale in 0u32..20,
            mark in 1i64..i64::MAX,
            mark_scale in 0u32..12,
        ) {
            let size = Decimal::new(if lots == 0 { 1 } else { lots }, lot_scale);
            let p = position(size, Decimal::new(entry, entry_scale));
            let mark = Decimal::new(mark, mark_scale);
            let basis = ValuationBasis::of(&p, mark_scale);
            if let Some(v) = at_scale(mark, mark_scale).and_then(|at| basis.value(at)) {
                prop_assert_eq!(v, Valuation::of(&p, mark));
            }
        }
    }

    #[test]
    fn everyday_positions_take_the_integer_path() {
        // A weighted-average entry at 10 decimals, a BTC lot grid, a tick-grid mark.
        let p = position(
            "-0.1234".parse().unwrap(),
            "60123.4567891234".parse().unwrap(),
        );
        let mark: Decimal = "61000.1".parse().unwrap();
        let basis = ValuationBasis::of(&p, 1);
        let v = basis.value(at_scale(mark, 1).unwrap());
        assert_eq!(v, Some(Valuation::of(&p, mark)));
        assert_eq!(
            v.unwrap().unrealised_pnl,
            "-108.1777722222".parse().unwrap()
        );
    }
}
