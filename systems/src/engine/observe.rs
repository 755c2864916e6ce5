//! What a scenario's report samples while the engine runs with publishing off: each market's
//! prices and a customer's figures in one settlement currency, read from the live state
//! without building the read view (a replay keeps the view off: it costs a map write per
//! change, and a report samples a few hundred instants).

use perpsim_core::Decimal;
use perpsim_core::ids::CustomerCode;
use perpsim_core::instrument::Asset;

use super::Engine;
use crate::money::store::AccountIndex;
use crate::positions::{PositionIndex, ValuationBasis};
use crate::records::money::{AccountId, Balance};
use crate::records::position::Position;
use crate::records::venue::{InstrumentState, MarketId, MarketSlot};
use crate::risk::margin::MarginBook;
use crate::trading::exchange::Exchange;

/// A market's prices at the instant observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarketPrices {
    pub market: MarketId,
    pub index: Decimal,
    pub mark: Decimal,
}

/// A customer's money in one settlement currency at the instant observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AccountFigures {
    /// The balance: every completed movement summed.
    pub total: Decimal,
    /// Collateral (total − pending) plus the unrealised PnL of the positions settling in it,
    /// as the last margin pass left it.
    pub equity: Decimal,
    /// Σ |size| × mark of those positions.
    pub notional: Decimal,
}

impl Engine {
    /// Every market's index and mark price, by market id.
    pub fn prices(&self) -> Vec<MarketPrices> {
        let mut prices: Vec<MarketPrices> = self
            .world
            .try_query::<(&MarketSlot, &InstrumentState)>()
            .map(|q| {
                q.iter_manual(&self.world)
                    .map(|(slot, s)| MarketPrices {
                        market: slot.0,
                        index: s.index_price,
                        mark: s.mark_price,
                    })
                    .collect()
            })
            .unwrap_or_default();
        prices.sort_by_key(|p| p.market);
        prices
    }

    /// A customer's figures in `asset`; all zero for an account never touched.
    pub fn account_figures(&self, customer: CustomerCode, asset: Asset) -> AccountFigures {
        let id = AccountId::customer(customer, asset);
        let balance = self
            .world
            .resource::<AccountIndex>()
            .0
            .get(&id)
            .and_then(|e| self.world.get::<Balance>(*e));
        let Some(balance) = balance else {
            return AccountFigures::default();
        };
        let world = &self.world;
        let position = |e| {
            let p = world
                .get::<Position>(e)
                .expect("indexed positions are live");
            (
                p,
                world
                    .get::<ValuationBasis>(e)
                    .expect("positions have a basis"),
            )
        };
        let book = world.resource::<MarginBook>();
        let (exchange, held) = (
            world.resource::<Exchange>(),
            world.resource::<PositionIndex>(),
        );
        let (equity, notional) = book
            .figures((customer, asset), exchange, held, &position)
            .unwrap_or((balance.total - balance.pending, Decimal::ZERO));
        AccountFigures {
            total: balance.total,
            equity,
            notional,
        }
    }
}
