//! The self-check's truth checks: each cause made on purpose (merged histograms of known
//! samples, an open-loop schedule, kernel pacing, a real delay, namespaces with tbf, 1% UDP loss
//! by nftables) and netblast's figure held against it.

use netblast_benches::truth::{self, Tolerance};
use netblast_benches::{LocalServer, profile, run, run_with, secs};
use netblast_spec::hist::{self, EncodedHistogram};
use netblast_spec::units::Dur;
use std::time::Duration;

/// `truth.merge.exact`: interval histograms merged equal one histogram of every sample.
pub(crate) fn truth_merge() {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut all = hist::new_latency_histogram();
    let mut merged = hist::new_latency_histogram();
    for _ in 0..20 {
        let mut interval = hist::new_latency_histogram();
        for _ in 0..50_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let ns = 500 + x % 50_000_000;
            hist::record_ns(&mut interval, ns);
            hist::record_ns(&mut all, ns);
        }
        // Through the codec, as intervals travel and are stored.
        let decoded = EncodedHistogram::encode(&interval).and_then(|e| e.decode()).expect("codec round trip");
        hist::merge(&mut merged, &decoded).expect("same configuration");
    }
    let differing =
        all.iter_recorded().filter(|v| merged.count_at(v.value_iterated_to()) != v.count_at_value()).count()
            + merged.iter_recorded().filter(|v| all.count_at(v.value_iterated_to()) != v.count_at_value()).count();
    truth::check(
        "truth.merge.exact",
        differing as f64,
        0.0,
        "buckets",
        Tolerance::Abs(0.0),
        "1M samples in 20 interval histograms (encoded, decoded, added) vs one histogram of all: buckets that differ",
    );
}

/// `truth.openloop.*`: achieved open-loop rates against their targets, and latency against a
/// delay the responder adds to every response.
pub(crate) fn truth_openloop(cpus: usize) -> Result<(), String> {
    let bind = || std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string());
    let web = netblast_agent::Background::http(bind()?, None, Default::default(), cpus).map_err(|e| e.to_string())?;
    let addr = web.addr();
    let http = |edit: &dyn Fn(&mut netblast_spec::profile::HttpSection)| -> Result<netblast_spec::result::HttpSummary, String> {
        let p = profile("http-max", |p| {
            p.run.duration = Some(Dur(secs()));
            if let Some(h) = p.workload.http_mut() {
                edit(h);
            }
        })?;
        run(addr, p)?.summary.http.ok_or_else(|| "no http summary".to_string())
    };
    // What this host can answer at all, closed loop: a target above it cannot be held, by any tool.
    let capacity = http(&|_| {})?.responses_per_s;
    for target in [5000.0, 50000.0] {
        let name = format!("truth.openloop.rate_{}", target as u64);
        if capacity < target * 1.2 {
            truth::skip(
                &name,
                &format!(
                    "this host answers {capacity:.0}/s closed loop, under 1.2 x {target:.0}/s: no tool could hold it"
                ),
            );
            continue;
        }
        let h = http(&|h| {
            h.rate = Some(netblast_spec::units::Rate(target));
            h.connections = 64;
        })?;
        truth::check(
            &name,
            h.sent_per_s,
            target,
            "req/s",
            Tolerance::Rel(0.01),
            "open loop: requests sent per second vs the target",
        );
    }
    // Every response delayed 10 ms by the responder: latency from the intended send time is
    // never below it, and the median at most 1 ms above it.
    let h = http(&|h| {
        h.urls = vec!["/?delay=10ms".into()];
        h.rate = Some(netblast_spec::units::Rate(200.0));
        h.connections = 16;
    })?;
    delay_checks("truth.openloop.delay_10ms", &h.latency, 10.0, "200/s, responder delay=10ms: median latency");
    // Request/response, closed loop: the same delay, the same bounds.
    let h = http(&|h| {
        h.urls = vec!["/?delay=5ms".into()];
        h.connections = 4;
    })?;
    delay_checks(
        "truth.rr.delay_5ms",
        &h.latency,
        5.0,
        "closed loop, 4 connections, responder delay=5ms: median round trip",
    );
    drop(web);
    Ok(())
}

