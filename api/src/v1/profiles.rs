//! Account summary, margin profile and fee profile (interface §2.6–2.8; D3, D8).

use std::sync::Arc;

use perpsim_core::money::{MAX_LEVERAGE, MarginProfile, margin_profile};
use perpsim_core::{Decimal, Error, ErrorCode};
use perpsim_systems::ReadView;
use perpsim_systems::records::venue::CustomerView;
use poem::web::Data;
use poem_openapi::param::Path;
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};
use std::collections::BTreeMap;

use perpsim_core::instrument::Asset;
use perpsim_core::risk::{self, MarginState};

use super::{Signed, Tag, customer};
use crate::errors::ApiError;
use crate::requests::profiles::{FeeProfileRequest, fees_command};
use crate::state::AppState;
use crate::wire::{DecimalOut, LeverageIn, Time};
use perpsim_systems::command::SetLeverage;

/// Margin metrics of an account (§2.6). The sums count both settlement currencies at par
/// (1 USDT = 1 USDC).
#[derive(Object, Debug)]
#[oai(example)]
pub struct AccountSummary {
    /// Balance plus unrealised PnL; ledger precision.
    pub total_equity: DecimalOut,
    /// Collateral (balances less pending withdrawals) minus used margin, on the ledger basis.
    pub available_margin: DecimalOut,
    /// Initial margin reserved by open positions.
    pub used_margin: DecimalOut,
    pub unrealised_pnl: DecimalOut,
    /// Deprecated: used_margin / total_equity, 4 decimals (0.0000 when equity is zero).
    #[oai(deprecated)]
    pub margin_ratio: DecimalOut,
    /// (collateral + unrealised PnL) / position notional, rounded down to 4 decimals;
    /// 1.0000 with no open positions. Higher is safer. Each settlement currency margins the
    /// positions settling in it; this is the weakest currency's ratio.
    pub leverage_ratio: DecimalOut,
    /// The weakest currency's margin state (D10): `normal` at or above
    /// margin_call_threshold, `margin_call` below it, `liquidation` below
    /// liquidation_threshold (the engine then cancels the currency's orders and closes its
    /// positions in the same tick).
    pub margin_state: String,
    /// Fractions as applied by the venue (0.50 = 50 %), from the margin profile.
    pub initial_margin_requirement: DecimalOut,
    pub margin_call_threshold: DecimalOut,
    pub liquidation_threshold: DecimalOut,
    /// Newest valuation time across the account's collateral assets.
    pub updated_at: Time,
}

/// Per-instrument margin override (normally none).
#[derive(Object, Debug)]
pub struct InstrumentMargin {
    pub symbol: String,
    pub leverage: u32,
    pub initial_margin: DecimalOut,
}

/// The customer's margin profile (§2.7, D8).
#[derive(Object, Debug)]
#[oai(example)]
pub struct MarginProfileRecord {
    /// Leverage of the assigned profile: the nearest integer to 1 / initial_margin.
    pub leverage: u32,
    pub initial_margin: DecimalOut,
    pub maintenance_margin: DecimalOut,
    pub liquidation_threshold: DecimalOut,
    /// Highest leverage the customer may select.
    pub max_leverage: u32,
    /// Normally empty.
    pub instrument_margins: Vec<InstrumentMargin>,
}

#[derive(Object, Debug)]
#[oai(deny_unknown_fields, example)]
pub struct MarginProfileRequest {
    /// 1 or 2 (up to max_leverage), as an integer or a digit string.
    pub leverage: LeverageIn,
}

/// Fees of one instrument in basis points (2 = 0.02 %); a leading `-` on maker_fee is a
/// rebate.
#[derive(Object, Debug)]
#[oai(example)]
pub struct FeeProfileItem {
    pub symbol: String,
    /// Basis points of the notional the customer pays on a fill it makes; negative is a
    /// rebate, paid out of that same fill's taker fee and never more than it (D7): the trade
    /// record and ledger row show the fee actually applied.
    pub maker_fee: DecimalOut,
    /// Basis points of the notional the customer pays on a fill it takes; never negative.
    pub taker_fee: DecimalOut,
}

