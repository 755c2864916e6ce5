//! The fan-out: one task between the engine's tick broadcast and every connection.
//!
//! It renders each event once, from the read view published with its tick, and queues the
//! same bytes on every connection whose subscriptions cover it, with `try_send`: a full queue
//! closes that connection with 1008 `slow consumer`, so neither the engine nor the other
//! connections ever wait for a socket. Subscriptions change here too, between ticks, so a
//! book snapshot and the updates after it are always consecutive in `sequence`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use imbl::OrdMap;
use perpsim_core::ids::{BrokerCode, PublicKey};
use perpsim_core::time::Timestamp;
use perpsim_systems::records::depth::LevelChange;
use perpsim_systems::{EngineEvent, ReadView};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, mpsc, watch};
use tokio::time::Instant;

use super::delay::FrameDelay;
use super::frames::{ErrorFrame, Frame, OpReply, frame};
use super::outbox::{Outbox, Refused};
use super::session::KEY_REVOKED;
use super::strikes::{RecoveryReport, StrikeLog, Striker, Target};
use super::topic::{Audience, Topic};
use super::{book, render};
use crate::state::host::{EngineHandle, TickEvents};
use crate::state::metrics;
use crate::wire::Time;
use perpsim_systems::records::fault_plan::{ChannelFault, ChannelFaultKind};

pub type ConnId = u64;

/// Why the server closes a connection: the close frame's code and reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Close {
    pub code: u16,
    pub reason: &'static str,
    /// The metrics' label of why it closed.
    pub label: &'static str,
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
    label: "fault",
};

pub const SLOW_CONSUMER: Close = Close {
    code: 1008,
    reason: "slow consumer",
    label: "slow_consumer",
};
const FELL_BEHIND: Close = Close {
    code: 1011,
    reason: "the server fell behind the engine; reconnect",
    label: "fell_behind",
};
const STOPPING: Close = Close {
    code: 1001,
    reason: "the server is stopping",
    label: "stopping",
};

/// What connections tell the hub.
pub enum Control {
    Open {
        id: ConnId,
        remote: std::net::IpAddr,
        outbox: Outbox,
        signal: watch::Sender<Option<Signal>>,
    },
    /// The connection authenticated as `broker` with `key`.
    Authenticated {
        id: ConnId,
        broker: BrokerCode,
        key: PublicKey,
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
    outbox: Outbox,
    signal: watch::Sender<Option<Signal>>,
    broker: Option<BrokerCode>,
    key: Option<PublicKey>,
    topics: BTreeSet<Topic>,
    /// Where in its queue the last snapshot of each topic went: while it waits there, a
    /// repeated subscribe is acknowledged without another.
    snapshots: BTreeMap<Topic, u64>,
}

pub struct Hub {
    conns: BTreeMap<ConnId, Conn>,
    audiences: BTreeMap<Audience, BTreeSet<ConnId>>,
    /// Each market's book stream position: the `sequence` of its last frame.
    sequences: Vec<u64>,
    view: Arc<ReadView>,
    /// The engine's latest view, for what cannot wait for a tick.
    engine: EngineHandle,
    /// The keys of the last view seen: when they change, sessions of a revoked key close.
    keys: OrdMap<PublicKey, BrokerCode>,
    striker: Striker,
    strikes: StrikeLog,
    /// The tick's frames per connection, queued together at its end: a connection then
    /// writes its whole tick at once (one wake-up, one write) instead of a frame at a time.
    pending: BTreeMap<ConnId, Vec<Frame>>,
}

impl Hub {
    pub fn new(engine: EngineHandle) -> Self {
        let view = engine.view();
        Hub {
            engine,
            sequences: vec![0; view.trading.markets.len()],
            conns: BTreeMap::new(),
            audiences: BTreeMap::new(),
            keys: view.keys.clone(),
            view,
            striker: Striker::default(),
            strikes: StrikeLog::default(),
            pending: BTreeMap::new(),
        }
    }

