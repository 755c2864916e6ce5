//! The projection's history lists (issue 37): rows kept by sequence number with key-only
//! indexes per customer and per broker, each optionally narrowed to a market — what the
//! paginated history endpoints walk.
//!
//! - ledger movements: a row per movement as its latest change left it (a pending transfer's
//!   row is written again when it completes or is cancelled), indexed for all markets only;
//! - trade records: a row per side of a fill, never changed, indexed for all markets and for
//!   its own, and by trade code;
//! - depreciation notices: a row per notice, never changed, indexed for all markets and for
//!   its own;
//! - margin state changes: a row per change, never changed, indexed for all markets;
//! - public fills: a row per fill, never changed, not indexed (a fill has no holder; the
//!   recent-trades list reads the exchange's tape);
//! - funding settlements: a row per market and settled hour, never changed, indexed per
//!   market (they have no holder);
//! - candles: folded from the public fills (`candles`), a row per market, interval and
//!   period.
//!
//! Index keys are (holder, market or [`ALL`], seq), so one range is a holder's list in
//! sequence order. A read of a list is one read transaction ([`Rows`]), so a page's count,
//! time window and rows agree.

use std::marker::PhantomData;
use std::ops::{Bound, Range};
use std::sync::Arc;

use perpsim_core::ids::{BrokerCode, CustomerCode, TradeCode};
use perpsim_systems::records::funding::FundingRecord;
use perpsim_systems::records::history::HandedHistory;
use perpsim_systems::records::log::Handed;
use perpsim_systems::records::money::Movement;
use perpsim_systems::records::risk::{Notification, RiskRecord};
use perpsim_systems::records::trade::{PublicFill, TradeRecord};
use perpsim_systems::records::venue::MarketId;
use redb::{ReadTransaction, ReadableTable, TableDefinition, WriteTransaction};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::backlog::Pending;
use crate::candles;
use crate::journal::JournalError;
use crate::projection::{self, Projected};

/// The index scope of a holder's whole list, every market's rows.
const ALL: u32 = u32::MAX;

type IndexKey = (u128, u32, u64);

/// One history kind's tables.
#[derive(Clone, Copy)]
pub struct Tables {
    what: &'static str,
    rows: TableDefinition<'static, u64, &'static [u8]>,
    /// None for rows without a holder (public fills, funding settlements).
    holders: Option<HolderIndexes>,
}

/// A history kind's indexes by holder: (holder, market or [`ALL`], seq).
#[derive(Clone, Copy)]
struct HolderIndexes {
    by_customer: TableDefinition<'static, IndexKey, ()>,
    by_broker: TableDefinition<'static, IndexKey, ()>,
}

pub(crate) const MOVEMENTS: Tables = Tables {
    what: "movement",
    rows: TableDefinition::new("movements"),
    holders: Some(HolderIndexes {
        by_customer: TableDefinition::new("movements_by_customer"),
        by_broker: TableDefinition::new("movements_by_broker"),
    }),
};

pub(crate) const TRADES: Tables = Tables {
    what: "trade",
    rows: TableDefinition::new("trades"),
    holders: Some(HolderIndexes {
        by_customer: TableDefinition::new("trades_by_customer"),
        by_broker: TableDefinition::new("trades_by_broker"),
    }),
};

pub(crate) const NOTICES: Tables = Tables {
    what: "notice",
    rows: TableDefinition::new("notices"),
    holders: Some(HolderIndexes {
        by_customer: TableDefinition::new("notices_by_customer"),
        by_broker: TableDefinition::new("notices_by_broker"),
    }),
};

pub(crate) const MARGIN: Tables = Tables {
    what: "margin state change",
    rows: TableDefinition::new("margin_states"),
    holders: Some(HolderIndexes {
        by_customer: TableDefinition::new("margin_states_by_customer"),
        by_broker: TableDefinition::new("margin_states_by_broker"),
    }),
};

/// Public fills have no holder.
pub(crate) const FILLS: Tables = Tables {
    what: "public fill",
    rows: TableDefinition::new("fills"),
    holders: None,
};

/// Funding settlements have no holder either; [`FUNDINGS_BY_MARKET`] indexes them.
pub(crate) const FUNDINGS: Tables = Tables {
    what: "funding settlement",
    rows: TableDefinition::new("fundings"),
    holders: None,
};

/// (market, seq) of every funding settlement: one market's list in sequence order.
const FUNDINGS_BY_MARKET: TableDefinition<(u32, u64), ()> =
    TableDefinition::new("fundings_by_market");

