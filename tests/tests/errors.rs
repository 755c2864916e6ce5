//! D4: the error body `{"code","message"}` on every error path, unknown fields and query
//! parameters refused by name, the 64 KiB body limit.

use perpsim_tests::{Server, raw};
use serde_json::json;

#[test]
fn malformed_json_and_unknown_body_fields_are_400_naming_the_problem() {
    let server = Server::start(&[]);
    let c = server.demo();
    let r = c.send_with_nonce(
        "POST",
        "/v1/customers",
        b"{not json",
        &perpsim_tests::now_ns().to_string(),
    );
    r.assert_error(400, "VALIDATION_ERROR");
    let r = c.send(
        "POST",
        "/v1/customers",
        Some(json!({"external_id": "a", "stop_price": "1"})),
    );
    assert!(
        r.assert_error(400, "VALIDATION_ERROR")
            .contains("stop_price"),
        "a removed field is never ignored"
    );
}

#[test]
fn unsupported_query_parameters_are_400_naming_them_and_the_supported_set() {
    let server = Server::start(&[]);
    let msg = server
        .demo()
        .send("GET", "/v1/customers?limit=5&page=2", None)
        .assert_error(400, "VALIDATION_ERROR");
    assert_eq!(
        msg,
        "unsupported query parameter page (supported: after, before, limit)"
    );
    let msg = server
        .admin("GET", "/admin/v1/clock?verbose=1", None)
        .assert_error(400, "VALIDATION_ERROR");
    assert!(msg.contains("verbose"), "{msg}");
}

#[test]
fn unknown_routes_are_404_and_wrong_methods_405_in_the_error_shape() {
    let server = Server::start(&[]);
    let c = server.demo();
    c.send("GET", "/v1/no-such-thing", None)
        .assert_error(404, "NOT_FOUND");
    raw("GET", &format!("{}/nowhere", server.url), &[], b"").assert_error(404, "NOT_FOUND");
    c.send("DELETE", "/v1/instruments", None)
        .assert_error(405, "METHOD_NOT_ALLOWED");
    server
        .admin("DELETE", "/admin/v1/clock", None)
        .assert_error(405, "METHOD_NOT_ALLOWED");
}

#[test]
fn bodies_over_64_kib_are_413_before_any_other_check() {
    let server = Server::start(&[]);
    let big = format!("{{\"external_id\":\"{}\"}}", "a".repeat(64 * 1024));
    // Unsigned: the size is refused before the signature is even looked at.
    let r = raw(
        "POST",
        &format!("{}/v1/customers", server.url),
        &[("Content-Type", "application/json")],
        big.as_bytes(),
    );
    r.assert_error(413, "PAYLOAD_TOO_LARGE");
    let r = server.demo().send_with_nonce(
        "POST",
        "/v1/customers",
        big.as_bytes(),
        &perpsim_tests::now_ns().to_string(),
    );
    r.assert_error(413, "PAYLOAD_TOO_LARGE");
}

#[test]
fn the_admin_api_requires_its_token() {
    let server = Server::start(&[]);
    let url = format!("{}/admin/v1/clock", server.url);
    assert!(
        raw("GET", &url, &[], b"")
            .assert_error(401, "UNAUTHORIZED")
            .contains("missing")
    );
    raw("GET", &url, &[("Authorization", "Bearer nope")], b"").assert_error(401, "UNAUTHORIZED");
    assert_eq!(server.admin("GET", "/admin/v1/clock", None).status, 200);
}

#[test]
fn specs_docs_health_and_metrics_are_served_without_authentication() {
    let server = Server::start(&[]);
    let get = |p: &str| raw("GET", &format!("{}{p}", server.url), &[], b"");
    let spec = get("/openapi.json").json();
    assert!(spec["paths"]["/v1/instruments"]["get"].is_object());
    // Issue 28 item 3: the served documents name where this service listens ("Try it out"
    // reaches it); the checked-in ones the default.
    assert_eq!(spec["servers"][0]["url"], server.url.as_str());
    assert!(get("/openapi.yaml").text.contains("/v1/customers:"));
    assert!(get("/openapi.yaml").text.contains(&server.url));
    let admin = get("/admin/openapi.json").json();
    assert!(admin["paths"]["/admin/v1/clock/advance"]["post"].is_object());
    assert_eq!(admin["servers"][0]["url"], server.url.as_str());
    let docs = get("/docs/");
    assert_eq!(docs.status, 200);
    assert!(
        !docs.text.contains("cdn") && !docs.text.contains("unpkg"),
        "the docs page is bundled"
    );
    assert_eq!(get("/healthz").json()["status"], "ok");
    assert_eq!(get("/readyz").json()["status"], "ready");
    let metrics = get("/metrics").text;
    assert!(
        metrics.contains("perpsim_engine_commands_total 1"),
        "the demo broker's creation: {metrics}"
    );
}