/// `NAME.p50` and `NAME.min`: latency against a delay the responder adds to every response:
/// never below it, at most 1 ms above it.
pub(crate) fn delay_checks(name: &str, l: &netblast_spec::hist::LatencySummary, delay_ms: f64, what: &str) {
    truth::check(
        &format!("{name}.p50"),
        l.p50_ns as f64 / 1e6,
        delay_ms,
        "ms",
        Tolerance::Range(0.0, 1.0),
        &format!("{what}, at most 1 ms above the delay"),
    );
    truth::check(
        &format!("{name}.min"),
        l.min_ns as f64 / 1e6,
        delay_ms,
        "ms",
        Tolerance::Range(0.0, 1.0),
        "none is faster than the delay",
    );
}

/// `truth.pacing`: `-b` over TCP (bulk.bitrate, the kernel's pacing) held every whole interval,
/// read at the receiver: 1, 5 and 500 Mbit/s one flow client to server, 2 x 150 Mbit/s server
/// to client. The sender's total is what went out (not what its socket buffer took at once),
/// and the receiver's last byte comes when the test's bound ends, not seconds later.
pub(crate) fn truth_pacing(server: &LocalServer) -> Result<(), String> {
    use netblast_spec::profile::Direction;
    for (name, direction, flows, per_flow) in [
        ("forward_1m", Direction::Forward, 1, 1e6),
        ("forward_5m", Direction::Forward, 1, 5e6),
        ("forward_500m", Direction::Forward, 1, 500e6),
        ("reverse_2x150m", Direction::Reverse, 2, 150e6),
    ] {
        let p = profile("bulk-1flow", |p| {
            p.run.duration = Some(Dur(secs().max(Duration::from_secs(3))));
            p.run.interval = Some(Dur(Duration::from_secs(1)));
            if let Some(b) = p.workload.bulk_mut() {
                b.direction = direction;
                b.flows = flows;
                b.bitrate = Some(netblast_spec::units::BitRate(per_flow));
            }
        })?;
        let r = run(server.addr, p)?;
        let target = per_flow * flows as f64;
        // The whole intervals after the first (slow start; the tail after the bound is what
        // the socket still held).
        let whole: Vec<f64> = r
            .intervals
            .iter()
            .filter(|i| i.index > 0 && i.end_s - i.start_s > 0.9)
            .filter_map(|i| i.sums.first().and_then(|w| w.received_bits_per_s))
            .collect();
        if whole.is_empty() {
            return Err("no whole interval with a receiver count".into());
        }
        if per_flow >= 100e6 {
            let worst = whole.iter().copied().max_by(|a, b| (a - target).abs().total_cmp(&(b - target).abs()));
            truth::check(
                &format!("truth.pacing.{name}"),
                worst.unwrap_or_default() / 1e6,
                target / 1e6,
                "Mbit/s",
                Tolerance::Rel(0.02),
                "-b over TCP: the interval furthest from the rate, received (iperf3 -b for TCP; within 2%)",
            );
        } else {
            // At a few Mbit/s a second holds a few hundred segments, and where the interval
            // boundary falls moves several of them from one interval to the next: the rate
            // held is the steady one.
            truth::check(
                &format!("truth.pacing.{name}"),
                whole.iter().sum::<f64>() / whole.len() as f64 / 1e6,
                target / 1e6,
                "Mbit/s",
                Tolerance::Rel(0.02),
                "-b over TCP: the mean of the whole intervals after the first, received (within 2%)",
            );
        }
        let way = r.summary.ways.first().ok_or("no way in the summary")?;
        // The sender hands its socket the schedule and its unsent low-water mark at most (the
        // kernel's ten unpaced first segments included: on loopback they are 64 KiB each).
        truth::check(
            &format!("truth.pacing.{name}.sender"),
            way.sender.bits_per_s / 1e6,
            target / 1e6,
            "Mbit/s",
            Tolerance::Rel(0.02),
            "-b over TCP: the sender's total rate, what it sent and not what its buffer took (within 2%)",
        );
        let bound = r.plan.time_bound.get().as_secs_f64();
        let last = way.receiver.map(|x| x.seconds).ok_or("no receiver total")?;
        truth::check(
            &format!("truth.pacing.{name}.ends_on_time"),
            last,
            bound,
            "s",
            Tolerance::Abs(0.25),
            "-b over TCP: the receiver's last byte within 250 ms of the bound (no queue left to drain)",
        );
    }
    Ok(())
}

