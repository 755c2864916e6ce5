//! A blocking WebSocket client for the channels (D9), as a broker's integration would hold
//! one: connect without signature headers, authenticate with a signed nonce, subscribe, read
//! frames as JSON, each checked against the AsyncAPI document's schema for its channel.

use std::net::TcpStream;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tungstenite::protocol::CloseFrame;
use tungstenite::{Message, WebSocket};

use crate::{Client, Server, now_ns};

/// The checked-in AsyncAPI document (drift-tested against the code, and served as it is):
/// per channel, its address and a validator per message it may carry.
struct Contract {
    channels: Vec<(String, Vec<(String, jsonschema::Validator)>)>,
}

static CONTRACT: LazyLock<Contract> = LazyLock::new(|| {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../openapi/asyncapi.yaml");
    let text = std::fs::read_to_string(path).expect("openapi/asyncapi.yaml");
    let doc: Value = serde_saphyr::from_str(&text).expect("the AsyncAPI document is YAML");
    let schemas = doc["components"]["schemas"].clone();
    let channels = doc["channels"]
        .as_object()
        .unwrap()
        .values()
        .map(|c| {
            let address = c["address"].as_str().unwrap_or("").to_owned();
            let messages = c["messages"]
                .as_object()
                .unwrap()
                .keys()
                .map(|name| {
                    let payload = &doc["components"]["messages"][name]["payload"]["$ref"];
                    let root = json!({"$ref": payload, "components": {"schemas": schemas}});
                    let v = jsonschema::draft202012::new(&root).expect("a valid schema");
                    (name.clone(), v)
                })
                .collect();
            (address, messages)
        })
        .collect();
    Contract { channels }
});

/// Panics unless `frame` is one of the messages its channel declares (the channel named by
/// its `channel`, the ops' channel for a frame with an `op`).
pub fn assert_documented(frame: &Value) {
    let channel = frame["channel"].as_str();
    let owner = CONTRACT.channels.iter().find(|(address, _)| match channel {
        _ if frame.get("op").is_some() => address.is_empty(),
        Some(name) => match address.split_once('{') {
            Some((prefix, _)) => name.starts_with(prefix),
            None => address == name,
        },
        None => false,
    });
    let Some((address, messages)) = owner else {
        panic!("no channel of the AsyncAPI document carries {frame}");
    };
    if messages.iter().any(|(_, v)| v.is_valid(frame)) {
        return;
    }
    let why: Vec<String> = messages
        .iter()
        .map(|(name, v)| {
            let errors: Vec<String> = v.iter_errors(frame).map(|e| e.to_string()).collect();
            format!("{name}: {}", errors.join("; "))
        })
        .collect();
    panic!(
        "frame on {address:?} matches no documented message: {frame}\n{}",
        why.join("\n")
    );
}

pub struct Ws {
    pub socket: WebSocket<TcpStream>,
}

/// What reading found: a data or op frame, the server's close frame, or nothing in time.
#[derive(Debug)]
pub enum Read {
    Frame(Value),
    Closed(Option<CloseFrame>),
    Nothing,
}

impl Ws {
    pub fn connect(server: &Server) -> Ws {
        Ws::try_connect(server).unwrap_or_else(|e| panic!("WebSocket upgrade failed: {e}"))
    }

    pub fn try_connect(server: &Server) -> Result<Ws, tungstenite::Error> {
        Ws::try_connect_from(server, std::net::Ipv4Addr::LOCALHOST)
    }

    /// A connection from `source`, a loopback address (one test, many clients).
    pub fn try_connect_from(
        server: &Server,
        source: std::net::Ipv4Addr,
    ) -> Result<Ws, tungstenite::Error> {
        let addr = server.url.trim_start_matches("http://");
        let stream = crate::sockets::connect_from(server, source);
        stream.set_nodelay(true).unwrap();
        let url = format!("ws://{addr}/v1/ws");
        match tungstenite::client(url, stream) {
            Ok((socket, _)) => Ok(Ws { socket }),
            Err(tungstenite::HandshakeError::Failure(e)) => Err(e),
            Err(tungstenite::HandshakeError::Interrupted(_)) => unreachable!("blocking socket"),
        }
    }

    pub fn send(&mut self, frame: Value) {
        self.socket
            .send(Message::Text(frame.to_string().into()))
            .expect("send a frame");
    }

    pub fn send_text(&mut self, text: &str) {
        self.socket
            .send(Message::Text(text.into()))
            .expect("send a frame");
    }

    /// The next text frame, or the close, within `limit` (pings are answered and skipped).
    pub fn read(&mut self, limit: Duration) -> Read {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Read::Nothing;
            }
            self.socket.get_ref().set_read_timeout(Some(left)).unwrap();
            match self.socket.read() {
                Ok(Message::Text(t)) => {
                    let frame: Value = serde_json::from_str(&t).unwrap();
                    assert_documented(&frame);
                    return Read::Frame(frame);
                }
                Ok(Message::Close(c)) => return Read::Closed(c),
                Ok(_) => continue,
                Err(tungstenite::Error::Io(e))
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return Read::Nothing;
                }
                Err(tungstenite::Error::ConnectionClosed | tungstenite::Error::AlreadyClosed) => {
                    return Read::Closed(None);
                }
                Err(e) => panic!("read: {e}"),
            }
        }
    }

    /// The next text frame; panics on a close or after 10 s.
    pub fn frame(&mut self) -> Value {
        match self.read(Duration::from_secs(10)) {
            Read::Frame(v) => v,
            other => panic!("expected a frame, got {other:?}"),
        }
    }

    /// Reads until a frame matches `want` (within 10 s), returning it.
    pub fn until(&mut self, what: &str, want: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Read::Frame(v) = self.read(Duration::from_millis(200))
                && want(&v)
            {
                return v;
            }
        }
        panic!("no frame: {what}");
    }

    /// Every frame that arrives within `limit`.
    pub fn drain(&mut self, limit: Duration) -> Vec<Value> {
        let mut out = Vec::new();
        let deadline = Instant::now() + limit;
        while let Read::Frame(v) = self.read(deadline.saturating_duration_since(Instant::now())) {
            out.push(v);
        }
        out
    }

    /// The bytes the server has sent and nobody read, as they are on the socket (to see
    /// frames a client library would answer or hide): until the socket ends or `limit`.
    pub fn raw_bytes(&mut self, limit: Duration) -> Vec<u8> {
        use std::io::Read as _;
        let socket = self.socket.get_mut();
        socket.set_read_timeout(Some(limit)).unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = socket.read(&mut buf) {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        out
    }

    /// The authenticate op signed by `client` with `nonce`.
    pub fn authenticate_with(&mut self, client: &Client, nonce: &str) -> Value {
        let signature = client.signature(nonce, "GET", "/v1/ws", b"");
        self.send(json!({
            "op": "authenticate",
            "public_key": client.public_key(),
            "nonce": nonce,
            "signature": signature,
        }));
        self.frame()
    }

    pub fn authenticate(&mut self, client: &Client) {
        let reply = self.authenticate_with(client, &now_ns().to_string());
        assert_eq!(reply, json!({"op": "authenticated"}));
    }

    /// Subscribes and reads the acknowledgement.
    pub fn subscribe(&mut self, topics: &[&str]) {
        self.send(json!({"op": "subscribe", "args": topics}));
        let ack = self.until("subscribed", |v| v["op"] == "subscribed");
        assert_eq!(ack["args"], json!(topics), "{ack}");
    }
}
