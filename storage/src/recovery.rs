//! Start-up: the newest snapshot, then the ticks after it, then serve. A journal whose
//! projection is behind its ticks (after a crash with a backlog, a scenario replay's, or one
//! older than the projection) is recovered from a snapshot no newer than the projection, and
//! the ended orders and history rows (`HandedHistory`) of the ticks after it are projected
//! on the way.

use perpsim_systems::Engine;
use perpsim_systems::publish::events::Listening;

use crate::journal::{Journal, JournalError, SnapshotInfo};
use crate::projection::Projected;

pub struct Recovered {
    pub engine: Engine,
    /// The snapshot recovery started from, if any.
    pub snapshot: Option<SnapshotInfo>,
    pub replayed_ticks: u64,
    /// Snapshots passed during a replay from genesis, each with whether its recorded hash was
    /// reached (always empty when recovery starts from a snapshot).
    pub verified: Vec<(SnapshotInfo, bool)>,
    /// Ended orders and history rows projected on the way (none when the projection was
    /// complete).
    pub projected: u64,
}

/// Rows (ended orders, history rows) projected per transaction while recovery
/// catches the projection up.
const PROJECT_BATCH: usize = 65_536;

/// Rebuilds the engine from the journal, from its newest usable snapshot. `Ok(None)` for a
/// journal without genesis (a new data dir).
pub fn recover(journal: &Journal) -> Result<Option<Recovered>, JournalError> {
    let Some(genesis) = journal.genesis()? else {
        return Ok(None);
    };
    // Only a writer's handle projects; a reader (a replay, a report) needs no projection.
    if journal.database().is_some() {
        journal.reset_projection()?;
    }
    let projected = journal.projected_through()?;
    let behind =
        (journal.database().is_some() && projected < journal.last_tick()?).then_some(projected);
    for info in journal.snapshots()? {
        if behind.is_some_and(|p| info.tick > p) {
            continue;
        }
        let Some(state) = journal.load_snapshot(info.tick)? else {
            continue;
        };
        if state.hash() != info.hash {
            return Err(JournalError::Corrupt(format!(
                "snapshot at tick {} does not match its hash",
                info.tick
            )));
        }
        if state.genesis != genesis || state.counters.ticks != info.tick {
            return Err(JournalError::Corrupt(format!(
                "snapshot at tick {} is not of this journal",
                info.tick
            )));
        }
        let engine = Engine::restore(&state);
        return replay(journal, engine, Some(info), &[], behind)
            .map(serving)
            .map(Some);
    }
    replay(journal, Engine::genesis(genesis), None, &[], behind)
        .map(serving)
        .map(Some)
}

/// Builds the read view once, after the replay, and starts the channels' events from there: a
/// server needs both, a replay check neither.
fn serving(mut recovered: Recovered) -> Recovered {
    recovered.engine.set_publishing(true);
    recovered.engine.set_listening(Listening::Channels);
    recovered
}

/// Replays the whole journal from genesis, ignoring snapshots for the state but checking that
/// the replay reaches each snapshot's recorded hash. The engine's read view is left unbuilt
/// (publishing off): this is for checking and hashing, not for serving.
pub fn replay_from_genesis(journal: &Journal) -> Result<Option<Recovered>, JournalError> {
    let Some(genesis) = journal.genesis()? else {
        return Ok(None);
    };
    let snapshots = journal.snapshots()?;
    replay(journal, Engine::genesis(genesis), None, &snapshots, None).map(Some)
}

/// Replays the ticks after the engine's; with `project`, the tick the projection is complete
/// through, projects the ended orders and history rows of every tick after it.
fn replay(
    journal: &Journal,
    mut engine: Engine,
    snapshot: Option<SnapshotInfo>,
    check: &[SnapshotInfo],
    project: Option<u64>,
) -> Result<Recovered, JournalError> {
    let start = engine.counters().ticks;
    let mut verified = Vec::new();
    let mut pending = Projected::default();
    let mut projected = 0;
    engine.set_publishing(false);
    engine.set_listening(Listening::MarginStates);
    // The rows of the ticks up to the projection's end are in it already.
    engine.set_projecting(false);
    journal.for_each_tick_after(start, |tick, record| {
        if project.is_some_and(|p| tick == p + 1) {
            engine.set_projecting(true);
        }
        let at = engine.counters();
        if tick != at.ticks + 1 || record.first_seq != at.commands {
            return Err(JournalError::Corrupt(format!(
                "tick {tick} starts at command {} but the engine stands at tick {} command {}",
                record.first_seq, at.ticks, at.commands
            )));
        }
        let mut out = engine.tick(record.time, record.commands);
        if let Some(info) = check.iter().find(|s| s.tick == tick) {
            verified.push((*info, engine.state_hash() == info.hash));
        }
        if project.is_some_and(|p| tick > p) {
            pending.ended.extend(out.ended);
            pending.history.append(&mut out.history);
            if pending.len() >= PROJECT_BATCH {
                projected += catch_up(journal, &mut pending, tick)?;
            }
        }
        Ok(())
    })?;
    engine.set_projecting(false);
    let replayed_ticks = engine.counters().ticks - start;
    if project.is_some() {
        projected += catch_up(journal, &mut pending, engine.counters().ticks)?;
    }
    Ok(Recovered {
        engine,
        snapshot,
        replayed_ticks,
        verified,
        projected,
    })
}