/// `truth.rtt`: the eBPF probe's figures against `TCP_INFO` of the same sockets (root, a
/// probe built in).
pub(crate) fn truth_rtt(server: &LocalServer) -> Result<(), String> {
    let probe = match netblast_probe::Probe::open_with(netblast_probe::ProbeMode::Ebpf, false) {
        Ok(p) => p,
        Err(e) => {
            for name in ["truth.rtt.ebpf_vs_tcp_info", "truth.retransmits.ebpf_vs_tcp_info"] {
                truth::skip(name, &format!("no eBPF probe here: {e}"));
            }
            return Ok(());
        }
    };
    let p = profile("bulk-1flow", |p| {
        p.run.duration = Some(Dur(secs()));
        if let Some(b) = p.workload.bulk_mut() {
            b.flows = 2;
        }
    })?;
    let r = run_with(server.addr, p, &probe)?;
    for s in &r.summary.streams {
        let (Some(e), Some(t)) = (s.tcp, s.tcp_info) else {
            return Err(format!("stream {}: no eBPF figures or no TCP_INFO cross-check", s.id));
        };
        let t_rtt = t.rtt_us as f64;
        truth::check(
            &format!("truth.rtt.ebpf_vs_tcp_info.stream{}", s.id),
            e.rtt_us as f64,
            t_rtt,
            "us",
            Tolerance::Abs((0.25 * t_rtt).max(20.0)),
            "smoothed RTT the eBPF program kept vs TCP_INFO's, same socket, same instant (within 25% or 20 us)",
        );
        truth::check(
            &format!("truth.retransmits.ebpf_vs_tcp_info.stream{}", s.id),
            e.retrans_segs as f64,
            t.retrans_segs as f64,
            "segments",
            Tolerance::Abs(0.0),
            "retransmitted segments counted in the kernel by eBPF vs TCP_INFO (exact)",
        );
    }
    Ok(())
}

/// `truth.bytes`, `truth.packets`, `truth.loss`, `truth.retransmits.tcp_vs_nstat`: figures against the kernel's own counters in
/// a namespace pair this bench makes (root only).
/// pps-8core against its description: each message a segment of its own, with client and
/// server on one CPU (where autocorking joined ~100 messages per segment), in namespace `ns`.
pub(crate) fn pps_segments_per_message(ns: &str, here: std::net::SocketAddr) -> Result<(), String> {
    // What its description promises: each message a segment of its own, even with client
    // and server on one CPU (where autocorking joined ~100 messages per segment).
    let p = profile("pps-8core", |p| {
        p.run.duration = Some(Dur(secs()));
        p.run.cpus = Some(netblast_spec::units::CpuList(vec![0]));
        if let Some(m) = p.workload.msgrate_mut() {
            m.flows = Some(1);
            m.server_cpus = Some(netblast_spec::units::CpuList(vec![0]));
        }
    })?;
    let r = netblast_benches::netns::inside(ns, move || run(here, p)).and_then(|r| r)?;
    let m = r.summary.ways[0].msgs.ok_or("no message totals")?;
    let segs = m.tcp.ok_or("no segment count (TCP_INFO)")?.segs_out;
    truth::check(
        "truth.packets.pps8core_segments_per_message",
        segs as f64 / m.sent.max(1) as f64,
        1.0,
        "segments",
        Tolerance::Rel(0.01),
        "pps-8core, client and server on CPU 0: TCP data segments per message (its description: one each)",
    );
    Ok(())
}

