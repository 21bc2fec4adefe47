//! Which charts each kind of result has, as data ([`crate::chart::Plot`]s in base units): the
//! one description of a kind's figures over time that the HTML page (one run, or several
//! overlaid) draws.
//!
//! - every kind with bytes on the data path: `throughput` (total, and per stream or agent);
//! - with latency probes: `probe` (their round trips per interval, idle then loaded);
//! - TCP bulk: `retransmits` per interval, `cwnd` and `srtt` per stream (the sender's kernel);
//! - msgrate, rr, cps: `ops` (messages, datagrams, transactions or connections per second;
//!   TCP segments on the wire beside messages), UDP `loss` and `jitter`, cps `failures`;
//! - rr, cps, msgrate with latency, HTTP: `latency-time` (p50, p99, max per interval) and the
//!   whole run's `latency` spectrum; `rtt` the kernel's RTT spectrum;
//! - HTTP: `http-rate` (sent, responses, target), `http-status` (responses by code), `failures`.

use crate::chart::{Plot, Series, Shape, Unit, XAxis};
use netblast_spec::RunResult;
use netblast_spec::hist::{EncodedHistogram, LatencySummary, hist_of};
use netblast_spec::profile::Way;

/// The order charts appear in (a comparison lines up the same ids).
pub const ORDER: [&str; 15] = [
    "throughput",
    "probe",
    "ops",
    "http-rate",
    "latency-time",
    "latency",
    "loss",
    "jitter",
    "failures",
    "http-status",
    "retransmits",
    "limits",
    "cwnd",
    "srtt",
    "rtt",
];

/// Charts whose lines are parts of one whole (what limited the senders: four shares per way):
/// a comparison draws them once per run, on the same axis, rather than overlaying every run's
/// parts on one plot.
pub const PER_RUN: [&str; 1] = ["limits"];

pub use crate::lines::way_name;
pub use crate::series::is_udp;
use crate::series::{at, groups, secs};

/// Every chart `r` has figures for, in [`ORDER`]. `compact`: only the whole run's lines (no
/// per-stream lines), for overlaying several runs.
pub fn plots(r: &RunResult, compact: bool) -> Result<Vec<Plot>, String> {
    let mut out = Vec::new();
    if r.plan.profile.workload.section().headline_bits() {
        out.extend(throughput(r, compact));
    }
    out.extend(probe(r));
    out.extend(latency_time(r, compact));
    let lat = latency_hists(r);
    if !lat.is_empty() {
        out.push(spectrum("latency", "Latency by percentile (the whole run)", &lat)?);
    }
    out.extend(failures(r));
    out.extend(retransmits(r));
    let (source, rtt) = rtt_hists(r);
    if !rtt.is_empty() {
        out.push(spectrum("rtt", &format!("Kernel RTT by percentile ({source})"), &rtt)?);
    }
    // The kind's own charts, then every chart in its place.
    out.extend(crate::kinds::of(r).plots(r, compact));
    out.sort_by_key(|p| ORDER.iter().position(|id| *id == p.id).unwrap_or(ORDER.len()));
    Ok(out)
}

/// bits/s over time: the total (received where a receiver reported, sent otherwise), each way
/// when there are two, each stream (each agent's streams, for merged results).
fn throughput(r: &RunResult, compact: bool) -> Option<Plot> {
    if !r.intervals.iter().any(|iv| iv.sums.iter().any(|s| s.sent_bytes > 0)) {
        return None;
    }
    let bits = |sent: u64, recv: Option<u64>, span: f64| recv.unwrap_or(sent) as f64 * 8.0 / span;
    let received = r.intervals.iter().all(|iv| iv.sums.iter().all(|s| s.received_bytes.is_some()));
    let total = r
        .intervals
        .iter()
        .map(|iv| at(iv, iv.sums.iter().map(|s| bits(s.sent_bytes, s.received_bytes, secs(iv))).sum()))
        .collect();
    let mut series = vec![Series::new(if received { "total received" } else { "total sent" }, total).bold()];
    let ways: Vec<Way> = r.summary.ways.iter().map(|w| w.way).collect();
    if ways.len() > 1 {
        for w in ways {
            let pts = r
                .intervals
                .iter()
                .filter_map(|iv| {
                    let s = iv.sums.iter().find(|s| s.way == w)?;
                    Some(at(iv, bits(s.sent_bytes, s.received_bytes, secs(iv))))
                })
                .collect();
            series.push(Series::new(way_name(w), pts));
        }
    }
    if !compact {
        series.extend(groups(r, |s, span| bits(s.sent_bytes, s.received_bytes, span)));
    }
    let what = if received { "received" } else { "sent" };
    let mut p =
        Plot::over_time("throughput", format!("Throughput over time ({what})"), Unit::Bits, Shape::Steps, series);
    // Beside latency probes, the idle phase is on the axis too (the load sent nothing then),
    // so the two charts share it: flent's RRUL picture.
    if let Some(lp) = &r.latency_probe {
        let idle: Vec<_> = lp.intervals.iter().filter(|i| i.end_s <= 1e-9).map(|i| (i.start_s, i.end_s, 0.0)).collect();
        p.series[0].points.splice(0..0, idle);
        p.marks = load_marks(r);
    }
    Some(p)
}

