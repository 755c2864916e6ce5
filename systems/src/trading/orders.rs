//! Live orders as entities (interface §3.1; D5). An order resting in a book or waiting on a
//! trigger is an entity with a [`LiveOrder`] (and [`Waiting`] while a conditional order has
//! not fired); when it reaches a terminal status it leaves the live set for
//! [`EndedOrders`], which holds its record only through the tick it ended in (the journal's
//! projection keeps it). [`OrderIndex`] says where each id is while it is held.
//!
//! The entity of an order that ends is kept for the next order, not despawned: its
//! `LiveOrder` emptied, it waits in [`OrderIndex`]'s pool (at most [`POOL`] entities) and the
//! next order the desk accepts fills it in place. Despawning and spawning an entity moves
//! rows in bevy's tables and queues a command each; they were a fifth of a cancel's cost
//! (`--bench book`). A conditional order that ends still waiting is despawned (its entity
//! carries `Waiting` too), and a waiting order never takes a pooled entity. Where orders rest
//! faster than others end, a run that leaves the pool under half of [`SPARE`] tops it up with
//! empty entities in one batch, so a new order seldom queues a spawn of its own.
//!
//! The record is shared, copy-on-write, with the read view: a `LiveOrder` holds an
//! `Arc<Order>`, publishing hands the view the same `Arc`, and the engine's next change to
//! that order copies it first (`Arc::make_mut`). A resting order that never changes again is
//! held once, not once by the engine and once by the view.
//!
//! Systems reach orders by id through [`Orders`]; an order accepted during a run is staged
//! there until [`Orders::flush`], so the run's later requests see it at once (the same
//! pattern as `positions::OpenPositions` and `money::store::Accounts`). Readers that run
//! after the flush (publishing, the invariants) use [`OrderRecords`].
//!
//! A book's slots hold the resting order's stable id, not its `Entity`: ids are dense sequence
//! numbers and most orders end soon after they arrive, so `OrderIndex` keeps the recent ids in
//! a window (a `VecDeque`: id → entity is one load) and moves the live orders at its front to a
//! hash map once the window outgrows four times what it holds and 65 536 ids; the slots stay
//! valid across a restore (which re-spawns every entity).
//!
//! `Orders` (a system parameter over `OrderIndex`, `RefIndex`, `EndedOrders` and the
//! `LiveOrder` query) is how the desk and fills reach an order by id: `OrderSlot::Staged` for
//! one accepted during the run (spawned at the system's `flush`, so an IOC that ends in the run
//! that placed it never becomes an entity), `Live(Entity)`, or `Ended(position in this tick's
//! records)`; `Orders::live` says whether an order is still open without its record (the market
//! maker's quote lists hold ids of quotes that ended ticks ago). `RefIndex` holds open orders
//! only: an order leaves it when it ends (its slot marked removed, so probes go on past it).
//! The record is an `Arc<Order>`: publishing hands the view the same `Arc`, and the engine's
//! next change copies it first (`Arc::make_mut`), so an order that rests unchanged is held
//! once, not twice. The view holds live orders only: an order leaves it when it ends, and a
//! read of an ended one goes to the journal's projection (`storage/projection`), which the host
//! writes from `TickOutput::ended`.

use std::collections::VecDeque;
use std::sync::Arc;

use bevy_ecs::prelude::{Commands, Component, Entity, Local, Query, Res, ResMut, Resource, World};
use bevy_ecs::system::SystemParam;
use perpsim_core::ids::CustomerCode;
use perpsim_core::order::Side;

use crate::records::ids::OrderId;
use crate::records::lookup;
use crate::records::order::Order;
use crate::records::simulation::MARKET_MAKER;
use crate::records::venue::MarketId;
use crate::trading::ended::{EndedOrders, EndedState};
use crate::trading::refs::{OrderLookup, RefIndex};

