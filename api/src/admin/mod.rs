//! The admin API under `/admin/v1` (D3): brokers and keys, instrument status and price, the
//! clock, the engine's state hash, and (`venue`) the venue's own accounts. Bearer-token
//! authenticated; its own spec at `/admin/openapi.json`, not part of the broker spec.

pub mod venue;

use crate::v1::funding::{FundingRateLatest, latest};
use perpsim_systems::settlement::funding::MAX_RATE_DECIMALS;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use perpsim_core::decimal::{self, Sign};
use perpsim_core::ids::{BrokerCode, PublicKey};
use perpsim_core::time::{SECOND_MS, Timestamp};
use perpsim_core::{Decimal, Error};
use perpsim_systems::clock::ClockView;
use perpsim_systems::registry::{BrokerView, InstrumentView};
use perpsim_systems::{Command, Outcome};
use poem::Request;
use poem::web::Data;
use poem_openapi::auth::Bearer;
use poem_openapi::param::Path;
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object, OpenApi, SecurityScheme, Tags};

use crate::contract::Text;
use crate::errors::ApiError;
use crate::server::app::AppState;
use crate::signing::{encode_public_key, parse_public_key};
use crate::types::InstrumentStatusApi;
use crate::wire::DecimalIn;

/// Marker put into the request by the admin middleware once the token matched.
#[derive(Debug, Clone, Copy)]
pub struct AdminAuthed;

/// `Authorization: Bearer <admin token>`; the token is in `<data-dir>/admin.token` (or
/// `--admin-token`). A missing or wrong token answers 401 UNAUTHORIZED.
#[derive(SecurityScheme)]
#[oai(ty = "bearer", checker = "admin_checker")]
pub struct AdminToken(());

async fn admin_checker(req: &Request, _: Bearer) -> Option<()> {
    req.extensions().get::<AdminAuthed>().map(|_| ())
}

#[derive(Tags)]
pub(crate) enum AdminTag {
    /// Brokers and their signing keys.
    Brokers,
    /// Instrument status and prices.
    Instruments,
    /// The simulation clock and the engine's state.
    Simulation,
    /// The venue's own accounts: fees, clearing and insurance (D10).
    Venue,
}

/// Longest broker name accepted.
const MAX_NAME: usize = 64;

#[derive(Object, Debug)]
#[oai(deny_unknown_fields)]
pub struct CreateBrokerRequest {
    /// 1 to 64 characters.
    pub name: Text,
    /// Standard base64 (with padding) of the 32-byte ed25519 public key.
    pub public_key: Text,
}

#[derive(Object, Debug)]
#[oai(deny_unknown_fields)]
pub struct AddKeyRequest {
    /// Standard base64 (with padding) of the 32-byte ed25519 public key.
    pub public_key: Text,
}

#[derive(Object, Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct BrokerRecord {
    pub broker_code: String,
    pub name: String,
    /// Active keys, standard base64, in the order they were added.
    pub public_keys: Vec<String>,
    pub created_at: String,
}

impl From<BrokerView> for BrokerRecord {
    fn from(b: BrokerView) -> Self {
        BrokerRecord {
            broker_code: b.code.to_string(),
            name: b.name,
            public_keys: b.public_keys.iter().map(encode_public_key).collect(),
            created_at: b.created_at.to_rfc3339(),
        }
    }
}

#[derive(Object, Debug)]
#[oai(deny_unknown_fields)]
pub struct PriceRequest {
    /// Positive decimal string.
    pub index_price: DecimalIn,
    /// Positive decimal string; defaults to index_price.
    pub mark_price: Option<DecimalIn>,
}

#[derive(Object, Debug)]
#[oai(deny_unknown_fields)]
pub struct FundingRequest {
    /// The running interval's rate, a signed decimal fraction with at most 10 decimals and
    /// below 1 in absolute value (0.0001 = 0.01 % per hour); it replaces the premium samples
    /// until the interval settles on the hour.
    pub preliminary_rate: DecimalIn,
}

#[derive(Object, Debug)]
#[oai(deny_unknown_fields)]
pub struct StatusRequest {
    pub status: InstrumentStatusApi,
}

/// An instrument's moving state.
#[derive(Object, Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct InstrumentStateRecord {
    pub symbol: String,
    pub status: InstrumentStatusApi,
    pub index_price: String,
    pub mark_price: String,
    /// When the prices were last set (simulation time).
    pub price_time: String,
}

impl From<InstrumentView> for InstrumentStateRecord {
    fn from(v: InstrumentView) -> Self {
        let dp = v.spec.price_decimals();
        InstrumentStateRecord {
            symbol: v.spec.symbol.clone(),
            status: v.status.into(),
            index_price: decimal::format(v.index_price, dp),
            mark_price: decimal::format(v.mark_price, dp),
            price_time: v.price_time.to_rfc3339(),
        }
    }
}

