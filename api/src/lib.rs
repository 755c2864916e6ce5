//! perpsim-api: the service around the engine, a folder per area.
//!
//! - [`server`]: the engine host thread ([`server::host`]) owns the engine and the journal;
//!   the poem application ([`server::app`]) serves reads from the published view and sends
//!   commands to the host; [`server::connections`] drives the HTTP/1.1 connections with their
//!   timeouts and bound.
//! - [`signing`]: D2 request authentication and nonces, and the secrets in the data dir.
//! - [`v1`]: the broker REST API, a module per area of §4; [`admin`]: the admin API.
//! - [`contract`], [`wire`], [`errors`], [`pagination`], [`types`]: what the wire carries and
//!   the rules that keep the OpenAPI document exact. API types (poem-openapi objects) live here
//!   and only here; engine components never reach the wire.
//! - [`cli`]: the `perpsim` binary, which wires it together.

pub mod admin;
pub mod cli;
pub mod columns;
pub mod contract;
pub mod errors;
pub mod pagination;
pub mod replay;
pub mod requests;
pub mod server;
pub mod signing;
pub mod state;
pub mod types;
pub mod v1;
pub mod wire;
pub mod ws;
