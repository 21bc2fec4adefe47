//! One step judged: its figures after the warm-up, its thresholds, and who limited it.
//!
//! The attribution comes first, because a search is only as good as it: a step is the
//! generator's (never the target's capacity) when one of netblast's own worker threads ran
//! 90% of its time or more; when a CPU a worker was pinned to had nothing to spare and the step
//! did not hold, unless the target itself said no (a status outside the expected set, connections
//! refused or reset, datagrams lost on the path); when its cps flows found no free local port; when its own UDP
//! receiving socket dropped datagrams; or when it sent less than 95% of the offered rate for a
//! reason of its own: its schedule fell behind, or its lanes (HTTP connections, cps flows)
//! were too few for the rate at the target's unloaded latency. Lanes that ran out because the
//! target's latency grew (twice the lowest step's median or more) or because they waited on
//! the target's failures (1% or more of connections or requests failed) are the target's, as
//! is a TCP flow the path held below its pace.

use super::{Axis, Step, StepOutcome};
use crate::assert::Assertion;
use crate::result::{HostLoad, RunResult, WaySummary};
use crate::units::fmt_ns;

/// A step held the offered rate when the target took (and the generator sent) this share of it.
pub const HELD: f64 = 0.95;

/// A worker thread that ran this share of its wall time was saturated.
const THREAD_SATURATED: f64 = 0.9;

/// A CPU busy this share of the time, where a worker ran, had nothing to spare.
const CPU_FULL: f64 = 0.95;

/// Lanes that ran out at a latency under this many times the lowest step's median were too few
/// for the rate (the generator's setting), not outrun by a slower target.
const LATENCY_GREW: f64 = 2.0;

/// The longest judged span a step is lengthened to for its thresholds' samples.
const MAX_STEP_S: f64 = 60.0;

/// A step judged, with the window it was judged on.
#[derive(Debug, Clone)]
pub struct Judged {
    /// The step.
    pub step: Step,
    /// The step's run less its warm-up: what its thresholds saw.
    pub window: RunResult,
}

/// The judged seconds a step at `ops_per_s` operations per second needs: `step_s`, or longer
/// when a threshold needs more operations than that holds (10 / (1 − q) for a percentile q,
/// 1 / p for a share p) or bounds a latency (the span is at least 20 times it); whole seconds,
/// at most 60.
pub fn step_seconds(assertions: &[Assertion], ops_per_s: f64, step_s: f64) -> f64 {
    let samples = assertions.iter().map(Assertion::samples_needed).fold(1.0, f64::max);
    let latency = assertions.iter().filter_map(Assertion::latency_bound_ns).fold(0.0, f64::max) * 20.0 / 1e9;
    let for_samples = if ops_per_s > 0.0 { samples / ops_per_s } else { 0.0 };
    step_s.max(latency).max(for_samples).min(MAX_STEP_S).max(step_s).ceil()
}

