//! What the OpenAPI document declares about a request, enforced before any handler runs:
//! - unsupported query parameters → 400 VALIDATION_ERROR naming them and the supported set
//!   (D4);
//! - a body that breaks its schema → 400 VALIDATION_ERROR naming the field as the document
//!   does, what it takes and what it got (`{"external_id": false}` is refused, not stored as
//!   `"false"`; `"side": "long"` lists buy and sell), see `contract::schema_check`;
//! - the methods of a path, for the `Allow` header of a 405.
//!
//! Everything is read from the document the service serves, so it is exactly what the
//! handlers declare and cannot drift from them.

use std::collections::{BTreeMap, BTreeSet};

use perpsim_core::Error;
use serde_json::Value;

use crate::contract::schema_check;

struct Operation {
    method: String,
    /// The path as the document writes it (`/v1/customers/{customer_code}`).
    template: String,
    segments: Vec<Option<String>>,
    /// Query parameters with their schemas.
    allowed: BTreeMap<String, Value>,
    /// The body's schema (a `$ref` into the components), for operations that take one.
    body: Option<Value>,
}

impl Operation {
    fn matches(&self, parts: &[&str]) -> bool {
        self.segments.len() == parts.len()
            && self
                .segments
                .iter()
                .zip(parts)
                .all(|(s, p)| s.as_deref().is_none_or(|s| s == *p))
    }
}

pub struct RequestGuard {
    operations: Vec<Operation>,
    /// The document's `components.schemas`, which body schemas refer to.
    schemas: Value,
}

/// The schema of an operation's JSON body, if it takes one.
fn body_schema(op: &Value) -> Option<Value> {
    let content = op["requestBody"]["content"].as_object()?;
    content.values().next().map(|media| media["schema"].clone())
}

impl RequestGuard {
    /// Builds the guard from the OpenAPI document the service serves.
    pub fn from_document(doc: &Value) -> Self {
        let mut operations = Vec::new();
        let paths = doc["paths"].as_object().expect("spec has paths");
        for (path, item) in paths {
            let segments = path
                .split('/')
                .map(|s| (!(s.starts_with('{') && s.ends_with('}'))).then(|| s.to_owned()))
                .collect::<Vec<_>>();
            for (method, op) in item.as_object().expect("path item is an object") {
                let allowed = op["parameters"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|p| p["in"] == "query")
                    .filter_map(|p| Some((p["name"].as_str()?.to_owned(), p["schema"].clone())))
                    .collect();
                operations.push(Operation {
                    method: method.to_ascii_uppercase(),
                    template: path.clone(),
                    segments: segments.clone(),
                    allowed,
                    body: body_schema(op),
                });
            }
        }
        RequestGuard {
            operations,
            schemas: doc["components"]["schemas"].clone(),
        }
    }

    /// Holds a JSON body to its operation's schema: the first field of a wrong JSON type,
    /// outside an enum, unknown or missing is refused naming it as the document does
    /// (`contract::schema_check`). A body that is not JSON at all is left to the operation's parser.
    pub fn check_body(&self, method: &str, path: &str, body: &[u8]) -> Result<(), Error> {
        if body.is_empty() {
            return Ok(());
        }
        let Some(schema) = self.operation(method, path).and_then(|op| op.body.as_ref()) else {
            return Ok(());
        };
        let Ok(value) = serde_json::from_slice::<Value>(body) else {
            return Ok(());
        };
        match schema_check::diagnose(&value, schema, &self.schemas) {
            Some(why) => Err(Error::validation(why)),
            None => Ok(()),
        }
    }

    /// The operation `method path` names, if the document declares it.
    fn operation(&self, method: &str, path: &str) -> Option<&Operation> {
        let parts: Vec<&str> = path.split('/').collect();
        self.operations
            .iter()
            .find(|op| op.method == method && op.matches(&parts))
    }

