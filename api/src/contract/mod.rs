//! The contract's shape rules, in one place, so that every API object — and every one added
//! later — is described exactly as it is answered.
//!
//! - [`Nullable<T>`] is a response field that is always present and may be `null`: required
//!   and `nullable: true` in the document. (A plain `Option<T>` in a response is the other case:
//!   a field that is sometimes absent, `#[oai(skip_serializing_if_is_none)]`, neither required
//!   nor nullable.) In a request, `Option<T>` is an optional field; for a plain scalar `null`
//!   is read as absent, and [`document`] says so by marking it nullable.
//! - [`Text`] is a string input that must be a JSON string: poem-openapi's `String` also takes
//!   numbers and booleans (`false` would become `"false"`), and a value of the wrong JSON type
//!   must be refused with 400 VALIDATION_ERROR naming the field.
//! - [`document`] turns poem-openapi's document into the one served and checked in. Client
//!   generators cannot take `allOf` of an enum, which is how poem-openapi attaches a field's
//!   description (or `nullable`) to a `$ref`: such enums are written inline, with the field's
//!   description, and a nullable enum lists `null` among its values (OpenAPI 3.0.3). Each
//!   broker operation lists exactly the error statuses it can answer ([`errors`]), each
//!   parameter states what the service checks of it (`params`), and D2's three headers are
//!   three API-key schemes required together.
//! - A list's filters may be one handler argument, a query group ([`group`]), which the
//!   document shows as the parameters it reads, in place.

pub mod group;
mod params;
mod responses;
pub mod schema_check;
pub mod strict_json;

pub use responses::known as knows_errors_of;

use std::borrow::Cow;

use poem_openapi::registry::{MetaSchema, MetaSchemaRef, Registry};
use poem_openapi::types::{ParseError, ParseFromJSON, ParseResult, ToJSON, Type};
use serde_json::{Map, Value, json};

/// A response field that is always present and may be `null` (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(transparent)]
pub struct Nullable<T>(pub Option<T>);

impl<T> std::ops::Deref for Nullable<T> {
    type Target = Option<T>;

    fn deref(&self) -> &Option<T> {
        &self.0
    }
}

impl<T> From<Option<T>> for Nullable<T> {
    fn from(value: Option<T>) -> Self {
        Nullable(value)
    }
}

impl<T: Type> Type for Nullable<T> {
    const IS_REQUIRED: bool = true;
    type RawValueType = T::RawValueType;
    type RawElementValueType = T::RawElementValueType;

    fn name() -> Cow<'static, str> {
        format!("nullable_{}", T::name()).into()
    }

    fn schema_ref() -> MetaSchemaRef {
        T::schema_ref().merge(MetaSchema {
            nullable: true,
            ..MetaSchema::ANY
        })
    }

    fn register(registry: &mut Registry) {
        T::register(registry);
    }

    fn as_raw_value(&self) -> Option<&Self::RawValueType> {
        self.0.as_ref().and_then(Type::as_raw_value)
    }

    fn raw_element_iter<'a>(
        &'a self,
    ) -> Box<dyn Iterator<Item = &'a Self::RawElementValueType> + 'a> {
        match &self.0 {
            Some(value) => value.raw_element_iter(),
            None => Box::new(std::iter::empty()),
        }
    }
}

impl<T: ToJSON> ToJSON for Nullable<T> {
    fn to_json(&self) -> Option<Value> {
        Some(
            self.0
                .as_ref()
                .and_then(ToJSON::to_json)
                .unwrap_or(Value::Null),
        )
    }
}

impl<T: ParseFromJSON> ParseFromJSON for Nullable<T> {
    fn parse_from_json(value: Option<Value>) -> ParseResult<Self> {
        match value.unwrap_or_default() {
            Value::Null => Ok(Nullable(None)),
            value => T::parse_from_json(Some(value))
                .map(|v| Nullable(Some(v)))
                .map_err(ParseError::propagate),
        }
    }
}

/// A string input that must be a JSON string (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Text(pub String);

impl From<&str> for Text {
    fn from(text: &str) -> Self {
        Text(text.to_owned())
    }
}

impl From<Text> for String {
    fn from(text: Text) -> Self {
        text.0
    }
}

impl std::ops::Deref for Text {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl Type for Text {
    const IS_REQUIRED: bool = true;
    type RawValueType = Self;
    type RawElementValueType = Self;

    fn name() -> Cow<'static, str> {
        "string".into()
    }

    fn schema_ref() -> MetaSchemaRef {
        String::schema_ref()
    }

    fn as_raw_value(&self) -> Option<&Self> {
        Some(self)
    }

