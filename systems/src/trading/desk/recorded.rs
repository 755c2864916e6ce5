//! A trade a recording printed, against the book (issue 39's queue model; D11: "a resting
//! order fills by a documented queue model"). The market maker's quotes at a recorded level
//! stand for the recorded volume there, and sit in the book in time priority with
//! customers' orders: volume recorded before a customer's order rested is ahead of it, and
//! what the recording adds later is placed behind it (`simulation::recorded`). A recorded
//! trade then consumes the queue as the venue's matching would:
//!
//! - at prices better than the trade's it went through everything: each customer's order
//!   there fills whole;
//! - at the trade's price it consumes its amount in time priority: a maker quote it meets is
//!   cut by what it meets (that volume traded away), a customer's order fills by what
//!   reaches it.
//!
//! This is hftbacktest's risk-averse queue model: the volume ahead of an order falls only by
//! trades at its price, and by the level shrinking below it (the maker cuts a level from the
//! back), never by volume behind it. Each customer's fill is against the market maker, the
//! taker of the recorded trade, at the order's own price.

use perpsim_core::Decimal;
use perpsim_core::order::Side;

use super::{Desk, Taker};
use crate::records::order::{Lots, OrderRef, Ticks};
use crate::records::simulation::MARKET_MAKER;
use crate::records::trade::TradeKind;
use crate::records::venue::MarketId;
use crate::trading::book::{Fill, Resting};

impl Desk<'_, '_> {
    /// The recorded trade of `amount` at `price` in `market` (on its tick and lot), its
    /// aggressor on `side`, against the resting orders it reaches (see the module).
    pub fn print_recorded_trade(
        &mut self,
        market: MarketId,
        (side, price, amount): (Side, Decimal, Decimal),
    ) {
        let m = &self.exchange.markets[market as usize];
        let (price, mut left): (Ticks, Lots) = (m.ticks(price), m.lots(amount));
        let queue = m.book.queue_through(side.opposite(), price);
        for (r, o) in queue {
            let at_price = o.price == price;
            if at_price && left == 0 {
                break;
            }
            let maker = self.orders.get(o.id).customer == MARKET_MAKER;
            let reach = match at_price {
                true => left.min(o.remaining),
                false => o.remaining,
            };
            if maker {
                if at_price {
                    self.cut_quote(&o, reach);
                }
            } else {
                self.fill_resting(market, side, (r, &o), reach);
            }
            if at_price {
                left -= reach;
            }
        }
    }

    /// A maker quote cut by `lots` the recorded trade consumed: reduced in place (its
    /// priority kept), or cancelled when nothing is left.
    fn cut_quote(&mut self, o: &Resting, lots: Lots) {
        let order = self.orders.get(o.id);
        let reference = order.reference_id.to_string();
        let m = &self.exchange.markets[order.market as usize];
        if lots >= o.remaining {
            let _ = self.cancel(MARKET_MAKER, &reference);
            return;
        }
        let amount = order.filled_amount + m.amount(o.remaining - lots);
        let amend = perpsim_core::entry::Amend {
            amount: Some(amount),
            limit_price: None,
            trigger_price: None,
            expire_time: None,
        };
        let _ = self.amend_open(o.id, &amend);
    }

    /// A customer's resting order filled by `lots` at its own price, the market maker
    /// taking the other side (the recorded trade's aggressor, on `side`).
    fn fill_resting(
        &mut self,
        market: MarketId,
        side: Side,
        (r, o): (OrderRef, &Resting),
        lots: Lots,
    ) {
        let done = lots == o.remaining;
        let book = &mut self.exchange.markets[market as usize].book;
        match done {
            true => book.cancel(r).is_some(),
            false => book.reduce(r, o.remaining - lots),
        };
        let fill = Fill {
            maker_id: o.id,
            maker: r,
            price: o.price,
            lots,
            maker_done: done,
        };
        let taker = Taker {
            order: None,
            customer: MARKET_MAKER,
            kind: TradeKind::Trade,
            terms: self.terms(MARKET_MAKER, market),
        };
        self.with_venue_batch(|desk, batch| {
            desk.settle(&taker, (side, market), &fill, batch);
        });
    }
}