    /// The document's path template of the operation `method path` names.
    pub fn route(&self, method: &str, path: &str) -> Option<&str> {
        self.operation(method, path).map(|op| op.template.as_str())
    }

    /// The methods the document declares for `path` (upper case, sorted): what a 405 lists
    /// in its `Allow` header.
    pub fn methods(&self, path: &str) -> BTreeSet<String> {
        let parts: Vec<&str> = path.split('/').collect();
        self.operations
            .iter()
            .filter(|op| op.matches(&parts))
            .map(|op| op.method.clone())
            .collect()
    }

    /// Checks a request's query against its operation. Requests that match no operation pass:
    /// the router answers them (404 or 405).
    pub fn check(&self, method: &str, path: &str, query: Option<&str>) -> Result<(), Error> {
        let Some(query) = query.filter(|q| !q.is_empty()) else {
            return Ok(());
        };
        let Some(op) = self.operation(method, path) else {
            return Ok(());
        };
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        let mut values = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let name = percent_decode(name);
            *seen.entry(name.clone()).or_default() += 1;
            values.push((name, percent_decode(value)));
        }
        let supported = || {
            if op.allowed.is_empty() {
                "this endpoint takes no query parameters".to_owned()
            } else {
                let names: Vec<&str> = op.allowed.keys().map(String::as_str).collect();
                format!("supported: {}", names.join(", "))
            }
        };
        let unknown: Vec<&str> = seen
            .keys()
            .filter(|n| !op.allowed.contains_key(*n))
            .map(String::as_str)
            .collect();
        if !unknown.is_empty() {
            return Err(Error::validation(format!(
                "unsupported query parameter {} ({})",
                unknown.join(", "),
                supported()
            )));
        }
        if let Some((name, _)) = seen.iter().find(|(_, n)| **n > 1) {
            return Err(Error::validation(format!(
                "query parameter {name} is given more than once"
            )));
        }
        for (name, value) in &values {
            let schema = schema_check::resolved(&op.allowed[name], &self.schemas);
            if let Some(why) = schema_check::query_value(name, value, schema) {
                return Err(Error::validation(why));
            }
        }
        Ok(())
    }
}

