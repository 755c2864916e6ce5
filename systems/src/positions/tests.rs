//! Open positions as entities (issue 11): a fill opens one, the valuation pass values it at
//! the mark (D6), a mark move or a profile change revalues it, and closing despawns it.

use perpsim_core::ids::CustomerCode;
use perpsim_core::order::{OrderStatus, Side};

use crate::positions::{MarginRate, Position, Valuation};
use crate::testkit::{BTC, d, engine, funded, limit, order, place, run};
use crate::{Command, Engine};

/// Each open position's customer and valuation, by customer.
fn valuations(e: &mut Engine) -> Vec<(CustomerCode, Valuation, MarginRate)> {
    let world = e.world_mut();
    let mut query = world.query::<(&Position, &Valuation, &MarginRate)>();
    let mut all: Vec<_> = query
        .iter(world)
        .map(|(p, v, r)| (p.customer, *v, *r))
        .collect();
    all.sort_by_key(|(c, _, _)| *c);
    all
}

fn mark(e: &mut Engine, price: &str) {
    let set = Command::SetInstrumentPrice {
        symbol: BTC.into(),
        index_price: d(price),
        mark_price: d(price),
    };
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
    let expected = |customer, upnl: &str, maintenance: &str, leverage| {
        let valuation = Valuation {
            mark_price: d("61000"),
            unrealised_pnl: d(upnl),
            maintenance_margin: d(maintenance),
        };
        (customer, valuation, MarginRate::of_leverage(leverage))
    };
    // Leverage 1 keeps 50 % maintenance: 0.2 × 61000 × 0.50.
    let mut want = vec![
        expected(long, "200", "6100", 1),
        expected(short, "-200", "6100", 1),
    ];
    want.sort_by_key(|(c, _, _)| *c);
    assert_eq!(valuations(&mut e), want);

    // A profile change moves the rate, and the valuation follows (leverage 2: 30 %).
    let set = Command::SetLeverage {
        customer: long,
        leverage: 2,
    };
    assert!(run(&mut e, vec![set])[0].is_ok());
    let mut want = vec![
        expected(long, "200", "3660", 2),
        expected(short, "-200", "6100", 1),
    ];
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