/// Where an order is, by its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderSlot {
    /// Accepted during the current run: staged in the order store (at this position) until
    /// its `flush` spawns the entity.
    Staged(u32),
    /// Live (resting in a book or waiting on a trigger): an entity with a `LiveOrder`.
    Live(Entity),
    /// Ended: its position in [`EndedOrders::recent`] while its tick lasts (after that its
    /// record is the journal's projection's).
    Ended(u64),
}

/// The orders whose records the engine holds, by id: live ones to their entity, staged
/// ones to their place in the run, those that ended in this tick to their place in
/// [`EndedOrders::recent`]. An id it no longer holds ended in an earlier tick.
///
/// Ids are dense and most orders end soon after they arrive, so the recent ids sit in a
/// window, a `VecDeque` from `base` on where a lookup is one load, as the whole `Vec` of
/// every id ever accepted was until issue 37 (16 bytes an order, for ever). The window drops
/// the forgotten ids at its front; once it is longer than [`WINDOW`] and four times the
/// orders it holds, the live orders at its front move to `old`, a hash map, so a quote left
/// resting for days does not keep every later id's slot. Memory follows the live set.
#[derive(Resource, Debug, Default)]
pub struct OrderIndex {
    /// The id of `window[0]`.
    base: u64,
    /// Ids `base..` in order: `None` once forgotten.
    window: VecDeque<Option<OrderSlot>>,
    /// The window's `Some` slots.
    in_window: usize,
    /// Live orders older than `base`.
    old: lookup::Lookup<OrderId, OrderSlot>,
    /// Entities of ended orders kept for the next ones: each an empty `LiveOrder`, no
    /// `Waiting`; at most [`POOL`].
    pool: Vec<Entity>,
}

/// The most ended orders' entities kept for reuse: the churn of a busy venue's ticks, and
/// about 3 MiB at most (an entity's metadata, its table row and the pool's slot: ~48 bytes).
pub const POOL: usize = 65_536;

/// Empty entities the pool is topped up to, in one batch, once a run that took from it
/// leaves fewer than half: most new orders then fill a spare in place, where each had queued
/// a spawn of its own (what it saves: `benches/README.md`, the engine against orderbook-rs).
pub const SPARE: usize = 1_024;

/// The window's length below which it never moves live orders out.
const WINDOW: usize = 65_536;

impl OrderIndex {
    /// Orders accepted so far: the next order's id (an id is the count before it).
    pub fn accepted(&self) -> u64 {
        self.base + self.window.len() as u64
    }

