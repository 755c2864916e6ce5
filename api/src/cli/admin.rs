//! `perpsim admin …`: one subcommand per operation of the admin API (D3), each turned into
//! the request the document describes (a test holds the two to each other).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use clap::Subcommand;
use clap::builder::BoolishValueParser;
use serde_json::json;

use crate::signing::parse_public_key;

#[derive(Subcommand, Debug)]
pub enum AdminCmd {
    /// Register a broker with its first public key.
    CreateBroker {
        /// The broker's display name.
        name: String,
        /// Its ed25519 public key, standard base64 (as `perpsim keygen` prints it).
        public_key: String,
    },
    /// Add a public key to a broker.
    AddKey {
        /// The broker's code (as create-broker answered it).
        broker_code: String,
        /// The new ed25519 public key, standard base64.
        public_key: String,
    },
    /// Revoke a broker's public key: its requests are refused from then on.
    RevokeKey {
        /// The broker's code.
        broker_code: String,
        /// The key to revoke, standard base64 (as `perpsim keygen` prints it).
        public_key: String,
    },
    /// Set an instrument's status.
    Status {
        /// The instrument, e.g. BTC-USDC-PERP.
        symbol: String,
        /// active, post_only or trade_halt.
        status: String,
    },
    /// Set an instrument's index price (and mark price, default the index).
    Price {
        /// The instrument, e.g. BTC-USDC-PERP.
        symbol: String,
        /// The new index price, a positive decimal.
        index_price: String,
        /// The new mark price, a positive decimal [default: the index price].
        #[arg(long)]
        mark_price: Option<String>,
    },
    /// Set the preliminary funding rate of an instrument's running hour; it settles at that
    /// rate on the hour instead of the sampled premium.
    Funding {
        /// The instrument, e.g. BTC-USDC-PERP.
        symbol: String,
        /// The rate per hour, a signed decimal fraction below 1 (0.0001 = 0.01 %).
        preliminary_rate: String,
    },
    /// Switch deposits and withdrawals on or off (while off they answer 503 EXCHANGE_ERROR).
    Transfers {
        /// on or off (true/false, yes/no are read too).
        #[arg(action = clap::ArgAction::Set, value_parser = BoolishValueParser::new(), hide_possible_values = true)]
        available: bool,
    },
    /// End a pending deposit or withdrawal as cancelled, as when the venue refuses it.
    CancelTransfer {
        /// The transaction's code (as the deposit or withdrawal answered it).
        transaction_code: String,
    },
    /// Mark a customer's margin profile provisioned at the venue, or not (while not, its
    /// GET margin-profile answers 502 PROFILE_NOT_PROVISIONED).
    Provisioned {
        /// The customer's code.
        customer_code: String,
        /// on or off (true/false, yes/no are read too).
        #[arg(action = clap::ArgAction::Set, value_parser = BoolishValueParser::new(), hide_possible_values = true)]
        provisioned: bool,
    },
    /// Show the simulation clock.
    Clock,
    /// Advance the manual clock, running every timed event in the span in time order.
    Advance {
        /// Whole seconds to advance by, > 0.
        #[arg(long, conflicts_with = "to", required_unless_present = "to")]
        seconds: Option<i64>,
        /// The RFC 3339 instant to advance to, later than now.
        #[arg(long)]
        to: Option<String>,
    },
    /// Show the engine's position (ticks, commands) and its state hash.
    State,
    /// Move the journal's ticks older than the oldest kept snapshot into the archive beside
    /// it (one segment of at most 65 536 ticks a request).
    ArchiveJournal {
        /// Repeat until no tick old enough is left in the journal file.
        #[arg(long)]
        all: bool,
    },
    /// The venue's own accounts (fees, clearing, insurance) and the market maker's, per asset.
    Venue,
    /// The fault plan for rehearsing a client's recovery.
    #[command(subcommand)]
    Faults(FaultsCmd),
}

/// `perpsim admin faults …`
#[derive(Subcommand, Debug)]
pub enum FaultsCmd {
    /// Show the plan in force.
    Show,
    /// Set the plan, replacing the one in force.
    Set {
        /// The plan's JSON (as PUT /admin/v1/faults takes it), or @FILE holding it.
        plan: String,
    },
    /// Turn faults off.
    Clear,
    /// The recovery report: per connection, each strike and how fast the client recovered.
    Report,
}

