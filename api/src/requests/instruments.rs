//! An instrument's prices, preliminary funding rate and status, as an operator or a scenario
//! sets them (D3, D11): the bodies and the commands they ask for.

use perpsim_core::decimal::Sign;
use perpsim_core::{Decimal, Error};
use perpsim_systems::records::funding::MAX_RATE_DECIMALS;
use poem_openapi::Object;

use crate::types::InstrumentStatusApi;
use crate::wire::DecimalIn;
use perpsim_systems::command::{SetFundingRate, SetInstrumentPrice, SetInstrumentStatus};

#[derive(Object, Debug)]
#[oai(deny_unknown_fields)]
pub struct PriceRequest {
    /// Positive decimal string below 1000000000000, at most 10 decimals.
    pub index_price: DecimalIn,
    /// As index_price; defaults to it.
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

/// Prices an operator or a scenario may set: below a trillion, with at most 10 decimals,
/// so that no valuation, margin or funding figure built on them can overflow a decimal.
pub const MAX_PRICE_DIGITS: u32 = 12;
pub const MAX_PRICE_DECIMALS: u32 = 10;

fn positive_price(field: &str, input: &DecimalIn) -> Result<Decimal, Error> {
    checked_price(field, input.parse(field, Sign::Unsigned)?)
}

/// `v` if it is a price the venue takes as an index or mark (recorded data is checked so).
pub fn checked_price(field: &str, v: Decimal) -> Result<Decimal, Error> {
    let below = Decimal::from(10i64.pow(MAX_PRICE_DIGITS));
    if v <= Decimal::ZERO || v >= below || v.normalize().scale() > MAX_PRICE_DECIMALS {
        return Err(Error::validation(format!(
            "{field} must be greater than zero and below {below}, with at most \
             {MAX_PRICE_DECIMALS} decimals"
        )));
    }
    Ok(v)
}

/// The command a price body asks for (setInstrumentPrice; a scenario's `price` event).
pub fn price_command(symbol: String, body: &PriceRequest) -> Result<SetInstrumentPrice, Error> {
    let index_price = positive_price("index_price", &body.index_price)?;
    let mark_price = match &body.mark_price {
        Some(m) => positive_price("mark_price", m)?,
        None => index_price,
    };
    Ok(SetInstrumentPrice {
        symbol,
        index_price,
        mark_price,
    })
}

/// The command a funding body asks for (setFundingRate; a scenario's `funding` event).
pub fn funding_command(symbol: String, body: &FundingRequest) -> Result<SetFundingRate, Error> {
    let rate = body
        .preliminary_rate
        .parse("preliminary_rate", Sign::Signed)?;
    checked_rate(rate).map(|rate| SetFundingRate { symbol, rate })
}

/// `rate` if it is a preliminary funding rate the venue takes (recorded data is checked so).
pub fn checked_rate(rate: Decimal) -> Result<Decimal, Error> {
    if rate.scale() > MAX_RATE_DECIMALS || rate.abs() >= Decimal::ONE {
        return Err(Error::validation(format!(
            "preliminary_rate must be below 1 in absolute value with at most {MAX_RATE_DECIMALS} decimals, got {rate}"
        )));
    }
    Ok(rate)
}

/// The command a status body asks for (setInstrumentStatus; a scenario's `status` event).
pub fn status_command(symbol: String, body: &StatusRequest) -> SetInstrumentStatus {
    SetInstrumentStatus {
        symbol,
        status: body.status.into(),
    }
}
