//! Request signing (interface §5, D2): the checks in their order, with the clock passed in.
//!
//! Order of work for a request: body limit (in the middleware), key lookup, rate limit, nonce
//! form and window, nonce not yet seen, signature (`verify_strict`), and only then is the
//! nonce recorded, so a request with a bad signature never consumes a nonce. Nonce memory
//! holds only nonces inside the window, and each key's memory is bounded by what its rate
//! limit can admit in that window (with a hard cap).
//!
//! This memory is the fast check; the durable one is the journal's nonce table. An admitted
//! request carries its [`Admission`], and is answered only once its nonce is journaled (with
//! its command, or on its own), so a restart rebuilds exactly the nonces that were spent.

pub mod secrets;

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signature, VerifyingKey};
use perpsim_core::ids::{BrokerCode, PublicKey};
use perpsim_storage::UsedNonce;

pub const HEADER_PUBLIC_KEY: &str = "X-Public-Key";
pub const HEADER_NONCE: &str = "X-Nonce";
pub const HEADER_SIGNATURE: &str = "X-Signature";

/// A nonce may be this far behind server time…
pub const BEHIND_NS: u64 = 30_000_000_000;
/// …and this far ahead of it.
pub const AHEAD_NS: u64 = 5_000_000_000;
/// Nonces below this (2001-09-09 in nanoseconds) cannot be nanosecond timestamps of today:
/// they are counters, seconds or milliseconds.
const NANOSECOND_FLOOR: u64 = 1_000_000_000_000_000_000;
/// A nonce is remembered while it is inside the window, and a request admitted at `t` carries
/// a nonce of at most `t + 5 s` that is forgotten at `nonce + 30 s`: so the nonces remembered
/// at any instant were all admitted in the last 35 s.
const WINDOW_SECS: u64 = (BEHIND_NS + AHEAD_NS) / NANO;
/// Default hard cap on remembered nonces per key, whatever the rate limit: at about 20 bytes a
/// nonce in a B-tree set (measured), 20 MiB per key at the most.
pub const DEFAULT_MAX_NONCES_PER_KEY: u64 = 1 << 20;

/// The bytes a client signs: `{nonce}\n{METHOD}\n{path_and_query}\n{body}`.
pub fn canonical_message(nonce: &str, method: &str, path_and_query: &str, body: &[u8]) -> Vec<u8> {
    let mut msg =
        Vec::with_capacity(nonce.len() + method.len() + path_and_query.len() + body.len() + 3);
    for part in [
        nonce.as_bytes(),
        method.as_bytes(),
        path_and_query.as_bytes(),
    ] {
        msg.extend_from_slice(part);
        msg.push(b'\n');
    }
    msg.extend_from_slice(body);
    msg
}

/// Why a request was refused before reaching a handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthError {
    /// 401, the message names the failed check.
    Unauthorized(String),
    /// 429, with the seconds after which a retry will be admitted.
    RateLimited { retry_after_secs: u64 },
    /// 429: the key's nonce memory is at its bound (only when the hard cap is below what the
    /// rate limit admits in the window); a retry is admitted once its oldest nonce leaves it.
    NonceMemoryFull { bound: u64, retry_after_secs: u64 },
}

/// A signed request that passed every check: its broker, and the nonce it spent. The nonce
/// must be journaled before the request is answered ([`Admission::journaled`]).
#[derive(Debug)]
pub struct Admission {
    pub broker: BrokerCode,
    used: UsedNonce,
    journaled: AtomicBool,
}

impl Admission {
    pub fn used(&self) -> UsedNonce {
        self.used
    }

    /// Whether the nonce is durable: written with a command's tick or on its own.
    pub fn journaled(&self) -> bool {
        self.journaled.load(Ordering::Acquire)
    }

    pub fn mark_journaled(&self) {
        self.journaled.store(true, Ordering::Release);
    }
}

fn unauthorized(msg: impl Into<String>) -> AuthError {
    AuthError::Unauthorized(msg.into())
}

/// The three signing headers as received.
pub struct SignedHeaders<'a> {
    pub public_key: Option<&'a str>,
    pub nonce: Option<&'a str>,
    pub signature: Option<&'a str>,
}

/// Token bucket settings per public key (D4: 100 requests/s, bursts of 200).
#[derive(Debug, Clone, Copy)]
pub struct RateLimit {
    pub per_second: u32,
    pub burst: u32,
}

struct KeyState {
    key: VerifyingKey,
    /// Tokens in nano-tokens, so refills are exact integer arithmetic.
    tokens_nano: u64,
    refilled_at_ns: u64,
    nonces: BTreeSet<u64>,
}

