//! A bulk test's report: its interval columns (a paced test says its rate first), each
//! stream's and way's lines (iperf3's), its totals, and what limited its senders.

use crate::lines::way_name;
use crate::lines::{id_col, iv_span, label, span, MAX_STREAM_LINES};
use crate::markup::esc;
use netblast_spec::profile::{Profile, Way, Workload};
use netblast_spec::result::{Interval, RunResult, StreamInfo, WaySummary};
use netblast_spec::units::{fmt_bits_per_s, fmt_bytes, known};
use std::fmt::Write;

/// The column header (a paced test says its rate first: the sender's column also fills and
/// drains its send buffer, the receiver's count is the rate held).
pub(crate) fn header(profile: &Profile) -> String {
    let paced = match &profile.workload {
        Workload::Bulk(b) => b.bitrate.map(|r| {
            format!(
                "Paced: each sending flow at {} by the kernel (SO_MAX_PACING_RATE); the receiver's count is the rate held\n",
                fmt_bits_per_s(r.bits_per_s())
            )
        }),
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
    let Some(d) = netblast_spec::diagnose::tcp(r).into_iter().find(|d| d.way == way) else { return };
    let (x, pct) = (d.shares, |v: f64| format!("{:.0}%", v * 100.0));
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
    let d = netblast_spec::diagnose::tcp(r);
    if d.is_empty() {
        return;
    }
    out.push_str(
        "<h2>What limited the senders</h2><table id=\"limits\"><tr><th class=\"l\">way</th><th>receiver window</th>\
         <th>send buffer</th><th>congestion window or path</th><th>nothing to send</th><th class=\"l\">verdict</th></tr>",
    );
    for x in &d {
        let s = x.shares;
        let _ = write!(
            out,
            "<tr><td class=\"l\">{}</td><td>{:.0}%</td><td>{:.0}%</td><td>{:.0}%</td><td>{:.0}%</td><td class=\"l\">{}</td></tr>",
            way_name(x.way),
            s.rwnd * 100.0,
            s.sndbuf * 100.0,
            s.cwnd * 100.0,
            s.app * 100.0,
            esc(&x.verdict)
        );
    }
    out.push_str("</table>\n");
}
