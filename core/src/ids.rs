//! Identifiers. Every id is a UUID drawn from the engine's seeded [`crate::rng::SimRng`], so
//! the same seed and the same commands give the same ids.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Longest `external_id` a broker may give a customer.
pub const MAX_EXTERNAL_ID: usize = 64;

macro_rules! uuid_code {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub struct $name(pub Uuid);

        // The engine's indexes are B-trees keyed by ids, so this comparison runs on every
        // step of every lookup. The big-endian u128 orders exactly as the bytes do (what
        // `Uuid`'s own ordering compares, through memcmp), in two integer comparisons.
        impl Ord for $name {
            fn cmp(&self, other: &Self) -> std::cmp::Ordering {
                self.0.as_u128().cmp(&other.0.as_u128())
            }
        }

        impl PartialOrd for $name {
            fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
                Some(self.cmp(other))
            }
        }

        impl $name {
            /// Parses the hyphenated textual form (any case).
            pub fn parse(text: &str) -> Option<Self> {
                Uuid::try_parse(text).ok().map($name)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.hyphenated().fmt(f)
            }
        }
    };
}

uuid_code!(
    /// A broker, the API's tenant.
    BrokerCode
);
uuid_code!(
    /// A customer of a broker (`customer_code`).
    CustomerCode
);

uuid_code!(
    /// A ledger movement (`code` of a transaction row and a balance-changes message).
    MovementCode
);

/// A broker's ed25519 public key, 32 bytes. Kept as raw bytes: `core` knows nothing of the
/// signature scheme, only that keys identify brokers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PublicKey(pub [u8; 32]);

uuid_code!(
    /// A position (`position_code`); a new one on every open, reopen or flip (D6).
    PositionCode
);

uuid_code!(
    /// One side's record of a fill (`code` of a trade record, `trade_code` of its ledger row).
    TradeCode
);

uuid_code!(
    /// A public trade (`code` of a PublicTrade): one per fill.
    FillCode
);

uuid_code!(
    /// A notification (`code` of the REST record and of its push message, §2.2).
    NotificationCode
);

/// Lower-case hex of `bytes` (tokens, digests).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_order_exactly_as_their_bytes_do() {
        let mut rng = crate::rng::SimRng::from_seed(11);
        let mut ids: Vec<CustomerCode> = (0..500).map(|_| CustomerCode(rng.uuid())).collect();
        // Neighbours that differ only in the last byte or only in the first.
        ids.push(CustomerCode(Uuid::from_u128(1)));
        ids.push(CustomerCode(Uuid::from_u128(2)));
        ids.push(CustomerCode(Uuid::from_u128(1 << 120)));
        for a in &ids {
            for b in ids.iter().step_by(7) {
                assert_eq!(a.cmp(b), a.0.as_bytes().cmp(b.0.as_bytes()), "{a} vs {b}");
            }
        }
    }
}
