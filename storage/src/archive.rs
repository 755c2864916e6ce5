//! The journal's archive: ticks older than the oldest kept snapshot, moved out of the redb
//! file into immutable gzip segments beside it, so the live file stops growing with history
//! while a replay from genesis still reads every tick.
//!
//! Recovery never needs them (it starts from a snapshot and the ticks after it, which stay in
//! the journal); `replay --journal`, a replay from genesis and a recovery that finds no usable
//! snapshot read them through [`Journal::for_each_tick_after`] as if they were still in the
//! file. A segment is written whole to a temporary file, synced and renamed before the journal
//! forgets its ticks in one durable transaction that also lists it: a crash in between leaves
//! the ticks in the journal and an unlisted file the next archive writes again.
//!
//! Segment file: gzip of `MAGIC`, the journal's identity (SHA-256 of its genesis record), the
//! first and last tick (u64 LE), then each tick's journal row as a u32 LE length and its
//! bytes. The gzip trailer's CRC-32 covers the compression; the SHA-256 of the content, listed
//! with the segment in the journal, says it is this journal's segment and no other's.
//!
//! Bounds: one segment holds at most [`SEGMENT_TICKS`] ticks (an archive call moves at most
//! that many, so the writer is held for one segment's read, compression and delete), and the
//! writer's own archiving closes a segment at [`SEGMENT_BYTES`] of rows; the journal lists one
//! entry of 48 bytes per segment.

use std::fs::{self, File};
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use perpsim_systems::StateHash;
use redb::{ReadTransaction, ReadableTable};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::journal::{Journal, JournalError, TickRecord};

/// The most ticks one segment (and one archive call) holds.
pub const SEGMENT_TICKS: u64 = 65_536;
/// Rows that make a segment whole for the writer's archiving after a snapshot however few
/// ticks hold them: what the journal's file keeps beyond the oldest kept snapshot is less.
pub const SEGMENT_BYTES: u64 = 64 * 1024 * 1024;
/// A tick row longer than this in a segment is corruption, not a tick (the journal's rows are
/// bounded by the request and batch limits far below it).
const MAX_ROW: usize = 256 * 1024 * 1024;
const MAGIC: &[u8; 8] = b"psjseg\x00\x01";
/// Archived segments, oldest first: postcard `Vec<Segment>`, contiguous from tick 1.
const ARCHIVE_KEY: &str = "archive";

/// One archived segment: ticks `first..=last`, and the SHA-256 of its content (everything
/// the gzip stream holds), listed in the journal so that a segment of another data dir with
/// the same genesis and range — two runs of one scenario — is refused, not replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    pub first: u64,
    pub last: u64,
    pub digest: [u8; 32],
}

/// What one archive call did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Archived {
    /// The segment written, with its file and size; none when nothing was old enough.
    pub segment: Option<(Segment, PathBuf, u64)>,
    /// Every tick up to this one is in the archive (0: none).
    pub archived_through: u64,
    /// Ticks older than the oldest kept snapshot still in the journal: another call moves
    /// them.
    pub remaining: u64,
    /// Every segment's size together.
    pub archive_bytes: u64,
}

impl Segment {
    fn file_name(&self) -> String {
        file_name(self.first, self.last)
    }
}

fn file_name(first: u64, last: u64) -> String {
    format!("ticks-{first:012}-{last:012}.gz")
}

/// A writer that also hashes what it is given: a segment's digest is made as it is written.
struct Hashed<W>(Sha256, W);

impl<W: Write> Hashed<W> {
    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.0.update(bytes);
        self.1.write_all(bytes)
    }
}

impl Journal {
    /// The folder of the archive's segments: `journal-archive` beside `journal.redb`.
    pub fn archive_dir(&self) -> PathBuf {
        let stem = self
            .path()
            .file_stem()
            .map_or("journal".into(), |s| s.to_string_lossy());
        self.path().with_file_name(format!("{stem}-archive"))
    }

    /// The segments archived so far, oldest first.
    pub fn segments(&self) -> Result<Vec<Segment>, JournalError> {
        segments_in(&self.begin_read()?)
    }

