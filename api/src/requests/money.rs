//! Deposits and withdrawals (D7): the body, the settlement asset it names, and the command
//! it asks for.

use perpsim_core::Error;
use perpsim_core::decimal::Sign;
use perpsim_core::ids::CustomerCode;
use perpsim_core::instrument::Asset;
use perpsim_core::money::check_transfer_amount;
use perpsim_systems::command::TransferKind;
use poem_openapi::Object;

use crate::contract::Text;
use crate::wire::DecimalIn;
use perpsim_systems::command::RequestTransfer;

/// Body of a deposit or withdrawal (D7).
#[derive(Object, Debug)]
#[oai(deny_unknown_fields, example)]
pub struct TransferRequest {
    /// `USDC` or `USDT`.
    pub asset: Text,
    /// Strictly positive, below 10^12, at most 10 decimals, as a decimal string.
    pub amount: DecimalIn,
}

/// A settlement asset named in a body or a query, refused naming its field.
pub fn asset(field: &str, text: &str) -> Result<Asset, Error> {
    Asset::parse(text).ok_or_else(|| {
        Error::validation(format!("{field} must be one of USDC, USDT, got {text:?}"))
    })
}

/// The command a deposit's or withdrawal's body asks for (createDeposit, createWithdrawal;
/// a scenario's `deposit` and `withdrawal` events), pending for `delay_ms`.
pub fn transfer_command(
    customer: CustomerCode,
    kind: TransferKind,
    body: &TransferRequest,
    delay_ms: i64,
) -> Result<RequestTransfer, Error> {
    Ok(RequestTransfer {
        customer,
        kind,
        asset: asset("asset", &body.asset)?,
        amount: check_transfer_amount("amount", body.amount.parse("amount", Sign::Signed)?)?,
        delay_ms,
    })
}

impl poem_openapi::types::Example for TransferRequest {
    fn example() -> Self {
        TransferRequest {
            asset: "USDC".into(),
            amount: DecimalIn::example_text("100.25"),
        }
    }
}
