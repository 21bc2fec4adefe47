//! The human report, rendered from the result (never from live engine state): interval lines
//! that read like iperf3's, then a sender/receiver summary, TCP and CPU lines, and errors.

use crate::figures::{fmt_part_figure, part_figure};
use netblast_spec::hist::{Distribution, LatencySummary};
use netblast_spec::profile::{Kind, Profile, Way, Workload};
use netblast_spec::result::{Interval, MsgTotals, RunResult, StreamInfo, Summary, WaySummary};
use netblast_spec::units::{fmt_bits_per_s, fmt_bytes, fmt_ns, fmt_per_s, known};
use std::fmt::Write;

/// Above this many streams, interval lines show only the per-way sums.
pub const MAX_STREAM_LINES: usize = 8;

fn label(way: Way, ways: usize) -> &'static str {
    match (way, ways) {
        (_, 1) => "SUM",
        (Way::Up, _) => "UP ",
        (Way::Down, _) => "DN ",
    }
}

fn id_col(id: u32) -> String {
    format!("{id:>3}")
}

/// The lines printed once the test started: what runs where.
pub fn started(test_id: &str, peer: &str, kind: &str, streams: &[StreamInfo], server: &str) -> String {
    let mut s = String::new();
    // A merged result's name says what it is ("merge of 3 tests, ..."); an id is a test's.
    let test = if test_id.contains(' ') { test_id.to_string() } else { format!("test {test_id}") };
    if server.is_empty() {
        let _ = writeln!(s, "netblast {kind} {test} to {peer}");
    } else {
        let _ = writeln!(s, "netblast {kind} {test} to {peer} (server {server})");
    }
    for st in streams.iter().take(MAX_STREAM_LINES) {
        let server_cpu = st.server_cpu.map(|c| format!(", server CPU {c}")).unwrap_or_default();
        let _ = writeln!(
            s,
            "[{}] {} local {} connected to {} (client CPU {}{server_cpu})",
            id_col(st.id),
            match st.way {
                Way::Up => "send",
                Way::Down => "recv",
            },
            st.local,
            st.remote,
            st.client_cpu
        );
    }
    if streams.len() > MAX_STREAM_LINES {
        let _ = writeln!(s, "... and {} more streams", streams.len() - MAX_STREAM_LINES);
    }
    s
}

fn udp(profile: &Profile) -> bool {
    profile.workload.uses_udp()
}

/// The column header of interval lines (a paced bulk test says its rate first: the sender's
/// column also fills and drains its send buffer, the receiver's count is the rate held).
pub fn interval_header(profile: &Profile) -> String {
    let paced = match &profile.workload {
        netblast_spec::profile::Workload::Bulk(b) => b.bitrate.map(|r| {
            format!(
                "Paced: each sending flow at {} by the kernel (SO_MAX_PACING_RATE); the receiver's count is the rate held\n",
                fmt_bits_per_s(r.bits_per_s())
            )
        }),
        _ => None,
    };
    let columns = match (profile.kind(), udp(profile)) {
        (Kind::Bulk, _) => "[ ID] Interval           Transfer     Bitrate         Retr  Cwnd         RTT\n",
        (Kind::Msgrate, false) => "[ ID] Interval           Messages     Msgs/s        Segments/s  Retr\n",
        (Kind::Msgrate, true) if per_cpu_receivers(profile) => {
            "Recv/s per CPU: what the server's receiver on the row's server CPU took (one receiver per CPU, SO_INCOMING_CPU: \
             the kernel, not the flow, decides which datagrams each takes; the flows' total is [SUM]'s)\n\
             [ ID] Interval           Sent/s        Bitrate          Recv/s/CPU    Lost/Total (receiver)  Jitter     Reordered  Dup\n"
        }
        (Kind::Msgrate, true) => {
            "[ ID] Interval           Sent/s        Bitrate          Received/s    Lost/Total (receiver)  Jitter     Reordered  Dup\n"
        }
        (Kind::Rr, _) => "[ ID] Interval           Trans/s       RTT p50    p99        p99.9      max\n",
        (Kind::Cps, _) => "[ ID] Interval           Conns/s       Failed  Connect p50  p99        p99.9      max\n",
        (Kind::Http, _) => {
            "[ ID] Interval           Sent/s        Responses/s   Lat p50    p99        max        Errors  Late\n"
        }
    };
    format!("{}{columns}", paced.unwrap_or_default())
}

/// Whether a UDP message-rate profile receives on one socket per server CPU (not per flow).
fn per_cpu_receivers(profile: &Profile) -> bool {
    matches!(&profile.workload, Workload::Msgrate(p) if p.receivers == netblast_spec::profile::Receivers::PerCpu)
}

fn span(a: f64, b: f64) -> String {
    format!("{a:>6.2}-{b:<6.2} sec")
}

/// An interval's span: to a tenth of a millisecond when it is a short tail (under a tenth of the
/// reporting interval, the last bytes after the last tick), so its rate is read over its real
/// length rather than over an apparent "3.00-3.00".
fn iv_span(iv: &Interval, profile: &Profile) -> String {
    let nominal = profile.run.interval().as_secs_f64();
    if iv.end_s - iv.start_s < nominal * 0.1 {
        format!("{:>6.4}-{:<6.4} sec", iv.start_s, iv.end_s)
    } else {
        span(iv.start_s, iv.end_s)
    }
}

/// A count with a k/M suffix in three significant digits (the number format of every output).
fn count(n: u64) -> String {
    let v = n as f64;
    if v >= 999.5e3 {
        format!("{} M", netblast_spec::units::sig3(v / 1e6))
    } else if v >= 1e3 {
        format!("{} k", netblast_spec::units::sig3(v / 1e3))
    } else {
        format!("{n}")
    }
}

fn lat_cols(l: &LatencySummary) -> String {
    format!(
        "{:>9}  {:>9}  {:>9}  {:>9}",
        fmt_ns(l.p50_ns as f64),
        fmt_ns(l.p99_ns as f64),
        fmt_ns(l.p999_ns as f64),
        fmt_ns(l.max_ns as f64)
    )
}

