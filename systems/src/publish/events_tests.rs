//! The push channels' events (D9; issue 25 item 0): derived from state, the same live,
//! replayed with publishing off and after a restore; the book stream rebuilds the book.

use perpsim_core::clock::ClockMode;
use perpsim_core::ids::{BrokerCode, PublicKey};
use perpsim_core::instrument::{Asset, default_instruments};
use perpsim_core::order::{OrderStatus, Side};
use perpsim_core::time::Timestamp;

use crate::command::TransferKind;
use crate::command::{
    AdvanceClock, CancelOrder, CreateBroker, CreateCustomer, RequestTransfer, SetFaults,
    SetInstrumentPrice,
};
use crate::publish::events::Listening;
use crate::records::depth::{Depth, apply};
use crate::testkit::*;
use crate::{Command, Engine, EngineEvent, Genesis, Outcome};

type Tick = (Timestamp, Vec<Command>);

fn genesis() -> Genesis {
    Genesis {
        seed: 7,
        clock_mode: ClockMode::Manual,
        start: START,
        instruments: default_instruments(),
        simulation: perpsim_core::simulation::Simulation::defaults(&default_instruments()),
    }
}

fn broker(e: &mut Engine) -> BrokerCode {
    let out = e.tick(
        START,
        vec![Command::CreateBroker(CreateBroker {
            name: "b".into(),
            public_key: PublicKey([1; 32]),
        })],
    );
    match &out.results()[0] {
        Ok(Outcome::Broker(b)) => b.code,
        other => panic!("{other:?}"),
    }
}

/// A living market with two funded customers trading against the maker and each other,
/// a price shock, time passing over funding and valuation instants: the ticks, as journaled.
fn script(e: &mut Engine) -> Vec<Tick> {
    let b = broker(e);
    let created = e.tick(
        START,
        (0..2)
            .map(|_| {
                Command::CreateCustomer(CreateCustomer {
                    broker: b,
                    external_id: None,
                })
            })
            .collect(),
    );
    let cs: Vec<_> = created
        .results()
        .iter()
        .map(|r| match r {
            Ok(Outcome::Customer(c)) => c.code,
            other => panic!("{other:?}"),
        })
        .collect();
    let deposit = |c| {
        Command::RequestTransfer(RequestTransfer {
            customer: c,
            kind: TransferKind::Deposit,
            asset: Asset::Usdc,
            amount: d("100000"),
            delay_ms: 0,
        })
    };
    let at = |s: i64| START.plus_millis(s * 1_000);
    let advance = |s: i64| Command::AdvanceClock(AdvanceClock { to: at(s) });
    // A fault plan refusing half the order entries: its draws are journaled state too.
    let faults = crate::records::fault_plan::FaultPlan {
        seed: 3,
        channel: Vec::new(),
        order_entry: Some(crate::records::fault_plan::OrderEntryFault {
            error_ppm: 500_000,
            delay_ppm: 0,
            delay_ms: 0,
        }),
    };
    let extra = (0..6).map(|i| place(cs[1], limit(Side::Buy, &format!("f{i}"), "0.01", "40000")));
    vec![
        (START, vec![deposit(cs[0]), deposit(cs[1])]),
        (START, vec![advance(1)]),
        (
            at(1),
            vec![
                place(cs[0], market(Side::Buy, "m1", "0.01")),
                place(cs[1], limit(Side::Sell, "l1", "0.02", "61000")),
                place(cs[0], limit(Side::Buy, "l2", "0.01", "50000")),
            ],
        ),
        (at(1), vec![advance(7)]),
        (
            at(7),
            vec![
                Command::CancelOrder(CancelOrder {
                    customer: cs[0],
                    reference_id: "l2".into(),
                }),
                Command::SetInstrumentPrice(SetInstrumentPrice {
                    symbol: BTC.into(),
                    index_price: d("61500"),
                    mark_price: d("61500"),
                }),
            ],
        ),
        (
            at(7),
            vec![Command::SetFaults(SetFaults { plan: Some(faults) })],
        ),
        (at(7), extra.collect()),
        (at(7), vec![Command::SetFaults(SetFaults { plan: None })]),
        (at(7), vec![advance(3_700)]),
    ]
}

