//! The projection's own redb file, `<journal's stem>-history.redb` beside the journal, opened
//! by a writer's handle when the projection is first read or written (a scenario replay's
//! journal, which never projects, has none).
//!
//! Why a file of its own: redb's quick repair writes the allocator state of the whole file at
//! every commit, so a commit's cost grows with the file (`journal/commit_by_size`: 40.5 KiB a
//! commit at 40 MiB, 292 KiB at 2.5 GiB). History grows for as long as the venue runs; the
//! journal's file, which every answer waits on, need not. The projection is committed without
//! a sync after each journal commit (visible to reads at once: redb's `Durability::None`) and
//! made durable once a second, before every snapshot, and when the backlog empties. A crash
//! loses at most the rows since the last durable commit, with the projection's mark, and
//! recovery projects them again from the journal (`recovery`).
//!
//! Invariant: the projection's durable mark is never behind the newest snapshot, since
//! recovery starts from a snapshot no newer than it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redb::{Builder, Database, DatabaseError, Durability, WriteTransaction};

use crate::journal::{CACHE_BYTES, JournalError, owner_only};

/// How long the projection's commits go without a sync at most, while rows keep coming.
const SYNC_EVERY: Duration = Duration::from_secs(1);

pub(crate) struct HistoryFile {
    path: PathBuf,
    db: Mutex<Option<Arc<Database>>>,
    /// When a commit last made the file durable.
    synced: Mutex<Instant>,
}

impl HistoryFile {
    pub(crate) fn beside(journal: &Path) -> HistoryFile {
        let stem = journal
            .file_stem()
            .map_or("journal".into(), |s| s.to_string_lossy());
        HistoryFile {
            path: journal.with_file_name(format!("{stem}-history.redb")),
            db: Mutex::new(None),
            synced: Mutex::new(Instant::now()),
        }
    }

    /// The file's database, opened (and created, mode 0600) on first use.
    pub(crate) fn database(&self) -> Result<Arc<Database>, JournalError> {
        let mut db = self
            .db
            .lock()
            .expect("the history file's lock is never poisoned");
        if let Some(db) = &*db {
            return Ok(Arc::clone(db));
        }
        owner_only(&self.path).map_err(|e| {
            JournalError::Storage(format!(
                "cannot restrict {} to mode 0600: {e}",
                self.path.display()
            ))
        })?;
        let opened = Builder::new()
            .set_cache_size(CACHE_BYTES)
            .create(&self.path)
            .map_err(|e| match e {
                DatabaseError::DatabaseAlreadyOpen => JournalError::InUse(format!(
                    "{} is open in another process",
                    self.path.display()
                )),
                other => other.into(),
            })?;
        Ok(Arc::clone(db.insert(Arc::new(opened))))
    }

    /// A write transaction with redb's quick repair (a reopen after a crash reads the
    /// allocator state the last durable commit saved), durable when `durable`, or else when
    /// the last durable commit is [`SYNC_EVERY`] old.
    pub(crate) fn begin_write(&self, durable: bool) -> Result<WriteTransaction, JournalError> {
        let mut txn = self.database()?.begin_write()?;
        txn.set_quick_repair(true);
        let mut synced = self.synced.lock().expect("never poisoned");
        if durable || synced.elapsed() >= SYNC_EVERY {
            txn.set_durability(Durability::Immediate)?;
            *synced = Instant::now();
        } else {
            txn.set_durability(Durability::None)?;
        }
        Ok(txn)
    }

    /// Makes every commit so far durable (none to make if the file was never opened).
    pub(crate) fn sync(&self) -> Result<(), JournalError> {
        let opened = self.db.lock().expect("never poisoned").is_some();
        if opened {
            self.begin_write(true)?.commit()?;
        }
        Ok(())
    }
}