/// One interval of a message kind (msgrate, rr).
fn msg_interval(iv: &Interval, streams: &[StreamInfo], profile: &Profile) -> String {
    let mut s = String::new();
    let secs = (iv.end_s - iv.start_s).max(1e-9);
    let per = |n: u64| fmt_per_s(n as f64 / secs);
    let kind = profile.kind();
    let is_udp = udp(profile);
    let line = |label: String,
                m: Option<&netblast_spec::result::MsgInterval>,
                retr: Option<u64>,
                lat: Option<&LatencySummary>,
                bytes: u64| {
        let sent = m.map(|m| m.sent).unwrap_or(0);
        let (recv, segs, q, failed) = (
            m.and_then(|m| m.received),
            m.and_then(|m| m.segs_out),
            m.and_then(|m| m.udp.as_ref()),
            m.and_then(|m| m.failed),
        );
        match (kind, is_udp) {
            (Kind::Cps, _) => format!(
                "[{label}] {}  {:>12}  {:>6}  {}\n",
                iv_span(iv, profile),
                per(sent),
                failed.unwrap_or(0),
                lat.map(lat_cols).unwrap_or_default()
            ),
            (Kind::Rr, _) => format!(
                "[{label}] {}  {:>12}  {}\n",
                iv_span(iv, profile),
                per(sent),
                lat.map(lat_cols).unwrap_or_default()
            ),
            (_, true) => format!(
                "[{label}] {}  {:>12}  {:>15}  {:>12}  {:>21}  {:>9}  {:>9}  {:>3}\n",
                iv_span(iv, profile),
                per(sent),
                fmt_bits_per_s(bytes as f64 * 8.0 / secs),
                recv.map(per).unwrap_or_else(|| "-".into()),
                q.map(lost_of).unwrap_or_else(|| "-".into()),
                q.map(|q| fmt_ns(q.jitter_ns)).unwrap_or_default(),
                q.map(|q| q.out_of_order.to_string()).unwrap_or_default(),
                q.map(|q| q.duplicates.to_string()).unwrap_or_default(),
            ),
            _ => format!(
                "[{label}] {}  {:>10}  {:>12}  {:>12} {:>4}\n",
                iv_span(iv, profile),
                count(sent),
                per(sent),
                segs.map(per).unwrap_or_default(),
                known(retr)
            ),
        }
    };
    if streams.len() > 1 && streams.len() <= MAX_STREAM_LINES {
        for st in &iv.streams {
            s.push_str(&line(id_col(st.id), st.msgs.as_ref(), st.retransmits, st.latency.as_deref(), st.sent_bytes));
        }
    }
    for w in &iv.sums {
        s.push_str(&line(
            label(w.way, iv.sums.len()).to_string(),
            w.msgs.as_ref(),
            w.retransmits,
            w.latency.as_deref(),
            w.sent_bytes,
        ));
    }
    s
}

/// `lost/expected (pct)` of a receiver's account, iperf3's "Lost/Total Datagrams".
fn lost_of(q: &netblast_spec::result::UdpQuality) -> String {
    let expected = q.received as i64 + q.lost;
    let pct = if expected > 0 { q.lost as f64 * 100.0 / expected as f64 } else { 0.0 };
    format!("{}/{} ({pct:.2}%)", q.lost, expected)
}

fn http_interval(iv: &Interval, profile: &Profile) -> String {
    let Some(h) = &iv.http else { return String::new() };
    let lat = |f: fn(&LatencySummary) -> u64| h.latency.as_ref().map(|l| fmt_ns(f(l) as f64)).unwrap_or_default();
    format!(
        "[SUM] {}  {:>12}  {:>12}  {:>9}  {:>9}  {:>9}  {:>6}  {:>4}\n",
        iv_span(iv, profile),
        fmt_per_s(h.sent_per_s),
        fmt_per_s(h.responses_per_s),
        lat(|l| l.p50_ns),
        lat(|l| l.p99_ns),
        lat(|l| l.max_ns),
        // A response with a status outside the expected set failed as surely as a reset.
        h.errors + h.failed_status,
        h.late
    )
}

/// One interval as text: per-stream lines (when few), then one line per way.
/// A short tail prints nothing: the result folds it into the interval before (a live view
/// cannot, and leaves it to the summary).
pub fn interval(iv: &Interval, streams: &[StreamInfo], profile: &Profile) -> String {
    if iv.is_short_tail(profile.run.interval().as_secs_f64()) {
        return String::new();
    }
    if netblast_spec::omit::is_omitted(iv, profile.run.omit().as_secs_f64()) {
        // Shown as iperf3 -O shows them, and left out of the totals.
        return bulk_interval(iv, streams, profile).replace('\n', "  (omitted)\n");
    }
    if profile.kind() == Kind::Http {
        return http_interval(iv, profile);
    }
    if profile.kind() != Kind::Bulk {
        return msg_interval(iv, streams, profile);
    }
    bulk_interval(iv, streams, profile)
}

/// A bulk interval's lines: each stream's (up to [`MAX_STREAM_LINES`]) and each way's sum.
fn bulk_interval(iv: &Interval, streams: &[StreamInfo], profile: &Profile) -> String {
    let mut s = String::new();
    let secs = (iv.end_s - iv.start_s).max(1e-9);
    let ways = iv.sums.len();
    // One side per way and interval, the same for its stream lines and its sum: the sender's
    // counts while it sent, the receiver's (marked so) for an interval only a receiver counted.
    let way_of = |id: u32| streams.iter().find(|st| st.id == id).map(|st| st.way);
    let sender_side: Vec<(Way, bool)> = iv
        .sums
        .iter()
        .map(|w| {
            (w.way, w.sent_bytes > 0 || iv.streams.iter().any(|x| way_of(x.id) == Some(w.way) && x.sent_bytes > 0))
        })
        .collect();
    let side_of = |way: Option<Way>| sender_side.iter().find(|(w, _)| Some(*w) == way).is_none_or(|(_, s)| *s);
    let mark = |sender: bool| if sender { "" } else { "  receiver" };
    if streams.len() > 1 && streams.len() <= MAX_STREAM_LINES {
        for st in &iv.streams {
            let sender = side_of(way_of(st.id));
            let bytes = if sender { st.sent_bytes } else { st.received_bytes.unwrap_or(0) };
            let (cwnd, rtt) =
                st.tcp.map(|t| (fmt_bytes(t.cwnd_bytes()), format!("{} us", t.rtt_us))).unwrap_or_default();
            let _ = writeln!(
                s,
                "[{}] {}  {:>11}  {:>15} {:>4}  {:>11}  {:>9}{}",
                id_col(st.id),
                iv_span(iv, profile),
                fmt_bytes(bytes),
                fmt_bits_per_s(bytes as f64 * 8.0 / secs),
                known(st.retransmits),
                cwnd,
                rtt,
                mark(sender)
            );
        }
    }
    for w in &iv.sums {
        let of_way: Vec<_> = iv.streams.iter().filter(|x| way_of(x.id) == Some(w.way)).collect();
        let sender = side_of(Some(w.way));
        let bytes = if sender {
            w.sent_bytes.max(of_way.iter().map(|x| x.sent_bytes).sum())
        } else {
            w.received_bytes.unwrap_or(0).max(of_way.iter().filter_map(|x| x.received_bytes).sum())
        };
        let rtts: Vec<u32> = of_way.iter().filter_map(|x| x.tcp).map(|t| t.rtt_us).filter(|r| *r > 0).collect();
        let rtt = if rtts.is_empty() {
            String::new()
        } else {
            format!("{} us", rtts.iter().map(|r| *r as u64).sum::<u64>() / rtts.len() as u64)
        };
        let cwnd = of_way.iter().filter_map(|x| x.tcp).map(|t| t.cwnd_bytes()).max();
        let _ = writeln!(
            s,
            "[{}] {}  {:>11}  {:>15} {:>4}  {:>11}  {:>9}{}",
            label(w.way, ways),
            iv_span(iv, profile),
            fmt_bytes(bytes),
            fmt_bits_per_s(bytes as f64 * 8.0 / secs),
            known(w.retransmits),
            cwnd.map(fmt_bytes).unwrap_or_default(),
            rtt,
            mark(sender)
        );
    }
    s
}

