//! The engine facade: one `World`, one `Schedule`, driven one tick at a time by its host.
//!
//! `tick(now, commands)` is a pure function of the engine's state and its arguments: the host
//! journals exactly those arguments, and replaying them rebuilds the same state.

pub mod ingest;
pub mod observe;
pub mod snapshot;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use bevy_ecs::prelude::{IntoScheduleConfigs, Mut, Resource, Schedule, World};
use perpsim_core::Error;
use perpsim_core::clock::ClockMode;
use perpsim_core::instrument::Asset;
use perpsim_core::rng::SimRng;
use perpsim_core::time::Timestamp;
use serde::{Deserialize, Serialize};

use self::ingest::Inbox;
use self::snapshot::{EngineState, StateHash};
use crate::clock::{DueEvents, Scheduler, SimClock};
use crate::command::{
    Answer, Answers, ClockCommand, Command, CommandResult, EngineEvent, Genesis, TickEvents,
};
use crate::money::ledger::{Ledger, venue_accounts};
use crate::money::store::AccountIndex;
use crate::money::store::{WorldAccounts, spawn_accounts};
use crate::positions::PositionIndex;
use crate::publish::events::Listening;
use crate::publish::view::{Publishing, ReadView};
use crate::records::audit::Auditing;
use crate::records::clock::ClockView;
use crate::records::history::HandedHistory;
use crate::records::ids::OrderId;
use crate::records::order::Order;
use crate::records::periodic::{PeriodicPasses, ROWS_PER_TICK};
use crate::records::simulation::Restoring;
use crate::records::venue::{InstrumentState, MarketId};
use crate::registry::{Limits, Registry};
use crate::risk::RiskLog;
use crate::risk::notices::Notifications;
use crate::rng::EngineRng;
use crate::settlement::funding::FundingState;
use crate::simulation::MarketState;
use crate::simulation::feed::FeedState;
use crate::simulation::maker::MakerState;
use crate::trading::desk::OrderRequests;
use crate::trading::ended::{EndedOrders, EndedRun};
use crate::trading::exchange::Exchange;
use crate::trading::orders::OrderIndex;

/// How many ticks and commands the engine has applied: the journal position it stands at.
#[derive(Resource, Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    pub ticks: u64,
    pub commands: u64,
}

#[derive(Debug)]
pub struct TickOutput {
    /// Every command's answer, in a lane per type of answer.
    pub answers: Answers,
    pub events: Vec<EngineEvent>,
    /// The orders that ended in the tick, in the order they ended. Neither the engine nor
    /// its view keeps their records past the tick: a host that serves reads keeps them where
    /// a read of an ended order finds them (the journal's projection).
    pub ended: Vec<Arc<Order>>,
    /// The history rows the tick made or changed, as it left them: what the journal's
    /// projection writes (empty unless [`Engine::set_projecting`] is on).
    pub history: HandedHistory,
}

impl TickOutput {
    /// Every command's answer by position, as any command's `Outcome` (a host that hands
    /// answers to their senders takes each from [`TickOutput::answers`] by its type).
    pub fn results(&self) -> Vec<CommandResult> {
        self.answers.clone().into_results()
    }
}

/// Change ticks must be re-based before bevy's 32-bit counters wrap; every this many ticks is
/// far inside that bound (each tick runs the schedule at most a few thousand times).
const CHECK_CHANGE_TICKS_EVERY: u64 = 4_096;

pub struct Engine {
    world: World,
    schedule: Schedule,
    genesis: Genesis,
    /// A projecting engine's history goes out when asked ([`Engine::take_history`]), not
    /// with every tick's output.
    history_on_request: bool,
    /// Rows a tick books of the periodic passes: [`ROWS_PER_TICK`], fewer in tests (a journal
    /// replays as it was made only with the value it was made with).
    rows_per_tick: usize,
}

