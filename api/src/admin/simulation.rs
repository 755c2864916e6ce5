//! The simulation (D3): the clock (read it, advance the manual clock through every timed
//! event inside the span), the SHA-256 of the whole engine state, which the same journal
//! always replays to, and the venue's switches (transfers available, a pending transfer
//! cancelled, a margin profile provisioned), and the journal's archive (issue 37).

use std::sync::Arc;

use perpsim_core::Error;
use perpsim_core::clock::ClockMode;
use perpsim_core::time::{DAY_MS, HOUR_MS, SECOND_MS, Timestamp};
use perpsim_systems::records::clock::ClockView;
use poem::web::Data;
use poem_openapi::param::Path;
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};

use super::{AdminTag, AdminToken};
use crate::contract::Text;
use crate::errors::ApiError;
use crate::replay::market::{MarketFeed, Played};
use crate::state::AppState;
use crate::state::latency::OrderLatency;
use perpsim_systems::command::{
    AdvanceClock, CancelTransfer, SetProvisioned, SetTransfersAvailable,
};

/// A segment's path as the operator finds it under the data dir: its folder and name.
fn relative_to_data_dir(path: &std::path::Path) -> String {
    let parts: Vec<_> = path.iter().rev().take(2).collect();
    parts
        .iter()
        .rev()
        .map(|p| p.to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

#[derive(poem_openapi::Enum, Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[oai(rename = "ClockMode", rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum ClockModeApi {
    Realtime,
    Manual,
}

#[derive(Object, Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct ClockRecord {
    pub mode: ClockModeApi,
    /// Simulation time now, RFC 3339 UTC.
    pub now: String,
}

impl ClockRecord {
    fn new(c: ClockView, realtime_now: Timestamp) -> Self {
        let (mode, now) = match c.mode {
            perpsim_core::clock::ClockMode::Realtime => {
                (ClockModeApi::Realtime, realtime_now.max(c.now))
            }
            perpsim_core::clock::ClockMode::Manual => (ClockModeApi::Manual, c.now),
        };
        ClockRecord {
            mode,
            now: now.to_rfc3339(),
        }
    }
}

/// Exactly one of `seconds` and `to`.
#[derive(Object, Debug)]
#[oai(deny_unknown_fields)]
pub struct AdvanceRequest {
    /// Whole seconds to advance, 1 to 31622400 (366 days).
    pub seconds: Option<i64>,
    /// RFC 3339 instant to advance to; later than now, at most 366 days on.
    pub to: Option<Text>,
}

#[derive(Object, Debug)]
#[oai(deny_unknown_fields)]
pub struct TransfersRequest {
    /// While false, deposits and withdrawals answer 503 EXCHANGE_ERROR and nothing is booked.
    pub available: bool,
}

#[derive(Object, Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct TransfersRecord {
    pub available: bool,
}

#[derive(Object, Debug)]
#[oai(deny_unknown_fields)]
pub struct ProvisionedRequest {
    /// While false, GET margin-profile answers 502 PROFILE_NOT_PROVISIONED.
    pub provisioned: bool,
}

#[derive(Object, Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct ProvisionedRecord {
    pub customer_code: String,
    pub provisioned: bool,
}

/// Where the engine stands and the hash of its whole state.
#[derive(Object, Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct StateRecord {
    /// Ticks journaled.
    pub ticks: u64,
    /// Commands journaled.
    pub commands: u64,
    /// SHA-256 (hex) of the canonical encoding of the whole engine state.
    pub state_hash: String,
}

/// One archive call: the segment it wrote, and what is left to move.
#[derive(Object, Debug)]
pub struct ArchiveRecord {
    /// The segment written by this call; absent when no tick is older than the oldest kept
    /// snapshot and not yet archived.
    #[oai(skip_serializing_if_is_none)]
    pub segment: Option<SegmentRecord>,
    /// Every tick up to this one is in the archive (0: none).
    pub archived_through: u64,
    /// Ticks old enough to archive still in the journal file: call again to move them
    /// (`perpsim admin archive-journal --all` does).
    pub remaining_ticks: u64,
    /// Size of every archive segment together, in bytes.
    pub archive_bytes: u64,
}

/// An archive segment: a gzip file of journaled ticks, beside the journal file.
#[derive(Object, Debug)]
pub struct SegmentRecord {
    pub first_tick: u64,
    pub last_tick: u64,
    /// The file, relative to the data dir.
    pub file: String,
    pub bytes: u64,
}

