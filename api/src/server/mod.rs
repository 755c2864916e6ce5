//! Serving: the poem application and its routes ([`app`]), the engine host thread ([`host`]),
//! the HTTP/1.1 accept loop with its timeouts and bound ([`connections`]), start-up and
//! shutdown ([`serve`]), request shape checks ([`request_guard`]), metrics and the served
//! documents ([`docs`]).

pub mod app;
pub mod connections;
pub mod docs;
pub mod host;
pub mod metrics;
pub mod request_guard;
pub mod serve;
