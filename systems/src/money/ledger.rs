//! The double-entry ledger (interface §2.5, §2.9, §3.2; D7).
//!
//! Every amount of money moves here. Accounts are keyed by (owner, asset); a movement is
//! rounded once, at booking, to 10 decimals half-even, and every later sum is exact. Deposits
//! and withdrawals are the only flows across the venue's boundary, so after every tick the sum
//! of all accounts equals completed deposits minus completed withdrawals, per asset; every
//! other customer movement (trades, funding, settlement) is booked against a venue account.
//!
//! The ledger decides every change to the accounts keyed by (owner, asset) — customers and the
//! venue's fees, clearing, market-maker and insurance accounts, whose balances are account
//! entities (`money/store` and its `AccountIndex`) handed to each booking as an `AccountStore`
//! (`Accounts`, a query-backed system parameter that stages an account first touched in a run
//! until its `flush`, like `OpenPositions`; `WorldAccounts` for command handlers holding the
//! world; a plain map in unit tests; a periodic pass finds its accounts by one walk of the
//! index in its key order, `Accounts::find_in_order`, and books each through
//! `Accounts::knowing`) — and it keeps the movements in creation order (a movement's sequence
//! number is its position), and the completed deposits and withdrawals per asset, the only
//! flows across the venue's boundary. A movement is rounded once, at booking, to 10 decimals
//! half-even. `available = total − locked − pending` is derived, never stored. A withdrawal is
//! held to `available` and to what leaves `total − pending` at least what the open positions in
//! its currency commit at the marks (initial margin at the mark less unrealised PnL,
//! `positions::committed_at_marks`, passed in by the engine since money and positions share a
//! layer): `available` counts margin at entry and no unrealised loss. `money/accounts` holds
//! the command handlers for money and account settings and the TransferSystems step that
//! completes transfers whose delay has passed.
//!
//! Money is guarded in every build, release included: each booking is a set of postings (the
//! customer's and the venue accounts', in one asset) that `assert!`s it nets to zero before any
//! balance moves, a transfer's other side being the boundary flow it counts (a periodic pass's
//! rows and a sweep's fills owe their venue side to a `VenueBatch`, which posts it once when
//! the run closes: each row and what it owes net to zero by construction); the ledger keeps
//! each asset's running sum of every posting (only a boundary posting moves it: the others add
//! the zero just asserted), and the engine asserts after every run of the schedule — before the
//! host journals or publishes the tick — that it equals deposits plus capital less withdrawals
//! (a comparison per asset). Kept per posting, the sum cost the fill path 9 % in `--bench book`
//! (`aggressive_walk/engine`), a Vec per booking among it; as it is, within 1 %. A bug stops
//! the engine loudly; it never moves money. A booking is given its `Books` (where the balances
//! live, the RNG its row's code comes from, the time).

use std::collections::BTreeMap;
use std::sync::Arc;

use bevy_ecs::prelude::Resource;
use perpsim_core::decimal::is_ledger_rounded;
use perpsim_core::ids::{BrokerCode, CustomerCode, MovementCode};
use perpsim_core::instrument::Asset;

use crate::dirty::DirtyKeys;
use crate::records::ids::MovementSeq;
use crate::records::log::{Handed, LogDigest, ProjectedLog};
use crate::records::money::{
    AccountId, Balance, Flows, Movement, MovementKind, MovementStatus, Owner, PeriodicInfo,
    TradeInfo, VenueAccount,
};
use perpsim_core::rng::SimRng;
use perpsim_core::time::Timestamp;
use perpsim_core::{Decimal, Error, ErrorCode};
use serde::{Deserialize, Serialize};

/// What a completed booking moves on the customer's account.
pub struct CustomerSide {
    pub customer: (CustomerCode, BrokerCode),
    pub asset: Asset,
    pub kind: MovementKind,
    /// Signed: positive credits the customer.
    pub amount: Decimal,
    pub locked_delta: Decimal,
}

/// The ledger's persistent state, as the state hash reads it: the movements by their count
/// and digest. A snapshot carries the rows themselves beside it, outside the hash
/// (`engine::snapshot::HeldHistory`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerState {
    pub accounts: BTreeMap<AccountId, Balance>,
    pub movements: LogDigest,
    pub flows: BTreeMap<Asset, Flows>,
    pub transfers_available: bool,
}

