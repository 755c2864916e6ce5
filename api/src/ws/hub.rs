//! The fan-out: one task between the engine's tick broadcast and every connection.
//!
//! It renders each event once, from the read view published with its tick, and queues the
//! same bytes on every connection whose subscriptions cover it, with `try_send`: a full queue
//! closes that connection with 1008 `slow consumer`, so neither the engine nor the other
//! connections ever wait for a socket. Subscriptions change here too, between ticks, so a
//! book snapshot and the updates after it are always consecutive in `sequence`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use perpsim_core::ids::BrokerCode;
use perpsim_core::time::Timestamp;
use perpsim_systems::records::depth::LevelChange;
use perpsim_systems::{EngineEvent, ReadView};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, mpsc, watch};

use super::faults::{RecoveryReport, StrikeLog, Striker, Target};
use super::frames::{ErrorFrame, Frame, OpReply, frame};
use super::topic::{Audience, Topic};
use super::{book, render};
use crate::state::host::TickEvents;
use crate::state::metrics;
use crate::wire::Time;
use perpsim_systems::records::faults::{ChannelFault, ChannelFaultKind};

pub type ConnId = u64;

/// Why the server closes a connection: the close frame's code and reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Close {
    pub code: u16,
    pub reason: &'static str,
}

/// What the hub tells a connection to do besides sending frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// Send this close frame and end.
    Close(Close),
    /// End without a close frame (the fault plan's abrupt close).
    Drop,
    /// Send nothing at all, pings included, for this long (the fault plan's stall).
    Stall(std::time::Duration),
}

const FAULT_CLOSE: Close = Close {
    code: 1011,
    reason: "fault plan: connection closed",
};

pub const SLOW_CONSUMER: Close = Close {
    code: 1008,
    reason: "slow consumer",
};
const FELL_BEHIND: Close = Close {
    code: 1011,
    reason: "the server fell behind the engine; reconnect",
};
const STOPPING: Close = Close {
    code: 1001,
    reason: "the server is stopping",
};

/// What connections tell the hub.
pub enum Control {
    Open {
        id: ConnId,
        remote: std::net::IpAddr,
        frames: mpsc::Sender<Frame>,
        signal: watch::Sender<Option<Signal>>,
    },
    Authenticated {
        id: ConnId,
        broker: BrokerCode,
    },
    /// Topics with the names they were asked by, acknowledged in one frame.
    Subscribe {
        id: ConnId,
        topics: Vec<(Topic, String)>,
    },
    Unsubscribe {
        id: ConnId,
        topics: Vec<(Topic, String)>,
    },
    Gone {
        id: ConnId,
    },
    /// The recovery report of the fault plan's strikes.
    Report(tokio::sync::oneshot::Sender<RecoveryReport>),
}

struct Conn {
    frames: mpsc::Sender<Frame>,
    signal: watch::Sender<Option<Signal>>,
    broker: Option<BrokerCode>,
    topics: BTreeSet<Topic>,
}

pub struct Hub {
    conns: BTreeMap<ConnId, Conn>,
    audiences: BTreeMap<Audience, BTreeSet<ConnId>>,
    /// Each market's book stream position: the `sequence` of its last frame.
    sequences: Vec<u64>,
    view: Arc<ReadView>,
    striker: Striker,
    strikes: StrikeLog,
    /// The tick's frames per connection, queued together at its end: a connection then
    /// writes its whole tick at once (one wake-up, one write) instead of a frame at a time.
    pending: BTreeMap<ConnId, Vec<Frame>>,
}

impl Hub {
    pub fn new(view: Arc<ReadView>) -> Self {
        Hub {
            sequences: vec![0; view.trading.markets.len()],
            conns: BTreeMap::new(),
            audiences: BTreeMap::new(),
            view,
            striker: Striker::default(),
            strikes: StrikeLog::default(),
            pending: BTreeMap::new(),
        }
    }