/// A request to send: method, path, JSON body (empty for none).
pub type Request = (&'static str, String, String);

/// The request a subcommand sends.
pub fn request(action: AdminCmd) -> Result<Request, String> {
    let none = String::new;
    Ok(match action {
        AdminCmd::CreateBroker { name, public_key } => (
            "POST",
            "/admin/v1/brokers".into(),
            json!({"name": name, "public_key": public_key}).to_string(),
        ),
        AdminCmd::AddKey {
            broker_code,
            public_key,
        } => (
            "POST",
            format!("/admin/v1/brokers/{broker_code}/keys"),
            json!({"public_key": public_key}).to_string(),
        ),
        AdminCmd::RevokeKey {
            broker_code,
            public_key,
        } => revoke_request(&broker_code, &public_key)?,
        AdminCmd::Status { symbol, status } => (
            "PUT",
            format!("/admin/v1/instruments/{symbol}/status"),
            json!({"status": status}).to_string(),
        ),
        AdminCmd::Price {
            symbol,
            index_price,
            mark_price,
        } => price_request(&symbol, index_price, mark_price),
        AdminCmd::Funding {
            symbol,
            preliminary_rate,
        } => (
            "PUT",
            format!("/admin/v1/instruments/{symbol}/funding"),
            json!({"preliminary_rate": preliminary_rate}).to_string(),
        ),
        AdminCmd::Transfers { available } => (
            "PUT",
            "/admin/v1/transfers".into(),
            json!({"available": available}).to_string(),
        ),
        AdminCmd::CancelTransfer { transaction_code } => (
            "POST",
            format!("/admin/v1/transfers/{transaction_code}/cancel"),
            none(),
        ),
        AdminCmd::Provisioned {
            customer_code,
            provisioned,
        } => (
            "PUT",
            format!("/admin/v1/customers/{customer_code}/margin-profile/provisioned"),
            json!({"provisioned": provisioned}).to_string(),
        ),
        AdminCmd::Clock => ("GET", "/admin/v1/clock".into(), none()),
        AdminCmd::Advance { seconds, to } => advance_request(seconds, to)?,
        AdminCmd::State => ("GET", "/admin/v1/state".into(), none()),
        AdminCmd::ArchiveJournal { .. } => ("POST", "/admin/v1/journal/archive".into(), none()),
        AdminCmd::Venue => ("GET", "/admin/v1/venue/accounts".into(), none()),
        AdminCmd::Faults(f) => faults_request(f)?,
    })
}

/// `DELETE` of a broker's key, named in the path by its URL-safe base64.
fn revoke_request(broker_code: &str, public_key: &str) -> Result<Request, String> {
    let key = parse_public_key(public_key)
        .map(|k| URL_SAFE_NO_PAD.encode(k.0))
        .ok_or_else(|| "public key must be standard base64 of 32 bytes".to_owned())?;
    let path = format!("/admin/v1/brokers/{broker_code}/keys/{key}");
    Ok(("DELETE", path, String::new()))
}

/// `PUT` of an instrument's index price, and its mark price when given apart.
fn price_request(symbol: &str, index_price: String, mark_price: Option<String>) -> Request {
    let mut body = json!({"index_price": index_price});
    if let Some(m) = mark_price {
        body["mark_price"] = json!(m);
    }
    let path = format!("/admin/v1/instruments/{symbol}/price");
    ("PUT", path, body.to_string())
}

/// An advance of the manual clock by seconds or to a time: exactly one of them.
fn advance_request(seconds: Option<i64>, to: Option<String>) -> Result<Request, String> {
    let body = match (seconds, to) {
        (Some(s), None) => json!({"seconds": s}),
        (None, Some(t)) => json!({"to": t}),
        _ => return Err("give exactly one of --seconds and --to".into()),
    };
    Ok(("POST", "/admin/v1/clock/advance".into(), body.to_string()))
}

fn faults_request(action: FaultsCmd) -> Result<Request, String> {
    let path = "/admin/v1/faults".to_owned();
    Ok(match action {
        FaultsCmd::Show => ("GET", path, String::new()),
        FaultsCmd::Set { plan } => {
            let body = match plan.strip_prefix('@') {
                Some(file) => std::fs::read_to_string(file)
                    .map_err(|e| format!("cannot read the fault plan {file}: {e}"))?,
                None => plan,
            };
            ("PUT", path, body)
        }
        FaultsCmd::Clear => ("DELETE", path, String::new()),
        FaultsCmd::Report => ("GET", format!("{path}/report"), String::new()),
    })
}

#[cfg(test)]
#[path = "admin_tests.rs"]
mod tests;
