//! What the HTML page's tables are made of: escaped text, latency cells.

use netblast_spec::hist::LatencySummary;
use netblast_spec::units::fmt_ns;

pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

pub(crate) fn lat_cells(l: Option<&LatencySummary>) -> String {
    match l.filter(|l| l.count > 0) {
        Some(l) => format!(
            "<td data-v=\"{}\">{}</td><td data-v=\"{}\">{}</td>",
            l.p50_ns,
            fmt_ns(l.p50_ns as f64),
            l.p99_ns,
            fmt_ns(l.p99_ns as f64)
        ),
        None => "<td>—</td><td>—</td>".into(),
    }
}
