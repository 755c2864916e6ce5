//! What the service checks of a request's parameters, stated in the document, so a client (or
//! a property-based fuzzer) knows which values are accepted before sending them. Each entry
//! names the check it mirrors; `tests/tests/contract.rs` sends the edges of each to the real
//! binary.

use serde_json::{Value, json};

use perpsim_core::decimal::{LEDGER_DECIMALS, MAX_INPUT_LEN};
use perpsim_core::entry::MAX_REFERENCE_ID;
use perpsim_core::filter::MAX_FILTER_LEN;
use perpsim_core::ids::MAX_EXTERNAL_ID;
use perpsim_core::money::{MAX_FEE_BPS, MAX_TRANSFER_INTEGER_DIGITS};
use perpsim_core::time::{MAX_QUERY_MILLIS_DIGITS, YEAR_10000_MS};

/// One alternative of a filter is anything but `|`; alternatives are joined by `|` (§4.1).
const FILTER_PATTERN: &str = r"^[^|]+(\|[^|]+)*$";

fn reference_id() -> Value {
    json!({"pattern": format!("^[a-zA-Z0-9_-]{{1,{MAX_REFERENCE_ID}}}$")})
}

/// A strictly positive decimal string below 10^12 with at most 10 decimals, written without
/// lookahead (not every regex engine has it): a nonzero integer part, or a zero one and a
/// fraction with a nonzero digit among its first 10.
fn positive_amount() -> String {
    let (int, dec) = (MAX_TRANSFER_INTEGER_DIGITS, LEDGER_DECIMALS);
    let fractions: Vec<String> = (0..dec)
        .map(|zeros| format!("0{{{zeros}}}[1-9][0-9]{{0,{}}}", dec - 1 - zeros))
        .collect();
    format!(
        r"^(0*[1-9][0-9]{{0,{}}}(\.[0-9]{{1,{dec}}})?|0+\.({}))$",
        int - 1,
        fractions.join("|")
    )
}

/// A strictly positive decimal string: a nonzero integer part, or a zero one and a nonzero
/// fraction.
fn positive_decimal() -> Value {
    json!({
        "pattern": r"^(0*[1-9][0-9]*(\.[0-9]+)?|0+\.[0-9]*[1-9][0-9]*)$",
        "maxLength": MAX_INPUT_LEN,
    })
}

/// A fee as a decimal string within ±10 000 basis points: fewer integer digits than the bound
/// has, or the bound itself; and no more decimals than always fit beside them in a decimal's
/// 28 digits (the service reads a few more where the value allows; the document promises the
/// part that always holds). A taker fee is never negative (D7: rebates are paid out of the
/// taker fee), though a signed zero is still zero.
fn fee_text(rebate: bool) -> Value {
    let below = MAX_FEE_BPS.to_string().len() - 1;
    assert_eq!(
        10_i64.pow(below as u32),
        MAX_FEE_BPS,
        "the pattern needs a power of ten"
    );
    let decimals = 28 - below;
    let magnitude = format!(
        r"0*([0-9]{{1,{below}}}(\.[0-9]{{1,{decimals}}})?|{MAX_FEE_BPS}(\.0{{1,{decimals}}})?)"
    );
    let pattern = match rebate {
        true => format!("^-?{magnitude}$"),
        false => format!(r"^(-0+(\.0{{1,{decimals}}})?|{magnitude})$"),
    };
    json!({"pattern": pattern, "maxLength": MAX_INPUT_LEN})
}

/// A fee as a JSON number within ±10 000 basis points (a taker fee: 0 to 10 000).
fn fee_number(rebate: bool) -> Value {
    let minimum = if rebate { -MAX_FEE_BPS } else { 0 };
    json!({"minimum": minimum, "maximum": MAX_FEE_BPS})
}

/// The schema facets of parameter `name` (in `location`) of operation `operation_id`.
fn facets(operation_id: &str, location: &str, name: &str) -> Option<Value> {
    Some(match (location, name) {
        // D4: 1 to 1000, default 100.
        ("query", "limit") => json!({"minimum": 1, "maximum": 1000}),
        // A cursor is never empty (an empty one is refused as malformed).
        ("query", "after" | "before") => json!({"minLength": 1}),
        // D8: these and no others; 60m is the same candle as 1h.
        ("query", "interval") => json!({"enum": ["1m", "5m", "15m", "1h", "60m", "4h", "1d"]}),
        // D7: the settlement currencies.
        ("query", "asset") => json!({"enum": ["USDC", "USDT"]}),
        // §2.2: the one notification type there is.
        ("query", "type") if operation_id == "listNotifications" => {
            json!({"enum": ["position_depreciation"]})
        }
        // D5: only `open` is supported.
        ("query", "status") if operation_id == "listOpenOrders" => json!({"enum": ["open"]}),
        // §4.1 filters: `|`-separated alternatives, none empty, `*` a wildcard.
        ("query", "symbol" | "underlying" | "quote_currency")
            if matches!(operation_id, "listInstruments" | "listTickers") =>
        {
            json!({"pattern": FILTER_PATTERN, "maxLength": MAX_FILTER_LEN})
        }
        // §4.2: RFC 3339 or milliseconds since the epoch (`Timestamp::parse_query_bound`).
        // Two disjoint typed branches: generators make them a two-variant type (progenitor
        // cannot take untyped branches, and a string with an anyOf becomes a struct).
        ("query", "from" | "to" | "created_from" | "created_to") => json!({"oneOf": [
            {"type": "string", "format": "date-time"},
            {"type": "string", "pattern": format!("^[0-9]{{1,{MAX_QUERY_MILLIS_DIGITS}}}$")},
        ]}),
        // §4.1 rule 2: milliseconds since the epoch, not negative, before 10000-01-01.
        ("query", "start" | "end") if operation_id == "listFundingRates" => json!({
            "type": "integer",
            "format": "int64",
            "minimum": 0,
            "maximum": YEAR_10000_MS - 1,
        }),
        // §8: at most 40 characters of [a-zA-Z0-9_-].
        ("path", "reference_id") => reference_id(),
        _ => return None,
    })
}

