//! One test per rule of interface §4.3 (accepted and refused forms), plus D5's defaults.

use std::str::FromStr;

use super::*;
use crate::error::{Error, ErrorCode};
use crate::instrument::{InstrumentSpec, default_instruments};

fn d(s: &str) -> Decimal {
    Decimal::from_str(s).unwrap()
}

fn btc() -> InstrumentSpec {
    default_instruments().remove(0)
}

const NOW: Timestamp = Timestamp::from_millis(1_767_225_600_000);

fn reference() -> Reference {
    Reference {
        last_trade_price: d("60000"),
        mark_price: d("60010"),
        now: NOW,
    }
}

fn entry(kind: OrderType) -> OrderEntry {
    OrderEntry {
        amount: Some(d("0.01")),
        ..OrderEntry::new(Side::Buy, kind, "r-1")
    }
}

fn limit() -> OrderEntry {
    OrderEntry {
        limit_price: Some(d("59000")),
        ..entry(OrderType::Limit)
    }
}

fn check(e: &OrderEntry) -> Result<NewOrder, Error> {
    validate(e, &btc(), &reference())
}

/// Asserts a refusal with `code` whose message contains every one of `words`.
fn refused(e: OrderEntry, code: ErrorCode, words: &[&str]) {
    let err = check(&e).expect_err("refused");
    assert_eq!(err.code, code, "{err}");
    for w in words {
        assert!(err.message.contains(w), "{:?} lacks {w:?}", err.message);
    }
}

#[test]
fn rule_1_amount_or_exactly_one_of_amount_and_cash_amount() {
    assert!(check(&limit()).is_ok());
    refused(
        OrderEntry {
            amount: None,
            ..limit()
        },
        ErrorCode::Validation,
        &["amount", "rule 1"],
    );
    refused(
        OrderEntry {
            cash_amount: Some(d("100")),
            ..limit()
        },
        ErrorCode::Validation,
        &["exactly one", "rule 1"],
    );
    let stop = OrderEntry {
        amount: None,
        trigger_price: Some(d("61000")),
        ..entry(OrderType::StopLoss)
    };
    refused(
        stop,
        ErrorCode::Validation,
        &["amount is required", "stop_loss", "rule 1"],
    );
}

#[test]
fn rule_2_cash_orders_are_positive_ioc_and_not_conditional() {
    let cash = OrderEntry {
        amount: None,
        cash_amount: Some(d("250.5")),
        ..entry(OrderType::Market)
    };
    let ok = check(&cash).unwrap();
    assert_eq!(
        (ok.quantity(), ok.time_in_force),
        (Quantity::Cash(d("250.5")), TimeInForce::Ioc)
    );
    let cash_limit = OrderEntry {
        amount: None,
        cash_amount: Some(d("250.5")),
        ..limit()
    };
    assert_eq!(
        check(&cash_limit).unwrap().time_in_force,
        TimeInForce::Ioc,
        "IOC is the default for cash orders"
    );
    for tif in [TimeInForce::Fok, TimeInForce::Gtc] {
        refused(
            OrderEntry {
                time_in_force: Some(tif),
                ..cash_limit.clone()
            },
            ErrorCode::Validation,
            &["cash_amount", "IOC", "rule 2"],
        );
    }
    refused(
        OrderEntry {
            cash_amount: Some(d("0")),
            ..cash.clone()
        },
        ErrorCode::Validation,
        &["cash_amount", "positive"],
    );
    let stop = OrderEntry {
        amount: None,
        cash_amount: Some(d("10")),
        trigger_price: Some(d("59000")),
        ..entry(OrderType::StopLoss)
    };
    refused(
        OrderEntry {
            side: Side::Sell,
            ..stop
        },
        ErrorCode::Validation,
        &["cash_amount", "not supported", "rule 2"],
    );
}

