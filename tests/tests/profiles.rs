//! Issue 3: account summary (§2.6), margin profile (§2.7, D8, D3 provisioning) and fee
//! profile (§2.8, D7 defaults) through the real binary.

use perpsim_tests::Server;
use serde_json::json;

#[test]
fn the_account_summary_has_every_field_with_its_precision() {
    let server = Server::start(&["--clock", "manual", "--start", perpsim_tests::START]);
    let c = server.demo();
    let code = c.create_customer(None)["customer_code"]
        .as_str()
        .unwrap()
        .to_owned();
    let flat = c
        .send(
            "GET",
            &format!("/v1/customers/{code}/account-summary"),
            None,
        )
        .json();
    assert_eq!(
        flat,
        json!({
            "total_equity": "0.0000000000", "available_margin": "0.0000000000", "used_margin": "0.0000000000",
            "unrealised_pnl": "0.0000000000", "margin_ratio": "0.0000", "leverage_ratio": "1.0000", "margin_state": "normal",
            "initial_margin_requirement": "1.00", "margin_call_threshold": "0.50", "liquidation_threshold": "0.30",
            "updated_at": "2026-01-01T00:00:00.000Z"
        })
    );
    c.send(
        "POST",
        &format!("/v1/customers/{code}/deposits"),
        Some(json!({"asset": "USDC", "amount": "75.5"})),
    );
    c.send(
        "POST",
        &format!("/v1/customers/{code}/deposits"),
        Some(json!({"asset": "USDT", "amount": "24.5"})),
    );
    server.admin(
        "POST",
        "/admin/v1/clock/advance",
        Some(json!({"seconds": 30})),
    );
    c.send(
        "POST",
        &format!("/v1/customers/{code}/withdrawals"),
        Some(json!({"asset": "USDT", "amount": "4.5"})),
    );
    let s = c
        .send(
            "GET",
            &format!("/v1/customers/{code}/account-summary"),
            None,
        )
        .json();
    assert_eq!(s["total_equity"], "100.0000000000");
    assert_eq!(
        s["available_margin"], "95.5000000000",
        "pending withdrawals are not collateral"
    );
    assert_eq!(s["updated_at"], "2026-01-01T00:00:30.000Z");
}

