//! Every verdict of a run in words, with the numbers behind it and the fix where there is
//! one: each TCP way's limit ([`crate::diagnose`]), UDP loss split between the receivers'
//! queues and the path, an HTTP test's pool, server or rate, and each host's saturated CPUs
//! and dropping interfaces. The text and the HTML print these lines as they are.

use crate::diagnose::{cpu_words, saturated};
use crate::profile::{CloseMode, Way, Workload};
use crate::result::{HostLoad, HttpSummary, MsgTotals, RunResult};
use crate::units::{fmt_bytes, fmt_ns, fmt_per_s};

/// The verdicts beside the TCP ways' ([`crate::diagnose::tcp`], printed under each way):
/// UDP ways', HTTP's, then the hosts'.
pub fn beyond_tcp(r: &RunResult) -> Vec<String> {
    let mut v = udp(r);
    v.extend(cps(r));
    v.extend(cps_shortfall(r));
    v.extend(r.summary.http.as_ref().and_then(|h| http(r, h)));
    v.extend(hosts(r));
    v
}

/// A share in percent, one decimal below 10%.
fn pct(x: f64) -> String {
    if x < 0.1 {
        format!("{:.1}%", x * 100.0)
    } else {
        format!("{:.0}%", x * 100.0)
    }
}

/// The receiving side's host of a way.
fn receiver_load(r: &RunResult, way: Way) -> Option<&HostLoad> {
    match way {
        Way::Up => r.summary.load.server.as_ref(),
        Way::Down => r.summary.load.client.as_ref(),
    }
}

/// The local ports one source address has for one destination by default
/// (`net.ipv4.ip_local_port_range` 32768-60999).
pub const DEFAULT_PORTS: f64 = 28_232.0;

/// cps ways whose connections found no free local port: why (TIME_WAIT holds each port the
/// client closed first for 60 s), when at this rate the ports ran out, and the fixes.
pub fn cps(r: &RunResult) -> Vec<String> {
    let Workload::Cps(c) = &r.plan.profile.workload else { return Vec::new() };
    r.summary
        .ways
        .iter()
        .filter_map(|w| {
            let t: &MsgTotals = w.msgs.as_ref()?;
            let exhausted = t.conns.as_ref()?.port_exhausted;
            if exhausted == 0 {
                return None;
            }
            let tried = t.sent + t.lost.unwrap_or(0);
            let share = exhausted as f64 / tried.max(1) as f64;
            // The client's own range when its result carries it, else the kernel's default.
            let (ports, whose) = match &r.client.tcp {
                Some(d) => (
                    f64::from(d.port_count()),
                    format!("(net.ipv4.ip_local_port_range {}-{} on the client)", d.local_ports[0], d.local_ports[1]),
                ),
                None => (DEFAULT_PORTS, "by default".to_string()),
            };
            let count = if ports >= 1e3 { format!("about {:.0} k", ports / 1e3) } else { format!("{ports:.0}") };
            let why = match c.close {
                CloseMode::Fin => format!(
                    "each connection the client closes holds its port in TIME_WAIT for 60 s, and one \
                     source address has {count} ports per destination {whose}, so at {} \
                     connections they run out after about {}; use close = \"rst\" (no \
                     TIME_WAIT) or \"server\" (the server's), more source addresses (--bind), a \
                     wider net.ipv4.ip_local_port_range or net.ipv4.tcp_tw_reuse = 1",
                    fmt_per_s(t.sent_per_s),
                    match ports / t.sent_per_s.max(1.0) {
                        s if s < 1.0 => format!("{:.0} ms", s * 1e3),
                        s => format!("{s:.0} s"),
                    }
                ),
                CloseMode::Rst | CloseMode::Server => format!(
                    "the test's own connections leave no TIME_WAIT on the client (close = \"{}\"): \
                     other connections of this host hold the ports; use more source addresses \
                     (--bind) or a wider net.ipv4.ip_local_port_range",
                    c.close.name()
                ),
            };
            Some(format!(
                "cps: {exhausted} of {tried} connections ({}) found no free local port (EADDRNOTAVAIL): {why}",
                pct(share)
            ))
        })
        .collect()
}

