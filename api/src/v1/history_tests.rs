//! The transaction, trade, notification and funding-rate lists read from the journal's
//! projection page exactly as the in-memory indexes they replaced did (issue 37): same keys, cursors and
//! has_previous/has_next on every page, forward and back, both sort orders, for every holder,
//! market and time window.

use std::cmp::Reverse;
use std::ops::Bound;

use imbl::OrdSet;
use perpsim_core::Decimal;
use perpsim_core::clock::ClockMode;
use perpsim_core::ids::{BrokerCode, CustomerCode, MovementCode, NotificationCode};
use perpsim_core::ids::{PositionCode, TradeCode};
use perpsim_core::instrument::{Asset, default_instruments};
use perpsim_core::order::Side;
use perpsim_core::rng::SimRng;
use perpsim_core::time::Timestamp;
use perpsim_storage::{Holder, Journal, JournalError, NonceWrites, Projected, Rows, TickRecord};
use perpsim_systems::Genesis;
use perpsim_systems::records::history::HandedHistory;
use perpsim_systems::records::ids::{FillSeq, MovementSeq, NoticeSeq, TradeSeq};
use perpsim_systems::records::money::{Movement, MovementKind, MovementStatus};
use perpsim_systems::records::risk::Notification;
use perpsim_systems::records::trade::{Liquidity, TradeKind, TradeRecord};

use super::history::{ListKeys, SeqKey};
use super::money::{TxKey, seq_window};
use super::trades::window;
use super::{funding, notifications};
use crate::pagination::{CursorKey, Cursors, Keys, Page, PageRequest, Scope, page, page_of};

/// A time window: from and to, inclusive, either open.
type Created = (Option<Timestamp>, Option<Timestamp>);

const START: Timestamp = Timestamp::from_millis(1_767_225_600_000);

fn code(i: u128) -> perpsim_core::Uuid {
    perpsim_core::Uuid::from_u128(i)
}

/// `n` movements of three customers under two brokers, several to a millisecond.
fn movements(n: u64) -> Vec<Movement> {
    (0..n)
        .map(|i| Movement {
            seq: MovementSeq(i),
            code: MovementCode(code(1_000 + i as u128)),
            customer: CustomerCode(code(10 + (i % 3) as u128)),
            broker: BrokerCode(code(20 + (i % 3 == 2) as u128)),
            kind: MovementKind::Deposit,
            status: MovementStatus::Completed,
            asset: Asset::Usdc,
            amount: Decimal::from(i + 1),
            created_at: START.plus_millis(i as i64 / 4),
            updated_at: START.plus_millis(i as i64 / 4),
            balance_after: Some(Decimal::from(i + 1)),
            trade: None,
            periodic: None,
        })
        .collect()
}

/// `n` trade records of the same holders over two markets, several to a millisecond.
fn trades(n: u64) -> Vec<TradeRecord> {
    (0..n)
        .map(|i| TradeRecord {
            seq: TradeSeq(i),
            code: TradeCode(code(5_000 + i as u128)),
            fill: FillSeq(i / 2),
            customer: CustomerCode(code(10 + (i % 3) as u128)),
            broker: BrokerCode(code(20 + (i % 3 == 2) as u128)),
            kind: TradeKind::Trade,
            market: (i % 5 % 2) as u32,
            side: Side::Buy,
            price: Decimal::from(60_000),
            amount: Decimal::ONE,
            fee: Decimal::ZERO,
            realised_pnl: Decimal::ZERO,
            reference_id: None,
            liquidity: Liquidity::Taker,
            position_code: PositionCode(code(9)),
            timestamp: START.plus_millis(i as i64 / 4),
            movement: MovementSeq(i),
        })
        .collect()
}

/// A journal whose projection holds `history`.
fn projected(dir: &std::path::Path, history: HandedHistory) -> Journal {
    let journal = Journal::open(&dir.join("journal.redb")).unwrap();
    let instruments = default_instruments();
    journal
        .init(&Genesis {
            seed: 1,
            clock_mode: ClockMode::Manual,
            start: START,
            simulation: perpsim_core::simulation::Simulation::quiet(&instruments),
            instruments,
        })
        .unwrap();
    let rows = Projected {
        ended: Vec::new(),
        history,
    };
    let tick = TickRecord::encode(START, 0, &[]);
    journal
        .append_batch(1, &[tick], Some(rows), NonceWrites::default())
        .unwrap();
    journal
}

