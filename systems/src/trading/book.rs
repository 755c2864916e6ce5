//! One limit order book per instrument: price-time priority, in integer ticks and lots.
//!
//! Prices are whole ticks and amounts whole lots of the instrument (order entry refuses
//! anything off the grid), so matching is exact integer arithmetic. A resting order lives in
//! a slot of one `Vec`; each price level is an intrusive doubly-linked FIFO of slots, so
//! cancel is O(1) after the level lookup and a resting order costs one 40-byte slot plus its
//! share of a level. Handles carry the slot's generation, so a stale handle never touches a
//! reused slot.

use std::collections::BTreeMap;

use crate::records::ids::OrderId;
use crate::records::order::{Lots, OrderRef, Ticks};
use perpsim_core::order::Side;
use serde::{Deserialize, Serialize};

const NIL: u32 = u32::MAX;

/// Upper bound on resting orders per book (slot indexes are u32).
pub const MAX_RESTING: usize = (u32::MAX - 1) as usize;

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Slot {
    /// The engine's order id (stable, for fills and reads).
    id: OrderId,
    price: Ticks,
    remaining: Lots,
    prev: u32,
    next: u32,
    generation: u32,
    side: Side,
    live: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Level {
    head: u32,
    tail: u32,
    lots: Lots,
    orders: u32,
}

/// One execution against a resting order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fill {
    pub maker_id: OrderId,
    pub maker: OrderRef,
    pub price: Ticks,
    pub lots: Lots,
    /// The maker order has nothing left and has left the book.
    pub maker_done: bool,
}

/// A resting order as the book sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resting {
    pub id: OrderId,
    pub side: Side,
    pub price: Ticks,
    pub remaining: Lots,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Book {
    bids: BTreeMap<Ticks, Level>,
    asks: BTreeMap<Ticks, Level>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    resting: usize,
    /// Moves with every change of a level (rest, cancel, reduce, take), so the book stream
    /// diffs only the books that changed; derived, never part of the state.
    #[serde(skip)]
    revision: u64,
}

impl Book {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of resting orders.
    pub fn len(&self) -> usize {
        self.resting
    }

    pub fn is_empty(&self) -> bool {
        self.resting == 0
    }

