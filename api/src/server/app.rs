//! The HTTP application: routes, middleware and the unauthenticated endpoints (D1).
//!
//! Every response passes through [`finish`]: errors take the D4 body, and every response
//! carries the `Date` header with server (wall-clock) time.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, LazyLock};
use std::time::Instant;

use perpsim_core::ErrorCode;
use poem::endpoint::make_sync;
use poem::http::{HeaderValue, Method, StatusCode, header};
use poem::web::Data;
use poem::{Endpoint, EndpointExt, IntoResponse, Request, Response, Route, get, handler};
use poem_openapi::{LicenseObject, OpenApiService, ServerObject};

use crate::admin::faults::FaultsApi;
use crate::admin::simulation::SimulationApi;
use crate::admin::venue::VenueApi;
use crate::admin::{AdminApi, AdminAuthed};
use crate::contract;
use crate::contract::strict_json;
use crate::errors::{self, error_response};
use crate::server::connections::ConnectionWatch;
use crate::server::docs_page;
use crate::server::request_guard::RequestGuard;
use crate::signing::{
    Attempt, AuthError, ClientAddress, HEADER_NONCE, HEADER_PUBLIC_KEY, HEADER_SIGNATURE,
    SignedHeaders,
};
use crate::state::AppState;
use crate::state::host::wall_clock_ns;
use crate::state::metrics::{self, Api, Exporter};
use crate::v1::{self, AuthedBroker, BrokerApi};

/// Request bodies over this are refused with 413 before any other work (D4).
pub const MAX_BODY: usize = 64 * 1024;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

const BROKER_DESCRIPTION: &str = "\
perpsim simulates a perpetual-derivatives venue behind the Broker Derivatives Trading Service \
Interface. Every `/v1` request is signed with ed25519 (D2): see the `PublicKey`, `Nonce` and \
`Signature` security schemes, three headers sent together.\n\n\
Conventions: decimal quantities are JSON strings in plain notation (no exponent, no `+`); \
where a value is a number (`cash_amount`, fee values) a JSON number is accepted too, read from \
its exact text, exponent included; \
timestamps are RFC 3339 UTC with a `Z`, in simulation time; every error answers \
`{\"code\", \"message\"}` and clients match on `code`. Unknown body fields and unsupported query \
parameters are refused with 400 VALIDATION_ERROR naming them, and so is a JSON object with a \
key given twice (never read as its first or last occurrence). Request bodies are limited to \
64 KiB (413 PAYLOAD_TOO_LARGE); each public key may send 100 requests/s with bursts of 200 \
(429 RATE_LIMITED with Retry-After). What a key can make grow is bounded: open orders per \
customer (1 000 by default) and customers per broker (100 000).";

/// Where `perpsim serve` listens with its defaults (D1): the base URL generated SDKs start with.
const DEFAULT_SERVER: &str = "http://127.0.0.1:8080";

/// The license of the service, stated in both documents.
const LICENSE: &str = "MIT OR Apache-2.0";

fn server() -> ServerObject {
    ServerObject::new(DEFAULT_SERVER).description("`perpsim serve` with its defaults (D1)")
}

pub fn broker_service() -> OpenApiService<BrokerApi, ()> {
    OpenApiService::new(v1::api(), "perpsim broker API", VERSION)
        .description(BROKER_DESCRIPTION)
        .license(LicenseObject::new(LICENSE))
        .server(server())
        .url_prefix("/v1")
}

/// The broker API's document as served and checked in: poem-openapi's, through the contract.
pub fn broker_document() -> serde_json::Value {
    contract::document(&broker_service().spec())
}

/// The admin API's document as served and checked in.
pub fn admin_document() -> serde_json::Value {
    contract::document(&admin_service().spec())
}

/// A page's (or its asset's) answer under its Content-Security-Policy: never framed, never
/// sniffed, no referrer sent on. /docs and /console are both served so.
pub(super) fn guarded_page(content_type: &str, policy: &str) -> poem::ResponseBuilder {
    Response::builder()
        .content_type(content_type)
        .header(header::CONTENT_SECURITY_POLICY, policy)
        .header(header::X_FRAME_OPTIONS, "DENY")
        .header(header::X_CONTENT_TYPE_OPTIONS, "nosniff")
        .header(header::REFERRER_POLICY, "no-referrer")
}