    /// Orders whose records are held: the live ones and those that ended in this tick.
    pub fn len(&self) -> usize {
        self.in_window + self.old.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Slots the index takes memory for: the window's length and the old live orders.
    pub fn footprint(&self) -> usize {
        self.window.len() + self.old.len()
    }

    /// Entities kept for the next orders (see [`POOL`]).
    pub fn pooled(&self) -> usize {
        self.pool.len()
    }

    fn get(&self, id: OrderId) -> Option<OrderSlot> {
        match id.0.checked_sub(self.base) {
            Some(i) => self.window.get(i as usize).copied().flatten(),
            None => self.old.get(&id).copied(),
        }
    }

    /// Where a held order is; an order that ended in an earlier tick is not held.
    fn slot(&self, id: OrderId) -> OrderSlot {
        self.get(id).unwrap_or_else(|| {
            panic!("order {id} ended in an earlier tick: its record is the projection's")
        })
    }

    /// Accepts the next id, at `slot` (staged: its place in the run).
    fn push(&mut self, slot: OrderSlot) {
        self.window.push_back(Some(slot));
        self.in_window += 1;
    }

    /// Moves a held order to another slot.
    fn set(&mut self, id: OrderId, slot: OrderSlot) {
        let held = match id.0.checked_sub(self.base) {
            Some(i) => self.window.get_mut(i as usize).and_then(Option::as_mut),
            None => self.old.get_mut(&id),
        };
        *held.unwrap_or_else(|| panic!("order {id} is held")) = slot;
    }

    /// The live orders' ids and entities, ascending (between runs: none is staged).
    pub fn live(&self) -> Vec<(OrderId, Entity)> {
        let live = |(id, slot)| match slot {
            OrderSlot::Live(e) => Some((id, e)),
            _ => None,
        };
        let old = self.old.sorted().into_iter();
        let window = (self.window.iter().enumerate())
            .filter_map(|(i, slot)| Some((OrderId(self.base + i as u64), (*slot)?)));
        old.chain(window).filter_map(live).collect()
    }

    /// Forgets the orders that ended in the last tick (their records went out with it), then
    /// trims the window.
    fn forget(&mut self, ended: &[Arc<Order>]) {
        for o in ended {
            let slot = match o.id.0.checked_sub(self.base) {
                Some(i) => {
                    self.in_window -= 1;
                    self.window[i as usize].take()
                }
                None => self.old.remove(&o.id),
            };
            assert!(
                matches!(slot, Some(OrderSlot::Ended(_))),
                "order {} ended",
                o.id
            );
        }
        let crowded = |w: &Self| w.window.len() > WINDOW && w.window.len() > 4 * w.in_window;
        while let Some(&front) = self.window.front() {
            if front.is_some() && !crowded(self) {
                break;
            }
            self.window.pop_front();
            if let Some(slot) = front {
                self.in_window -= 1;
                self.old.insert(OrderId(self.base), slot);
            }
            self.base += 1;
        }
    }
}

/// A tick starts: the orders that ended in the last one leave the index and
/// [`EndedOrders::recent`], their records handed out with that tick.
pub fn start_tick(world: &mut World) {
    // The records are moved out and back, not the resource: `resource_scope` takes a resource
    // out of the world and puts it back, 6 % of an idle tick (`--bench risk -- idle`).
    let recent = std::mem::take(&mut world.resource_mut::<EndedOrders>().recent);
    world.resource_mut::<OrderIndex>().forget(&recent);
    let mut ended = world.resource_mut::<EndedOrders>();
    ended.recent = recent;
    ended.start_tick();
}

/// A live order: resting in its market's book, or waiting on its trigger; empty while its
/// entity waits in [`OrderIndex`]'s pool for the next order.
#[derive(Component, Debug, Clone)]
pub struct LiveOrder(Option<Arc<Order>>);

impl LiveOrder {
    /// The order's record; none for a pooled entity.
    pub fn record(&self) -> Option<&Arc<Order>> {
        self.0.as_ref()
    }

    /// The record of an entity the index names.
    fn held(&self) -> &Arc<Order> {
        self.0.as_ref().expect("indexed orders are live")
    }
}

/// Marks a conditional order armed under its trigger price(s) and not yet fired; the
/// market's trigger index holds exactly these (checked while the engine audits).
#[derive(Component, Debug, Clone, Copy, Default)]
pub struct Waiting;

/// Open orders per customer (live and staged): what the D4 bound on open orders counts.
/// Derived from the live set, so snapshots leave it out and a restore rebuilds it. Every
/// order entry reads and counts it by the code a command names: a hashed lookup, read whole
/// only as its sum.
#[derive(Resource, Debug, Default)]
pub struct OpenCounts(lookup::Lookup<CustomerCode, u32>);

impl OpenCounts {
    fn of<'a>(live: impl Iterator<Item = &'a Order>) -> Self {
        let mut counts = OpenCounts::default();
        live.for_each(|o| counts.add(o.customer));
        counts
    }

    fn add(&mut self, customer: CustomerCode) {
        match self.0.get_mut(&customer) {
            Some(n) => *n += 1,
            None => {
                self.0.insert(customer, 1);
            }
        }
    }

    fn remove(&mut self, customer: CustomerCode) {
        let n = self
            .0
            .get_mut(&customer)
            .expect("an ending order was counted");
        *n -= 1;
        if *n == 0 {
            self.0.remove(&customer);
        }
    }

    pub fn of_customer(&self, customer: CustomerCode) -> u32 {
        self.0.get(&customer).copied().unwrap_or(0)
    }
}

