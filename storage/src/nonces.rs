//! Used nonces of signed requests (D2), kept in the journal so that no signed request is
//! accepted twice across restarts and crashes.
//!
//! A write's nonce is inserted in the same transaction as the tick that carries its command,
//! so the command and the fact that its nonce is spent become durable together. Requests that
//! reach no command (reads, refusals before the engine) are recorded in a transaction of
//! their own before they are answered. Rows are keyed by nonce first, so the window a restart
//! needs is one range scan and forgetting what left the window is one range delete.

use perpsim_core::ids::PublicKey;
use redb::{TableDefinition, WriteTransaction};

use crate::journal::{Journal, JournalError};

/// nonce (big-endian) ‖ public key → (). Big-endian keeps byte order equal to nonce order.
pub(crate) const NONCES: TableDefinition<&[u8; 40], ()> = TableDefinition::new("nonces");

/// One spent nonce: which key used which nonce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UsedNonce {
    pub key: PublicKey,
    pub nonce: u64,
}

impl UsedNonce {
    fn row(&self) -> [u8; 40] {
        let mut row = [0u8; 40];
        row[..8].copy_from_slice(&self.nonce.to_be_bytes());
        row[8..].copy_from_slice(&self.key.0);
        row
    }

    fn from_row(row: &[u8; 40]) -> Self {
        let (nonce, key) = row.split_at(8);
        UsedNonce {
            nonce: u64::from_be_bytes(nonce.try_into().expect("8 bytes")),
            key: PublicKey(key.try_into().expect("32 bytes")),
        }
    }
}

/// What one write transaction does to the nonce table: spend `used`, and forget every nonce
/// below `forget_below` (nonces that old are refused by the window anyway, so keeping them
/// would only grow the table).
#[derive(Debug, Clone, Copy, Default)]
pub struct NonceWrites<'a> {
    pub used: &'a [UsedNonce],
    pub forget_below: u64,
}

/// Applies `writes` inside an open write transaction.
pub(crate) fn write(txn: &WriteTransaction, writes: NonceWrites<'_>) -> Result<(), JournalError> {
    if writes.used.is_empty() && writes.forget_below == 0 {
        return Ok(()); // nothing to spend or forget (a scenario replay's batches)
    }
    let mut table = txn.open_table(NONCES)?;
    for used in writes.used {
        table.insert(&used.row(), ())?;
    }
    if writes.forget_below == 0 {
        return Ok(()); // nothing to forget: the table's oldest pages stay as they are
    }
    let floor = UsedNonce {
        key: PublicKey([0; 32]),
        nonce: writes.forget_below,
    }
    .row();
    table.retain_in::<&[u8; 40], _>(..&floor, |_, _| false)?;
    Ok(())
}

impl Journal {
    /// Records nonces in a transaction of their own, durably: when this returns, the nonces
    /// are spent even if the process dies the next instant.
    pub fn record_nonces(&self, writes: NonceWrites<'_>) -> Result<(), JournalError> {
        self.write_durably(|txn| write(txn, writes))
    }

    /// Every spent nonce at or above `floor`, in nonce order: the window a restart rebuilds.
    pub fn nonces_since(&self, floor: u64) -> Result<Vec<UsedNonce>, JournalError> {
        let txn = self.begin_read()?;
        let table = txn.open_table(NONCES)?;
        let start = UsedNonce {
            key: PublicKey([0; 32]),
            nonce: floor,
        }
        .row();
        let mut out = Vec::new();
        for row in table.range::<&[u8; 40]>(&start..)? {
            out.push(UsedNonce::from_row(row?.0.value()));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn used(key: u8, nonce: u64) -> UsedNonce {
        UsedNonce {
            key: PublicKey([key; 32]),
            nonce,
        }
    }

    #[test]
    fn spent_nonces_survive_reopening_and_old_ones_are_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.redb");
        {
            let journal = Journal::open(&path).unwrap();
            let batch = [used(1, 100), used(2, 100), used(1, 300), used(1, 200)];
            journal
                .record_nonces(NonceWrites {
                    used: &batch,
                    forget_below: 0,
                })
                .unwrap();
            journal
                .record_nonces(NonceWrites {
                    used: &[used(3, 400)],
                    forget_below: 150,
                })
                .unwrap();
        }
        let journal = Journal::open(&path).unwrap();
        assert_eq!(
            journal.nonces_since(0).unwrap(),
            vec![used(1, 200), used(1, 300), used(3, 400)],
            "nonce order; nonces below 150 forgotten, the same nonce of another key kept apart"
        );
        assert_eq!(
            journal.nonces_since(300).unwrap(),
            vec![used(1, 300), used(3, 400)]
        );
    }
}
