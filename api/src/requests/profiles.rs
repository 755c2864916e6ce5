//! A customer's fee profile (§2.8, D7): the body and the command it asks for.

use perpsim_core::decimal::Sign;
use perpsim_core::ids::CustomerCode;
use perpsim_core::money::MAX_FEE_BPS;
use perpsim_core::{Decimal, Error};
use poem_openapi::Object;

use crate::wire::NumberIn;
use perpsim_systems::command::SetFees;

/// At least one of maker_fee and taker_fee; each a decimal number of basis points.
#[derive(Object, Debug)]
#[oai(deny_unknown_fields, example)]
pub struct FeeProfileRequest {
    /// −10 000 to 10 000; negative is a rebate, capped on every fill at the taker fee that
    /// fill collected (D7).
    pub maker_fee: Option<NumberIn>,
    /// 0 to 10 000: a negative taker fee is refused (400 VALIDATION_ERROR naming taker_fee),
    /// so the venue's fees account never goes below zero through trading.
    pub taker_fee: Option<NumberIn>,
}

fn fee_value(
    field: &str,
    value: &Option<NumberIn>,
    rebate: bool,
) -> Result<Option<Decimal>, Error> {
    let Some(v) = value else { return Ok(None) };
    let bps = v.parse(field, Sign::Signed)?;
    if bps.abs() > Decimal::from(MAX_FEE_BPS) {
        return Err(Error::validation(format!(
            "{field} must be between -{MAX_FEE_BPS} and {MAX_FEE_BPS} basis points"
        )));
    }
    if !rebate && bps < Decimal::ZERO {
        return Err(Error::validation(format!(
            "{field} must not be negative: rebates are paid to makers out of the taker fee (D7)"
        )));
    }
    Ok(Some(bps))
}

/// The command a fee profile's body asks for (setFeeProfile and its per-instrument form; a
/// scenario customer's `fees`).
pub fn fees_command(
    customer: CustomerCode,
    symbol: Option<String>,
    body: &FeeProfileRequest,
) -> Result<SetFees, Error> {
    let maker_bps = fee_value("maker_fee", &body.maker_fee, true)?;
    let taker_bps = fee_value("taker_fee", &body.taker_fee, false)?;
    if maker_bps.is_none() && taker_bps.is_none() {
        return Err(Error::validation(
            "give at least one of maker_fee and taker_fee",
        ));
    }
    Ok(SetFees {
        customer,
        symbol,
        maker_bps,
        taker_bps,
    })
}

impl poem_openapi::types::Example for FeeProfileRequest {
    fn example() -> Self {
        FeeProfileRequest {
            maker_fee: Some(NumberIn::example_text("-1.5")),
            taker_fee: None,
        }
    }
}