/// [`LedgerState`] as the ledger holds it, field for field, so it encodes to the same bytes
/// without copying the flows.
#[derive(Serialize)]
pub struct LedgerStateRef<'a> {
    accounts: BTreeMap<AccountId, Balance>,
    movements: LogDigest,
    flows: &'a BTreeMap<Asset, Flows>,
    transfers_available: bool,
}

/// Where the accounts' balances live: on account entities while the engine runs (see
/// `money::accounts::Accounts`), in a plain map in tests and benchmarks. The ledger decides
/// every change; the store only holds the balances.
pub trait AccountStore {
    fn balance(&self, id: &AccountId) -> Option<&Balance>;
    /// The account's balance, opened empty on its first touch.
    fn balance_mut(&mut self, id: AccountId) -> &mut Balance;
}

impl AccountStore for BTreeMap<AccountId, Balance> {
    fn balance(&self, id: &AccountId) -> Option<&Balance> {
        self.get(id)
    }

    fn balance_mut(&mut self, id: AccountId) -> &mut Balance {
        self.entry(id).or_default()
    }
}

/// Every venue account, empty: what a new ledger starts with.
pub fn venue_accounts() -> BTreeMap<AccountId, Balance> {
    let mut accounts = BTreeMap::new();
    for venue in VenueAccount::ALL {
        for asset in Asset::ALL {
            accounts.insert(AccountId::venue(venue, asset), Balance::default());
        }
    }
    accounts
}

/// Moves an account's locked margin, which never goes below zero (money depends on it).
fn shift_locked(account: &mut Balance, customer: CustomerCode, delta: Decimal) {
    account.locked += delta;
    assert!(
        !account.locked.is_sign_negative() || account.locked.is_zero(),
        "locked margin of {customer} went negative: {}",
        account.locked
    );
}

/// A new ledger has transfers switched on ([`Ledger::new`], which `Default` is too; its
/// venue accounts are [`venue_accounts`]); a restored one comes from [`Ledger::from_state`].
/// The balances are not here but in an [`AccountStore`] every booking is given.
#[derive(Resource, Debug)]
pub struct Ledger {
    /// Indexed by `seq`. While the journal's projection takes them (`track_movements`), the
    /// rows of every whole chunk it holds are let go, but for pending transfers: the log
    /// holds at most one chunk of rows and the pending ones (see ARCHITECTURE.md's bounds).
    movements: ProjectedLog<Movement>,
    flows: BTreeMap<Asset, Flows>,
    transfers_available: bool,
    /// Transfers still pending, by code: what an admin may cancel. Bounded by the transfers
    /// in flight (those inside the transfer delay), unlike an index of every movement.
    pending: BTreeMap<MovementCode, MovementSeq>,
    dirty_accounts: DirtyKeys<AccountId>,
    /// Customer accounts a completed booking left below zero net of their pending
    /// withdrawals, with the instrument it named,
    /// since the risk pass last took them: the candidates of an insurance cover (D10).
    /// Derived: drained every run, so empty between ticks.
    went_negative: Vec<(CustomerCode, Asset, Arc<str>)>,
    /// Per asset (in `Asset::ALL`'s order), the sum of every posting since the balances were
    /// summed at genesis or restore: what the conservation check compares with the boundary
    /// flows after every run, in release builds too. Only boundary postings move it; every
    /// other posting is one of a set `post_all` asserted to net to zero. Derived.
    held: [Decimal; Asset::ALL.len()],
}

/// The venue's side of a completed booking: postings made with it (which, with the
/// customer's, must net to zero), or owed in an open [`VenueBatch`].
enum Counterparts<'a> {
    Now(&'a [(AccountId, Decimal)]),
    Owed,
}

/// The venue's side of a run of bookings, posted once when the run closes: the clearing
/// account's in a periodic pass (funding on the hour, settlement at midnight), the clearing
/// and fees accounts' in a taker's sweep of a book. Nothing reads those balances between the
/// run's rows, and sums of exact amounts are the same however grouped (in value and in scale,
/// which an addition never lowers), so the balances after the run are those of booking each
/// row against them in turn — for one account lookup a run instead of one or two a row. A
/// batch dropped unclosed stops the engine, in release builds too: its rows would not net to
/// zero.
#[must_use = "a venue batch must be closed, or its rows do not net to zero"]
pub struct VenueBatch {
    /// Per asset (in `Asset::ALL`'s order), what each of [`BATCHED`] is owed, once a row of
    /// that asset was booked against it.
    owed: [[Option<Decimal>; BATCHED.len()]; Asset::ALL.len()],
    open: bool,
}

