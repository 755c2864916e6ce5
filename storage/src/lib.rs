//! perpsim-storage: the journal.
//!
//! One redb file holds the genesis, every tick's commands (one row per tick, written in one
//! `Durability::Immediate` transaction: group commit), and snapshots of the engine state.
//! Recovery restores the newest snapshot and replays the ticks after it; a fresh replay from
//! genesis reaches the same state hash. It also keeps the spent nonces of signed requests
//! inside D2's window (written with the tick that carries each command), so a restart refuses
//! a replayed request exactly as the running service did. Ticks older than the oldest kept
//! snapshot can be moved to the archive (`archive`): gzip segments beside the file, which a
//! replay from genesis reads as if they were still in it. This crate knows the engine's
//! command and state types but nothing of HTTP; it never decides anything, it only remembers.
//! History leaves the engine's memory for tables in a second redb file (`projection`,
//! `history_file`): ended orders, ledger movements, trade records, public fills and their
//! candles, notices, margin state changes and funding settlements, written after the commit
//! of the ticks that made them or, a commit of many, a share at a time (`backlog`), read
//! beside the writer.

mod archive;
mod backlog;
mod candles;
mod group_log;
mod history;
mod history_file;
mod journal;
mod nonces;
mod projection;
mod recovery;

pub use archive::{Archived, SEGMENT_BYTES, SEGMENT_TICKS, Segment};
pub use backlog::{DEFAULT_PROJECTION_BATCH, MAX_PROJECTION_BATCH, MAX_PROJECTION_LINGER};
pub use group_log::{GroupLog, GroupRecord, LOG_BYTES};
pub use history::{
    Fills, Fundings, Holder, Listed, MarginChanges, Movements, Notices, Rows, Trades,
};
pub use journal::{CommandBytes, Journal, JournalError, Sealed, SnapshotInfo, TickRecord};
pub use nonces::{NonceWrites, UsedNonce};
pub use projection::{Projected, Projection};
pub use recovery::{Recovered, recover, replay_from_genesis};
