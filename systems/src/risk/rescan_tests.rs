//! The event-driven margin pass against its oracle (issue 36 item 5): random sessions of
//! many accounts in two markets of one currency — positions opened and closed, leverage
//! changes, deposits, withdrawals pending across the next step, mark moves large enough to
//! call and liquidate, funding hours and midnights with their passes booked a few rows a
//! tick while the other steps come between them — run with the debug oracle on, which after every pass
//! re-sums and re-judges every account from its positions and panics where the pass left
//! another state. The session then replays from a midway snapshot to the same hash, and the
//! margin states it recorded are those the risk log says.

use perpsim_core::Decimal;
use perpsim_core::ids::CustomerCode;
use perpsim_core::instrument::Asset;
use perpsim_core::order::Side;
use perpsim_core::risk::MarginState;
use perpsim_core::time::{HOUR_MS, SECOND_MS, Timestamp};
use proptest::prelude::*;

use super::{MarginStates, RiskLog};
use crate::Engine;
use crate::command::{
    AdvanceClock, CancelOrder, PlaceOrder, RequestTransfer, SetFundingRate, SetInstrumentPrice,
    SetLeverage,
};
use crate::command::{Command, TransferKind};
use crate::testkit::*;

const MARKETS: [(&str, &str, &str); 2] = [
    ("BTC-USDC-PERP", "0.0001", "0.1"),
    ("ETH-USDC-PERP", "0.001", "0.01"),
];

#[derive(Debug, Clone)]
enum Step {
    /// `who` trades `lots` with the liquidity provider at the market's mark.
    Trade {
        who: usize,
        market: usize,
        buy: bool,
        lots: u16,
    },
    /// The market's index and mark move by `permille` thousandths.
    Move {
        market: usize,
        permille: i16,
    },
    Leverage {
        who: usize,
        two: bool,
    },
    Deposit {
        who: usize,
        usdc: u16,
    },
    Withdraw {
        who: usize,
        usdc: u16,
    },
    Advance {
        minutes: u8,
    },
    /// The market's funding rate for the running hour, in hundredths of a basis point.
    Rate {
        market: usize,
        rate: i8,
    },
    /// The clock to the next whole hour, where the hour's pass (and at 00:00 midnight's)
    /// falls due: the steps after it come at that instant while the pass books its rows.
    ToHour,
}

fn step() -> impl Strategy<Value = Step> {
    let who = 0..6usize;
    prop_oneof![
        5 => (who.clone(), 0..2usize, any::<bool>(), 100..1000u16)
            .prop_map(|(who, market, buy, lots)| Step::Trade { who, market, buy, lots }),
        5 => (0..2usize, -250..250i16).prop_map(|(market, permille)| Step::Move { market, permille }),
        1 => (who.clone(), any::<bool>()).prop_map(|(who, two)| Step::Leverage { who, two }),
        1 => (who.clone(), 1..2000u16).prop_map(|(who, usdc)| Step::Deposit { who, usdc }),
        1 => (who, 1..2000u16).prop_map(|(who, usdc)| Step::Withdraw { who, usdc }),
        1 => (1..90u8).prop_map(|minutes| Step::Advance { minutes }),
        1 => (0..2usize, any::<i8>()).prop_map(|(market, rate)| Step::Rate { market, rate }),
        1 => Just(Step::ToHour),
    ]
}

fn mark(e: &Engine, market: usize) -> Decimal {
    e.view().instruments[MARKETS[market].0].mark_price
}

/// The commands of one step: a trade is a resting order of the liquidity provider and the
/// customer's market order against it.
fn commands(e: &Engine, s: &Step, lp: CustomerCode, c: &[CustomerCode], n: usize) -> Vec<Command> {
    let on = |market: usize, customer, entry| {
        Command::PlaceOrder(PlaceOrder {
            customer,
            symbol: MARKETS[market].0.into(),
            entry: Box::new(entry),
        })
    };
    // A withdrawal stays pending over the next step, through whatever its moves call.
    let transfer = |who: usize, kind, usdc: u16, delay_ms| {
        Command::RequestTransfer(RequestTransfer {
            customer: c[who],
            kind,
            asset: Asset::Usdc,
            amount: Decimal::from(usdc),
            delay_ms,
        })
    };
    match *s {
        Step::Trade {
            who,
            market,
            buy,
            lots,
        } => {
            let (_, lot, _) = MARKETS[market];
            let amount = (Decimal::from(lots) * d(lot)).to_string();
            let price = mark(e, market).to_string();
            let (lp_side, side) = if buy {
                (Side::Sell, Side::Buy)
            } else {
                (Side::Buy, Side::Sell)
            };
            vec![
                on(
                    market,
                    lp,
                    limit(lp_side, &format!("lp{n}"), &amount, &price),
                ),
                on(
                    market,
                    c[who],
                    crate::testkit::market(side, &format!("t{n}"), &amount),
                ),
                Command::CancelOrder(CancelOrder {
                    customer: lp,
                    reference_id: format!("lp{n}"),
                }),
            ]
        }
        Step::Move { market, permille } => {
            let (symbol, _, tick) = MARKETS[market];
            let moved = mark(e, market) * (Decimal::ONE + Decimal::new(permille.into(), 3));
            let price = (moved / d(tick)).round().max(Decimal::ONE) * d(tick);
            vec![Command::SetInstrumentPrice(SetInstrumentPrice {
                symbol: symbol.into(),
                index_price: price,
                mark_price: price,
            })]
        }
        Step::Leverage { who, two } => vec![Command::SetLeverage(SetLeverage {
            customer: c[who],
            leverage: if two { 2 } else { 1 },
        })],
        Step::Deposit { who, usdc } => vec![transfer(who, TransferKind::Deposit, usdc, 0)],
        Step::Withdraw { who, usdc } => {
            vec![transfer(who, TransferKind::Withdrawal, usdc, 1_500)]
        }
        Step::Advance { minutes } => {
            vec![Command::AdvanceClock(AdvanceClock {
                to: now(e).plus_millis(i64::from(minutes) * 60 * SECOND_MS),
            })]
        }
        Step::Rate { market, rate } => vec![Command::SetFundingRate(SetFundingRate {
            symbol: MARKETS[market].0.into(),
            rate: Decimal::new(rate.into(), 6),
        })],
        Step::ToHour => {
            let hour = (now(e).millis() / HOUR_MS + 1) * HOUR_MS;
            vec![Command::AdvanceClock(AdvanceClock {
                to: Timestamp::from_millis(hour),
            })]
        }
    }
}