fn play(e: &mut Engine, ticks: &[Tick]) -> Vec<Vec<EngineEvent>> {
    ticks
        .iter()
        .map(|(t, cmds)| e.tick(*t, cmds.clone()).events)
        .collect()
}

/// The events as a client sees them: an order's book handle (its slot in the book, derived
/// and rebuilt in another layout by a restore) is not part of its update.
fn seen(ticks: Vec<Vec<EngineEvent>>) -> Vec<Vec<EngineEvent>> {
    let unhandled = |e: EngineEvent| match e {
        EngineEvent::Order(o) => {
            let mut o = (*o).clone();
            o.resting = None;
            EngineEvent::Order(std::sync::Arc::new(o))
        }
        other => other,
    };
    ticks
        .into_iter()
        .map(|t| t.into_iter().map(unhandled).collect())
        .collect()
}

fn recorded() -> (Engine, Vec<Tick>, Vec<Vec<EngineEvent>>) {
    let mut e = Engine::genesis(genesis());
    let ticks = script(&mut e);
    let events = play(&mut e, &ticks);
    (e, ticks, events)
}

/// Item 0: events are derived, never journaled — a replay of the same commands with the view
/// switched off emits the same events in the same order (a fault plan's refusals included).
#[test]
fn a_replay_with_publishing_off_emits_the_same_events_in_the_same_order() {
    let (_, ticks, live) = recorded();
    let mut replay = Engine::genesis(genesis());
    replay.set_publishing(false);
    script(&mut replay);
    assert_eq!(play(&mut replay, &ticks), live);
}

/// Issue 36 item 3: an engine listening for margin states only emits the live run's
/// margin-state events and nothing else, and reaches the same state; when the channels start
/// listening at any tick, it emits from then on what the engine that always listened did (its
/// book batches diffed against the book as it stands, not as it stood when listening stopped).
/// The worked examples' reports (`tests/scenarios`) pin the margin states a replay hears.
#[test]
fn margin_states_alone_are_emitted_unheard_and_the_channels_start_where_the_engine_stands() {
    let (e, ticks, live) = recorded();
    let margin_states = |ticks: &[Vec<EngineEvent>]| -> Vec<Vec<EngineEvent>> {
        let margin = |e: &&EngineEvent| matches!(e, EngineEvent::MarginState(_));
        ticks
            .iter()
            .map(|t| t.iter().filter(margin).cloned().collect())
            .collect()
    };
    for from in 0..=ticks.len() {
        let mut quiet = Engine::genesis(genesis());
        quiet.set_listening(Listening::MarginStates);
        script(&mut quiet);
        let heard = play(&mut quiet, &ticks[..from]);
        assert_eq!(
            heard,
            margin_states(&live[..from]),
            "listening from tick {from}"
        );
        quiet.set_listening(Listening::Channels);
        assert_eq!(
            play(&mut quiet, &ticks[from..]),
            live[from..],
            "from tick {from}"
        );
        assert_eq!(quiet.state_hash(), e.state_hash());
    }
}

/// Item 0: a restore from any tick's state goes on emitting what the uninterrupted engine did.
#[test]
fn a_restored_engine_emits_what_the_uninterrupted_one_did() {
    let mut e = Engine::genesis(genesis());
    let ticks = script(&mut e);
    let mut states = Vec::new();
    let mut live = Vec::new();
    for (t, cmds) in &ticks {
        states.push(e.state().encode());
        live.push(e.tick(*t, cmds.clone()).events);
    }
    for (k, bytes) in states.iter().enumerate() {
        let mut restored = Engine::restore(&crate::EngineState::decode(bytes).unwrap());
        let got = seen(play(&mut restored, &ticks[k..]));
        let want = seen(live[k..].to_vec());
        for (t, (g, w)) in got.iter().zip(&want).enumerate() {
            let first = g.iter().zip(w).position(|(a, b)| a != b);
            if let Some(i) = first {
                panic!(
                    "restored at {k}, tick {t}, event {i}: {:?} vs {:?}",
                    &g[i.saturating_sub(1)..i + 2],
                    &w[i.saturating_sub(1)..i + 2]
                );
            }
            assert_eq!(g.len(), w.len(), "restored at {k}, tick {t}");
        }
    }
}