/// The load's start and end, marked on the charts of a run with latency probes.
fn load_marks(r: &RunResult) -> Vec<(f64, String)> {
    let end = r.intervals.last().map(|iv| iv.end_s).unwrap_or(0.0);
    vec![(0.0, "load starts".into()), (end, "load ends".into())]
}

/// The latency probes' round trips per interval (p50, p99), idle phase included, the load's
/// start and end marked: with the throughput above, flent's RRUL picture.
fn probe(r: &RunResult) -> Option<Plot> {
    let lp = r.latency_probe.as_deref()?;
    let pts = |f: fn(&LatencySummary) -> f64| -> Vec<(f64, f64, f64)> {
        lp.intervals.iter().filter_map(|i| Some((i.start_s, i.end_s, f(i.latency.as_deref()?)))).collect()
    };
    let (p50, p99) = (pts(|l| l.p50_ns as f64), pts(|l| l.p99_ns as f64));
    if p50.is_empty() {
        return None;
    }
    let title = format!(
        "Latency probe round trips ({} at {}/s), idle then under load",
        lp.protocol.to_uppercase(),
        lp.rate_per_s
    );
    let series = vec![Series::new("probe p50", p50).bold(), Series::new("probe p99", p99)];
    let mut p = Plot::over_time("probe", title, Unit::Nanos, Shape::Steps, series);
    p.marks = load_marks(r);
    Some(p)
}

/// An interval's span and its latency.
type LatAt<'a> = (f64, f64, &'a LatencySummary);

/// p50, p99 and max of every interval's latency: each way (rr, cps, msgrate) and HTTP.
fn latency_time(r: &RunResult, compact: bool) -> Option<Plot> {
    let mut lines: Vec<(String, Vec<LatAt>)> = Vec::new();
    let two = r.summary.ways.len() > 1;
    for w in r.summary.ways.iter().map(|w| w.way) {
        let pts: Vec<_> = r
            .intervals
            .iter()
            .filter_map(|iv| {
                let l = iv.sums.iter().find(|s| s.way == w)?.latency.as_deref()?;
                (l.count > 0).then_some((iv.start_s, iv.end_s, l))
            })
            .collect();
        if !pts.is_empty() {
            lines.push((if two { format!("{} ", way_name(w)) } else { String::new() }, pts));
        }
    }
    let http: Vec<_> = r
        .intervals
        .iter()
        .filter_map(|iv| {
            let l = iv.http.as_ref()?.latency.as_deref()?;
            (l.count > 0).then_some((iv.start_s, iv.end_s, l))
        })
        .collect();
    if !http.is_empty() {
        lines.push((String::new(), http));
    }
    if lines.is_empty() {
        return None;
    }
    let mut series = Vec::new();
    for (prefix, pts) in &lines {
        let line = |name: &str, f: fn(&LatencySummary) -> f64| {
            Series::new(format!("{prefix}{name}"), pts.iter().map(|(a, b, l)| (*a, *b, f(l))).collect())
        };
        series.push(line("p50", |l| l.p50_ns as f64));
        series.push(line("p99", |l| l.p99_ns as f64).bold());
        if !compact {
            series.push(line("max", |l| l.max_ns as f64));
        }
    }
    let name = r.plan.profile.workload.section().latency_name();
    let what = format!("{}{}", name[..1].to_uppercase(), &name[1..]);
    // A log axis: an interval's max (a stall of ms) and its p50 (µs) both readable.
    let mut p = Plot::over_time("latency-time", format!("{what} per interval"), Unit::Nanos, Shape::Steps, series);
    p.log_y = true;
    Some(p)
}

/// Failures per interval: the streams' (cps: connections that failed), HTTP requests that
/// failed.
fn failures(r: &RunResult) -> Option<Plot> {
    let streams: Vec<_> = r
        .intervals
        .iter()
        .filter_map(|iv| {
            Some(at(iv, iv.sums.iter().filter_map(|s| s.msgs.as_ref()?.failed).reduce(|a, b| a + b)? as f64))
        })
        .collect();
    // A response with a status outside the expected set failed as surely as one that never came.
    let http: Vec<_> = r
        .intervals
        .iter()
        .filter_map(|iv| iv.http.as_ref().map(|h| at(iv, (h.errors + h.failed_status) as f64)))
        .collect();
    if streams.iter().chain(&http).all(|p| p.2 == 0.0) {
        // None failed: the headline says 0; an empty chart says nothing more.
        return None;
    }
    let (series, what) = if !streams.is_empty() {
        let w = &r.plan.profile.workload;
        (Series::new(w.section().lost_name(), streams), w.kind().unit())
    } else if !http.is_empty() {
        (Series::new("requests failed (no response, or a status not expected)", http), "requests")
    } else {
        return None;
    };
    Some(Plot::over_time("failures", "Failures per interval", Unit::Count(what), Shape::Bars, vec![series]))
}