/// `n` depreciation notices of the same holders over two markets, several to a millisecond.
fn notices(n: u64) -> Vec<Notification> {
    (0..n)
        .map(|i| Notification {
            seq: NoticeSeq(i),
            code: NotificationCode(code(8_000 + i as u128)),
            customer: CustomerCode(code(10 + (i % 3) as u128)),
            broker: BrokerCode(code(20 + (i % 3 == 2) as u128)),
            created_at: START.plus_millis(i as i64 / 4),
            market: (i % 5 % 2) as u32,
            size: Decimal::ONE,
            avg_fill_price: Decimal::from(60_000),
            mark_price: Decimal::from(45_000),
            mark_time: START,
            threshold_pct: 20,
        })
        .collect()
}

/// The window as the in-memory index cut it: a binary search over the rows' times.
fn oracle_window(
    rows: &[Movement],
    (from, to): (Option<Timestamp>, Option<Timestamp>),
) -> (std::ops::Bound<TxKey>, std::ops::Bound<TxKey>) {
    use std::ops::Bound;
    let lo = from.map_or(0, |f| rows.partition_point(|m| m.created_at < f)) as u64;
    let end = to.map_or(rows.len(), |t| rows.partition_point(|m| m.created_at <= t)) as u64;
    if lo >= end {
        let none = Reverse(MovementSeq(0));
        return (Bound::Excluded(none), Bound::Excluded(none));
    }
    (
        Bound::Included(Reverse(MovementSeq(end - 1))),
        Bound::Included(Reverse(MovementSeq(lo))),
    )
}

fn same<K: CursorKey + std::fmt::Debug>(a: &Page<K>, b: &Page<K>) {
    assert_eq!(a.keys, b.keys);
    assert_eq!(a.metadata, b.metadata);
}

const HOLDERS: [Holder; 5] = [
    Holder::Customer(CustomerCode(perpsim_core::Uuid::from_u128(10))),
    Holder::Customer(CustomerCode(perpsim_core::Uuid::from_u128(12))),
    Holder::Customer(CustomerCode(perpsim_core::Uuid::from_u128(99))),
    Holder::Broker(BrokerCode(perpsim_core::Uuid::from_u128(20))),
    Holder::Broker(BrokerCode(perpsim_core::Uuid::from_u128(21))),
];

fn holds(h: Holder, customer: CustomerCode, broker: BrokerCode) -> bool {
    match h {
        Holder::Customer(c) => customer == c,
        Holder::Broker(b) => broker == b,
    }
}

/// A time window of one of four shapes inside the rows' span.
fn random_window(rng: &mut SimRng) -> (Option<Timestamp>, Option<Timestamp>) {
    let at = |r: &mut SimRng| START.plus_millis((r.next_u64() % 110) as i64);
    match rng.next_u64() % 4 {
        0 => (None, None),
        1 => (Some(at(rng)), None),
        2 => (None, Some(at(rng))),
        _ => (Some(at(rng)), Some(at(rng))),
    }
}

/// Walks the list from its first page to its end and back, comparing every page of the
/// projection's `keys` with the in-memory `set`'s; how many pages it compared.
fn walk<K: CursorKey + std::fmt::Debug, S: Keys<K, Error = perpsim_storage::JournalError>>(
    (set, keys): (&OrdSet<K>, &S),
    window: (std::ops::Bound<K>, std::ops::Bound<K>),
    limit: u32,
    desc: bool,
) -> usize {
    let cursors = Cursors::new([7; 32]);
    let scope = Scope {
        list: "history",
        broker: BrokerCode(code(20)),
        filters: "",
    };
    let request = |after: Option<&str>, before: Option<&str>| {
        PageRequest::<K>::parse(&cursors, &scope, Some(limit), after, before).unwrap()
    };
    let cut = |req: &PageRequest<K>| {
        let expected = match desc {
            false => page(set, window.clone(), req, &cursors, &scope),
            true => {
                let Ok(p) = page_of(set, window.clone(), req, (&cursors, &scope), true);
                p
            }
        };
        let got = page_of(keys, window.clone(), req, (&cursors, &scope), desc).unwrap();
        same(&got, &expected);
        got
    };
    let mut pages = 1;
    let mut p = cut(&request(None, None));
    while p.metadata.has_next {
        p = cut(&request(p.metadata.end_cursor.as_deref(), None));
        pages += 1;
    }
    while p.metadata.has_previous {
        p = cut(&request(None, p.metadata.start_cursor.as_deref()));
        pages += 1;
    }
    pages
}

