//! The fault plan (issue 25 item 4): what the channels do to an integrator's connections,
//! and what share of order entries the venue refuses or answers late, so a broker can prove
//! its client's recovery before going live; and the recovery report. Off until set; the plan
//! is journaled like every command, so a run with faults replays identically.

use std::sync::Arc;

use perpsim_core::decimal::Sign;
use perpsim_core::time::Timestamp;
use perpsim_core::{Decimal, Error};
use perpsim_systems::records::fault_plan::{
    ChannelFault, ChannelFaultKind, FaultPlan, MAX_CHANNEL_FAULTS, OrderEntryFault, PPM,
};
use poem::web::Data;
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};

use super::{AdminTag, AdminToken};
use crate::contract::{Nullable, Text};
use crate::errors::ApiError;
use crate::state::AppState;
use crate::wire::{DecimalIn, DecimalOut, Time};
use crate::ws::WsShared;
use crate::ws::strikes::{FaultKindApi, RecoveryReport};
use perpsim_systems::command::SetFaults;

/// Longest delay or stall a fault may hold a frame or a connection, in milliseconds.
const MAX_DELAY_MS: u64 = 60_000;

/// One channel fault: what it does, where it aims (every field given must hold) and how
/// often. `skip_sequence` and `corrupt_checksum` strike book updates only;
/// `upstream_error` and `upstream_reject` book and market-trades topics only (§6 rule 7:
/// the topic is torn down); `close`, `close_abrupt` and `stall` strike the connection on its
/// next matching frame.
#[derive(Object, Debug, Clone)]
#[oai(deny_unknown_fields)]
pub struct ChannelFaultRequest {
    pub kind: FaultKindApi,
    /// A connection's id; any when absent.
    pub connection: Option<u64>,
    /// A topic as subscribed (`orderbook-stream:BTC-USDC-PERP`); any when absent.
    pub topic: Option<Text>,
    /// Book frames from this sequence on.
    pub sequence: Option<u64>,
    /// From this simulation time on (RFC 3339).
    pub after: Option<Text>,
    /// How many times it strikes at the most [default: 1].
    pub count: Option<u32>,
    /// The chance a matching frame is struck, 0 to 1, at most 6 decimals [default: 1].
    pub rate: Option<DecimalIn>,
    /// For `delay` and `stall` (required there): 1 to 60000 ms.
    pub delay_ms: Option<u64>,
}

/// A share of order entries (`POST /v1/customers/{code}/orders`) refused with 503
/// EXCHANGE_ERROR before the engine looks at them (journaled, so replays refuse the same),
/// and a share answered `delay_ms` late.
#[derive(Object, Debug, Clone)]
#[oai(deny_unknown_fields)]
pub struct OrderEntryFaultRequest {
    /// 0 to 1, at most 6 decimals [default: 0].
    pub error_rate: Option<DecimalIn>,
    /// 0 to 1, at most 6 decimals [default: 0].
    pub delay_rate: Option<DecimalIn>,
    /// 1 to 60000 ms; required with a delay_rate.
    pub delay_ms: Option<u64>,
}

/// A fault plan; it replaces the one in force.
#[derive(Object, Debug, Clone)]
#[oai(deny_unknown_fields)]
pub struct FaultPlanRequest {
    /// Seeds the plan's draws [default: 0].
    pub seed: Option<u64>,
    /// At most 64.
    pub channel: Option<Vec<ChannelFaultRequest>>,
    pub order_entry: Option<OrderEntryFaultRequest>,
}

#[derive(Object, Debug, Clone)]
pub struct ChannelFaultRecord {
    pub kind: FaultKindApi,
    pub connection: Nullable<u64>,
    pub topic: Nullable<String>,
    pub sequence: Nullable<u64>,
    pub after: Nullable<Time>,
    pub count: u32,
    pub rate: DecimalOut,
    pub delay_ms: u64,
}

/// Zero rates when the plan has no order-entry fault.
#[derive(Object, Debug, Clone)]
pub struct OrderEntryFaultRecord {
    pub error_rate: DecimalOut,
    pub delay_rate: DecimalOut,
    pub delay_ms: u64,
}

