//! The archive moves old ticks out of the journal without losing one: a replay from genesis
//! reads them where they went, recovery does not need them, and a crash, a missing file or a
//! foreign one is never read as history.

use super::*;
use crate::recovery::tests::{START, fresh, fresh_seeded, journaled, run};
use crate::{recover, replay_from_genesis};
use perpsim_core::ids::PublicKey;
use perpsim_systems::Command;
use perpsim_systems::command::CreateBroker;

fn ticks_in_file(journal: &Journal) -> Vec<u64> {
    let txn = journal.begin_read().unwrap();
    let ticks = txn.open_table(crate::journal::TICKS).unwrap();
    ticks
        .iter()
        .unwrap()
        .map(|r| r.unwrap().0.value())
        .collect()
}

/// The (first, last) ticks of each archived segment, oldest first.
fn archived_ranges(journal: &Journal) -> Vec<(u64, u64)> {
    let segments = journal.segments().unwrap();
    segments.iter().map(|s| (s.first, s.last)).collect()
}

#[test]
fn archived_ticks_leave_the_file_and_a_replay_from_genesis_still_reads_them() {
    let (_dir, journal, mut live) = fresh();
    run(&journal, &mut live, 95, 20);
    let archived = journal.archive(u64::MAX).unwrap();
    let (segment, path, bytes) = archived.segment.clone().unwrap();
    assert_eq!(
        (segment.first, segment.last),
        (1, 60),
        "up to the oldest kept snapshot"
    );
    assert_eq!((archived.archived_through, archived.remaining), (60, 0));
    assert!(path.starts_with(journal.archive_dir()) && bytes > 0);
    assert_eq!(ticks_in_file(&journal).first(), Some(&61));
    assert_eq!(
        journal.archive(u64::MAX).unwrap().segment,
        None,
        "nothing older is left"
    );
    assert_eq!(journal.last_tick().unwrap(), 96);
    assert_eq!(journal.tick(5).unwrap().unwrap().commands.len(), 2);

    let replayed = replay_from_genesis(&journal).unwrap().unwrap();
    assert_eq!(replayed.engine.state_hash(), live.state_hash());
    assert!(replayed.verified.iter().all(|(_, ok)| *ok));
    let recovered = recover(&journal).unwrap().unwrap();
    assert_eq!(recovered.engine.state_hash(), live.state_hash());
}

/// Issue 37 (disk managed): after each snapshot the writer archives the whole segments no kept
/// snapshot needs, and only whole ones; what is left waits for the next snapshot.
#[test]
fn whole_segments_behind_the_oldest_snapshot_are_archived_and_the_rest_waits() {
    let (_dir, journal, mut live) = fresh();
    run(&journal, &mut live, 95, 20);
    let done = journal
        .archive_whole_segments(25, u64::MAX)
        .unwrap()
        .unwrap();
    let ranges = archived_ranges(&journal);
    assert_eq!(
        ranges,
        vec![(1, 25), (26, 50)],
        "up to the oldest kept snapshot, 60"
    );
    assert_eq!((done.archived_through, done.remaining), (50, 10));
    assert_eq!(ticks_in_file(&journal).first(), Some(&51));
    assert!(
        journal
            .archive_whole_segments(25, u64::MAX)
            .unwrap()
            .is_none()
    );
    let replayed = replay_from_genesis(&journal).unwrap().unwrap();
    assert_eq!(replayed.engine.state_hash(), live.state_hash());
}

