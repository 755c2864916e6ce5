//! A periodic pass over the open positions in progress: the hour's funding or midnight's
//! settlement, booked over several ticks when the positions are many (issue 36 item 2).
//!
//! A pass fixes its terms when it falls due (each market's mark, and its rate for funding)
//! and then books its rows in key order (customer, market), at most [`ROWS_PER_TICK`] a tick,
//! so no tick holds the engine for the whole pass at a million positions. Until it ends the
//! venue's clock stays at the pass's instant: the host ticks again at once, at that instant,
//! with whatever requests came meanwhile, and the engine finishes a pass before its clock
//! moves on (an advance over a span finishes it at its instant, as before). A row is owed by
//! each position open when the pass fell due, on the position as it was then: a fill on a
//! position the pass has not reached yet books that position's row first (its key is then
//! `settled`), and a position opened after the pass began owes none. With at most
//! `ROWS_PER_TICK` positions a pass ends in the tick it falls due, as it always did.

use std::collections::BTreeSet;
use std::sync::Arc;

use bevy_ecs::prelude::Resource;
use serde::{Deserialize, Serialize};

use crate::records::money::PeriodicInfo;
use crate::records::position::PositionKey;
use perpsim_core::time::Timestamp;

/// Rows a tick books of the passes in progress: at the engine's cost per row at a million
/// positions (3 to 6 µs with the margin pass, the read view and the events that follow it;
/// midnight's the dearer) a tick's share stays near 50 ms (`benches/README.md`).
pub const ROWS_PER_TICK: usize = 8_192;

/// One pass in progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pass {
    /// The instant it fell due (the venue's clock stays there until it ends).
    pub at: Timestamp,
    /// Per market: what its rows are booked at, or `None` when it owes nothing this pass (an
    /// hour with no rate).
    pub terms: Vec<Option<Arc<PeriodicInfo>>>,
    /// The first key the walk has not reached; `None` before the first row.
    pub next: Option<PositionKey>,
    /// Keys the walk has not reached that owe nothing: booked before a fill moved them, or
    /// opened after the pass began (one per position touched meanwhile, at most).
    pub settled: BTreeSet<PositionKey>,
}

impl Pass {
    pub fn new(at: Timestamp, terms: Vec<Option<Arc<PeriodicInfo>>>) -> Self {
        Pass {
            at,
            terms,
            next: None,
            settled: BTreeSet::new(),
        }
    }

    /// What the position `key` still owes this pass: its market's terms, if the walk has not
    /// reached it and it was not settled before.
    pub fn owed(&self, key: PositionKey) -> Option<&Arc<PeriodicInfo>> {
        let reached = self.next.is_none_or(|next| key >= next);
        let terms = self.terms.get(key.1 as usize)?.as_ref()?;
        (reached && !self.settled.contains(&key)).then_some(terms)
    }

    /// What the position `key` still owes, taken: from now on it owes nothing.
    pub fn settle(&mut self, key: PositionKey) -> Option<Arc<PeriodicInfo>> {
        let terms = Arc::clone(self.owed(key)?);
        self.settled.insert(key);
        Some(terms)
    }
}

/// The passes in progress, midnight's and the hour's (both fall due at midnight), and what
/// this tick may still book of them.
#[derive(Resource, Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeriodicPasses {
    pub daily: Option<Pass>,
    pub funding: Option<Pass>,
    /// Rows the tick may still book: [`ROWS_PER_TICK`] at its start, unbounded while a pass
    /// is finished before the clock moves. Not state: every tick sets it.
    #[serde(skip)]
    pub budget: usize,
}

impl PeriodicPasses {
    pub fn in_progress(&self) -> bool {
        self.daily.is_some() || self.funding.is_some()
    }
}
