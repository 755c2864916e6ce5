//! The checked-in documents under `openapi/` are exactly what the code generates, so client
//! developers generating SDKs from them get the API that runs.
//!
//! (This package having an integration test also makes `cargo test --workspace` build the
//! `perpsim` binary that the black-box tests in `tests/` start.)

use std::path::Path;

#[test]
fn checked_in_openapi_documents_equal_what_the_code_generates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../openapi");
    for (name, generated) in perpsim_api::server::docs::documents() {
        let path = dir.join(name);
        let on_disk =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            on_disk == generated,
            "openapi/{name} differs from the code; regenerate with `cargo run -p perpsim-api -- openapi`"
        );
    }
}

#[test]
fn the_broker_document_holds_no_admin_paths_and_the_admin_document_no_broker_paths() {
    let docs = perpsim_api::server::docs::documents();
    let paths = |name: &str| -> Vec<String> {
        let text = &docs.iter().find(|(n, _)| *n == name).unwrap().1;
        let doc: serde_json::Value = serde_json::from_str(text).unwrap();
        doc["paths"].as_object().unwrap().keys().cloned().collect()
    };
    assert!(paths("broker.json").iter().all(|p| p.starts_with("/v1/")));
    assert!(
        paths("admin.json")
            .iter()
            .all(|p| p.starts_with("/admin/v1/"))
    );
}

/// Issue 3 item 7: client developers get an example for every request body and every
/// success response of the broker API.
#[test]
fn every_broker_request_body_and_success_response_has_an_example() {
    let doc = perpsim_api::server::app::broker_document();
    let schemas = &doc["components"]["schemas"];
    let schema_name = |schema: &serde_json::Value| -> Option<String> {
        let r = schema
            .get("$ref")
            .or_else(|| schema.get("items").and_then(|i| i.get("$ref")))?;
        Some(r.as_str()?.rsplit('/').next()?.to_owned())
    };
    let mut missing = Vec::new();
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for (method, op) in ops.as_object().unwrap() {
            let bodies = op["responses"]
                .as_object()
                .unwrap()
                .iter()
                .filter(|(status, _)| status.starts_with('2'))
                .map(|(_, r)| r)
                .chain(op.get("requestBody"));
            for body in bodies {
                for media in body["content"]
                    .as_object()
                    .into_iter()
                    .flat_map(|c| c.values())
                {
                    if let Some(name) = schema_name(&media["schema"])
                        && schemas[&name].get("example").is_none()
                    {
                        missing.push(format!("{method} {path}: {name}"));
                    }
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "schemas without an example: {missing:?}"
    );
}

/// Every object schema reachable from `schema` (through `$ref`, `allOf`, `oneOf`, `items`
/// and properties), by name or by the path that reached it.
fn objects<'d>(
    doc: &'d serde_json::Value,
    schema: &'d serde_json::Value,
    at: String,
    out: &mut std::collections::BTreeMap<String, &'d serde_json::Value>,
) {
    if let Some(name) = schema["$ref"].as_str().and_then(|r| r.rsplit('/').next()) {
        if out.contains_key(name) {
            return;
        }
        let resolved = &doc["components"]["schemas"][name];
        return objects(doc, resolved, name.to_owned(), out);
    }
    if schema["properties"].is_object() {
        out.insert(at.clone(), schema);
        for (name, property) in schema["properties"].as_object().unwrap() {
            objects(doc, property, format!("{at}.{name}"), out);
        }
    }
    for key in ["allOf", "oneOf", "anyOf"] {
        for (i, sub) in schema[key].as_array().into_iter().flatten().enumerate() {
            objects(doc, sub, format!("{at}/{key}{i}"), out);
        }
    }
    if schema["items"].is_object() {
        objects(doc, &schema["items"], format!("{at}[]"), out);
    }
}

/// Issue 10 item 1: in every answer, a field is required exactly when it is always there;
/// the only ones that may be absent are those the service leaves out on purpose (D5:
/// `cash_amount` is present only on cash orders). Nullability is pinned against real answers
/// by `tests/tests/contract.rs`.
#[test]
fn every_response_field_is_required_unless_the_service_leaves_it_out() {
    const SOMETIMES_ABSENT: [&str; 1] = ["OrderRecord.cash_amount"];
    let doc = perpsim_api::server::app::broker_document();
    let mut reached = std::collections::BTreeMap::new();
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for (method, op) in ops.as_object().unwrap() {
            for (status, response) in op["responses"].as_object().unwrap() {
                for media in response["content"].as_object().into_iter().flatten() {
                    let at = format!("{method} {path} {status}");
                    objects(&doc, &media.1["schema"], at, &mut reached);
                }
            }
        }
    }
    assert!(reached.contains_key("OrderRecord") && reached.contains_key("ErrorBody"));
    let mut optional = Vec::new();
    for (name, schema) in &reached {
        let required = schema["required"].as_array().cloned().unwrap_or_default();
        for field in schema["properties"].as_object().unwrap().keys() {
            if !required.contains(&serde_json::Value::String(field.clone())) {
                optional.push(format!("{name}.{field}"));
            }
        }
    }
    assert_eq!(optional, SOMETIMES_ABSENT, "fields answers may leave out");
}

