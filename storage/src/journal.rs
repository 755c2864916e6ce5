//! The redb tables and the typed operations on them.
//!
//! One file: `meta` (format, genesis, the archive's segments), `ticks` (tick number → its
//! time, first sequence number and commands: one write transaction for
//! every tick waiting when the last commit ended, group commit), `snapshots` (tick → encoded
//! state and its hash; the newest two kept) and `nonces` (the spent nonces of signed
//! requests, keyed nonce ‖ public key so D2's window is one range); the projection's tables
//! and its mark are in a file of their own (`history_file`). A server's groups are committed
//! without a sync and made durable by the group log beside the file (`group_log`,
//! [`Journal::open_logged`]): a reopen for writing first commits, with a sync, the groups the
//! log holds past the last one redb kept. Other commits are redb's one-phase commits, one
//! sync each (a server's every [`group_log::CHECKPOINT_BYTES`] of records, its snapshots and
//! archives, a replay's batches, a shared journal's every group); a reopen after a crash then
//! walks the file to rebuild redb's allocator state, and the file stays small whatever the
//! history: the writer archives the ticks no kept snapshot needs in whole segments (bounded by
//! ticks and by bytes), so the walk follows the live state and the snapshot interval (redb's
//! quick repair, a second sync a commit, bought a bounded reopen while the file grew with
//! history). `recover` restores the newest snapshot whose hash
//! verifies and replays the ticks after it; `replay_from_genesis` ignores snapshots for the
//! state but checks each recorded hash on the way.
//!
//! Invariants: ticks are appended in order without gaps, each with the sequence number the
//! engine stood at; a snapshot is restored only if its hash matches and it belongs to this
//! journal's genesis; a command's nonce is written in the same transaction as its tick, so
//! the two are durable together or not at all. The nonce table is not engine state: it is
//! outside the ticks, the snapshots and the state hash, so replays do not depend on who
//! signed what.
//!
//! Sharing: a server holds its journal alone (`Journal::open`) unless it serves with
//! `--journal-readers on` (`Journal::open_shared`, redb's single-writer mode: byte-range
//! locks), when `Journal::open_read_only` (a replay, a report) reads beside it and follows its
//! commits without its lock, and never changes a byte. Sharing costs the writer a fraction of
//! a millisecond per durable commit, which is why it is opt-in. A scenario run has no request
//! waiting on a tick, so `append_batch` commits up to 4 096 ticks in one transaction.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use perpsim_core::ids::CustomerCode;
use perpsim_core::time::Timestamp;
use perpsim_systems::{Command, EngineState, Genesis, StateHash};
use redb::{
    Builder, ConcurrencyMode, Database, DatabaseError, Durability, ReadOnlyDatabase,
    ReadTransaction, ReadableDatabase, ReadableTable, TableDefinition, WriteTransaction,
};
use serde::{Deserialize, Serialize};

use arc_swap::ArcSwap;

use crate::archive;
use crate::backlog::{Backlog, Limits, MAX_PROJECTION_BATCH, MAX_PROJECTION_LINGER, Pending};
use crate::group_log::{self, CHECKPOINT_BYTES, GroupLog, GroupRecord, LOG_SEQ_KEY};
use crate::history_file::HistoryFile;
use crate::nonces::{self, NONCES, NonceWrites};
use crate::projection::{self, Projected};

pub(crate) const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
/// tick number (1-based) → encoded [`TickRecord`].
pub(crate) const TICKS: TableDefinition<u64, &[u8]> = TableDefinition::new("ticks");
/// tick number the snapshot stands at → encoded [`StoredSnapshot`].
pub(crate) const SNAPSHOTS: TableDefinition<u64, &[u8]> = TableDefinition::new("snapshots");

pub(crate) const GENESIS_KEY: &str = "genesis";
const FORMAT_KEY: &str = "format";
/// Version of the journal's row encoding; a file of another version is refused, not guessed.
const FORMAT: u32 = 2;
/// Snapshots kept: the newest and the one before, in case the newest cannot be decoded.
const SNAPSHOTS_KEPT: usize = 2;
/// Memory the journal's page cache may hold. The journal is written once and read back only
/// at recovery, so a large cache buys nothing; redb's default (1 GiB) let a running server's
/// memory grow with its journal for the first gigabyte (issue 27's soak).
pub(crate) const CACHE_BYTES: usize = 64 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("journal storage: {0}")]
    Storage(String),
    #[error("journal is corrupt: {0}")]
    Corrupt(String),
    /// Another process (a running server) holds the file.
    #[error("journal is in use: {0}")]
    InUse(String),
}

impl<E: Into<redb::Error>> From<E> for JournalError {
    fn from(e: E) -> Self {
        JournalError::Storage(e.into().to_string())
    }
}

/// One tick as journaled: its instant, the sequence number of its first command, its commands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TickRecord {
    pub time: Timestamp,
    pub first_seq: u64,
    pub commands: Vec<Command>,
}

