//! Booking an execution (D5, D6, D7): fees from each side's fee profile, the net position
//! moved (realised PnL on the part that reduces it), one trade-family ledger movement and one
//! trade record per side, the public fill, and the margin that moves with all of it.
//!
//! Fees come from each side's profile: the taker's never below zero, the maker's rebate at most
//! the taker fee of the same fill (D7; an assertion kept in release builds, and the ledger's
//! invariants check that the fees account never goes below zero), so no pair of customers can
//! trade money out of the venue. The net position moves with one index lookup (realised PnL on
//! the reducing part, a new position code on open, reopen or flip); each side gets one
//! completed trade-family ledger movement (`realised_pnl − fee` against the clearing and fees
//! accounts, moving the side's locked margin in the same touch of its account). Locked margin
//! is `|size| × entry × initial margin` for a position and a reserve per lot for a resting
//! order.

use std::sync::Arc;

use perpsim_core::Decimal;
use perpsim_core::decimal::{ledger_quotient, round_ledger, round_ledger_product};
use perpsim_core::ids::{BrokerCode, CustomerCode, FillCode, PositionCode, TradeCode};
use perpsim_core::instrument::Asset;
use perpsim_core::order::Side;
use perpsim_core::rng::SimRng;
use perpsim_core::time::Timestamp;

use crate::money::ledger::{AccountStore, Books, Ledger, VenueBatch};
use crate::money::periodic::{book_one, funding_row, settlement_row};
use crate::positions::{MarginRate, OpenPositions};
use crate::records::ids::{FillSeq, OrderId, TradeSeq};
use crate::records::money::TradeInfo;
use crate::records::order::Lots;
use crate::records::periodic::{Pass, PeriodicPasses};
use crate::records::position::{Position, PositionKey, locked_margin};
use crate::records::trade::{Liquidity, PublicFill, TradeKind, TradeRecord};
use crate::records::venue::MarketId;
use crate::trading::exchange::Exchange;
use crate::trading::orders::Orders;

/// How a fill changes a net position: the new signed size and prices, and the PnL realised
/// on the part that closed exposure. Pure: `size` and `q` are signed (long/buy positive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PositionChange {
    pub size: Decimal,
    pub entry_price: Decimal,
    pub avg_fill_price: Decimal,
    /// Rounded half-even to 10 decimals at booking (D7).
    pub realised_pnl: Decimal,
    /// A new position starts (open, reopen or flip): it gets a new code (D6).
    pub new_position: bool,
}

pub fn position_change(current: Option<&Position>, q: Decimal, price: Decimal) -> PositionChange {
    let Some(p) = current.filter(|p| !p.size.is_zero()) else {
        return PositionChange {
            size: q,
            entry_price: price,
            avg_fill_price: price,
            realised_pnl: Decimal::ZERO,
            new_position: true,
        };
    };
    let (s, e) = (p.size, p.entry_price);
    if s.is_sign_negative() == q.is_sign_negative() {
        // Adding exposure: quantity-weighted averages of what is held. Entry and average
        // fill price agree until a daily settlement moves the entry, and then one division
        // (the costly part, in integers where they decide it) serves both.
        let weighted =
            |held: Decimal| ledger_quotient(held * s.abs() + price * q.abs(), (s + q).abs());
        let entry_price = weighted(e);
        return PositionChange {
            size: s + q,
            entry_price,
            avg_fill_price: if p.avg_fill_price == e {
                entry_price
            } else {
                weighted(p.avg_fill_price)
            },
            realised_pnl: Decimal::ZERO,
            new_position: false,
        };
    }
    let closed = s.abs().min(q.abs());
    let direction = if s.is_sign_negative() {
        -Decimal::ONE
    } else {
        Decimal::ONE
    };
    let realised_pnl = round_ledger_product(&[closed, price - e, direction]);
    let size = s + q;
    if size.is_zero() || size.is_sign_negative() == s.is_sign_negative() {
        // Reduced or closed: what is still held keeps its prices.
        PositionChange {
            size,
            entry_price: e,
            avg_fill_price: p.avg_fill_price,
            realised_pnl,
            new_position: false,
        }
    } else {
        // Flipped: the new side's exposure all comes from this fill.
        PositionChange {
            size,
            entry_price: price,
            avg_fill_price: price,
            realised_pnl,
            new_position: true,
        }
    }
}

