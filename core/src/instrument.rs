//! Instruments and settlement assets (interface §2.11; D8).

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

/// Settlement currencies; both have a ledger precision of 10 decimals (D7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Asset {
    Usdc,
    Usdt,
}

impl Asset {
    pub const ALL: [Asset; 2] = [Asset::Usdc, Asset::Usdt];

    /// Its place in [`Asset::ALL`], for tables with a slot per asset.
    pub const fn index(self) -> usize {
        self as usize
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Asset::Usdc => "USDC",
            Asset::Usdt => "USDT",
        }
    }

    /// Exact, case-sensitive: assets are upper-case codes on the wire.
    pub fn parse(text: &str) -> Option<Self> {
        Asset::ALL.into_iter().find(|a| a.as_str() == text)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum InstrumentStatus {
    /// Trading normally.
    Active,
    /// Limit orders that would rest only; matching disabled.
    PostOnly,
    /// New orders rejected.
    TradeHalt,
}

impl InstrumentStatus {
    pub const ALL: [InstrumentStatus; 3] = [
        InstrumentStatus::Active,
        InstrumentStatus::PostOnly,
        InstrumentStatus::TradeHalt,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            InstrumentStatus::Active => "active",
            InstrumentStatus::PostOnly => "post_only",
            InstrumentStatus::TradeHalt => "trade_halt",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        InstrumentStatus::ALL
            .into_iter()
            .find(|s| s.as_str() == text)
    }
}

/// The static definition of a perpetual instrument.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstrumentSpec {
    pub symbol: String,
    pub underlying: String,
    pub quote_currency: String,
    pub settlement: Asset,
    #[serde(with = "crate::decimal::bin")]
    pub tick_size: Decimal,
    #[serde(with = "crate::decimal::bin")]
    pub lot_size: Decimal,
    /// The venue's minimum initial margin, a fraction (0.50 = 50%).
    #[serde(with = "crate::decimal::bin")]
    pub init_margin_req: Decimal,
    #[serde(with = "crate::decimal::bin")]
    pub maint_margin_req: Decimal,
    /// Index and mark price at genesis.
    #[serde(with = "crate::decimal::bin")]
    pub start_price: Decimal,
}

impl InstrumentSpec {
    /// `price` is a whole multiple of the tick size.
    pub fn on_tick(&self, price: Decimal) -> bool {
        crate::decimal::is_multiple(price, self.tick_size)
    }

    /// `amount` is a whole multiple of the lot size.
    pub fn on_lot(&self, amount: Decimal) -> bool {
        crate::decimal::is_multiple(amount, self.lot_size)
    }

    /// Decimals of the tick size: the minimum decimals of every price of this instrument.
    pub fn price_decimals(&self) -> u32 {
        crate::decimal::scale_of(self.tick_size)
    }

    /// Decimals of the lot size: the minimum decimals of every amount of this instrument.
    pub fn amount_decimals(&self) -> u32 {
        crate::decimal::scale_of(self.lot_size)
    }
}

/// Funding interval of every perpetual (interface §1, §2.11).
pub const FUNDING_INTERVAL: &str = "1h";

/// The four default instruments of D8.
pub fn default_instruments() -> Vec<InstrumentSpec> {
    let spec = |underlying: &str, settlement: Asset, tick: Decimal, lot: Decimal, start: i64| {
        let quote = settlement.as_str();
        InstrumentSpec {
            symbol: format!("{underlying}-{quote}-PERP"),
            underlying: underlying.to_owned(),
            quote_currency: quote.to_owned(),
            settlement,
            tick_size: tick,
            lot_size: lot,
            init_margin_req: Decimal::new(50, 2),
            maint_margin_req: Decimal::new(30, 2),
            start_price: Decimal::from(start),
        }
    };
    vec![
        spec(
            "BTC",
            Asset::Usdc,
            Decimal::new(1, 1),
            Decimal::new(1, 4),
            60_000,
        ),
        spec(
            "ETH",
            Asset::Usdc,
            Decimal::new(1, 2),
            Decimal::new(1, 3),
            3_000,
        ),
        spec(
            "SOL",
            Asset::Usdc,
            Decimal::new(1, 3),
            Decimal::new(1, 2),
            150,
        ),
        spec(
            "BTC",
            Asset::Usdt,
            Decimal::new(1, 1),
            Decimal::new(1, 4),
            60_000,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_four_instruments_of_d8() {
        let all = default_instruments();
        let names: Vec<&str> = all.iter().map(|i| i.symbol.as_str()).collect();
        assert_eq!(
            names,
            [
                "BTC-USDC-PERP",
                "ETH-USDC-PERP",
                "SOL-USDC-PERP",
                "BTC-USDT-PERP"
            ]
        );
        let sol = &all[2];
        assert_eq!(
            (sol.tick_size.to_string(), sol.lot_size.to_string()),
            ("0.001".into(), "0.01".into())
        );
        assert_eq!(sol.price_decimals(), 3);
        assert!(sol.on_tick(Decimal::new(150_001, 3)) && !sol.on_tick(Decimal::new(1_500_001, 4)));
        assert!(
            all.iter().all(|i| i.init_margin_req.to_string() == "0.50"
                && i.maint_margin_req.to_string() == "0.30")
        );
    }
}