#[derive(poem_openapi::Enum, Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[oai(rename_all = "snake_case")]
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
    /// Whole seconds to advance, > 0.
    pub seconds: Option<i64>,
    /// RFC 3339 instant to advance to; later than now.
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

#[derive(ApiResponse)]
pub enum BrokerCreated {
    #[oai(status = 201)]
    Created(Json<BrokerRecord>),
}

fn key_from_body(text: &str) -> Result<PublicKey, Error> {
    parse_public_key(text).ok_or_else(|| {
        Error::validation("public_key must be standard base64 of a 32-byte ed25519 public key")
    })
}

fn positive_price(field: &str, input: &DecimalIn) -> Result<Decimal, Error> {
    let v = input.parse(field, Sign::Unsigned)?;
    if v.is_zero() {
        return Err(Error::validation(format!(
            "{field} must be greater than zero"
        )));
    }
    Ok(v)
}

fn broker_code(text: &str) -> Result<BrokerCode, Error> {
    BrokerCode::parse(text).ok_or_else(|| Error::not_found(format!("broker {text} does not exist")))
}

pub struct AdminApi;

#[OpenApi]
impl AdminApi {
    /// Register a broker with its first public key.
    #[oai(
        path = "/brokers",
        method = "post",
        tag = "AdminTag::Brokers",
        operation_id = "createBroker"
    )]
    async fn create_broker(
        &self,
        state: Data<&Arc<AppState>>,
        _auth: AdminToken,
        body: Json<CreateBrokerRequest>,
    ) -> Result<BrokerCreated, ApiError> {
        let name = body.0.name.trim().to_owned();
        if name.is_empty() || name.chars().count() > MAX_NAME || name.chars().any(char::is_control)
        {
            return Err(Error::validation(format!(
                "name must be 1 to {MAX_NAME} printable characters"
            ))
            .into());
        }
        let public_key = key_from_body(&body.0.public_key)?;
        Ok(BrokerCreated::Created(Json(broker(
            state
                .engine
                .submit(Command::CreateBroker { name, public_key }, None)
                .await?,
        ))))
    }

    /// Add a public key to a broker.
    #[oai(
        path = "/brokers/:broker_code/keys",
        method = "post",
        tag = "AdminTag::Brokers",
        operation_id = "addBrokerKey"
    )]
    async fn add_key(
        &self,
        state: Data<&Arc<AppState>>,
        _auth: AdminToken,
        broker_code: Path<String>,
        body: Json<AddKeyRequest>,
    ) -> Result<BrokerCreated, ApiError> {
        let command = Command::AddBrokerKey {
            broker: self::broker_code(&broker_code.0)?,
            public_key: key_from_body(&body.0.public_key)?,
        };
        Ok(BrokerCreated::Created(Json(broker(
            state.engine.submit(command, None).await?,
        ))))
    }

    /// Revoke a broker's public key. The key is given in URL-safe base64 without padding.
    #[oai(
        path = "/brokers/:broker_code/keys/:public_key",
        method = "delete",
        tag = "AdminTag::Brokers",
        operation_id = "revokeBrokerKey"
    )]
    async fn revoke_key(
        &self,
        state: Data<&Arc<AppState>>,
        _auth: AdminToken,
        broker_code: Path<String>,
        /// URL-safe base64, no padding, of the 32-byte key.
        public_key: Path<String>,
    ) -> Result<Json<BrokerRecord>, ApiError> {
        let key = URL_SAFE_NO_PAD
            .decode(&public_key.0)
            .ok()
            .and_then(|b| <[u8; 32]>::try_from(b).ok())
            .ok_or_else(|| {
                Error::validation("public_key must be URL-safe base64 without padding of 32 bytes")
            })?;
        let command = Command::RevokeBrokerKey {
            broker: self::broker_code(&broker_code.0)?,
            public_key: PublicKey(key),
        };
        Ok(Json(broker(state.engine.submit(command, None).await?)))
    }

    /// Set an instrument's index price and mark price (the mark defaults to the index).
    #[oai(
        path = "/instruments/:symbol/price",
        method = "put",
        tag = "AdminTag::Instruments",
        operation_id = "setInstrumentPrice"
    )]
    async fn set_price(
        &self,
        state: Data<&Arc<AppState>>,
        _auth: AdminToken,
        symbol: Path<String>,
        body: Json<PriceRequest>,
    ) -> Result<Json<InstrumentStateRecord>, ApiError> {
        let index_price = positive_price("index_price", &body.0.index_price)?;
        let mark_price = match &body.0.mark_price {
            Some(m) => positive_price("mark_price", m)?,
            None => index_price,
        };
        let command = Command::SetInstrumentPrice {
            symbol: symbol.0,
            index_price,
            mark_price,
        };
        Ok(Json(instrument(state.engine.submit(command, None).await?)))
    }

    /// Set the preliminary funding rate of an instrument's running interval (D3).
    ///
    /// Answers the instrument's funding as `GET /v1/funding_rates/{symbol}` shows it.
    #[oai(
        path = "/instruments/:symbol/funding",
        method = "put",
        tag = "AdminTag::Instruments",
        operation_id = "setFundingRate"
    )]
    async fn set_funding(
        &self,
        state: Data<&Arc<AppState>>,
        _auth: AdminToken,
        symbol: Path<String>,
        body: Json<FundingRequest>,
    ) -> Result<Json<FundingRateLatest>, ApiError> {
        let rate = body
            .0
            .preliminary_rate
            .parse("preliminary_rate", Sign::Signed)?;
        if rate.scale() > MAX_RATE_DECIMALS || rate.abs() >= Decimal::ONE {
            return Err(Error::validation(format!(
                "preliminary_rate must be below 1 in absolute value with at most {MAX_RATE_DECIMALS} decimals, got {rate}"
            ))
            .into());
        }
        let command = Command::SetFundingRate {
            symbol: symbol.0,
            rate,
        };
        match state.engine.submit(command, None).await? {
            Outcome::Funding(f) => {
                let view = state.engine.view();
                Ok(Json(
                    latest(&view, &f).expect("a set rate is a preliminary rate"),
                ))
            }
            other => unreachable!("a funding command answers funding, got {other:?}"),
        }
    }

    /// Set an instrument's status.
    #[oai(
        path = "/instruments/:symbol/status",
        method = "put",
        tag = "AdminTag::Instruments",
        operation_id = "setInstrumentStatus"
    )]
    async fn set_status(
        &self,
        state: Data<&Arc<AppState>>,
        _auth: AdminToken,
        symbol: Path<String>,
        body: Json<StatusRequest>,
    ) -> Result<Json<InstrumentStateRecord>, ApiError> {
        let command = Command::SetInstrumentStatus {
            symbol: symbol.0,
            status: body.0.status.into(),
        };
        Ok(Json(instrument(state.engine.submit(command, None).await?)))
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
        match state
            .engine
            .submit(
                Command::SetTransfersAvailable {
                    available: body.0.available,
                },
                None,
            )
            .await?
        {
            Outcome::TransfersAvailable(available) => Ok(Json(TransfersRecord { available })),
            other => unreachable!("the switch answers its state, got {other:?}"),
        }
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
        match state
            .engine
            .submit(Command::CancelTransfer { code }, None)
            .await?
        {
            Outcome::Movement(m) => Ok(Json((&m).into())),
            other => unreachable!("cancel answers the movement, got {other:?}"),
        }
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
        match state
            .engine
            .submit(
                Command::SetProvisioned {
                    customer,
                    provisioned: body.0.provisioned,
                },
                None,
            )
            .await?
        {
            Outcome::Customer(c) => Ok(Json(ProvisionedRecord {
                customer_code: c.code.to_string(),
                provisioned: c.provisioned,
            })),
            other => unreachable!("provisioning answers the customer, got {other:?}"),
        }
    }

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
            crate::server::host::wall_clock_ms(),
        )))
    }

    /// Advance the manual clock by `seconds` or to `to`, running every timed event inside the
    /// span in time order. 409 CONFLICT unless the clock is manual.
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
        body: Json<AdvanceRequest>,
    ) -> Result<Json<ClockRecord>, ApiError> {
        let now = state.engine.view().clock.now;
        let to = match (body.0.seconds, body.0.to.as_deref()) {
            (Some(s), None) if s > 0 && s <= i64::MAX / SECOND_MS - now.millis() / SECOND_MS => {
                now.plus_millis(s * SECOND_MS)
            }
            (Some(_), None) => {
                return Err(Error::validation("seconds must be a positive whole number").into());
            }
            (None, Some(t)) => Timestamp::parse_rfc3339(t).ok_or_else(|| {
                Error::validation(
                    "to must be an RFC 3339 timestamp with at most millisecond precision",
                )
            })?,
            _ => return Err(Error::validation("give exactly one of seconds and to").into()),
        };
        match state
            .engine
            .submit(Command::AdvanceClock { to }, None)
            .await?
        {
            Outcome::Clock(c) => Ok(Json(ClockRecord::new(
                c,
                crate::server::host::wall_clock_ms(),
            ))),
            other => unreachable!("AdvanceClock answers the clock, got {other:?}"),
        }
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
}

fn broker(outcome: Outcome) -> BrokerRecord {
    match outcome {
        Outcome::Broker(b) => b.into(),
        other => unreachable!("broker commands answer a broker, got {other:?}"),
    }
}

fn instrument(outcome: Outcome) -> InstrumentStateRecord {
    match outcome {
        Outcome::Instrument(i) => i.into(),
        other => unreachable!("instrument commands answer an instrument, got {other:?}"),
    }
}
