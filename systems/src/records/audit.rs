//! Whether the engine checks itself: the audit after every run of the schedule (money and
//! trading invariants) and the oracles the event-driven risk passes are held to (a full
//! rescan of the margin states, a scan of the depreciation thresholds).
//!
//! On by default in debug builds and the crate's own tests; off in release builds, where a
//! host turns it on for a test run (`Engine::set_auditing`; the binary reads `PERPSIM_AUDIT`),
//! so a release test run checks what a debug one does.

use bevy_ecs::prelude::{Res, Resource};

#[derive(Resource, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Auditing(pub bool);

impl Default for Auditing {
    fn default() -> Self {
        Auditing(cfg!(any(test, debug_assertions)))
    }
}

/// Run condition: the audit's systems run only while auditing.
pub fn auditing(on: Res<Auditing>) -> bool {
    on.0
}
