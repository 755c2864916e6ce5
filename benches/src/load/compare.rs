//! Targets compared over several runs: each run starts every target afresh and drives it
//! with the same plan, targets taking turns so that the machine's drift falls on all of them;
//! medians of the runs, and each target's ratio to the bare server and to the first target.

use super::drive::{KINDS, Outcome, Plan, drive};
use super::target::{Running, Target};
use super::{median, percentiles};

/// One target's outcomes, a run each.
pub struct Runs {
    pub target: Target,
    pub outcomes: Vec<Outcome>,
}

impl Runs {
    pub fn median_rate(&self) -> f64 {
        let rates: Vec<f64> = self.outcomes.iter().map(Outcome::per_second).collect();
        median(&rates)
    }

    /// The median run's p99 over every kind, in milliseconds.
    pub fn median_cpu_us(&self) -> f64 {
        let cpu: Vec<f64> = self
            .outcomes
            .iter()
            .filter_map(Outcome::cpu_per_request_us)
            .collect();
        median(&cpu)
    }

    pub fn median_p99_ms(&self) -> f64 {
        let p99: Vec<f64> = self
            .outcomes
            .iter()
            .map(|o| o.tally.total().value_at_quantile(0.99) as f64 / 1_000.0)
            .collect();
        median(&p99)
    }
}

/// Runs `plan` `runs` times against each target with `workers` accounts, printing each run;
/// each server on `server_cpus` when given ([`Running::start`]).
pub fn compare(
    targets: &[Target],
    plan: &Plan,
    workers: usize,
    runs: usize,
    server_cpus: Option<&str>,
) -> Vec<Runs> {
    let mut all: Vec<Runs> = targets
        .iter()
        .map(|t| Runs {
            target: t.clone(),
            outcomes: Vec::new(),
        })
        .collect();
    for run in 1..=runs {
        for r in &mut all {
            let server = Running::start(&r.target, server_cpus);
            let accounts = server.accounts(workers);
            let cpu = server.cpu();
            let mut outcome = drive(&server.url, &accounts, plan, None);
            outcome.server_cpu = Some(server.cpu().saturating_sub(cpu));
            print_outcome(&r.target, plan, run, &outcome);
            assert_eq!(
                outcome.tally.errors,
                0,
                "{} answered outside 2xx, first: {}",
                r.target.name(),
                outcome.tally.first_error.as_deref().unwrap_or("")
            );
            r.outcomes.push(outcome);
        }
    }
    print_medians(&all, plan);
    all
}

fn print_outcome(target: &Target, plan: &Plan, run: usize, o: &Outcome) {
    println!(
        "{} · {} · run {run}: {:>8.0} req/s ({} requests in {:.1} s, server CPU {:.0} µs a request)  all {}",
        plan.profile.name(),
        target.name(),
        o.per_second(),
        o.tally.requests(),
        o.elapsed.as_secs_f64(),
        o.cpu_per_request_us().unwrap_or(f64::NAN),
        percentiles(&o.tally.total())
    );
    for (kind, h) in KINDS.iter().zip(&o.tally.kinds) {
        if !h.is_empty() {
            println!("    {kind:<12} {:>8} requests  {}", h.len(), percentiles(h));
        }
    }
}

fn print_medians(all: &[Runs], plan: &Plan) {
    let bare = all
        .iter()
        .find(|r| matches!(r.target, Target::Bare))
        .map(Runs::median_rate);
    let first = all
        .iter()
        .find(|r| !matches!(r.target, Target::Bare))
        .map(Runs::median_rate);
    println!(
        "{} · medians of {} runs:",
        plan.profile.name(),
        all[0].outcomes.len()
    );
    for r in all {
        let rate = r.median_rate();
        let mut line = format!(
            "    {:<24} {:>8.0} req/s  p99 {:>6.2} ms  server CPU {:>5.0} µs a request",
            r.target.name(),
            rate,
            r.median_p99_ms(),
            r.median_cpu_us()
        );
        if let (Some(bare), false) = (bare, matches!(r.target, Target::Bare)) {
            line += &format!("  ×{:.2} of the bare server", rate / bare);
        }
        if let Some(first) = first.filter(|_| !matches!(r.target, Target::Bare)) {
            line += &format!("  ×{:.2} of the first", rate / first);
        }
        println!("{line}");
    }
}
