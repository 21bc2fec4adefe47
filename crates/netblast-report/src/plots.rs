//! Which charts each kind of result has, as data ([`crate::chart::Plot`]s in base units): the
//! one description of a kind's figures over time that the HTML page (one run, or several
//! overlaid) draws.
//!
//! - every kind with bytes on the data path: `throughput` (total, and per stream or agent);
//! - TCP bulk: `retransmits` per interval, `cwnd` and `srtt` per stream (the sender's kernel);
//! - msgrate, rr, cps: `ops` (messages, datagrams, transactions or connections per second;
//!   TCP segments on the wire beside messages), UDP `loss` and `jitter`, cps `failures`;
//! - rr, cps, msgrate with latency, HTTP: `latency-time` (p50, p99, max per interval) and the
//!   whole run's `latency` spectrum; `rtt` the kernel's RTT spectrum;
//! - HTTP: `http-rate` (sent, responses, target), `http-status` (responses by code), `failures`.

use crate::chart::{Plot, Series, Shape, Unit, XAxis};
use netblast_spec::hist::{hist_of, EncodedHistogram, LatencySummary};
use netblast_spec::profile::{Kind, Protocol, Way, Workload};
use netblast_spec::result::Interval;
use netblast_spec::RunResult;
use std::collections::BTreeMap;

/// Most per-stream (or per-agent) lines on a chart; beyond it only the total.
const MAX_LINES: usize = 16;

