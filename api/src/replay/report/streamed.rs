//! The run's history as it leaves the engine (issue 36 item 4): `ledger.csv` and `trades.csv`
//! written, and what the report counts of the logs tallied, on a thread beside the engine as
//! each batch of ticks hands its rows out. The engine then holds a window of each log rather
//! than the whole run (a day of a million orders held a gigabyte of rows, whose fresh pages
//! were a fifth of the run's time), and the report makes no pass over them at the end.
//!
//! Rows come as the engine hands them out (`HandedHistory`): each once, in sequence order,
//! and a ledger movement again each time it changes (a pending transfer when it completes or
//! is cancelled). `ledger.csv` lists every movement once, as the run leaves it, in ledger
//! order: a movement is written once it can no longer change (any but a pending transfer),
//! and the rows after a pending one wait for it: the rows of a transfer delay, or, for a
//! transfer still pending when the run ends, the rest of the run (no more than the engine
//! held before).

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::Receiver;

use perpsim_core::Decimal;
use perpsim_core::ids::CustomerCode;
use perpsim_core::instrument::Asset;
use perpsim_core::time::Timestamp;
use perpsim_systems::EndedRun;
use perpsim_systems::records::funding::FundingRecord;
use perpsim_systems::records::history::HandedHistory;
use perpsim_systems::records::ids::FillSeq;
use perpsim_systems::records::money::{Movement, MovementKind, MovementStatus};
use perpsim_systems::records::risk::Notification;
use perpsim_systems::records::trade::{PublicFill, TradeKind, TradeRecord};
use perpsim_systems::records::venue::MarketId;

use super::money::Flows;
use super::tables::{self, Csv};

/// What a batch of ticks hands the tables' writer, in this order: the customers they created
/// (code and name), the markets' symbols by id, the history rows they made or changed, and
/// the runs of ended orders whose digest is owed.
#[derive(Default)]
pub struct Batch {
    pub names: Vec<(CustomerCode, String)>,
    pub symbols: Vec<String>,
    pub rows: HandedHistory,
    /// The ended orders whose digest the engine owes, in the order they ended: settled here.
    pub ended: Vec<Arc<EndedRun>>,
}

/// The tables written and what the report counts of the logs.
pub struct Streamed {
    /// SHA-256 of `ledger.csv` and of `trades.csv`, in hex.
    pub ledger: String,
    pub trades: String,
    pub tallies: LogTallies,
}

/// A customer's money per currency: its rows' flows, and its completed transfers as (time,
/// signed amount) in time order.
pub type Money = BTreeMap<Asset, (Flows, Vec<(Timestamp, Decimal)>)>;

/// What the report counts of the logs: per customer, trades by kind (all, liquidation
/// fills, auto-deleveraging fills), money and depreciation notices; per market, its fills.
#[derive(Default)]
pub struct LogTallies {
    pub trades: BTreeMap<CustomerCode, [usize; 3]>,
    pub money: BTreeMap<CustomerCode, Money>,
    pub notices: BTreeMap<CustomerCode, usize>,
    /// Auto-deleveraging fills, each once (both its trade records name the fill), and the
    /// first [`TOLD_DELEVERAGING`] records of them.
    pub auto_deleveraging_fills: usize,
    last_deleveraging: Option<FillSeq>,
    pub deleveraged: Vec<Deleveraged>,
    /// By market id (none past the last market that traded).
    pub markets: Vec<MarketTally>,
}

/// A market's public fills (how many, Σ amount in contracts, Σ price × amount), and the
/// report's chart marks as (time, price), in the order they were made: its liquidation
/// fills and its auto-deleveraging fills (each fill once), its depreciation notices and its
/// funding settlements.
#[derive(Debug, Clone, Default)]
pub struct MarketTally {
    pub fills: usize,
    pub volume: Decimal,
    pub notional: Decimal,
    pub liquidation_fills: Vec<(Timestamp, Decimal)>,
    pub deleveraging_fills: Vec<(Timestamp, Decimal)>,
    pub notices: Vec<(Timestamp, Decimal)>,
    /// The hours it settled funding, at the mark they settled on.
    pub funding: Vec<(Timestamp, Decimal)>,
    last_forced: Option<FillSeq>,
}

/// One side of an auto-deleveraging fill, as the report tells it.
#[derive(Debug, Clone, PartialEq)]
pub struct Deleveraged {
    pub at: Timestamp,
    pub fill: FillSeq,
    pub customer: CustomerCode,
    pub market: MarketId,
    pub side: perpsim_core::order::Side,
    pub amount: Decimal,
    pub price: Decimal,
}

/// The auto-deleveraging records the report keeps to tell (both sides of each fill); past
/// it they are counted, not kept.
pub const TOLD_DELEVERAGING: usize = 2_000;

impl LogTallies {
    fn market(&mut self, market: MarketId) -> &mut MarketTally {
        let market = market as usize;
        if self.markets.len() <= market {
            self.markets.resize_with(market + 1, MarketTally::default);
        }
        &mut self.markets[market]
    }

