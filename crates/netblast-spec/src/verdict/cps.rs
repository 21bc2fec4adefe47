//! cps' verdicts: local ports running out, and a rate asked and not reached with its cause.

use super::pct;
use crate::profile::{CloseMode, Way, Workload};
use crate::result::{MsgTotals, RunResult};
use crate::units::{fmt_ns, fmt_per_s};

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
        let busy = |way: Way| crate::diagnose::sender_cpu(r, way);
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
            match (busy(Way::Up), busy(Way::Down)) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{CpuLoad, HostLoad};

    #[test]
    fn port_exhaustion_is_explained_with_its_fix() {
        let (mut p, _) = crate::profile::Profile::load("cps").unwrap();
        // The client closes first: its ports wait in TIME_WAIT (the shipped profile has the
        // server close first).
        if let Workload::Cps(c) = &mut p.workload {
            c.close = CloseMode::Fin;
        }
        use crate::merge::tests::{Cell, build};
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
        use crate::merge::tests::{Cell, build};
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
}
