//! The living market's fixed words: its settings from genesis and the market maker's
//! identity (D10), which risk and the views need without knowing how the market moves.

use bevy_ecs::prelude::Resource;
use perpsim_core::Uuid;
use perpsim_core::ids::{BrokerCode, CustomerCode};
use perpsim_core::simulation::Simulation;

/// The market maker's account: a fixed code, the same in every run.
pub const MARKET_MAKER: CustomerCode =
    CustomerCode(Uuid::from_u128(0x6d61_726b_6574_4d61_6b65_7200_0000_0001));
/// The "no broker" the market maker belongs to: no key ever names it, so no broker sees it.
pub const NO_BROKER: BrokerCode = BrokerCode(Uuid::nil());

/// The genesis settings of the living market.
#[derive(Resource, Debug, Clone, PartialEq, Eq)]
pub struct SimulationSettings(pub Simulation);

/// True during the run a restore makes to rebuild what is derived: that run stands at the
/// snapshot's instant, which the uninterrupted engine already ran, so nothing that changes
/// state may run in it (the maker's top-up of a quote its own amend filled waits for the
/// next run, as it did in the uninterrupted engine).
#[derive(bevy_ecs::prelude::Resource, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Restoring(pub bool);