/// `r` less its first `from_s` seconds: the intervals that start at or after it, and totals
/// rebuilt from them (counts, rates over their span, latency histograms added). What cannot
/// be split by interval (CPU, load, kernel RTT and clocks, connection causes) stays the
/// run's.
pub fn window(r: &RunResult, from_s: f64) -> Result<RunResult, String> {
    let kept: Vec<_> = r.intervals.iter().filter(|iv| iv.start_s >= from_s - 1e-6).cloned().collect();
    if kept.is_empty() {
        return Err(format!("no interval after the {from_s} s warm-up"));
    }
    let mut s = crate::merge::summary_of_intervals(&kept).map_err(|e| e.to_string())?;
    for w in &mut s.ways {
        let Some(whole) = r.summary.ways.iter().find(|x| x.way == w.way) else { continue };
        w.streams = whole.streams;
        w.kernel_rtt = whole.kernel_rtt.clone();
        w.limits = whole.limits;
        w.rtt = whole.rtt;
        if let (Some(m), Some(all)) = (w.msgs.as_mut(), whole.msgs.as_ref()) {
            m.conns = all.conns;
            if let (Some(u), Some(a)) = (m.udp.as_mut(), all.udp.as_ref()) {
                (u.kernel_drops, u.rcvbuf) = (a.kernel_drops, a.rcvbuf);
            }
        }
    }
    if let (Some(h), Some(all)) = (s.http.as_mut(), r.summary.http.as_ref()) {
        if let Some(ok) = r.plan.profile.workload.section().expected_statuses() {
            h.count_succeeded(&ok);
        }
        h.errors = all.errors.clone();
        h.mode = all.mode.clone();
        h.version = all.version.clone();
        h.tls = all.tls;
        h.target_rate = all.target_rate;
        h.unloaded_ttfb_ns = all.unloaded_ttfb_ns;
        h.connections = all.connections;
        h.tcp = all.tcp.clone();
    }
    s.cpu = r.summary.cpu;
    s.load = r.summary.load.clone();
    s.streams = r.summary.streams.clone();
    Ok(RunResult { intervals: kept, summary: s, ..r.clone() })
}

/// The rate offered in all at `asked`: a single run's `asked`; a fleet's, each test's rate
/// summed (every client runs the profile at `asked`, or its share of it against each server).
fn offered_in_all(r: &RunResult, asked: f64) -> f64 {
    if r.parts.is_empty() {
        return asked;
    }
    r.parts.iter().map(|p| p.profile.as_ref().unwrap_or(&r.plan.profile).workload.rate().unwrap_or(asked)).sum()
}

/// What a step offered, sent and got, in the axis' unit, and its operations.
struct Figures {
    offered: f64,
    sent: f64,
    achieved: f64,
    operations: u64,
    p50_ns: Option<u64>,
    p99_ns: Option<u64>,
    failed: Option<f64>,
    lost: Option<f64>,
}

fn figures(w: &RunResult, axis: Axis, asked: f64) -> Figures {
    let s = &w.summary;
    let lat = |d: Option<&crate::hist::Distribution>| d.filter(|d| d.count > 0).map(|d| (d.p50_ns, d.p99_ns)).unzip();
    if let Some(h) = &s.http {
        let (p50_ns, p99_ns) = lat(Some(&h.latency));
        let failed = (h.sent > 0).then(|| h.sent.saturating_sub(h.succeeded) as f64 / h.sent as f64);
        return Figures {
            offered: offered_in_all(w, asked),
            sent: h.sent_per_s,
            achieved: h.responses_per_s,
            operations: h.sent,
            p50_ns,
            p99_ns,
            failed,
            lost: None,
        };
    }
    let secs = s.duration_s.max(1e-9);
    let msgs = |f: fn(&WaySummary) -> Option<u64>| s.ways.iter().filter_map(f).sum::<u64>();
    let done = msgs(|w| w.msgs.map(|m| m.sent));
    let lost_n = msgs(|w| w.msgs.and_then(|m| m.lost));
    let (p50_ns, p99_ns) = lat(s.ways.iter().filter_map(|w| w.latency.as_ref()).max_by_key(|d| d.p99_ns));
    match axis {
        Axis::Rate => {
            // cps: `sent` counts the connections completed, `lost` those that failed.
            let tried = done + lost_n;
            Figures {
                offered: offered_in_all(w, asked),
                sent: tried as f64 / secs,
                achieved: done as f64 / secs,
                operations: tried,
                p50_ns,
                p99_ns,
                failed: None,
                lost: (tried > 0).then(|| lost_n as f64 / tried as f64),
            }
        }
        Axis::Bitrate => {
            let sent: f64 = s.ways.iter().map(|w| w.sender.bits_per_s).sum();
            let got: f64 = s.ways.iter().map(|w| w.receiver.as_ref().unwrap_or(&w.sender).bits_per_s).sum();
            let flows = w.streams.len().max(1) as f64;
            let counted = s.ways.iter().any(|w| w.msgs.and_then(|m| m.lost).is_some());
            Figures {
                offered: asked * flows,
                sent,
                achieved: got,
                operations: done,
                p50_ns,
                p99_ns,
                failed: None,
                lost: (counted && done > 0).then(|| lost_n as f64 / (done.max(lost_n)) as f64),
            }
        }
    }
}

