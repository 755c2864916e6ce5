//! The end-to-end load tool's parts (issue 27): servers to start ([`target`]), the signed
//! client ([`client`]), the workload ([`drive`]), the bare server to compare with ([`bare`]),
//! the comparison of targets over several runs ([`compare`]) and the soak ([`soak`]).

pub mod bare;
pub mod client;
pub mod compare;
pub mod drive;
pub mod soak;
pub mod target;

use hdrhistogram::Histogram;

/// `p50 … p99 … p99.9 … max …` in milliseconds.
pub fn percentiles(h: &Histogram<u64>) -> String {
    let ms = |us: u64| us as f64 / 1_000.0;
    format!(
        "p50 {:>6.2}  p99 {:>6.2}  p99.9 {:>6.2}  max {:>7.2} ms",
        ms(h.value_at_quantile(0.5)),
        ms(h.value_at_quantile(0.99)),
        ms(h.value_at_quantile(0.999)),
        ms(h.max())
    )
}

/// The median of `values` (the lower middle one of an even count).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[(sorted.len() - 1) / 2]
}