/// The venue accounts a [`VenueBatch`] owes, in the order it posts them.
const BATCHED: [VenueAccount; 2] = [VenueAccount::Clearing, VenueAccount::Fees];

impl VenueBatch {
    /// Owes `amount` to venue account `account` (one of [`BATCHED`]) in `asset`.
    fn owe(&mut self, account: VenueAccount, asset: Asset, amount: Decimal) {
        let slot = match account {
            VenueAccount::Clearing => 0,
            VenueAccount::Fees => 1,
            other => panic!("{other:?} is posted at once, never owed"),
        };
        let owed = &mut self.owed[asset.index()][slot];
        *owed = Some(owed.unwrap_or_default() + amount);
    }
}

impl Drop for VenueBatch {
    fn drop(&mut self) {
        if self.open && !std::thread::panicking() {
            panic!("a venue batch was dropped unclosed: {:?}", self.owed);
        }
    }
}

/// What every booking is given: where the balances live, the seeded RNG its row's code
/// comes from, and the simulation time it happens at.
pub struct Books<'a, S: AccountStore> {
    pub accounts: &'a mut S,
    pub rng: &'a mut SimRng,
    pub now: Timestamp,
}

/// Stops the engine unless a booking's postings net to zero: money only moves between
/// accounts (release builds too — a bug must stop loudly, never move money).
fn assert_nets_to_zero(postings: &[(AccountId, Decimal)]) {
    let net: Decimal = postings.iter().map(|(_, delta)| *delta).sum();
    assert!(
        net.is_zero() && postings.windows(2).all(|w| w[0].0.asset == w[1].0.asset),
        "a booking must net to zero in one asset: {postings:?}"
    );
}

impl Default for Ledger {
    fn default() -> Self {
        Self::new()
    }
}

/// A withdrawal of `amount` from `balance` (D7): within `available`, and leaving the
/// balance net of holds at least what the open positions commit at the marks.
fn withdrawable(
    balance: &Balance,
    committed: Decimal,
    amount: Decimal,
    asset: Asset,
) -> Result<(), Error> {
    let available = balance.available();
    if available < amount {
        return Err(Error::new(
            ErrorCode::InsufficientFunds,
            format!(
                "withdrawal of {amount} {} exceeds the available balance {available}",
                asset.as_str()
            ),
        ));
    }
    let free = balance.total - balance.pending - committed;
    if free < amount {
        return Err(Error::new(
            ErrorCode::InsufficientFunds,
            format!(
                "withdrawal of {amount} {} would leave the open positions short of initial margin at the mark price: with their unrealised PnL at most {} can be withdrawn",
                asset.as_str(),
                free.max(Decimal::ZERO)
            ),
        ));
    }
    Ok(())
}

impl Ledger {
    pub fn new() -> Self {
        let state = LedgerState {
            transfers_available: true,
            ..LedgerState::default()
        };
        Self::from_state(state, ProjectedLog::default()).0
    }

    /// The ledger of a snapshot and its `movements` (the rows held and the digest of those
    /// let go, which `EngineState::decode` checked against the state's digest), and the
    /// balances it held, for the caller to store.
    pub fn from_state(
        state: LedgerState,
        movements: ProjectedLog<Movement>,
    ) -> (Self, BTreeMap<AccountId, Balance>) {
        let LedgerState {
            accounts,
            flows,
            transfers_available,
            movements: _,
        } = state;
        let pending = movements
            .iter()
            .filter(|m| m.status == MovementStatus::Pending)
            .map(|m| (m.code, m.seq))
            .collect();
        let mut ledger = Ledger {
            movements,
            flows,
            transfers_available,
            pending,
            dirty_accounts: DirtyKeys::default(),
            went_negative: Vec::new(),
            held: [Decimal::ZERO; Asset::ALL.len()],
        };
        for (id, balance) in &accounts {
            ledger.held[id.asset.index()] += balance.total;
        }
        ledger.dirty_accounts.resume(accounts.keys().copied());
        (ledger, accounts)
    }

