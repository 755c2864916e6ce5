//! Engine tests: the schedule's order, timed events under manual advance, determinism and
//! snapshot round trips.

use bevy_ecs::prelude::{IntoScheduleConfigs, ResMut, Resource};
use perpsim_core::clock::ClockMode;
use perpsim_core::ids::PublicKey;
use perpsim_core::instrument::{InstrumentStatus, default_instruments};
use perpsim_core::time::{HOUR_MS, MINUTE_MS, Timestamp};
use perpsim_core::{Decimal, ErrorCode};

use crate::command::{
    AddBrokerKey, AdvanceClock, CreateBroker, CreateCustomer, RequestTransfer, RevokeBrokerKey,
    SetFundingRate, SetInstrumentPrice, SetInstrumentStatus,
};
use crate::records::clock::ScheduledEvent;
use crate::sets::*;
use crate::{Command, Engine, EngineEvent, Genesis, Outcome};

/// 2026-01-01T00:30:00Z
const START: Timestamp = Timestamp::from_millis(1_767_227_400_000);

fn genesis(mode: ClockMode, seed: u64) -> Genesis {
    Genesis {
        seed,
        clock_mode: mode,
        start: START,
        instruments: default_instruments(),
        simulation: perpsim_core::simulation::Simulation::quiet(&default_instruments()),
    }
}

fn manual() -> Engine {
    Engine::genesis(genesis(ClockMode::Manual, 42))
}