/// The document's operations that take a JSON body: (METHOD, path template, body schema),
/// and the document's schema components.
fn operations_with_bodies(
    document: &str,
) -> (Vec<(String, String, serde_json::Value)>, serde_json::Value) {
    let path = format!("{}/../openapi/{document}", env!("CARGO_MANIFEST_DIR"));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let schemas = doc["components"]["schemas"].clone();
    let mut ops = Vec::new();
    for (template, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let Some(content) = op["requestBody"]["content"].as_object() else {
                continue;
            };
            let schema = content.values().next().unwrap()["schema"].clone();
            ops.push((method.to_ascii_uppercase(), template.clone(), schema));
        }
    }
    (ops, schemas)
}

/// The body's own properties (after its `$ref`), and of those the ones with an `enum` (inline,
/// or a component that is one) with the values they take.
fn enum_fields(
    schema: &serde_json::Value,
    schemas: &serde_json::Value,
) -> Vec<(String, Vec<String>)> {
    let component = |s: &serde_json::Value| match s["$ref"].as_str() {
        Some(r) => schemas[r.rsplit('/').next().unwrap()].clone(),
        None => s.clone(),
    };
    let body = component(schema);
    let mut out = Vec::new();
    for (name, property) in body["properties"].as_object().into_iter().flatten() {
        let property = component(property);
        if let Some(values) = property["enum"].as_array() {
            let values = values
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect();
            out.push((name.clone(), values));
        }
    }
    out
}

/// Issue 28 item 4 (D4): every operation with a body, of both documents, refuses an unknown
/// field and a value outside an enum with a message naming the field as the document does
/// and the values it lists — never a name of the service's own types.
#[test]
fn every_body_refusal_speaks_the_documents_names() {
    let server = Server::start(&["--clock", "manual", "--start", perpsim_tests::START]);
    let c = server.demo();
    let mut enums_seen = 0;
    for document in ["broker.json", "admin.json"] {
        let (ops, schemas) = operations_with_bodies(document);
        let type_names: Vec<String> = schemas.as_object().unwrap().keys().cloned().collect();
        let send = |method: &str, path: &str, body: serde_json::Value| match document {
            "broker.json" => c.send(method, path, Some(body)),
            _ => server.admin(method, path, Some(body)),
        };
        for (method, template, schema) in &ops {
            let path: String = template
                .split('/')
                .map(|s| if s.starts_with('{') { "X1" } else { s })
                .collect::<Vec<_>>()
                .join("/");
            let mut said = Vec::new();
            let message =
                send(method, &path, json!({"zz_unknown": 1})).assert_error(400, "VALIDATION_ERROR");
            assert!(
                message.contains("unknown field zz_unknown"),
                "{method} {template}: {message}"
            );
            said.push(message);
            for (field, values) in enum_fields(schema, &schemas) {
                let message = send(method, &path, json!({ field.clone(): "zz-not-a-value" }))
                    .assert_error(400, "VALIDATION_ERROR");
                let listed = format!("{field} must be one of {}", values.join(", "));
                assert!(
                    message.starts_with(&listed),
                    "{method} {template}: {message}"
                );
                said.push(message);
                enums_seen += 1;
            }
            for message in said {
                for name in &type_names {
                    assert!(
                        !message.contains(&format!("\"{name}\"")),
                        "{method} {template}: {message}"
                    );
                }
                assert!(!message.contains("parse request payload"), "{message}");
            }
        }
    }
    assert!(
        enums_seen >= 6,
        "side, type, time_in_force, status, kind …: {enums_seen}"
    );
    // Query parameters too: an enum and an integer, by name.
    let message = c
        .send("GET", "/v1/trades?sort=up", None)
        .assert_error(400, "VALIDATION_ERROR");
    assert_eq!(message, "sort must be one of asc, desc; got \"up\"");
    let message = c
        .send("GET", "/v1/trades?limit=abc", None)
        .assert_error(400, "VALIDATION_ERROR");
    assert_eq!(message, "limit must be an integer, got \"abc\"");
}

/// Issue 28 item 4 (D4): a request hyper cannot parse — a header line without a colon, a NUL
/// in a value, an over-long header — is answered with the documented JSON error body too.
#[test]
fn a_request_that_is_not_http_gets_the_documented_error_body() {
    use std::io::{Read, Write};
    let server = Server::start(&[]);
    let addr = server.url.trim_start_matches("http://").to_owned();
    let requests: [&[u8]; 3] = [
        b"GET /v1/instruments HTTP/1.1\r\nHost: x\r\nFalse;\r\n\r\n",
        b"GET /v1/instruments HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n",
        b"BLAH\r\n\r\n",
    ];
    for request in requests {
        let mut socket = std::net::TcpStream::connect(&addr).unwrap();
        socket
            .set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        socket.write_all(request).unwrap();
        let mut answer = Vec::new();
        let _ = socket.read_to_end(&mut answer);
        let answer = String::from_utf8(answer).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").expect("a whole answer");
        assert!(head.starts_with("HTTP/1.1 400 "), "{answer}");
        assert!(head.contains("content-type: application/json"), "{answer}");
        let body: serde_json::Value = serde_json::from_str(body).expect("a JSON body");
        assert_eq!(body["code"], "VALIDATION_ERROR", "{answer}");
        assert!(
            body["message"].as_str().unwrap().contains("HTTP/1.1"),
            "{answer}"
        );
    }
}