/// Judges step `r` (asked `asked` on `axis`) on its figures after `warmup_s`: its thresholds,
/// who limited it, and why. `baseline_p50_ns` is the lowest step's median latency, what tells
/// lanes too few for a rate from a target whose latency grew.
pub fn judge(
    r: &RunResult,
    axis: Axis,
    asked: f64,
    warmup_s: f64,
    assertions: &[Assertion],
    baseline_p50_ns: Option<u64>,
) -> Judged {
    let w = window(r, warmup_s).unwrap_or_else(|_| r.clone());
    let f = figures(&w, axis, asked);
    let all = crate::assert::with_defaults(assertions, &w);
    let (thresholds, _) = crate::assert::check_all(&all, &w);
    let (saturated, starved) = cpu_of_workers(&w);
    let generator = saturated.map(|s| format!("the generator's CPU: {s}"));
    let generator = generator.or_else(|| generator_limit(&w, axis, &f, baseline_p50_ns, starved.as_deref()));
    let held = f.achieved >= f.offered * HELD && !thresholds.iter().any(|v| !v.pass) && r.complete;
    // A step that did not hold on CPUs the generator shared and had no room on says nothing of
    // the target alone, unless the target itself said no (a starved generator slows, it does
    // not make a server answer 503 or a path lose datagrams).
    let generator = generator.or_else(|| {
        (!held && !answered_no(&w, &f)).then_some(starved.as_ref()).flatten().map(|st| {
            format!(
                "the generator's CPU: {st}; a step that did not hold on CPUs the generator shares tells nothing of \
                 the target alone (pin them apart: --cpus, and the server's own)"
            )
        })
    });
    let (outcome, cause) = match generator {
        Some(why) => (StepOutcome::Generator, why),
        None if !held => (StepOutcome::Failed, target_cause(&w, axis, &f)),
        None => (StepOutcome::Held, format!("took {} of {} offered", axis.fmt(f.achieved), axis.fmt(f.offered))),
    };
    let step = Step {
        n: 0,
        asked,
        offered: f.offered,
        sent: f.sent,
        achieved: f.achieved,
        seconds: w.summary.duration_s,
        operations: f.operations,
        p50_ns: f.p50_ns,
        p99_ns: f.p99_ns,
        failed: f.failed,
        lost: f.lost,
        thresholds,
        outcome,
        cause,
        repeat: false,
        test_id: r.test_id.clone(),
    };
    Judged { step, window: w }
}

/// The generator's loads: the run's own client, or each client agent's of a fleet (named by
/// its address).
fn client_loads(r: &RunResult) -> Vec<(String, &HostLoad)> {
    let own = r.summary.load.client.as_ref().map(|l| (String::new(), l));
    let parts =
        r.parts.iter().filter_map(|p| Some((format!("agent {}: ", p.agent.address), p.summary.load.client.as_ref()?)));
    own.into_iter().chain(parts).collect()
}

