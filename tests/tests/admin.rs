//! D3 admin API: brokers and keys, instrument status and price, the clock.

use perpsim_tests::{Client, Server};
use serde_json::json;

#[test]
fn a_registered_key_signs_a_second_key_is_added_and_a_revoked_key_stops_working() {
    let server = Server::start(&[]);
    let first = server.new_broker("acme");
    assert_eq!(first.send("GET", "/v1/instruments", None).status, 200);
    let brokers_code = {
        let c = first.create_customer(None);
        c["broker_code"].as_str().unwrap().to_owned()
    };
    let second = Client {
        url: server.url.clone(),
        key: ed25519_dalek::SigningKey::from_bytes(&[4; 32]),
    };
    let r = server.admin(
        "POST",
        &format!("/admin/v1/brokers/{brokers_code}/keys"),
        Some(json!({"public_key": second.public_key()})),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.json()["public_keys"].as_array().unwrap().len(), 2);
    // Both keys act for the same broker: the customer list is shared.
    assert_eq!(
        second.send("GET", "/v1/customers", None).json()["data"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let url_key = base64_url(&first.public_key());
    let r = server.admin(
        "DELETE",
        &format!("/admin/v1/brokers/{brokers_code}/keys/{url_key}"),
        None,
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(
        first
            .send("GET", "/v1/instruments", None)
            .assert_error(401, "UNAUTHORIZED")
            .contains("unknown public key")
    );
    assert_eq!(second.send("GET", "/v1/instruments", None).status, 200);
    // A key belongs to one broker.
    let r = server.admin(
        "POST",
        "/admin/v1/brokers",
        Some(json!({"name": "dup", "public_key": second.public_key()})),
    );
    r.assert_error(409, "CONFLICT");
    server
        .admin(
            "POST",
            "/admin/v1/brokers",
            Some(json!({"name": "x", "public_key": "short"})),
        )
        .assert_error(400, "VALIDATION_ERROR");
}

fn base64_url(standard: &str) -> String {
    standard
        .trim_end_matches('=')
        .replace('+', "-")
        .replace('/', "_")
}

#[test]
fn instrument_price_and_status_are_set_and_validated() {
    let server = Server::start(&[]);
    let r = server.admin(
        "PUT",
        "/admin/v1/instruments/ETH-USDC-PERP/price",
        Some(json!({"index_price": "3100.5"})),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let body = r.json();
    assert_eq!(
        (body["index_price"].as_str(), body["mark_price"].as_str()),
        (Some("3100.50"), Some("3100.50"))
    );
    let r = server.admin(
        "PUT",
        "/admin/v1/instruments/ETH-USDC-PERP/price",
        Some(json!({"index_price": "3100", "mark_price": "3101.25"})),
    );
    assert_eq!(r.json()["mark_price"], "3101.25");
    for bad in ["0", "-1", "1e3", "+5", " 1"] {
        let r = server.admin(
            "PUT",
            "/admin/v1/instruments/ETH-USDC-PERP/price",
            Some(json!({"index_price": bad})),
        );
        assert!(
            r.assert_error(400, "VALIDATION_ERROR")
                .contains("index_price"),
            "{bad}"
        );
    }
    server
        .admin(
            "PUT",
            "/admin/v1/instruments/NOPE-PERP/price",
            Some(json!({"index_price": "1"})),
        )
        .assert_error(404, "NOT_FOUND");
    server
        .admin(
            "PUT",
            "/admin/v1/instruments/BTC-USDC-PERP/status",
            Some(json!({"status": "settled"})),
        )
        .assert_error(400, "VALIDATION_ERROR");
    let r = server.admin(
        "PUT",
        "/admin/v1/instruments/BTC-USDC-PERP/status",
        Some(json!({"status": "post_only"})),
    );
    assert_eq!(r.json()["status"], "post_only");
}

#[test]
fn the_manual_clock_advances_by_seconds_or_to_an_instant_and_realtime_refuses() {
    let server = Server::start(&["--clock", "manual", "--start", perpsim_tests::START]);
    let clock = server.admin("GET", "/admin/v1/clock", None).json();
    assert_eq!(
        clock,
        json!({"mode": "manual", "now": "2026-01-01T00:00:00.000Z"})
    );
    let r = server.admin(
        "POST",
        "/admin/v1/clock/advance",
        Some(json!({"seconds": 90})),
    );
    assert_eq!(r.json()["now"], "2026-01-01T00:01:30.000Z");
    let r = server.admin(
        "POST",
        "/admin/v1/clock/advance",
        Some(json!({"to": "2026-01-01T05:00:00Z"})),
    );
    assert_eq!(r.json()["now"], "2026-01-01T05:00:00.000Z");
    server
        .admin(
            "POST",
            "/admin/v1/clock/advance",
            Some(json!({"to": "2026-01-01T04:00:00Z"})),
        )
        .assert_error(400, "VALIDATION_ERROR");
    server
        .admin(
            "POST",
            "/admin/v1/clock/advance",
            Some(json!({"seconds": 0})),
        )
        .assert_error(400, "VALIDATION_ERROR");
    server
        .admin(
            "POST",
            "/admin/v1/clock/advance",
            Some(json!({"seconds": 1, "to": "2027-01-01T00:00:00Z"})),
        )
        .assert_error(400, "VALIDATION_ERROR");
    // Customers created now carry the advanced simulation time.
    assert_eq!(
        server.demo().create_customer(None)["created_at"],
        "2026-01-01T05:00:00.000Z"
    );

    let realtime = Server::start(&[]);
    realtime
        .admin(
            "POST",
            "/admin/v1/clock/advance",
            Some(json!({"seconds": 5})),
        )
        .assert_error(409, "CONFLICT");
    assert_eq!(
        realtime.admin("GET", "/admin/v1/clock", None).json()["mode"],
        "realtime"
    );
}
