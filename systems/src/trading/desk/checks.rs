//! The stateful checks of order entry that need the book or the customer's orders: the
//! instrument's status and post_only (D5), the smallest order (one lot, cash orders
//! included), and the D4 bound on a customer's open orders. The stateless rules of §4.3 are
//! `perpsim_core::entry`'s.

use perpsim_core::entry::{NewOrder, OrderEntry, Quantity};
use perpsim_core::ids::CustomerCode;
use perpsim_core::instrument::InstrumentStatus;
use perpsim_core::order::{OrderType, Side, TimeInForce};
use perpsim_core::{Decimal, Error};

use super::{Desk, rejected};
use crate::records::venue::MarketId;

impl Desk<'_, '_> {
    /// D4: a customer holds at most `max_open_orders` open orders; past it a new order that
    /// could stay open is refused. Orders that end in their own request pass, so a customer
    /// at the bound can still trade out of a position.
    pub(super) fn check_open_orders(
        &self,
        customer: CustomerCode,
        entry: &OrderEntry,
    ) -> Result<(), Error> {
        let bound = self.limits.0.max_open_orders;
        let open = self.orders.open_orders(customer);
        match entry.can_rest() && open >= bound {
            true => Err(rejected(format!(
                "the customer already holds {open} open orders, the most one customer may \
                 hold (max open orders {bound}); cancel one first"
            ))),
            false => Ok(()),
        }
    }

    /// D5: trade_halt refuses every new order; post_only takes only limit orders that rest.
    pub(super) fn check_status(
        &self,
        market: MarketId,
        status: InstrumentStatus,
        new: &NewOrder,
    ) -> Result<(), Error> {
        let m = &self.exchange.markets[market as usize];
        let crosses = |o: &NewOrder| {
            o.limit_price()
                .is_some_and(|p| m.book.crosses(o.side, Some(m.ticks(p))))
        };
        match status {
            InstrumentStatus::TradeHalt => Err(rejected(format!(
                "{} is in trade_halt: new orders are rejected",
                m.spec.symbol
            ))),
            InstrumentStatus::PostOnly
                if new.kind() != OrderType::Limit
                    || !matches!(new.quantity(), Quantity::Amount(_))
                    || !matches!(new.time_in_force, TimeInForce::Gtc | TimeInForce::Gtd)
                    || crosses(new) =>
            {
                Err(rejected(format!(
                    "{} is post_only: only limit orders that rest are accepted",
                    m.spec.symbol
                )))
            }
            _ if new.post_only && crosses(new) => Err(rejected(
                "a post_only order would take liquidity".to_owned(),
            )),
            _ => Ok(()),
        }
    }

    /// No order is for less than one lot, a cash order included: its cash must buy a whole
    /// lot at the price it would first trade at — the best opposite level within its limit,
    /// else its limit price, else the mark. (An amount is on the lot grid and positive, so
    /// it is at least one lot already.)
    pub(super) fn check_cash_buys_a_lot(
        &self,
        market: MarketId,
        new: &NewOrder,
        cash: Decimal,
        mark: Decimal,
    ) -> Result<(), Error> {
        let m = &self.exchange.markets[market as usize];
        let limit = new.limit_price().map(|p| m.ticks(p));
        let best = match new.side {
            Side::Buy => m.book.best_ask(),
            Side::Sell => m.book.best_bid(),
        };
        let price = best
            .filter(|_| m.book.crosses(new.side, limit))
            .map(|(p, _)| m.price(p))
            .or(new.limit_price())
            .unwrap_or(mark);
        let lot = m.spec.lot_size;
        match cash < lot * price {
            true => Err(rejected(format!(
                "cash_amount {cash} buys less than one lot ({lot} at {price}); an order is at \
                 least one lot"
            ))),
            false => Ok(()),
        }
    }
}
