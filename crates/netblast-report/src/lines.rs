//! What every kind's report lines are made of: labels and id columns, spans, counts, latency
//! columns and percentiles, retransmissions.

use netblast_spec::diagnose;
use netblast_spec::hist::LatencySummary;
use netblast_spec::profile::{Profile, Way};
use netblast_spec::result::{CpuLoad, HostLoad, Interval, RunResult};
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
pub(crate) fn receiver_load(r: &netblast_spec::result::RunResult, way: Way) -> Option<&HostLoad> {
    match way {
        Way::Up => r.summary.load.server.as_ref(),
        Way::Down => r.summary.load.client.as_ref(),
    }
}

/// What a host's interfaces and input backlogs dropped, in words (empty: nothing).
pub(crate) fn drops_words(l: &HostLoad) -> String {
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

/// A CPU in words: `CPU 1 at 99% busy, 61% in softirq`.
pub(crate) fn cpu_words(c: &CpuLoad) -> String {
    let (state, share) = c.mostly();
    format!("CPU {} at {:.0}% busy, {:.0}% in {state}", c.cpu, c.busy() * 100.0, share * 100.0)
}

/// Who of netblast's worker threads ran on `c`, and whether another process took most of it:
/// ` (netblast's worker 1 ran 12% of it; another process took the rest)`; empty when no thread
/// record names it.
pub(crate) fn who_ran(load: &HostLoad, c: &CpuLoad) -> String {
    let on = diagnose::ran_on(load, c.cpu);
    if on.is_empty() {
        return String::new();
    }
    let took: f64 = on.iter().map(|t| t.busy()).sum();
    let rest = if took < 0.5 * c.busy() { "; another process took the rest" } else { "" };
    if on.len() > WHO_RAN_NAMED {
        // 64 flows put 32 workers on each CPU: their sum, and the busiest, not 32 names.
        let top = on.iter().max_by(|a, b| a.busy().total_cmp(&b.busy())).expect("not empty");
        return format!(
            " (netblast's {} threads {:.0}% of it in all, the busiest {} {:.0}%{rest})",
            on.len(),
            took * 100.0,
            top.name,
            top.busy() * 100.0
        );
    }
    let names: Vec<String> = on.iter().map(|t| format!("{} {:.0}%", t.name, t.busy() * 100.0)).collect();
    format!(" (netblast's {} of it{rest})", names.join(", "))
}

/// At most this many threads on one CPU are named one by one in [`who_ran`]; more are summed.
const WHO_RAN_NAMED: usize = 3;

/// The busiest saturated CPU of a side's host that the side's threads of this test ran on, in
/// words with who ran there ([`diagnose::side_saturated`]); one of a host whose threads were
/// not pinned (`cpus` empty) is said not to be known to be theirs.
pub(crate) fn side_cpu(load: &HostLoad, cpus: &[u32]) -> Option<String> {
    let c = diagnose::side_saturated(load, cpus)?;
    Some(if cpus.is_empty() {
        format!("{} (its threads were not pinned: a CPU of its host, not known to be theirs)", cpu_words(c))
    } else {
        format!("{}{}", cpu_words(c), who_ran(load, c))
    })
}

/// The saturated CPU of `way`'s sending side (the client for `Up`, the server for `Down`)
/// that its threads of `r` ran on, in words ([`side_cpu`]).
pub(crate) fn sender_cpu(r: &RunResult, way: Way) -> Option<String> {
    match way {
        Way::Up => side_cpu(r.summary.load.client.as_ref()?, &diagnose::client_cpus(r)),
        Way::Down => side_cpu(r.summary.load.server.as_ref()?, &diagnose::server_cpus(r)),
    }
}

/// The client's worker thread that ran 90% of its time or more (the busiest), in words:
/// `the client's worker 0 on CPU 0 ran 97% of the time`.
pub(crate) fn saturated_worker(r: &RunResult) -> Option<String> {
    let t = diagnose::saturated_thread(r)?;
    let on = t.cpu.map(|c| format!(" on CPU {c}")).unwrap_or_default();
    Some(format!("the client's {}{on} ran {:.0}% of the time", t.name, t.busy() * 100.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_threads_on_one_cpu_are_summed_not_listed() {
        use netblast_spec::result::{CpuUsage, ThreadCpu};
        let c = CpuLoad { cpu: 1, user: 0.3, system: 0.6, irq: 0.0, softirq: 0.0, steal: 0.0, idle: 0.1 };
        let thread = |i: u32, busy: f64| ThreadCpu {
            name: format!("worker {i}"),
            cpu: Some(1),
            usage: CpuUsage { user_s: 0.0, system_s: busy, wall_s: 1.0 },
        };
        // 64 flows on 2 CPUs: 32 workers each (the busiest 4%), as a real run's verdict had them
        // one by one in 1 300 characters.
        let many = HostLoad {
            threads: (0..32).map(|i| thread(i, if i == 7 { 0.04 } else { 0.02 })).collect(),
            ..Default::default()
        };
        let said = who_ran(&many, &c);
        assert_eq!(said, " (netblast's 32 threads 66% of it in all, the busiest worker 7 4%)");
        let few = HostLoad { threads: vec![thread(0, 0.12), thread(1, 0.1)], ..Default::default() };
        assert_eq!(who_ran(&few, &c), " (netblast's worker 0 12%, worker 1 10% of it; another process took the rest)");
    }
}