pub struct Authenticator {
    rate: RateLimit,
    /// Most nonces remembered per key: what the rate limit admits in the window, capped.
    nonce_bound: u64,
    /// Only keys registered in the engine's view get an entry; `prune` drops revoked ones once
    /// none of their nonces is inside the window any more.
    keys: Mutex<HashMap<PublicKey, Arc<Mutex<KeyState>>>>,
}

const NANO: u64 = 1_000_000_000;

/// The most nonces one key can spend inside the window: a full burst plus the refill over the
/// window (both ends of the window count, hence the one more), never more than `cap`.
pub fn nonce_bound(rate: RateLimit, cap: u64) -> u64 {
    let admitted = u64::from(rate.burst) + u64::from(rate.per_second) * WINDOW_SECS + 1;
    admitted.min(cap)
}

impl Authenticator {
    pub fn new(rate: RateLimit, max_nonces_per_key: u64) -> Self {
        assert!(
            rate.per_second > 0 && rate.burst > 0 && max_nonces_per_key > 0,
            "rate limit and nonce bound must admit requests"
        );
        Authenticator {
            rate,
            nonce_bound: nonce_bound(rate, max_nonces_per_key),
            keys: Mutex::new(HashMap::new()),
        }
    }

    pub fn nonce_bound(&self) -> u64 {
        self.nonce_bound
    }

    /// Remembers nonces spent before a restart (the journal's window), so they stay refused.
    pub fn restore(&self, spent: impl IntoIterator<Item = UsedNonce>) {
        for used in spent {
            if let Some(state) = self.state_for(used.key) {
                state
                    .lock()
                    .expect("key state lock")
                    .nonces
                    .insert(used.nonce);
            }
        }
    }

    /// Checks a request. `lookup` maps a public key to its broker (the engine's read view);
    /// `now_ns` is wall-clock time in nanoseconds.
    pub fn authenticate(
        &self,
        headers: &SignedHeaders<'_>,
        lookup: impl Fn(&PublicKey) -> Option<BrokerCode>,
        method: &str,
        path_and_query: &str,
        body: &[u8],
        now_ns: u64,
    ) -> Result<Admission, AuthError> {
        let key_text = headers
            .public_key
            .ok_or_else(|| unauthorized(format!("missing header {HEADER_PUBLIC_KEY}")))?;
        let nonce_text = headers
            .nonce
            .ok_or_else(|| unauthorized(format!("missing header {HEADER_NONCE}")))?;
        let sig_text = headers
            .signature
            .ok_or_else(|| unauthorized(format!("missing header {HEADER_SIGNATURE}")))?;
        let key = parse_public_key(key_text).ok_or_else(|| {
            unauthorized(format!(
                "{HEADER_PUBLIC_KEY} is not a standard-base64 32-byte ed25519 public key"
            ))
        })?;
        let broker = lookup(&key).ok_or_else(|| unauthorized("unknown public key"))?;
        let state = self
            .state_for(key)
            .ok_or_else(|| unauthorized("public key is not a valid ed25519 point"))?;
        let nonce = parse_nonce(nonce_text)?;
        let verifying_key = {
            let mut st = state.lock().expect("key state lock");
            self.take_token(&mut st, now_ns)?;
            check_window(nonce, now_ns)?;
            if st.nonces.contains(&nonce) {
                return Err(unauthorized(
                    "nonce reused: this public key has already used it",
                ));
            }
            st.key
        };
        // Verification runs outside every lock: concurrent requests of one key verify in parallel.
        let signature = parse_signature(sig_text)?;
        let message = canonical_message(nonce_text, method, path_and_query, body);
        verifying_key
            .verify_strict(&message, &signature)
            .map_err(|_| unauthorized("bad signature"))?;
        let mut st = state.lock().expect("key state lock");
        // Forget nonces that fell out of the window: they would be refused as too old anyway.
        let floor = now_ns.saturating_sub(BEHIND_NS);
        st.nonces = st.nonces.split_off(&floor);
        if st.nonces.len() as u64 >= self.nonce_bound {
            let oldest = st.nonces.first().copied().unwrap_or(floor);
            let leaves_in = (oldest + BEHIND_NS + 1).saturating_sub(now_ns);
            return Err(AuthError::NonceMemoryFull {
                bound: self.nonce_bound,
                retry_after_secs: leaves_in.div_ceil(NANO).max(1),
            });
        }
        if !st.nonces.insert(nonce) {
            return Err(unauthorized(
                "nonce reused: this public key has already used it",
            ));
        }
        Ok(Admission {
            broker,
            used: UsedNonce { key, nonce },
            journaled: AtomicBool::new(false),
        })
    }

