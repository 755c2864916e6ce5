//! The clock family, which `Engine::tick` applies between runs of the schedule: an advance
//! runs every timed event up to its instant, each at its own.

use perpsim_core::clock::ClockMode;
use perpsim_core::time::Timestamp;
use serde::{Deserialize, Serialize};

/// Manual clock only: run every scheduled event up to `to`, in time order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdvanceClock {
    pub to: Timestamp,
}

/// Switches the clock mode of an existing engine (a restart with another `--clock`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetClockMode {
    pub mode: ClockMode,
}

#[derive(Debug)]
pub enum ClockCommand {
    AdvanceClock(AdvanceClock),
    SetClockMode(SetClockMode),
}

impl From<ClockCommand> for super::Command {
    fn from(command: ClockCommand) -> Self {
        match command {
            ClockCommand::AdvanceClock(c) => super::Command::AdvanceClock(c),
            ClockCommand::SetClockMode(c) => super::Command::SetClockMode(c),
        }
    }
}
