//! A connection-rate test's report: per interval connections per second, those that failed
//! and connect latency; its totals: failures by cause, how they closed, the ports they need,
//! connect latency; and its failures table.

use crate::lines::{iv_span, lat_cols, pct, pcts, span};
use netblast_spec::profile::{CloseMode, DEFAULT_PORTS, Profile, Way, Workload};
use netblast_spec::result::{Interval, MsgTotals, RunResult, StreamInfo, WaySummary};
use netblast_spec::units::{fmt_ns, fmt_per_s, known};
use std::fmt::Write;

/// cps' part of the report: connections per second, their failures named and tabled.
pub(crate) struct Report;

impl super::KindReport for Report {
    fn interval_header(&self, profile: &Profile) -> String {
        header(profile).to_string()
    }
    fn interval(&self, iv: &Interval, streams: &[StreamInfo], profile: &Profile) -> String {
        interval(iv, streams, profile)
    }
    fn summary(&self, s: &mut String, r: &RunResult) {
        summary(s, r)
    }
    fn html_tables(&self, out: &mut String, r: &RunResult) {
        failures_table(out, r)
    }
    fn verdicts(&self, r: &RunResult) -> Vec<String> {
        let mut v = cps_ports(r);
        v.extend(cps_shortfall(r));
        v
    }

    fn plots(&self, r: &RunResult, _compact: bool) -> Vec<crate::chart::Plot> {
        super::msg::plots(r, "established")
    }
}

/// The column header of cps' interval lines (with TLS the latency is the handshake's).
pub(crate) fn header(profile: &Profile) -> &'static str {
    if profile.workload.cps().is_some_and(|c| c.tls) {
        "[ ID] Interval           Conns/s       Failed  Hshake p50   p99        p99.9      max\n"
    } else {
        "[ ID] Interval           Conns/s       Failed  Connect p50  p99        p99.9      max\n"
    }
}

/// One interval of cps: connections per second, those that failed, connect latency.
pub(crate) fn interval(iv: &Interval, streams: &[StreamInfo], profile: &Profile) -> String {
    let per = super::msg::per_interval(iv);
    super::msg::rows(iv, streams, |r| {
        format!(
            "[{}] {}  {:>12}  {:>6}  {}\n",
            r.label,
            iv_span(iv, profile),
            per(r.sent()),
            r.msgs.and_then(|m| m.failed).unwrap_or(0),
            r.latency.map(lat_cols).unwrap_or_default()
        )
    })
}

/// A cps test's totals, each way's.
pub(crate) fn summary(s: &mut String, r: &RunResult) {
    for w in &r.summary.ways {
        if let Some(m) = w.msgs {
            way_summary(s, w, &m, r);
        }
    }
}

/// A cps way's totals: connections completed and their rate, failures by cause, SYN
/// retransmissions, connect latency, what the server served.
fn way_summary(s: &mut String, w: &WaySummary, m: &netblast_spec::result::MsgTotals, r: &RunResult) {
    let Workload::Cps(c) = &r.plan.profile.workload else { return };
    let conns = m.conns.unwrap_or_default();
    let exchange = if c.agent {
        format!("{}-byte request, {}-byte response", c.req_bytes.bytes(), c.resp_bytes.bytes())
    } else {
        agentless_words(c)
    };
    let _ = writeln!(
        s,
        "[SUM] {}  {} connections completed, {} ({} flow{}, {exchange}, {})",
        span(0.0, w.sender.seconds),
        m.sent,
        fmt_per_s(m.sent_per_s),
        w.streams,
        if w.streams == 1 { "" } else { "s" },
        close_words(c.close),
    );
    if !c.agent {
        agentless_lines(s, &conns);
    }
    if c.close == netblast_spec::profile::CloseMode::Fin {
        // What the client's ports sustain: each holds TIME_WAIT for 60 s per destination.
        let ports = r.client.tcp.as_ref().map(|d| f64::from(d.port_count()));
        let (ports, whose) = match (ports, &r.client.tcp) {
            (Some(p), Some(d)) => {
                (p, format!("net.ipv4.ip_local_port_range {}-{}", d.local_ports[0], d.local_ports[1]))
            }
            _ => (DEFAULT_PORTS, "the kernel's default range".to_string()),
        };
        let _ = writeln!(
            s,
            "      the client's ports sustain about {} per server address and port ({ports:.0} ports, {whose}, \
             each in TIME_WAIT for 60 s; without net.ipv4.tcp_tw_reuse, which loopback has)",
            fmt_per_s(ports / 60.0)
        );
    }
    if let Some(rate) = c.rate {
        let _ = writeln!(s, "      asked for {} in all", fmt_per_s(rate.per_second()));
    }
    if let (Some(served), Some(rv)) = (m.received, w.receiver) {
        let _ = writeln!(s, "      the server served {served} connections over {:.2} s", rv.seconds);
    }
    let failed = m.lost.unwrap_or(0);
    if failed > 0 {
        let causes = causes_words(&conns, &format!("timed out ({:?})", c.timeout()), "reset");
        let pct = failed as f64 * 100.0 / (failed + m.sent).max(1) as f64;
        let _ = writeln!(s, "      {failed} connections failed ({pct:.2}% of attempts): {causes}");
    } else {
        let _ = writeln!(s, "      no connection failed");
    }
    let _ = writeln!(
        s,
        "      {} SYN retransmissions (each adds 1 s or more to its connect time)",
        conns.syn_retransmits.map(|n| n.to_string()).unwrap_or_else(|| "unknown (--probe off):".into())
    );
    if let Some(l) = &w.latency {
        let what = if c.tls {
            "Handshake latency (connect() call to the TLS handshake's end, client clock)"
        } else {
            "Connect latency (connect() call to established, client clock)"
        };
        let _ = writeln!(s, "{what}: {}", pcts(l));
    }
    if let Some(k) = &w.kernel_rtt {
        let _ = writeln!(
            s,
            "Kernel RTT of the connections (eBPF, every sample after establishment, {} samples): {}",
            k.count,
            pcts(k)
        );
        let _ = writeln!(
            s,
            "      {} segments retransmitted after establishment (per interval in the JSON)",
            known(w.retransmits)
        );
    }
}