/// Trade code → the trade record's sequence number.
const TRADE_CODES: TableDefinition<u128, u64> = TableDefinition::new("trade_codes");

/// Every table of the history lists, for a projection made again from the start.
pub(crate) fn delete_all(txn: &WriteTransaction) -> Result<(), JournalError> {
    for t in [MOVEMENTS, TRADES, NOTICES, MARGIN, FILLS, FUNDINGS] {
        txn.delete_table(t.rows)?;
        if let Some(h) = t.holders {
            txn.delete_table(h.by_customer)?;
            txn.delete_table(h.by_broker)?;
        }
    }
    txn.delete_table(TRADE_CODES)?;
    txn.delete_table(FUNDINGS_BY_MARKET)?;
    txn.delete_table(candles::CANDLES)?;
    Ok(())
}

/// What one row is filed under.
pub struct Filed {
    customer: CustomerCode,
    broker: BrokerCode,
    market: Option<MarketId>,
}

impl Filed {
    /// Whether the row is in `holder`'s list of `market`'s rows (or of all).
    fn in_list(&self, (holder, market): (Holder, Option<MarketId>)) -> bool {
        let held = match holder {
            Holder::Customer(c) => self.customer == c,
            Holder::Broker(b) => self.broker == b,
        };
        held && market.is_none_or(|m| self.market == Some(m))
    }
}

/// A row of one history list: its tables, where a tick's hand-out holds it, and what it is
/// filed under.
pub trait Listed: Serialize + DeserializeOwned + Clone + 'static {
    const TABLES: Tables;
    /// Its place among [`Listed`] kinds (a backlog batch's lookups).
    const KIND: usize;
    fn of(rows: &HandedHistory) -> &Handed<Self>;
    fn seq(&self) -> u64;
    /// Its holders, and the market it is also listed under (none for rows without holders).
    fn filed(&self) -> Option<Filed>;
}

/// How many kinds of rows are [`Listed`].
pub(crate) const KINDS: usize = 6;

/// Each row type is listed in `$tables`, handed out in its `$field`; a held one is filed
/// under its holders and `$market` of it.
macro_rules! listed {
    ($kind:expr, $row:ty, $tables:expr, $field:ident, $filed:expr) => {
        impl Listed for $row {
            const TABLES: Tables = $tables;
            const KIND: usize = $kind;
            fn of(rows: &HandedHistory) -> &Handed<Self> {
                &rows.$field
            }
            fn seq(&self) -> u64 {
                self.seq.0
            }
            fn filed(&self) -> Option<Filed> {
                let filed: fn(&$row) -> Option<Filed> = $filed;
                filed(self)
            }
        }
    };
}

/// A held row's holders, listed also under `market`.
fn held(customer: CustomerCode, broker: BrokerCode, market: Option<MarketId>) -> Option<Filed> {
    Some(Filed {
        customer,
        broker,
        market,
    })
}

listed!(0, Movement, MOVEMENTS, movements, |m| held(
    m.customer, m.broker, None
));
listed!(1, TradeRecord, TRADES, trades, |t| held(
    t.customer,
    t.broker,
    Some(t.market)
));
listed!(2, Notification, NOTICES, notices, |n| held(
    n.customer,
    n.broker,
    Some(n.market)
));
listed!(3, RiskRecord, MARGIN, margin, |r| held(
    r.customer, r.broker, None
));
listed!(4, PublicFill, FILLS, fills, |_| None);
listed!(5, FundingRecord, FUNDINGS, funding, |_| None);

