//! The recorded book (issue 39 item 1; D11: "the recorded book is the liquidity customers
//! meet"): a scenario's recorded book files, or `serve --market-data`, set per instrument the
//! levels a recording shows (`SetRecordedBook`), and from then on the market maker quotes
//! exactly those — the recorded amount at the recorded price — instead of its ladder. Customers meet the recorded liquidity through the same desk, fills
//! and ledger as the ladder's, so every invariant counts it.
//!
//! - A book is at most `MAX_BOOK_LEVELS` levels a side (the depth channel's 50), best
//!   first, prices on the instrument's tick and strictly ordered, amounts on its lot and
//!   above zero, the two sides uncrossed; anything else is refused (validation) and the book
//!   before stands. Both sides empty quote nothing.
//! - The maker's other rules hold: it stops quoting the side that would grow its inventory
//!   past its maximum, and its orders need its margin like anyone's (a level the desk refuses
//!   stays unquoted until the next re-quote).
//! - A re-quote keeps the queue as the recording moves it (hftbacktest's risk-averse queue
//!   model, with `trading::desk::recorded`'s recorded trades): volume a level gains is a new
//!   quote at its back, behind the customers' orders already there (at most
//!   [`MAX_QUOTES_PER_LEVEL`] a level, then the back-most quote grows); volume it loses is
//!   cut from the back-most quotes first; quotes on levels gone move onto new levels or are
//!   cancelled, and new levels are placed. The side the book moved towards goes first, so
//!   the maker never meets its own stale quote.
//! - Customers' fills do not deplete the recording: the re-quote that ends the run quotes
//!   the recorded levels whole again (no market impact — the recording is what the market
//!   did —, as hftbacktest's books are).
//! - It runs when a market's book was set or one of the maker's orders there changed (a fill,
//!   say), before the run's orders and again after them, and once after a restore (what it
//!   saw is derived, not state).

use bevy_ecs::prelude::{Entity, Res, ResMut, Resource, World};
use perpsim_core::Decimal;
use perpsim_core::Error;
use perpsim_core::entry::{Amend, OrderEntry};
use perpsim_core::instrument::{InstrumentSpec, InstrumentStatus};
use perpsim_core::order::{OrderType, Side};
use serde::{Deserialize, Serialize};

use crate::command::{
    Answer, BookLevel, MAX_BOOK_LEVELS as MAX_LEVELS, PrintRecordedTrade, SetRecordedBook,
};
use crate::records::ids::OrderId;
use crate::records::simulation::{MARKET_MAKER, SimulationSettings};
use crate::records::venue::{InstrumentView, MarketId, MarketSlot};
use crate::simulation::maker::{MakerState, SIDES, cancel};
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

/// The instrument `symbol` names: its entity, its market and its spec; refused where the
/// venue runs without the market maker.
fn instrument<'w>(
    world: &'w World,
    symbol: &str,
) -> Result<(Entity, MarketId, &'w InstrumentSpec), Error> {
    if !world.resource::<SimulationSettings>().0.market_maker {
        let message = "a recorded book and its trades need the market maker, which quotes \
                       the book and takes the trades' other side; this venue runs without it";
        return Err(Error::validation(message));
    }
    let entity = crate::registry::instrument_entity(world, symbol)?;
    let market = world
        .get::<MarketSlot>(entity)
        .expect("indexed instrument")
        .0;
    let spec = &world
        .get::<crate::records::venue::Instrument>(entity)
        .expect("indexed instrument")
        .0;
    Ok((entity, market, spec))
}

/// `SetRecordedBook`: validates the book against the instrument and keeps it for the maker.
pub fn set_book(world: &mut World, c: SetRecordedBook) -> Answer<InstrumentView> {
    let (entity, market, spec) = instrument(world, &c.symbol)?;
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

/// The recorded trades of the run, in the order taken, until [`print_trades`] prints them
/// in the same run (never state: empty between runs).
#[derive(Resource, Debug, Default)]
pub struct RecordedTrades(Vec<(MarketId, PrintRecordedTrade)>);

/// `PrintRecordedTrade`: checked against the instrument (a positive price on its tick, a
/// positive amount on its lot) and taken for [`print_trades`].
pub fn take_trade(world: &mut World, c: PrintRecordedTrade) -> Answer<InstrumentView> {
    let (entity, market, spec) = instrument(world, &c.symbol)?;
    let level = BookLevel {
        price: c.price,
        amount: c.amount,
    };
    check_level(spec, &level).map_err(|m| Error::validation(format!("trade: {m}")))?;
    world
        .get_resource_or_insert_with(RecordedTrades::default)
        .0
        .push((market, c));
    Ok(crate::registry::instrument_view(world, entity))
}

/// MatchSystems, in `RecordedMarket` (before the run's orders): the run's recorded trades
/// against the book, in order (`trading::desk::recorded`).
pub fn print_trades(mut desk: Desk, mut trades: ResMut<RecordedTrades>) {
    for (market, t) in trades.0.drain(..) {
        desk.print_recorded_trade(market, (t.side, t.price, t.amount));
    }
    desk.flush();
}

/// Whether any market has a recorded book.
pub fn books_set(books: Res<RecordedBooks>) -> bool {
    books.sets > 0
}

/// Whether the run took a recorded trade.
pub fn trades_taken(trades: Option<Res<RecordedTrades>>) -> bool {
    trades.is_some_and(|t| !t.0.is_empty())
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
        check_level(spec, l).map_err(|m| Error::validation(format!("{name}[{k}]: {m}")))?;
        if k > 0 && !worse(side, l.price, levels[k - 1].price) {
            let order = match side {
                Side::Buy => "descending",
                Side::Sell => "ascending",
            };
            let message = format!("{name}[{k}]: prices must be strictly {order}, best first");
            return Err(Error::validation(message));
        }
    }
    Ok(())
}

