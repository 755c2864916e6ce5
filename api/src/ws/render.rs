//! Engine events into frames: each event rendered once, from the read view published with
//! its tick, for the audience that may hear it (private topics: the customer's broker only).

use perpsim_core::ids::CustomerCode;
use perpsim_systems::records::money::{Movement, MovementKind, MovementStatus};
use perpsim_systems::records::risk::RiskRecord;
use perpsim_systems::{EngineEvent, ReadView};

use super::frames::{
    BalanceChange, DataFrame, Frame, LiquidationRecord, MarginFrame, MarginRecord,
    NotificationFrame, PositionsFrame, frame,
};
use super::topic::{Audience, Topic};
use crate::v1::orders::{Rendering, record as order_record};
use crate::wire::{DecimalOut, Time};

fn private(broker: perpsim_core::ids::BrokerCode, topic: Topic) -> Audience {
    Audience {
        broker: Some(broker),
        topic,
    }
}

fn public(topic: Topic) -> Audience {
    Audience {
        broker: None,
        topic,
    }
}

fn data<T: poem_openapi::types::ToJSON + poem_openapi::types::ParseFromJSON>(
    channel: &str,
    kind: &str,
    data: T,
) -> Frame {
    frame(&DataFrame {
        channel: channel.into(),
        kind: kind.into(),
        data,
    })
}

/// §2.1: a terminal movement, flat.
pub fn balance_change(m: &Movement) -> BalanceChange {
    let completed = m.status == MovementStatus::Completed;
    let trade = m.trade.as_deref();
    BalanceChange {
        channel: "balance-changes".into(),
        kind: "update".into(),
        code: m.code.to_string(),
        trade_code: trade.and_then(|t| t.trade_code).map(|c| c.to_string()),
        customer_code: m.customer.to_string(),
        transaction_type: m.kind.as_str().into(),
        currency: m.asset.as_str().into(),
        total_amount: DecimalOut::ledger(m.amount),
        realised_pnl: trade.map(|t| DecimalOut::ledger(t.realised_pnl)),
        fee: trade.map(|t| DecimalOut::ledger(t.fee)),
        status: m.status.as_str().into(),
        balance: m
            .balance_after
            .filter(|_| completed)
            .map(DecimalOut::ledger),
        balance_as_of: completed.then(|| Time::from(m.updated_at)),
        reference_id: trade
            .filter(|_| m.kind == MovementKind::Trade)
            .and_then(|t| t.reference_id.as_deref().map(str::to_owned)),
        symbol: crate::columns::symbol(m).map(str::to_owned),
        mark_price: crate::columns::settlement_mark(m),
        funding_rate: crate::columns::funding_rate(m),
        timestamp: m.updated_at.into(),
    }
}

fn liquidation(r: &RiskRecord) -> LiquidationRecord {
    LiquidationRecord {
        customer_code: r.customer.to_string(),
        currency: r.asset.as_str().into(),
        margin_state: r.state.as_str().into(),
        margin_deficit: r.margin_deficit.map(DecimalOut::ledger).into(),
        leverage_ratio: DecimalOut::new(r.leverage_ratio, 4),
        margin_ratio: DecimalOut::new(r.margin_ratio, 4),
        timestamp: r.time.into(),
    }
}

/// The order read shape with `order_type` in place of `type` (D9).
pub fn order_update(view: &ReadView, o: &perpsim_systems::records::order::Order) -> Frame {
    let mut json = poem_openapi::types::ToJSON::to_json(&order_record(view, o, Rendering::Read))
        .expect("an order record is a JSON object");
    if let Some(fields) = json.as_object_mut()
        && let Some(kind) = fields.remove("type")
    {
        fields.insert("order_type".into(), kind);
    }
    data("orders", "update", json)
}

/// Who hears an event. Book batches and valuation instants depend on the hub's own state
/// (stream positions, subscriptions) and are its to render.
pub fn audience(view: &ReadView, event: &EngineEvent) -> Option<Audience> {
    let broker_of = |c: CustomerCode| view.customers.get(&c).map(|c| c.broker);
    Some(match event {
        EngineEvent::Movement(m) => private(m.broker, Topic::BalanceChanges),
        EngineEvent::Order(o) => private(broker_of(o.customer)?, Topic::Orders),
        EngineEvent::Trade(t) => private(t.broker, Topic::Trades),
        EngineEvent::PublicTrade(fill) => public(Topic::MarketTrades(fill.market)),
        EngineEvent::Notice(n) => private(n.broker, Topic::Notifications),
        EngineEvent::MarginState(r) => private(r.broker, Topic::Liquidations),
        EngineEvent::Ticker(_) => public(Topic::Ticker),
        EngineEvent::TimerFired { .. }
        | EngineEvent::Book { .. }
        | EngineEvent::Valuation { .. } => {
            return None;
        }
    })
}

/// The frame of an event [`audience`] gives an audience for.
pub fn event(view: &ReadView, event: &EngineEvent) -> Option<Frame> {
    Some(match event {
        EngineEvent::Movement(m) => frame(&balance_change(m)),
        EngineEvent::Order(o) => order_update(view, o),
        EngineEvent::Trade(t) => data("trades", "update", crate::v1::trades::record(view, t)),
        EngineEvent::PublicTrade(fill) => {
            let channel = Topic::MarketTrades(fill.market).name(view);
            let trade = crate::v1::market::public_trade(view, fill);
            data(&channel, "update", trade)
        }
        EngineEvent::Notice(n) => {
            let r = crate::v1::notifications::record(view, n);
            frame(&NotificationFrame {
                channel: "notifications".into(),
                kind: r.kind,
                code: r.code,
                customer_code: r.customer_code,
                timestamp: r.created_at,
                data: r.data,
            })
        }
        EngineEvent::MarginState(r) => data("liquidations", "update", liquidation(r)),
        EngineEvent::Ticker(m) => ticker(view, *m, "update")?,
        EngineEvent::TimerFired { .. }
        | EngineEvent::Book { .. }
        | EngineEvent::Valuation { .. } => {
            return None;
        }
    })
}

/// A market's ticker frame.
pub fn ticker(view: &ReadView, market: u32, kind: &str) -> Option<Frame> {
    let m = view.trading.markets.get(market as usize)?;
    let i = view.instruments.get(&m.symbol)?;
    Some(data(
        "ticker",
        kind,
        crate::v1::market::ticker(view, i, market, m),
    ))
}

/// A customer's positions at `at` (the whole list, possibly empty).
pub fn positions(view: &ReadView, customer: CustomerCode, at: Time) -> Frame {
    let data = view
        .trading
        .positions
        .get(&customer)
        .map(|held| {
            held.values()
                .map(|p| crate::v1::positions::record(view, p))
                .collect()
        })
        .unwrap_or_default();
    frame(&PositionsFrame {
        channel: format!("positions:{customer}"),
        kind: "snapshot".into(),
        timestamp: at,
        data,
    })
}

/// The margin frames of a broker's customers holding open positions, at `at`, in customer
/// code order.
pub fn margins(view: &ReadView, broker: perpsim_core::ids::BrokerCode, at: &Time) -> Vec<Frame> {
    view.trading
        .positions
        .iter()
        .filter(|(_, held)| !held.is_empty())
        .filter_map(|(code, _)| view.customer_of(broker, *code))
        .map(|c| {
            frame(&MarginFrame {
                channel: "margin".into(),
                kind: "snapshot".into(),
                timestamp: at.clone(),
                data: MarginRecord {
                    customer_code: c.code.to_string(),
                    summary: crate::v1::profiles::summary(view, c),
                },
            })
        })
        .collect()
}