pub(crate) fn truth_namespaces() -> Result<(), String> {
    use netblast_benches::netns::{Pair, counters, inside};
    let ns = Pair::create()?;
    // The server lives in namespace b until dropped.
    let server = netblast_benches::ServerIn::start(&ns.b)?;
    let port = server.port;
    let target = std::net::SocketAddr::from((ns.addr_b, port));
    let dev_b = ns.veth(&ns.b);
    let read_b = |dev: String| inside(&ns.b, move || counters(&dev)).and_then(|r| r);
    let result = (|| -> Result<(), String> {
        // Bytes: what the server received vs what its veth received (payload + headers).
        let before = read_b(dev_b.clone())?;
        let p = profile("bulk-1flow", |p| p.run.duration = Some(Dur(secs())))?;
        let r = inside(&ns.a, move || run(target, p)).and_then(|r| r)?;
        let after = read_b(dev_b.clone())?;
        let payload = r.summary.ways[0].receiver.ok_or("no receiver report")?.bytes as f64;
        truth::check(
            "truth.bytes.veth",
            (after.rx_bytes - before.rx_bytes) as f64,
            payload,
            "bytes",
            Tolerance::RelRange(0.0, 0.06),
            "the server veth's received bytes vs the receiver's payload: above it by the headers (<6% at MSS 1448)",
        );
        // Packets: pps-8core's wire packets vs the namespace loopback's packet counter.
        let lo_before = read_b("lo".into())?;
        let p = profile("pps-8core", |p| {
            p.run.duration = Some(Dur(secs()));
            p.run.cpus = None;
            if let Some(m) = p.workload.msgrate_mut() {
                m.flows = Some(1);
            }
        })?;
        let here = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let r = inside(&ns.b, move || run(here, p)).and_then(|r| r)?;
        let lo_after = read_b("lo".into())?;
        let m = r.summary.ways[0].msgs.ok_or("no message totals")?;
        truth::check(
            "truth.packets.loopback",
            m.tcp.and_then(|t| t.wire_packets).unwrap_or(0) as f64,
            (lo_after.tx_packets - lo_before.tx_packets) as f64,
            "packets",
            Tolerance::Rel(0.05),
            "pps-8core's wire packets (segments out + in) vs the namespace loopback's packet counter",
        );
        pps_segments_per_message(&ns.b, here)?;
        // Loss: 1% of UDP datagrams dropped by nftables at the server.
        drop_udp_1pct(&ns)?;
        let p = udp_100m(false)?;
        let veth_before = read_b(dev_b.clone())?;
        let r = inside(&ns.a, move || run(target, p)).and_then(|r| r)?;
        let veth_after = read_b(dev_b.clone())?;
        let dropped = ns.nft_counter(&ns.b, &["table", "inet", "nbb"])?.packets as f64;
        let m = r.summary.ways[0].msgs.ok_or("no message totals")?;
        let lost = m.udp.and_then(|u| u.quality).map(|q| q.lost as f64).unwrap_or(f64::NAN);
        let host = m.udp.and_then(|u| u.kernel_drops).unwrap_or(0) as f64;
        truth::check(
            "truth.loss.udp_datagrams",
            lost,
            dropped,
            "datagrams",
            Tolerance::Range(0.0, host),
            "lost by sequence numbers vs the nft rule's drop counter (plus the receiving socket's drops, if any)",
        );
        // The share: lost over datagrams sent vs the rule's drops over the packets that reached
        // the server's veth (one per datagram, no GSO; the control connection's few dozen segments
        // move the truth by well under 0.01 point). Not "1%": the rule's draw varies by more than
        // a binomial would over the ~9000 datagrams of a 1 s run (0.8-1.4% seen).
        let arrived = (veth_after.rx_packets - veth_before.rx_packets) as f64;
        truth::check(
            "truth.loss.udp_percent",
            lost * 100.0 / m.sent.max(1) as f64,
            dropped * 100.0 / arrived.max(1.0),
            "%",
            Tolerance::Abs(0.02),
            "lost share of datagrams sent vs the nft rule's drops over the packets at the server's veth",
        );
        udp_loss_with_offloads(&ns, target)?;
        // TCP: 1% of the segments reaching the server dropped; the retransmissions reported vs
        // the client namespace's own count (its only TCP sender is this test).
        ns.nft(&ns.b, &format!("add rule inet nbb input tcp dport {port} numgen random mod 100 < 1 drop"))?;
        let retrans_segs = || -> Result<u64, String> {
            let text = std::fs::read_to_string("/proc/thread-self/net/snmp").map_err(|e| e.to_string())?;
            let mut rows = text.lines().filter(|l| l.starts_with("Tcp:"));
            let (names, values) = (rows.next().ok_or("no Tcp names")?, rows.next().ok_or("no Tcp values")?);
            let at = names.split_whitespace().position(|n| n == "RetransSegs").ok_or("no RetransSegs")?;
            values.split_whitespace().nth(at).and_then(|v| v.parse().ok()).ok_or_else(|| "bad RetransSegs".into())
        };
        let p = profile("bulk-1flow", |p| {
            p.run.duration = Some(Dur(secs()));
            if let Some(b) = p.workload.bulk_mut() {
                b.flows = 2;
            }
        })?;
        let (r, kernel) = inside(&ns.a, move || -> Result<_, String> {
            let before = retrans_segs()?;
            let r = run(target, p)?;
            Ok((r, retrans_segs()? - before))
        })
        .and_then(|r| r)?;
        truth::check(
            "truth.retransmits.tcp_vs_nstat",
            r.summary.retransmits().ok_or("no retransmit count in the result")? as f64,
            kernel as f64,
            "segments",
            Tolerance::Range(-2.0, 0.0),
            "1% of segments dropped by nftables: retransmissions reported vs the namespace's Tcp RetransSegs (the control connection's: at most 2)",
        );
        Ok(())
    })();
    drop(server);
    drop(ns);
    result
}