/// One settlement currency's margin figures: collateral (total − pending), locked margin,
/// and the unrealised PnL and notional of the positions settling in it, at the marks the
/// view publishes — the marks the engine's margin pass valued them at.
#[derive(Default)]
struct CurrencyMargin {
    collateral: Decimal,
    used: Decimal,
    unrealised: Decimal,
    notional: Decimal,
}

pub fn summary(view: &ReadView, customer: &CustomerView) -> AccountSummary {
    let profile = margin_profile(customer.leverage).expect("customers hold a valid leverage");
    let mut currencies: BTreeMap<Asset, CurrencyMargin> = BTreeMap::new();
    let rows = view.balances.get(&customer.code);
    // The summary changes when a balance does or when a position's record does (a fill, a
    // settlement, a new mark moving its unrealised PnL and the ratios); no balance row
    // precedes the customer.
    let mut updated_at = customer.created_at;
    for (asset, b) in rows.into_iter().flat_map(|r| r.iter()) {
        let c = currencies.entry(*asset).or_default();
        c.collateral += b.total - b.pending;
        c.used += b.locked;
        updated_at = updated_at.max(b.as_of);
    }
    for p in view
        .trading
        .positions
        .get(&customer.code)
        .into_iter()
        .flat_map(|held| held.values())
    {
        let instrument = &view.instruments[view.trading.symbol(p.market)];
        updated_at = updated_at.max(super::positions::valued_at(p, instrument));
        let c = currencies.entry(instrument.spec.settlement).or_default();
        c.unrealised += p.unrealised_pnl(instrument.mark_price);
        c.notional += p.size.abs() * instrument.mark_price;
    }
    let sum =
        |f: &dyn Fn(&CurrencyMargin) -> Decimal| -> Decimal { currencies.values().map(f).sum() };
    let (collateral, used, unrealised) = (
        sum(&|c| c.collateral),
        sum(&|c| c.used),
        sum(&|c| c.unrealised),
    );
    let pending: Decimal = rows
        .into_iter()
        .flat_map(|r| r.values())
        .map(|b| b.pending)
        .sum();
    let equity = collateral + pending + unrealised;
    let (state, leverage_ratio) = weakest(&currencies, &profile);
    AccountSummary {
        total_equity: DecimalOut::ledger(equity),
        available_margin: DecimalOut::ledger(collateral - used),
        used_margin: DecimalOut::ledger(used),
        unrealised_pnl: DecimalOut::ledger(unrealised),
        margin_ratio: DecimalOut::new(risk::margin_ratio(used, equity), 4),
        leverage_ratio: DecimalOut::new(leverage_ratio, 4),
        margin_state: state.as_str().to_owned(),
        initial_margin_requirement: DecimalOut::new(profile.initial, 2),
        margin_call_threshold: DecimalOut::new(profile.maintenance, 2),
        liquidation_threshold: DecimalOut::new(profile.liquidation, 2),
        updated_at: updated_at.into(),
    }
}

/// Each currency margins its own positions (D10 as the engine applies it): the account
/// shows its weakest currency's state and leverage ratio.
fn weakest(
    currencies: &BTreeMap<Asset, CurrencyMargin>,
    profile: &MarginProfile,
) -> (MarginState, Decimal) {
    currencies
        .values()
        .filter(|c| !c.notional.is_zero())
        .map(|c| {
            let equity = c.collateral + c.unrealised;
            (
                risk::margin_state(equity, c.notional, profile.maintenance, profile.liquidation),
                risk::leverage_ratio(equity, c.notional),
            )
        })
        .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
        .unwrap_or((
            MarginState::Normal,
            risk::leverage_ratio(Decimal::ZERO, Decimal::ZERO),
        ))
}