/// One side's position after a fill, and what it held before.
struct Moved {
    change: PositionChange,
    /// The position the fill belongs to (new on open, reopen or flip).
    code: PositionCode,
    /// Initial margin locked now and before: |size| × entry price × initial margin.
    margin: Decimal,
    old_margin: Decimal,
    /// Signed size before the fill.
    before: Decimal,
}

/// A side's move: `q` (signed) at `price` in `market`, at an instant.
#[derive(Clone, Copy)]
struct Shift {
    market: MarketId,
    q: Decimal,
    price: Decimal,
    now: Timestamp,
}

/// Moves one side's net position by `q` (signed) at `price` (D6), with one index lookup: a
/// new code on open, reopen or flip (the old one is reported closed), the entity despawned
/// when it closes.
fn move_position(
    exchange: &mut Exchange,
    positions: &mut OpenPositions,
    rng: &mut SimRng,
    s: &FillSide,
    shift: Shift,
) -> Moved {
    let Shift {
        market,
        q,
        price,
        now,
    } = shift;
    let key = (s.customer, market);
    let dirty = &mut exchange.dirty;
    dirty.positions.push(key);
    let Some((p, rate)) = positions.get_mut(key) else {
        return open_position(positions, rng, s, shift);
    };
    assert_eq!(
        *rate, s.rate,
        "a position is held under its customer's profile"
    );
    let change = position_change(Some(p), q, price);
    let (before, old_margin) = (p.size, p.margin);
    let margin = locked_margin(change.size, change.entry_price, s.rate.initial);
    let mut moved = Moved {
        change,
        code: p.code,
        margin,
        old_margin,
        before,
    };
    if change.size.is_zero() {
        moved.code = positions.close(key).code;
        dirty.close(s.customer, market, moved.code);
        return moved;
    }
    if change.new_position {
        dirty.close(s.customer, market, p.code);
        p.code = PositionCode(rng.uuid());
        p.created_at = now;
    }
    if change.new_position || change.size.abs() > before.abs() {
        p.noticed = 0; // §3.3: an increase, a flip or a reopen starts a new baseline
    }
    p.size = change.size;
    p.entry_price = change.entry_price;
    p.avg_fill_price = change.avg_fill_price;
    p.margin = margin;
    p.updated_at = now;
    moved.code = p.code;
    moved
}

/// Opens a side's position, which it had none of in the market.
fn open_position(
    positions: &mut OpenPositions,
    rng: &mut SimRng,
    s: &FillSide,
    Shift {
        market,
        q,
        price,
        now,
    }: Shift,
) -> Moved {
    let change = position_change(None, q, price);
    let margin = locked_margin(change.size, change.entry_price, s.rate.initial);
    let code = PositionCode(rng.uuid());
    let position = Position {
        code,
        customer: s.customer,
        broker: s.broker,
        market,
        size: change.size,
        entry_price: change.entry_price,
        avg_fill_price: change.avg_fill_price,
        margin,
        created_at: now,
        updated_at: now,
        noticed: 0,
    };
    positions.open((s.customer, market), position, s.rate);
    Moved {
        change,
        code,
        margin,
        old_margin: Decimal::ZERO,
        before: Decimal::ZERO,
    }
}

/// A fee in basis points of the notional, rounded half-even to 10 decimals; negative bps is
/// a rebate.
pub fn fee(notional: Decimal, bps: Decimal) -> Decimal {
    let mut fee = notional * bps;
    // Dividing by 10 000 is exactly four more decimals; a general division costs as much as
    // the rest of the fee's arithmetic and is only needed where the scale would overflow.
    if fee.scale() + 4 <= 28 {
        fee.set_scale(fee.scale() + 4)
            .expect("a scale of at most 28 is valid");
    } else {
        fee /= Decimal::from(10_000);
    }
    round_ledger(fee)
}

