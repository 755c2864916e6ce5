//! The AsyncAPI 3.1 document of the channels (D1: `GET /asyncapi.yaml`; checked in as
//! `openapi/asyncapi.yaml`), generated from the frame types in [`super::frames`]: their
//! poem-openapi schemas, written as the JSON Schema AsyncAPI takes (`nullable` becomes a
//! `null` alternative, `example` becomes `examples`).

use poem_openapi::registry::Registry;
use poem_openapi::types::Type;
use serde_json::{Map, Value, json};

use super::frames::{
    AuthenticateOp, BalanceChange, BookSnapshot, BookUpdate, DataFrame, ErrorFrame,
    LiquidationRecord, MarginFrame, NotificationFrame, OpReply, PingOp, PositionsFrame, TopicsOp,
};
use crate::v1::market::{PublicTrade, Ticker};
use crate::v1::orders::OrderRecord;
use crate::v1::trades::TradeRecord;

const DESCRIPTION: &str = "\
The push channels of the Broker Derivatives Trading Service Interface (§6, D9) over one \
WebSocket at `GET /v1/ws`. The upgrade needs no signature headers. Every frame is a JSON \
text frame. A client sends ops (`authenticate`, `subscribe`, `unsubscribe`, `ping`) and \
receives their replies and, for each subscribed topic, frames whose `channel` is the topic. \
Public topics (`ticker`, `orderbook-stream:{symbol}`, `market-trades:{symbol}`) need no \
authentication; the others carry only the authenticated broker's customers. A bad frame is \
answered `{\"op\":\"error\",\"code\",\"message\",\"channel\"?}` and never closes the \
connection; codes: VALIDATION_ERROR (malformed frame, unknown op, topic or symbol, a bound), \
UNAUTHORIZED (a failed authenticate, a private topic before it, a revoked key), NOT_FOUND \
(positions of no customer of the broker), RATE_LIMITED (authenticate past the key's rate or \
past the address's failed authentications, frames past the connection's rate). \n\n\
Bounds: `--max-ws-connections` (4096; at it a connection that has not authenticated gives \
way, closed with 1013, and only with every one authenticated does the upgrade answer 503); \
WebSocket and HTTP connections together within `--max-connections-per-address` (1024); \
`--max-ws-subscriptions` per connection (256); a queue per connection of `--ws-queue` frames \
(4096) and `--ws-queue-bytes` bytes (4 MiB): a consumer that lets it fill is closed with 1008 \
`slow consumer`, the engine never waits. Closed with 1008: a connection that neither \
authenticated nor subscribed within `--ws-auth-timeout` (10 s; `authentication timeout`), one \
sending frames faster than `--ws-op-rate` (20 a second, bursts of `--ws-op-burst` 40; an \
error first, then `op rate exceeded`), one after its fifth failed authenticate \
(`too many failed authentications`), and every session of a key when it is revoked \
(`key revoked`). Client frames of at most 64 KiB (1009 past it; 1007 for text that is not \
UTF-8), and a heartbeat: the server pings every third of `--ws-heartbeat-timeout` (30 s) and \
closes a connection it heard nothing from (no frame, ping or pong) for that long, with \
1001. \n\n\
Orders: one update per order per engine run that changed it (placement, amend, cancel, \
trigger, fills, expiry, a liquidation's cancel), carrying the order as the run left it; each \
fill is on `trades`. Positions and margin: pushed when a 5-second boundary of simulation time \
passes (at most once per engine tick; a manual advance pushes once, at its end), both at the \
same `timestamp`; margin carries one frame per customer holding an open position.";

/// The schemas a document names: the frame types' own, registered as poem-openapi does,
/// and the few derived from them.
#[derive(Default)]
struct Schemas {
    registry: Registry,
    derived: Map<String, Value>,
}

impl Schemas {
    /// Registers `T` and gives its schema's name.
    fn of<T: Type>(&mut self) -> String {
        T::register(&mut self.registry);
        T::name().into_owned()
    }

    fn value(&self, name: &str) -> Value {
        serde_json::to_value(&self.registry.schemas[name]).expect("a schema encodes")
    }

    /// The orders channel's frame: a data frame of the order read shape with `order_type`
    /// in place of `type`, derived from the REST record's own schema.
    fn order_frame(&mut self) -> String {
        let record = self.of::<OrderRecord>();
        let frame = self.of::<DataFrame<TradeRecord>>();
        let mut update = self.value(&record);
        if let Some(properties) = update["properties"].as_object_mut() {
            let kind = properties.remove("type").expect("an order has a type");
            properties.insert("order_type".into(), kind);
        }
        if let Some(required) = update["required"].as_array_mut() {
            required.retain(|f| f != "type");
            required.push(json!("order_type"));
        }
        let mut envelope = self.value(&frame);
        envelope["properties"]["data"] = json!({"$ref": "#/components/schemas/OrderUpdate"});
        self.derived.insert("OrderUpdate".into(), update);
        self.derived.insert("OrderFrame".into(), envelope);
        "OrderFrame".into()
    }

