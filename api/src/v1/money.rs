//! Deposits, withdrawals, balances and the transaction ledger (interface §2.5, §2.9, §3.2,
//! §4.2; D7). Balances come from the read view; the transaction lists from the journal's
//! projection (`perpsim_storage::Movements`), which holds every movement.

use std::cmp::Reverse;
use std::ops::Bound;
use std::sync::Arc;

use perpsim_core::ids::CustomerCode;
use perpsim_core::instrument::Asset;
use perpsim_core::time::{TimeBound, Timestamp};
use perpsim_core::{Decimal, Error};
use perpsim_storage::{Holder, JournalError, Movements};
use perpsim_systems::command::TransferKind;
use perpsim_systems::records::ids::MovementSeq;
use perpsim_systems::records::money::{Balance, Movement, MovementKind, MovementStatus};
use poem::web::Data;
use poem_openapi::param::Query;
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Enum, Object, OpenApi};

use super::history::{self, ListKeys};
use super::{Signed, Tag, customer, customer_of};
use crate::columns::{funding_rate, settlement_mark, symbol};
use crate::contract::Nullable;
use crate::errors::ApiError;
use crate::pagination::{self, PageQuery, PageRequest, ResponseMetadata, Scope};
use crate::requests::money::{TransferRequest, asset, transfer_command};
use crate::state::AppState;
use crate::state::host::history_read_failed;
use crate::wire::{DecimalOut, Time, query_time};

#[derive(Enum, Debug, Clone, Copy, PartialEq, Eq)]
#[oai(rename_all = "snake_case")]
pub enum TransactionType {
    Deposit,
    Withdrawal,
    /// An order's fill.
    Trade,
    /// A liquidation's forced fill against the book (reference_id null); also the insurance
    /// account's cover of a negative balance a liquidation left (realised_pnl = the amount,
    /// fee 0, trade_code null).
    Liquidation,
    /// A forced close at the mark price against the liquidated side (D10), no fee.
    AutoDeleveraging,
    /// Daily mark-to-market.
    Settlement,
    Funding,
}

#[derive(Enum, Debug, Clone, Copy, PartialEq, Eq)]
#[oai(rename_all = "snake_case")]
pub enum TransactionStatus {
    Pending,
    Completed,
    Cancelled,
}

#[derive(Enum, Debug, Clone, Copy, PartialEq, Eq)]
#[oai(rename_all = "snake_case")]
pub enum Direction {
    Credit,
    Debit,
}

/// A ledger row (§2.9, D7). Fields that do not apply to the row's type are null.
#[derive(Object, Debug, Clone)]
#[oai(example)]
pub struct TransactionRecord {
    /// Stable across the lifecycle (pending → completed | cancelled).
    pub code: String,
    pub customer_code: String,
    #[oai(rename = "type")]
    pub kind: TransactionType,
    pub status: TransactionStatus,
    pub currency: String,
    /// Authoritative movement, absolute value at the ledger precision; `direction` carries
    /// the sign. On trade rows it is realised_pnl − fee.
    pub total_amount: DecimalOut,
    /// Deprecated exact duplicate of total_amount.
    #[oai(deprecated)]
    pub amount: DecimalOut,
    pub direction: Direction,
    pub realised_pnl: Nullable<DecimalOut>,
    pub fee: Nullable<DecimalOut>,
    pub reference_id: Nullable<String>,
    pub symbol: Nullable<String>,
    pub mark_price: Nullable<DecimalOut>,
    pub funding_rate: Nullable<DecimalOut>,
    pub trade_code: Nullable<String>,
    pub created_at: Time,
    pub updated_at: Time,
}