pub struct SimulationApi;

/// The longest advance (D3): 366 days, as the longest scenario.
pub const MAX_ADVANCE_MS: i64 = 366 * DAY_MS;
/// An advance is journaled in steps of at most this much simulation time: each is one tick,
/// so requests are answered between them and a tick's events stay bounded.
const ADVANCE_STEP_MS: i64 = HOUR_MS;

fn clock_now(state: &AppState) -> Timestamp {
    state.engine.view().clock.now
}

/// Where an advance ends: `seconds` after `now` or `to`, later than now and at most 366 days
/// on, each checked before any arithmetic.
fn advance_target(body: &AdvanceRequest, now: Timestamp) -> Result<Timestamp, Error> {
    let most = MAX_ADVANCE_MS / SECOND_MS;
    let bound = || {
        Error::validation(format!(
            "an advance spans at most 366 days ({most} seconds); advance again to go further"
        ))
    };
    let to = match (body.seconds, body.to.as_deref()) {
        (Some(s), None) if s > most => return Err(bound()),
        (Some(s), None) if s > 0 => now.plus_millis(s * SECOND_MS),
        (Some(_), None) => {
            return Err(Error::validation("seconds must be a positive whole number"));
        }
        (None, Some(t)) => Timestamp::parse_rfc3339(t).ok_or_else(|| {
            Error::validation("to must be an RFC 3339 timestamp with at most millisecond precision")
        })?,
        _ => return Err(Error::validation("give exactly one of seconds and to")),
    };
    if to.millis().saturating_sub(now.millis()) > MAX_ADVANCE_MS {
        return Err(bound());
    }
    Ok(to)
}

/// What falls due at `now` on the manual clock: the market data's steps, then the order
/// entries held for their latency.
async fn send_due(
    state: &AppState,
    (feed, latency): (Option<&Arc<MarketFeed>>, Option<&OrderLatency>),
    now: Timestamp,
) -> Result<(), Error> {
    if let Some(feed) = feed {
        feed.send_due(&state.engine, now).await?;
    }
    if let Some(latency) = latency {
        latency.send_due(now).await;
    }
    Ok(())
}

