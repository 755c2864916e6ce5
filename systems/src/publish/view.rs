//! The read view: what the engine publishes after every tick for request handlers to read
//! without ever waiting on the engine. Built from persistent maps (`imbl`), so publishing is
//! an O(1) clone and each tick updates only what changed (bevy change detection).

use bevy_ecs::prelude::{Changed, Query, Res, ResMut, Resource};
use imbl::{OrdMap, OrdSet};
use perpsim_core::ids::{BrokerCode, CustomerCode, PublicKey};
use perpsim_core::instrument::Asset;
use perpsim_core::time::Timestamp;

use crate::clock::SimClock;
use crate::money::ledger::Ledger;
use crate::money::store::AccountIndex;
use crate::records::clock::ClockView;
use crate::records::funding::FundingView;
use crate::records::money::{AccountId, Balance, Owner, VenueAccount};
use crate::records::venue::{
    Broker, BrokerKeys, BrokerView, Customer, CustomerView, Instrument, InstrumentState,
    InstrumentView,
};
use crate::settlement::funding::FundingState;
use bevy_ecs::change_detection::DetectChanges;

/// A customer's balances in the read view, a slot per asset of [`Asset::ALL`], held inline
/// in the map's node: a map per customer held a node of about 1 KB for its one or two rows
/// (1.1 GB at a million customers), copied whole at each change once a reader shared it (a
/// funding hour's million balances took the publish 0.5 s).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AssetBalances([Option<Balance>; Asset::ALL.len()]);

/// The assets in slot order, to lend out as keys.
static ASSETS: [Asset; Asset::ALL.len()] = Asset::ALL;

impl AssetBalances {
    pub fn get(&self, asset: &Asset) -> Option<&Balance> {
        self.0[asset.index()].as_ref()
    }

    pub fn insert(&mut self, asset: Asset, balance: Balance) {
        self.0[asset.index()] = Some(balance);
    }

    /// The rows held, in asset order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static Asset, &Balance)> + '_ {
        let slots = ASSETS.iter().zip(&self.0);
        slots.filter_map(|(asset, b)| b.as_ref().map(|b| (asset, b)))
    }

    pub fn values(&self) -> impl Iterator<Item = &Balance> + '_ {
        self.0.iter().flatten()
    }
}

impl std::ops::Index<&Asset> for AssetBalances {
    type Output = Balance;

    fn index(&self, asset: &Asset) -> &Balance {
        self.get(asset).expect("a balance row for the asset")
    }
}

/// Sort key of a broker's customer list: oldest first, ties by code.
pub type CustomerListKey = (Timestamp, CustomerCode);

/// Everything request handlers may read. Cloning is cheap (persistent maps).
#[derive(Resource, Debug, Clone)]
pub struct ReadView {
    /// Ticks applied so far (the journal's tick count).
    pub tick: u64,
    /// Commands applied so far (the journal's command count).
    pub seq: u64,
    pub clock: ClockView,
    pub keys: OrdMap<PublicKey, BrokerCode>,
    pub brokers: OrdMap<BrokerCode, BrokerView>,
    pub customers: OrdMap<CustomerCode, CustomerView>,
    pub customers_by_broker: OrdMap<BrokerCode, OrdSet<CustomerListKey>>,
    /// Sorted by symbol.
    pub instruments: OrdMap<String, InstrumentView>,
    /// A customer's balance per asset it ever moved.
    pub balances: OrdMap<CustomerCode, AssetBalances>,
    /// The venue's own accounts (fees, clearing, insurance) per asset, once touched.
    pub venue: OrdMap<(VenueAccount, Asset), Balance>,
    pub transfers_available: bool,
    pub trading: crate::publish::market_view::TradingView,
    /// Each market's funding by market id: latest settlement and running interval.
    pub funding: Vec<FundingView>,
    /// The fault plan in force (issue 25), for the channels to apply.
    pub faults: Option<std::sync::Arc<crate::records::fault_plan::FaultPlan>>,
}

