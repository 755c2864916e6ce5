//! The fault plan's channel faults as the hub applies them, and the recovery report.
//!
//! A fault strikes a frame on its way to a connection when everything it aims at holds
//! (connection, topic, sequence, time), it has struck fewer than `count` times, and the
//! plan's own generator (seeded from the plan, so the same plan over the same frames strikes
//! the same ones) draws under its rate. Each strike is recorded against the connection with
//! what a client does to recover from it; the hub marks it recovered when the client does
//! it (subscribes to the topic again; reconnects as the same broker or address).

use std::collections::{BTreeMap, VecDeque};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use perpsim_core::ids::BrokerCode;
use perpsim_core::rng::SimRng;
use perpsim_core::time::Timestamp;
use perpsim_systems::records::fault_plan::{ChannelFault, ChannelFaultKind, FaultPlan, PPM};
use poem_openapi::{Enum, Object};

use super::hub::ConnId;
use super::topic::Topic;
use crate::contract::Nullable;

/// Connections the report remembers (the oldest forgotten first), and strikes per connection.
pub const REPORTED_CONNECTIONS: usize = 1_024;
pub const STRIKES_PER_CONNECTION: usize = 256;

/// What a frame is, for aiming: its topic's name and, for a book frame, its sequence.
pub struct Target<'a> {
    pub connection: ConnId,
    pub topic: Topic,
    pub name: &'a str,
    pub sequence: Option<u64>,
    pub book_update: bool,
    pub now: Timestamp,
}

/// The plan in force, how often each fault struck, and its generator.
#[derive(Default)]
pub struct Striker {
    plan: Option<Arc<FaultPlan>>,
    struck: Vec<u32>,
    rng: Option<SimRng>,
}

fn applies(kind: ChannelFaultKind, t: &Target) -> bool {
    use ChannelFaultKind::*;
    match kind {
        SkipSequence | CorruptChecksum => t.book_update,
        UpstreamError | UpstreamReject => {
            matches!(t.topic, Topic::OrderBook(_) | Topic::MarketTrades(_))
        }
        Drop | Duplicate | Delay | Close | CloseAbrupt | Stall => true,
    }
}

fn aims(f: &ChannelFault, t: &Target) -> bool {
    f.connection.is_none_or(|c| c == t.connection)
        && f.topic.as_deref().is_none_or(|n| n == t.name)
        && f.sequence
            .is_none_or(|s| t.sequence.is_some_and(|q| q >= s))
        && f.after.is_none_or(|a| t.now >= a)
}

impl Striker {
    /// Takes the plan the tick's view holds; a new plan starts its counts and generator anew.
    pub fn follow(&mut self, plan: &Option<Arc<FaultPlan>>) {
        let same = match (&self.plan, plan) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        if !same {
            self.struck = vec![0; plan.as_ref().map_or(0, |p| p.channel.len())];
            self.rng = plan.as_ref().map(|p| SimRng::from_seed(p.seed));
            self.plan = plan.clone();
        }
    }

    /// Whether a plan with channel faults is in force.
    pub fn armed(&self) -> bool {
        self.plan.as_ref().is_some_and(|p| !p.channel.is_empty())
    }

    /// The fault that strikes this frame, if one does.
    pub fn strike(&mut self, t: &Target) -> Option<ChannelFault> {
        let plan = self.plan.as_ref()?;
        for (i, f) in plan.channel.iter().enumerate() {
            if self.struck[i] >= f.count || !applies(f.kind, t) || !aims(f, t) {
                continue;
            }
            let rng = self.rng.as_mut().expect("a plan has its generator");
            if f.rate_ppm < PPM && rng.next_u64() % u64::from(PPM) >= u64::from(f.rate_ppm) {
                continue;
            }
            self.struck[i] += 1;
            return Some(f.clone());
        }
        None
    }
}

#[derive(Enum, Debug, Clone, Copy, PartialEq, Eq)]
#[oai(rename = "FaultKind", rename_all = "snake_case")]
pub enum FaultKindApi {
    Drop,
    Duplicate,
    Delay,
    SkipSequence,
    CorruptChecksum,
    UpstreamError,
    UpstreamReject,
    Close,
    CloseAbrupt,
    Stall,
}

impl FaultKindApi {
    pub fn of(kind: ChannelFaultKind) -> Self {
        use ChannelFaultKind as K;
        match kind {
            K::Drop => Self::Drop,
            K::Duplicate => Self::Duplicate,
            K::Delay => Self::Delay,
            K::SkipSequence => Self::SkipSequence,
            K::CorruptChecksum => Self::CorruptChecksum,
            K::UpstreamError => Self::UpstreamError,
            K::UpstreamReject => Self::UpstreamReject,
            K::Close => Self::Close,
            K::CloseAbrupt => Self::CloseAbrupt,
            K::Stall => Self::Stall,
        }
    }