#[test]
fn rule_3_limit_price_required_on_limit_and_refused_where_unused() {
    refused(
        OrderEntry {
            limit_price: None,
            ..limit()
        },
        ErrorCode::Validation,
        &["limit_price is required", "rule 3"],
    );
    refused(
        OrderEntry {
            limit_price: Some(d("-1")),
            ..limit()
        },
        ErrorCode::Validation,
        &["limit_price", "positive"],
    );
    refused(
        OrderEntry {
            limit_price: Some(d("60000")),
            ..entry(OrderType::Market)
        },
        ErrorCode::Validation,
        &["limit_price", "market", "rule 3"],
    );
    let sl = OrderEntry {
        side: Side::Sell,
        trigger_price: Some(d("59000")),
        limit_price: Some(d("58900")),
        ..entry(OrderType::StopLoss)
    };
    refused(
        sl,
        ErrorCode::Validation,
        &["limit_price", "stop_loss", "rule 3"],
    );
    let sll = OrderEntry {
        side: Side::Sell,
        trigger_price: Some(d("59000")),
        limit_price: Some(d("58900")),
        ..entry(OrderType::StopLossLimit)
    };
    assert_eq!(check(&sll).unwrap().limit_price(), Some(d("58900")));
}

#[test]
fn rule_4_trigger_price_required_on_stop_and_take_profit_types_only() {
    for kind in [
        OrderType::StopLoss,
        OrderType::StopLossLimit,
        OrderType::TakeProfit,
        OrderType::TakeProfitLimit,
    ] {
        refused(
            OrderEntry {
                limit_price: Some(d("60000")),
                ..entry(kind)
            }
            .without_unused_limit(kind),
            ErrorCode::Validation,
            &["trigger_price is required", "rule 4"],
        );
    }
    refused(
        OrderEntry {
            trigger_price: Some(d("61000")),
            ..limit()
        },
        ErrorCode::Validation,
        &["trigger_price", "limit", "rule 4"],
    );
    refused(
        OrderEntry {
            trigger_price: Some(d("61000")),
            ..entry(OrderType::Market)
        },
        ErrorCode::Validation,
        &["trigger_price", "rule 4"],
    );
}

impl OrderEntry {
    /// Drops limit_price where the type does not use it, so only the rule under test fires.
    fn without_unused_limit(self, kind: OrderType) -> Self {
        let uses = matches!(kind, OrderType::StopLossLimit | OrderType::TakeProfitLimit);
        OrderEntry {
            limit_price: if uses { self.limit_price } else { None },
            ..self
        }
    }
}

#[test]
fn rule_5_take_profit_and_stop_loss_prices_only_on_the_combo() {
    let combo = OrderEntry {
        side: Side::Sell,
        take_profit_price: Some(d("61000")),
        stop_loss_price: Some(d("59000")),
        ..entry(OrderType::TakeProfitStopLoss)
    };
    let ok = check(&combo).unwrap();
    assert_eq!(
        (ok.take_profit_price(), ok.stop_loss_price()),
        (Some(d("61000")), Some(d("59000")))
    );
    refused(
        OrderEntry {
            stop_loss_price: None,
            ..combo.clone()
        },
        ErrorCode::Validation,
        &["stop_loss_price is required", "rule 5"],
    );
    refused(
        OrderEntry {
            take_profit_price: Some(d("61000")),
            ..limit()
        },
        ErrorCode::Validation,
        &["take_profit_price", "rule 5"],
    );
    refused(
        OrderEntry {
            stop_loss_price: Some(d("59000")),
            ..limit()
        },
        ErrorCode::Validation,
        &["stop_loss_price", "rule 5"],
    );
}

#[test]
fn rule_6_trigger_price_type_refused_on_market_and_limit_and_must_match_otherwise() {
    refused(
        OrderEntry {
            trigger_price_type: Some(TriggerPriceType::TradePrice),
            ..limit()
        },
        ErrorCode::Validation,
        &["trigger_price_type", "rule 6"],
    );
    let tp = OrderEntry {
        side: Side::Sell,
        trigger_price: Some(d("61000")),
        ..entry(OrderType::TakeProfit)
    };
    assert_eq!(
        check(&tp).unwrap().trigger_price_type(),
        Some(TriggerPriceType::TradePrice)
    );
    refused(
        OrderEntry {
            trigger_price_type: Some(TriggerPriceType::MarkPrice),
            ..tp
        },
        ErrorCode::Validation,
        &["trade_price", "rule 6"],
    );
    let combo = OrderEntry {
        side: Side::Sell,
        take_profit_price: Some(d("61000")),
        stop_loss_price: Some(d("59000")),
        ..entry(OrderType::TakeProfitStopLoss)
    };
    assert_eq!(
        check(&combo).unwrap().trigger_price_type(),
        Some(TriggerPriceType::MarkPrice)
    );
    refused(
        OrderEntry {
            trigger_price_type: Some(TriggerPriceType::TradePrice),
            ..combo
        },
        ErrorCode::Validation,
        &["mark_price", "rule 6"],
    );
}