impl Engine {
    fn empty(
        genesis: Genesis,
        clock: SimClock,
        rng: SimRng,
        counters: Counters,
        scheduler: Scheduler,
        ledger: Ledger,
        exchange: Exchange,
    ) -> Self {
        let mut world = World::new();
        world.insert_resource(ledger);
        world.insert_resource(exchange);
        world.insert_resource(clock);
        world.insert_resource(EngineRng(rng));
        world.insert_resource(counters);
        world.insert_resource(scheduler);
        world.insert_resource(Registry::default());
        world.insert_resource(Publishing(true));
        world.insert_resource(ReadView::new(ClockView {
            mode: clock.mode,
            now: clock.now,
        }));
        let schedule = compose(&mut world);
        Engine {
            world,
            schedule,
            genesis,
            history_on_request: false,
            rows_per_tick: ROWS_PER_TICK,
        }
    }

    /// A fresh engine at the genesis instant.
    pub fn genesis(genesis: Genesis) -> Self {
        let clock = SimClock {
            mode: genesis.clock_mode,
            now: genesis.start,
        };
        let mut scheduler = Scheduler::default();
        crate::clock::arm_periodic(&mut scheduler, genesis.start, &genesis.simulation);
        let rng = SimRng::from_seed(genesis.seed);
        let mut engine = Self::empty(
            genesis.clone(),
            clock,
            rng,
            Counters::default(),
            scheduler,
            Ledger::new(),
            Exchange::new(genesis.instruments.iter().cloned()),
        );
        let world = &mut engine.world;
        let market = MarketState {
            feed: FeedState::new(
                genesis.seed,
                genesis.instruments.iter().map(|i| i.start_price),
            ),
            maker: MakerState::default(),
            recorded: Default::default(),
        };
        crate::simulation::insert(world, genesis.simulation.clone(), market);
        world.insert_resource(FundingState::new(genesis.instruments.len(), genesis.start));
        spawn_accounts(world, venue_accounts());
        world.resource_scope(|world, mut ledger: Mut<Ledger>| {
            for asset in Asset::ALL {
                let amount = genesis.simulation.insurance_funding;
                ledger.fund_insurance(&mut WorldAccounts(world), asset, amount, genesis.start);
            }
        });
        for (market, spec) in genesis.instruments.iter().enumerate() {
            let state = InstrumentState {
                status: perpsim_core::instrument::InstrumentStatus::Active,
                index_price: spec.start_price,
                mark_price: spec.start_price,
                price_time: genesis.start,
            };
            crate::registry::spawn_instrument(world, spec.clone(), state, market as MarketId);
        }
        if genesis.simulation.market_maker {
            let mut assets: Vec<_> = genesis.instruments.iter().map(|i| i.settlement).collect();
            assets.sort_unstable();
            assets.dedup();
            crate::simulation::maker::spawn(world, &genesis.simulation, &assets, genesis.start);
        }
        engine.run_schedule();
        engine.baseline_events();
        engine
    }

    /// An engine holding exactly `state`.
    pub fn restore(state: &EngineState) -> Self {
        let (ledger, accounts) =
            Ledger::from_state(state.ledger.clone(), state.held.movements.clone());
        let held = (state.held.trades.clone(), state.held.fills.clone());
        let (exchange, live, ended) = Exchange::from_state(state.exchange.clone(), held);
        let mut engine = Self::empty(
            state.genesis.clone(),
            state.clock,
            state.rng.clone(),
            state.counters,
            state.scheduler.clone(),
            ledger,
            exchange,
        );
        // A state copied from a projecting engine, not decoded, names its hand-out cursor.
        engine.set_projecting(false);
        crate::simulation::insert(
            &mut engine.world,
            state.genesis.simulation.clone(),
            state.market.clone(),
        );
        engine.world.insert_resource(FundingState::restored(
            state.funding.clone(),
            state.held.funding.clone(),
        ));
        engine.world.insert_resource(state.passes.clone());
        engine.world.insert_resource(state.limits);
        engine.world.insert_resource(state.faults.clone());
        let risk_logs = (state.held.margin.clone(), state.held.notices.clone());
        crate::risk::insert(&mut engine.world, state.risk.clone(), risk_logs);
        spawn_accounts(&mut engine.world, accounts);
        crate::trading::orders::restore(&mut engine.world, live, ended);
        snapshot::restore_entities(&mut engine.world, state);
        crate::publish::events::start_cursors(&mut engine.world);
        crate::audit::start_here(&mut engine.world);
        engine.world.insert_resource(Restoring(true));
        engine.run_schedule();
        engine.world.insert_resource(Restoring(false));
        engine.baseline_events();
        engine
    }

