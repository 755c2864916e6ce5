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

    /// Parses a query time: RFC 3339, or milliseconds since the epoch as plain digits.
    pub fn parse_rfc3339_or_millis(text: &str) -> Option<Self> {
        if !text.is_empty() && text.len() <= 16 && text.bytes().all(|b| b.is_ascii_digit()) {
            let ms: i64 = text.parse().ok()?;
            return (ms < YEAR_10000_MS).then_some(Timestamp(ms));
        }
        Self::parse_rfc3339(text)
    }
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
        assert_eq!(
            Timestamp::parse_rfc3339_or_millis("1767225600123"),
            Some(Timestamp::from_millis(1_767_225_600_123))
        );
        assert_eq!(Timestamp::parse_rfc3339("2026-01-01T00:00:00.0001Z"), None);
        assert_eq!(Timestamp::parse_rfc3339("2026-01-01"), None);
        assert_eq!(Timestamp::parse_rfc3339_or_millis("-5"), None);
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