    /// A number that differs whenever the levels may have changed since it was read.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    fn levels(&self, side: Side) -> &BTreeMap<Ticks, Level> {
        match side {
            Side::Buy => &self.bids,
            Side::Sell => &self.asks,
        }
    }

    fn levels_mut(&mut self, side: Side) -> &mut BTreeMap<Ticks, Level> {
        match side {
            Side::Buy => &mut self.bids,
            Side::Sell => &mut self.asks,
        }
    }

    /// Best bid: highest price and its total lots.
    pub fn best_bid(&self) -> Option<(Ticks, Lots)> {
        self.bids.last_key_value().map(|(p, l)| (*p, l.lots))
    }

    /// Best ask: lowest price and its total lots.
    pub fn best_ask(&self) -> Option<(Ticks, Lots)> {
        self.asks.first_key_value().map(|(p, l)| (*p, l.lots))
    }

    /// The best `n` levels of a side, best first.
    pub fn depth(&self, side: Side, n: usize) -> Vec<(Ticks, Lots)> {
        let levels = self.levels(side).iter().map(|(p, l)| (*p, l.lots));
        match side {
            Side::Buy => levels.rev().take(n).collect(),
            Side::Sell => levels.take(n).collect(),
        }
    }

    /// Whether an order on `side` at `limit` (None: market) would trade at once.
    pub fn crosses(&self, side: Side, limit: Option<Ticks>) -> bool {
        match side {
            Side::Buy => self
                .best_ask()
                .is_some_and(|(p, _)| limit.is_none_or(|l| p <= l)),
            Side::Sell => self
                .best_bid()
                .is_some_and(|(p, _)| limit.is_none_or(|l| p >= l)),
        }
    }

    /// Lots an order on `side` at `limit` could take right now, counting at most `want`
    /// (the fill-or-kill check: it stops as soon as enough is found).
    pub fn fillable(&self, side: Side, limit: Option<Ticks>, want: Lots) -> Lots {
        let mut found: Lots = 0;
        let within = |p: Ticks| match side {
            Side::Buy => limit.is_none_or(|l| p <= l),
            Side::Sell => limit.is_none_or(|l| p >= l),
        };
        let mut add = |(p, level): (&Ticks, &Level)| {
            if found >= want || !within(*p) {
                return false;
            }
            found = found.saturating_add(level.lots);
            true
        };
        match side {
            Side::Buy => self.asks.iter().take_while(|e| add(*e)).for_each(drop),
            Side::Sell => self
                .bids
                .iter()
                .rev()
                .take_while(|e| add(*e))
                .for_each(drop),
        }
        found.min(want)
    }

    /// Whole lots an order on `side` could take within `limit` for a notional of at most
    /// `budget`, counted in tick × lot units (a cash order resolved to contracts, rule 2).
    pub fn lots_within_budget(&self, side: Side, limit: Option<Ticks>, mut budget: i128) -> Lots {
        let mut lots: Lots = 0;
        let levels: Box<dyn Iterator<Item = (&Ticks, &Level)>> = match side {
            Side::Buy => Box::new(self.asks.iter()),
            Side::Sell => Box::new(self.bids.iter().rev()),
        };
        for (&price, level) in levels {
            let within = match side {
                Side::Buy => limit.is_none_or(|l| price <= l),
                Side::Sell => limit.is_none_or(|l| price >= l),
            };
            if !within || price <= 0 {
                break;
            }
            let affordable = (budget / i128::from(price)).min(i128::from(level.lots));
            lots += affordable as Lots;
            budget -= affordable * i128::from(price);
            if affordable < i128::from(level.lots) {
                break;
            }
        }
        lots
    }

    /// Adds a resting order at the back of its price level.
    pub fn rest(&mut self, id: OrderId, side: Side, price: Ticks, lots: Lots) -> OrderRef {
        assert!(lots > 0, "a resting order has something left");
        assert!(self.resting < MAX_RESTING, "book bound reached");
        self.revision = self.revision.wrapping_add(1);
        let slot = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot {
                    id: OrderId(0),
                    price: 0,
                    remaining: 0,
                    prev: NIL,
                    next: NIL,
                    generation: 0,
                    side,
                    live: false,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let level = self.levels_mut(side).entry(price).or_insert(Level {
            head: NIL,
            tail: NIL,
            lots: 0,
            orders: 0,
        });
        let prev = level.tail;
        level.tail = slot;
        if level.head == NIL {
            level.head = slot;
        }
        level.lots += lots;
        level.orders += 1;
        if prev != NIL {
            self.slots[prev as usize].next = slot;
        }
        let s = &mut self.slots[slot as usize];
        *s = Slot {
            id,
            price,
            remaining: lots,
            prev,
            next: NIL,
            generation: s.generation,
            side,
            live: true,
        };
        self.resting += 1;
        OrderRef {
            slot,
            generation: s.generation,
        }
    }

    fn slot(&self, r: OrderRef) -> Option<&Slot> {
        self.slots
            .get(r.slot as usize)
            .filter(|s| s.live && s.generation == r.generation)
    }

    pub fn get(&self, r: OrderRef) -> Option<Resting> {
        self.slot(r).map(|s| Resting {
            id: s.id,
            side: s.side,
            price: s.price,
            remaining: s.remaining,
        })
    }

    /// Removes a resting order; returns what it had left. None for a stale handle.
    pub fn cancel(&mut self, r: OrderRef) -> Option<Resting> {
        let s = *self.slot(r)?;
        self.revision = self.revision.wrapping_add(1);
        self.unlink(r.slot, &s);
        Some(Resting {
            id: s.id,
            side: s.side,
            price: s.price,
            remaining: s.remaining,
        })
    }

    /// The resting orders of `side` at prices as good as `through` or better (bids at or
    /// above it, asks at or below), best price first and oldest first within a price: what
    /// a trade printed at `through` reached (issue 39's queue model, `simulation::recorded`).
    pub fn queue_through(&self, side: Side, through: Ticks) -> Vec<(OrderRef, Resting)> {
        let levels: Box<dyn Iterator<Item = &Level>> = match side {
            Side::Buy => Box::new(self.bids.range(through..).rev().map(|(_, l)| l)),
            Side::Sell => Box::new(self.asks.range(..=through).map(|(_, l)| l)),
        };
        let mut queue = Vec::new();
        for level in levels {
            let mut at = level.head;
            while at != NIL {
                let s = &self.slots[at as usize];
                let r = OrderRef {
                    slot: at,
                    generation: s.generation,
                };
                let resting = Resting {
                    id: s.id,
                    side: s.side,
                    price: s.price,
                    remaining: s.remaining,
                };
                queue.push((r, resting));
                at = s.next;
            }
        }
        queue
    }

    /// Lowers a resting order's amount in place, keeping its time priority (an amend that
    /// only reduces size). Refused (false) for a stale handle or a non-reduction.
    pub fn reduce(&mut self, r: OrderRef, lots: Lots) -> bool {
        let Some(s) = self.slot(r).copied() else {
            return false;
        };
        if lots == 0 || lots >= s.remaining {
            return false;
        }
        self.revision = self.revision.wrapping_add(1);
        let level = self
            .levels_mut(s.side)
            .get_mut(&s.price)
            .expect("a live slot's level exists");
        level.lots -= s.remaining - lots;
        self.slots[r.slot as usize].remaining = lots;
        true
    }

    fn unlink(&mut self, slot: u32, s: &Slot) {
        if s.prev != NIL {
            self.slots[s.prev as usize].next = s.next;
        }
        if s.next != NIL {
            self.slots[s.next as usize].prev = s.prev;
        }
        let levels = self.levels_mut(s.side);
        let level = levels
            .get_mut(&s.price)
            .expect("a live slot's level exists");
        if level.head == slot {
            level.head = s.next;
        }
        if level.tail == slot {
            level.tail = s.prev;
        }
        level.lots -= s.remaining;
        level.orders -= 1;
        if level.orders == 0 {
            debug_assert_eq!(level.lots, 0, "an empty level holds no lots");
            levels.remove(&s.price);
        }
        let freed = &mut self.slots[slot as usize];
        freed.live = false;
        freed.generation = freed.generation.wrapping_add(1);
        self.free.push(slot);
        self.resting -= 1;
    }

    /// Executes an incoming order on `side` for up to `lots` against the opposite side, best
    /// price first and oldest first within a price, never beyond `limit` (None: market).
    /// Fills are appended to `fills`; returns the lots left unfilled.
    pub fn take(
        &mut self,
        side: Side,
        limit: Option<Ticks>,
        mut lots: Lots,
        fills: &mut Vec<Fill>,
    ) -> Lots {
        let maker_side = side.opposite();
        self.revision = self.revision.wrapping_add(1);
        while lots > 0 {
            let best = match maker_side {
                Side::Sell => self.asks.first_key_value(),
                Side::Buy => self.bids.last_key_value(),
            };
            let Some((&price, level)) = best else { break };
            let crossed = match side {
                Side::Buy => limit.is_none_or(|l| price <= l),
                Side::Sell => limit.is_none_or(|l| price >= l),
            };
            if !crossed {
                break;
            }
            let mut cursor = level.head;
            while lots > 0 && cursor != NIL {
                let s = self.slots[cursor as usize];
                let traded = s.remaining.min(lots);
                lots -= traded;
                let maker = OrderRef {
                    slot: cursor,
                    generation: s.generation,
                };
                let done = traded == s.remaining;
                fills.push(Fill {
                    maker_id: s.id,
                    maker,
                    price,
                    lots: traded,
                    maker_done: done,
                });
                let next = s.next;
                if done {
                    self.unlink(cursor, &s);
                } else {
                    self.slots[cursor as usize].remaining -= traded;
                    self.levels_mut(maker_side)
                        .get_mut(&price)
                        .expect("level of a live slot")
                        .lots -= traded;
                }
                cursor = next;
            }
        }
        lots
    }

    /// Not crossed: every bid is below every ask (checked after matching).
    pub fn is_uncrossed(&self) -> bool {
        match (self.best_bid(), self.best_ask()) {
            (Some((b, _)), Some((a, _))) => b < a,
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fills(
        book: &mut Book,
        side: Side,
        limit: Option<Ticks>,
        lots: Lots,
    ) -> (Vec<(OrderId, Ticks, Lots)>, Lots) {
        let mut out = Vec::new();
        let left = book.take(side, limit, lots, &mut out);
        (
            out.iter().map(|f| (f.maker_id, f.price, f.lots)).collect(),
            left,
        )
    }

    #[test]
    fn matches_best_price_first_then_oldest_first() {
        let mut b = Book::new();
        b.rest(OrderId(1), Side::Sell, 101, 5);
        b.rest(OrderId(2), Side::Sell, 100, 3);
        b.rest(OrderId(3), Side::Sell, 100, 4);
        b.rest(OrderId(4), Side::Buy, 99, 10);
        assert_eq!(
            (b.best_bid(), b.best_ask()),
            (Some((99, 10)), Some((100, 7)))
        );
        let (f, left) = fills(&mut b, Side::Buy, Some(101), 9);
        assert_eq!(
            f,
            vec![
                (OrderId(2), 100, 3),
                (OrderId(3), 100, 4),
                (OrderId(1), 101, 2)
            ]
        );
        assert_eq!(left, 0);
        assert_eq!(b.best_ask(), Some((101, 3)));
        assert!(b.is_uncrossed());
    }

    #[test]
    fn a_limit_stops_the_walk_and_a_market_order_takes_what_there_is() {
        let mut b = Book::new();
        b.rest(OrderId(1), Side::Buy, 100, 2);
        b.rest(OrderId(2), Side::Buy, 98, 2);
        let (f, left) = fills(&mut b, Side::Sell, Some(99), 5);
        assert_eq!((f, left), (vec![(OrderId(1), 100, 2)], 3));
        let (f, left) = fills(&mut b, Side::Sell, None, 5);
        assert_eq!((f, left), (vec![(OrderId(2), 98, 2)], 3));
        assert!(b.is_empty());
    }

    #[test]
    fn cancel_is_by_handle_and_stale_handles_are_refused() {
        let mut b = Book::new();
        let a = b.rest(OrderId(1), Side::Buy, 100, 2);
        let c = b.rest(OrderId(2), Side::Buy, 100, 3);
        assert_eq!(
            b.cancel(a).map(|r| (r.id, r.remaining)),
            Some((OrderId(1), 2))
        );
        assert_eq!(b.cancel(a), None, "already gone");
        let reused = b.rest(OrderId(3), Side::Sell, 105, 1);
        assert_eq!(
            b.get(a),
            None,
            "the reused slot does not answer the old handle"
        );
        assert_eq!(b.get(reused).map(|r| r.id), Some(OrderId(3)));
        assert_eq!(b.best_bid(), Some((100, 3)));
        assert_eq!(b.get(c).map(|r| r.remaining), Some(3));
    }

    #[test]
    fn reduce_keeps_priority_and_partial_fills_keep_the_maker_in_place() {
        let mut b = Book::new();
        let first = b.rest(OrderId(1), Side::Sell, 100, 10);
        b.rest(OrderId(2), Side::Sell, 100, 10);
        assert!(b.reduce(first, 4));
        assert!(
            !b.reduce(first, 4) && !b.reduce(first, 0),
            "only real reductions"
        );
        let (f, _) = fills(&mut b, Side::Buy, Some(100), 6);
        assert_eq!(f, vec![(OrderId(1), 100, 4), (OrderId(2), 100, 2)]);
        assert_eq!(b.best_ask(), Some((100, 8)));
        assert_eq!(b.len(), 1);
    }

    #[test]
    fn fok_and_post_only_checks_see_exactly_the_crossing_liquidity() {
        let mut b = Book::new();
        b.rest(OrderId(1), Side::Sell, 100, 3);
        b.rest(OrderId(2), Side::Sell, 102, 3);
        assert_eq!(b.fillable(Side::Buy, Some(101), 10), 3);
        assert_eq!(b.fillable(Side::Buy, Some(102), 5), 5);
        assert_eq!(b.fillable(Side::Buy, None, 10), 6);
        assert!(b.crosses(Side::Buy, Some(100)) && !b.crosses(Side::Buy, Some(99)));
        assert!(!b.crosses(Side::Sell, Some(1)), "no bids");
        assert_eq!(b.depth(Side::Sell, 5), vec![(100, 3), (102, 3)]);
    }

    #[test]
    fn a_random_stream_keeps_levels_consistent_with_slots() {
        let mut rng = perpsim_core::rng::SimRng::from_seed(11);
        let mut b = Book::new();
        let mut live: Vec<OrderRef> = Vec::new();
        let mut out = Vec::new();
        for id in 0..20_000u64 {
            let r = rng.next_u64();
            let side = if r & 1 == 0 { Side::Buy } else { Side::Sell };
            let price = 1_000 + (r >> 8) as i64 % 40 - 20;
            let lots = 1 + (r >> 32) % 9;
            match r % 10 {
                0..=6 => {
                    out.clear();
                    let left = b.take(side, Some(price), lots, &mut out);
                    if left > 0 {
                        live.push(b.rest(OrderId(id), side, price, left));
                    }
                }
                7 | 8 if !live.is_empty() => {
                    let i = (r >> 16) as usize % live.len();
                    b.cancel(live.swap_remove(i));
                }
                _ => {
                    out.clear();
                    b.take(side, None, lots, &mut out);
                }
            }
            assert!(b.is_uncrossed());
        }
        // Levels' totals equal the sum of their live slots.
        for side in [Side::Buy, Side::Sell] {
            for (price, level) in b.levels(side) {
                let mut sum = 0;
                let mut n = 0;
                let mut cursor = level.head;
                while cursor != NIL {
                    let s = &b.slots[cursor as usize];
                    assert_eq!((s.price, s.side, s.live), (*price, side, true));
                    sum += s.remaining;
                    n += 1;
                    cursor = s.next;
                }
                assert_eq!((sum, n), (level.lots, level.orders));
            }
        }
    }
}
