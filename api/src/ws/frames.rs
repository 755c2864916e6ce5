//! Every frame the channels send (D9), as poem-openapi objects: one type per message, so the
//! frames and their schemas come from the same definitions. A frame is serialized once and
//! its bytes shared by every connection that receives it ([`Frame`]).

use poem_openapi::Object;
use poem_openapi::types::{ParseFromJSON, ToJSON};
use tokio_tungstenite::tungstenite::Utf8Bytes;

use crate::contract::Nullable;
use crate::v1::notifications::PositionDepreciation;
use crate::v1::positions::PositionRecord;
use crate::v1::profiles::AccountSummary;
use crate::wire::{DecimalOut, Time};

/// A serialized frame: cloning shares the bytes.
pub type Frame = Utf8Bytes;

/// Serializes a frame once.
pub fn frame<T: ToJSON>(value: &T) -> Frame {
    let json = value.to_json().expect("frames are JSON objects");
    Utf8Bytes::from(json.to_string())
}

/// `{"op":"authenticated"}`, `{"op":"pong"}`, and the subscription acknowledgements with the
/// topics they acknowledge (`subscribed`, `unsubscribed`).
#[derive(Object, Debug, Clone)]
pub struct OpReply {
    pub op: String,
    #[oai(skip_serializing_if_is_none)]
    pub args: Option<Vec<String>>,
}

/// An error (D9): `channel` names the topic when the error is about one.
#[derive(Object, Debug, Clone)]
pub struct ErrorFrame {
    /// Always `error`.
    pub op: String,
    pub code: String,
    pub message: String,
    #[oai(skip_serializing_if_is_none)]
    pub channel: Option<String>,
}

/// A ledger movement that reached a terminal status (interface §2.1): flat, no `data`.
#[derive(Object, Debug, Clone)]
pub struct BalanceChange {
    pub channel: String,
    /// Always `update`.
    #[oai(rename = "type")]
    pub kind: String,
    pub code: String,
    /// Trade-family movements only (trade, liquidation, auto_deleveraging).
    #[oai(skip_serializing_if_is_none)]
    pub trade_code: Option<String>,
    pub customer_code: String,
    pub transaction_type: String,
    pub currency: String,
    /// Signed: positive credit, negative debit; on trade-family movements realised_pnl − fee.
    pub total_amount: DecimalOut,
    #[oai(skip_serializing_if_is_none)]
    pub realised_pnl: Option<DecimalOut>,
    #[oai(skip_serializing_if_is_none)]
    pub fee: Option<DecimalOut>,
    /// `completed` or `cancelled`.
    pub status: String,
    /// The currency's end balance, when completed.
    #[oai(skip_serializing_if_is_none)]
    pub balance: Option<DecimalOut>,
    #[oai(skip_serializing_if_is_none)]
    pub balance_as_of: Option<Time>,
    /// Trade movements only (forced fills have none).
    #[oai(skip_serializing_if_is_none)]
    pub reference_id: Option<String>,
    /// Trade-family, funding and settlement movements.
    #[oai(skip_serializing_if_is_none)]
    pub symbol: Option<String>,
    /// Settlement movements only.
    #[oai(skip_serializing_if_is_none)]
    pub mark_price: Option<DecimalOut>,
    /// Funding movements only.
    #[oai(skip_serializing_if_is_none)]
    pub funding_rate: Option<DecimalOut>,
    pub timestamp: Time,
}

/// A notification (interface §2.2): flat; `type` is the notification type. The REST record
/// is this without `channel`, with `created_at` for `timestamp` (D9).
#[derive(Object, Debug, Clone)]
pub struct NotificationFrame {
    pub channel: String,
    #[oai(rename = "type")]
    pub kind: String,
    pub code: String,
    pub customer_code: String,
    pub timestamp: Time,
    pub data: PositionDepreciation,
}

/// A customer's open positions, the whole list, every 5 s of simulation time (§6, §8).
#[derive(Object, Debug, Clone)]
pub struct PositionsFrame {
    pub channel: String,
    /// Always `snapshot`.
    #[oai(rename = "type")]
    pub kind: String,
    /// The valuation instant: the margin frames of the same push carry the same.
    pub timestamp: Time,
    pub data: Vec<PositionRecord>,
}

