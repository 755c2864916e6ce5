//! Account balances as entities: each (owner, asset) account is an entity with its
//! [`Balance`], found through [`AccountIndex`]. Two stores give the ledger its
//! balances: [`Accounts`], for systems, over a query (an account first touched during a run is
//! staged with its reserved entity until [`Accounts::flush`], so the run sees it at once); and
//! [`WorldAccounts`], for the command handlers that hold the whole world.

use std::collections::BTreeMap;

use bevy_ecs::prelude::{Commands, Entity, Local, Query, ResMut, Resource, World};
use bevy_ecs::system::SystemParam;

use crate::money::ledger::AccountStore;
use crate::records::money::{AccountId, Balance};

/// Accounts by (owner, asset): customers' money per asset and the venue's accounts are
/// entities with a `Balance`.
#[derive(Resource, Debug, Default)]
pub struct AccountIndex(pub BTreeMap<AccountId, Entity>);

/// The balances a system books into.
#[derive(SystemParam)]
pub struct Accounts<'w, 's> {
    index: ResMut<'w, AccountIndex>,
    live: Query<'w, 's, &'static mut Balance>,
    commands: Commands<'w, 's>,
    staged: Local<'s, BTreeMap<Entity, Balance>>,
}

impl AccountStore for Accounts<'_, '_> {
    fn balance(&self, id: &AccountId) -> Option<&Balance> {
        let entity = *self.index.0.get(id)?;
        match self.staged.get(&entity) {
            Some(b) => Some(b),
            None => Some(self.live.get(entity).expect("indexed accounts are live")),
        }
    }

    fn balance_mut(&mut self, id: AccountId) -> &mut Balance {
        let entity = match self.index.0.get(&id) {
            Some(&entity) => entity,
            None => {
                let entity = self.commands.spawn_empty().id();
                self.index.0.insert(id, entity);
                self.staged.insert(entity, Balance::default());
                entity
            }
        };
        if self.staged.contains_key(&entity) {
            return self.staged.get_mut(&entity).expect("checked above");
        }
        self.live
            .get_mut(entity)
            .expect("indexed accounts are live")
            .into_inner()
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

/// The balances, for a handler holding the world (the ledger taken out of it meanwhile).
pub struct WorldAccounts<'a>(pub &'a mut World);

impl AccountStore for WorldAccounts<'_> {
    fn balance(&self, id: &AccountId) -> Option<&Balance> {
        let entity = *self.0.resource::<AccountIndex>().0.get(id)?;
        self.0.get::<Balance>(entity)
    }

    fn balance_mut(&mut self, id: AccountId) -> &mut Balance {
        let known = self.0.resource::<AccountIndex>().0.get(&id).copied();
        let entity = known.unwrap_or_else(|| {
            let entity = self.0.spawn(Balance::default()).id();
            self.0.resource_mut::<AccountIndex>().0.insert(id, entity);
            entity
        });
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
        world.resource_mut::<AccountIndex>().0.insert(id, entity);
    }
}

/// Every account's balance by id, out of the entities (snapshots, invariants).
pub fn all_accounts(world: &World) -> BTreeMap<AccountId, Balance> {
    world
        .resource::<AccountIndex>()
        .0
        .iter()
        .map(|(id, &e)| (*id, *world.get::<Balance>(e).expect("indexed")))
        .collect()
}