    /// Tracks what changes for the read view, or not (publishing off: a replay builds the
    /// view once, at the end). Turning it on marks every account (`accounts` are every
    /// account's id), so the view catches up.
    pub fn track_changes(&mut self, on: bool, accounts: impl Iterator<Item = AccountId>) {
        match (on, self.dirty_accounts.is_tracking()) {
            (false, _) => self.dirty_accounts.pause(),
            (true, false) => self.dirty_accounts.resume(accounts),
            (true, true) => {}
        }
    }

    /// Hands the movements booked or changed from now on to the journal's projection, or
    /// not. Turning it on hands out the movements already booked only `from_start` (at
    /// genesis, whose bookings no tick carries); otherwise the projection holds every
    /// movement up to here (recovery turns it on after the tick it ends at).
    pub fn track_movements(&mut self, on: bool, from_start: bool) {
        self.movements.project(on, from_start);
    }

    /// See [`Engine::set_history_window`](crate::engine::Engine::set_history_window).
    pub fn set_history_window(&mut self, bits: u32) {
        self.movements.set_window(bits);
    }

    /// The snapshot form, with the balances (held by the caller's store).
    pub fn state(&self, accounts: BTreeMap<AccountId, Balance>) -> LedgerState {
        LedgerState {
            accounts,
            movements: self.movements.digest(),
            flows: self.flows.clone(),
            transfers_available: self.transfers_available,
        }
    }

