//! Who may hold a connection: the bounds on open connections (HTTP and WebSocket, each its
//! own), each client address's share of both together, and which connection gives way when
//! a new one arrives at a bound.
//!
//! A bound that only refuses can be held by anyone: a script keeping a few thousand idle
//! keep-alive connections (each refreshed inside the idle timeout), or WebSocket sessions
//! that never authenticate, would have every signed client refused for as long as it liked.
//! So at a bound a connection that may give way is closed to admit the new one, and a new
//! connection is refused only when none may: an HTTP connection between requests, a
//! WebSocket session without credentials (D9). A client holding only such connections never
//! locks anyone out. At the address share, the address's own gives way; at a global bound,
//! one of the address holding the most, the one yielding longest first. An HTTP connection
//! reading a request, or whose request a handler is working on, never gives way, and neither
//! does an authenticated WebSocket session.
//!
//! An upgraded connection keeps its place in its address's share and moves from the HTTP
//! bound to the WebSocket one ([`ConnectionAdmission::upgrade`]).
//!
//! An IPv6 client counts by its /64 (one host is usually given a whole /64), an IPv4
//! client by its address. The table is bounded by the two bounds together, and each
//! admission scans it once at most (8 192 entries at the defaults).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use tokio::time::Instant;

use crate::server::connections::ConnectionWatch;
use crate::signing::ClientAddress;
use crate::state::config::ConnectionLimits;
use crate::ws::session::Standing;

/// Why a connection was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Every connection is busy and the bound is reached.
    Full { bound: u32 },
    /// The address holds its share and none of its connections is idle.
    AddressShare { share: u32 },
    /// Every WebSocket session has authenticated and the bound is reached.
    WebSockets { bound: u32 },
}

impl Refusal {
    pub fn message(self) -> String {
        match self {
            Refusal::Full { bound } => format!(
                "too many open connections (--max-connections {bound}), none idle; retry later"
            ),
            Refusal::AddressShare { share } => format!(
                "too many open connections from this address (--max-connections-per-address \
                 {share}), none idle; retry later"
            ),
            Refusal::WebSockets { bound } => format!(
                "too many WebSocket connections (--max-ws-connections {bound}), every one \
                 authenticated; retry later"
            ),
        }
    }
}

/// A connection as the table sees it: whether it may give way to a newcomer now, and how.
pub trait Occupant: Send + Sync {
    /// Since when it could give way, or `None` while it may not: an HTTP connection between
    /// requests, a WebSocket session that has not authenticated.
    fn yields_since(&self) -> Option<Instant>;
    /// Closes it if it still may give way, and says whether it did.
    fn give_way(&self) -> bool;
}

impl Occupant for ConnectionWatch {
    fn yields_since(&self) -> Option<Instant> {
        self.idle_since()
    }

    fn give_way(&self) -> bool {
        self.evict()
    }
}

impl Occupant for Standing {
    fn yields_since(&self) -> Option<Instant> {
        self.without_credentials_since()
    }

    fn give_way(&self) -> bool {
        self.evict()
    }
}

/// The two kinds of connection, each with a bound of its own; both count in an address's
/// share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Http = 0,
    WebSocket = 1,
}

struct Held {
    address: ClientAddress,
    kind: Kind,
    occupant: Arc<dyn Occupant>,
}

#[derive(Default)]
struct Table {
    next: u64,
    open: BTreeMap<u64, Held>,
    /// Open connections of each kind.
    of_kind: [u32; 2],
    per_address: BTreeMap<ClientAddress, u32>,
}

impl Table {
    fn take(&mut self, id: u64) -> Option<Held> {
        let held = self.open.remove(&id)?;
        let n = self
            .per_address
            .get_mut(&held.address)
            .expect("an open connection is counted under its address");
        *n -= 1;
        if *n == 0 {
            self.per_address.remove(&held.address);
        }
        self.of_kind[held.kind as usize] -= 1;
        Some(held)
    }

    fn insert(&mut self, address: ClientAddress, kind: Kind, occupant: Arc<dyn Occupant>) -> u64 {
        let id = self.next;
        self.next += 1;
        self.open.insert(
            id,
            Held {
                address,
                kind,
                occupant,
            },
        );
        *self.per_address.entry(address).or_default() += 1;
        self.of_kind[kind as usize] += 1;
        id
    }

