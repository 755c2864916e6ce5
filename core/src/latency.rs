//! A seeded latency model (D11, issue 39 item 3): how long a customer's request takes to
//! reach the venue after it is sent, drawn per request. Pure: the caller seeds the
//! generator; libm's functions and whole milliseconds, so every platform draws the same
//! delays and a replay is the same run bit for bit. Latency is time, never money: `f64` is
//! used for the draw only.

use crate::rng::SimRng;
use crate::simulation::standard_normal;

/// The longest delay a draw gives: a minute (a request later than that is not latency).
pub const MAX_LATENCY_MS: i64 = 60_000;

/// A distribution of delays, in milliseconds.
#[derive(Debug, Clone, PartialEq)]
pub enum LatencyModel {
    /// Every request takes the same time.
    Constant(i64),
    /// Normal, cut at zero.
    Normal { mean: f64, stddev: f64 },
    /// Log-normal: `median × e^(sigma·Z)`.
    LogNormal { median: f64, sigma: f64 },
    /// One of the observed delays, each as likely.
    Empirical(Vec<i64>),
}

impl LatencyModel {
    /// One request's delay in whole milliseconds, within 0..=[`MAX_LATENCY_MS`].
    pub fn draw(&self, rng: &mut SimRng) -> i64 {
        let ms = match self {
            LatencyModel::Constant(ms) => *ms as f64,
            LatencyModel::Normal { mean, stddev } => mean + stddev * standard_normal(rng),
            LatencyModel::LogNormal { median, sigma } => {
                median * libm::exp(sigma * standard_normal(rng))
            }
            LatencyModel::Empirical(observed) => {
                // The high word of a 64×64 product: an index without modulo bias to speak of.
                let at = ((rng.next_u64() as u128 * observed.len() as u128) >> 64) as usize;
                observed[at] as f64
            }
        };
        (libm::round(ms) as i64).clamp(0, MAX_LATENCY_MS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draws(model: &LatencyModel, n: usize) -> Vec<i64> {
        let mut rng = SimRng::from_seed(7);
        (0..n).map(|_| model.draw(&mut rng)).collect()
    }

    /// D11 (issue 39 item 3): each distribution draws what it says, within its bounds, the
    /// same delays from the same seed.
    #[test]
    fn each_distribution_draws_its_delays_from_the_seed() {
        assert_eq!(draws(&LatencyModel::Constant(25), 3), [25, 25, 25]);
        let normal = LatencyModel::Normal {
            mean: 50.0,
            stddev: 10.0,
        };
        let got = draws(&normal, 20_000);
        let mean = got.iter().sum::<i64>() as f64 / got.len() as f64;
        assert!((mean - 50.0).abs() < 0.5, "{mean}");
        assert_eq!(
            got,
            draws(&normal, 20_000),
            "the same seed, the same delays"
        );
        let cut = LatencyModel::Normal {
            mean: 0.0,
            stddev: 10.0,
        };
        assert!(
            draws(&cut, 1_000).iter().all(|ms| *ms >= 0),
            "never negative"
        );
        let lognormal = LatencyModel::LogNormal {
            median: 40.0,
            sigma: 0.5,
        };
        let mut got = draws(&lognormal, 20_001);
        got.sort_unstable();
        assert!((39..=41).contains(&got[10_000]), "median {}", got[10_000]);
        assert!(got[19_000] > 80, "a long right tail: p95 {}", got[19_000]);
        let observed = LatencyModel::Empirical(vec![5, 7, 120]);
        let got = draws(&observed, 3_000);
        assert!(got.iter().all(|ms| [5, 7, 120].contains(ms)));
        assert!(
            [5, 7, 120].iter().all(|v| got.contains(v)),
            "every row drawn"
        );
        let huge = LatencyModel::Constant(10 * MAX_LATENCY_MS);
        assert_eq!(draws(&huge, 1), [MAX_LATENCY_MS]);
    }
}