#[test]
fn rule_7_conditional_time_in_force_may_be_given_but_must_match() {
    let sl = OrderEntry {
        side: Side::Sell,
        trigger_price: Some(d("59000")),
        ..entry(OrderType::StopLoss)
    };
    assert_eq!(check(&sl).unwrap().time_in_force, TimeInForce::Ioc);
    assert!(
        check(&OrderEntry {
            time_in_force: Some(TimeInForce::Ioc),
            ..sl.clone()
        })
        .is_ok()
    );
    refused(
        OrderEntry {
            time_in_force: Some(TimeInForce::Gtc),
            ..sl
        },
        ErrorCode::Validation,
        &["IOC", "stop_loss", "rule 7"],
    );
    let tpl = OrderEntry {
        side: Side::Sell,
        trigger_price: Some(d("61000")),
        limit_price: Some(d("61000")),
        ..entry(OrderType::TakeProfitLimit)
    };
    assert_eq!(check(&tpl).unwrap().time_in_force, TimeInForce::Gtc);
    refused(
        OrderEntry {
            time_in_force: Some(TimeInForce::Ioc),
            ..tpl
        },
        ErrorCode::Validation,
        &["GTC", "rule 7"],
    );
}

#[test]
fn rule_8_triggers_already_reached_or_on_the_wrong_side_are_refused() {
    // Last trade 60000: a sell stop-loss lies below, a sell take-profit above; a buy the reverse.
    let at = |kind, side, trigger: &str| OrderEntry {
        side,
        trigger_price: Some(d(trigger)),
        ..entry(kind)
    };
    assert!(check(&at(OrderType::StopLoss, Side::Sell, "59999.9")).is_ok());
    refused(
        at(OrderType::StopLoss, Side::Sell, "60000"),
        ErrorCode::Validation,
        &["already reached", "below", "rule 8"],
    );
    assert!(check(&at(OrderType::StopLoss, Side::Buy, "60000.1")).is_ok());
    refused(
        at(OrderType::StopLoss, Side::Buy, "59000"),
        ErrorCode::Validation,
        &["above", "rule 8"],
    );
    assert!(check(&at(OrderType::TakeProfit, Side::Sell, "60500")).is_ok());
    refused(
        at(OrderType::TakeProfit, Side::Sell, "59500"),
        ErrorCode::Validation,
        &["take-profit", "rule 8"],
    );
    assert!(check(&at(OrderType::TakeProfit, Side::Buy, "59500")).is_ok());
    // The combo compares both legs with the mark price (60010), not the last trade.
    let combo = |tp: &str, sl: &str| OrderEntry {
        side: Side::Sell,
        take_profit_price: Some(d(tp)),
        stop_loss_price: Some(d(sl)),
        ..entry(OrderType::TakeProfitStopLoss)
    };
    assert!(check(&combo("60010.1", "60009.9")).is_ok());
    refused(
        combo("60005", "59000"),
        ErrorCode::Validation,
        &["take_profit_price", "mark price", "rule 8"],
    );
    refused(
        combo("61000", "60010"),
        ErrorCode::Validation,
        &["stop_loss_price", "rule 8"],
    );
}

#[test]
fn rule_9_leverage_above_max_leverage_is_refused() {
    assert_eq!(
        check(&OrderEntry {
            leverage: Some(2),
            ..limit()
        })
        .unwrap()
        .leverage,
        Some(2)
    );
    refused(
        OrderEntry {
            leverage: Some(3),
            ..limit()
        },
        ErrorCode::Validation,
        &["leverage", "rule 9"],
    );
    refused(
        OrderEntry {
            leverage: Some(0),
            ..limit()
        },
        ErrorCode::Validation,
        &["leverage", "rule 9"],
    );
}

