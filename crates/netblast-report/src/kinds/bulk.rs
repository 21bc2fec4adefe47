//! A bulk test's report: its interval columns (a paced test says its rate first), each
//! stream's and way's lines (iperf3's), its totals, and what limited its senders.

use crate::chart::{Plot, Series, Shape, Unit};
use crate::lines::way_name;
use crate::lines::{MAX_STREAM_LINES, id_col, iv_span, label, span};
use crate::markup::esc;
use crate::series::{MAX_LINES, at};
use netblast_spec::profile::{Profile, Way, Workload};
use netblast_spec::result::{Interval, RunResult, StreamInfo, WaySummary};
use netblast_spec::units::{fmt_bits_per_s, fmt_bytes, known};
use std::collections::BTreeMap;
use std::fmt::Write;

/// bulk's part of the report: iperf3's columns, the limits under each way's TCP line and their
/// table, per-stream charts.
pub(crate) struct Report;

impl super::KindReport for Report {
    fn interval_header(&self, profile: &Profile) -> String {
        header(profile)
    }
    fn interval(&self, iv: &Interval, streams: &[StreamInfo], profile: &Profile) -> String {
        interval(iv, streams, profile)
    }
    fn summary(&self, s: &mut String, r: &RunResult) {
        summary(s, r)
    }
    fn way_tcp(&self, s: &mut String, r: &RunResult, way: Way) {
        limit_lines(s, r, way)
    }
    fn html_tables(&self, out: &mut String, r: &RunResult) {
        limits_table(out, r)
    }
    fn plots(&self, r: &RunResult, compact: bool) -> Vec<Plot> {
        plots(r, compact)
    }
}

/// The column header (a paced test says its rate first: the sender's column also fills and
/// drains its send buffer, the receiver's count is the rate held). It names no mechanism:
/// older results were paced by the kernel alone (`SO_MAX_PACING_RATE` at the rate), newer ones
/// by the sender's schedule with the kernel 25% above it; both held the rate, and a result's
/// version string does not tell them apart.
pub(crate) fn header(profile: &Profile) -> String {
    let paced = match &profile.workload {
        Workload::Bulk(b) => {
            let (up, down) = (b.rate(netblast_spec::profile::Way::Up), b.rate(netblast_spec::profile::Way::Down));
            let r = |r: Option<netblast_spec::units::BitRate>| {
                r.map_or("no limit".into(), |r| fmt_bits_per_s(r.bits_per_s()))
            };
            match (up, down) {
                (None, None) => None,
                (u, d) if u == d => Some(format!(
                    "Paced: each sending flow held to {} by its sender; the receiver's count is the rate held\n",
                    r(u)
                )),
                (u, d) => Some(format!(
                    "Paced: each flow held by its sender, to {} up and {} down; the receiver's count is the rate held\n",
                    r(u),
                    r(d)
                )),
            }
        }
        _ => None,
    };
    format!(
        "{}[ ID] Interval           Transfer     Bitrate         Retr  Cwnd         RTT\n",
        paced.unwrap_or_default()
    )
}

/// A bulk interval's lines: each stream's (up to [`MAX_STREAM_LINES`]) and each way's sum.
pub(crate) fn interval(iv: &Interval, streams: &[StreamInfo], profile: &Profile) -> String {
    let mut s = String::new();
    let secs = (iv.end_s - iv.start_s).max(1e-9);
    let ways = iv.sums.len();
    // One side per way and interval, the same for its stream lines and its sum: the sender's
    // counts while it sent, the receiver's (marked so) for an interval only a receiver counted.
    let way_of = |id: u32| streams.iter().find(|st| st.id == id).map(|st| st.way);
    let sender_side: Vec<(Way, bool)> = iv
        .sums
        .iter()
        .map(|w| {
            (w.way, w.sent_bytes > 0 || iv.streams.iter().any(|x| way_of(x.id) == Some(w.way) && x.sent_bytes > 0))
        })
        .collect();
    let side_of = |way: Option<Way>| sender_side.iter().find(|(w, _)| Some(*w) == way).is_none_or(|(_, s)| *s);
    let mark = |sender: bool| if sender { "" } else { "  receiver" };
    if streams.len() > 1 && streams.len() <= MAX_STREAM_LINES {
        for st in &iv.streams {
            let sender = side_of(way_of(st.id));
            let bytes = if sender { st.sent_bytes } else { st.received_bytes.unwrap_or(0) };
            let (cwnd, rtt) =
                st.tcp.map(|t| (fmt_bytes(t.cwnd_bytes()), format!("{} us", t.rtt_us))).unwrap_or_default();
            let _ = writeln!(
                s,
                "[{}] {}  {:>11}  {:>15} {:>4}  {:>11}  {:>9}{}",
                id_col(st.id),
                iv_span(iv, profile),
                fmt_bytes(bytes),
                fmt_bits_per_s(bytes as f64 * 8.0 / secs),
                known(st.retransmits),
                cwnd,
                rtt,
                mark(sender)
            );
        }
    }
    for w in &iv.sums {
        let of_way: Vec<_> = iv.streams.iter().filter(|x| way_of(x.id) == Some(w.way)).collect();
        let sender = side_of(Some(w.way));
        let bytes = if sender {
            w.sent_bytes.max(of_way.iter().map(|x| x.sent_bytes).sum())
        } else {
            w.received_bytes.unwrap_or(0).max(of_way.iter().filter_map(|x| x.received_bytes).sum())
        };
        let rtts: Vec<u32> = of_way.iter().filter_map(|x| x.tcp).map(|t| t.rtt_us).filter(|r| *r > 0).collect();
        let rtt = if rtts.is_empty() {
            String::new()
        } else {
            format!("{} us", rtts.iter().map(|r| *r as u64).sum::<u64>() / rtts.len() as u64)
        };
        let cwnd = of_way.iter().filter_map(|x| x.tcp).map(|t| t.cwnd_bytes()).max();
        let _ = writeln!(
            s,
            "[{}] {}  {:>11}  {:>15} {:>4}  {:>11}  {:>9}{}",
            label(w.way, ways),
            iv_span(iv, profile),
            fmt_bytes(bytes),
            fmt_bits_per_s(bytes as f64 * 8.0 / secs),
            known(w.retransmits),
            cwnd.map(fmt_bytes).unwrap_or_default(),
            rtt,
            mark(sender)
        );
    }
    s
}

