//! The latency probes' part of every rendering: their interval lines, the line under the
//! headline (idle against loaded, the latency the load added), and their CSV rows.

use netblast_spec::result::{LatencyProbeResult, ProbeInterval};
use netblast_spec::units::fmt_ns;
use std::fmt::Write;

/// One probe interval as a text line, on the test's time axis.
pub fn interval(p: &ProbeInterval) -> String {
    let lat = match &p.latency {
        Some(l) => format!(
            "p50 {:>9}  p90 {:>9}  p99 {:>9}",
            fmt_ns(l.p50_ns as f64),
            fmt_ns(l.p90_ns as f64),
            fmt_ns(l.p99_ns as f64)
        ),
        None => "no answer".to_string(),
    };
    format!(
        "[probe] {:>6.2} to {:>5.2} sec  {:<7}  {:>4} round trips  {lat}\n",
        p.start_s,
        p.end_s,
        p.phase.name(),
        p.round_trips
    )
}

/// A signed duration: `+41.3 ms`, `-0.2 ms`.
fn signed_ns(ns: i64) -> String {
    let sign = if ns < 0 { "-" } else { "+" };
    format!("{sign}{}", fmt_ns(ns.unsigned_abs() as f64))
}

/// The line under the headline: idle against loaded, and what the load added.
pub fn summary_line(p: &LatencyProbeResult) -> String {
    let mut s = format!("Latency probe ({} at {}/s):", p.protocol.to_uppercase(), p.rate_per_s);
    let phase = |d: &Option<netblast_spec::hist::Distribution>| match d {
        Some(d) => {
            format!("{} p50 / {} p99 ({} round trips)", fmt_ns(d.p50_ns as f64), fmt_ns(d.p99_ns as f64), d.count)
        }
        None => "no round trip".to_string(),
    };
    let _ = write!(s, " idle {}, loaded {}", phase(&p.idle), phase(&p.loaded));
    if let (Some(a50), Some(a99)) = (p.added_p50_ns, p.added_p99_ns) {
        let _ = write!(s, ": {} added by load at p50, {} at p99", signed_ns(a50), signed_ns(a99));
    }
    if let (Some(i), Some(l)) = (p.rpm_idle, p.rpm_loaded) {
        let _ = write!(s, "; responsiveness {i:.0} RPM idle, {l:.0} loaded");
    }
    if p.lost > 0 {
        let _ = write!(s, "; {} probes unanswered", p.lost);
    }
    s.push('\n');
    for e in &p.errors {
        let _ = writeln!(s, "  latency probe: {e}");
    }
    s
}

/// The probe lines that come before a load's interval ending at `end_s` (all that are left
/// when `None`), taken from `rest`.
pub fn lines_until(rest: &mut &[ProbeInterval], end_s: Option<f64>) -> String {
    let mut s = String::new();
    while let Some((p, tail)) = rest.split_first() {
        if end_s.is_some_and(|e| p.end_s > e + 1e-6) {
            break;
        }
        s.push_str(&interval(p));
        *rest = tail;
    }
    s
}

/// A test's probes in a few words, for its line among a fleet's tests: loaded p50 and what
/// the load added.
pub fn part_words(p: &LatencyProbeResult) -> String {
    match (&p.loaded, p.added_p50_ns) {
        (Some(l), Some(a)) => format!(", probe loaded p50 {} ({} by load)", fmt_ns(l.p50_ns as f64), signed_ns(a)),
        (Some(l), None) => format!(", probe loaded p50 {}", fmt_ns(l.p50_ns as f64)),
        _ => String::new(),
    }
}