    /// Every schema, as AsyncAPI's JSON Schema.
    fn all(self) -> Map<String, Value> {
        let mut out: Map<String, Value> = self
            .registry
            .schemas
            .iter()
            .map(|(name, s)| {
                (
                    name.clone(),
                    serde_json::to_value(s).expect("a schema encodes"),
                )
            })
            .collect();
        out.extend(self.derived);
        for schema in out.values_mut() {
            crate::contract::json_schema(schema);
        }
        out
    }
}

/// One message: its name, the schema of its payload, a summary.
struct Message {
    name: &'static str,
    schema: String,
    summary: &'static str,
}

fn msg(name: &'static str, schema: String, summary: &'static str) -> Message {
    Message {
        name,
        schema,
        summary,
    }
}

/// A channel: its key, address (a topic, with `{parameters}`), description, messages.
struct Channel {
    key: &'static str,
    address: Option<&'static str>,
    description: &'static str,
    messages: Vec<Message>,
}

/// The topics in the order of §6.
fn topics(s: &mut Schemas) -> Vec<Channel> {
    let mut topics = private_topics(s);
    topics.extend(public_topics(s));
    topics
}

/// The topics a broker's authenticated connection hears, for its own customers.
fn private_topics(s: &mut Schemas) -> Vec<Channel> {
    vec![
        Channel {
            key: "balanceChanges",
            address: Some("balance-changes"),
            description: "Each ledger movement when it reaches a terminal status (§2.1, §6 rule 1); flat; no initial snapshot; delivery unordered.",
            messages: vec![msg(
                "balanceChange",
                s.of::<BalanceChange>(),
                "A terminal movement",
            )],
        },
        Channel {
            key: "notifications",
            address: Some("notifications"),
            description: "Position depreciation notices (§2.2), flat; the REST record without `channel`, with `created_at` for `timestamp`; no initial snapshot.",
            messages: vec![msg("notification", s.of::<NotificationFrame>(), "A notice")],
        },
        Channel {
            key: "positions",
            address: Some("positions:{customer_code}"),
            description: "The customer's open positions, the whole list, at each valuation instant (every 5 s of simulation time); the subscription starts with the current list.",
            messages: vec![msg("positions", s.of::<PositionsFrame>(), "Open positions")],
        },
        Channel {
            key: "margin",
            address: Some("margin"),
            description: "Account-summary fields per customer holding an open position, at the same instants as positions; the subscription starts with the current ones.",
            messages: vec![msg("margin", s.of::<MarginFrame>(), "A customer's margin")],
        },
        Channel {
            key: "liquidations",
            address: Some("liquidations"),
            description: "Margin state changes (§6 rules 4–5, D10).",
            messages: vec![msg(
                "liquidation",
                s.of::<DataFrame<LiquidationRecord>>(),
                "A margin state change",
            )],
        },
        Channel {
            key: "orders",
            address: Some("orders"),
            description: "Order updates of every type (§6 rule 3): the order read shape (D5) with `order_type` in place of `type`.",
            messages: vec![msg("order", s.order_frame(), "An order as a run left it")],
        },
        Channel {
            key: "trades",
            address: Some("trades"),
            description: "Trade records (D5), one per side of a fill.",
            messages: vec![msg(
                "trade",
                s.of::<DataFrame<TradeRecord>>(),
                "A trade record",
            )],
        },
    ]
}

/// The market's own topics, which need no authentication.
fn public_topics(s: &mut Schemas) -> Vec<Channel> {
    vec![
        Channel {
            key: "ticker",
            address: Some("ticker"),
            description: "Every instrument's ticker (D8): a snapshot of each on subscription, then an update whenever one moves.",
            messages: vec![msg("ticker", s.of::<DataFrame<Ticker>>(), "A ticker")],
        },
        Channel {
            key: "orderbookStream",
            address: Some("orderbook-stream:{symbol}"),
            description: "The best 50 levels a side: a snapshot, then one update per engine tick with all of that tick's changes (§6 rule 6), `sequence` exactly one more than the last frame's (on a gap, subscribe again for a new snapshot). `checksum` is the CRC-32 (IEEE) of the best 10 asks, lowest first, then the best 10 bids, highest first, of the book after the frame, each written `price:amount` with the frames' own strings, joined by `|`.",
            messages: vec![
                msg(
                    "bookSnapshot",
                    s.of::<BookSnapshot>(),
                    "The book's best levels",
                ),
                msg("bookUpdate", s.of::<BookUpdate>(), "One tick's changes"),
            ],
        },
        Channel {
            key: "marketTrades",
            address: Some("market-trades:{symbol}"),
            description: "One envelope per trade, the PublicTrade fields (D8).",
            messages: vec![msg(
                "marketTrade",
                s.of::<DataFrame<PublicTrade>>(),
                "A public trade",
            )],
        },
    ]
}

