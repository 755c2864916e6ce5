//! A market-only scenario for a live server (`perpsim serve --market-data`, issue 39 item 1):
//! the same file a replay reads — its `price`, `prices`, `recorded`, `funding` and `status`
//! events, planned by the same planner, recorded formats and refusals included — without
//! what only a replay has. A server's customers are its brokers' own, so the file declares
//! none (`customers: []`), and its venue is the server's (its flags, its data dir): a file
//! that overrides instruments, sets `market:` settings (its `price_feed` aside: the server's
//! is fixed under a file), a latency model or a what-if is refused rather than half obeyed.
//!
//! The server plays the file's steps on the venue's time (`MarketFeed`): a step at the file's
//! time `t` falls due at `origin + (t − start) / speed`, `origin` being the data dir's start
//! (fixed at its creation, so a restart maps every step where it was) and `start` the
//! file's. Each is sent to the engine as the admin API's own command, so it is journaled like
//! an operator's: a replay of the journal needs no file, and rebuilds the same state.
//!
//! - Realtime clock: a task sleeps until the next step falls due on the wall clock and sends
//!   it (and whatever else is due then) — [`play_realtime`].
//! - Manual clock: an advance (`admin::simulation`) stops at each step's time, sends it, and
//!   goes on; every step therefore acts at its own instant, between the seconds around it.
//! - At start, the steps already due are sent once, only the latest of each kind for each
//!   instrument: the venue takes the prices, rate, status and book the file says for now
//!   (after a restart too, over anything an operator set meanwhile), without the history
//!   before it, and no recorded trade (a trade past is no liquidity now).
//!
//! Memory: the plan as encoded (`timeline`, about 80 bytes a step), within the replay's
//! bounds (`files::Limits`, `max_steps` 5 000 000 by default); nothing grows while it plays.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use perpsim_core::Error;
use perpsim_core::instrument::default_instruments;
use perpsim_core::simulation::{PriceFeed, Simulation};
use perpsim_core::time::Timestamp;
use perpsim_systems::Command;

use super::files::Limits;
use super::plan::Step;
use super::timeline::Timeline;
use crate::state::host::{EngineHandle, wall_clock_ms};
use crate::state::metrics;

/// What a server plays: the planned steps, at the file's times, and the file's start.
pub struct MarketPlan {
    pub start: Timestamp,
    pub steps: Timeline,
}

/// Reads a market-only scenario file within `limits` (a replay's defaults bound it).
pub fn read_market(file: &Path, limits: &Limits) -> Result<MarketPlan, String> {
    let plan = super::read(file, limits).map_err(|e| e.to_string())?;
    let refuse = |what: &str| Err(format!("{}: a market data file {what}", file.display()));
    if !plan.customers.is_empty() {
        return refuse("declares no customers (`customers: []`): the server's are its brokers'");
    }
    let what_if = &plan.what_if;
    if plan.latency.is_some()
        || !what_if.shocks.is_empty()
        || what_if.volatility.is_some()
        || !what_if.bootstraps.is_empty()
    {
        return refuse("has no latency model and no what-if (shocks, volatility_scale, bootstrap)");
    }
    let instruments = default_instruments();
    // The feed aside: a file's default is the walk, and the server's is fixed under it.
    let mut simulation = plan.genesis.simulation.clone();
    simulation.price_feed = PriceFeed::RandomWalk;
    if plan.genesis.instruments != instruments || simulation != Simulation::defaults(&instruments) {
        return refuse(
            "sets no instrument or market: settings (but price_feed): the server's flags and data dir set the venue",
        );
    }
    for step in plan.steps.iter() {
        if !is_market(&step.command) {
            let event = step.event + 1;
            return refuse(&format!(
                "sets prices, funding rates and statuses only; its event {event} does more"
            ));
        }
    }
    Ok(MarketPlan {
        start: plan.genesis.start,
        steps: plan.steps,
    })
}

/// What a market data file may do: what the admin API's price, funding and status do, a
/// recorded book for the maker to quote and the recorded trades.
pub fn is_market(command: &Command) -> bool {
    matches!(
        command,
        Command::SetInstrumentPrice(_)
            | Command::SetFundingRate(_)
            | Command::SetInstrumentStatus(_)
            | Command::SetRecordedBook(_)
            | Command::PrintRecordedTrade(_)
    )
}

/// The market data a server plays, if any: what the admin API's advance stops at (poem
/// `Data`, beside the `AppState`).
#[derive(Clone, Default)]
pub struct Played(pub Option<Arc<MarketFeed>>);

/// The file's steps and where the venue is in them.
pub struct MarketFeed {
    plan: MarketPlan,
    /// The venue's time of the file's start.
    origin: Timestamp,
    speed: u32,
    /// The first step not sent yet.
    next: Mutex<usize>,
}

impl MarketFeed {
    pub fn new(plan: MarketPlan, origin: Timestamp, speed: u32) -> Self {
        assert!(speed >= 1, "a speed is at least 1");
        MarketFeed {
            plan,
            origin,
            speed,
            next: Mutex::new(0),
        }
    }

    /// When a step at the file's time `at` falls due on the venue's clock.
    fn due_at(&self, at: Timestamp) -> Timestamp {
        let offset = at.millis() - self.plan.start.millis();
        self.origin.plus_millis(offset / i64::from(self.speed))
    }

    /// When the next step not sent falls due; `None` once the file is played.
    pub fn next_due(&self) -> Option<Timestamp> {
        let next = *self.next.lock().expect("not poisoned");
        self.plan.steps.at(next).map(|at| self.due_at(at))
    }

