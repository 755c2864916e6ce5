use perpsim_tests::layers;
use std::path::Path;

#[test]
fn report() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    for krate in ["systems", "api"] {
        let edges = layers::edges(&root.join(krate).join("src"));
        let mut pairs: std::collections::BTreeMap<(String, String), Vec<String>> =
            Default::default();
        for e in &edges {
            pairs
                .entry((e.from.clone(), e.to.clone()))
                .or_default()
                .push(format!(
                    "{}:{}",
                    e.file.strip_prefix(root).unwrap().display(),
                    e.path
                ));
        }
        for ((f, t), v) in pairs {
            println!("{krate}: {f} -> {t} ({}) e.g. {}", v.len(), v[0]);
        }
    }
}