/// A customer's account summary as `GET account-summary` answers it, with its code.
#[derive(Object, Debug)]
pub struct MarginRecord {
    pub customer_code: String,
    #[oai(flatten)]
    pub summary: AccountSummary,
}

/// One customer's margin, pushed with the positions, at the same instant (§6).
#[derive(Object, Debug)]
pub struct MarginFrame {
    pub channel: String,
    /// Always `snapshot`.
    #[oai(rename = "type")]
    pub kind: String,
    pub timestamp: Time,
    pub data: MarginRecord,
}

/// A margin state change (§6 rules 4–5, D10).
#[derive(Object, Debug, Clone)]
pub struct LiquidationRecord {
    pub customer_code: String,
    /// The settlement currency whose positions the state is about.
    pub currency: String,
    /// `normal`, `margin_call` or `liquidation`.
    pub margin_state: String,
    /// What restores initial margin: 0 while available margin is not negative; null when the
    /// state is normal.
    pub margin_deficit: Nullable<DecimalOut>,
    /// Rounded down to 4 decimals.
    pub leverage_ratio: DecimalOut,
    /// Deprecated: use leverage_ratio.
    #[oai(deprecated)]
    pub margin_ratio: DecimalOut,
    pub timestamp: Time,
}

/// A frame carrying one record in `data`: liquidations, orders, trades, ticker and
/// market-trades (D9).
/// The orders channel's record is the order read shape with `order_type` for `type` (D9).
#[derive(Object, Debug, Clone)]
pub struct DataFrame<T: ToJSON + ParseFromJSON> {
    pub channel: String,
    /// `snapshot` for what a subscription starts with, `update` after.
    #[oai(rename = "type")]
    pub kind: String,
    pub data: T,
}

/// A price level of a book snapshot.
#[derive(Object, Debug, Clone)]
pub struct BookLevel {
    pub price: DecimalOut,
    pub amount: DecimalOut,
}

/// One change of a book update (§6 rule 6).
#[derive(Object, Debug, Clone)]
pub struct BookChange {
    /// `new`, `change` or `delete`.
    pub action: String,
    /// `bid` or `ask`.
    #[oai(rename = "type")]
    pub side: String,
    pub price: DecimalOut,
    /// The level's new amount; 0 on delete.
    pub amount: DecimalOut,
}

/// What `orderbook-stream:{symbol}` starts with: the best levels, best first.
#[derive(Object, Debug, Clone)]
pub struct BookSnapshot {
    pub channel: String,
    /// Always `snapshot`.
    #[oai(rename = "type")]
    pub kind: String,
    pub symbol: String,
    pub sequence: u64,
    pub bids: Vec<BookLevel>,
    pub asks: Vec<BookLevel>,
    /// See `checksum` in the module documentation of the channel.
    pub checksum: u32,
}

/// One tick's changes of a book, applied together; `sequence` is exactly one more than the
/// last frame's.
#[derive(Object, Debug, Clone)]
pub struct BookUpdate {
    pub channel: String,
    /// Always `update`.
    #[oai(rename = "type")]
    pub kind: String,
    pub symbol: String,
    pub sequence: u64,
    pub changes: Vec<BookChange>,
    pub checksum: u32,
}

/// `authenticate` (D9): the signature is over `{nonce}\nGET\n/v1/ws\n`, with the key's REST
/// nonce namespace; `nonce` is a string of decimal digits (a JSON number fails).
#[derive(Object, Debug, Clone, PartialEq, Eq)]
pub struct AuthenticateOp {
    /// Always `authenticate`.
    pub op: String,
    /// Standard base64 of the 32-byte ed25519 public key.
    pub public_key: String,
    /// A nanosecond Unix timestamp, as X-Nonce (interface §5).
    pub nonce: String,
    /// Standard base64 of the 64-byte ed25519 signature.
    pub signature: String,
}

/// `subscribe` or `unsubscribe` with the topics (§6): answered `subscribed` / `unsubscribed`
/// with the topics taken, and an error frame naming each topic refused.
#[derive(Object, Debug, Clone, PartialEq, Eq)]
pub struct TopicsOp {
    /// `subscribe` or `unsubscribe`.
    pub op: String,
    pub args: Vec<String>,
}

/// `ping`, answered `pong`.
#[derive(Object, Debug, Clone, PartialEq, Eq)]
pub struct PingOp {
    /// Always `ping`.
    pub op: String,
}