fn way_lines(s: &mut String, w: &WaySummary, ways: usize, from: f64) {
    let l = label(w.way, ways);
    let span = |_: f64, b: f64| span(from, from + b);
    let _ = writeln!(
        s,
        "[{l}] {}  {:>11}  {:>15} {:>4}              sender",
        span(0.0, w.sender.seconds),
        fmt_bytes(w.sender.bytes),
        fmt_bits_per_s(w.sender.bits_per_s),
        known(w.retransmits)
    );
    match &w.receiver {
        Some(r) => {
            let _ = writeln!(
                s,
                "[{l}] {}  {:>11}  {:>15}                   receiver",
                span(0.0, r.seconds),
                fmt_bytes(r.bytes),
                fmt_bits_per_s(r.bits_per_s)
            );
        }
        None => {
            let _ = writeln!(s, "[{l}] receiver did not report");
        }
    }
}

/// A cps test's totals: connections completed and their rate, failures by cause, SYN
/// retransmissions, connect latency, what the server served.
fn cps_summary(s: &mut String, w: &WaySummary, m: &netblast_spec::result::MsgTotals, r: &RunResult) {
    let Workload::Cps(c) = &r.plan.profile.workload else { return };
    let conns = m.conns.unwrap_or_default();
    let _ = writeln!(
        s,
        "[SUM] {}  {} connections completed, {} ({} flow{}, {}-byte request, {}-byte response, {})",
        span(0.0, w.sender.seconds),
        m.sent,
        fmt_per_s(m.sent_per_s),
        w.streams,
        if w.streams == 1 { "" } else { "s" },
        c.req_bytes.bytes(),
        c.resp_bytes.bytes(),
        close_words(c.close),
    );
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
        let causes = [
            ("no free local port (EADDRNOTAVAIL)", conns.port_exhausted),
            ("refused", conns.refused),
            (&*format!("timed out ({:?})", c.timeout()), conns.timed_out),
            ("reset", conns.reset),
            ("other errors", conns.other),
        ]
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(what, n)| format!("{n} {what}"))
        .collect::<Vec<_>>()
        .join(", ");
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
        let _ = writeln!(s, "Connect latency (connect() call to established, client clock): {}", pcts(l));
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

/// How a cps connection ends, in words: who closes first and whose port waits in TIME_WAIT.
fn close_words(c: netblast_spec::profile::CloseMode) -> &'static str {
    match c {
        netblast_spec::profile::CloseMode::Fin => "the client closes first: its port waits in TIME_WAIT",
        netblast_spec::profile::CloseMode::Rst => "closed by RST: no TIME_WAIT",
        netblast_spec::profile::CloseMode::Server => "the server closes first: the TIME_WAIT is the server's",
    }
}

