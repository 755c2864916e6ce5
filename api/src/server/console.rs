//! The venue console at `/console` (issue 40): a page that watches the market, the accounts
//! of a broker key and the venue live, and drives the manual clock, prices, funding, status
//! and the fault plan with the admin token.
//!
//! Everything it loads is embedded here at build time — the page, its script and style, and
//! the charting library (uPlot, vendored at a pinned version with its licence under
//! `console/vendor/`, see its README) — so it runs offline and `cargo run` needs nothing
//! beyond cargo. The page talks to this service only: the WebSocket channels and the admin
//! API, with the key and the token kept in its memory (`console.js` says how, and bounds
//! everything it keeps). Its Content-Security-Policy runs only this service's scripts.

use poem::http::header;
use poem::{Endpoint, Response, Route, endpoint::make_sync, get};

use super::app::guarded_page;

const PAGE: &str = include_str!("console/index.html");
const SCRIPT: &str = include_str!("console/console.js");
/// The key's import, shared with /docs' signer.
const KEY_SCRIPT: &str = include_str!("ed25519_key.js");
const STYLE: &str = include_str!("console/console.css");
const UPLOT_SCRIPT: &str = include_str!("console/vendor/uPlot.iife.min.js");
const UPLOT_STYLE: &str = include_str!("console/vendor/uPlot.min.css");

/// Scripts and styles from this service only (none inline), requests and WebSockets to it
/// only, never framed.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

/// One embedded file with its type and the page's policy.
fn asset(content_type: &'static str, body: &'static str) -> impl Endpoint<Output = Response> {
    make_sync(move |_| {
        guarded_page(content_type, POLICY)
            .header(header::CACHE_CONTROL, "no-cache")
            .body(body)
    })
}

/// The console's routes, nested at `/console`.
pub fn routes() -> Route {
    const JS: &str = "text/javascript; charset=utf-8";
    const CSS: &str = "text/css; charset=utf-8";
    Route::new()
        .at("/", get(asset("text/html; charset=utf-8", PAGE)))
        .at("/console.js", get(asset(JS, SCRIPT)))
        .at("/ed25519_key.js", get(asset(JS, KEY_SCRIPT)))
        .at("/console.css", get(asset(CSS, STYLE)))
        .at("/uPlot.iife.min.js", get(asset(JS, UPLOT_SCRIPT)))
        .at("/uPlot.min.css", get(asset(CSS, UPLOT_STYLE)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    fn sha256(text: &str) -> String {
        perpsim_core::ids::hex(&Sha256::digest(text.as_bytes()))
    }

    /// Issue 40 item 2: the charting library is the pinned uPlot release, byte for byte as its
    /// npm package ships it (`console/vendor/README.md` and `vendor.sh`), with its licence.
    #[test]
    fn the_vendored_charting_library_is_the_pinned_release() {
        assert_eq!(
            sha256(UPLOT_SCRIPT),
            "19c8d4c6ad88929a79f4ae49d6f7161566dfd0ba3d15cc495e974f787eb78f1f"
        );
        assert_eq!(
            sha256(UPLOT_STYLE),
            "df630c6a8d6f8eeaff264b50f73ce5b114f646ffd9a0bb74f049b0a00135fa04"
        );
        assert!(UPLOT_SCRIPT.starts_with("/*! https://github.com/leeoniya/uPlot (v1.6.32) */"));
        let licence = include_str!("console/vendor/LICENSE-uPlot");
        assert!(licence.starts_with("The MIT License (MIT)"));
    }

    /// Issue 40 item 1: the page loads only what this service serves — no CDN, no inline
    /// script or handler its policy would have to allow.
    #[test]
    fn the_console_loads_nothing_from_elsewhere() {
        for text in [PAGE, SCRIPT, KEY_SCRIPT, STYLE] {
            assert!(!text.contains("http://") && !text.contains("https://"));
        }
        let scripts: Vec<&str> = PAGE
            .match_indices("<script")
            .map(|(i, _)| &PAGE[i..])
            .collect();
        assert_eq!(scripts.len(), 3);
        assert!(
            scripts
                .iter()
                .all(|s| s.starts_with("<script src=\"/console/"))
        );
        let handlers = PAGE.split(" on").skip(1).filter(|rest| {
            let name: String = rest.chars().take_while(char::is_ascii_lowercase).collect();
            !name.is_empty() && rest[name.len()..].starts_with('=')
        });
        assert_eq!(handlers.count(), 0, "no inline event handler");
        assert!(POLICY.contains("script-src 'self';") && !POLICY.contains("unsafe"));
    }
}