/// The /docs page with its Content-Security-Policy.
fn docs(page: String, policy: String) -> impl Endpoint<Output = Response> {
    make_sync(move |_| guarded_page("text/html; charset=utf-8", &policy).body(page.clone()))
}

/// Serves a fixed text with its content type.
fn fixed(content_type: &'static str, text: String) -> impl Endpoint<Output = Response> {
    make_sync(move |_| {
        Response::builder()
            .content_type(content_type)
            .body(text.clone())
    })
}

pub fn admin_service() -> OpenApiService<(AdminApi, SimulationApi, VenueApi, FaultsApi), ()> {
    OpenApiService::new(
        (AdminApi, SimulationApi, VenueApi, FaultsApi),
        "perpsim admin API",
        VERSION,
    )
    .license(LicenseObject::new(LICENSE))
    .server(server())
    .description("Simulation control for operators and tests (D3). Not part of the broker API.")
    .url_prefix("/admin/v1")
}

/// Reads the body within the limit: a declared or actual size over it answers 413.
async fn read_body(req: &mut Request) -> Result<Vec<u8>, Response> {
    let too_large = || {
        error_response(
            ErrorCode::PayloadTooLarge,
            format!("request body is larger than {MAX_BODY} bytes"),
        )
    };
    let declared = req
        .header(header::CONTENT_LENGTH)
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        return Err(too_large());
    }
    req.take_body()
        .into_bytes_limit(MAX_BODY)
        .await
        .map(|b| b.to_vec())
        .map_err(|_| too_large())
}

/// First step of both APIs: the shared state and the body, read within the limit (413 before
/// any other work, D4).
async fn admit(req: &mut Request) -> Result<(Arc<AppState>, Vec<u8>), Response> {
    let state = req
        .data::<Arc<AppState>>()
        .expect("state is attached")
        .clone();
    let body = read_body(req).await?;
    // The body is in: what follows is the service's own time, not the client's.
    if let Some(watch) = req.extensions().get::<Arc<ConnectionWatch>>() {
        watch.body_read();
    }
    Ok((state, body))
}

/// What the D2 checks read of a request: its three headers, method, target as sent and body,
/// and the client address a failure is charged to.
pub fn attempt<'a>(req: &'a Request, body: &'a [u8]) -> Attempt<'a> {
    let from = req
        .remote_addr()
        .as_socket_addr()
        .map_or(std::net::Ipv4Addr::UNSPECIFIED.into(), |a| a.ip());
    Attempt {
        headers: SignedHeaders {
            public_key: req.header(HEADER_PUBLIC_KEY),
            nonce: req.header(HEADER_NONCE),
            signature: req.header(HEADER_SIGNATURE),
        },
        method: req.method().as_str(),
        path_and_query: req
            .original_uri()
            .path_and_query()
            .map_or("/", |p| p.as_str()),
        body,
        from: ClientAddress::from(from),
    }
}

/// The D2 signing check in front of the broker API.
async fn signed<E: Endpoint>(ep: Arc<E>, mut req: Request) -> poem::Result<Response> {
    let (state, body) = match admit(&mut req).await {
        Ok(admitted) => admitted,
        Err(resp) => return Ok(resp),
    };
    let view = state.engine.view();
    let attempt = attempt(&req, &body);
    let verdict = state
        .auth
        .authenticate(&attempt, |k| view.keys.get(k).copied(), wall_clock_ns());
    let admission = match verdict {
        Ok(admission) => Arc::new(admission),
        Err(e) => return Ok(refused(e)),
    };
    req.extensions_mut().insert(AuthedBroker(admission.clone()));
    let resp = forward(&*ep, req, body, &guards().broker).await;
    // At most once, across restarts too: no answer leaves before the nonce is durable. A
    // command already spent it in its own tick; anything else spends it here.
    match state.engine.spend_nonce(&admission).await {
        Ok(()) => resp,
        Err(e) => Ok(error_response(e.code, e.message)),
    }
}