impl From<&Movement> for TransactionRecord {
    fn from(m: &Movement) -> Self {
        let kind = match m.kind {
            MovementKind::Deposit => TransactionType::Deposit,
            MovementKind::Withdrawal => TransactionType::Withdrawal,
            MovementKind::Trade => TransactionType::Trade,
            MovementKind::Liquidation => TransactionType::Liquidation,
            MovementKind::AutoDeleveraging => TransactionType::AutoDeleveraging,
            MovementKind::Settlement => TransactionType::Settlement,
            MovementKind::Funding => TransactionType::Funding,
        };
        let status = match m.status {
            MovementStatus::Pending => TransactionStatus::Pending,
            MovementStatus::Completed => TransactionStatus::Completed,
            MovementStatus::Cancelled => TransactionStatus::Cancelled,
        };
        let direction = if m.amount < Decimal::ZERO {
            Direction::Debit
        } else {
            Direction::Credit
        };
        TransactionRecord {
            code: m.code.to_string(),
            customer_code: m.customer.to_string(),
            kind,
            status,
            currency: m.asset.as_str().to_owned(),
            total_amount: DecimalOut::ledger(m.amount.abs()),
            amount: DecimalOut::ledger(m.amount.abs()),
            direction,
            realised_pnl: m
                .trade
                .as_ref()
                .map(|t| DecimalOut::ledger(t.realised_pnl))
                .into(),
            fee: m.trade.as_ref().map(|t| DecimalOut::ledger(t.fee)).into(),
            reference_id: m
                .trade
                .as_ref()
                .and_then(|t| t.reference_id.as_deref().map(str::to_owned))
                .into(),
            symbol: symbol(m).map(str::to_owned).into(),
            mark_price: settlement_mark(m).into(),
            funding_rate: funding_rate(m).into(),
            trade_code: m
                .trade
                .as_ref()
                .and_then(|t| t.trade_code)
                .map(|c| c.to_string())
                .into(),
            created_at: m.created_at.into(),
            updated_at: m.updated_at.into(),
        }
    }
}

#[derive(ApiResponse)]
pub enum TransferCreated {
    /// The transfer is recorded, status `pending`; it completes after the transfer delay.
    #[oai(status = 201)]
    Created(Json<TransactionRecord>),
}

/// A page of transactions, newest first.
#[derive(Object, Debug)]
#[oai(example)]
pub struct TransactionPage {
    pub data: Vec<TransactionRecord>,
    pub response_metadata: ResponseMetadata,
}

/// One balance row (§2.5, D7): `available + locked + pending = total` exactly.
#[derive(Object, Debug, Clone)]
#[oai(example)]
pub struct BalanceRecord {
    pub asset: String,
    /// The exact ledger balance.
    pub total: DecimalOut,
    /// total − locked − pending.
    pub available: DecimalOut,
    /// Initial margin reserved by open positions; does not move with the mark price.
    pub locked: DecimalOut,
    /// Pending withdrawals.
    pub pending: DecimalOut,
}

impl BalanceRecord {
    fn new(asset: Asset, b: &Balance) -> Self {
        BalanceRecord {
            asset: asset.as_str().to_owned(),
            total: DecimalOut::ledger(b.total),
            available: DecimalOut::ledger(b.available()),
            locked: DecimalOut::ledger(b.locked),
            pending: DecimalOut::ledger(b.pending),
        }
    }
}

/// The broker-wide or per-customer ledger, newest first, between two creation times, from the
/// journal's projection (one read transaction for the whole page).
fn transactions(
    state: &AppState,
    broker: perpsim_core::ids::BrokerCode,
    customer: Option<CustomerCode>,
    created: (Option<Timestamp>, Option<Timestamp>),
    paging: PageQuery,
) -> Result<TransactionPage, Error> {
    let filters = format!(
        "customer={customer:?};from={:?};to={:?}",
        created.0, created.1
    );
    let scope = Scope {
        list: "transactions",
        broker,
        filters: &filters,
    };
    let req = PageRequest::<TxKey>::of(&state.cursors, &scope, &paging)?;
    let read = state.engine.movements()?;
    let failed = |e| history_read_failed("transactions", e);
    let holder = match customer {
        Some(c) => Holder::Customer(c),
        None => Holder::Broker(broker),
    };
    let keys = ListKeys {
        read: &read,
        list: (holder, None),
    };
    let window = seq_window(&read, created).map_err(failed)?;
    let cut = (&state.cursors, &scope);
    let page = pagination::page_of(&keys, window, &req, cut, false).map_err(failed)?;
    let rows = history::rows(&read, &page.keys).map_err(failed)?;
    Ok(TransactionPage {
        data: rows.iter().map(TransactionRecord::from).collect(),
        response_metadata: page.metadata,
    })
}