    /// Where the push channels start from: a genesis or a restore has pushed nothing, and
    /// the first tick's events are what it changes (so a restored engine emits what the
    /// uninterrupted one does).
    fn baseline_events(&mut self) {
        crate::publish::events::end_of_tick(&mut self.world, false);
        self.world.resource_mut::<TickEvents>().0.clear();
    }

    /// The world itself, for the crate's tests to query components.
    #[cfg(test)]
    pub(crate) fn world_mut(&mut self) -> &mut World {
        &mut self.world
    }

    pub fn genesis_config(&self) -> &Genesis {
        &self.genesis
    }

    pub fn clock(&self) -> SimClock {
        *self.world.resource::<SimClock>()
    }

    /// The D4 bounds in force.
    pub fn limits(&self) -> perpsim_core::limits::VenueLimits {
        self.world.resource::<Limits>().0
    }

    pub fn counters(&self) -> Counters {
        *self.world.resource::<Counters>()
    }

    /// When the next timed event is due; a realtime host wakes up then.
    pub fn next_due(&self) -> Option<Timestamp> {
        self.world.resource::<Scheduler>().next_due()
    }

    /// Which events the host reads (see [`Listening`]); the channels start from the state as
    /// it is now, as after a restore.
    pub fn set_listening(&mut self, listening: Listening) {
        let before = std::mem::replace(&mut *self.world.resource_mut::<Listening>(), listening);
        if before != listening && listening == Listening::Channels {
            self.baseline_events();
        }
    }

    /// Whether each tick's output carries the history rows it made or changed (movements,
    /// trade records, public fills, notices, margin state changes, funding settlements), for
    /// a host that projects them (off after a genesis or restore). Turning it on before the
    /// first tick puts what genesis booked (the market maker's funding) into the first tick's
    /// output, since no tick carries it; later, the projection is complete up to here and the
    /// output starts with the next tick.
    pub fn set_projecting(&mut self, on: bool) {
        let from_start = self.counters().ticks == 0;
        let world = &mut self.world;
        world
            .resource_mut::<Ledger>()
            .track_movements(on, from_start);
        world
            .resource_mut::<Exchange>()
            .project_history(on, from_start);
        world
            .resource_mut::<Notifications>()
            .0
            .project(on, from_start);
        world.resource_mut::<RiskLog>().0.project(on, from_start);
        world
            .resource_mut::<FundingState>()
            .history
            .project(on, from_start);
    }

    /// Each history log holds at most `2^bits` rows the projection holds too (a window,
    /// within [`WINDOW_BITS`](crate::records::log::WINDOW_BITS)) before letting them go: a
    /// server's bound on its recent history, not state (the hash and the snapshot's held
    /// form do not depend on it).
    pub fn set_history_window(&mut self, bits: u32) {
        let world = &mut self.world;
        world.resource_mut::<Ledger>().set_history_window(bits);
        world.resource_mut::<Exchange>().set_history_window(bits);
        world.resource_mut::<Notifications>().0.set_window(bits);
        world.resource_mut::<RiskLog>().0.set_window(bits);
        world
            .resource_mut::<FundingState>()
            .history
            .set_window(bits);
    }

    /// Turns the engine's checks of itself on or off (`records::audit`): the audit after every
    /// run and the risk passes' oracles. Turned on, the fills are checked from here on.
    pub fn set_auditing(&mut self, on: bool) {
        let was = std::mem::replace(&mut self.world.resource_mut::<Auditing>().0, on);
        if on && !was {
            crate::audit::start_here(&mut self.world);
            crate::audit::scheduled(&mut self.world, &mut self.schedule);
        }
    }