/// Changes to the market maker's orders per market and side (a fill, an end, a move, a new
/// quote): their count, and which orders changed since the maker last forgot them, at most
/// [`MAKER_CHANGED`] ids a side (past that, only that more did). The maker re-reads a side's
/// quotes only where this moved since its last re-quote of that side, and then only those
/// that changed: a customer's fill against one quote had it read the whole side. Derived: a
/// restored engine starts from nothing, as the maker's memory of its quotes does.
#[derive(Resource, Debug, Default)]
pub struct MakerOrderChanges(Vec<[SideChanges; 2]>);

/// Ids a side's list of changed maker orders holds before it says only that more changed:
/// a re-quote moves a dozen, and a fill changes its order a few times in a row (one id).
pub const MAKER_CHANGED: usize = 64;

/// One side's changes: the count so far and the ids changed since the maker forgot them,
/// `None` once more than [`MAKER_CHANGED`] did.
#[derive(Debug, Clone)]
struct SideChanges {
    count: u64,
    changed: Option<Vec<OrderId>>,
}

impl Default for SideChanges {
    fn default() -> Self {
        SideChanges {
            count: 0,
            changed: Some(Vec::new()),
        }
    }
}

impl MakerOrderChanges {
    /// The count of a market's side so far.
    pub fn of(&self, market: MarketId, side: Side) -> u64 {
        self.0
            .get(market as usize)
            .map_or(0, |c| c[side_slot(side)].count)
    }

    /// The maker's orders in a market's side that changed since it last forgot them, each
    /// once or more; `None` where more than [`MAKER_CHANGED`] did.
    pub fn changed(&self, market: MarketId, side: Side) -> Option<&[OrderId]> {
        match self.0.get(market as usize) {
            Some(c) => c[side_slot(side)].changed.as_deref(),
            None => Some(&[]),
        }
    }

    /// Forgets a side's changed orders: the maker knows what they are now.
    pub fn forget(&mut self, market: MarketId, side: Side) {
        if let Some(c) = self.0.get_mut(market as usize) {
            let changes = &mut c[side_slot(side)].changed;
            match changes {
                Some(ids) => ids.clear(),
                None => *changes = Some(Vec::new()),
            }
        }
    }

    fn count(&mut self, o: &Order) {
        if o.customer == MARKET_MAKER {
            self.note(o.market, o.side, o.id);
        }
    }

    /// A change to the maker's order `id` in a market's side. A fill changes its order
    /// several times in a row: the id is named once for them.
    pub(super) fn note(&mut self, market: MarketId, side: Side, id: OrderId) {
        let m = market as usize;
        if self.0.len() <= m {
            self.0.resize_with(m + 1, Default::default);
        }
        let side = &mut self.0[m][side_slot(side)];
        side.count += 1;
        let Some(ids) = &mut side.changed else {
            return;
        };
        match ids.last() == Some(&id) {
            true => {}
            false if ids.len() < MAKER_CHANGED => ids.push(id),
            false => side.changed = None,
        }
    }
}

fn side_slot(side: Side) -> usize {
    match side {
        Side::Buy => 0,
        Side::Sell => 1,
    }
}

/// The record of order `id` at `slot`, wherever it is.
fn resolve<'a>(
    id: OrderId,
    slot: OrderSlot,
    staged: &'a [Option<Arc<Order>>],
    live: impl FnOnce(Entity) -> &'a Arc<Order>,
    ended: &'a EndedOrders,
) -> &'a Arc<Order> {
    match slot {
        OrderSlot::Staged(i) => staged[i as usize]
            .as_ref()
            .expect("a staged slot holds its order until it ends"),
        OrderSlot::Live(entity) => live(entity),
        OrderSlot::Ended(i) => ended.record(i, id),
    }
}

/// The orders as the reference index sees them while it is borrowed apart from the store
/// (an insert).
struct Lookup<'a, 'w, 's> {
    index: &'a OrderIndex,
    staged: &'a [Option<Arc<Order>>],
    live: &'a Query<'w, 's, &'static mut LiveOrder>,
    ended: &'a EndedOrders,
}