    fn state_for(&self, key: PublicKey) -> Option<Arc<Mutex<KeyState>>> {
        let mut keys = self.keys.lock().expect("key map lock");
        if let Some(state) = keys.get(&key) {
            return Some(state.clone());
        }
        let verifying_key = VerifyingKey::from_bytes(&key.0).ok()?;
        let state = Arc::new(Mutex::new(KeyState {
            key: verifying_key,
            tokens_nano: u64::from(self.rate.burst) * NANO,
            refilled_at_ns: 0,
            nonces: BTreeSet::new(),
        }));
        keys.insert(key, state.clone());
        Some(state)
    }

    fn take_token(&self, st: &mut KeyState, now_ns: u64) -> Result<(), AuthError> {
        let cap = u64::from(self.rate.burst) * NANO;
        let elapsed = now_ns.saturating_sub(st.refilled_at_ns);
        let refill = elapsed.saturating_mul(u64::from(self.rate.per_second));
        st.tokens_nano = st.tokens_nano.saturating_add(refill).min(cap);
        st.refilled_at_ns = st.refilled_at_ns.max(now_ns);
        if st.tokens_nano < NANO {
            let missing = NANO - st.tokens_nano;
            let wait_ns = missing.div_ceil(u64::from(self.rate.per_second));
            return Err(AuthError::RateLimited {
                retry_after_secs: wait_ns.div_ceil(NANO).max(1),
            });
        }
        st.tokens_nano -= NANO;
        Ok(())
    }

    /// Drops the state of keys that are no longer registered, bounding memory to live keys;
    /// a revoked key keeps its nonces until they leave the window, so adding it back at once
    /// cannot reopen them.
    pub fn prune(&self, registered: impl Fn(&PublicKey) -> bool, now_ns: u64) {
        let floor = now_ns.saturating_sub(BEHIND_NS);
        self.keys.lock().expect("key map lock").retain(|k, st| {
            registered(k)
                || st
                    .lock()
                    .expect("key state lock")
                    .nonces
                    .last()
                    .is_some_and(|n| *n >= floor)
        });
    }

    /// Spent nonces remembered, every key together.
    pub fn nonces(&self) -> usize {
        let keys = self.keys.lock().expect("key map lock");
        keys.values()
            .map(|st| st.lock().expect("key state lock").nonces.len())
            .sum()
    }

    pub fn tracked_keys(&self) -> usize {
        self.keys.lock().expect("key map lock").len()
    }
}

pub fn parse_public_key(text: &str) -> Option<PublicKey> {
    let bytes = STANDARD.decode(text).ok()?;
    Some(PublicKey(bytes.try_into().ok()?))
}

pub fn encode_public_key(key: &PublicKey) -> String {
    STANDARD.encode(key.0)
}

fn parse_signature(text: &str) -> Result<Signature, AuthError> {
    let bytes = STANDARD
        .decode(text)
        .ok()
        .and_then(|b| <[u8; 64]>::try_from(b).ok());
    bytes.map(|b| Signature::from_bytes(&b)).ok_or_else(|| {
        unauthorized(format!(
            "{HEADER_SIGNATURE} is not a standard-base64 64-byte ed25519 signature"
        ))
    })
}

fn parse_nonce(text: &str) -> Result<u64, AuthError> {
    let malformed = || {
        unauthorized(
            "nonce malformed: X-Nonce must be a nanosecond Unix timestamp in decimal digits",
        )
    };
    if text.is_empty() || text.len() > 20 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(malformed());
    }
    let nonce: u64 = text.parse().map_err(|_| malformed())?;
    if nonce < NANOSECOND_FLOOR {
        return Err(unauthorized(
            "nonce malformed: X-Nonce must be a nanosecond Unix timestamp; counters, seconds and milliseconds are refused",
        ));
    }
    Ok(nonce)
}

