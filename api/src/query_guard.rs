//! Unsupported query parameters → 400 VALIDATION_ERROR naming them and the supported set (D4).
//!
//! The supported set of each operation is read from the generated OpenAPI document, so it is
//! exactly what the handlers declare and cannot drift from them.

use std::collections::{BTreeMap, BTreeSet};

use perpsim_core::Error;

struct Operation {
    method: String,
    segments: Vec<Option<String>>,
    allowed: BTreeSet<String>,
}

pub struct QueryGuard {
    operations: Vec<Operation>,
}

impl QueryGuard {
    /// Builds the guard from an OpenAPI document (JSON text).
    pub fn from_spec(spec: &str) -> Self {
        let doc: serde_json::Value = serde_json::from_str(spec).expect("generated spec is JSON");
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
                    .filter_map(|p| p["name"].as_str().map(str::to_owned))
                    .collect();
                operations.push(Operation {
                    method: method.to_ascii_uppercase(),
                    segments: segments.clone(),
                    allowed,
                });
            }
        }
        QueryGuard { operations }
    }

    /// Checks a request's query against its operation. Requests that match no operation pass:
    /// the router answers them (404 or 405).
    pub fn check(&self, method: &str, path: &str, query: Option<&str>) -> Result<(), Error> {
        let Some(query) = query.filter(|q| !q.is_empty()) else {
            return Ok(());
        };
        let parts: Vec<&str> = path.split('/').collect();
        let Some(op) = self.operations.iter().find(|op| {
            op.method == method
                && op.segments.len() == parts.len()
                && op
                    .segments
                    .iter()
                    .zip(&parts)
                    .all(|(s, p)| s.as_deref().is_none_or(|s| s == *p))
        }) else {
            return Ok(());
        };
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let name = pair.split_once('=').map_or(pair, |(n, _)| n);
            let name = percent_decode(name);
            *seen.entry(name).or_default() += 1;
        }
        let supported = || {
            if op.allowed.is_empty() {
                "this endpoint takes no query parameters".to_owned()
            } else {
                format!(
                    "supported: {}",
                    op.allowed.iter().cloned().collect::<Vec<_>>().join(", ")
                )
            }
        };
        let unknown: Vec<&str> = seen
            .keys()
            .filter(|n| !op.allowed.contains(*n))
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

    const SPEC: &str = r#"{"paths": {
        "/v1/instruments": {"get": {"parameters": [{"name": "symbol", "in": "query"}, {"name": "status", "in": "query"}]}},
        "/v1/customers/{code}/balances": {"get": {"parameters": [{"name": "code", "in": "path"}, {"name": "asset", "in": "query"}]}},
        "/v1/customers": {"post": {}}
    }}"#;

    #[test]
    fn supported_parameters_pass_and_others_are_named_with_the_supported_set() {
        let g = QueryGuard::from_spec(SPEC);
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
        let g = QueryGuard::from_spec(SPEC);
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