impl OrderLookup for Lookup<'_, '_, '_> {
    fn order(&self, id: OrderId) -> &Order {
        resolve(
            id,
            self.index.slot(id),
            self.staged,
            |e| self.live.get(e).expect("indexed orders are live").held(),
            self.ended,
        )
    }
}

/// The orders a system places, changes and ends.
#[derive(SystemParam)]
pub struct Orders<'w, 's> {
    index: ResMut<'w, OrderIndex>,
    refs: ResMut<'w, RefIndex>,
    ended: ResMut<'w, EndedOrders>,
    open: ResMut<'w, OpenCounts>,
    maker: ResMut<'w, MakerOrderChanges>,
    live: Query<'w, 's, &'static mut LiveOrder>,
    commands: Commands<'w, 's>,
    /// Orders accepted during this run; an entry is taken when its order ends before the
    /// flush.
    staged: Local<'s, Vec<Option<Arc<Order>>>>,
}

impl Orders<'_, '_> {
    /// The id the next accepted order gets.
    pub fn next_id(&self) -> OrderId {
        OrderId(self.index.accepted())
    }

    pub fn get(&self, id: OrderId) -> &Order {
        self.shared(id)
    }

    /// The order if it is live (open): none once it has ended, whenever that was (its
    /// record is held only through its tick).
    pub fn live(&self, id: OrderId) -> Option<&Order> {
        match self.index.get(id)? {
            OrderSlot::Ended(_) => None,
            // Resolved from the slot just found: the market maker's quotes are old enough
            // to sit in the index's hash map, and each read looked them up twice.
            slot => Some(self.at(id, slot)),
        }
    }

    fn shared(&self, id: OrderId) -> &Arc<Order> {
        self.at(id, self.index.slot(id))
    }

    /// The record of order `id` at `slot`, which the index holds for it.
    fn at(&self, id: OrderId, slot: OrderSlot) -> &Arc<Order> {
        resolve(
            id,
            slot,
            &self.staged,
            |e| self.live.get(e).expect("indexed orders are live").held(),
            &self.ended,
        )
    }

    /// The order to change: live or staged (an ended order never changes).
    pub fn get_mut(&mut self, id: OrderId) -> &mut Order {
        let shared = match self.index.slot(id) {
            OrderSlot::Staged(i) => self.staged[i as usize]
                .as_mut()
                .expect("a staged slot holds its order until it ends"),
            OrderSlot::Live(entity) => (self.live.get_mut(entity).ok())
                .and_then(|o| o.into_inner().0.as_mut())
                .expect("indexed orders are live"),
            OrderSlot::Ended(_) => panic!("order {id} has ended and never changes"),
        };
        // Copies only when the read view still holds this version.
        let order = Arc::make_mut(shared);
        self.maker.count(order);
        order
    }

    /// Changes to the market maker's orders in a market's side (see [`MakerOrderChanges`]).
    pub fn maker_changes(&self, market: MarketId, side: Side) -> u64 {
        self.maker.of(market, side)
    }

    /// The market maker's orders in a market's side changed since it last forgot them (see
    /// [`MakerOrderChanges::changed`]).
    pub fn maker_changed(&self, market: MarketId, side: Side) -> Option<&[OrderId]> {
        self.maker.changed(market, side)
    }

    /// Forgets the market maker's changed orders in a market's side.
    pub fn forget_maker_changes(&mut self, market: MarketId, side: Side) {
        self.maker.forget(market, side);
    }

    /// The ids of the live orders `select` picks, ascending: one scan of the live set, for
    /// the rare passes that act on many customers at once (a liquidation cascade).
    pub fn live_ids(&self, select: impl Fn(&Order) -> bool) -> Vec<OrderId> {
        let live = self.live.iter().filter_map(|o| o.record()).map(|o| &**o);
        let staged = self.staged.iter().flatten().map(|o| &**o);
        let mut ids: Vec<OrderId> = live
            .chain(staged)
            .filter(|o| select(o))
            .map(|o| o.id)
            .collect();
        ids.sort_unstable();
        ids
    }

