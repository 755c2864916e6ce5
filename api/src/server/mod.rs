//! Serving: the poem application and its routes ([`app`]), the engine host thread ([`host`]),
//! the HTTP/1.1 accept loop with its timeouts ([`connections`]) and who may hold a connection
//! ([`admission`]), start-up and shutdown ([`serve`]), request shape checks
//! ([`request_guard`], [`strict_json`]), metrics and the served documents ([`docs`]).

pub mod admission;
pub mod app;
pub mod connections;
pub mod docs;
pub mod host;
pub mod metrics;
pub mod request_guard;
pub mod serve;
pub mod strict_json;
