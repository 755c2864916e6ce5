//! D3 onboarding: create, read and list customers; D2: other brokers' customers are unknown;
//! D4: cursor pagination over HTTP.

use perpsim_tests::Server;
use serde_json::{Value, json};

#[test]
fn a_created_customer_is_readable_and_listed_with_every_field() {
    let server = Server::start(&["--clock", "manual", "--start", perpsim_tests::START]);
    let c = server.demo();
    let created = c.create_customer(Some("crm-42"));
    let code = created["customer_code"].as_str().unwrap();
    assert_eq!(created["external_id"], "crm-42");
    assert_eq!(
        created["created_at"], "2026-01-01T00:00:00.000Z",
        "simulation time"
    );
    assert_eq!(
        c.send("GET", &format!("/v1/customers/{code}"), None).json(),
        created
    );
    let page = c.send("GET", "/v1/customers", None).json();
    assert_eq!(page["data"], json!([created]));
    let without = c.create_customer(None);
    assert_eq!(without["external_id"], Value::Null);
}

#[test]
fn broker_b_gets_404_for_broker_a_customer_exactly_as_for_an_unknown_one() {
    let server = Server::start(&[]);
    let a = server.demo();
    let b = server.new_broker("other");
    let code = a.create_customer(None)["customer_code"]
        .as_str()
        .unwrap()
        .to_owned();
    let foreign = b
        .send("GET", &format!("/v1/customers/{code}"), None)
        .assert_error(404, "NOT_FOUND");
    let unknown = b
        .send(
            "GET",
            "/v1/customers/00000000-0000-4000-8000-000000000000",
            None,
        )
        .assert_error(404, "NOT_FOUND");
    assert_eq!(
        foreign.replace(&code, "X"),
        unknown.replace("00000000-0000-4000-8000-000000000000", "X")
    );
    assert_eq!(
        b.send("GET", "/v1/customers", None).json()["data"],
        json!([])
    );
}

#[test]
fn external_id_is_bounded_and_printable() {
    let server = Server::start(&[]);
    let c = server.demo();
    for bad in [
        json!({"external_id": ""}),
        json!({"external_id": "x".repeat(65)}),
        json!({"external_id": "a\u{7}b"}),
    ] {
        c.send("POST", "/v1/customers", Some(bad))
            .assert_error(400, "VALIDATION_ERROR");
    }
    assert_eq!(
        c.create_customer(Some(&"é".repeat(64)))["external_id"],
        "é".repeat(64)
    );
}

#[test]
fn pages_walk_forward_and_back_and_bad_cursors_are_refused() {
    let server = Server::start(&[]);
    let c = server.demo();
    let codes: Vec<String> = (0..5)
        .map(|i| {
            c.create_customer(Some(&format!("c{i}")))["customer_code"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let get = |q: &str| c.send("GET", &format!("/v1/customers{q}"), None);
    let page_codes = |p: &Value| -> Vec<String> {
        p["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["customer_code"].as_str().unwrap().to_owned())
            .collect()
    };
    let p1 = get("?limit=2").json();
    assert_eq!(page_codes(&p1), codes[..2]);
    assert_eq!(p1["response_metadata"]["has_previous"], false);
    assert_eq!(p1["response_metadata"]["has_next"], true);
    let end = p1["response_metadata"]["end_cursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let p2 = get(&format!("?limit=2&after={end}")).json();
    assert_eq!(page_codes(&p2), codes[2..4]);
    let start = p2["response_metadata"]["start_cursor"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        page_codes(&get(&format!("?limit=2&before={start}")).json()),
        codes[..2]
    );
    let last = get(&format!(
        "?limit=2&after={}",
        p2["response_metadata"]["end_cursor"].as_str().unwrap()
    ))
    .json();
    assert_eq!(page_codes(&last), codes[4..]);
    assert_eq!(last["response_metadata"]["has_next"], false);

    let mut tampered = end.clone().into_bytes();
    let i = tampered.len() / 2;
    tampered[i] = if tampered[i] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    get(&format!("?after={tampered}")).assert_error(400, "VALIDATION_ERROR");
    get(&format!("?after={end}&before={start}")).assert_error(400, "VALIDATION_ERROR");
    get("?limit=0").assert_error(400, "VALIDATION_ERROR");
    get("?limit=1001").assert_error(400, "VALIDATION_ERROR");
    assert_eq!(get("?limit=1000").status, 200);
    // Another broker's cursor is foreign to this broker's list.
    let b = server.new_broker("b");
    b.create_customer(None);
    let foreign = b.send("GET", "/v1/customers", None).json()["response_metadata"]["end_cursor"]
        .as_str()
        .unwrap()
        .to_owned();
    get(&format!("?after={foreign}")).assert_error(400, "VALIDATION_ERROR");
}
