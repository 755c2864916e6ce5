//! The history projection (issue 37): ended orders, ledger movements, trade records, public
//! fills and their candles, depreciation notices, margin state changes and funding
//! settlements, kept in a redb file beside the journal's (`history_file`) for reads, so the
//! read view holds live state only and a read of history is a redb read.
//!
//! - `ended_orders` holds, per (customer, reference_id), the latest order under that
//!   reference that has ended — what a read of the reference returns when none is open (rule
//!   11 admits a new order under a reference only once the one before it has ended, so the
//!   latest ended one is also the one updated last).
//! - the movements, trade records, notices and margin state changes are history lists
//!   (`history`): rows by sequence number with per-customer and per-broker indexes.
//! - `candles` holds every market's candle of every interval and period, folded from the
//!   public fills.
//!
//! The service writes a commit's rows in a transaction after the one that journals its ticks,
//! or, a commit of many, a share at a time (`backlog`). [`PROJECTED_KEY`] says through
//! which tick it is complete, [`VERSION_KEY`] which tables it has; a file whose projection is
//! behind its journal (a crash with a backlog, a scenario replay's, which never serves reads,
//! or a file of an earlier version) is projected by recovery, which then replays from a
//! snapshot no newer than the projection and projects the ticks after it as it goes
//! (`recovery`); an earlier version's tables are dropped first
//! ([`Journal::reset_projection`]).
//!
//! Reads go through a [`Projection`], a handle on the same database: the backlog, then a redb
//! read transaction, neither of which waits on the writer.

use std::ops::RangeInclusive;
use std::sync::Arc;

use perpsim_core::ids::CustomerCode;
use perpsim_systems::records::history::HandedHistory;
use perpsim_systems::records::order::Order;
use perpsim_systems::records::tape::Candle;
use perpsim_systems::records::venue::MarketId;
use redb::{Database, ReadableDatabase, TableDefinition, WriteTransaction};

use arc_swap::ArcSwap;

use crate::backlog::Pending;
use crate::candles;
use crate::history::{
    self, Fills, Fundings, Listed, MarginChanges, Movements, Notices, Rows, Trades,
};
use crate::journal::{Journal, JournalError, META};

/// (customer, reference_id) → the encoded latest ended [`Order`] under that reference.
const ENDED_ORDERS: TableDefinition<(u128, &str), &[u8]> = TableDefinition::new("ended_orders");

/// META key: the tick through which every row is projected (absent: none).
const PROJECTED_KEY: &str = "projected_through";
/// META key: which tables the projection has (absent: the ended orders' only, before the
/// history lists were projected). A projection of another version counts as empty, so
/// recovery projects it again from the start.
const VERSION_KEY: &str = "projection_version";
/// 3: ended orders, movements and trade records. 4: notices and margin state changes too.
/// 5: public fills too. 6: funding settlements too. 7: candles too.
const VERSION: u32 = 7;

/// What ticks add to the projection, each list in the order the ticks made it: the orders
/// they ended and the history rows they made or changed (a later row of the same order
/// reference or movement replaces an earlier one).
#[derive(Debug, Clone, Default)]
pub struct Projected {
    pub ended: Vec<Arc<Order>>,
    pub history: HandedHistory,
}

