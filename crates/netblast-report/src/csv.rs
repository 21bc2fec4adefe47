//! Rows as CSV for spreadsheets and plotting tools (`netblast report RESULT.json --csv
//! [intervals|streams|tests]`):
//! - [`intervals`]: one row per interval and way (`up`, `down`), and for HTTP one row per
//!   interval (`http`); then the latency probes' intervals (`probe`, with their `phase`);
//! - [`streams`]: one row per interval and stream, with the sender's kernel view (srtt, cwnd);
//! - [`tests`]: one row per test of a fleet or merged result, with its own totals.
//!
//! Every rate is over its own row's span (`start_s` to `end_s`, or the test's seconds); a cell
//! a row has no figure for is empty. Each table has one fixed header whatever the kind, so
//! files of different runs line up.

use netblast_spec::RunResult;
use netblast_spec::hist::LatencySummary;
use netblast_spec::profile::Way;
use netblast_spec::result::{Interval, MsgInterval};
use std::fmt::Write;

/// The header of [`intervals`].
pub const COLUMNS: [&str; 32] = [
    "index",
    "start_s",
    "end_s",
    "way",
    "phase",
    "sent_bytes",
    "sent_bits_per_s",
    "received_bytes",
    "received_bits_per_s",
    "retransmits",
    "srtt_us_mean",
    "cwnd_bytes",
    "sent_msgs",
    "sent_msgs_per_s",
    "received_msgs",
    "received_msgs_per_s",
    "segs_out",
    "lost",
    "out_of_order",
    "jitter_ns",
    "failed",
    "requests_sent",
    "responses",
    "request_errors",
    "failed_status",
    "responses_per_s",
    "target_rate",
    "latency_count",
    "latency_p50_ns",
    "latency_p99_ns",
    "latency_p999_ns",
    "latency_max_ns",
];

/// The header of [`streams`].
pub const STREAM_COLUMNS: [&str; 21] = [
    "index",
    "start_s",
    "end_s",
    "stream",
    "way",
    "sent_bytes",
    "received_bytes",
    "received_bits_per_s",
    "retransmits",
    "srtt_us",
    "cwnd_bytes",
    "delivery_rate_bps",
    "sent_msgs",
    "received_msgs",
    "lost",
    "jitter_ns",
    "failed",
    "latency_count",
    "latency_p50_ns",
    "latency_p99_ns",
    "latency_max_ns",
];

/// The header of [`tests`].
pub const TEST_COLUMNS: [&str; 16] = [
    "test",
    "client",
    "client_address",
    "peer",
    "complete",
    "seconds",
    "sent_bits_per_s",
    "received_bits_per_s",
    "retransmits",
    "msgs_per_s",
    "lost",
    "responses_per_s",
    "failed",
    "latency_p50_ns",
    "latency_p99_ns",
    "latency_max_ns",
];

