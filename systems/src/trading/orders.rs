//! Live orders as entities (interface §3.1; D5). An order resting in a book or waiting on a
//! trigger is an entity with a [`LiveOrder`] (and [`Waiting`] while a conditional order has
//! not fired); when it reaches a terminal status it leaves the live set for
//! [`EndedOrders`], which holds its record only through the tick it ended in (the journal's
//! projection keeps it). [`OrderIndex`] says where each id is.
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

use std::collections::BTreeMap;
use std::sync::Arc;

use bevy_ecs::prelude::{Commands, Component, Entity, Local, Query, Res, ResMut, Resource, World};
use bevy_ecs::system::SystemParam;
use perpsim_core::ids::CustomerCode;
use perpsim_core::order::{OrderStatus, Side};

use crate::records::ids::OrderId;
use crate::records::market::MARKET_MAKER;
use crate::records::order::Order;
use crate::records::venue::MarketId;
use crate::trading::ended::{EndedOrders, EndedState};
use crate::trading::refs::{OrderLookup, RefIndex};

/// Accounts by (owner, asset) — see `money::store`. Customers' money per asset and the
/// venue's accounts are entities with a `Balance`.
/// Where an order is, by its id. Ids are dense sequence numbers (an order's id is the count
/// of orders accepted before it), so the index is a `Vec` and a lookup is one load.
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

/// Every order ever accepted, by id: live ones to their entity, ended ones to where their
/// record is while their tick lasts (16 bytes an order).
#[derive(Resource, Debug, Default)]
pub struct OrderIndex(pub Vec<OrderSlot>);

/// A live order: resting in its market's book, or waiting on its trigger.
#[derive(Component, Debug, Clone)]
pub struct LiveOrder(pub Arc<Order>);

/// Marks a conditional order armed under its trigger price(s) and not yet fired; the
/// market's trigger index holds exactly these (checked in debug and test builds).
#[derive(Component, Debug, Clone, Copy, Default)]
pub struct Waiting;

/// Open orders per customer (live and staged): what the D4 bound on open orders counts.
/// Derived from the live set, so snapshots leave it out and a restore rebuilds it.
#[derive(Resource, Debug, Default)]
pub struct OpenCounts(BTreeMap<CustomerCode, u32>);

