//! The projection of ended orders (issue 37): written in the transaction of the ticks that
//! ended them, read by reference (the latest ended order under it), and caught up whole from
//! a recovered engine where a file lacks it.

use perpsim_core::Decimal;
use perpsim_core::entry::OrderEntry;
use perpsim_core::ids::{CustomerCode, PublicKey};
use perpsim_core::instrument::Asset;
use perpsim_core::order::{OrderStatus, OrderType, Side};
use perpsim_systems::command::TransferKind;
use perpsim_systems::{Command, CommandResult, Engine, Outcome};

use perpsim_systems::records::money::MovementStatus;

use super::VERSION_KEY as VERSION_KEY_NAME;
use crate::recovery::tests::{START, fresh, journaled};
use crate::{Holder, Journal, recover};
use perpsim_systems::command::{
    AmendOrder, CancelOrder, CancelTransfer, CreateBroker, CreateCustomer, PlaceOrder,
    RequestTransfer,
};

/// One tick of one command through engine and journal (see `journaled`); its result.
fn tick(journal: &Journal, e: &mut Engine, cmds: Vec<Command>, project: bool) -> CommandResult {
    let out = journaled(journal, e, (START, cmds), project);
    out.results()
        .into_iter()
        .next()
        .expect("one command a tick")
}

fn limit(reference: &str, price: i64) -> Box<OrderEntry> {
    Box::new(OrderEntry {
        amount: Some(Decimal::ONE),
        limit_price: Some(Decimal::from(price)),
        ..OrderEntry::new(Side::Buy, OrderType::Limit, reference.to_owned())
    })
}

fn place(customer: CustomerCode, reference: &str, price: i64) -> Command {
    Command::PlaceOrder(PlaceOrder {
        customer,
        symbol: "BTC-USDC-PERP".into(),
        entry: limit(reference, price),
    })
}

fn cancel(customer: CustomerCode, reference: &str) -> Command {
    Command::CancelOrder(CancelOrder {
        customer,
        reference_id: reference.into(),
    })
}

/// A broker and one customer with 1 000 000 USDC, journaled.
fn funded(journal: &Journal, e: &mut Engine) -> CustomerCode {
    let brokers = e.view().brokers.len() as u8;
    let broker = Command::CreateBroker(CreateBroker {
        name: format!("b{brokers}"),
        public_key: PublicKey([3 + brokers; 32]),
    });
    let Ok(Outcome::Broker(b)) = tick(journal, e, vec![broker], true) else {
        panic!("a broker")
    };
    let create = Command::CreateCustomer(CreateCustomer {
        broker: b.code,
        external_id: None,
    });
    let Ok(Outcome::Customer(c)) = tick(journal, e, vec![create], true) else {
        panic!("a customer")
    };
    let deposit = Command::RequestTransfer(RequestTransfer {
        customer: c.code,
        kind: TransferKind::Deposit,
        asset: Asset::Usdc,
        amount: Decimal::from(1_000_000),
        delay_ms: 0,
    });
    tick(journal, e, vec![deposit], true).unwrap();
    c.code
}

fn ended(journal: &Journal, customer: CustomerCode, reference: &str) -> Option<(i64, OrderStatus)> {
    let projection = journal.projection().unwrap();
    let o = projection.ended_order(customer, reference).unwrap()?;
    let price = o.limit_price.unwrap().try_into().unwrap();
    Some((price, o.status))
}

#[test]
fn a_ticks_ended_orders_are_projected_with_it_and_a_read_finds_the_latest_under_a_reference() {
    let (_dir, journal, mut e) = fresh();
    let c = funded(&journal, &mut e);
    assert_eq!(ended(&journal, c, "a"), None, "nothing ended yet");
    tick(&journal, &mut e, vec![place(c, "a", 59_000)], true).unwrap();
    assert_eq!(ended(&journal, c, "a"), None, "a live order is the view's");
    tick(&journal, &mut e, vec![cancel(c, "a")], true).unwrap();
    tick(&journal, &mut e, vec![place(c, "a", 58_000)], true).unwrap();
    assert_eq!(
        ended(&journal, c, "a"),
        Some((59_000, OrderStatus::Canceled)),
        "the live one under the reference is read from the view; this is the one before"
    );
    tick(&journal, &mut e, vec![cancel(c, "a")], true).unwrap();
    assert_eq!(
        ended(&journal, c, "a"),
        Some((58_000, OrderStatus::Canceled))
    );
    assert_eq!(ended(&journal, c, "zzz"), None);
    assert_eq!(journal.projected_through().unwrap(), e.counters().ticks);
}

