//! The bare server: poem on hyper and tokio as `perpsim serve` runs them (a two-worker
//! runtime on this machine), reading the body within the same limit and running the same D2
//! check (`Authenticator`: key, rate bucket, nonce window, ed25519 verification), then
//! answering a constant. What a load run reaches against it is what the stack itself allows
//! on this machine; perpsim's figures are quoted as a ratio to it.

use std::sync::Arc;

use perpsim_api::signing::{Authenticator, RateLimit};
use perpsim_core::ids::BrokerCode;
use poem::http::StatusCode;
use poem::listener::{Acceptor, Listener, TcpListener};
use poem::{EndpointExt, Request, Response, Route};

/// What every admitted request is answered: an order's worth of JSON.
const ANSWER: &str = r#"{"order_id":"00000000-0000-4000-8000-000000000000","status":"new"}"#;

async fn answer(auth: &Authenticator, mut req: Request) -> Response {
    let body = match req
        .take_body()
        .into_bytes_limit(perpsim_api::server::app::MAX_BODY)
        .await
    {
        Ok(body) => body,
        Err(_) => {
            return Response::builder()
                .status(StatusCode::PAYLOAD_TOO_LARGE)
                .finish();
        }
    };
    let attempt = perpsim_api::server::app::attempt(&req, &body);
    // Every key is a broker here: there is no engine to look it up in.
    let broker = |_: &_| BrokerCode::parse("00000000-0000-4000-8000-000000000000");
    let now = perpsim_api::state::host::wall_clock_ns();
    match auth.authenticate(&attempt, broker, now) {
        Ok(_) => Response::builder()
            .content_type("application/json")
            .body(ANSWER),
        Err(_) => Response::builder()
            .status(StatusCode::UNAUTHORIZED)
            .finish(),
    }
}

/// Serves until killed; logs `listening address=http://…` on stderr as perpsim does.
pub fn serve() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let auth = Arc::new(Authenticator::new(
            RateLimit {
                per_second: 1_000_000,
                burst: 1_000_000,
            },
            RateLimit {
                per_second: 10,
                burst: 100,
            },
            1 << 20,
        ));
        let app = Route::new().at(
            "/*path",
            poem::endpoint::make(move |req| {
                let auth = auth.clone();
                async move { answer(&auth, req).await }
            }),
        );
        let acceptor = TcpListener::bind("127.0.0.1:0")
            .into_acceptor()
            .await
            .expect("bind");
        let addr = acceptor.local_addr()[0].clone();
        let addr = addr.as_socket_addr().expect("a socket address").to_owned();
        eprintln!("listening address=http://{addr}");
        poem::Server::new_with_acceptor(acceptor)
            .run(app.map_to_response())
            .await
            .expect("serve");
    });
}
