//! Request signing (interface §5, D2): the checks in their order, with the clock passed in.
//!
//! Order of work for a request: body limit (in the middleware), the address's budget of
//! failures ([`address`]), key lookup, whether the key's rate limit has a request left, nonce
//! form and window, nonce not yet seen, signature (`verify_strict`), and only then are the
//! key's token spent and the nonce recorded: a request whose signature fails never consumes
//! a nonce or its key's budget, and is charged to its address instead (D9). Nonce memory
//! holds only nonces inside the window, and each key's memory is bounded by what its rate
//! limit can admit in that window (with a hard cap).
//!
//! This memory is the fast check; the durable one is the journal's nonce table. An admitted
//! request carries its [`Admission`], and is answered only once its nonce is journaled (with
//! its command, or on its own), so a restart rebuilds exactly the nonces that were spent.
//! Reads are treated exactly as writes (a captured read replayed after a restart would
//! otherwise hand its holder fresh data): their data comes from the published view, and only
//! the answer waits for the group commit its nonce rides in. Start-up loads the table's window
//! (nonces at or after the wall clock less 30 s) before listening, so a nonce spent before a
//! SIGTERM or a `kill -9` stays spent and one never used stays acceptable, in any order; each
//! write transaction forgets nonces older than the window plus 5 s. A crash between a
//! nonce's journaling and its answer leaves the client without an answer and the request
//! spent, which is safe; the reverse (an effect without its nonce) cannot happen.

pub mod address;
pub mod secrets;

pub use address::{ClientAddress, FailureBudget};

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signature, VerifyingKey};
use perpsim_core::ErrorCode;
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
    /// 429: the request's address spent its budget of failed authentications; nothing was
    /// verified.
    TooManyFailures { retry_after_secs: u64 },
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

impl AuthError {
    /// The metrics' reason label.
    pub fn reason(&self) -> &'static str {
        match self {
            AuthError::Unauthorized(_) => "unauthorized",
            AuthError::RateLimited { .. } => "rate_limited",
            AuthError::NonceMemoryFull { .. } => "nonce_memory_full",
            AuthError::TooManyFailures { .. } => "too_many_failures",
        }
    }

    /// The error code a refusal carries, on REST and on the channels alike.
    pub fn code(&self) -> ErrorCode {
        match self {
            AuthError::Unauthorized(_) => ErrorCode::Unauthorized,
            _ => ErrorCode::RateLimited,
        }
    }

    /// What the client is told.
    pub fn message(&self) -> String {
        match self {
            AuthError::Unauthorized(message) => message.clone(),
            AuthError::RateLimited { .. } => "rate limit exceeded; retry later".into(),
            AuthError::NonceMemoryFull { bound, .. } => format!(
                "nonce memory full: this public key already spent {bound} nonces inside the \
                 35 s window (--max-nonces-per-key); retry when the oldest leaves it"
            ),
            AuthError::TooManyFailures { .. } => "too many failed authentications from this \
                address (--auth-failure-rate); retry later"
                .into(),
        }
    }

    /// Seconds until a retry may be admitted (the `Retry-After` of a 429).
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            AuthError::Unauthorized(_) => None,
            AuthError::RateLimited { retry_after_secs }
            | AuthError::NonceMemoryFull {
                retry_after_secs, ..
            }
            | AuthError::TooManyFailures { retry_after_secs } => Some(*retry_after_secs),
        }
    }
}

fn unauthorized(msg: impl Into<String>) -> AuthError {
    AuthError::Unauthorized(msg.into())
}

fn reused() -> AuthError {
    unauthorized("nonce reused: this public key has already used it")
}

/// The three signing headers as received.
pub struct SignedHeaders<'a> {
    pub public_key: Option<&'a str>,
    pub nonce: Option<&'a str>,
    pub signature: Option<&'a str>,
}

/// A signed request as the checks see it: its headers, what they sign, and where it came
/// from (a failure is charged there).
pub struct Attempt<'a> {
    pub headers: SignedHeaders<'a>,
    pub method: &'a str,
    pub path_and_query: &'a str,
    pub body: &'a [u8],
    pub from: ClientAddress,
}

/// Token bucket settings per public key (D4: 100 requests/s, bursts of 200).
#[derive(Debug, Clone, Copy)]
pub struct RateLimit {
    pub per_second: u32,
    pub burst: u32,
}

/// A token bucket: `burst` tokens, refilled at `per_second`. Tokens are counted in
/// nano-tokens, so refills are exact integer arithmetic.
#[derive(Debug, Clone, Copy)]
pub struct Bucket {
    tokens_nano: u64,
    refilled_at_ns: u64,
}

impl Bucket {
    pub fn full_of(rate: RateLimit) -> Self {
        Bucket {
            tokens_nano: u64::from(rate.burst) * NANO,
            refilled_at_ns: 0,
        }
    }