fn profile_record(customer: &CustomerView) -> MarginProfileRecord {
    let p = margin_profile(customer.leverage).expect("customers hold a valid leverage");
    MarginProfileRecord {
        leverage: p.leverage,
        initial_margin: DecimalOut::new(p.initial, 2),
        maintenance_margin: DecimalOut::new(p.maintenance, 2),
        liquidation_threshold: DecimalOut::new(p.liquidation, 2),
        max_leverage: MAX_LEVERAGE,
        instrument_margins: Vec::new(),
    }
}

fn fee_item(customer: &CustomerView, symbol: &str) -> FeeProfileItem {
    let rates = customer.fee_rates(symbol);
    FeeProfileItem {
        symbol: symbol.to_owned(),
        maker_fee: DecimalOut::new(rates.maker_bps, 0),
        taker_fee: DecimalOut::new(rates.taker_bps, 0),
    }
}

fn fee_list(view: &ReadView, customer: &CustomerView) -> Vec<FeeProfileItem> {
    view.instruments
        .keys()
        .map(|s| fee_item(customer, s))
        .collect()
}

pub struct ProfilesApi;

impl ProfilesApi {
    async fn set_fees(
        &self,
        state: &AppState,
        auth: Signed,
        code: &customer::Path,
        symbol: Option<String>,
        body: FeeProfileRequest,
    ) -> Result<CustomerView, ApiError> {
        let command = fees_command(code.customer()?.code, symbol, &body)?;
        Ok(state.engine.submit(command, auth.admission()).await?)
    }
}

#[OpenApi(tag = "Tag::Customers")]
impl ProfilesApi {
    /// The customer's account summary with margin metrics.
    #[oai(
        path = "/customers/:code/account-summary",
        method = "get",
        operation_id = "getAccountSummary"
    )]
    async fn account_summary(
        &self,
        _auth: Signed,
        code: customer::Path,
    ) -> Result<Json<AccountSummary>, ApiError> {
        let view = code.view();
        let customer = code.customer()?;
        Ok(Json(summary(&view, customer)))
    }

    /// The customer's margin profile.
    ///
    /// 404 for an unknown customer; 502 PROFILE_NOT_PROVISIONED while the profile is not yet
    /// provisioned at the venue.
    #[oai(
        path = "/customers/:code/margin-profile",
        method = "get",
        operation_id = "getMarginProfile"
    )]
    async fn margin_profile(
        &self,
        _auth: Signed,
        code: customer::Path,
    ) -> Result<Json<MarginProfileRecord>, ApiError> {
        let customer = code.customer()?;
        if !customer.provisioned {
            return Err(Error::new(
                ErrorCode::ProfileNotProvisioned,
                "the margin profile is not yet provisioned at the exchange; retry later",
            )
            .into());
        }
        Ok(Json(profile_record(customer)))
    }

    /// Select the account-wide margin profile by leverage (applies to every instrument and
    /// open position). A no-op when already active; above max_leverage → 400.
    #[oai(
        path = "/customers/:code/margin-profile",
        method = "put",
        operation_id = "setMarginProfile"
    )]
    async fn set_margin_profile(
        &self,
        state: Data<&Arc<AppState>>,
        auth: Signed,
        code: customer::Path,
        body: Json<MarginProfileRequest>,
    ) -> Result<Json<MarginProfileRecord>, ApiError> {
        let customer = code.customer()?.code;
        let leverage = body.0.leverage.parse("leverage")?;
        let command = SetLeverage { customer, leverage };
        let updated = state.engine.submit(command, auth.admission()).await?;
        Ok(Json(profile_record(&updated)))
    }

    /// The customer's fees for every instrument.
    #[oai(
        path = "/customers/:code/fee-profile",
        method = "get",
        operation_id = "getFeeProfile"
    )]
    async fn fee_profile(
        &self,
        _auth: Signed,
        code: customer::Path,
    ) -> Result<Json<Vec<FeeProfileItem>>, ApiError> {
        let view = code.view();
        let customer = code.customer()?;
        Ok(Json(fee_list(&view, customer)))
    }

    /// Set maker and/or taker fees for every instrument.
    ///
    /// A negative maker_fee is a rebate, paid on each fill out of that fill's taker fee and
    /// never more than it (D7); a negative taker_fee is refused (400 VALIDATION_ERROR).
    #[oai(
        path = "/customers/:code/fee-profile",
        method = "put",
        operation_id = "setFeeProfile"
    )]
    async fn set_fee_profile(
        &self,
        state: Data<&Arc<AppState>>,
        auth: Signed,
        code: customer::Path,
        body: Json<FeeProfileRequest>,
    ) -> Result<Json<Vec<FeeProfileItem>>, ApiError> {
        let updated = self.set_fees(&state, auth, &code, None, body.0).await?;
        Ok(Json(fee_list(&state.engine.view(), &updated)))
    }

    /// The customer's fees for one instrument; unknown symbol → 404.
    #[oai(
        path = "/customers/:code/fee-profile/:symbol",
        method = "get",
        operation_id = "getInstrumentFeeProfile"
    )]
    async fn symbol_fee_profile(
        &self,
        _auth: Signed,
        code: customer::Path,
        symbol: Path<String>,
    ) -> Result<Json<FeeProfileItem>, ApiError> {
        let view = code.view();
        let customer = code.customer()?;
        if !view.instruments.contains_key(&symbol.0) {
            let message = format!("symbol {} does not exist", symbol.0);
            return Err(Error::not_found(message).into());
        }
        Ok(Json(fee_item(customer, &symbol.0)))
    }

    /// Set maker and/or taker fees for one instrument; unknown symbol → 404.
    ///
    /// A negative maker_fee is a rebate, paid on each fill out of that fill's taker fee and
    /// never more than it (D7); a negative taker_fee is refused (400 VALIDATION_ERROR).
    #[oai(
        path = "/customers/:code/fee-profile/:symbol",
        method = "put",
        operation_id = "setInstrumentFeeProfile"
    )]
    async fn set_symbol_fee_profile(
        &self,
        state: Data<&Arc<AppState>>,
        auth: Signed,
        code: customer::Path,
        symbol: Path<String>,
        body: Json<FeeProfileRequest>,
    ) -> Result<Json<FeeProfileItem>, ApiError> {
        let updated = self
            .set_fees(&state, auth, &code, Some(symbol.0.clone()), body.0)
            .await?;
        Ok(Json(fee_item(&updated, &symbol.0)))
    }
}

