//! The HTTP client behind `perpsim curl` and `perpsim admin`: signs like a broker SDK would.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signer, SigningKey};

use crate::signing::{HEADER_NONCE, HEADER_PUBLIC_KEY, HEADER_SIGNATURE, canonical_message};

pub struct Answer {
    pub status: u16,
    pub body: String,
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into()
}

pub enum Auth<'a> {
    Signed(&'a SigningKey),
    Bearer(&'a str),
}

/// Sends one request; `path` includes the query string exactly as it will be signed.
pub fn send(
    base_url: &str,
    auth: Auth<'_>,
    method: &str,
    path: &str,
    body: &str,
) -> Result<Answer, String> {
    let method = method.to_ascii_uppercase();
    let mut request = ureq::http::Request::builder()
        .method(method.as_str())
        .uri(format!("{}{path}", base_url.trim_end_matches('/')));
    if !body.is_empty() {
        request = request.header("Content-Type", "application/json");
    }
    match auth {
        Auth::Signed(key) => {
            let nonce = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .expect("clock after 1970")
                .as_nanos()
                .to_string();
            let signature = key.sign(&canonical_message(&nonce, &method, path, body.as_bytes()));
            request = request
                .header(
                    HEADER_PUBLIC_KEY,
                    STANDARD.encode(key.verifying_key().as_bytes()),
                )
                .header(HEADER_NONCE, nonce)
                .header(HEADER_SIGNATURE, STANDARD.encode(signature.to_bytes()));
        }
        Auth::Bearer(token) => request = request.header("Authorization", format!("Bearer {token}")),
    }
    let request = request
        .body(body.as_bytes().to_vec())
        .map_err(|e| format!("bad request: {e}"))?;
    let mut response = agent().run(request).map_err(|e| {
        format!(
            "{method} {base_url}{path} failed: {e}; is perpsim serving at {base_url}? \
             (--url or PERPSIM_URL)"
        )
    })?;
    let status = response.status().as_u16();
    let body = response
        .body_mut()
        .read_to_string()
        .map_err(|e| format!("cannot read the answer: {e}"))?;
    Ok(Answer { status, body })
}
