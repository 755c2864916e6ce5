//! The crates' concerns import each other one way only (issue 24; ARCHITECTURE.md "Layers").
//!
//! Each crate's top-level modules are declared here in layers, bottom first, once: a module
//! may import from a layer below its own, never from its own layer or one above. Every
//! `crate::…`/`super::…` path of non-test code (uses, code and macro bodies) is read from
//! the source and checked; a failure names the file and the path. ARCHITECTURE.md states the
//! same order, word for word, and a test keeps it so.

use std::path::{Path, PathBuf};

use perpsim_tests::layers::{self, Edge};

/// `systems`, bottom first: the vocabulary and the leaves, the determinism seams, the
/// commands, the registry, the concerns in the order they build on each other, the readers,
/// the engine that composes them.
const SYSTEMS: &[&[&str]] = &[
    &["records", "sets", "dirty"],
    &["rng", "clock"],
    &["command"],
    &["registry", "faults"],
    &["money", "positions"],
    &["trading"],
    &["simulation", "settlement", "risk"],
    &["publish", "audit"],
    &["engine"],
];

/// `api`, bottom first: the wire's pieces and signing; pagination, the request bodies with
/// the commands they ask for (which the broker API, the admin API and scenario replay all
/// build with) and a movement's shared columns; the shared state (engine handle, host,
/// metrics, configuration); the broker API and scenario replay; the WebSocket channels
/// (which render the broker API's records); the admin API; the server that composes them;
/// the CLI on top.
const API: &[&[&str]] = &[
    &["wire", "errors", "types", "signing", "contract"],
    &["pagination", "requests", "columns"],
    &["state"],
    &["v1", "replay"],
    &["ws"],
    &["admin"],
    &["server"],
    &["cli"],
];

/// What of `systems` the api may name: the records, the commands, the read view and what
/// the crate's root exports (the engine, its state and hash). Never a concern's internals.
const SYSTEMS_SURFACE: &[&str] = &["records", "command", "publish"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace holds the tests crate")
        .to_path_buf()
}

fn edges(krate: &str) -> Vec<Edge> {
    layers::edges(&root().join(krate).join("src"))
}

fn order_line(krate: &str, layers: &[&[&str]]) -> String {
    let names: Vec<String> = layers
        .iter()
        .map(|layer| {
            let ticked: Vec<String> = layer.iter().map(|m| format!("`{m}`")).collect();
            ticked.join(", ")
        })
        .collect();
    format!("Layers of `{krate}`, bottom first: {}.", names.join(" < "))
}

fn assert_one_way(krate: &str, layers: &[&[&str]]) {
    let edges = edges(krate);
    assert!(
        edges.len() > 50,
        "the reader found only {} imports in {krate}: it reads nothing",
        edges.len()
    );
    let wrong = layers::against_order(&edges, layers);
    assert!(
        wrong.is_empty(),
        "imports against the layer order of {krate}:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn systems_concerns_import_only_from_layers_below_them() {
    assert_one_way("systems", SYSTEMS);
}

#[test]
fn api_modules_import_only_from_layers_below_them() {
    assert_one_way("api", API);
}

#[test]
fn the_api_reaches_the_engine_only_through_its_public_surface() {
    let paths = layers::paths_into(&root().join("api").join("src"), "perpsim_systems");
    assert!(
        paths.len() > 20,
        "the reader found only {} paths into the engine",
        paths.len()
    );
    let outside: Vec<String> = paths
        .into_iter()
        .filter(|(_, path)| {
            let second = path.split("::").nth(1).unwrap_or_default();
            let root_export = second.starts_with(char::is_uppercase);
            !root_export && !SYSTEMS_SURFACE.contains(&second)
        })
        .map(|(file, path)| format!("{}: {path}", file.display()))
        .collect();
    assert!(
        outside.is_empty(),
        "the api names engine internals:\n{}",
        outside.join("\n")
    );
}

#[test]
fn architecture_states_the_same_layer_order() {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    for (krate, layers) in [("systems", SYSTEMS), ("api", API)] {
        let line = order_line(krate, layers);
        assert!(text.contains(&line), "ARCHITECTURE.md must state: {line}");
    }
}

#[test]
fn the_reader_catches_an_import_against_the_order() {
    // A lower layer naming a higher one, through `crate::`, `super::` and a macro body.
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path();
    std::fs::write(
        src.join("lib.rs"),
        "pub mod low;\npub mod high;\n#[cfg(test)]\nmod tests;\n",
    )
    .unwrap();
    std::fs::write(
        src.join("low.rs"),
        "use crate::high::Thing;\npub fn f() { let _ = vec![crate::high::make()]; }\n\
         #[cfg(test)]\nmod t { use crate::high::Other; }\n",
    )
    .unwrap();
    std::fs::create_dir(src.join("high")).unwrap();
    std::fs::write(
        src.join("high/mod.rs"),
        "pub mod part;\npub struct Thing;\npub fn make() {}\n",
    )
    .unwrap();
    std::fs::write(src.join("high/part.rs"), "use super::super::low::f;\n").unwrap();
    std::fs::write(src.join("tests.rs"), "use crate::high::Thing;\n").unwrap();
    let edges = layers::edges(src);
    let paths: Vec<(&str, &str, &str)> = edges
        .iter()
        .map(|e| (e.from.as_str(), e.to.as_str(), e.path.as_str()))
        .collect();
    assert_eq!(
        paths,
        [
            ("high", "low", "super::super::low::f"),
            ("low", "high", "crate::high::Thing"),
            ("low", "high", "crate::high::make"),
        ],
        "test-only code is left out"
    );
    let wrong = layers::against_order(&edges, &[&["low"], &["high"]]);
    assert_eq!(wrong.len(), 2, "{wrong:?}");
    assert!(wrong[0].contains("low.rs") && wrong[0].contains("crate::high::Thing"));
}