/// A UDP test's `offloads:` line, when it used GSO or GRO, and the words for its queue drops
/// (`kernel_drops`; with GRO each a buffer of up to `gro_coalesced` datagrams).
fn udp_offloads(s: &mut String, profile: &Profile, kernel_drops: Option<u64>) -> String {
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

fn msg_summary(s: &mut String, r: &RunResult) {
    let profile = &r.plan.profile;
    let is_udp = udp(profile);
    let unit = if is_udp { "datagrams" } else { "messages" };
    for w in &r.summary.ways {
        let Some(m) = w.msgs else { continue };
        match profile.kind() {
            Kind::Cps => cps_summary(s, w, &m, r),
            Kind::Rr => {
                let _ = writeln!(
                    s,
                    "[SUM] {}  {} transactions, {} ({} flow{}{}, wait {})",
                    span(0.0, w.sender.seconds),
                    m.sent,
                    fmt_per_s(m.sent_per_s),
                    w.streams,
                    if w.streams == 1 { "" } else { "s" },
                    if is_udp { ", UDP" } else { ", TCP" },
                    match &profile.workload {
                        Workload::Rr(rr) if rr.wait == netblast_spec::profile::WaitMode::Spin => "spin",
                        _ => "block",
                    }
                );
                if let Some(lost) = m.lost {
                    let timeout = match &profile.workload {
                        Workload::Rr(rr) => rr.udp_timeout(),
                        _ => netblast_spec::profile::RrSection::DEFAULT_UDP_TIMEOUT,
                    };
                    let _ = writeln!(s, "      {lost} requests got no response within {timeout:?}");
                }
                if let Some(l) = &w.latency {
                    let _ = writeln!(s, "Round trip (application, client clock): {}", pcts(l));
                    let _ = writeln!(
                        s,
                        "One way (round trip / 2, what qperf calls latency): mean {}, p50 {}",
                        fmt_ns(l.mean_ns / 2.0),
                        fmt_ns(l.p50_ns as f64 / 2.0)
                    );
                }
            }
            _ => {
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
                    let drops = udp_offloads(s, &r.plan.profile, m.kernel_drops);
                    let _ = writeln!(s, "      lost {lost} of {} datagrams ({pct:.2}%){drops}", m.sent);
                    let _ = receivers_line(s, r, w.way, &m);
                }
                if let Some(q) = &m.udp {
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
    }
}

/// "On the wire": messages/s beside TCP data segments/s and wire packets/s, and why they differ.
fn wire_line(s: &mut String, m: &MsgTotals, profile: &Profile) {
    if let Some(segs) = m.segs_out_per_s {
        let wire = m
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

/// The least CPU time a figure per CPU-second is computed over (five 10 ms clock ticks).
const MIN_CPU_S: f64 = 0.05;

/// A latency summary on one line: min, mean, stdev, the percentiles, max.
fn pcts(l: &LatencySummary) -> String {
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

/// Percentiles hey prints in its "Latency distribution".
const HEY_PERCENTILES: [f64; 8] = [10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9];
/// Buckets of the response time histogram, and the longest bar.
const BARS: u64 = 10;
const BAR_WIDTH: u64 = 40;

/// hey's view of a latency distribution: ten equal-width buckets from the fastest to the
/// slowest response with a bar each, then the percentiles.
fn latency_bars(h: &hdrhistogram::Histogram<u64>) -> String {
    let mut s = String::new();
    if h.is_empty() {
        return s;
    }
    let (lo, hi) = (h.min(), h.max());
    let width = ((hi - lo) / BARS).max(1);
    let mut counts = [0u64; BARS as usize];
    for v in h.iter_recorded() {
        let i = ((h.lowest_equivalent(v.value_iterated_to()).max(lo) - lo) / width).min(BARS - 1);
        counts[i as usize] += v.count_at_value();
    }
    let most = counts.iter().copied().max().unwrap_or(1).max(1);
    let _ = writeln!(s, "  Response time histogram (upper bound of each bucket):");
    for (i, n) in counts.iter().enumerate() {
        let upper = if i as u64 == BARS - 1 { hi } else { lo + width * (i as u64 + 1) };
        let bar = "■".repeat(((n * BAR_WIDTH).div_ceil(most)) as usize);
        let _ = writeln!(s, "    {:>10} [{n}]\t|{bar}", fmt_ns(upper as f64));
    }
    let _ = writeln!(s, "  Latency distribution:");
    for p in HEY_PERCENTILES {
        let _ = writeln!(s, "    {p}% in {}", fmt_ns(netblast_spec::hist::at_percentile(h, p) as f64));
    }
    s
}

fn http_summary(s: &mut String, r: &RunResult) {
    let Some(h) = &r.summary.http else { return };
    let streams = r.plan.profile.workload.http().map_or(1, |x| x.streams);
    let _ = writeln!(
        s,
        "HTTP summary ({}, {}{}, {} connections{}, {:.2} s)",
        h.mode.replace('_', " "),
        h.version,
        if h.tls { " over TLS" } else { "" },
        h.connections.configured,
        if streams > 1 { format!(" x {streams} streams") } else { String::new() },
        h.seconds
    );
    // "Failed" is one count everywhere (text, --assert http.failed, the HTML): sent, not
    // succeeded; those without any response are a part of it.
    let _ = writeln!(
        s,
        "  Requests:     {} sent, {} completed ({} without a response); {} succeeded ({}%, status {}), {} failed",
        h.sent,
        h.completed,
        h.sent.saturating_sub(h.completed),
        h.succeeded,
        netblast_spec::units::sig3(h.success_ratio * 100.0),
        r.plan.profile.workload.http().map(|x| x.expected().to_string()).unwrap_or_default(),
        h.sent.saturating_sub(h.succeeded)
    );
    match h.target_rate {
        Some(t) => {
            let _ = writeln!(
                s,
                "  Rate:         target {}, achieved {} sent, {} responses; {} sent late (no free connection at the intended time)",
                fmt_per_s(t),
                fmt_per_s(h.sent_per_s),
                fmt_per_s(h.responses_per_s),
                h.late
            );
        }
        None => {
            let _ = writeln!(s, "  Rate:         {} responses", fmt_per_s(h.responses_per_s));
        }
    }
    // What succeeded beside what was answered (wrk's "Non-2xx", k6's http_req_failed): a
    // refusal answered fast is not throughput.
    if h.succeeded < h.sent {
        let _ = writeln!(
            s,
            "  Succeeded:    {} (a status in {}), of {} answered",
            fmt_per_s(h.succeeded as f64 / h.seconds.max(1e-9)),
            r.plan.profile.workload.http().map(|x| x.expected().to_string()).unwrap_or_default(),
            fmt_per_s(h.responses_per_s)
        );
    }
    let secs = h.seconds.max(1e-9);
    let _ = writeln!(
        s,
        "  Transfer:     out {} ({}), in {} ({})",
        fmt_bytes(h.bytes_sent),
        fmt_bits_per_s(h.bytes_sent as f64 * 8.0 / secs),
        fmt_bytes(h.bytes_received),
        fmt_bits_per_s(h.bytes_received as f64 * 8.0 / secs)
    );
    if h.latency.count > 0 {
        let from = if h.mode == "open_loop" { "from the intended send time" } else { "from the send" };
        let _ = writeln!(s, "  Latency ({from}): {}", pcts(&h.latency));
        if let Some(hist) = h.latency.histogram() {
            s.push_str(&latency_bars(&hist));
        }
    }
    let phase = |name: &str, l: &Option<Distribution>, s: &mut String| {
        if let Some(l) = l {
            let _ = writeln!(s, "  {name:<13} {} ({} samples)", p50_p99_max(l), l.count);
        }
    };
    phase("TCP connect:", &h.phases.connect, s);
    phase("TLS:", &h.phases.tls, s);
    phase("First byte:", &h.phases.ttfb, s);
    phase("Body:", &h.phases.body, s);
    phase("Send lag:", &h.phases.send_lag, s);
    if !h.status_codes.is_empty() {
        let codes: Vec<String> = h.status_codes.iter().map(|(c, n)| format!("[{c}] {n}")).collect();
        let _ = writeln!(s, "  Status codes: {}", codes.join(", "));
    }
    for e in &h.errors {
        let _ = writeln!(s, "  Errors:       {} {} (e.g. {})", e.kind, e.count, e.sample);
    }
    let c = &h.connections;
    let _ = writeln!(
        s,
        "  Connections:  {} configured, {} established, {} failed, {} open at most",
        c.configured, c.established, c.failed, c.peak_open
    );
    if let Some(t) = &h.tcp {
        let _ = writeln!(
            s,
            "  TCP (kernel, source {}, {} connections): {}",
            r.probe.tcp_source,
            t.connections,
            retransmissions(Some(t.retransmits), t.retransmit_rate, t.spurious_retransmits)
        );
        if let Some(k) = &t.kernel_rtt {
            let _ = writeln!(s, "  Kernel RTT:   {} ({} samples: ACKs that timed a segment)", p50_p99_max(k), k.count);
        }
        if let Some(k) = &t.srtt {
            let _ = writeln!(s, "  Smoothed RTT: {} (one per connection, at its close)", p50_p99_max(k));
        }
    }
}

/// "N retransmitted segments (R% of segments sent), S of them spurious (...)".
fn retransmissions(n: Option<u64>, rate: Option<f64>, spurious: Option<u64>) -> String {
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
fn p50_p99_max(l: &LatencySummary) -> String {
    format!("p50 {} p99 {} max {}", fmt_ns(l.p50_ns as f64), fmt_ns(l.p99_ns as f64), fmt_ns(l.max_ns as f64))
}

/// The headline figures of a summary on one line: rate per way (and latency or messages for
/// the kinds that have them), or requests for http.
pub fn headline(sum: &Summary) -> String {
    if let Some(h) = &sum.http {
        return format!(
            "{} responses, {}, p50 {} p99 {}",
            h.completed,
            fmt_per_s(h.responses_per_s),
            fmt_ns(h.latency.p50_ns as f64),
            fmt_ns(h.latency.p99_ns as f64)
        );
    }
    let parts: Vec<String> = sum
        .ways
        .iter()
        .map(|w| {
            let way = w.way.name();
            let rate = w.receiver.map(|r| r.bits_per_s).unwrap_or(w.sender.bits_per_s);
            let mut t = format!("{way} {}", fmt_bits_per_s(rate));
            if let Some(m) = &w.msgs {
                let _ = write!(t, " {}", fmt_per_s(m.sent_per_s));
            }
            if let Some(l) = &w.latency {
                let _ = write!(t, " p50 {} p99 {}", fmt_ns(l.p50_ns as f64), fmt_ns(l.p99_ns as f64));
            }
            t
        })
        .collect();
    parts.join(", ")
}

/// Most tests a merged or fleet result lists one by one; more are summarised as a
/// distribution with the slowest and fastest few named.
const MAX_PART_LINES: usize = 12;
/// Tests named at the slow end of a large fleet.
const SLOWEST: usize = 5;
/// Tests named at the fast end of a large fleet.
const FASTEST: usize = 3;
/// Agents named per failure reason; the rest are counted.
const MAX_AGENTS_NAMED: usize = 8;

/// One test of a merged result on one line.
fn part_line(i: usize, p: &netblast_spec::result::Part) -> String {
    let streams = match p.streams {
        0 => String::new(),
        n => format!("  streams {}..{}", p.first_stream, p.first_stream + n - 1),
    };
    format!(
        "  [{i:>3}] {} {} -> {}{streams}  from interval {}{}  {}\n",
        if p.agent.hostname.is_empty() { "?" } else { p.agent.hostname.as_str() },
        p.agent.address,
        p.peer,
        p.interval_offset,
        if p.complete { "" } else { "  INCOMPLETE" },
        headline(&p.summary)
    )
}

/// The tests of a large fleet: their figure's spread, the slowest and the fastest few.
fn parts_spread(s: &mut String, r: &RunResult) {
    let kind = r.plan.profile.kind();
    let mut ranked: Vec<(f64, usize)> =
        r.parts.iter().enumerate().map(|(i, p)| (part_figure(kind, &p.summary), i)).collect();
    ranked.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let at = |q: f64| ranked[((ranked.len() - 1) as f64 * q).round() as usize].0;
    let _ = writeln!(
        s,
        "  Per test: min {}  p10 {}  median {}  p90 {}  max {}",
        fmt_part_figure(kind, at(0.0)),
        fmt_part_figure(kind, at(0.1)),
        fmt_part_figure(kind, at(0.5)),
        fmt_part_figure(kind, at(0.9)),
        fmt_part_figure(kind, at(1.0))
    );
    let _ = writeln!(s, "  Slowest {SLOWEST}:");
    for &(_, i) in ranked.iter().take(SLOWEST) {
        let line = part_line(i, &r.parts[i]);
        let limits = part_limits(r, &r.parts[i]);
        match limits.is_empty() {
            true => s.push_str(&line),
            false => {
                let _ = writeln!(s, "{}  ({limits})", line.trim_end());
            }
        }
    }
    let _ = writeln!(s, "  Fastest {FASTEST}:");
    for &(_, i) in ranked.iter().rev().take(FASTEST) {
        s.push_str(&part_line(i, &r.parts[i]));
    }
    limits_spread(s, r);
    let incomplete = r.parts.iter().filter(|p| !p.complete).count();
    if incomplete > 0 {
        let _ = writeln!(s, "  {incomplete} of the {} tests INCOMPLETE", r.parts.len());
    }
    let _ = writeln!(s, "  (every test, with its own totals: the result's parts, --json or report --html)");
}

/// What held each way of one test, shortly: "limited by receiver window 93%".
fn part_limits(r: &RunResult, p: &netblast_spec::result::Part) -> String {
    let d = netblast_spec::diagnose::part(r, p);
    let two = d.len() > 1;
    d.iter()
        .map(|d| {
            let way = if two { format!("{}: ", crate::plots::way_name(d.way)) } else { String::new() };
            format!("{way}limited by {} {:.0}%", d.limit.name(), d.share * 100.0)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The tests of a large fleet grouped by what held them (each way's limit), the groups'
/// tests counted and the first few named: "receiver window: 12 tests (vm001, ...)".
fn limits_spread(s: &mut String, r: &RunResult) {
    use netblast_spec::diagnose::Limit;
    let mut groups: Vec<(Limit, Vec<String>)> = Vec::new();
    for p in &r.parts {
        for d in netblast_spec::diagnose::part(r, p) {
            let name = if p.agent.hostname.is_empty() { p.agent.address.clone() } else { p.agent.hostname.clone() };
            match groups.iter_mut().find(|(l, _)| *l == d.limit) {
                Some((_, v)) => v.push(name),
                None => groups.push((d.limit, vec![name])),
            }
        }
    }
    if groups.is_empty() {
        return;
    }
    groups.sort_by_key(|g| std::cmp::Reverse(g.1.len()));
    let _ = writeln!(s, "  What held each test (its senders' kernel clocks):");
    for (limit, names) in groups {
        let more = names.len().saturating_sub(MAX_AGENTS_NAMED);
        let mut listed = names.iter().take(MAX_AGENTS_NAMED).cloned().collect::<Vec<_>>().join(", ");
        if more > 0 {
            let _ = write!(listed, " and {more} more");
        }
        let n = names.len();
        let _ = writeln!(s, "    {}: {n} test{} ({listed})", limit.name(), if n == 1 { "" } else { "s" });
    }
}

/// The agents that are not `ok`, grouped by role, status and reason: each reason once, with
/// its agents named (the first few) and counted.
fn agents_not_ok(s: &mut String, r: &RunResult) {
    // (role, status, reason) and the agents of that reason, in the order first seen.
    type Reason<'a> = (&'a str, &'a str, &'a str);
    let mut groups: Vec<(Reason, Vec<String>)> = Vec::new();
    for a in r.agents.iter().filter(|a| a.status != "ok") {
        let key = (a.role.as_str(), a.status.as_str(), a.why.as_deref().unwrap_or(""));
        let name = if a.agent.hostname.is_empty() {
            a.agent.address.clone()
        } else {
            format!("{} ({})", a.agent.address, a.agent.hostname)
        };
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(name),
            None => groups.push((key, vec![name])),
        }
    }
    for ((role, status, why), names) in groups {
        let why = if why.is_empty() { String::new() } else { format!(": {why}") };
        if names.len() == 1 {
            let _ = writeln!(s, "  {role} agent {}: {status}{why}", names[0]);
            continue;
        }
        let more = names.len().saturating_sub(MAX_AGENTS_NAMED);
        let mut listed = names.iter().take(MAX_AGENTS_NAMED).cloned().collect::<Vec<_>>().join(", ");
        if more > 0 {
            let _ = write!(listed, " and {more} more");
        }
        let _ = writeln!(s, "  {} {role} agents {status}{why}: {listed}", names.len());
    }
}

/// The parts and agents of a merged or fleet result.
fn parts_and_agents(s: &mut String, r: &RunResult) {
    if r.parts.is_empty() {
        return;
    }
    // The agents whose tests were merged; those that failed without a part are named below.
    let took_part = |role: &str| r.agents.iter().filter(|a| a.role == role && !a.parts.is_empty()).count();
    let (agents, servers) = (took_part("client"), took_part("server"));
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    let _ = write!(
        s,
        "Merged {} test{} from {agents} client agent{}",
        r.parts.len(),
        plural(r.parts.len()),
        plural(agents)
    );
    if servers > 0 {
        let _ = write!(s, " and {servers} server agent{}", plural(servers));
    }
    let _ = writeln!(s, ", intervals from {}:", r.started_at);
    if r.parts.len() > MAX_PART_LINES {
        parts_spread(s, r);
    } else {
        for (i, p) in r.parts.iter().enumerate() {
            s.push_str(&part_line(i, p));
            // Each test's own verdict, where there is more than one test to tell apart.
            for d in netblast_spec::diagnose::part(r, p).iter().filter(|_| r.parts.len() > 1) {
                let way = if p.summary.ways.len() > 1 {
                    format!(" {}", crate::plots::way_name(d.way))
                } else {
                    String::new()
                };
                let _ = writeln!(s, "        verdict{way}: {}", d.verdict);
            }
        }
    }
    let starts: Vec<u64> = r.agents.iter().filter_map(|a| a.actual_start_unix_ns).collect();
    if let (Some(lo), Some(hi), true) = (starts.iter().min(), starts.iter().max(), starts.len() > 1) {
        let _ =
            writeln!(s, "Start skew between agents: {} (latest minus earliest actual start)", fmt_ns((hi - lo) as f64));
    }
    agents_not_ok(s, r);
}

/// The summary block printed at the end.
pub fn summary(r: &RunResult) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "- - - - - - - - - - - - - - - - - - - - - - - - -");
    parts_and_agents(&mut s, r);
    if r.plan.profile.kind() == Kind::Http {
        http_summary(&mut s, r);
        sweep_lines(&mut s, r);
        tcp_cpu_and_errors(&mut s, r);
        return s;
    }
    if r.plan.profile.kind() != Kind::Bulk {
        msg_summary(&mut s, r);
        tcp_cpu_and_errors(&mut s, r);
        return s;
    }
    let _ = writeln!(s, "[ ID] Interval           Transfer     Bitrate         Retr");
    let ways = r.summary.ways.len();
    // Totals after an omitted start (-O) begin where it ends, on the intervals' time axis.
    let from = r.plan.profile.run.omit.map_or(0.0, |o| o.get().as_secs_f64());
    let span = |_: f64, b: f64| span(from, from + b);
    if r.streams.len() > 1 && r.streams.len() <= MAX_STREAM_LINES {
        for st in &r.summary.streams {
            let _ = writeln!(
                s,
                "[{}] {}  {:>11}  {:>15} {:>4}              sender",
                id_col(st.id),
                span(0.0, st.sender.seconds),
                fmt_bytes(st.sender.bytes),
                fmt_bits_per_s(st.sender.bits_per_s),
                known(st.retransmits)
            );
            if let Some(rv) = &st.receiver {
                let _ = writeln!(
                    s,
                    "[{}] {}  {:>11}  {:>15}                   receiver",
                    id_col(st.id),
                    span(0.0, rv.seconds),
                    fmt_bytes(rv.bytes),
                    fmt_bits_per_s(rv.bits_per_s)
                );
            }
        }
    }
    for w in &r.summary.ways {
        way_lines(&mut s, w, ways, from);
    }
    tcp_cpu_and_errors(&mut s, r);
    s
}

/// The CPU line: each side's CPUs used and the cost per operation (per CPU-second).
fn cpu_line(r: &RunResult) -> String {
    let c = &r.summary.cpu;
    if c.client.wall_s == 0.0 && c.server.is_none() {
        return "CPU: not measured".into();
    }
    let mut cpu = format!(
        "CPU: client {:.2} CPUs (user {:.2} s, system {:.2} s)",
        c.client.cpus_used(),
        c.client.user_s,
        c.client.system_s
    );
    if let Some(sv) = &c.server {
        let _ =
            write!(cpu, ", server {:.2} CPUs (user {:.2} s, system {:.2} s)", sv.cpus_used(), sv.user_s, sv.system_s);
    }
    let msgs: Option<u64> = match &r.summary.http {
        Some(h) => Some(h.completed),
        None if r.summary.ways.is_empty() => None,
        None => r.summary.ways.iter().map(|w| w.msgs.map(|m| m.sent)).sum(),
    };
    let unit = r.plan.profile.kind().unit();
    // Below 50 ms of CPU (five clock ticks) a figure per CPU-second is mostly rounding: unknown.
    let per_cpu = |amount: f64, cpu_s: f64, fmt: &dyn Fn(f64) -> String| {
        if cpu_s >= MIN_CPU_S {
            fmt(amount / cpu_s)
        } else {
            "\u{2014}".to_string()
        }
    };
    let bits = |v: f64| format!("{:.1} Gbit", v / 1e9);
    let n = |v: f64| format!("{} {unit}", count(v.round() as u64));
    let total_bits: f64 = c.bits_per_client_cpu_s * c.client.cpu_s();
    let (amount, fmt): (f64, &dyn Fn(f64) -> String) = match msgs {
        // Message kinds: the cost that matters is per message.
        Some(m) => (m as f64, &n),
        None => (total_bits, &bits),
    };
    let _ = write!(cpu, "; {} per client CPU-second", per_cpu(amount, c.client.cpu_s(), fmt));
    if let Some(sv) = &c.server {
        let server_amount = match msgs {
            Some(_) => Some(amount),
            None => c.bits_per_server_cpu_s.map(|b| b * sv.cpu_s()),
        };
        if let Some(a) = server_amount {
            let _ = write!(cpu, ", {} per server CPU-second", per_cpu(a, sv.cpu_s(), fmt));
        }
    }
    if c.client.cpu_s() < MIN_CPU_S || c.server.as_ref().is_some_and(|sv| sv.cpu_s() < MIN_CPU_S) {
        let _ = write!(cpu, " (\u{2014}: under {} ms of CPU, too little to divide by)", MIN_CPU_S * 1e3);
    }
    cpu
}

/// What limited a way's senders (their kernels' clocks), and the verdict with its fix.
fn limit_lines(s: &mut String, r: &RunResult, way: Way) {
    let Some(d) = netblast_spec::diagnose::tcp(r).into_iter().find(|d| d.way == way) else { return };
    let (x, pct) = (d.shares, |v: f64| format!("{:.0}%", v * 100.0));
    let _ = writeln!(
        s,
        "      limited by (the senders' kernel clocks): receiver window {}, send buffer {}, congestion window or path {}, nothing to send {}",
        pct(x.rwnd),
        pct(x.sndbuf),
        pct(x.cwnd),
        pct(x.app)
    );
    let _ = writeln!(s, "      verdict: {}", d.verdict);
}

fn tcp_cpu_and_errors(s: &mut String, r: &RunResult) {
    // A cps flow is many connections, not one socket: its kernel figures are in its summary.
    let one_socket_per_stream = r.plan.profile.kind().one_socket_per_stream();
    for w in r.summary.ways.iter().filter(|_| one_socket_per_stream) {
        let (side, probe) = match w.way {
            Way::Up => ("client", Some(&r.probe)),
            Way::Down => ("server", r.server_probe.as_ref()),
        };
        let source = probe.map(|p| p.tcp_source.as_str()).unwrap_or("?");
        let cc =
            crate::figures::congestion(r, w.way).map(|cc| format!(", congestion control {cc}")).unwrap_or_default();
        let way = w.way.name();
        let retrans = retransmissions(w.retransmits, w.retransmit_rate, w.spurious_retransmits);
        // The senders' MSS as the kernel settled it (after -M, the path and the peer's SYN).
        let mss: Vec<u32> = r
            .summary
            .streams
            .iter()
            .filter(|st| st.way == w.way)
            .filter_map(|st| st.tcp.or(st.tcp_info).map(|t| t.mss))
            .filter(|m| *m > 0)
            .collect();
        let retrans = match (mss.iter().min(), mss.iter().max()) {
            (Some(a), Some(b)) if a == b => format!("MSS {a} bytes, {retrans}"),
            (Some(a), Some(b)) => format!("MSS {a}-{b} bytes, {retrans}"),
            _ => retrans,
        };
        if let Some(k) = &w.kernel_rtt {
            let _ = writeln!(
                s,
                "TCP {way} (kernel, {side} side{cc}, source {source}, {} RTT samples): RTT min {} / p50 {} / p99 {} / max {}, max cwnd {}, {retrans}",
                k.count,
                fmt_ns(k.min_ns as f64),
                fmt_ns(k.p50_ns as f64),
                fmt_ns(k.p99_ns as f64),
                fmt_ns(k.max_ns as f64),
                fmt_bytes(w.cwnd_max_bytes),
            );
        } else if let Some(rtt) = w.rtt {
            let _ = writeln!(
                s,
                "TCP {way} (kernel, {side} side{cc}, source {source}, sampled per interval): RTT min {} / mean {} / max {}, max cwnd {}, {retrans}",
                fmt_ns(rtt.min_us as f64 * 1e3),
                fmt_ns(rtt.mean_us * 1e3),
                fmt_ns(rtt.max_us as f64 * 1e3),
                fmt_bytes(w.cwnd_max_bytes),
            );
        }
        if r.plan.profile.kind() == Kind::Bulk {
            limit_lines(s, r, w.way);
        }
    }
    for (who, p) in [("client", Some(&r.probe)), ("server", r.server_probe.as_ref())] {
        if let Some((ns, runs)) = p.and_then(|p| p.kernel_run_ns.zip(p.kernel_runs)) {
            let _ = writeln!(
                s,
                "eBPF probe cost ({who}): {} of CPU in {runs} runs ({} per run)",
                fmt_ns(ns as f64),
                fmt_ns(if runs > 0 { ns as f64 / runs as f64 } else { 0.0 })
            );
        }
    }
    let _ = writeln!(s, "{}", cpu_line(r));
    // UDP, HTTP and the hosts' verdicts (TCP's are under each way's line).
    for line in netblast_spec::verdict::beyond_tcp(r) {
        let _ = writeln!(s, "verdict: {line}");
    }
    if let Some(fb) = r.probe.fallback_reason.as_ref().filter(|_| r.probe.tcp_source != "off") {
        let _ = writeln!(s, "TCP statistics from {} ({fb})", r.probe.tcp_source);
    }
    if let Some(sp) = r.server_probe.as_ref().filter(|sp| sp.tcp_source != r.probe.tcp_source) {
        let why = sp.fallback_reason.as_deref().map(|f| format!(" ({f})")).unwrap_or_default();
        let _ = writeln!(s, "Server TCP statistics from {}{why}", sp.tcp_source);
    }
    if r.plan.profile.kind() == Kind::Rr {
        let w = r.summary.ways.first();
        let kernel = w
            .and_then(|w| w.kernel_rtt.as_ref().map(|k| format!("p50 {}", fmt_ns(k.p50_ns as f64))))
            .or_else(|| w.and_then(|w| w.rtt).map(|rtt| format!("mean {:.0} us", rtt.mean_us)));
        if let (Some(kernel), Some(app)) = (kernel, w.and_then(|w| w.latency.as_ref())) {
            let _ = writeln!(
                s,
                "Kernel RTT ({kernel}) is TCP's view: segment sent to ACK received inside the kernel. The \
                 application round trip (p50 {}) adds both ends' system calls, wake-ups and copies.",
                fmt_ns(app.p50_ns as f64)
            );
        }
    }
    // Plan notes were printed with the header; the rest come here.
    for w in r.warnings.iter().filter(|w| w.source != "plan") {
        let _ = writeln!(s, "note: {}: {}", w.source, w.message);
    }
    if !r.complete {
        let _ = writeln!(s, "INCOMPLETE RUN: the figures above cover what was measured before:");
        for e in &r.errors {
            let _ = writeln!(s, "  at {:.2} s, {}: {}", e.at_s, e.source, e.message);
        }
    }
}

/// The whole report of a finished run: header, intervals, summary.
pub fn full(r: &RunResult) -> String {
    let mut s = started(
        &crate::figures::test_name(r),
        &crate::figures::target(r),
        r.plan.profile.kind().name(),
        &r.streams,
        r.server.as_ref().map(|h| h.hostname.as_str()).unwrap_or(""),
    );
    for n in &r.plan.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s.push_str(&interval_header(&r.plan.profile));
    for iv in &r.intervals {
        s.push_str(&interval(iv, &r.streams, &r.plan.profile));
    }
    s.push_str(&summary(r));
    s
}

/// One line saying what ran: the kind, the label, the test, what it was aimed at, when
/// (what `-q` keeps above the summary).
pub fn header_line(r: &RunResult) -> String {
    let label = r.label.as_deref().map(|l| format!(" [{l}]")).unwrap_or_default();
    let target = crate::figures::target(r);
    format!(
        "netblast {}{label}: {} against {}, {}, started {}\n",
        r.plan.profile.kind().name(),
        r.plan.profile.description,
        target,
        match crate::figures::test_name(r) {
            n if n.contains(' ') => n,
            id => format!("test {id}"),
        },
        r.started_at
    )
}

/// Every headline figure of each run side by side, in words, each after the first with its
/// change from the first in %. `runs`: (name, result), the first the base.
pub fn compare(runs: &[(String, &RunResult)]) -> String {
    let figs: Vec<Vec<netblast_spec::assert::Figure>> =
        runs.iter().map(|(_, r)| netblast_spec::assert::headline(r)).collect();
    let mut s = String::from("\nCompared:\n");
    for (i, (name, r)) in runs.iter().enumerate() {
        let _ = writeln!(
            s,
            "  {}{name}: {} ({})",
            if i == 0 { "base " } else { "" },
            crate::figures::test_name(r),
            r.started_at
        );
    }
    let mut names: Vec<(&str, &str)> = Vec::new();
    for f in figs.iter().flatten() {
        if !names.iter().any(|(n, _)| *n == f.name) {
            names.push((f.name, &f.label));
        }
    }
    let width = names.iter().map(|(_, l)| l.chars().count()).max().unwrap_or(6).max(6);
    let _ = write!(s, "  {:<width$}", "figure");
    for (i, (name, _)) in runs.iter().enumerate() {
        let _ = write!(s, " {name:>18}");
        if i > 0 {
            let _ = write!(s, " {:>9}", "change");
        }
    }
    s.push('\n');
    for (name, label) in names {
        let _ = write!(s, "  {label:<width$}");
        let base = figs[0].iter().find(|f| f.name == name);
        for (i, fs) in figs.iter().enumerate() {
            let f = fs.iter().find(|f| f.name == name);
            let _ = write!(s, " {:>18}", f.map(|f| f.shown.clone()).unwrap_or_else(|| "-".into()));
            if i == 0 {
                continue;
            }
            let change = match (base, f) {
                (Some(x), Some(y)) => match crate::figures::change_percent(x.value, y.value) {
                    Some(p) => format!("{p:+.1}%"),
                    None if y.value == 0.0 => "0".into(),
                    None => "new".into(),
                },
                _ => "-".into(),
            };
            let _ = write!(s, " {change:>9}");
        }
        s.push('\n');
    }
    s
}

/// An HTTP rate sweep's steps, one line each, the first that did not hold marked.
fn sweep_lines(s: &mut String, r: &RunResult) {
    let Some(steps) = crate::sweep::steps(r) else { return };
    let _ = writeln!(s, "Rate sweep: step  seconds        offered     achieved        p50        p99   failed");
    for st in &steps {
        let (p50, p99) = match &st.latency {
            Some(l) => (fmt_ns(l.p50_ns as f64), fmt_ns(l.p99_ns as f64)),
            None => ("-".into(), "-".into()),
        };
        let _ = writeln!(
            s,
            "            {:>4}  {:>7} {:>14} {:>12} {:>10} {:>10} {:>8}{}",
            st.n,
            format!("{:.0}-{:.0}", st.span.0, st.span.1),
            fmt_per_s(st.offered),
            fmt_per_s(st.achieved),
            p50,
            p99,
            st.errors,
            if st.turned.is_some() { format!("  <- {}", crate::sweep::why(st)) } else { String::new() }
        );
    }
}

/// UDP: the receivers, named: their queues (as applied), and with per-CPU receivers which
/// CPU's receiver dropped what, so a loss is the path's or a named receiver's.
fn receivers_line(s: &mut String, r: &RunResult, way: Way, m: &MsgTotals) -> std::fmt::Result {
    let Some(q) = m.rcvbuf else { return Ok(()) };
    let per_cpu = per_cpu_receivers(&r.plan.profile);
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
                got.kernel_drops.map(count).unwrap_or_else(|| "?".into())
            ))
        })
        .collect();
    writeln!(s, "      receivers: one per server CPU (SO_REUSEPORT, SO_INCOMING_CPU), {queue}: {}", named.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    use netblast_spec::result::{StreamInterval, WayInterval};

    fn bulk_interval(start_s: f64, end_s: f64, sent: u64, received: u64) -> (Interval, Vec<StreamInfo>, Profile) {
        let (profile, _) = Profile::load("bulk-1flow").unwrap();
        let streams: Vec<StreamInfo> = (0..4).map(|id| stream_info(id, Way::Up)).collect();
        let iv = Interval {
            index: 3,
            start_s,
            end_s,
            streams: (0..4)
                .map(|id| StreamInterval { id, sent_bytes: sent, received_bytes: Some(received), ..Default::default() })
                .collect(),
            sums: vec![empty_way(Way::Up)],
            http: None,
        };
        (iv, streams, profile)
    }

    /// A stream of a test, addresses and CPUs left blank.
    fn stream_info(id: u32, way: Way) -> StreamInfo {
        StreamInfo { id, way, local: String::new(), remote: String::new(), client_cpu: 0, server_cpu: None, part: None }
    }

    /// A way's interval with nothing counted.
    fn empty_way(way: Way) -> WayInterval {
        WayInterval {
            way,
            sent_bytes: 0,
            sent_bits_per_s: 0.0,
            received_bytes: None,
            received_bits_per_s: None,
            retransmits: Some(0),
            msgs: None,
            latency: None,
        }
    }

    #[test]
    fn stream_lines_and_their_sum_count_the_same_side_and_say_which() {
        // Found in a run: four streams received 3.12 MBytes each in an interval where nothing
        // was sent, and [SUM] said 0 Bytes (it took the sender's count).
        let (iv, streams, profile) = bulk_interval(3.0, 4.0, 0, 3_271_557);
        let out = interval(&iv, &streams, &profile);
        let sum = out.lines().find(|l| l.starts_with("[SUM]")).unwrap();
        assert!(sum.contains("12.5 MBytes") && sum.ends_with("receiver"), "{out}");
        assert_eq!(out.lines().filter(|l| l.contains("3.12 MBytes") && l.ends_with("receiver")).count(), 4, "{out}");
        // While the sender sends, every line is the sender's, unmarked.
        let (iv, streams, profile) = bulk_interval(1.0, 2.0, 1 << 20, 1000);
        let out = interval(&iv, &streams, &profile);
        assert!(out.lines().all(|l| l.contains("1.00 MBytes") || l.contains("4.00 MBytes")), "{out}");
        assert!(!out.contains("receiver"), "{out}");
    }

    #[test]
    fn the_wire_line_names_autocorking_with_and_without_nodelay() {
        // Found in a run: with --nodelay, 145.8 messages per segment on loopback, while the
        // hint said --nodelay gives one segment per send.
        // A real msgrate result (one flow, batched sends), its figures then set.
        let mut r: RunResult = netblast_spec::upgrade::read_result(include_str!("../testdata/msgrate.json")).unwrap();
        let w = &mut r.summary.ways[0];
        let m = w.msgs.as_mut().unwrap();
        (m.sent_per_s, m.segs_out_per_s) = (1_458_000.0, Some(10_000.0));
        r.plan.profile.tcp.nodelay = Some(true);
        let out = summary(&r);
        assert!(out.contains("with --nodelay the kernel's autocorking still joins"), "{out}");
        r.plan.profile.tcp.nodelay = None;
        let out = summary(&r);
        assert!(out.contains("--nodelay stops Nagle only; net.ipv4.tcp_autocorking=0"), "{out}");
        // One segment per message: no hint at all.
        r.summary.ways[0].msgs.as_mut().unwrap().segs_out_per_s = Some(1_458_000.0);
        assert!(!summary(&r).contains("autocorking"));
    }

    #[test]
    fn a_short_tail_is_folded_and_never_printed_with_its_own_rate() {
        // Found in runs: "[SUM] 2.0000-2.0093 sec ... 48.81 Gbits/sec", "3.00-3.00 sec 2.30 MBytes
        // 72.02 Gbits/sec": a rate over a few milliseconds.
        let (before, streams, profile) = bulk_interval(2.0, 3.0, 600_000, 600_000);
        let (mut tail, _, _) = bulk_interval(3.0, 3.004, 60_000, 60_000);
        tail.index = before.index + 1;
        assert_eq!(interval(&tail, &streams, &profile), "", "a live view leaves the tail to the summary");
        let mut ivs = vec![before, tail];
        assert!(netblast_spec::merge::fold_short_tail(&mut ivs, 1.0).unwrap());
        assert_eq!(ivs.len(), 1);
        let out = interval(&ivs[0], &streams, &profile);
        // 660 000 bytes per stream over 1.004 s, the joined span.
        assert!(out.contains("  2.00-3.00   sec") && out.contains(&fmt_bits_per_s(660_000.0 * 8.0 / 1.004)), "{out}");
        // A whole interval is never folded, and a run of one short interval keeps it.
        let (a, _, _) = bulk_interval(2.0, 3.0, 1, 1);
        let (mut b, _, _) = bulk_interval(3.0, 4.0, 1, 1);
        b.index = a.index + 1;
        let mut ivs = vec![a, b];
        assert!(!netblast_spec::merge::fold_short_tail(&mut ivs, 1.0).unwrap());
        let (mut only, _, _) = bulk_interval(0.0, 0.004, 1, 1);
        only.index = 0;
        assert!(interval(&only, &streams, &profile).contains("0.0000-0.0040 "));
    }

    #[test]
    fn latency_bars_count_every_sample_once_and_list_heys_percentiles() {
        let mut h = netblast_spec::hist::new_latency_histogram();
        // 90 fast responses around 1 ms, 10 slow ones at 10 ms.
        for i in 0..90 {
            h.record(1_000_000 + i * 1_000).unwrap();
        }
        for _ in 0..10 {
            h.record(10_000_000).unwrap();
        }
        let out = latency_bars(&h);
        let counts: Vec<u64> = out
            .lines()
            .filter_map(|l| l.split_once('[').and_then(|(_, r)| r.split_once(']')).map(|(n, _)| n.parse().unwrap()))
            .collect();
        assert_eq!(counts.len(), BARS as usize, "{out}");
        assert_eq!(counts.iter().sum::<u64>(), 100, "{out}");
        assert_eq!((counts[0], counts[9]), (90, 10), "fast ones in the first bucket, slow in the last: {out}");
        assert_eq!(out.matches('■').count() as u64, BAR_WIDTH + 5, "the longest bar is full width: {out}");
        for p in ["10% in", "50% in 1.0", "99% in 10.0", "99.9% in 10.0"] {
            assert!(out.contains(p), "{p}: {out}");
        }
    }
}