/// A transaction list's sort key: newest first.
pub(super) type TxKey = Reverse<MovementSeq>;

/// The sequence numbers created inside `[from, to]`, as bounds on the newest-first key.
pub(super) fn seq_window(
    read: &Movements,
    created: (Option<Timestamp>, Option<Timestamp>),
) -> Result<(Bound<TxKey>, Bound<TxKey>), JournalError> {
    let (lo, end) = history::time_range(read, |m| m.created_at, created)?;
    if lo >= end {
        // An empty window: bounds that no key satisfies.
        let none = Reverse(MovementSeq(0));
        return Ok((Bound::Excluded(none), Bound::Excluded(none)));
    }
    Ok((
        Bound::Included(Reverse(MovementSeq(end - 1))),
        Bound::Included(Reverse(MovementSeq(lo))),
    ))
}

pub struct MoneyApi;

impl MoneyApi {
    async fn transfer(
        &self,
        state: &AppState,
        auth: Signed,
        code: &customer::Path,
        kind: TransferKind,
        body: TransferRequest,
    ) -> Result<TransferCreated, ApiError> {
        let command =
            transfer_command(code.customer()?.code, kind, &body, state.transfer_delay_ms)?;
        let movement = state.engine.submit(command, auth.admission()).await?;
        Ok(TransferCreated::Created(Json(TransactionRecord::from(
            &movement,
        ))))
    }
}