/// The order charts appear in (a comparison lines up the same ids).
pub const ORDER: [&str; 14] = [
    "throughput",
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

/// Whether the result is UDP (msgrate or rr over UDP).
pub fn is_udp(r: &RunResult) -> bool {
    match &r.plan.profile.workload {
        Workload::Msgrate(m) => m.protocol == Protocol::Udp,
        Workload::Rr(m) => m.protocol == Protocol::Udp,
        _ => false,
    }
}

/// An interval's span, as the first two fields of a plot point.
fn at(iv: &Interval, y: f64) -> (f64, f64, f64) {
    (iv.start_s, iv.end_s, y)
}

fn secs(iv: &Interval) -> f64 {
    (iv.end_s - iv.start_s).max(1e-9)
}

/// Every chart `r` has figures for, in [`ORDER`]. `compact`: only the whole run's lines (no
/// per-stream lines), for overlaying several runs.
pub fn plots(r: &RunResult, compact: bool) -> Result<Vec<Plot>, String> {
    let mut out = Vec::new();
    let kind = r.plan.profile.kind();
    let bytes_matter = kind == Kind::Bulk || (kind == Kind::Msgrate && is_udp(r));
    if bytes_matter {
        out.extend(throughput(r, compact));
    }
    out.extend(ops(r));
    out.extend(http_rate(r));
    out.extend(latency_time(r, compact));
    let lat = latency_hists(r);
    if !lat.is_empty() {
        out.push(spectrum("latency", "Latency by percentile (the whole run)", &lat)?);
    }
    out.extend(udp_quality(r));
    out.extend(failures(r));
    out.extend(http_status(r, compact));
    out.extend(retransmits(r));
    if kind == Kind::Bulk {
        out.extend(limits(r));
        out.extend(per_stream_tcp(r, compact));
    }
    let (source, rtt) = rtt_hists(r);
    if !rtt.is_empty() {
        out.push(spectrum("rtt", &format!("Kernel RTT by percentile ({source})"), &rtt)?);
    }
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
    Some(Plot::over_time("throughput", format!("Throughput over time ({what})"), Unit::Bits, Shape::Steps, series))
}

/// One line per agent (merged results) or per stream, of `f` summed over its streams; none
/// when there is one group or more than [`MAX_LINES`].
fn groups(r: &RunResult, f: impl Fn(&netblast_spec::result::StreamInterval, f64) -> f64) -> Vec<Series> {
    let name_of = |id: u32| -> String {
        match r.parts.iter().enumerate().find(|(_, p)| id >= p.first_stream && id < p.first_stream + p.streams) {
            Some((i, p)) => format!("test {i}: {} → {}", p.agent.hostname, p.peer),
            None => format!("stream {id}"),
        }
    };
    let mut by: BTreeMap<String, Vec<(f64, f64, f64)>> = BTreeMap::new();
    for iv in &r.intervals {
        let mut this: BTreeMap<String, f64> = BTreeMap::new();
        for s in &iv.streams {
            *this.entry(name_of(s.id)).or_default() += f(s, secs(iv));
        }
        for (k, v) in this {
            by.entry(k).or_default().push(at(iv, v));
        }
    }
    if by.len() < 2 || by.len() > MAX_LINES {
        return Vec::new();
    }
    by.into_iter().map(|(k, v)| Series::new(k, v)).collect()
}

/// Messages, datagrams, transactions or connections per second, sent and received, and TCP
/// segments on the wire beside messages (a message is not a packet).
fn ops(r: &RunResult) -> Option<Plot> {
    let kind = r.plan.profile.kind();
    if !matches!(kind, Kind::Msgrate | Kind::Rr | Kind::Cps) {
        return None;
    }
    let unit = if is_udp(r) && kind == Kind::Msgrate { "datagrams" } else { kind.unit() };
    let two = r.summary.ways.len() > 1;
    let mut series = Vec::new();
    for w in r.summary.ways.iter().map(|w| w.way) {
        let name = |what: &str| if two { format!("{what}, {}", way_name(w)) } else { what.to_string() };
        let pick = |f: fn(&netblast_spec::result::MsgInterval) -> Option<f64>| -> Vec<(f64, f64, f64)> {
            r.intervals
                .iter()
                .filter_map(|iv| Some(at(iv, f(iv.sums.iter().find(|s| s.way == w)?.msgs.as_ref()?)?)))
                .collect()
        };
        let sent_name = match kind {
            Kind::Rr => "completed",
            Kind::Cps => "established",
            _ => "sent",
        };
        series.push(Series::new(name(sent_name), pick(|m| m.sent_per_s)).bold());
        if kind == Kind::Msgrate {
            series.push(Series::new(name("received"), pick(|m| m.received_per_s)));
            let segs = pick(|m| m.segs_out_per_s);
            if !segs.is_empty() {
                series.push(Series::new(name("TCP segments sent (packets, not messages)"), segs));
            }
        }
    }
    series.retain(|s| !s.points.is_empty());
    (!series.is_empty()).then(|| {
        let title = format!("{}{} per second", unit[..1].to_uppercase(), &unit[1..]);
        Plot::over_time("ops", title, Unit::PerSecond(unit), Shape::Steps, series)
    })
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
    let what = match r.plan.profile.kind() {
        Kind::Rr => "Round-trip latency",
        Kind::Cps => "Connect latency",
        Kind::Http => "Request latency",
        _ => "Latency",
    };
    // A log axis: an interval's max (a stall of ms) and its p50 (µs) both readable.
    let mut p = Plot::over_time("latency-time", format!("{what} per interval"), Unit::Nanos, Shape::Steps, series);
    p.log_y = true;
    Some(p)
}

/// UDP: datagrams lost and out of order per interval (% of those sent), and jitter.
fn udp_quality(r: &RunResult) -> Vec<Plot> {
    let mut loss = Vec::new();
    let mut jitter = Vec::new();
    let two = r.summary.ways.len() > 1;
    for w in r.summary.ways.iter().map(|w| w.way) {
        let name = |what: &str| if two { format!("{what}, {}", way_name(w)) } else { what.to_string() };
        let (mut lost, mut ooo, mut jit) = (Vec::new(), Vec::new(), Vec::new());
        for iv in &r.intervals {
            let Some(m) = iv.sums.iter().find(|s| s.way == w).and_then(|s| s.msgs.as_ref()) else { continue };
            let Some(q) = &m.udp else { continue };
            let sent = m.sent.max(1) as f64;
            lost.push(at(iv, q.lost as f64 / sent));
            ooo.push(at(iv, q.out_of_order as f64 / sent));
            if q.received > 0 {
                jit.push(at(iv, q.jitter_ns));
            }
        }
        if !lost.is_empty() {
            loss.push(Series::new(name("lost"), lost).bold());
            loss.push(Series::new(name("out of order"), ooo));
        }
        if !jit.is_empty() {
            jitter.push(Series::new(name("jitter"), jit));
        }
    }
    let mut out = Vec::new();
    if !loss.is_empty() {
        out.push(Plot::over_time(
            "loss",
            "Datagrams lost and out of order per interval (of those sent)",
            Unit::Percent,
            Shape::Steps,
            loss,
        ));
    }
    if !jitter.is_empty() {
        out.push(Plot::over_time(
            "jitter",
            "Jitter per interval (RFC 3550, at the receivers)",
            Unit::Nanos,
            Shape::Steps,
            jitter,
        ));
    }
    out
}

/// Failures per interval: cps connections that failed, HTTP requests that failed.
fn failures(r: &RunResult) -> Option<Plot> {
    let cps: Vec<_> = r
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
    if cps.iter().chain(&http).all(|p| p.2 == 0.0) {
        // None failed: the headline says 0; an empty chart says nothing more.
        return None;
    }
    let (series, what) = if !cps.is_empty() {
        (Series::new("connections failed", cps), "connections")
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

/// The sender's kernel view per stream at each interval's end: congestion window (bytes) and
/// smoothed RTT; compact: their mean over the streams.
fn per_stream_tcp(r: &RunResult, compact: bool) -> Vec<Plot> {
    let mut cwnd: BTreeMap<u32, Vec<(f64, f64, f64)>> = BTreeMap::new();
    let mut srtt: BTreeMap<u32, Vec<(f64, f64, f64)>> = BTreeMap::new();
    for iv in &r.intervals {
        for s in &iv.streams {
            let Some(t) = &s.tcp else { continue };
            cwnd.entry(s.id).or_default().push(at(iv, t.cwnd_segs as f64 * t.mss as f64));
            srtt.entry(s.id).or_default().push(at(iv, t.rtt_us as f64 * 1e3));
        }
    }
    let lines = |m: BTreeMap<u32, Vec<(f64, f64, f64)>>| -> Vec<Series> {
        if m.is_empty() {
            return Vec::new();
        }
        if compact || m.len() > MAX_LINES {
            let mut by: BTreeMap<u64, (f64, f64, f64, u32)> = BTreeMap::new();
            for (a, b, y) in m.values().flatten() {
                let e = by.entry(a.to_bits()).or_insert((*a, *b, 0.0, 0));
                e.2 += y;
                e.3 += 1;
            }
            let pts = by.into_values().map(|(a, b, y, n)| (a, b, y / n as f64)).collect();
            let n = m.len();
            return vec![Series::new(format!("mean of {n} stream{}", if n == 1 { "" } else { "s" }), pts)];
        }
        m.into_iter().map(|(id, v)| Series::new(format!("stream {id}"), v)).collect()
    };
    let mut out = Vec::new();
    let c = lines(cwnd);
    if !c.is_empty() {
        out.push(Plot::over_time(
            "cwnd",
            "Congestion window (sender's kernel, at each interval's end)",
            Unit::Bytes,
            Shape::Steps,
            c,
        ));
    }
    let s = lines(srtt);
    if !s.is_empty() {
        out.push(Plot::over_time(
            "srtt",
            "Smoothed RTT (sender's kernel, at each interval's end)",
            Unit::Nanos,
            Shape::Steps,
            s,
        ));
    }
    out
}

/// What limited each way's senders in each interval (their kernels' clocks, advanced over the
/// interval, summed over the way's streams): the receiver's window, the send buffer, the
/// congestion window or path, nothing to send; shares of the interval.
fn limits(r: &RunResult) -> Option<Plot> {
    use netblast_spec::result::TcpLimits;
    let two = r.summary.ways.len() > 1;
    let mut series = Vec::new();
    for w in r.summary.ways.iter().map(|w| w.way) {
        let ids: Vec<u32> = r.streams.iter().filter(|s| s.way == w).map(|s| s.id).collect();
        let mut last: BTreeMap<u32, TcpLimits> = BTreeMap::new();
        let mut pts: [Vec<(f64, f64, f64)>; 4] = Default::default();
        for iv in &r.intervals {
            let wall = ((iv.end_s - iv.start_s) * 1e6) as u64;
            let mut sum: Option<TcpLimits> = None;
            for s in iv.streams.iter().filter(|s| ids.contains(&s.id)) {
                let Some(now) = s.tcp.and_then(|t| t.limits) else { continue };
                let d = now.since(&last.insert(s.id, now).unwrap_or_default(), wall);
                sum = Some(sum.map(|a| a.add(&d)).unwrap_or(d));
            }
            if let Some(x) = sum.and_then(|l| l.shares()) {
                for (k, v) in [x.rwnd, x.sndbuf, x.cwnd, x.app].into_iter().enumerate() {
                    pts[k].push(at(iv, v));
                }
            }
        }
        let names = ["receiver window", "send buffer", "congestion window or path", "nothing to send"];
        for (k, p) in pts.into_iter().enumerate().filter(|(_, p)| !p.is_empty()) {
            let name = if two { format!("{}, {}", names[k], way_name(w)) } else { names[k].to_string() };
            series.push(Series::new(name, p));
        }
    }
    (!series.is_empty()).then(|| {
        Plot::over_time(
            "limits",
            "What limited the senders, per interval (share of the time, their kernels' clocks)",
            Unit::Percent,
            Shape::Steps,
            series,
        )
    })
}

/// HTTP: requests sent and responses per second, and the target rate in open loop.
fn http_rate(r: &RunResult) -> Option<Plot> {
    let ivs: Vec<_> = r.intervals.iter().filter_map(|iv| Some((iv, iv.http.as_ref()?))).collect();
    if ivs.is_empty() {
        return None;
    }
    let mut series = vec![
        Series::new("responses", ivs.iter().map(|(iv, h)| at(iv, h.responses_per_s)).collect()).bold(),
        Series::new("requests sent", ivs.iter().map(|(iv, h)| at(iv, h.sent_per_s)).collect()),
    ];
    let target: Vec<_> = ivs.iter().filter_map(|(iv, h)| Some(at(iv, h.target_rate?))).collect();
    if !target.is_empty() {
        series.push(Series::new("target (offered rate)", target).dashed());
    }
    Some(Plot::over_time("http-rate", "Requests per second", Unit::PerSecond("requests"), Shape::Steps, series))
}

/// HTTP: responses per second by status code.
fn http_status(r: &RunResult, compact: bool) -> Option<Plot> {
    let mut codes: BTreeMap<&str, Vec<(f64, f64, f64)>> = BTreeMap::new();
    for iv in &r.intervals {
        let Some(h) = &iv.http else { continue };
        for (code, n) in &h.status {
            codes.entry(code).or_default().push(at(iv, *n as f64 / secs(iv)));
        }
    }
    // One code only says what the rate chart says; a comparison keeps its charts few.
    if codes.len() < 2 || compact {
        return None;
    }
    let series = codes.into_iter().map(|(c, v)| Series::new(format!("status {c}"), v)).collect();
    Some(Plot::over_time(
        "http-status",
        "Responses per second by status code",
        Unit::PerSecond("responses"),
        Shape::Steps,
        series,
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
            let name = if two { way_name(w.way).to_string() } else { r.plan.profile.kind().unit().to_string() };
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
    })
}
