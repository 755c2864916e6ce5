//! The documents as a running service serves them, and its `/docs` page.
//!
//! The checked-in documents name the default address (`http://127.0.0.1:8080`, what generated
//! SDKs start with); the served ones name the address this service listens on, so that /docs'
//! "Try it out" and a client reading `/openapi.json` reach this service wherever it listens
//! (an unspecified address, `0.0.0.0`, is named by the loopback address of its family).
//!
//! `/docs` is Swagger UI with a key panel: a broker's private key pasted there signs every
//! `/v1` request the page sends (D2), in WebCrypto, kept in the page's memory only
//! (`docs_signing.js`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::contract::{json_text, yaml_text};
use crate::server::app::{admin_document, broker_document, broker_service};

/// The key's import (shared with the console), then the signer.
const SIGNING_JS: &str = concat!(
    include_str!("ed25519_key.js"),
    include_str!("docs_signing.js")
);

/// The panel above Swagger UI where a key is pasted.
const KEY_PANEL: &str = r#"<div id="perpsim-signing" style="font-family: sans-serif; margin: 1em 2em; padding: 1em; border: 1px solid #ccc; border-radius: 4px">
<b>Sign requests (D2).</b> Paste a broker's ed25519 private key (PKCS#8 PEM, e.g. <code>data/demo-broker.key</code>):
it stays in this page's memory, is never stored or sent, and signs every <code>/v1</code> request "Try it out" sends.<br>
<textarea id="perpsim-key" rows="3" cols="70" placeholder="-----BEGIN PRIVATE KEY-----"></textarea><br>
<button id="perpsim-use-key">Use this key</button>
<button id="perpsim-forget-key">Forget the key</button>
<span id="perpsim-key-status">No key: requests go unsigned and /v1 answers 401.</span>
</div>
"#;

/// Every document text the service serves, naming its own address.
pub struct Served {
    pub broker_json: String,
    pub broker_yaml: String,
    pub admin_json: String,
    pub asyncapi_yaml: String,
    pub docs_page: String,
    /// The page's Content-Security-Policy: its own inline scripts by hash, requests to this
    /// service only, no framing.
    pub docs_policy: String,
}

/// The address clients reach a listener bound to `local` at.
fn reachable(local: SocketAddr) -> SocketAddr {
    let ip = match local.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, local.port())
}

/// An OpenAPI document naming `base` as its one server.
fn naming(mut doc: Value, base: &str) -> Value {
    doc["servers"] = json!([{"url": base, "description": "this service, where it listens"}]);
    doc
}

pub fn served(local: SocketAddr) -> Served {
    let address = reachable(local);
    let base = format!("http://{address}");
    let broker = naming(broker_document(), &base);
    let mut asyncapi = crate::ws::asyncapi::document();
    asyncapi["servers"]["local"]["host"] = json!(address.to_string());
    asyncapi["servers"]["local"]["description"] = json!("this service, where it listens");
    let broker_json = json_text(&broker);
    let docs_page = page(&broker_json, &base);
    Served {
        docs_policy: policy(&docs_page, &base),
        docs_page,
        broker_yaml: yaml_text(&broker),
        broker_json,
        admin_json: json_text(&naming(admin_document(), &base)),
        asyncapi_yaml: yaml_text(&asyncapi),
    }
}

/// The Content-Security-Policy of `page`: scripts only its own inline ones (by SHA-256, so an
/// injected one does not run), styles inline (Swagger UI's), requests to this page's origin and
/// the document's server only, never framed.
fn policy(page: &str, base: &str) -> String {
    let scripts: Vec<String> = inline_scripts(page)
        .map(|s| format!("'sha256-{}'", STANDARD.encode(Sha256::digest(s.as_bytes()))))
        .collect();
    format!(
        "default-src 'none'; script-src {}; style-src 'unsafe-inline'; img-src 'self' data:; \
         font-src data:; connect-src 'self' {base}; base-uri 'none'; form-action 'none'; \
         frame-ancestors 'none'",
        scripts.join(" ")
    )
}

