//! msgrate's report (over TCP or UDP): its interval columns and lines, its totals, datagram
//! loss and offloads; and what every kind whose streams count messages shares (rr, cps): the
//! interval rows, and the charts of operations per second.

use crate::chart::{Plot, Series, Shape, Unit};
use crate::lines::{
    MAX_STREAM_LINES, count, drops_words, id_col, iv_span, label, pct, receiver_load, span, udp, way_name,
};
use crate::series::at;
use netblast_spec::hist::LatencySummary;
use netblast_spec::profile::{Kind, Profile, Way, Workload};
use netblast_spec::result::{Interval, MsgTotals, RunResult, StreamInfo};
use netblast_spec::units::{fmt_bits_per_s, fmt_bytes, fmt_ns, fmt_per_s, known};
use std::fmt::Write;

/// msgrate's part of the report: messages (or datagrams) per second, UDP's quality.
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
    fn verdicts(&self, r: &RunResult) -> Vec<String> {
        udp_loss(r)
    }

    fn plots(&self, r: &RunResult, _compact: bool) -> Vec<Plot> {
        plots(r, "sent")
    }
}

/// The column header: msgrate's over TCP, over UDP, over UDP with a receiver per server CPU.
pub(crate) fn header(profile: &Profile) -> &'static str {
    match udp(profile) {
        false => "[ ID] Interval           Messages     Msgs/s        Segments/s  Retr\n",
        true if profile.workload.per_cpu_receivers() => {
            "Recv/s per CPU: what the server's receiver on the row's server CPU took (one receiver per CPU, SO_INCOMING_CPU: \
             the kernel, not the flow, decides which datagrams each takes; the flows' total is [SUM]'s)\n\
             [ ID] Interval           Sent/s        Bitrate          Recv/s/CPU    Lost/Total (receiver)  Jitter     Reordered  Dup\n"
        }
        true => {
            "[ ID] Interval           Sent/s        Bitrate          Received/s    Lost/Total (receiver)  Jitter     Reordered  Dup\n"
        }
    }
}

/// One stream's or one way's figures in an interval line.
pub(crate) struct Row<'a> {
    /// The `[ ID]` column: a stream id, SUM, or a way.
    pub label: String,
    /// Its message counts.
    pub msgs: Option<&'a netblast_spec::result::MsgInterval>,
    /// Segments retransmitted.
    pub retransmits: Option<u64>,
    /// Its latency.
    pub latency: Option<&'a LatencySummary>,
    /// Bytes sent.
    pub sent_bytes: u64,
}

impl Row<'_> {
    /// Messages (transactions, connections) sent.
    pub(crate) fn sent(&self) -> u64 {
        self.msgs.map(|m| m.sent).unwrap_or(0)
    }
}

/// An interval's lines of a kind whose streams count messages: each stream's (a few streams
/// only) then each way's, each formatted by `line`.
pub(crate) fn rows(iv: &Interval, streams: &[StreamInfo], line: impl Fn(&Row) -> String) -> String {
    let mut s = String::new();
    if streams.len() > 1 && streams.len() <= MAX_STREAM_LINES {
        for st in &iv.streams {
            s.push_str(&line(&Row {
                label: id_col(st.id),
                msgs: st.msgs.as_ref(),
                retransmits: st.retransmits,
                latency: st.latency.as_deref(),
                sent_bytes: st.sent_bytes,
            }));
        }
    }
    for w in &iv.sums {
        s.push_str(&line(&Row {
            label: label(w.way, iv.sums.len()).to_string(),
            msgs: w.msgs.as_ref(),
            retransmits: w.retransmits,
            latency: w.latency.as_deref(),
            sent_bytes: w.sent_bytes,
        }));
    }
    s
}

/// A count over the interval's length, as a rate.
pub(crate) fn per_interval(iv: &Interval) -> impl Fn(u64) -> String + use<> {
    let secs = (iv.end_s - iv.start_s).max(1e-9);
    move |n: u64| fmt_per_s(n as f64 / secs)
}