/// The worker thread of this run (of any of a fleet's client agents) that was saturated, or
/// that ran on a CPU with nothing to spare (with how much of it the worker itself took), in
/// words.
fn cpu_of_workers(r: &RunResult) -> (Option<String>, Option<String>) {
    let loads = client_loads(r);
    let on =
        |t: &crate::result::ThreadCpu| t.cpu.map(|c| format!(" on CPU {c}")).unwrap_or_else(|| " (unpinned)".into());
    let sat = loads
        .iter()
        .flat_map(|(who, l)| l.threads.iter().map(move |t| (who, t)))
        .filter(|(_, t)| t.busy() >= THREAD_SATURATED)
        .max_by(|a, b| a.1.busy().total_cmp(&b.1.busy()))
        .map(|(who, t)| format!("{who}netblast's {}{} ran {:.0}% of the time", t.name, on(t), t.busy() * 100.0));
    let full: Vec<String> = loads
        .iter()
        .flat_map(|(who, l)| l.threads.iter().filter_map(move |t| Some((who, t, l.cpu(t.cpu?)?))))
        .filter(|(_, t, c)| c.busy() >= CPU_FULL && t.busy() < THREAD_SATURATED)
        .map(|(who, t, c)| {
            format!(
                "{who}CPU {} {:.0}% busy, netblast's {} {:.0}% of it",
                c.cpu,
                c.busy() * 100.0,
                t.name,
                t.busy() * 100.0
            )
        })
        .collect();
    let starved = (!full.is_empty())
        .then(|| format!("{}: another process took the rest of the CPUs the generator ran on", full.join("; ")));
    (sat, starved)
}

/// Why the generator, not the target, limited the step; `None` when it did not.
fn generator_limit(
    w: &RunResult,
    axis: Axis,
    f: &Figures,
    baseline_p50_ns: Option<u64>,
    starved: Option<&str>,
) -> Option<String> {
    let s = &w.summary;
    let conns = s.ways.iter().filter_map(|x| x.msgs?.conns).fold(0, |a, c| a + c.port_exhausted);
    if conns > 0 {
        return Some(format!("the generator's ports: {conns} connections found no free local port (EADDRNOTAVAIL)"));
    }
    let drops: u64 = s.ways.iter().filter_map(|x| x.msgs?.udp?.kernel_drops).sum();
    if drops > 0 {
        return Some(format!(
            "netblast's own receiving socket dropped {drops} datagrams (its queue was full): the measuring end, not the \
             path; raise -w or add receivers"
        ));
    }
    if f.sent >= f.offered * HELD {
        return None;
    }
    // Lanes held by the target's failures (connections timing out, requests without an
    // answer) ran out because of the target, whatever the latency of what succeeded.
    let failing = f.lost.unwrap_or(0.0) >= 0.01 || f.failed.unwrap_or(0.0) >= 0.01;
    let grew = failing
        || match (baseline_p50_ns, f.p50_ns) {
            (Some(b), Some(p)) => p as f64 > b as f64 * LATENCY_GREW,
            _ => true,
        };
    let short = format!("sent {} of {} offered", axis.fmt(f.sent), axis.fmt(f.offered));
    let lanes = |what: &str| {
        format!(
            "the generator's {what}: {short}, the lanes all busy at a latency ({}) near the lowest step's ({}); more \
             are needed for this rate",
            f.p50_ns.map(|p| fmt_ns(p as f64)).unwrap_or_default(),
            baseline_p50_ns.map(|p| fmt_ns(p as f64)).unwrap_or_default()
        )
    };
    if let Some(h) = &s.http {
        if h.late as f64 >= h.sent.max(1) as f64 * 0.01 {
            return (!grew).then(|| lanes("connections (--connections)"));
        }
    }
    let behind = s.ways.iter().filter_map(|x| x.msgs?.conns).fold(0, |a, c| a + c.behind);
    if behind > 0 && s.http.is_none() && axis == Axis::Rate {
        return (!grew).then(|| lanes("flows (--flows)"));
    }
    // A TCP flow the path holds below its pace is the path's; UDP and message senders are not
    // held back by the path.
    if w.plan.profile.workload.section().tcp_sets_the_rate() {
        return None;
    }
    Some(match starved {
        Some(st) => format!("the generator's schedule: {short}; {st}"),
        None => format!("the generator's schedule: {short} (it could not keep its send schedule)"),
    })
}

