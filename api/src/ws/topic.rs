//! The ten topics of interface §6 and who may hear them (D9).

use std::fmt;

use perpsim_core::ids::{BrokerCode, CustomerCode};
use perpsim_systems::ReadView;
use perpsim_systems::records::venue::MarketId;

/// The topics as a client writes them, for the refusal of an unknown one.
pub const NAMES: &str = "ticker, orderbook-stream:{symbol}, market-trades:{symbol} (public); \
    balance-changes, notifications, positions:{customer_code}, margin, liquidations, orders, \
    trades (private)";

/// A topic as subscribed. Symbols are resolved to their market when the topic is parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Topic {
    BalanceChanges,
    Notifications,
    Positions(CustomerCode),
    Margin,
    Liquidations,
    Orders,
    Trades,
    Ticker,
    OrderBook(MarketId),
    MarketTrades(MarketId),
}

/// Who hears a topic's frames: a broker's (private topics) or everyone's (public).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Audience {
    pub broker: Option<BrokerCode>,
    pub topic: Topic,
}

/// Why a topic string was refused, with the error code D9 gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopicError {
    /// An unknown topic, or an unknown symbol: VALIDATION_ERROR.
    Unknown(String),
    /// A private topic before authentication: UNAUTHORIZED.
    Private,
    /// `positions:{code}` of no customer of this broker: NOT_FOUND, as on REST (D2).
    NoSuchCustomer(String),
}

impl Topic {
    /// Public topics need no authentication (interface §5).
    pub fn is_public(self) -> bool {
        matches!(
            self,
            Topic::Ticker | Topic::OrderBook(_) | Topic::MarketTrades(_)
        )
    }

    /// Parses `text` against the view; private topics need the connection's broker.
    pub fn parse(
        text: &str,
        view: &ReadView,
        broker: Option<BrokerCode>,
    ) -> Result<Topic, TopicError> {
        let unknown = || TopicError::Unknown(format!("unknown topic {text:?}; topics: {NAMES}"));
        let market = |symbol: &str| {
            view.trading.market(symbol).map(|(m, _)| m).ok_or_else(|| {
                let symbols: Vec<&str> = (0..view.trading.markets.len() as u32)
                    .map(|m| view.trading.symbol(m))
                    .collect();
                TopicError::Unknown(format!(
                    "unknown symbol {symbol:?} in topic {text:?}; symbols: {}",
                    symbols.join(", ")
                ))
            })
        };
        let topic = match text.split_once(':') {
            None => match text {
                "balance-changes" => Topic::BalanceChanges,
                "notifications" => Topic::Notifications,
                "margin" => Topic::Margin,
                "liquidations" => Topic::Liquidations,
                "orders" => Topic::Orders,
                "trades" => Topic::Trades,
                "ticker" => Topic::Ticker,
                _ => return Err(unknown()),
            },
            Some(("orderbook-stream", symbol)) => Topic::OrderBook(market(symbol)?),
            Some(("market-trades", symbol)) => Topic::MarketTrades(market(symbol)?),
            Some(("positions", code)) => {
                let broker = broker.ok_or(TopicError::Private)?;
                let customer = CustomerCode::parse(code)
                    .filter(|c| view.customer_of(broker, *c).is_some())
                    .ok_or_else(|| TopicError::NoSuchCustomer(code.to_owned()))?;
                Topic::Positions(customer)
            }
            Some(_) => return Err(unknown()),
        };
        match (topic.is_public(), broker) {
            (false, None) => Err(TopicError::Private),
            _ => Ok(topic),
        }
    }

    /// Who hears it on a connection of `broker`.
    pub fn audience(self, broker: Option<BrokerCode>) -> Audience {
        Audience {
            broker: if self.is_public() { None } else { broker },
            topic: self,
        }
    }

    /// The topic's name as subscribed and as each frame's `channel`.
    pub fn name(self, view: &ReadView) -> String {
        match self {
            Topic::BalanceChanges => "balance-changes".into(),
            Topic::Notifications => "notifications".into(),
            Topic::Positions(c) => format!("positions:{c}"),
            Topic::Margin => "margin".into(),
            Topic::Liquidations => "liquidations".into(),
            Topic::Orders => "orders".into(),
            Topic::Trades => "trades".into(),
            Topic::Ticker => "ticker".into(),
            Topic::OrderBook(m) => format!("orderbook-stream:{}", view.trading.symbol(m)),
            Topic::MarketTrades(m) => format!("market-trades:{}", view.trading.symbol(m)),
        }
    }
}

impl fmt::Display for TopicError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TopicError::Unknown(message) => f.write_str(message),
            TopicError::Private => f.write_str("a private topic needs an authenticated connection"),
            TopicError::NoSuchCustomer(code) => write!(f, "customer {code} does not exist"),
        }
    }
}
