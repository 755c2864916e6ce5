//! Account balances as entities: each (owner, asset) account is an entity with its
//! [`Balance`], found through [`AccountIndex`]. Two stores give the ledger its
//! balances: [`Accounts`], for systems, over a query (an account first touched during a run is
//! staged with its reserved entity until [`Accounts::flush`], so the run sees it at once); and
//! [`WorldAccounts`], for the command handlers that hold the whole world.

use std::collections::BTreeMap;

use bevy_ecs::prelude::{Commands, Entity, Local, Query, ResMut, Resource, World};
use bevy_ecs::system::SystemParam;

use perpsim_core::instrument::Asset;

use crate::money::ledger::AccountStore;
use crate::records::lookup::Lookup;
use crate::records::money::{AccountId, Balance, Owner, VenueAccount};

/// Accounts by (owner, asset): customers' money per asset and the venue's accounts are
/// entities with a `Balance`. Three ways in, kept together by [`AccountIndex::insert`]: the
/// map in key order, for the passes' walks and whole reads; a hashed lookup, for the one
/// account an order, a cancel or a fill's side books to (a search down the map's levels is
/// some 200 instructions with 16 customers, and more with more); and slots for the venue's
/// accounts, which every fill posts to twice a side.
#[derive(Resource, Debug, Default)]
pub struct AccountIndex {
    map: BTreeMap<AccountId, Entity>,
    lookup: Lookup<AccountId, Entity>,
    venue: [[Option<Entity>; Asset::ALL.len()]; VenueAccount::ALL.len()],
}

impl AccountIndex {
    /// The entity of account `id`, if it is open.
    pub fn get(&self, id: &AccountId) -> Option<Entity> {
        if let Owner::Venue(account) = id.owner
            && let Some(entity) = self.venue[account as usize][id.asset.index()]
        {
            return Some(entity);
        }
        self.lookup.get(id).copied()
    }

    /// Indexes account `id`'s entity (accounts are never closed).
    pub fn insert(&mut self, id: AccountId, entity: Entity) {
        if let Owner::Venue(account) = id.owner {
            self.venue[account as usize][id.asset.index()] = Some(entity);
        }
        self.map.insert(id, entity);
        self.lookup.insert(id, entity);
    }

    /// Every open account's entity, in key order.
    pub fn accounts(&self) -> &BTreeMap<AccountId, Entity> {
        &self.map
    }

    /// A walk of the index for accounts asked in ascending order (see [`IndexWalk`]).
    pub fn walk(&self) -> IndexWalk<'_> {
        IndexWalk {
            index: &self.map,
            walk: self.map.range(..).peekable(),
            last: None,
        }
    }
}

/// Finds accounts' entities asked in ascending order by one walk of the index: a periodic
/// pass and the read view's publish after it ask for a million accounts in key order, where
/// a search each cost 60 ms of a funding hour. The walk searches past a gap of more than
/// [`WALK_AHEAD`] entries (a few accounts among many), and an account asked out of order is
/// searched for.
pub struct IndexWalk<'a> {
    index: &'a BTreeMap<AccountId, Entity>,
    walk: std::iter::Peekable<std::collections::btree_map::Range<'a, AccountId, Entity>>,
    last: Option<AccountId>,
}

impl IndexWalk<'_> {
    /// The entity of `id`, if it has one.
    pub fn entity(&mut self, id: AccountId) -> Option<Entity> {
        if self.last.is_some_and(|last| id < last) {
            return self.index.get(&id).copied();
        }
        self.last = Some(id);
        let mut steps = 0;
        while self.walk.next_if(|(k, _)| **k < id).is_some() {
            steps += 1;
            if steps == WALK_AHEAD {
                self.walk = self.index.range(id..).peekable();
            }
        }
        let found = self.walk.peek().filter(|(k, _)| **k == id);
        found.map(|&(_, entity)| *entity)
    }
}

/// Every account whose balance was written since the margin pass last read them, as each
/// write listed it (repeats included): what the pass re-reads. Bevy's `Changed<Balance>`
/// finds the same by comparing every account's change tick on every run, a cost that grows
/// with the accounts held rather than with those written. Derived; drained by every run's
/// margin pass, so it holds at most one run's writes.
#[derive(Resource, Debug, Default)]
pub struct WrittenBalances(pub Vec<Entity>);

