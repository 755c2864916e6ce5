//! The admin API under `/admin/v1` (D3): brokers and keys, instrument status and price;
//! (`simulation`) the clock, the engine's state hash and the venue's switches;
//! (`venue`) the venue's own accounts. Bearer-token authenticated; its own spec at
//! `/admin/openapi.json`, not part of the broker spec.
//!
//! Brokers, keys and instruments; an instrument's prices are bounded so no valuation overflows.
//! `simulation`: the clock (an advance of at most 366 days, run in journaled steps of an hour,
//! one advance at a time, so requests are answered between steps), the state hash and the
//! venue's switches; `venue`: the venue's fees, clearing and insurance accounts and the market
//! maker's; `faults`: the fault plan and its recovery report.

pub mod faults;
pub mod simulation;
pub mod venue;

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use perpsim_core::Error;
use perpsim_core::decimal::{self};
use perpsim_core::ids::{BrokerCode, PublicKey};
use perpsim_systems::records::venue::{BrokerView, InstrumentView};
use poem::Request;
use poem::web::Data;
use poem_openapi::auth::Bearer;
use poem_openapi::param::Path;
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object, OpenApi, SecurityScheme, Tags};

use crate::contract::Text;
use crate::errors::ApiError;
use crate::requests::instruments::{
    FundingRequest, PriceRequest, StatusRequest, funding_command, price_command, status_command,
};
use crate::signing::{encode_public_key, parse_public_key};
use crate::state::AppState;
use crate::types::InstrumentStatusApi;
use crate::v1::funding::{FundingRateLatest, latest};
use perpsim_systems::command::{AddBrokerKey, CreateBroker, RevokeBrokerKey};

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
    /// The fault plan an integrator rehearses a client's recovery against, and its report.
    Faults,
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
        Ok(BrokerCreated::Created(Json(BrokerRecord::from(
            state
                .engine
                .submit_admin(CreateBroker { name, public_key })
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
        let command = AddBrokerKey {
            broker: self::broker_code(&broker_code.0)?,
            public_key: key_from_body(&body.0.public_key)?,
        };
        Ok(BrokerCreated::Created(Json(BrokerRecord::from(
            state.engine.submit_admin(command).await?,
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
        let command = RevokeBrokerKey {
            broker: self::broker_code(&broker_code.0)?,
            public_key: PublicKey(key),
        };
        Ok(Json(BrokerRecord::from(
            state.engine.submit_admin(command).await?,
        )))
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
        let command = price_command(symbol.0, &body.0)?;
        Ok(Json(InstrumentStateRecord::from(
            state.engine.submit_admin(command).await?,
        )))
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
        let command = funding_command(symbol.0, &body.0)?;
        let funding = state.engine.submit_admin(command).await?;
        let view = state.engine.view();
        Ok(Json(
            latest(&view, &funding).expect("a set rate is a preliminary rate"),
        ))
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
        let command = status_command(symbol.0, &body.0);
        Ok(Json(InstrumentStateRecord::from(
            state.engine.submit_admin(command).await?,
        )))
    }
}
