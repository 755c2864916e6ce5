//! The broker API under `/v1`, signed as D2 says. Handlers read the published view and send
//! commands to the engine; they never hold engine state.

pub mod customer;
pub mod customers;
pub mod funding;
pub mod history;
pub mod instruments;
pub mod market;
pub mod money;
pub mod notifications;
pub mod orders;
pub mod positions;
pub mod profiles;
pub mod trades;

use std::sync::Arc;

use perpsim_core::ids::BrokerCode;
use poem::Request;
use poem_openapi::auth::ApiKey;
use poem_openapi::{SecurityScheme, Tags};

pub use customer::customer_of;

use crate::signing::Admission;

/// The admission of an authenticated request (its broker and spent nonce); put into the
/// request by the signing middleware.
#[derive(Debug, Clone)]
pub struct AuthedBroker(pub Arc<Admission>);

/// ed25519 request signing (D2). Send three headers on every `/v1` request:
/// `X-Public-Key` (standard base64 of the 32-byte public key), `X-Nonce` (nanosecond Unix
/// timestamp, at most 30 s behind and 5 s ahead of server time — see the `Date` response
/// header — never reused by the same key) and `X-Signature` (standard base64 of the 64-byte
/// signature over `{nonce}\n{METHOD}\n{path_and_query}\n{body}`, the body raw and empty if
/// none). Any failure answers 401 UNAUTHORIZED naming the failed check.
#[derive(SecurityScheme)]
#[oai(
    ty = "api_key",
    key_name = "X-Signature",
    key_in = "header",
    checker = "signed_broker"
)]
pub struct Signed(pub Arc<Admission>);

impl Signed {
    pub fn broker(&self) -> BrokerCode {
        self.0.broker
    }

    /// What a handler passes with its command, so the nonce is spent in the command's tick.
    pub fn admission(&self) -> &Admission {
        &self.0
    }
}

async fn signed_broker(req: &Request, _: ApiKey) -> Option<Arc<Admission>> {
    req.extensions().get::<AuthedBroker>().map(|b| b.0.clone())
}

#[derive(Tags)]
pub enum Tag {
    /// Instruments and market data.
    MarketData,
    /// Customers of the broker and everything per customer.
    Customers,
    /// Orders, positions and trades.
    Orders,
}

pub type BrokerApi = (
    instruments::InstrumentsApi,
    customers::CustomersApi,
    money::MoneyApi,
    profiles::ProfilesApi,
    orders::OrdersApi,
    positions::PositionsApi,
    trades::TradesApi,
    market::MarketApi,
    funding::FundingApi,
    notifications::NotificationsApi,
);

pub fn api() -> BrokerApi {
    (
        instruments::InstrumentsApi,
        customers::CustomersApi,
        money::MoneyApi,
        profiles::ProfilesApi,
        orders::OrdersApi,
        positions::PositionsApi,
        trades::TradesApi,
        market::MarketApi,
        funding::FundingApi,
        notifications::NotificationsApi,
    )
}

#[cfg(test)]
mod history_tests;