/// `truth.pacing.after_a_stall` (root, on a namespace pair of its own): `-b 300M` over the
/// veth pair for 4 s, every segment to the server dropped by nftables for 150 ms about half a
/// second into the test (with the retransmission timeout after it, a third of a second with
/// nothing delivered). The sender catches up: the receiver's total rate is the rate asked. A
/// sender paced by the kernel at exactly the rate never would (280 Mbit/s measured).
pub(crate) fn truth_pacing_stall() -> Result<(), String> {
    let ns = netblast_benches::netns::Pair::create()?;
    let server = netblast_benches::ServerIn::start(&ns.b)?;
    let target = std::net::SocketAddr::from((ns.addr_b, server.port));
    let result = pacing_after_a_stall(&ns, target);
    drop(server);
    drop(ns);
    result
}

fn pacing_after_a_stall(ns: &netblast_benches::netns::Pair, target: std::net::SocketAddr) -> Result<(), String> {
    let p = profile("bulk-1flow", |p| {
        p.run.duration = Some(Dur(Duration::from_secs(4)));
        if let Some(b) = p.workload.bulk_mut() {
            b.bitrate = Some(netblast_spec::units::BitRate(300e6));
        }
    })?;
    let a = ns.a.clone();
    let client = std::thread::spawn(move || netblast_benches::netns::inside(&a, move || run(target, p)));
    std::thread::sleep(Duration::from_millis(1500));
    let unix_ns =
        || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let from = unix_ns();
    ns.nft(&ns.b, "add table inet nbs")?;
    let stalled = ns
        .nft(&ns.b, "add chain inet nbs input { type filter hook input priority 0 ; }")
        .and_then(|_| ns.nft(&ns.b, &format!("add rule inet nbs input tcp dport {} drop", target.port())));
    std::thread::sleep(Duration::from_millis(150));
    ns.nft(&ns.b, "delete table inet nbs")?;
    let to = unix_ns();
    stalled?;
    let r = client.join().map_err(|_| "the paced client panicked")?.and_then(|r| r)?;
    let start = r.actual_start_unix_ns.ok_or("no start instant in the result")?;
    let at = |ns: u64| (ns as f64 - start as f64) / 1e9;
    if at(from) < 0.2 || at(to) > 2.5 {
        return Err(format!("the stall ({:.2}..{:.2} s) missed the test's first 2.5 s", at(from), at(to)));
    }
    let rx = r.summary.ways.first().and_then(|w| w.receiver).ok_or("no receiver total")?;
    truth::check(
        "truth.pacing.after_a_stall",
        rx.bits_per_s / 1e6,
        300.0,
        "Mbit/s",
        Tolerance::Rel(0.02),
        "-b 300M, the path blocked for 150 ms by nftables: the receiver's total rate (the sender catches up)",
    );
    Ok(())
}

