//! Cancel and amend (§3.1; D5): the open order of a reference, changed in place or ended.

use bevy_ecs::entity::Entity;
use perpsim_core::instrument::{Asset, InstrumentSpec};
use perpsim_core::time::Timestamp;

use super::*;
use crate::records::money::AccountId;

impl Desk<'_, '_> {
    pub fn cancel(&mut self, code: CustomerCode, reference: &str) -> Result<OrderId, Error> {
        let id = self.open_order(code, reference, ErrorCode::OrderNotCancellable)?;
        self.finish(id, OrderStatus::Canceled, Some(EndReason::UserInitiated));
        Ok(id)
    }

    /// The open order a reference names; `conflict` (409) alone when none is open. The
    /// engine keeps nothing of ended orders' references: who answers names the status of the
    /// latest that ended under it, or answers 404 (`perpsim_core::order::not_open`). An
    /// unknown customer is 404 too: asked only when no order is found, since an open order's
    /// customer exists (customers are never removed).
    pub(super) fn open_order(
        &self,
        code: CustomerCode,
        reference: &str,
        conflict: ErrorCode,
    ) -> Result<OrderId, Error> {
        if let Some(id) = self.orders.open_by_ref(code, reference) {
            return Ok(id);
        }
        self.customer(code)?;
        Err(Error::new(
            conflict,
            format!("no order is open under {reference}"),
        ))
    }

    pub fn amend(
        &mut self,
        code: CustomerCode,
        reference: &str,
        amend: &Amend,
    ) -> Result<OrderId, Error> {
        let id = self.open_order(code, reference, ErrorCode::OrderNotAmendable)?;
        self.amend_open(id, amend)
    }

    /// [`Desk::amend`] of an order known by its id and open, as the market maker moves its
    /// quotes: without looking its reference up. Checked on the order in place (no copy of
    /// it: the maker moves a quote a market a simulated second), then applied.
    pub fn amend_open(&mut self, id: OrderId, amend: &Amend) -> Result<OrderId, Error> {
        let amended = self.check_amend(id, amend)?;
        self.apply_amend(id, amend, amended);
        Ok(id)
    }

    /// Every check of an amend, in the order its errors are answered: the market's status,
    /// the fields (rules as at entry), the venue maximum, rule 8 for a new trigger, post-only,
    /// then the initial margin the new reserve needs (D5).
    fn check_amend(&self, id: OrderId, amend: &Amend) -> Result<Amended, Error> {
        let now = self.clock.now;
        let o = self.orders.get(id);
        assert!(o.is_open(), "order {id} is open to be amended");
        let (status, mark) = {
            let i = self.instrument(o.market);
            (i.status, i.mark_price)
        };
        let m = &self.exchange.markets[o.market as usize];
        if status == InstrumentStatus::TradeHalt {
            return Err(rejected(format!(
                "{} is in trade_halt: orders cannot be amended",
                m.spec.symbol
            )));
        }
        check_amend_fields(o, amend, &m.spec, now)?;
        if amend.expire_time.is_some() {
            self.scheduler.room_for_request()?;
        }
        let amount = amend.amount.unwrap_or(o.amount);
        let limit = amend.limit_price.or(o.limit_price);
        // The venue maximum holds for the amended order as it did at entry.
        let trigger = amend.trigger_price.or(o.trigger_price());
        entry::check_notional(amount, limit.or(trigger).unwrap_or(mark))?;
        if let Some(t) = amend.trigger_price {
            // Rule 8 holds for the new trigger as it did at entry.
            let entry = OrderEntry {
                amount: Some(amount),
                limit_price: limit,
                trigger_price: Some(t),
                ..OrderEntry::new(o.side, o.kind, o.reference_id.to_string())
            };
            let reference = Reference {
                last_trade_price: m.last_price.unwrap_or(mark),
                mark_price: mark,
                now,
            };
            entry::validate(&entry, &m.spec, &reference)?;
        }
        let guarded = o.resting.is_some() && (o.post_only || status == InstrumentStatus::PostOnly);
        if guarded && limit.is_some_and(|p| m.book.crosses(o.side, Some(m.ticks(p)))) {
            return Err(rejected(
                "the amended order would take liquidity".to_owned(),
            ));
        }
        let reserve = self.amended_reserve(o, amount, limit)?;
        Ok(Amended {
            amount,
            limit,
            reserve,
        })
    }

    /// The reserve that follows the resting opening part at the new price and size, and
    /// whether the customer's available balance covers what it adds (D5).
    fn amended_reserve(
        &self,
        o: &Order,
        amount: Decimal,
        limit: Option<Decimal>,
    ) -> Result<Reserve, Error> {
        let code = o.customer;
        let m = &self.exchange.markets[o.market as usize];
        let asset = m.spec.settlement;
        let lots = if o.works_as_limit() && (o.reserve_lots > 0 || amount > o.amount) {
            m.opening_lots(
                amount - o.filled_amount,
                self.reducible(code, o.market, o.side),
            )
        } else {
            0
        };
        let rate = limit.map_or(Decimal::ZERO, |p| {
            m.reserve_rate(p, self.initial_margin(code))
        });
        let delta = Decimal::from(lots) * rate - o.reserved();
        // One search of the account for the check and the booking after it.
        let account = AccountId::customer(code, asset);
        let entity = self.accounts.entity(&account);
        let available = entity.map_or(Decimal::ZERO, |e| self.accounts.at(e).available());
        if delta > available {
            return Err(Error::new(
                ErrorCode::InsufficientFunds,
                format!(
                    "the amended order needs {delta} {} more initial margin",
                    asset.as_str()
                ),
            ));
        }
        Ok(Reserve {
            lots,
            rate,
            delta,
            account: (code, asset, entity),
        })
    }