    /// Runs until the engine's broadcast ends (the server stops). With `delay`, each tick
    /// waits its drawn time first (`delay`'s module).
    pub async fn run(
        mut self,
        mut control: mpsc::Receiver<Control>,
        mut ticks: broadcast::Receiver<TickEvents>,
        mut delay: Option<FrameDelay>,
    ) {
        loop {
            let due = delay.as_ref().and_then(FrameDelay::next_due);
            tokio::select! {
                c = control.recv() => match c {
                    Some(c) => self.control(c),
                    None => return,
                },
                () = sleep_until_due(due), if due.is_some() => {
                    let d = delay.as_mut().expect("a due tick has a delay");
                    while let Some(bundle) = d.take_due(Instant::now()) {
                        self.tick(&bundle.view, &bundle.events);
                    }
                }
                t = ticks.recv() => match t {
                    Ok(bundle) => match delay.as_mut() {
                        None => self.tick(&bundle.view, &bundle.events),
                        Some(d) => {
                            if let Some(early) = d.hold(bundle, Instant::now()) {
                                self.tick(&early.view, &early.events);
                            }
                        }
                    },
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
                outbox,
                signal,
            } => {
                let conn = Conn {
                    outbox,
                    signal,
                    broker: None,
                    key: None,
                    topics: BTreeSet::new(),
                    snapshots: BTreeMap::new(),
                };
                self.conns.insert(id, conn);
                self.strikes.opened(id, remote);
            }
            Control::Authenticated { id, broker, key } => {
                if let Some(conn) = self.conns.get_mut(&id) {
                    conn.broker = Some(broker);
                    conn.key = Some(key);
                }
                self.strikes.authenticated(id, broker);
                // Revoked since its check, in a tick this hub may have seen already: the
                // latest view says (this hub's own may not hold a key added just now).
                if self.engine.view().keys.get(&key) != Some(&broker) {
                    self.close(id, KEY_REVOKED);
                }
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

    /// Acknowledges, then queues each new subscription's snapshot. A topic held already
    /// gets a fresh snapshot (how a client resyncs a book) unless its last one is still
    /// queued: a flood of subscribes makes one snapshot, not one each.
    fn subscribe(&mut self, id: ConnId, topics: Vec<(Topic, String)>) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        let broker = conn.broker;
        let mut fresh = Vec::new();
        for (topic, _) in &topics {
            let waiting = conn.topics.contains(topic)
                && conn
                    .snapshots
                    .get(topic)
                    .is_some_and(|at| conn.outbox.waiting(*at));
            if !waiting {
                fresh.push(*topic);
            }
            conn.topics.insert(*topic);
            let audience = topic.audience(broker);
            self.audiences.entry(audience).or_default().insert(id);
            self.strikes.subscribed(id, *topic);
        }
        let names = topics.iter().map(|(_, n)| n.clone()).collect();
        if self.send(id, ack("subscribed", names)).is_none() {
            return;
        }
        for topic in fresh {
            for f in self.snapshot(topic, broker) {
                let Some(at) = self.send(id, f) else { return };
                if let Some(conn) = self.conns.get_mut(&id) {
                    conn.snapshots.insert(topic, at);
                }
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
            conn.snapshots.remove(topic);
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
        if !self.keys.ptr_eq(&view.keys) {
            self.keys = view.keys.clone();
            self.revoked();
        }
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
                if self.send(id, f).is_none() {
                    break;
                }
            }
        }
    }

    /// D9: every session authenticated by a key no longer its broker's is closed with 1008
    /// `key revoked`, at the tick that revoked it.
    fn revoked(&mut self) {
        let gone: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| {
                c.key
                    .zip(c.broker)
                    .is_some_and(|(k, b)| self.keys.get(&k) != Some(&b))
            })
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            self.close(id, KEY_REVOKED);
        }
    }

    /// Tells a connection to close with `close` and forgets it.
    fn close(&mut self, id: ConnId, close: Close) {
        if let Some(conn) = self.conns.get(&id) {
            let _ = conn.signal.send(Some(Signal::Close(close)));
        }
        self.remove(id);
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
                self.strikes.delivered(id, audience.topic);
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
                    self.strikes.delivered(id, audience.topic);
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
                    let (outbox, f) = (conn.outbox.clone(), f.clone());
                    tokio::spawn(async move {
                        tokio::time::sleep(delay).await;
                        let _ = outbox.push(f);
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

    /// Queues a frame without waiting; a full queue (in frames or bytes) closes the
    /// connection (D9). Where the frame went in the connection's queue, if it is still there.
    fn send(&mut self, id: ConnId, f: Frame) -> Option<u64> {
        let conn = self.conns.get(&id)?;
        let topic = metrics::topic_of(&f);
        match conn.outbox.push(f) {
            Ok(at) => {
                metrics::ws_sent(topic);
                Some(at)
            }
            Err(Refused::Full) => {
                metrics::ws_dropped(topic, "slow_consumer");
                metrics::ws_slow_consumer(topic);
                self.close(id, SLOW_CONSUMER);
                None
            }
            Err(Refused::Closed) => {
                self.remove(id);
                None
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

/// Sleeps until `due` (never called without one).
async fn sleep_until_due(due: Option<Instant>) {
    if let Some(due) = due {
        tokio::time::sleep_until(due).await;
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
