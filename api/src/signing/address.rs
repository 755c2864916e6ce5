//! Who pays for a failed authentication: the client address it came from (and, on a
//! WebSocket, its connection), never the key it names (D9). Charging the key would let
//! anyone who knows a broker's public key spend that broker's rate limit with garbage.
//!
//! Each address has a bucket of failures: `rate.per_second` a second, bursts of
//! `rate.burst`. A request from an address whose bucket is empty is refused with 429 before
//! its signature is verified, so garbage costs a bounded amount of verification whatever
//! its rate, and the key it names is untouched. The table holds at most [`MAX_ADDRESSES`]:
//! at the bound the buckets that filled up again leave first (a full bucket is what a new
//! address starts with), then the fullest.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use super::{Bucket, RateLimit};

/// Addresses whose failures are remembered at once.
pub const MAX_ADDRESSES: usize = 16_384;

/// A client address as the connection share and the failure budget count it: IPv4 whole,
/// IPv6 by its /64 prefix (one host is usually given a whole /64).
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

/// The failures each address may still make.
pub struct FailureBudget {
    rate: RateLimit,
    addresses: Mutex<BTreeMap<ClientAddress, Bucket>>,
    /// Whether any address has failed: while none has, a request takes no lock here.
    any: AtomicBool,
}

impl FailureBudget {
    pub fn new(rate: RateLimit) -> Self {
        FailureBudget {
            rate,
            addresses: Mutex::new(BTreeMap::new()),
            any: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<ClientAddress, Bucket>> {
        self.addresses.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `Err(seconds)` to wait while `from` has no failure left to spend.
    pub fn check(&self, from: ClientAddress, now_ns: u64) -> Result<(), u64> {
        if !self.any.load(Ordering::Acquire) {
            return Ok(());
        }
        match self.lock().get_mut(&from) {
            Some(bucket) => bucket.peek(self.rate, now_ns),
            None => Ok(()),
        }
    }

    /// Spends one of `from`'s failures.
    pub fn charge(&self, from: ClientAddress, now_ns: u64) {
        let mut addresses = self.lock();
        if !addresses.contains_key(&from) && addresses.len() >= MAX_ADDRESSES {
            let rate = self.rate;
            addresses.retain(|_, b| !b.full(rate, now_ns));
            if addresses.len() >= MAX_ADDRESSES {
                let fullest = addresses
                    .iter()
                    .max_by_key(|(_, b)| b.tokens_nano)
                    .map(|(a, _)| *a);
                fullest.map(|a| addresses.remove(&a));
            }
        }
        let bucket = addresses
            .entry(from)
            .or_insert_with(|| Bucket::full_of(self.rate));
        let _ = bucket.take(self.rate, now_ns);
        self.any.store(true, Ordering::Release);
    }

    /// Addresses with failures remembered.
    #[cfg(test)]
    pub fn tracked(&self) -> usize {
        self.lock().len()
    }
}
