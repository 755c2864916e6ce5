//! Recorded trades (issue 39 item 1): Tardis.dev's `trades` and Binance's USDⓈ-M `aggTrades`
//! files, each row a trade the market printed, planned as `PrintRecordedTrade` steps: the
//! customers' resting orders it reaches fill by the queue model
//! (`perpsim_systems::trading::desk::recorded`), against the market maker.
//!
//! - The aggressor: Tardis's `side` (`buy` or `sell`; a row whose side is `unknown` is
//!   passed over), Binance's `is_buyer_maker` (`true`: the seller took).
//! - The price times `price_scale`, onto the tick as the book's levels are (a sell reaches
//!   the bids, rounded down; a buy the asks, rounded up), so a trade at a recorded level
//!   meets that level; the amount down to the lot (a trade left with nothing is passed over).
//! - Times never go back (several rows may share one): Tardis's `timestamp` in µs,
//!   Binance's `transact_time` in ms (or µs).

use perpsim_core::Decimal;
use perpsim_core::decimal::Sign;
use perpsim_core::order::Side;
use perpsim_core::time::Timestamp;
use perpsim_systems::Command;
use perpsim_systems::command::PrintRecordedTrade;

use super::{Mapping, Market, Opened, decimal, micros, push};
use crate::replay::plan::{Ctx, ScenarioError};
use crate::replay::table::{Columns, Table};
use crate::replay::timeline::Timeline;

/// Tardis.dev `trades`; those read required.
const TARDIS_TRADES: &Columns = &[
    ("exchange", false),
    ("symbol", true),
    ("timestamp", true),
    ("local_timestamp", false),
    ("id", false),
    ("side", true),
    ("price", true),
    ("amount", true),
];
const TARDIS_SYMBOL: usize = 1;
const TARDIS_SIDE: usize = 5;
const TARDIS_PRICE: usize = 6;
const TARDIS_AMOUNT: usize = 7;

/// Binance `aggTrades`, as data.binance.vision writes it; those read required.
const BINANCE_AGG: &Columns = &[
    ("agg_trade_id", false),
    ("price", true),
    ("quantity", true),
    ("first_trade_id", false),
    ("last_trade_id", false),
    ("transact_time", true),
    ("is_buyer_maker", true),
];
const BINANCE_PRICE: usize = 1;
const BINANCE_QUANTITY: usize = 2;
const TRANSACT_TIME: usize = 5;
const BUYER_MAKER: usize = 6;

/// A Tardis `trades` file's rows for `symbol`.
pub(super) fn tardis(
    ctx: &Ctx,
    opened: Opened,
    symbol: &str,
    mapping: &Mapping,
    steps: &mut Timeline,
) -> Result<(), ScenarioError> {
    let mut table = Table::read((&opened.0, opened.1), TARDIS_TRADES, ctx.limits)?;
    let mut market = Market::default();
    while table.next_row()? {
        if table.required(TARDIS_SYMBOL)?.0 != symbol {
            continue;
        }
        let at = market.time(&table, micros(&table)?)?;
        let (text, i) = table.required(TARDIS_SIDE)?;
        let side = match text {
            "buy" => Side::Buy,
            "sell" => Side::Sell,
            "unknown" => continue,
            _ => return Err(table.at(i, "side: expected buy, sell or unknown")),
        };
        if at < mapping.from || at > ctx.end {
            continue;
        }
        plan(
            ctx,
            &table,
            (mapping, at),
            (side, TARDIS_PRICE, TARDIS_AMOUNT),
            steps,
        )?;
    }
    match market.seen {
        true => Ok(()),
        false => Err(table.whole(format!("no row of the file is for the symbol {symbol:?}"))),
    }
}

/// A Binance `aggTrades` file's rows (the file is one symbol's).
pub(super) fn binance(
    ctx: &Ctx,
    opened: Opened,
    mapping: &Mapping,
    steps: &mut Timeline,
) -> Result<(), ScenarioError> {
    let mut table = Table::read((&opened.0, opened.1), BINANCE_AGG, ctx.limits)?;
    let mut market = Market::default();
    while table.next_row()? {
        let at = super::binance::time(&table, TRANSACT_TIME, &mut market.last_time)?;
        market.seen = true;
        let (text, i) = table.required(BUYER_MAKER)?;
        let side = match text {
            "true" | "True" => Side::Sell,
            "false" | "False" => Side::Buy,
            _ => return Err(table.at(i, "is_buyer_maker: expected true or false")),
        };
        if at < mapping.from || at > ctx.end {
            continue;
        }
        let columns = (side, BINANCE_PRICE, BINANCE_QUANTITY);
        plan(ctx, &table, (mapping, at), columns, steps)?;
    }
    match market.seen {
        true => Ok(()),
        false => Err(table.whole("the file holds no row")),
    }
}

/// Plans the row's trade at `at`, its aggressor on `side`, from columns `(price, amount)`,
/// unless its amount rounds to nothing.
fn plan(
    ctx: &Ctx,
    table: &Table,
    (mapping, at): (&Mapping, Timestamp),
    (side, price, amount): (Side, usize, usize),
    steps: &mut Timeline,
) -> Result<(), ScenarioError> {
    let required = |c: usize| -> Result<Decimal, ScenarioError> {
        table.required(c)?;
        Ok(decimal(table, c, Sign::Unsigned)?.expect("a field there").0)
    };
    let (p, a) = (required(price)?, required(amount)?);
    let ticks = p * mapping.price_scale / mapping.tick;
    let ticks = match side {
        Side::Sell => ticks.floor(),
        Side::Buy => ticks.ceil(),
    };
    let price = (ticks * mapping.tick).normalize();
    let amount = ((a / mapping.lot).floor() * mapping.lot).normalize();
    if price <= Decimal::ZERO || amount <= Decimal::ZERO {
        return Ok(());
    }
    let command = Command::from(PrintRecordedTrade {
        symbol: mapping.instrument.to_owned(),
        side,
        price,
        amount,
    });
    push(ctx, table, (mapping, at), [command], steps)
}

