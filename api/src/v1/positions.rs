//! Net positions (interface §2.4, §4.2; D6).

use perpsim_core::Error;
use perpsim_core::ids::PositionCode;
use perpsim_core::order::PositionSide;
use perpsim_core::time::Timestamp;
use perpsim_systems::ReadView;
use perpsim_systems::records::position::Position;
use perpsim_systems::records::venue::InstrumentView;
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::{Enum, Object, OpenApi};

use super::{Signed, Tag, customer};
use crate::errors::ApiError;
use crate::wire::{DecimalOut, Time};

#[derive(Enum, Debug, Clone, Copy, PartialEq, Eq)]
#[oai(rename = "PositionSide", rename_all = "snake_case")]
pub enum PositionSideApi {
    Long,
    Short,
}

/// A net position (§2.4, D6): `amount` is the absolute size, `side` the direction. Amounts
/// have at least the lot size's decimals, prices the tick size's, money the ledger's 10;
/// values with more places keep them.
#[derive(Object, Debug, Clone)]
#[oai(example)]
pub struct PositionRecord {
    pub position_code: String,
    pub customer_code: String,
    pub symbol: String,
    pub side: PositionSideApi,
    pub amount: DecimalOut,
    pub entry_price: DecimalOut,
    pub avg_fill_price: DecimalOut,
    pub mark_price: DecimalOut,
    pub unrealised_pnl: DecimalOut,
    /// Initial margin locked: amount × entry_price × initial margin.
    pub margin: DecimalOut,
    pub created_at: Time,
    pub updated_at: Time,
}

pub fn record(view: &ReadView, p: &Position) -> PositionRecord {
    let symbol = view.trading.symbol(p.market).to_owned();
    let instrument = &view.instruments[&symbol];
    let (pd, ad) = (
        instrument.spec.price_decimals(),
        instrument.spec.amount_decimals(),
    );
    let mark = instrument.mark_price;
    PositionRecord {
        position_code: p.code.to_string(),
        customer_code: p.customer.to_string(),
        symbol,
        side: match p.side() {
            PositionSide::Long => PositionSideApi::Long,
            PositionSide::Short => PositionSideApi::Short,
        },
        amount: DecimalOut::new(p.size.abs(), ad),
        entry_price: DecimalOut::new(p.entry_price.normalize(), pd),
        avg_fill_price: DecimalOut::new(p.avg_fill_price.normalize(), pd),
        mark_price: DecimalOut::new(mark, pd),
        unrealised_pnl: DecimalOut::ledger(p.unrealised_pnl(mark)),
        margin: DecimalOut::ledger(p.margin),
        created_at: p.created_at.into(),
        updated_at: valued_at(p, instrument).into(),
    }
}

/// When a position's record last changed: its own last change (fill, settlement) or its
/// instrument's last price move, whichever is later — the record carries the mark and the
/// unrealised PnL at it, so a new mark is a new record.
pub fn valued_at(p: &Position, instrument: &InstrumentView) -> Timestamp {
    p.updated_at.max(instrument.price_time)
}

pub struct PositionsApi;

#[OpenApi(tag = "Tag::Orders")]
impl PositionsApi {
    /// A customer's open positions.
    ///
    /// `symbol` (exact) and `side` (`long` | `short`) filter; `[]` when nothing matches.
    #[oai(
        path = "/customers/:code/positions",
        method = "get",
        operation_id = "listPositions"
    )]
    async fn list(
        &self,
        _auth: Signed,
        code: customer::Path,
        symbol: Query<Option<String>>,
        side: Query<Option<PositionSideApi>>,
    ) -> Result<Json<Vec<PositionRecord>>, ApiError> {
        let view = code.view();
        let customer = code.customer()?.code;
        let rows = view
            .trading
            .positions
            .get(&customer)
            .into_iter()
            .flat_map(|held| held.values())
            .map(|p| record(&view, p))
            .filter(|r| symbol.0.as_ref().is_none_or(|s| *s == r.symbol))
            .filter(|r| side.0.is_none_or(|s| s == r.side))
            .collect();
        Ok(Json(rows))
    }

    /// One open position by its code.
    #[oai(
        path = "/customers/:code/positions/:position_code",
        method = "get",
        operation_id = "getPosition"
    )]
    async fn get(
        &self,
        _auth: Signed,
        code: customer::Path,
        position_code: Path<String>,
    ) -> Result<Json<PositionRecord>, ApiError> {
        let view = code.view();
        let customer = code.customer()?.code;
        let position = PositionCode::parse(&position_code.0)
            .and_then(|c| view.trading.position_codes.get(&c))
            .filter(|(c, _)| *c == customer)
            .and_then(|(c, m)| view.trading.positions.get(c)?.get(m))
            .ok_or_else(|| {
                Error::not_found(format!("position {} does not exist", position_code.0))
            })?;
        Ok(Json(record(&view, position)))
    }
}

impl poem_openapi::types::Example for PositionRecord {
    fn example() -> Self {
        PositionRecord {
            position_code: "7e4f2a1b-3c5d-4e6f-8a9b-0c1d2e3f4a5b".into(),
            customer_code: "5b0b5d2e-8a7e-4b8e-9c59-2f0e6f9b1a11".into(),
            symbol: "BTC-USDC-PERP".into(),
            side: PositionSideApi::Long,
            amount: DecimalOut("0.0100".into()),
            entry_price: DecimalOut("59000.0".into()),
            avg_fill_price: DecimalOut("59000.0".into()),
            mark_price: DecimalOut("60000.0".into()),
            unrealised_pnl: DecimalOut("10.0000000000".into()),
            margin: DecimalOut("590.0000000000".into()),
            created_at: Time("2026-01-01T00:00:01.000Z".into()),
            updated_at: Time("2026-01-01T00:00:01.000Z".into()),
        }
    }
}