impl poem_openapi::types::Example for AccountSummary {
    fn example() -> Self {
        AccountSummary {
            total_equity: DecimalOut("100.2500000000".into()),
            available_margin: DecimalOut("100.2500000000".into()),
            used_margin: DecimalOut("0.0000000000".into()),
            unrealised_pnl: DecimalOut("0.0000000000".into()),
            margin_ratio: DecimalOut("0.0000".into()),
            leverage_ratio: DecimalOut("1.0000".into()),
            margin_state: "normal".into(),
            initial_margin_requirement: DecimalOut("1.00".into()),
            margin_call_threshold: DecimalOut("0.50".into()),
            liquidation_threshold: DecimalOut("0.30".into()),
            updated_at: Time("2026-01-01T00:00:01.000Z".into()),
        }
    }
}

impl poem_openapi::types::Example for MarginProfileRecord {
    fn example() -> Self {
        MarginProfileRecord {
            leverage: 2,
            initial_margin: DecimalOut("0.50".into()),
            maintenance_margin: DecimalOut("0.30".into()),
            liquidation_threshold: DecimalOut("0.20".into()),
            max_leverage: 2,
            instrument_margins: Vec::new(),
        }
    }
}

impl poem_openapi::types::Example for MarginProfileRequest {
    fn example() -> Self {
        MarginProfileRequest {
            leverage: LeverageIn::example_value(2),
        }
    }
}

impl poem_openapi::types::Example for FeeProfileItem {
    fn example() -> Self {
        FeeProfileItem {
            symbol: "BTC-USDC-PERP".into(),
            maker_fee: DecimalOut("-1.5".into()),
            taker_fee: DecimalOut("5".into()),
        }
    }
}
