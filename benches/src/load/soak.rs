//! The soak: the living market (maker and random walk on), the mixed profile at a fraction of
//! the rate the same server reached unpaced, sampled at a fixed interval: resident memory,
//! requests a second and p99, and the server's own cost per request answered (CPU time and
//! bytes its journal writer wrote), which a busier machine or a slower disk does not change.
//! The slope of resident memory is fitted by least squares, with the scatter of the samples
//! around the line as its noise.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use super::drive::{Live, Plan, Profile, Stop, drive};
use super::target::{Running, Target};

#[derive(Debug, Clone)]
pub struct SoakPlan {
    pub binary: PathBuf,
    pub workers: usize,
    /// How long the unpaced run that finds the maximum lasts.
    pub probe: Duration,
    pub duration: Duration,
    pub sample: Duration,
    /// Share of the maximum the soak runs at.
    pub fraction: f64,
    /// The server's CPUs, a `taskset -c` list ([`Running::start`]).
    pub server_cpus: Option<String>,
}

#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub at_secs: f64,
    pub rss_kib: u64,
    pub per_second: f64,
    pub p99_ms: f64,
    pub errors: u64,
    /// The server's CPU time (all threads) over the interval, per request answered.
    pub cpu_us_per_request: f64,
    /// Bytes the server's journal writer wrote over the interval, per request answered, KiB.
    pub written_kib_per_request: f64,
}

impl Sample {
    /// Whether this sample's own cost per request, CPU and bytes written, is within `factor`
    /// of `base`'s.
    pub fn costs_within(&self, base: &Sample, factor: f64) -> bool {
        self.cpu_us_per_request <= factor * base.cpu_us_per_request
            && self.written_kib_per_request <= factor * base.written_kib_per_request
    }
}

#[derive(Debug)]
pub struct SoakReport {
    pub max_rate: f64,
    pub rate: f64,
    pub samples: Vec<Sample>,
    /// Least-squares slope of resident memory, KiB a minute.
    pub rss_slope_kib_per_min: f64,
    /// Standard deviation of the samples around that line, KiB.
    pub rss_noise_kib: f64,
    pub requests: u64,
    pub errors: u64,
    pub first_error: Option<String>,
}

/// Slope (per minute) and residual standard deviation of `(seconds, KiB)` points.
pub fn fit(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    if points.len() < 2 {
        return (0.0, 0.0);
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    let residual: f64 = points
        .iter()
        .map(|p| (p.1 - (my + slope * (p.0 - mx))).powi(2))
        .sum();
    (slope * 60.0, (residual / n).sqrt())
}

pub fn soak(plan: &SoakPlan) -> SoakReport {
    let target = Target::Perpsim {
        name: "perpsim".into(),
        binary: plan.binary.clone(),
        living: true,
    };
    let server = Running::start(&target, plan.server_cpus.as_deref());
    let accounts = server.accounts(plan.workers);
    let probe = Plan {
        profile: Profile::Mixed,
        stop: Stop::After(plan.probe),
        rate: None,
    };
    let max_rate = drive(&server.url, &accounts, &probe, None).per_second();
    let rate = max_rate * plan.fraction;
    let paced = Plan {
        rate: Some(rate),
        stop: Stop::After(plan.duration),
        ..probe
    };
    let live = Live::new(plan.workers);
    let done = AtomicBool::new(false);
    let (outcome, samples) = std::thread::scope(|scope| {
        let sampler = scope.spawn(|| sample_until(&server, &live, plan.sample, &done));
        let outcome = drive(&server.url, &accounts, &paced, Some(&live));
        done.store(true, Relaxed);
        (outcome, sampler.join().expect("sampler"))
    });
    let points: Vec<(f64, f64)> = samples
        .iter()
        .map(|s| (s.at_secs, s.rss_kib as f64))
        .collect();
    let (rss_slope_kib_per_min, rss_noise_kib) = fit(&points);
    SoakReport {
        max_rate,
        rate,
        samples,
        rss_slope_kib_per_min,
        rss_noise_kib,
        requests: outcome.tally.requests(),
        errors: outcome.tally.errors,
        first_error: outcome.tally.first_error,
    }
}

/// A sample every `every` until `done`: the interval's requests, p99 and errors, and RSS.
fn sample_until(server: &Running, live: &Live, every: Duration, done: &AtomicBool) -> Vec<Sample> {
    let started = Instant::now();
    let mut samples = Vec::new();
    let mut due = every;
    let (mut cpu, mut written) = (server.cpu(), server.written_bytes());
    while !done.load(Relaxed) {
        let wait = due.saturating_sub(started.elapsed());
        // Short naps, so the end of the run is noticed within 50 ms.
        std::thread::sleep(wait.min(Duration::from_millis(50)));
        if started.elapsed() < due {
            continue;
        }
        let tally = live.take();
        let h = tally.total();
        let answered = h.len().max(1) as f64;
        let (cpu_now, written_now) = (server.cpu(), server.written_bytes());
        samples.push(Sample {
            at_secs: started.elapsed().as_secs_f64(),
            rss_kib: server.rss_kib(),
            per_second: h.len() as f64 / every.as_secs_f64(),
            p99_ms: h.value_at_quantile(0.99) as f64 / 1_000.0,
            errors: tally.errors,
            cpu_us_per_request: (cpu_now - cpu).as_secs_f64() * 1e6 / answered,
            written_kib_per_request: (written_now - written) as f64 / 1024.0 / answered,
        });
        (cpu, written) = (cpu_now, written_now);
        due += every;
    }
    samples
}

impl SoakReport {
    pub fn print(&self) {
        println!(
            "soak: maximum {:.0} req/s (mixed, living market), run at {:.0} req/s",
            self.max_rate, self.rate
        );
        println!(
            "    {:>7}  {:>10}  {:>9}  {:>8}  {:>10}  {:>10}  errors",
            "t (s)", "RSS (MiB)", "req/s", "p99 (ms)", "CPU µs/req", "KiB/req"
        );
        for s in &self.samples {
            println!(
                "    {:>7.0}  {:>10.1}  {:>9.0}  {:>8.2}  {:>10.0}  {:>10.2}  {}",
                s.at_secs,
                s.rss_kib as f64 / 1024.0,
                s.per_second,
                s.p99_ms,
                s.cpu_us_per_request,
                s.written_kib_per_request,
                s.errors
            );
        }
        println!(
            "    RSS slope {:+.1} KiB/min, scatter around it {:.1} KiB; {} requests, {} errors",
            self.rss_slope_kib_per_min, self.rss_noise_kib, self.requests, self.errors
        );
        if let Some(e) = &self.first_error {
            println!("    first error: {e}");
        }
    }
}
