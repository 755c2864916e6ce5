//! Who may hold a connection: the bound on open connections, each client address's share
//! of it, and which idle connection gives way when a new one arrives at a bound.
//!
//! A bound that only refuses can be held by anyone: a script keeping a few thousand idle
//! keep-alive connections (each refreshed inside the idle timeout) would have every signed
//! client answered 503 for as long as it liked. So at a bound the connection idle longest
//! is closed to admit the new one, and a new connection is refused only when none is idle:
//! a client holding only idle connections never locks anyone out. At the address share, the
//! address's own idle connection gives way; at the global bound, one of the address holding
//! the most. A connection between requests is idle; one reading a request, or whose request
//! a handler is working on, never is.
//!
//! An IPv6 client counts by its /64 (one host is usually given a whole /64), an IPv4
//! client by its address. The table is bounded by `max_connections`, and each admission
//! scans it once at most (4 096 entries at the default).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use crate::server::connections::ConnectionWatch;
use crate::state::config::ConnectionLimits;

/// A client address as the share counts it: IPv4 whole, IPv6 by its /64 prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ClientAddress(u128);

impl From<IpAddr> for ClientAddress {
    fn from(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(v4) => ClientAddress(u128::from(u32::from(v4))),
            // IPv4-mapped IPv6 is the IPv4 client it maps.
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => ClientAddress(u128::from(u32::from(v4))),
                None => ClientAddress((u128::from(v6) >> 64 << 64) | 1 << 32),
            },
        }
    }
}

/// Why a connection was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Every connection is busy and the bound is reached.
    Full { bound: u32 },
    /// The address holds its share and none of its connections is idle.
    AddressShare { share: u32 },
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
        }
    }
}

struct Held {
    address: ClientAddress,
    watch: Arc<ConnectionWatch>,
}

#[derive(Default)]
struct Table {
    next: u64,
    open: BTreeMap<u64, Held>,
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
        Some(held)
    }

    /// The idle connection to close for a newcomer: of `only` when given, else of the address
    /// holding the most; among those, the one idle longest. Closed and taken out of the table
    /// here, so its slot is free at once. A candidate that began a request since the scan is
    /// busy now and left alone; the next scan passes it over, so this ends within one try per
    /// open connection.
    fn evict(&mut self, only: Option<ClientAddress>) -> bool {
        for _ in 0..self.open.len() {
            let candidates = self
                .open
                .iter()
                .filter(|(_, h)| only.is_none_or(|a| a == h.address))
                .filter_map(|(id, h)| Some((*id, h.address, h.watch.idle_since()?)));
            let best = candidates.max_by_key(|(id, address, since)| {
                (self.per_address[address], std::cmp::Reverse((*since, *id)))
            });
            let Some((id, _, _)) = best else { return false };
            if self.open[&id].watch.evict() {
                self.take(id);
                return true;
            }
        }
        false
    }
}

/// The connections open now, and who may open another.
pub struct Admission {
    limits: ConnectionLimits,
    table: Mutex<Table>,
}

/// A connection's place in the table; leaving it (the connection ends) frees the place.
pub struct Ticket {
    admission: Arc<Admission>,
    id: u64,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.admission.lock().take(self.id);
    }
}

impl Admission {
    pub fn new(limits: ConnectionLimits) -> Arc<Self> {
        Arc::new(Admission {
            limits,
            table: Mutex::new(Table::default()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        // The table stays consistent across a panic elsewhere: every change is one call.
        self.table
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Admits a connection from `ip` watched by `watch`, closing an idle one where a bound
    /// is reached. Returns its ticket and how many idle connections were closed for it.
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
            match table.evict(Some(address)) {
                true => evicted += 1,
                false => return Err(Refusal::AddressShare { share }),
            }
        }
        if table.open.len() >= bound as usize {
            match table.evict(None) {
                true => evicted += 1,
                false => return Err(Refusal::Full { bound }),
            }
        }
        let id = table.next;
        table.next += 1;
        table.open.insert(id, Held { address, watch });
        *table.per_address.entry(address).or_default() += 1;
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

    fn admit(a: &Arc<Admission>, from: &str) -> Result<(Ticket, Arc<ConnectionWatch>), Refusal> {
        let watch = Arc::new(ConnectionWatch::new(a.limits));
        a.admit(ip(from), watch.clone()).map(|(t, _)| (t, watch))
    }

    /// Issue 23: at the bound the longest-idle connection gives way; only connections that
    /// are all busy refuse a newcomer.
    #[tokio::test]
    async fn at_the_bound_the_longest_idle_connection_gives_way_and_busy_ones_never_do() {
        let a = Admission::new(limits(2, 2));
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
        let a = Admission::new(limits(10, 2));
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
        let a = Admission::new(limits(3, 3));
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
        let a = Admission::new(limits(10, 1));
        let (t, _) = admit(&a, "2001:db8::1").unwrap();
        assert!(admit(&a, "2001:db8::2").is_err(), "same /64");
        assert!(admit(&a, "2001:db8:0:1::1").is_ok(), "another /64");
        drop(t);
        assert!(admit(&a, "2001:db8::2").is_ok());
        let (_v4, _) = admit(&a, "192.0.2.7").unwrap();
        assert!(admit(&a, "::ffff:192.0.2.7").is_err());
    }
}
