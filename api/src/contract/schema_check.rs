//! A request body held against its operation's schema in the served document, so that a
//! refusal speaks the document's words: the field's path as the document spells it
//! (`channel[0].kind`), the values or JSON types it takes and what it got — never the name
//! of a Rust type behind it (poem-openapi's own parse errors name those).
//!
//! It checks what a schema states about shape: JSON types (`nullable`, unions), `enum`,
//! `required`, `additionalProperties: false`, objects and arrays, recursively. What a
//! string means (a decimal's notation, a timestamp) is left to the handlers' own messages.

use serde_json::Value;

use crate::contract::json_type;

/// What a body breaks: the field as the document spells its path (`""` for the body
/// itself), and the message naming it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Why {
    pub field: String,
    pub message: String,
}

impl Why {
    fn at(path: &str, message: String) -> Self {
        Why {
            field: path.to_owned(),
            message,
        }
    }
}

/// The first thing `value` breaks of `schema` (components in `schemas`), as a message.
pub fn diagnose(value: &Value, schema: &Value, schemas: &Value) -> Option<String> {
    explain(value, schema, schemas).map(|why| why.message)
}

/// [`diagnose`] with the field it names: where a located refusal points.
pub fn explain(value: &Value, schema: &Value, schemas: &Value) -> Option<Why> {
    walk(value, schema, schemas, "")
}

/// `$ref`s followed to the component they name (a bounded chain: a document's refs do not
/// loop, and a loop would stop here rather than hang).
pub fn resolved<'a>(mut schema: &'a Value, schemas: &'a Value) -> &'a Value {
    for _ in 0..16 {
        match schema["$ref"].as_str().and_then(|r| r.rsplit('/').next()) {
            Some(name) => schema = &schemas[name],
            None => break,
        }
    }
    schema
}

/// What a query parameter's text breaks of its (resolved) schema: a value outside its
/// enum, or not an integer where one is declared. What else it means is the handler's.
pub fn query_value(name: &str, value: &str, schema: &Value) -> Option<String> {
    if let Some(allowed) = schema["enum"].as_array()
        && !allowed.iter().any(|v| v.as_str() == Some(value))
    {
        let names: Vec<&str> = allowed.iter().filter_map(Value::as_str).collect();
        return Some(format!(
            "{name} must be one of {}; got {value:?}",
            names.join(", ")
        ));
    }
    let integer = schema["type"] == "integer";
    match integer && value.parse::<i128>().is_err() {
        true => Some(format!("{name} must be an integer, got {value:?}")),
        false => None,
    }
}

/// The JSON types a schema admits (`integer` within `number`), through unions.
fn types(schema: &Value, schemas: &Value, out: &mut Vec<&'static str>) {
    let schema = resolved(schema, schemas);
    if schema["nullable"] == true {
        out.push("null");
    }
    for part in ["allOf", "oneOf", "anyOf"] {
        for sub in schema[part].as_array().into_iter().flatten() {
            types(sub, schemas, out);
        }
    }
    if let Some(ty) = schema["type"].as_str() {
        out.push(match ty {
            "string" => "string",
            "integer" => "integer",
            "number" => "number",
            "boolean" => "boolean",
            "array" => "array",
            _ => "object",
        });
    }
    out.sort_unstable();
    out.dedup();
}

/// The JSON type of a value as the document names types.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn named(path: &str) -> &str {
    match path {
        "" => "the body",
        p => p,
    }
}

fn walk(value: &Value, schema: &Value, schemas: &Value, path: &str) -> Option<Why> {
    let schema = resolved(schema, schemas);
    let mut takes = Vec::new();
    types(schema, schemas, &mut takes);
    let got = kind(value);
    let fits = takes.contains(&got) || (got == "integer" && takes.contains(&"number"));
    if !takes.is_empty() && !fits {
        let message = format!(
            "{} must be a JSON {}, got {}",
            named(path),
            takes.join(" or "),
            json_type(value)
        );
        return Some(Why::at(path, message));
    }
    if value.is_null() {
        return None;
    }
    // A union of branches: each has its own rules, and one fitting is enough.
    if let Some(branches) = schema["oneOf"].as_array().or(schema["anyOf"].as_array()) {
        let mut first = None;
        for b in branches {
            match walk(value, b, schemas, path) {
                None => return None,
                Some(why) => first = first.or(Some(why)),
            }
        }
        return first;
    }
    for part in schema["allOf"].as_array().into_iter().flatten() {
        if let Some(why) = walk(value, part, schemas, path) {
            return Some(why);
        }
    }
    if let Some(allowed) = schema["enum"].as_array()
        && !allowed.contains(value)
    {
        let names: Vec<String> = allowed
            .iter()
            .filter(|v| !v.is_null())
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
            .collect();
        let message = format!(
            "{} must be one of {}; got {value}",
            named(path),
            names.join(", ")
        );
        return Some(Why::at(path, message));
    }
    match value {
        Value::Object(fields) => object(fields, schema, schemas, path),
        Value::Array(items) => {
            let item = &schema["items"];
            if item.is_null() {
                return None;
            }
            items
                .iter()
                .enumerate()
                .find_map(|(i, v)| walk(v, item, schemas, &format!("{path}[{i}]")))
        }
        _ => None,
    }
}

