//! The request-to-command layer: each state-changing body as the APIs document it, read by
//! the same types wherever it comes from (the broker API, the admin API, a scenario's
//! events), and the command it asks for. Below `v1`, `admin` and `replay`, which all build
//! their commands here, so a scenario's event and the request it stands for cannot differ.

pub mod instruments;
pub mod money;
pub mod orders;
pub mod profiles;
