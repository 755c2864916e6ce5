//! The group log: what makes a serving journal's commits durable without a sync of redb's file.
//!
//! A server's writer seals each group of ticks and hands the group's record (its ticks and
//! spent nonces, [`GroupRecord`]) to a thread that appends it here with one synced, contiguous
//! write; the group's answers leave only once that write returns. redb gets the groups without
//! a sync, 64 in one transaction (`Journal::commit_group`: each transaction cost ~50 µs of the
//! writer's however little it held), or with the next write transaction. redb's
//! own sync (an `Immediate` commit: a checkpoint) comes every [`CHECKPOINT_BYTES`] of records,
//! and with every snapshot. A sync of redb's file sent about eleven scattered pages to the disk
//! and took 0.41 ms under load; the writer waited for it before it could begin the next group.
//! Now the log's one write goes on beside the next group's commit.
//!
//! Layout: records one after the other from offset 0, each on [`BLOCK`] boundaries: a header
//! (magic, CRC-32 of the rest, sequence number, payload length) and the payload. Sequence numbers
//! rise by one a record across restarts; each redb transaction that writes groups stores the
//! last one's in `meta` ([`LOG_SEQ_KEY`]), so after a crash redb (rolled back to its last sync,
//! or holding fewer groups than were logged) names the last group it holds, and recovery
//! applies the records after it, walking from offset 0 while each record is whole and follows
//! the one before. After a checkpoint the thread starts again at offset 0: a record left from
//! before has a lower sequence number and ends the walk.
//!
//! Bounds: the file is [`LOG_BYTES`]; the records since the last checkpoint take at most
//! [`CHECKPOINT_BYTES`] (the group that would pass it is committed with a sync instead, and
//! the log starts again after it); the write buffer is one drain's records, at most the file.

use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::journal::JournalError;
use crate::nonces::UsedNonce;
use perpsim_core::ids::PublicKey;

/// The log file's size: written once with zeros when created, so no append allocates blocks
/// (about 2 000 one-block records: a second and a half of groups at this machine's pace).
pub const LOG_BYTES: u64 = 8 << 20;
/// Records appended since the last checkpoint before the next group's commit syncs redb: the
/// whole file, which the records since a checkpoint never outgrow.
pub const CHECKPOINT_BYTES: u64 = LOG_BYTES;
/// The unit of the log: a record starts on it and is padded to it (`O_DIRECT`'s alignment).
pub const BLOCK: usize = 4096;
const HEADER: usize = 20;
const MAGIC: u32 = 0x4753_5050; // "PPSG"
/// `meta` key of the sequence number of the last group committed to redb.
pub(crate) const LOG_SEQ_KEY: &str = "group_log_seq";

/// The log beside `journal`: `journal.redb` → `journal.log`.
pub fn log_path(journal: &Path) -> PathBuf {
    journal.with_extension("log")
}

/// Bytes a record of `payload` bytes takes in the log.
pub fn footprint(payload: usize) -> u64 {
    (HEADER + payload).div_ceil(BLOCK) as u64 * BLOCK as u64
}

/// One group as the log holds it: what redb's transaction wrote for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRecord {
    /// The first tick's number (the group's ticks follow it without gaps).
    pub first: u64,
    pub ticks: Vec<Vec<u8>>,
    pub nonces: Vec<UsedNonce>,
    pub forget_below: u64,
}