    fn raw_element_iter<'a>(&'a self) -> Box<dyn Iterator<Item = &'a Self> + 'a> {
        Box::new(std::iter::once(self))
    }
}

impl ParseFromJSON for Text {
    fn parse_from_json(value: Option<Value>) -> ParseResult<Self> {
        match value.unwrap_or_default() {
            Value::String(text) => Ok(Text(text)),
            other => Err(ParseError::custom(format!(
                "must be a JSON string, got {}",
                json_type(&other)
            ))),
        }
    }
}

impl ToJSON for Text {
    fn to_json(&self) -> Option<Value> {
        Some(Value::String(self.0.clone()))
    }
}

/// The JSON type of a value, as a refusal names it.
pub fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// poem-openapi's document (JSON text) made generator-proof (see the module docs).
pub fn document(generated: &str) -> Value {
    let mut doc: Value = serde_json::from_str(generated).expect("generated document is JSON");
    let schemas = doc["components"]["schemas"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    expand_query_groups(&mut doc);
    paginate(&mut doc, &schemas);
    mark_optional_request_fields_nullable(&mut doc);
    inline_enums(&mut doc, &schemas);
    drop_unreferenced_schemas(&mut doc);
    drop_nulls_from_examples(&mut doc);
    responses::narrow(&mut doc);
    params::constrain(&mut doc);
    split_signing_schemes(&mut doc);
    doc
}

/// The schemas of the request bodies `registry` holds, as [`document`] writes them where an
/// operation takes them (unknown fields refused, optional scalars nullable, enums inline),
/// through a document of one operation per body: what `schema_check` holds a body to.
/// Scenario replay reads its events' bodies against these without the APIs that serve them;
/// a test holds them equal to the served documents'.
pub fn request_schemas(registry: &Registry) -> Value {
    let schemas: Map<String, Value> = registry
        .schemas
        .iter()
        .map(|(name, schema)| {
            let value = serde_json::to_value(schema).expect("a schema encodes");
            (name.clone(), value)
        })
        .collect();
    let paths: Map<String, Value> = schemas
        .keys()
        .map(|name| {
            let body = json!({"$ref": format!("#/components/schemas/{name}")});
            let content = json!({"application/json": {"schema": body}});
            (
                format!("/{name}"),
                json!({"post": {"requestBody": {"content": content}}}),
            )
        })
        .collect();
    let generated = json!({"paths": paths, "components": {"schemas": schemas}});
    document(&generated.to_string())["components"]["schemas"].take()
}

/// Every query group ([`group`]) written as its members.
fn expand_query_groups(doc: &mut Value) {
    for op in operations_mut(doc) {
        if let Some(parameters) = op.get_mut("parameters").and_then(Value::as_array_mut) {
            group::expand(parameters);
        }
    }
}

/// Every operation answering a page (a body with `response_metadata`, D4) takes `limit`,
/// `after` and `before`, appended as poem-openapi writes a query parameter, unless it declares
/// them itself: a handler reads them through one extractor (`pagination::PageQuery`), which
/// poem-openapi cannot document.
fn paginate(doc: &mut Value, schemas: &Map<String, Value>) {
    let is_page = |op: &Value| {
        let ok = op
            .pointer("/responses/200/content")
            .and_then(Value::as_object);
        let name = ok
            .and_then(|content| content.values().next())
            .and_then(|media| media.pointer("/schema/$ref"))
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix("#/components/schemas/"));
        let page = |n| schemas.get(n)?.pointer("/properties/response_metadata");
        name.and_then(page).is_some()
    };
    let param = |name: &str, schema: Value| {
        json!({"deprecated": false, "explode": true, "in": "query", "name": name,
               "required": false, "schema": schema})
    };
    for op in operations_mut(doc).filter(|op| is_page(op)) {
        let parameters = op["parameters"].as_array().cloned().unwrap_or_default();
        if parameters.iter().any(|p| p["name"] == "limit") {
            continue;
        }
        let mut parameters = parameters;
        parameters.push(param(
            "limit",
            json!({"type": "integer", "format": "uint32"}),
        ));
        parameters.push(param("after", json!({"type": "string"})));
        parameters.push(param("before", json!({"type": "string"})));
        op["parameters"] = Value::Array(parameters);
    }
}