/// One row: cells by column name; the table writes them in its header's order.
type Row = Vec<(&'static str, String)>;

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

fn rate(v: Option<f64>) -> String {
    opt(v.map(|x| format!("{x:.1}")))
}

fn table(columns: &[&str], rows: &[Row]) -> String {
    let mut out = columns.join(",");
    out.push('\n');
    for row in rows {
        let cells: Vec<&str> =
            columns.iter().map(|c| row.iter().find(|(k, _)| k == c).map(|(_, v)| v.as_str()).unwrap_or("")).collect();
        let _ = writeln!(out, "{}", cells.join(","));
    }
    out
}

fn latency(row: &mut Row, l: Option<&LatencySummary>) {
    if let Some(l) = l.filter(|l| l.count > 0) {
        row.extend([
            ("latency_count", l.count.to_string()),
            ("latency_p50_ns", l.p50_ns.to_string()),
            ("latency_p99_ns", l.p99_ns.to_string()),
            ("latency_p999_ns", l.p999_ns.to_string()),
            ("latency_max_ns", l.max_ns.to_string()),
        ]);
    }
}

fn msgs(row: &mut Row, m: Option<&MsgInterval>) {
    let Some(m) = m else { return };
    row.extend([
        ("sent_msgs", m.sent.to_string()),
        ("sent_msgs_per_s", rate(m.sent_per_s)),
        ("received_msgs", opt(m.received)),
        ("received_msgs_per_s", rate(m.received_per_s)),
        ("segs_out", opt(m.segs_out)),
        ("failed", opt(m.failed)),
    ]);
    if let Some(q) = &m.udp {
        row.extend([
            ("lost", q.lost.to_string()),
            ("out_of_order", q.out_of_order.to_string()),
            ("jitter_ns", format!("{:.0}", q.jitter_ns)),
        ]);
    }
}

fn head(iv: &Interval) -> Row {
    vec![
        ("index", iv.index.to_string()),
        ("start_s", format!("{:.6}", iv.start_s)),
        ("end_s", format!("{:.6}", iv.end_s)),
    ]
}

fn way(w: Way) -> String {
    w.name().into()
}

/// The result's intervals as CSV, header ([`COLUMNS`]) first: per way, the streams' srtt mean
/// and cwnd sum at the interval's end (TCP), datagram loss and jitter (UDP); HTTP per interval
/// with the target rate (open loop).
pub fn intervals(r: &RunResult) -> String {
    let mut rows = Vec::new();
    for iv in &r.intervals {
        for w in &iv.sums {
            let mut row = head(iv);
            row.extend([
                ("way", way(w.way)),
                ("sent_bytes", w.sent_bytes.to_string()),
                ("sent_bits_per_s", format!("{:.0}", w.sent_bits_per_s)),
                ("received_bytes", opt(w.received_bytes)),
                ("received_bits_per_s", opt(w.received_bits_per_s.map(|b| format!("{b:.0}")))),
                ("retransmits", opt(w.retransmits)),
            ]);
            let tcp: Vec<_> = iv
                .streams
                .iter()
                .filter(|s| r.streams.iter().any(|i| i.id == s.id && i.way == w.way))
                .filter_map(|s| s.tcp.as_ref())
                .collect();
            if !tcp.is_empty() {
                let srtt = tcp.iter().map(|t| t.rtt_us as f64).sum::<f64>() / tcp.len() as f64;
                let cwnd: u64 = tcp.iter().map(|t| t.cwnd_segs as u64 * t.mss as u64).sum();
                row.extend([("srtt_us_mean", format!("{srtt:.1}")), ("cwnd_bytes", cwnd.to_string())]);
            }
            msgs(&mut row, w.msgs.as_ref());
            latency(&mut row, w.latency.as_deref());
            rows.push(row);
        }
        if let Some(h) = &iv.http {
            let mut row = head(iv);
            row.extend([
                ("way", "http".to_string()),
                ("sent_bytes", h.bytes_sent.to_string()),
                ("received_bytes", h.bytes_received.to_string()),
                ("requests_sent", h.sent.to_string()),
                ("responses", h.completed.to_string()),
                ("request_errors", h.errors.to_string()),
                ("failed_status", h.failed_status.to_string()),
                ("responses_per_s", format!("{:.1}", h.responses_per_s)),
                ("target_rate", rate(h.target_rate)),
            ]);
            latency(&mut row, h.latency.as_deref());
            rows.push(row);
        }
    }
    // The latency probes' intervals (way `probe`), on the test's time axis (negative before
    // the load), each with its phase; their round trips are `sent_msgs`.
    for (i, p) in r.latency_probe.iter().flat_map(|p| p.intervals.iter()).enumerate() {
        let mut row = vec![
            ("index", i.to_string()),
            ("start_s", format!("{:.6}", p.start_s)),
            ("end_s", format!("{:.6}", p.end_s)),
            ("way", "probe".to_string()),
            ("phase", p.phase.name().to_string()),
            ("sent_msgs", p.round_trips.to_string()),
        ];
        latency(&mut row, p.latency.as_deref());
        rows.push(row);
    }
    table(&COLUMNS, &rows)
}

/// One row per interval and stream, header ([`STREAM_COLUMNS`]) first.
pub fn streams(r: &RunResult) -> String {
    let mut rows = Vec::new();
    for iv in &r.intervals {
        let span = (iv.end_s - iv.start_s).max(1e-9);
        for s in &iv.streams {
            let mut row = head(iv);
            let w = r.streams.iter().find(|i| i.id == s.id).map(|i| way(i.way)).unwrap_or_default();
            row.extend([
                ("stream", s.id.to_string()),
                ("way", w),
                ("sent_bytes", s.sent_bytes.to_string()),
                ("received_bytes", opt(s.received_bytes)),
                ("received_bits_per_s", opt(s.received_bytes.map(|b| format!("{:.0}", b as f64 * 8.0 / span)))),
                ("retransmits", opt(s.retransmits)),
            ]);
            if let Some(t) = &s.tcp {
                row.extend([
                    ("srtt_us", t.rtt_us.to_string()),
                    ("cwnd_bytes", (t.cwnd_segs as u64 * t.mss as u64).to_string()),
                    ("delivery_rate_bps", (t.delivery_rate_bytes_per_s * 8).to_string()),
                ]);
            }
            msgs(&mut row, s.msgs.as_ref());
            latency(&mut row, s.latency.as_deref());
            rows.push(row);
        }
    }
    table(&STREAM_COLUMNS, &rows)
}

/// One row per test of a fleet or merged result, header ([`TEST_COLUMNS`]) first; a single
/// run's result has none.
pub fn tests(r: &RunResult) -> String {
    let mut rows = Vec::new();
    for (i, p) in r.parts.iter().enumerate() {
        let s = &p.summary;
        let sent: f64 = s.ways.iter().map(|w| w.sender.bits_per_s).sum();
        let recv: Option<f64> = s.ways.iter().map(|w| w.receiver.map(|x| x.bits_per_s)).sum();
        let msgs: Option<f64> =
            s.ways.iter().filter_map(|w| w.msgs.as_ref()).map(|m| m.sent_per_s).reduce(|a, b| a + b);
        let lost: Option<u64> = s.ways.iter().filter_map(|w| w.msgs.as_ref()?.lost).reduce(|a, b| a + b);
        let mut row: Row = vec![
            ("test", i.to_string()),
            ("client", p.agent.hostname.clone()),
            ("client_address", p.agent.address.clone()),
            ("peer", p.peer.clone()),
            ("complete", p.complete.to_string()),
            ("seconds", format!("{:.3}", s.duration_s)),
            ("sent_bits_per_s", format!("{sent:.0}")),
            ("received_bits_per_s", opt(recv.map(|b| format!("{b:.0}")))),
            ("retransmits", opt(s.retransmits())),
            ("msgs_per_s", rate(msgs)),
            ("lost", opt(lost)),
        ];
        if let Some(h) = &s.http {
            row.extend([
                ("responses_per_s", format!("{:.1}", h.responses_per_s)),
                ("failed", h.sent.saturating_sub(h.succeeded).to_string()),
            ]);
        }
        let lat = s.ways.iter().filter_map(|w| w.latency.as_deref()).chain(s.http.as_ref().map(|h| &*h.latency));
        if let Some(l) = lat.filter(|l| l.count > 0).max_by_key(|l| l.p99_ns) {
            row.extend([
                ("latency_p50_ns", l.p50_ns.to_string()),
                ("latency_p99_ns", l.p99_ns.to_string()),
                ("latency_max_ns", l.max_ns.to_string()),
            ]);
        }
        rows.push(row);
    }
    table(&TEST_COLUMNS, &rows)
}
