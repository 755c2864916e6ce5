//! The checked-in API documents under `openapi/`, generated from the code: the OpenAPI
//! documents of both APIs, the AsyncAPI document of the channels and the JSON Schema of
//! the scenario format.

use std::path::Path;

use crate::contract::{json_text, yaml_text};
use crate::server::app::{admin_document, broker_document};

/// (file name, contents) of every checked-in document: exactly what the service serves.
pub fn documents() -> Vec<(&'static str, String)> {
    let broker = broker_document();
    vec![
        ("broker.json", json_text(&broker)),
        ("broker.yaml", yaml_text(&broker)),
        ("admin.json", json_text(&admin_document())),
        ("asyncapi.yaml", yaml_text(&crate::ws::asyncapi::document())),
        (crate::replay::schema::FILE, crate::replay::schema::text()),
    ]
}

pub fn write(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for (name, text) in documents() {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}
