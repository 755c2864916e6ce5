//! The group log: its records, and a journal that lost every commit since its last sync
//! getting back, from the log, every group whose record was appended.

use std::path::{Path, PathBuf};

use perpsim_core::ids::PublicKey;
use perpsim_core::time::Timestamp;

use super::{GroupRecord, footprint, log_path, records_after};
use crate::journal::{GROUPS_A_COMMIT, Journal, JournalError, TickRecord};
use crate::nonces::{NonceWrites, UsedNonce};

fn used(key: u8, nonce: u64) -> UsedNonce {
    UsedNonce {
        key: PublicKey([key; 32]),
        nonce,
    }
}

fn tick(n: u64) -> Vec<u8> {
    TickRecord::encode(Timestamp::from_millis(n as i64 * 1_000), n, &[])
}

/// Commits groups `from..to` (a tick and a nonce each) through the log and appends their
/// records: what the serving writer and its log thread do.
fn serve(journal: &Journal, log: &mut super::GroupLog, from: u64, to: u64) {
    for n in from..to {
        let bytes = tick(n);
        let sealed = journal
            .commit_group(
                n,
                &[bytes.as_slice()],
                NonceWrites {
                    used: &[used(1, 1_000 + n)],
                    forget_below: 0,
                },
            )
            .unwrap();
        assert!(!sealed.restart, "a few groups stay far within a checkpoint");
        let (seq, record) = sealed.record.expect("a logged group has a record");
        log.append(&[(seq, &record)]).unwrap();
    }
}

/// Opens `path` to serve, copies its file as synced (what a crash leaves of it, at worst), and
/// serves groups `1..=last`, their redb writes made (what a kill that leaves the page cache
/// leaves, at best).
fn served_then_crashed(path: &Path, last: u64) -> Vec<u8> {
    let journal = Journal::open_logged(path).unwrap();
    let synced = std::fs::read(path).unwrap();
    let mut log = journal.take_group_log().unwrap();
    serve(&journal, &mut log, 1, last + 1);
    journal.write_pending().unwrap();
    drop(journal);
    synced
}

/// A journal served through groups `1..=last` whose file a crash then rolled back to its last
/// sync: its directory (kept alive) and the journal's path.
fn rolled_back(last: u64) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.redb");
    let synced = served_then_crashed(&path, last);
    std::fs::write(&path, synced).unwrap();
    (dir, path)
}

/// A new journal opened to serve, with its log's appending end (and its directory, kept alive).
fn serving() -> (tempfile::TempDir, PathBuf, Journal, super::GroupLog) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.redb");
    let journal = Journal::open_logged(&path).unwrap();
    let log = journal.take_group_log().unwrap();
    (dir, path, journal, log)
}

/// Changes the group log's bytes as a crash or a disk might.
fn damage_log(path: &Path, damage: impl FnOnce(&mut Vec<u8>)) {
    let mut log = std::fs::read(log_path(path)).unwrap();
    damage(&mut log);
    std::fs::write(log_path(path), log).unwrap();
}

#[test]
fn a_group_record_decodes_as_encoded() {
    let ticks = [tick(7), tick(8)];
    let refs: Vec<&[u8]> = ticks.iter().map(Vec::as_slice).collect();
    let bytes = GroupRecord::encode(7, &refs, &[used(2, 5), used(3, 6)], 99);
    let back = GroupRecord::decode(&bytes).unwrap();
    assert_eq!(back.first, 7);
    assert_eq!(back.ticks, ticks.to_vec());
    assert_eq!(back.nonces, vec![used(2, 5), used(3, 6)]);
    assert_eq!(back.forget_below, 99);
    assert!(GroupRecord::decode(&bytes[..bytes.len() - 1]).is_err());
    assert_eq!(footprint(0), 4096);
    assert_eq!(footprint(4096 - 20), 4096);
    assert_eq!(footprint(4096 - 19), 8192);
}

/// D2 and "every acknowledged write survives": the journal's file rolled back to its last
/// sync (as a crash leaves it) gets every group whose record reached the log back on open,
/// ticks and spent nonces both, and serves on from there.
#[test]
fn a_journal_rolled_back_to_its_last_sync_recovers_every_logged_group() {
    let (_dir, path) = rolled_back(5);
    let journal = Journal::open(&path).unwrap();
    assert_eq!(
        journal.last_tick().unwrap(),
        5,
        "every logged group is back"
    );
    assert_eq!(journal.tick(5).unwrap().unwrap().first_seq, 5);
    let nonces: Vec<u64> = journal
        .nonces_since(0)
        .unwrap()
        .iter()
        .map(|u| u.nonce)
        .collect();
    assert_eq!(nonces, vec![1_001, 1_002, 1_003, 1_004, 1_005]);
    drop(journal);
    // Serving again starts the log over at offset 0 after the recovered groups.
    let journal = Journal::open_logged(&path).unwrap();
    let mut log = journal.take_group_log().unwrap();
    serve(&journal, &mut log, 6, 8);
    let recovered = records_after(&log_path(&path), 5).unwrap();
    let seqs: Vec<u64> = recovered.iter().map(|(s, _)| *s).collect();
    assert_eq!(seqs, vec![6, 7], "the old records after them end the walk");
}

/// A record torn by the crash (its write never returned, so its answers never left) is not
/// applied, and neither is anything after it.
#[test]
fn a_torn_record_ends_what_recovery_applies() {
    let (_dir, path) = rolled_back(4);
    damage_log(&path, |log| log[2 * 4096 + 30] ^= 0xff); // inside the third record's payload
    let journal = Journal::open(&path).unwrap();
    assert_eq!(journal.last_tick().unwrap(), 2);
    assert_eq!(journal.nonces_since(0).unwrap().len(), 2);
}

