//! What the host's and the writer's tests start from.

use std::path::PathBuf;

use perpsim_core::clock::ClockMode;
use perpsim_core::instrument::default_instruments;
use perpsim_core::simulation::Simulation;
use perpsim_core::time::Timestamp;
use perpsim_storage::Journal;
use perpsim_systems::Genesis;
use tempfile::TempDir;

/// A journal begun in a fresh directory (kept while the caller holds it): a manual clock at
/// 2026-01-01, the default instruments, a quiet market of `seed`. Opened to be shared with
/// readers (each commit syncs, no group log), so a test reads it beside the writer.
pub(super) fn journal(seed: u64) -> (TempDir, PathBuf, Journal, Genesis) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.redb");
    let journal = Journal::open_shared(&path).unwrap();
    let genesis = Genesis {
        seed,
        clock_mode: ClockMode::Manual,
        start: Timestamp::from_millis(1_767_225_600_000),
        instruments: default_instruments(),
        simulation: Simulation::quiet(&default_instruments()),
    };
    journal.init(&genesis).unwrap();
    (dir, path, journal, genesis)
}
