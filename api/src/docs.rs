//! The checked-in API documents under `openapi/`, generated from the code.

use std::path::Path;

use crate::app::{admin_service, broker_service};

/// (file name, contents) of every checked-in document.
pub fn documents() -> Vec<(&'static str, String)> {
    vec![
        ("broker.json", broker_service().spec()),
        ("broker.yaml", broker_service().spec_yaml()),
        ("admin.json", admin_service().spec()),
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