#[derive(Object, Debug, Clone)]
pub struct FaultPlanRecord {
    pub seed: u64,
    pub channel: Vec<ChannelFaultRecord>,
    pub order_entry: OrderEntryFaultRecord,
}

/// Whether faults are on, and the plan in force (an empty plan when they are off).
#[derive(Object, Debug, Clone)]
pub struct FaultPlanState {
    pub active: bool,
    pub plan: FaultPlanRecord,
}

/// A rate as parts per million: 0 to 1 with at most 6 decimals.
fn ppm(field: &str, rate: Option<&DecimalIn>, default: u32) -> Result<u32, Error> {
    let Some(rate) = rate else {
        return Ok(default);
    };
    let r = rate.parse(field, Sign::Unsigned)?;
    let refused = || {
        Error::validation(format!(
            "{field} must be between 0 and 1 with at most 6 decimals"
        ))
    };
    // Bounded before it is scaled: a rate of 1e23 must not overflow the product.
    if r > Decimal::ONE {
        return Err(refused());
    }
    let scaled = r * Decimal::from(PPM);
    if scaled.fract() != Decimal::ZERO {
        return Err(refused());
    }
    Ok(u32::try_from(scaled.mantissa() / 10i128.pow(scaled.scale())).expect("at most a million"))
}

fn rate_out(ppm: u32) -> DecimalOut {
    DecimalOut::new(Decimal::new(i64::from(ppm), 6).normalize(), 1)
}

fn delay(field: &str, ms: Option<u64>, required: bool) -> Result<u64, Error> {
    match ms {
        Some(ms) if (1..=MAX_DELAY_MS).contains(&ms) => Ok(ms),
        None if !required => Ok(0),
        _ => Err(Error::validation(format!(
            "{field} must be 1 to {MAX_DELAY_MS} milliseconds"
        ))),
    }
}

fn channel_fault(i: usize, f: &ChannelFaultRequest) -> Result<ChannelFault, Error> {
    let at = |name: &str| format!("channel[{i}].{name}");
    let kind = f.kind.to_engine();
    let timed = matches!(kind, ChannelFaultKind::Delay | ChannelFaultKind::Stall);
    let after = match f.after.as_deref() {
        Some(text) => Some(Timestamp::parse_rfc3339(text).ok_or_else(|| {
            Error::validation(format!("{} must be an RFC 3339 timestamp", at("after")))
        })?),
        None => None,
    };
    let count = f.count.unwrap_or(1);
    if count == 0 {
        return Err(Error::validation(format!(
            "{} must be at least 1",
            at("count")
        )));
    }
    Ok(ChannelFault {
        kind,
        connection: f.connection,
        topic: f.topic.as_ref().map(|t| t.0.clone()),
        sequence: f.sequence,
        after,
        count,
        rate_ppm: ppm(&at("rate"), f.rate.as_ref(), PPM)?,
        delay_ms: delay(&at("delay_ms"), f.delay_ms.filter(|_| timed), timed)?,
    })
}

fn plan(body: &FaultPlanRequest) -> Result<FaultPlan, Error> {
    let requested = body.channel.as_deref().unwrap_or_default();
    if requested.len() > MAX_CHANNEL_FAULTS {
        return Err(Error::validation(format!(
            "a plan holds at most {MAX_CHANNEL_FAULTS} channel faults"
        )));
    }
    let channel = requested
        .iter()
        .enumerate()
        .map(|(i, f)| channel_fault(i, f))
        .collect::<Result<_, _>>()?;
    let order_entry = match &body.order_entry {
        Some(o) => {
            let delay_ppm = ppm("order_entry.delay_rate", o.delay_rate.as_ref(), 0)?;
            Some(OrderEntryFault {
                error_ppm: ppm("order_entry.error_rate", o.error_rate.as_ref(), 0)?,
                delay_ppm,
                delay_ms: delay("order_entry.delay_ms", o.delay_ms, delay_ppm > 0)?,
            })
        }
        None => None,
    };
    Ok(FaultPlan {
        seed: body.seed.unwrap_or(0),
        channel,
        order_entry,
    })
}

