//! The history a tick hands to the journal's projection (issue 37): every log the engine
//! lets go once the projection holds it, each as the [`Handed`] runs its `ProjectedLog`
//! gave out. A host appends the ticks' hand-outs of one commit and writes them together.

use crate::records::funding::FundingRecord;
use crate::records::log::Handed;
use crate::records::money::Movement;
use crate::records::risk::{Notification, RiskRecord};
use crate::records::trade::{PublicFill, TradeRecord};

/// The history rows of one or more ticks, each list in the order they were made.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HandedHistory {
    /// The ledger movements booked or changed, as they stand (a movement changed again later
    /// comes again, later).
    pub movements: Handed<Movement>,
    /// The trade records made (never changed).
    pub trades: Handed<TradeRecord>,
    /// The public fills made (never changed).
    pub fills: Handed<PublicFill>,
    /// The depreciation notices made (never changed).
    pub notices: Handed<Notification>,
    /// The margin state changes (never changed).
    pub margin: Handed<RiskRecord>,
    /// The funding settlements (never changed).
    pub funding: Handed<FundingRecord>,
}

impl HandedHistory {
    /// How many rows, of every list.
    pub fn len(&self) -> usize {
        self.movements.len()
            + self.trades.len()
            + self.fills.len()
            + self.notices.len()
            + self.margin.len()
            + self.funding.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Moves `more`'s rows after these, list by list.
    pub fn append(&mut self, more: &mut HandedHistory) {
        self.movements.append(&mut more.movements);
        self.trades.append(&mut more.trades);
        self.fills.append(&mut more.fills);
        self.notices.append(&mut more.notices);
        self.margin.append(&mut more.margin);
        self.funding.append(&mut more.funding);
    }

    pub fn clear(&mut self) {
        *self = HandedHistory::default();
    }

    /// Rows whose digest is still owed (see [`crate::records::log::Run`]), of every list.
    pub fn owing(&self) -> usize {
        self.movements.owing()
            + self.trades.owing()
            + self.fills.owing()
            + self.notices.owing()
            + self.margin.owing()
            + self.funding.owing()
    }

    /// Computes the digests the lists' runs owe until `budget` rows are digested (the
    /// journal's writer, off the engine thread); the rows digested.
    pub fn settle(&self, budget: usize) -> usize {
        let mut spent = self.movements.settle(budget);
        spent += self.trades.settle(budget.saturating_sub(spent));
        spent += self.fills.settle(budget.saturating_sub(spent));
        spent += self.notices.settle(budget.saturating_sub(spent));
        spent += self.margin.settle(budget.saturating_sub(spent));
        spent + self.funding.settle(budget.saturating_sub(spent))
    }
}