/// Decodes `%XX` and `+` in a query parameter name; invalid escapes are kept as text (the
/// name is then simply unsupported).
fn percent_decode(text: &str) -> String {
    let hex = |b: u8| (b as char).to_digit(16);
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(hi), Some(lo)) => Some((hi * 16 + lo) as u8),
            _ => None,
        };
        match (escaped, bytes[i]) {
            (Some(b), _) => {
                out.push(b);
                i += 3;
            }
            (None, b'+') => {
                out.push(b' ');
                i += 1;
            }
            (None, b) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: &str = r##"{"paths": {
        "/v1/instruments": {"get": {"parameters": [{"name": "symbol", "in": "query"}, {"name": "status", "in": "query"}]}},
        "/v1/customers/{code}/balances": {"get": {"parameters": [{"name": "code", "in": "path"}, {"name": "asset", "in": "query"}]}},
        "/v1/customers": {"post": {"requestBody": {"content": {"application/json; charset=utf-8":
            {"schema": {"$ref": "#/components/schemas/Req"}}}}}}
    }, "components": {"schemas": {
        "Req": {"type": "object", "properties": {
            "external_id": {"type": "string", "nullable": true},
            "tif": {"type": "string", "enum": ["IOC", "GTC"]},
            "leverage": {"oneOf": [{"type": "integer"}, {"type": "string"}]},
            "cash": {"oneOf": [{"type": "string"}, {"type": "number"}]}
        }}
    }}}"##;

    /// D11, D4: scenario replay holds an event's body to the schema the served documents
    /// give that body, so its refusals are the API's: every body type's schema as replay
    /// derives it equals the broker's or the admin document's.
    #[test]
    fn replay_reads_bodies_against_the_served_documents_schemas() {
        let derived = crate::contract::request_schemas(&crate::replay::schema::bodies());
        let broker = super::super::app::broker_document();
        let admin = super::super::app::admin_document();
        let served = |name: &str| {
            [&broker, &admin]
                .into_iter()
                .map(|doc| &doc["components"]["schemas"][name])
                .find(|schema| !schema.is_null())
                .unwrap_or_else(|| panic!("{name} is in neither document"))
                .clone()
        };
        let bodies = [
            "OrderRequest",
            "AmendRequest",
            "PriceRequest",
            "FundingRequest",
            "StatusRequest",
            "TransferRequest",
            "FeeProfileRequest",
        ];
        for name in bodies {
            assert_eq!(derived[name], served(name), "{name}");
        }
    }

    fn guard() -> RequestGuard {
        RequestGuard::from_document(&serde_json::from_str(SPEC).unwrap())
    }

    #[test]
    fn body_fields_of_the_wrong_json_type_are_named_and_declared_unions_pass() {
        let g = guard();
        let check = |body: &str| g.check_body("POST", "/v1/customers", body.as_bytes());
        for ok in [
            r#"{"external_id": "crm-1"}"#,
            r#"{"external_id": null}"#,
            r#"{"leverage": 2, "cash": 10.5}"#,
            r#"{"leverage": "2", "cash": "10.5", "tif": "IOC"}"#,
            r#"{"unknown": 1}"#,
            "not json",
            "",
        ] {
            assert!(check(ok).is_ok(), "{ok}");
        }
        for (bad, message) in [
            (
                r#"{"external_id": false}"#,
                "external_id must be a JSON null or string, got a boolean",
            ),
            (r#"{"tif": 1}"#, "tif must be a JSON string, got a number"),
            (
                r#"{"leverage": 1.5}"#,
                "leverage must be a JSON integer or string, got a number",
            ),
            (
                r#"{"cash": []}"#,
                "cash must be a JSON number or string, got an array",
            ),
        ] {
            assert_eq!(check(bad).unwrap_err().message, message, "{bad}");
        }
    }

    #[test]
    fn the_methods_of_a_path_are_those_the_document_declares() {
        let g = guard();
        assert_eq!(
            g.methods("/v1/customers/abc/balances"),
            BTreeSet::from(["GET".to_owned()])
        );
        assert!(g.methods("/v1/nowhere").is_empty());
    }

    #[test]
    fn supported_parameters_pass_and_others_are_named_with_the_supported_set() {
        let g = guard();
        assert!(
            g.check("GET", "/v1/instruments", Some("symbol=BTC*&status=active"))
                .is_ok()
        );
        let e = g
            .check("GET", "/v1/instruments", Some("symbol=x&foo=1"))
            .unwrap_err();
        assert_eq!(
            e.message,
            "unsupported query parameter foo (supported: status, symbol)"
        );
        assert!(
            g.check("GET", "/v1/customers/abc/balances", Some("asset=USDC"))
                .is_ok()
        );
        assert!(
            g.check("GET", "/v1/customers/abc/balances", Some("code=1"))
                .is_err(),
            "path params are not query params"
        );
        let e = g.check("POST", "/v1/customers", Some("x=1")).unwrap_err();
        assert!(e.message.contains("takes no query parameters"));
    }

    #[test]
    fn repeated_and_encoded_names_are_caught_and_unknown_routes_pass() {
        let g = guard();
        assert!(
            g.check("GET", "/v1/instruments", Some("symbol=a&symbol=b"))
                .unwrap_err()
                .message
                .contains("more than once")
        );
        assert!(
            g.check("GET", "/v1/instruments", Some("sym%62ol=a"))
                .is_ok()
        );
        assert!(g.check("GET", "/v1/nowhere", Some("a=1")).is_ok());
        assert!(g.check("GET", "/v1/instruments", Some("%zz=1")).is_err());
    }
}