/// Retransmitted segments per interval (TCP, when the kernel was read).
fn retransmits(r: &RunResult) -> Option<Plot> {
    r.summary.retransmits()?;
    let pts: Vec<_> = r
        .intervals
        .iter()
        .filter(|iv| iv.sums.iter().any(|s| s.retransmits.is_some()))
        .map(|iv| at(iv, iv.sums.iter().filter_map(|s| s.retransmits).sum::<u64>() as f64))
        .collect();
    if pts.is_empty() {
        return None;
    }
    let total = r.summary.retransmits().unwrap_or(0);
    if total == 0 {
        // None retransmitted: the headline says 0; an empty chart says nothing more.
        return None;
    }
    let inside = pts.iter().map(|p| p.2).sum::<f64>() as u64;
    // The title's count is the summary's; segments retransmitted after the last interval are said.
    let title = match total.saturating_sub(inside) {
        0 => format!("Retransmitted segments per interval ({total} in all)"),
        after => format!("Retransmitted segments per interval ({total} in all, {after} after the last interval)"),
    };
    Some(Plot::over_time(
        "retransmits",
        title,
        Unit::Count("segments"),
        Shape::Bars,
        vec![Series::new("retransmitted", pts)],
    ))
}

/// The whole run's latency histograms: per way (rr, cps, msgrate) and HTTP.
pub fn latency_hists(r: &RunResult) -> Vec<(String, &EncodedHistogram)> {
    let two = r.summary.ways.len() > 1;
    let mut v: Vec<(String, &EncodedHistogram)> = r
        .summary
        .ways
        .iter()
        .filter_map(|w| {
            let name = match two {
                true => way_name(w.way).to_string(),
                false => r.plan.profile.workload.section().latency_samples().to_string(),
            };
            hist_of(&w.latency).map(|h| (name, h))
        })
        .collect();
    if let Some(h) = r.summary.http.as_ref().and_then(|h| h.latency.hist.as_ref()) {
        v.push(("requests".into(), h));
    }
    v.retain(|(_, h)| h.count > 0);
    v
}

/// The kernel RTT histograms: eBPF samples where there are any, else TCP_INFO srtt samples.
fn rtt_hists(r: &RunResult) -> (&'static str, Vec<(String, &EncodedHistogram)>) {
    let http_tcp = r.summary.http.as_ref().and_then(|h| h.tcp.as_ref());
    let mut ebpf: Vec<(String, &EncodedHistogram)> = r
        .summary
        .ways
        .iter()
        .filter_map(|w| hist_of(&w.kernel_rtt).map(|h| (format!("{} senders", way_name(w.way)), h)))
        .collect();
    if let Some(h) = http_tcp.and_then(|t| hist_of(&t.kernel_rtt)) {
        ebpf.push(("HTTP connections".into(), h));
    }
    ebpf.retain(|(_, h)| h.count > 0);
    if !ebpf.is_empty() {
        return ("eBPF, every RTT sample", ebpf);
    }
    let mut srtt: Vec<(String, &EncodedHistogram)> = r
        .summary
        .ways
        .iter()
        .filter_map(|w| w.rtt_hist.as_ref().map(|h| (format!("{} senders", way_name(w.way)), h)))
        .collect();
    if let Some(h) = http_tcp.and_then(|t| hist_of(&t.srtt)) {
        srtt.push(("HTTP connections".into(), h));
    }
    srtt.retain(|(_, h)| h.count > 0);
    ("TCP_INFO smoothed RTT, sampled", srtt)
}

/// The percentile spectrum of each histogram (HdrHistogram's plot): the value at quantile q
/// against 1/(1−q) on a log axis, up to the quantile the sample count supports.
fn spectrum(id: &str, title: &str, hists: &[(String, &EncodedHistogram)]) -> Result<Plot, String> {
    let mut series = Vec::new();
    for (name, enc) in hists {
        let h = enc.decode().map_err(|e| format!("{name}: {e}"))?;
        let top = (1.0 - 1.0 / h.len().max(1) as f64).max(0.9);
        let x_top = (1.0 / (1.0 - top)).min(1e6);
        let steps = 200;
        let pts: Vec<(f64, f64, f64)> = (0..=steps)
            .map(|i| {
                let x = x_top.powf(i as f64 / steps as f64);
                let q = 1.0 - 1.0 / x;
                (x, x, netblast_spec::hist::at_percentile(&h, q * 100.0) as f64)
            })
            .chain(std::iter::once((x_top, x_top, h.max() as f64)))
            .collect();
        series.push(Series::new(format!("{name} ({} samples)", h.len()), pts));
    }
    Ok(Plot {
        id: id.into(),
        title: title.into(),
        unit: Unit::Nanos,
        x: XAxis::Percentile,
        log_y: true,
        shape: Shape::Line,
        series,
        marks: Vec::new(),
    })
}
