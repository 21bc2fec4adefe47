//! Every verdict of a run in words, with the numbers behind it and the fix where there is
//! one, beside each TCP way's limit ([`crate::limits`]): a kind's own verdicts
//! (its `kinds` file: UDP loss split between the receivers' queues and the path,
//! cps' ports and rate, hold's connections, an HTTP test's pool, server or rate), the latency
//! probes' and each host's saturated CPUs and dropping interfaces. The text and the HTML
//! print these lines as they are; a campaign groups runs by their [`causes`].
//!
//! The spec holds what was measured and decided; the sentences that say it are here.

use crate::lines::{cpu_words, drops_words};
use netblast_spec::diagnose::{is_queue, rtt_rise, saturated};
use netblast_spec::result::RunResult;
use netblast_spec::units::fmt_ns;

/// Every verdict beside the TCP ways' (which are printed under each way): the kind's own, then
/// the latency probes', then each host's.
pub fn all(r: &RunResult) -> Vec<String> {
    let mut v = of_kind(r);
    v.extend(latency_probe(r));
    v.extend(hosts(r));
    v
}

/// The kind's own verdicts, which come before the latency probes' and the hosts': UDP ways'
/// loss (msgrate), local ports running out and a rate asked and not reached (cps), fewer
/// connections held than asked and whose limit that was (hold), an HTTP test's pool, server or
/// rate; none for bulk and rr, whose TCP ways have theirs under each way.
pub fn of_kind(r: &RunResult) -> Vec<String> {
    crate::kinds::of(r).verdicts(r)
}

/// What limited a run, each cause short enough to group a campaign's cells by: each TCP way's
/// limit, each host line's head (`CPU bound on the client`), the head of each of the kind's
/// verdicts.
pub fn causes(r: &RunResult) -> Vec<String> {
    let ways = netblast_spec::diagnose::tcp(r);
    let several = ways.len() > 1;
    let mut v: Vec<String> = ways
        .iter()
        .map(|d| {
            let limit = crate::limits::name(d.limit);
            if several { format!("{}: {limit}", d.way.name()) } else { limit.to_string() }
        })
        .collect();
    v.extend(of_kind(r).iter().chain(hosts(r).iter()).map(|l| head(l)));
    v
}

/// A verdict's head: up to its first colon, at most 80 characters.
fn head(line: &str) -> String {
    let h = line.split(':').next().unwrap_or(line).trim();
    if h.chars().count() > 80 { format!("{}…", h.chars().take(80).collect::<String>()) } else { h.to_string() }
}

/// Each host's saturated CPUs and dropping interfaces; one host when client and server share
/// it (the same host name, both read). A saturated CPU is named with the test's threads that
/// ran on it; where every thread of the test on a host was pinned, a saturated CPU none of them
/// ran on is another process's and said so, not a limit of this test.
pub fn hosts(r: &RunResult) -> Vec<String> {
    let same = r.server.as_ref().is_some_and(|s| s.hostname == r.client.hostname && !s.hostname.is_empty());
    // The CPUs this test's threads were pinned to on each host; `None`: some were not pinned.
    let client = Some(netblast_spec::diagnose::client_cpus(r)).filter(|v| !v.is_empty());
    let server = Some(netblast_spec::diagnose::server_cpus(r)).filter(|v| !v.is_empty());
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
                ours.iter().map(|c| format!("{}{}", cpu_words(c), crate::lines::who_ran(l, c))).collect();
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

/// The verdict on a run's latency probes; `None` without probes or without both phases.
pub fn latency_probe(r: &RunResult) -> Option<String> {
    let p = r.latency_probe.as_deref()?;
    let (idle, added) = (p.idle.as_ref()?, p.added_p50_ns?);
    let idle_p50 = idle.p50_ns as f64;
    let sign = if added < 0 { "-" } else { "+" };
    let by = format!("{sign}{}", fmt_ns(added.unsigned_abs() as f64));
    if !is_queue(idle_p50, idle_p50 + added as f64) {
        return Some(format!(
            "latency under load: the load added little, {by} at p50 over an idle {}: no queue of note on the probe's path",
            fmt_ns(idle_p50)
        ));
    }
    // The load's own flows: their least RTT against their typical one.
    let rose = r.summary.ways.iter().filter_map(rtt_rise).find(|(lo, ty, _)| is_queue(*lo, *ty));
    let flat = r.summary.ways.iter().any(|w| w.rtt.is_some());
    let busy: Vec<String> = [("the client", &r.summary.load.client), ("the server", &r.summary.load.server)]
        .into_iter()
        .filter_map(|(who, l)| {
            let c = saturated(l.as_ref()?).into_iter().next()?;
            Some(format!("{} on {who}", cpu_words(c)))
        })
        .collect();
    Some(match (rose, busy.first()) {
        (Some((least, typical, _)), _) => format!(
            "latency under load: {by} at p50: a queue on the path, the load's own RTT rose with it from {} to {}",
            fmt_ns(least),
            fmt_ns(typical)
        ),
        (None, Some(cpu)) => format!(
            "latency under load: {by} at p50 while {cpu}{}: the hosts delayed the probe, not the path",
            if flat { " and the load's RTT stayed flat" } else { "" }
        ),
        (None, None) if flat => format!(
            "latency under load: {by} at p50, the load's RTT flat and no CPU saturated: not explained by the counts"
        ),
        (None, None) => format!(
            "latency under load: {by} at p50, no CPU saturated: a queue on the probe's path as far as it tells (this \
             kind's load has no kernel RTT to confirm it)"
        ),
    })
}

/// A stored real result (`testdata/real/<name>.json`) with one way and none of its host load,
/// errors, streams or client TCP settings: what a verdict's unit test starts from.
#[cfg(test)]
pub(crate) fn stored(name: &str) -> RunResult {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/real").join(format!("{name}.json"));
    let mut r = netblast_spec::upgrade::read_result(&std::fs::read_to_string(&path).unwrap()).unwrap();
    r.summary.load = Default::default();
    r.summary.ways.truncate(1);
    r.errors.clear();
    r.streams.clear();
    r.client.tcp = None;
    r.plan.client_cpus = vec![0];
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use netblast_spec::result::{CpuLoad, HostLoad, InterfaceDrops};

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