    /// The connection to close for a newcomer: of `address` and `kind` where given, else of
    /// the address holding the most; among those, the one that may give way longest.
    /// Closed and taken out of the table here, so its place is free at once. A candidate that
    /// stopped yielding since the scan (a request began, a session authenticated) is left
    /// alone and passed over by the next scan, so this ends within one try per connection.
    fn evict(&mut self, address: Option<ClientAddress>, kind: Option<Kind>) -> bool {
        for _ in 0..self.open.len() {
            let candidates = self
                .open
                .iter()
                .filter(|(_, h)| address.is_none_or(|a| a == h.address))
                .filter(|(_, h)| kind.is_none_or(|k| k == h.kind))
                .filter_map(|(id, h)| Some((*id, h.address, h.occupant.yields_since()?)));
            let best = candidates.max_by_key(|(id, address, since)| {
                (self.per_address[address], std::cmp::Reverse((*since, *id)))
            });
            let Some((id, _, _)) = best else { return false };
            if self.open[&id].occupant.give_way() {
                self.take(id);
                return true;
            }
        }
        false
    }
}

/// The connections open now, and who may open another.
pub struct ConnectionAdmission {
    limits: ConnectionLimits,
    max_websockets: u32,
    table: Mutex<Table>,
}

/// A connection's place in the table; leaving it (the connection ends) frees the place.
pub struct Ticket {
    admission: Arc<ConnectionAdmission>,
    id: u64,
}

impl Ticket {
    pub fn admission(&self) -> &Arc<ConnectionAdmission> {
        &self.admission
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.admission.lock().take(self.id);
    }
}

