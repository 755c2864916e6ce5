//! The error catalogue (interface §7, D4): one enum, mapped to HTTP status and wire code here
//! and nowhere else.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ErrorCode {
    /// 400: malformed request, unsupported parameter, rule violation.
    Validation,
    /// 400: well-formed order refused by the venue.
    OrderRejected,
    /// 400: insufficient collateral, or a transfer beyond the available balance.
    InsufficientFunds,
    /// 401: signature, key or nonce check failed.
    Unauthorized,
    /// 404: unknown (or another broker's) resource, unknown route.
    NotFound,
    /// 405: the route exists but not with this method.
    MethodNotAllowed,
    /// 409: DELETE on an order that is not open.
    OrderNotCancellable,
    /// 409: a second order with the reference of an open one.
    DuplicateReferenceId,
    /// 409: amend on an order that is not open.
    OrderNotAmendable,
    /// 409: an admin request that conflicts with the current state.
    Conflict,
    /// 413: request body over the limit.
    PayloadTooLarge,
    /// 429: rate limit exceeded.
    RateLimited,
    /// 500: unexpected failure inside the venue.
    ExchangeError,
    /// 502: margin profile not yet provisioned.
    ProfileNotProvisioned,
    /// 503: deposits and withdrawals temporarily unavailable.
    ExchangeUnavailable,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 15] = [
        ErrorCode::Validation,
        ErrorCode::OrderRejected,
        ErrorCode::InsufficientFunds,
        ErrorCode::Unauthorized,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::OrderNotCancellable,
        ErrorCode::DuplicateReferenceId,
        ErrorCode::OrderNotAmendable,
        ErrorCode::Conflict,
        ErrorCode::PayloadTooLarge,
        ErrorCode::RateLimited,
        ErrorCode::ExchangeError,
        ErrorCode::ProfileNotProvisioned,
        ErrorCode::ExchangeUnavailable,
    ];

    /// HTTP status and wire code.
    pub const fn wire(self) -> (u16, &'static str) {
        match self {
            ErrorCode::Validation => (400, "VALIDATION_ERROR"),
            ErrorCode::OrderRejected => (400, "ORDER_REJECTED"),
            ErrorCode::InsufficientFunds => (400, "INSUFFICIENT_FUNDS"),
            ErrorCode::Unauthorized => (401, "UNAUTHORIZED"),
            ErrorCode::NotFound => (404, "NOT_FOUND"),
            ErrorCode::MethodNotAllowed => (405, "METHOD_NOT_ALLOWED"),
            ErrorCode::OrderNotCancellable => (409, "ORDER_NOT_CANCELLABLE"),
            ErrorCode::DuplicateReferenceId => (409, "DUPLICATE_REFERENCE_ID"),
            ErrorCode::OrderNotAmendable => (409, "ORDER_NOT_AMENDABLE"),
            ErrorCode::Conflict => (409, "CONFLICT"),
            ErrorCode::PayloadTooLarge => (413, "PAYLOAD_TOO_LARGE"),
            ErrorCode::RateLimited => (429, "RATE_LIMITED"),
            ErrorCode::ExchangeError => (500, "EXCHANGE_ERROR"),
            ErrorCode::ProfileNotProvisioned => (502, "PROFILE_NOT_PROVISIONED"),
            ErrorCode::ExchangeUnavailable => (503, "EXCHANGE_ERROR"),
        }
    }

    pub const fn status(self) -> u16 {
        self.wire().0
    }

    pub const fn code(self) -> &'static str {
        self.wire().1
    }
}

/// An error with its catalogue code and a message for people. Clients match on the code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{}: {message}", code.code())]
pub struct Error {
    pub code: ErrorCode,
    pub message: String,
}

impl Error {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Error {
            code,
            message: message.into(),
        }
    }

    pub fn validation(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Validation, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Conflict, message)
    }
}

impl From<crate::decimal::DecimalError> for Error {
    fn from(e: crate::decimal::DecimalError) -> Self {
        Error::validation(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_maps_to_a_documented_status_and_an_upper_snake_code() {
        for code in ErrorCode::ALL {
            let (status, wire) = code.wire();
            assert!([400, 401, 404, 405, 409, 413, 429, 500, 502, 503].contains(&status));
            assert!(
                wire.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'),
                "{wire}"
            );
        }
        // interface §7: 503 EXCHANGE_ERROR for unavailable transfers, 500 for the rest.
        assert_eq!(
            ErrorCode::ExchangeUnavailable.wire(),
            (503, "EXCHANGE_ERROR")
        );
        assert_eq!(ErrorCode::ExchangeError.wire(), (500, "EXCHANGE_ERROR"));
    }
}