/// The answer to a request that failed authentication, counted by its reason.
fn refused(e: AuthError) -> Response {
    metrics::auth_failure(Api::Broker, e.reason());
    let mut resp = error_response(e.code(), e.message());
    if let Some(secs) = e.retry_after_secs() {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    resp
}

/// After authentication: unsupported query parameters are refused, then the request goes on
/// with its body restored.
async fn forward<E: Endpoint>(
    ep: &E,
    mut req: Request,
    body: Vec<u8>,
    guard: &RequestGuard,
) -> poem::Result<Response> {
    let uri = req.original_uri();
    let method = req.method().as_str();
    let checked = guard
        .check(method, uri.path(), uri.query())
        .and_then(|()| strict_json::refuse_duplicate_keys(&body))
        .and_then(|()| guard.check_body(method, uri.path(), &body));
    if let Err(e) = checked {
        return Ok(error_response(e.code, e.message));
    }
    req.set_body(body);
    ep.call(req).await.map(IntoResponse::into_response)
}

/// Constant-time comparison, so the token cannot be guessed byte by byte from timings.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The bearer-token check in front of the admin API.
async fn admin<E: Endpoint>(ep: Arc<E>, mut req: Request) -> poem::Result<Response> {
    let (state, body) = match admit(&mut req).await {
        Ok(admitted) => admitted,
        Err(resp) => return Ok(resp),
    };
    let token = req
        .header(header::AUTHORIZATION)
        .and_then(|v| v.strip_prefix("Bearer "));
    match token {
        Some(t) if same_secret(t.as_bytes(), state.admin_token.as_bytes()) => {
            req.extensions_mut().insert(AdminAuthed);
        }
        Some(_) => {
            metrics::auth_failure(Api::Admin, "unauthorized");
            return Ok(error_response(ErrorCode::Unauthorized, "wrong admin token"));
        }
        None => {
            metrics::auth_failure(Api::Admin, "unauthorized");
            return Ok(error_response(
                ErrorCode::Unauthorized,
                "missing header Authorization: Bearer <admin token>",
            ));
        }
    }
    forward(&*ep, req, body, &guards().admin).await
}

/// HTTP-date of the wall clock, for the `Date` header.
pub fn http_date() -> HeaderValue {
    let text = chrono::Utc::now()
        .format("%a, %d %b %Y %H:%M:%S GMT")
        .to_string();
    HeaderValue::from_str(&text).expect("http date is ascii")
}

/// What each API's document declares of a request, built once from the documents (which
/// the code fixes, so every request checks against the same).
struct Guards {
    broker: RequestGuard,
    admin: RequestGuard,
}

fn guards() -> &'static Guards {
    static GUARDS: LazyLock<Guards> = LazyLock::new(|| Guards {
        broker: RequestGuard::from_document(&broker_document()),
        admin: RequestGuard::from_document(&admin_document()),
    });
    &GUARDS
}

/// The methods `path` answers, for the `Allow` header of a 405 (RFC 9110 §15.5.6): those the
/// two documents declare; a path neither declares answered 405, so it is one of the routes
/// outside the APIs (documents, docs, health, metrics), which all answer GET only.
fn allowed_methods(path: &str) -> Vec<String> {
    let mut methods = guards().broker.methods(path);
    methods.extend(guards().admin.methods(path));
    if methods.is_empty() {
        return vec!["GET".into()];
    }
    methods.into_iter().collect()
}

