//! The JSON Schema of the scenario format (`openapi/scenario.schema.json`): the outer shape
//! from the types the reader deserializes ([`super::format`], by schemars, which follows
//! their serde attributes), each event body's from the API type that reads it (the OpenAPI
//! document's schema, written as JSON Schema), so an editor checks a scenario as the replay
//! reads it.

use poem_openapi::registry::Registry;
use poem_openapi::types::Type;
use serde_json::Value;

use super::format::Scenario;
use crate::requests::instruments::{FundingRequest, PriceRequest, StatusRequest};
use crate::requests::money::TransferRequest;
use crate::requests::orders::{AmendRequest, OrderRequest};
use crate::requests::profiles::FeeProfileRequest;

pub const FILE: &str = "scenario.schema.json";

/// The schema document.
pub fn document() -> Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
    let mut doc = generator.into_root_schema_for::<Scenario>().to_value();
    doc["$id"] = "https://perpsim.dev/scenario.schema.json".into();
    let registry = bodies();
    let defs = doc["$defs"]
        .as_object_mut()
        .expect("the scenario has definitions");
    for (name, schema) in &registry.schemas {
        let mut value = serde_json::to_value(schema).expect("a schema encodes");
        crate::contract::json_schema(&mut value);
        relink(&mut value);
        defs.insert(name.clone(), value);
    }
    doc
}

/// The API types that read an event's body, and the types they name.
pub fn bodies() -> Registry {
    let mut registry = Registry::new();
    OrderRequest::register(&mut registry);
    AmendRequest::register(&mut registry);
    PriceRequest::register(&mut registry);
    FundingRequest::register(&mut registry);
    StatusRequest::register(&mut registry);
    TransferRequest::register(&mut registry);
    FeeProfileRequest::register(&mut registry);
    registry
}

/// `#/components/schemas/X` (OpenAPI) → `#/$defs/X` (this document).
fn relink(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(r)) = map.get_mut("$ref")
                && let Some(name) = r.strip_prefix("#/components/schemas/")
            {
                *r = format!("#/$defs/{name}");
            }
            map.values_mut().for_each(relink);
        }
        Value::Array(items) => items.iter_mut().for_each(relink),
        _ => {}
    }
}

/// The document as checked in: pretty JSON with a final newline.
pub fn text() -> String {
    serde_json::to_string_pretty(&document()).expect("a schema encodes") + "\n"
}