/// The share of a cps rate below which the run did not reach what it asked.
const RATE_HELD: f64 = 0.95;

/// cps with `--rate` that fell short of it: the cause its figures show, first found of the
/// local ports running out (their own verdict, [`cps`]), failed connections, retransmitted
/// SYNs (the server's queues), and flows that could not keep their schedule (a flow opens one
/// connection at a time), with a saturated CPU where one was; without that evidence it says
/// so rather than guess.
pub fn cps_shortfall(r: &RunResult) -> Vec<String> {
    let Workload::Cps(c) = &r.plan.profile.workload else { return Vec::new() };
    let Some(asked) = c.rate.map(|x| x.per_second()) else { return Vec::new() };
    let mut out = Vec::new();
    for w in &r.summary.ways {
        let Some(t) = w.msgs.as_ref() else { continue };
        if t.sent_per_s >= RATE_HELD * asked {
            continue;
        }
        let conns = t.conns.unwrap_or_default();
        let tried = t.sent + t.lost.unwrap_or(0);
        let head = format!(
            "cps: {} of the {} asked ({}): ",
            fmt_per_s(t.sent_per_s),
            fmt_per_s(asked),
            pct(t.sent_per_s / asked)
        );
        let failed = conns.failed();
        let syn = conns.syn_retransmits.unwrap_or(0);
        let behind = conns.behind as f64 / tried.max(1) as f64;
        let cycle_ns = w.sender.seconds * f64::from(w.streams.max(1)) / tried.max(1) as f64 * 1e9;
        let busy = |load: Option<&HostLoad>| load.and_then(|l| saturated(l).into_iter().next()).map(cpu_words);
        // A connection whose SYNs went unanswered until its timeout fails as timed out: with SYNs
        // retransmitted and no other kind of failure, the timeouts are the same SYN loss.
        let syn_seen = syn as f64 > 0.001 * tried as f64;
        let only_timeouts = failed == conns.timed_out;
        let why = if conns.port_exhausted > 0 {
            "the local ports ran out (below)".to_string()
        } else if failed as f64 > 0.01 * tried as f64 && !(syn_seen && only_timeouts) {
            format!(
                "{failed} of {tried} connections failed ({} refused, {} timed out, {} reset, {} other): the server or the path",
                conns.refused, conns.timed_out, conns.reset, conns.other
            )
        } else if syn_seen {
            let gave_up = match conns.timed_out {
                0 => String::new(),
                n => format!(" ({n} of {tried} connections timed out waiting for an answer to theirs)"),
            };
            format!(
                "{syn} SYNs were retransmitted, each after a wait of 1 s or more{gave_up}: SYNs or their answers \
                 were dropped, by a full SYN or accept queue at the server (its backlog, net.core.somaxconn) or on \
                 the path"
            )
        } else if behind >= 0.5 {
            let flows = match w.streams {
                1 => "the one flow opens one connection at a time and was".to_string(),
                n => format!("each of the {n} flows opens one connection at a time; they were"),
            };
            let pace = format!(
                "{flows} behind the schedule for {} of the connections (a connection took {} from socket to \
                 close, on average)",
                pct(behind),
                fmt_ns(cycle_ns)
            );
            match (busy(r.summary.load.client.as_ref()), busy(r.summary.load.server.as_ref())) {
                (Some(cpu), _) => format!("{pace}, with the client's {cpu}: the client's CPU sets the rate"),
                (None, Some(cpu)) => format!("{pace}, with the server's {cpu}: the server's CPU sets the rate"),
                (None, None) => format!("{pace}, and no CPU saturated: more flows (-P) reach more"),
            }
        } else {
            format!(
                "not explained by the counts (no failure, no SYN retransmitted, the flows behind their \
                 schedule for {} of the connections)",
                pct(behind)
            )
        };
        out.push(format!("{head}{why}"));
    }
    out
}