/// A file that redb kept whole (a clean stop, or a kill that left the page cache) needs
/// nothing from the log, and a read-only opener of a file that does is refused until a writer
/// has opened it once (by redb, which will not repair it, or by the log's own check).
#[test]
fn the_log_applies_only_what_the_file_lacks_and_a_reader_is_told_to_recover() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.redb");
    let synced = served_then_crashed(&path, 3);
    let journal = Journal::open(&path).unwrap();
    assert_eq!(journal.last_tick().unwrap(), 3);
    assert_eq!(journal.nonces_since(0).unwrap().len(), 3);
    drop(journal);
    std::fs::write(&path, synced).unwrap();
    assert!(Journal::open_read_only(&path).is_err());
    drop(Journal::open(&path).unwrap());
    assert_eq!(
        Journal::open_read_only(&path).unwrap().last_tick().unwrap(),
        3
    );
}

/// A gap between what redb holds and the log's first record is corruption, not a silent loss.
#[test]
fn a_log_that_skips_groups_is_refused() {
    let (_dir, path) = rolled_back(3);
    damage_log(&path, |log| {
        log.drain(..4096); // the first record gone: the walk starts at group 2
        log.resize(super::LOG_BYTES as usize, 0);
    });
    let refused = Journal::open(&path).err().expect("refused");
    assert!(refused.to_string().contains("missing"), "{refused}");
}

/// Every [`super::CHECKPOINT_BYTES`] of records a group's commit syncs redb instead of being
/// logged, and the log starts over at offset 0: a file rolled back to that checkpoint gets the
/// groups after it back from the log's new start, not the older records beyond them.
#[test]
fn after_a_checkpoint_the_log_starts_over_and_recovers_what_followed_it() {
    let (_dir, path, journal, mut log) = serving();
    let per_checkpoint = super::CHECKPOINT_BYTES / super::BLOCK as u64;
    let mut at_checkpoint = None;
    for n in 1..=per_checkpoint + 4 {
        let bytes = tick(n);
        let sealed = journal
            .commit_group(
                n,
                &[bytes.as_slice()],
                NonceWrites {
                    used: &[used(1, n)],
                    forget_below: 0,
                },
            )
            .unwrap();
        if sealed.restart {
            assert!(
                sealed.record.is_none(),
                "a checkpoint's group is durable in redb"
            );
            assert_eq!(n, per_checkpoint + 1, "the group that would pass the file");
            at_checkpoint = Some(std::fs::read(&path).unwrap());
            log.restart();
        }
        if let Some((seq, record)) = sealed.record {
            log.append(&[(seq, &record)]).unwrap();
        }
    }
    drop(journal);
    std::fs::write(&path, at_checkpoint.expect("a checkpoint came")).unwrap();
    let journal = Journal::open(&path).unwrap();
    assert_eq!(journal.last_tick().unwrap(), per_checkpoint + 4);
    assert_eq!(
        journal.nonces_since(0).unwrap().len() as u64,
        per_checkpoint + 4
    );
}

/// A group sealed through the log is durable by its record; redb gets the groups
/// [`GROUPS_A_COMMIT`] at a time (one transaction's cost for them all), or with the next
/// write transaction: a snapshot's, synced, holds every group before it, so the file then
/// needs nothing of the log, even one lost whole.
#[test]
fn logged_groups_reach_redb_in_batches_and_a_snapshot_carries_those_waiting() {
    let (_dir, path, journal, mut log) = serving();
    let batch = GROUPS_A_COMMIT as u64;
    serve(&journal, &mut log, 1, 4);
    assert_eq!(
        journal.last_tick().unwrap(),
        0,
        "three groups wait for a batch"
    );
    serve(&journal, &mut log, 4, batch + 1);
    assert_eq!(
        journal.last_tick().unwrap(),
        batch,
        "a batch is one transaction"
    );
    serve(&journal, &mut log, batch + 1, batch + 4);
    journal.write_snapshot(batch + 3, vec![7; 64]).unwrap();
    assert_eq!(journal.last_tick().unwrap(), batch + 3);
    drop(journal);
    damage_log(&path, |log| log.fill(0));
    let journal = Journal::open(&path).unwrap();
    assert_eq!(journal.last_tick().unwrap(), batch + 3);
    assert_eq!(journal.nonces_since(0).unwrap().len() as u64, batch + 3);
    assert_eq!(journal.snapshots().unwrap()[0].tick, batch + 3);
}

/// A write transaction that does not commit (a refusal drops it) leaves the logged groups it
/// held waiting: the next transaction writes them, and the ticks after them follow without a
/// gap.
#[test]
fn groups_waiting_outlive_a_transaction_that_does_not_commit() {
    let (_dir, _path, journal, mut log) = serving();
    serve(&journal, &mut log, 1, 4);
    let refused = journal.write_durably(|_| Err(JournalError::Corrupt("refused".into())));
    assert!(refused.is_err());
    assert_eq!(
        journal.last_tick().unwrap(),
        0,
        "the dropped one wrote nothing"
    );
    serve(&journal, &mut log, 4, 6);
    journal.write_pending().unwrap();
    assert_eq!(journal.last_tick().unwrap(), 5);
    assert_eq!(journal.nonces_since(0).unwrap().len(), 5);
}