    fn refill(&mut self, rate: RateLimit, now_ns: u64) {
        let cap = u64::from(rate.burst) * NANO;
        let elapsed = now_ns.saturating_sub(self.refilled_at_ns);
        let refill = elapsed.saturating_mul(u64::from(rate.per_second));
        self.tokens_nano = self.tokens_nano.saturating_add(refill).min(cap);
        self.refilled_at_ns = self.refilled_at_ns.max(now_ns);
    }

    /// `Err(seconds)` until a token is there, without taking it.
    pub fn peek(&mut self, rate: RateLimit, now_ns: u64) -> Result<(), u64> {
        self.refill(rate, now_ns);
        if self.tokens_nano >= NANO {
            return Ok(());
        }
        let wait_ns = (NANO - self.tokens_nano).div_ceil(u64::from(rate.per_second));
        Err(wait_ns.div_ceil(NANO).max(1))
    }

    /// Takes a token, or `Err(seconds)` until one is there.
    pub fn take(&mut self, rate: RateLimit, now_ns: u64) -> Result<(), u64> {
        self.peek(rate, now_ns)?;
        self.tokens_nano -= NANO;
        Ok(())
    }

    /// Whether it holds its whole burst again.
    pub fn full(&mut self, rate: RateLimit, now_ns: u64) -> bool {
        self.refill(rate, now_ns);
        self.tokens_nano == u64::from(rate.burst) * NANO
    }
}

struct KeyState {
    key: VerifyingKey,
    bucket: Bucket,
    nonces: BTreeSet<u64>,
}

