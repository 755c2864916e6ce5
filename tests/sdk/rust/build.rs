//! Generates the client from the checked-in document; a generator error fails the build.
use std::path::Path;

fn main() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../openapi/broker.json");
    println!("cargo:rerun-if-changed={}", src.display());
    let text = std::fs::read_to_string(&src).expect("openapi/broker.json");
    let spec: openapiv3::OpenAPI = serde_json::from_str(&text).expect("an OpenAPI 3.0 document");
    let mut settings = progenitor::GenerationSettings::default();
    // Every request passes through the signer (D2) just before it is sent.
    settings
        .with_inner_type(quote::quote!(crate::signing::Signer))
        .with_pre_hook(quote::quote!(crate::signing::sign));
    let mut generator = progenitor::Generator::new(&settings);
    let tokens = generator
        .generate_tokens(&spec)
        .expect("progenitor takes the document");
    let file = syn::parse2(tokens).expect("generated code parses");
    let out = Path::new(&std::env::var("OUT_DIR").unwrap()).join("client.rs");
    std::fs::write(out, prettyplease::unparse(&file)).unwrap();
}