    /// [`Ledger::state`] borrowed: it encodes to the same bytes without copying the flows.
    pub fn state_ref(&self, accounts: BTreeMap<AccountId, Balance>) -> LedgerStateRef<'_> {
        LedgerStateRef {
            accounts,
            movements: self.movements.digest(),
            flows: &self.flows,
            transfers_available: self.transfers_available,
        }
    }

    /// Every movement held, indexed by `seq` (all of them unless the projection takes them).
    pub fn movements(&self) -> &ProjectedLog<Movement> {
        &self.movements
    }

    pub fn transfers_available(&self) -> bool {
        self.transfers_available
    }

    pub fn set_transfers_available(&mut self, available: bool) {
        self.transfers_available = available;
    }

    /// Takes the balances changed since the last call, for the read view.
    pub fn drain_balances(
        &mut self,
        mut balance: impl FnMut(&AccountId) -> Balance,
    ) -> Vec<(AccountId, Balance)> {
        self.dirty_accounts
            .take()
            .into_iter()
            .map(|id| (id, balance(&id)))
            .collect()
    }

    /// Takes the movements booked or changed since the last call (see
    /// [`Ledger::track_movements`]), as they stand now. The projection holds them from here,
    /// so the whole chunks of rows are let go (moved out, not copied), all but pending
    /// transfers (which change again), each counted into the digest as it goes.
    pub fn take_changed_movements(&mut self) -> Handed<Movement> {
        self.movements
            .hand_out(|m| m.status == MovementStatus::Pending)
    }

    /// The account to change; its `as_of` becomes `now`, since every caller changes it.
    fn account_mut<'a, S: AccountStore>(
        &mut self,
        accounts: &'a mut S,
        id: AccountId,
        now: Timestamp,
    ) -> &'a mut Balance {
        self.dirty_accounts.push(id);
        let account = accounts.balance_mut(id);
        account.as_of = now;
        account
    }

    /// Moves an account's total by `delta`: the account, for what else the booking changes
    /// in the same touch. Called only by [`Self::post_all`] (postings asserted to net to
    /// zero) and [`Self::post_boundary`], so the running sum misses no posting.
    fn post<'a, S: AccountStore>(
        &mut self,
        accounts: &'a mut S,
        (id, delta): (AccountId, Decimal),
        now: Timestamp,
    ) -> &'a mut Balance {
        let account = self.account_mut(accounts, id, now);
        account.total += delta;
        account
    }

    /// A posting across the venue's boundary (a transfer, the venue's capital): the one kind
    /// that moves the asset's running sum, with the flow the caller counts.
    fn post_boundary<'a, S: AccountStore>(
        &mut self,
        accounts: &'a mut S,
        (id, delta): (AccountId, Decimal),
        now: Timestamp,
    ) -> &'a mut Balance {
        self.held[id.asset.index()] += delta;
        self.post(accounts, (id, delta), now)
    }

    /// Books postings that net to zero (asserted), the customer's last: returns its account.
    /// They leave the asset's running sum where it was — adding them would add exactly the
    /// zero just asserted — so the sum moves only with the boundary.
    fn post_all<'a, S: AccountStore>(
        &mut self,
        accounts: &'a mut S,
        postings: &[(AccountId, Decimal)],
        now: Timestamp,
    ) -> &'a mut Balance {
        assert_nets_to_zero(postings);
        let (last, venue) = postings.split_last().expect("a booking has postings");
        for &posting in venue {
            self.post(accounts, posting, now);
        }
        self.post(accounts, *last, now)
    }

    /// Conservation (D7), in release builds too: per asset, the accounts hold exactly what
    /// crossed the venue's boundary — deposits plus capital less withdrawals. The running sums
    /// make it a comparison per asset, cheap enough for every tick.
    pub fn assert_conserved(&self) {
        for asset in Asset::ALL {
            let held = self.held[asset.index()];
            let net = self.flows.get(&asset).copied().unwrap_or_default().net();
            assert_eq!(
                held, net,
                "{asset:?}: accounts hold {held}, the boundary flows {net}"
            );
        }
    }

    /// A deposit or withdrawal request, pending until [`Self::complete_transfer`] (§3.2).
    /// A withdrawal is held in `pending` at once; it is refused beyond `available`, and
    /// beyond what leaves `total − pending` at least `committed`, what the customer's open
    /// positions in `asset` commit at the marks (their initial margin at the mark less their
    /// unrealised PnL; zero for a deposit): `available` counts margin at entry prices and no
    /// unrealised loss, so a losing account could otherwise withdraw itself into liquidation.
    pub fn request_transfer(
        &mut self,
        books: &mut Books<'_, impl AccountStore>,
        customer: (CustomerCode, BrokerCode),
        (kind, committed): (MovementKind, Decimal),
        asset: Asset,
        amount: Decimal,
    ) -> Result<&Movement, Error> {
        assert!(
            matches!(kind, MovementKind::Deposit | MovementKind::Withdrawal),
            "transfers only"
        );
        assert!(
            amount > Decimal::ZERO && is_ledger_rounded(amount),
            "amounts are validated at the edge"
        );
        if !self.transfers_available {
            return Err(Error::new(
                ErrorCode::ExchangeUnavailable,
                "deposits and withdrawals are temporarily unavailable; nothing was sent, retry later",
            ));
        }
        let id = AccountId::customer(customer.0, asset);
        if kind == MovementKind::Withdrawal {
            // Checked before the row is touched: a refused request leaves no trace.
            let balance = books.accounts.balance(&id).copied().unwrap_or_default();
            withdrawable(&balance, committed, amount, asset)?;
        }
        let now = books.now;
        let account = self.account_mut(books.accounts, id, now);
        let signed = match kind {
            MovementKind::Withdrawal => {
                account.pending += amount;
                -amount
            }
            _ => amount,
        };
        let seq = MovementSeq(self.movements.len() as u64);
        let movement = Movement {
            seq,
            code: MovementCode(books.rng.uuid()),
            customer: customer.0,
            broker: customer.1,
            kind,
            status: MovementStatus::Pending,
            asset,
            amount: signed,
            created_at: now,
            updated_at: now,
            balance_after: None,
            trade: None,
            periodic: None,
        };
        self.pending.insert(movement.code, seq);
        self.movements.push(movement);
        Ok(&self.movements[seq.index()])
    }

    fn pending_transfer(&self, seq: MovementSeq) -> Result<MovementSeq, Error> {
        let Some(m) = self.movements.get(seq.index()) else {
            // Every pending transfer is held: one let go has ended.
            return Err(match seq.index() < self.movements.len() {
                true => Error::conflict(format!("transfer #{seq} is no longer pending")),
                false => Error::not_found(format!("transfer #{seq} does not exist")),
            });
        };
        if m.status != MovementStatus::Pending {
            return Err(Error::conflict(format!(
                "transfer {} is already {}",
                m.code,
                m.status.as_str()
            )));
        }
        Ok(seq)
    }

    fn pending_transfer_by_code(&self, code: MovementCode) -> Result<MovementSeq, Error> {
        self.pending.get(&code).copied().ok_or_else(|| {
            Error::not_found(format!(
                "no pending transfer {code}: unknown, or already completed or cancelled"
            ))
        })
    }

    /// Books a pending transfer: the customer's total moves, the boundary flow is counted.
    pub fn complete_transfer(
        &mut self,
        accounts: &mut impl AccountStore,
        seq: MovementSeq,
        now: Timestamp,
    ) -> Result<&Movement, Error> {
        let seq = self.pending_transfer(seq)?;
        let (customer, asset, amount, kind) = {
            let m = &self.movements[seq.index()];
            (m.customer, m.asset, m.amount, m.kind)
        };
        // A transfer's other side is the boundary: the flow below, which conservation weighs.
        let account = self.post_boundary(
            accounts,
            (AccountId::customer(customer, asset), amount),
            now,
        );
        if kind == MovementKind::Withdrawal {
            account.pending += amount; // amount is negative: releases the hold
        }
        let total = account.total;
        let flows = self.flows.entry(asset).or_default();
        match kind {
            MovementKind::Deposit => flows.deposited += amount,
            _ => flows.withdrawn -= amount,
        }
        self.finish(seq, MovementStatus::Completed, now, Some(total))
    }

    /// Ends a pending transfer without booking it; a withdrawal's hold is released.
    pub fn cancel_transfer(
        &mut self,
        accounts: &mut impl AccountStore,
        code: MovementCode,
        now: Timestamp,
    ) -> Result<&Movement, Error> {
        let seq = self.pending_transfer_by_code(code)?;
        let (customer, asset, amount, kind) = {
            let m = &self.movements[seq.index()];
            (m.customer, m.asset, m.amount, m.kind)
        };
        if kind == MovementKind::Withdrawal {
            self.account_mut(accounts, AccountId::customer(customer, asset), now)
                .pending += amount;
        }
        self.finish(seq, MovementStatus::Cancelled, now, None)
    }

    fn finish(
        &mut self,
        seq: MovementSeq,
        status: MovementStatus,
        now: Timestamp,
        balance: Option<Decimal>,
    ) -> Result<&Movement, Error> {
        let m = self.movements.row_mut(seq.index());
        debug_assert_eq!(
            m.status,
            MovementStatus::Pending,
            "only pending movements finish"
        );
        self.pending.remove(&m.code);
        m.status = status;
        m.updated_at = now;
        m.balance_after = balance;
        Ok(&self.movements[seq.index()])
    }

    /// Books one side of a fill, completed at once: the customer gets `realised_pnl − fee`,
    /// the clearing account the opposite of the PnL and the fees account the fee (both owed
    /// in the sweep's `batch`), so the movement nets to zero across the ledger (D7). Both
    /// parts are already rounded to 10 decimals; the row is booked even when they cancel out,
    /// as every fill appears exactly once in the ledger (§2.9). Returns the movement's seq.
    ///
    /// The fill moves the customer's locked margin by `locked_delta` too, in the same touch of
    /// the account (see [`Self::adjust_locked`]).
    pub fn book_trade(
        &mut self,
        books: &mut Books<'_, impl AccountStore>,
        customer: (CustomerCode, BrokerCode),
        (asset, kind): (Asset, MovementKind),
        locked_delta: Decimal,
        info: TradeInfo,
        batch: &mut VenueBatch,
    ) -> MovementSeq {
        assert!(
            is_ledger_rounded(info.realised_pnl) && is_ledger_rounded(info.fee),
            "trade amounts are rounded at booking"
        );
        // The customer's amount and the two owed net to zero by construction.
        batch.owe(VenueAccount::Clearing, asset, -info.realised_pnl);
        batch.owe(VenueAccount::Fees, asset, info.fee);
        let row = CustomerSide {
            customer,
            asset,
            kind,
            amount: info.realised_pnl - info.fee,
            locked_delta,
        };
        let trade = Some(Box::new(info));
        self.complete(books, Counterparts::Owed, row, trade, None)
    }

    /// Puts the venue's capital into its insurance account (genesis): a flow across the
    /// venue's boundary, like a deposit, but no customer's.
    pub fn fund_insurance(
        &mut self,
        accounts: &mut impl AccountStore,
        asset: Asset,
        amount: Decimal,
        now: Timestamp,
    ) {
        assert!(
            amount >= Decimal::ZERO && is_ledger_rounded(amount),
            "insurance funding is validated at configuration"
        );
        self.post_boundary(
            accounts,
            (AccountId::venue(VenueAccount::Insurance, asset), amount),
            now,
        );
        self.flows.entry(asset).or_default().capital += amount;
    }

    /// D10: the insurance account covers a negative balance a liquidation left (net of the
    /// pending withdrawals, which the venue has already committed to pay): a completed
    /// `liquidation` movement crediting the customer `amount` (realised_pnl = amount, fee 0,
    /// no trade, no reference), debited from the insurance account, whose balance may go
    /// negative — a visible venue loss. Returns the row's seq.
    pub fn book_cover(
        &mut self,
        books: &mut Books<'_, impl AccountStore>,
        customer: (CustomerCode, BrokerCode),
        asset: Asset,
        amount: Decimal,
        symbol: Arc<str>,
    ) -> MovementSeq {
        assert!(
            amount > Decimal::ZERO && is_ledger_rounded(amount),
            "a cover is a positive ledger amount"
        );
        let venue = [(AccountId::venue(VenueAccount::Insurance, asset), -amount)];
        let row = CustomerSide {
            customer,
            asset,
            kind: MovementKind::Liquidation,
            amount,
            locked_delta: Decimal::ZERO,
        };
        let info = TradeInfo {
            realised_pnl: amount,
            fee: Decimal::ZERO,
            reference_id: None,
            symbol,
            trade_code: None,
        };
        let trade = Some(Box::new(info));
        self.complete(books, Counterparts::Now(&venue), row, trade, None)
    }

    /// Books a settlement or funding movement of `amount` (already rounded; positive credits
    /// the customer) against the clearing account, completed at once, and moves the
    /// customer's locked margin by `locked_delta` in the same touch. The clearing side is
    /// owed in `batch`, posted when it closes. A movement of zero is not booked (D7):
    /// returns its seq when it was.
    pub fn book_periodic(
        &mut self,
        books: &mut Books<'_, impl AccountStore>,
        row: CustomerSide,
        info: &Arc<PeriodicInfo>,
        batch: &mut VenueBatch,
    ) -> Option<MovementSeq> {
        assert!(
            matches!(row.kind, MovementKind::Settlement | MovementKind::Funding),
            "settlement and funding only"
        );
        assert!(
            is_ledger_rounded(row.amount),
            "amounts are rounded at booking"
        );
        if row.amount.is_zero() {
            let (customer, asset) = (row.customer.0, row.asset);
            self.adjust_locked(books.accounts, customer, asset, row.locked_delta, books.now);
            return None;
        }
        batch.owe(VenueAccount::Clearing, row.asset, -row.amount);
        Some(self.complete(books, Counterparts::Owed, row, None, Some(Arc::clone(info))))
    }

    /// Room for `rows` more movements at once, not by doublings: a periodic pass's share.
    pub fn reserve_rows(&mut self, rows: usize) {
        self.movements.reserve(rows);
    }

    /// A run of bookings against the venue's batched accounts starts (a periodic pass, a
    /// sweep): nothing owed yet.
    pub fn open_venue_batch(&self) -> VenueBatch {
        VenueBatch {
            owed: [[None; BATCHED.len()]; Asset::ALL.len()],
            open: true,
        }
    }

    /// Posts what the run owes each batched venue account, per asset, and closes the batch.
    pub fn close_venue_batch(
        &mut self,
        accounts: &mut impl AccountStore,
        mut batch: VenueBatch,
        now: Timestamp,
    ) {
        for asset in Asset::ALL {
            for (account, owed) in BATCHED.into_iter().zip(batch.owed[asset.index()]) {
                // Posted when any row was booked, even if they net to nothing: each row
                // touches the account (its `as_of` moves), as booking them one by one did.
                if let Some(owed) = owed {
                    self.post(accounts, (AccountId::venue(account, asset), owed), now);
                }
            }
        }
        batch.open = false;
    }

    /// The customer's side of a completed booking (its counterparts already booked): the
    /// amount and the locked margin moved in one touch of the account, the row appended.
    /// Returns the row's seq.
    fn complete(
        &mut self,
        books: &mut Books<'_, impl AccountStore>,
        counterparts: Counterparts<'_>,
        row: CustomerSide,
        trade: Option<Box<TradeInfo>>,
        periodic: Option<Arc<PeriodicInfo>>,
    ) -> MovementSeq {
        let (code, broker) = row.customer;
        let now = books.now;
        let customer = (AccountId::customer(code, row.asset), row.amount);
        let account = match counterparts {
            Counterparts::Now(venue) => {
                // On the stack: a booking has at most two venue postings besides the customer's.
                let mut postings = [customer; 3];
                postings[..venue.len()].copy_from_slice(venue);
                postings[venue.len()] = customer;
                self.post_all(books.accounts, &postings[..=venue.len()], now)
            }
            // Owed in a venue batch, which posts the other side when it closes.
            Counterparts::Owed => self.post(books.accounts, customer, now),
        };
        shift_locked(account, code, row.locked_delta);
        // Pending withdrawals are already spoken for: the margin pass weighs `total −
        // pending`, and so does the insurance cover.
        let (total, net) = (account.total, account.total - account.pending);
        let seq = MovementSeq(self.movements.len() as u64);
        self.movements.push(Movement {
            seq,
            code: MovementCode(books.rng.uuid()),
            customer: code,
            broker,
            kind: row.kind,
            status: MovementStatus::Completed,
            asset: row.asset,
            amount: row.amount,
            created_at: now,
            updated_at: now,
            balance_after: Some(total),
            trade,
            periodic,
        });
        if net < Decimal::ZERO {
            let m = &self.movements[seq.index()];
            let symbol = m.trade.as_ref().map(|t| &t.symbol);
            let symbol = symbol.or(m.periodic.as_ref().map(|p| &p.symbol));
            let symbol = Arc::clone(symbol.expect("only trades, funding and settlement debit"));
            self.went_negative.push((code, row.asset, symbol));
        }
        seq
    }

    /// Whether a booking left a customer account below zero since the last
    /// [`Ledger::take_went_negative`].
    pub fn any_went_negative(&self) -> bool {
        !self.went_negative.is_empty()
    }

    /// The customer accounts bookings left below zero since the last call, with the
    /// instrument of the booking that did.
    pub fn take_went_negative(&mut self) -> Vec<(CustomerCode, Asset, Arc<str>)> {
        std::mem::take(&mut self.went_negative)
    }

    /// Moves a customer's locked initial margin by `delta` (positions and resting orders).
    pub fn adjust_locked(
        &mut self,
        accounts: &mut impl AccountStore,
        customer: CustomerCode,
        asset: Asset,
        delta: Decimal,
        now: Timestamp,
    ) {
        if delta.is_zero() {
            return;
        }
        let account = self.account_mut(accounts, AccountId::customer(customer, asset), now);
        shift_locked(account, customer, delta);
    }

    /// The money invariants of D7 over every account, checked in full. Returns the first
    /// violation.
    pub fn check_invariants<'a>(
        &self,
        accounts: impl Iterator<Item = (&'a AccountId, &'a Balance)>,
    ) -> Result<(), String> {
        // A slot per asset: the audit's scan of every account, while the engine audits.
        let mut sums = [Decimal::ZERO; Asset::ALL.len()];
        for (AccountId { owner, asset }, b) in accounts {
            sums[asset.index()] += b.total;
            if b.locked < Decimal::ZERO || b.pending < Decimal::ZERO {
                return Err(format!(
                    "{owner:?} {asset:?}: negative locked or pending: {b:?}"
                ));
            }
            // D7: rebates are paid out of the same fill's taker fee, so trading never
            // takes the fees account below zero.
            if *owner == Owner::Venue(VenueAccount::Fees) && b.total < Decimal::ZERO {
                return Err(format!("the fees account holds {} {asset:?}", b.total));
            }
            for v in [b.total, b.locked, b.pending] {
                if !is_ledger_rounded(v) {
                    return Err(format!("{owner:?} {asset:?}: more than 10 decimals: {v}"));
                }
            }
        }
        for asset in Asset::ALL {
            let flows = self.flows.get(&asset).copied().unwrap_or_default();
            let sum = sums[asset.index()];
            if sum != flows.net() {
                return Err(format!(
                    "{asset:?}: accounts sum to {sum} but deposits + capital − withdrawals = {}",
                    flows.net()
                ));
            }
            // The running sum the release check uses must agree with the accounts.
            let held = self.held[asset.index()];
            if held != sum {
                return Err(format!(
                    "{asset:?}: the running sum {held} drifted from {sum}"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "ledger_unit_tests.rs"]
mod tests;