pub struct Authenticator {
    rate: RateLimit,
    /// Failed authentications per client address.
    failures: FailureBudget,
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
    pub fn new(rate: RateLimit, failures: RateLimit, max_nonces_per_key: u64) -> Self {
        assert!(
            rate.per_second > 0 && rate.burst > 0 && max_nonces_per_key > 0,
            "rate limit and nonce bound must admit requests"
        );
        assert!(
            failures.per_second > 0 && failures.burst > 0,
            "the failure budget must admit a failure"
        );
        Authenticator {
            rate,
            failures: FailureBudget::new(failures),
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
    /// `now_ns` is wall-clock time in nanoseconds. A 401 is charged to the request's address;
    /// an address with no failure left is refused before any check.
    pub fn authenticate(
        &self,
        attempt: &Attempt<'_>,
        lookup: impl Fn(&PublicKey) -> Option<BrokerCode>,
        now_ns: u64,
    ) -> Result<Admission, AuthError> {
        if let Err(retry_after_secs) = self.failures.check(attempt.from, now_ns) {
            return Err(AuthError::TooManyFailures { retry_after_secs });
        }
        let verdict = self.verify(attempt, lookup, now_ns);
        if let Err(AuthError::Unauthorized(_)) = verdict {
            self.failures.charge(attempt.from, now_ns);
        }
        verdict
    }

    /// The checks in their order; only a request that passes them all spends its key's
    /// token and its nonce.
    fn verify(
        &self,
        attempt: &Attempt<'_>,
        lookup: impl Fn(&PublicKey) -> Option<BrokerCode>,
        now_ns: u64,
    ) -> Result<Admission, AuthError> {
        let headers = &attempt.headers;
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
            st.bucket
                .peek(self.rate, now_ns)
                .map_err(|retry_after_secs| AuthError::RateLimited { retry_after_secs })?;
            check_window(nonce, now_ns)?;
            if st.nonces.contains(&nonce) {
                return Err(reused());
            }
            st.key
        };
        // Verification runs outside every lock: concurrent requests of one key verify in parallel.
        let signature = parse_signature(sig_text)?;
        let message = canonical_message(
            nonce_text,
            attempt.method,
            attempt.path_and_query,
            attempt.body,
        );
        verifying_key
            .verify_strict(&message, &signature)
            .map_err(|_| unauthorized("bad signature"))?;
        self.spend(&mut state.lock().expect("key state lock"), nonce, now_ns)?;
        Ok(Admission {
            broker,
            used: UsedNonce { key, nonce },
            journaled: AtomicBool::new(false),
        })
    }

    /// A verified request spends its key's token and its nonce.
    fn spend(&self, st: &mut KeyState, nonce: u64, now_ns: u64) -> Result<(), AuthError> {
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
        if st.nonces.contains(&nonce) {
            return Err(reused());
        }
        st.bucket
            .take(self.rate, now_ns)
            .map_err(|retry_after_secs| AuthError::RateLimited { retry_after_secs })?;
        st.nonces.insert(nonce);
        Ok(())
    }

    fn state_for(&self, key: PublicKey) -> Option<Arc<Mutex<KeyState>>> {
        let mut keys = self.keys.lock().expect("key map lock");
        if let Some(state) = keys.get(&key) {
            return Some(state.clone());
        }
        let verifying_key = VerifyingKey::from_bytes(&key.0).ok()?;
        let state = Arc::new(Mutex::new(KeyState {
            key: verifying_key,
            bucket: Bucket::full_of(self.rate),
            nonces: BTreeSet::new(),
        }));
        keys.insert(key, state.clone());
        Some(state)
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
        run_from(auth, c, nonce, sig, now, HOME)
    }

    const HOME: [u8; 4] = [192, 0, 2, 1];

    fn attempt<'a>(headers: SignedHeaders<'a>, from: [u8; 4]) -> Attempt<'a> {
        Attempt {
            headers,
            method: "POST",
            path_and_query: "/v1/customers",
            body: b"{}",
            from: ClientAddress::from(std::net::IpAddr::from(from)),
        }
    }

    fn run_from(
        auth: &Authenticator,
        c: &Client,
        nonce: &str,
        sig: &str,
        now: u64,
        from: [u8; 4],
    ) -> Result<BrokerCode, AuthError> {
        let headers = SignedHeaders {
            public_key: Some(&c.public),
            nonce: Some(nonce),
            signature: Some(sig),
        };
        let known = parse_public_key(&c.public).unwrap();
        auth.authenticate(&attempt(headers, from), |k| (*k == known).then(broker), now)
            .map(|admitted| admitted.broker)
    }

    const DEFAULTS: RateLimit = RateLimit {
        per_second: 100,
        burst: 200,
    };

    const FAILURES: RateLimit = RateLimit {
        per_second: 10,
        burst: 100,
    };

    fn auth() -> Authenticator {
        Authenticator::new(DEFAULTS, FAILURES, DEFAULT_MAX_NONCES_PER_KEY)
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
                FAILURES,
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
        let r = a.authenticate(&attempt(headers, HOME), |_| None, NOW);
        assert!(message(r.map(|a| a.broker)).contains("unknown public key"));
        let headers = SignedHeaders {
            public_key: Some(&c.public),
            nonce: None,
            signature: Some(&sig),
        };
        let r = a.authenticate(&attempt(headers, HOME), |_| Some(broker()), NOW);
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
        let (a, c) = (Authenticator::new(rate, FAILURES, 3), Client::new(1));
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

    /// D9: garbage naming a key is charged to the address it came from, never to the key:
    /// the key's owner keeps its whole burst while the sender runs out of failures and is
    /// refused before any verification; another address is untouched.
    #[test]
    fn a_failed_signature_is_charged_to_its_address_never_to_the_key_it_names() {
        let (a, c, forger) = (auth(), Client::new(1), Client::new(2));
        let attacker = [198, 51, 100, 7];
        let mut refused = 0;
        for i in 0..(FAILURES.burst as u64 + 50) {
            let n = (NOW + i).to_string();
            match run_from(&a, &c, &n, &forger.sign(&n, b"{}"), NOW, attacker) {
                Err(AuthError::Unauthorized(m)) => assert_eq!(m, "bad signature"),
                Err(AuthError::TooManyFailures { retry_after_secs }) => {
                    assert_eq!(retry_after_secs, 1);
                    refused += 1;
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(refused, 50, "the burst of failures, then refusals");
        for i in 0..DEFAULTS.burst as u64 {
            let n = (NOW + 1_000 + i).to_string();
            assert_eq!(
                run(&a, &c, &n, &c.sign(&n, b"{}"), NOW),
                Ok(broker()),
                "the owner's request {i} of its burst"
            );
        }
        let n = (NOW + 5_000).to_string();
        assert!(matches!(
            run_from(&a, &c, &n, &c.sign(&n, b"{}"), NOW, attacker),
            Err(AuthError::TooManyFailures { .. })
        ));
        let later = NOW + NANO;
        assert!(
            run_from(
                &a,
                &c,
                &later.to_string(),
                &c.sign(&later.to_string(), b"{}"),
                later,
                attacker
            )
            .is_ok(),
            "a second refills ten failures and a good request spends none"
        );
    }

    /// The failure table is bounded: refilled buckets leave first, then the fullest.
    #[test]
    fn the_failure_table_holds_at_most_its_bound_of_addresses() {
        let budget = FailureBudget::new(FAILURES);
        for i in 0..(address::MAX_ADDRESSES as u32 + 10) {
            let ip = std::net::Ipv4Addr::from(0x0a00_0000 + i);
            budget.charge(ClientAddress::from(std::net::IpAddr::V4(ip)), NOW);
        }
        assert_eq!(budget.tracked(), address::MAX_ADDRESSES);
        // Ten seconds on, every bucket is full again: a new one finds room by dropping them.
        let ip = std::net::IpAddr::from([203, 0, 113, 9]);
        budget.charge(ClientAddress::from(ip), NOW + 10 * NANO);
        assert_eq!(budget.tracked(), 1);
    }
}
