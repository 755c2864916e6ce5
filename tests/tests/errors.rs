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
    assert!(get("/openapi.yaml").text.contains("/v1/customers:"));
    assert!(
        get("/admin/openapi.json").json()["paths"]["/admin/v1/clock/advance"]["post"].is_object()
    );
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