    /// Turns the read view's upkeep off (replay) or on again; turning it on catches up at once.
    pub fn set_publishing(&mut self, on: bool) {
        self.world.resource_mut::<Publishing>().0 = on;
        // Resuming marks every account; pausing needs none of them.
        let accounts: Vec<_> = match on {
            true => self
                .world
                .resource::<AccountIndex>()
                .accounts()
                .keys()
                .copied()
                .collect(),
            false => Vec::new(),
        };
        self.world
            .resource_mut::<Ledger>()
            .track_changes(on, accounts.into_iter());
        // Resuming marks every open position; pausing needs none of them.
        let index = self.world.resource::<PositionIndex>().map();
        let positions: Vec<_> = match on {
            true => index.keys().copied().collect(),
            false => Vec::new(),
        };
        let orders: Vec<OrderId> = match on {
            true => crate::trading::orders::live_ids(self.world.resource::<OrderIndex>()),
            false => Vec::new(),
        };
        self.world.resource_mut::<Exchange>().track_changes(
            on,
            orders.into_iter(),
            positions.into_iter(),
        );
        if on {
            self.run_schedule();
            crate::publish::events::republish_books(&mut self.world);
        }
    }

    /// The current read view; an O(1) clone of persistent maps.
    pub fn view(&self) -> Arc<ReadView> {
        Arc::new(self.world.resource::<ReadView>().clone())
    }

    pub fn state(&self) -> EngineState {
        snapshot::extract(&self.world, &self.genesis)
    }

    /// The hash of [`Engine::state`], encoded from the world where it lies.
    pub fn state_hash(&self) -> StateHash {
        snapshot::hash(&self.world, &self.genesis)
    }

    /// [`EngineState::encode`] of [`Engine::state`], encoded from the world where it lies:
    /// a snapshot holds the encoding only, never a second copy of the state.
    pub fn encode_state(&self) -> Vec<u8> {
        snapshot::encode(&self.world, &self.genesis)
    }

    /// Applies one tick: timed events due up to `now` first, then the commands in order. The
    /// clock never moves backwards: a `now` earlier than the engine's time is taken as equal.
    pub fn tick(&mut self, now: Timestamp, commands: Vec<Command>) -> TickOutput {
        let count = commands.len();
        crate::trading::orders::start_tick(&mut self.world);
        self.world.resource_mut::<PeriodicPasses>().budget = self.rows_per_tick;
        self.fire_due_until(now);
        self.set_now(now);
        self.run_commands_and_clock(commands);
        let mut answers = std::mem::take(&mut *self.world.resource_mut::<Answers>());
        answers.seal();
        let counters = {
            let mut c = self.world.resource_mut::<Counters>();
            c.ticks += 1;
            c.commands += count as u64;
            *c
        };
        let mut view = self.world.resource_mut::<ReadView>();
        view.tick = counters.ticks;
        view.seq = counters.commands;
        if counters.ticks.is_multiple_of(CHECK_CHANGE_TICKS_EVERY) {
            self.world.check_change_ticks();
        }
        crate::publish::events::end_of_tick(&mut self.world, true);
        // Every despawn and component removal writes bevy's removal messages, which nothing
        // here reads; left alone they grew with every order ever ended (the soak's largest
        // engine allocation, issue 37). Updating them each tick keeps two ticks' worth.
        self.world.clear_trackers();
        let mut events = std::mem::take(&mut self.world.resource_mut::<TickEvents>().0);
        if *self.world.resource::<Listening>() == Listening::MarginStates {
            // What the systems skip is most of it; the rare rest (a transfer's end) goes here.
            events.retain(|e| matches!(e, EngineEvent::MarginState(_)));
        }
        assert_eq!(answers.len(), count, "every command has an answer");
        let mut ended_orders = self.world.resource_mut::<EndedOrders>();
        ended_orders.seal();
        let ended = ended_orders.recent.clone();
        TickOutput {
            answers,
            events,
            ended,
            history: match self.history_on_request {
                false => self.hand_out_history(),
                true => HandedHistory::default(),
            },
        }
    }

    /// A projecting engine hands its history out when asked ([`Engine::take_history`]), not
    /// with each tick's output: a host that takes many ticks' rows at once (a replay's
    /// writer) then gets most of them as whole chunks moved out of the logs, instead of the
    /// rows of each tick copied out of the chunk still filling. Its logs hold what the ticks
    /// between two requests made beyond their window.
    pub fn set_history_on_request(&mut self, on: bool) {
        self.history_on_request = on;
    }

