use clap::{CommandFactory, Parser};

use super::request;
use crate::cli::{Cli, Cmd};

/// The admin document's operations as (METHOD, path template).
fn documented() -> Vec<(String, String)> {
    let doc: serde_json::Value =
        serde_json::from_str(include_str!("../../../openapi/admin.json")).unwrap();
    let mut ops = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            ops.push((method.to_ascii_uppercase(), path.clone()));
        }
    }
    ops.sort();
    ops
}

/// Whether a concrete path fills a template's `{parameters}`, segment by segment.
fn fills(template: &str, path: &str) -> bool {
    let (t, p): (Vec<&str>, Vec<&str>) = (template.split('/').collect(), path.split('/').collect());
    t.len() == p.len()
        && t.iter()
            .zip(&p)
            .all(|(t, p)| t == p || (t.starts_with('{') && !p.is_empty()))
}

const KEY: &str = "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=";

/// D3: the CLI drives the whole admin API: every operation of the document is what some
/// `perpsim admin` command line sends, and every subcommand sends a documented operation.
#[test]
fn every_admin_operation_has_a_subcommand() {
    let lines: &[&[&str]] = &[
        &["create-broker", "acme", KEY],
        &["add-key", "B1", KEY],
        &["revoke-key", "B1", KEY],
        &["status", "BTC-USDC-PERP", "post_only"],
        &["price", "BTC-USDC-PERP", "60000", "--mark-price", "60001"],
        &["funding", "BTC-USDC-PERP", "0.0001"],
        &["transfers", "off"],
        &["cancel-transfer", "T1"],
        &["provisioned", "C1", "no"],
        &["clock"],
        &["advance", "--seconds", "60"],
        &["state"],
        &["archive-journal", "--all"],
        &["venue"],
        &["faults", "show"],
        &["faults", "set", "{}"],
        &["faults", "clear"],
        &["faults", "report"],
    ];
    let mut sent = Vec::new();
    for line in lines {
        let cli = Cli::try_parse_from(["perpsim", "admin"].iter().chain(line.iter())).unwrap();
        let Cmd::Admin { action, .. } = cli.command else {
            panic!("{line:?} is an admin command")
        };
        let (method, path, body) = request(action).unwrap();
        if !body.is_empty() {
            serde_json::from_str::<serde_json::Value>(&body).expect("a JSON body");
        }
        let op = documented()
            .into_iter()
            .find(|(m, t)| m == method && fills(t, &path))
            .unwrap_or_else(|| panic!("{line:?} sends {method} {path}, which is not documented"));
        sent.push(op);
    }
    sent.sort();
    sent.dedup();
    assert_eq!(sent, documented(), "an operation without a subcommand");
}

#[test]
fn booleans_read_on_and_off_and_bodies_carry_them() {
    let body = |line: &[&str]| {
        let cli = Cli::try_parse_from(["perpsim", "admin"].iter().chain(line.iter())).unwrap();
        let Cmd::Admin { action, .. } = cli.command else {
            unreachable!()
        };
        request(action).unwrap().2
    };
    assert_eq!(body(&["transfers", "on"]), r#"{"available":true}"#);
    assert_eq!(
        body(&["provisioned", "C1", "off"]),
        r#"{"provisioned":false}"#
    );
    assert!(Cli::try_parse_from(["perpsim", "admin", "transfers", "maybe"]).is_err());
    assert!(Cli::try_parse_from(["perpsim", "admin", "advance"]).is_err());
    assert!(
        Cli::try_parse_from(["perpsim", "admin", "advance", "--seconds", "1", "--to", "x"])
            .is_err()
    );
}

/// Issue 28 item 5: every option and argument of every command says what it is in --help.
#[test]
fn every_option_and_argument_has_a_help_line() {
    fn walk(cmd: &clap::Command, at: String, missing: &mut Vec<String>) {
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            if id == "help" || id == "version" {
                continue;
            }
            if arg
                .get_help()
                .is_none_or(|h| h.to_string().trim().is_empty())
            {
                missing.push(format!("{at} {id}"));
            }
        }
        for sub in cmd.get_subcommands() {
            if sub.get_about().is_none() {
                missing.push(format!("{at} {} (the command)", sub.get_name()));
            }
            walk(sub, format!("{at} {}", sub.get_name()), missing);
        }
    }
    let mut missing = Vec::new();
    walk(&Cli::command(), "perpsim".into(), &mut missing);
    assert!(missing.is_empty(), "without a help line: {missing:?}");
}