    /// The size in bytes of the archive's segments still in their folder: an operator may
    /// move old ones to colder storage, and archiving goes on without them.
    pub fn archive_bytes(&self) -> Result<u64, JournalError> {
        let dir = self.archive_dir();
        let present = |s: &Segment| fs::metadata(dir.join(s.file_name())).map_or(0, |m| m.len());
        Ok(self.segments()?.iter().map(present).sum())
    }

    /// Moves the oldest ticks the newest snapshots no longer need — those at or before the
    /// oldest kept snapshot, at most `most` (and [`SEGMENT_TICKS`]) — into a new segment.
    pub fn archive(&self, most: u64) -> Result<Archived, JournalError> {
        let txn = self.begin_read()?;
        let listed = segments_in(&txn)?;
        let (through, oldest) = archivable(&txn, &listed)?;
        let last = oldest.min(through.saturating_add(most.min(SEGMENT_TICKS)));
        if last <= through {
            return Ok(Archived {
                segment: None,
                archived_through: through,
                remaining: 0,
                archive_bytes: self.archive_bytes()?,
            });
        }
        let identity = self.identity(&txn)?;
        let (segment, path) = self.write_segment(&txn, (through + 1, last), &identity)?;
        drop(txn);
        self.forget(listed, segment)?;
        let bytes = fs::metadata(&path).map_err(|e| storage(&path, e))?.len();
        Ok(Archived {
            segment: Some((segment, path, bytes)),
            archived_through: last,
            remaining: oldest - last,
            archive_bytes: self.archive_bytes()?,
        })
    }

    /// Archives every whole segment that no kept snapshot needs, oldest first, and leaves a
    /// shorter rest for later: the writer's turn after each snapshot, so the journal's file
    /// holds about the ticks since the oldest kept snapshot whatever the history (its commits'
    /// cost and the walk redb makes of it after a crash grow with the file). A segment is whole
    /// at `ticks` ticks (1 to [`SEGMENT_TICKS`]) or once its rows reach `bytes`, whichever comes
    /// first, so ticks of many commands bound the file as ticks of one do. The last call's
    /// answer, none if there was no whole segment.
    pub fn archive_whole_segments(
        &self,
        ticks: u64,
        bytes: u64,
    ) -> Result<Option<Archived>, JournalError> {
        assert!(
            (1..=SEGMENT_TICKS).contains(&ticks),
            "a segment of {ticks} ticks"
        );
        let mut last = None;
        loop {
            let txn = self.begin_read()?;
            let (through, oldest) = archivable(&txn, &segments_in(&txn)?)?;
            let Some(whole) = whole_segment(&txn, (through, oldest), ticks, bytes)? else {
                return Ok(last);
            };
            drop(txn);
            last = Some(self.archive(whole)?);
        }
    }

