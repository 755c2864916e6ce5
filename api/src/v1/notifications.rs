//! Notifications (interface §2.2, §3.3, §4.2; D4, D9): the durable records of the push
//! channel `notifications`; today every one is a `position_depreciation` notice.

use std::ops::Bound;
use std::sync::Arc;

use perpsim_core::Error;
use perpsim_core::risk::Depreciation;
use perpsim_core::time::{TimeBound, Timestamp};
use perpsim_storage::{Holder, JournalError, Notices};
use perpsim_systems::ReadView;
use perpsim_systems::records::ids::NoticeSeq;
use perpsim_systems::records::risk::Notification;
use perpsim_systems::records::venue::MarketId;
use poem::web::Data;
use poem_openapi::param::Query;
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};

use super::history::{self, ListKeys};
use super::{Signed, Tag, customer_of};
use crate::contract::group::query_group;
use crate::errors::ApiError;
use crate::pagination::{self, PageQuery, PageRequest, ResponseMetadata, Scope};
use crate::state::AppState;
use crate::state::host::history_read_failed;
use crate::wire::{DecimalOut, Time, query_time};

/// The one notification type there is.
pub const POSITION_DEPRECIATION: &str = "position_depreciation";

/// A regulatory notice that an open position's value has fallen by a further 10 % of its
/// initial value since entry (§2.2). The baseline is the average fill price; one notice per
/// threshold per baseline (§3.3).
#[derive(Object, Debug, Clone)]
#[oai(example)]
pub struct PositionDepreciation {
    pub symbol: String,
    /// long or short.
    pub side: String,
    /// Absolute position size, base units.
    pub amount: DecimalOut,
    /// Currency of the value fields: the instrument's settlement currency.
    pub currency: String,
    /// Average entry price of the exposure still held; not moved by daily settlement.
    pub avg_fill_price: DecimalOut,
    /// amount × avg_fill_price, exact.
    pub initial_value: DecimalOut,
    /// The mark price the position was valued at.
    pub mark_price: DecimalOut,
    /// initial_value plus the PnL since entry at mark_price (a short depreciates when the
    /// price rises), exact.
    pub current_value: DecimalOut,
    /// (initial_value − current_value) / initial_value × 100, rounded down to 4 decimals.
    pub depreciation_pct: DecimalOut,
    /// The 10 % multiple this notice is for: 10, 20, 30, ...; the highest reached since
    /// the last evaluation.
    pub threshold_pct: u32,
    /// Time of the mark price used.
    pub mark_time: Time,
    /// When the evaluation ran.
    pub evaluated_at: Time,
}

/// A notification (§2.2): the push payload without `channel`, with `created_at` for
/// `timestamp` (D9).
#[derive(Object, Debug, Clone)]
#[oai(example)]
pub struct NotificationRecord {
    /// The notification type, which decides the shape of `data`: `position_depreciation`.
    /// Clients ignore types they do not recognise.
    #[oai(rename = "type")]
    pub kind: String,
    /// Equals the code of the push message; consumers de-duplicate on it.
    pub code: String,
    pub customer_code: String,
    pub created_at: Time,
    pub data: PositionDepreciation,
}

/// A page of notifications, newest first.
#[derive(Object, Debug, Clone)]
#[oai(example)]
pub struct NotificationPage {
    pub data: Vec<NotificationRecord>,
    pub response_metadata: ResponseMetadata,
}

pub fn record(view: &ReadView, n: &Notification) -> NotificationRecord {
    let symbol = view.trading.symbol(n.market);
    let spec = &view.instruments[symbol].spec;
    let (pd, ad) = (spec.price_decimals(), spec.amount_decimals());
    let dep = Depreciation::of(n.size, n.avg_fill_price, n.mark_price);
    NotificationRecord {
        kind: POSITION_DEPRECIATION.to_owned(),
        code: n.code.to_string(),
        customer_code: n.customer.to_string(),
        created_at: n.created_at.into(),
        data: PositionDepreciation {
            symbol: symbol.to_owned(),
            side: if n.size.is_sign_negative() {
                "short"
            } else {
                "long"
            }
            .to_owned(),
            amount: DecimalOut::new(n.size.abs(), ad),
            currency: spec.settlement.as_str().to_owned(),
            avg_fill_price: DecimalOut::new(n.avg_fill_price, pd),
            initial_value: DecimalOut::ledger(dep.initial_value),
            mark_price: DecimalOut::new(n.mark_price, pd),
            current_value: DecimalOut::ledger(dep.current_value),
            depreciation_pct: DecimalOut::new(dep.depreciation_pct, 4),
            threshold_pct: n.threshold_pct,
            mark_time: n.mark_time.into(),
            evaluated_at: n.created_at.into(),
        },
    }
}

/// The seqs created inside `[from, to]`: notices are created in non-decreasing time, so the
/// window is one range.
pub(super) fn window(
    read: &Notices,
    created: (Option<Timestamp>, Option<Timestamp>),
) -> Result<(Bound<NoticeSeq>, Bound<NoticeSeq>), JournalError> {
    let (lo, end) = history::time_range(read, |n| n.created_at, created)?;
    Ok((
        Bound::Included(NoticeSeq(lo)),
        Bound::Excluded(NoticeSeq(end.max(lo))),
    ))
}

