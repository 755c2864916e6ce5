//! The recorded book (issue 39 item 1; D11: "the recorded book is the liquidity customers
//! meet"): a scenario's recorded book files, or `serve --market-data`, set per instrument the
//! levels a recording shows (`SetRecordedBook`), and from then on the market maker quotes
//! exactly those — each level one order of the recorded amount at the recorded price —
//! instead of its ladder. Customers meet the recorded liquidity through the same desk, fills
//! and ledger as the ladder's, so every invariant counts it.
//!
//! - A book is at most [`MAX_LEVELS`](crate::command::MAX_BOOK_LEVELS) levels a side (the depth channel's 50), best first,
//!   prices on the instrument's tick and strictly ordered, amounts on its lot and above
//!   zero, the two sides uncrossed; anything else is refused (validation) and the book before
//!   stands. Both sides empty quote nothing.
//! - The maker's other rules hold: it stops quoting the side that would grow its inventory
//!   past its maximum, and its orders need its margin like anyone's (a level the desk refuses
//!   stays unquoted until the next re-quote).
//! - A re-quote keeps an order on a level that survives (its amount amended to the level's
//!   where it differs), moves the others onto the missing levels, cancels what is left and
//!   places what is still missing. The side the book moved towards goes first, so the maker
//!   never meets its own stale quote.
//! - Customers' fills do not deplete the recording: the re-quote that ends the run quotes
//!   the recorded levels whole again (no market impact — the recording is what the market
//!   did —, as hftbacktest's books are).
//! - It runs when a market's book was set or one of the maker's orders there changed (a fill,
//!   say), and once after a restore (what it saw is a `Local`, not state).

use bevy_ecs::prelude::{Local, Resource, World};
use perpsim_core::Decimal;
use perpsim_core::Error;
use perpsim_core::entry::{Amend, OrderEntry};
use perpsim_core::instrument::{InstrumentSpec, InstrumentStatus};
use perpsim_core::order::{OrderType, Side};
use serde::{Deserialize, Serialize};

use crate::command::{Answer, BookLevel, MAX_BOOK_LEVELS as MAX_LEVELS, SetRecordedBook};
use crate::records::ids::OrderId;
use crate::records::simulation::MARKET_MAKER;
use crate::records::venue::{InstrumentView, MarketId, MarketSlot};
use crate::trading::desk::Desk;

/// Per market (by id), the recorded book last set, if any: state (snapshots hold it).
#[derive(Resource, Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedBooks {
    books: Vec<Option<RecordedBook>>,
    /// Books set so far: each book's `set` is its number, which tells the maker it changed.
    sets: u64,
}

/// A market's recorded book: bids then asks, best first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedBook {
    pub sides: [Vec<BookLevel>; 2],
    set: u64,
}

impl RecordedBooks {
    /// The recorded book of `market`, if one was set.
    pub fn book(&self, market: MarketId) -> Option<&RecordedBook> {
        self.books.get(market as usize).and_then(Option::as_ref)
    }
}

/// `SetRecordedBook`: validates the book against the instrument and keeps it for the maker.
pub fn set_book(world: &mut World, c: SetRecordedBook) -> Answer<InstrumentView> {
    let entity = crate::registry::instrument_entity(world, &c.symbol)?;
    let market = world
        .get::<MarketSlot>(entity)
        .expect("indexed instrument")
        .0;
    let spec = &world
        .get::<crate::records::venue::Instrument>(entity)
        .expect("indexed instrument")
        .0;
    check_side(spec, "bids", &c.bids, Side::Buy)?;
    check_side(spec, "asks", &c.asks, Side::Sell)?;
    if let (Some(bid), Some(ask)) = (c.bids.first(), c.asks.first())
        && bid.price >= ask.price
    {
        let message = format!(
            "a recorded book must not be crossed: best bid {} at or above best ask {}",
            bid.price, ask.price
        );
        return Err(Error::validation(message));
    }
    let mut books = world.resource_mut::<RecordedBooks>();
    books.sets += 1;
    let set = books.sets;
    let m = market as usize;
    if books.books.len() <= m {
        books.books.resize(m + 1, None);
    }
    books.books[m] = Some(RecordedBook {
        sides: [c.bids, c.asks],
        set,
    });
    Ok(crate::registry::instrument_view(world, entity))
}

/// One side's levels: at most [`MAX_LEVELS`], each on the tick and lot and above zero, in
/// strictly worsening price order (bids descending, asks ascending).
fn check_side(
    spec: &InstrumentSpec,
    name: &str,
    levels: &[BookLevel],
    side: Side,
) -> Result<(), Error> {
    if levels.len() > MAX_LEVELS {
        let message = format!(
            "{name}: a recorded book holds at most {MAX_LEVELS} levels a side, got {}",
            levels.len()
        );
        return Err(Error::validation(message));
    }
    for (k, l) in levels.iter().enumerate() {
        let at = format!("{name}[{k}]");
        if l.price <= Decimal::ZERO || !spec.on_tick(l.price) {
            let message = format!(
                "{at}: price {} is not a positive multiple of the tick size {}",
                l.price, spec.tick_size
            );
            return Err(Error::validation(message));
        }
        if l.amount <= Decimal::ZERO || !spec.on_lot(l.amount) {
            let message = format!(
                "{at}: amount {} is not a positive multiple of the lot size {}",
                l.amount, spec.lot_size
            );
            return Err(Error::validation(message));
        }
        if k > 0 && !worse(side, l.price, levels[k - 1].price) {
            let order = match side {
                Side::Buy => "descending",
                Side::Sell => "ascending",
            };
            let message = format!("{at}: prices must be strictly {order}, best first");
            return Err(Error::validation(message));
        }
    }
    Ok(())
}