    /// Writes the ticks `first..=last` from the journal into their segment's file, durably.
    fn write_segment(
        &self,
        txn: &ReadTransaction,
        (first, last): (u64, u64),
        identity: &StateHash,
    ) -> Result<(Segment, PathBuf), JournalError> {
        let dir = self.archive_dir();
        owner_only_dir(&dir).map_err(|e| storage(&dir, e))?;
        let name = file_name(first, last);
        let path = dir.join(&name);
        let partial = dir.join(format!("{name}.partial"));
        let file = owner_only_file(&partial).map_err(|e| storage(&partial, e))?;
        let mut out = Hashed(
            Sha256::new(),
            BufWriter::new(GzEncoder::new(file, Compression::fast())),
        );
        let header = [
            MAGIC.as_slice(),
            &identity.0,
            &first.to_le_bytes(),
            &last.to_le_bytes(),
        ];
        let io = |e| storage(&partial, e);
        for part in header {
            out.put(part).map_err(io)?;
        }
        let ticks = txn.open_table(crate::journal::TICKS)?;
        let mut expected = first;
        for row in ticks.range(first..=last)? {
            let (k, v) = row?;
            if k.value() != expected {
                return Err(JournalError::Corrupt(format!("tick {expected} is missing")));
            }
            let len = u32::try_from(v.value().len()).expect("a tick row fits u32");
            out.put(&len.to_le_bytes()).map_err(io)?;
            out.put(v.value()).map_err(io)?;
            expected += 1;
        }
        if expected != last + 1 {
            return Err(JournalError::Corrupt(format!("tick {expected} is missing")));
        }
        let Hashed(digest, out) = out;
        let segment = Segment {
            first,
            last,
            digest: digest.finalize().into(),
        };
        let gz = out.into_inner().map_err(|e| io(e.into_error()))?;
        let file = gz.finish().map_err(io)?;
        file.sync_all().map_err(io)?;
        fs::rename(&partial, &path).map_err(io)?;
        File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| storage(&dir, e))?;
        Ok((segment, path))
    }

    /// Drops `segment`'s ticks from the journal and lists it, in one durable transaction.
    fn forget(&self, mut listed: Vec<Segment>, segment: Segment) -> Result<(), JournalError> {
        listed.push(segment);
        let encoded = postcard::to_stdvec(&listed).expect("segments encode");
        self.write_durably(|txn| {
            let mut ticks = txn.open_table(crate::journal::TICKS)?;
            ticks.retain_in(segment.first..=segment.last, |_, _| false)?;
            let mut meta = txn.open_table(crate::journal::META)?;
            meta.insert(ARCHIVE_KEY, encoded.as_slice())?;
            Ok(())
        })
    }

    /// The journal's identity, which its segments carry: the SHA-256 of its genesis record.
    fn identity(&self, txn: &ReadTransaction) -> Result<StateHash, JournalError> {
        let meta = txn.open_table(crate::journal::META)?;
        let genesis = meta
            .get(crate::journal::GENESIS_KEY)?
            .ok_or_else(|| JournalError::Corrupt("the journal has no genesis".into()))?;
        Ok(StateHash::of_encoding(genesis.value()))
    }

    /// Calls `apply` for each archived tick from `next` on, in order; returns the tick after
    /// the archive's last.
    pub(crate) fn replay_archive(
        &self,
        next: u64,
        apply: &mut impl FnMut(u64, TickRecord) -> Result<(), JournalError>,
    ) -> Result<u64, JournalError> {
        let txn = self.begin_read()?;
        let identity = self.identity(&txn)?;
        let listed = segments_in(&txn)?;
        drop(txn);
        let from = next;
        let mut next = next;
        for segment in listed.into_iter().filter(|s| s.last >= from) {
            self.read_segment(segment, &identity, |tick, row| {
                if tick >= next {
                    apply(tick, TickRecord::decode(row)?)?;
                }
                Ok(())
            })?;
            next = segment.last + 1;
        }
        Ok(next)
    }

    /// One archived tick's record.
    pub(crate) fn archived_tick(&self, tick: u64) -> Result<Option<TickRecord>, JournalError> {
        let txn = self.begin_read()?;
        let identity = self.identity(&txn)?;
        let Some(segment) = segments_in(&txn)?
            .into_iter()
            .find(|s| (s.first..=s.last).contains(&tick))
        else {
            return Ok(None);
        };
        let mut found = None;
        self.read_segment(segment, &identity, |at, row| {
            if at == tick {
                found = Some(TickRecord::decode(row)?);
            }
            Ok(())
        })?;
        Ok(found)
    }

    /// Streams a segment's rows, checking that it is the one listed and of this journal.
    fn read_segment(
        &self,
        segment: Segment,
        identity: &StateHash,
        mut each: impl FnMut(u64, &[u8]) -> Result<(), JournalError>,
    ) -> Result<(), JournalError> {
        let path = self.archive_dir().join(segment.file_name());
        let file = File::open(&path).map_err(|e| {
            JournalError::Storage(format!(
                "ticks {}..={} are archived in {}, which cannot be read: {e}",
                segment.first,
                segment.last,
                path.display()
            ))
        })?;
        let mut input = BufReader::new(GzDecoder::new(BufReader::new(file)));
        let corrupt = |what: &str| {
            JournalError::Corrupt(format!("archive segment {}: {what}", path.display()))
        };
        let mut header = [0u8; 56];
        input
            .read_exact(&mut header)
            .map_err(|e| corrupt(&e.to_string()))?;
        let mut digest = Sha256::new();
        digest.update(header);
        let word = |at: usize| u64::from_le_bytes(header[at..at + 8].try_into().expect("8"));
        if &header[..8] != MAGIC || header[8..40] != identity.0 {
            return Err(corrupt("not a segment of this journal"));
        }
        if (word(40), word(48)) != (segment.first, segment.last) {
            return Err(corrupt("its tick range is not the one the journal lists"));
        }
        let mut row = Vec::new();
        for tick in segment.first..=segment.last {
            let mut len_bytes = [0u8; 4];
            input
                .read_exact(&mut len_bytes)
                .map_err(|e| corrupt(&format!("tick {tick}: {e}")))?;
            let len = u32::from_le_bytes(len_bytes) as usize;
            if len > MAX_ROW {
                return Err(corrupt(&format!("tick {tick} claims {len} bytes")));
            }
            row.resize(len, 0);
            input
                .read_exact(&mut row)
                .map_err(|e| corrupt(&format!("tick {tick}: {e}")))?;
            digest.update(len_bytes);
            digest.update(&row);
            each(tick, &row)?;
        }
        // The end of the stream, which checks the gzip trailer's CRC.
        match input.read(&mut [0u8; 1]) {
            Ok(0) => {}
            Ok(_) => return Err(corrupt("bytes after its last tick")),
            Err(e) => return Err(corrupt(&e.to_string())),
        }
        match <[u8; 32]>::from(digest.finalize()) == segment.digest {
            true => Ok(()),
            false => Err(corrupt("its content is not what the journal listed")),
        }
    }
}