#[test]
fn recovery_projects_what_a_file_written_without_the_projection_lacks() {
    let (_dir, journal, mut e) = fresh();
    let c = funded(&journal, &mut e);
    let projected = e.counters().ticks;
    journal.write_snapshot(projected, e.encode_state()).unwrap();
    // A scenario replay's ticks: journaled, not projected; a snapshot after them.
    tick(&journal, &mut e, vec![place(c, "a", 59_000)], false).unwrap();
    tick(&journal, &mut e, vec![cancel(c, "a")], false).unwrap();
    tick(&journal, &mut e, vec![place(c, "b", 58_000)], false).unwrap();
    journal
        .write_snapshot(e.counters().ticks, e.encode_state())
        .unwrap();
    assert_eq!(journal.projected_through().unwrap(), projected);
    assert_eq!(ended(&journal, c, "a"), None);
    let recovered = recover(&journal).unwrap().unwrap();
    assert_eq!(
        recovered.snapshot.map(|s| s.tick),
        Some(projected),
        "from the snapshot the projection covers, not the newest"
    );
    assert_eq!(
        recovered.projected, 2,
        "the cancelled order, and the deposit's row completed in the first of those ticks"
    );
    assert_eq!(recovered.engine.state_hash(), e.state_hash());
    let ticks = recovered.engine.counters().ticks;
    assert_eq!(journal.projected_through().unwrap(), ticks);
    assert_eq!(
        ended(&journal, c, "a"),
        Some((59_000, OrderStatus::Canceled))
    );
    // Complete now: the next recovery starts from the newest snapshot and projects nothing.
    let again = recover(&journal).unwrap().unwrap();
    assert_eq!(
        (again.snapshot.map(|s| s.tick), again.projected),
        (Some(ticks), 0)
    );
    // The service's ticks extend it from there.
    let mut e = recovered.engine;
    tick(&journal, &mut e, vec![cancel(c, "b")], true).unwrap();
    assert_eq!(
        ended(&journal, c, "b"),
        Some((58_000, OrderStatus::Canceled))
    );
}

#[test]
#[should_panic(expected = "the projection is complete through the last tick")]
fn extending_a_projection_that_is_behind_is_refused() {
    let (_dir, journal, mut e) = fresh();
    let c = funded(&journal, &mut e);
    tick(&journal, &mut e, vec![place(c, "a", 59_000)], false).unwrap();
    tick(&journal, &mut e, vec![cancel(c, "a")], true).unwrap();
}

/// A random session of three customers reusing a few references (placing, crossing, market
/// orders, amends, cancels): after every tick, each reference reads — the live order from the
/// view, else the projection — exactly what the engine knows of it: its open order, else the
/// latest order that ended under it, whose status a cancel's 409 names (the engine, which
/// keeps nothing of ended orders' references, finds none open).
#[test]
fn every_reference_reads_from_view_and_projection_what_the_engine_knows_of_it() {
    references_session(None);
}

/// The same with every commit's rows waiting in the projection's backlog and a few projected
/// a commit: a read finds an ended order in the backlog as in the table.
#[test]
fn every_reference_reads_the_same_while_the_projection_is_behind_the_journal() {
    references_session(Some(BACKLOGGED));
}

/// The same with a server's commits lingering in the backlog, four at a time: a read finds
/// the rows of the commits that wait there as it finds them projected.
#[test]
fn every_reference_reads_the_same_while_commits_linger_in_the_backlog() {
    references_session(Some(crate::backlog::Limits {
        linger: 4,
        ..crate::backlog::Limits::default()
    }));
}

/// Every commit's rows wait in the backlog, and each commit projects five writes of it (or a
/// 64th).
const BACKLOGGED: crate::backlog::Limits = crate::backlog::Limits {
    inline: 0,
    slice: 5,
    linger: 1,
};

fn backlogged(journal: &Journal) {
    journal.set_backlog_limits(BACKLOGGED);
}