/// One interval of msgrate (TCP or UDP).
pub(crate) fn interval(iv: &Interval, streams: &[StreamInfo], profile: &Profile) -> String {
    let secs = (iv.end_s - iv.start_s).max(1e-9);
    let per = per_interval(iv);
    let is_udp = udp(profile);
    rows(iv, streams, |r| {
        let (sent, m) = (r.sent(), r.msgs);
        let (recv, segs, q) = (m.and_then(|m| m.received), m.and_then(|m| m.segs_out), m.and_then(|m| m.udp.as_ref()));
        let label = &r.label;
        if is_udp {
            format!(
                "[{label}] {}  {:>12}  {:>15}  {:>12}  {:>21}  {:>9}  {:>9}  {:>3}\n",
                iv_span(iv, profile),
                per(sent),
                fmt_bits_per_s(r.sent_bytes as f64 * 8.0 / secs),
                recv.map(&per).unwrap_or_else(|| "-".into()),
                q.map(lost_of).unwrap_or_else(|| "-".into()),
                q.map(|q| fmt_ns(q.jitter_ns)).unwrap_or_default(),
                q.map(|q| q.out_of_order.to_string()).unwrap_or_default(),
                q.map(|q| q.duplicates.to_string()).unwrap_or_default(),
            )
        } else {
            format!(
                "[{label}] {}  {:>10}  {:>12}  {:>12} {:>4}\n",
                iv_span(iv, profile),
                count(sent),
                per(sent),
                segs.map(&per).unwrap_or_default(),
                known(r.retransmits)
            )
        }
    })
}

/// `lost/expected (pct)` of a receiver's account, iperf3's "Lost/Total Datagrams".
pub(crate) fn lost_of(q: &netblast_spec::result::UdpQuality) -> String {
    let expected = q.received as i64 + q.lost;
    let pct = if expected > 0 { q.lost as f64 * 100.0 / expected as f64 } else { 0.0 };
    format!("{}/{} ({pct:.2}%)", q.lost, expected)
}

/// A UDP test's `offloads:` line, when it used GSO or GRO, and the words for its queue drops
/// (`kernel_drops`; with GRO each a buffer of up to `gro_coalesced` datagrams).
pub(crate) fn udp_offloads(s: &mut String, profile: &Profile, kernel_drops: Option<u64>) -> String {
    let (gso, gro, coalesced) = match &profile.workload {
        Workload::Msgrate(p) => (p.gso, p.gro, p.gro_coalesced()),
        _ => (false, false, 1),
    };
    if gso || gro {
        let said = match (gso, gro) {
            (true, true) => "sent with GSO and received with GRO",
            (true, false) => "sent with GSO",
            _ => "received with GRO",
        };
        let _ = writeln!(s, "      offloads: {said} (the datagrams on the wire unchanged; each one counted)");
    }
    let buffers =
        if gro { format!(", each a buffer of up to {coalesced} coalesced datagrams (GRO)") } else { String::new() };
    kernel_drops
        .map(|d| format!("; the receiving sockets' queues overflowed {d} times (kernel drop counter{buffers})"))
        .unwrap_or_default()
}

