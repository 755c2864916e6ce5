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
//!   recent-trades list and the candles read the exchange's tape);
//! - funding settlements: a row per market and settled hour, never changed, indexed per
//!   market (they have no holder).
//!
//! Index keys are (holder, market or [`ALL`], seq), so one range is a holder's list in
//! sequence order. A read of a list is one read transaction ([`Rows`]), so a page's count,
//! time window and rows agree.

use std::marker::PhantomData;
use std::ops::Bound;

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

use crate::journal::JournalError;

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

impl Tables {
    /// The rows' table and the holder indexes of a kind whose rows have holders.
    fn held(self) -> (TableDefinition<'static, u64, &'static [u8]>, HolderIndexes) {
        let holders = self
            .holders
            .expect("only kinds with holder indexes are written by holder");
        (self.rows, holders)
    }
}

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
    Ok(())
}

/// What one row is filed under.
struct Filed {
    seq: u64,
    customer: CustomerCode,
    broker: BrokerCode,
    market: Option<MarketId>,
}

/// A row of a history list: what it is filed under.
trait HistoryRow: Serialize {
    fn filed(&self) -> Filed;
}

/// Each row type is filed under its own seq and holders, and `$market` of it.
macro_rules! history_row {
    ($($row:ty => $market:expr),*) => {$(
        impl HistoryRow for $row {
            fn filed(&self) -> Filed {
                let market: fn(&$row) -> Option<MarketId> = $market;
                Filed {
                    seq: self.seq.0,
                    customer: self.customer,
                    broker: self.broker,
                    market: market(self),
                }
            }
        }
    )*};
}

history_row!(
    Movement => |_| None,
    TradeRecord => |t| Some(t.market),
    Notification => |n| Some(n.market),
    RiskRecord => |_| None
);

/// Writes each row (a later one of the same seq replaces the earlier); its index entries are
/// written with its first row (a row never changes holder or market), in key order: a
/// funding hour's million rows name a million customers in no order, and inserted as they
/// come each entry lands in another page of the index.
fn write<T: HistoryRow>(
    txn: &WriteTransaction,
    (rows_table, holders): (TableDefinition<u64, &[u8]>, HolderIndexes),
    rows: &Handed<T>,
) -> Result<(), JournalError> {
    let mut table = txn.open_table(rows_table)?;
    let (mut customers, mut brokers) = (Vec::new(), Vec::new());
    let mut encoded = Vec::new();
    for row in rows {
        let f = row.filed();
        encoded.clear();
        encoded = postcard::to_extend(row, encoded).expect("history rows always encode");
        if table.insert(f.seq, encoded.as_slice())?.is_some() {
            continue;
        }
        let scopes = [Some(ALL), f.market];
        for scope in scopes.into_iter().flatten() {
            customers.push((f.customer.0.as_u128(), scope, f.seq));
            brokers.push((f.broker.0.as_u128(), scope, f.seq));
        }
    }
    for (index, mut keys) in [
        (holders.by_customer, customers),
        (holders.by_broker, brokers),
    ] {
        keys.sort_unstable();
        let mut table = txn.open_table(index)?;
        for key in keys {
            table.insert(key, ())?;
        }
    }
    Ok(())
}

/// Writes each row without a holder under its seq.
fn write_unheld<T: Serialize>(
    txn: &WriteTransaction,
    tables: Tables,
    rows: &Handed<T>,
    seq: impl Fn(&T) -> u64,
) -> Result<(), JournalError> {
    let mut table = txn.open_table(tables.rows)?;
    let mut encoded = Vec::new();
    for row in rows {
        encoded.clear();
        encoded = postcard::to_extend(row, encoded).expect("history rows always encode");
        table.insert(seq(row), encoded.as_slice())?;
    }
    Ok(())
}