impl GroupRecord {
    /// `first`, tick count and each tick's length and bytes, nonce count and each nonce,
    /// `forget_below`; integers little-endian.
    pub fn encode(first: u64, ticks: &[&[u8]], nonces: &[UsedNonce], forget_below: u64) -> Vec<u8> {
        let bytes: usize = ticks.iter().map(|t| t.len() + 4).sum();
        let mut out = Vec::with_capacity(24 + bytes + nonces.len() * 40);
        out.extend_from_slice(&first.to_le_bytes());
        out.extend_from_slice(&(ticks.len() as u32).to_le_bytes());
        for t in ticks {
            out.extend_from_slice(&(t.len() as u32).to_le_bytes());
            out.extend_from_slice(t);
        }
        out.extend_from_slice(&(nonces.len() as u32).to_le_bytes());
        for n in nonces {
            out.extend_from_slice(&n.nonce.to_le_bytes());
            out.extend_from_slice(&n.key.0);
        }
        out.extend_from_slice(&forget_below.to_le_bytes());
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, JournalError> {
        let mut r = Reader(bytes);
        let first = r.u64()?;
        let ticks = (0..r.u32()?)
            .map(|_| {
                let len = r.u32()? as usize;
                r.take(len).map(<[u8]>::to_vec)
            })
            .collect::<Result<_, _>>()?;
        let nonces = (0..r.u32()?)
            .map(|_| {
                let nonce = r.u64()?;
                let key: [u8; 32] = r.take(32)?.try_into().expect("32 bytes taken");
                Ok(UsedNonce {
                    key: PublicKey(key),
                    nonce,
                })
            })
            .collect::<Result<_, JournalError>>()?;
        let forget_below = r.u64()?;
        if !r.0.is_empty() {
            return Err(corrupt("bytes after a group record"));
        }
        Ok(GroupRecord {
            first,
            ticks,
            nonces,
            forget_below,
        })
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], JournalError> {
        if self.0.len() < n {
            return Err(corrupt("a group record ends early"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u32(&mut self) -> Result<u32, JournalError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4")))
    }

    fn u64(&mut self) -> Result<u64, JournalError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }
}

fn corrupt(what: &str) -> JournalError {
    JournalError::Corrupt(format!("group log: {what}"))
}

/// The appending end, owned by the thread that makes groups durable.
pub struct GroupLog {
    file: File,
    path: PathBuf,
    /// Opened `O_DIRECT` (until a write refuses it).
    direct: bool,
    /// Where the next record goes.
    at: u64,
    /// Bytes for one write, with room to start on a [`BLOCK`] boundary.
    buffer: Vec<u8>,
}

impl GroupLog {
    /// Opens (or creates, 0600, written with zeros) the log to append from offset 0: called
    /// once recovery has applied what it held and synced redb, so nothing in it is needed.
    pub(crate) fn open(path: &Path) -> Result<Self, JournalError> {
        // The customers' orders and the spent nonces: the owner's only, as the journal is.
        crate::journal::owner_only(path).map_err(|e| io(path, e))?;
        let fresh = std::fs::metadata(path)
            .map(|m| m.len() != LOG_BYTES)
            .unwrap_or(true);
        if fresh {
            let file = options(0).open(path).map_err(|e| io(path, e))?;
            file.set_len(0).map_err(|e| io(path, e))?;
            let zeros = vec![0u8; 1 << 20];
            for at in (0..LOG_BYTES).step_by(zeros.len()) {
                file.write_all_at(&zeros, at).map_err(|e| io(path, e))?;
            }
            file.sync_all().map_err(|e| io(path, e))?;
        }
        // Direct and synced: each append is one request to the disk, not a copy into the page
        // cache and a flush of it; a file system without O_DIRECT (tmpfs) takes it synced only.
        let (file, direct) = match options(libc::O_DIRECT | libc::O_DSYNC).open(path) {
            Ok(file) => (file, true),
            Err(_) => (
                options(libc::O_DSYNC).open(path).map_err(|e| io(path, e))?,
                false,
            ),
        };
        Ok(GroupLog {
            file,
            path: path.to_owned(),
            direct,
            at: 0,
            buffer: Vec::new(),
        })
    }

    /// Writes `bytes` at `at`, synced; a file system that opened the file `O_DIRECT` and
    /// then refuses a direct write (an alignment it does not take) gets it synced only.
    fn write_synced(&mut self, bytes_at: (usize, usize), at: u64) -> std::io::Result<()> {
        let bytes = &self.buffer[bytes_at.0..bytes_at.1];
        match self.file.write_all_at(bytes, at) {
            Err(e) if self.direct && e.raw_os_error() == Some(libc::EINVAL) => {
                self.file = options(libc::O_DSYNC).open(&self.path)?;
                self.direct = false;
                self.file
                    .write_all_at(&self.buffer[bytes_at.0..bytes_at.1], at)
            }
            done => done,
        }
    }

    /// Appends `records` (sequence number, payload) in one synced write: when this returns
    /// they survive a crash. The caller keeps them within [`LOG_BYTES`] by its checkpoints.
    pub fn append(&mut self, records: &[(u64, &[u8])]) -> std::io::Result<()> {
        let total: u64 = records.iter().map(|(_, p)| footprint(p.len())).sum();
        assert!(self.at + total <= LOG_BYTES, "the group log overflows");
        self.buffer.clear();
        self.buffer.resize(total as usize + BLOCK, 0);
        let start = self.buffer.as_ptr().align_offset(BLOCK);
        let mut at = start;
        for (seq, payload) in records {
            let block = &mut self.buffer[at..at + footprint(payload.len()) as usize];
            block[8..16].copy_from_slice(&seq.to_le_bytes());
            block[16..20].copy_from_slice(&(payload.len() as u32).to_le_bytes());
            block[HEADER..HEADER + payload.len()].copy_from_slice(payload);
            let crc = crc32fast::hash(&block[8..HEADER + payload.len()]);
            block[0..4].copy_from_slice(&MAGIC.to_le_bytes());
            block[4..8].copy_from_slice(&crc.to_le_bytes());
            at += block.len();
        }
        self.write_synced((start, start + total as usize), self.at)?;
        self.at += total;
        Ok(())
    }

    /// A checkpoint synced redb: the next record goes to offset 0.
    pub fn restart(&mut self) {
        self.at = 0;
    }
}

fn options(flags: i32) -> std::fs::OpenOptions {
    let mut o = std::fs::OpenOptions::new();
    o.read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(flags);
    o
}

fn io(path: &Path, e: std::io::Error) -> JournalError {
    JournalError::Storage(format!("{}: {e}", path.display()))
}

/// The records after `committed` (the last group redb holds), in order: the walk from offset 0
/// while each record is whole and follows the one before; nothing when there is no log. It
/// reads record by record, so a log that holds a few groups costs a few blocks, not the file.
pub(crate) fn records_after(
    path: &Path,
    committed: u64,
) -> Result<Vec<(u64, GroupRecord)>, JournalError> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(path, e)),
    };
    let size = file.metadata().map_err(|e| io(path, e))?.len();
    let mut found = Vec::new();
    let mut at = 0;
    let mut last: Option<u64> = None;
    while let Some((seq, payload)) = record_at(&file, size, at).map_err(|e| io(path, e))? {
        if last.is_some_and(|l| seq != l + 1) {
            break;
        }
        if seq > committed {
            if found.is_empty() && seq != committed + 1 {
                return Err(corrupt(&format!(
                    "record {seq} follows group {committed}: the groups between are missing"
                )));
            }
            found.push((seq, GroupRecord::decode(&payload)?));
        }
        last = Some(seq);
        at += footprint(payload.len());
    }
    Ok(found)
}

/// The whole record at `at` of a log of `size` bytes, if one is there: its header, then (the
/// length it gives bounded by the file) its payload, checked against the header's CRC.
fn record_at(file: &File, size: u64, at: u64) -> std::io::Result<Option<(u64, Vec<u8>)>> {
    let mut head = [0u8; HEADER];
    if at + HEADER as u64 > size {
        return Ok(None);
    }
    file.read_exact_at(&mut head, at)?;
    if u32::from_le_bytes(head[0..4].try_into().expect("4")) != MAGIC {
        return Ok(None);
    }
    let crc = u32::from_le_bytes(head[4..8].try_into().expect("4"));
    let seq = u64::from_le_bytes(head[8..16].try_into().expect("8"));
    let len = u32::from_le_bytes(head[16..20].try_into().expect("4")) as u64;
    if at + HEADER as u64 + len > size {
        return Ok(None); // a torn header's length: no record reaches past the file
    }
    let mut payload = vec![0u8; len as usize];
    file.read_exact_at(&mut payload, at + HEADER as u64)?;
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&head[8..]);
    hasher.update(&payload);
    Ok((hasher.finalize() == crc).then_some((seq, payload)))
}

#[cfg(test)]
#[path = "group_log_tests.rs"]
mod tests;