/// UDP ways: how much was lost, how much of it the receiving sockets' full queues dropped (the
/// rest: the path's), and whether the senders held the rate asked.
pub fn udp(r: &RunResult) -> Vec<String> {
    let Workload::Msgrate(m) = &r.plan.profile.workload else { return Vec::new() };
    if m.protocol != crate::profile::Protocol::Udp {
        return Vec::new();
    }
    r.summary
        .ways
        .iter()
        .filter_map(|w| {
            let t: &MsgTotals = w.msgs.as_ref()?;
            let mut parts = Vec::new();
            let lost = t.lost.unwrap_or(0);
            if lost == 0 {
                parts.push(format!("no datagram lost of {}", t.sent));
            } else {
                // The kernel counts a drop per buffer: with GRO a buffer is a coalesced run of up
                // to `coalesced` datagrams, so the drops bound the queues' share from above.
                let drops = t.kernel_drops.unwrap_or(0);
                let coalesced = if m.gro { m.gro_coalesced() } else { 1 };
                let queue = drops.saturating_mul(coalesced).min(lost);
                let share = lost as f64 / t.sent.max(1) as f64;
                parts.push(format!("{lost} of {} datagrams lost ({})", t.sent, pct(share)));
                if queue > 0 {
                    let per = t.rcvbuf.map(|b| format!(" of {} each", fmt_bytes(b))).unwrap_or_default();
                    let which = if coalesced > 1 {
                        format!(
                            "up to {queue} of them (GRO: {drops} coalesced buffers of up to {coalesced} datagrams) \
                             dropped"
                        )
                    } else {
                        format!("{queue} of them dropped")
                    };
                    parts.push(format!(
                        "{which} by the receiving sockets' full queues{per}: the receivers did not keep up (raise \
                         --rcvbuf and net.core.rmem_max, or --receivers per-cpu)"
                    ));
                }
                if lost > queue {
                    let path = lost - queue;
                    let drops = receiver_load(r, w.way).map(drops_words).filter(|d| !d.is_empty());
                    parts.push(match drops {
                        Some(d) => format!("{path} lost before the sockets: {d}"),
                        None => format!("{path} lost before the sockets, on the path (no counter here saw them)"),
                    });
                }
            }
            if let Some(b) = m.bitrate {
                let wanted = b.bits_per_s() * w.streams.max(1) as f64 / 8.0 / m.msg_bytes.0.max(1) as f64;
                if t.sent_per_s < wanted * 0.95 {
                    let cpu =
                        if w.way == Way::Up { r.summary.load.client.as_ref() } else { r.summary.load.server.as_ref() };
                    let why = cpu
                        .and_then(|l| saturated(l).into_iter().next())
                        .map(|c| format!(": the sender's {}", cpu_words(c)))
                        .unwrap_or_default();
                    parts.push(format!(
                        "the senders sent {} of the {} asked{why}",
                        fmt_per_s(t.sent_per_s),
                        fmt_per_s(wanted)
                    ));
                } else {
                    parts.push(format!("the senders held the rate asked ({})", fmt_per_s(wanted)));
                }
            }
            let way = if w.way == Way::Up { "client → server" } else { "server → client" };
            Some(format!("UDP {way}: {}", parts.join("; ")))
        })
        .collect()
}