    /// The shared record, for an answer.
    pub fn record(&self, id: OrderId) -> Arc<Order> {
        Arc::clone(self.shared(id))
    }

    /// The open order under a reference (see [`RefIndex`]): its id, which the index found by
    /// looking the order up already (a cancel's caller would only read the id back).
    pub fn open_by_ref(&self, customer: CustomerCode, reference: &str) -> Option<OrderId> {
        self.refs.get(self, customer, reference)
    }

    /// Orders the customer holds open, staged ones included (D4).
    pub fn open_orders(&self, customer: CustomerCode) -> u32 {
        self.open.of_customer(customer)
    }

    /// Accepts a new order (its id is [`Orders::next_id`]); it becomes the latest under its
    /// reference.
    pub fn push(&mut self, order: Order) {
        let id = self.next_id();
        assert_eq!(order.id, id, "an order's id is its sequence number");
        self.open.add(order.customer);
        self.maker.count(&order);
        let position = u32::try_from(self.staged.len()).expect("a run stages few orders");
        self.staged.push(Some(Arc::new(order)));
        self.index.push(OrderSlot::Staged(position));
        self.reindex(id);
    }

    /// Puts order `id` in the reference index; the index looks orders up through the rest of
    /// the store.
    fn reindex(&mut self, id: OrderId) {
        let lookup = Lookup {
            index: &self.index,
            staged: &self.staged,
            live: &self.live,
            ended: &self.ended,
        };
        self.refs.insert(&lookup, id);
    }

    /// Moves an order that reached a terminal status from the live set (and the reference
    /// index) to [`EndedOrders`].
    pub fn end(&mut self, id: OrderId) {
        let record = match self.index.slot(id) {
            OrderSlot::Staged(i) => self.staged[i as usize]
                .take()
                .expect("a staged slot holds its order until it ends"),
            OrderSlot::Live(entity) => self.vacate(entity),
            OrderSlot::Ended(_) => panic!("order {id} has already ended"),
        };
        self.refs.remove(&record);
        self.open.remove(record.customer);
        self.maker.count(&record);
        let position = self.ended.end(record) as u64;
        self.index.set(id, OrderSlot::Ended(position));
    }

    /// Takes the record out of a live order's entity, which is kept for the next order while
    /// the pool has room and it is not marked [`Waiting`], else despawned.
    fn vacate(&mut self, entity: Entity) -> Arc<Order> {
        let mut held = self.live.get_mut(entity).expect("indexed orders are live");
        let record = held.0.take().expect("indexed orders are live");
        if record.waiting() || self.index.pool.len() >= POOL {
            self.commands.entity(entity).despawn();
        } else {
            self.index.pool.push(entity);
        }
        record
    }

    /// A waiting order fired: it is no longer marked [`Waiting`].
    pub fn fired(&mut self, id: OrderId) {
        if let Some(OrderSlot::Live(entity)) = self.index.get(id) {
            self.commands.entity(entity).remove::<Waiting>();
        }
    }

    /// Gives the orders accepted during this run that are still live their entity: a pooled
    /// one where there is one (a waiting order's is new, as it carries [`Waiting`]).
    pub fn flush(&mut self) {
        let mut took = false;
        for record in std::mem::take(&mut *self.staged).into_iter().flatten() {
            let id = record.id;
            let pooled = match record.waiting() {
                true => None,
                false => {
                    took = true;
                    self.index.pool.pop()
                }
            };
            let entity = match pooled {
                Some(entity) => {
                    let mut slot = self.live.get_mut(entity).expect("a pooled entity is kept");
                    assert!(slot.0.is_none(), "a pooled entity is empty");
                    slot.0 = Some(record);
                    entity
                }
                None if record.waiting() => {
                    let live = LiveOrder(Some(record));
                    self.commands.spawn((live, Waiting)).id()
                }
                None => self.commands.spawn(LiveOrder(Some(record))).id(),
            };
            self.index.set(id, OrderSlot::Live(entity));
        }
        let pooled = self.index.pool.len();
        if took && pooled < SPARE / 2 {
            self.spare(SPARE - pooled);
        }
    }