/// D2 signs with three headers; poem-openapi checks them as one scheme (`Signed`, named for
/// `X-Signature`). The document names all three, required together on every operation.
fn split_signing_schemes(doc: &mut Value) {
    let Some(schemes) = doc
        .pointer_mut("/components/securitySchemes")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let Some(signed) = schemes.remove("Signed") else {
        return;
    };
    let header = |name: &str, description: &str| serde_json::json!({"type": "apiKey", "in": "header", "name": name, "description": description});
    schemes.insert(
        "PublicKey".into(),
        header(
            "X-Public-Key",
            "The caller's 32-byte ed25519 public key, standard base64 with padding (D2).",
        ),
    );
    schemes.insert(
        "Nonce".into(),
        header(
            "X-Nonce",
            "Nanosecond Unix timestamp in decimal digits: at most 30 s behind and 5 s ahead of \
             server time (see the `Date` response header), never reused by the key (D2).",
        ),
    );
    let described = signed["description"].as_str().unwrap_or_default();
    schemes.insert("Signature".into(), header("X-Signature", described));
    let together = serde_json::json!([{"PublicKey": [], "Nonce": [], "Signature": []}]);
    for op in operations_mut(doc) {
        let signed_op = op["security"]
            .as_array()
            .is_some_and(|s| s.iter().any(|r| r.get("Signed").is_some()));
        if signed_op {
            op["security"] = together.clone();
        }
    }
}

/// Every operation object of the document (each method of each path).
fn operations_mut(doc: &mut Value) -> impl Iterator<Item = &mut Value> {
    doc["paths"]
        .as_object_mut()
        .into_iter()
        .flat_map(|paths| paths.values_mut())
        .filter_map(Value::as_object_mut)
        .flat_map(|item| item.values_mut())
}

/// An example shows an absent optional field by leaving it out: a `null` stays only where the
/// field is nullable (poem-openapi writes every `None` of an example as `null`).
fn drop_nulls_from_examples(doc: &mut Value) {
    let Some(schemas) = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    for schema in schemas.values_mut() {
        let properties = schema["properties"].clone();
        if let Some(example) = schema.get_mut("example").and_then(Value::as_object_mut) {
            example.retain(|field, value| {
                !value.is_null() || properties[field.as_str()]["nullable"] == true
            });
        }
    }
}

/// Schemas nothing refers to any more (enums now written inline) leave the document.
fn drop_unreferenced_schemas(doc: &mut Value) {
    loop {
        let text = doc.to_string();
        let Some(schemas) = doc
            .pointer_mut("/components/schemas")
            .and_then(Value::as_object_mut)
        else {
            return;
        };
        let before = schemas.len();
        schemas.retain(|name, _| {
            let reference = format!("\"#/components/schemas/{name}\"");
            text.contains(&reference)
        });
        // Dropping one may leave another unreferenced.
        if schemas.len() == before {
            return;
        }
    }
}

/// The document as pretty JSON text, as served at `/openapi.json` and checked in.
pub fn json_text(doc: &Value) -> String {
    serde_json::to_string_pretty(doc).expect("document encodes")
}

/// The document as YAML text, as served at `/openapi.yaml` and checked in.
pub fn yaml_text(doc: &Value) -> String {
    serde_saphyr::to_string(doc).expect("document encodes as YAML")
}

/// The enum a `$ref` names, if it names one.
fn enum_of<'s>(reference: &Value, schemas: &'s Map<String, Value>) -> Option<&'s Value> {
    let name = reference.as_str()?.strip_prefix("#/components/schemas/")?;
    schemas.get(name).filter(|s| s.get("enum").is_some())
}

/// Replaces every `allOf: [{$ref: <enum>}, patches…]` with the enum written inline and the
/// patches merged into it, and lists `null` among the values of every nullable enum.
fn inline_enums(value: &mut Value, schemas: &Map<String, Value>) {
    match value {
        Value::Object(map) => {
            let inlined = map
                .get("allOf")
                .and_then(Value::as_array)
                .and_then(|parts| {
                    let first = parts.first()?.get("$ref")?;
                    let mut inline = enum_of(first, schemas)?.as_object()?.clone();
                    for patch in parts[1..].iter().filter_map(Value::as_object) {
                        inline.extend(patch.clone());
                    }
                    Some(inline)
                });
            if let Some(mut inline) = inlined {
                map.remove("allOf");
                inline.extend(std::mem::take(map));
                *map = inline;
            }
            if map.get("nullable") == Some(&Value::Bool(true))
                && let Some(Value::Array(values)) = map.get_mut("enum")
                && !values.contains(&Value::Null)
            {
                values.push(Value::Null);
            }
            map.values_mut().for_each(|v| inline_enums(v, schemas));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| inline_enums(v, schemas)),
        _ => {}
    }
}