#[test]
fn the_margin_profile_reads_switches_by_leverage_and_refuses_out_of_range() {
    let server = Server::start(&[]);
    let c = server.demo();
    let code = c.create_customer(None)["customer_code"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/v1/customers/{code}/margin-profile");
    let one = json!({"leverage": 1, "initial_margin": "1.00", "maintenance_margin": "0.50", "liquidation_threshold": "0.30", "max_leverage": 2, "instrument_margins": []});
    assert_eq!(c.send("GET", &path, None).json(), one);
    let two = json!({"leverage": 2, "initial_margin": "0.50", "maintenance_margin": "0.30", "liquidation_threshold": "0.20", "max_leverage": 2, "instrument_margins": []});
    assert_eq!(
        c.send("PUT", &path, Some(json!({"leverage": 2}))).json(),
        two
    );
    assert_eq!(
        c.send("PUT", &path, Some(json!({"leverage": "2"}))).json(),
        two,
        "a no-op when already active"
    );
    assert_eq!(c.send("GET", &path, None).json(), two);
    for bad in [
        json!(3),
        json!(0),
        json!("02"),
        json!("two"),
        json!(1.5),
        json!(-1),
    ] {
        let msg = c
            .send("PUT", &path, Some(json!({"leverage": bad})))
            .assert_error(400, "VALIDATION_ERROR");
        assert!(msg.contains("leverage"), "{bad}: {msg}");
    }
    c.send(
        "GET",
        "/v1/customers/00000000-0000-4000-8000-000000000000/margin-profile",
        None,
    )
    .assert_error(404, "NOT_FOUND");
    let r = server.admin(
        "PUT",
        &format!("/admin/v1/customers/{code}/margin-profile/provisioned"),
        Some(json!({"provisioned": false})),
    );
    assert_eq!(
        r.json(),
        json!({"customer_code": code, "provisioned": false})
    );
    c.send("GET", &path, None)
        .assert_error(502, "PROFILE_NOT_PROVISIONED");
    server.admin(
        "PUT",
        &format!("/admin/v1/customers/{code}/margin-profile/provisioned"),
        Some(json!({"provisioned": true})),
    );
    assert_eq!(c.send("GET", &path, None).status, 200);
}

#[test]
fn the_fee_profile_defaults_to_2_and_5_bps_and_accepts_strings_numbers_and_rebates() {
    let server = Server::start(&[]);
    let c = server.demo();
    let code = c.create_customer(None)["customer_code"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/v1/customers/{code}/fee-profile");
    let list = c.send("GET", &path, None).json();
    assert_eq!(list.as_array().unwrap().len(), 4);
    assert_eq!(
        list[0],
        json!({"symbol": "BTC-USDC-PERP", "maker_fee": "2", "taker_fee": "5"})
    );
    let all = c
        .send("PUT", &path, Some(json!({"maker_fee": "-1.5"})))
        .json();
    assert!(
        all.as_array()
            .unwrap()
            .iter()
            .all(|i| i["maker_fee"] == "-1.5" && i["taker_fee"] == "5")
    );
    let one = c
        .send(
            "PUT",
            &format!("{path}/ETH-USDC-PERP"),
            Some(json!({"taker_fee": 7.25})),
        )
        .json();
    assert_eq!(
        one,
        json!({"symbol": "ETH-USDC-PERP", "maker_fee": "-1.5", "taker_fee": "7.25"})
    );
    let list = c.send("GET", &path, None).json();
    assert_eq!(list[2]["taker_fee"], "7.25");
    assert_eq!(list[0]["taker_fee"], "5");
    c.send("PUT", &path, Some(json!({})))
        .assert_error(400, "VALIDATION_ERROR");
    c.send("PUT", &path, Some(json!({"maker_fee": "1e2"})))
        .assert_error(400, "VALIDATION_ERROR");
    // A JSON number is read from its exact text, JSON's exponent form included (D4), as a
    // JavaScript client writes 0.0000001; one no decimal holds exactly is refused.
    // (serde_json writes these floats as `1e-7` and `5e-324`.)
    let sol = format!("{path}/SOL-USDC-PERP");
    let set = c.send("PUT", &sol, Some(json!({"maker_fee": 1e-7})));
    assert_eq!(set.json()["maker_fee"], "0.0000001", "{}", set.text);
    let msg = c
        .send("PUT", &path, Some(json!({"maker_fee": 5e-324})))
        .assert_error(400, "VALIDATION_ERROR");
    assert!(msg.contains("maker_fee") && msg.contains("28"), "{msg}");
    c.send("PUT", &path, Some(json!({"maker_fee": "+2"})))
        .assert_error(400, "VALIDATION_ERROR");
    c.send("PUT", &path, Some(json!({"maker_fee": "20000"})))
        .assert_error(400, "VALIDATION_ERROR");
    c.send(
        "PUT",
        &path,
        Some(json!({"maker_fee": "1", "rebate": true})),
    )
    .assert_error(400, "VALIDATION_ERROR");
    c.send(
        "PUT",
        &format!("{path}/NOPE-PERP"),
        Some(json!({"maker_fee": "1"})),
    )
    .assert_error(404, "NOT_FOUND");
}

#[test]
fn the_openapi_document_describes_decimals_times_and_errors_exactly() {
    let server = Server::start(&[]);
    let spec = perpsim_tests::raw("GET", &format!("{}/openapi.json", server.url), &[], b"").json();
    let balance = &spec["components"]["schemas"]["BalanceRecord"]["properties"]["total"];
    assert_eq!(balance["type"], "string");
    assert_eq!(balance["pattern"], r"^-?[0-9]+(\.[0-9]+)?$");
    assert!(balance["example"].is_string());
    let created = &spec["components"]["schemas"]["TransactionRecord"]["properties"]["created_at"];
    assert_eq!(created["format"], "date-time");
    let deposit = &spec["paths"]["/v1/customers/{code}/deposits"]["post"]["responses"];
    for status in ["201", "400", "401", "404", "503"] {
        assert!(deposit[status].is_object(), "deposit documents {status}");
    }
    let margin = &spec["paths"]["/v1/customers/{code}/margin-profile"]["get"]["responses"];
    assert!(margin["502"].is_object());
}