fn references_session(backlog: Option<crate::backlog::Limits>) {
    use perpsim_core::rng::SimRng;
    use std::collections::BTreeMap;
    let (_dir, journal, mut e) = fresh();
    if let Some(limits) = backlog {
        journal.set_backlog_limits(limits);
    }
    let customers: Vec<CustomerCode> = (0..3).map(|_| funded(&journal, &mut e)).collect();
    let mut rng = SimRng::from_seed(37);
    // The oracle: per reference, the latest ended order as the ticks handed them out.
    let mut ended_oracle: BTreeMap<(CustomerCode, String), perpsim_systems::records::order::Order> =
        BTreeMap::new();
    let projection = journal.projection().unwrap();
    for _ in 0..300 {
        let commands: Vec<Command> = (0..1 + rng.next_u64() % 4)
            .map(|_| random_command(&mut rng, &customers))
            .collect();
        let out = journaled(&journal, &mut e, (START, commands), true);
        for o in &out.ended {
            ended_oracle.insert((o.customer, o.reference_id.to_string()), (**o).clone());
        }
        let view = e.view();
        let mut probes = Vec::new();
        for &customer in &customers {
            for r in (0..6).map(|i| format!("r{i}")) {
                let live = view.trading.live_order_by_ref(customer, &r);
                let engine_open = e.order_by_ref(customer, &r).filter(|o| o.is_open());
                assert_eq!(live.map(|o| o.id), engine_open.map(|o| o.id), "{r}");
                let ended = projection.ended_order(customer, &r).unwrap();
                assert_eq!(
                    ended.as_ref(),
                    ended_oracle.get(&(customer, r.clone())),
                    "{r}"
                );
                if live.is_none() {
                    probes.push(cancel(customer, &r));
                }
            }
        }
        // Where the view holds no live order the engine finds none open either, and the
        // server names its answer from the projection (asked of a copy: nothing changes).
        let answers = Engine::restore(&e.state()).tick(START, probes).results();
        for answer in answers {
            let refused = answer.unwrap_err();
            assert!(perpsim_core::order::is_not_open(&refused), "{refused:?}");
        }
    }
    assert!(
        ended_oracle.len() > 10,
        "the session ended orders under many references"
    );
    let behind = journal.projected_through().unwrap() < journal.last_tick().unwrap();
    assert_eq!(
        behind,
        backlog.is_some(),
        "the projection is behind only with a backlog"
    );
}

/// A server's commits linger (`Journal::set_projection_linger`): each commit's rows wait in
/// the backlog until four commits' do, and the next commit projects them all in its own
/// transaction, which moves the projection's mark past them; an idle writer's
/// `project_due` takes nothing before then, and `project_backlog` (the writer after a quiet
/// spell, a snapshot, a stop) takes everything.
#[test]
fn lingering_commits_are_projected_together_once_enough_wait() {
    let (_dir, journal, mut e) = fresh();
    let c = funded(&journal, &mut e);
    journal.set_projection_linger(4);
    let mark = || journal.projected_through().unwrap();
    let start = mark();
    let mut marks = Vec::new();
    for i in 0..9 {
        let r = format!("r{i}");
        tick(&journal, &mut e, vec![place(c, &r, 59_000)], true).unwrap();
        if i == 2 {
            assert!(!journal.project_due().unwrap(), "three commits are not due");
        }
        marks.push(mark() - start);
    }
    // Each commit checks what waits before its own rows join: the fifth projects four.
    assert_eq!(marks, [0, 0, 0, 0, 4, 4, 4, 4, 8]);
    assert!(
        !journal.project_due().unwrap(),
        "the ninth commit's rows wait alone"
    );
    while journal.project_backlog().unwrap() {}
    assert_eq!(mark() - start, 9);
    assert_eq!(journal.backlog(), 0);
}

#[test]
#[should_panic(expected = "outside 1..=256")]
fn a_linger_beyond_its_bound_is_refused() {
    let (_dir, journal, _) = fresh();
    journal.set_projection_linger(257);
}

fn random_command(rng: &mut perpsim_core::rng::SimRng, customers: &[CustomerCode]) -> Command {
    let customer = customers[(rng.next_u64() % customers.len() as u64) as usize];
    let reference = format!("r{}", rng.next_u64() % 6);
    let price = 59_990 + (rng.next_u64() % 21) as i64;
    let side = if rng.next_u64().is_multiple_of(2) {
        Side::Buy
    } else {
        Side::Sell
    };
    let amount = Decimal::new(1 + (rng.next_u64() % 3) as i64, 2);
    let entry = |kind, limit_price| {
        Command::PlaceOrder(PlaceOrder {
            customer,
            symbol: "BTC-USDC-PERP".into(),
            entry: Box::new(OrderEntry {
                amount: Some(amount),
                limit_price,
                ..OrderEntry::new(side, kind, reference.clone())
            }),
        })
    };
    match rng.next_u64() % 5 {
        0 | 1 => entry(OrderType::Limit, Some(Decimal::from(price))),
        2 => entry(OrderType::Market, None),
        3 => Command::AmendOrder(AmendOrder {
            customer,
            reference_id: reference,
            amend: perpsim_core::entry::Amend {
                limit_price: Some(Decimal::from(price)),
                ..perpsim_core::entry::Amend::default()
            },
        }),
        _ => cancel(customer, &reference),
    }
}

