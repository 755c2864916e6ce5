//! Instrument filters (interface §4.1): `|`-separated literals, `*` matching any sequence
//! (including empty), case-insensitive, anchored to the whole string.

/// Longest filter accepted; bounds the matcher's work on hostile input.
pub const MAX_FILTER_LEN: usize = 256;

/// A parsed filter: a set of alternatives, any of which may match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    alternatives: Vec<Vec<u8>>,
}

impl Pattern {
    /// Parses a filter. Empty alternatives (`"A||B"`, `""`) are refused as they match nothing
    /// a client could mean.
    pub fn parse(text: &str) -> Result<Self, String> {
        // Characters, as the message (and the document's maxLength) say: at most 4 bytes each.
        if text.chars().count() > MAX_FILTER_LEN {
            return Err(format!("is longer than {MAX_FILTER_LEN} characters"));
        }
        let alternatives: Vec<Vec<u8>> = text
            .split('|')
            .map(|alt| alt.to_ascii_uppercase().into_bytes())
            .collect();
        if alternatives.iter().any(|a| a.is_empty()) {
            return Err("has an empty alternative".to_owned());
        }
        Ok(Pattern { alternatives })
    }

    pub fn matches(&self, candidate: &str) -> bool {
        let candidate = candidate.to_ascii_uppercase();
        self.alternatives
            .iter()
            .any(|alt| glob(alt, candidate.as_bytes()))
    }
}

/// Anchored glob match with `*` only; linear-time greedy matching with backtracking to the
/// last star, so no input can make it exponential.
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if p < pattern.len() && pattern[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&b| b == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, s: &str) -> bool {
        Pattern::parse(p).unwrap().matches(s)
    }

    #[test]
    fn literals_are_anchored_and_case_insensitive() {
        assert!(m("BTC-USDC-PERP", "BTC-USDC-PERP"));
        assert!(m("btc-usdc-perp", "BTC-USDC-PERP"));
        assert!(!m("BTC", "BTC-USDC-PERP"));
        assert!(!m("USDC-PERP", "BTC-USDC-PERP"));
    }

    #[test]
    fn star_matches_any_sequence_including_empty() {
        assert!(m("BTC-*", "BTC-USDC-PERP"));
        assert!(m("*-PERP", "ETH-USDC-PERP"));
        assert!(m("*USDC*", "SOL-USDC-PERP"));
        assert!(m("BTC-*USDC-PERP", "BTC-USDC-PERP"));
        assert!(m("*", "ANY"));
        assert!(!m("*-USDT-*", "BTC-USDC-PERP"));
        assert!(m("a*b*c", "aXXbYYc"));
        assert!(!m("a*b*c", "aXXbYY"));
    }

    #[test]
    fn pipe_separates_alternatives() {
        assert!(m("ETH|SOL", "sol"));
        assert!(m("ETH|SOL", "ETH"));
        assert!(!m("ETH|SOL", "BTC"));
        assert!(m("btc*|eth*", "ETH-USDC-PERP"));
    }

    #[test]
    fn empty_alternatives_and_huge_filters_are_refused() {
        assert!(Pattern::parse("").is_err());
        assert!(Pattern::parse("A||B").is_err());
        assert!(Pattern::parse(&"*".repeat(300)).is_err());
    }

    #[test]
    fn many_stars_stay_fast() {
        let p = format!("{}b", "a*".repeat(100));
        assert!(!m(&p, &"a".repeat(200)));
    }
}