    /// Applies a checked amend: the reserve moved, the order changed in place, its expiry
    /// timer and trigger moved, and a resting order re-queued when it loses its priority
    /// (a larger amount or a new price) or reduced in place when it does not.
    fn apply_amend(&mut self, id: OrderId, amend: &Amend, amended: Amended) {
        let now = self.clock.now;
        let Amended {
            amount,
            limit,
            reserve,
        } = amended;
        let (code, asset, entity) = reserve.account;
        self.ledger.adjust_locked(
            &mut self
                .accounts
                .knowing(AccountId::customer(code, asset), entity),
            code,
            asset,
            reserve.delta,
            now,
        );
        let e = self.orders.get_mut(id);
        let (was, market, untriggered, old_expiry) =
            (e.amount, e.market, e.waiting(), e.expire_time());
        let loses_priority = amount > was || limit != e.limit_price;
        let resting = e.resting.filter(|_| !untriggered);
        e.amount = amount;
        e.limit_price = limit;
        e.reserve_lots = reserve.lots;
        e.reserve_rate = reserve.rate;
        e.created = now;
        if let Some(t) = amend.expire_time {
            e.set_expire_time(t);
        }
        if resting.is_some() && loses_priority {
            e.resting = None;
            e.priority = None;
        }
        let unfilled = amount - e.filled_amount;
        if let Some(t) = amend.expire_time {
            if let Some(old) = old_expiry {
                self.scheduler.cancel(old, ScheduledEvent::OrderExpiry(id));
            }
            self.scheduler.schedule(t, ScheduledEvent::OrderExpiry(id));
        }
        if untriggered {
            self.disarm(id);
            if let Some(t) = amend.trigger_price {
                let trigger = self.orders.get_mut(id).trigger_mut();
                trigger
                    .expect("a waiting order has a trigger")
                    .trigger_price = Some(t);
            }
            self.arm(id);
        } else if let Some(r) = resting {
            let m = &mut self.exchange.markets[market as usize];
            if loses_priority {
                m.book.cancel(r);
                self.execute(id, None);
            } else if amount < was {
                let lots = m.lots(unfilled);
                m.book.reduce(r, lots);
            }
        }
        self.exchange.mark_order(id);
    }
}

/// An amend that passed every check: the order's new amount and limit, and its reserve.
struct Amended {
    amount: Decimal,
    limit: Option<Decimal>,
    reserve: Reserve,
}

/// An amended order's new reserve (its lots and rate per lot), what it adds to the locked
/// balance, and the account that holds it (its entity, found by the check; none when the
/// customer holds nothing in the asset yet).
struct Reserve {
    lots: Lots,
    rate: Decimal,
    delta: Decimal,
    account: (CustomerCode, Asset, Option<Entity>),
}

/// The checks of an amend's own fields against the order (§4.3's rules, through core's, so
/// worded as at entry): a positive amount on the lot grid above what has filled, prices only
/// where the order uses them, positive and on the tick grid, and a future expiry only for a
/// GTD order.
fn check_amend_fields(
    o: &Order,
    amend: &Amend,
    spec: &InstrumentSpec,
    now: Timestamp,
) -> Result<(), Error> {
    let refuse = |field: &str| {
        Error::validation(format!(
            "{field} cannot be amended on a {} order",
            o.kind.stored_str()
        ))
    };
    if let Some(a) = amend.amount {
        entry::check_positive("amount", a, 1)?;
        entry::check_lot(a, spec)?;
        if a <= o.filled_amount {
            return Err(Error::validation(format!(
                "amount must be above the filled amount {}",
                o.filled_amount
            )));
        }
    }
    let uses_trigger = o.trigger_price().is_some() && o.waiting();
    for (field, value, used, rule) in [
        ("limit_price", amend.limit_price, o.limit_price.is_some(), 3),
        ("trigger_price", amend.trigger_price, uses_trigger, 4),
    ] {
        if let Some(p) = value {
            if !used {
                return Err(refuse(field));
            }
            entry::check_positive(field, p, rule)?;
            entry::check_price(field, p, spec)?;
        }
    }
    if let Some(t) = amend.expire_time {
        if o.time_in_force != TimeInForce::Gtd {
            return Err(refuse("expire_time"));
        }
        if t <= now {
            return Err(Error::validation(format!(
                "expire_time must be in the future (now {now})"
            )));
        }
    }
    Ok(())
}