impl OpenCounts {
    fn of<'a>(live: impl Iterator<Item = &'a Order>) -> Self {
        let mut counts = OpenCounts::default();
        live.for_each(|o| counts.add(o.customer));
        counts
    }

    fn add(&mut self, customer: CustomerCode) {
        *self.0.entry(customer).or_default() += 1;
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

/// Changes to the market maker's orders, counted per market and side (a fill, an end, a
/// move, a new quote): the maker re-reads a side's quotes only where this moved since its
/// last re-quote of that side. Derived: a restored engine starts from zero, as the maker's
/// memory of its quotes does.
#[derive(Resource, Debug, Default)]
pub struct MakerOrderChanges(Vec<[u64; 2]>);

impl MakerOrderChanges {
    /// The count of a market's side so far.
    pub fn of(&self, market: MarketId, side: Side) -> u64 {
        self.0
            .get(market as usize)
            .map_or(0, |c| c[side_slot(side)])
    }

    fn count(&mut self, o: &Order) {
        if o.customer != MARKET_MAKER {
            return;
        }
        let m = o.market as usize;
        if self.0.len() <= m {
            self.0.resize(m + 1, [0; 2]);
        }
        self.0[m][side_slot(o.side)] += 1;
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
    index: &'a [OrderSlot],
    staged: &'a [Option<Arc<Order>>],
    live: &'a Query<'w, 's, &'static mut LiveOrder>,
    ended: &'a EndedOrders,
}

impl OrderLookup for Lookup<'_, '_, '_> {
    fn order(&self, id: OrderId) -> &Order {
        resolve(
            id,
            self.index[id.index()],
            self.staged,
            |e| &self.live.get(e).expect("indexed orders are live").0,
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
        OrderId(self.index.0.len() as u64)
    }

    pub fn get(&self, id: OrderId) -> &Order {
        self.shared(id)
    }

    /// The order if it is live (open): none once it has ended, whenever that was (its
    /// record is held only through its tick).
    pub fn live(&self, id: OrderId) -> Option<&Order> {
        match self.index.0[id.index()] {
            OrderSlot::Ended(_) => None,
            _ => Some(self.get(id)),
        }
    }

    fn shared(&self, id: OrderId) -> &Arc<Order> {
        resolve(
            id,
            self.index.0[id.index()],
            &self.staged,
            |e| &self.live.get(e).expect("indexed orders are live").0,
            &self.ended,
        )
    }

    /// The order to change: live or staged (an ended order never changes).
    pub fn get_mut(&mut self, id: OrderId) -> &mut Order {
        let shared = match self.index.0[id.index()] {
            OrderSlot::Staged(i) => self.staged[i as usize]
                .as_mut()
                .expect("a staged slot holds its order until it ends"),
            OrderSlot::Live(entity) => {
                &mut self
                    .live
                    .get_mut(entity)
                    .expect("indexed orders are live")
                    .into_inner()
                    .0
            }
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

    /// The ids of the live orders `select` picks, ascending: one scan of the live set, for
    /// the rare passes that act on many customers at once (a liquidation cascade).
    pub fn live_ids(&self, select: impl Fn(&Order) -> bool) -> Vec<OrderId> {
        let live = self.live.iter().map(|o| &*o.0);
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

    /// The open order under a reference (see [`RefIndex`]).
    pub fn open_by_ref(&self, customer: CustomerCode, reference: &str) -> Option<&Order> {
        let id = self.refs.get(self, customer, reference)?;
        Some(self.get(id))
    }

    /// The status of the latest order that ended under a reference, if any did.
    pub fn ended_status(&self, customer: CustomerCode, reference: &str) -> Option<OrderStatus> {
        self.ended.status_of(customer, reference)
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
        self.index.0.push(OrderSlot::Staged(position));
        self.reindex(id, true);
    }

    /// Puts order `id` in the reference index (`open`) or takes it out; the index looks
    /// orders up through the rest of the store.
    fn reindex(&mut self, id: OrderId, open: bool) {
        let lookup = Lookup {
            index: &self.index.0,
            staged: &self.staged,
            live: &self.live,
            ended: &self.ended,
        };
        match open {
            true => self.refs.insert(&lookup, id),
            false => self.refs.remove(&lookup, id),
        }
    }

    /// Moves an order that reached a terminal status from the live set (and the reference
    /// index) to [`EndedOrders`].
    pub fn end(&mut self, id: OrderId) {
        self.reindex(id, false);
        let record = match self.index.0[id.index()] {
            OrderSlot::Staged(i) => self.staged[i as usize]
                .take()
                .expect("a staged slot holds its order until it ends"),
            OrderSlot::Live(entity) => {
                let record = self.live.get(entity).expect("indexed").0.clone();
                self.commands.entity(entity).despawn();
                record
            }
            OrderSlot::Ended(_) => panic!("order {id} has already ended"),
        };
        self.open.remove(record.customer);
        self.maker.count(&record);
        self.index.0[id.index()] = OrderSlot::Ended(self.ended.end(record) as u64);
    }

    /// A waiting order fired: it is no longer marked [`Waiting`].
    pub fn fired(&mut self, id: OrderId) {
        if let OrderSlot::Live(entity) = self.index.0[id.index()] {
            self.commands.entity(entity).remove::<Waiting>();
        }
    }

    /// Gives the orders accepted during this run that are still live their entity.
    pub fn flush(&mut self) {
        for record in std::mem::take(&mut *self.staged).into_iter().flatten() {
            let id = record.id;
            let waiting = record.waiting();
            let mut entity = self.commands.spawn(LiveOrder(record));
            if waiting {
                entity.insert(Waiting);
            }
            self.index.0[id.index()] = OrderSlot::Live(entity.id());
        }
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
        self.index.0.len() as u64
    }

    pub fn record(&self, id: OrderId) -> &Arc<Order> {
        resolve(
            id,
            self.index.0[id.index()],
            &[],
            |e| &self.live.get(e).expect("indexed orders are live").0,
            &self.ended,
        )
    }

    pub fn refs(&self) -> &RefIndex {
        &self.refs
    }

    /// How many orders are live.
    pub fn live_count(&self) -> usize {
        self.live.count()
    }

    /// The live orders' records.
    pub fn live(&self) -> impl Iterator<Item = &Order> {
        self.live.iter().map(|o| &*o.0)
    }

    /// The open orders counted per customer (the D4 bound's count) sum to the live set: cheap
    /// enough for every pass, where a per-customer recount would build a map of every live
    /// order (a restore rebuilds the counts from the orders).
    pub fn check_open_counts(&self) -> Result<(), String> {
        let counted: u64 = self.open.0.values().map(|n| u64::from(*n)).sum();
        let live = self.live_count() as u64;
        match counted == live {
            true => Ok(()),
            false => Err(format!(
                "{counted} open orders counted per customer, {live} live"
            )),
        }
    }

    /// The index and the order entities agree one to one, every order is live or ended,
    /// and the reference index holds exactly the live ones (debug and test builds, on the
    /// audit's cadence).
    pub fn check_index(&self) -> Result<(), String> {
        let mut live = 0;
        for (id, slot) in self.index.0.iter().enumerate() {
            let e = match *slot {
                OrderSlot::Staged(_) => return Err(format!("order {id} is still staged")),
                OrderSlot::Ended(_) => continue,
                OrderSlot::Live(e) => e,
            };
            live += 1;
            let o = &self
                .live
                .get(e)
                .map_err(|_| format!("live order {id} is gone"))?
                .0;
            if o.id != OrderId(id as u64) {
                return Err(format!("order {} is indexed as {id}", o.id));
            }
        }
        let entities = self.live.iter().count();
        let ended = self.ended.count();
        if entities != live || live as u64 + ended != self.index.0.len() as u64 {
            return Err(format!(
                "{entities} live order entities and {ended} ended, but {live} live of {} indexed",
                self.index.0.len()
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
            world.resource::<OrderIndex>().0[id.index()],
            &[],
            |e| {
                &world
                    .get::<LiveOrder>(e)
                    .expect("indexed orders are live")
                    .0
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
    let live = |(i, slot): (usize, &OrderSlot)| {
        matches!(slot, OrderSlot::Live(_)).then_some(OrderId(i as u64))
    };
    index.0.iter().enumerate().filter_map(live).collect()
}

/// Puts a snapshot's orders into a world: the live ones (in id order) as entities and in the
/// reference index, what is known of the ended ones into [`EndedOrders`].
pub fn restore(world: &mut World, live: Vec<Order>, ended: EndedState) {
    let live: Vec<Arc<Order>> = live.into_iter().map(Arc::new).collect();
    let count = usize::try_from(ended.count).expect("order ids fit memory") + live.len();
    let refs = RefIndex::rebuild(&RestoredLive(&live), live.iter().map(|o| o.id));
    world.insert_resource(OpenCounts::of(live.iter().map(|o| &**o)));
    // Every id not live has ended; its record is not held (`EndedOrders::record` says so).
    let mut index = vec![OrderSlot::Ended(u64::MAX); count];
    for o in live {
        let id = o.id.index();
        let waiting = o.waiting();
        let mut entity = world.spawn(LiveOrder(o));
        if waiting {
            entity.insert(Waiting);
        }
        index[id] = OrderSlot::Live(entity.id());
    }
    world.insert_resource(OrderIndex(index));
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
        .0
        .iter()
        .filter_map(|slot| match slot {
            OrderSlot::Live(e) => Some(&*world.get::<LiveOrder>(*e).expect("indexed").0),
            _ => None,
        })
        .collect();
    (live, world.resource::<EndedOrders>().state())
}