#[test]
fn rule_10_customer_ip_is_an_address_without_port_cidr_or_zone() {
    for ok in ["203.0.113.7", "2001:db8::1", "::1"] {
        assert!(
            check(&OrderEntry {
                customer_ip: Some(ok.into()),
                ..limit()
            })
            .is_ok(),
            "{ok}"
        );
    }
    for (bad, word) in [
        ("203.0.113.7:443", "port"),
        ("[2001:db8::1]:443", "port"),
        ("10.0.0.0/8", "CIDR"),
        ("fe80::1%eth0", "zone"),
        ("localhost", "IPv4"),
    ] {
        refused(
            OrderEntry {
                customer_ip: Some(bad.into()),
                ..limit()
            },
            ErrorCode::Validation,
            &["customer_ip", word, "rule 10"],
        );
    }
}

#[test]
fn rule_11_reference_id_pattern_and_length() {
    assert!(
        check(&OrderEntry {
            reference_id: "A-z_09".repeat(7)[..40].to_owned(),
            ..limit()
        })
        .is_ok()
    );
    for bad in ["", "has space", "ünïcode", &"x".repeat(41), "a.b"] {
        refused(
            OrderEntry {
                reference_id: bad.into(),
                ..limit()
            },
            ErrorCode::Validation,
            &["reference_id"],
        );
    }
}

#[test]
fn rule_12_a_price_the_type_does_not_use_is_refused_not_dropped() {
    let market = OrderEntry {
        stop_loss_price: Some(d("1")),
        ..entry(OrderType::Market)
    };
    refused(
        market,
        ErrorCode::Validation,
        &["stop_loss_price", "not used by market"],
    );
}

#[test]
fn rule_13_gtd_needs_a_future_expire_time_and_nothing_else_takes_one() {
    let gtd = OrderEntry {
        time_in_force: Some(TimeInForce::Gtd),
        expire_time: Some(NOW.plus_millis(60_000)),
        ..limit()
    };
    let ok = check(&gtd).unwrap();
    assert_eq!(
        (ok.time_in_force, ok.expire_time),
        (TimeInForce::Gtd, Some(NOW.plus_millis(60_000)))
    );
    refused(
        OrderEntry {
            expire_time: None,
            ..gtd.clone()
        },
        ErrorCode::Validation,
        &["expire_time is required", "rule 13"],
    );
    refused(
        OrderEntry {
            expire_time: Some(NOW),
            ..gtd
        },
        ErrorCode::Validation,
        &["future", "rule 13"],
    );
    refused(
        OrderEntry {
            expire_time: Some(NOW.plus_millis(1)),
            ..limit()
        },
        ErrorCode::Validation,
        &["only used by GTD", "rule 13"],
    );
}

#[test]
fn d5_defaults_and_market_orders_never_rest() {
    assert_eq!(check(&limit()).unwrap().time_in_force, TimeInForce::Gtc);
    assert_eq!(
        check(&entry(OrderType::Market)).unwrap().time_in_force,
        TimeInForce::Ioc
    );
    assert_eq!(
        check(&OrderEntry {
            time_in_force: Some(TimeInForce::Fok),
            ..entry(OrderType::Market)
        })
        .unwrap()
        .time_in_force,
        TimeInForce::Fok
    );
    refused(
        OrderEntry {
            time_in_force: Some(TimeInForce::Gtc),
            ..entry(OrderType::Market)
        },
        ErrorCode::Validation,
        &["cannot rest"],
    );
    refused(
        OrderEntry {
            post_only: true,
            ..entry(OrderType::Market)
        },
        ErrorCode::Validation,
        &["post_only"],
    );
    assert!(
        check(&OrderEntry {
            post_only: true,
            ..limit()
        })
        .unwrap()
        .post_only
    );
}

