//! Serving: the poem application composing both APIs and their routes ([`app`]), the
//! HTTP/1.1 accept loop with its timeouts ([`connections`]) and who may hold a connection
//! ([`admission`]), start-up and shutdown ([`serve`]), request shape checks
//! ([`request_guard`], bodies against their schema in `contract::schema_check`; strict JSON
//! is `contract::strict_json`), the checked-in documents ([`docs`]) and the served ones with the
//! /docs page ([`docs_page`]), the venue console ([`console`]). The engine host thread and the
//! shared state are `state`'s.

pub mod admission;
pub mod app;
pub mod connections;
pub mod console;
pub mod docs;
pub mod docs_page;
pub mod request_guard;
pub mod serve;