    /// From here on the ended orders' digest is owed, for the host to settle off the engine
    /// thread: each tick's ended orders a run of [`Engine::take_owed_ended`]'s (see
    /// `trading::ended`).
    pub fn owe_ended_digests(&mut self) {
        self.world.resource_mut::<EndedOrders>().owe_digests();
    }

    /// The runs of ended orders whose digest is owed, made since the last call: the host
    /// settles them in order ([`EndedRun::settle`]).
    pub fn take_owed_ended(&mut self) -> Vec<Arc<EndedRun>> {
        self.world.resource_mut::<EndedOrders>().take_owed()
    }

    /// The history rows made or changed since the last hand-out, for a projecting engine
    /// whose history goes out on request (none unless projecting).
    pub fn take_history(&mut self) -> HandedHistory {
        self.hand_out_history()
    }

    /// The history rows made or changed since the last call (none unless projecting): the
    /// projection holds them from here, so the logs let them go.
    fn hand_out_history(&mut self) -> HandedHistory {
        let world = &mut self.world;
        HandedHistory {
            movements: world.resource_mut::<Ledger>().take_changed_movements(),
            // No trade record, fill, notice, margin state change or funding settlement ever
            // changes once made: none is kept.
            trades: world.resource_mut::<Exchange>().trades.hand_out(|_| false),
            fills: world.resource_mut::<Exchange>().fills.hand_out(|_| false),
            notices: world.resource_mut::<Notifications>().0.hand_out(|_| false),
            margin: world.resource_mut::<RiskLog>().0.hand_out(|_| false),
            funding: world
                .resource_mut::<FundingState>()
                .history
                .hand_out(|_| false),
        }
    }

    fn clock_view(&self) -> ClockView {
        let clock = self.clock();
        ClockView {
            mode: clock.mode,
            now: clock.now,
        }
    }

    /// Moves the clock on to `now` (never back), ending first any periodic pass still in
    /// progress at the instant it leaves: the runs that end it are the ticks a host would
    /// have made there (see `records::periodic`).
    fn set_now(&mut self, now: Timestamp) {
        if now > self.clock().now && self.settling() {
            self.world.resource_mut::<PeriodicPasses>().budget = usize::MAX;
            let due = std::mem::take(&mut self.world.resource_mut::<DueEvents>().0);
            while self.settling() {
                self.run_schedule();
            }
            self.world.resource_mut::<DueEvents>().0 = due;
            self.world.resource_mut::<PeriodicPasses>().budget = 0;
        }
        let mut clock = self.world.resource_mut::<SimClock>();
        clock.now = clock.now.max(now);
    }

    #[cfg(test)]
    pub(crate) fn set_rows_per_tick(&mut self, rows: usize) {
        self.rows_per_tick = rows;
    }

    /// Whether a periodic pass (the hour's funding, midnight's settlement) is still booking
    /// its rows: its host ticks again at once, at the engine's instant, until it ends.
    pub fn settling(&self) -> bool {
        self.world.resource::<PeriodicPasses>().in_progress()
    }

    fn advance_clock(&mut self, to: Timestamp) -> Answer<ClockView> {
        let clock = self.clock();
        if clock.mode != ClockMode::Manual {
            return Err(Error::conflict(
                "the clock can only be advanced in --clock manual mode",
            ));
        }
        if to <= clock.now {
            return Err(Error::validation(format!(
                "to must be later than now ({})",
                clock.now
            )));
        }
        self.fire_due_until(to);
        self.set_now(to);
        self.run_schedule();
        Ok(self.clock_view())
    }

    /// Runs the schedule once at each instant that has due events, up to and including `until`.
    fn fire_due_until(&mut self, until: Timestamp) {
        while let Some((at, due)) = self
            .world
            .resource_mut::<Scheduler>()
            .pop_earliest_batch(until)
        {
            self.set_now(at);
            if *self.world.resource::<Listening>() == Listening::Channels {
                let fired = due
                    .iter()
                    .map(|&event| EngineEvent::TimerFired { at, event });
                self.world.resource_mut::<TickEvents>().0.extend(fired);
            }
            self.world.resource_mut::<DueEvents>().0 = due;
            self.run_schedule();
            self.world.resource_mut::<DueEvents>().0.clear();
        }
    }

