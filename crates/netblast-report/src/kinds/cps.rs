//! A connection-rate test's report: per interval connections per second, those that failed
//! and connect latency; its totals: failures by cause, how they closed, the ports they need,
//! connect latency; and its failures table.

use crate::lines::{iv_span, lat_cols, pcts, span};
use netblast_spec::profile::{Profile, Workload};
use netblast_spec::result::{Interval, RunResult, StreamInfo, WaySummary};
use netblast_spec::units::{fmt_per_s, known};
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
            _ => (netblast_spec::verdict::DEFAULT_PORTS, "the kernel's default range".to_string()),
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
