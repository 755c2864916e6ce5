//! perpsim-api: the service around the engine.
//!
//! The engine host thread ([`host`]) owns the engine and the journal; the poem application
//! ([`app`]) authenticates requests ([`auth`]), serves reads from the published view and sends
//! commands to the host. API types (poem-openapi objects) live here and only here; engine
//! components never reach the wire; [`contract`] holds the rules that keep the OpenAPI
//! document exact. [`connections`] drives the HTTP/1.1 connections with
//! their timeouts and bound. The `perpsim` binary ([`cli`]) wires it together.

pub mod admin;
pub mod app;
pub mod auth;
pub mod cli;
pub mod client;
pub mod config;
pub mod connections;
pub mod contract;
pub mod docs;
pub mod errors;
pub mod host;
pub mod metrics;
pub mod pagination;
pub mod request_guard;
pub mod secrets;
pub mod serve;
pub mod types;
pub mod v1;
pub mod wire;
