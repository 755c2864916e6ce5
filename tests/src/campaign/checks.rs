//! What the crash campaign checks after every restart, against each worker's model: every
//! acknowledged write there and nothing else, balances equal to their rows, and every captured
//! request sent again refused (or, if it never took effect, accepted exactly once).

use std::collections::BTreeSet;

use serde_json::Value;

use super::worker::{Kind, Op, Outcome, Worker};
use crate::{Client, Resp};

pub(super) fn get(c: &Client, path: &str) -> Resp {
    let r = c.send("GET", path, None);
    assert!(r.status == 200 || r.status == 404, "{path}: {}", r.text);
    r
}

/// Every row of a paginated list.
pub(super) fn all_pages(c: &Client, path: &str) -> Vec<Value> {
    let mut rows = Vec::new();
    let mut after: Option<String> = None;
    let sep = if path.contains('?') { '&' } else { '?' };
    loop {
        let page = match &after {
            Some(cursor) => format!("{path}{sep}limit=1000&after={cursor}"),
            None => format!("{path}{sep}limit=1000"),
        };
        let r = get(c, &page).json();
        rows.extend(r["data"].as_array().unwrap().iter().cloned());
        if r["response_metadata"]["has_next"] != true {
            return rows;
        }
        after = Some(
            r["response_metadata"]["end_cursor"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
}

/// The checks of one worker's customer after a restart; `in_flight` is its op cut by the kill.
/// Orders are read one by one where this round touched them, or all of them when `all`.
pub(super) fn check_worker(w: &Worker, in_flight: Option<&Op>, all: bool) {
    let (c, m, code) = (&w.client, &w.model, &w.customer);
    let flying_place = in_flight.and_then(|op| match &op.kind {
        Kind::Place { reference, .. } => Some(reference.as_str()),
        _ => None,
    });
    let checked = |r: &&String| all || m.touched.contains(*r);
    for reference in m.placed.iter().filter(checked) {
        let r = get(c, &format!("/v1/customers/{code}/orders/{reference}"));
        assert_eq!(r.status, 200, "acknowledged order {reference} was lost");
        let order = r.json();
        if m.canceled.contains(reference) {
            assert_eq!(order["status"], "canceled", "{reference}: {order}");
        }
        let amended_last = in_flight.is_none_or(
            |op| !matches!(&op.kind, Kind::Amend { reference: r, .. } if r == reference),
        );
        let open = order["status"] == "open" || order["status"] == "partially_filled";
        if let (Some(price), true, true) = (m.amended.get(reference), open, amended_last) {
            assert_eq!(order["limit_price"], price.as_str(), "{reference}: {order}");
        }
    }
    for reference in m.refused_places.iter().filter(checked) {
        let r = get(c, &format!("/v1/customers/{code}/orders/{reference}"));
        assert_eq!(
            r.status, 404,
            "refused order {reference} exists: {}",
            r.text
        );
    }
    for order in all_pages(c, &format!("/v1/customers/{code}/orders")) {
        let reference = order["reference_id"].as_str().unwrap();
        assert!(
            m.placed.contains(reference) || flying_place == Some(reference),
            "open order {reference} was neither acknowledged nor in flight"
        );
    }
    let rows = all_pages(
        c,
        &format!("/v1/customers/transactions?customer_code={code}"),
    );
    let mut total: i128 = 0;
    for (kind, acked) in [("deposit", &m.deposits), ("withdrawal", &m.withdrawals)] {
        let codes: BTreeSet<String> = rows
            .iter()
            .filter(|t| t["type"] == kind)
            .map(|t| t["code"].as_str().unwrap().to_owned())
            .collect();
        assert!(codes.is_superset(acked), "an acknowledged {kind} was lost");
        let flying = in_flight.is_some_and(|op| {
            matches!(
                (&op.kind, kind),
                (Kind::Deposit, "deposit") | (Kind::Withdraw, "withdrawal")
            )
        });
        let extra = codes.len() - acked.len();
        assert!(
            extra == 0 || (extra == 1 && flying),
            "{extra} {kind}s neither acknowledged nor in flight"
        );
    }
    for row in rows.iter().filter(|t| t["status"] == "completed") {
        let units = ledger_units(row["total_amount"].as_str().unwrap());
        total += if row["direction"] == "credit" {
            units
        } else {
            -units
        };
    }
    let balances = get(c, &format!("/v1/customers/{code}/balances?asset=USDC")).json();
    let balance = &balances[0];
    assert_eq!(
        ledger_units(balance["total"].as_str().unwrap()),
        total,
        "balance is the sum of its completed rows: {balance}"
    );
    let parts: i128 = ["available", "locked", "pending"]
        .iter()
        .map(|f| ledger_units(balance[*f].as_str().unwrap()))
        .sum();
    assert_eq!(
        parts,
        ledger_units(balance["total"].as_str().unwrap()),
        "{balance}"
    );
}

/// Learns whether the op cut by the kill took effect, and books it if it did (it may have:
/// the kill can come between the commit and the answer). `Some(true)` when its effect is
/// there, so sending it again must be refused; `None` when a request leaves nothing to see.
pub(super) fn settle_in_flight(w: &mut Worker, op: &Op) -> Option<bool> {
    let code = w.customer.clone();
    let order = |w: &Worker, reference: &str| {
        let r = get(
            &w.client,
            &format!("/v1/customers/{code}/orders/{reference}"),
        );
        (r.status == 200).then(|| r.json())
    };
    let is_open = |o: &Value| o["status"] == "open" || o["status"] == "partially_filled";
    match &op.kind {
        Kind::Place { reference, resting } => {
            let found = order(w, reference);
            if let Some(o) = &found {
                w.model.placed.insert(reference.clone());
                if *resting && is_open(o) {
                    w.model.resting.push(reference.clone());
                }
            }
            Some(found.is_some())
        }
        Kind::Cancel { reference } => {
            let canceled = order(w, reference).is_some_and(|o| o["status"] == "canceled");
            if canceled {
                w.model.canceled.insert(reference.clone());
                w.model.resting.retain(|r| r != reference);
            }
            canceled.then_some(true)
        }
        Kind::Amend { reference, price } => {
            let o = order(w, reference)?;
            let applied = is_open(&o) && o["limit_price"] == price.as_str();
            if applied {
                w.model.amended.insert(reference.clone(), price.clone());
            }
            applied.then_some(true)
        }
        Kind::Deposit | Kind::Withdraw => {
            let (kind, known) = match op.kind {
                Kind::Deposit => ("deposit", &mut w.model.deposits),
                _ => ("withdrawal", &mut w.model.withdrawals),
            };
            let path = format!("/v1/customers/transactions?customer_code={code}");
            let fresh: Vec<String> = all_pages(&w.client, &path)
                .iter()
                .filter(|t| t["type"] == kind)
                .map(|t| t["code"].as_str().unwrap().to_owned())
                .filter(|c| !known.contains(c))
                .collect();
            known.extend(fresh.iter().cloned());
            Some(!fresh.is_empty())
        }
        Kind::Read => None,
    }
}

/// A decimal string at the ledger's 10 places, as an exact integer of 1e-10 units.
pub(super) fn ledger_units(text: &str) -> i128 {
    let (sign, digits) = match text.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, text),
    };
    let (whole, frac) = digits.split_once('.').unwrap_or((digits, ""));
    assert!(frac.len() <= 10, "more than 10 places: {text}");
    let frac = format!("{frac:0<10}");
    sign * (whole.parse::<i128>().unwrap() * 10_000_000_000 + frac.parse::<i128>().unwrap())
}

/// Sends every captured request of the round again, each with whether its effect is known to
/// be there. Returns (refused as reused, in-flight requests accepted now because they never
/// took effect).
pub(super) fn replay_round(workers: &mut [Worker], ops: &[Vec<(Op, Option<bool>)>]) -> (u64, u64) {
    let (mut refused, mut accepted) = (0, 0);
    for (w, ops) in workers.iter_mut().zip(ops) {
        for (op, took_effect) in ops {
            let s = &op.sent;
            let r = w
                .client
                .send_with_nonce(s.method, &s.path, s.body.as_bytes(), &s.nonce);
            let reused = r.status == 401 && r.text.contains("reused");
            match op.outcome {
                Outcome::InFlight if !reused && *took_effect != Some(true) => {
                    // Its nonce was never spent, so it never took effect: this is its first
                    // acceptance, and the model learns of it like any answer.
                    accepted += 1;
                    let answered = Op {
                        outcome: match r.status {
                            200..=299 => Outcome::Acked(r.json()),
                            _ => Outcome::Refused,
                        },
                        ..op.clone()
                    };
                    w.book(&answered);
                }
                _ => {
                    assert!(
                        reused,
                        "{} {} sent again after the restart: {} {}",
                        s.method, s.path, r.status, r.text
                    );
                    refused += 1;
                }
            }
        }
    }
    (refused, accepted)
}
