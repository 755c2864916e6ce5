//! Identifiers. Every id is a UUID drawn from the engine's seeded [`crate::rng::SimRng`], so
//! the same seed and the same commands give the same ids.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

macro_rules! uuid_code {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub struct $name(pub Uuid);

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