/// A level (or a trade): a positive price on the tick and a positive amount on the lot; what
/// is wrong, for the caller to say where (built only then: a book's levels are checked on
/// every step of a recording).
fn check_level(spec: &InstrumentSpec, l: &BookLevel) -> Result<(), String> {
    if l.price <= Decimal::ZERO || !spec.on_tick(l.price) {
        return Err(format!(
            "price {} is not a positive multiple of the tick size {}",
            l.price, spec.tick_size
        ));
    }
    if l.amount <= Decimal::ZERO || !spec.on_lot(l.amount) {
        return Err(format!(
            "amount {} is not a positive multiple of the lot size {}",
            l.amount, spec.lot_size
        ));
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
/// order changes per side then.
pub type Seen = Option<(u64, [u64; 2])>;

/// Per market, what the maker last quoted of its recorded book ([`Seen`]): shared by the
/// re-quote before the run's orders ([`quote_books`]) and the one after them (the maker's).
/// Derived, never state: a restored engine re-quotes once.
#[derive(Resource, Debug, Default)]
pub struct QuotedBooks(pub Vec<Seen>);

/// MatchSystems, in `RecordedMarket` after the run's recorded trades: every market whose
/// recorded book was set, or whose quotes those trades cut, re-quoted before the run's
/// orders, so an order at the instant of a book meets that book (and queues behind it).
pub fn quote_books(
    mut desk: Desk,
    mut state: ResMut<MakerState>,
    settings: Res<SimulationSettings>,
    (books, mut seen): (Res<RecordedBooks>, ResMut<QuotedBooks>),
) {
    if !settings.0.market_maker {
        return;
    }
    for market in 0..desk.market_count() {
        let Some(book) = books.book(market) else {
            continue;
        };
        let m = market as usize;
        let sim = &settings.0.instruments[m];
        let (quotes, next_reference) = state.quotes_mut(m);
        let quoting = (market, book, sim.max_inventory);
        quote(&mut desk, quoting, (quotes, next_reference), &mut seen.0);
    }
    desk.flush();
}

/// One market's re-quote onto its recorded book, if the book or the maker's orders changed
/// since the last: `ids`, the maker's quotes per side, are left holding what it now quotes.
pub fn quote(
    desk: &mut Desk,
    (market, book, max_inventory): (MarketId, &RecordedBook, Decimal),
    (ids, next_reference): (&mut [Vec<OrderId>; 2], &mut u64),
    seen: &mut Vec<Seen>,
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
    let mut complete = true;
    for i in first_sides(desk, book, ids) {
        let inventory = desk.position_size(MARKET_MAKER, market);
        let grows = match SIDES[i] {
            Side::Buy => inventory >= max_inventory,
            Side::Sell => -inventory >= max_inventory,
        };
        let wanted: &[BookLevel] = if grows { &[] } else { &book.sides[i] };
        let side = (symbol.as_str(), SIDES[i], wanted);
        complete &= requote(desk, side, (&mut ids[i], next_reference));
    }
    // A re-quote the desk refused a part of (the maker's margin, say) is tried again each
    // run, as the ladder's is, so a restored engine retries exactly when this one does.
    seen[m] = complete.then(|| (book.set, SIDES.map(|side| desk.maker_changes(market, side))));
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

/// Maker quotes one recorded level holds at most: volume the recording adds to a level is
/// a new quote at its back (behind the customers' orders that came before it) until then,
/// and then tops up the level's back-most quote, which loses its priority.
pub const MAX_QUOTES_PER_LEVEL: usize = 16;

/// A live quote as a re-quote reads it: its id, its time priority, its filled and its
/// remaining amount.
type Quote = (OrderId, Option<std::num::NonZeroU64>, Decimal, Decimal);

/// One side onto `wanted`: each wanted level's quotes brought to its amount (see
/// [`level_to`]), the quotes on no wanted level moved onto the levels none holds or
/// cancelled, and what is still missing placed. `ids` is left holding the live quotes;
/// returns whether they quote `wanted` exactly.
fn requote(
    desk: &mut Desk,
    (symbol, side, wanted): (&str, Side, &[BookLevel]),
    (ids, next_reference): (&mut Vec<OrderId>, &mut u64),
) -> bool {
    let mut levels: Vec<Vec<Quote>> = vec![Vec::new(); wanted.len()];
    let mut free = Vec::new();
    for &id in ids.iter() {
        let Some(o) = desk.live_order(id) else {
            continue;
        };
        let quote = (id, o.priority, o.filled_amount, o.remaining());
        match wanted.iter().position(|l| Some(l.price) == o.limit_price) {
            Some(k) => levels[k].push(quote),
            None => free.push(id),
        }
    }
    let mut missing = Vec::new();
    for (k, quotes) in levels.iter_mut().enumerate() {
        match quotes.is_empty() {
            true => missing.push(k),
            false => level_to(desk, (symbol, side, wanted[k]), quotes, next_reference),
        }
    }
    let mut missing = missing.into_iter();
    for &id in &free {
        let Some(o) = desk.live_order(id) else {
            continue;
        };
        let filled = o.filled_amount;
        match missing.next().map(|k| wanted[k]) {
            Some(l) if amend(desk, id, filled + l.amount, Some(l.price)) => {}
            _ => cancel(desk, id),
        }
    }
    let mut quotes: Vec<OrderId> = levels.iter().flatten().map(|q| q.0).collect();
    quotes.extend(free);
    for k in missing {
        quotes.extend(place(desk, (symbol, side, next_reference), wanted[k]));
    }
    quotes.retain(|&id| desk.live_order(id).is_some());
    *ids = quotes;
    quotes_exactly(desk, ids, wanted)
}

/// Whether the live quotes `ids` hold exactly the `wanted` levels' amounts, and nothing
/// elsewhere.
fn quotes_exactly(desk: &Desk, ids: &[OrderId], wanted: &[BookLevel]) -> bool {
    let mut held = vec![Decimal::ZERO; wanted.len()];
    for o in ids.iter().filter_map(|&id| desk.live_order(id)) {
        match wanted.iter().position(|l| Some(l.price) == o.limit_price) {
            Some(k) => held[k] += o.remaining(),
            None => return false,
        }
    }
    wanted.iter().zip(held).all(|(l, h)| l.amount == h)
}

/// One level's quotes (`quotes`, not empty) brought to the recorded amount, keeping the
/// queue as the recording grew or shrank it (hftbacktest's risk-averse model): volume added
/// is a new quote at the back; volume gone is cut from the back-most quotes first, so the
/// volume ahead of a customer's order falls only once the level is smaller than it.
/// A quote placed joins `quotes`.
fn level_to(
    desk: &mut Desk,
    (symbol, side, level): (&str, Side, BookLevel),
    quotes: &mut Vec<Quote>,
    next_reference: &mut u64,
) {
    quotes.sort_by_key(|q| q.1);
    let total: Decimal = quotes.iter().map(|q| q.3).sum();
    if total < level.amount {
        let more = level.amount - total;
        if quotes.len() < MAX_QUOTES_PER_LEVEL {
            let added = BookLevel {
                price: level.price,
                amount: more,
            };
            quotes.extend(
                place(desk, (symbol, side, next_reference), added)
                    .map(|id| (id, None, Decimal::ZERO, more)),
            );
        } else {
            let &(id, _, filled, remaining) = quotes.last().expect("a level's quotes");
            if !amend(desk, id, filled + remaining + more, None) {
                cancel(desk, id);
            }
        }
        return;
    }
    let mut excess = total - level.amount;
    for &(id, _, filled, remaining) in quotes.iter().rev() {
        if excess.is_zero() {
            break;
        }
        let cut = excess.min(remaining);
        excess -= cut;
        if cut == remaining || !amend(desk, id, filled + remaining - cut, None) {
            cancel(desk, id);
        }
    }
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

/// Places a quote on a level under the maker's next reference; its id, if the desk took it.
fn place(
    desk: &mut Desk,
    (symbol, side, next_reference): (&str, Side, &mut u64),
    level: BookLevel,
) -> Option<OrderId> {
    *next_reference += 1;
    let entry = OrderEntry {
        amount: Some(level.amount),
        limit_price: Some(level.price),
        ..OrderEntry::new(side, OrderType::Limit, format!("mm-{next_reference}"))
    };
    desk.place(MARKET_MAKER, symbol, &entry).ok()
}