/// The balances a system books into.
#[derive(SystemParam)]
pub struct Accounts<'w, 's> {
    index: ResMut<'w, AccountIndex>,
    written: ResMut<'w, WrittenBalances>,
    live: Query<'w, 's, &'static mut Balance>,
    commands: Commands<'w, 's>,
    staged: Local<'s, BTreeMap<Entity, Balance>>,
}

impl AccountStore for Accounts<'_, '_> {
    fn balance(&self, id: &AccountId) -> Option<&Balance> {
        Some(self.at(self.entity(id)?))
    }

    fn balance_mut(&mut self, id: AccountId) -> &mut Balance {
        let entity = match self.index.get(&id) {
            Some(entity) => entity,
            None => {
                let entity = self.commands.spawn_empty().id();
                self.index.insert(id, entity);
                self.staged.insert(entity, Balance::default());
                entity
            }
        };
        self.balance_of(entity)
    }
}

/// How far a walk of the index steps ahead to the next account it needs before it searches
/// for it instead: a pass over a few positions among many customers stays a search each.
const WALK_AHEAD: usize = 8;

impl<'w, 's> Accounts<'w, 's> {
    /// The account held by `entity`, an indexed one.
    fn balance_of(&mut self, entity: Entity) -> &mut Balance {
        self.written.0.push(entity);
        if self.staged.contains_key(&entity) {
            return self.staged.get_mut(&entity).expect("checked above");
        }
        self.live
            .get_mut(entity)
            .expect("indexed accounts are live")
            .into_inner()
    }

    /// The entity of each account `ids` names (`None` where none is open yet), into `out`,
    /// by one walk of the index ([`AccountIndex::walk`]): a periodic pass books in the
    /// positions' (customer, market) order, so its accounts come in ascending order.
    pub fn find_in_order(
        &self,
        ids: impl IntoIterator<Item = AccountId>,
        out: &mut Vec<Option<Entity>>,
    ) {
        out.clear();
        let mut walk = self.index.walk();
        out.extend(ids.into_iter().map(|id| walk.entity(id)));
    }

    /// The entity of an open account: one search of the index, for a caller that reads the
    /// account ([`Self::at`]) and then books to it ([`Self::knowing`]).
    pub fn entity(&self, id: &AccountId) -> Option<Entity> {
        self.index.get(id)
    }

    /// The balance of an open account's entity.
    pub fn at(&self, entity: Entity) -> &Balance {
        match self.staged.get(&entity) {
            Some(b) => b,
            None => self.live.get(entity).expect("indexed accounts are live"),
        }
    }

    /// This store with `entity` known to hold `id` (from [`Self::find_in_order`]): the
    /// booking that touches `id` finds it without a search.
    pub fn knowing(&mut self, id: AccountId, entity: Option<Entity>) -> Known<'_, 'w, 's> {
        Known {
            accounts: self,
            known: entity.map(|e| (id, e)),
        }
    }
}

impl Accounts<'_, '_> {
    /// Gives the accounts opened during this run their balance component.
    pub fn flush(&mut self) {
        for (entity, balance) in std::mem::take(&mut *self.staged) {
            self.commands.entity(entity).insert(balance);
        }
    }
}

/// [`Accounts`] with one account's entity known (see [`Accounts::knowing`]).
pub struct Known<'a, 'w, 's> {
    accounts: &'a mut Accounts<'w, 's>,
    known: Option<(AccountId, Entity)>,
}

impl AccountStore for Known<'_, '_, '_> {
    fn balance(&self, id: &AccountId) -> Option<&Balance> {
        self.accounts.balance(id)
    }

    fn balance_mut(&mut self, id: AccountId) -> &mut Balance {
        match self.known {
            Some((known, entity)) if known == id => self.accounts.balance_of(entity),
            _ => self.accounts.balance_mut(id),
        }
    }
}

/// The balances, for a handler holding the world (the ledger taken out of it meanwhile).
pub struct WorldAccounts<'a>(pub &'a mut World);

