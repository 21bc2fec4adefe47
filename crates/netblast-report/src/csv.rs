//! Per-interval rows as CSV (`netblast report RESULT.json --csv`), for spreadsheets and
//! plotting tools: one row per interval and way (`up`, `down`), and for HTTP one row per
//! interval (`http`). Every rate is over its own row's span (`start_s` to `end_s`); cells a
//! row has no figure for are empty.

use netblast_spec::hist::LatencySummary;
use netblast_spec::profile::Way;
use netblast_spec::RunResult;
use std::fmt::Write;

/// The header line's columns.
pub const COLUMNS: [&str; 23] = [
    "index",
    "start_s",
    "end_s",
    "way",
    "sent_bytes",
    "sent_bits_per_s",
    "received_bytes",
    "received_bits_per_s",
    "retransmits",
    "sent_msgs",
    "sent_msgs_per_s",
    "received_msgs",
    "received_msgs_per_s",
    "segs_out",
    "requests_sent",
    "responses",
    "request_errors",
    "responses_per_s",
    "latency_count",
    "latency_p50_ns",
    "latency_p99_ns",
    "latency_p999_ns",
    "latency_max_ns",
];

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

fn latency(l: Option<&LatencySummary>) -> [String; 5] {
    match l.filter(|l| l.count > 0) {
        Some(l) => [
            l.count.to_string(),
            l.p50_ns.to_string(),
            l.p99_ns.to_string(),
            l.p999_ns.to_string(),
            l.max_ns.to_string(),
        ],
        None => Default::default(),
    }
}

/// The result's intervals as CSV, header first.
pub fn intervals(r: &RunResult) -> String {
    let mut out = COLUMNS.join(",");
    out.push('\n');
    for iv in &r.intervals {
        let head = [iv.index.to_string(), format!("{:.6}", iv.start_s), format!("{:.6}", iv.end_s)];
        for w in &iv.sums {
            let way = match w.way {
                Way::Up => "up",
                Way::Down => "down",
            };
            let row: Vec<String> = head
                .iter()
                .cloned()
                .chain([
                    way.to_string(),
                    w.sent_bytes.to_string(),
                    format!("{:.0}", w.sent_bits_per_s),
                    opt(w.received_bytes),
                    opt(w.received_bits_per_s.map(|b| format!("{b:.0}"))),
                    opt(w.retransmits),
                    opt(w.msgs.as_ref().map(|m| m.sent)),
                    opt(w.msgs.as_ref().and_then(|m| m.sent_per_s).map(|m| format!("{m:.1}"))),
                    opt(w.msgs.as_ref().and_then(|m| m.received)),
                    opt(w.msgs.as_ref().and_then(|m| m.received_per_s).map(|m| format!("{m:.1}"))),
                    opt(w.msgs.as_ref().and_then(|m| m.segs_out)),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                ])
                .chain(latency(w.latency.as_deref()))
                .collect();
            let _ = writeln!(out, "{}", row.join(","));
        }
        if let Some(h) = &iv.http {
            let row: Vec<String> = head
                .iter()
                .cloned()
                .chain([
                    "http".to_string(),
                    h.bytes_sent.to_string(),
                    String::new(),
                    h.bytes_received.to_string(),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    h.sent.to_string(),
                    h.completed.to_string(),
                    h.errors.to_string(),
                    format!("{:.1}", h.responses_per_s),
                ])
                .chain(latency(h.latency.as_deref()))
                .collect();
            let _ = writeln!(out, "{}", row.join(","));
        }
    }
    out
}