#[OpenApi]
impl SimulationApi {
    /// The simulation clock.
    #[oai(
        path = "/clock",
        method = "get",
        tag = "AdminTag::Simulation",
        operation_id = "getClock"
    )]
    async fn clock(
        &self,
        state: Data<&Arc<AppState>>,
        _auth: AdminToken,
    ) -> Result<Json<ClockRecord>, ApiError> {
        Ok(Json(ClockRecord::new(
            state.engine.view().clock,
            crate::state::host::wall_clock_ms(),
        )))
    }

    /// Advance the manual clock by `seconds` or to `to`, running every timed event inside the
    /// span in time order. One advance spans at most 366 days (400 beyond); it runs in
    /// journaled steps of at most an hour of simulation time, so other requests are answered
    /// in between, and two advances run one after the other. 409 CONFLICT unless the clock
    /// is manual.
    #[oai(
        path = "/clock/advance",
        method = "post",
        tag = "AdminTag::Simulation",
        operation_id = "advanceClock"
    )]
    async fn advance(
        &self,
        state: Data<&Arc<AppState>>,
        _auth: AdminToken,
        played: Data<&Played>,
        body: Json<AdvanceRequest>,
    ) -> Result<Json<ClockRecord>, ApiError> {
        let _alone = state.advancing.lock().await;
        let now = state.engine.view().clock.now;
        let to = advance_target(&body.0, now)?;
        // With --market-data or --order-latency the advance stops where a recorded step or a
        // held order entry falls due (`replay::market`, `state::latency`); on the realtime
        // clock the engine refuses the advance.
        let manual = state.engine.view().clock.mode == ClockMode::Manual;
        let feed = played.0.0.as_ref().filter(|_| manual);
        let latency = state.latency.as_deref().filter(|_| manual);
        let mut clock;
        loop {
            let now = clock_now(&state);
            let mut step = to.min(now.plus_millis(ADVANCE_STEP_MS));
            // Recorded steps and held order entries act at their own instants: the advance
            // stops at each first.
            send_due(&state, (feed, latency), now).await?;
            for due in [
                feed.and_then(|f| f.next_due()),
                latency.and_then(|l| l.next_due()),
            ] {
                step = due.map_or(step, |due| step.min(due));
            }
            clock = state.engine.submit_admin(AdvanceClock { to: step }).await?;
            send_due(&state, (feed, latency), clock.now).await?;
            if clock.now >= to {
                break;
            }
        }
        Ok(Json(ClockRecord::new(
            clock,
            crate::state::host::wall_clock_ms(),
        )))
    }

    /// Where the engine stands and the SHA-256 of its whole state; the same journal always
    /// replays to the same hash.
    #[oai(
        path = "/state",
        method = "get",
        tag = "AdminTag::Simulation",
        operation_id = "getState"
    )]
    async fn state(
        &self,
        state: Data<&Arc<AppState>>,
        _auth: AdminToken,
    ) -> Result<Json<StateRecord>, ApiError> {
        let report = state.engine.state().await?;
        Ok(Json(StateRecord {
            ticks: report.ticks,
            commands: report.commands,
            state_hash: report.hash.to_string(),
        }))
    }

    /// Move the journal's oldest ticks, those older than the oldest kept snapshot, out of the
    /// journal file into a gzip segment of the archive beside it (at most 65 536 ticks a
    /// call). Recovery never reads them; `perpsim replay --journal` and a replay from genesis
    /// read them where they went. Answered once the ticks before it are durable.
    #[oai(
        path = "/journal/archive",
        method = "post",
        tag = "AdminTag::Simulation",
        operation_id = "archiveJournal"
    )]
    async fn archive(
        &self,
        state: Data<&Arc<AppState>>,
        _auth: AdminToken,
    ) -> Result<Json<ArchiveRecord>, ApiError> {
        let done = state.engine.archive().await?;
        let segment = done.segment.map(|(s, path, bytes)| SegmentRecord {
            first_tick: s.first,
            last_tick: s.last,
            file: relative_to_data_dir(&path),
            bytes,
        });
        Ok(Json(ArchiveRecord {
            segment,
            archived_through: done.archived_through,
            remaining_ticks: done.remaining,
            archive_bytes: done.archive_bytes,
        }))
    }

    /// Switch deposits and withdrawals on or off (D3).
    #[oai(
        path = "/transfers",
        method = "put",
        tag = "AdminTag::Simulation",
        operation_id = "setTransfersAvailable"
    )]
    async fn set_transfers(
        &self,
        state: Data<&Arc<AppState>>,
        _auth: AdminToken,
        body: Json<TransfersRequest>,
    ) -> Result<Json<TransfersRecord>, ApiError> {
        let available = body.0.available;
        let available = state
            .engine
            .submit_admin(SetTransfersAvailable { available })
            .await?;
        Ok(Json(TransfersRecord { available }))
    }

    /// End a pending deposit or withdrawal as cancelled, as when the venue refuses it: nothing
    /// is booked and a withdrawal's hold is released. 404 NOT_FOUND unless it is pending.
    #[oai(
        path = "/transfers/:code/cancel",
        method = "post",
        tag = "AdminTag::Simulation",
        operation_id = "cancelTransfer"
    )]
    async fn cancel_transfer(
        &self,
        state: Data<&Arc<AppState>>,
        _auth: AdminToken,
        code: Path<String>,
    ) -> Result<Json<crate::v1::money::TransactionRecord>, ApiError> {
        let code = perpsim_core::ids::MovementCode::parse(&code.0)
            .ok_or_else(|| Error::not_found(format!("transfer {} does not exist", code.0)))?;
        let movement = state.engine.submit_admin(CancelTransfer { code }).await?;
        Ok(Json((&movement).into()))
    }

    /// Mark a customer's margin profile provisioned at the venue, or not (D3).
    #[oai(
        path = "/customers/:code/margin-profile/provisioned",
        method = "put",
        tag = "AdminTag::Simulation",
        operation_id = "setProvisioned"
    )]
    async fn set_provisioned(
        &self,
        state: Data<&Arc<AppState>>,
        _auth: AdminToken,
        code: Path<String>,
        body: Json<ProvisionedRequest>,
    ) -> Result<Json<ProvisionedRecord>, ApiError> {
        let customer = perpsim_core::ids::CustomerCode::parse(&code.0)
            .ok_or_else(|| Error::not_found(format!("customer {} does not exist", code.0)))?;
        let provisioned = body.0.provisioned;
        let c = state
            .engine
            .submit_admin(SetProvisioned {
                customer,
                provisioned,
            })
            .await?;
        Ok(Json(ProvisionedRecord {
            customer_code: c.code.to_string(),
            provisioned: c.provisioned,
        }))
    }
}