/// An HTTP test: first, when a share of its requests failed (a status outside the expected
/// set, or no response), that share and its causes, since failed answers are not throughput;
/// then, open loop, whether the pool kept up with the schedule and the server with the rate;
/// closed loop, what the lanes' latency allows (Little's law). Lanes are every connection of
/// the run (every test's, in a merged result) times its HTTP/2 streams.
pub fn http(r: &RunResult, h: &HttpSummary) -> Option<String> {
    let Workload::Http(w) = &r.plan.profile.workload else { return None };
    let conns = f64::from(h.connections.configured.max(1));
    let streams = f64::from(w.streams.max(1));
    let lanes = conns * streams;
    let lane_words = if streams > 1.0 {
        format!("{conns:.0} connections x {streams:.0} streams")
    } else {
        format!("{conns:.0} connections")
    };
    let mean_s = h.latency.mean_ns / 1e9;
    let cpu = r
        .summary
        .load
        .client
        .as_ref()
        .and_then(|l| saturated(l).into_iter().next())
        .map(|c| format!("; the client's {}", cpu_words(c)))
        .unwrap_or_default();
    let failures = http_failures(h, &w.expected());
    if h.completed == 0 {
        return Some(format!(
            "HTTP: no response completed of {} requests{}{cpu}",
            h.sent,
            failures.unwrap_or_default()
        ));
    }
    if h.succeeded == 0 {
        return Some(format!(
            "HTTP: every request failed{}: {} answered, none with an expected status, so nothing measured the \
             server's service{cpu}",
            failures.unwrap_or_default(),
            fmt_per_s(h.responses_per_s)
        ));
    }
    let lead = failures.map(|f| format!("HTTP: requests failed{f}; of what succeeded: ")).unwrap_or_default();
    let head = if lead.is_empty() { "HTTP: " } else { "" };
    let ok_per_s = h.succeeded as f64 / h.seconds.max(1e-9);
    if let Some(target) = h.target_rate {
        let late = h.late as f64 / h.sent.max(1) as f64;
        // Lanes the rate needs in flight at the measured latency (Little's law).
        let needed = (target * mean_s).ceil();
        if late >= 0.01 {
            return Some(format!(
                "{lead}{head}connection pool exhausted: {} of {} requests ({}) waited for a free connection; at {} \
                 and a mean latency of {}, {needed:.0} requests are in flight, {lanes:.0} lanes open ({lane_words}; \
                 raise --connections){cpu}",
                h.late,
                h.sent,
                pct(late),
                fmt_per_s(target),
                fmt_ns(h.latency.mean_ns)
            ));
        }
        if h.responses_per_s < target * 0.95 {
            return Some(format!(
                "{lead}{head}the server is slower than the offered rate: {} answered of {} offered (p99 {}){cpu}",
                fmt_per_s(h.responses_per_s),
                fmt_per_s(target),
                fmt_ns(h.latency.p99_ns as f64)
            ));
        }
        return Some(format!(
            "{lead}{head}the offered {} held with {} late; p99 {}{cpu}",
            fmt_per_s(target),
            pct(late),
            fmt_ns(h.latency.p99_ns as f64)
        ));
    }
    let bound = if mean_s > 0.0 { lanes / mean_s } else { 0.0 };
    let limit = if cpu.is_empty() {
        "the time per response (the server's, and the path's) is the limit; more lanes ask more of it".to_string()
    } else {
        format!("the client's CPU is the limit, not the server{cpu}")
    };
    let ok = if lead.is_empty() { String::new() } else { format!(" ({} succeeded)", fmt_per_s(ok_per_s)) };
    Some(format!(
        "{lead}{}closed loop: {lane_words} each waiting a mean {} per response allow {}, and {} were answered{ok}: \
         {limit}",
        if lead.is_empty() { "HTTP " } else { "" },
        fmt_ns(h.latency.mean_ns),
        fmt_per_s(bound),
        fmt_per_s(h.responses_per_s)
    ))
}

/// The requests that failed, when they are 1% of those sent or more: ` (N of M, X%: [503] n,
/// timeout n, ...)`, the unexpected statuses first, then the failures without a response.
fn http_failures(h: &HttpSummary, expected: &crate::profile::StatusSet) -> Option<String> {
    let failed = h.sent.saturating_sub(h.succeeded);
    let share = failed as f64 / h.sent.max(1) as f64;
    if failed == 0 || share < 0.01 {
        return None;
    }
    let mut causes: Vec<String> = h
        .status_codes
        .iter()
        .filter(|(code, _)| code.parse::<u16>().is_ok_and(|c| !expected.contains(c)))
        .map(|(code, n)| format!("[{code}] {n}"))
        .collect();
    causes.extend(h.errors.iter().map(|e| format!("{} {}", e.kind, e.count)));
    Some(format!(
        " ({failed} of {}, {}: {}; expected status {expected})",
        h.sent,
        pct(share),
        if causes.is_empty() { "no response".to_string() } else { causes.join(", ") }
    ))
}