#[test]
fn every_page_of_every_transaction_list_reads_from_the_projection_as_from_its_old_index() {
    let dir = tempfile::tempdir().unwrap();
    let rows = movements(400);
    let history = HandedHistory {
        movements: rows.clone().into(),
        ..HandedHistory::default()
    };
    let journal = projected(dir.path(), history);
    let read = journal.projection().unwrap().movements().unwrap();
    let mut rng = SimRng::from_seed(37);
    let mut pages = 0;
    for round in 0..60 {
        let holder = HOLDERS[round % HOLDERS.len()];
        let set: OrdSet<TxKey> = rows
            .iter()
            .filter(|m| holds(holder, m.customer, m.broker))
            .map(|m| Reverse(m.seq))
            .collect();
        let created = random_window(&mut rng);
        let window = seq_window(&read, created).unwrap();
        assert_eq!(window, oracle_window(&rows, created), "{created:?}");
        let keys = ListKeys {
            read: &read,
            list: (holder, None),
        };
        let limit = 1 + (rng.next_u64() % 25) as u32;
        pages += walk((&set, &keys), window, limit, false);
    }
    assert!(pages > 200, "{pages} pages compared");
}

/// What a per-market list's oracle reads of a row: its holders, market, time and seq.
type Filing = (CustomerCode, BrokerCode, u32, Timestamp, u64);

/// Walks 90 random lists of `rows` (holder, every market or one, time window), each with the
/// projection's `window` checked against a search of the rows' times; how many pages it
/// compared. `desc` says which rounds walk newest first.
fn walk_market_lists<T: perpsim_storage::Listed, K: SeqKey + std::fmt::Debug>(
    (rows, read): (&[T], &Rows<T>),
    filing: impl Fn(&T) -> Filing,
    window: impl Fn(&Rows<T>, Created) -> Result<(Bound<K>, Bound<K>), JournalError>,
    (seed, desc): (u64, impl Fn(usize) -> bool),
) -> usize {
    let mut rng = SimRng::from_seed(seed);
    let mut pages = 0;
    for round in 0..90 {
        let holder = HOLDERS[round % HOLDERS.len()];
        let market = [None, Some(0), Some(1)][round % 3];
        let set: OrdSet<K> = rows
            .iter()
            .map(&filing)
            .filter(|&(c, b, ..)| holds(holder, c, b))
            .filter(|&(_, _, m, ..)| market.is_none_or(|want| m == want))
            .map(|(.., seq)| K::from_seq(seq))
            .collect();
        let created = random_window(&mut rng);
        let bounds = window(read, created).unwrap();
        let time = |r: &T| filing(r).3;
        let lo = created
            .0
            .map_or(0, |f| rows.partition_point(|r| time(r) < f)) as u64;
        let end = created
            .1
            .map_or(rows.len(), |t| rows.partition_point(|r| time(r) <= t));
        let end = end as u64;
        let expected = (
            Bound::Included(K::from_seq(lo)),
            Bound::Excluded(K::from_seq(end.max(lo))),
        );
        assert_eq!(bounds, expected, "{created:?}");
        let keys = ListKeys {
            read,
            list: (holder, market),
        };
        let limit = 1 + (rng.next_u64() % 25) as u32;
        pages += walk((&set, &keys), bounds, limit, desc(round));
    }
    pages
}

