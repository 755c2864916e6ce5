//! The soak's one-minute version (issue 27 item 6), in `cargo test`: the living market under
//! the mixed broker profile at 80 % of the rate the same server just reached, sampled every
//! 10 s. The thirty-minute run is `target/release/load soak` (README).
//!
//! What it pins holds on any machine: no errors, memory that grows by what the history made,
//! and a cost per request (the server's CPU time, its bytes written) that does not grow; the
//! pace it keeps is judged against that cost, since a busy CI machine can slow it alone.

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
        server_cpus: None,
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
    // The server's own cost per request, CPU time and bytes its journal wrote, does not grow
    // with the history the run makes. The machine's speed cancels out of it, so it holds on
    // any machine.
    let base = report.samples[0];
    for s in &report.samples {
        assert!(
            s.costs_within(&base, 2.0),
            "the server's cost per request grew: {s:?} against the first sample's {base:?}"
        );
        assert_eq!(s.errors, 0);
    }
    // Paced at 80 % of its maximum, the server answers at least half the pace. A sample below
    // that passes only where the server's own cost per request held, within half again the
    // first sample's: then the machine slowed, not the server (another job on it, a disk
    // that throttles: CI once fell to 49 % of the pace for the run's second half, which no
    // run on the development machine showed). Three busy loops started beside a run here
    // brought it to 54 % of the pace, its CPU time a request up 19 %, its bytes 13 %.
    for s in &report.samples {
        assert!(
            s.per_second >= 0.5 * report.rate || s.costs_within(&base, 1.5),
            "the server kept pace with 80 % of its maximum, or its cost per request held: \
             {s:?} at {:.0} req/s asked, the first sample {base:?}",
            report.rate
        );
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