    /// Takes the steps due at `now`, in order.
    fn take_due(&self, now: Timestamp) -> Vec<Step> {
        let mut next = self.next.lock().expect("not poisoned");
        let mut due = Vec::new();
        while let Some(at) = self.plan.steps.at(*next) {
            if self.due_at(at) > now {
                break;
            }
            due.push(self.plan.steps.get(*next).expect("a step at that place"));
            *next += 1;
        }
        due
    }

    /// Sends the steps due at `now`; a step the venue refuses is logged and passed over (the
    /// venue goes on as an operator's refused request leaves it).
    pub async fn send_due(&self, engine: &EngineHandle, now: Timestamp) -> Result<(), Error> {
        for step in self.take_due(now) {
            send(engine, step).await?;
        }
        Ok(())
    }

    /// At start: the latest step of each kind and instrument due at `now`, in order, and
    /// none before them; no recorded trade (a trade past is no liquidity now). Returns how
    /// many steps were passed over.
    pub async fn catch_up(&self, engine: &EngineHandle, now: Timestamp) -> Result<usize, Error> {
        let due = self.take_due(now);
        let latest: BTreeMap<(u8, &str), usize> = due
            .iter()
            .enumerate()
            .filter(|(_, step)| !matches!(step.command, Command::PrintRecordedTrade(_)))
            .map(|(i, step)| (kind_and_symbol(&step.command), i))
            .collect();
        let mut kept: Vec<usize> = latest.into_values().collect();
        kept.sort_unstable();
        let skipped = due.len() - kept.len();
        for i in kept {
            send(engine, due[i].clone()).await?;
        }
        Ok(skipped)
    }
}

/// Which of the five a step is, and the instrument it is for.
fn kind_and_symbol(command: &Command) -> (u8, &str) {
    match command {
        Command::SetInstrumentPrice(c) => (0, &c.symbol),
        Command::SetFundingRate(c) => (1, &c.symbol),
        Command::SetInstrumentStatus(c) => (2, &c.symbol),
        Command::SetRecordedBook(c) => (3, &c.symbol),
        Command::PrintRecordedTrade(c) => (4, &c.symbol),
        _ => unreachable!("a market data file's steps are checked when it is read"),
    }
}

/// Sends one step as the admin API would, and waits until it is durable. A refusal of the
/// step is logged; only a stopped engine is an error.
async fn send(engine: &EngineHandle, step: Step) -> Result<(), Error> {
    let answer = match step.command {
        Command::SetInstrumentPrice(c) => engine.submit_admin(c).await.map(drop),
        Command::SetFundingRate(c) => engine.submit_admin(c).await.map(drop),
        Command::SetInstrumentStatus(c) => engine.submit_admin(c).await.map(drop),
        Command::SetRecordedBook(c) => engine.submit_admin(c).await.map(drop),
        Command::PrintRecordedTrade(c) => engine.submit_admin(c).await.map(drop),
        _ => unreachable!("a market data file's steps are checked when it is read"),
    };
    match answer {
        Err(e) if engine.is_stopped() => Err(e),
        Err(e) => {
            let event = step.event + 1;
            tracing::warn!(event, error = %e, "market data: a step was refused");
            metrics::market_step(false);
            Ok(())
        }
        Ok(()) => {
            metrics::market_step(true);
            Ok(())
        }
    }
}

/// The realtime clock's player: each step sent once the wall clock reaches it; ends when the
/// file is played or the engine stops.
pub async fn play_realtime(feed: Arc<MarketFeed>, engine: EngineHandle) {
    while let Some(due) = feed.next_due() {
        let wait = due.millis() - wall_clock_ms().millis();
        if wait > 0 {
            let wait = std::time::Duration::from_millis(u64::try_from(wait).unwrap_or(0));
            tokio::time::sleep(wait).await;
        }
        if let Err(e) = feed.send_due(&engine, wall_clock_ms()).await {
            tracing::info!(error = %e, "market data: the engine stopped");
            return;
        }
    }
    tracing::info!("market data: the file is played");
}

#[cfg(test)]
mod tests {
    use super::*;
    use perpsim_core::Decimal;
    use perpsim_systems::command::SetInstrumentPrice;

    fn price(symbol: &str, at: i64, index: i64) -> Step {
        Step {
            at: Timestamp::from_millis(at),
            event: 0,
            customer: None,
            command: Command::SetInstrumentPrice(SetInstrumentPrice {
                symbol: symbol.into(),
                index_price: Decimal::from(index),
                mark_price: Decimal::from(index),
            }),
        }
    }

    fn feed(speed: u32) -> MarketFeed {
        let mut steps = Timeline::default();
        for (i, at) in [0, 1_000, 60_000, 61_000].into_iter().enumerate() {
            steps.push(price("BTC-USDC-PERP", 5_000 + at, 100 + i as i64));
        }
        let plan = MarketPlan {
            start: Timestamp::from_millis(5_000),
            steps,
        };
        MarketFeed::new(plan, Timestamp::from_millis(1_000_000), speed)
    }

    /// A step falls due at the venue's start plus its offset in the file over the speed.
    #[test]
    fn steps_fall_due_at_the_origin_plus_their_offset_over_the_speed() {
        let f = feed(1);
        assert_eq!(f.next_due(), Some(Timestamp::from_millis(1_000_000)));
        assert_eq!(f.take_due(Timestamp::from_millis(1_000_999)).len(), 1);
        assert_eq!(f.next_due(), Some(Timestamp::from_millis(1_001_000)));
        let f = feed(60);
        assert_eq!(f.take_due(Timestamp::from_millis(1_000_999)).len(), 2);
        assert_eq!(f.next_due(), Some(Timestamp::from_millis(1_001_000)));
        assert_eq!(f.take_due(Timestamp::from_millis(1_001_016)).len(), 2);
        assert_eq!(f.next_due(), None);
    }
}