/// One holder's list, whole, newest three, and cut by a bound and a limit both ways, as the
/// projection reads it, against `mine` (the engine's log filtered, in sequence order).
fn assert_list_matches<T: crate::history::Listed>(
    read: &crate::Rows<T>,
    list: (Holder, Option<u32>),
    mine: &[u64],
) {
    use std::ops::Bound;
    let all = (Bound::Unbounded, Bound::Unbounded);
    assert_eq!(read.seqs(list, all, false, usize::MAX).unwrap(), mine);
    let newest: Vec<u64> = mine.iter().rev().take(3).copied().collect();
    assert_eq!(read.seqs(list, all, true, 3).unwrap(), newest);
    let Some(&mid) = mine.get(mine.len() / 2) else {
        return;
    };
    let after: Vec<u64> = mine.iter().filter(|&&s| s > mid).take(2).copied().collect();
    let range = (Bound::Excluded(mid), Bound::Unbounded);
    assert_eq!(read.seqs(list, range, false, 2).unwrap(), after);
    let upto: Vec<u64> = mine.iter().filter(|&&s| s <= mid).rev().copied().collect();
    let range = (Bound::Unbounded, Bound::Included(mid));
    assert_eq!(read.seqs(list, range, true, usize::MAX).unwrap(), upto);
}

/// Every projected movement, trade record and public fill as the engine holds it, a trade
/// found by its code, and each holder's lists (all markets, and each market's trades) equal to the
/// engine's logs filtered.
fn assert_history_matches(journal: &Journal, e: &Engine, holders: &[Holder]) {
    let projection = journal.projection().unwrap();
    let (movements, trades) = (
        projection.movements().unwrap(),
        projection.trades().unwrap(),
    );
    assert_eq!(movements.count().unwrap(), e.movements().len() as u64);
    assert_eq!(trades.count().unwrap(), e.trades().len() as u64);
    for m in e.movements().iter() {
        assert_eq!(movements.get(m.seq.0).unwrap().as_ref(), Some(m));
    }
    for t in e.trades().iter() {
        assert_eq!(trades.get(t.seq.0).unwrap().as_ref(), Some(t));
        assert_eq!(trades.by_code(t.code).unwrap(), Some(t.seq.0));
    }
    let (fills, held) = (projection.fills().unwrap(), e.fills());
    assert_eq!(fills.count().unwrap(), held.len() as u64);
    for f in held.iter() {
        assert_eq!(fills.get(f.seq.0).unwrap().as_ref(), Some(f));
    }
    let holds = |h: Holder, customer: CustomerCode, broker| match h {
        Holder::Customer(c) => customer == c,
        Holder::Broker(b) => broker == b,
    };
    for &h in holders {
        let mine: Vec<u64> = e
            .movements()
            .iter()
            .filter(|m| holds(h, m.customer, m.broker))
            .map(|m| m.seq.0)
            .collect();
        assert_list_matches(&movements, (h, None), &mine);
        for market in [None, Some(0), Some(1)] {
            let mine: Vec<u64> = e
                .trades()
                .iter()
                .filter(|t| holds(h, t.customer, t.broker) && market.is_none_or(|m| t.market == m))
                .map(|t| t.seq.0)
                .collect();
            assert_list_matches(&trades, (h, market), &mine);
        }
    }
}

/// A random session of deposits and withdrawals that complete later (some cancelled
/// meanwhile), trades and their fees: after every tick the projection holds every movement
/// and trade record exactly as the engine does — a transfer's row rewritten when it
/// completes — and each customer's and broker's lists are the engine's logs filtered.
#[test]
fn every_movement_trade_and_history_list_reads_from_the_projection_as_the_engine_holds_it() {
    history_session(false);
}

/// The same with every commit's rows waiting in the projection's backlog, a few projected a
/// commit, so reads merge the backlog with the tables at every tick; drained, the tables
/// alone hold the same; and a crash with a backlog loses nothing: recovery projects what
/// the tables lacked (issue 37: kill -9 between the journal's commit and the projection).
#[test]
fn every_history_list_reads_the_same_while_the_projection_is_behind_and_after_a_crash() {
    let (dir, journal, e, holders) = history_session(true);
    let path = dir.path().join("journal.redb");
    let last = journal.last_tick().unwrap();
    assert!(journal.projected_through().unwrap() < last);
    assert!(journal.backlog() > 0);
    drop(journal);
    let reopened = Journal::open(&path).unwrap();
    let recovered = recover(&reopened).unwrap().unwrap();
    assert_eq!(recovered.engine.state_hash(), e.state_hash());
    assert!(
        recovered.projected > 0,
        "recovery projected the backlog's rows"
    );
    assert_eq!(reopened.projected_through().unwrap(), last);
    assert_history_matches(&reopened, &e, &holders);
    drop(reopened);
    // Drained by the writer instead: the tables alone hold every row.
    let (_dir, journal, e, holders) = history_session(true);
    while journal.project_backlog().unwrap() {}
    assert_eq!(journal.backlog(), 0);
    assert_eq!(
        journal.projected_through().unwrap(),
        journal.last_tick().unwrap()
    );
    assert_history_matches(&journal, &e, &holders);
}

