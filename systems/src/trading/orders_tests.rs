//! Live orders as entities (issue 11): an order resting or waiting is an entity with a
//! `LiveOrder` (a waiting conditional one also `Waiting`); an order that ends leaves the live
//! set (§3.1), its record held only through its tick (issue 37), and a restore puts each
//! live one back where it was.

use perpsim_core::entry::OrderEntry;
use perpsim_core::order::{OrderStatus, OrderType, Side};

use crate::Engine;
use crate::command::Command;
use crate::testkit::{d, engine, entry, funded, limit, market, order, place, run};
use crate::trading::ended::EndedOrders;
use crate::trading::orders::{LiveOrder, Waiting};
use crate::trading::orders::{OrderIndex, OrderSlot};

/// (live order ids, of which waiting, orders ended so far).
fn sets(e: &mut Engine) -> (Vec<u64>, Vec<u64>, u64) {
    let world = e.world_mut();
    let mut live: Vec<u64> = world
        .query::<&LiveOrder>()
        .iter(world)
        .map(|o| o.0.id.0)
        .collect();
    let mut waiting: Vec<u64> = world
        .query_filtered::<&LiveOrder, bevy_ecs::prelude::With<Waiting>>()
        .iter(world)
        .map(|o| o.0.id.0)
        .collect();
    live.sort_unstable();
    waiting.sort_unstable();
    let ended = world.resource::<EndedOrders>().count();
    for (id, slot) in world.resource::<OrderIndex>().0.iter().enumerate() {
        let is_live = matches!(slot, OrderSlot::Live(_));
        assert_eq!(is_live, live.contains(&(id as u64)), "order {id}: {slot:?}");
    }
    (live, waiting, ended)
}

fn stop(reference: &str) -> OrderEntry {
    OrderEntry {
        amount: Some(d("0.1")),
        trigger_price: Some(d("60100")),
        ..entry(Side::Buy, OrderType::StopLoss, reference)
    }
}

#[test]
fn live_orders_are_entities_and_ended_ones_leave_with_their_tick_section_3_1() {
    let mut e = engine(5);
    let c = funded(&mut e, 2, "100000");
    let r = run(
        &mut e,
        vec![
            place(c[0], limit(Side::Sell, "ask", "0.5", "60000")),
            place(c[0], stop("stop")),
            place(c[1], market(Side::Buy, "take", "0.2")),
            place(c[1], limit(Side::Buy, "far", "0.1", "50000")),
        ],
    );
    assert_eq!(order(&r[2]).status, OrderStatus::Filled);
    // The ask rests partly filled, the stop waits, the bid rests; the market order ended
    // within the run that placed it and never became an entity.
    assert_eq!(sets(&mut e), (vec![0, 1, 3], vec![1], 1));

    let cancel = Command::CancelOrder {
        customer: c[1],
        reference_id: "far".into(),
    };
    assert_eq!(
        order(&run(&mut e, vec![cancel])[0]).status,
        OrderStatus::Canceled
    );
    // Buying the rest of the ask trades at 60000, which leaves the stop (60100) waiting.
    let out = e.tick(
        crate::testkit::now(&e),
        vec![place(c[1], market(Side::Buy, "rest", "0.3"))],
    );
    let ended: Vec<u64> = out.ended.iter().map(|o| o.id.0).collect();
    assert_eq!(ended, vec![0, 4], "the ask, then the order that filled it");
    assert_eq!(sets(&mut e), (vec![1], vec![1], 4));

    // A restore holds the same live set and count, and the same state.
    let state = e.state();
    let mut restored = Engine::restore(&state);
    assert_eq!(sets(&mut restored), sets(&mut e));
    assert_eq!(restored.state_hash(), e.state_hash());
}