impl ReadView {
    pub fn new(clock: ClockView) -> Self {
        ReadView {
            tick: 0,
            seq: 0,
            clock,
            keys: OrdMap::new(),
            brokers: OrdMap::new(),
            customers: OrdMap::new(),
            customers_by_broker: OrdMap::new(),
            instruments: OrdMap::new(),
            balances: OrdMap::new(),
            venue: OrdMap::new(),
            transfers_available: true,
            trading: Default::default(),
            funding: Vec::new(),
            faults: None,
        }
    }

    /// The broker's customer, or None for unknown customers and those of other brokers (D2:
    /// both are answered the same).
    pub fn customer_of(&self, broker: BrokerCode, code: CustomerCode) -> Option<&CustomerView> {
        self.customers.get(&code).filter(|c| c.broker == broker)
    }
}

/// Whether PublishSystems run. Replay turns it off and catches up once at the end: change
/// detection remembers everything that changed meanwhile.
#[derive(Resource, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Publishing(pub bool);

pub fn publishing_enabled(p: Res<Publishing>) -> bool {
    p.0
}

pub fn publish_brokers(
    mut view: ResMut<ReadView>,
    changed: Query<(&Broker, &BrokerKeys), Changed<BrokerKeys>>,
) {
    for (broker, keys) in &changed {
        if let Some(old) = view.brokers.get(&broker.code).cloned() {
            for key in &old.public_keys {
                view.keys.remove(key);
            }
        }
        for key in &keys.0 {
            view.keys.insert(*key, broker.code);
        }
        view.brokers
            .insert(broker.code, BrokerView::new(broker, keys));
    }
}

pub fn publish_customers(mut view: ResMut<ReadView>, changed: Query<&Customer, Changed<Customer>>) {
    for customer in &changed {
        view.customers
            .insert(customer.code, CustomerView::from(customer));
        view.customers_by_broker
            .entry(customer.broker)
            .or_default()
            .insert((customer.created_at, customer.code));
    }
}

pub fn publish_instruments(
    mut view: ResMut<ReadView>,
    changed: Query<(&Instrument, &InstrumentState), Changed<InstrumentState>>,
) {
    for (instrument, state) in &changed {
        view.instruments.insert(
            instrument.0.symbol.clone(),
            InstrumentView::new(&instrument.0, state),
        );
    }
}

/// Funding of every market (a handful of small records); the settlements are history, read
/// from the journal's projection.
pub fn publish_funding(mut view: ResMut<ReadView>, state: Res<FundingState>) {
    if !state.is_changed() && !view.funding.is_empty() {
        return;
    }
    view.funding = (0..state.markets()).map(|m| state.view(m)).collect();
}

pub fn publish_clock(mut view: ResMut<ReadView>, clock: Res<SimClock>) {
    view.clock = ClockView {
        mode: clock.mode,
        now: clock.now,
    };
}

pub fn publish_ledger(
    mut view: ResMut<ReadView>,
    mut ledger: ResMut<Ledger>,
    index: Res<AccountIndex>,
    accounts: Query<&Balance>,
) {
    view.transfers_available = ledger.transfers_available();
    // The changed accounts come in ascending order: one walk of the index finds them.
    let mut walk = index.walk();
    let balances = ledger.drain_balances(|&id| {
        let entity = walk.entity(id).expect("a touched account is indexed");
        *accounts
            .get(entity)
            .expect("a touched account is an entity")
    });
    for (AccountId { owner, asset }, balance) in balances {
        match owner {
            // One search for a customer already shown (an entry's look-up and its
            // `into_mut` are two).
            Owner::Customer(code) => match view.balances.get_mut(&code) {
                Some(rows) => rows.insert(asset, balance),
                None => {
                    let mut rows = AssetBalances::default();
                    rows.insert(asset, balance);
                    view.balances.insert(code, rows);
                }
            },
            Owner::Venue(account) => {
                view.venue.insert((account, asset), balance);
            }
        }
    }
}

/// The plan, republished only when it differs: its generator moves with every order entry
/// it judges, and the channels start a plan's counts anew when its record changes.
pub fn publish_faults(mut view: ResMut<ReadView>, faults: Res<crate::faults::Faults>) {
    if faults.is_changed() && view.faults.as_deref() != faults.plan.as_ref() {
        view.faults = faults.plan.clone().map(std::sync::Arc::new);
    }
}
