//! A keep-alive HTTP client that signs as a broker SDK would (D2) or carries the admin token:
//! what the load tools send with.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signer, SigningKey};
use serde_json::Value;

pub enum Auth {
    Key(SigningKey),
    Admin(String),
}

/// A client on keep-alive connections (one per thread that sends at once).
pub struct Http {
    agent: ureq::Agent,
    url: String,
    /// The last nonce sent: the next is at least one more, so two requests in one
    /// nanosecond still carry distinct nonces.
    last_nonce: AtomicU64,
}

fn now_ns() -> u64 {
    let ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_nanos();
    u64::try_from(ns).expect("before 2554")
}

/// The broker key of load worker `seed`: fixed, so runs are repeatable.
pub fn worker_key(seed: u8) -> SigningKey {
    let mut bytes = [seed; 32];
    bytes[0] = bytes[0].wrapping_add(1);
    SigningKey::from_bytes(&bytes)
}

pub fn public_key(key: &SigningKey) -> String {
    STANDARD.encode(key.verifying_key().as_bytes())
}

impl Http {
    pub fn new(url: &str) -> Self {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        Http {
            agent,
            url: url.to_owned(),
            last_nonce: AtomicU64::new(0),
        }
    }

    /// Sends a request with a raw body; answers the status and the body's text.
    pub fn send(&self, method: &str, path: &str, body: &str, auth: &Auth) -> (u16, String) {
        let mut req = ureq::http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.url))
            .header("Content-Type", "application/json");
        match auth {
            Auth::Key(key) => {
                let now = now_ns();
                let last = self
                    .last_nonce
                    .fetch_update(Relaxed, Relaxed, |last| Some(now.max(last + 1)))
                    .expect("always updated");
                let nonce = now.max(last + 1).to_string();
                let msg =
                    perpsim_api::signing::canonical_message(&nonce, method, path, body.as_bytes());
                req = req
                    .header("X-Public-Key", public_key(key))
                    .header("X-Nonce", nonce)
                    .header("X-Signature", STANDARD.encode(key.sign(&msg).to_bytes()));
            }
            Auth::Admin(token) => req = req.header("Authorization", format!("Bearer {token}")),
        }
        let req = req.body(body.as_bytes().to_vec()).expect("a request");
        let mut resp = self.agent.run(req).expect("the server answers");
        let status = resp.status().as_u16();
        let text = resp.body_mut().read_to_string().unwrap_or_default();
        (status, text)
    }

    /// [`Self::send`] with a JSON body (or none), the answer read as JSON (`null` if it is not).
    pub fn json(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        auth: &Auth,
    ) -> (u16, Value) {
        let body = body.map(Value::to_string).unwrap_or_default();
        let (status, text) = self.send(method, path, &body, auth);
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }
}
