//! Client frames (D9): each a JSON text frame with an `op`. Parsing is strict, as the REST
//! bodies are (D4): unknown fields and duplicated keys are refused, naming them.

use perpsim_core::ErrorCode;
use serde_json::{Map, Value};

use super::frames::{AuthenticateOp, ErrorFrame, Frame, PingOp, TopicsOp, frame};
use crate::contract::strict_json;

/// A client frame, as its document type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Authenticate(AuthenticateOp),
    Subscribe(TopicsOp),
    Unsubscribe(TopicsOp),
    Ping(PingOp),
}

/// A refusal: its code, message and the topic it is about, if one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: ErrorCode,
    pub message: String,
    pub channel: Option<String>,
}

impl Refusal {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Refusal {
            code,
            message: message.into(),
            channel: None,
        }
    }

    pub fn on(mut self, channel: &str) -> Self {
        self.channel = Some(channel.to_owned());
        self
    }

    pub fn frame(&self) -> Frame {
        frame(&ErrorFrame {
            op: "error".into(),
            code: self.code.code().into(),
            message: self.message.clone(),
            channel: self.channel.clone(),
        })
    }
}

fn invalid(message: impl Into<String>) -> Refusal {
    Refusal::new(ErrorCode::Validation, message)
}

fn only(fields: &Map<String, Value>, allowed: &[&str], op: &str) -> Result<(), Refusal> {
    match fields.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(invalid(format!("unknown field {k:?} in {op}"))),
        None => Ok(()),
    }
}

/// A failed authenticate is UNAUTHORIZED whatever failed, as a REST 401 is (D9).
fn credential(fields: &Map<String, Value>, name: &str) -> Result<String, Refusal> {
    match fields.get(name) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(Refusal::new(
            ErrorCode::Unauthorized,
            format!("{name} must be a JSON string"),
        )),
        None => Err(Refusal::new(
            ErrorCode::Unauthorized,
            format!("missing field {name}"),
        )),
    }
}

fn topics(fields: &Map<String, Value>, op: &str) -> Result<Vec<String>, Refusal> {
    let Some(Value::Array(args)) = fields.get("args") else {
        return Err(invalid(format!(
            "{op} needs args: an array of topic strings"
        )));
    };
    if args.is_empty() {
        return Err(invalid(format!("{op} needs at least one topic in args")));
    }
    args.iter()
        .map(|a| match a {
            Value::String(s) => Ok(s.clone()),
            other => Err(invalid(format!("args holds topic strings, got {other}"))),
        })
        .collect()
}

pub fn parse(text: &str) -> Result<Op, Refusal> {
    strict_json::refuse_duplicate_keys(text.as_bytes()).map_err(|e| invalid(e.message))?;
    let value: Value = serde_json::from_str(text)
        .map_err(|e| invalid(format!("a frame is a JSON object: {e}")))?;
    let Value::Object(fields) = value else {
        return Err(invalid("a frame is a JSON object with an op"));
    };
    let op = match fields.get("op") {
        Some(Value::String(op)) => op.as_str(),
        Some(_) => return Err(invalid("op must be a string")),
        None => return Err(invalid("missing field op")),
    };
    match op {
        "authenticate" => {
            only(&fields, &["op", "public_key", "nonce", "signature"], op)?;
            Ok(Op::Authenticate(AuthenticateOp {
                op: op.into(),
                public_key: credential(&fields, "public_key")?,
                nonce: credential(&fields, "nonce")?,
                signature: credential(&fields, "signature")?,
            }))
        }
        "subscribe" | "unsubscribe" => {
            only(&fields, &["op", "args"], op)?;
            let ask = TopicsOp {
                op: op.into(),
                args: topics(&fields, op)?,
            };
            Ok(match op {
                "subscribe" => Op::Subscribe(ask),
                _ => Op::Unsubscribe(ask),
            })
        }
        "ping" => {
            only(&fields, &["op"], op)?;
            Ok(Op::Ping(PingOp { op: op.into() }))
        }
        other => Err(invalid(format!(
            "unknown op {other:?}: authenticate, subscribe, unsubscribe or ping"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(text: &str) -> (ErrorCode, String) {
        let r = parse(text).unwrap_err();
        (r.code, r.message)
    }

    /// D9: a JSON number as the nonce is a failed authenticate (UNAUTHORIZED), not a
    /// malformed frame; unknown fields and duplicated keys are named.
    #[test]
    fn ops_are_parsed_strictly_and_a_numeric_nonce_fails_authentication() {
        assert_eq!(
            parse(r#"{"op":"ping"}"#).unwrap(),
            Op::Ping(PingOp { op: "ping".into() })
        );
        let ask = TopicsOp {
            op: "subscribe".into(),
            args: vec!["ticker".into()],
        };
        assert_eq!(
            parse(r#"{"op":"subscribe","args":["ticker"]}"#).unwrap(),
            Op::Subscribe(ask)
        );
        let n = refused(r#"{"op":"authenticate","public_key":"k","nonce":1,"signature":"s"}"#);
        assert_eq!(n.0, ErrorCode::Unauthorized);
        assert!(n.1.contains("nonce"), "{}", n.1);
        let extra = refused(r#"{"op":"ping","x":1}"#);
        assert_eq!(extra.0, ErrorCode::Validation);
        assert!(extra.1.contains("\"x\""), "{}", extra.1);
        let dup = refused(r#"{"op":"ping","op":"ping"}"#);
        assert!(dup.1.contains("op"), "{}", dup.1);
        assert_eq!(refused("[1]").0, ErrorCode::Validation);
        assert_eq!(refused("not json").0, ErrorCode::Validation);
        assert_eq!(
            refused(r#"{"op":"subscribe","args":[]}"#).0,
            ErrorCode::Validation
        );
        assert!(refused(r#"{"op":"dance"}"#).1.contains("dance"));
    }
}
