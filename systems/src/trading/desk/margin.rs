//! Margin at the desk (D5, D8, §4.2): the reserve a resting opening part holds, the part of
//! an order that reduces a position, and account-wide leverage changes with the re-lock of
//! every position's margin.

use perpsim_core::instrument::Asset;
use perpsim_core::risk::{self, MarginState};

use super::*;

impl Desk<'_, '_> {
    /// The part of an order on `side` that would reduce the customer's position in a
    /// market rather than open exposure: its size against the position, else zero.
    pub(super) fn reducible(&self, code: CustomerCode, market: MarketId, side: Side) -> Decimal {
        let size = self.position_size(code, market);
        match side {
            Side::Buy if size < Decimal::ZERO => -size,
            Side::Sell if size > Decimal::ZERO => size,
            _ => Decimal::ZERO,
        }
    }

    /// Reserves `lots` × `rate` of initial margin for an order's resting opening part (D5):
    /// per lot, so each fill releases exactly its share. `account`: the customer's account
    /// in the market's currency where the caller has found it.
    pub(super) fn hold_reserve(
        &mut self,
        id: OrderId,
        (lots, rate): (Lots, Decimal),
        account: Option<Entity>,
    ) {
        let o = self.orders.get_mut(id);
        o.reserve_lots = lots;
        o.reserve_rate = rate;
        let (code, market) = (o.customer, o.market);
        let asset = self.exchange.markets[market as usize].spec.settlement;
        let now = self.clock.now;
        let account_id = AccountId::customer(code, asset);
        let mut accounts = self.accounts.knowing(account_id, account);
        let reserve = Decimal::from(lots) * rate;
        self.ledger
            .adjust_locked(&mut accounts, code, asset, reserve, now);
    }

    /// D8/§4.2: a leverage change is refused when it would put an open position into margin
    /// call: in any settlement currency, (collateral + unrealised PnL) / notional of the
    /// positions settling in it below the new profile's margin-call threshold.
    pub(super) fn check_leverage_change(
        &self,
        code: CustomerCode,
        leverage: u32,
    ) -> Result<(), Error> {
        let profile = margin_profile(leverage).expect("validated leverage");
        let mut currencies: std::collections::BTreeMap<Asset, (Decimal, Decimal)> =
            Default::default();
        for key in self.positions.keys_of(code) {
            let p = self.positions.get(key).expect("listed above");
            let mark = self.instrument(key.1).mark_price;
            let asset = self.exchange.markets[key.1 as usize].spec.settlement;
            let (notional, upnl) = currencies.entry(asset).or_default();
            *notional += p.size.abs() * mark;
            *upnl += p.unrealised_pnl(mark);
        }
        for (asset, (notional, upnl)) in currencies {
            // What backs the positions, as the margin pass reads it: all but what is pending.
            let balance = self.accounts.balance(&AccountId::customer(code, asset));
            let collateral = balance.map_or(Decimal::ZERO, |b| b.total - b.pending);
            let equity = collateral + upnl;
            let state =
                risk::margin_state(equity, notional, profile.maintenance, profile.liquidation);
            if state != MarginState::Normal {
                return Err(Error::validation(format!(
                    "leverage {leverage} would put an open position into margin call: the {} leverage_ratio {} is below the margin-call threshold {}",
                    asset.as_str(),
                    risk::leverage_ratio(equity, notional),
                    profile.maintenance
                )));
            }
        }
        Ok(())
    }

    /// PUT margin-profile (§2.7, §4.2): selects the account-wide profile; a no-op when
    /// already active; refused out of range or when it would put a position into margin call.
    pub(super) fn set_leverage(
        &mut self,
        code: CustomerCode,
        leverage: u32,
    ) -> crate::command::Answer<CustomerView> {
        if leverage == 0 || leverage > MAX_LEVERAGE || margin_profile(leverage).is_none() {
            return Err(Error::validation(format!(
                "leverage must be between 1 and max_leverage {MAX_LEVERAGE}, got {leverage}"
            )));
        }
        if self.customer(code)?.leverage != leverage {
            self.check_leverage_change(code, leverage)?;
            self.apply_leverage(code, leverage);
        }
        Ok(CustomerView::from(self.customer(code)?))
    }

    pub(super) fn apply_leverage(&mut self, code: CustomerCode, leverage: u32) {
        let entity = self.registry.customers[&code];
        self.customers
            .get_mut(entity)
            .expect("indexed customer")
            .leverage = leverage;
        self.relock_positions(code, MarginRate::of_leverage(leverage));
    }

    /// Positions lock `|size| × entry_price × initial margin` of the customer's profile:
    /// after a profile change every position's margin and rate are recomputed and `locked`
    /// follows.
    pub(super) fn relock_positions(&mut self, code: CustomerCode, new_rate: MarginRate) {
        for key in self.positions.keys_of(code) {
            let asset = self.exchange.markets[key.1 as usize].spec.settlement;
            let (p, rate) = self.positions.get_mut(key).expect("listed above");
            let margin = perpsim_core::decimal::round_ledger(
                p.size.abs() * p.entry_price * new_rate.initial,
            );
            let delta = margin - p.margin;
            p.margin = margin;
            *rate = new_rate;
            self.exchange.dirty.positions.push(key);
            let now = self.clock.now;
            self.ledger
                .adjust_locked(&mut self.accounts, code, asset, delta, now);
        }
    }
}