/// One part of projecting rows: a table's writes in an order that keeps them close in the
/// file, which may be cut anywhere (a backlog projects a few thousand a commit).
pub(crate) enum Step {
    /// The ended orders.
    Orders,
    /// One kind's rows, in the order they were made (a later row of a seq replaces an
    /// earlier one).
    Rows(RowsWriter, RowsCount),
    /// Index entries, put in key order before the first is written ([`Step::prepare`]): a
    /// funding hour's million rows name a million customers in no order, and inserted as
    /// they come each lands in another page of the index. (A row changed in the same
    /// commit is filed twice under the same key: the second insert changes nothing.)
    Keys(TableDefinition<'static, IndexKey, ()>, Vec<IndexKey>),
    /// Funding settlements by market, likewise.
    Markets(Vec<(u32, u64)>),
    /// Trade codes.
    Codes(Vec<(u128, u64)>),
    /// The public fills folded into their candles (`candles`), a write a fill.
    Candles,
}

type RowsWriter = fn(&WriteTransaction, &HandedHistory, Range<usize>) -> Result<(), JournalError>;
type RowsCount = fn(&HandedHistory) -> usize;

/// The steps that project `rows`, none empty.
pub(crate) fn plan(rows: &Projected) -> Vec<Step> {
    let h = &rows.history;
    let mut steps = vec![Step::Orders];
    held_steps::<Movement>(h, &mut steps);
    held_steps::<TradeRecord>(h, &mut steps);
    held_steps::<Notification>(h, &mut steps);
    held_steps::<RiskRecord>(h, &mut steps);
    steps.push(rows_step::<PublicFill>());
    steps.push(rows_step::<FundingRecord>());
    let markets = h.funding.iter().map(|f| (f.market, f.seq.0));
    steps.push(Step::Markets(markets.collect()));
    let codes = h.trades.iter().map(|t| (t.code.0.as_u128(), t.seq.0));
    steps.push(Step::Codes(codes.collect()));
    steps.push(Step::Candles);
    steps.retain(|s| s.len(rows) > 0);
    steps
}

fn rows_step<T: Listed>() -> Step {
    Step::Rows(put_rows::<T>, |h| T::of(h).len())
}

/// A held kind's rows and the index entries of its holders: every market's list, and its
/// own market's (a row changed later is filed again under the same keys).
fn held_steps<T: Listed>(h: &HandedHistory, steps: &mut Vec<Step>) {
    let Some(holders) = T::TABLES.holders else {
        return;
    };
    steps.push(rows_step::<T>());
    // A row is filed once, or twice with its market: the first is reserved.
    let n = T::of(h).len();
    let (mut customers, mut brokers) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for (row, f) in T::of(h).iter().filter_map(|r| Some((r, r.filed()?))) {
        for scope in [Some(ALL), f.market].into_iter().flatten() {
            customers.push((f.customer.0.as_u128(), scope, row.seq()));
            brokers.push((f.broker.0.as_u128(), scope, row.seq()));
        }
    }
    steps.push(Step::Keys(holders.by_customer, customers));
    steps.push(Step::Keys(holders.by_broker, brokers));
}

impl Step {
    /// Puts the step's writes in the order they are made, before the first (a backlog
    /// sorts a million keys in the share that reaches them, not in the commit that made
    /// them).
    pub(crate) fn prepare(&mut self) {
        match self {
            Step::Keys(_, keys) if !keys.is_sorted() => keys.sort_unstable(),
            Step::Markets(keys) if !keys.is_sorted() => keys.sort_unstable(),
            _ => {}
        }
    }

    /// How many writes the step makes.
    pub(crate) fn len(&self, rows: &Projected) -> usize {
        match self {
            Step::Orders => rows.ended.len(),
            Step::Rows(_, count) => count(&rows.history),
            Step::Keys(_, keys) => keys.len(),
            Step::Markets(keys) => keys.len(),
            Step::Codes(codes) => codes.len(),
            Step::Candles => rows.history.fills.len(),
        }
    }

    /// Makes the step's writes numbered `range`.
    pub(crate) fn write(
        &self,
        txn: &WriteTransaction,
        rows: &Projected,
        range: Range<usize>,
    ) -> Result<(), JournalError> {
        match self {
            Step::Orders => projection::write_orders(txn, &rows.ended[range]),
            Step::Rows(write, _) => write(txn, &rows.history, range),
            Step::Keys(table, keys) => put_keys(txn, *table, &keys[range]),
            Step::Markets(keys) => put_keys(txn, FUNDINGS_BY_MARKET, &keys[range]),
            Step::Codes(codes) => {
                let mut table = txn.open_table(TRADE_CODES)?;
                for &(code, seq) in &codes[range] {
                    table.insert(code, seq)?;
                }
                Ok(())
            }
            Step::Candles => {
                let fills = rows.history.fills.iter();
                candles::write(txn, fills.skip(range.start).take(range.len()))
            }
        }
    }
}

/// Writes the rows numbered `range` of a kind under their seqs.
fn put_rows<T: Listed>(
    txn: &WriteTransaction,
    h: &HandedHistory,
    range: Range<usize>,
) -> Result<(), JournalError> {
    let mut table = txn.open_table(T::TABLES.rows)?;
    let mut encoded = Vec::new();
    for row in T::of(h).iter().skip(range.start).take(range.len()) {
        encoded.clear();
        encoded = postcard::to_extend(row, encoded).expect("history rows always encode");
        table.insert(row.seq(), encoded.as_slice())?;
    }
    Ok(())
}

/// Inserts key-only entries.
fn put_keys<K>(
    txn: &WriteTransaction,
    table: TableDefinition<'static, K, ()>,
    keys: &[K],
) -> Result<(), JournalError>
where
    K: redb::Key + 'static + for<'k> redb::Value<SelfType<'k> = K>,
{
    let mut table = txn.open_table(table)?;
    for key in keys {
        table.insert(key, ())?;
    }
    Ok(())
}

/// Writes every list's rows, the trade records' codes, the public fills and the funding
/// settlements with their market index.
pub(crate) fn write_all(txn: &WriteTransaction, rows: &Projected) -> Result<(), JournalError> {
    for mut step in plan(rows) {
        step.prepare();
        step.write(txn, rows, 0..step.len(rows))?;
    }
    Ok(())
}

/// Whose list a read walks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    Customer(CustomerCode),
    Broker(BrokerCode),
}