/// Whether `price` is strictly worse than `than` for a resting order of `side`.
fn worse(side: Side, price: Decimal, than: Decimal) -> bool {
    match side {
        Side::Buy => price < than,
        Side::Sell => price > than,
    }
}

/// What the maker last quoted of a market's recorded book: the book's number and its
/// order changes per side then. Derived (a restored engine re-quotes once).
pub type Seen = Option<(u64, [u64; 2])>;

/// The sides in the order of a book's: bids, then asks.
const SIDES: [Side; 2] = [Side::Buy, Side::Sell];

/// One market's re-quote onto its recorded book, if the book or the maker's orders changed
/// since the last: `ids`, the maker's quotes per side, are left holding what it now quotes.
pub fn quote(
    desk: &mut Desk,
    (market, book, max_inventory): (MarketId, &RecordedBook, Decimal),
    (ids, next_reference): (&mut [Vec<OrderId>; 2], &mut u64),
    seen: &mut Local<Vec<Seen>>,
) {
    let m = market as usize;
    if seen.len() <= m {
        seen.resize(m + 1, None);
    }
    let changes = SIDES.map(|side| desk.maker_changes(market, side));
    if seen[m] == Some((book.set, changes)) {
        return;
    }
    if desk.market(market).1.status == InstrumentStatus::TradeHalt {
        return; // nothing may be placed or amended: the quotes stand as they are
    }
    let symbol = desk.market(market).0.symbol.clone();
    for i in first_sides(desk, book, ids) {
        let inventory = desk.position_size(MARKET_MAKER, market);
        let grows = match SIDES[i] {
            Side::Buy => inventory >= max_inventory,
            Side::Sell => -inventory >= max_inventory,
        };
        let wanted: &[BookLevel] = if grows { &[] } else { &book.sides[i] };
        requote(
            desk,
            (&symbol, SIDES[i], wanted),
            (&mut ids[i], next_reference),
        );
    }
    seen[m] = Some((book.set, SIDES.map(|side| desk.maker_changes(market, side))));
}

/// The order the sides re-quote in: the asks first when the new best bid reaches the
/// maker's lowest ask now (the book rose), the bids first otherwise.
fn first_sides(desk: &Desk, book: &RecordedBook, ids: &[Vec<OrderId>; 2]) -> [usize; 2] {
    let lowest_ask = ids[1]
        .iter()
        .filter_map(|&id| desk.live_order(id).and_then(|o| o.limit_price))
        .min();
    let rising = match (book.sides[0].first(), lowest_ask) {
        (Some(bid), Some(ask)) => bid.price >= ask,
        _ => false,
    };
    if rising { [1, 0] } else { [0, 1] }
}

/// One side onto `wanted`: orders on a wanted level kept (their amount amended to the
/// level's), the others moved onto the missing levels or cancelled, the rest placed.
fn requote(
    desk: &mut Desk,
    (symbol, side, wanted): (&str, Side, &[BookLevel]),
    (ids, next_reference): (&mut Vec<OrderId>, &mut u64),
) {
    let mut held = vec![false; wanted.len()];
    let mut kept = Vec::with_capacity(wanted.len());
    let mut free = Vec::new();
    for &id in ids.iter() {
        let Some(o) = desk.live_order(id) else {
            continue;
        };
        let (price, filled, remaining) = (o.limit_price, o.filled_amount, o.remaining());
        let level = wanted
            .iter()
            .position(|l| Some(l.price) == price)
            .filter(|&k| !held[k]);
        let Some(k) = level else {
            free.push(id);
            continue;
        };
        held[k] = true;
        let amount = wanted[k].amount;
        if remaining != amount && !amend(desk, id, filled + amount, None) {
            cancel(desk, id);
            held[k] = false;
            continue;
        }
        kept.push(id);
    }
    let mut missing = (0..wanted.len()).filter(|&k| !held[k]);
    for id in free {
        let Some(o) = desk.live_order(id) else {
            continue;
        };
        let filled = o.filled_amount;
        match missing.next().map(|k| wanted[k]) {
            Some(l) if amend(desk, id, filled + l.amount, Some(l.price)) => kept.push(id),
            _ => cancel(desk, id),
        }
    }
    for k in missing {
        *next_reference += 1;
        let reference = format!("mm-{next_reference}");
        if let Some(id) = place(desk, (symbol, side, reference), wanted[k]) {
            kept.push(id);
        }
    }
    kept.retain(|&id| desk.live_order(id).is_some());
    *ids = kept;
}

/// Amends a quote's whole amount (and price); whether the desk took it.
fn amend(desk: &mut Desk, id: OrderId, amount: Decimal, price: Option<Decimal>) -> bool {
    let amend = Amend {
        amount: Some(amount),
        limit_price: price,
        trigger_price: None,
        expire_time: None,
    };
    desk.amend_open(id, &amend).is_ok()
}

/// Places a quote on a level under `reference` (the maker's numbering); its id, if the desk
/// took it.
fn place(
    desk: &mut Desk,
    (symbol, side, reference): (&str, Side, String),
    level: BookLevel,
) -> Option<OrderId> {
    let entry = OrderEntry {
        amount: Some(level.amount),
        limit_price: Some(level.price),
        ..OrderEntry::new(side, OrderType::Limit, reference)
    };
    desk.place(MARKET_MAKER, symbol, &entry).ok()
}

/// Cancels an open quote.
fn cancel(desk: &mut Desk, id: OrderId) {
    let reference = desk.order(id).reference_id.to_string();
    let _ = desk.cancel(MARKET_MAKER, &reference);
}