pub(crate) fn way_lines(s: &mut String, w: &WaySummary, ways: usize, from: f64) {
    let l = label(w.way, ways);
    let span = |_: f64, b: f64| span(from, from + b);
    let _ = writeln!(
        s,
        "[{l}] {}  {:>11}  {:>15} {:>4}              sender",
        span(0.0, w.sender.seconds),
        fmt_bytes(w.sender.bytes),
        fmt_bits_per_s(w.sender.bits_per_s),
        known(w.retransmits)
    );
    match &w.receiver {
        Some(r) => {
            let _ = writeln!(
                s,
                "[{l}] {}  {:>11}  {:>15}                   receiver",
                span(0.0, r.seconds),
                fmt_bytes(r.bytes),
                fmt_bits_per_s(r.bits_per_s)
            );
        }
        None => {
            let _ = writeln!(s, "[{l}] receiver did not report");
        }
    }
}

/// A bulk test's totals: each stream's sender and receiver lines (up to
/// [`MAX_STREAM_LINES`] streams) and each way's.
pub(crate) fn summary(s: &mut String, r: &RunResult) {
    let _ = writeln!(s, "[ ID] Interval           Transfer     Bitrate         Retr");
    let ways = r.summary.ways.len();
    // Totals after an omitted start (-O) begin where it ends, on the intervals' time axis.
    let from = r.plan.profile.run.omit.map_or(0.0, |o| o.get().as_secs_f64());
    let span = |_: f64, b: f64| span(from, from + b);
    if r.streams.len() > 1 && r.streams.len() <= MAX_STREAM_LINES {
        for st in &r.summary.streams {
            let _ = writeln!(
                s,
                "[{}] {}  {:>11}  {:>15} {:>4}              sender",
                id_col(st.id),
                span(0.0, st.sender.seconds),
                fmt_bytes(st.sender.bytes),
                fmt_bits_per_s(st.sender.bits_per_s),
                known(st.retransmits)
            );
            if let Some(rv) = &st.receiver {
                let _ = writeln!(
                    s,
                    "[{}] {}  {:>11}  {:>15}                   receiver",
                    id_col(st.id),
                    span(0.0, rv.seconds),
                    fmt_bytes(rv.bytes),
                    fmt_bits_per_s(rv.bits_per_s)
                );
            }
        }
    }
    for w in &r.summary.ways {
        way_lines(s, w, ways, from);
    }
}

/// What limited a way's senders (their kernels' clocks), and the verdict with its fix.
pub(crate) fn limit_lines(s: &mut String, r: &RunResult, way: Way) {
    let Some(d) = crate::limits::tcp(r).into_iter().find(|d| d.diagnosis.way == way) else { return };
    let (x, pct) = (d.diagnosis.shares, |v: f64| format!("{:.0}%", v * 100.0));
    let _ = writeln!(
        s,
        "      limited by (the senders' kernel clocks): receiver window {}, send buffer {}, congestion window or path {}, nothing to send {}",
        pct(x.rwnd),
        pct(x.sndbuf),
        pct(x.cwnd),
        pct(x.app)
    );
    let _ = writeln!(s, "      verdict: {}", d.verdict);
}

/// What limited each way's TCP senders over the run, and the verdict with its fix.
pub(crate) fn limits_table(out: &mut String, r: &RunResult) {
    let d = crate::limits::tcp(r);
    if d.is_empty() {
        return;
    }
    out.push_str(
        "<h2>What limited the senders</h2><table id=\"limits\"><tr><th class=\"l\">way</th><th>receiver window</th>\
         <th>send buffer</th><th>congestion window or path</th><th>nothing to send</th><th class=\"l\">verdict</th></tr>",
    );
    for x in &d {
        let s = x.diagnosis.shares;
        let _ = write!(
            out,
            "<tr><td class=\"l\">{}</td><td>{:.0}%</td><td>{:.0}%</td><td>{:.0}%</td><td>{:.0}%</td><td class=\"l\">{}</td></tr>",
            way_name(x.diagnosis.way),
            s.rwnd * 100.0,
            s.sndbuf * 100.0,
            s.cwnd * 100.0,
            s.app * 100.0,
            esc(&x.verdict)
        );
    }
    out.push_str("</table>\n");
}

/// The sender's kernel view per stream at each interval's end: congestion window (bytes) and
/// smoothed RTT; compact: their mean over the streams.
pub(crate) fn per_stream_tcp(r: &RunResult, compact: bool) -> Vec<Plot> {
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
pub(crate) fn limits(r: &RunResult) -> Option<Plot> {
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

/// bulk's own charts: what limited the senders, each stream's cwnd and smoothed RTT.
pub(crate) fn plots(r: &RunResult, compact: bool) -> Vec<Plot> {
    let mut out: Vec<Plot> = limits(r).into_iter().collect();
    out.extend(per_stream_tcp(r, compact));
    out
}