#[OpenApi(tag = "Tag::Customers")]
impl MoneyApi {
    /// Deposit into a customer's account.
    ///
    /// Answers 201 with the transaction row in status `pending`; it completes (and the
    /// balance moves) once the simulation clock reaches created_at plus the transfer delay.
    /// 503 EXCHANGE_ERROR while transfers are switched off: nothing is booked.
    #[oai(
        path = "/customers/:code/deposits",
        method = "post",
        operation_id = "createDeposit"
    )]
    async fn deposit(
        &self,
        state: Data<&Arc<AppState>>,
        auth: Signed,
        code: customer::Path,
        body: Json<TransferRequest>,
    ) -> Result<TransferCreated, ApiError> {
        self.transfer(&state, auth, &code, TransferKind::Deposit, body.0)
            .await
    }

    /// Withdraw from a customer's account.
    ///
    /// The amount is held in `pending` at once and leaves `total` when the withdrawal
    /// completes. Beyond `available` → 400 INSUFFICIENT_FUNDS; so too beyond what leaves the
    /// open positions settling in the currency their initial margin at the mark price, their
    /// unrealised PnL counted (the message says how much could go).
    #[oai(
        path = "/customers/:code/withdrawals",
        method = "post",
        operation_id = "createWithdrawal"
    )]
    async fn withdraw(
        &self,
        state: Data<&Arc<AppState>>,
        auth: Signed,
        code: customer::Path,
        body: Json<TransferRequest>,
    ) -> Result<TransferCreated, ApiError> {
        self.transfer(&state, auth, &code, TransferKind::Withdrawal, body.0)
            .await
    }

    /// A customer's balances, one row per currency it ever moved.
    ///
    /// `asset` filters to one currency: unknown → 400; known without a row → `[]`.
    #[oai(
        path = "/customers/:code/balances",
        method = "get",
        operation_id = "listBalances"
    )]
    async fn balances(
        &self,
        _auth: Signed,
        code: customer::Path,
        asset: Query<Option<String>>,
    ) -> Result<Json<Vec<BalanceRecord>>, ApiError> {
        let view = code.view();
        let customer = code.customer()?.code;
        let only = asset
            .0
            .as_deref()
            .map(|a| self::asset("asset", a))
            .transpose()?;
        let rows = view
            .balances
            .get(&customer)
            .into_iter()
            .flat_map(|rows| rows.iter())
            .filter(|(a, _)| only.is_none_or(|o| o == **a))
            .map(|(a, b)| BalanceRecord::new(*a, b))
            .collect();
        Ok(Json(rows))
    }

    /// The broker-wide ledger, newest first.
    ///
    /// `customer_code` narrows it to one customer; `created_from` and `created_to`
    /// (inclusive; RFC 3339 or milliseconds since the epoch) to a creation-time window.
    /// Cursor pagination as on every list (`limit` 1–1000, `after` / `before`).
    #[oai(
        path = "/customers/transactions",
        method = "get",
        operation_id = "listTransactions"
    )]
    async fn transactions(
        &self,
        state: Data<&Arc<AppState>>,
        auth: Signed,
        customer_code: Query<Option<String>>,
        created_from: Query<Option<String>>,
        created_to: Query<Option<String>>,
        paging: PageQuery,
    ) -> Result<Json<TransactionPage>, ApiError> {
        let view = state.engine.view();
        let customer = customer_code
            .0
            .as_deref()
            .map(|c| customer_of(&view, auth.broker(), c).map(|c| c.code))
            .transpose()?;
        let created = (
            query_time("created_from", created_from.0.as_deref(), TimeBound::From)?,
            query_time("created_to", created_to.0.as_deref(), TimeBound::To)?,
        );
        Ok(Json(transactions(
            &state,
            auth.broker(),
            customer,
            created,
            paging,
        )?))
    }

    /// Deprecated: one customer's ledger; use `GET /v1/customers/transactions?customer_code=`.
    #[oai(
        path = "/customers/:code/transactions",
        method = "get",
        operation_id = "listCustomerTransactions",
        deprecated
    )]
    async fn customer_transactions(
        &self,
        state: Data<&Arc<AppState>>,
        auth: Signed,
        code: customer::Path,
        created_from: Query<Option<String>>,
        created_to: Query<Option<String>>,
        paging: PageQuery,
    ) -> Result<Json<TransactionPage>, ApiError> {
        let customer = code.customer()?.code;
        let created = (
            query_time("created_from", created_from.0.as_deref(), TimeBound::From)?,
            query_time("created_to", created_to.0.as_deref(), TimeBound::To)?,
        );
        Ok(Json(transactions(
            &state,
            auth.broker(),
            Some(customer),
            created,
            paging,
        )?))
    }
}

impl poem_openapi::types::Example for TransactionRecord {
    fn example() -> Self {
        TransactionRecord {
            code: "9c1e1a52-8f0b-4c38-9c7e-5a8d2f1e3b40".into(),
            customer_code: "5b0b5d2e-8a7e-4b8e-9c59-2f0e6f9b1a11".into(),
            kind: TransactionType::Deposit,
            status: TransactionStatus::Completed,
            currency: "USDC".into(),
            total_amount: DecimalOut("100.2500000000".into()),
            amount: DecimalOut("100.2500000000".into()),
            direction: Direction::Credit,
            realised_pnl: None.into(),
            fee: None.into(),
            reference_id: None.into(),
            symbol: None.into(),
            mark_price: None.into(),
            funding_rate: None.into(),
            trade_code: None.into(),
            created_at: Time("2026-01-01T00:00:00.000Z".into()),
            updated_at: Time("2026-01-01T00:00:01.000Z".into()),
        }
    }
}

impl poem_openapi::types::Example for TransactionPage {
    fn example() -> Self {
        TransactionPage {
            data: vec![TransactionRecord::example()],
            response_metadata: ResponseMetadata::example(),
        }
    }
}

impl poem_openapi::types::Example for BalanceRecord {
    fn example() -> Self {
        BalanceRecord {
            asset: "USDC".into(),
            total: DecimalOut("100.2500000000".into()),
            available: DecimalOut("80.2500000000".into()),
            locked: DecimalOut("0.0000000000".into()),
            pending: DecimalOut("20.0000000000".into()),
        }
    }
}
