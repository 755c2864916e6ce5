//! The `perpsim` command line: serve, keygen, curl, admin, openapi, replay, scenario; its
//! configuration ([`config`]: flags, environment, TOML), the admin subcommands ([`admin`]),
//! the signing HTTP client of `curl`/`admin` ([`client`]), scenario replay ([`replay`]) and
//! the worked examples ([`scenario`]).

pub mod admin;
pub mod client;
pub mod config;
pub mod replay;
pub mod scenario;

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};

use self::admin::AdminCmd;
use self::client::Auth;
use self::config::ServeArgs;
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
        /// The file to write the private key to (refused if it exists).
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
        /// Print only this field of the JSON answer (a dotted path: `customer_code`,
        /// `0.symbol`), strings without quotes: for shell variables.
        #[arg(long)]
        field: Option<String>,
        /// The service's base URL.
        #[arg(long, default_value = DEFAULT_URL, env = "PERPSIM_URL")]
        url: String,
        /// The data dir whose demo broker key signs (when --key is not given).
        #[arg(long, default_value = "./data", env = "PERPSIM_DATA_DIR")]
        data_dir: PathBuf,
        /// The broker's private key, PKCS#8 PEM [default: <data-dir>/demo-broker.key].
        #[arg(long, env = "PERPSIM_KEY")]
        key: Option<PathBuf>,
    },
    /// Drive the admin API (D3): every operation has a subcommand. Its options may come before
    /// or after the subcommand.
    Admin {
        /// The service's base URL.
        #[arg(long, default_value = DEFAULT_URL, env = "PERPSIM_URL", global = true)]
        url: String,
        /// The data dir whose admin token is used (when neither --token nor --token-file is).
        #[arg(
            long,
            default_value = "./data",
            env = "PERPSIM_DATA_DIR",
            global = true
        )]
        data_dir: PathBuf,
        /// File holding the admin token [default: <data-dir>/admin.token].
        #[arg(long, global = true)]
        token_file: Option<PathBuf>,
        /// The admin token itself (instead of --token-file).
        #[arg(
            long,
            env = "PERPSIM_ADMIN_TOKEN",
            hide_env_values = true,
            global = true
        )]
        token: Option<String>,
        #[command(subcommand)]
        action: AdminCmd,
    },
    /// Write the checked-in documents (broker.json, broker.yaml, admin.json, asyncapi.yaml,
    /// scenario.schema.json).
    Openapi {
        /// The directory to write them to.
        #[arg(long, default_value = "openapi")]
        out: PathBuf,
    },
    /// Scenario replay (D11): run SCENARIO into --out (journal, report.json, ledger.csv,
    /// trades.csv, report.html, manifest.json) and print the final state hash; Monte-Carlo
    /// with --seeds; a recorded --journal; `verify` and `summarize`.
    Replay(Box<replay::ReplayArgs>),
    /// Scenarios (D11): `examples` writes the worked examples to run, `check` reads one as a
    /// replay would and runs nothing, `from-journal` turns a recorded session into one.
    #[command(subcommand)]
    Scenario(scenario::ScenarioCmd),
}

/// Runs a parsed command line; the exit code.
pub fn run(cli: Cli) -> Result<i32, String> {
    crate::state::config::audit_switch()?;
    match cli.command {
        Cmd::Serve(args) => crate::server::serve::serve(args.resolve()?).map(|_| 0),
        Cmd::Keygen { out } => keygen(&out).map(|_| 0),
        Cmd::Curl {
            method,
            path,
            body,
            field,
            url,
            data_dir,
            key,
        } => {
            let key = key.unwrap_or_else(|| data_dir.join(secrets::DEMO_KEY_FILE));
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
            print_answer(answer, field.as_deref())
        }
        Cmd::Admin {
            url,
            data_dir,
            token_file,
            token,
            action,
        } => {
            let token = match token {
                Some(t) => t,
                None => {
                    let file =
                        token_file.unwrap_or_else(|| data_dir.join(secrets::ADMIN_TOKEN_FILE));
                    std::fs::read_to_string(&file)
                        .map(|t| t.trim().to_owned())
                        .map_err(|e| {
                            format!(
                                "cannot read the admin token {}: {e} (or pass --token)",
                                file.display()
                            )
                        })?
                }
            };
            let repeat = matches!(action, AdminCmd::ArchiveJournal { all: true });
            let (method, path, body) = admin::request(action)?;
            loop {
                let answer = client::send(&url, Auth::Bearer(&token), method, &path, &body)?;
                if !repeat || !archive_goes_on(&answer) {
                    return print_answer(answer, None);
                }
                print_answer(answer, None)?;
            }
        }
        Cmd::Openapi { out } => crate::server::docs::write(&out).map(|_| 0),
        Cmd::Replay(args) => replay::run(*args),
        Cmd::Scenario(cmd) => scenario::run(cmd),
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

/// Whether `archive-journal --all` sends another request after this answer: a segment was
/// written and ticks old enough remain.
fn archive_goes_on(answer: &client::Answer) -> bool {
    let v: serde_json::Value = match serde_json::from_str(&answer.body) {
        Ok(v) if answer.status < 400 => v,
        _ => return false,
    };
    !v["segment"].is_null() && v["remaining_ticks"].as_u64().is_some_and(|n| n > 0)
}

/// Prints the body (pretty JSON when it is JSON; only `field` of it when given) on stdout and
/// the status on stderr; the exit code: 0, or 1 for HTTP ≥ 400.
fn print_answer(answer: client::Answer, field: Option<&str>) -> Result<i32, String> {
    eprintln!("HTTP {}", answer.status);
    // An error, or a body that is not JSON, is shown whole whatever field was asked for.
    let field = field.filter(|_| answer.status < 400);
    let body = match (
        serde_json::from_str::<serde_json::Value>(&answer.body),
        field,
    ) {
        (Ok(v), Some(path)) => match v.pointer(&format!("/{}", path.replace('.', "/"))) {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => return Err(format!("the answer has no field {path:?}: {v}")),
        },
        (Ok(v), None) => serde_json::to_string_pretty(&v).expect("json prints"),
        (Err(_), _) => answer.body,
    };
    let _ = writeln!(std::io::stdout(), "{body}");
    Ok(if answer.status >= 400 { 1 } else { 0 })
}
