//! The scenario's times: durations (`90s`, `1h30m`, `500ms`), offsets from a base (`+90s`)
//! and RFC 3339 timestamps. Pure.

use perpsim_core::time::{DAY_MS, HOUR_MS, MINUTE_MS, SECOND_MS, Timestamp};

/// The longest duration a scenario may name: ten years, far past any replay and far inside
/// the timestamp range.
const MAX_DURATION_MS: i64 = 10 * 366 * DAY_MS;

/// What a time field expects, for error messages.
pub const EXPECTED_AT: &str =
    "an offset such as +90s, +2h, +1d, +1h30m, +500ms, or an RFC 3339 timestamp";

/// `90s`, `2h`, `1d`, `1h30m`, `500ms`: whole numbers with units d, h, m, s, ms, largest
/// first, each at most once. `None` when malformed or above ten years.
pub fn parse_duration(text: &str) -> Option<i64> {
    const UNITS: [(&str, i64); 5] = [
        ("d", DAY_MS),
        ("h", HOUR_MS),
        ("ms", 1),
        ("m", MINUTE_MS),
        ("s", SECOND_MS),
    ];
    // Largest first: d, h, m, s, ms.
    const ORDER: [&str; 5] = ["d", "h", "m", "s", "ms"];
    let mut rest = text;
    let mut total: i64 = 0;
    let mut last: Option<usize> = None;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 12 {
            return None;
        }
        let n: i64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let (unit, ms) = UNITS.iter().find(|(u, _)| rest.starts_with(u))?;
        rest = &rest[unit.len()..];
        let rank = ORDER.iter().position(|u| u == unit)?;
        if last.is_some_and(|l| rank <= l) {
            return None;
        }
        last = Some(rank);
        total = total.checked_add(n.checked_mul(*ms)?)?;
    }
    (last.is_some() && total <= MAX_DURATION_MS).then_some(total)
}

/// An instant: `+DURATION` after `base`, or an RFC 3339 timestamp.
pub fn parse_at(text: &str, base: Timestamp) -> Result<Timestamp, String> {
    let found = match text.strip_prefix('+') {
        Some(duration) => parse_duration(duration).map(|ms| base.plus_millis(ms)),
        None => Timestamp::parse_rfc3339(text),
    };
    found.ok_or_else(|| format!("expected {EXPECTED_AT}, got {text:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_written_largest_unit_first() {
        assert_eq!(parse_duration("90s"), Some(90_000));
        assert_eq!(parse_duration("1h30m"), Some(90 * MINUTE_MS));
        assert_eq!(
            parse_duration("1d2h3m4s5ms"),
            Some(DAY_MS + 2 * HOUR_MS + 3 * MINUTE_MS + 4_005)
        );
        assert_eq!(parse_duration("500ms"), Some(500));
        for bad in [
            "", "90", "s", "1m1h", "1s1s", "1.5h", "-1s", "1 s", "3661d", "1w",
        ] {
            assert_eq!(parse_duration(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn an_instant_is_an_offset_or_a_timestamp() {
        let base = Timestamp::parse_rfc3339("2026-01-01T00:00:00Z").unwrap();
        assert_eq!(parse_at("+2h", base), Ok(base.plus_millis(2 * HOUR_MS)));
        assert_eq!(
            parse_at("2026-01-01T00:01:00Z", base),
            Ok(base.plus_millis(MINUTE_MS))
        );
        let err = parse_at("90s", base).unwrap_err();
        assert!(err.contains("+90s") && err.contains("\"90s\""), "{err}");
    }
}
