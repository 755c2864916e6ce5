//! Checks real answers against the OpenAPI document the server serves: what the document says
//! is what the service answers. Covers what the document uses: `$ref`, `allOf`, `nullable`,
//! `enum`, `type`, `required`, `properties` (an answered property the schema does not declare
//! is an error too) and `items`.

use serde_json::Value;

use crate::{Resp, Server, raw};

pub struct Document {
    doc: Value,
}

impl Document {
    /// The broker document as `GET /openapi.json` serves it.
    pub fn served(server: &Server) -> Document {
        let doc = raw("GET", &format!("{}/openapi.json", server.url), &[], b"").json();
        Document { doc }
    }

    /// The operation (path template, object) of a request, matched segment by segment.
    fn operation(&self, method: &str, path: &str) -> (String, &Value) {
        let path = path.split('?').next().unwrap_or(path);
        let parts: Vec<&str> = path.split('/').collect();
        let paths = self.doc["paths"].as_object().expect("paths");
        for (template, item) in paths {
            let segments: Vec<&str> = template.split('/').collect();
            let matches = segments.len() == parts.len()
                && segments
                    .iter()
                    .zip(&parts)
                    .all(|(s, p)| s.starts_with('{') || s == p);
            if let Some(op) = item.get(method.to_ascii_lowercase()).filter(|_| matches) {
                return (template.clone(), op);
            }
        }
        panic!("the document has no operation {method} {path}");
    }

    /// Asserts that `resp` to `method path` is one the document declares, in the declared
    /// shape.
    pub fn check(&self, method: &str, path: &str, resp: &Resp) {
        let (template, op) = self.operation(method, path);
        let status = resp.status.to_string();
        let declared = &op["responses"][&status];
        assert!(
            declared.is_object(),
            "{method} {template} answered {status}, which the document does not list: {}",
            resp.text
        );
        let Some(content) = declared["content"].as_object() else {
            assert!(resp.text.is_empty(), "{method} {template}: undeclared body");
            return;
        };
        let schema = &content.values().next().expect("a media type")["schema"];
        let mut errors = Vec::new();
        self.value(schema, &resp.json(), "$", &mut errors);
        assert!(
            errors.is_empty(),
            "{method} {template} {status} differs from the document:\n{}\n{}",
            errors.join("\n"),
            resp.text
        );
    }

    fn resolve<'a>(&'a self, schema: &'a Value) -> &'a Value {
        match schema.get("$ref").and_then(Value::as_str) {
            Some(r) => {
                let name = r.rsplit('/').next().expect("a name");
                &self.doc["components"]["schemas"][name]
            }
            None => schema,
        }
    }

    fn value(&self, schema: &Value, value: &Value, at: &str, errors: &mut Vec<String>) {
        let schema = self.resolve(schema);
        if value.is_null() {
            if schema["nullable"] != true {
                errors.push(format!("{at}: null, but the schema is not nullable"));
            }
            return;
        }
        if let Some(parts) = schema["allOf"].as_array() {
            for part in parts {
                self.value(part, value, at, errors);
            }
        }
        if let Some(values) = schema["enum"].as_array()
            && !values.contains(value)
        {
            errors.push(format!("{at}: {value} is not one of {values:?}"));
        }
        let fits = match schema["type"].as_str() {
            None => true,
            Some("string") => value.is_string(),
            Some("integer") => value.is_i64() || value.is_u64(),
            Some("number") => value.is_number(),
            Some("boolean") => value.is_boolean(),
            Some("array") => value.is_array(),
            Some("object") => value.is_object(),
            Some(other) => panic!("type {other} is not used by the document"),
        };
        if !fits {
            errors.push(format!("{at}: {value} is not of type {}", schema["type"]));
            return;
        }
        if let (Some(items), Some(values)) = (schema.get("items"), value.as_array()) {
            for (i, item) in values.iter().enumerate() {
                self.value(items, item, &format!("{at}[{i}]"), errors);
            }
        }
        if let Some(object) = value.as_object()
            && let Some(properties) = schema["properties"].as_object()
        {
            for required in schema["required"].as_array().into_iter().flatten() {
                let name = required.as_str().expect("a name");
                if !object.contains_key(name) {
                    errors.push(format!("{at}.{name}: required, but absent"));
                }
            }
            for (name, field) in object {
                match properties.get(name) {
                    Some(declared) => self.value(declared, field, &format!("{at}.{name}"), errors),
                    None => errors.push(format!("{at}.{name}: not in the document")),
                }
            }
        }
    }
}