/// A random session of transfers and trades (see above), checked after every tick; the
/// journal, engine and holders it leaves.
fn history_session(backlog: bool) -> (tempfile::TempDir, Journal, Engine, Vec<Holder>) {
    use perpsim_core::rng::SimRng;
    use perpsim_core::time::SECOND_MS;
    let (dir, journal, mut e) = fresh();
    if backlog {
        backlogged(&journal);
    }
    let customers: Vec<CustomerCode> = (0..3).map(|_| funded(&journal, &mut e)).collect();
    let mut holders: Vec<Holder> = customers.iter().map(|&c| Holder::Customer(c)).collect();
    holders.extend(e.view().brokers.keys().map(|&b| Holder::Broker(b)));
    let mut rng = SimRng::from_seed(41);
    let mut pending = Vec::new();
    let mut now = START;
    for _ in 0..120 {
        now = now.plus_millis(SECOND_MS);
        let mut commands: Vec<Command> = (0..1 + rng.next_u64() % 3)
            .map(|_| random_command(&mut rng, &customers))
            .collect();
        let customer = customers[(rng.next_u64() % 3) as usize];
        commands.push(match rng.next_u64() % 3 {
            0 if !pending.is_empty() => Command::CancelTransfer(CancelTransfer {
                code: pending.swap_remove(0),
            }),
            k => Command::RequestTransfer(RequestTransfer {
                customer,
                kind: [TransferKind::Deposit, TransferKind::Withdrawal][k as usize % 2],
                asset: Asset::Usdc,
                amount: Decimal::from(1 + rng.next_u64() % 50),
                delay_ms: (rng.next_u64() % 4) as i64 * SECOND_MS,
            }),
        });
        let out = journaled(&journal, &mut e, (now, commands), true);
        pending.extend(out.results().iter().filter_map(|r| match r {
            Ok(Outcome::Movement(m)) if m.status == MovementStatus::Pending => Some(m.code),
            _ => None,
        }));
        assert_history_matches(&journal, &e, &holders);
    }
    let kinds: std::collections::BTreeSet<_> = e.movements().iter().map(|m| m.kind).collect();
    assert!(
        kinds.len() >= 3,
        "deposits, withdrawals and trades: {kinds:?}"
    );
    let ended = |status| e.movements().iter().filter(|m| m.status == status).count();
    assert!(
        ended(MovementStatus::Cancelled) > 0,
        "some transfers were cancelled"
    );
    let rewritten = e
        .movements()
        .iter()
        .filter(|m| m.status == MovementStatus::Completed && m.updated_at > m.created_at)
        .count();
    assert!(
        rewritten > 10,
        "{rewritten} rows completed after they were made"
    );
    (dir, journal, e, holders)
}

/// Makes the projection look written before it had a version (the ended orders' only).
fn forget_version(journal: &Journal) {
    journal
        .write_history(|txn| {
            txn.open_table(crate::journal::META)?
                .remove(VERSION_KEY_NAME)?;
            Ok(())
        })
        .unwrap();
}

/// A projection made before the history lists were projected (no version) counts as none:
/// recovery drops its tables, projects every tick again, and the history reads as the
/// engine holds it.
#[test]
fn a_projection_of_an_earlier_version_is_made_again_by_recovery() {
    let (_dir, journal, mut e) = fresh();
    let (c, ticks) = placed_and_canceled(&journal, &mut e);
    forget_version(&journal);
    assert_eq!(journal.projected_through().unwrap(), 0);
    assert_made_again(&journal, c, ticks);
}

/// A funded customer whose order "a" was placed and canceled, projected; the ticks so far.
fn placed_and_canceled(journal: &Journal, e: &mut Engine) -> (CustomerCode, u64) {
    let c = funded(journal, e);
    tick(journal, e, vec![place(c, "a", 59_000)], true).unwrap();
    tick(journal, e, vec![cancel(c, "a")], true).unwrap();
    let ticks = e.counters().ticks;
    assert_eq!(journal.projected_through().unwrap(), ticks);
    (c, ticks)
}

/// Recovery projects every tick again, and the history reads as the engine holds it.
fn assert_made_again(journal: &Journal, c: CustomerCode, ticks: u64) {
    let recovered = recover(journal).unwrap().unwrap();
    assert!(recovered.projected > 0);
    assert_eq!(journal.projected_through().unwrap(), ticks);
    assert_history_matches(journal, &recovered.engine, &[Holder::Customer(c)]);
    assert_eq!(
        ended(journal, c, "a"),
        Some((59_000, OrderStatus::Canceled))
    );
}