#[test]
fn off_grid_prices_and_amounts_and_oversized_notionals_are_order_rejected() {
    refused(
        OrderEntry {
            limit_price: Some(d("59000.05")),
            ..limit()
        },
        ErrorCode::OrderRejected,
        &["limit_price", "tick size"],
    );
    refused(
        OrderEntry {
            amount: Some(d("0.00015")),
            ..limit()
        },
        ErrorCode::OrderRejected,
        &["amount", "lot size"],
    );
    refused(
        OrderEntry {
            amount: Some(d("200")),
            ..limit()
        },
        ErrorCode::OrderRejected,
        &["notional", "venue maximum"],
    );
    // Inputs whose product would overflow a decimal are refused, never multiplied blindly.
    refused(
        OrderEntry {
            amount: Some(d("9999999999999999999")),
            limit_price: Some(d("99999999999999999")),
            ..limit()
        },
        ErrorCode::OrderRejected,
        &["notional", "venue maximum"],
    );
    // A price at which one lot alone exceeds the maximum, even where nothing multiplies it
    // (a take-profit price), is refused: every stored price is a bounded number of ticks.
    refused(
        OrderEntry {
            take_profit_price: Some(d("99999999999999999999999999")),
            stop_loss_price: Some(d("50000")),
            side: Side::Sell,
            ..entry(OrderType::TakeProfitStopLoss)
        },
        ErrorCode::OrderRejected,
        &["take_profit_price", "too high", "venue maximum"],
    );
    let cash = OrderEntry {
        amount: None,
        cash_amount: Some(d("20000000")),
        ..entry(OrderType::Market)
    };
    refused(
        cash,
        ErrorCode::OrderRejected,
        &["cash_amount", "venue maximum"],
    );
}

/// D4: the open-order bound counts what can stay open; orders that end in their own request
/// (market, IOC, FOK, cash) pass it, so a customer at the bound can still close a position.
#[test]
fn only_resting_limits_and_conditional_orders_can_stay_open() {
    let with_tif = |tif| OrderEntry {
        time_in_force: Some(tif),
        ..limit()
    };
    assert!(limit().can_rest(), "a limit rests GTC by default");
    assert!(with_tif(TimeInForce::Gtc).can_rest() && with_tif(TimeInForce::Gtd).can_rest());
    assert!(!with_tif(TimeInForce::Ioc).can_rest() && !with_tif(TimeInForce::Fok).can_rest());
    assert!(!entry(OrderType::Market).can_rest());
    let cash = OrderEntry {
        amount: None,
        cash_amount: Some(d("100")),
        ..limit()
    };
    assert!(!cash.can_rest());
    for kind in [
        OrderType::StopLoss,
        OrderType::StopLossLimit,
        OrderType::TakeProfit,
        OrderType::TakeProfitLimit,
        OrderType::TakeProfitStopLoss,
    ] {
        assert!(entry(kind).can_rest(), "{kind:?} waits on its trigger");
    }
}

/// The grid's check hands on what it found: a limit order's price in whole ticks and its
/// amount in whole lots (the engine's matching units), and none where the order has no limit
/// (a market order) or no amount (a cash order).
#[test]
fn the_grids_check_gives_the_limit_in_ticks_and_the_amount_in_lots() {
    let spec = btc();
    let units = |e: &OrderEntry| check(e).expect("accepted").units;
    let whole = |value: &str, unit: Decimal| {
        let q = (d(value) / unit).normalize();
        assert_eq!(q.scale(), 0, "{value} is a whole number of {unit}");
        Some(q.mantissa())
    };
    let lots = whole("0.01", spec.lot_size);
    let limit_units = units(&limit());
    assert_eq!(limit_units.limit_ticks, whole("59000", spec.tick_size));
    assert_eq!(limit_units.lots, lots);
    let market = units(&OrderEntry {
        time_in_force: Some(TimeInForce::Ioc),
        ..entry(OrderType::Market)
    });
    assert_eq!((market.limit_ticks, market.lots), (None, lots));
    let cash = units(&OrderEntry {
        amount: None,
        cash_amount: Some(d("100")),
        time_in_force: Some(TimeInForce::Ioc),
        ..entry(OrderType::Market)
    });
    assert_eq!(cash, GridUnits::default());
}
