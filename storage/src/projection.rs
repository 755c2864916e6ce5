//! The history projection (issue 37): ended orders and ledger movements, kept in the
//! journal's file for reads, so the read view holds live state only and a read of history is
//! a redb read.
//!
//! - `ended_orders` holds, per (customer, reference_id), the latest order under that
//!   reference that has ended — what a read of the reference returns when none is open (rule
//!   11 admits a new order under a reference only once the one before it has ended, so the
//!   latest ended one is also the one updated last).
//! - `movements` holds every ledger movement by sequence number, as its latest change left it
//!   (a pending transfer's row is written again when it completes or is cancelled), with two
//!   key-only indexes for the transaction lists: (customer, seq) and (broker, seq).
//!
//! The service writes a tick's rows in the transaction that journals the tick: the
//! projection is never behind the journal, and a crash between the two cannot happen.
//! [`PROJECTED_KEY`] says through which tick it is complete, [`VERSION_KEY`] which tables it
//! has; a file written without it (a scenario replay's, which never serves reads) or by a
//! version before the movements' is projected by recovery, which then replays from a snapshot
//! no newer than the projection and projects the ticks after it as it goes (`recovery`).
//!
//! Reads go through a [`Projection`], a handle on the same database: a redb read
//! transaction, which never waits on the writer.

use std::ops::Bound;
use std::sync::Arc;

use perpsim_core::ids::{BrokerCode, CustomerCode};
use perpsim_systems::records::money::Movement;
use perpsim_systems::records::order::Order;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition, WriteTransaction};

use crate::journal::{Journal, JournalError, META};

/// (customer, reference_id) → the encoded latest ended [`Order`] under that reference.
const ENDED_ORDERS: TableDefinition<(u128, &str), &[u8]> = TableDefinition::new("ended_orders");
/// Movement sequence number → the encoded [`Movement`] as it stands.
const MOVEMENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("movements");
/// (customer, seq) of every movement: a customer's transaction list.
const MOVEMENTS_BY_CUSTOMER: TableDefinition<(u128, u64), ()> =
    TableDefinition::new("movements_by_customer");
/// (broker, seq) of every movement: a broker's transaction list.
const MOVEMENTS_BY_BROKER: TableDefinition<(u128, u64), ()> =
    TableDefinition::new("movements_by_broker");

/// META key: the tick through which every row is projected (absent: none).
const PROJECTED_KEY: &str = "projected_through";
/// META key: which tables the projection has (absent: the ended orders' only, before the
/// movements were projected). A projection of another version counts as empty, so recovery
/// projects it again from the start.
const VERSION_KEY: &str = "projection_version";
const VERSION: u32 = 2;

/// What ticks add to the projection, each list in the order the ticks made it: the orders
/// they ended and the movements they booked or changed (a later row of the same order
/// reference or movement replaces an earlier one).
#[derive(Debug, Clone, Copy, Default)]
pub struct Projected<'a> {
    pub ended: &'a [Arc<Order>],
    pub movements: &'a [Movement],
}