    /// Tops the pool up by `count` empty entities, spawned in one batch where the run's
    /// commands apply: a batch costs bevy about half of what a spawn queued an order does.
    fn spare(&mut self, count: usize) {
        self.commands.queue(move |world: &mut World| {
            let spawned = world.spawn_batch(std::iter::repeat_n(LiveOrder(None), count));
            let spawned: Vec<Entity> = spawned.collect();
            world.resource_mut::<OrderIndex>().pool.extend(spawned);
        });
    }
}

impl OrderLookup for Orders<'_, '_> {
    fn order(&self, id: OrderId) -> &Order {
        self.get(id)
    }
}

/// The orders, read after the run's flush (publishing, invariants).
#[derive(SystemParam)]
pub struct OrderRecords<'w, 's> {
    index: Res<'w, OrderIndex>,
    refs: Res<'w, RefIndex>,
    ended: Res<'w, EndedOrders>,
    open: Res<'w, OpenCounts>,
    live: Query<'w, 's, &'static LiveOrder>,
}

impl OrderLookup for OrderRecords<'_, '_> {
    fn order(&self, id: OrderId) -> &Order {
        self.record(id)
    }
}

impl OrderRecords<'_, '_> {
    pub fn count(&self) -> u64 {
        self.index.accepted()
    }

    pub fn record(&self, id: OrderId) -> &Arc<Order> {
        resolve(
            id,
            self.index.slot(id),
            &[],
            |e| self.live.get(e).expect("indexed orders are live").held(),
            &self.ended,
        )
    }

    pub fn refs(&self) -> &RefIndex {
        &self.refs
    }

    /// How many orders are live: the entities but the pooled ones.
    pub fn live_count(&self) -> usize {
        self.live.count() - self.index.pool.len()
    }

    /// The live orders' records.
    pub fn live(&self) -> impl Iterator<Item = &Order> {
        self.live.iter().filter_map(|o| o.record()).map(|o| &**o)
    }

    /// The open orders counted per customer (the D4 bound's count) sum to the live set: cheap
    /// enough for every pass, where a per-customer recount would build a map of every live
    /// order (a restore rebuilds the counts from the orders).
    pub fn check_open_counts(&self) -> Result<(), String> {
        let counted = self.open.0.total();
        let live = self.live_count() as u64;
        match counted == live {
            true => Ok(()),
            false => Err(format!(
                "{counted} open orders counted per customer, {live} live"
            )),
        }
    }

    /// The index and the order entities agree one to one, every order is live or ended,
    /// and the reference index holds exactly the live ones (while the engine audits, on the
    /// audit's cadence).
    pub fn check_index(&self) -> Result<(), String> {
        let mut live = 0;
        for (id, e) in self.index.live() {
            live += 1;
            let o = (self.live.get(e).ok())
                .and_then(LiveOrder::record)
                .ok_or_else(|| format!("live order {id} is gone"))?;
            if o.id != id {
                return Err(format!("order {} is indexed as {id}", o.id));
            }
        }
        let entities = self.live.iter().filter(|o| o.record().is_some()).count();
        let empty = |&e: &Entity| self.live.get(e).is_ok_and(|o| o.0.is_none());
        if !self.index.pool.iter().all(empty) {
            return Err("a pooled order entity is gone or holds an order".to_owned());
        }
        let ended = self.ended.count();
        // Held: the live orders and this tick's ended ones (a staged one would be one more).
        let (held, accepted) = (self.index.len(), self.index.accepted());
        let this_tick = self.ended.recent.len();
        if entities != live || held != live + this_tick || live as u64 + ended != accepted {
            return Err(format!(
                "{entities} live order entities, {ended} ended ({this_tick} in this tick), \
                 {live} live of {held} held, {accepted} accepted"
            ));
        }
        if self.refs.len() != live || !self.refs.is_consistent(self) {
            return Err(format!(
                "the reference index holds {} references for {live} live orders",
                self.refs.len()
            ));
        }
        Ok(())
    }
}

