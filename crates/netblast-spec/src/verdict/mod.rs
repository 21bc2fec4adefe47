//! Every verdict of a run in words, with the numbers behind it and the fix where there is
//! one: each TCP way's limit ([`crate::diagnose`]), UDP loss split between the receivers'
//! queues and the path, an HTTP test's pool, server or rate, and each host's saturated CPUs
//! and dropping interfaces. The text and the HTML print these lines as they are.

//!
//! A kind's own verdicts are in its file here (`cps.rs`, `udp.rs` for msgrate over UDP,
//! `http.rs`), gathered by [`of_kind`]; the report asks for them, then for the latency probes'
//! ([`latency_probe`]) and [`hosts`] after them.

mod cps;
mod hold;
mod http;
mod probe;
mod udp;

pub use cps::{DEFAULT_PORTS, cps, cps_shortfall};
pub use hold::{held, hold};
pub use http::http;
pub use probe::latency_probe;
pub use udp::udp;

use crate::diagnose::{cpu_words, saturated};
use crate::profile::{Kind, Way};
use crate::result::{HostLoad, RunResult};

/// The kind's own verdicts, which come before the latency probes' and the hosts': UDP ways'
/// loss (msgrate), local ports running out and a rate asked and not reached (cps), fewer
/// connections held than asked and whose limit that was (hold), an HTTP test's pool, server or
/// rate; none for bulk and rr, whose TCP ways have [`crate::diagnose`].
pub fn of_kind(r: &RunResult) -> Vec<String> {
    match r.plan.profile.kind() {
        Kind::Msgrate => udp(r),
        Kind::Cps => {
            let mut v = cps(r);
            v.extend(cps_shortfall(r));
            v
        }
        Kind::Hold => hold(r),
        Kind::Http => r.summary.http.as_ref().and_then(|h| http(r, h)).into_iter().collect(),
        Kind::Bulk | Kind::Rr => Vec::new(),
    }
}

/// A share in percent, one decimal below 10%.
pub(crate) fn pct(x: f64) -> String {
    if x < 0.1 { format!("{:.1}%", x * 100.0) } else { format!("{:.0}%", x * 100.0) }
}

/// The receiving side's host of a way.
pub(crate) fn receiver_load(r: &RunResult, way: Way) -> Option<&HostLoad> {
    match way {
        Way::Up => r.summary.load.server.as_ref(),
        Way::Down => r.summary.load.client.as_ref(),
    }
}

/// Each host's saturated CPUs and dropping interfaces; one host when client and server share
/// it (the same host name, both read). A saturated CPU is named with the test's threads that
/// ran on it; where every thread of the test on a host was pinned, a saturated CPU none of them
/// ran on is another process's and said so, not a limit of this test.
pub fn hosts(r: &RunResult) -> Vec<String> {
    let same = r.server.as_ref().is_some_and(|s| s.hostname == r.client.hostname && !s.hostname.is_empty());
    // The CPUs this test's threads were pinned to on each host; `None`: some were not pinned.
    let client = Some(crate::diagnose::client_cpus(r)).filter(|v| !v.is_empty());
    let server = Some(crate::diagnose::server_cpus(r)).filter(|v| !v.is_empty());
    let here = match (&client, &server) {
        (Some(c), Some(s)) if same => Some(c.iter().chain(s).copied().collect::<Vec<u32>>()),
        (Some(c), None) if same && r.summary.streams.is_empty() => Some(c.clone()),
        (_, _) if same => None,
        (c, _) => c.clone(),
    };
    let sides = [
        (if same { "this host (client and server)" } else { "the client" }, r.summary.load.client.as_ref(), here),
        ("the server", if same { None } else { r.summary.load.server.as_ref() }, server),
    ];
    let mut v = Vec::new();
    for (who, load, mine) in sides {
        let Some(l) = load else { continue };
        let (ours, others): (Vec<_>, Vec<_>) =
            saturated(l).into_iter().partition(|c| mine.as_ref().is_none_or(|m| m.contains(&c.cpu)));
        if !ours.is_empty() {
            let cpus: Vec<String> =
                ours.iter().map(|c| format!("{}{}", cpu_words(c), crate::diagnose::who_ran(l, c))).collect();
            v.push(format!("CPU bound on {who}: {}", cpus.join("; ")));
        }
        if !others.is_empty() {
            let cpus: Vec<String> = others.iter().map(cpu_words).collect();
            v.push(format!(
                "busy on {who}, but none of this test's threads ran there (another process): {}",
                cpus.join("; ")
            ));
        }
        let d = drops_words(l);
        if !d.is_empty() {
            v.push(format!("drops on {who}: {d}"));
        }
    }
    v
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{CpuLoad, InterfaceDrops};

    #[test]
    fn drops_and_saturated_cpus_are_named() {
        let l = HostLoad {
            wall_s: 1.0,
            cpus: vec![
                CpuLoad { cpu: 0, user: 0.1, system: 0.1, idle: 0.8, ..Default::default() },
                CpuLoad { cpu: 1, user: 0.05, system: 0.3, softirq: 0.64, idle: 0.01, ..Default::default() },
            ],
            interfaces: vec![InterfaceDrops { name: "eth0".into(), rx_dropped: 12, ..Default::default() }],
            backlog_drops: 3,
            threads: Vec::new(),
        };
        let busy = saturated(&l);
        assert_eq!(busy.len(), 1);
        assert_eq!(cpu_words(busy[0]), "CPU 1 at 99% busy, 64% in softirq");
        let d = drops_words(&l);
        assert!(d.starts_with("eth0 12 received packets dropped; 3 packets dropped at full CPU"), "{d}");
        assert_eq!(drops_words(&HostLoad::default()), "");
    }
}