fn object(
    fields: &serde_json::Map<String, Value>,
    schema: &Value,
    schemas: &Value,
    path: &str,
) -> Option<Why> {
    let properties = schema["properties"].as_object();
    let field = |name: &str| match path {
        "" => name.to_owned(),
        p => format!("{p}.{name}"),
    };
    if schema["additionalProperties"] == false {
        let known: Vec<&str> = properties
            .into_iter()
            .flat_map(|p| p.keys().map(String::as_str))
            .collect();
        if let Some(unknown) = fields.keys().find(|k| !known.contains(&k.as_str())) {
            let message = format!(
                "unknown field {}; {} takes {}",
                field(unknown),
                named(path),
                match known.is_empty() {
                    true => "no fields".to_owned(),
                    false => known.join(", "),
                }
            );
            return Some(Why::at(&field(unknown), message));
        }
    }
    // A field given wrong says more than another one missing: values first.
    let wrong = properties.and_then(|properties| {
        fields.iter().find_map(|(name, v)| {
            let property = properties.get(name)?;
            walk(v, property, schemas, &field(name))
        })
    });
    if wrong.is_some() {
        return wrong;
    }
    let required = schema["required"].as_array().into_iter().flatten();
    let missing = required
        .filter_map(Value::as_str)
        .find(|name| !fields.contains_key(*name))?;
    Some(Why::at(
        &field(missing),
        format!("{} is required", field(missing)),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schemas() -> Value {
        json!({
            "Order": {"type": "object", "additionalProperties": false,
                "required": ["side", "amount"],
                "properties": {
                    "side": {"type": "string", "enum": ["buy", "sell"]},
                    "amount": {"type": "string"},
                    "tif": {"type": "string", "enum": ["IOC", "GTC", null], "nullable": true},
                    "leverage": {"oneOf": [{"type": "integer"}, {"type": "string"}]},
                    "legs": {"type": "array", "items": {"$ref": "#/components/schemas/Leg"}}
                }},
            "Leg": {"type": "object", "additionalProperties": false, "required": ["kind"],
                "properties": {"kind": {"type": "string", "enum": ["drop", "stall"]}}}
        })
    }

    fn check(body: Value) -> Option<String> {
        diagnose(
            &body,
            &json!({"$ref": "#/components/schemas/Order"}),
            &schemas(),
        )
    }

    /// Issue 28 item 4: the field's name, the values the document lists, what came.
    #[test]
    fn a_refusal_names_the_field_and_what_the_document_allows() {
        let cases = [
            (
                json!({"side": "long", "amount": "1"}),
                "side must be one of buy, sell; got \"long\"",
            ),
            (
                json!({"side": "buy", "amount": "1", "foo": 1}),
                "unknown field foo; the body takes amount, legs, leverage, side, tif",
            ),
            (json!({"side": "buy"}), "amount is required"),
            (
                json!({"side": "up"}),
                "side must be one of buy, sell; got \"up\"",
            ),
            (json!([1]), "the body must be a JSON object, got an array"),
            (
                json!({"side": "buy", "amount": 1}),
                "amount must be a JSON string, got a number",
            ),
            (
                json!({"side": "buy", "amount": "1", "legs": [{"kind": "drop"}, {"kind": "x"}]}),
                "legs[1].kind must be one of drop, stall; got \"x\"",
            ),
            (
                json!({"side": "buy", "amount": "1", "legs": [{"kind": "drop", "n": 1}]}),
                "unknown field legs[0].n; legs[0] takes kind",
            ),
            (
                json!({"side": "buy", "amount": "1", "tif": "FOK"}),
                "tif must be one of IOC, GTC; got \"FOK\"",
            ),
            (
                json!({"side": "buy", "amount": "1", "leverage": 1.5}),
                "leverage must be a JSON integer or string, got a number",
            ),
        ];
        for (body, says) in cases {
            assert_eq!(check(body.clone()).as_deref(), Some(says), "{body}");
        }
    }

    #[test]
    fn what_the_document_allows_passes() {
        for body in [
            json!({"side": "buy", "amount": "1"}),
            json!({"side": "sell", "amount": "1", "tif": null, "leverage": "2"}),
            json!({"side": "sell", "amount": "1", "tif": "IOC", "leverage": 2, "legs": []}),
        ] {
            assert_eq!(check(body.clone()), None, "{body}");
        }
    }
}