/// Whether the target itself said no to 1% or more of the step: HTTP answers with a status
/// outside the expected set, cps connections refused or reset, UDP datagrams lost with none
/// dropped by netblast's own receiving socket.
fn answered_no(w: &RunResult, f: &Figures) -> bool {
    let s = &w.summary;
    if let (Some(h), Some(failed), Some(ok)) =
        (&s.http, f.failed, w.plan.profile.workload.section().expected_statuses())
    {
        return failed >= 0.01 && h.unexpected(&ok) as f64 >= 0.01 * h.sent.max(1) as f64;
    }
    let Some(lost) = f.lost.filter(|l| *l >= 0.01) else { return false };
    let conns = s.ways.iter().filter_map(|x| x.msgs?.conns).fold(0, |a, c| a + c.refused + c.reset);
    let drops: u64 = s.ways.iter().filter_map(|x| x.msgs?.udp?.kernel_drops).sum();
    let udp = s.ways.iter().any(|x| x.msgs.is_some_and(|m| m.udp.is_some()));
    conns as f64 >= 0.01 * f.operations.max(1) as f64 || (udp && drops == 0 && lost > 0.0)
}

/// Why the target did not hold: its answers, loss, failed connections, latency, or the rate it
/// took.
fn target_cause(w: &RunResult, axis: Axis, f: &Figures) -> String {
    let s = &w.summary;
    if !w.complete {
        let why = w.errors.first().map(|e| e.message.clone()).unwrap_or_default();
        return format!("the run did not complete: {why}");
    }
    let ok = w.plan.profile.workload.section().expected_statuses();
    if let (Some(h), Some(share), Some(ok)) = (&s.http, f.failed.filter(|x| *x > 0.0), ok) {
        let causes = h.failure_causes(&ok).join(", ");
        return format!("the server's answers: {:.1}% of requests failed ({causes})", share * 100.0);
    }
    let conns = s.ways.iter().filter_map(|x| x.msgs?.conns).reduce(|mut a, c| {
        a.add(&c);
        a
    });
    if let (Some(c), Some(l)) = (conns, f.lost.filter(|x| *x > 0.0)) {
        return format!(
            "connections failed: {:.1}% ({} refused, {} timed out, {} reset, {} other)",
            l * 100.0,
            c.refused,
            c.timed_out,
            c.reset,
            c.other
        );
    }
    if let Some(l) = f.lost.filter(|x| *x > 0.0) {
        return format!(
            "loss on the path: {:.2}% of datagrams lost, none dropped by netblast's receiving socket",
            l * 100.0
        );
    }
    if f.achieved < f.offered * HELD {
        return format!(
            "the target is slower than the offered rate: it took {} of {} offered{}",
            axis.fmt(f.achieved),
            axis.fmt(f.offered),
            f.p99_ns.map(|p| format!(" (p99 {})", fmt_ns(p as f64))).unwrap_or_default()
        );
    }
    match (f.p50_ns, f.p99_ns) {
        (Some(a), Some(b)) => format!("latency: p50 {}, p99 {}", fmt_ns(a as f64), fmt_ns(b as f64)),
        _ => "a threshold failed".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_last_long_enough_for_their_thresholds() {
        let p99 = Assertion::parse("p99<=20ms").unwrap();
        let failed = Assertion::parse("http.failed<=1%").unwrap();
        // p99 needs 1 000 operations: 10 s at 100/s, the step's own 2 s at 10 k/s.
        assert_eq!(step_seconds(std::slice::from_ref(&p99), 100.0, 2.0), 10.0);
        assert_eq!(step_seconds(std::slice::from_ref(&p99), 10_000.0, 2.0), 2.0);
        // A share of 1% needs 100.
        assert_eq!(step_seconds(std::slice::from_ref(&failed), 20.0, 2.0), 5.0);
        // A 500 ms latency bound needs 10 s; never more than 60 s.
        let slow = Assertion::parse("p50<=500ms").unwrap();
        assert_eq!(step_seconds(&[slow], 1e6, 2.0), 10.0);
        assert_eq!(step_seconds(&[p99], 1.0, 2.0), 60.0);
    }
}
