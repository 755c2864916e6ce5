//! Which error statuses and codes each broker operation can answer (§7, D4), in one table, and
//! the document rewritten to list exactly those, each with an example body.
//!
//! Every signed operation can answer 400 VALIDATION_ERROR (a malformed request, an unsupported
//! query parameter, a body field of the wrong type), 401 UNAUTHORIZED (D2), 413
//! PAYLOAD_TOO_LARGE (a body over 64 KiB, whatever the method), 429 RATE_LIMITED (the key's
//! rate or nonce memory), 500 EXCHANGE_ERROR (the engine stopped; nothing was confirmed) and
//! 503 EXCHANGE_ERROR (past the connection bound, before the request is read). The table adds
//! what each operation adds.

use serde_json::{Value, json};

/// What one operation adds to the errors every operation can answer.
#[derive(Debug, Clone, Copy, Default)]
struct Extra {
    /// 400 codes beyond VALIDATION_ERROR.
    bad_request: &'static [&'static str],
    /// 404 NOT_FOUND: an unknown or foreign customer, symbol, order, position or trade.
    not_found: bool,
    /// 409 codes.
    conflict: &'static [&'static str],
    /// 502 PROFILE_NOT_PROVISIONED.
    not_provisioned: bool,
}

const FOUND: Extra = Extra {
    bad_request: &[],
    not_found: true,
    conflict: &[],
    not_provisioned: false,
};

/// The table: `None` for an operation this module does not know, which a test forbids for
/// every broker operation.
fn extra(operation_id: &str) -> Option<Extra> {
    Some(match operation_id {
        "createCustomer" | "listCustomers" | "listInstruments" | "listTickers" => Extra::default(),
        "createOrder" => Extra {
            bad_request: &["ORDER_REJECTED", "INSUFFICIENT_FUNDS"],
            conflict: &["DUPLICATE_REFERENCE_ID"],
            ..FOUND
        },
        "amendOrder" => Extra {
            bad_request: &["ORDER_REJECTED", "INSUFFICIENT_FUNDS"],
            conflict: &["ORDER_NOT_AMENDABLE"],
            ..FOUND
        },
        "cancelOrder" => Extra {
            conflict: &["ORDER_NOT_CANCELLABLE"],
            ..FOUND
        },
        "createWithdrawal" => Extra {
            bad_request: &["INSUFFICIENT_FUNDS"],
            ..FOUND
        },
        "getMarginProfile" => Extra {
            not_provisioned: true,
            ..FOUND
        },
        "getCustomer"
        | "listMarketTrades"
        | "getTicker"
        | "listOhlc"
        | "createDeposit"
        | "listBalances"
        | "listTransactions"
        | "listCustomerTransactions"
        | "listOpenOrders"
        | "getOrder"
        | "listPositions"
        | "getPosition"
        | "getAccountSummary"
        | "setMarginProfile"
        | "getFeeProfile"
        | "setFeeProfile"
        | "setInstrumentFeeProfile"
        | "getInstrumentFeeProfile"
        | "listCustomerTrades"
        | "getCustomerTrade"
        | "listTrades"
        | "listFundingRates"
        | "getFundingRate"
        | "listNotifications" => FOUND,
        _ => return None,
    })
}