    /// Runs until the engine's broadcast ends (the server stops).
    pub async fn run(
        mut self,
        mut control: mpsc::Receiver<Control>,
        mut ticks: broadcast::Receiver<TickEvents>,
    ) {
        loop {
            tokio::select! {
                c = control.recv() => match c {
                    Some(c) => self.control(c),
                    None => return,
                },
                t = ticks.recv() => match t {
                    Ok(bundle) => self.tick(&bundle.view, &bundle.events),
                    Err(RecvError::Lagged(missed)) => {
                        tracing::warn!(missed, "the channels fell behind the engine; closing every connection");
                        self.close_all(FELL_BEHIND);
                    }
                    Err(RecvError::Closed) => {
                        self.close_all(STOPPING);
                        return;
                    }
                },
            }
        }
    }

    fn control(&mut self, c: Control) {
        match c {
            Control::Open {
                id,
                remote,
                frames,
                signal,
            } => {
                let conn = Conn {
                    frames,
                    signal,
                    broker: None,
                    topics: BTreeSet::new(),
                };
                self.conns.insert(id, conn);
                self.strikes.opened(id, remote);
            }
            Control::Authenticated { id, broker } => {
                if let Some(conn) = self.conns.get_mut(&id) {
                    conn.broker = Some(broker);
                }
                self.strikes.authenticated(id, broker);
            }
            Control::Subscribe { id, topics } => self.subscribe(id, topics),
            Control::Unsubscribe { id, topics } => self.unsubscribe(id, topics),
            Control::Gone { id } => {
                self.remove(id);
                self.strikes.closed(id);
            }
            Control::Report(reply) => {
                let _ = reply.send(self.strikes.report());
            }
        }
    }