/// Borrowing twin of [`TickRecord`] with the same encoding, so the host encodes the commands
/// before handing them to the engine by value.
#[derive(Serialize)]
struct TickRecordRef<'a> {
    time: Timestamp,
    first_seq: u64,
    commands: &'a [Command],
}

/// One command of a tick for [`TickRecord::encode_parts`]: a value, its postcard encoding, or
/// a customer's command with the encoding of the same command for another customer
/// ([`Command::encode_rebound`]: a replay's plan encodes them for a placeholder).
#[derive(Debug, Clone, Copy)]
pub enum CommandBytes<'a> {
    Value(&'a Command),
    Encoded(&'a [u8]),
    Rebound(&'a Command, &'a [u8], CustomerCode),
}

impl TickRecord {
    pub fn encode(time: Timestamp, first_seq: u64, commands: &[Command]) -> Vec<u8> {
        postcard::to_stdvec(&TickRecordRef {
            time,
            first_seq,
            commands,
        })
        .expect("commands always encode")
    }

    /// [`TickRecord::encode`] of commands some of which come encoded as postcard encodes a
    /// command (a replay's timeline holds them so): the same bytes, without encoding again
    /// what already is. Postcard writes a struct as its fields one after the other and a
    /// sequence as its length (a varint, as a `usize` is written) before its elements.
    pub fn encode_parts(time: Timestamp, first_seq: u64, commands: &[CommandBytes]) -> Vec<u8> {
        let head = (time, first_seq, commands.len());
        let mut out = postcard::to_stdvec(&head).expect("a tick's head always encodes");
        for c in commands {
            match c {
                CommandBytes::Value(command) => {
                    out = postcard::to_extend(command, out).expect("commands always encode");
                }
                CommandBytes::Encoded(bytes) => out.extend_from_slice(bytes),
                CommandBytes::Rebound(command, bytes, customer) => {
                    command.encode_rebound(bytes, *customer, &mut out);
                }
            }
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, JournalError> {
        postcard::from_bytes(bytes).map_err(|e| JournalError::Corrupt(format!("tick record: {e}")))
    }
}

#[derive(Serialize, Deserialize)]
struct StoredSnapshot {
    hash: StateHash,
    state: Vec<u8>,
}

/// A snapshot as found in the journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotInfo {
    pub tick: u64,
    pub hash: StateHash,
}

pub struct Journal {
    db: Handle,
    path: PathBuf,
    /// The projection's own file (a writer's handle only).
    history: Option<HistoryFile>,
    /// The rows committed ticks made that the projection does not hold yet (`backlog`).
    backlog: Mutex<Backlog>,
    /// A serving writer's group log (`group_log`): where its groups are made durable.
    log: Option<Mutex<LogState>>,
}

/// The serving writer's side of the group log: the next record's number, the bytes appended
/// since the last checkpoint, the groups sealed and not yet written to redb, and the
/// appending end until its thread takes it.
struct LogState {
    next_seq: u64,
    since_checkpoint: u64,
    /// Each group's redb transaction cost about 50 µs whatever it held (redb's page and root
    /// bookkeeping), and a group is a few requests: so groups are written to redb
    /// [`GROUPS_A_COMMIT`] at a time, by the next write transaction at the latest. Their
    /// records are in the log (or on their way, before any answer leaves), which recovery
    /// applies past the last group redb holds, as after any crash.
    pending: Vec<(u64, GroupRecord)>,
    file: Option<GroupLog>,
}

/// A write transaction and the last logged group it holds (see `Journal::begin_write`).
struct Writing {
    txn: WriteTransaction,
    through: Option<u64>,
}

/// Groups sealed through the log that wait for one redb transaction together: at most about
/// 64 × 64 ticks of 4 096 commands, bounded, and in practice a few hundred kilobytes.
pub const GROUPS_A_COMMIT: usize = 64;

/// A group committed to redb ([`Journal::commit_group`]).
#[derive(Debug)]
pub struct Sealed {
    /// Its record, to append to the group log before its answers leave; none when the
    /// commit synced redb (a checkpoint, or a journal without a log): durable already.
    pub record: Option<(u64, Vec<u8>)>,
    /// The commit was a checkpoint: the log starts again at offset 0 after the records
    /// handed before it.
    pub restart: bool,
}

/// The server's handle writes; a reader's (a replay, a report) only reads, without changing a
/// byte. A writer opened [`Journal::open_shared`] uses redb's single-writer mode, so readers
/// in other processes follow its commits without its lock; one opened [`Journal::open`] holds
/// the file alone (a durable commit costs ~0.13 ms less: 281 µs against 411 µs a one-command
/// tick, `cargo bench -p perpsim-benches --bench journal -- durable/commands_per_tick/1$`).
enum Handle {
    /// Shared with the [`crate::Projection`] handles that read beside the writer.
    Write(Arc<Database>),
    Read(ReadOnlyDatabase),
}

/// How a shared writer and every reader share the file (see [`Handle`]).
const SHARING: ConcurrencyMode = ConcurrencyMode::SingleWriter;

fn in_use(path: &Path, e: DatabaseError) -> JournalError {
    match e {
        DatabaseError::DatabaseAlreadyOpen => {
            JournalError::InUse(format!("{} is open in another process", path.display()))
        }
        other => other.into(),
    }
}

/// The sequence number of the last group committed to the file through the group log (0: none).
fn logged_through(
    meta: &impl ReadableTable<&'static str, &'static [u8]>,
) -> Result<u64, JournalError> {
    match meta.get(LOG_SEQ_KEY)? {
        Some(v) => Ok(u64::from_le_bytes(v.value().try_into().map_err(|_| {
            JournalError::Corrupt("the group log's sequence number".into())
        })?)),
        None => Ok(0),
    }
}

/// Commits, with a sync, the groups the log beside `path` holds after the last one redb
/// kept (a crash rolled redb back to its last sync; the log's records are what was answered
/// since): their ticks and nonces, as their own commits wrote them.
fn apply_group_log(db: &Database, path: &Path) -> Result<(), JournalError> {
    let mut txn = db.begin_write()?;
    txn.set_durability(Durability::Immediate)?;
    let committed = logged_through(&txn.open_table(META)?)?;
    let records = group_log::records_after(&group_log::log_path(path), committed)?;
    if records.is_empty() {
        return Ok(()); // the transaction is dropped: nothing was written
    }
    write_records(&txn, &records)?;
    txn.commit()?;
    Ok(())
}

/// Writes logged groups, in order, and the last one's number as the last group redb holds.
fn write_records(
    txn: &WriteTransaction,
    records: &[(u64, GroupRecord)],
) -> Result<(), JournalError> {
    let Some(&(last, _)) = records.last() else {
        return Ok(());
    };
    for (_, group) in records {
        let nonces = NonceWrites {
            used: &group.nonces,
            forget_below: group.forget_below,
        };
        write_group(txn, group.first, &group.ticks, nonces)?;
    }
    txn.open_table(META)?
        .insert(LOG_SEQ_KEY, last.to_le_bytes().as_slice())?;
    Ok(())
}

/// Creates `path` empty with mode 0600 when missing (redb initialises an empty file), and
/// sets 0600 on it when it exists.
pub(crate) fn owner_only(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
}

impl Journal {
    /// Opens the journal file, creating it if missing. The file (journal and snapshots: the
    /// customers' orders and money) is readable by its owner only, mode 0600 whatever the
    /// umask, and an existing file is brought back to it.
    pub fn open(path: &Path) -> Result<Self, JournalError> {
        Journal::open_as(path, ConcurrencyMode::ExclusiveWriter)
    }

    /// [`Journal::open`] for a server that makes its groups durable through the group log
    /// (`group_log`): [`Journal::commit_group`] commits without a sync of redb's file and
    /// hands back the record to append; [`Journal::take_group_log`] gives the appending end.
    pub fn open_logged(path: &Path) -> Result<Self, JournalError> {
        // `open` has synced redb (its `meta` transaction is `Immediate`, and redb 4 syncs every
        // such commit, one that changes nothing too) and applied what the log held past it:
        // nothing the log holds is needed before it is written over from offset 0.
        let mut journal = Journal::open(path)?;
        let committed = logged_through(&journal.begin_read()?.open_table(META)?)?;
        journal.log = Some(Mutex::new(LogState {
            next_seq: committed + 1,
            since_checkpoint: 0,
            pending: Vec::with_capacity(GROUPS_A_COMMIT),
            file: Some(GroupLog::open(&group_log::log_path(path))?),
        }));
        Ok(journal)
    }

    /// [`Journal::open`], letting other processes read the journal while this one writes it
    /// (`perpsim serve --journal-readers on`).
    pub fn open_shared(path: &Path) -> Result<Self, JournalError> {
        Journal::open_as(path, SHARING)
    }

    fn open_as(path: &Path, mode: ConcurrencyMode) -> Result<Self, JournalError> {
        owner_only(path).map_err(|e| {
            JournalError::Storage(format!(
                "cannot restrict {} to mode 0600: {e}",
                path.display()
            ))
        })?;
        let db = Builder::new()
            .set_concurrency_mode(mode)
            .set_cache_size(CACHE_BYTES)
            .create(path)
            .map_err(|e| in_use(path, e))?;
        let mut txn = db.begin_write()?;
        txn.set_durability(Durability::Immediate)?;
        let projected_here = {
            let mut meta = txn.open_table(META)?;
            let found = meta.get(FORMAT_KEY)?.map(|v| v.value().to_vec());
            match found {
                Some(v) if v != FORMAT.to_le_bytes() => {
                    return Err(JournalError::Corrupt(format!(
                        "format {v:?} is not {FORMAT}"
                    )));
                }
                Some(_) => {}
                None => {
                    meta.insert(FORMAT_KEY, FORMAT.to_le_bytes().as_slice())?;
                }
            }
            txn.open_table(TICKS)?;
            txn.open_table(SNAPSHOTS)?;
            txn.open_table(NONCES)?;
            projection::marked(&meta)?
        };
        // A file written before the projection had its own held it beside the ticks: its
        // tables go, and recovery projects the history again into the projection's file.
        if projected_here {
            projection::drop_tables(&txn)?;
        }
        txn.commit()?;
        apply_group_log(&db, path)?;
        Ok(Journal {
            db: Handle::Write(Arc::new(db)),
            path: path.to_owned(),
            history: Some(HistoryFile::beside(path)),
            backlog: Mutex::new(Backlog::new(Arc::default())),
            log: None,
        })
    }

    /// Opens an existing journal to read it, without changing a byte of the file, beside the
    /// process that writes it if that one opened it [`Journal::open_shared`] (a writer that
    /// holds it alone refuses: [`JournalError::InUse`]). Writing through it panics.
    pub fn open_read_only(path: &Path) -> Result<Self, JournalError> {
        let db = Builder::new()
            .set_concurrency_mode(SHARING)
            .open_read_only(path)
            .map_err(|e| in_use(path, e))?;
        let journal = Journal {
            db: Handle::Read(db),
            path: path.to_owned(),
            history: None,
            backlog: Mutex::new(Backlog::new(Arc::default())),
            log: None,
        };
        let txn = journal.begin_read()?;
        let meta = txn.open_table(META)?;
        let committed = logged_through(&meta)?;
        if !group_log::records_after(&group_log::log_path(path), committed)?.is_empty() {
            return Err(JournalError::Storage(format!(
                "{} holds groups its group log has not given back yet (the server stopped \
                 without a clean shutdown): open it to write once (`perpsim serve`) to recover",
                path.display()
            )));
        }
        match meta.get(FORMAT_KEY)?.map(|v| v.value().to_vec()) {
            Some(v) if v == FORMAT.to_le_bytes() => Ok(journal),
            other => Err(JournalError::Corrupt(format!(
                "format {other:?} is not {FORMAT}"
            ))),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The file's size now: ticks, snapshots and spent nonces, and the pages redb keeps free.
    pub fn file_bytes(&self) -> std::io::Result<u64> {
        std::fs::metadata(&self.path).map(|m| m.len())
    }

    pub(crate) fn begin_read(&self) -> Result<ReadTransaction, JournalError> {
        Ok(match &self.db {
            Handle::Write(db) => db.begin_read()?,
            Handle::Read(db) => db.begin_read()?,
        })
    }

    /// The database a writer's handle opened (none for a read-only one).
    pub(crate) fn database(&self) -> Option<Arc<Database>> {
        match &self.db {
            Handle::Write(db) => Some(Arc::clone(db)),
            Handle::Read(_) => None,
        }
    }

    /// The projection's file; a journal opened read-only has none and never projects.
    pub(crate) fn history(&self) -> &HistoryFile {
        self.history
            .as_ref()
            .expect("a journal opened read-only never projects")
    }

    /// Runs `write` in one durable transaction of the projection's file and commits it.
    pub(crate) fn write_history(
        &self,
        write: impl FnOnce(&WriteTransaction) -> Result<(), JournalError>,
    ) -> Result<(), JournalError> {
        let txn = self.history().begin_write(true)?;
        write(&txn)?;
        txn.commit()?;
        Ok(())
    }

    /// A write transaction that holds, first, the logged groups not yet in redb: whatever
    /// it writes (a snapshot, an archive, a sync) comes after every group sealed before it.
    /// Commit it with [`Journal::commit`]: the groups leave memory only once it commits (one
    /// dropped, a refusal's, wrote nothing, and the next transaction writes them again).
    fn begin_write(&self) -> Result<Writing, JournalError> {
        let txn = match &self.db {
            // One phase, one sync: no quick repair. A reopen after a crash walks the file,
            // which archiving keeps to about two snapshot intervals of ticks (module header).
            Handle::Write(db) => db.begin_write()?,
            Handle::Read(_) => panic!("a journal opened read-only is never written"),
        };
        let mut through = None;
        if let Some(log) = &self.log {
            let log = log.lock().expect("the log's lock is never poisoned");
            write_records(&txn, &log.pending)?;
            through = log.pending.last().map(|&(seq, _)| seq);
        }
        Ok(Writing { txn, through })
    }

    /// Commits `writing`, and forgets the logged groups it wrote.
    fn commit(&self, writing: Writing) -> Result<(), JournalError> {
        writing.txn.commit()?;
        if let (Some(log), Some(through)) = (&self.log, writing.through) {
            let mut log = log.lock().expect("the log's lock is never poisoned");
            log.pending.retain(|&(seq, _)| seq > through);
        }
        Ok(())
    }

    /// Writes the logged groups waiting for redb, without a sync (a writer with nothing to
    /// do keeps redb current; their records are durable in the log).
    pub fn write_pending(&self) -> Result<(), JournalError> {
        let waiting = self.log.as_ref().is_some_and(|log| {
            !log.lock()
                .expect("the log's lock is never poisoned")
                .pending
                .is_empty()
        });
        match waiting {
            true => self.write_waiting(Durability::None),
            false => Ok(()),
        }
    }

    /// A transaction of its own for the logged groups waiting for redb (none or more).
    fn write_waiting(&self, durability: Durability) -> Result<(), JournalError> {
        let mut writing = self.begin_write()?;
        writing.txn.set_durability(durability)?;
        self.commit(writing)
    }

    pub fn genesis(&self) -> Result<Option<Genesis>, JournalError> {
        let txn = self.begin_read()?;
        let meta = txn.open_table(META)?;
        let Some(bytes) = meta.get(GENESIS_KEY)? else {
            return Ok(None);
        };
        postcard::from_bytes(bytes.value())
            .map(Some)
            .map_err(|e| JournalError::Corrupt(format!("genesis: {e}")))
    }

    /// Records the genesis of a new journal; refuses to overwrite an existing one.
    pub fn init(&self, genesis: &Genesis) -> Result<(), JournalError> {
        let mut writing = self.begin_write()?;
        writing.txn.set_durability(Durability::Immediate)?;
        {
            let mut meta = writing.txn.open_table(META)?;
            if meta.get(GENESIS_KEY)?.is_some() {
                return Err(JournalError::Corrupt("genesis is already recorded".into()));
            }
            let bytes = postcard::to_stdvec(genesis).expect("genesis always encodes");
            meta.insert(GENESIS_KEY, bytes.as_slice())?;
        }
        self.commit(writing)
    }

    /// Runs `write` in one `Durability::Immediate` transaction and commits it.
    pub(crate) fn write_durably(
        &self,
        write: impl FnOnce(&WriteTransaction) -> Result<(), JournalError>,
    ) -> Result<(), JournalError> {
        let mut writing = self.begin_write()?;
        writing.txn.set_durability(Durability::Immediate)?;
        write(&writing.txn)?;
        self.commit(writing)
    }

    /// Appends one tick, durably, with the nonces of the signed requests whose commands it
    /// carries: when this returns, the tick survives a crash and those nonces stay spent.
    pub fn append(
        &self,
        tick: u64,
        encoded: &[u8],
        nonces: NonceWrites<'_>,
    ) -> Result<(), JournalError> {
        self.append_batch(tick, &[encoded], None, nonces)
    }

    /// Appends consecutive ticks (none or more), the first numbered `first`, and `nonces` in
    /// one durable transaction: one commit, one fsync, for every tick that waited on it (the
    /// service's writer commits whatever the engine made while the last commit ran; a
    /// scenario replay commits once per batch). With `rows` (the ticks' ended orders and
    /// history rows, in the order they were made) the projection is extended through the
    /// last of them: in the same transaction when they are few and none wait before them,
    /// else by the backlog (`backlog`), of which the transaction projects a share either way.
    /// Without `rows` (a scenario replay) the projection is left where it stands.
    pub fn append_batch(
        &self,
        first: u64,
        encoded: &[impl AsRef<[u8]>],
        rows: Option<Projected>,
        nonces: NonceWrites<'_>,
    ) -> Result<(), JournalError> {
        self.write_durably(|txn| write_group(txn, first, encoded, nonces))?;
        let ticks = (!encoded.is_empty()).then(|| (first, first + encoded.len() as u64 - 1));
        match rows {
            Some(rows) => self.project_committed(ticks, rows),
            None => self.project_committed(None, Projected::default()),
        }
    }

    /// Commits one group of a serving writer (ticks numbered from `first`, and nonces). Through
    /// the group log the group is durable once its record is appended ([`Sealed`]), and it
    /// reaches redb with the [`GROUPS_A_COMMIT`] groups it waits for, without a sync, or with
    /// the next write transaction; a group whose record would take the records since the last
    /// checkpoint past [`CHECKPOINT_BYTES`] is instead committed at once with every group
    /// waiting, with a sync (a checkpoint). Without a log, with a sync.
    pub fn commit_group(
        &self,
        first: u64,
        encoded: &[&[u8]],
        nonces: NonceWrites<'_>,
    ) -> Result<Sealed, JournalError> {
        let Some(log) = &self.log else {
            self.write_durably(|txn| write_group(txn, first, encoded, nonces))?;
            return Ok(Sealed {
                record: None,
                restart: false,
            });
        };
        let record = GroupRecord::encode(first, encoded, nonces.used, nonces.forget_below);
        let size = group_log::footprint(record.len());
        let (seq, checkpoint, full) = {
            let mut log = log.lock().expect("the log's lock is never poisoned");
            let seq = log.next_seq;
            let group = GroupRecord {
                first,
                ticks: encoded.iter().map(|t| t.to_vec()).collect(),
                nonces: nonces.used.to_vec(),
                forget_below: nonces.forget_below,
            };
            log.pending.push((seq, group));
            log.next_seq += 1;
            let checkpoint = log.since_checkpoint + size > CHECKPOINT_BYTES;
            (seq, checkpoint, log.pending.len() >= GROUPS_A_COMMIT)
        };
        if checkpoint {
            self.checkpoint()?;
        } else if full {
            self.write_waiting(Durability::None)?;
        }
        let mut log = log.lock().expect("the log's lock is never poisoned");
        if checkpoint {
            log.since_checkpoint = 0;
            return Ok(Sealed {
                record: None,
                restart: true,
            });
        }
        log.since_checkpoint += size;
        Ok(Sealed {
            record: Some((seq, record)),
            restart: false,
        })
    }

    /// The group log's appending end, once (none for a journal opened without one).
    pub fn take_group_log(&self) -> Option<GroupLog> {
        let log = self.log.as_ref()?;
        log.lock().expect("never poisoned").file.take()
    }

    /// Syncs redb's file: every group committed is durable in it, whatever the log holds.
    pub fn checkpoint(&self) -> Result<(), JournalError> {
        self.write_waiting(Durability::Immediate)
    }

    /// Extends the projection with the rows that durable ticks `first..=last` made (none for
    /// a commit of nonces alone): in a transaction of the projection's file, without a sync,
    /// when the rows are few and none wait before them, else by the backlog (`backlog`), of
    /// which the transaction projects a share either way.
    pub fn project_committed(
        &self,
        ticks: Option<(u64, u64)>,
        rows: Projected,
    ) -> Result<(), JournalError> {
        let mut backlog = self
            .backlog
            .lock()
            .expect("the backlog's lock is never poisoned");
        let (inline, waiting) = match ticks {
            Some((_, last)) if backlog.takes(&rows) => (None, Some((last, rows))),
            Some((first, last)) => (Some((first, last, rows)), None),
            None => (None, None),
        };
        let mut progress = None;
        let due = backlog.due();
        // The projection follows in its own file, without a sync: the ticks are durable, and
        // a crash before the projection's next sync is made good by recovery.
        if inline.is_some() || due {
            let txn = self.history().begin_write(false)?;
            if let Some((first, last, rows)) = &inline {
                projection::check_follows(&txn, first - 1)?;
                projection::write(&txn, rows, *last)?;
            }
            if due {
                progress = Some(backlog.work(&txn)?);
            }
            txn.commit()?;
        }
        if progress.is_some() || waiting.is_some() {
            backlog.advance(progress.unwrap_or_default(), waiting);
        }
        Ok(())
    }

    /// Projects a share of the backlog in a transaction of its own (the writer's work while
    /// nothing else waits); whether any is left. Only the share that empties the backlog
    /// waits for the disk: the others are made durable by the next commit that does (a crash
    /// before it loses them with the projection's mark, and recovery projects them again).
    pub fn project_backlog(&self) -> Result<bool, JournalError> {
        self.project_share(false)
    }

    /// [`Journal::project_backlog`] where the backlog is due (where enough commits' rows
    /// linger): the idle writer's work between commits. The share that empties it waits for
    /// the disk only where a large commit's rows were among it. Whether more is due.
    pub fn project_due(&self) -> Result<bool, JournalError> {
        self.project_share(true)
    }

    fn project_share(&self, when_due: bool) -> Result<bool, JournalError> {
        let mut backlog = self
            .backlog
            .lock()
            .expect("the backlog's lock is never poisoned");
        if backlog.is_empty() || (when_due && !backlog.due()) {
            return Ok(false);
        }
        let durable = backlog.empties_in_one_share() && (!when_due || backlog.holds_large());
        let txn = self.history().begin_write(durable)?;
        let progress = backlog.work(&txn)?;
        txn.commit()?;
        backlog.advance(progress, None);
        Ok(if when_due {
            backlog.due()
        } else {
            !backlog.is_empty()
        })
    }

    /// Rows and index entries committed ticks made that the projection does not hold yet.
    pub fn backlog(&self) -> usize {
        self.backlog
            .lock()
            .expect("the backlog's lock is never poisoned")
            .writes()
    }

    /// Sets the rows a commit projects in its own transaction while the backlog is empty,
    /// at most [`MAX_PROJECTION_BATCH`] (`--projection-batch`): a commit of more waits in the
    /// backlog.
    pub fn set_projection_batch(&self, rows: usize) {
        assert!(
            rows <= MAX_PROJECTION_BATCH,
            "{rows} rows is over the bound"
        );
        self.change_backlog_limits(|limits| Limits {
            inline: rows,
            ..limits
        });
    }

    /// Sets how many commits' rows wait together in the backlog before a transaction projects
    /// them, 1 to [`MAX_PROJECTION_LINGER`] (1, the default: each commit projects its own).
    pub fn set_projection_linger(&self, commits: usize) {
        assert!(
            (1..=MAX_PROJECTION_LINGER).contains(&commits),
            "{commits} commits is outside 1..={MAX_PROJECTION_LINGER}"
        );
        self.change_backlog_limits(|limits| Limits {
            linger: commits,
            ..limits
        });
    }

    fn change_backlog_limits(&self, change: impl FnOnce(Limits) -> Limits) {
        let mut backlog = self
            .backlog
            .lock()
            .expect("the backlog's lock is never poisoned");
        let limits = change(backlog.limits());
        backlog.set_limits(limits);
    }

    /// Sets when rows wait in the backlog and how much of it a commit projects (tests make
    /// every commit's rows wait, a few at a time).
    #[cfg(test)]
    pub(crate) fn set_backlog_limits(&self, limits: Limits) {
        self.change_backlog_limits(|_| limits);
    }

    /// The backlog as reads see it.
    pub(crate) fn pending(&self) -> Arc<ArcSwap<Pending>> {
        let backlog = self
            .backlog
            .lock()
            .expect("the backlog's lock is never poisoned");
        backlog.published()
    }

    /// One tick's record, if journaled (from the archive if it was moved there).
    pub fn tick(&self, tick: u64) -> Result<Option<TickRecord>, JournalError> {
        let txn = self.begin_read()?;
        let ticks = txn.open_table(TICKS)?;
        match ticks.get(tick)? {
            Some(v) => TickRecord::decode(v.value()).map(Some),
            None => self.archived_tick(tick),
        }
    }

    /// Number of the last journaled tick (0 when none), archived ones included.
    pub fn last_tick(&self) -> Result<u64, JournalError> {
        let txn = self.begin_read()?;
        let ticks = txn.open_table(TICKS)?;
        match ticks.last()? {
            Some((k, _)) => Ok(k.value()),
            None => archive::through(&txn.open_table(META)?),
        }
    }

    /// Calls `apply` for every tick after `after`, in order, those moved to the archive
    /// first. Reads in bounded chunks so memory stays flat whatever the journal's length.
    pub fn for_each_tick_after(
        &self,
        after: u64,
        mut apply: impl FnMut(u64, TickRecord) -> Result<(), JournalError>,
    ) -> Result<(), JournalError> {
        const CHUNK: usize = 4_096;
        let mut next = after + 1;
        loop {
            let chunk: Vec<(u64, TickRecord)> = {
                let txn = self.begin_read()?;
                if archive::through(&txn.open_table(META)?)? >= next {
                    // Archived before this read began, or while it ran (between chunks).
                    drop(txn);
                    next = self.replay_archive(next, &mut apply)?;
                    continue;
                }
                let ticks = txn.open_table(TICKS)?;
                let mut chunk = Vec::with_capacity(CHUNK);
                for row in ticks.range(next..)?.take(CHUNK) {
                    let (k, v) = row?;
                    chunk.push((k.value(), TickRecord::decode(v.value())?));
                }
                chunk
            };
            let Some(&(last, _)) = chunk.last() else {
                return Ok(());
            };
            for (tick, record) in chunk {
                if tick != next {
                    return Err(JournalError::Corrupt(format!("tick {next} is missing")));
                }
                apply(tick, record)?;
                next += 1;
            }
            next = last + 1;
        }
    }

    /// Stores a snapshot of the state at `tick`, `encoded` as `Engine::encode_state` (or
    /// `EngineState::encode`) gives it, and drops all but the newest few.
    pub fn write_snapshot(
        &self,
        tick: u64,
        encoded: Vec<u8>,
    ) -> Result<SnapshotInfo, JournalError> {
        let hash = StateHash::of_snapshot(&encoded);
        let stored = postcard::to_stdvec(&StoredSnapshot {
            hash,
            state: encoded,
        })
        .expect("snapshot encodes");
        // Recovery starts from a snapshot no newer than the projection's durable mark.
        if let Some(history) = &self.history {
            history.sync()?;
        }
        let mut writing = self.begin_write()?;
        writing.txn.set_durability(Durability::Immediate)?;
        {
            let mut snaps = writing.txn.open_table(SNAPSHOTS)?;
            snaps.insert(tick, stored.as_slice())?;
            let keys: Vec<u64> = snaps
                .iter()?
                .map(|r| r.map(|(k, _)| k.value()))
                .collect::<Result<_, _>>()?;
            for old in keys.iter().rev().skip(SNAPSHOTS_KEPT) {
                snaps.remove(*old)?;
            }
        }
        self.commit(writing)?;
        Ok(SnapshotInfo { tick, hash })
    }

    /// Snapshots present, newest first.
    pub fn snapshots(&self) -> Result<Vec<SnapshotInfo>, JournalError> {
        let txn = self.begin_read()?;
        let snaps = txn.open_table(SNAPSHOTS)?;
        let mut out = Vec::new();
        for row in snaps.iter()?.rev() {
            let (k, v) = row?;
            let stored: StoredSnapshot = postcard::from_bytes(v.value())
                .map_err(|e| JournalError::Corrupt(format!("snapshot: {e}")))?;
            out.push(SnapshotInfo {
                tick: k.value(),
                hash: stored.hash,
            });
        }
        Ok(out)
    }

    /// The state stored at `tick`, if its encoding is of this build's version.
    pub fn load_snapshot(&self, tick: u64) -> Result<Option<EngineState>, JournalError> {
        let txn = self.begin_read()?;
        let snaps = txn.open_table(SNAPSHOTS)?;
        let Some(v) = snaps.get(tick)? else {
            return Ok(None);
        };
        let stored: StoredSnapshot = postcard::from_bytes(v.value())
            .map_err(|e| JournalError::Corrupt(format!("snapshot: {e}")))?;
        Ok(EngineState::decode(&stored.state))
    }
}

/// Writes one group: its ticks (numbered from `first`) and the nonces they spent. Every path
/// that journals a group (a synced batch, a logged group, a group recovered from the log)
/// writes it here, so the three cannot drift apart.
fn write_group(
    txn: &WriteTransaction,
    first: u64,
    encoded: &[impl AsRef<[u8]>],
    nonces: NonceWrites<'_>,
) -> Result<(), JournalError> {
    append_ticks(txn, first, encoded)?;
    nonces::write(txn, nonces)
}

/// Appends `encoded` (none or more ticks), the first numbered `first`, after the last tick.
fn append_ticks(
    txn: &WriteTransaction,
    first: u64,
    encoded: &[impl AsRef<[u8]>],
) -> Result<(), JournalError> {
    if encoded.is_empty() {
        return Ok(());
    }
    let mut ticks = txn.open_table(TICKS)?;
    let last = match ticks.last()? {
        Some((k, _)) => k.value(),
        // Every tick journaled so far is archived (or none is).
        None => archive::through(&txn.open_table(META)?)?,
    };
    assert_eq!(first, last + 1, "ticks are appended in order without gaps");
    for (tick, bytes) in (first..).zip(encoded) {
        ticks.insert(tick, bytes.as_ref())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    /// Issue 23: the journal holds customers' orders and money; no other local user reads it,
    /// whatever the umask or the mode an older version left.
    #[test]
    fn the_journal_is_created_and_kept_readable_by_its_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.redb");
        drop(Journal::open(&path).unwrap());
        assert_eq!(mode(&path), 0o600);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        drop(Journal::open(&path).unwrap());
        assert_eq!(mode(&path), 0o600, "an existing file is restricted again");
    }

    /// A replay journals the encodings its timeline holds, a customer's bound by its bytes: a
    /// tick so built is the tick `encode` makes of the same commands, byte for byte, and
    /// decodes to them (here with 300 commands, so the count takes two bytes).
    #[test]
    fn a_tick_of_commands_given_encoded_is_the_same_bytes_as_of_the_commands() {
        use perpsim_systems::command::CancelOrder;
        let commands: Vec<Command> = (0..300)
            .map(|i| {
                Command::CancelOrder(CancelOrder {
                    customer: CustomerCode(perpsim_core::Uuid::from_u128(i)),
                    reference_id: format!("r-{i}"),
                })
            })
            .collect();
        // Every third encoded for a placeholder customer, to be bound by its bytes.
        let placeholder = CustomerCode(perpsim_core::Uuid::nil());
        let encoded: Vec<Vec<u8>> = (commands.iter().enumerate())
            .map(|(i, c)| {
                let mut c = c.clone();
                if i % 3 == 2 {
                    *c.customer_mut().unwrap() = placeholder;
                }
                postcard::to_stdvec(&c).unwrap()
            })
            .collect();
        let parts: Vec<CommandBytes> = (commands.iter().zip(&encoded))
            .enumerate()
            .map(|(i, (c, e))| match i % 3 {
                0 => CommandBytes::Value(c),
                1 => CommandBytes::Encoded(e),
                _ => CommandBytes::Rebound(
                    c,
                    e,
                    CustomerCode(perpsim_core::Uuid::from_u128(i as u128)),
                ),
            })
            .collect();
        let at = Timestamp::from_millis(1_704_067_200_123);
        let bytes = TickRecord::encode_parts(at, 7_000_000, &parts);
        assert_eq!(bytes, TickRecord::encode(at, 7_000_000, &commands));
        let decoded = TickRecord::decode(&bytes).unwrap();
        assert_eq!((decoded.time, decoded.first_seq), (at, 7_000_000));
        assert_eq!(decoded.commands, commands);
    }
}