#[derive(Resource, Default)]
struct Trace(Vec<&'static str>);

/// ARCHITECTURE.md "The tick": ingest → match → triggers → transfers → mark-to-market → funding →
/// margin → depreciation → publish.
#[test]
fn schedule_runs_the_sets_in_the_documented_order() {
    let mut engine = manual();
    let (world, schedule) = engine.parts();
    world.insert_resource(Trace::default());
    macro_rules! probe {
        ($set:ident) => {
            schedule.add_systems((|mut t: ResMut<Trace>| t.0.push(stringify!($set))).in_set($set))
        };
    }
    // Added in scrambled order: only the set configuration may decide when they run.
    probe!(PublishSystems);
    probe!(FundingSystems);
    // The ingest system is exclusive (whole-World access), so even a probe needs an order.
    schedule.add_systems(
        (|mut t: ResMut<Trace>| t.0.push("IngestSystems"))
            .in_set(IngestSystems)
            .after(crate::engine::ingest::ingest_commands),
    );
    probe!(DepreciationSystems);
    probe!(MatchSystems);
    probe!(MarginSystems);
    probe!(TriggerSystems);
    probe!(MarkToMarketSystems);
    probe!(TransferSystems);
    engine.tick(START, vec![]);
    let (world, _) = engine.parts();
    assert_eq!(world.resource::<Trace>().0, ORDER);
}

/// D3: a manual advance runs every periodic event inside the skipped span, in time order.
#[test]
fn manual_advance_over_three_hours_fires_the_hourly_event_three_times_in_order() {
    let mut engine = manual();
    let to = START.plus_millis(3 * HOUR_MS);
    let out = engine.tick(START, vec![Command::AdvanceClock(AdvanceClock { to })]);
    assert!(matches!(&out.results()[0], Ok(Outcome::Clock(c)) if c.now == to));
    let fired = |kind: ScheduledEvent| -> Vec<Timestamp> {
        out.events
            .iter()
            .filter_map(|e| match e {
                EngineEvent::TimerFired { at, event } if *event == kind => Some(*at),
                EngineEvent::TimerFired { .. }
                | EngineEvent::Ticker(_)
                | EngineEvent::Valuation { .. } => None,
                other => panic!(
                    "only timers, tickers and valuation instants in an empty engine, got {other:?}"
                ),
            })
            .collect()
    };
    assert!(
        out.events.iter().all(|e| !matches!(
            e,
            EngineEvent::TimerFired {
                event: ScheduledEvent::PriceStep,
                ..
            }
        )),
        "a quiet venue has no price steps"
    );
    let hour = |h: i64| Timestamp::from_millis(1_767_225_600_000 + h * HOUR_MS);
    assert_eq!(
        fired(ScheduledEvent::FundingHour),
        vec![hour(1), hour(2), hour(3)]
    );
    let samples = fired(ScheduledEvent::FundingSample);
    assert_eq!(samples.len(), 180, "one premium sample a minute");
    assert!(samples.windows(2).all(|w| w[0] < w[1]), "in time order");
    assert_eq!(engine.clock().now, to);
    assert_eq!(
        engine.next_due(),
        Some(to.plus_millis(60_000)),
        "the next minute's sample"
    );
}

#[test]
fn advance_is_refused_in_realtime_mode_and_backwards() {
    let mut realtime = Engine::genesis(genesis(ClockMode::Realtime, 1));
    let out = realtime.tick(
        START,
        vec![Command::AdvanceClock(AdvanceClock {
            to: START.plus_millis(1),
        })],
    );
    assert_eq!(
        out.results()[0].as_ref().unwrap_err().code,
        ErrorCode::Conflict
    );
    let mut engine = manual();
    let out = engine.tick(
        START,
        vec![Command::AdvanceClock(AdvanceClock { to: START })],
    );
    assert_eq!(
        out.results()[0].as_ref().unwrap_err().code,
        ErrorCode::Validation
    );
}

#[test]
fn commands_after_an_advance_in_the_same_tick_see_the_new_time() {
    let mut engine = manual();
    let key = PublicKey([1; 32]);
    let to = START.plus_millis(MINUTE_MS);
    let out = engine.tick(
        START,
        vec![
            Command::CreateBroker(CreateBroker {
                name: "a".into(),
                public_key: key,
            }),
            Command::AdvanceClock(AdvanceClock { to }),
            Command::CreateBroker(CreateBroker {
                name: "b".into(),
                public_key: PublicKey([2; 32]),
            }),
        ],
    );
    let created: Vec<Timestamp> = out
        .results()
        .iter()
        .filter_map(|r| match r {
            Ok(Outcome::Broker(b)) => Some(b.created_at),
            _ => None,
        })
        .collect();
    assert_eq!(created, vec![START, to]);
}

fn workload(engine: &mut Engine, key: u8) {
    let now = engine.clock().now;
    let out = engine.tick(
        now,
        vec![Command::CreateBroker(CreateBroker {
            name: "acme".into(),
            public_key: PublicKey([key; 32]),
        })],
    );
    let Ok(Outcome::Broker(broker)) = &out.results()[0] else {
        panic!("broker created")
    };
    let broker = broker.code;
    for i in 0..50i64 {
        let mut batch = vec![Command::CreateCustomer(CreateCustomer {
            broker,
            external_id: Some(format!("c{i}")),
        })];
        if i % 7 == 0 {
            batch.push(Command::SetInstrumentPrice(SetInstrumentPrice {
                symbol: "ETH-USDC-PERP".into(),
                index_price: Decimal::new(3000 + i, 0),
                mark_price: Decimal::new(3001 + i, 0),
            }));
            batch.push(Command::AdvanceClock(AdvanceClock {
                to: engine.clock().now.plus_millis(17 * MINUTE_MS),
            }));
        }
        if i == 20 {
            batch.push(Command::SetInstrumentStatus(SetInstrumentStatus {
                symbol: "SOL-USDC-PERP".into(),
                status: InstrumentStatus::TradeHalt,
            }));
        }
        let now = engine.clock().now;
        let out = engine.tick(now, batch);
        let Ok(Outcome::Customer(customer)) = &out.results()[0] else {
            panic!("customer created")
        };
        // A ledger row each: a deposit that lands at once.
        let deposit = Command::RequestTransfer(RequestTransfer {
            customer: customer.code,
            kind: crate::command::TransferKind::Deposit,
            asset: perpsim_core::instrument::Asset::Usdc,
            amount: Decimal::new(1_000 + i, 0),
            delay_ms: 0,
        });
        engine.tick(now, vec![deposit]);
    }
}

#[test]
fn same_seed_and_commands_give_the_same_state_hash_and_another_seed_does_not() {
    let (mut a, mut b, mut c) = (
        manual(),
        manual(),
        Engine::genesis(genesis(ClockMode::Manual, 43)),
    );
    workload(&mut a, 7);
    workload(&mut b, 7);
    workload(&mut c, 7);
    assert_eq!(a.state_hash(), b.state_hash());
    assert_eq!(a.state(), b.state());
    assert_ne!(
        a.state_hash(),
        c.state_hash(),
        "customer codes come from the seed"
    );
}

/// The state hash is fed as the state encodes, in chunks; it must be the hash of the very
/// bytes a snapshot stores, across chunk boundaries too.
#[test]
fn the_state_hash_is_sha256_of_the_snapshot_encoding_less_its_held_history_rows() {
    let mut engine = manual();
    for key in 1..=40 {
        workload(&mut engine, key);
    }
    let state = engine.state();
    let bytes = state.encode();
    assert!(
        bytes.len() > 64 * 1024,
        "spans several chunks: {}",
        bytes.len()
    );
    // Without its rows the held history is a short byte string after the version's one
    // byte; the hash covers the rest, where the digest stands for the rows.
    let mut bare = state.clone();
    bare.held = crate::engine::snapshot::HeldHistory::default();
    let empty = postcard::to_stdvec(&bare.held).unwrap();
    assert!(empty.len() < 32, "{empty:?}");
    let bare = bare.encode();
    assert_eq!(bare[1..1 + empty.len()], empty);
    let hashed = [&bare[..1], &bare[1 + empty.len()..]].concat();
    let expected = crate::StateHash(<sha2::Sha256 as sha2::Digest>::digest(&hashed).into());
    assert_eq!(state.hash(), expected);
    assert_eq!(crate::StateHash::of_snapshot(&bytes), expected);
    assert_eq!(engine.state_hash(), expected);
    // The rows count through their digest: another set of rows is another hash.
    let mut other = state.clone();
    other.ledger.movements.rows = crate::records::log::RowsDigest::default();
    assert_ne!(other.hash(), expected);
}

#[test]
fn a_snapshot_whose_held_rows_are_not_those_its_digest_names_is_not_restored() {
    let mut engine = manual();
    workload(&mut engine, 3);
    let mut state = engine.state();
    assert!(crate::EngineState::decode(&state.encode()).is_some());
    let last = state.held.movements.len() - 1;
    state.held.movements.row_mut(last).amount += perpsim_core::Decimal::ONE;
    assert_eq!(crate::EngineState::decode(&state.encode()), None);
}

#[test]
fn a_restored_snapshot_has_the_same_hash_view_and_future() {
    let mut original = manual();
    workload(&mut original, 7);
    let state = original.state();
    let bytes = state.encode();
    let mut restored = Engine::restore(&crate::EngineState::decode(&bytes).unwrap());
    assert_eq!(restored.state_hash(), original.state_hash());
    let (v1, v2) = (original.view(), restored.view());
    assert_eq!(v1.customers, v2.customers);
    assert_eq!(v1.keys, v2.keys);
    assert_eq!(v1.instruments, v2.instruments);
    // Both continue identically: the RNG and scheduler state came along.
    workload(&mut original, 8);
    workload(&mut restored, 8);
    assert_eq!(restored.state_hash(), original.state_hash());
}

#[test]
fn replay_with_publishing_off_catches_up_when_turned_on() {
    let mut live = manual();
    workload(&mut live, 7);
    let mut replayed = manual();
    replayed.set_publishing(false);
    workload(&mut replayed, 7);
    assert!(replayed.view().customers.is_empty(), "no upkeep while off");
    replayed.set_publishing(true);
    let (a, b) = (live.view(), replayed.view());
    assert_eq!(a.customers, b.customers);
    assert_eq!(a.customers_by_broker, b.customers_by_broker);
    assert_eq!(a.instruments, b.instruments);
    assert_eq!(a.brokers, b.brokers);
}

#[test]
fn keys_are_unique_across_brokers_and_revocation_updates_the_view() {
    let mut engine = manual();
    let (k1, k2) = (PublicKey([1; 32]), PublicKey([2; 32]));
    let out = engine.tick(
        START,
        vec![Command::CreateBroker(CreateBroker {
            name: "a".into(),
            public_key: k1,
        })],
    );
    let Ok(Outcome::Broker(a)) = &out.results()[0] else {
        panic!()
    };
    let a = a.code;
    let out = engine.tick(
        START,
        vec![
            Command::CreateBroker(CreateBroker {
                name: "b".into(),
                public_key: k1,
            }),
            Command::AddBrokerKey(AddBrokerKey {
                broker: a,
                public_key: k2,
            }),
            Command::RevokeBrokerKey(RevokeBrokerKey {
                broker: a,
                public_key: k1,
            }),
        ],
    );
    assert_eq!(
        out.results()[0].as_ref().unwrap_err().code,
        ErrorCode::Conflict
    );
    assert!(out.results()[1].is_ok() && out.results()[2].is_ok());
    let view = engine.view();
    assert_eq!(view.keys.get(&k2), Some(&a));
    assert_eq!(view.keys.get(&k1), None);
    assert_eq!(view.brokers.get(&a).unwrap().public_keys, vec![k2]);
}

/// The state hash and a snapshot's encoding are made from the world where the state lies,
/// field for field as `Engine::state` copies it out: after trades, ended orders, a funding
/// hour and a change of margin state both are the copy's, byte for byte.
#[test]
fn the_state_encoded_in_place_is_the_encoding_of_the_copied_state() {
    use crate::testkit::{advance, funded, limit, market, place, run, set_price};
    use perpsim_core::order::Side;
    let mut e = crate::testkit::engine(5);
    let c = funded(&mut e, 3, "20000");
    run(
        &mut e,
        vec![place(c[0], limit(Side::Sell, "s", "0.2", "60000"))],
    );
    run(
        &mut e,
        vec![place(c[1], limit(Side::Buy, "b", "0.2", "60000"))],
    );
    run(
        &mut e,
        vec![place(c[2], limit(Side::Buy, "rest", "0.1", "59000"))],
    );
    run(&mut e, vec![place(c[2], market(Side::Sell, "m", "0.05"))]);
    let rate = Command::SetFundingRate(SetFundingRate {
        symbol: crate::testkit::BTC.into(),
        rate: Decimal::new(1, 3),
    });
    run(&mut e, vec![rate]);
    advance(&mut e, HOUR_MS);
    set_price(&mut e, "150000");
    advance(&mut e, MINUTE_MS);
    let state = e.state();
    assert!(state.held.trades.len() >= 2 && state.exchange.ended.count > 0);
    let funding = crate::records::money::MovementKind::Funding;
    assert!(
        state.held.movements.iter().any(|m| m.kind == funding),
        "an hour's funding"
    );
    assert!(state.risk.log.len > 0, "the short changed margin state");
    assert_eq!(e.encode_state(), state.encode());
    assert_eq!(e.state_hash(), state.hash());
}

/// Issue 37: while its movements are projected the engine lets them go a chunk at a time,
/// all but pending transfers, and its state hash stays that of an engine that holds them
/// all; a snapshot of it restores to the same hash and the same future.
#[test]
fn a_projecting_engine_lets_its_movements_go_and_hashes_as_one_that_holds_them() {
    use crate::command::TransferKind;
    use crate::records::money::MovementStatus;
    use crate::testkit::{START, customers, d};
    use perpsim_core::instrument::Asset;

    let deposit = |customer, delay_ms| {
        Command::RequestTransfer(RequestTransfer {
            customer,
            kind: TransferKind::Deposit,
            asset: Asset::Usdc,
            amount: d("1.5"),
            delay_ms,
        })
    };
    let (mut holding, mut projecting) = (crate::testkit::engine(5), crate::testkit::engine(5));
    let cs = customers(&mut holding, 1_000);
    assert_eq!(customers(&mut projecting, 1_000), cs);
    projecting.set_projecting(true);
    let mut projected = 0;
    let mut both = |cmds: Vec<Command>, at: Timestamp| {
        holding.tick(at, cmds.clone());
        projected += projecting.tick(at, cmds).history.movements.len();
    };
    // One transfer stays pending through every let-go: due in a day.
    both(vec![deposit(cs[0], 24 * HOUR_MS)], START);
    for round in 1..=70 {
        let at = START.plus_millis(round);
        both(cs.iter().map(|c| deposit(*c, 0)).collect(), at);
    }
    both(vec![], START.plus_millis(71));
    let (all, held) = (holding.movements(), projecting.movements());
    assert_eq!((all.len(), held.len()), (70_001, 70_001));
    assert_eq!(
        projected,
        70_001 * 2 - 1,
        "each booked, then each deposit completed"
    );
    assert!(held.first_held() == 65_536 && held.iter().count() == 70_001 - 65_536 + 1);
    let pending = &held[0];
    assert_eq!(
        (pending.status, &all[0]),
        (MovementStatus::Pending, pending)
    );
    assert_eq!(holding.state_hash(), projecting.state_hash());

    let bytes = projecting.encode_state();
    let mut restored = Engine::restore(&crate::EngineState::decode(&bytes).unwrap());
    assert_eq!(restored.state_hash(), holding.state_hash());
    assert!(
        bytes.len() < holding.encode_state().len() / 10,
        "the rows let go are not in it"
    );
    // The pending transfer completes alike in all three; the projecting engine hands it out
    // and lets it go.
    let later = START.plus_millis(24 * HOUR_MS + 1);
    let completion = vec![Command::AdvanceClock(AdvanceClock { to: later })];
    let now = holding.clock().now;
    holding.tick(now, completion.clone());
    restored.tick(now, completion.clone());
    let out = projecting.tick(now, completion);
    assert_eq!(holding.movements()[0].status, MovementStatus::Completed);
    assert_eq!(restored.movements()[0], holding.movements()[0]);
    assert!(
        out.history
            .movements
            .iter()
            .any(|m| *m == holding.movements()[0])
    );
    assert_eq!(projecting.movements().get(0), None);
    assert_eq!(projecting.state_hash(), holding.state_hash());
    assert_eq!(restored.state_hash(), holding.state_hash());
}

/// Issue 37: a server's history window bounds the rows each log holds besides the
/// projection, whatever the window (here 256 rows), without changing the state hash; a
/// snapshot restores into the default window and takes the server's again.
#[test]
fn a_projecting_engine_in_a_small_window_holds_a_window_of_rows_and_hashes_as_one_that_holds_them()
{
    use crate::command::TransferKind;
    use crate::testkit::{START, customers, d};
    use perpsim_core::instrument::Asset;

    let deposits = |cs: &[_]| -> Vec<Command> {
        cs.iter()
            .map(|&customer| {
                Command::RequestTransfer(RequestTransfer {
                    customer,
                    kind: TransferKind::Deposit,
                    asset: Asset::Usdc,
                    amount: d("1.5"),
                    delay_ms: 0,
                })
            })
            .collect()
    };
    let (mut holding, mut projecting) = (crate::testkit::engine(5), crate::testkit::engine(5));
    let cs = customers(&mut holding, 100);
    assert_eq!(customers(&mut projecting, 100), cs);
    projecting.set_projecting(true);
    projecting.set_history_window(8);
    for round in 1..=20 {
        let at = START.plus_millis(round);
        holding.tick(at, deposits(&cs));
        projecting.tick(at, deposits(&cs));
        let held = projecting.movements();
        assert!(held.len() - held.first_held() < 256, "round {round}");
        assert_eq!(held.first_held() % 256, 0);
    }
    assert_eq!(holding.movements().len(), 2_000);
    assert_eq!(projecting.movements().first_held(), 1_792);
    assert_eq!(holding.state_hash(), projecting.state_hash());

    let bytes = projecting.encode_state();
    let mut restored = Engine::restore(&crate::EngineState::decode(&bytes).unwrap());
    assert_eq!(restored.movements().first_held(), 1_792);
    restored.set_projecting(true);
    restored.set_history_window(8);
    let at = START.plus_millis(21);
    holding.tick(at, deposits(&cs));
    restored.tick(at, deposits(&cs));
    assert_eq!(restored.movements().first_held(), 2_048);
    assert_eq!(restored.state_hash(), holding.state_hash());
}

/// Issue 37: while its trade records and public fills are projected the engine lets them go
/// a chunk at a time (neither ever changes), and its state hash stays that of an engine that
/// holds them all; a snapshot of it restores to the same hash, the same market data (candles
/// and latest fills, from the tape) and the same future.
#[test]
fn a_projecting_engine_lets_its_trade_records_and_fills_go_and_hashes_as_one_that_holds_them() {
    use crate::testkit::{funded, limit, market, now, place};
    use perpsim_core::order::Side;

    let (mut holding, mut projecting) = (crate::testkit::engine(5), crate::testkit::engine(5));
    let cs = funded(&mut holding, 2, "100000000");
    assert_eq!(funded(&mut projecting, 2, "100000000"), cs);
    projecting.set_projecting(true);
    let mut projected = (0, 0);
    let mut both = |cmds: Vec<Command>| {
        let at = now(&holding);
        holding.tick(at, cmds.clone());
        let out = projecting.tick(at, cmds).history;
        projected.0 += out.trades.len();
        projected.1 += out.fills.len();
    };
    // One resting bid, and 66 000 market sells of a lot each against it: 66 000 fills.
    both(vec![place(cs[0], limit(Side::Buy, "bid", "7", "60000"))]);
    for round in 0..66 {
        let sell = |i| {
            place(
                cs[1],
                market(Side::Sell, &format!("s{round}-{i}"), "0.0001"),
            )
        };
        both((0..1_000).map(sell).collect());
    }
    let (all, held) = (holding.trades(), projecting.trades());
    assert_eq!((all.len(), held.len()), (132_000, 132_000));
    assert_eq!(projected, (132_000, 66_000));
    assert_eq!(held.first_held(), 131_072);
    assert_eq!(held.get(131_999), all.get(131_999));
    assert_eq!(projecting.fills().first_held(), 65_536);
    assert_eq!(holding.state_hash(), projecting.state_hash());

    let bytes = projecting.encode_state();
    let mut restored = Engine::restore(&crate::EngineState::decode(&bytes).unwrap());
    assert_eq!(restored.state_hash(), holding.state_hash());
    assert!(
        bytes.len() < holding.encode_state().len() / 4,
        "the records and fills let go are not in it"
    );
    let (mine, theirs) = (restored.view(), holding.view());
    let btc = &theirs.trading.markets[0];
    assert_eq!(btc.fills.iter().count(), crate::records::tape::RECENT_FILLS);
    assert!(!btc.day_candles.is_empty());
    assert_eq!(mine.trading.markets, theirs.trading.markets);
    assert_eq!(mine.trading.fills, theirs.trading.fills);
    let sell = vec![place(cs[1], market(Side::Sell, "last", "0.0001"))];
    let at = now(&holding);
    holding.tick(at, sell.clone());
    restored.tick(at, sell.clone());
    // Restored from a copy of its state, not its bytes, an engine projects nothing either.
    let mut copied = Engine::restore(&projecting.state());
    let out = copied.tick(at, sell.clone());
    assert!(out.history.is_empty());
    let out = projecting.tick(at, sell).history;
    let made: Vec<_> = holding.trades().iter_from(132_000).cloned().collect();
    assert_eq!((out.trades.len(), out.trades), (2, made.into()));
    assert_eq!(out.fills.len(), 1);
    assert_eq!(projecting.state_hash(), holding.state_hash());
    assert_eq!(restored.state_hash(), holding.state_hash());
    assert_eq!(
        restored.view().trading.markets,
        holding.view().trading.markets
    );
}

/// Issue 38 item 6: the audit is a switch of the engine, not of the build. A balance changed
/// behind the ledger's back runs on unnoticed while the engine does not audit, and stops it
/// at its next run once it does, in a release build as in a debug one.
#[test]
fn a_balance_corrupted_behind_the_ledger_stops_the_engine_once_it_audits() {
    let mut e = crate::testkit::engine(7);
    crate::testkit::funded(&mut e, 1, "1000");
    let mut balances = e.world_mut().query::<&mut crate::records::money::Balance>();
    let mut any = balances.iter_mut(e.world_mut()).next().expect("an account");
    any.total += Decimal::ONE;
    e.set_auditing(false);
    crate::testkit::advance(&mut e, 1_000);
    e.set_auditing(true);
    let stopped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        crate::testkit::advance(&mut e, 1_000)
    }))
    .expect_err("the audit stops the engine");
    let message = stopped
        .downcast_ref::<String>()
        .expect("a formatted message");
    assert!(
        message.contains("money invariant violated") && message.contains("accounts sum to"),
        "{message}"
    );
}