/// One history kind's rows as one read transaction sees them, with the rows of the
/// projection's backlog taken before it (each row there is as new as the table's, or newer).
pub struct Rows<T> {
    pending: Arc<Pending>,
    txn: ReadTransaction,
    row: PhantomData<fn() -> T>,
}

/// The ledger movements: the transaction lists.
pub type Movements = Rows<Movement>;
/// The trade records: the trade lists.
pub type Trades = Rows<TradeRecord>;
/// The depreciation notices: the notification lists.
pub type Notices = Rows<Notification>;
/// The margin state changes.
pub type MarginChanges = Rows<RiskRecord>;
/// The public fills (by sequence number only).
pub type Fills = Rows<PublicFill>;
/// The funding settlements: the funding-rate history, per market or all.
pub type Fundings = Rows<FundingRecord>;

/// The table, or none before its first row was projected.
fn open<K: redb::Key + 'static, V: redb::Value + 'static>(
    txn: &ReadTransaction,
    table: TableDefinition<K, V>,
) -> Result<Option<redb::ReadOnlyTable<K, V>>, JournalError> {
    match txn.open_table(table) {
        Ok(table) => Ok(Some(table)),
        Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

impl<T: Listed> Rows<T> {
    /// `pending` must be taken before `txn` begins: the backlog then holds every row the
    /// transaction lacks.
    pub(crate) fn new(pending: Arc<Pending>, txn: ReadTransaction) -> Self {
        Rows {
            pending,
            txn,
            row: PhantomData,
        }
    }

    /// How many rows there are: sequence numbers run from 0 without gaps.
    pub fn count(&self) -> Result<u64, JournalError> {
        let projected = match open(&self.txn, T::TABLES.rows)? {
            Some(table) => table.last()?.map_or(0, |(k, _)| k.value() + 1),
            None => 0,
        };
        Ok(projected.max(self.pending.count::<T>()))
    }

    /// The row numbered `seq`, as it stands.
    pub fn get(&self, seq: u64) -> Result<Option<T>, JournalError> {
        if let Some(row) = self.pending.get::<T>(seq) {
            return Ok(Some(row.clone()));
        }
        let Some(table) = open(&self.txn, T::TABLES.rows)? else {
            return Ok(None);
        };
        let Some(v) = table.get(seq)? else {
            return Ok(None);
        };
        postcard::from_bytes(v.value())
            .map(Some)
            .map_err(|e| JournalError::Corrupt(format!("{} {seq}: {e}", T::TABLES.what)))
    }

    /// The first sequence number whose row satisfies `after`, for a predicate false then true
    /// along the rows (they are made in time order: a time window is two of these).
    pub fn partition_point(&self, after: impl Fn(&T) -> bool) -> Result<u64, JournalError> {
        let n = self.count()?;
        let (mut lo, mut hi) = (0u64, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let row = self.get(mid)?.ok_or_else(|| {
                JournalError::Corrupt(format!("{} {mid} of {n} is missing", T::TABLES.what))
            })?;
            if after(&row) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Ok(lo)
    }

    /// The row numbered `seq`, which a list named: its absence is corruption.
    pub fn listed(&self, seq: u64) -> Result<T, JournalError> {
        self.get(seq)?.ok_or_else(|| {
            JournalError::Corrupt(format!("{} {seq} is listed but missing", T::TABLES.what))
        })
    }

    /// Up to `limit` of the holder's sequence numbers (of `market`'s rows, or all) within
    /// `range`, from its low end or (`descending`) its high end.
    pub fn seqs(
        &self,
        list: (Holder, Option<MarketId>),
        range: (Bound<u64>, Bound<u64>),
        descending: bool,
        limit: usize,
    ) -> Result<Vec<u64>, JournalError> {
        let Some(holders) = T::TABLES.holders else {
            return Ok(Vec::new());
        };
        let (table, id) = match list.0 {
            Holder::Customer(c) => (holders.by_customer, c.0.as_u128()),
            Holder::Broker(b) => (holders.by_broker, b.0.as_u128()),
        };
        let listed = |r: &T| r.filed().is_some_and(|f| f.in_list(list));
        let pending = self.pending.seqs(listed, range, descending, limit);
        let Some(table) = open(&self.txn, table)? else {
            return Ok(merged(Vec::new(), pending, descending, limit));
        };
        let scope = list.1.unwrap_or(ALL);
        let keys = table.range::<IndexKey>(keyed(|s| (id, scope, s), range))?;
        let projected = take(keys, descending, limit, |k: IndexKey| k.2)?;
        Ok(merged(projected, pending, descending, limit))
    }
}

/// Two lists of sequence numbers in the same direction as one, without repeats, cut at
/// `limit`.
fn merged(mut a: Vec<u64>, b: Vec<u64>, descending: bool, limit: usize) -> Vec<u64> {
    if b.is_empty() {
        return a;
    }
    a.extend(b);
    a.sort_unstable();
    a.dedup();
    if descending {
        a.reverse();
    }
    a.truncate(limit);
    a
}

/// A range of sequence numbers as the range of the index keys `key` files them under; an
/// open end is the key of the first or last sequence number.
fn keyed<K>(key: impl Fn(u64) -> K, (low, high): (Bound<u64>, Bound<u64>)) -> (Bound<K>, Bound<K>) {
    let bound = |b: Bound<u64>, open_end: u64| match b {
        Bound::Included(s) => Bound::Included(key(s)),
        Bound::Excluded(s) => Bound::Excluded(key(s)),
        Bound::Unbounded => Bound::Included(key(open_end)),
    };
    (bound(low, 0), bound(high, u64::MAX))
}

/// Up to `limit` keys' sequence numbers from a range's low end or (`descending`) its high end.
fn take<K: redb::Key + 'static, V: redb::Value + 'static>(
    range: redb::Range<'_, K, V>,
    descending: bool,
    limit: usize,
    seq: impl Fn(K::SelfType<'_>) -> u64,
) -> Result<Vec<u64>, JournalError> {
    let mut out = Vec::with_capacity(limit.min(1_024));
    let mut push = |entry: Result<(redb::AccessGuard<'_, K>, _), redb::StorageError>| {
        out.push(seq(entry?.0.value()));
        Ok::<bool, JournalError>(out.len() < limit)
    };
    if descending {
        for entry in range.rev() {
            if !push(entry)? {
                break;
            }
        }
    } else {
        for entry in range {
            if !push(entry)? {
                break;
            }
        }
    }
    Ok(out)
}

impl Rows<FundingRecord> {
    /// Up to `limit` sequence numbers of `market`'s settlements (or all) within `range`, from
    /// its low end or (`descending`) its high end.
    pub fn market_seqs(
        &self,
        market: Option<MarketId>,
        range: (Bound<u64>, Bound<u64>),
        descending: bool,
        limit: usize,
    ) -> Result<Vec<u64>, JournalError> {
        let of_market = |f: &FundingRecord| market.is_none_or(|m| f.market == m);
        let pending = self.pending.seqs(of_market, range, descending, limit);
        let projected = match market {
            None => match open(&self.txn, FundingRecord::TABLES.rows)? {
                Some(table) => take(table.range::<u64>(range)?, descending, limit, |k| k)?,
                None => Vec::new(),
            },
            Some(market) => match open(&self.txn, FUNDINGS_BY_MARKET)? {
                Some(table) => {
                    let keys = table.range::<(u32, u64)>(keyed(|s| (market, s), range))?;
                    take(keys, descending, limit, |k: (u32, u64)| k.1)?
                }
                None => Vec::new(),
            },
        };
        Ok(merged(projected, pending, descending, limit))
    }
}

impl Rows<TradeRecord> {
    /// The sequence number of the trade record with this code, if any.
    pub fn by_code(&self, code: TradeCode) -> Result<Option<u64>, JournalError> {
        if let Some(seq) = self.pending.trade(code) {
            return Ok(Some(seq));
        }
        let Some(table) = open(&self.txn, TRADE_CODES)? else {
            return Ok(None);
        };
        Ok(table.get(code.0.as_u128())?.map(|v| v.value()))
    }
}