/// Issue 37 (a journal file of bounded size): a segment is also whole once its rows reach the
/// byte bound, so ticks of many commands leave no more in the file than ticks of one.
#[test]
fn a_segment_is_whole_at_its_byte_bound_however_few_ticks_hold_it() {
    let (_dir, journal, mut live) = fresh();
    run(&journal, &mut live, 95, 20);
    let row = |t: u64| {
        let txn = journal.begin_read().unwrap();
        let ticks = txn.open_table(crate::journal::TICKS).unwrap();
        ticks.get(t).unwrap().unwrap().value().len() as u64
    };
    let two_rows = row(1) + row(2);
    let done = journal
        .archive_whole_segments(25, two_rows)
        .unwrap()
        .unwrap();
    let ranges = archived_ranges(&journal);
    assert_eq!(ranges[0], (1, 2), "the first two rows reach the bound");
    assert!(
        ranges.iter().all(|(a, b)| b - a < 25),
        "never more ticks than the tick bound"
    );
    assert!(done.archived_through <= 60 && done.archived_through > 50);
    assert_eq!(
        ticks_in_file(&journal).first(),
        Some(&(done.archived_through + 1))
    );
    let replayed = replay_from_genesis(&journal).unwrap().unwrap();
    assert_eq!(replayed.engine.state_hash(), live.state_hash());
}

#[test]
fn an_archive_call_moves_at_most_its_bound_and_the_next_one_goes_on() {
    let (_dir, journal, mut live) = fresh();
    run(&journal, &mut live, 95, 20);
    let first = journal.archive(10).unwrap();
    let range = |s: Segment| (s.first, s.last);
    assert_eq!(range(first.segment.unwrap().0), (1, 10));
    assert_eq!(first.remaining, 50);
    let second = journal.archive(u64::MAX).unwrap();
    assert_eq!(range(second.segment.unwrap().0), (11, 60));
    assert_eq!(journal.segments().unwrap().len(), 2);
    let replayed = replay_from_genesis(&journal).unwrap().unwrap();
    assert_eq!(replayed.engine.state_hash(), live.state_hash());
}

#[test]
fn a_journal_archived_to_its_last_tick_goes_on_appending_after_it() {
    let (dir, journal, mut live) = fresh();
    run(&journal, &mut live, 19, 20);
    assert_eq!(
        journal.snapshots().unwrap().len(),
        1,
        "one snapshot, at the last tick"
    );
    assert_eq!(journal.archive(u64::MAX).unwrap().archived_through, 20);
    assert!(ticks_in_file(&journal).is_empty());
    assert_eq!(journal.last_tick().unwrap(), 20);
    drop(journal);
    let journal = Journal::open(&dir.path().join("journal.redb")).unwrap();
    let recovered = recover(&journal).unwrap().unwrap();
    assert_eq!(recovered.engine.state_hash(), live.state_hash());
    run(&journal, &mut live, 20, 20);
    assert_eq!(journal.last_tick().unwrap(), 40);
    assert_eq!(ticks_in_file(&journal).first(), Some(&21));
    let replayed = replay_from_genesis(&journal).unwrap().unwrap();
    assert_eq!(replayed.engine.state_hash(), live.state_hash());
}

#[test]
fn a_crash_after_the_segment_before_the_journal_forgets_leaves_every_tick_readable() {
    let (_dir, journal, mut live) = fresh();
    run(&journal, &mut live, 95, 20);
    let txn = journal.begin_read().unwrap();
    let identity = journal.identity(&txn).unwrap();
    let (segment, _) = journal.write_segment(&txn, (1, 60), &identity).unwrap();
    drop(txn);
    // The file exists but is not listed: the ticks are still the journal's.
    assert!(journal.segments().unwrap().is_empty());
    assert_eq!(ticks_in_file(&journal).first(), Some(&1));
    let again = journal.archive(u64::MAX).unwrap();
    assert_eq!(
        again.segment.unwrap().0,
        segment,
        "the same content, the same digest"
    );
    let replayed = replay_from_genesis(&journal).unwrap().unwrap();
    assert_eq!(replayed.engine.state_hash(), live.state_hash());
}