/// The fees a fill books, taker first (D7): the taker's at its rate but never below zero, and
/// the maker's at its rate but a rebate at most the taker fee collected on the same fill. So
/// every fill adds at least zero to the fees account, and no pair of customers can trade
/// money out of it.
pub fn fill_fees(notional: Decimal, taker_bps: Decimal, maker_bps: Decimal) -> [Decimal; 2] {
    let taker = fee(notional, taker_bps).max(Decimal::ZERO);
    let maker = fee(notional, maker_bps).max(-taker);
    // Kept in release builds: the fees account's balance depends on it.
    assert!(
        taker + maker >= Decimal::ZERO,
        "a fill never takes money out of the fees account"
    );
    [taker, maker]
}

/// One side of a fill, as the booking needs it.
pub struct FillSide {
    /// The side's order; none on a forced side (a liquidation's closing side, either side of
    /// an auto-deleveraging), whose trade and row carry no reference_id (D5).
    pub order: Option<OrderId>,
    /// `Trade` for an order's side; `Liquidation` or `AutoDeleveraging` for a forced one.
    pub kind: TradeKind,
    pub customer: CustomerCode,
    pub broker: BrokerCode,
    pub side: Side,
    pub fee_bps: Decimal,
    /// The margin fractions of the customer's profile.
    pub rate: MarginRate,
    pub liquidity: Liquidity,
}

/// One execution: `lots` at `price` in a market (at the instant of its `Books`).
#[derive(Debug, Clone, Copy)]
pub struct Execution {
    pub market: MarketId,
    pub price: Decimal,
    pub lots: Lots,
}

/// What a fill is: its public record's number, its amount and notional, and what its ledger
/// rows and trade records name.
struct Filled {
    seq: FillSeq,
    amount: Decimal,
    notional: Decimal,
    asset: Asset,
    symbol: Arc<str>,
}

/// Books one execution between its two sides, the taker first, into the books' accounts at
/// their instant, the venue's side owed in the sweep's `batch`.
pub fn book_fill<A: AccountStore>(
    exchange: &mut Exchange,
    orders: &mut Orders,
    (positions, passes): (&mut OpenPositions, &mut PeriodicPasses),
    (ledger, batch): (&mut Ledger, &mut VenueBatch),
    books: &mut Books<'_, A>,
    execution: Execution,
    sides: [FillSide; 2],
) {
    let filled = publish_fill(exchange, books.rng, books.now, execution, sides[0].side);
    let fees = fill_fees(filled.notional, sides[0].fee_bps, sides[1].fee_bps);
    for (s, fee) in sides.into_iter().zip(fees) {
        let (reference, release) = match s.order {
            Some(id) => fill_order(exchange, orders, id, &filled, execution.lots, books.now),
            None => (None, Decimal::ZERO),
        };
        let q = match s.side {
            Side::Buy => filled.amount,
            Side::Sell => -filled.amount,
        };
        let shift = Shift {
            market: execution.market,
            q,
            price: execution.price,
            now: books.now,
        };
        let key = (s.customer, execution.market);
        settle_owed(passes, positions, ledger, books, (key, filled.asset));
        let moved = move_position(exchange, positions, books.rng, &s, shift);
        exchange.markets[execution.market as usize].open_interest +=
            moved.change.size.max(Decimal::ZERO) - moved.before.max(Decimal::ZERO);
        let trade_code = TradeCode(books.rng.uuid());
        let movement = ledger.book_trade(
            books,
            (s.customer, s.broker),
            (filled.asset, s.kind.movement()),
            // The position's margin moves, and the reserve of the part that rested gives way.
            moved.margin - moved.old_margin - release,
            TradeInfo {
                realised_pnl: moved.change.realised_pnl,
                fee,
                reference_id: reference.clone(),
                symbol: filled.symbol.clone(),
                trade_code: Some(trade_code),
            },
            batch,
        );
        let seq = TradeSeq(exchange.trades.len() as u64);
        exchange.trades.push(TradeRecord {
            seq,
            code: trade_code,
            fill: filled.seq,
            customer: s.customer,
            broker: s.broker,
            kind: s.kind,
            market: execution.market,
            side: s.side,
            price: execution.price,
            amount: filled.amount,
            fee,
            realised_pnl: moved.change.realised_pnl,
            reference_id: reference,
            liquidity: s.liquidity,
            position_code: moved.code,
            timestamp: books.now,
            movement,
        });
    }
}