fn check_window(nonce: u64, now_ns: u64) -> Result<(), AuthError> {
    if nonce < now_ns.saturating_sub(BEHIND_NS) {
        return Err(unauthorized(
            "nonce too old: more than 30 s behind server time (see the Date header)",
        ));
    }
    if nonce > now_ns.saturating_add(AHEAD_NS) {
        return Err(unauthorized(
            "nonce too far ahead: more than 5 s ahead of server time (see the Date header)",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::{Signer, SigningKey};
    use uuid::Uuid;

    const NOW: u64 = 1_767_225_600_000_000_000;

    struct Client {
        key: SigningKey,
        public: String,
    }

    impl Client {
        fn new(seed: u8) -> Self {
            let key = SigningKey::from_bytes(&[seed; 32]);
            let public = STANDARD.encode(key.verifying_key().as_bytes());
            Client { key, public }
        }

        fn sign(&self, nonce: &str, body: &[u8]) -> String {
            STANDARD.encode(
                self.key
                    .sign(&canonical_message(nonce, "POST", "/v1/customers", body))
                    .to_bytes(),
            )
        }
    }

    fn broker() -> BrokerCode {
        BrokerCode(Uuid::from_u128(7))
    }

    fn run(
        auth: &Authenticator,
        c: &Client,
        nonce: &str,
        sig: &str,
        now: u64,
    ) -> Result<BrokerCode, AuthError> {
        let headers = SignedHeaders {
            public_key: Some(&c.public),
            nonce: Some(nonce),
            signature: Some(sig),
        };
        let known = parse_public_key(&c.public).unwrap();
        auth.authenticate(
            &headers,
            |k| (*k == known).then(broker),
            "POST",
            "/v1/customers",
            b"{}",
            now,
        )
        .map(|admitted| admitted.broker)
    }

    const DEFAULTS: RateLimit = RateLimit {
        per_second: 100,
        burst: 200,
    };

    fn auth() -> Authenticator {
        Authenticator::new(DEFAULTS, DEFAULT_MAX_NONCES_PER_KEY)
    }

    fn message(r: Result<BrokerCode, AuthError>) -> String {
        match r {
            Err(AuthError::Unauthorized(m)) => m,
            other => panic!("expected 401, got {other:?}"),
        }
    }

    #[test]
    fn a_valid_request_is_admitted_once() {
        let (a, c) = (auth(), Client::new(1));
        let n = NOW.to_string();
        assert_eq!(run(&a, &c, &n, &c.sign(&n, b"{}"), NOW), Ok(broker()));
        assert!(message(run(&a, &c, &n, &c.sign(&n, b"{}"), NOW)).contains("reused"));
    }

    #[test]
    fn window_edges_are_30_s_behind_and_5_s_ahead() {
        let (a, c) = (auth(), Client::new(1));
        for (nonce, ok) in [
            (NOW - BEHIND_NS, true),
            (NOW + AHEAD_NS, true),
            (NOW - BEHIND_NS - 1, false),
            (NOW + AHEAD_NS + 1, false),
        ] {
            let n = nonce.to_string();
            assert_eq!(
                run(&a, &c, &n, &c.sign(&n, b"{}"), NOW).is_ok(),
                ok,
                "{nonce}"
            );
        }
    }

    #[test]
    fn counters_and_milliseconds_are_refused_as_malformed() {
        let (a, c) = (auth(), Client::new(1));
        for n in [
            "1",
            "42",
            &(NOW / 1_000_000).to_string(),
            "abc",
            "-5",
            "",
            "123456789012345678901",
        ] {
            assert!(
                message(run(&a, &c, n, &c.sign(n, b"{}"), NOW)).contains("malformed"),
                "{n}"
            );
        }
    }

    #[test]
    fn a_bad_signature_does_not_consume_the_nonce() {
        let (a, c, other) = (auth(), Client::new(1), Client::new(2));
        let n = NOW.to_string();
        assert_eq!(
            message(run(&a, &c, &n, &other.sign(&n, b"{}"), NOW)),
            "bad signature"
        );
        assert_eq!(run(&a, &c, &n, &c.sign(&n, b"{}"), NOW), Ok(broker()));
    }

    #[test]
    fn out_of_order_nonces_are_accepted_and_old_ones_forgotten() {
        let (a, c) = (auth(), Client::new(1));
        for offset in [3_000u64, 1_000, 2_000] {
            let n = (NOW - offset).to_string();
            assert!(run(&a, &c, &n, &c.sign(&n, b"{}"), NOW).is_ok());
        }
        let later = NOW + 40 * NANO;
        let n = later.to_string();
        assert!(run(&a, &c, &n, &c.sign(&n, b"{}"), later).is_ok());
        let st = a.state_for(parse_public_key(&c.public).unwrap()).unwrap();
        assert_eq!(
            st.lock().unwrap().nonces.len(),
            1,
            "only nonces inside the window are kept"
        );
    }

    #[test]
    fn rate_limit_admits_the_burst_then_refuses_with_retry_after() {
        let (a, c) = (
            Authenticator::new(
                RateLimit {
                    per_second: 10,
                    burst: 3,
                },
                DEFAULT_MAX_NONCES_PER_KEY,
            ),
            Client::new(1),
        );
        let mut results = Vec::new();
        for i in 0..4u64 {
            let n = (NOW + i).to_string();
            results.push(run(&a, &c, &n, &c.sign(&n, b"{}"), NOW));
        }
        assert!(results[..3].iter().all(|r| r.is_ok()));
        assert_eq!(
            results[3],
            Err(AuthError::RateLimited {
                retry_after_secs: 1
            })
        );
        // A tenth of a second refills one token at 10/s.
        let n = (NOW + 10).to_string();
        assert!(run(&a, &c, &n, &c.sign(&n, b"{}"), NOW + NANO / 10).is_ok());
    }

    #[test]
    fn missing_headers_and_unknown_keys_are_named() {
        let (a, c) = (auth(), Client::new(1));
        let n = NOW.to_string();
        let sig = c.sign(&n, b"{}");
        let headers = SignedHeaders {
            public_key: Some(&c.public),
            nonce: Some(&n),
            signature: Some(&sig),
        };
        let r = a.authenticate(&headers, |_| None, "POST", "/v1/customers", b"{}", NOW);
        assert!(message(r.map(|a| a.broker)).contains("unknown public key"));
        let headers = SignedHeaders {
            public_key: Some(&c.public),
            nonce: None,
            signature: Some(&sig),
        };
        let r = a.authenticate(
            &headers,
            |_| Some(broker()),
            "POST",
            "/v1/customers",
            b"{}",
            NOW,
        );
        assert!(message(r.map(|a| a.broker)).contains("missing header X-Nonce"));
    }

    #[test]
    fn the_nonce_bound_follows_the_rate_limit_up_to_the_hard_cap() {
        // D4 defaults: a burst of 200 and 100/s refilled over the 35 s window.
        assert_eq!(nonce_bound(DEFAULTS, DEFAULT_MAX_NONCES_PER_KEY), 3_701);
        let load_test = RateLimit {
            per_second: 10_000,
            burst: 20_000,
        };
        assert_eq!(
            nonce_bound(load_test, DEFAULT_MAX_NONCES_PER_KEY),
            370_001,
            "a raised rate limit raises the bound with it"
        );
        assert_eq!(nonce_bound(load_test, 5_000), 5_000, "the hard cap holds");
    }

    #[test]
    fn the_nonce_bound_refuses_with_its_own_error_and_the_rate_limit_is_not_blamed() {
        let rate = RateLimit {
            per_second: 1_000,
            burst: 1_000,
        };
        let (a, c) = (Authenticator::new(rate, 3), Client::new(1));
        for i in 0..3u64 {
            let n = (NOW - 10 * NANO + i).to_string();
            assert!(run(&a, &c, &n, &c.sign(&n, b"{}"), NOW).is_ok());
        }
        let n = NOW.to_string();
        assert_eq!(
            run(&a, &c, &n, &c.sign(&n, b"{}"), NOW),
            Err(AuthError::NonceMemoryFull {
                bound: 3,
                retry_after_secs: 21,
            }),
            "the oldest nonce leaves the window 20 s and a nanosecond later"
        );
        let later = NOW + 21 * NANO;
        let n = later.to_string();
        assert!(run(&a, &c, &n, &c.sign(&n, b"{}"), later).is_ok());
    }

    #[test]
    fn restored_nonces_stay_spent_and_unused_ones_stay_acceptable() {
        let (a, c) = (auth(), Client::new(1));
        let key = parse_public_key(&c.public).unwrap();
        a.restore([UsedNonce {
            key,
            nonce: NOW - NANO,
        }]);
        let spent = (NOW - NANO).to_string();
        assert!(message(run(&a, &c, &spent, &c.sign(&spent, b"{}"), NOW)).contains("reused"));
        let fresh = (NOW - 2 * NANO).to_string();
        assert_eq!(
            run(&a, &c, &fresh, &c.sign(&fresh, b"{}"), NOW),
            Ok(broker()),
            "an older nonce never used is still inside the window"
        );
    }

    #[test]
    fn a_revoked_key_keeps_its_nonces_until_they_leave_the_window() {
        let (a, c) = (auth(), Client::new(1));
        let n = NOW.to_string();
        assert!(run(&a, &c, &n, &c.sign(&n, b"{}"), NOW).is_ok());
        a.prune(|_| false, NOW + NANO);
        assert_eq!(a.tracked_keys(), 1, "re-adding the key must not reopen {n}");
        assert!(message(run(&a, &c, &n, &c.sign(&n, b"{}"), NOW + NANO)).contains("reused"));
        a.prune(|_| false, NOW + BEHIND_NS + 1);
        assert_eq!(a.tracked_keys(), 0);
    }
}
