//! Helpers of the scenario-replay tests: running `perpsim replay`, and reading a run
//! directory's report and CSV files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::perpsim;

/// `tests/scenarios/<name>`.
pub fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(name)
}

/// `perpsim replay <args…>` (quiet unless a subcommand), which must succeed; its last line
/// of JSON.
pub fn replay_ok(args: &[&str]) -> Value {
    let mut all = vec!["replay"];
    if !matches!(args.first(), Some(&"verify" | &"summarize")) {
        all.push("--quiet");
    }
    all.extend(args);
    let (code, stdout, stderr) = perpsim(&all);
    assert_eq!(code, 0, "replay {args:?} failed: {stdout}{stderr}");
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).expect("a JSON line")
}

/// Runs a scenario into `out`; its state hash.
pub fn run(scenario: &Path, out: &Path, extra: &[&str]) -> String {
    let mut args = vec![scenario.to_str().unwrap(), "--out", out.to_str().unwrap()];
    args.extend(extra);
    replay_ok(&args)["state_hash"].as_str().unwrap().to_owned()
}

/// Runs the example `name` into a new temporary directory: (the directory, the run's path).
pub fn run_example(name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    run(&example(name), &out, &[]);
    (tmp, out)
}

pub fn report(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap()
}

/// A CSV file as rows of (column → value); the files hold no quoted commas.
pub fn csv_rows(path: &Path) -> Vec<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let head: Vec<String> = lines
        .next()
        .unwrap()
        .split(',')
        .map(str::to_owned)
        .collect();
    lines
        .map(|l| {
            let cells: Vec<&str> = l.split(',').collect();
            assert_eq!(cells.len(), head.len(), "{l}");
            head.iter()
                .cloned()
                .zip(cells.iter().map(|c| c.to_string()))
                .collect()
        })
        .collect()
}

/// Every file of a run directory, by name, as bytes.
pub fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect()
}
