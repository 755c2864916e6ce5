//! The soak's one-minute version (issue 27 item 6), in `cargo test`: the living market under
//! the mixed broker profile at 80 % of the rate the same server just reached, sampled every
//! 10 s. The thirty-minute run is `target/release/load soak` (README).

use std::time::Duration;

use perpsim_benches::load::soak::{SoakPlan, soak};

#[test]
fn a_minute_at_eighty_percent_keeps_pace_answers_everything_and_holds_memory() {
    let plan = SoakPlan {
        binary: perpsim_tests::binary(),
        workers: 16,
        probe: Duration::from_secs(5),
        duration: Duration::from_secs(60),
        sample: Duration::from_secs(10),
        fraction: 0.8,
    };
    let report = soak(&plan);
    report.print();
    assert_eq!(report.errors, 0, "{:?}", report.first_error);
    assert!(report.requests > 0);
    // A sample every 10 s (the last one may fall just after the workers stop).
    assert!(
        (5..=6).contains(&report.samples.len()),
        "{:?}",
        report.samples
    );
    for s in &report.samples {
        assert!(
            s.per_second >= 0.5 * report.rate,
            "the server kept pace with 80 % of its maximum: {s:?} at {:.0} req/s asked",
            report.rate
        );
        assert_eq!(s.errors, 0);
    }
    // What the run leaves in memory is the history it made (terminal orders, ledger rows):
    // a few hundred bytes a request. A kilobyte a request is a leak.
    let first = report.samples[0].rss_kib;
    let last = report.samples[report.samples.len() - 1].rss_kib;
    let grown_bytes = last.saturating_sub(first) * 1024;
    assert!(
        grown_bytes <= report.requests * 1024,
        "RSS grew {grown_bytes} bytes over {} requests",
        report.requests
    );
}
