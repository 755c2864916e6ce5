//! The fault plan an integrator sets to rehearse a client's recovery (issue 25 item 4): what
//! the channels do to frames and connections, and what share of order entries the venue
//! refuses. Journaled as a command, so a run with faults replays identically; rates are
//! parts per million (integers: no floating point reaches a decision).

use serde::{Deserialize, Serialize};

use perpsim_core::time::Timestamp;

/// One in a million: the unit of every rate.
pub const PPM: u32 = 1_000_000;

/// Most channel faults one plan holds.
pub const MAX_CHANNEL_FAULTS: usize = 64;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultPlan {
    /// Seeds the plan's own draws (order entries here, frames in the server), so the same
    /// plan on the same run decides the same.
    pub seed: u64,
    pub channel: Vec<ChannelFault>,
    pub order_entry: Option<OrderEntryFault>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ChannelFaultKind {
    /// The matching frames are not sent.
    Drop,
    /// The matching frames are sent twice.
    Duplicate,
    /// The matching frames are sent `delay_ms` late (after frames that follow them).
    Delay,
    /// A book update is not sent: the client sees its sequence skipped.
    SkipSequence,
    /// A book frame is sent with a wrong checksum.
    CorruptChecksum,
    /// `{ORDERBOOK_STREAM|MARKET_TRADES}_UPSTREAM_ERROR` on the topic, which is torn down.
    UpstreamError,
    /// `…_UPSTREAM_REJECT`, likewise.
    UpstreamReject,
    /// The connection is closed with a close frame (1011).
    Close,
    /// The connection is dropped without a close frame.
    CloseAbrupt,
    /// The connection goes silent for `delay_ms`: no frame, no ping.
    Stall,
}

/// A channel fault: what it does, where it aims (all given must hold), how often.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelFault {
    pub kind: ChannelFaultKind,
    /// A connection's id (as the admin API lists them); any when absent.
    pub connection: Option<u64>,
    /// A topic as subscribed (`orderbook-stream:BTC-USDC-PERP`); any when absent.
    pub topic: Option<String>,
    /// Book frames from this sequence on; any when absent.
    pub sequence: Option<u64>,
    /// From this simulation time on; at once when absent.
    pub after: Option<Timestamp>,
    /// How many times it strikes, at the most.
    pub count: u32,
    /// The chance a matching frame is struck, in parts per million ([`PPM`]: always).
    pub rate_ppm: u32,
    pub delay_ms: u64,
}

/// A share of order entries refused with 503 EXCHANGE_ERROR before the engine looks at
/// them, or answered late.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderEntryFault {
    pub error_ppm: u32,
    pub delay_ppm: u32,
    pub delay_ms: u64,
}
