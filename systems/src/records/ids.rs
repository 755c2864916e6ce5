//! The engine's sequence ids: dense counters, each its own type so one cannot stand for
//! another. Each is the position of its record in its log (or, for an order, the count of
//! orders accepted before it); all only grow. Each is encoded as its number (serde
//! `transparent`), so snapshots and state hashes are what they were when these were `u64`.

use serde::{Deserialize, Serialize};

macro_rules! sequence_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub u64);

        impl $name {
            /// Its position in its log (or dense index).
            pub fn index(self) -> usize {
                usize::try_from(self.0).expect("sequence numbers fit the address space")
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

sequence_id!(
    /// An order's id: the count of orders accepted before it (so orders are indexed by it).
    OrderId
);
sequence_id!(
    /// A ledger movement's sequence number: its position in the ledger, in creation order.
    MovementSeq
);
sequence_id!(
    /// A trade record's position in the trade log (two per fill, one per side).
    TradeSeq
);
sequence_id!(
    /// A public fill's position in the fill log.
    FillSeq
);
sequence_id!(
    /// A depreciation notice's position in the notifications log.
    NoticeSeq
);
sequence_id!(
    /// A margin-state change's position in the risk log.
    RiskSeq
);
sequence_id!(
    /// A funding settlement's position in the funding history.
    FundingSeq
);