/// Each host's saturated CPUs and dropping interfaces; one host when client and server share
/// it (the same host name, both read).
pub fn hosts(r: &RunResult) -> Vec<String> {
    let same = r.server.as_ref().is_some_and(|s| s.hostname == r.client.hostname && !s.hostname.is_empty());
    let sides = [
        (if same { "this host (client and server)" } else { "the client" }, r.summary.load.client.as_ref()),
        ("the server", if same { None } else { r.summary.load.server.as_ref() }),
    ];
    let mut v = Vec::new();
    for (who, load) in sides {
        let Some(l) = load else { continue };
        let busy = saturated(l);
        if !busy.is_empty() {
            let cpus: Vec<String> = busy.iter().map(|c| cpu_words(c)).collect();
            v.push(format!("CPU bound on {who}: {}", cpus.join("; ")));
        }
        let d = drops_words(l);
        if !d.is_empty() {
            v.push(format!("drops on {who}: {d}"));
        }
    }
    v
}

/// What a host's interfaces and input backlogs dropped, in words (empty: nothing).
fn drops_words(l: &HostLoad) -> String {
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
    fn port_exhaustion_is_explained_with_its_fix() {
        let (mut p, _) = crate::profile::Profile::load("cps").unwrap();
        // The client closes first: its ports wait in TIME_WAIT (the shipped profile has the
        // server close first).
        if let Workload::Cps(c) = &mut p.workload {
            c.close = CloseMode::Fin;
        }
        use crate::merge::tests::{build, Cell};
        let one = [(0, [(0, Cell { bytes: 1, lat: vec![1000] })].into_iter().collect())].into_iter().collect();
        let mut r = build(&one, 0, "a");
        let conns = crate::result::ConnCounts { port_exhausted: 500, ..Default::default() };
        let msgs =
            MsgTotals { sent: 9500, sent_per_s: 1000.0, lost: Some(500), conns: Some(conns), ..Default::default() };
        r.summary.ways.truncate(1);
        r.summary.ways[0].msgs = Some(msgs);
        r.plan.profile = p.clone();
        let v = cps(&r);
        assert_eq!(v.len(), 1);
        assert!(v[0].starts_with("cps: 500 of 10000 connections (5.0%) found no free local port"), "{}", v[0]);
        assert!(
            v[0].contains("TIME_WAIT for 60 s")
                && v[0].contains("at 1.00 k/s connections they run out after about 28 s"),
            "{}",
            v[0]
        );
        assert!(beyond_tcp(&r).contains(&v[0]));
        if let Workload::Cps(c) = &mut p.workload {
            c.close = CloseMode::Rst;
        }
        // The client's own port range, when its result carries it.
        r.client.tcp = Some(crate::result::TcpDefaults {
            congestion_control: "cubic".into(),
            local_ports: [40000, 40015],
            tw_reuse: 0,
        });
        let v = cps(&r);
        assert!(
            v[0].contains("16 ports per destination (net.ipv4.ip_local_port_range 40000-40015 on the client)")
                && v[0].contains("they run out after about 16 ms"),
            "{}",
            v[0]
        );
        r.client.tcp = None;
        r.plan.profile = p.clone();
        let v = cps(&r);
        assert!(v[0].contains("other connections of this host hold the ports") && v[0].contains("close = \"rst\""));
        if let Workload::Cps(c) = &mut p.workload {
            c.close = CloseMode::Server;
        }
        r.plan.profile = p;
        let v = cps(&r);
        assert!(v[0].contains("no TIME_WAIT on the client (close = \"server\")"), "{}", v[0]);
        r.summary.ways[0].msgs.as_mut().unwrap().conns = Some(Default::default());
        assert!(cps(&r).is_empty(), "no exhaustion, no verdict");
    }

    #[test]
    fn a_cps_rate_not_reached_names_the_cause_its_counts_show() {
        let (mut p, _) = crate::profile::Profile::load("cps").unwrap();
        if let Workload::Cps(c) = &mut p.workload {
            c.rate = Some("20k".parse().unwrap());
        }
        use crate::merge::tests::{build, Cell};
        let one = [(0, [(0, Cell { bytes: 1, lat: vec![1000] })].into_iter().collect())].into_iter().collect();
        let mut r = build(&one, 0, "a");
        r.summary.ways.truncate(1);
        r.plan.profile = p;
        let with = |r: &mut RunResult, per_s: f64, conns: crate::result::ConnCounts| {
            let lost = conns.failed();
            r.summary.ways[0].msgs = Some(MsgTotals {
                sent: 10_000,
                sent_per_s: per_s,
                lost: Some(lost),
                conns: Some(conns),
                ..Default::default()
            });
            cps_shortfall(r)
        };
        let c = |f: fn(&mut crate::result::ConnCounts)| {
            let mut c = crate::result::ConnCounts { syn_retransmits: Some(0), ..Default::default() };
            f(&mut c);
            c
        };
        // Held (within 5%): nothing said.
        assert!(with(&mut r, 19_500.0, c(|_| {})).is_empty());
        let v = with(&mut r, 5_600.0, c(|x| x.refused = 400));
        assert!(
            v[0].starts_with("cps: 5.60 k/s of the 20.0 k/s asked (28%): 400 of 10400 connections failed (400 refused"),
            "{}",
            v[0]
        );
        let v = with(&mut r, 5_600.0, c(|x| x.syn_retransmits = Some(40)));
        assert!(v[0].contains("40 SYNs were retransmitted, each after a wait of 1 s or more"), "{}", v[0]);
        // Connections timed out with their SYNs retransmitted (found by the truth check: 1 of 88
        // timed out, 1.1%, named "the server or the path"): the same SYN loss, its timeouts said.
        let v = with(&mut r, 5_600.0, c(|x| (x.timed_out, x.syn_retransmits) = (200, Some(600))));
        assert!(
            v[0].contains("600 SYNs were retransmitted") && v[0].contains("(200 of 10200 connections timed out"),
            "{}",
            v[0]
        );
        // Refusals beside them are not SYN loss: the failures are named.
        let v = with(&mut r, 5_600.0, c(|x| (x.timed_out, x.refused, x.syn_retransmits) = (100, 100, Some(600))));
        assert!(v[0].contains("200 of 10200 connections failed (100 refused, 100 timed out"), "{}", v[0]);
        let v = with(&mut r, 5_600.0, c(|x| x.port_exhausted = 1));
        assert!(v[0].contains("the local ports ran out"), "{}", v[0]);
        // Behind, with the client's CPU saturated: the CPU, named.
        r.summary.load.client = Some(HostLoad {
            wall_s: 1.0,
            cpus: vec![CpuLoad { cpu: 0, user: 0.2, system: 0.79, idle: 0.01, ..Default::default() }],
            ..Default::default()
        });
        let v = with(&mut r, 5_600.0, c(|x| x.behind = 9_000));
        assert!(v[0].contains("behind the schedule for 90% of the connections"), "{}", v[0]);
        assert!(
            v[0].contains("with the client's CPU 0 at 99% busy") && v[0].contains("the client's CPU sets the rate"),
            "{}",
            v[0]
        );
        // Neither failures nor SYNs nor a flow behind: no cause is claimed.
        let v = with(&mut r, 5_600.0, c(|x| x.behind = 10));
        assert!(v[0].contains("not explained by the counts"), "{}", v[0]);
    }

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
        };
        let busy = saturated(&l);
        assert_eq!(busy.len(), 1);
        assert_eq!(cpu_words(busy[0]), "CPU 1 at 99% busy, 64% in softirq");
        let d = drops_words(&l);
        assert!(d.starts_with("eth0 12 received packets dropped; 3 packets dropped at full CPU"), "{d}");
        assert_eq!(drops_words(&HostLoad::default()), "");
    }
}
