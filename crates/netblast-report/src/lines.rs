//! What every kind's report lines are made of: labels and id columns, spans, counts, latency
//! columns and percentiles, retransmissions.

use netblast_spec::hist::LatencySummary;
use netblast_spec::profile::{Profile, Way};
use netblast_spec::result::Interval;
use netblast_spec::units::fmt_ns;
use std::fmt::Write;

/// Above this many streams, interval lines show only the per-way sums.
pub const MAX_STREAM_LINES: usize = 8;

pub(crate) fn label(way: Way, ways: usize) -> &'static str {
    match (way, ways) {
        (_, 1) => "SUM",
        (Way::Up, _) => "UP ",
        (Way::Down, _) => "DN ",
    }
}

pub(crate) fn id_col(id: u32) -> String {
    format!("{id:>3}")
}

pub(crate) fn udp(profile: &Profile) -> bool {
    profile.workload.uses_udp()
}

pub(crate) fn span(a: f64, b: f64) -> String {
    format!("{a:>6.2}-{b:<6.2} sec")
}

/// An interval's span: to a tenth of a millisecond when it is a short tail (under a tenth of the
/// reporting interval, the last bytes after the last tick), so its rate is read over its real
/// length rather than over an apparent "3.00-3.00".
pub(crate) fn iv_span(iv: &Interval, profile: &Profile) -> String {
    let nominal = profile.run.interval().as_secs_f64();
    if iv.end_s - iv.start_s < nominal * 0.1 {
        format!("{:>6.4}-{:<6.4} sec", iv.start_s, iv.end_s)
    } else {
        span(iv.start_s, iv.end_s)
    }
}

/// A count with a k/M suffix in three significant digits (the number format of every output).
pub(crate) fn count(n: u64) -> String {
    let v = n as f64;
    if v >= 999.5e3 {
        format!("{} M", netblast_spec::units::sig3(v / 1e6))
    } else if v >= 1e3 {
        format!("{} k", netblast_spec::units::sig3(v / 1e3))
    } else {
        format!("{n}")
    }
}

pub(crate) fn lat_cols(l: &LatencySummary) -> String {
    format!(
        "{:>9}  {:>9}  {:>9}  {:>9}",
        fmt_ns(l.p50_ns as f64),
        fmt_ns(l.p99_ns as f64),
        fmt_ns(l.p999_ns as f64),
        fmt_ns(l.max_ns as f64)
    )
}

/// A latency summary on one line: min, mean, stdev, the percentiles, max.
pub(crate) fn pcts(l: &LatencySummary) -> String {
    format!(
        "min {} mean {} stdev {} p50 {} p90 {} p95 {} p99 {} p99.9 {} p99.99 {} max {}",
        fmt_ns(l.min_ns as f64),
        fmt_ns(l.mean_ns),
        fmt_ns(l.stdev_ns),
        fmt_ns(l.p50_ns as f64),
        fmt_ns(l.p90_ns as f64),
        fmt_ns(l.p95_ns as f64),
        fmt_ns(l.p99_ns as f64),
        fmt_ns(l.p999_ns as f64),
        fmt_ns(l.p9999_ns as f64),
        fmt_ns(l.max_ns as f64)
    )
}

/// "N retransmitted segments (R% of segments sent), S of them spurious (...)".
pub(crate) fn retransmissions(n: Option<u64>, rate: Option<f64>, spurious: Option<u64>) -> String {
    let Some(n) = n else { return "retransmitted segments not counted (the kernel was not read)".into() };
    let mut out = format!("{n} retransmitted segments");
    if let Some(rate) = rate {
        let _ = write!(out, " ({:.3}% of segments sent)", rate * 100.0);
    }
    if let Some(sp) = spurious.filter(|_| n > 0) {
        let _ = write!(out, ", {sp} of them spurious (the receiver got them twice: DSACK)");
    }
    out
}

/// "p50 X p99 Y max Z" of a distribution.
pub(crate) fn p50_p99_max(l: &LatencySummary) -> String {
    format!("p50 {} p99 {} max {}", fmt_ns(l.p50_ns as f64), fmt_ns(l.p99_ns as f64), fmt_ns(l.max_ns as f64))
}

/// A direction's name for people.
pub fn way_name(w: Way) -> &'static str {
    match w {
        Way::Up => "client → server",
        Way::Down => "server → client",
    }
}

/// A share in percent, one decimal below 10%.
pub(crate) fn pct(x: f64) -> String {
    if x < 0.1 { format!("{:.1}%", x * 100.0) } else { format!("{:.0}%", x * 100.0) }
}

/// The receiving side's host of a way.
pub(crate) fn receiver_load(
    r: &netblast_spec::result::RunResult,
    way: Way,
) -> Option<&netblast_spec::result::HostLoad> {
    match way {
        Way::Up => r.summary.load.server.as_ref(),
        Way::Down => r.summary.load.client.as_ref(),
    }
}

/// What a host's interfaces and input backlogs dropped, in words (empty: nothing).
pub(crate) fn drops_words(l: &netblast_spec::result::HostLoad) -> String {
    let mut parts: Vec<String> = l
        .interfaces
        .iter()
        .map(|i| {
            let mut what = Vec::new();
            for (n, name) in [
                (i.rx_dropped, "received packets dropped"),
                (i.tx_dropped, "packets to send dropped"),
                (i.rx_errors, "receive errors"),
                (i.tx_errors, "transmit errors"),
            ] {
                if n > 0 {
                    what.push(format!("{n} {name}"));
                }
            }
            format!("{} {}", i.name, what.join(", "))
        })
        .collect();
    if l.backlog_drops > 0 {
        parts.push(format!(
            "{} packets dropped at full CPU input backlogs (net.core.netdev_max_backlog)",
            l.backlog_drops
        ));
    }
    parts.join("; ")
}