/// The last tick archived (0: none) and the oldest kept snapshot's tick: what lies between
/// them may be archived.
fn archivable(txn: &ReadTransaction, listed: &[Segment]) -> Result<(u64, u64), JournalError> {
    Ok((listed.last().map_or(0, |s| s.last), oldest_snapshot(txn)?))
}

/// The tick of the oldest snapshot kept (0: none), from its key alone: a snapshot's row is the
/// whole state, not worth reading for this.
fn oldest_snapshot(txn: &ReadTransaction) -> Result<u64, JournalError> {
    let snaps = txn.open_table(crate::journal::SNAPSHOTS)?;
    Ok(snaps.first()?.map_or(0, |(k, _)| k.value()))
}

/// How many ticks after `through` make a whole segment — `ticks` of them, or fewer whose rows
/// reach `bytes` — when all of them are at or before `oldest`; none otherwise.
fn whole_segment(
    txn: &ReadTransaction,
    (through, oldest): (u64, u64),
    ticks: u64,
    bytes: u64,
) -> Result<Option<u64>, JournalError> {
    if oldest <= through {
        return Ok(None);
    }
    let table = txn.open_table(crate::journal::TICKS)?;
    let (mut count, mut size) = (0u64, 0u64);
    for row in table.range(through + 1..=oldest)? {
        count += 1;
        size += row?.1.value().len() as u64;
        if count == ticks || size >= bytes {
            return Ok(Some(count));
        }
    }
    Ok(None)
}

fn segments_in(txn: &ReadTransaction) -> Result<Vec<Segment>, JournalError> {
    listed(&txn.open_table(crate::journal::META)?)
}

/// The segments the journal's meta table lists, oldest first.
pub(crate) fn listed(
    meta: &impl ReadableTable<&'static str, &'static [u8]>,
) -> Result<Vec<Segment>, JournalError> {
    let Some(v) = meta.get(ARCHIVE_KEY)? else {
        return Ok(Vec::new());
    };
    postcard::from_bytes(v.value()).map_err(|e| JournalError::Corrupt(format!("archive list: {e}")))
}

/// The last archived tick (0: none), as the journal's meta table lists it.
pub(crate) fn through(
    meta: &impl ReadableTable<&'static str, &'static [u8]>,
) -> Result<u64, JournalError> {
    Ok(listed(meta)?.last().map_or(0, |s| s.last))
}

fn storage(path: &Path, e: std::io::Error) -> JournalError {
    JournalError::Storage(format!("{}: {e}", path.display()))
}

/// The archive holds the customers' orders and money as the journal does: its owner only.
fn owner_only_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
}

fn owner_only_file(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
}

#[cfg(test)]
#[path = "archive_tests.rs"]
mod tests;