/// The content of every inline `<script>` of `page`, as a browser splits them: from the end of
/// the opening tag to the next `</script>`.
fn inline_scripts(page: &str) -> impl Iterator<Item = &str> {
    let mut rest = page;
    std::iter::from_fn(move || {
        loop {
            let open = rest.find("<script")?;
            let tag_end = open + rest[open..].find('>')? + 1;
            let close = tag_end + rest[tag_end..].find("</script>")?;
            let tag = &rest[open..tag_end];
            let content = &rest[tag_end..close];
            rest = &rest[close + "</script>".len()..];
            if !tag.contains("src=") {
                return Some(content);
            }
        }
    })
}

/// poem-openapi's Swagger UI page with `document` in place of its own, the key panel above
/// it and the signing interceptor in its configuration; it signs requests to `base` and its
/// own origin only.
fn page(document: &str, base: &str) -> String {
    let broker = broker_service();
    let page = broker.swagger_ui_html().replace(&broker.spec(), document);
    let ui = r#"<div id="ui"></div>"#;
    let config = "        deepLinking: true,\n    })";
    assert!(
        page.contains(ui) && page.contains(config),
        "poem-openapi's Swagger UI page changed: the signing panel has nowhere to go"
    );
    let signing = SIGNING_JS.replace("__PERPSIM_BASE__", base);
    let panel = format!("{KEY_PANEL}<script>{signing}</script>\n{ui}");
    page.replacen(ui, &panel, 1).replacen(
        config,
        "        deepLinking: true,\n        requestInterceptor: perpsimSign,\n    })",
        1,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 28 item 3: served documents name where this service listens; the checked-in ones
    /// keep the default.
    #[test]
    fn served_documents_name_the_address_listened_on() {
        let served = served("0.0.0.0:18181".parse().unwrap());
        let broker: Value = serde_json::from_str(&served.broker_json).unwrap();
        assert_eq!(broker["servers"][0]["url"], "http://127.0.0.1:18181");
        let admin: Value = serde_json::from_str(&served.admin_json).unwrap();
        assert_eq!(admin["servers"][0]["url"], "http://127.0.0.1:18181");
        assert!(served.asyncapi_yaml.contains("host: 127.0.0.1:18181"));
        assert!(served.broker_yaml.contains("http://127.0.0.1:18181"));
        assert!(served.docs_page.contains("http://127.0.0.1:18181"));
        assert!(served.docs_page.contains("requestInterceptor: perpsimSign"));
        assert!(served.docs_page.contains(r#"id="perpsim-key""#));
        assert_eq!(
            broker_document()["servers"][0]["url"],
            "http://127.0.0.1:8080"
        );
        let v6 = super::served("[::]:9000".parse().unwrap());
        assert!(v6.broker_json.contains("http://[::1]:9000"));
    }

    /// Issue 35 item 7: the page's policy names each of its inline scripts by hash, and
    /// nothing else runs; requests go to this service only; it is never framed; the signer
    /// signs this service's origins only.
    #[test]
    fn the_docs_page_runs_only_its_own_scripts_and_talks_only_to_this_service() {
        let served = served("127.0.0.1:18181".parse().unwrap());
        let page = &served.docs_page;
        let scripts: Vec<&str> = inline_scripts(page).collect();
        assert!(scripts.len() >= 2, "Swagger UI's and the signer's");
        for s in &scripts {
            let hash = STANDARD.encode(Sha256::digest(s.as_bytes()));
            assert!(served.docs_policy.contains(&hash), "{hash}");
        }
        let script_src = served.docs_policy.split(';').nth(1).unwrap();
        assert!(
            script_src.starts_with(" script-src 'sha256-"),
            "{script_src}"
        );
        assert!(
            !script_src.contains("unsafe"),
            "scripts by hash only: {script_src}"
        );
        assert!(
            served
                .docs_policy
                .contains("connect-src 'self' http://127.0.0.1:18181;")
        );
        assert!(served.docs_policy.contains("frame-ancestors 'none'"));
        assert!(
            !page.contains(r#"onclick=""#),
            "no inline handler a hash cannot cover"
        );
        assert!(page.contains(r#"new URL("http://127.0.0.1:18181").origin"#));
    }
}
