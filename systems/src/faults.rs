//! The fault plan in force and its own seeded generator (see `records::fault_plan`). The engine
//! holds it so that its decisions on order entries are journaled state, replayed bit for
//! bit; the server reads the plan from the view for the channels.

use bevy_ecs::prelude::{Resource, World};
use perpsim_core::rng::SimRng;
use perpsim_core::{Error, ErrorCode};
use serde::{Deserialize, Serialize};

use crate::command::Answer;
use crate::records::fault_plan::{FaultPlan, PPM};

#[derive(Resource, Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Faults {
    pub plan: Option<FaultPlan>,
    rng: Option<SimRng>,
}

impl Faults {
    /// Whether a plan judges order entries (so the hot path touches nothing otherwise).
    pub fn judges_orders(&self) -> bool {
        self.plan.as_ref().is_some_and(|p| p.order_entry.is_some())
    }

    /// Whether this order entry is refused by the plan (one draw per entry while a plan
    /// with an order-entry fault is in force).
    pub fn refuses_order(&mut self) -> bool {
        let (Some(plan), Some(rng)) = (&self.plan, &mut self.rng) else {
            return false;
        };
        let Some(fault) = plan.order_entry else {
            return false;
        };
        rng.next_u64() % u64::from(PPM) < u64::from(fault.error_ppm)
    }
}

/// The refusal an order entry gets from the plan (interface §7: 503 EXCHANGE_ERROR).
pub fn refusal() -> Error {
    Error::new(
        ErrorCode::ExchangeUnavailable,
        "the exchange is temporarily unavailable (fault plan); retry later",
    )
}

/// `SetFaults`: a new plan (its generator seeded from it) or none.
pub fn set(world: &mut World, plan: Option<FaultPlan>) -> Answer<Option<Box<FaultPlan>>> {
    let rng = plan.as_ref().map(|p| SimRng::from_seed(p.seed));
    let answer = plan.clone().map(Box::new);
    *world.resource_mut::<Faults>() = Faults { plan, rng };
    Ok(answer)
}