    fn subscribe(&mut self, id: ConnId, topics: Vec<(Topic, String)>) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        let broker = conn.broker;
        for (topic, _) in &topics {
            conn.topics.insert(*topic);
            let audience = topic.audience(broker);
            self.audiences.entry(audience).or_default().insert(id);
            self.strikes.subscribed(id, *topic);
        }
        let names = topics.iter().map(|(_, n)| n.clone()).collect();
        let mut out = vec![ack("subscribed", names)];
        for (topic, _) in &topics {
            out.extend(self.snapshot(*topic, broker));
        }
        for f in out {
            if !self.send(id, f) {
                return;
            }
        }
    }

    fn unsubscribe(&mut self, id: ConnId, topics: Vec<(Topic, String)>) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        let broker = conn.broker;
        for (topic, _) in &topics {
            conn.topics.remove(topic);
        }
        for (topic, _) in &topics {
            self.forget(topic.audience(broker), id);
        }
        let names = topics.into_iter().map(|(_, n)| n).collect();
        self.send(id, ack("unsubscribed", names));
    }

    /// What a subscription starts with: a book's snapshot at the stream's position, every
    /// ticker, the customer's positions, the broker's margins; nothing on the others (§6
    /// rule 8: balance-changes and notifications have no initial snapshot).
    fn snapshot(&self, topic: Topic, broker: Option<BrokerCode>) -> Vec<Frame> {
        let view = &self.view;
        let now = Time::from(view.clock.now);
        match topic {
            Topic::OrderBook(m) => {
                let spec = &view.instruments[view.trading.symbol(m)].spec;
                let depth = &view.trading.books[m as usize];
                let seq = self.sequences[m as usize];
                vec![frame(&book::snapshot(topic.name(view), spec, depth, seq))]
            }
            Topic::Ticker => (0..view.trading.markets.len() as u32)
                .filter_map(|m| render::ticker(view, m, "snapshot"))
                .collect(),
            Topic::Positions(c) => vec![render::positions(view, c, now)],
            Topic::Margin => broker.map_or_else(Vec::new, |b| render::margins(view, b, &now)),
            _ => Vec::new(),
        }
    }

    fn tick(&mut self, view: &Arc<ReadView>, events: &[EngineEvent]) {
        self.view = Arc::clone(view);
        self.striker.follow(&view.faults);
        self.sequences.resize(view.trading.markets.len(), 0);
        for event in events {
            match event {
                EngineEvent::Book { market, changes } => self.book(*market, changes),
                EngineEvent::Valuation { at } => self.valuation(*at),
                other => {
                    if let Some((audience, f)) = self.rendered(other) {
                        self.deliver(audience, &f);
                    }
                }
            }
        }
        for (id, frames) in std::mem::take(&mut self.pending) {
            for f in frames {
                if !self.send(id, f) {
                    break;
                }
            }
        }
    }

    /// Holds a frame of the tick for `id` until the tick's end (see `pending`).
    fn queue(&mut self, id: ConnId, f: Frame) {
        self.pending.entry(id).or_default().push(f);
    }

    /// Renders only what someone hears.
    fn rendered(&self, event: &EngineEvent) -> Option<(Audience, Frame)> {
        let audience = render::audience(&self.view, event)?;
        if !self.audiences.contains_key(&audience) {
            return None;
        }
        Some((audience, render::event(&self.view, event)?))
    }

    fn book(&mut self, market: u32, changes: &[LevelChange]) {
        let m = market as usize;
        self.sequences[m] += 1;
        let audience = Topic::OrderBook(market).audience(None);
        if !self.audiences.contains_key(&audience) {
            return;
        }
        let view = &self.view;
        let spec = &view.instruments[view.trading.symbol(market)].spec;
        let after = &view.trading.books[m];
        let channel = Topic::OrderBook(market).name(view);
        let f = frame(&book::update(
            channel,
            spec,
            changes,
            after,
            self.sequences[m],
        ));
        self.deliver_aimed(audience, &f, Some(self.sequences[m]));
    }

    /// Positions and margins of every subscription, all at the same instant.
    fn valuation(&mut self, at: Timestamp) {
        let at = Time::from(at);
        let keys: Vec<Audience> = self
            .audiences
            .keys()
            .filter(|a| matches!(a.topic, Topic::Positions(_) | Topic::Margin))
            .copied()
            .collect();
        for audience in keys {
            let frames = match (audience.topic, audience.broker) {
                (Topic::Positions(c), _) => vec![render::positions(&self.view, c, at.clone())],
                (_, Some(b)) => render::margins(&self.view, b, &at),
                (_, None) => Vec::new(),
            };
            for f in frames {
                self.deliver(audience, &f);
            }
        }
    }

    fn deliver(&mut self, audience: Audience, f: &Frame) {
        self.deliver_aimed(audience, f, None);
    }

    /// Queues `f` on every connection of the audience, through the fault plan when one is
    /// in force; `sequence` is a book update's.
    fn deliver_aimed(&mut self, audience: Audience, f: &Frame, sequence: Option<u64>) {
        let ids: Vec<ConnId> = match self.audiences.get(&audience) {
            Some(ids) => ids.iter().copied().collect(),
            None => return,
        };
        if !self.striker.armed() {
            for id in ids {
                self.queue(id, f.clone());
            }
            return;
        }
        let name = audience.topic.name(&self.view);
        for id in ids {
            let target = Target {
                connection: id,
                topic: audience.topic,
                name: &name,
                sequence,
                book_update: sequence.is_some(),
                now: self.view.clock.now,
            };
            match self.striker.strike(&target) {
                None => {
                    self.queue(id, f.clone());
                }
                Some(fault) => {
                    self.strikes.struck(id, fault.kind, &target);
                    self.inflict(id, &fault, audience.topic, &name, f);
                }
            }
        }
    }

    /// What a strike does to the frame `f` on its way to `id`.
    fn inflict(&mut self, id: ConnId, fault: &ChannelFault, topic: Topic, name: &str, f: &Frame) {
        use ChannelFaultKind::*;
        let delay = std::time::Duration::from_millis(fault.delay_ms);
        match fault.kind {
            Drop | SkipSequence => metrics::ws_dropped(metrics::topic_of(f), "fault"),
            Duplicate => {
                self.queue(id, f.clone());
                self.queue(id, f.clone());
            }
            Delay => {
                if let Some(conn) = self.conns.get(&id) {
                    let (frames, f) = (conn.frames.clone(), f.clone());
                    tokio::spawn(async move {
                        tokio::time::sleep(delay).await;
                        let _ = frames.try_send(f);
                    });
                }
            }
            CorruptChecksum => {
                self.queue(id, corrupted(f));
            }
            UpstreamError | UpstreamReject => {
                let error = upstream(topic, name, fault.kind == UpstreamReject);
                if let Some(conn) = self.conns.get_mut(&id) {
                    conn.topics.remove(&topic);
                    let broker = conn.broker;
                    self.forget(topic.audience(broker), id);
                }
                self.queue(id, error);
            }
            Close | CloseAbrupt | Stall => {
                let signal = match fault.kind {
                    Close => Signal::Close(FAULT_CLOSE),
                    CloseAbrupt => Signal::Drop,
                    _ => Signal::Stall(delay),
                };
                if let Some(conn) = self.conns.get(&id) {
                    let _ = conn.signal.send(Some(signal));
                }
                if signal == Signal::Stall(delay) {
                    self.queue(id, f.clone());
                } else {
                    self.remove(id);
                }
            }
        }
    }

    /// Queues a frame without waiting; a full queue closes the connection (D9). Whether the
    /// connection is still there.
    fn send(&mut self, id: ConnId, f: Frame) -> bool {
        let Some(conn) = self.conns.get(&id) else {
            return false;
        };
        let topic = metrics::topic_of(&f);
        match conn.frames.try_send(f) {
            Ok(()) => {
                metrics::ws_sent(topic);
                true
            }
            Err(mpsc::error::TrySendError::Full(_)) => {
                metrics::ws_dropped(topic, "slow_consumer");
                metrics::ws_slow_consumer(topic);
                let _ = conn.signal.send(Some(Signal::Close(SLOW_CONSUMER)));
                self.remove(id);
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                self.remove(id);
                false
            }
        }
    }

    fn forget(&mut self, audience: Audience, id: ConnId) {
        if let Some(ids) = self.audiences.get_mut(&audience) {
            ids.remove(&id);
            if ids.is_empty() {
                self.audiences.remove(&audience);
            }
        }
    }

    fn remove(&mut self, id: ConnId) {
        if let Some(conn) = self.conns.remove(&id) {
            for topic in conn.topics {
                self.forget(topic.audience(conn.broker), id);
            }
        }
    }

    fn close_all(&mut self, close: Close) {
        for conn in std::mem::take(&mut self.conns).into_values() {
            let _ = conn.signal.send(Some(Signal::Close(close)));
        }
        self.audiences.clear();
    }
}

