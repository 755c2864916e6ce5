//! Customer money and account settings: transfers (D7), the transfer switch (D3), margin
//! profile, provisioning and fee profile (§2.7, §2.8, D8).

use std::sync::Arc;

use bevy_ecs::prelude::{Mut, Res, ResMut, World};
use perpsim_core::ids::{CustomerCode, MovementCode};
use perpsim_core::instrument::Asset;
use perpsim_core::money::FeeRates;
use perpsim_core::{Decimal, Error};

use crate::clock::{DueEvents, Scheduler, SimClock};
use crate::command::Answer;
use crate::command::{EngineEvent, TickEvents};
use crate::money::ledger::{Books, Ledger};
use crate::money::store::{Accounts, WorldAccounts};
use crate::records::clock::ScheduledEvent;
use crate::records::money::{Movement, MovementKind};
use crate::records::venue::Customer;
use crate::records::venue::CustomerView;
use crate::registry::{Registry, customer_entity, instrument_entity};
use crate::rng::EngineRng;

/// Records a deposit or withdrawal as pending and schedules its completion `delay_ms` later;
/// `committed` is what the customer's open positions in `asset` commit at the marks
/// (see [`Ledger::request_transfer`]).
pub fn request_transfer(
    world: &mut World,
    customer: CustomerCode,
    kind: (MovementKind, Decimal),
    asset: Asset,
    amount: Decimal,
    delay_ms: i64,
) -> Answer<Movement> {
    let entity = customer_entity(world, customer)?;
    let broker = world
        .get::<Customer>(entity)
        .expect("indexed customer")
        .broker;
    let now = world.resource::<SimClock>().now;
    world.resource::<Scheduler>().room_for_request()?;
    let movement = world.resource_scope(|world, mut rng: Mut<EngineRng>| {
        world.resource_scope(|world, mut ledger: Mut<Ledger>| {
            let mut accounts = WorldAccounts(world);
            let mut books = Books {
                accounts: &mut accounts,
                rng: &mut rng.0,
                now,
            };
            ledger
                .request_transfer(&mut books, (customer, broker), kind, asset, amount)
                .cloned()
        })
    })?;
    world.resource_mut::<Scheduler>().schedule(
        now.plus_millis(delay_ms),
        ScheduledEvent::TransferDue(movement.seq),
    );
    Ok(movement)
}

/// Ends a pending transfer without booking it (admin: the venue refused it).
pub fn cancel_transfer(world: &mut World, code: MovementCode) -> Answer<Movement> {
    let now = world.resource::<SimClock>().now;
    let movement = world.resource_scope(|world, mut ledger: Mut<Ledger>| {
        ledger
            .cancel_transfer(&mut WorldAccounts(world), code, now)
            .cloned()
    })?;
    world
        .resource_mut::<TickEvents>()
        .0
        .push(EngineEvent::Movement(Arc::new(movement.clone())));
    Ok(movement)
}

pub fn set_transfers_available(world: &mut World, available: bool) -> Answer<bool> {
    world
        .resource_mut::<Ledger>()
        .set_transfers_available(available);
    Ok(available)
}

fn update_customer(
    world: &mut World,
    code: CustomerCode,
    change: impl FnOnce(&mut Customer) -> Result<bool, Error>,
) -> Answer<CustomerView> {
    let entity = customer_entity(world, code)?;
    let mut customer = world.get_mut::<Customer>(entity).expect("indexed customer");
    // Mutate through a copy so an unchanged or refused update does not trip change detection.
    let mut updated = customer.clone();
    if change(&mut updated)? {
        *customer = updated;
    }
    Ok(CustomerView::from(&*customer))
}

pub fn set_provisioned(
    world: &mut World,
    code: CustomerCode,
    provisioned: bool,
) -> Answer<CustomerView> {
    update_customer(world, code, |c| {
        Ok(std::mem::replace(&mut c.provisioned, provisioned) != provisioned)
    })
}

/// Sets maker and/or taker fees for one symbol or, with `symbol` None, for every instrument.
pub fn set_fees(
    world: &mut World,
    code: CustomerCode,
    symbol: Option<&str>,
    maker: Option<Decimal>,
    taker: Option<Decimal>,
) -> Answer<CustomerView> {
    let symbols: Vec<String> = match symbol {
        Some(s) => {
            instrument_entity(world, s)?;
            vec![s.to_owned()]
        }
        None => world
            .resource::<Registry>()
            .instruments
            .keys()
            .cloned()
            .collect(),
    };
    update_customer(world, code, |c| {
        let before = c.fees.clone();
        for symbol in symbols {
            let rates = c
                .fees
                .entry(symbol)
                .or_insert(perpsim_core::money::DEFAULT_FEES);
            *rates = FeeRates {
                maker_bps: maker.unwrap_or(rates.maker_bps),
                taker_bps: taker.unwrap_or(rates.taker_bps),
            };
        }
        Ok(c.fees != before)
    })
}

/// TransferSystems: completes the transfers whose time has come, in the order they were due.
pub fn complete_due_transfers(
    clock: Res<SimClock>,
    due: Res<DueEvents>,
    mut ledger: ResMut<Ledger>,
    mut accounts: Accounts,
    mut events: ResMut<TickEvents>,
) {
    for event in &due.0 {
        if let ScheduledEvent::TransferDue(seq) = event {
            // A transfer cancelled meanwhile is simply no longer pending.
            if let Ok(m) = ledger.complete_transfer(&mut accounts, *seq, clock.now) {
                events.0.push(EngineEvent::Movement(Arc::new(m.clone())));
            }
        }
    }
    accounts.flush();
}