/// The causes failed connections were counted under, each with its count, those with none left
/// out (cps', hold's): `timed_out` and `reset` are the kind's words for those two.
pub(crate) fn causes_words(k: &netblast_spec::result::ConnCounts, timed_out: &str, reset: &str) -> String {
    [
        ("no free local port (EADDRNOTAVAIL)", k.port_exhausted),
        ("refused", k.refused),
        (timed_out, k.timed_out),
        (reset, k.reset),
        ("other errors", k.other),
    ]
    .iter()
    .filter(|(_, n)| *n > 0)
    .map(|(what, n)| format!("{n} {what}"))
    .collect::<Vec<_>>()
    .join(", ")
}

/// What each connection to a server with no agent carries, in words.
fn agentless_words(c: &netblast_spec::profile::CpsSection) -> String {
    let mut parts = vec!["no agent".to_string()];
    if c.tls {
        parts.push(format!(
            "{} TLS handshakes{}",
            if c.resume { "resumed" } else { "full" },
            c.tls_version.map(|v| format!(" ({})", v.name())).unwrap_or_default()
        ));
    }
    if let Ok(sent) = c.send_bytes() {
        if !sent.is_empty() {
            parts.push(format!("{} bytes sent", sent.len()));
        }
    }
    parts.push(
        match c.read_mode() {
            netblast_spec::profile::ReadMode::None => "nothing read",
            netblast_spec::profile::ReadMode::First => "the answer's first bytes read",
            netblast_spec::profile::ReadMode::All => "read until the server closed",
        }
        .to_string(),
    );
    parts.join(", ")
}

/// What a test with no agent measured and what not, what the server answered, how the TLS
/// handshakes went.
fn agentless_lines(s: &mut String, conns: &netblast_spec::result::ConnCounts) {
    let _ = writeln!(
        s,
        "      measured by the client alone (no netblast on the server): connections, failures and latency as \
         the client saw them; no server-side count, CPU or kernel figures (set them against the server's \
         own counters, e.g. nginx stub_status accepts)"
    );
    if let Some(a) = conns.answers {
        let mut what = Vec::new();
        if a.http > 0 {
            let status = if a.http_status > 0 { format!(" (status {})", a.http_status) } else { String::new() };
            what.push(format!("{} an HTTP response{status}", a.http));
        }
        if a.banner > 0 {
            what.push(format!("{} other bytes first (a banner or greeting)", a.banner));
        }
        if a.nothing > 0 {
            what.push(format!("{} nothing read", a.nothing));
        }
        let _ = writeln!(s, "      the server answered: {}; {} bytes read in all", what.join(", "), a.bytes);
    }
    if let Some(t) = conns.tls {
        let _ = writeln!(
            s,
            "      TLS: {} full handshakes, {} resumed; {}, {}",
            t.full,
            t.resumed,
            t.version_name(),
            t.cipher_name()
        );
    }
}

/// How a cps connection ends, in words: who closes first and whose port waits in TIME_WAIT.
pub(crate) fn close_words(c: netblast_spec::profile::CloseMode) -> &'static str {
    match c {
        netblast_spec::profile::CloseMode::Fin => "the client closes first: its port waits in TIME_WAIT",
        netblast_spec::profile::CloseMode::Rst => "closed by RST: no TIME_WAIT",
        netblast_spec::profile::CloseMode::Server => "the server closes first: the TIME_WAIT is the server's",
    }
}