impl AccountStore for WorldAccounts<'_> {
    fn balance(&self, id: &AccountId) -> Option<&Balance> {
        let entity = self.0.resource::<AccountIndex>().get(id)?;
        self.0.get::<Balance>(entity)
    }

    fn balance_mut(&mut self, id: AccountId) -> &mut Balance {
        let known = self.0.resource::<AccountIndex>().get(&id);
        let entity = known.unwrap_or_else(|| {
            let entity = self.0.spawn(Balance::default()).id();
            self.0.resource_mut::<AccountIndex>().insert(id, entity);
            entity
        });
        self.0.resource_mut::<WrittenBalances>().0.push(entity);
        self.0
            .get_mut::<Balance>(entity)
            .expect("indexed accounts are live")
            .into_inner()
    }
}

/// Spawns `accounts` as entities (a new ledger's venue accounts, or a snapshot's).
pub fn spawn_accounts(world: &mut World, accounts: BTreeMap<AccountId, Balance>) {
    for (id, balance) in accounts {
        let entity = world.spawn(balance).id();
        world.resource_mut::<AccountIndex>().insert(id, entity);
        world.resource_mut::<WrittenBalances>().0.push(entity);
    }
}

/// Every account's balance by id, out of the entities (snapshots, invariants).
pub fn all_accounts(world: &World) -> BTreeMap<AccountId, Balance> {
    world
        .resource::<AccountIndex>()
        .accounts()
        .iter()
        .map(|(id, &e)| (*id, *world.get::<Balance>(e).expect("indexed")))
        .collect()
}

#[cfg(test)]
mod tests {
    use bevy_ecs::system::RunSystemOnce;
    use perpsim_core::ids::CustomerCode;
    use perpsim_core::instrument::Asset;
    use perpsim_core::{Decimal, Uuid};

    use super::*;

    fn id(customer: u128, asset: Asset) -> AccountId {
        AccountId::customer(CustomerCode(Uuid::from_u128(customer)), asset)
    }

    /// Customers 0, 3, 6, … 2 997 hold a USDC account; every tenth of them a USDT one too.
    fn world() -> World {
        let mut world = World::new();
        world.insert_resource(AccountIndex::default());
        world.insert_resource(WrittenBalances::default());
        let mut accounts = BTreeMap::new();
        for c in (0..3_000).step_by(3) {
            accounts.insert(id(c, Asset::Usdc), Balance::default());
            if c % 30 == 0 {
                accounts.insert(id(c, Asset::Usdt), Balance::default());
            }
        }
        spawn_accounts(&mut world, accounts);
        world
    }

    #[test]
    fn a_pass_finds_its_accounts_by_one_walk_as_a_search_each_would_d6() {
        let mut world = world();
        // In a pass's order (gaps short and long, accounts not open), then out of it.
        let mut ids: Vec<AccountId> = [0, 1, 3, 30, 31, 600, 2_970, 2_998]
            .into_iter()
            .flat_map(|c| [id(c, Asset::Usdt), id(c, Asset::Usdc)])
            .collect();
        ids.extend([
            id(300, Asset::Usdc),
            id(2_970, Asset::Usdt),
            id(9_999, Asset::Usdc),
        ]);
        let index = world.resource::<AccountIndex>().accounts().clone();
        let found = world
            .run_system_once(move |accounts: Accounts| {
                let mut out = vec![Some(Entity::PLACEHOLDER)];
                accounts.find_in_order(ids.iter().copied(), &mut out);
                (ids.clone(), out)
            })
            .expect("runs");
        let searched: Vec<Option<Entity>> = found.0.iter().map(|i| index.get(i).copied()).collect();
        assert_eq!(found.1, searched);
        assert_eq!(found.1.iter().flatten().count(), 11, "{:?}", found.1);
    }

    #[test]
    fn a_known_account_is_booked_where_a_search_would_book_it_d6() {
        let mut world = world();
        let (usdc, usdt) = (id(30, Asset::Usdc), id(30, Asset::Usdt));
        world
            .run_system_once(move |mut accounts: Accounts| {
                let mut out = Vec::new();
                accounts.find_in_order([usdc], &mut out);
                let mut known = accounts.knowing(usdc, out[0]);
                known.balance_mut(usdc).total += Decimal::ONE;
                known.balance_mut(usdt).total += Decimal::TWO;
            })
            .expect("runs");
        let all = all_accounts(&world);
        assert_eq!(
            (all[&usdc].total, all[&usdt].total),
            (Decimal::ONE, Decimal::TWO)
        );
    }
}