impl Projected {
    /// How many rows, ended orders and history rows.
    pub fn len(&self) -> usize {
        self.ended.len() + self.history.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whether `meta` names this version's projection.
fn current(
    meta: &impl redb::ReadableTable<&'static str, &'static [u8]>,
) -> Result<bool, JournalError> {
    let version = meta.get(VERSION_KEY)?.map(|v| v.value().to_vec());
    Ok(version.as_deref() == Some(VERSION.to_le_bytes().as_slice()))
}

/// The tick the projection is complete through, as `meta` holds it (0 for a projection of
/// another version: it must be made again).
fn through(
    meta: &impl redb::ReadableTable<&'static str, &'static [u8]>,
) -> Result<u64, JournalError> {
    if !current(meta)? {
        return Ok(0);
    }
    match meta.get(PROJECTED_KEY)? {
        None => Ok(0),
        Some(v) => {
            let bytes: [u8; 8] = v.value().try_into().map_err(|_| {
                JournalError::Corrupt(format!("{PROJECTED_KEY} is {} bytes", v.value().len()))
            })?;
            Ok(u64::from_le_bytes(bytes))
        }
    }
}

/// Writes `rows` (oldest first: a later one replaces an earlier) and marks the projection
/// complete through `tick`.
pub(crate) fn write(
    txn: &WriteTransaction,
    rows: &Projected,
    tick: u64,
) -> Result<(), JournalError> {
    history::write_all(txn, rows)?;
    mark(txn, tick)
}

/// Marks the projection complete through `tick`.
pub(crate) fn mark(txn: &WriteTransaction, tick: u64) -> Result<(), JournalError> {
    let mut meta = txn.open_table(META)?;
    meta.insert(PROJECTED_KEY, tick.to_le_bytes().as_slice())?;
    meta.insert(VERSION_KEY, VERSION.to_le_bytes().as_slice())?;
    Ok(())
}

pub(crate) fn write_orders(
    txn: &WriteTransaction,
    orders: &[Arc<Order>],
) -> Result<(), JournalError> {
    let mut table = txn.open_table(ENDED_ORDERS)?;
    for o in orders {
        assert!(
            !o.is_open(),
            "order {} is projected only once it has ended",
            o.id
        );
        let encoded = postcard::to_stdvec(o).expect("orders always encode");
        table.insert(
            (o.customer.0.as_u128(), &*o.reference_id),
            encoded.as_slice(),
        )?;
    }
    Ok(())
}

/// The meta table as a read transaction opens it.
type MetaTable = redb::ReadOnlyTable<&'static str, &'static [u8]>;

/// Whether `meta` holds a projection's mark (of any version).
pub(crate) fn marked(
    meta: &impl redb::ReadableTable<&'static str, &'static [u8]>,
) -> Result<bool, JournalError> {
    Ok(meta.get(PROJECTED_KEY)?.is_some())
}

/// Drops the projection's tables and marks from the file `txn` writes.
pub(crate) fn drop_tables(txn: &WriteTransaction) -> Result<(), JournalError> {
    txn.delete_table(ENDED_ORDERS)?;
    history::delete_all(txn)?;
    let mut meta = txn.open_table(META)?;
    meta.remove(PROJECTED_KEY)?;
    meta.remove(VERSION_KEY)?;
    Ok(())
}

/// Asserts that the projection is complete through `before`, so the next ticks extend it.
pub(crate) fn check_follows(txn: &WriteTransaction, before: u64) -> Result<(), JournalError> {
    let projected = through(&txn.open_table(META)?)?;
    assert_eq!(
        projected, before,
        "the projection is complete through the last tick before it is extended"
    );
    Ok(())
}

impl Journal {
    /// The tick through which the projection holds every ended order (0: none).
    pub fn projected_through(&self) -> Result<u64, JournalError> {
        if self.database().is_none() {
            return Ok(0); // a reader's handle: no projection
        }
        self.read_history_meta(0, through)
    }

    /// `read` of the projection file's meta table; `missing` where the file has none yet.
    fn read_history_meta<T>(
        &self,
        missing: T,
        read: impl FnOnce(&MetaTable) -> Result<T, JournalError>,
    ) -> Result<T, JournalError> {
        let txn = self.history().database()?.begin_read()?;
        match txn.open_table(META) {
            Ok(meta) => read(&meta),
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(missing),
            Err(e) => Err(e.into()),
        }
    }

    /// Projects `rows` (of the ticks after the projection's end through `tick`, in the order
    /// they were made) and marks the projection complete through `tick`, in one durable
    /// transaction: recovery's catching up.
    pub fn project(&self, rows: &Projected, tick: u64) -> Result<(), JournalError> {
        self.write_history(|txn| write(txn, rows, tick))
    }

    /// Drops a projection of an earlier version, so that recovery makes it again from the
    /// start in this version's tables; nothing to do for a current one (or none at all).
    pub fn reset_projection(&self) -> Result<bool, JournalError> {
        let stale = self.read_history_meta(false, |meta| Ok(!current(meta)? && marked(meta)?))?;
        if stale {
            self.write_history(drop_tables)?;
        }
        Ok(stale)
    }

    /// A handle for reads of the projection, beside the writer (none for a read-only journal,
    /// which never serves, or where the projection's file cannot be opened: recovery, which
    /// opens it first, has said why).
    pub fn projection(&self) -> Option<Projection> {
        let pending = self.pending();
        self.database()?;
        let db = self.history().database().ok()?;
        Some(Projection { db, pending })
    }
}

/// Reads of the projection: each a read transaction of its own, which never waits on the
/// journal's writer.
#[derive(Clone)]
pub struct Projection {
    db: Arc<Database>,
    /// The rows the tables lack yet: taken before each read transaction begins.
    pending: Arc<ArcSwap<Pending>>,
}

impl Projection {
    /// The latest ended order under `reference` of `customer`, if any.
    pub fn ended_order(
        &self,
        customer: CustomerCode,
        reference: &str,
    ) -> Result<Option<Order>, JournalError> {
        let pending = self.pending.load_full();
        if let Some(order) = pending.ended_order(customer, reference) {
            return Ok(Some(order.clone()));
        }
        let txn = self.db.begin_read()?;
        let table = match txn.open_table(ENDED_ORDERS) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let Some(v) = table.get((customer.0.as_u128(), reference))? else {
            return Ok(None);
        };
        postcard::from_bytes(v.value())
            .map(Some)
            .map_err(|e| JournalError::Corrupt(format!("ended order {reference}: {e}")))
    }
}

impl Projection {
    /// A kind's rows at one point in time: the backlog, then a read transaction.
    fn rows<T: Listed>(&self) -> Result<Rows<T>, JournalError> {
        let pending = self.pending.load_full();
        Ok(Rows::new(pending, self.db.begin_read()?))
    }

    /// The ledger movements at one point in time (one read transaction).
    pub fn movements(&self) -> Result<Movements, JournalError> {
        self.rows()
    }

    /// The trade records at one point in time (one read transaction).
    pub fn trades(&self) -> Result<Trades, JournalError> {
        self.rows()
    }

    /// The depreciation notices at one point in time (one read transaction).
    pub fn notices(&self) -> Result<Notices, JournalError> {
        self.rows()
    }

    /// The public fills at one point in time (one read transaction).
    pub fn fills(&self) -> Result<Fills, JournalError> {
        self.rows()
    }

    /// The funding settlements at one point in time (one read transaction).
    pub fn fundings(&self) -> Result<Fundings, JournalError> {
        self.rows()
    }

    /// The margin state changes at one point in time (one read transaction).
    pub fn margin_changes(&self) -> Result<MarginChanges, JournalError> {
        self.rows()
    }

    /// `market`'s candles of interval `i` of
    /// [`INTERVALS`](perpsim_systems::records::tape::INTERVALS) that open within `opens`, by
    /// open time (one read transaction, with the backlog's fills).
    pub fn candles(
        &self,
        market: MarketId,
        i: usize,
        opens: RangeInclusive<i64>,
    ) -> Result<Vec<(i64, Candle)>, JournalError> {
        let pending = self.pending.load_full();
        candles::read(&pending, &self.db.begin_read()?, (market, i), opens)
    }
}

#[cfg(test)]
#[path = "projection_tests.rs"]
mod tests;