/// Issue 10 item 1: client generators cannot take `allOf` of an enum, and a nullable enum
/// must list `null` among its values (OpenAPI 3.0.3).
#[test]
fn no_enum_is_wrapped_in_all_of_and_every_nullable_enum_lists_null() {
    fn walk(doc: &serde_json::Value, value: &serde_json::Value, at: &str, bad: &mut Vec<String>) {
        if let Some(map) = value.as_object() {
            for part in map
                .get("allOf")
                .and_then(|a| a.as_array())
                .into_iter()
                .flatten()
            {
                let name = part["$ref"].as_str().and_then(|r| r.rsplit('/').next());
                if name.is_some_and(|n| doc["components"]["schemas"][n]["enum"].is_array()) {
                    bad.push(format!("{at}: allOf of enum {}", name.unwrap()));
                }
            }
            if map.get("nullable") == Some(&serde_json::Value::Bool(true))
                && let Some(values) = map.get("enum").and_then(|e| e.as_array())
                && !values.contains(&serde_json::Value::Null)
            {
                bad.push(format!("{at}: nullable enum without null"));
            }
            for (k, v) in map {
                walk(doc, v, &format!("{at}/{k}"), bad);
            }
        } else if let Some(items) = value.as_array() {
            for (i, v) in items.iter().enumerate() {
                walk(doc, v, &format!("{at}/{i}"), bad);
            }
        }
    }
    for doc in [
        perpsim_api::server::app::broker_document(),
        perpsim_api::server::app::admin_document(),
    ] {
        let mut bad = Vec::new();
        walk(&doc, &doc, "", &mut bad);
        assert!(bad.is_empty(), "{bad:?}");
    }
}

/// Issue 10 item 2: each broker operation lists exactly the errors it can answer, from one
/// table that must know every operation (an operation added without an entry fails here),
/// each error with an example body; and every operation requires D2's three headers.
#[test]
fn every_broker_operation_lists_its_own_errors_with_examples_and_the_three_signing_headers() {
    let doc = perpsim_api::server::app::broker_document();
    let schemes = doc["components"]["securitySchemes"].as_object().unwrap();
    let headers: Vec<&str> = schemes
        .values()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(headers, ["X-Nonce", "X-Public-Key", "X-Signature"]);
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for (method, op) in ops.as_object().unwrap() {
            let id = op["operationId"].as_str().unwrap();
            assert!(
                perpsim_api::contract::knows_errors_of(id),
                "{method} {path}: {id} is not in the error table"
            );
            assert_eq!(
                op["security"],
                serde_json::json!([{"PublicKey": [], "Nonce": [], "Signature": []}]),
                "{id}"
            );
            for (status, response) in op["responses"].as_object().unwrap() {
                if status.starts_with('2') {
                    continue;
                }
                for media in response["content"].as_object().unwrap().values() {
                    let example = &media["example"];
                    assert!(
                        example["code"].is_string() && example["message"].is_string(),
                        "{id} {status}: example error body"
                    );
                }
            }
        }
    }
}

/// The post-processing never leaves a `null` where the document expects a value (indexing a
/// missing key of a `serde_json::Value` mutably inserts one): nulls stand only among enum
/// values and in examples.
#[test]
fn the_documents_hold_no_null_outside_enums_and_examples() {
    fn walk(value: &serde_json::Value, at: &str, bad: &mut Vec<String>) {
        match value {
            serde_json::Value::Null => bad.push(at.to_owned()),
            serde_json::Value::Object(map) => {
                for (key, v) in map {
                    if !matches!(key.as_str(), "enum" | "example" | "examples" | "default") {
                        walk(v, &format!("{at}/{key}"), bad);
                    }
                }
            }
            serde_json::Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    walk(v, &format!("{at}/{i}"), bad);
                }
            }
            _ => {}
        }
    }
    for doc in [
        perpsim_api::server::app::broker_document(),
        perpsim_api::server::app::admin_document(),
    ] {
        let mut bad = Vec::new();
        walk(&doc, "", &mut bad);
        assert!(bad.is_empty(), "nulls at {bad:?}");
    }
}
