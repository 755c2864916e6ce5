//! Simulation time: milliseconds since the Unix epoch, UTC.
//!
//! One resolution everywhere (millisecond) means what a client reads back is exactly what the
//! engine stored, and a time parsed from `?from=<ms>` compares exactly with stored times.

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
use serde::{Deserialize, Serialize};

pub const SECOND_MS: i64 = 1_000;
pub const MINUTE_MS: i64 = 60 * SECOND_MS;
pub const HOUR_MS: i64 = 60 * MINUTE_MS;
pub const DAY_MS: i64 = 24 * HOUR_MS;

/// Latest representable instant accepted from clients: the start of year 10000 (exclusive).
pub const YEAR_10000_MS: i64 = 253_402_300_800_000;

/// An instant of simulation time.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Timestamp(i64);

impl Timestamp {
    pub const EPOCH: Timestamp = Timestamp(0);

    pub const fn from_millis(ms: i64) -> Self {
        Timestamp(ms)
    }

    pub const fn millis(self) -> i64 {
        self.0
    }

    pub const fn plus_millis(self, ms: i64) -> Self {
        Timestamp(self.0 + ms)
    }

    /// The first whole multiple of `period_ms` strictly after `self`.
    pub fn next_multiple_of(self, period_ms: i64) -> Self {
        assert!(period_ms > 0, "period must be positive");
        Timestamp((self.0.div_euclid(period_ms) + 1) * period_ms)
    }

    /// RFC 3339 in UTC with a `Z` suffix and millisecond precision.
    pub fn to_rfc3339(self) -> String {
        let dt: DateTime<Utc> = Utc
            .timestamp_millis_opt(self.0)
            .single()
            .expect("simulation time is always inside chrono's range");
        dt.to_rfc3339_opts(SecondsFormat::Millis, true)
    }

    /// Parses an RFC 3339 timestamp (any offset, converted to UTC). Sub-millisecond digits are
    /// refused rather than silently truncated.
    pub fn parse_rfc3339(text: &str) -> Option<Self> {
        let dt = DateTime::parse_from_rfc3339(text).ok()?;
        if dt.timestamp_subsec_nanos() % 1_000_000 != 0 {
            return None;
        }
        let ms = dt.timestamp_millis();
        (0..YEAR_10000_MS).contains(&ms).then_some(Timestamp(ms))
    }

    /// Parses an inclusive query bound (`from`, `to`, `created_from`, `created_to`): any RFC
    /// 3339 instant (years 0000–9999, any offset, any fraction), or milliseconds since the
    /// epoch as 1 to [`MAX_QUERY_MILLIS_DIGITS`] digits. Stored times are whole milliseconds,
    /// so a finer instant rounds the way that keeps exactly the stored times it admits: a
    /// lower bound up, an upper bound down.
    pub fn parse_query_bound(text: &str, bound: TimeBound) -> Option<Self> {
        if text.bytes().all(|b| b.is_ascii_digit()) {
            if text.is_empty() || text.len() > MAX_QUERY_MILLIS_DIGITS {
                return None;
            }
            return text.parse().ok().map(Timestamp);
        }
        let dt = DateTime::parse_from_rfc3339(text).ok()?;
        let ms = dt.timestamp_millis();
        let finer = dt.timestamp_subsec_nanos() % 1_000_000 != 0;
        Some(Timestamp(match bound {
            TimeBound::From if finer => ms + 1,
            _ => ms,
        }))
    }
}

/// Most digits of a query time given in milliseconds: enough for every instant before year
/// 10000 (253 402 300 800 000 has 15), and a bound that keeps the value far inside `i64`.
pub const MAX_QUERY_MILLIS_DIGITS: usize = 15;

/// Which end of an inclusive time range a query time is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeBound {
    From,
    To,
}

impl std::fmt::Display for Timestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_rfc3339_utc_with_z_and_millis() {
        assert_eq!(
            Timestamp::from_millis(0).to_rfc3339(),
            "1970-01-01T00:00:00.000Z"
        );
        assert_eq!(
            Timestamp::from_millis(1_767_225_600_123).to_rfc3339(),
            "2026-01-01T00:00:00.123Z"
        );
    }

    #[test]
    fn parses_rfc3339_with_offsets_and_millis() {
        let t = Timestamp::parse_rfc3339("2026-01-01T01:00:00+01:00").unwrap();
        assert_eq!(t, Timestamp::parse_rfc3339("2026-01-01T00:00:00Z").unwrap());
        assert_eq!(Timestamp::parse_rfc3339("2026-01-01T00:00:00.0001Z"), None);
        assert_eq!(Timestamp::parse_rfc3339("2026-01-01"), None);
    }

    #[test]
    fn query_bounds_take_millis_or_any_rfc3339_instant_rounded_inward() {
        let parse = Timestamp::parse_query_bound;
        assert_eq!(
            parse("1767225600123", TimeBound::From),
            Some(Timestamp::from_millis(1_767_225_600_123))
        );
        assert_eq!(parse("000000000000007", TimeBound::To), Some(Timestamp(7)));
        assert_eq!(parse("1000000000000000", TimeBound::To), None);
        assert_eq!(parse("", TimeBound::To), None);
        assert_eq!(parse("-5", TimeBound::From), None);
        // A finer instant keeps exactly the whole milliseconds inside the range.
        let fine = "1970-01-01T00:00:00.0015Z";
        assert_eq!(parse(fine, TimeBound::From), Some(Timestamp(2)));
        assert_eq!(parse(fine, TimeBound::To), Some(Timestamp(1)));
        let before_epoch = "1969-12-31T23:59:59.9995Z";
        assert_eq!(parse(before_epoch, TimeBound::From), Some(Timestamp(0)));
        assert_eq!(parse(before_epoch, TimeBound::To), Some(Timestamp(-1)));
        assert_eq!(
            parse("0000-01-01T00:00:00Z", TimeBound::From),
            Some(Timestamp(-62_167_219_200_000))
        );
        assert_eq!(
            parse("2026-01-01T01:00:00+01:00", TimeBound::To),
            Timestamp::parse_rfc3339("2026-01-01T00:00:00Z")
        );
        assert_eq!(parse("2026-01-01", TimeBound::To), None);
    }

    #[test]
    fn next_multiple_is_strictly_after() {
        let t = Timestamp::from_millis(HOUR_MS);
        assert_eq!(
            t.next_multiple_of(HOUR_MS),
            Timestamp::from_millis(2 * HOUR_MS)
        );
        assert_eq!(
            Timestamp::from_millis(HOUR_MS - 1).next_multiple_of(HOUR_MS),
            t
        );
    }
}