impl ConnectionAdmission {
    pub fn new(limits: ConnectionLimits, max_websockets: u32) -> Arc<Self> {
        Arc::new(ConnectionAdmission {
            limits,
            max_websockets,
            table: Mutex::new(Table::default()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        // The table stays consistent across a panic elsewhere: every change is one call.
        self.table
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Admits an HTTP connection from `ip` watched by `watch`, closing one that may give
    /// way where a bound is reached. Returns its ticket and how many were closed for it.
    pub fn admit(
        self: &Arc<Self>,
        ip: IpAddr,
        watch: Arc<ConnectionWatch>,
    ) -> Result<(Ticket, u32), Refusal> {
        let address = ClientAddress::from(ip);
        let share = self.limits.max_per_address.min(self.limits.max_connections);
        let bound = self.limits.max_connections;
        let mut table = self.lock();
        let mut evicted = 0;
        let held = table.per_address.get(&address).copied().unwrap_or(0);
        if held >= share {
            match table.evict(Some(address), None) {
                true => evicted += 1,
                false => return Err(Refusal::AddressShare { share }),
            }
        }
        if table.of_kind[Kind::Http as usize] >= bound {
            match table.evict(None, Some(Kind::Http)) {
                true => evicted += 1,
                false => return Err(Refusal::Full { bound }),
            }
        }
        let id = table.insert(address, Kind::Http, watch);
        let ticket = Ticket {
            admission: self.clone(),
            id,
        };
        Ok((ticket, evicted))
    }

    /// The HTTP connection of `ticket` becomes a WebSocket session held by `standing`: it
    /// keeps its place in its address's share and takes one of `--max-ws-connections`,
    /// where a session without credentials gives way at the bound (D9). Returns the
    /// session's ticket (the old one then frees nothing) and how many were closed for it.
    pub fn upgrade(
        self: &Arc<Self>,
        ticket: &Ticket,
        standing: Arc<Standing>,
    ) -> Result<(Ticket, u32), Refusal> {
        let mut table = self.lock();
        let Some(address) = table.open.get(&ticket.id).map(|h| h.address) else {
            // Closed to admit another while its upgrade was on the way: nothing to hold.
            return Err(Refusal::Full {
                bound: self.limits.max_connections,
            });
        };
        let bound = self.max_websockets;
        let mut evicted = 0;
        if table.of_kind[Kind::WebSocket as usize] >= bound {
            match table.evict(None, Some(Kind::WebSocket)) {
                true => evicted += 1,
                false => return Err(Refusal::WebSockets { bound }),
            }
        }
        table.take(ticket.id);
        let id = table.insert(address, Kind::WebSocket, standing);
        let ticket = Ticket {
            admission: self.clone(),
            id,
        };
        Ok((ticket, evicted))
    }

    /// Connections open now.
    #[cfg(test)]
    fn open(&self) -> usize {
        self.lock().open.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn limits(max: u32, share: u32) -> ConnectionLimits {
        ConnectionLimits {
            max_connections: max,
            max_per_address: share,
            ..ConnectionLimits::default()
        }
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn admit(
        a: &Arc<ConnectionAdmission>,
        from: &str,
    ) -> Result<(Ticket, Arc<ConnectionWatch>), Refusal> {
        let watch = Arc::new(ConnectionWatch::new(a.limits));
        a.admit(ip(from), watch.clone()).map(|(t, _)| (t, watch))
    }

    /// Issue 23: at the bound the longest-idle connection gives way; only connections that
    /// are all busy refuse a newcomer.
    #[tokio::test]
    async fn at_the_bound_the_longest_idle_connection_gives_way_and_busy_ones_never_do() {
        let a = ConnectionAdmission::new(limits(2, 2), 4);
        let (_first, w1) = admit(&a, "10.0.0.1").unwrap();
        let (_second, w2) = admit(&a, "10.0.0.1").unwrap();
        // Both are reading their first request: busy.
        assert_eq!(
            admit(&a, "10.0.0.2").err(),
            Some(Refusal::Full { bound: 2 })
        );
        w2.idle_now();
        tokio::time::sleep(Duration::from_millis(5)).await;
        w1.idle_now();
        let (_third, _) = admit(&a, "10.0.0.2").unwrap();
        assert!(
            w2.was_evicted() && !w1.was_evicted(),
            "the longest idle goes"
        );
        assert_eq!(a.open(), 2);
    }

    /// An address at its share makes room from its own idle connections, never another's;
    /// with none idle it is refused while other addresses are still admitted.
    #[tokio::test]
    async fn an_address_at_its_share_gives_way_from_its_own_connections() {
        let a = ConnectionAdmission::new(limits(10, 2), 4);
        let (_other, w_other) = admit(&a, "10.0.0.9").unwrap();
        w_other.idle_now();
        let (_a1, w1) = admit(&a, "10.0.0.1").unwrap();
        let (_a2, _w2) = admit(&a, "10.0.0.1").unwrap();
        assert_eq!(
            admit(&a, "10.0.0.1").err(),
            Some(Refusal::AddressShare { share: 2 })
        );
        w1.idle_now();
        let _a3 = admit(&a, "10.0.0.1").unwrap();
        assert!(w1.was_evicted() && !w_other.was_evicted());
        assert!(admit(&a, "10.0.0.3").is_ok());
    }

    /// At the global bound the address holding the most gives way first.
    #[tokio::test]
    async fn at_the_bound_the_address_holding_the_most_gives_way_first() {
        let a = ConnectionAdmission::new(limits(3, 3), 4);
        let (_b, w_b) = admit(&a, "10.0.0.2").unwrap();
        w_b.idle_now();
        tokio::time::sleep(Duration::from_millis(5)).await;
        let (_h1, w_h1) = admit(&a, "10.0.0.1").unwrap();
        let (_h2, w_h2) = admit(&a, "10.0.0.1").unwrap();
        w_h1.idle_now();
        w_h2.idle_now();
        let _new = admit(&a, "10.0.0.3").unwrap();
        assert!(!w_b.was_evicted(), "the lone connection idle longest stays");
        assert!(w_h1.was_evicted() ^ w_h2.was_evicted());
    }

    /// A ticket dropped frees its place; an IPv6 /64 is one address, an IPv4-mapped address
    /// its IPv4 client.
    #[tokio::test]
    async fn places_are_freed_on_close_and_ipv6_counts_by_its_64() {
        let a = ConnectionAdmission::new(limits(10, 1), 4);
        let (t, _) = admit(&a, "2001:db8::1").unwrap();
        assert!(admit(&a, "2001:db8::2").is_err(), "same /64");
        assert!(admit(&a, "2001:db8:0:1::1").is_ok(), "another /64");
        drop(t);
        assert!(admit(&a, "2001:db8::2").is_ok());
        let (_v4, _) = admit(&a, "192.0.2.7").unwrap();
        assert!(admit(&a, "::ffff:192.0.2.7").is_err());
    }
}