fn record(plan: &FaultPlan) -> FaultPlanRecord {
    FaultPlanRecord {
        seed: plan.seed,
        channel: plan
            .channel
            .iter()
            .map(|f| ChannelFaultRecord {
                kind: FaultKindApi::of(f.kind),
                connection: f.connection.into(),
                topic: f.topic.clone().into(),
                sequence: f.sequence.into(),
                after: f.after.map(Time::from).into(),
                count: f.count,
                rate: rate_out(f.rate_ppm),
                delay_ms: f.delay_ms,
            })
            .collect(),
        order_entry: {
            let o = plan.order_entry.unwrap_or(OrderEntryFault {
                error_ppm: 0,
                delay_ppm: 0,
                delay_ms: 0,
            });
            OrderEntryFaultRecord {
                error_rate: rate_out(o.error_ppm),
                delay_rate: rate_out(o.delay_ppm),
                delay_ms: o.delay_ms,
            }
        },
    }
}

fn state_of(plan: Option<&FaultPlan>) -> FaultPlanState {
    FaultPlanState {
        active: plan.is_some(),
        plan: record(plan.unwrap_or(&FaultPlan::default())),
    }
}

async fn apply(state: &AppState, plan: Option<FaultPlan>) -> Result<FaultPlanState, ApiError> {
    let plan = state.engine.submit_admin(SetFaults { plan }).await?;
    Ok(state_of(plan.as_deref()))
}

pub struct FaultsApi;

#[OpenApi]
impl FaultsApi {
    /// The fault plan in force (`active` false, and an empty plan, when faults are off, as
    /// they are by default).
    #[oai(
        path = "/faults",
        method = "get",
        tag = "AdminTag::Faults",
        operation_id = "getFaults"
    )]
    async fn get(
        &self,
        state: Data<&Arc<AppState>>,
        _auth: AdminToken,
    ) -> Result<Json<FaultPlanState>, ApiError> {
        Ok(Json(state_of(state.engine.view().faults.as_deref())))
    }

    /// Sets the fault plan, replacing the one in force (journaled). Its counts start anew.
    #[oai(
        path = "/faults",
        method = "put",
        tag = "AdminTag::Faults",
        operation_id = "setFaults"
    )]
    async fn set(
        &self,
        state: Data<&Arc<AppState>>,
        _auth: AdminToken,
        body: Json<FaultPlanRequest>,
    ) -> Result<Json<FaultPlanState>, ApiError> {
        let plan = plan(&body.0)?;
        Ok(Json(apply(&state, Some(plan)).await?))
    }

    /// Turns faults off (journaled).
    #[oai(
        path = "/faults",
        method = "delete",
        tag = "AdminTag::Faults",
        operation_id = "clearFaults"
    )]
    async fn clear(
        &self,
        state: Data<&Arc<AppState>>,
        _auth: AdminToken,
    ) -> Result<Json<FaultPlanState>, ApiError> {
        Ok(Json(apply(&state, None).await?))
    }

    /// The recovery report: per connection struck, each strike and whether and how fast the
    /// client recovered (subscribed again after a gap, a bad checksum or an upstream error;
    /// reconnected as the same broker, or from the same address, after a close or a stall).
    /// Kept for the last 1 024 connections, 256 strikes each.
    #[oai(
        path = "/faults/report",
        method = "get",
        tag = "AdminTag::Faults",
        operation_id = "getFaultReport"
    )]
    async fn report(
        &self,
        ws: Data<&Arc<WsShared>>,
        _auth: AdminToken,
    ) -> Result<Json<RecoveryReport>, ApiError> {
        let report = ws.report().await.ok_or_else(|| {
            Error::new(
                perpsim_core::ErrorCode::ExchangeError,
                "the channels have stopped",
            )
        })?;
        Ok(Json(report))
    }
}
