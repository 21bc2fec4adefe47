//! The human report, rendered from the result (never from live engine state): interval lines
//! that read like iperf3's, then a sender/receiver summary, TCP and CPU lines, and errors.

use netblast_spec::profile::Way;
use netblast_spec::result::{Interval, RunResult, StreamInfo, WaySummary};
use netblast_spec::units::{fmt_bits_per_s, fmt_bytes};
use std::fmt::Write;

/// Above this many streams, interval lines show only the per-way sums.
pub const MAX_STREAM_LINES: usize = 8;

fn label(way: Way, ways: usize) -> &'static str {
    match (way, ways) {
        (_, 1) => "SUM",
        (Way::Up, _) => "UP ",
        (Way::Down, _) => "DN ",
    }
}

fn id_col(id: u32) -> String {
    format!("{id:>3}")
}

/// The lines printed once the test started: what runs where.
pub fn started(test_id: &str, peer: &str, kind: &str, streams: &[StreamInfo], server: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "netblast {kind} test {test_id} to {peer} (server {server})");
    for st in streams.iter().take(MAX_STREAM_LINES) {
        let _ = writeln!(
            s,
            "[{}] {} local {} connected to {} (client CPU {})",
            id_col(st.id),
            match st.way {
                Way::Up => "send",
                Way::Down => "recv",
            },
            st.local,
            st.remote,
            st.client_cpu
        );
    }
    if streams.len() > MAX_STREAM_LINES {
        let _ = writeln!(s, "... and {} more streams", streams.len() - MAX_STREAM_LINES);
    }
    s
}

/// The column header of interval lines.
pub fn interval_header() -> String {
    "[ ID] Interval           Transfer     Bitrate         Retr  Cwnd         RTT\n".to_string()
}

fn span(a: f64, b: f64) -> String {
    format!("{a:>6.2}-{b:<6.2} sec")
}

/// One interval as text: per-stream lines (when few), then one line per way.
pub fn interval(iv: &Interval, streams: &[StreamInfo]) -> String {
    let mut s = String::new();
    let secs = (iv.end_s - iv.start_s).max(1e-9);
    let ways = iv.sums.len();
    if streams.len() > 1 && streams.len() <= MAX_STREAM_LINES {
        for st in &iv.streams {
            let bytes = st.received_bytes.filter(|_| st.sent_bytes == 0).unwrap_or(st.sent_bytes);
            let (cwnd, rtt) =
                st.tcp.map(|t| (fmt_bytes(t.cwnd_bytes()), format!("{} us", t.rtt_us))).unwrap_or_default();
            let _ = writeln!(
                s,
                "[{}] {}  {:>11}  {:>15} {:>4}  {:>11}  {:>9}",
                id_col(st.id),
                span(iv.start_s, iv.end_s),
                fmt_bytes(bytes),
                fmt_bits_per_s(bytes as f64 * 8.0 / secs),
                st.retransmits,
                cwnd,
                rtt
            );
        }
    }
    for w in &iv.sums {
        let of_way: Vec<_> =
            iv.streams.iter().filter(|x| streams.iter().any(|st| st.id == x.id && st.way == w.way)).collect();
        let bytes = if w.sent_bytes > 0 { w.sent_bytes } else { w.received_bytes.unwrap_or(0) };
        let rtts: Vec<u32> = of_way.iter().filter_map(|x| x.tcp).map(|t| t.rtt_us).filter(|r| *r > 0).collect();
        let rtt = if rtts.is_empty() {
            String::new()
        } else {
            format!("{} us", rtts.iter().map(|r| *r as u64).sum::<u64>() / rtts.len() as u64)
        };
        let cwnd = of_way.iter().filter_map(|x| x.tcp).map(|t| t.cwnd_bytes()).max();
        let _ = writeln!(
            s,
            "[{}] {}  {:>11}  {:>15} {:>4}  {:>11}  {:>9}",
            label(w.way, ways),
            span(iv.start_s, iv.end_s),
            fmt_bytes(bytes),
            fmt_bits_per_s(bytes as f64 * 8.0 / secs),
            w.retransmits,
            cwnd.map(fmt_bytes).unwrap_or_default(),
            rtt
        );
    }
    s
}