/// Books the rows the passes in progress still owe the position `key` before a fill moves
/// it, on the position as it is (as it was when they fell due: nothing moved it since), and
/// marks it settled for them; a position opened now owes them nothing (see
/// `records::periodic`). Midnight's row first, as the passes book.
fn settle_owed<A: AccountStore>(
    passes: &mut PeriodicPasses,
    positions: &mut OpenPositions,
    ledger: &mut Ledger,
    books: &mut Books<'_, A>,
    (key, asset): (PositionKey, Asset),
) {
    let owed = |pass: Option<&mut Pass>| pass.and_then(|pass| pass.settle(key));
    if let Some(info) = owed(passes.daily.as_mut())
        && let Some((p, rate)) = positions.get_mut(key)
        && let Some((side, margin)) = settlement_row(p, rate.initial, &info, asset)
    {
        p.entry_price = info.mark_price;
        p.margin = margin;
        p.updated_at = books.now;
        book_one(ledger, books, side, &info);
    }
    if let Some(info) = owed(passes.funding.as_mut())
        && let Some(p) = positions.get(key)
    {
        let side = funding_row(p, &info, asset);
        book_one(ledger, books, side, &info);
    }
}

/// The fill's public record, on the tape and in the fills, and the market's last price.
fn publish_fill(
    exchange: &mut Exchange,
    rng: &mut SimRng,
    now: Timestamp,
    Execution {
        market,
        price,
        lots,
    }: Execution,
    taker_side: Side,
) -> Filled {
    let m = &exchange.markets[market as usize];
    let (amount, asset, symbol) = (m.amount(lots), m.spec.settlement, m.symbol.clone());
    let seq = FillSeq(exchange.fills.len() as u64);
    let public = PublicFill {
        seq,
        code: FillCode(rng.uuid()),
        market,
        price,
        amount,
        taker_side,
        timestamp: now,
    };
    exchange.tape.record(&public);
    exchange.fills.push(public);
    exchange.markets[market as usize].last_price = Some(price);
    Filled {
        seq,
        amount,
        notional: amount * price,
        asset,
        symbol,
    }
}

/// An order's side of a fill: its filled figures, and the reserve of its opening part that
/// rested, which now gives way to position margin. Returns its reference and that reserve.
fn fill_order(
    exchange: &mut Exchange,
    orders: &mut Orders,
    id: OrderId,
    filled: &Filled,
    lots: Lots,
    now: Timestamp,
) -> (Option<Arc<str>>, Decimal) {
    let order = orders.get_mut(id);
    order.filled_amount += filled.amount;
    order.filled_quote += filled.notional;
    order.created = now;
    let released = order.reserve_lots.min(lots);
    order.reserve_lots -= released;
    let release = Decimal::from(released) * order.reserve_rate;
    let reference = order.reference_id.clone();
    exchange.mark_order(id);
    (Some(reference), release)
}

#[cfg(test)]
mod tests {
    use super::*;
    use perpsim_core::Uuid;

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    fn pos(size: &str, entry: &str) -> Position {
        Position {
            code: PositionCode(Uuid::from_u128(1)),
            customer: CustomerCode(Uuid::from_u128(2)),
            broker: perpsim_core::ids::BrokerCode(Uuid::from_u128(3)),
            market: 0,
            size: d(size),
            entry_price: d(entry),
            avg_fill_price: d(entry),
            margin: Decimal::ZERO,
            created_at: Timestamp::EPOCH,
            updated_at: Timestamp::EPOCH,
            noticed: 0,
        }
    }