/// Writes every list's rows, the trade records' codes, the public fills and the funding
/// settlements with their market index.
pub(crate) fn write_all(txn: &WriteTransaction, rows: &HandedHistory) -> Result<(), JournalError> {
    write(txn, MOVEMENTS.held(), &rows.movements)?;
    write(txn, TRADES.held(), &rows.trades)?;
    write(txn, NOTICES.held(), &rows.notices)?;
    write(txn, MARGIN.held(), &rows.margin)?;
    write_unheld(txn, FILLS, &rows.fills, |f| f.seq.0)?;
    write_unheld(txn, FUNDINGS, &rows.funding, |f| f.seq.0)?;
    let mut by_market = txn.open_table(FUNDINGS_BY_MARKET)?;
    for f in &rows.funding {
        by_market.insert((f.market, f.seq.0), ())?;
    }
    let mut codes = txn.open_table(TRADE_CODES)?;
    for t in &rows.trades {
        codes.insert(t.code.0.as_u128(), t.seq.0)?;
    }
    Ok(())
}

/// Whose list a read walks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    Customer(CustomerCode),
    Broker(BrokerCode),
}

/// One history kind's rows as one read transaction sees them.
pub struct Rows<T> {
    txn: ReadTransaction,
    tables: Tables,
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

impl<T: DeserializeOwned> Rows<T> {
    pub(crate) fn new(txn: ReadTransaction, tables: Tables) -> Self {
        Rows {
            txn,
            tables,
            row: PhantomData,
        }
    }

    /// How many rows there are: sequence numbers run from 0 without gaps.
    pub fn count(&self) -> Result<u64, JournalError> {
        let Some(table) = open(&self.txn, self.tables.rows)? else {
            return Ok(0);
        };
        Ok(table.last()?.map_or(0, |(k, _)| k.value() + 1))
    }

    /// The row numbered `seq`, as it stands.
    pub fn get(&self, seq: u64) -> Result<Option<T>, JournalError> {
        let Some(table) = open(&self.txn, self.tables.rows)? else {
            return Ok(None);
        };
        let Some(v) = table.get(seq)? else {
            return Ok(None);
        };
        postcard::from_bytes(v.value())
            .map(Some)
            .map_err(|e| JournalError::Corrupt(format!("{} {seq}: {e}", self.tables.what)))
    }

    /// The first sequence number whose row satisfies `after`, for a predicate false then true
    /// along the rows (they are made in time order: a time window is two of these).
    pub fn partition_point(&self, after: impl Fn(&T) -> bool) -> Result<u64, JournalError> {
        let n = self.count()?;
        let (mut lo, mut hi) = (0u64, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let row = self.get(mid)?.ok_or_else(|| {
                JournalError::Corrupt(format!("{} {mid} of {n} is missing", self.tables.what))
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
            JournalError::Corrupt(format!("{} {seq} is listed but missing", self.tables.what))
        })
    }

    /// Up to `limit` of the holder's sequence numbers (of `market`'s rows, or all) within
    /// `range`, from its low end or (`descending`) its high end.
    pub fn seqs(
        &self,
        (holder, market): (Holder, Option<MarketId>),
        range: (Bound<u64>, Bound<u64>),
        descending: bool,
        limit: usize,
    ) -> Result<Vec<u64>, JournalError> {
        let Some(holders) = self.tables.holders else {
            return Ok(Vec::new());
        };
        let (table, id) = match holder {
            Holder::Customer(c) => (holders.by_customer, c.0.as_u128()),
            Holder::Broker(b) => (holders.by_broker, b.0.as_u128()),
        };
        let Some(table) = open(&self.txn, table)? else {
            return Ok(Vec::new());
        };
        let scope = market.unwrap_or(ALL);
        let range = table.range::<IndexKey>(keyed(|s| (id, scope, s), range))?;
        take(range, descending, limit, |k: IndexKey| k.2)
    }
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
        let Some(market) = market else {
            let Some(table) = open(&self.txn, self.tables.rows)? else {
                return Ok(Vec::new());
            };
            return take(table.range::<u64>(range)?, descending, limit, |k| k);
        };
        let Some(table) = open(&self.txn, FUNDINGS_BY_MARKET)? else {
            return Ok(Vec::new());
        };
        let range = table.range::<(u32, u64)>(keyed(|s| (market, s), range))?;
        take(range, descending, limit, |k: (u32, u64)| k.1)
    }
}

impl Rows<TradeRecord> {
    /// The sequence number of the trade record with this code, if any.
    pub fn by_code(&self, code: TradeCode) -> Result<Option<u64>, JournalError> {
        let Some(table) = open(&self.txn, TRADE_CODES)? else {
            return Ok(None);
        };
        Ok(table.get(code.0.as_u128())?.map(|v| v.value()))
    }
}
