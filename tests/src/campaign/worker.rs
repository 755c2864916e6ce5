//! The load of the crash campaign: each worker owns one broker key and one customer, sends
//! one signed request at a time (orders of several types, amends, cancels, deposits,
//! withdrawals, reads) and books every answer into its model of what must be there.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::{Rng, SYMBOL};
use crate::{Client, now_ns};

/// A signed request as sent, to be sent again byte for byte.
#[derive(Debug, Clone)]
pub(super) struct Captured {
    pub(super) method: &'static str,
    pub(super) path: String,
    pub(super) body: String,
    pub(super) nonce: String,
}

#[derive(Debug, Clone)]
pub(super) enum Kind {
    Place { reference: String, resting: bool },
    Amend { reference: String, price: String },
    Cancel { reference: String },
    Deposit,
    Withdraw,
    Read,
}

#[derive(Debug, Clone)]
pub(super) enum Outcome {
    Acked(Value),
    Refused,
    InFlight,
}

#[derive(Debug, Clone)]
pub(super) struct Op {
    pub(super) kind: Kind,
    pub(super) sent: Captured,
    pub(super) outcome: Outcome,
}

/// What one worker's customer must look like: built only from acknowledged answers.
#[derive(Default)]
pub(super) struct Model {
    pub(super) placed: BTreeSet<String>,
    pub(super) refused_places: BTreeSet<String>,
    pub(super) canceled: BTreeSet<String>,
    /// The last acknowledged amend price per reference.
    pub(super) amended: BTreeMap<String, String>,
    pub(super) resting: Vec<String>,
    pub(super) deposits: BTreeSet<String>,
    pub(super) withdrawals: BTreeSet<String>,
    pub(super) next_reference: u64,
    /// References this round placed, amended or cancelled: what a round's checks read one by
    /// one (the last round of a data dir reads them all).
    pub(super) touched: BTreeSet<String>,
}

pub(super) struct Worker {
    pub(super) client: Client,
    pub(super) customer: String,
    pub(super) model: Model,
    pub(super) rng: Rng,
}

impl Worker {
    fn next_op(&mut self) -> (Kind, &'static str, String, Value) {
        let c = &self.customer;
        let orders = format!("/v1/customers/{c}/orders");
        let dice = self.rng.below(100);
        let pick = |rng: &mut Rng, v: &[String]| v[rng.below(v.len() as u64) as usize].clone();
        if dice < 15 && !self.model.resting.is_empty() {
            let reference = pick(&mut self.rng, &self.model.resting);
            let price = self.band_price(reference.ends_with('b'));
            let body = json!({"limit_price": price});
            let path = format!("{orders}/{reference}");
            return (Kind::Amend { reference, price }, "PATCH", path, body);
        }
        if dice < 27 && !self.model.resting.is_empty() {
            let reference = pick(&mut self.rng, &self.model.resting);
            let path = format!("{orders}/{reference}");
            return (Kind::Cancel { reference }, "DELETE", path, Value::Null);
        }
        match dice {
            0..=59 => {
                self.model.next_reference += 1;
                let buy = self.rng.below(2) == 0;
                let side = if buy { "buy" } else { "sell" };
                let n = self.model.next_reference;
                let reference = format!("w{}n{n}{}", self.rng.below(1 << 20), &side[..1]);
                let (resting, body) = match self.rng.below(4) {
                    0 => (
                        false,
                        json!({"symbol": SYMBOL, "side": side, "type": "market",
                               "reference_id": reference, "amount": "0.001"}),
                    ),
                    1 => (
                        false,
                        json!({"symbol": SYMBOL, "side": "sell", "type": "stop_loss",
                               "reference_id": reference, "amount": "0.001",
                               "trigger_price": "40000.0"}),
                    ),
                    _ => (
                        true,
                        json!({"symbol": SYMBOL, "side": side, "type": "limit",
                               "reference_id": reference, "amount": "0.001",
                               "limit_price": self.band_price(buy)}),
                    ),
                };
                (Kind::Place { reference, resting }, "POST", orders, body)
            }
            60..=69 => (
                Kind::Deposit,
                "POST",
                format!("/v1/customers/{c}/deposits"),
                json!({"asset": "USDC", "amount": "100"}),
            ),
            70..=79 => (
                Kind::Withdraw,
                "POST",
                format!("/v1/customers/{c}/withdrawals"),
                json!({"asset": "USDC", "amount": "1.5"}),
            ),
            _ => (
                Kind::Read,
                "GET",
                format!("/v1/customers/{c}/balances"),
                Value::Null,
            ),
        }
    }

    /// Buys rest between 55 000 and 59 999.9, sells between 60 000.1 and 65 000: market orders
    /// of the other workers take from them.
    fn band_price(&mut self, buy: bool) -> String {
        let ticks = self.rng.below(50_000);
        let price = if buy {
            550_000 + ticks
        } else {
            600_001 + ticks
        };
        format!("{}.{}", price / 10, price % 10)
    }

    /// Sends one op and books its answer in the model (in flight once the server is gone).
    pub(super) fn step(&mut self) -> Op {
        let (kind, method, path, body) = self.next_op();
        let body = if body.is_null() {
            String::new()
        } else {
            body.to_string()
        };
        let sent = Captured {
            method,
            path,
            body,
            nonce: now_ns().to_string(),
        };
        let answer = self.client.try_send_with_nonce(
            sent.method,
            &sent.path,
            sent.body.as_bytes(),
            &sent.nonce,
        );
        let outcome = match answer {
            Err(_) => Outcome::InFlight,
            Ok(r) if r.status >= 500 => Outcome::InFlight, // the engine stopped under it
            Ok(r) if r.status < 300 => Outcome::Acked(r.json()),
            Ok(r) => {
                assert!(
                    r.status == 400 || r.status == 409,
                    "{method} {}: unexpected {} {}",
                    sent.path,
                    r.status,
                    r.text
                );
                Outcome::Refused
            }
        };
        let op = Op {
            kind,
            sent,
            outcome,
        };
        self.book(&op);
        op
    }

    pub(super) fn book(&mut self, op: &Op) {
        let m = &mut self.model;
        if let Kind::Place { reference, .. }
        | Kind::Amend { reference, .. }
        | Kind::Cancel { reference } = &op.kind
        {
            m.touched.insert(reference.clone());
        }
        match (&op.kind, &op.outcome) {
            (Kind::Place { reference, resting }, Outcome::Acked(v)) => {
                m.placed.insert(reference.clone());
                if *resting && v["status"] == "open" {
                    m.resting.push(reference.clone());
                }
            }
            (Kind::Place { reference, .. }, Outcome::Refused) => {
                m.refused_places.insert(reference.clone());
            }
            (Kind::Amend { reference, price }, Outcome::Acked(_)) => {
                m.amended.insert(reference.clone(), price.clone());
            }
            (Kind::Amend { reference, .. } | Kind::Cancel { reference }, Outcome::Refused) => {
                // No longer open (filled by another worker, say): stop picking it.
                m.resting.retain(|r| r != reference);
            }
            (Kind::Cancel { reference }, Outcome::Acked(_)) => {
                m.canceled.insert(reference.clone());
                m.resting.retain(|r| r != reference);
            }
            (Kind::Deposit, Outcome::Acked(v)) => {
                m.deposits.insert(v["code"].as_str().unwrap().to_owned());
            }
            (Kind::Withdraw, Outcome::Acked(v)) => {
                m.withdrawals.insert(v["code"].as_str().unwrap().to_owned());
            }
            _ => {}
        }
    }
}