/// The API, route (the document's path template) and method a request is counted under: the
/// routes the documents declare, the router's own fixed routes (any other path outside the
/// APIs answered 404), and `unmatched` for the rest, so that the labels stay a bounded set
/// whatever paths clients send.
fn route_of(
    method: &Method,
    path: &str,
    status: StatusCode,
) -> (Api, Cow<'static, str>, &'static str) {
    let method = match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "OTHER",
    };
    let guards = guards();
    if let Some(route) = guards.broker.route(method, path) {
        return (Api::Broker, Cow::Borrowed(route), method);
    }
    if let Some(route) = guards.admin.route(method, path) {
        return (Api::Admin, Cow::Borrowed(route), method);
    }
    let (api, fixed) = match path {
        p if p.starts_with("/v1/") => (Api::Broker, false),
        p if p.starts_with("/admin/v1/") => (Api::Admin, false),
        _ => (Api::Other, status != StatusCode::NOT_FOUND),
    };
    let route = match fixed {
        true => Cow::Owned(path.to_owned()),
        false => Cow::Borrowed("unmatched"),
    };
    (api, route, method)
}

/// Last step of every response: the D4 error body, `Allow` on a 405, the Date header, the
/// request's latency by route and status.
async fn finish(
    result: poem::Result<Response>,
    (method, path): (&Method, &str),
    started: Instant,
) -> Response {
    let resp = match result {
        Ok(resp) => resp,
        Err(err) => errors::from_poem_error(err),
    };
    let mut resp = errors::normalize(resp).await;
    if resp.status() == StatusCode::METHOD_NOT_ALLOWED {
        let allow = allowed_methods(path).join(", ");
        if let Ok(value) = HeaderValue::from_str(&allow) {
            resp.headers_mut().insert(header::ALLOW, value);
        }
    }
    resp.headers_mut().insert(header::DATE, http_date());
    let (api, route, method) = route_of(method, path, resp.status());
    metrics::request(
        api,
        route,
        method,
        resp.status().as_u16(),
        started.elapsed(),
    );
    resp
}

#[handler]
fn healthz() -> Response {
    json_status(StatusCode::OK, "ok")
}

#[handler]
fn readyz(state: Data<&Arc<AppState>>) -> Response {
    match state.ready.load(Relaxed) {
        true => json_status(StatusCode::OK, "ready"),
        false => error_response(
            ErrorCode::ExchangeUnavailable,
            "starting up or shutting down",
        ),
    }
}

#[handler]
fn prometheus(state: Data<&Arc<AppState>>) -> Response {
    let text = state.exporter.as_ref().map(Exporter::render);
    Response::builder()
        .content_type("text/plain; version=0.0.4")
        .body(text.unwrap_or_default())
}

fn json_status(status: StatusCode, text: &str) -> Response {
    Response::builder()
        .status(status)
        .content_type("application/json")
        .body(format!("{{\"status\":\"{text}\"}}"))
}

/// The whole application, serving documents that name `local`, the address it listens on.
pub fn app(
    state: Arc<AppState>,
    ws: Arc<crate::ws::WsShared>,
    local: SocketAddr,
    played: crate::replay::market::Played,
) -> impl Endpoint<Output = Response> {
    let broker = broker_service();
    let admin_api = admin_service();
    let served = docs_page::served(local);
    let page = served.docs_page;
    Route::new()
        .at(
            "/openapi.json",
            get(fixed("application/json", served.broker_json)),
        )
        .at(
            "/openapi.yaml",
            get(fixed("application/x-yaml", served.broker_yaml)),
        )
        .at("/docs", get(docs(page.clone(), served.docs_policy.clone())))
        .at("/docs/", get(docs(page, served.docs_policy)))
        .at(
            "/admin/openapi.json",
            get(fixed("application/json", served.admin_json)),
        )
        .at(
            "/asyncapi.yaml",
            get(fixed("application/x-yaml", served.asyncapi_yaml)),
        )
        .nest("/console", crate::server::console::routes())
        .at("/healthz", get(healthz))
        .at("/readyz", get(readyz))
        .at("/metrics", get(prometheus))
        .nest("/v1", broker.around(signed))
        .nest("/admin/v1", admin_api.around(admin))
        .data(state.clone())
        .data(ws)
        .data(played)
        .around(move |ep, req| async move {
            let started = Instant::now();
            let (method, path) = (req.method().clone(), req.uri().path().to_owned());
            let result = ep.call(req).await.map(IntoResponse::into_response);
            Ok::<Response, poem::Error>(finish(result, (&method, &path), started).await)
        })
}