#[cfg(test)]
mod tests {
    use crate::replay::recorded::written;

    use perpsim_core::time::HOUR_MS;

    use super::*;
    use crate::replay::files::Limits;

    /// 2024-01-01T00:00:00Z in ms.
    const T0: i64 = 1_704_067_200_000;

    const TARDIS: &str = "exchange,symbol,timestamp,local_timestamp,id,side,price,amount\n";
    const AGG: &str =
        "agg_trade_id,price,quantity,first_trade_id,last_trade_id,transact_time,is_buyer_maker\n";

    fn tardis_row(symbol: &str, ms: i64, side: &str, price: &str, amount: &str) -> String {
        let t = (T0 + ms) * 1000;
        format!("binance-futures,{symbol},{t},{t},7,{side},{price},{amount}\n")
    }

    /// The (ms past T0, "side price×amount") the file plans for BTC-USDC-PERP (tick 0.1, lot
    /// 0.0001) with `scale`; or the refusal as printed.
    fn planned(text: &str, tardis: bool, scale: &str) -> Result<Vec<(i64, String)>, String> {
        let dir = tempfile::tempdir().unwrap();
        let limits = Limits::default();
        let start = Timestamp::from_millis(T0);
        let scenario = dir.path().join("s.yaml");
        let ctx = Ctx::bare(&scenario, &limits, (start, start.plus_millis(2 * HOUR_MS)));
        let mapping = Mapping::for_tests(start, scale.parse().unwrap());
        let file = written(dir.path(), "t.csv", text);
        let mut steps = Timeline::default();
        let read = match tardis {
            true => self::tardis(&ctx, file, "BTCUSDT", &mapping, &mut steps),
            false => binance(&ctx, file, &mapping, &mut steps),
        };
        read.map_err(|e| {
            e.to_string()
                .replace(&dir.path().display().to_string(), ".")
        })?;
        Ok(steps
            .iter()
            .map(|s| match &s.command {
                Command::PrintRecordedTrade(t) => (
                    s.at.millis() - T0,
                    format!("{} {}×{}", t.side.as_str(), t.price, t.amount),
                ),
                other => panic!("a trade step, not {other:?}"),
            })
            .collect())
    }

    /// D11 (issue 39 item 1): each trade of the symbol a step, its aggressor's side kept, its
    /// price onto the tick towards the side it reaches, its amount down to the lot; unknown
    /// sides and trades of nothing passed over.
    #[test]
    fn a_tardis_trades_file_plans_each_trade_with_its_aggressor() {
        let text = [
            TARDIS.to_owned(),
            tardis_row("BTCUSDT", 0, "sell", "42000.07", "0.51234"),
            tardis_row("ETHUSDT", 1, "buy", "2200", "1"),
            tardis_row("BTCUSDT", 5, "buy", "42000.07", "1"),
            tardis_row("BTCUSDT", 5, "unknown", "42000", "1"),
            tardis_row("BTCUSDT", 9, "buy", "42000", "0.00001"),
        ]
        .concat();
        let expected = vec![
            (0, "sell 42000×0.5123".to_owned()),
            (5, "buy 42000.1×1".to_owned()),
        ];
        assert_eq!(planned(&text, true, "1").unwrap(), expected);
    }

    /// D11 (issue 39 item 1): a Binance aggTrades row's aggressor is the seller when the
    /// buyer made the market.
    #[test]
    fn a_binance_agg_trades_file_reads_the_aggressor_from_is_buyer_maker() {
        let text = format!(
            "{AGG}1,42000.05,0.5,1,1,{},true\n2,42000.05,0.25,2,3,{},false\n",
            T0,
            T0 + 250
        );
        let expected = vec![
            (0, "sell 42000×0.5".to_owned()),
            (250, "buy 42000.1×0.25".to_owned()),
        ];
        assert_eq!(planned(&text, false, "1").unwrap(), expected);
    }

    /// D11 (issue 39 item 2): a trades file's errors are refused at their line and column.
    #[test]
    fn every_bad_trade_row_is_refused_at_its_line_and_column() {
        let good = tardis_row("BTCUSDT", 5, "buy", "1", "1");
        let cases = [
            (
                format!(
                    "{TARDIS}{good}{}",
                    tardis_row("BTCUSDT", 4, "buy", "1", "1")
                ),
                true,
                "t.csv:3:25: timestamp: expected 2024-01-01T00:00:00.005Z or later",
            ),
            (
                format!("{TARDIS}{}", tardis_row("BTCUSDT", 0, "long", "1", "1")),
                true,
                "side: expected buy, sell or unknown",
            ),
            (
                format!("{TARDIS}{}", tardis_row("BTCUSDT", 0, "buy", "1,000", "1")),
                true,
                "expected 8 fields",
            ),
            (
                format!("{TARDIS}{}", tardis_row("BTCUSDT", 0, "buy", "", "1")),
                true,
                "price is empty",
            ),
            (
                format!("{AGG}1,1,1,1,1,{T0},yes\n"),
                false,
                "is_buyer_maker: expected true or false",
            ),
            (
                format!("{AGG}1,-1,1,1,1,{T0},true\n"),
                false,
                "price: expected a decimal in plain notation",
            ),
        ];
        for (text, tardis, says) in cases {
            let refused = planned(&text, tardis, "1").expect_err(&text);
            assert!(
                refused.contains(says),
                "{text:?}: expected {says}, got {refused}"
            );
        }
    }
}
