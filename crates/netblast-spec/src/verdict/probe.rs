//! The latency probes' verdict: whether the load added latency worth naming, and where the
//! wait was as far as the figures tell: the load's own kernel RTT rising with it points to a
//! queue on the path; the load's RTT flat and a CPU saturated on either host points to the
//! hosts.

use crate::diagnose::{cpu_words, is_queue, rtt_rise, saturated};
use crate::result::RunResult;
use crate::units::fmt_ns;

/// The verdict on a run's latency probes; `None` without probes or without both phases.
pub fn latency_probe(r: &RunResult) -> Option<String> {
    let p = r.latency_probe.as_deref()?;
    let (idle, added) = (p.idle.as_ref()?, p.added_p50_ns?);
    let idle_p50 = idle.p50_ns as f64;
    let sign = if added < 0 { "-" } else { "+" };
    let by = format!("{sign}{}", fmt_ns(added.unsigned_abs() as f64));
    if !is_queue(idle_p50, idle_p50 + added as f64) {
        return Some(format!(
            "latency under load: the load added little, {by} at p50 over an idle {}: no queue of note on the probe's path",
            fmt_ns(idle_p50)
        ));
    }
    // The load's own flows: their least RTT against their typical one.
    let rose = r.summary.ways.iter().filter_map(rtt_rise).find(|(lo, ty, _)| is_queue(*lo, *ty));
    let flat = r.summary.ways.iter().any(|w| w.rtt.is_some());
    let busy: Vec<String> = [("the client", &r.summary.load.client), ("the server", &r.summary.load.server)]
        .into_iter()
        .filter_map(|(who, l)| {
            let c = saturated(l.as_ref()?).into_iter().next()?;
            Some(format!("{} on {who}", cpu_words(c)))
        })
        .collect();
    Some(match (rose, busy.first()) {
        (Some((least, typical, _)), _) => format!(
            "latency under load: {by} at p50: a queue on the path, the load's own RTT rose with it from {} to {}",
            fmt_ns(least),
            fmt_ns(typical)
        ),
        (None, Some(cpu)) => format!(
            "latency under load: {by} at p50 while {cpu}{}: the hosts delayed the probe, not the path",
            if flat { " and the load's RTT stayed flat" } else { "" }
        ),
        (None, None) if flat => format!(
            "latency under load: {by} at p50, the load's RTT flat and no CPU saturated: not explained by the counts"
        ),
        (None, None) => format!(
            "latency under load: {by} at p50, no CPU saturated: a queue on the probe's path as far as it tells (this \
             kind's load has no kernel RTT to confirm it)"
        ),
    })
}