/// The frame with its checksum inverted: what the fault plan's corrupt checksum sends.
fn corrupted(f: &Frame) -> Frame {
    let mut v: serde_json::Value = serde_json::from_str(f.as_str()).expect("frames are JSON");
    if let Some(sum) = v["checksum"].as_u64() {
        v["checksum"] = serde_json::json!(sum ^ u64::from(u32::MAX));
    }
    Frame::from(v.to_string())
}

/// §6 rule 7: the channel-scoped upstream error (or reject) of a book or trades topic.
fn upstream(topic: Topic, name: &str, reject: bool) -> Frame {
    let stem = match topic {
        Topic::OrderBook(_) => "ORDERBOOK_STREAM",
        _ => "MARKET_TRADES",
    };
    let (suffix, what) = match reject {
        true => ("UPSTREAM_REJECT", "refused"),
        false => ("UPSTREAM_ERROR", "failed"),
    };
    frame(&ErrorFrame {
        op: "error".into(),
        code: format!("{stem}_{suffix}"),
        message: format!("the upstream feed of {name} {what}; subscribe again to recover"),
        channel: Some(name.to_owned()),
    })
}

fn ack(op: &str, args: Vec<String>) -> Frame {
    frame(&OpReply {
        op: op.into(),
        args: Some(args),
    })
}