#[test]
fn every_page_of_every_trade_list_reads_from_the_projection_as_from_its_old_index() {
    let dir = tempfile::tempdir().unwrap();
    let rows = trades(400);
    let history = HandedHistory {
        trades: rows.clone().into(),
        ..HandedHistory::default()
    };
    let journal = projected(dir.path(), history);
    let read = journal.projection().unwrap().trades().unwrap();
    let filing = |t: &TradeRecord| (t.customer, t.broker, t.market, t.timestamp, t.seq.0);
    let trade_window = |read: &Rows<TradeRecord>, (from, to): Created| window(read, from, to);
    let pages = walk_market_lists((&rows, &read), filing, trade_window, (38, |r| r % 2 == 0));
    assert!(pages > 300, "{pages} pages compared");
    for t in rows.iter().step_by(37) {
        assert_eq!(read.by_code(t.code).unwrap(), Some(t.seq.0));
    }
}

/// Issue 37: the notification lists (every holder, every market or one, any time window,
/// newest first) read from the projection page for page as from the read view's index did.
#[test]
fn every_page_of_every_notification_list_reads_from_the_projection_as_from_its_old_index() {
    let dir = tempfile::tempdir().unwrap();
    let rows = notices(400);
    let history = HandedHistory {
        notices: rows.clone().into(),
        ..HandedHistory::default()
    };
    let journal = projected(dir.path(), history);
    let read = journal.projection().unwrap().notices().unwrap();
    let filing = |n: &Notification| (n.customer, n.broker, n.market, n.created_at, n.seq.0);
    let pages = walk_market_lists(
        (&rows, &read),
        filing,
        notifications::window,
        (39, |_| true),
    );
    assert!(pages > 300, "{pages} pages compared");
    for n in rows.iter().step_by(37) {
        assert_eq!(read.get(n.seq.0).unwrap().as_ref(), Some(n));
    }
}

/// Issue 37: the funding-rate lists (every market or one, any `start`/`end` window, newest
/// first) read from the projection page for page as from the read view's index did.
#[test]
fn every_page_of_every_funding_rate_list_reads_from_the_projection_as_from_its_old_index() {
    use perpsim_systems::records::funding::FundingRecord;
    use perpsim_systems::records::ids::FundingSeq;

    let dir = tempfile::tempdir().unwrap();
    // Three markets settling each hour, one skipping every fifth (no preliminary rate).
    let rows: Vec<FundingRecord> = (0..600u64)
        .filter(|i| i % 5 != 4 || i % 3 != 2)
        .enumerate()
        .map(|(seq, i)| FundingRecord {
            seq: FundingSeq(seq as u64),
            market: (i % 3) as u32,
            rate: Decimal::new(i as i64 - 300, 7),
            time: START.plus_millis((i / 3) as i64 * 3_600_000),
            mark_price: Decimal::from(60_000 + i),
        })
        .collect();
    let history = HandedHistory {
        funding: rows.clone().into(),
        ..HandedHistory::default()
    };
    let journal = projected(dir.path(), history);
    let read = journal.projection().unwrap().fundings().unwrap();
    let mut rng = SimRng::from_seed(41);
    let hour = |r: &mut SimRng| (r.next_u64() % 210) as i64 * 3_600_000 + START.millis();
    let mut pages = 0;
    for round in 0..80 {
        let market = [None, Some(0), Some(1), Some(2)][round % 4];
        let set: OrdSet<FundingSeq> = rows
            .iter()
            .filter(|r| market.is_none_or(|m| r.market == m))
            .map(|r| r.seq)
            .collect();
        let (start, end) = match rng.next_u64() % 4 {
            0 => (None, None),
            1 => (Some(hour(&mut rng)), None),
            2 => (None, Some(hour(&mut rng))),
            _ => (Some(hour(&mut rng)), Some(hour(&mut rng))),
        };
        let bounds = funding::window(&read, start, end).unwrap();
        let first_at = |ms: i64| rows.partition_point(|r| r.time.millis() < ms) as u64;
        let lo = start.map_or(0, first_at);
        let hi = end.map_or(rows.len() as u64, first_at).max(lo);
        let expected = (
            Bound::Included(FundingSeq(lo)),
            Bound::Excluded(FundingSeq(hi)),
        );
        assert_eq!(bounds, expected, "{start:?}..{end:?}");
        let keys = funding::MarketKeys {
            read: &read,
            market,
        };
        let limit = 1 + (rng.next_u64() % 25) as u32;
        pages += walk((&set, &keys), bounds, limit, true);
    }
    assert!(pages > 300, "{pages} pages compared");
}