    #[test]
    fn opening_sets_entry_to_the_fill_price_under_a_new_code() {
        let c = position_change(None, d("-2"), d("100"));
        assert_eq!(
            (c.size, c.entry_price, c.realised_pnl, c.new_position),
            (d("-2"), d("100"), d("0"), true)
        );
    }

    #[test]
    fn adding_averages_entry_by_quantity_d6() {
        let c = position_change(Some(&pos("1", "100")), d("3"), d("104"));
        assert_eq!(
            (c.size, c.entry_price, c.new_position),
            (d("4"), d("103"), false)
        );
        // 1 @ 100 + 2 @ 101 = 302 / 3, rounded half-even to 10 decimals.
        let c = position_change(Some(&pos("1", "100")), d("2"), d("101"));
        assert_eq!(c.entry_price, d("100.6666666667"));
        // After a daily settlement moved the entry, each average keeps its own history.
        let settled = Position {
            avg_fill_price: d("95"),
            ..pos("1", "100")
        };
        let c = position_change(Some(&settled), d("1"), d("104"));
        assert_eq!((c.entry_price, c.avg_fill_price), (d("102"), d("99.5")));
    }

    #[test]
    fn reducing_realises_pnl_and_keeps_entry_and_code_d6() {
        let c = position_change(Some(&pos("-4", "100")), d("1"), d("90"));
        assert_eq!(
            (c.size, c.entry_price, c.realised_pnl, c.new_position),
            (d("-3"), d("100"), d("10"), false)
        );
        let c = position_change(Some(&pos("2", "100")), d("-2"), d("95"));
        assert_eq!((c.size, c.realised_pnl), (d("0"), d("-10")));
    }

    #[test]
    fn flipping_realises_the_closed_part_and_opens_at_the_fill_price_d6() {
        let c = position_change(Some(&pos("1", "100")), d("-3"), d("110"));
        assert_eq!(
            (c.size, c.entry_price, c.realised_pnl, c.new_position),
            (d("-2"), d("110"), d("10"), true)
        );
    }

    #[test]
    fn fees_are_basis_points_of_notional_rounded_half_even() {
        assert_eq!(fee(d("60000"), d("5")), d("30"));
        assert_eq!(fee(d("0.00015"), d("5")), d("0.0000000750"));
        assert_eq!(fee(d("100"), d("-1")), d("-0.01"));
        assert_eq!(fee(d("0.0000000000125"), d("10000")), d("0.0000000000"));
        // Half-even at the tenth decimal, on both sides of the shift.
        assert_eq!(fee(d("0.00000025"), d("2")), d("0.0000000000"));
        assert_eq!(fee(d("0.00000075"), d("2")), d("0.0000000002"));
        // A notional already at 28 decimals takes the division, same value.
        let deep = Decimal::from_i128_with_scale(12_345, 28);
        assert_eq!(
            fee(deep, d("5")),
            round_ledger(deep * d("5") / Decimal::from(10_000))
        );
    }

    /// D7: a rebate is paid out of the same fill's taker fee, never beyond it, and a taker
    /// fee is never negative, whatever rates a profile holds.
    #[test]
    fn a_makers_rebate_is_at_most_the_taker_fee_of_its_fill_d7() {
        let n = d("60000");
        assert_eq!(fill_fees(n, d("5"), d("2")), [d("30"), d("12")]);
        assert_eq!(fill_fees(n, d("5"), d("-1.5")), [d("30"), d("-9")]);
        // The rebate is cut to the taker fee collected.
        assert_eq!(fill_fees(n, d("5"), d("-10000")), [d("30"), d("-30")]);
        // A negative taker rate (refused at the API; a journal may predate that) books zero.
        assert_eq!(fill_fees(n, d("-10000"), d("-10000")), [d("0"), d("0")]);
        assert_eq!(fill_fees(n, d("0"), d("-2")), [d("0"), d("0")]);
        for (t, m) in [("0.3", "-0.7"), ("7", "-7"), ("10000", "-10000")] {
            let [taker, maker] = fill_fees(d("0.0003"), d(t), d(m));
            assert!(taker + maker >= Decimal::ZERO, "{t} {m}");
        }
    }
}