/// Merges every parameter's facets into its schema, and the body rules into their fields.
pub(super) fn constrain(doc: &mut Value) {
    constrain_parameters(doc);
    for (field, rule) in body_rules() {
        // `pointer_mut`, not indexing: indexing a missing key would insert a null (the admin
        // document has neither schema).
        let property = doc.pointer_mut(&format!("/components/schemas/{field}"));
        if let (Some(Value::Object(property)), Value::Object(add)) = (property, rule) {
            property.extend(add);
        }
    }
}

/// Every parameter's facets, merged into its schema.
fn constrain_parameters(doc: &mut Value) {
    for op in super::operations_mut(doc) {
        let id = op["operationId"].as_str().unwrap_or_default().to_owned();
        let parameters = op.get_mut("parameters").and_then(Value::as_array_mut);
        for parameter in parameters.into_iter().flatten() {
            let location = parameter["in"].as_str().unwrap_or_default().to_owned();
            let name = parameter["name"].as_str().unwrap_or_default().to_owned();
            if let (Some(Value::Object(add)), Some(schema)) = (
                facets(&id, &location, &name),
                parameter["schema"].as_object_mut(),
            ) {
                if add.contains_key("oneOf") {
                    schema.remove("type"); // the branches carry it
                }
                schema.extend(add);
            }
        }
    }
}

/// The rules of the request bodies' fields, each merged into the schema at its pointer
/// under components/schemas.
fn body_rules() -> [(&'static str, Value); 19] {
    [
        ("OrderRequest/properties/reference_id", reference_id()),
        // `validate_external_id`: 1 to 64 characters, none a control character (Unicode Cc).
        (
            "CreateCustomerRequest/properties/external_id",
            json!({
                "minLength": 1,
                "maxLength": MAX_EXTERNAL_ID,
                "pattern": "^[^\\u0000-\\u001f\\u007f-\\u009f]*$",
            }),
        ),
        // D7: the settlement currencies.
        (
            "TransferRequest/properties/asset",
            json!({"enum": ["USDC", "USDT"]}),
        ),
        // `check_transfer_amount`: strictly positive, below 10^12, at most 10 decimals.
        (
            "TransferRequest/properties/amount",
            json!({"pattern": positive_amount(), "maxLength": MAX_INPUT_LEN}),
        ),
        // §4.3: quantities and prices are strictly positive (their grids and the venue
        // maximum are the instrument's, stated in the operation).
        ("OrderRequest/properties/amount", positive_decimal()),
        ("OrderRequest/properties/limit_price", positive_decimal()),
        ("OrderRequest/properties/trigger_price", positive_decimal()),
        (
            "OrderRequest/properties/take_profit_price",
            positive_decimal(),
        ),
        (
            "OrderRequest/properties/stop_loss_price",
            positive_decimal(),
        ),
        (
            "OrderRequest/properties/cash_amount/oneOf/0",
            positive_decimal(),
        ),
        (
            "OrderRequest/properties/cash_amount/oneOf/1",
            json!({"minimum": 0, "exclusiveMinimum": true}),
        ),
        ("AmendRequest/properties/amount", positive_decimal()),
        ("AmendRequest/properties/limit_price", positive_decimal()),
        ("AmendRequest/properties/trigger_price", positive_decimal()),
        // `set_fees`: at least one of the two, each within ±10 000 basis points, the taker
        // fee not negative (D7).
        ("FeeProfileRequest", json!({"minProperties": 1})),
        (
            "FeeProfileRequest/properties/maker_fee/oneOf/0",
            fee_text(true),
        ),
        (
            "FeeProfileRequest/properties/maker_fee/oneOf/1",
            fee_number(true),
        ),
        (
            "FeeProfileRequest/properties/taker_fee/oneOf/0",
            fee_text(false),
        ),
        (
            "FeeProfileRequest/properties/taker_fee/oneOf/1",
            fee_number(false),
        ),
    ]
}