    fn fill(&mut self, f: &PublicFill) {
        let m = self.market(f.market);
        m.fills += 1;
        m.volume += f.amount;
        m.notional += f.amount * f.price;
    }

    fn trade(&mut self, t: &TradeRecord) {
        let n = self.trades.entry(t.customer).or_default();
        n[0] += 1;
        match t.kind {
            TradeKind::Liquidation => n[1] += 1,
            TradeKind::AutoDeleveraging => {
                n[2] += 1;
                if self.last_deleveraging.replace(t.fill) != Some(t.fill) {
                    self.auto_deleveraging_fills += 1;
                }
                if self.deleveraged.len() < TOLD_DELEVERAGING {
                    self.deleveraged.push(Deleveraged {
                        at: t.timestamp,
                        fill: t.fill,
                        customer: t.customer,
                        market: t.market,
                        side: t.side,
                        amount: t.amount,
                        price: t.price,
                    });
                }
            }
            TradeKind::Trade => {}
        }
        let m = self.market(t.market);
        if t.kind != TradeKind::Trade && m.last_forced.replace(t.fill) != Some(t.fill) {
            let marks = match t.kind {
                TradeKind::Liquidation => &mut m.liquidation_fills,
                _ => &mut m.deleveraging_fills,
            };
            marks.push((t.timestamp, t.price));
        }
    }

    fn funding(&mut self, f: &FundingRecord) {
        let settled = (f.time, f.mark_price);
        self.market(f.market).funding.push(settled);
    }

    fn notice(&mut self, n: &Notification) {
        *self.notices.entry(n.customer).or_default() += 1;
        let mark = (n.created_at, n.mark_price);
        self.market(n.market).notices.push(mark);
    }

    /// A movement as the run leaves it.
    fn movement(&mut self, m: &Movement) {
        let money = self.money.entry(m.customer).or_default();
        let (flows, transfers) = money.entry(m.asset).or_default();
        flows.add(m);
        if m.status == MovementStatus::Completed
            && matches!(m.kind, MovementKind::Deposit | MovementKind::Withdrawal)
        {
            transfers.push((m.updated_at, m.amount));
        }
    }
}

/// The ledger's movements not written yet, from the first that may still change: the one at
/// `next` first.
#[derive(Default)]
struct Waiting {
    next: u64,
    rows: VecDeque<Option<Movement>>,
}

impl Waiting {
    /// A movement made or changed.
    fn put(&mut self, m: &Movement) {
        let seq = m.seq.0;
        assert!(
            seq >= self.next,
            "movement {seq} changed after it was written as final"
        );
        let at = usize::try_from(seq - self.next).expect("a run's ledger fits memory");
        if self.rows.len() <= at {
            self.rows.resize(at + 1, None);
        }
        self.rows[at] = Some(m.clone());
    }

    /// The next movement if it can no longer change.
    fn take_final(&mut self) -> Option<Movement> {
        match self.rows.front() {
            Some(Some(m)) if m.status != MovementStatus::Pending => {}
            _ => return None,
        }
        self.next += 1;
        self.rows.pop_front().flatten()
    }

    /// Every movement left, as the run leaves it.
    fn drain(&mut self) -> impl Iterator<Item = Movement> + '_ {
        self.rows
            .drain(..)
            .map(|m| m.expect("every movement is handed out before the run ends"))
    }
}

/// The tables' writer: `ledger.csv` and `trades.csv` at their `paths` from the batches
/// received, until the run drops its end of the channel. Each batch's digests owed are
/// computed here too (the engine's let-go runs, `Handed::settle`), off the engine's thread.
pub fn write(
    (ledger, trades): (&Path, &Path),
    batches: Receiver<Batch>,
) -> Result<Streamed, String> {
    let mut names = tables::names();
    let mut ledger = Csv::create(ledger, &tables::LEDGER_HEADER)?;
    let mut trades = Csv::create(trades, &tables::TRADES_HEADER)?;
    let (mut waiting, mut tallies) = (Waiting::default(), LogTallies::default());
    for batch in batches {
        names.extend(batch.names);
        let (symbols, rows) = (&batch.symbols, &batch.rows);
        rows.settle(usize::MAX);
        batch.ended.iter().for_each(|run| _ = run.settle());
        for t in rows.trades.iter() {
            tallies.trade(t);
            trades.row(t, |r, t| tables::trade_row(r, t, (&names, symbols)))?;
        }
        rows.fills.iter().for_each(|f| tallies.fill(f));
        rows.notices.iter().for_each(|n| tallies.notice(n));
        rows.funding.iter().for_each(|f| tallies.funding(f));
        for m in rows.movements.iter() {
            waiting.put(m);
        }
        while let Some(m) = waiting.take_final() {
            tallies.movement(&m);
            ledger.row(&m, |r, m| tables::ledger_row(r, m, &names))?;
        }
    }
    for m in waiting.drain() {
        tallies.movement(&m);
        ledger.row(&m, |r, m| tables::ledger_row(r, m, &names))?;
    }
    // Stable: transfers that completed at the same instant stay in ledger order.
    let transfers = tallies.money.values_mut().flat_map(|m| m.values_mut());
    transfers.for_each(|(_, t)| t.sort_by_key(|(at, _)| *at));
    Ok(Streamed {
        ledger: ledger.finish()?,
        trades: trades.finish()?,
        tallies,
    })
}