/// One page of a holder's notices, newest first, from the journal's projection (one read
/// transaction for the whole page).
fn page(
    state: &AppState,
    view: &ReadView,
    list: (Holder, Option<MarketId>),
    created: (Option<Timestamp>, Option<Timestamp>),
    req: &PageRequest<NoticeSeq>,
    scope: &Scope<'_>,
) -> Result<NotificationPage, Error> {
    let read = state.engine.notices()?;
    let failed = |e| history_read_failed("notifications", e);
    let keys = ListKeys { read: &read, list };
    let bounds = window(&read, created).map_err(failed)?;
    let page = pagination::page_of(&keys, bounds, req, (&state.cursors, scope), true);
    let page = page.map_err(failed)?;
    let rows = history::rows(&read, &page.keys).map_err(failed)?;
    Ok(NotificationPage {
        data: rows.iter().map(|n| record(view, n)).collect(),
        response_metadata: page.metadata,
    })
}

query_group! {
    /// The filters of the broker's notifications: `type`, `symbol`, `created_from` and
    /// `created_to`.
    pub struct NoticeFilters {
        kind as "type": Option<String>,
        symbol as "symbol": Option<String>,
        created_from as "created_from": Option<String>,
        created_to as "created_to": Option<String>,
    }
}

pub struct NotificationsApi;

#[OpenApi(tag = "Tag::Customers")]
impl NotificationsApi {
    /// The broker's notifications, newest first (§2.2, §4.2).
    ///
    /// Filters: `customer_code` (one customer of the broker; another's or an unknown code is
    /// 404), `type` (`position_depreciation`), `symbol` (unknown → 404), `created_from` and
    /// `created_to` (inclusive; RFC 3339 or milliseconds since the epoch). Cursor pagination
    /// as on every list; a cursor is bound to the filters it was issued for.
    #[oai(
        path = "/customers/notifications",
        method = "get",
        operation_id = "listNotifications"
    )]
    async fn notifications(
        &self,
        state: Data<&Arc<AppState>>,
        auth: Signed,
        customer_code: Query<Option<String>>,
        filters: NoticeFilters,
        paging: PageQuery,
    ) -> Result<Json<NotificationPage>, ApiError> {
        let NoticeFilters {
            kind,
            symbol,
            created_from,
            created_to,
        } = filters;
        let view = state.engine.view();
        let customer = customer_code
            .0
            .as_deref()
            .map(|c| customer_of(&view, auth.broker(), c).map(|c| c.code))
            .transpose()?;
        if let Some(k) = kind.as_deref()
            && k != POSITION_DEPRECIATION
        {
            return Err(Error::validation(format!(
                "type must be {POSITION_DEPRECIATION}, got {k:?}"
            ))
            .into());
        }
        let market = symbol
            .as_deref()
            .map(|s| {
                view.trading
                    .market(s)
                    .map(|(id, _)| id)
                    .ok_or_else(|| Error::not_found(format!("symbol {s} does not exist")))
            })
            .transpose()?;
        let from = query_time("created_from", created_from.as_deref(), TimeBound::From)?;
        let to = query_time("created_to", created_to.as_deref(), TimeBound::To)?;
        let filters = format!(
            "customer={customer:?};market={market:?};type={kind:?};from={from:?};to={to:?}"
        );
        let scope = Scope {
            list: "notifications",
            broker: auth.broker(),
            filters: &filters,
        };
        let req = PageRequest::<NoticeSeq>::of(&state.cursors, &scope, &paging)?;
        let holder = match customer {
            Some(c) => Holder::Customer(c),
            None => Holder::Broker(auth.broker()),
        };
        let list = (holder, market);
        Ok(Json(page(&state, &view, list, (from, to), &req, &scope)?))
    }
}

impl poem_openapi::types::Example for PositionDepreciation {
    fn example() -> Self {
        PositionDepreciation {
            symbol: "BTC-USDC-PERP".into(),
            side: "long".into(),
            amount: DecimalOut("0.5000".into()),
            currency: "USDC".into(),
            avg_fill_price: DecimalOut("60000.0".into()),
            initial_value: DecimalOut("30000.0000000000".into()),
            mark_price: DecimalOut("45000.0".into()),
            current_value: DecimalOut("22500.0000000000".into()),
            depreciation_pct: DecimalOut("25.0000".into()),
            threshold_pct: 20,
            mark_time: Time("2026-01-01T00:10:00.000Z".into()),
            evaluated_at: Time("2026-01-01T00:10:00.000Z".into()),
        }
    }
}

impl poem_openapi::types::Example for NotificationRecord {
    fn example() -> Self {
        NotificationRecord {
            kind: POSITION_DEPRECIATION.into(),
            code: "6f1c2a9e-3b4d-4e5f-8a7b-1c2d3e4f5a6b".into(),
            customer_code: "0b7e6a52-9c1d-4f3e-a2b1-5d6c7e8f9a0b".into(),
            created_at: Time("2026-01-01T00:10:00.000Z".into()),
            data: PositionDepreciation::example(),
        }
    }
}

impl poem_openapi::types::Example for NotificationPage {
    fn example() -> Self {
        NotificationPage {
            data: vec![NotificationRecord::example()],
            response_metadata: ResponseMetadata::example(),
        }
    }
}