/// Projects `pending` (rows made since recovery last projected) through `tick`; how many
/// there were.
fn catch_up(journal: &Journal, pending: &mut Projected, tick: u64) -> Result<u64, JournalError> {
    journal.project(pending, tick)?;
    let n = pending.len() as u64;
    *pending = Projected::default();
    Ok(n)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{NonceWrites, TickRecord};
    use perpsim_core::clock::ClockMode;
    use perpsim_core::ids::PublicKey;
    use perpsim_core::instrument::default_instruments;
    use perpsim_core::time::{MINUTE_MS, Timestamp};
    use perpsim_systems::command::{AdvanceClock, CreateBroker, CreateCustomer};
    use perpsim_systems::{Command, Genesis, Outcome};

    pub(crate) const START: Timestamp = Timestamp::from_millis(1_767_225_600_000);

    /// One tick through engine and journal; with `project` the host's way (its ended orders
    /// projected in its transaction), else a scenario replay's.
    pub(crate) fn journaled(
        journal: &Journal,
        engine: &mut Engine,
        (now, cmds): (Timestamp, Vec<Command>),
        project: bool,
    ) -> perpsim_systems::TickOutput {
        let c = engine.counters();
        let record = TickRecord::encode(now, c.commands, &cmds);
        engine.set_projecting(project);
        let out = engine.tick(now, cmds);
        let rows = project.then(|| Projected {
            ended: out.ended.clone(),
            history: out.history.clone(),
        });
        journal
            .append_batch(c.ticks + 1, &[record], rows, NonceWrites::default())
            .unwrap();
        out
    }

    /// Runs `ticks` ticks through engine and journal the way the host does, snapshotting
    /// every `every` ticks.
    pub(crate) fn run(journal: &Journal, engine: &mut Engine, ticks: u64, every: u64) {
        let broker = match engine.view().brokers.keys().next() {
            Some(code) => *code,
            None => {
                let cmds = vec![Command::CreateBroker(CreateBroker {
                    name: "b".into(),
                    public_key: PublicKey([3; 32]),
                })];
                let out = journaled(journal, engine, (START, cmds), true);
                let Ok(Outcome::Broker(b)) = &out.results()[0] else {
                    panic!()
                };
                b.code
            }
        };
        for _ in 0..ticks {
            let now = engine.clock().now.plus_millis(7 * MINUTE_MS);
            let cmds = vec![
                Command::CreateCustomer(CreateCustomer {
                    broker,
                    external_id: None,
                }),
                Command::AdvanceClock(AdvanceClock {
                    to: now.plus_millis(MINUTE_MS),
                }),
            ];
            journaled(journal, engine, (now, cmds), true);
            if engine.counters().ticks.is_multiple_of(every) {
                journal
                    .write_snapshot(engine.counters().ticks, engine.encode_state())
                    .unwrap();
            }
        }
    }

    pub(crate) fn fresh() -> (tempfile::TempDir, Journal, Engine) {
        fresh_seeded(9)
    }

    pub(crate) fn fresh_seeded(seed: u64) -> (tempfile::TempDir, Journal, Engine) {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::open(&dir.path().join("journal.redb")).unwrap();
        let genesis = Genesis {
            seed,
            clock_mode: ClockMode::Manual,
            start: START,
            instruments: default_instruments(),
            simulation: perpsim_core::simulation::Simulation::quiet(&default_instruments()),
        };
        journal.init(&genesis).unwrap();
        (dir, journal, Engine::genesis(genesis))
    }

    #[test]
    fn recovery_from_snapshot_and_fresh_replay_reach_the_live_hash() {
        let (_dir, journal, mut live) = fresh();
        run(&journal, &mut live, 95, 20);
        let recovered = recover(&journal).unwrap().unwrap();
        assert_eq!(recovered.snapshot.map(|s| s.tick), Some(80));
        assert_eq!(recovered.replayed_ticks, 16);
        assert_eq!(recovered.engine.state_hash(), live.state_hash());
        let replayed = replay_from_genesis(&journal).unwrap().unwrap();
        assert_eq!(replayed.engine.state_hash(), live.state_hash());
        assert_eq!(replayed.verified.len(), 2, "two snapshots are kept");
        assert!(replayed.verified.iter().all(|(_, ok)| *ok));
        assert_eq!(recovered.engine.view().customers, live.view().customers);
    }

    #[test]
    fn a_journal_is_reopened_with_its_genesis_and_ticks() {
        let (dir, journal, mut live) = fresh();
        run(&journal, &mut live, 5, 1_000);
        drop(journal);
        let journal = Journal::open(&dir.path().join("journal.redb")).unwrap();
        assert_eq!(journal.last_tick().unwrap(), 6);
        assert!(
            journal.init(&live.genesis_config().clone()).is_err(),
            "genesis is written once"
        );
        assert_eq!(
            recover(&journal).unwrap().unwrap().engine.state_hash(),
            live.state_hash()
        );
    }

    #[test]
    fn a_gap_in_the_sequence_is_reported_as_corruption() {
        let (_dir, journal, _engine) = fresh();
        journal
            .append(
                1,
                &TickRecord::encode(START, 5, &[]),
                NonceWrites::default(),
            )
            .unwrap();
        assert!(matches!(recover(&journal), Err(JournalError::Corrupt(_))));
    }
}
