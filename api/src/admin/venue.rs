//! The venue's own accounts (D7, D10): trading fees, the clearing account of realised PnL,
//! funding and settlement, and the insurance account that pays what liquidations leave
//! below zero. Its balance may go negative: a visible venue loss, read here, never hidden.
//! Beside them, the built-in market maker's account: the other side of most customer trades.

use std::sync::Arc;

use perpsim_core::instrument::Asset;
use perpsim_systems::records::money::VenueAccount;
use perpsim_systems::records::simulation::MARKET_MAKER;
use poem::web::Data;
use poem_openapi::payload::Json;
use poem_openapi::{Enum, Object, OpenApi};

use super::{AdminTag, AdminToken};
use crate::errors::ApiError;
use crate::state::AppState;
use crate::wire::DecimalOut;

#[derive(Enum, Debug, Clone, Copy, PartialEq, Eq)]
#[oai(rename = "VenueAccount", rename_all = "snake_case")]
pub enum VenueAccountApi {
    /// Trading fees collected, rebates paid.
    Fees,
    /// Realised PnL, funding and settlement between counterparties.
    Clearing,
    /// Funded at genesis (`--insurance-funding`); pays the negative balances liquidations
    /// leave.
    Insurance,
    /// The built-in market maker's own account (`--maker-funding` at genesis): a trader like
    /// any customer, whose trades are the other side of the customers' against its quotes.
    MarketMaker,
}

impl From<VenueAccount> for VenueAccountApi {
    fn from(a: VenueAccount) -> Self {
        match a {
            VenueAccount::Fees => VenueAccountApi::Fees,
            VenueAccount::Clearing => VenueAccountApi::Clearing,
            VenueAccount::Insurance => VenueAccountApi::Insurance,
        }
    }
}

/// One venue account in one asset.
#[derive(Object, Debug, Clone, PartialEq, Eq)]
pub struct VenueAccountRecord {
    pub account: VenueAccountApi,
    pub asset: String,
    /// The exact ledger balance; may be negative.
    pub total: DecimalOut,
}

pub struct VenueApi;

#[OpenApi]
impl VenueApi {
    /// Every venue account in every asset, in a fixed order (fees, clearing, insurance,
    /// market_maker; USDC, USDT), as of the last published tick.
    #[oai(
        path = "/venue/accounts",
        method = "get",
        tag = "AdminTag::Venue",
        operation_id = "listVenueAccounts"
    )]
    async fn accounts(
        &self,
        state: Data<&Arc<AppState>>,
        _auth: AdminToken,
    ) -> Result<Json<Vec<VenueAccountRecord>>, ApiError> {
        let view = state.engine.view();
        let venue = VenueAccount::ALL
            .into_iter()
            .flat_map(|account| Asset::ALL.map(|asset| (account, asset)))
            .map(|(account, asset)| (account.into(), asset, view.venue.get(&(account, asset))));
        let maker = view.balances.get(&MARKET_MAKER);
        let maker = Asset::ALL.map(|a| {
            (
                VenueAccountApi::MarketMaker,
                a,
                maker.and_then(|r| r.get(&a)),
            )
        });
        let records = venue
            .chain(maker)
            .map(|(account, asset, balance)| VenueAccountRecord {
                account,
                asset: asset.as_str().to_owned(),
                total: DecimalOut::ledger(balance.map_or_else(Default::default, |b| b.total)),
            })
            .collect();
        Ok(Json(records))
    }
}
