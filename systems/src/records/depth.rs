//! The order book as the `orderbook-stream` channel shows it (§6 rule 6, D9): each market's
//! best levels per side, and the changes of a tick from one such depth to the next.

use perpsim_core::Decimal;
use perpsim_core::order::Side;

/// Levels per side the stream carries: a level leaving the best this many is deleted from
/// the stream, one entering it is new (as Kraken's and Bitfinex's bounded books do).
pub const STREAM_DEPTH: usize = 50;

/// One price level: its price and the amount resting there (base units).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Level {
    pub price: Decimal,
    pub amount: Decimal,
}

/// A market's best levels, best first on each side.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Depth {
    pub bids: Vec<Level>,
    pub asks: Vec<Level>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LevelAction {
    New,
    Change,
    Delete,
}

impl LevelAction {
    pub fn as_str(self) -> &'static str {
        match self {
            LevelAction::New => "new",
            LevelAction::Change => "change",
            LevelAction::Delete => "delete",
        }
    }
}

/// One change of a level: `amount` is the level's new amount, 0 on delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LevelChange {
    pub action: LevelAction,
    pub side: Side,
    pub price: Decimal,
    pub amount: Decimal,
}

/// The changes that turn `old` into `new`: bids first, then asks, each side in the order
/// of its prices best first. Pure; both sides are sorted best first and hold each price once.
pub fn diff(old: &Depth, new: &Depth) -> Vec<LevelChange> {
    let mut changes = Vec::new();
    diff_side(Side::Buy, &old.bids, &new.bids, &mut changes);
    diff_side(Side::Sell, &old.asks, &new.asks, &mut changes);
    changes
}

/// A merge walk of two best-first lists: bids descend, asks ascend.
fn diff_side(side: Side, old: &[Level], new: &[Level], out: &mut Vec<LevelChange>) {
    let better = |a: Decimal, b: Decimal| match side {
        Side::Buy => a > b,
        Side::Sell => a < b,
    };
    let change = |action, price, amount| LevelChange {
        action,
        side,
        price,
        amount,
    };
    let (mut i, mut j) = (0, 0);
    while i < old.len() || j < new.len() {
        match (old.get(i), new.get(j)) {
            (Some(o), Some(n)) if o.price == n.price => {
                if o.amount != n.amount {
                    out.push(change(LevelAction::Change, n.price, n.amount));
                }
                i += 1;
                j += 1;
            }
            (Some(o), Some(n)) if better(o.price, n.price) => {
                out.push(change(LevelAction::Delete, o.price, Decimal::ZERO));
                i += 1;
            }
            (Some(o), None) => {
                out.push(change(LevelAction::Delete, o.price, Decimal::ZERO));
                i += 1;
            }
            (_, Some(n)) => {
                out.push(change(LevelAction::New, n.price, n.amount));
                j += 1;
            }
            (None, None) => unreachable!("the loop runs while either list has a level"),
        }
    }
}

/// `depth` with `changes` applied, as a client keeps its book: what the stream promises is
/// that applying a tick's changes to the previous depth gives the new one.
pub fn apply(depth: &Depth, changes: &[LevelChange]) -> Depth {
    let mut out = depth.clone();
    for c in changes {
        let levels = match c.side {
            Side::Buy => &mut out.bids,
            Side::Sell => &mut out.asks,
        };
        levels.retain(|l| l.price != c.price);
        if c.action != LevelAction::Delete {
            levels.push(Level {
                price: c.price,
                amount: c.amount,
            });
        }
    }
    out.bids.sort_by_key(|l| std::cmp::Reverse(l.price));
    out.asks.sort_by_key(|l| l.price);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn levels(side: Side, raw: &std::collections::BTreeMap<u32, u32>) -> Vec<Level> {
        let mut v: Vec<Level> = raw
            .iter()
            .map(|(p, a)| Level {
                price: Decimal::from(*p),
                amount: Decimal::from(*a),
            })
            .collect();
        if side == Side::Buy {
            v.reverse();
        }
        v
    }

    #[test]
    fn a_changed_level_is_one_change_and_a_vanished_one_a_delete_with_amount_zero() {
        let l = |p: i64, a: i64| Level {
            price: Decimal::from(p),
            amount: Decimal::from(a),
        };
        let old = Depth {
            bids: vec![l(100, 1), l(99, 2)],
            asks: vec![l(101, 1)],
        };
        let new = Depth {
            bids: vec![l(100, 3)],
            asks: vec![l(101, 1), l(102, 5)],
        };
        let changes = diff(&old, &new);
        let shown: Vec<_> = changes
            .iter()
            .map(|c| (c.action, c.side, c.price, c.amount))
            .collect();
        assert_eq!(
            shown,
            vec![
                (
                    LevelAction::Change,
                    Side::Buy,
                    Decimal::from(100),
                    Decimal::from(3)
                ),
                (
                    LevelAction::Delete,
                    Side::Buy,
                    Decimal::from(99),
                    Decimal::ZERO
                ),
                (
                    LevelAction::New,
                    Side::Sell,
                    Decimal::from(102),
                    Decimal::from(5)
                ),
            ]
        );
    }

    proptest! {
        /// §6 rule 6: applying a tick's changes to the depth before gives the depth after.
        #[test]
        fn applying_the_diff_rebuilds_the_new_depth(
            ob in proptest::collection::btree_map(1u32..60, 1u32..9, 0..12),
            oa in proptest::collection::btree_map(60u32..120, 1u32..9, 0..12),
            nb in proptest::collection::btree_map(1u32..60, 1u32..9, 0..12),
            na in proptest::collection::btree_map(60u32..120, 1u32..9, 0..12),
        ) {
            let old = Depth { bids: levels(Side::Buy, &ob), asks: levels(Side::Sell, &oa) };
            let new = Depth { bids: levels(Side::Buy, &nb), asks: levels(Side::Sell, &na) };
            let changes = diff(&old, &new);
            prop_assert_eq!(apply(&old, &changes), new.clone());
            prop_assert!(changes.iter().all(|c| (c.action == LevelAction::Delete) == c.amount.is_zero()));
            prop_assert_eq!(diff(&new, &new), vec![]);
        }
    }
}
