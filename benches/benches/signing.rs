//! The authentication path per request (key lookup, rate limit, nonce window, verify_strict,
//! nonce record) against bare `verify_strict` on the same message, in one run.
//!
//! Target (issue 2): the auth path costs ≤ 1.1× bare verification.
//! Run: `cargo bench -p perpsim-benches --bench signing`.

use std::cell::Cell;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use criterion::{Criterion, criterion_group, criterion_main};
use ed25519_dalek::{Signer, SigningKey};
use perpsim_api::signing::{
    Attempt, Authenticator, ClientAddress, DEFAULT_MAX_NONCES_PER_KEY, RateLimit, SignedHeaders,
    canonical_message, encode_public_key,
};
use perpsim_core::ids::{BrokerCode, PublicKey};

const NOW: u64 = 1_767_225_600_000_000_000;
const PATH: &str = "/v1/customers/5b0b5d2e-8a7e-4b8e-9c59-2f0e6f9b1a11/orders";
const BODY: &[u8] = br#"{"symbol":"BTC-USDC-PERP","side":"buy","type":"limit","reference_id":"r-1","amount":"0.0100","limit_price":"60000.0"}"#;

/// Pre-signed requests, one per nonce, so signing stays out of the measured loop.
fn requests(key: &SigningKey, n: usize) -> Vec<(String, String)> {
    (0..n as u64)
        .map(|i| {
            // One request per millisecond of server time: the window holds 30 000 nonces.
            let nonce = (NOW + i * 1_000_000).to_string();
            let sig = key.sign(&canonical_message(&nonce, "POST", PATH, BODY));
            (nonce, STANDARD.encode(sig.to_bytes()))
        })
        .collect()
}

fn signing(c: &mut Criterion) {
    const N: usize = 150_000;
    let key = SigningKey::from_bytes(&[3; 32]);
    let public = PublicKey(key.verifying_key().to_bytes());
    let public_text = encode_public_key(&public);
    let broker = BrokerCode(perpsim_core::Uuid::from_u128(1));
    let reqs = requests(&key, N);
    let verifying = key.verifying_key();
    let signature = key.sign(&canonical_message(&reqs[0].0, "POST", PATH, BODY));

    let mut group = c.benchmark_group("signing");
    // Bounded so the auth path never runs out of pre-signed requests (~60 µs each at most).
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    group.bench_function("bare_verify_strict", |b| {
        b.iter(|| {
            let msg = canonical_message(&reqs[0].0, "POST", PATH, BODY);
            verifying.verify_strict(&msg, &signature).unwrap()
        })
    });
    let auth = Authenticator::new(
        RateLimit {
            per_second: u32::MAX,
            burst: u32::MAX,
        },
        RateLimit {
            per_second: 10,
            burst: 100,
        },
        DEFAULT_MAX_NONCES_PER_KEY,
    );
    let next = Cell::new(0usize);
    group.bench_function("auth_path", |b| {
        b.iter(|| {
            let i = next.get();
            assert!(i < N, "pre-signed requests exhausted; raise N");
            next.set(i + 1);
            let (nonce, sig) = &reqs[i];
            let attempt = Attempt {
                headers: SignedHeaders {
                    public_key: Some(&public_text),
                    nonce: Some(nonce),
                    signature: Some(sig),
                },
                method: "POST",
                path_and_query: PATH,
                body: BODY,
                from: ClientAddress::from(std::net::IpAddr::from([127, 0, 0, 1])),
            };
            let now = NOW + i as u64 * 1_000_000;
            auth.authenticate(&attempt, |k| (*k == public).then_some(broker), now)
                .unwrap()
        })
    });
    group.finish();
}

criterion_group!(benches, signing);
criterion_main!(benches);