/// Request bodies refuse unknown fields and read `null` as an absent optional scalar field:
/// the schemas they use say so.
fn mark_optional_request_fields_nullable(doc: &mut Value) {
    let mut request_schemas = Vec::new();
    for op in operations_mut(doc) {
        let media = op["requestBody"]["content"]
            .as_object()
            .into_iter()
            .flatten();
        for (_, body) in media {
            if let Some(name) = body["schema"]["$ref"]
                .as_str()
                .and_then(|r| r.rsplit('/').next())
            {
                request_schemas.push(name.to_owned());
            }
        }
    }
    for name in request_schemas {
        let schema = &mut doc["components"]["schemas"][&name];
        // Every request object is `deny_unknown_fields` (D4: an unknown field is refused,
        // never ignored); poem-openapi does not write that down.
        schema["additionalProperties"] = Value::Bool(false);
        let required: Vec<Value> = schema["required"].as_array().cloned().unwrap_or_default();
        let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) else {
            continue;
        };
        for (field, property) in properties.iter_mut() {
            if required.contains(&Value::String(field.clone())) {
                continue;
            }
            // Only plain scalars: OpenAPI 3.0 has no null type to add to a union (`oneOf`),
            // and a nullable enum turns into a tangle of types in generated clients. Those
            // fields are optional but not nullable, and `null` is refused naming them.
            let scalar = property.get("type").is_some()
                && property.get("enum").is_none()
                && property.get("oneOf").is_none();
            if let (true, Some(p)) = (scalar, property.as_object_mut()) {
                p.insert("nullable".into(), Value::Bool(true));
            }
        }
    }
}

/// OpenAPI 3.0's `nullable` and `example`, as JSON Schema says them; and every object
/// closed (`additionalProperties: false`): a frame carries exactly the fields documented.
pub fn json_schema(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if map.contains_key("properties") {
                map.insert("additionalProperties".into(), Value::Bool(false));
            }
            if let Some(example) = map.remove("example") {
                map.insert("examples".into(), json!([example]));
            }
            if map.remove("nullable") == Some(Value::Bool(true)) {
                match map.get_mut("type") {
                    Some(t @ Value::String(_)) => *t = json!([t.clone(), "null"]),
                    _ => {
                        let inner = Value::Object(std::mem::take(map));
                        map.insert("oneOf".into(), json!([inner, {"type": "null"}]));
                    }
                }
                if let Some(Value::Array(values)) = map.get_mut("enum") {
                    values.push(Value::Null);
                }
            }
            map.values_mut().for_each(json_schema);
        }
        Value::Array(items) => items.iter_mut().for_each(json_schema),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_enum_behind_all_of_is_written_inline_and_a_nullable_one_lists_null() {
        let generated = json!({
            "paths": {"/x": {"get": {"responses": {"200": {"content": {"application/json":
                {"schema": {"$ref": "#/components/schemas/Obj"}}}}}}}},
            "components": {"schemas": {
                "Unused": {"type": "string", "enum": ["A"]},
                "Tif": {"type": "string", "enum": ["IOC", "GTC"]},
                "Obj": {"type": "object", "properties": {
                    "a": {"allOf": [{"$ref": "#/components/schemas/Tif"},
                                    {"description": "the field's own words"}]},
                    "b": {"allOf": [{"$ref": "#/components/schemas/Tif"}, {"nullable": true}]},
                    "c": {"$ref": "#/components/schemas/Tif"}
                }}
            }}
        });
        let doc = document(&generated.to_string());
        let props = &doc["components"]["schemas"]["Obj"]["properties"];
        assert_eq!(
            props["a"],
            json!({"type": "string", "enum": ["IOC", "GTC"], "description": "the field's own words"})
        );
        assert_eq!(
            props["b"],
            json!({"type": "string", "enum": ["IOC", "GTC", null], "nullable": true})
        );
        assert_eq!(props["c"], json!({"$ref": "#/components/schemas/Tif"}));
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        assert_eq!(
            schemas.keys().collect::<Vec<_>>(),
            ["Obj", "Tif"],
            "a schema nothing refers to leaves the document"
        );
    }

    #[test]
    fn text_refuses_every_json_type_but_a_string() {
        assert_eq!(
            Text::parse_from_json(Some(json!("crm-1"))).unwrap(),
            Text("crm-1".into())
        );
        for value in [json!(false), json!(12), json!(null), json!([]), json!({})] {
            let err = Text::parse_from_json(Some(value.clone())).unwrap_err();
            assert!(
                err.into_message().contains("must be a JSON string"),
                "{value}"
            );
        }
    }

    #[test]
    fn nullable_is_required_in_the_schema_and_answers_null() {
        const { assert!(<Nullable<String> as Type>::IS_REQUIRED) };
        match <Nullable<String> as Type>::schema_ref() {
            MetaSchemaRef::Inline(schema) => assert!(schema.nullable && schema.ty == "string"),
            other => panic!("{other:?}"),
        }
        assert_eq!(Nullable::<String>(None).to_json(), Some(Value::Null));
    }
}