#[cfg(test)]
mod tests {
    use perpsim_core::ids::{BrokerCode, MovementCode};
    use perpsim_systems::records::ids::MovementSeq;
    use perpsim_systems::records::money::Movement;

    use super::*;

    const START: Timestamp = Timestamp::from_millis(1_767_225_600_000);

    fn uuid(i: u128) -> perpsim_core::Uuid {
        perpsim_core::Uuid::from_u128(i)
    }

    /// A USDC transfer of `customer` (10 or 11): a deposit of a positive amount, else a
    /// withdrawal, made and last changed at `seq` seconds.
    fn transfer(seq: u64, customer: u128, amount: i64, status: MovementStatus) -> Movement {
        let kind = match amount > 0 {
            true => MovementKind::Deposit,
            false => MovementKind::Withdrawal,
        };
        Movement {
            seq: MovementSeq(seq),
            code: MovementCode(uuid(100 + u128::from(seq))),
            customer: CustomerCode(uuid(customer)),
            broker: BrokerCode(uuid(1)),
            kind,
            status,
            asset: Asset::Usdc,
            amount: Decimal::from(amount),
            created_at: START.plus_millis(seq as i64 * 1_000),
            updated_at: START.plus_millis(seq as i64 * 1_000),
            balance_after: None,
            trade: None,
            periodic: None,
        }
    }

    fn batch(movements: Vec<Movement>) -> Batch {
        Batch {
            names: vec![(CustomerCode(uuid(10)), "alice".into())],
            symbols: vec!["BTC-USDC-PERP".into()],
            rows: HandedHistory {
                movements: movements.into(),
                ..HandedHistory::default()
            },
            ended: Vec::new(),
        }
    }

    /// `ledger.csv` lists every movement once, in ledger order, as the run leaves it: a
    /// pending withdrawal holds the rows after it back until it completes (its completed row
    /// is the one listed), and one still pending at the end is listed pending; the money
    /// tallied is the rows as listed, the transfers in time order.
    #[test]
    fn the_ledger_streams_each_movement_once_as_the_run_leaves_it_in_ledger_order() {
        let dir = tempfile::tempdir().unwrap();
        let paths = (dir.path().join("ledger.csv"), dir.path().join("trades.csv"));
        let (to, from) = std::sync::mpsc::sync_channel(4);
        let writer = std::thread::spawn(move || write((&paths.0, &paths.1), from));
        let pending = MovementStatus::Pending;
        let done = MovementStatus::Completed;
        to.send(batch(vec![
            transfer(0, 10, 100, done),
            transfer(1, 10, -40, pending),
            transfer(2, 11, 7, done),
        ]))
        .unwrap();
        let mut completed = transfer(1, 10, -40, done);
        completed.updated_at = START.plus_millis(5_000);
        to.send(batch(vec![completed, transfer(3, 11, -2, pending)]))
            .unwrap();
        drop(to);
        let streamed = writer.join().unwrap().unwrap();
        let text = std::fs::read_to_string(dir.path().join("ledger.csv")).unwrap();
        let rows: Vec<(&str, &str, &str)> = text
            .lines()
            .skip(1)
            .map(|l| {
                let f: Vec<&str> = l.split(',').collect();
                (f[0], f[2], f[5])
            })
            .collect();
        let bob = uuid(11).to_string();
        assert_eq!(
            rows,
            [
                ("0", "alice", "completed"),
                ("1", "alice", "completed"),
                ("2", bob.as_str(), "completed"),
                ("3", bob.as_str(), "pending"),
            ]
        );
        let alice = &streamed.tallies.money[&CustomerCode(uuid(10))][&Asset::Usdc];
        assert_eq!(
            (alice.0.balance, alice.0.withdrawals),
            (60.into(), 40.into())
        );
        let at = |s: i64| START.plus_millis(s);
        assert_eq!(alice.1, [(at(0), 100.into()), (at(5_000), (-40).into())]);
        let bob = &streamed.tallies.money[&CustomerCode(uuid(11))][&Asset::Usdc];
        assert_eq!((bob.0.balance, bob.0.pending), (7.into(), (-2).into()));
    }

    /// A movement changed after it was listed as final would make the ledger lie: refused.
    #[test]
    #[should_panic(expected = "changed after it was written as final")]
    fn a_movement_changed_after_it_was_final_is_refused() {
        let mut waiting = Waiting::default();
        waiting.put(&transfer(0, 10, 5, MovementStatus::Completed));
        assert!(waiting.take_final().is_some());
        waiting.put(&transfer(0, 10, 5, MovementStatus::Cancelled));
    }
}
