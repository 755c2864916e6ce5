//! The `perpsim` command line: serve, keygen, curl, admin, openapi, replay; its configuration
//! ([`config`]: flags, environment, TOML), the signing HTTP client of `curl`/`admin`
//! ([`client`]) and scenario replay ([`replay`]).

pub mod client;
pub mod config;
pub mod replay;

use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use clap::{Parser, Subcommand};
use serde_json::json;

use self::client::Auth;
use self::config::ServeArgs;
use crate::signing::parse_public_key;
use crate::signing::secrets;

#[derive(Parser, Debug)]
#[command(
    name = "perpsim",
    version,
    about = "A simulator of a perpetual-derivatives venue behind the Broker Derivatives Trading Service Interface."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Cmd,
}

const DEFAULT_URL: &str = "http://127.0.0.1:8080";

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Run the service (embedded defaults: 127.0.0.1:8080, ./data, realtime clock, market maker
    /// and random-walk price feed on).
    Serve(Box<ServeArgs>),
    /// Create an ed25519 key pair: the private key as PKCS#8 PEM in FILE (mode 0600); prints
    /// the public key in the base64 form the admin API and X-Public-Key take.
    Keygen {
        #[arg(long)]
        out: PathBuf,
    },
    /// Send one signed request and print the JSON answer (status line on stderr; exit status
    /// non-zero for HTTP ≥ 400). Example: perpsim curl GET /v1/instruments
    Curl {
        /// GET, POST, PUT, PATCH or DELETE.
        method: String,
        /// Path and query, e.g. /v1/customers?limit=10 (the leading slash may be left out).
        path: String,
        /// JSON body.
        body: Option<String>,
        #[arg(long, default_value = DEFAULT_URL, env = "PERPSIM_URL")]
        url: String,
        #[arg(long, default_value = "./data/demo-broker.key", env = "PERPSIM_KEY")]
        key: PathBuf,
    },
    /// Drive the admin API.
    Admin {
        #[arg(long, default_value = DEFAULT_URL, env = "PERPSIM_URL")]
        url: String,
        /// File holding the admin token.
        #[arg(long, default_value = "./data/admin.token")]
        token_file: PathBuf,
        /// The admin token itself (instead of --token-file).
        #[arg(long, env = "PERPSIM_ADMIN_TOKEN", hide_env_values = true)]
        token: Option<String>,
        #[command(subcommand)]
        action: AdminCmd,
    },
    /// Write the checked-in documents (broker.json, broker.yaml, admin.json, asyncapi.yaml,
    /// scenario.schema.json).
    Openapi {
        #[arg(long, default_value = "openapi")]
        out: PathBuf,
    },
    /// Scenario replay (D11): run SCENARIO into --out (journal, report.json, ledger.csv,
    /// trades.csv, report.html, manifest.json) and print the final state hash; Monte-Carlo
    /// with --seeds; a recorded --journal; `verify` and `summarize`.
    Replay(Box<replay::ReplayArgs>),
}

#[derive(Subcommand, Debug)]
pub enum AdminCmd {
    /// Register a broker with its first public key (standard base64).
    CreateBroker { name: String, public_key: String },
    /// Add a public key to a broker.
    AddKey {
        broker_code: String,
        public_key: String,
    },
    /// Revoke a broker's public key (standard base64, as shown by keygen).
    RevokeKey {
        broker_code: String,
        public_key: String,
    },
    /// Set an instrument's status: active, post_only or trade_halt.
    Status { symbol: String, status: String },
    /// Set an instrument's index price (and mark price, default the index).
    Price {
        symbol: String,
        index_price: String,
        #[arg(long)]
        mark_price: Option<String>,
    },
    /// Show the simulation clock.
    Clock,
    /// Advance the manual clock by --seconds or to --to.
    Advance {
        #[arg(long)]
        seconds: Option<i64>,
        #[arg(long)]
        to: Option<String>,
    },
    /// Show the engine's position and state hash.
    State,
    /// The venue's own accounts (fees, clearing, insurance) per asset.
    Venue,
    /// The fault plan for rehearsing a client's recovery (issue 25).
    #[command(subcommand)]
    Faults(FaultsCmd),
}

/// `perpsim admin faults …`
#[derive(Subcommand, Debug)]
pub enum FaultsCmd {
    /// Show the plan in force.
    Show,
    /// Set the plan: its JSON (as PUT /admin/v1/faults takes it), or @FILE holding it.
    Set { plan: String },
    /// Turn faults off.
    Clear,
    /// The recovery report: per connection, each strike and how fast the client recovered.
    Report,
}