    pub fn to_engine(self) -> ChannelFaultKind {
        use ChannelFaultKind as K;
        match self {
            Self::Drop => K::Drop,
            Self::Duplicate => K::Duplicate,
            Self::Delay => K::Delay,
            Self::SkipSequence => K::SkipSequence,
            Self::CorruptChecksum => K::CorruptChecksum,
            Self::UpstreamError => K::UpstreamError,
            Self::UpstreamReject => K::UpstreamReject,
            Self::Close => K::Close,
            Self::CloseAbrupt => K::CloseAbrupt,
            Self::Stall => K::Stall,
        }
    }
}

/// How a client recovers from a strike, as the server can see it.
#[derive(Enum, Debug, Clone, Copy, PartialEq, Eq)]
#[oai(rename_all = "snake_case")]
pub enum RecoveryApi {
    /// Subscribed to the topic again (after a gap, a bad checksum or an upstream error).
    Resubscribed,
    /// Opened a new connection as the same broker (or, unauthenticated, from the same
    /// address) and subscribed again.
    Reconnected,
}

/// One strike on one connection.
#[derive(Object, Debug, Clone)]
pub struct StrikeRecord {
    pub kind: FaultKindApi,
    pub topic: String,
    /// The book frame's sequence, for book faults.
    pub sequence: Nullable<u64>,
    /// Milliseconds since the server started (wall clock).
    pub injected_at_ms: u64,
    /// Whether the server can see a recovery from it: a dropped, duplicated or delayed
    /// frame of a topic with no sequence is for the client to notice, not the server; nor
    /// is a gap the client never saw (no later frame of its stream reached it before the
    /// stream was replaced by a new subscription, for another strike's sake).
    pub observable: bool,
    /// How the client recovered; null while it has not (or cannot be seen).
    pub recovered: Nullable<RecoveryApi>,
    /// Milliseconds from the strike to the recovery.
    pub recovered_after_ms: Nullable<u64>,
}

/// A connection's strikes.
#[derive(Object, Debug, Clone)]
pub struct ConnectionReport {
    pub connection: u64,
    pub remote_address: String,
    /// The broker it authenticated as; null for a public connection.
    pub broker_code: Nullable<String>,
    pub opened_at_ms: u64,
    pub open: bool,
    pub strikes: Vec<StrikeRecord>,
}

/// The recovery report (issue 25 item 4): per connection, each strike and how fast the
/// client recovered; totals over all.
#[derive(Object, Debug, Clone)]
pub struct RecoveryReport {
    pub injected: u64,
    pub recovered: u64,
    pub unrecovered: u64,
    /// Strikes the server cannot see a recovery from.
    pub not_observable: u64,
    pub connections: Vec<ConnectionReport>,
}

struct Strike {
    kind: ChannelFaultKind,
    topic: Topic,
    name: String,
    sequence: Option<u64>,
    at: Instant,
    /// Whether the client can have noticed it: a frame taken away shows only as the gap
    /// before the next frame of its stream.
    seen: bool,
    /// Its stream was replaced before the client could notice it.
    masked: bool,
    recovered: Option<(RecoveryApi, Instant)>,
}

impl Strike {
    fn observable(&self) -> bool {
        use ChannelFaultKind::*;
        !self.masked
            && match self.kind {
                Drop | Duplicate | Delay => matches!(self.topic, Topic::OrderBook(_)),
                _ => true,
            }
    }

    /// A strike a new subscription to its topic recovers from.
    fn resubscribe_heals(&self) -> bool {
        !matches!(
            self.kind,
            ChannelFaultKind::Close | ChannelFaultKind::CloseAbrupt | ChannelFaultKind::Stall
        ) && self.observable()
    }
}

struct Entry {
    remote: IpAddr,
    broker: Option<BrokerCode>,
    opened: Instant,
    open: bool,
    strikes: Vec<Strike>,
}

/// What the report remembers, bounded.
pub struct StrikeLog {
    started: Instant,
    entries: BTreeMap<ConnId, Entry>,
    order: VecDeque<ConnId>,
    /// Strikes the client cannot have noticed yet, all connections together.
    unseen: usize,
}

impl Default for StrikeLog {
    fn default() -> Self {
        StrikeLog {
            started: Instant::now(),
            entries: BTreeMap::new(),
            order: VecDeque::new(),
            unseen: 0,
        }
    }
}

