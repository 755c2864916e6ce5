//! The history projection (issue 37): ended orders, kept in the journal's file for reads, so
//! the read view holds live orders only and a read of an ended one is a redb lookup.
//!
//! The table holds, per (customer, reference_id), the latest order under that reference that
//! has ended — what a read of the reference returns when none is open (rule 11 admits a new
//! order under a reference only once the one before it has ended, so the latest ended one is
//! also the one updated last). The service writes a tick's ended orders in the transaction
//! that journals the tick: the projection is never behind the journal, and a crash between
//! the two cannot happen. [`PROJECTED_KEY`] says through which tick it is complete; a file
//! written without it (a scenario replay's, which never serves reads, or one older than the
//! projection) is projected by recovery, which then replays from a snapshot no newer than
//! the projection and projects the ticks after it as it goes (`recovery`).
//!
//! Reads go through a [`Projection`], a handle on the same database: a redb read
//! transaction, which never waits on the writer.

use std::sync::Arc;

use perpsim_core::ids::CustomerCode;
use perpsim_systems::records::order::Order;
use redb::{Database, ReadableDatabase, TableDefinition, WriteTransaction};

use crate::journal::{Journal, JournalError, META};

/// (customer, reference_id) → the encoded latest ended [`Order`] under that reference.
const ENDED_ORDERS: TableDefinition<(u128, &str), &[u8]> = TableDefinition::new("ended_orders");

/// META key: the tick through which every ended order is in [`ENDED_ORDERS`] (absent: none).
const PROJECTED_KEY: &str = "projected_through";

/// A tick's ended orders, in the order they ended.
pub type Ended = [Arc<Order>];

/// The tick the projection is complete through, as `meta` holds it.
fn through(
    meta: &impl redb::ReadableTable<&'static str, &'static [u8]>,
) -> Result<u64, JournalError> {
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

/// Writes `orders` (oldest first: a later one under the same reference replaces an earlier)
/// and marks the projection complete through `tick`.
pub(crate) fn write<'a>(
    txn: &WriteTransaction,
    orders: impl IntoIterator<Item = &'a Order>,
    tick: u64,
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
    let mut meta = txn.open_table(META)?;
    meta.insert(PROJECTED_KEY, tick.to_le_bytes().as_slice())?;
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

    /// Projects `orders` (ended in the ticks after the projection's end through `tick`, in
    /// the order they ended) and marks the projection complete through `tick`, in one
    /// durable transaction: recovery's catching up.
    pub fn project(&self, orders: &Ended, tick: u64) -> Result<(), JournalError> {
        self.write_durably(|txn| write(txn, orders.iter().map(|o| &**o), tick))
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

#[cfg(test)]
#[path = "projection_tests.rs"]
mod tests;