/// msgrate's totals: each way's messages (datagrams) sent and received, loss, the wire, and
/// the rate per client CPU.
pub(crate) fn summary(s: &mut String, r: &RunResult) {
    let profile = &r.plan.profile;
    let unit = profile.workload.unit();
    for w in &r.summary.ways {
        let Some(m) = w.msgs else { continue };
        let _ = writeln!(
            s,
            "[{}] {}  {:>10} {unit}  {:>12}  {:>15}  sender",
            label(w.way, r.summary.ways.len()),
            span(0.0, w.sender.seconds),
            count(m.sent),
            fmt_per_s(m.sent_per_s),
            fmt_bits_per_s(w.sender.bits_per_s)
        );
        if let (Some(recv), Some(rps), Some(rv)) = (m.received, m.received_per_s, w.receiver) {
            let _ = writeln!(
                s,
                "[{}] {}  {:>10} {unit}  {:>12}  {:>15}  receiver",
                label(w.way, r.summary.ways.len()),
                span(0.0, rv.seconds),
                count(recv),
                fmt_per_s(rps),
                fmt_bits_per_s(rv.bits_per_s)
            );
        }
        if let Some(lost) = m.lost {
            let pct = if m.sent > 0 { lost as f64 * 100.0 / m.sent as f64 } else { 0.0 };
            let drops = udp_offloads(s, &r.plan.profile, m.udp.and_then(|u| u.kernel_drops));
            let _ = writeln!(s, "      lost {lost} of {} datagrams ({pct:.2}%){drops}", m.sent);
            let _ = receivers_line(s, r, w.way, &m);
        }
        if let Some(q) = m.udp.and_then(|u| u.quality) {
            let _ = writeln!(
                s,
                "      receiver (sequence numbers): {} reordered, {} duplicated, jitter {} (RFC 3550); \
                 sent {} over {:.2} s, received {}",
                q.out_of_order,
                q.duplicates,
                fmt_ns(q.jitter_ns),
                fmt_bits_per_s(w.sender.bits_per_s),
                w.sender.seconds,
                // Each rate over its own side's span (the receiver's ends at its last
                // datagram, later than the sender's last send): said, so equal counts
                // at two rates read as what they are.
                w.receiver
                    .map(|r| format!("{} over {:.2} s", fmt_bits_per_s(r.bits_per_s), r.seconds))
                    .unwrap_or_else(|| known::<u64>(None)),
            );
        }
        if let Some(n) = m.udp.and_then(|u| u.quality).map(|q| q.foreign).filter(|&n| n > 0) {
            let _ = writeln!(
                s,
                "      {n} foreign datagrams reached the receiver (without this test's identity, from another \
                 address, or numbered past any plausible loss): counted apart, in no figure above"
            );
        }
        wire_line(s, &m, profile);
        // A receiver that read in batches costs next to nothing per message: say so,
        // rather than leave "server 0.00 CPUs" to look like a measuring fault.
        let batched = matches!(&profile.workload, Workload::Msgrate(m) if m.recv == netblast_spec::profile::RecvMode::Batch && m.protocol == netblast_spec::profile::Protocol::Tcp);
        let receiver_cpu = match w.way {
            Way::Up => r.summary.cpu.server.map(|c| c.cpu_s()),
            Way::Down => Some(r.summary.cpu.client.cpu_s()),
        };
        if batched && receiver_cpu.is_some_and(|c| c < 0.05 * w.sender.seconds.max(1e-9)) {
            let _ = writeln!(
                s,
                "The receivers read what had arrived, up to 256 KiB per call (recv = batch): their CPU time \
                 per message is near zero, as shown; --recv each reads one message per call, as qperf's \
                 receiver does"
            );
        }
        // Per CPU: qperf users summed this by hand.
        let mut cpus: Vec<usize> = r.streams.iter().map(|x| x.client_cpu).collect();
        cpus.sort_unstable();
        cpus.dedup();
        if cpus.len() > 1 {
            let parts: Vec<String> = cpus
                .iter()
                .map(|c| {
                    let rate: f64 = r
                        .summary
                        .streams
                        .iter()
                        .filter(|st| r.streams.iter().any(|i| i.id == st.id && i.client_cpu == *c))
                        .filter_map(|st| st.msgs.map(|m| m.sent_per_s))
                        .sum();
                    format!("CPU {c} {}", fmt_per_s(rate))
                })
                .collect();
            let _ = writeln!(s, "Per client CPU: {}", parts.join(", "));
        }
    }
}