/// Issue 37: history lives in a file of its own, so the journal's commits (which every answer
/// waits on) do not grow with it. A journal whose file still holds a projection (written
/// before the split) drops it when opened, and recovery projects every tick again into the
/// projection's file, which also covers a crash that lost that file's unsynced commits.
#[test]
fn history_lives_beside_the_journal_and_a_projection_in_the_journal_is_made_again() {
    let (dir, journal, mut e) = fresh();
    let (c, ticks) = placed_and_canceled(&journal, &mut e);
    let mark_in_journal = |journal: &Journal| {
        let txn = journal.begin_read().unwrap();
        super::marked(&txn.open_table(crate::journal::META).unwrap()).unwrap()
    };
    assert!(
        !mark_in_journal(&journal),
        "the journal's file holds no projection"
    );
    assert!(dir.path().join("journal-history.redb").exists());
    // The layout before: the projection's mark in the journal's file, no file beside it.
    journal
        .write_durably(|txn| super::mark(txn, ticks))
        .unwrap();
    drop(journal);
    std::fs::remove_file(dir.path().join("journal-history.redb")).unwrap();
    let journal = Journal::open(&dir.path().join("journal.redb")).unwrap();
    assert!(!mark_in_journal(&journal), "opening drops it");
    assert_eq!(journal.projected_through().unwrap(), 0);
    assert_made_again(&journal, c, ticks);
}

/// Empty and inverted ranges (an empty time window, a cursor past the window's end) read as
/// no rows, never an error: the fuzzer's `created_from = created_to` before any movement.
#[test]
fn an_empty_or_inverted_range_of_a_list_is_no_rows() {
    use std::ops::Bound::{Excluded, Included, Unbounded};
    let (_dir, journal, mut e) = fresh();
    let c = funded(&journal, &mut e);
    let read = journal.projection().unwrap().movements().unwrap();
    let list = (Holder::Customer(c), None);
    assert_eq!(
        read.seqs(list, (Unbounded, Unbounded), false, 9).unwrap(),
        vec![0]
    );
    for range in [
        (Excluded(0), Excluded(0)),
        (Included(0), Excluded(0)),
        (Excluded(0), Included(0)),
        (Included(5), Included(3)),
        (Excluded(5), Excluded(3)),
        (Unbounded, Excluded(0)),
        (Excluded(u64::MAX), Unbounded),
    ] {
        for descending in [false, true] {
            assert_eq!(
                read.seqs(list, range, descending, 9).unwrap(),
                Vec::<u64>::new()
            );
        }
    }
}

/// What genesis books (the market maker's funding) is in no tick, yet a transaction list must
/// show it: the first projected tick carries it, served from the start or recovered from
/// genesis (the fuzzer's 500 on a living market's first transaction page).
#[test]
fn genesis_bookings_are_projected_with_the_first_tick_and_by_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::open(&dir.path().join("journal.redb")).unwrap();
    let instruments = perpsim_core::instrument::default_instruments();
    let genesis = perpsim_systems::Genesis {
        seed: 3,
        clock_mode: perpsim_core::clock::ClockMode::Manual,
        start: START,
        simulation: perpsim_core::simulation::Simulation::defaults(&instruments),
        instruments,
    };
    journal.init(&genesis).unwrap();
    let mut e = Engine::genesis(genesis);
    assert!(!e.movements().is_empty(), "the maker is funded at genesis");
    let c = funded(&journal, &mut e);
    assert_history_matches(&journal, &e, &[Holder::Customer(c)]);
    forget_version(&journal);
    let recovered = recover(&journal).unwrap().unwrap();
    assert_eq!(recovered.snapshot, None, "from genesis");
    assert_history_matches(&journal, &recovered.engine, &[Holder::Customer(c)]);
}

