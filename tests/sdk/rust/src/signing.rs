//! D2 request signing for the progenitor client: the few lines to copy. Every /v1 request
//! carries X-Public-Key, X-Nonce (nanosecond Unix time, never reused) and X-Signature: ed25519
//! over "{nonce}\n{METHOD}\n{path_and_query}\n{body}".

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::pkcs8::DecodePrivateKey;
use ed25519_dalek::{Signer as _, SigningKey};
use reqwest::header::HeaderValue;

/// The client's inner value: the key, and the last nonce it used (shared by clones).
#[derive(Clone)]
pub struct Signer {
    key: Arc<SigningKey>,
    last: Arc<AtomicU64>,
}

impl Signer {
    pub fn from_pem(pem: &str) -> Self {
        let key = SigningKey::from_pkcs8_pem(pem).expect("a PKCS#8 PEM ed25519 key");
        Signer {
            key: Arc::new(key),
            last: Arc::new(AtomicU64::new(0)),
        }
    }
}

/// Shows the public key only, never the private one.
impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let public = STANDARD.encode(self.key.verifying_key().as_bytes());
        f.debug_struct("Signer")
            .field("public_key", &public)
            .finish()
    }
}

/// The pre-hook: signs `request` in place.
pub fn sign(signer: &Signer, request: &mut reqwest::Request) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    // Nonces strictly increase, so two requests never share one.
    let previous = signer.last.fetch_max(now, Ordering::SeqCst);
    let nonce = if previous >= now {
        signer.last.fetch_add(1, Ordering::SeqCst) + 1
    } else {
        now
    };
    let url = request.url();
    let target = match url.query() {
        Some(query) => format!("{}?{query}", url.path()),
        None => url.path().to_owned(),
    };
    let mut message = format!("{nonce}\n{}\n{target}\n", request.method()).into_bytes();
    message.extend_from_slice(request.body().and_then(|b| b.as_bytes()).unwrap_or(&[]));
    let signature = STANDARD.encode(signer.key.sign(&message).to_bytes());
    let public = STANDARD.encode(signer.key.verifying_key().as_bytes());
    let headers = request.headers_mut();
    for (name, value) in [
        ("X-Public-Key", public),
        ("X-Nonce", nonce.to_string()),
        ("X-Signature", signature),
    ] {
        headers.insert(name, HeaderValue::from_str(&value).expect("ascii"));
    }
}
