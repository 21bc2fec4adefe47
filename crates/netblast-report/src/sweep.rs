//! An HTTP rate sweep (`http.steps`, the `http-sweep` profile) as one row per step: the
//! offered rate, what was achieved, p50 and p99 of the step's requests, and the failures; the
//! first step that missed its rate or whose latency turned (its median doubled and rose by a
//! millisecond over the lowest before it: a queue) is marked.
//!
//! A step's figures are its intervals' (an interval belongs to the step its middle falls in),
//! its latency the sum of their histograms, so a step's p99 is exact, not an average of
//! per-interval p99s.

use netblast_spec::RunResult;
use netblast_spec::hist::{HistSum, LatencySummary};

/// A step missed its rate when it achieved less than this share of the offered rate.
pub const RATE_HELD: f64 = 0.95;
/// A step's latency turned when its median is more than this many times the lowest median of
/// the steps before it ...
pub const LATENCY_TURN: f64 = 2.0;
/// ... and at least this much above it (ns): a queue forming, not a tail's noise (a sweep's
/// first steps against nginx had p99s of 0.3-0.6 ms that doubled by chance).
pub const QUEUE_NS: f64 = 1e6;

/// One step of a sweep, measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// 1-based step number.
    pub n: usize,
    /// When the step starts and ends, in seconds since the start.
    pub span: (f64, f64),
    /// The offered rate, requests per second.
    pub offered: f64,
    /// Responses per second over the step's intervals.
    pub achieved: f64,
    /// Requests sent per second over the step's intervals.
    pub sent_per_s: f64,
    /// The step's requests' latency (none when no response came).
    pub latency: Option<LatencySummary>,
    /// Requests that failed (no response) in the step.
    pub errors: u64,
    /// Why this step is the first that did not hold, if it is: "rate" or "latency".
    pub turned: Option<&'static str>,
}

/// The steps of `r` when it is a sweep (`None` otherwise, or when no interval was measured).
pub fn steps(r: &RunResult) -> Option<Vec<Step>> {
    let steps = r.plan.profile.workload.section().rate_steps();
    if steps.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    let mut t = 0.0;
    for (i, s) in steps.iter().enumerate() {
        let span = (t, t + s.duration.get().as_secs_f64());
        t = span.1;
        let ivs: Vec<_> = r
            .intervals
            .iter()
            .filter(|iv| {
                let mid = (iv.start_s + iv.end_s) / 2.0;
                mid >= span.0 && mid < span.1
            })
            .filter_map(|iv| Some((iv, iv.http.as_ref()?)))
            .collect();
        if ivs.is_empty() {
            continue;
        }
        let secs: f64 = ivs.iter().map(|(iv, _)| iv.end_s - iv.start_s).sum::<f64>().max(1e-9);
        let mut sum = HistSum::default();
        for (_, h) in &ivs {
            if let Some(d) = h.latency.as_ref() {
                if let Some(hist) = d.histogram() {
                    let _ = sum.add_owned(hist);
                }
            }
        }
        out.push(Step {
            n: i + 1,
            span,
            offered: s.rate.per_second(),
            achieved: ivs.iter().map(|(_, h)| h.completed).sum::<u64>() as f64 / secs,
            sent_per_s: ivs.iter().map(|(_, h)| h.sent).sum::<u64>() as f64 / secs,
            latency: sum.summary().filter(|l| l.count > 0),
            errors: ivs.iter().map(|(_, h)| h.errors).sum(),
            turned: None,
        });
    }
    let turned = |i: usize| {
        let lowest = out[..i].iter().filter_map(|s| s.latency.as_ref().map(|l| l.p50_ns as f64)).reduce(f64::min);
        matches!((lowest, &out[i].latency), (Some(f), Some(l))
            if l.p50_ns as f64 > f * LATENCY_TURN && l.p50_ns as f64 > f + QUEUE_NS)
    };
    if let Some(i) = (0..out.len()).find(|&i| out[i].achieved < out[i].offered * RATE_HELD || turned(i)) {
        let s = &mut out[i];
        s.turned = Some(if s.achieved < s.offered * RATE_HELD { "rate" } else { "latency" });
    }
    (!out.is_empty()).then_some(out)
}

/// What a marked step says, in words.
pub fn why(s: &Step) -> String {
    match s.turned {
        Some("rate") => format!(
            "first step below {:.0}% of its rate ({:.1}% achieved)",
            RATE_HELD * 100.0,
            s.achieved / s.offered.max(1e-9) * 100.0
        ),
        Some(_) => format!(
            "first step whose median latency is over {LATENCY_TURN}× the lowest before it and {} above it: a queue",
            netblast_spec::units::fmt_ns(QUEUE_NS)
        ),
        None => String::new(),
    }
}
