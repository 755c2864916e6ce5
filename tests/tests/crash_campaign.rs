//! The crash campaign of docs/operations.md, 20 rounds: kill -9 under mixed signed load, then
//! recovery equals a replay from genesis, every acknowledged write is there and nothing else,
//! balances are the sums of their rows, and every captured request sent again is refused;
//! the journal is archived under the load, so each replay from genesis reads its segments.

use perpsim_tests::campaign::{Settings, run};

#[test]
fn twenty_kill_9_rounds_under_mixed_signed_load_keep_every_promise() {
    let root = tempfile::tempdir().unwrap();
    let settings = Settings {
        rounds: 20,
        rounds_per_dir: 10,
        workers: 3,
        seed: perpsim_tests::now_ns() as u64,
    };
    eprintln!("crash campaign seed {}", settings.seed);
    let report = run(settings, root.path(), |_, _| {});
    assert_eq!(report.rounds, 20);
    assert!(
        report.acknowledged > 100,
        "the load got work done: {report:?}"
    );
    assert!(
        report.segments_archived > 0,
        "kills landed while the journal was being archived: {report:?}"
    );
    assert!(
        report.replays_refused >= report.acknowledged,
        "every acknowledged request was sent again and refused: {report:?}"
    );
}