fn way_lines(s: &mut String, w: &WaySummary, ways: usize) {
    let l = label(w.way, ways);
    let _ = writeln!(
        s,
        "[{l}] {}  {:>11}  {:>15} {:>4}              sender",
        span(0.0, w.sender.seconds),
        fmt_bytes(w.sender.bytes),
        fmt_bits_per_s(w.sender.bits_per_s),
        w.retransmits
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

/// The summary block printed at the end.
pub fn summary(r: &RunResult) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "- - - - - - - - - - - - - - - - - - - - - - - - -");
    let _ = writeln!(s, "[ ID] Interval           Transfer     Bitrate         Retr");
    let ways = r.summary.ways.len();
    if r.streams.len() > 1 && r.streams.len() <= MAX_STREAM_LINES {
        for st in &r.summary.streams {
            let _ = writeln!(
                s,
                "[{}] {}  {:>11}  {:>15} {:>4}              sender",
                id_col(st.id),
                span(0.0, st.sender.seconds),
                fmt_bytes(st.sender.bytes),
                fmt_bits_per_s(st.sender.bits_per_s),
                st.retransmits
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
        way_lines(&mut s, w, ways);
    }
    for w in &r.summary.ways {
        if let Some(rtt) = w.rtt {
            let _ = writeln!(
                s,
                "TCP {} (kernel, {} side, source {}): RTT min {} us / mean {:.0} us / max {} us, max cwnd {}, {} retransmitted segments",
                match w.way {
                    Way::Up => "up",
                    Way::Down => "down",
                },
                match w.way {
                    Way::Up => "client",
                    Way::Down => "server",
                },
                r.probe.tcp_source,
                rtt.min_us,
                rtt.mean_us,
                rtt.max_us,
                fmt_bytes(w.cwnd_max_bytes),
                w.retransmits
            );
        }
    }
    let c = &r.summary.cpu;
    let mut cpu = format!(
        "CPU: client {:.2} CPUs (user {:.2} s, system {:.2} s)",
        c.client.cpus_used(),
        c.client.user_s,
        c.client.system_s
    );
    if let Some(sv) = &c.server {
        let _ =
            write!(cpu, ", server {:.2} CPUs (user {:.2} s, system {:.2} s)", sv.cpus_used(), sv.user_s, sv.system_s);
    }
    let _ = write!(cpu, "; {:.1} Gbit per client CPU-second", c.bits_per_client_cpu_s / 1e9);
    if let Some(b) = c.bits_per_server_cpu_s {
        let _ = write!(cpu, ", {:.1} per server CPU-second", b / 1e9);
    }
    let _ = writeln!(s, "{cpu}");
    if let Some(fb) = &r.probe.fallback_reason {
        let _ = writeln!(s, "TCP statistics from {} ({fb})", r.probe.tcp_source);
    }
    if !r.complete {
        let _ = writeln!(s, "INCOMPLETE RUN: the figures above cover what was measured before:");
        for e in &r.errors {
            let _ = writeln!(s, "  at {:.2} s, {}: {}", e.at_s, e.source, e.message);
        }
    }
    s
}

/// The whole report of a finished run: header, intervals, summary.
pub fn full(r: &RunResult) -> String {
    let mut s = started(
        &r.test_id,
        &r.plan.peer,
        r.plan.profile.run.kind.name(),
        &r.streams,
        r.server.as_ref().map(|h| h.hostname.as_str()).unwrap_or("?"),
    );
    s.push_str(&interval_header());
    for iv in &r.intervals {
        s.push_str(&interval(iv, &r.streams));
    }
    s.push_str(&summary(r));
    s
}