/// Issue 37: a server's engine lets go of the movements and trade records its projection
/// holds; the projection has every row, and the engine recovered from its snapshot hashes as
/// one that kept them all — after a crash too, recovered from a snapshot taken before the
/// history crossed a chunk, whose journal tail it replays without projecting it again and
/// then lets go at its first tick.
#[test]
fn history_the_engine_let_go_is_in_the_projection_and_recovery_reaches_the_same_hash() {
    let (_dir, journal, mut e) = fresh();
    let (_other, scratch, mut holding) = fresh();
    let (buyer, seller) = (funded(&journal, &mut e), funded(&journal, &mut e));
    assert_eq!(funded(&scratch, &mut holding), buyer);
    assert_eq!(funded(&scratch, &mut holding), seller);
    holding.set_projecting(false);
    let order = |customer, entry: OrderEntry| {
        Command::PlaceOrder(PlaceOrder {
            customer,
            symbol: "BTC-USDC-PERP".into(),
            entry: Box::new(entry),
        })
    };
    let deposit = Command::RequestTransfer(RequestTransfer {
        customer: buyer,
        kind: TransferKind::Deposit,
        asset: Asset::Usdc,
        amount: Decimal::ONE,
        delay_ms: 0,
    });
    // A bid of 4 BTC, then 35 000 deposits and 35 000 sells of a lot each into it.
    let bid = OrderEntry {
        amount: Some(Decimal::from(4)),
        limit_price: Some(Decimal::from(60_000)),
        ..OrderEntry::new(Side::Buy, OrderType::Limit, "bid")
    };
    let bid = vec![order(buyer, bid)];
    journaled(&journal, &mut e, (START, bid.clone()), true);
    holding.tick(START, bid);
    let early = e.counters().ticks;
    journal.write_snapshot(early, e.encode_state()).unwrap();
    let mut both = |cmds: Vec<Command>| {
        journaled(&journal, &mut e, (START, cmds.clone()), true);
        holding.tick(START, cmds);
    };
    for round in 0..70 {
        let sell = |i| {
            let entry = OrderEntry::new(Side::Sell, OrderType::Market, format!("s{round}-{i}"));
            let lot = Decimal::new(1, 4);
            order(
                seller,
                OrderEntry {
                    amount: Some(lot),
                    ..entry
                },
            )
        };
        both(
            (0..500)
                .map(sell)
                .chain((0..500).map(|_| deposit.clone()))
                .collect(),
        );
    }
    both(vec![]);
    let (all, trades) = (holding.movements(), holding.trades());
    assert_eq!(trades.len(), 70_000);
    assert!(e.movements().first_held() >= 65_536 && all.first_held() == 0);
    assert_eq!(e.trades().first_held(), 65_536);
    assert_eq!(e.state_hash(), holding.state_hash());
    let projection = journal.projection().unwrap();
    let rows = projection.movements().unwrap();
    assert_eq!(rows.count().unwrap(), all.len() as u64);
    for m in all.iter().step_by(97).chain(all.iter().last()) {
        assert_eq!(rows.get(m.seq.0).unwrap().as_ref(), Some(m));
    }
    let rows = projection.trades().unwrap();
    assert_eq!(rows.count().unwrap(), trades.len() as u64);
    for t in trades.iter().step_by(97).chain(trades.iter().last()) {
        assert_eq!(rows.get(t.seq.0).unwrap().as_ref(), Some(t));
    }
    // Killed before the next snapshot: the tail is replayed, and the projection not touched.
    let projected = journal.projected_through().unwrap();
    let mut crashed = recover(&journal).unwrap().unwrap();
    assert_eq!(crashed.snapshot.map(|s| s.tick), Some(early));
    assert_eq!(crashed.engine.state_hash(), holding.state_hash());
    assert_eq!(journal.projected_through().unwrap(), projected);
    crashed.engine.set_projecting(true);
    let out = crashed.engine.tick(START, Vec::new());
    assert!(out.history.is_empty(), "the projection holds the tail");
    assert!(crashed.engine.movements().iter().count() < 65_536);
    assert!(crashed.engine.trades().iter().count() < 65_536);
    journal
        .write_snapshot(e.counters().ticks, e.encode_state())
        .unwrap();
    let recovered = recover(&journal).unwrap().unwrap();
    assert_eq!(recovered.snapshot.map(|s| s.tick), Some(e.counters().ticks));
    assert_eq!(recovered.engine.state_hash(), holding.state_hash());
    assert!(recovered.engine.movements().iter().count() < 65_536);
    assert!(recovered.engine.trades().iter().count() < 65_536);
}