/// §6 rules 1, 3 and 6: the tick of the crossing orders pushes each order's update, both
/// trade records and their completed movements, the public fill, one book batch per market
/// and the tickers; a deposit is pushed when it completes, not when requested.
#[test]
fn a_tick_pushes_orders_trades_movements_fills_and_book_batches() {
    let (e, _, events) = recorded();
    let count =
        |tick: &[EngineEvent], f: fn(&EngineEvent) -> bool| tick.iter().filter(|e| f(e)).count();
    assert_eq!(
        count(&events[0], |e| matches!(e, EngineEvent::Movement(_))),
        0,
        "pending deposits are not pushed"
    );
    assert_eq!(
        count(&events[1], |e| matches!(e, EngineEvent::Movement(_))),
        2,
        "completed deposits are"
    );
    let trading = &events[2];
    let orders: Vec<_> = trading
        .iter()
        .filter_map(|e| match e {
            EngineEvent::Order(o) => Some((o.reference_id.to_string(), o.status)),
            _ => None,
        })
        .filter(|(r, _)| r.len() == 2)
        .collect();
    assert_eq!(
        orders,
        vec![
            ("m1".into(), OrderStatus::Filled),
            ("l1".into(), OrderStatus::Open),
            ("l2".into(), OrderStatus::Open)
        ]
    );
    let trades = count(trading, |e| matches!(e, EngineEvent::Trade(_)));
    let fills = count(trading, |e| matches!(e, EngineEvent::PublicTrade(_)));
    let movements = count(trading, |e| matches!(e, EngineEvent::Movement(_)));
    assert!(
        fills >= 1 && trades == 2 * fills && movements == trades,
        "{trades} {fills} {movements}"
    );
    let books: Vec<_> = trading
        .iter()
        .filter_map(|e| match e {
            EngineEvent::Book { market, .. } => Some(*market),
            _ => None,
        })
        .collect();
    assert_eq!(books, vec![0], "one batch, for the market that changed");
    assert!(trading.contains(&EngineEvent::Ticker(0)));
    // Under the fault plan, about half the six entries were refused before the desk.
    let placed = count(&events[events.len() - 3], |e| {
        matches!(e, EngineEvent::Order(_))
    });
    assert!((1..6).contains(&placed), "{placed} of 6 placed");
    // The hour's advance passes funding: its movements are pushed, and valuation instants.
    let hour = events.last().unwrap();
    assert!(count(hour, |e| matches!(e, EngineEvent::Movement(_))) >= 1);
    assert_eq!(
        count(hour, |e| matches!(e, EngineEvent::Valuation { .. })),
        1,
        "one per tick"
    );
    let view = e.view();
    assert!(view.trading.books[0].bids.len() <= crate::records::depth::STREAM_DEPTH);
}

/// §6 rule 6: applying every batch, in order, to the depth at genesis gives the depth the
/// view publishes after the last tick, on every market.
#[test]
fn the_book_batches_rebuild_every_market_depth() {
    let mut e = Engine::genesis(genesis());
    let mut depths: Vec<Depth> = e
        .view()
        .trading
        .books
        .iter()
        .map(|d| (**d).clone())
        .collect();
    assert!(!depths[0].bids.is_empty(), "the maker quotes at genesis");
    let ticks = script(&mut e);
    for tick in play(&mut e, &ticks) {
        for event in tick {
            if let EngineEvent::Book { market, changes } = event {
                depths[market as usize] = apply(&depths[market as usize], &changes);
            }
        }
    }
    let view = e.view();
    let published: Vec<Depth> = view.trading.books.iter().map(|d| (**d).clone()).collect();
    assert_eq!(depths, published);
}