/// cps: the connections that failed, by cause, and SYN retransmissions.
pub(crate) fn failures_table(out: &mut String, r: &RunResult) {
    let Workload::Cps(c) = &r.plan.profile.workload else { return };
    let Some(m) = r.summary.ways.iter().find_map(|w| w.msgs.as_ref()) else { return };
    let k = m.conns.unwrap_or_default();
    let _ = write!(
        out,
        "<h2>Connections</h2><table id=\"connections\"><tr><th class=\"l\">established</th><td>{}</td></tr>\
         <tr><th class=\"l\">failed</th><td>{}</td></tr>\
         <tr><th class=\"l\">&nbsp; no free local port (EADDRNOTAVAIL)</th><td>{}</td></tr>\
         <tr><th class=\"l\">&nbsp; refused</th><td>{}</td></tr>\
         <tr><th class=\"l\">&nbsp; timed out ({:?})</th><td>{}</td></tr>\
         <tr><th class=\"l\">&nbsp; reset</th><td>{}</td></tr>\
         <tr><th class=\"l\">&nbsp; other errors</th><td>{}</td></tr>\
         <tr><th class=\"l\">SYNs retransmitted</th><td>{}</td></tr></table>",
        m.sent,
        m.lost.unwrap_or(0),
        k.port_exhausted,
        k.refused,
        c.timeout(),
        k.timed_out,
        k.reset,
        k.other,
        k.syn_retransmits.map(|n| n.to_string()).unwrap_or_else(|| "not read (--probe off)".into()),
    );
    out.push('\n');
}

/// cps ways whose connections found no free local port: why (TIME_WAIT holds each port the
/// client closed first for 60 s), when at this rate the ports ran out, and the fixes.
pub(crate) fn cps_ports(r: &RunResult) -> Vec<String> {
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
/// local ports running out (their own verdict, [`cps_ports`]), failed connections, retransmitted
/// SYNs (the server's queues), and flows that could not keep their schedule (a flow opens one
/// connection at a time), with a saturated CPU where one was; without that evidence it says
/// so rather than guess.
pub(crate) fn cps_shortfall(r: &RunResult) -> Vec<String> {
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
        let busy = |way: Way| crate::lines::sender_cpu(r, way);
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
    use netblast_spec::result::{CpuLoad, HostLoad};

    #[test]
    fn port_exhaustion_is_explained_with_its_fix() {
        let (mut p, _) = Profile::load("cps").unwrap();
        // The client closes first: its ports wait in TIME_WAIT (the shipped profile has the
        // server close first).
        if let Workload::Cps(c) = &mut p.workload {
            c.close = CloseMode::Fin;
        }
        let mut r = crate::verdict::stored("cps");
        let conns = netblast_spec::result::ConnCounts { port_exhausted: 500, ..Default::default() };
        let msgs =
            MsgTotals { sent: 9500, sent_per_s: 1000.0, lost: Some(500), conns: Some(conns), ..Default::default() };
        r.summary.ways.truncate(1);
        r.summary.ways[0].msgs = Some(msgs);
        r.plan.profile = p.clone();
        let v = cps_ports(&r);
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
        r.client.tcp = Some(netblast_spec::result::TcpDefaults {
            congestion_control: "cubic".into(),
            local_ports: [40000, 40015],
            tw_reuse: 0,
        });
        let v = cps_ports(&r);
        assert!(
            v[0].contains("16 ports per destination (net.ipv4.ip_local_port_range 40000-40015 on the client)")
                && v[0].contains("they run out after about 16 ms"),
            "{}",
            v[0]
        );
        r.client.tcp = None;
        r.plan.profile = p.clone();
        let v = cps_ports(&r);
        assert!(v[0].contains("other connections of this host hold the ports") && v[0].contains("close = \"rst\""));
        if let Workload::Cps(c) = &mut p.workload {
            c.close = CloseMode::Server;
        }
        r.plan.profile = p;
        let v = cps_ports(&r);
        assert!(v[0].contains("no TIME_WAIT on the client (close = \"server\")"), "{}", v[0]);
        r.summary.ways[0].msgs.as_mut().unwrap().conns = Some(Default::default());
        assert!(cps_ports(&r).is_empty(), "no exhaustion, no verdict");
    }

    #[test]
    fn a_cps_rate_not_reached_names_the_cause_its_counts_show() {
        let (mut p, _) = Profile::load("cps").unwrap();
        if let Workload::Cps(c) = &mut p.workload {
            c.rate = Some("20k".parse().unwrap());
        }
        let mut r = crate::verdict::stored("cps");
        r.summary.ways.truncate(1);
        r.plan.profile = p;
        let with = |r: &mut RunResult, per_s: f64, conns: netblast_spec::result::ConnCounts| {
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
        let c = |f: fn(&mut netblast_spec::result::ConnCounts)| {
            let mut c = netblast_spec::result::ConnCounts { syn_retransmits: Some(0), ..Default::default() };
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
