//! perpsim-storage: the journal.
//!
//! One redb file holds the genesis, every tick's commands (one row per tick, written in one
//! `Durability::Immediate` transaction: group commit), and snapshots of the engine state.
//! Recovery restores the newest snapshot and replays the ticks after it; a fresh replay from
//! genesis reaches the same state hash. This crate knows the engine's command and state types
//! but nothing of HTTP; it never decides anything, it only remembers.

mod journal;
mod recovery;

pub use journal::{Journal, JournalError, SnapshotInfo, TickRecord};
pub use recovery::{Recovered, recover, replay_from_genesis};
