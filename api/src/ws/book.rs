//! `orderbook-stream:{symbol}` frames (§6 rule 6, D9) and their checksum.
//!
//! Every book frame carries `checksum`: the CRC-32 (IEEE, as zlib's `crc32`) of the UTF-8
//! text made of the best 10 asks, lowest first, then the best 10 bids, highest first, of the
//! book after the frame is applied, each level written `price:amount` with the price and
//! amount strings exactly as the frames carry them, levels joined by `|` (no separator
//! before the first or after the last; a side with fewer levels gives what it has). A client
//! that applies the frames in sequence and computes the same number holds the same book.

use perpsim_core::instrument::InstrumentSpec;
use perpsim_core::order::Side;
use perpsim_systems::records::depth::{Depth, Level, LevelChange};

use super::frames::{BookChange, BookLevel, BookSnapshot, BookUpdate};
use crate::wire::DecimalOut;

/// Levels a side the checksum covers.
pub const CHECKSUM_LEVELS: usize = 10;

fn level(spec: &InstrumentSpec, l: &Level) -> BookLevel {
    BookLevel {
        price: DecimalOut::new(l.price, spec.price_decimals()),
        amount: DecimalOut::new(l.amount, spec.amount_decimals()),
    }
}

/// The checksum of `depth` as the frames write its levels.
pub fn checksum(spec: &InstrumentSpec, depth: &Depth) -> u32 {
    let asks = depth.asks.iter().take(CHECKSUM_LEVELS);
    let bids = depth.bids.iter().take(CHECKSUM_LEVELS);
    let text: Vec<String> = asks
        .chain(bids)
        .map(|l| {
            let l = level(spec, l);
            format!("{}:{}", l.price.0, l.amount.0)
        })
        .collect();
    crc32fast::hash(text.join("|").as_bytes())
}

pub fn snapshot(
    channel: String,
    spec: &InstrumentSpec,
    depth: &Depth,
    sequence: u64,
) -> BookSnapshot {
    BookSnapshot {
        channel,
        kind: "snapshot".into(),
        symbol: spec.symbol.clone(),
        sequence,
        bids: depth.bids.iter().map(|l| level(spec, l)).collect(),
        asks: depth.asks.iter().map(|l| level(spec, l)).collect(),
        checksum: checksum(spec, depth),
    }
}

/// One tick's changes; `after` is the depth they lead to.
pub fn update(
    channel: String,
    spec: &InstrumentSpec,
    changes: &[LevelChange],
    after: &Depth,
    sequence: u64,
) -> BookUpdate {
    BookUpdate {
        channel,
        kind: "update".into(),
        symbol: spec.symbol.clone(),
        sequence,
        changes: changes
            .iter()
            .map(|c| BookChange {
                action: c.action.as_str().into(),
                side: match c.side {
                    Side::Buy => "bid",
                    Side::Sell => "ask",
                }
                .into(),
                price: DecimalOut::new(c.price, spec.price_decimals()),
                amount: DecimalOut::new(c.amount, spec.amount_decimals()),
            })
            .collect(),
        checksum: checksum(spec, after),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perpsim_core::Decimal;
    use perpsim_core::instrument::default_instruments;

    /// The checksum is documented exactly: recomputed here from the documented text.
    #[test]
    fn the_checksum_is_the_crc32_of_the_documented_level_text() {
        let spec = &default_instruments()[0]; // BTC-USDC-PERP: tick 0.1, lot 0.0001
        let l = |p: &str, a: &str| Level {
            price: p.parse::<Decimal>().unwrap(),
            amount: a.parse::<Decimal>().unwrap(),
        };
        let depth = Depth {
            bids: vec![l("59999.9", "0.5"), l("59999", "1.25")],
            asks: vec![l("60000.1", "0.5")],
        };
        let text = "60000.1:0.5000|59999.9:0.5000|59999.0:1.2500";
        assert_eq!(checksum(spec, &depth), crc32fast::hash(text.as_bytes()));
        assert_eq!(checksum(spec, &Depth::default()), crc32fast::hash(b""));
    }
}
