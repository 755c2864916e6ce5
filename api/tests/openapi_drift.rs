//! The checked-in documents under `openapi/` are exactly what the code generates, so client
//! developers generating SDKs from them get the API that runs.
//!
//! (This package having an integration test also makes `cargo test --workspace` build the
//! `perpsim` binary that the black-box tests in `tests/` start.)

use std::path::Path;

#[test]
fn checked_in_openapi_documents_equal_what_the_code_generates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../openapi");
    for (name, generated) in perpsim_api::docs::documents() {
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
    let docs = perpsim_api::docs::documents();
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
    let doc: serde_json::Value =
        serde_json::from_str(&perpsim_api::app::broker_service().spec()).unwrap();
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
