//! The error body of D4 on every error path, and the one place where catalogue codes
//! (`perpsim_core::ErrorCode`) become HTTP responses.

use perpsim_core::{Error, ErrorCode};
use poem::Response;
use poem::http::{StatusCode, header};
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object};

/// `{"code", "message"}`: clients match on `code`; `message` is for people.
#[derive(Object, Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[oai(example)]
pub struct ErrorBody {
    /// Catalogue code, e.g. VALIDATION_ERROR, NOT_FOUND, UNAUTHORIZED.
    pub code: String,
    /// Human-readable explanation naming the field, rule or check that failed.
    pub message: String,
}

impl poem_openapi::types::Example for ErrorBody {
    fn example() -> Self {
        ErrorBody {
            code: "VALIDATION_ERROR".into(),
            message: "amount must be a decimal string in plain notation".into(),
        }
    }
}

/// Every error an endpoint can answer, by HTTP status.
#[derive(ApiResponse, Debug)]
pub enum ApiError {
    /// VALIDATION_ERROR (malformed request, unknown field or query parameter, bad value or
    /// cursor), ORDER_REJECTED, INSUFFICIENT_FUNDS.
    #[oai(status = 400)]
    BadRequest(Json<ErrorBody>),
    /// UNAUTHORIZED: missing header, unknown key, bad signature, or nonce malformed, too old,
    /// too far ahead or reused.
    #[oai(status = 401)]
    Unauthorized(Json<ErrorBody>),
    /// NOT_FOUND: unknown resource, or one that belongs to another broker.
    #[oai(status = 404)]
    NotFound(Json<ErrorBody>),
    /// CONFLICT and the other 409 codes of the catalogue.
    #[oai(status = 409)]
    Conflict(Json<ErrorBody>),
    /// PAYLOAD_TOO_LARGE: request body over 64 KiB.
    #[oai(status = 413)]
    PayloadTooLarge(Json<ErrorBody>),
    /// RATE_LIMITED: over the per-key rate; see Retry-After.
    #[oai(status = 429)]
    RateLimited(Json<ErrorBody>, #[oai(header = "Retry-After")] u64),
    /// EXCHANGE_ERROR: unexpected failure inside the venue.
    #[oai(status = 500)]
    Internal(Json<ErrorBody>),
    /// PROFILE_NOT_PROVISIONED: the margin profile is not yet provisioned at the venue.
    #[oai(status = 502)]
    BadGateway(Json<ErrorBody>),
    /// EXCHANGE_ERROR: temporarily unavailable; retry later.
    #[oai(status = 503)]
    Unavailable(Json<ErrorBody>),
}

impl ApiError {
    pub fn rate_limited(retry_after_secs: u64) -> Self {
        ApiError::RateLimited(
            body(ErrorCode::RateLimited, "rate limit exceeded; retry later"),
            retry_after_secs,
        )
    }
}

fn body(code: ErrorCode, message: impl Into<String>) -> Json<ErrorBody> {
    Json(ErrorBody {
        code: code.code().to_owned(),
        message: message.into(),
    })
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        let json = body(e.code, e.message);
        match e.code.status() {
            400 => ApiError::BadRequest(json),
            401 => ApiError::Unauthorized(json),
            404 => ApiError::NotFound(json),
            409 => ApiError::Conflict(json),
            413 => ApiError::PayloadTooLarge(json),
            429 => ApiError::RateLimited(json, 1),
            502 => ApiError::BadGateway(json),
            503 => ApiError::Unavailable(json),
            _ => ApiError::Internal(json),
        }
    }
}

/// A JSON error response outside poem-openapi's typed responses (middleware, fallbacks).
pub fn error_response(code: ErrorCode, message: impl Into<String>) -> Response {
    Response::builder()
        .status(StatusCode::from_u16(code.status()).expect("catalogue statuses are valid"))
        .content_type("application/json")
        .body(body_text(code, &message.into()))
}

/// The D4 body as JSON text, for answers written outside poem (a refused connection).
pub fn body_text(code: ErrorCode, message: &str) -> String {
    serde_json::json!({"code": code.code(), "message": message}).to_string()
}

/// The catalogue code for an error status that did not come from our own handlers (router,
/// extractors). 415 is a malformed request to a client, so it is answered as 400.
fn code_for_foreign_status(status: StatusCode) -> ErrorCode {
    match status.as_u16() {
        400 | 411 | 415 | 422 => ErrorCode::Validation,
        401 => ErrorCode::Unauthorized,
        404 => ErrorCode::NotFound,
        405 => ErrorCode::MethodNotAllowed,
        413 => ErrorCode::PayloadTooLarge,
        429 => ErrorCode::RateLimited,
        503 => ErrorCode::ExchangeUnavailable,
        _ => ErrorCode::ExchangeError,
    }
}

/// Rewrites any error response that is not already our JSON body (poem's router, poem-openapi's
/// parsers) into the D4 shape, keeping its message.
pub async fn normalize(resp: Response) -> Response {
    let status = resp.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return resp;
    }
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if is_json {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let text = body.into_string().await.unwrap_or_default();
    let code = code_for_foreign_status(parts.status);
    let message = match (text.trim(), code) {
        ("", ErrorCode::NotFound) => "no such route".to_owned(),
        ("", ErrorCode::MethodNotAllowed) => "method not allowed on this route".to_owned(),
        ("", _) => parts
            .status
            .canonical_reason()
            .unwrap_or("error")
            .to_owned(),
        (t, _) => t.to_owned(),
    };
    let mut out = error_response(code, message);
    if let Some(v) = parts.headers.get(header::RETRY_AFTER) {
        out.headers_mut().insert(header::RETRY_AFTER, v.clone());
    }
    out
}

/// Converts a poem error (routing and extraction failures) into the D4 body.
pub fn from_poem_error(err: poem::Error) -> Response {
    if err.is_from_response() {
        return err.into_response();
    }
    error_response(code_for_foreign_status(err.status()), err.to_string())
}