/// "On the wire": messages/s beside TCP data segments/s and wire packets/s, and why they differ.
pub(crate) fn wire_line(s: &mut String, m: &MsgTotals, profile: &Profile) {
    if let Some(tcp) = m.tcp {
        let segs = tcp.segs_out_per_s;
        let wire = tcp
            .wire_packets_per_s
            .map(|w| {
                format!(
                    "; {} wire packets/s both ways (data segments and the receivers' ACKs)",
                    count(w.round() as u64)
                )
            })
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "On the wire: {} application messages/s left as {} TCP data segments/s ({:.1} messages per segment){wire}{}",
            count(m.sent_per_s.round() as u64),
            count(segs.round() as u64),
            if segs > 0.0 { m.sent_per_s / segs } else { 0.0 },
            match (profile.tcp.nodelay == Some(true), segs > 0.0 && m.sent_per_s / segs > 1.5) {
                (_, false) => "",
                (false, true) => {
                    "; Nagle and the kernel's autocorking join sends into segments (--nodelay stops \
                     Nagle only; net.ipv4.tcp_autocorking=0 stops autocorking)"
                }
                (true, true) => {
                    "; with --nodelay the kernel's autocorking still joins sends queued behind a \
                     segment in flight (net.ipv4.tcp_autocorking=0 stops it)"
                }
            }
        );
    }
}

/// UDP: the receivers, named: their queues (as applied), and with per-CPU receivers which
/// CPU's receiver dropped what, so a loss is the path's or a named receiver's.
pub(crate) fn receivers_line(s: &mut String, r: &RunResult, way: Way, m: &MsgTotals) -> std::fmt::Result {
    let Some(q) = m.udp.and_then(|u| u.rcvbuf) else { return Ok(()) };
    let per_cpu = r.plan.profile.workload.per_cpu_receivers();
    let queue = format!("receive queue {} per socket", fmt_bytes(q));
    if !per_cpu {
        return writeln!(s, "      receivers: a socket per flow, {queue}");
    }
    let named: Vec<String> = r
        .summary
        .streams
        .iter()
        .filter(|x| x.way == way)
        .filter_map(|x| {
            let got = x.msgs.as_ref()?;
            let cpu = x.server_cpu.map(|c| format!("CPU {c}")).unwrap_or_else(|| format!("stream {}", x.id));
            Some(format!(
                "{cpu} {} received, {} dropped",
                count(got.received.unwrap_or(0)),
                got.udp.and_then(|u| u.kernel_drops).map(count).unwrap_or_else(|| "?".into())
            ))
        })
        .collect();
    writeln!(s, "      receivers: one per server CPU (SO_REUSEPORT, SO_INCOMING_CPU), {queue}: {}", named.join("; "))
}

/// Messages, datagrams, transactions or connections per second, sent (`done` names them:
/// sent, completed, established) and received, and TCP segments on the wire beside messages
/// (a message is not a packet).
pub(crate) fn ops(r: &RunResult, done: &str) -> Option<Plot> {
    let kind = r.plan.profile.kind();
    let unit = r.plan.profile.workload.unit();
    let two = r.summary.ways.len() > 1;
    let mut series = Vec::new();
    for w in r.summary.ways.iter().map(|w| w.way) {
        let name = |what: &str| if two { format!("{what}, {}", way_name(w)) } else { what.to_string() };
        let pick = |f: fn(&netblast_spec::result::MsgInterval) -> Option<f64>| -> Vec<(f64, f64, f64)> {
            r.intervals
                .iter()
                .filter_map(|iv| Some(at(iv, f(iv.sums.iter().find(|s| s.way == w)?.msgs.as_ref()?)?)))
                .collect()
        };
        series.push(Series::new(name(done), pick(|m| m.sent_per_s)).bold());
        if kind == Kind::Msgrate {
            series.push(Series::new(name("received"), pick(|m| m.received_per_s)));
            let segs = pick(|m| m.segs_out_per_s);
            if !segs.is_empty() {
                series.push(Series::new(name("TCP segments sent (packets, not messages)"), segs));
            }
        }
    }
    series.retain(|s| !s.points.is_empty());
    (!series.is_empty()).then(|| {
        let title = format!("{}{} per second", unit[..1].to_uppercase(), &unit[1..]);
        Plot::over_time("ops", title, Unit::PerSecond(unit), Shape::Steps, series)
    })
}