/// (status, description, example body) of every error `operation_id` can answer.
fn answers(operation_id: &str, extra: Extra) -> Vec<(u16, String, Value)> {
    let mut out = Vec::new();
    let mut bad = vec!["VALIDATION_ERROR"];
    bad.extend(extra.bad_request);
    out.push((
        400,
        format!(
            "{}: the request is malformed or breaks a rule; the message names the field.",
            bad.join(", ")
        ),
        json!({"code": "VALIDATION_ERROR", "message": "unsupported query parameter page (supported: after, before, limit)"}),
    ));
    out.push((
        401,
        "UNAUTHORIZED: missing header, unknown key, bad signature, or nonce malformed, too \
         old, too far ahead or reused (D2)."
            .into(),
        json!({"code": "UNAUTHORIZED", "message": "nonce reused: this public key has already used it"}),
    ));
    if extra.not_found {
        out.push((
            404,
            "NOT_FOUND: an unknown resource, or one of another broker's customers.".into(),
            json!({"code": "NOT_FOUND", "message": "customer 5b0b5d2e-8a7e-4b8e-9c59-2f0e6f9b1a11 does not exist"}),
        ));
    }
    if let Some(first) = extra.conflict.first() {
        out.push((
            409,
            format!(
                "{}: the order is not in a state that allows this.",
                extra.conflict.join(", ")
            ),
            json!({"code": first, "message": "order my-order-1 is filled"}),
        ));
    }
    out.push((
        413,
        "PAYLOAD_TOO_LARGE: the body is over 64 KiB.".into(),
        json!({"code": "PAYLOAD_TOO_LARGE", "message": "request body is larger than 65536 bytes"}),
    ));
    out.push((
        429,
        "RATE_LIMITED: over the key's rate, or its nonce memory is full; see Retry-After.".into(),
        json!({"code": "RATE_LIMITED", "message": "rate limit exceeded; retry later"}),
    ));
    out.push((
        500,
        "EXCHANGE_ERROR: the engine stopped; nothing of the request was confirmed.".into(),
        json!({"code": "EXCHANGE_ERROR", "message": "the engine has stopped; nothing of this request was confirmed"}),
    ));
    if extra.not_provisioned {
        out.push((
            502,
            "PROFILE_NOT_PROVISIONED: the margin profile is not yet provisioned at the exchange."
                .into(),
            json!({"code": "PROFILE_NOT_PROVISIONED", "message": "the margin profile is not yet provisioned at the exchange; retry later"}),
        ));
    }
    out.push((
        503,
        unavailable(operation_id).into(),
        json!({"code": "EXCHANGE_ERROR", "message": "too many open connections (--max-connections 4096); retry later"}),
    ));
    out
}

/// What a 503 of `operation_id` means: besides the connection bound, transfers switched off
/// or the fault plan's share of order entries.
fn unavailable(operation_id: &str) -> &'static str {
    match operation_id {
        "createDeposit" | "createWithdrawal" => {
            "EXCHANGE_ERROR: deposits and withdrawals are temporarily unavailable (nothing was \
             sent on), or too many connections are open; retry later."
        }
        "createOrder" => {
            "EXCHANGE_ERROR: the exchange is temporarily unavailable (the share of order entries \
             an operator's fault plan refuses; nothing was placed), or too many connections are \
             open; retry later."
        }
        _ => "EXCHANGE_ERROR: too many connections are open; retry later.",
    }
}

/// Rewrites each known operation's error responses to exactly its table entry. The schema,
/// media type and headers poem-openapi declared are kept; description and example are set.
pub(super) fn narrow(doc: &mut Value) {
    for op in super::operations_mut(doc) {
        let Some(id) = op["operationId"].as_str().map(str::to_owned) else {
            continue;
        };
        let Some(extra) = extra(&id) else {
            continue;
        };
        let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) else {
            continue;
        };
        let template = responses
            .iter()
            .find(|(status, _)| status.starts_with(['4', '5']))
            .map(|(_, r)| r.clone());
        responses.retain(|status, _| status.starts_with('2'));
        let Some(template) = template else {
            continue;
        };
        for (status, description, example) in answers(&id, extra) {
            let mut response = op_response(&template, status);
            response["description"] = Value::String(description);
            let content = response.get_mut("content").and_then(Value::as_object_mut);
            for media in content.into_iter().flatten() {
                media.1["example"] = example.clone();
            }
            responses.insert(status.to_string(), response);
        }
    }
}

/// A response of `status` shaped like `template` (the error body), with `Retry-After` where
/// the status carries it.
fn op_response(template: &Value, status: u16) -> Value {
    let mut response = template.clone();
    let Some(map) = response.as_object_mut() else {
        return response;
    };
    map.remove("headers");
    if status == 429 {
        map.insert(
            "headers".into(),
            json!({"Retry-After": {
                "description": "Seconds after which a retry will be admitted.",
                "required": true,
                "schema": {"type": "integer", "format": "uint64"}
            }}),
        );
    }
    response
}

/// Whether the table knows `operation_id` (every broker operation must be known).
pub fn known(operation_id: &str) -> bool {
    extra(operation_id).is_some()
}