/// The tick the projection is complete through, as `meta` holds it (0 for a projection of
/// another version: it must be made again).
fn through(
    meta: &impl redb::ReadableTable<&'static str, &'static [u8]>,
) -> Result<u64, JournalError> {
    let version = meta.get(VERSION_KEY)?.map(|v| v.value().to_vec());
    if version.as_deref() != Some(VERSION.to_le_bytes().as_slice()) {
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
    rows: Projected<'_>,
    tick: u64,
) -> Result<(), JournalError> {
    write_orders(txn, rows.ended)?;
    write_movements(txn, rows.movements)?;
    let mut meta = txn.open_table(META)?;
    meta.insert(PROJECTED_KEY, tick.to_le_bytes().as_slice())?;
    meta.insert(VERSION_KEY, VERSION.to_le_bytes().as_slice())?;
    Ok(())
}

fn write_orders(txn: &WriteTransaction, orders: &[Arc<Order>]) -> Result<(), JournalError> {
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

/// A movement's row replaces the one before it; its index entries are written once, with
/// its first row (a movement never changes customer or broker).
fn write_movements(txn: &WriteTransaction, movements: &[Movement]) -> Result<(), JournalError> {
    let mut table = txn.open_table(MOVEMENTS)?;
    let mut by_customer = txn.open_table(MOVEMENTS_BY_CUSTOMER)?;
    let mut by_broker = txn.open_table(MOVEMENTS_BY_BROKER)?;
    let mut encoded = Vec::new();
    for m in movements {
        encoded.clear();
        encoded = postcard::to_extend(m, encoded).expect("movements always encode");
        let seq = m.seq.0;
        if table.insert(seq, encoded.as_slice())?.is_none() {
            by_customer.insert((m.customer.0.as_u128(), seq), ())?;
            by_broker.insert((m.broker.0.as_u128(), seq), ())?;
        }
    }
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
        let txn = self.begin_read()?;
        through(&txn.open_table(META)?)
    }

    /// Projects `rows` (of the ticks after the projection's end through `tick`, in the order
    /// they were made) and marks the projection complete through `tick`, in one durable
    /// transaction: recovery's catching up.
    pub fn project(&self, rows: Projected<'_>, tick: u64) -> Result<(), JournalError> {
        self.write_durably(|txn| write(txn, rows, tick))
    }

    /// A handle for reads of the projection, beside the writer (none for a read-only journal,
    /// which never serves).
    pub fn projection(&self) -> Option<Projection> {
        self.database().map(|db| Projection { db })
    }
}

/// Reads of the projection: each a read transaction of its own, which never waits on the
/// journal's writer.
#[derive(Clone)]
pub struct Projection {
    db: Arc<Database>,
}

impl Projection {
    /// The latest ended order under `reference` of `customer`, if any.
    pub fn ended_order(
        &self,
        customer: CustomerCode,
        reference: &str,
    ) -> Result<Option<Order>, JournalError> {
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

/// Whose transaction list a read walks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    Customer(CustomerCode),
    Broker(BrokerCode),
}

impl Projection {
    /// A read of the projected movements at one point in time (one read transaction), so
    /// that a page's count, window and rows agree.
    pub fn movements(&self) -> Result<Movements, JournalError> {
        Ok(Movements {
            txn: self.db.begin_read()?,
        })
    }
}

/// The projected movements as one read transaction sees them.
pub struct Movements {
    txn: redb::ReadTransaction,
}

impl Movements {
    /// The table, or none before the first movement was projected.
    fn open<K: redb::Key + 'static, V: redb::Value + 'static>(
        &self,
        table: TableDefinition<K, V>,
    ) -> Result<Option<redb::ReadOnlyTable<K, V>>, JournalError> {
        match self.txn.open_table(table) {
            Ok(table) => Ok(Some(table)),
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// How many movements there are: sequence numbers run from 0 without gaps.
    pub fn count(&self) -> Result<u64, JournalError> {
        let Some(table) = self.open(MOVEMENTS)? else {
            return Ok(0);
        };
        Ok(table.last()?.map_or(0, |(k, _)| k.value() + 1))
    }

    /// The movement numbered `seq`, as it stands.
    pub fn get(&self, seq: u64) -> Result<Option<Movement>, JournalError> {
        let Some(table) = self.open(MOVEMENTS)? else {
            return Ok(None);
        };
        let Some(v) = table.get(seq)? else {
            return Ok(None);
        };
        postcard::from_bytes(v.value())
            .map(Some)
            .map_err(|e| JournalError::Corrupt(format!("movement {seq}: {e}")))
    }

    /// Up to `limit` of the holder's sequence numbers within `range`, from its low end or
    /// (`descending`) its high end.
    pub fn seqs(
        &self,
        holder: Holder,
        range: (Bound<u64>, Bound<u64>),
        descending: bool,
        limit: usize,
    ) -> Result<Vec<u64>, JournalError> {
        let (table, id) = match holder {
            Holder::Customer(c) => (MOVEMENTS_BY_CUSTOMER, c.0.as_u128()),
            Holder::Broker(b) => (MOVEMENTS_BY_BROKER, b.0.as_u128()),
        };
        let Some(table) = self.open(table)? else {
            return Ok(Vec::new());
        };
        let key = |b: Bound<u64>, open_end: u64| match b {
            Bound::Included(s) => Bound::Included((id, s)),
            Bound::Excluded(s) => Bound::Excluded((id, s)),
            Bound::Unbounded => Bound::Included((id, open_end)),
        };
        let range = table.range::<(u128, u64)>((key(range.0, 0), key(range.1, u64::MAX)))?;
        let mut out = Vec::with_capacity(limit.min(1_024));
        let mut push = |entry: Result<_, redb::StorageError>| -> Result<bool, JournalError> {
            let (k, _): (redb::AccessGuard<'_, (u128, u64)>, _) = entry?;
            out.push(k.value().1);
            Ok(out.len() < limit)
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
}

#[cfg(test)]
#[path = "projection_tests.rs"]
mod tests;