/// The ops' own channel: what a client sends and the replies and errors it gets.
fn control(s: &mut Schemas) -> Channel {
    Channel {
        key: "control",
        address: None,
        description: "The connection itself: ops, their replies, and errors.",
        messages: vec![
            msg(
                "authenticate",
                s.of::<AuthenticateOp>(),
                "Authenticate the connection",
            ),
            msg("subscribe", s.of::<TopicsOp>(), "Subscribe to topics"),
            msg("unsubscribe", s.of::<TopicsOp>(), "Unsubscribe from topics"),
            msg("ping", s.of::<PingOp>(), "Ping"),
            msg(
                "reply",
                s.of::<OpReply>(),
                "authenticated, subscribed, unsubscribed or pong",
            ),
            msg(
                "error",
                s.of::<ErrorFrame>(),
                "An error; `channel` names the topic it is about",
            ),
        ],
    }
}

fn parameters(address: &str) -> Option<Value> {
    let names: Vec<&str> = address
        .split('{')
        .skip(1)
        .filter_map(|p| p.split('}').next())
        .collect();
    let described = |n: &str| match n {
        "symbol" => "An instrument's symbol, as on GET /v1/instruments.",
        _ => "A customer code of the authenticated broker.",
    };
    (!names.is_empty()).then(|| {
        let params: Map<String, Value> = names
            .iter()
            .map(|n| ((*n).to_owned(), json!({"description": described(n)})))
            .collect();
        Value::Object(params)
    })
}

fn channel_json(c: &Channel) -> Value {
    let messages: Map<String, Value> = c
        .messages
        .iter()
        .map(|m| {
            (
                m.name.to_owned(),
                json!({"$ref": format!("#/components/messages/{}", m.name)}),
            )
        })
        .collect();
    let mut out = json!({"address": c.address, "description": c.description, "messages": messages});
    if let Some(p) = c.address.and_then(parameters) {
        out["parameters"] = p;
    }
    out
}

fn message_refs(channel: &str, names: &[&str]) -> Value {
    names
        .iter()
        .map(|n| json!({"$ref": format!("#/channels/{channel}/messages/{n}")}))
        .collect()
}

/// The client's four ops, each with the replies it may get.
fn ops() -> Map<String, Value> {
    let send = |message: &str, replies: &[&str], description: &str| {
        json!({
            "action": "send",
            "channel": {"$ref": "#/channels/control"},
            "description": description,
            "messages": message_refs("control", &[message]),
            "reply": {"channel": {"$ref": "#/channels/control"}, "messages": message_refs("control", replies)},
        })
    };
    let mut out = Map::new();
    out.insert("authenticate".into(), send("authenticate", &["reply", "error"], "Answered `{\"op\":\"authenticated\"}`, or UNAUTHORIZED (the connection stays open for another try)."));
    out.insert("subscribe".into(), send("subscribe", &["reply", "error"], "Answered `subscribed` with the topics taken (then each topic's snapshot, where it has one), and an error naming each topic refused. Subscribing again to a topic held gives a new snapshot."));
    out.insert(
        "unsubscribe".into(),
        send(
            "unsubscribe",
            &["reply", "error"],
            "Answered `unsubscribed` with the topics.",
        ),
    );
    out.insert(
        "ping".into(),
        send("ping", &["reply"], "Answered `{\"op\":\"pong\"}`."),
    );
    out
}

/// The whole document.
pub fn document() -> Value {
    let mut s = Schemas::default();
    let mut all = topics(&mut s);
    all.push(control(&mut s));
    let mut channels = Map::new();
    let mut operations = ops();
    let mut messages = Map::new();
    for c in &all {
        channels.insert(c.key.into(), channel_json(c));
        let names: Vec<&str> = c.messages.iter().map(|m| m.name).collect();
        let client_ops = ["authenticate", "subscribe", "unsubscribe", "ping"];
        let received: Vec<&str> = names
            .iter()
            .copied()
            .filter(|n| !client_ops.contains(n))
            .collect();
        operations.insert(
            format!("receive_{}", c.key),
            json!({"action": "receive", "channel": {"$ref": format!("#/channels/{}", c.key)}, "messages": message_refs(c.key, &received)}),
        );
        for m in &c.messages {
            let payload = json!({"$ref": format!("#/components/schemas/{}", m.schema)});
            messages.insert(m.name.into(), json!({"name": m.name, "summary": m.summary, "contentType": "application/json", "payload": payload}));
        }
    }
    json!({
        "asyncapi": "3.1.0",
        "info": {
            "title": "perpsim push channels",
            "version": env!("CARGO_PKG_VERSION"),
            "description": DESCRIPTION,
            "license": {"name": "MIT OR Apache-2.0"},
        },
        "defaultContentType": "application/json",
        "servers": {
            "local": {"host": "127.0.0.1:8080", "protocol": "ws", "pathname": super::upgrade::PATH, "description": "`perpsim serve` with its defaults (D1)"},
        },
        "channels": channels,
        "operations": operations,
        "components": {"messages": messages, "schemas": s.all()},
    })
}