/// Runs a parsed command line; the exit code.
pub fn run(cli: Cli) -> Result<i32, String> {
    match cli.command {
        Cmd::Serve(args) => crate::server::serve::serve(args.resolve()?).map(|_| 0),
        Cmd::Keygen { out } => keygen(&out).map(|_| 0),
        Cmd::Curl {
            method,
            path,
            body,
            url,
            key,
        } => {
            let key = secrets::load_signing_key(&key)?;
            // `v1/instruments` means `/v1/instruments`: the path is signed as it is sent.
            let path = match path.starts_with('/') {
                true => path,
                false => format!("/{path}"),
            };
            let answer = client::send(
                &url,
                Auth::Signed(&key),
                &method,
                &path,
                body.as_deref().unwrap_or(""),
            )?;
            Ok(print_answer(answer))
        }
        Cmd::Admin {
            url,
            token_file,
            token,
            action,
        } => {
            let token = match token {
                Some(t) => t,
                None => std::fs::read_to_string(&token_file)
                    .map(|t| t.trim().to_owned())
                    .map_err(|e| {
                        format!(
                            "cannot read the admin token {}: {e} (or pass --token)",
                            token_file.display()
                        )
                    })?,
            };
            let (method, path, body) = admin_request(action)?;
            Ok(print_answer(client::send(
                &url,
                Auth::Bearer(&token),
                method,
                &path,
                &body,
            )?))
        }
        Cmd::Openapi { out } => crate::server::docs::write(&out).map(|_| 0),
        Cmd::Replay(args) => replay::run(*args),
    }
}

fn keygen(out: &Path) -> Result<(), String> {
    let key = secrets::generate_signing_key();
    secrets::write_secret(out, secrets::signing_key_pem(&key).as_bytes())?;
    println!(
        "{}",
        crate::signing::encode_public_key(&perpsim_core::ids::PublicKey(
            key.verifying_key().to_bytes()
        ))
    );
    eprintln!("private key written to {} (mode 0600)", out.display());
    Ok(())
}

/// Prints the body (pretty JSON when it is JSON) on stdout and the status on stderr.
fn print_answer(answer: client::Answer) -> i32 {
    eprintln!("HTTP {}", answer.status);
    let body = match serde_json::from_str::<serde_json::Value>(&answer.body) {
        Ok(v) => serde_json::to_string_pretty(&v).expect("json prints"),
        Err(_) => answer.body,
    };
    let _ = writeln!(std::io::stdout(), "{body}");
    if answer.status >= 400 { 1 } else { 0 }
}

fn admin_request(action: AdminCmd) -> Result<(&'static str, String, String), String> {
    let url_key = |k: &str| {
        parse_public_key(k)
            .map(|k| URL_SAFE_NO_PAD.encode(k.0))
            .ok_or_else(|| "public key must be standard base64 of 32 bytes".to_owned())
    };
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
        } => (
            "DELETE",
            format!(
                "/admin/v1/brokers/{broker_code}/keys/{}",
                url_key(&public_key)?
            ),
            String::new(),
        ),
        AdminCmd::Status { symbol, status } => (
            "PUT",
            format!("/admin/v1/instruments/{symbol}/status"),
            json!({"status": status}).to_string(),
        ),
        AdminCmd::Price {
            symbol,
            index_price,
            mark_price,
        } => {
            let mut body = json!({"index_price": index_price});
            if let Some(m) = mark_price {
                body["mark_price"] = json!(m);
            }
            (
                "PUT",
                format!("/admin/v1/instruments/{symbol}/price"),
                body.to_string(),
            )
        }
        AdminCmd::Clock => ("GET", "/admin/v1/clock".into(), String::new()),
        AdminCmd::Advance { seconds, to } => {
            let body = match (seconds, to) {
                (Some(s), None) => json!({"seconds": s}),
                (None, Some(t)) => json!({"to": t}),
                _ => return Err("give exactly one of --seconds and --to".into()),
            };
            ("POST", "/admin/v1/clock/advance".into(), body.to_string())
        }
        AdminCmd::State => ("GET", "/admin/v1/state".into(), String::new()),
        AdminCmd::Venue => ("GET", "/admin/v1/venue/accounts".into(), String::new()),
        AdminCmd::Faults(f) => faults_request(f)?,
    })
}

fn faults_request(action: FaultsCmd) -> Result<(&'static str, String, String), String> {
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