/// The orders of a world between ticks (nothing staged), as the reference index looks them
/// up (`Engine::order_by_ref`).
pub struct WorldOrders<'a>(pub &'a World);

impl WorldOrders<'_> {
    pub fn record(&self, id: OrderId) -> &Arc<Order> {
        let world = self.0;
        resolve(
            id,
            world.resource::<OrderIndex>().slot(id),
            &[],
            |e| {
                world
                    .get::<LiveOrder>(e)
                    .expect("indexed orders are live")
                    .held()
            },
            world.resource::<EndedOrders>(),
        )
    }

    /// The open order under a reference, else the latest that ended in the last tick.
    pub fn by_ref(&self, customer: CustomerCode, reference: &str) -> Option<&Arc<Order>> {
        match self.0.resource::<RefIndex>().get(self, customer, reference) {
            Some(id) => Some(self.record(id)),
            None => self
                .0
                .resource::<EndedOrders>()
                .recent
                .iter()
                .rev()
                .find(|o| o.customer == customer && *o.reference_id == *reference),
        }
    }
}

impl OrderLookup for WorldOrders<'_> {
    fn order(&self, id: OrderId) -> &Order {
        self.record(id)
    }
}

/// The ids of the live orders, ascending (between ticks: none is staged).
pub fn live_ids(index: &OrderIndex) -> Vec<OrderId> {
    index.live().into_iter().map(|(id, _)| id).collect()
}

/// Puts a snapshot's orders into a world: the live ones (in id order) as entities and in the
/// reference index, what is known of the ended ones into [`EndedOrders`].
pub fn restore(world: &mut World, live: Vec<Order>, ended: EndedState) {
    let live: Vec<Arc<Order>> = live.into_iter().map(Arc::new).collect();
    let count = ended.count + live.len() as u64;
    let refs = RefIndex::rebuild(&RestoredLive(&live), live.iter().map(|o| o.id));
    world.insert_resource(OpenCounts::of(live.iter().map(|o| &**o)));
    // Every id not live has ended; its record is not held. The window starts at the first
    // live id and is trimmed as a tick's start trims it.
    let base = live.first().map_or(count, |o| o.id.0);
    let span = usize::try_from(count - base).expect("order ids fit memory");
    let mut index = OrderIndex {
        base,
        window: VecDeque::from(vec![None; span]),
        in_window: live.len(),
        old: lookup::Lookup::default(),
        pool: Vec::new(),
    };
    for o in live {
        let at = (o.id.0 - base) as usize;
        let waiting = o.waiting();
        let mut entity = world.spawn(LiveOrder(Some(o)));
        if waiting {
            entity.insert(Waiting);
        }
        index.window[at] = Some(OrderSlot::Live(entity.id()));
    }
    index.forget(&[]);
    world.insert_resource(index);
    world.insert_resource(EndedOrders::restore(ended));
    world.insert_resource(refs);
}

/// Live orders in id order, as the reference index looks them up while it is rebuilt.
struct RestoredLive<'a>(&'a [Arc<Order>]);

impl OrderLookup for RestoredLive<'_> {
    fn order(&self, id: OrderId) -> &Order {
        let i = self
            .0
            .binary_search_by_key(&id, |o| o.id)
            .expect("a live order");
        &self.0[i]
    }
}

/// A snapshot's orders out of a world: the live ones in id order, and what is known of the
/// ended ones.
pub fn extract(world: &World) -> (Vec<Order>, EndedState) {
    let (live, ended) = borrow(world);
    (live.into_iter().cloned().collect(), ended)
}

/// [`extract`]'s orders, borrowed where they live.
pub fn borrow(world: &World) -> (Vec<&Order>, EndedState) {
    let live = world
        .resource::<OrderIndex>()
        .live()
        .into_iter()
        .map(|(_, e)| &**world.get::<LiveOrder>(e).expect("indexed").held())
        .collect();
    (live, world.resource::<EndedOrders>().state())
}
