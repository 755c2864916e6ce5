//! Live orders as entities (issue 11): an order resting or waiting is an entity with a
//! `LiveOrder` (a waiting conditional one also `Waiting`); an order that ends leaves the live
//! set (§3.1), its record held only through its tick (issue 37), and a restore puts each
//! live one back where it was.

use perpsim_core::entry::OrderEntry;
use perpsim_core::order::{OrderStatus, OrderType, Side};

use crate::Engine;
use crate::command::CancelOrder;
use crate::command::Command;
use crate::records::ids::OrderId;
use crate::testkit::{d, engine, entry, funded, limit, market, order, place, run};
use crate::trading::ended::EndedOrders;
use crate::trading::orders::{LiveOrder, Waiting};
use crate::trading::orders::{MAKER_CHANGED, MakerOrderChanges, OrderIndex, SPARE, live_ids};

/// (live order ids, of which waiting, orders ended so far).
fn sets(e: &mut Engine) -> (Vec<u64>, Vec<u64>, u64) {
    let world = e.world_mut();
    let mut live: Vec<u64> = world
        .query::<&LiveOrder>()
        .iter(world)
        .filter_map(|o| Some(o.record()?.id.0))
        .collect();
    let mut waiting: Vec<u64> = world
        .query_filtered::<&LiveOrder, bevy_ecs::prelude::With<Waiting>>()
        .iter(world)
        .filter_map(|o| Some(o.record()?.id.0))
        .collect();
    live.sort_unstable();
    waiting.sort_unstable();
    let ended = world.resource::<EndedOrders>().count();
    let indexed: Vec<u64> = live_ids(world.resource::<OrderIndex>())
        .iter()
        .map(|id| id.0)
        .collect();
    assert_eq!(
        indexed, live,
        "the index's live slots are the live entities"
    );
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

    let cancel = Command::CancelOrder(CancelOrder {
        customer: c[1],
        reference_id: "far".into(),
    });
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

/// Removal messages bevy writes for every despawned order: kept for two ticks, never for
/// every order ever ended (issue 37: memory that stays flat), as the order index's slots.
fn removal_messages(e: &mut Engine) -> usize {
    let removed = e.world_mut().removed_components();
    removed.iter().map(|(_, messages)| messages.len()).sum()
}

/// The order entities in the world, pooled (empty) ones included.
fn entities(e: &mut Engine) -> usize {
    let world = e.world_mut();
    world.query::<&LiveOrder>().iter(world).count()
}

#[test]
fn ended_orders_leave_no_index_slot_entity_or_removal_message_behind_issue_37() {
    let mut e = engine(8);
    let c = funded(&mut e, 1, "100000");
    let mut after = Vec::new();
    for round in 0..200 {
        let reference = format!("r{round}");
        run(
            &mut e,
            vec![place(c[0], limit(Side::Buy, &reference, "0.1", "50000"))],
        );
        let cancel = Command::CancelOrder(CancelOrder {
            customer: c[0],
            reference_id: reference,
        });
        assert_eq!(
            order(&run(&mut e, vec![cancel])[0]).status,
            OrderStatus::Canceled
        );
        after.push(removal_messages(&mut e));
        // The index holds the order that ended in this tick, until the next starts; the
        // world holds its entity, empty, for the next order, beside the spares the first
        // order's run spawned (the next orders take the one that ended).
        assert_eq!(e.world_mut().resource::<OrderIndex>().len(), 1);
        assert_eq!(e.world_mut().resource::<OrderIndex>().pooled(), SPARE + 1);
        assert_eq!(entities(&mut e), SPARE + 1, "round {round}");
    }
    // What bevy keeps of removals is the last two ticks', the same every round.
    assert!(after.iter().all(|&n| n == after[0]), "{after:?}");
}

/// An ended order's entity is the next order's: emptied into the pool when the order ends and
/// filled in place by the next the desk accepts, so the live set, the index and the entities
/// stay one to one (the audit checks it every run here); a conditional order's entity, which
/// is marked `Waiting`, is despawned instead. A run that takes from a pool under half of
/// [`SPARE`] tops it up in one batch (issue 36: the order path's cost).
#[test]
fn an_ended_orders_entity_takes_the_next_order_and_a_waiting_ones_is_despawned_issue_36() {
    let mut e = engine(10);
    let c = funded(&mut e, 2, "100000");
    let pooled = |e: &mut Engine| e.world_mut().resource::<OrderIndex>().pooled();
    run(
        &mut e,
        vec![
            place(c[0], limit(Side::Buy, "a", "0.1", "50000")),
            place(c[0], limit(Side::Buy, "b", "0.1", "50001")),
            place(c[0], stop("s")),
        ],
    );
    // The first orders found the pool empty: each queued its entity's spawn, and the run
    // topped the pool up to its spares; the stop's entity is its own.
    assert_eq!((entities(&mut e), pooled(&mut e)), (3 + SPARE, SPARE));
    let cancel = |reference: &str| {
        Command::CancelOrder(CancelOrder {
            customer: c[0],
            reference_id: reference.into(),
        })
    };
    run(&mut e, vec![cancel("a"), cancel("s")]);
    assert_eq!(sets(&mut e), (vec![1], vec![], 2));
    assert_eq!(
        (entities(&mut e), pooled(&mut e)),
        (2 + SPARE, SPARE + 1),
        "the stop's is gone, the limit order's pooled"
    );

    // The next resting orders take pooled entities (the first takes the limit order's that
    // ended); a market order that fills in its run never needs one.
    run(
        &mut e,
        vec![
            place(c[0], limit(Side::Sell, "x", "0.1", "60000")),
            place(c[1], market(Side::Buy, "take", "0.05")),
            place(c[0], limit(Side::Sell, "y", "0.1", "60001")),
        ],
    );
    assert_eq!(sets(&mut e), (vec![1, 3, 5], vec![], 3));
    assert_eq!((entities(&mut e), pooled(&mut e)), (2 + SPARE, SPARE - 1));

    // A restore re-spawns the live orders only.
    let mut restored = Engine::restore(&e.state());
    assert_eq!(sets(&mut restored), sets(&mut e));
    assert_eq!(entities(&mut restored), 3);
    assert_eq!(restored.state_hash(), e.state_hash());
}

/// A quote left resting while many orders come and go does not keep every later id's slot:
/// the window moves it aside and stays within its bound, and it is still found by its
/// reference, cancelled, and restored (issue 37).
#[test]
fn a_long_resting_order_does_not_pin_the_index_window_issue_37() {
    let mut e = engine(9);
    let c = funded(&mut e, 1, "1000000");
    run(
        &mut e,
        vec![place(c[0], limit(Side::Buy, "old", "0.1", "40000"))],
    );
    for tick in 0..70 {
        // 999 beside the resting one: the D4 bound of 1 000 open orders.
        let refs: Vec<String> = (0..999).map(|i| format!("t{tick}-{i}")).collect();
        let placed = refs
            .iter()
            .map(|r| place(c[0], limit(Side::Buy, r, "0.001", "50000")));
        let cancelled = refs.iter().map(|r| {
            Command::CancelOrder(CancelOrder {
                customer: c[0],
                reference_id: r.clone(),
            })
        });
        run(&mut e, placed.chain(cancelled).collect());
    }
    run(&mut e, vec![]);
    let index = e.world_mut().resource::<OrderIndex>();
    assert_eq!((index.len(), index.accepted()), (1, 1 + 70 * 999));
    assert!(index.footprint() <= 65_536 + 1_000, "{}", index.footprint());

    let restored = Engine::restore(&e.state());
    assert_eq!(restored.state_hash(), e.state_hash());
    let cancel = Command::CancelOrder(CancelOrder {
        customer: c[0],
        reference_id: "old".into(),
    });
    let r = run(&mut e, vec![cancel]);
    assert_eq!(
        (order(&r[0]).id.0, order(&r[0]).status),
        (0, OrderStatus::Canceled)
    );
}

/// One round of orders that end: a fill of part of a resting ask, a market order filled, a
/// bid canceled.
fn ending_round(e: &mut Engine, c: &[perpsim_core::ids::CustomerCode], round: usize) {
    let far = format!("far{round}");
    run(
        e,
        vec![
            place(
                c[0],
                limit(Side::Sell, &format!("ask{round}"), "0.5", "60000"),
            ),
            place(c[1], market(Side::Buy, &format!("take{round}"), "0.2")),
            place(c[1], limit(Side::Buy, &far, "0.1", "50000")),
        ],
    );
    let cancel = CancelOrder {
        customer: c[1],
        reference_id: far,
    };
    run(e, vec![Command::CancelOrder(cancel)]);
}

/// Issue 36: an engine that owes its ended orders' digest (a replay's, whose tables' writer
/// settles it off the engine thread) hashes every state as one that chains it at each tick,
/// whether the host settled the runs, left them to the hash, or settled them after it.
#[test]
fn an_owed_ended_orders_digest_hashes_as_the_chained_one_whoever_settles_it() {
    let (mut chained, mut owing) = (engine(5), engine(5));
    owing.owe_ended_digests();
    let c = funded(&mut chained, 2, "100000");
    assert_eq!(funded(&mut owing, 2, "100000"), c);
    let mut left = Vec::new();
    for round in 0..6 {
        ending_round(&mut chained, &c, round);
        ending_round(&mut owing, &c, round);
        let runs = owing.take_owed_ended();
        assert_eq!(runs.len(), 2, "each tick that ended orders owes one run");
        match round % 3 {
            // The host settles them in order, as the tables' writer does.
            0 => assert!(runs.iter().all(|r| r.settle())),
            // Left: the state hash computes them itself.
            1 => left.extend(runs),
            // Settled after the hash computed the runs before them.
            _ => {
                assert!(left.drain(..).chain(runs).all(|r| r.settle()));
            }
        }
        assert_eq!(owing.state_hash(), chained.state_hash(), "round {round}");
    }
    assert_eq!(sets(&mut owing).2, sets(&mut chained).2);
}

/// D10: the market maker re-reads only the quotes the desk names as changed since its last
/// re-quote of a side: each named once however often a fill changes it in a row, every
/// market's side apart; past [`MAKER_CHANGED`] ids only that more changed (it reads the
/// side whole then); forgetting starts the list again, and the count goes on throughout.
#[test]
fn the_makers_changed_orders_are_named_per_side_until_too_many_change_d10() {
    let mut changes = MakerOrderChanges::default();
    assert_eq!(
        changes.changed(3, Side::Buy),
        Some(&[][..]),
        "nothing changed yet"
    );
    for id in [7, 7, 7, 9, 7] {
        changes.note(0, Side::Sell, OrderId(id));
    }
    changes.note(1, Side::Sell, OrderId(11));
    let named = |c: &MakerOrderChanges, m, side| c.changed(m, side).map(<[OrderId]>::to_vec);
    assert_eq!(
        named(&changes, 0, Side::Sell),
        Some(vec![OrderId(7), OrderId(9), OrderId(7)])
    );
    assert_eq!(named(&changes, 0, Side::Buy), Some(vec![]));
    assert_eq!(named(&changes, 1, Side::Sell), Some(vec![OrderId(11)]));
    assert_eq!(changes.of(0, Side::Sell), 5, "every change counts");
    changes.forget(0, Side::Sell);
    assert_eq!(named(&changes, 0, Side::Sell), Some(vec![]));
    assert_eq!(named(&changes, 1, Side::Sell), Some(vec![OrderId(11)]));
    for id in 0..MAKER_CHANGED as u64 {
        changes.note(0, Side::Buy, OrderId(id));
    }
    assert_eq!(
        changes.changed(0, Side::Buy).map(<[OrderId]>::len),
        Some(MAKER_CHANGED)
    );
    changes.note(0, Side::Buy, OrderId(MAKER_CHANGED as u64 - 1));
    assert!(
        changes.changed(0, Side::Buy).is_some(),
        "the same id again names nothing new"
    );
    changes.note(0, Side::Buy, OrderId(1_000));
    assert_eq!(
        changes.changed(0, Side::Buy),
        None,
        "too many changed: the side is read whole"
    );
    changes.note(0, Side::Buy, OrderId(1_001));
    assert_eq!(changes.changed(0, Side::Buy), None);
    assert_eq!(changes.of(0, Side::Buy), MAKER_CHANGED as u64 + 3);
    changes.forget(0, Side::Buy);
    assert_eq!(named(&changes, 0, Side::Buy), Some(vec![]));
    assert_eq!(changes.of(0, Side::Sell), 5);
}
