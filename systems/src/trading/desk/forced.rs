//! Forced closes (D10), the desk's surface for a liquidation: the customer's open orders
//! cancelled, its position closed by an IOC taker with no order against the book (trades of
//! type `liquidation`, reference_id null; the makers' sides are ordinary trades), what the
//! book could not absorb closed at the mark against chosen opposite positions (both sides
//! `auto_deleveraging`, no fee), and a negative balance left over covered by insurance.

use std::collections::BTreeSet;
use std::sync::Arc;

use perpsim_core::instrument::Asset;

use super::*;
use crate::money::ledger::Books;
use crate::records::money::AccountId;

impl Desk<'_, '_> {
    /// Cancels (reason LIQUIDATION) every open order, conditional ones included, of the
    /// (customer, settlement asset) pairs being liquidated, in id order.
    pub fn cancel_for_liquidation(&mut self, liquidating: &BTreeSet<(CustomerCode, Asset)>) {
        let markets = &self.exchange.markets;
        let ids = self.orders.live_ids(|o| {
            o.is_open()
                && liquidating.contains(&(o.customer, markets[o.market as usize].spec.settlement))
        });
        for id in ids {
            self.finish(id, OrderStatus::Canceled, Some(EndReason::Liquidation));
        }
    }

    /// Closes as much of the customer's position in `market` as the book absorbs: an IOC
    /// market taker with no order, at the customer's taker fee. Returns the lots left open.
    pub fn liquidate_on_book(&mut self, customer: CustomerCode, market: MarketId) -> Lots {
        let size = self.position_size(customer, market);
        if size.is_zero() {
            return 0;
        }
        let side = if size > Decimal::ZERO {
            Side::Sell
        } else {
            Side::Buy
        };
        let want = self.exchange.markets[market as usize].lots(size.abs());
        let taker = |desk: &Self| Taker {
            order: None,
            customer,
            kind: TradeKind::Liquidation,
            terms: desk.terms(customer, market),
        };
        self.sweep(taker, (side, market), None, want).0
    }

    /// Auto-deleveraging: closes `lots` of `customer`'s position in `market` against
    /// `counterparty`'s opposite one at `price` (the mark). Both sides forced, no fee; the
    /// liquidated side is the taker.
    pub fn deleverage(
        &mut self,
        customer: CustomerCode,
        counterparty: CustomerCode,
        market: MarketId,
        lots: Lots,
        price: Decimal,
    ) {
        let size = self.position_size(customer, market);
        let side = if size > Decimal::ZERO {
            Side::Sell
        } else {
            Side::Buy
        };
        let forced = |code: CustomerCode, side: Side, liquidity, terms: Terms| FillSide {
            order: None,
            kind: TradeKind::AutoDeleveraging,
            customer: code,
            broker: terms.broker,
            side,
            fee_bps: Decimal::ZERO,
            rate: terms.rate,
            liquidity,
        };
        let sides = [
            forced(
                customer,
                side,
                Liquidity::Taker,
                self.terms(customer, market),
            ),
            forced(
                counterparty,
                side.opposite(),
                Liquidity::Maker,
                self.terms(counterparty, market),
            ),
        ];
        self.with_venue_batch(|desk, batch| {
            desk.book((market, price, lots), sides, batch);
        });
    }

    /// D10: a negative balance of a customer with no open position left in `asset` is
    /// covered by the insurance account (a `liquidation` row naming `symbol`). Returns
    /// whether it was. The balance is taken net of pending withdrawals, as the margin pass
    /// weighs it: a withdrawal accepted before the loss still completes, and never leaves
    /// the account below zero.
    pub fn cover_negative(
        &mut self,
        customer: CustomerCode,
        asset: Asset,
        symbol: &Arc<str>,
    ) -> bool {
        let total = self
            .accounts
            .balance(&AccountId::customer(customer, asset))
            .map_or(Decimal::ZERO, |b| b.total - b.pending);
        let exposed =
            self.positions.keys_of(customer).iter().any(|&(_, market)| {
                self.exchange.markets[market as usize].spec.settlement == asset
            });
        if total >= Decimal::ZERO || exposed {
            return false;
        }
        let broker = self
            .customer(customer)
            .expect("balances belong to existing customers")
            .broker;
        let now = self.clock.now;
        let mut books = Books {
            accounts: &mut self.accounts,
            rng: &mut self.rng.0,
            now,
        };
        self.ledger.book_cover(
            &mut books,
            (customer, broker),
            asset,
            -total,
            Arc::clone(symbol),
        );
        true
    }

    /// The customer accounts bookings left below zero since the last call (see
    /// [`Ledger::take_went_negative`]).
    pub fn take_went_negative(&mut self) -> Vec<(CustomerCode, Asset, Arc<str>)> {
        self.ledger.take_went_negative()
    }

    /// The lots of a signed size in a market.
    pub fn lots_of(&self, market: MarketId, size: Decimal) -> Lots {
        self.exchange.markets[market as usize].lots(size.abs())
    }

    /// Every open position, in no particular order: the candidates of auto-deleveraging.
    pub fn open_positions(&self) -> impl Iterator<Item = &crate::records::position::Position> {
        self.positions.iter()
    }
}