/// Issue 37: notices and margin state changes are projected as history lists — each row
/// by its sequence number, a holder's list (a notice's also per market) in sequence order —
/// and a later tick's rows extend them.
#[test]
fn notices_and_margin_state_changes_are_projected_as_history_lists() {
    use perpsim_core::ids::{BrokerCode, NotificationCode};
    use perpsim_core::risk::MarginState;
    use perpsim_systems::records::history::HandedHistory;
    use perpsim_systems::records::ids::{NoticeSeq, RiskSeq};
    use perpsim_systems::records::risk::{Notification, RiskRecord};
    use perpsim_systems::records::venue::MarketId;

    let (_dir, journal, _) = fresh();
    let uuid = |i: u64| perpsim_core::Uuid::from_u128(u128::from(i));
    let holder = |i: u64| (CustomerCode(uuid(10 + i % 3)), BrokerCode(uuid(20 + i % 2)));
    let notice = |i: u64| Notification {
        seq: NoticeSeq(i),
        code: NotificationCode(uuid(1_000 + i)),
        customer: holder(i).0,
        broker: holder(i).1,
        created_at: START.plus_millis(i as i64),
        market: (i % 2) as MarketId,
        size: Decimal::ONE,
        avg_fill_price: Decimal::from(60_000),
        mark_price: Decimal::from(45_000),
        mark_time: START,
        threshold_pct: 20,
    };
    let change = |i: u64| RiskRecord {
        seq: RiskSeq(i),
        customer: holder(i).0,
        broker: holder(i).1,
        asset: Asset::Usdc,
        state: MarginState::MarginCall,
        margin_deficit: Some(Decimal::from(i)),
        leverage_ratio: Decimal::ONE,
        margin_ratio: Decimal::ONE,
        time: START.plus_millis(i as i64),
    };
    let through = journal.projected_through().unwrap();
    for (tick, rows) in [(0..7u64), (7..20)].into_iter().enumerate() {
        let history = HandedHistory {
            notices: rows.clone().map(notice).collect::<Vec<_>>().into(),
            margin: rows.map(change).collect::<Vec<_>>().into(),
            ..HandedHistory::default()
        };
        let rows = crate::Projected {
            ended: Vec::new(),
            history,
        };
        journal.project(&rows, through + tick as u64 + 1).unwrap();
    }
    let projection = journal.projection().unwrap();
    let (notices, margin) = (
        projection.notices().unwrap(),
        projection.margin_changes().unwrap(),
    );
    assert_eq!(
        (notices.count().unwrap(), margin.count().unwrap()),
        (20, 20)
    );
    for i in 0..20 {
        assert_eq!(notices.get(i).unwrap(), Some(notice(i)));
        assert_eq!(margin.get(i).unwrap(), Some(change(i)));
    }
    let (c, b) = holder(1);
    let of = |f: &dyn Fn(u64) -> bool| (0..20).filter(|&i| f(i)).collect::<Vec<u64>>();
    assert_list_matches(
        &margin,
        (Holder::Customer(c), None),
        &of(&|i| holder(i).0 == c),
    );
    assert_list_matches(
        &margin,
        (Holder::Broker(b), None),
        &of(&|i| holder(i).1 == b),
    );
    let in_market = |i: u64| holder(i).1 == b && i % 2 == 1;
    assert_list_matches(&notices, (Holder::Broker(b), Some(1)), &of(&in_market));
    assert_list_matches(
        &notices,
        (Holder::Customer(c), None),
        &of(&|i| holder(i).0 == c),
    );
}

/// Funding settlements are projected by sequence number with a per-market index: the whole
/// history and each market's list read in order both ways, cut by bounds and limits.
#[test]
fn funding_settlements_are_projected_as_one_list_and_one_per_market() {
    use perpsim_systems::records::funding::FundingRecord;
    use perpsim_systems::records::history::HandedHistory;
    use perpsim_systems::records::ids::FundingSeq;
    use std::ops::Bound;

    let (_dir, journal, _) = fresh();
    let settlement = |i: u64| FundingRecord {
        seq: FundingSeq(i),
        market: (i % 3) as u32,
        rate: Decimal::new(i as i64, 6),
        time: START.plus_millis((i / 3) as i64 * 3_600_000),
        mark_price: Decimal::from(60_000 + i),
    };
    let through = journal.projected_through().unwrap();
    for (tick, rows) in [(0..4u64), (4..14)].into_iter().enumerate() {
        let history = HandedHistory {
            funding: rows.map(settlement).collect::<Vec<_>>().into(),
            ..HandedHistory::default()
        };
        let rows = crate::Projected {
            ended: Vec::new(),
            history,
        };
        journal.project(&rows, through + tick as u64 + 1).unwrap();
    }
    let read = journal.projection().unwrap().fundings().unwrap();
    assert_eq!(read.count().unwrap(), 14);
    for i in 0..14 {
        assert_eq!(read.get(i).unwrap(), Some(settlement(i)));
    }
    let all = (Bound::Unbounded, Bound::Unbounded);
    let every: Vec<u64> = (0..14).collect();
    assert_eq!(
        read.market_seqs(None, all, false, usize::MAX).unwrap(),
        every
    );
    let market_one: Vec<u64> = (0..14).filter(|i| i % 3 == 1).collect();
    assert_eq!(
        read.market_seqs(Some(1), all, false, usize::MAX).unwrap(),
        market_one
    );
    let newest_two = read.market_seqs(Some(1), all, true, 2).unwrap();
    assert_eq!(newest_two, [13, 10]);
    let window = (Bound::Included(4), Bound::Excluded(10));
    assert_eq!(
        read.market_seqs(Some(1), window, true, usize::MAX).unwrap(),
        [7, 4]
    );
    assert_eq!(read.market_seqs(None, window, false, 3).unwrap(), [4, 5, 6]);
    assert_eq!(
        read.market_seqs(Some(7), all, false, usize::MAX).unwrap(),
        Vec::<u64>::new(),
        "a market with no settlement lists none"
    );
}
