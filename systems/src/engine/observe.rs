//! What a scenario's report samples while the engine runs with publishing off: each market's
//! prices and a customer's figures in one settlement currency, read from the live state
//! without building the read view (a replay keeps the view off: it costs a map write per
//! change, and a report samples a few hundred instants); and, at the end, the [`Closing`]
//! state its files are written from, borrowed from the live state and its logs rather than
//! copied into the view (which for a million orders held every row twice).

use std::collections::BTreeMap;
use std::sync::Arc;

use bevy_ecs::entity::Entity;
use perpsim_core::Decimal;
use perpsim_core::ids::CustomerCode;
use perpsim_core::instrument::{Asset, InstrumentSpec};

use super::Engine;
use crate::money::ledger::Ledger;
use crate::money::store::AccountIndex;
use crate::money::store::all_accounts;
use crate::positions::{PositionIndex, ValuationBasis};
use crate::records::funding::FundingRecord;
use crate::records::log::Log;
use crate::records::money::{AccountId, Balance, Movement, VenueAccount};
use crate::records::order::Order;
use crate::records::position::Position;
use crate::records::trade::{PublicFill, TradeRecord};
use crate::records::venue::{Customer, InstrumentState, MarketId, MarketSlot};
use crate::risk::margin::MarginBook;
use crate::settlement::funding::FundingState;
use crate::trading::exchange::Exchange;
use crate::trading::orders::WorldOrders;

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
    /// The open order under a reference, else the latest that ended in the last tick: the
    /// engine holds no record of an order past the tick it ended in (the host's projection
    /// does), nor does the read view.
    pub fn order_by_ref(&self, customer: CustomerCode, reference: &str) -> Option<Arc<Order>> {
        WorldOrders(&self.world)
            .by_ref(customer, reference)
            .map(Arc::clone)
    }

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

    /// The balance of a venue account in `asset` (zero for one never touched): what a
    /// report charts of fees, clearing and insurance over a run.
    pub fn venue_balance(&self, account: VenueAccount, asset: Asset) -> Decimal {
        let id = AccountId::venue(account, asset);
        let entity = self.world.resource::<AccountIndex>().get(&id);
        let balance = entity.and_then(|e| self.world.get::<Balance>(e));
        balance.map_or(Decimal::ZERO, |b| b.total)
    }

    /// A customer's figures in `asset`; all zero for an account never touched.
    pub fn account_figures(&self, customer: CustomerCode, asset: Asset) -> AccountFigures {
        self.accounts_figures(&[customer], &[asset])[0]
    }

    /// Each customer's figures in each asset, customer by customer (`[customer × assets +
    /// asset]`), as [`Engine::account_figures`] gives them one by one: the resources read once
    /// for all, in one list (a report samples every customer in every currency a few hundred
    /// times a run: four resource look-ups were a tenth of each customer's figures, and a list
    /// of its own a customer another tenth).
    pub fn accounts_figures(
        &self,
        customers: &[CustomerCode],
        assets: &[Asset],
    ) -> Vec<AccountFigures> {
        let world = &self.world;
        // Queries' states resolve the components once, where each look-up by entity found
        // them by type again (for every balance and position of every customer a sample
        // reads). A component never registered has no entity holding it: no query then.
        let (held, balances) = (
            world.try_query::<(&Position, &ValuationBasis)>(),
            world.try_query::<&Balance>(),
        );
        let held = held.as_ref().map(|q| q.query_manual(world));
        let balances = balances.as_ref().map(|q| q.query_manual(world));
        let position = |e: Entity| {
            let held = held.as_ref().and_then(|q| q.get(e).ok());
            held.expect("held positions are live")
        };
        let (index, book) = (
            world.resource::<AccountIndex>(),
            world.resource::<MarginBook>(),
        );
        let figures = |customer: CustomerCode, asset: Asset| {
            let id = AccountId::customer(customer, asset);
            let balance = index.get(&id).and_then(|e| balances.as_ref()?.get(e).ok());
            let Some(balance) = balance else {
                return AccountFigures::default();
            };
            let (equity, notional) = book
                .figures((customer, asset), &position)
                .unwrap_or((balance.total - balance.pending, Decimal::ZERO));
            AccountFigures {
                total: balance.total,
                equity,
                notional,
            }
        };
        let each = customers
            .iter()
            .flat_map(|c| assets.iter().map(|a| (*c, *a)));
        each.map(|(c, a)| figures(c, a)).collect()
    }
}

/// The live state a run ends in, as its report reads it: the accounts, positions and markets
/// as they stand. Not the logs: a run hands its history out as it goes and holds only a
/// window of it at the end (the report tallies them as they stream out).
pub struct Closing<'a> {
    /// By market id.
    pub markets: Vec<ClosingMarket<'a>>,
    /// Every account, customers' and the venue's.
    pub balances: BTreeMap<AccountId, Balance>,
    /// Open positions by (customer, market).
    pub positions: BTreeMap<(CustomerCode, MarketId), &'a Position>,
}

/// A market as the run leaves it.
pub struct ClosingMarket<'a> {
    pub spec: &'a InstrumentSpec,
    pub index_price: Decimal,
    pub mark_price: Decimal,
    pub open_interest: Decimal,
}

impl Engine {
    /// Every ledger movement, indexed by sequence number: what the engine itself holds (the
    /// read view holds none; a server reads them from the journal's projection).
    pub fn movements(&self) -> &Log<Movement> {
        self.world.resource::<Ledger>().movements()
    }

    /// Every trade record, indexed by sequence number (the read view holds none; a server
    /// reads them from the journal's projection).
    pub fn trades(&self) -> &Log<TradeRecord> {
        &self.world.resource::<Exchange>().trades
    }

    /// The public fills the engine holds, indexed by sequence number (likewise).
    pub fn fills(&self) -> &Log<PublicFill> {
        &self.world.resource::<Exchange>().fills
    }

    /// Every funding settlement, indexed by sequence number (the read view holds none; a
    /// server reads them from the journal's projection).
    pub fn funding_history(&self) -> &Log<FundingRecord> {
        &self.world.resource::<FundingState>().history
    }

    /// The markets' symbols, by market id.
    pub fn market_symbols(&self) -> Vec<String> {
        let exchange = self.world.resource::<Exchange>();
        exchange
            .markets
            .iter()
            .map(|m| m.spec.symbol.clone())
            .collect()
    }

    /// The state the run ends in, for its report.
    /// The leverage of the margin profile customer `code` has as the run leaves it (D8), if
    /// there is such a customer: what a report draws its thresholds from.
    pub fn leverage_of(&self, code: CustomerCode) -> Option<u32> {
        let entity = crate::registry::customer_entity(&self.world, code).ok()?;
        self.world.get::<Customer>(entity).map(|c| c.leverage)
    }

    pub fn closing(&self) -> Closing<'_> {
        let world = &self.world;
        let exchange = world.resource::<Exchange>();
        let prices = self.prices();
        let markets = exchange
            .markets
            .iter()
            .zip(&prices)
            .map(|(m, p)| ClosingMarket {
                spec: &m.spec,
                index_price: p.index,
                mark_price: p.mark,
                open_interest: m.open_interest,
            })
            .collect();
        let positions = world
            .resource::<PositionIndex>()
            .map()
            .iter()
            .map(|(&key, &e)| {
                let p = world
                    .get::<Position>(e)
                    .expect("indexed positions are live");
                (key, p)
            })
            .collect();
        Closing {
            markets,
            balances: all_accounts(world),
            positions,
        }
    }
}
