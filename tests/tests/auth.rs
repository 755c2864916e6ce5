//! Interface §5 and D2: every 401 case, nonce rules, and the rate limit (D4).

use perpsim_tests::{Resp, Server, now_ns, raw};

fn customers(server: &Server, headers: &[(&str, &str)]) -> Resp {
    raw("GET", &format!("{}/v1/customers", server.url), headers, b"")
}

#[test]
fn each_missing_signing_header_is_a_401_naming_it() {
    let server = Server::start(&[]);
    let c = server.demo();
    let nonce = now_ns().to_string();
    let (pk, sig) = (
        c.public_key(),
        c.signature(&nonce, "GET", "/v1/customers", b""),
    );
    let all = [
        ("X-Public-Key", pk.as_str()),
        ("X-Nonce", nonce.as_str()),
        ("X-Signature", sig.as_str()),
    ];
    for missing in 0..3 {
        let headers: Vec<_> = all
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != missing)
            .map(|(_, h)| *h)
            .collect();
        let msg = customers(&server, &headers).assert_error(401, "UNAUTHORIZED");
        assert!(
            msg.contains(&format!("missing header {}", all[missing].0)),
            "{msg}"
        );
    }
}

#[test]
fn unknown_key_and_bad_signature_are_401() {
    let server = Server::start(&[]);
    let c = server.demo();
    let stranger = perpsim_tests::Client {
        url: server.url.clone(),
        key: ed25519_dalek::SigningKey::from_bytes(&[9; 32]),
    };
    assert!(
        stranger
            .send("GET", "/v1/customers", None)
            .assert_error(401, "UNAUTHORIZED")
            .contains("unknown public key")
    );
    // Signed for another path: the signature does not verify.
    let nonce = now_ns().to_string();
    let (pk, sig) = (
        c.public_key(),
        c.signature(&nonce, "GET", "/v1/instruments", b""),
    );
    let r = customers(
        &server,
        &[
            ("X-Public-Key", &pk),
            ("X-Nonce", &nonce),
            ("X-Signature", &sig),
        ],
    );
    assert_eq!(r.assert_error(401, "UNAUTHORIZED"), "bad signature");
}

#[test]
fn nonces_31_s_old_6_s_ahead_reused_in_milliseconds_or_small_are_401() {
    let server = Server::start(&[]);
    let c = server.demo();
    let now = now_ns();
    let cases = [
        ((now - 31_000_000_000).to_string(), "too old"),
        ((now + 6_000_000_000).to_string(), "too far ahead"),
        ((now / 1_000_000).to_string(), "malformed"),
        ("42".to_owned(), "malformed"),
    ];
    for (nonce, expected) in cases {
        let msg = c
            .send_with_nonce("GET", "/v1/customers", b"", &nonce)
            .assert_error(401, "UNAUTHORIZED");
        assert!(msg.contains(expected), "{nonce}: {msg}");
    }
    let nonce = now_ns().to_string();
    assert_eq!(
        c.send_with_nonce("GET", "/v1/customers", b"", &nonce)
            .status,
        200
    );
    let msg = c
        .send_with_nonce("GET", "/v1/customers", b"", &nonce)
        .assert_error(401, "UNAUTHORIZED");
    assert!(msg.contains("reused"), "{msg}");
}

#[test]
fn a_bad_signature_does_not_consume_its_nonce() {
    let server = Server::start(&[]);
    let c = server.demo();
    let nonce = now_ns().to_string();
    let wrong = c.signature(&nonce, "GET", "/v1/elsewhere", b"");
    let pk = c.public_key();
    let r = customers(
        &server,
        &[
            ("X-Public-Key", &pk),
            ("X-Nonce", &nonce),
            ("X-Signature", &wrong),
        ],
    );
    r.assert_error(401, "UNAUTHORIZED");
    assert_eq!(
        c.send_with_nonce("GET", "/v1/customers", b"", &nonce)
            .status,
        200,
        "the nonce is still unused"
    );
}

#[test]
fn concurrent_requests_with_out_of_order_nonces_are_all_accepted() {
    let server = Server::start(&[]);
    let c = server.demo();
    let base = now_ns();
    // Nonces handed out in one order, sent from many threads in the reverse order.
    let nonces: Vec<String> = (0..40u128)
        .map(|i| (base - i * 1_000).to_string())
        .collect();
    let handles: Vec<_> = nonces
        .into_iter()
        .map(|n| {
            let c = c.clone();
            std::thread::spawn(move || c.send_with_nonce("GET", "/v1/instruments", b"", &n).status)
        })
        .collect();
    let statuses: Vec<u16> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
}

#[test]
fn the_rate_limit_answers_429_with_retry_after_before_verifying() {
    let server = Server::start(&["--rate-limit", "1", "--rate-burst", "3"]);
    let c = server.demo();
    let statuses: Vec<u16> = (0..3)
        .map(|_| c.send("GET", "/v1/instruments", None).status)
        .collect();
    assert_eq!(statuses, [200, 200, 200]);
    // Even a badly signed request is refused by the limit first.
    let nonce = now_ns().to_string();
    let pk = c.public_key();
    let r = customers(
        &server,
        &[
            ("X-Public-Key", &pk),
            ("X-Nonce", &nonce),
            ("X-Signature", "AAAA"),
        ],
    );
    r.assert_error(429, "RATE_LIMITED");
    assert!(r.header("retry-after").unwrap().parse::<u64>().unwrap() >= 1);
}

#[test]
fn every_response_carries_the_server_time_in_date() {
    let server = Server::start(&[]);
    let r = raw("GET", &format!("{}/healthz", server.url), &[], b"");
    assert_eq!(r.status, 200);
    let date = r.header("date").expect("Date header");
    assert!(date.ends_with(" GMT"), "{date}");
}
