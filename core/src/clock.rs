//! Clock modes of the simulation (D1).

use serde::{Deserialize, Serialize};

/// How simulation time moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClockMode {
    /// Time follows the wall clock; the host stamps each tick with it.
    Realtime,
    /// Time moves only through explicit advances (admin API, scenarios).
    Manual,
}

impl ClockMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ClockMode::Realtime => "realtime",
            ClockMode::Manual => "manual",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "realtime" => Some(ClockMode::Realtime),
            "manual" => Some(ClockMode::Manual),
            _ => None,
        }
    }
}