    /// The tick's commands in order: the clock's each at its place, between runs of the
    /// schedule with the commands before it; one run with what follows the last (in the
    /// common tick every command, in one run). The runs take the commands where they lie,
    /// the vector the tick came in (ingest routes each, and stops at a clock command).
    fn run_commands_and_clock(&mut self, commands: Vec<Command>) {
        let mut pending = Inbox {
            commands: commands.into(),
            next: 0,
        };
        loop {
            self.apply_clock_commands(&mut pending);
            *self.world.resource_mut::<Inbox>() = pending;
            self.run_schedule();
            assert!(
                self.world.resource::<OrderRequests>().0.is_empty(),
                "every order request is answered within its run"
            );
            pending = std::mem::take(&mut *self.world.resource_mut::<Inbox>());
            if pending.commands.is_empty() {
                return;
            }
        }
    }

    /// The clock commands at the front of `pending`, each applied where it stands.
    fn apply_clock_commands(&mut self, pending: &mut Inbox) {
        while let Some(command) = pending.commands.pop_front() {
            match command.into_clock() {
                Ok(clock) => {
                    let answer = self.apply_clock(clock);
                    self.world
                        .resource_mut::<Answers>()
                        .put(pending.next, answer);
                    pending.next += 1;
                }
                Err(command) => {
                    pending.commands.push_front(command);
                    return;
                }
            }
        }
    }

    fn apply_clock(&mut self, command: ClockCommand) -> Answer<ClockView> {
        match command {
            ClockCommand::AdvanceClock(c) => self.advance_clock(c.to),
            ClockCommand::SetClockMode(c) => {
                self.world.resource_mut::<SimClock>().mode = c.mode;
                Ok(self.clock_view())
            }
        }
    }

    /// One run of the schedule, then conservation asserted in every build (each booking
    /// already asserted its postings net to zero): a broken invariant stops the engine before
    /// the host journals or publishes the tick.
    fn run_schedule(&mut self) {
        self.schedule.run(&mut self.world);
        self.world.resource::<Ledger>().assert_conserved();
    }

    #[cfg(test)]
    pub(crate) fn parts(&mut self) -> (&mut World, &mut Schedule) {
        (&mut self.world, &mut self.schedule)
    }
}

/// The engine's own systems: commands applied at ingest, and the hourly timer re-armed.
/// The schedule: the sets in their order (`sets`), then each concern's plugin, which
/// registers its own systems and default resources, as a bevy plugin group does.
fn compose(world: &mut World) -> Schedule {
    let mut schedule = crate::sets::schedule();
    plugin(world, &mut schedule);
    crate::trading::plugin(world, &mut schedule);
    crate::money::plugin(world, &mut schedule);
    crate::positions::plugin(world, &mut schedule);
    crate::simulation::plugin(world, &mut schedule);
    crate::settlement::plugin(world, &mut schedule);
    crate::risk::plugin(world, &mut schedule);
    crate::publish::plugin(world, &mut schedule);
    crate::audit::plugin(world, &mut schedule);
    schedule
}

pub(crate) fn plugin(world: &mut World, schedule: &mut Schedule) {
    world.init_resource::<DueEvents>();
    world.init_resource::<Inbox>();
    world.init_resource::<Answers>();
    world.init_resource::<TickEvents>();
    world.init_resource::<Listening>();
    // The D4 defaults until a `SetLimits` command (or a restored state) says otherwise.
    world.init_resource::<Limits>();
    // No fault plan until a `SetFaults` command (or a restored state) sets one.
    world.init_resource::<crate::faults::Faults>();
    schedule.add_systems(ingest::ingest_commands.in_set(crate::sets::CommandIngest));
    schedule.add_systems(
        crate::clock::rearm
            // Any timer: a recorded market's runs, ten a second, mostly have none.
            .run_if(crate::clock::due_any(|_| true))
            .in_set(crate::sets::FundingSystems),
    );
}