/// UDP: datagrams lost and out of order per interval (% of those sent), and jitter.
pub(crate) fn udp_quality(r: &RunResult) -> Vec<Plot> {
    let mut loss = Vec::new();
    let mut jitter = Vec::new();
    let two = r.summary.ways.len() > 1;
    for w in r.summary.ways.iter().map(|w| w.way) {
        let name = |what: &str| if two { format!("{what}, {}", way_name(w)) } else { what.to_string() };
        let (mut lost, mut ooo, mut jit) = (Vec::new(), Vec::new(), Vec::new());
        for iv in &r.intervals {
            let Some(m) = iv.sums.iter().find(|s| s.way == w).and_then(|s| s.msgs.as_ref()) else { continue };
            let Some(q) = &m.udp else { continue };
            let sent = m.sent.max(1) as f64;
            lost.push(at(iv, q.lost as f64 / sent));
            ooo.push(at(iv, q.out_of_order as f64 / sent));
            if q.received > 0 {
                jit.push(at(iv, q.jitter_ns));
            }
        }
        if !lost.is_empty() {
            loss.push(Series::new(name("lost"), lost).bold());
            loss.push(Series::new(name("out of order"), ooo));
        }
        if !jit.is_empty() {
            jitter.push(Series::new(name("jitter"), jit));
        }
    }
    let mut out = Vec::new();
    if !loss.is_empty() {
        out.push(Plot::over_time(
            "loss",
            "Datagrams lost and out of order per interval (of those sent)",
            Unit::Percent,
            Shape::Steps,
            loss,
        ));
    }
    if !jitter.is_empty() {
        out.push(Plot::over_time(
            "jitter",
            "Jitter per interval (RFC 3550, at the receivers)",
            Unit::Nanos,
            Shape::Steps,
            jitter,
        ));
    }
    out
}

/// The message kinds' own charts: messages (or transactions, connections: `done` names what
/// was done) per second, and a UDP test's loss and jitter.
pub(crate) fn plots(r: &RunResult, done: &str) -> Vec<Plot> {
    let mut out: Vec<Plot> = ops(r, done).into_iter().collect();
    out.extend(udp_quality(r));
    out
}

/// UDP ways: how much was lost, how much of it the receiving sockets' full queues dropped (the
/// rest: the path's), and whether the senders held the rate asked.
pub(crate) fn udp_loss(r: &RunResult) -> Vec<String> {
    let Workload::Msgrate(m) = &r.plan.profile.workload else { return Vec::new() };
    if m.protocol != netblast_spec::profile::Protocol::Udp {
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
                let drops = t.udp.and_then(|u| u.kernel_drops).unwrap_or(0);
                let coalesced = if m.gro { m.gro_coalesced() } else { 1 };
                let queue = drops.saturating_mul(coalesced).min(lost);
                let share = lost as f64 / t.sent.max(1) as f64;
                parts.push(format!("{lost} of {} datagrams lost ({})", t.sent, pct(share)));
                if queue > 0 {
                    let per =
                        t.udp.and_then(|u| u.rcvbuf).map(|b| format!(" of {} each", fmt_bytes(b))).unwrap_or_default();
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
            if let Some(b) = m.rate(w.way) {
                let wanted = b.bits_per_s() * w.streams.max(1) as f64 / 8.0 / m.msg_bytes.0.max(1) as f64;
                if t.sent_per_s < wanted * 0.95 {
                    let why =
                        crate::lines::sender_cpu(r, w.way).map(|c| format!(": the sender's {c}")).unwrap_or_default();
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