impl StrikeLog {
    pub fn opened(&mut self, id: ConnId, remote: IpAddr) {
        if self.order.len() >= REPORTED_CONNECTIONS
            && let Some(old) = self.order.pop_front()
            && let Some(gone) = self.entries.remove(&old)
        {
            self.unseen -= gone.strikes.iter().filter(|s| !s.seen).count();
        }
        let entry = Entry {
            remote,
            broker: None,
            opened: Instant::now(),
            open: true,
            strikes: Vec::new(),
        };
        self.entries.insert(id, entry);
        self.order.push_back(id);
    }

    pub fn closed(&mut self, id: ConnId) {
        if let Some(e) = self.entries.get_mut(&id) {
            e.open = false;
        }
    }

    pub fn authenticated(&mut self, id: ConnId, broker: BrokerCode) {
        if let Some(e) = self.entries.get_mut(&id) {
            e.broker = Some(broker);
        }
    }

    pub fn struck(&mut self, id: ConnId, kind: ChannelFaultKind, t: &Target) {
        if let Some(e) = self.entries.get_mut(&id)
            && e.strikes.len() < STRIKES_PER_CONNECTION
        {
            let seen = !matches!(
                kind,
                ChannelFaultKind::Drop | ChannelFaultKind::SkipSequence
            );
            self.unseen += usize::from(!seen);
            e.strikes.push(Strike {
                kind,
                topic: t.topic,
                name: t.name.to_owned(),
                sequence: t.sequence,
                at: Instant::now(),
                seen,
                masked: false,
                recovered: None,
            });
        }
    }

    /// A frame of `topic` reached `id`: a gap before it is now in the client's sight.
    pub fn delivered(&mut self, id: ConnId, topic: Topic) {
        if self.unseen == 0 {
            return;
        }
        if let Some(e) = self.entries.get_mut(&id) {
            for s in e.strikes.iter_mut().filter(|s| !s.seen && s.topic == topic) {
                s.seen = true;
                self.unseen -= 1;
            }
        }
    }

    /// `id` subscribed to `topic`: its own strikes on it are healed by a new subscription,
    /// and another connection's lost ones by this reconnection of the same client.
    pub fn subscribed(&mut self, id: ConnId, topic: Topic) {
        let now = Instant::now();
        let Some(me) = self.entries.get(&id) else {
            return;
        };
        let (remote, broker) = (me.remote, me.broker);
        for (other, e) in &mut self.entries {
            let same_client = match broker {
                Some(b) => e.broker == Some(b),
                None => e.broker.is_none() && e.remote == remote,
            };
            for s in e
                .strikes
                .iter_mut()
                .filter(|s| s.recovered.is_none() && s.topic == topic)
            {
                if *other == id && !s.seen {
                    // Replaced before the client could see it: a resync for another strike.
                    s.seen = true;
                    s.masked = true;
                    self.unseen -= 1;
                } else if *other == id && s.resubscribe_heals() {
                    s.recovered = Some((RecoveryApi::Resubscribed, now));
                } else if *other != id && same_client && !s.resubscribe_heals() && s.observable() {
                    s.recovered = Some((RecoveryApi::Reconnected, now));
                }
            }
        }
    }

    pub fn report(&self) -> RecoveryReport {
        let ms = |i: Instant| i.saturating_duration_since(self.started).as_millis() as u64;
        let mut out = RecoveryReport {
            injected: 0,
            recovered: 0,
            unrecovered: 0,
            not_observable: 0,
            connections: Vec::new(),
        };
        for (id, e) in &self.entries {
            if e.strikes.is_empty() {
                continue;
            }
            let strikes = e
                .strikes
                .iter()
                .map(|s| {
                    out.injected += 1;
                    match (s.observable(), s.recovered) {
                        (false, _) => out.not_observable += 1,
                        (true, Some(_)) => out.recovered += 1,
                        (true, None) => out.unrecovered += 1,
                    }
                    StrikeRecord {
                        kind: FaultKindApi::of(s.kind),
                        topic: s.name.clone(),
                        sequence: s.sequence.into(),
                        injected_at_ms: ms(s.at),
                        observable: s.observable(),
                        recovered: s.recovered.map(|(how, _)| how).into(),
                        recovered_after_ms: s
                            .recovered
                            .map(|(_, at)| at.saturating_duration_since(s.at).as_millis() as u64)
                            .into(),
                    }
                })
                .collect();
            out.connections.push(ConnectionReport {
                connection: *id,
                remote_address: e.remote.to_string(),
                broker_code: e.broker.map(|b| b.to_string()).into(),
                opened_at_ms: ms(e.opened),
                open: e.open,
                strikes,
            });
        }
        out
    }
}