/// Table `inet nbb` in the server's namespace: 1% of UDP datagrams dropped, counted.
pub(crate) fn drop_udp_1pct(ns: &netblast_benches::netns::Pair) -> Result<(), String> {
    ns.nft(&ns.b, "add table inet nbb")?;
    ns.nft(&ns.b, "add chain inet nbb input { type filter hook input priority 0 ; }")?;
    ns.nft(&ns.b, "add rule inet nbb input meta l4proto udp numgen random mod 1000 < 10 counter drop")?;
    Ok(())
}

/// udp-1g paced at 100 Mbit/s for the truth's run, with GSO and GRO or without.
pub(crate) fn udp_100m(offloads: bool) -> Result<netblast_spec::Profile, String> {
    profile("udp-1g", |p| {
        p.run.duration = Some(Dur(secs()));
        if let Some(m) = p.workload.msgrate_mut() {
            m.bitrate = Some(netblast_spec::units::BitRate(100e6));
            (m.gso, m.gro) = (offloads, offloads);
        }
    })
}

/// `truth.loss.udp_datagrams_gsro`: the 1% UDP loss truth with GSO and GRO on (`--gsro`). veth
/// passes a GSO packet whole, so the rule drops packets of many datagrams behind one IPv4 and
/// UDP header: the datagrams it dropped are (bytes - 28 x packets) / the datagram size, read
/// from its counter's bytes.
pub(crate) fn udp_loss_with_offloads(
    ns: &netblast_benches::netns::Pair,
    target: std::net::SocketAddr,
) -> Result<(), String> {
    use netblast_benches::netns::inside;
    ns.nft(&ns.b, "delete table inet nbb")?;
    drop_udp_1pct(ns)?;
    let mut p = udp_100m(true)?;
    let (size, coalesced) = p
        .workload
        .msgrate_mut()
        .map(|m| (m.msg_bytes.bytes() as f64, m.gro_coalesced() as f64))
        .ok_or("udp-1g is not msgrate")?;
    let r = inside(&ns.a, move || run(target, p)).and_then(|r| r)?;
    let counted = ns.nft_counter(&ns.b, &["table", "inet", "nbb"])?;
    let dropped = (counted.bytes as f64 - 28.0 * counted.packets as f64) / size;
    let m = r.summary.ways[0].msgs.ok_or("no message totals")?;
    let lost = m.udp.and_then(|u| u.quality).map(|q| q.lost as f64).unwrap_or(f64::NAN);
    let host = m.udp.and_then(|u| u.kernel_drops).unwrap_or(0) as f64 * coalesced;
    truth::check(
        "truth.loss.udp_datagrams_gsro",
        lost,
        dropped,
        "datagrams",
        Tolerance::Range(0.0, host),
        "--gsro: lost by sequence numbers vs the nft rule's dropped bytes in datagrams (GSO packets dropped whole)",
    );
    Ok(())
}