/// A liquidity provider with ten million, and six customers with 3 000 each at leverage 2;
/// `rows` of a periodic pass booked a tick.
fn session(rows: usize) -> (Engine, CustomerCode, Vec<CustomerCode>) {
    let mut e = engine(36);
    e.set_rows_per_tick(rows);
    let mut all = funded(&mut e, 7, "3000");
    let lp = all.remove(0);
    let more = Command::RequestTransfer(RequestTransfer {
        customer: lp,
        kind: TransferKind::Deposit,
        asset: Asset::Usdc,
        amount: d("10000000"),
        delay_ms: 0,
    });
    assert!(run(&mut e, vec![more])[0].is_ok());
    let t = now(&e).plus_millis(1);
    let leverage = all.iter().map(|&customer| {
        Command::SetLeverage(SetLeverage {
            customer,
            leverage: 2,
        })
    });
    e.tick(t, leverage.collect());
    (e, lp, all)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 48,
        ..ProptestConfig::default()
    })]

    #[test]
    fn event_driven_margin_judgments_equal_a_full_rescan_after_every_pass(
        steps in prop::collection::vec(step(), 20..80),
        rows in 1..4usize,
    ) {
        let (mut live, lp, c) = session(rows);
        let mut ticks: Vec<(Timestamp, Vec<Command>)> = Vec::new();
        let mut midway = None;
        for (n, s) in steps.iter().enumerate() {
            // While a pass books its rows the host ticks at its instant (issue 36 item 2).
            let later = if live.settling() { 0 } else { SECOND_MS };
            let t = now(&live).plus_millis(later);
            let cmds = commands(&live, s, lp, &c, n);
            live.tick(t, cmds.clone());
            ticks.push((t, cmds));
            if n == steps.len() / 2 {
                midway = Some((live.state(), ticks.len()));
            }
        }
        // The states held are the last each account's records say.
        let world = live.world_mut();
        let mut last = std::collections::BTreeMap::new();
        for r in world.resource::<RiskLog>().0.iter() {
            last.insert((r.customer, r.asset), r.state);
        }
        last.retain(|_, s| *s != MarginState::Normal);
        prop_assert_eq!(&world.resource::<MarginStates>().0, &last);
        let (state, done) = midway.expect("at least one step");
        let mut restored = Engine::restore(&state);
        restored.set_rows_per_tick(rows);
        for (t, cmds) in &ticks[done..] {
            restored.tick(*t, cmds.clone());
        }
        prop_assert_eq!(restored.state_hash(), live.state_hash());
    }
}

/// The oracle is live: a session that calls and liquidates runs through it (a wrong book
/// would panic the pass), and its records show both.
#[test]
fn a_session_with_calls_and_liquidations_passes_the_rescan_oracle() {
    let (mut e, lp, c) = session(usize::MAX);
    let mut n = 0;
    let mut go = |e: &mut Engine, s: Step| {
        let t = now(e).plus_millis(SECOND_MS);
        let cmds = commands(e, &s, lp, &c, n);
        n += 1;
        let trade = matches!(s, Step::Trade { .. });
        let out = e.tick(t, cmds);
        // A trade's resting order is filled before its cancel, which is refused.
        let checked = if trade {
            &out.results()[..2]
        } else {
            &out.results()[..]
        };
        assert!(checked.iter().all(Result::is_ok), "{:?}", out.results());
    };
    go(&mut e, Step::Leverage { who: 0, two: true });
    go(
        &mut e,
        Step::Trade {
            who: 0,
            market: 0,
            buy: true,
            lots: 900,
        },
    );
    go(
        &mut e,
        Step::Trade {
            who: 1,
            market: 1,
            buy: false,
            lots: 999,
        },
    );
    go(
        &mut e,
        Step::Trade {
            who: 2,
            market: 0,
            buy: true,
            lots: 400,
        },
    );
    for _ in 0..12 {
        go(
            &mut e,
            Step::Move {
                market: 0,
                permille: -50,
            },
        );
        go(
            &mut e,
            Step::Move {
                market: 1,
                permille: 30,
            },
        );
    }
    let states: Vec<MarginState> = e
        .world_mut()
        .resource::<RiskLog>()
        .0
        .iter()
        .map(|r| r.state)
        .collect();
    assert!(states.contains(&MarginState::MarginCall), "{states:?}");
    assert!(states.contains(&MarginState::Liquidation), "{states:?}");
}
