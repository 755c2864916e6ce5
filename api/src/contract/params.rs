//! What the service checks of a request's parameters, stated in the document, so a client (or
//! a property-based fuzzer) knows which values are accepted before sending them. Each entry
//! names the check it mirrors; `tests/tests/contract.rs` sends the edges of each to the real
//! binary.

use serde_json::{Value, json};

use perpsim_core::entry::MAX_REFERENCE_ID;
use perpsim_core::filter::MAX_FILTER_LEN;

/// One alternative of a filter is anything but `|`; alternatives are joined by `|` (§4.1).
const FILTER_PATTERN: &str = r"^[^|]+(\|[^|]+)*$";

fn reference_id() -> Value {
    json!({"pattern": format!("^[a-zA-Z0-9_-]{{1,{MAX_REFERENCE_ID}}}$")})
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
        // D5: only `open` is supported.
        ("query", "status") if operation_id == "listOpenOrders" => json!({"enum": ["open"]}),
        // §4.1 filters: `|`-separated alternatives, none empty, `*` a wildcard.
        ("query", "symbol" | "underlying" | "quote_currency")
            if matches!(operation_id, "listInstruments" | "listTickers") =>
        {
            json!({"pattern": FILTER_PATTERN, "maxLength": MAX_FILTER_LEN})
        }
        // §8: at most 40 characters of [a-zA-Z0-9_-].
        ("path", "reference_id") => reference_id(),
        _ => return None,
    })
}

/// Merges every parameter's facets into its schema, and the reference_id rule into the order
/// entry body.
pub(super) fn constrain(doc: &mut Value) {
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
                schema.extend(add);
            }
        }
    }
    // `pointer_mut`, not indexing: indexing a missing key would insert a null (the admin
    // document has no OrderRequest).
    let entry = doc.pointer_mut("/components/schemas/OrderRequest/properties/reference_id");
    if let (Some(Value::Object(property)), Value::Object(add)) = (entry, reference_id()) {
        property.extend(add);
    }
}