#[test]
fn a_missing_damaged_foreign_or_mixed_up_segment_is_an_error_naming_it_and_recovery_needs_none() {
    let (_dir, journal, mut live) = fresh();
    run(&journal, &mut live, 95, 20);
    let (_, path, _) = journal.archive(u64::MAX).unwrap().segment.unwrap();
    let good = std::fs::read(&path).unwrap();

    std::fs::remove_file(&path).unwrap();
    let missing = replay_from_genesis(&journal).err().unwrap().to_string();
    assert!(
        missing.contains("ticks 1..=60 are archived in"),
        "{missing}"
    );
    let recovered = recover(&journal).unwrap().unwrap();
    assert_eq!(
        recovered.engine.state_hash(),
        live.state_hash(),
        "from a snapshot"
    );
    // A segment moved to colder storage does not stop the next archive.
    run(&journal, &mut live, 40, 20);
    let next = journal.archive(u64::MAX).unwrap();
    assert_eq!(next.segment.map(|(s, ..)| s.first), Some(61));
    assert_eq!(next.archive_bytes, journal.archive_bytes().unwrap());
    assert!(next.archive_bytes > 0);

    let mut damaged = good.clone();
    let middle = damaged.len() / 2;
    damaged[middle] ^= 0x55;
    std::fs::write(&path, &damaged).unwrap();
    let err = replay_from_genesis(&journal).err().unwrap();
    assert!(matches!(err, JournalError::Corrupt(_)), "{err}");

    let (_other_dir, other, mut other_live) = fresh_seeded(10);
    run(&other, &mut other_live, 95, 20);
    let (_, other_path, _) = other.archive(u64::MAX).unwrap().segment.unwrap();
    std::fs::copy(&other_path, &path).unwrap();
    let foreign = replay_from_genesis(&journal).err().unwrap().to_string();
    assert!(
        foreign.contains("not a segment of this journal"),
        "{foreign}"
    );

    // Two data dirs of one genesis (two runs of one scenario) archive the same range under
    // the same name: the digest the journal listed tells them apart.
    let (_twin_dir, twin, mut twin_live) = fresh();
    let first = vec![Command::CreateBroker(CreateBroker {
        name: "another".into(),
        public_key: PublicKey([4; 32]),
    })];
    journaled(&twin, &mut twin_live, (START, first), true);
    run(&twin, &mut twin_live, 95, 20);
    let (twin_segment, twin_path, _) = twin.archive(u64::MAX).unwrap().segment.unwrap();
    assert_eq!((twin_segment.first, twin_segment.last), (1, 60));
    std::fs::copy(&twin_path, &path).unwrap();
    let mixed = replay_from_genesis(&journal).err().unwrap().to_string();
    assert!(mixed.contains("not what the journal listed"), "{mixed}");

    std::fs::write(&path, &good).unwrap();
    let replayed = replay_from_genesis(&journal).unwrap().unwrap();
    assert_eq!(replayed.engine.state_hash(), live.state_hash());
}

#[test]
fn a_segment_and_its_folder_are_readable_by_their_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let (_dir, journal, mut live) = fresh();
    run(&journal, &mut live, 45, 20);
    let (_, path, _) = journal.archive(u64::MAX).unwrap().segment.unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(&journal.archive_dir()), 0o700);
}

/// What makes the archive a bound on the file: redb reuses the pages of archived ticks, so
/// the next as many ticks fit in the file's size as it stood.
#[test]
fn the_pages_of_archived_ticks_hold_the_ticks_after_them() {
    let (_dir, journal, _engine) = fresh();
    let row = |tick: u64| TickRecord::encode(perpsim_core::time::Timestamp::EPOCH, tick, &[]);
    let padded = |tick: u64| {
        let mut r = row(tick);
        r.resize(2_000, 0); // the rows are only copied here, never decoded
        r
    };
    let write = |from: u64, to: u64| {
        for chunk in (from..=to).collect::<Vec<_>>().chunks(500) {
            let rows: Vec<Vec<u8>> = chunk.iter().map(|t| padded(*t)).collect();
            journal
                .append_batch(chunk[0], &rows, None, crate::NonceWrites::default())
                .unwrap();
        }
    };
    write(1, 20_000);
    journal.write_snapshot(20_000, vec![1, 2, 3]).unwrap();
    while journal.archive(u64::MAX).unwrap().segment.is_some() {}
    let before = journal.file_bytes().unwrap();
    write(20_001, 40_000);
    let after = journal.file_bytes().unwrap();
    assert!(
        after <= before + before / 10,
        "{before} bytes before, {after} after as many ticks again"
    );
}
