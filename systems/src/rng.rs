//! The engine's one source of randomness: the seeded generator every draw (ids included)
//! comes from, so a replay draws the same numbers in the same order.

use bevy_ecs::prelude::Resource;
use perpsim_core::rng::SimRng;

/// The seeded RNG as a resource: the engine's only randomness.
#[derive(Resource, Debug, Clone)]
pub struct EngineRng(pub SimRng);
