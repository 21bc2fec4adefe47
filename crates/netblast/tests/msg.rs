//! msgrate and rr end to end against a real server.

use crate::util::{self, InPair, Server};
use netblast_spec::RunResult;
use netblast_spec::profile::{MsgrateSection, Profile, Protocol, RrSection, WaitMode, Workload};
use netblast_spec::units::{ByteSize, CpuList};

fn msgrate(edit: impl FnOnce(&mut MsgrateSection)) -> Profile {
    let (mut p, _) = Profile::load("pps-8core").unwrap();
    p.run.duration = Some("1s".parse().unwrap());
    p.run.interval = Some("250ms".parse().unwrap());
    p.run.cpus = None;
    let m = p.workload.msgrate_mut().unwrap();
    edit(m);
    // pps-8core's record marks are TCP's: a test that makes it UDP drops them, as -u does.
    m.eor &= m.protocol == netblast_spec::profile::Protocol::Tcp;
    p.validate("test").unwrap();
    p
}

fn rr(edit: impl FnOnce(&mut RrSection)) -> Profile {
    let (mut p, _) = Profile::load("latency").unwrap();
    p.run.duration = Some("1s".parse().unwrap());
    p.run.interval = Some("250ms".parse().unwrap());
    let r = p.workload.rr_mut().unwrap();
    r.wait = WaitMode::Block; // spinning threads would fight over this host's CPUs
    edit(r);
    p.validate("test").unwrap();
    p
}

fn usable_cpus() -> Vec<usize> {
    netblast_engine::os::sys::allowed_cpus().unwrap()
}

#[test]
fn tcp_messages_sent_equal_messages_received() {
    let srv = Server::start("127.0.0.1:0").unwrap();
    for size in [1u64, 100] {
        let r = util::run(
            srv.addr,
            msgrate(|m| {
                m.flows = Some(2);
                m.msg_bytes = ByteSize(size);
            }),
        );
        assert!(r.complete, "{:?}", r.errors);
        for s in &r.summary.streams {
            let m = s.msgs.unwrap();
            assert!(m.sent > 0);
            assert_eq!(Some(m.sent), m.received, "stream {} with {size}-byte messages", s.id);
            assert_eq!(s.sender.bytes, m.sent * size);
            assert_eq!(s.receiver.unwrap().bytes, m.sent * size);
            assert!(m.tcp.unwrap().segs_out > 0, "segments on the wire are reported");
        }
        let w = r.summary.ways[0].msgs.unwrap();
        assert_eq!(Some(w.sent), w.received);
        // The interval series adds up to the totals.
        let per_interval: u64 =
            r.intervals.iter().flat_map(|i| &i.sums).filter_map(|x| x.msgs.as_ref()).map(|m| m.sent).sum();
        assert_eq!(per_interval, w.sent);
    }
}

#[test]
fn flows_are_pinned_and_the_workers_read_their_affinity_back() {
    let srv = Server::start("127.0.0.1:0").unwrap();
    let cpus = usable_cpus();
    let r = util::run(srv.addr, msgrate(|m| m.flows = Some(cpus.len() as u32)));
    assert!(r.complete, "{:?}", r.errors);
    for (info, s) in r.streams.iter().zip(&r.summary.streams) {
        assert_eq!(s.client_cpu, Some(info.client_cpu), "client worker of stream {} verified on its CPU", s.id);
        assert_eq!(s.server_cpu, info.server_cpu, "server worker of stream {} verified on its CPU", s.id);
        assert!(s.server_cpu.is_some());
    }
    let used: std::collections::BTreeSet<usize> = r.streams.iter().map(|s| s.client_cpu).collect();
    assert_eq!(used.len(), cpus.len(), "one flow per CPU");
}

#[test]
fn a_server_cpu_the_server_lacks_is_reported_not_fatal() {
    let srv = Server::start("127.0.0.1:0").unwrap();
    let r = util::run(
        srv.addr,
        msgrate(|m| {
            m.flows = Some(1);
            m.server_cpus = Some(CpuList(vec![4000]));
        }),
    );
    assert!(r.complete, "{:?}", r.errors);
    assert!(r.warnings.iter().any(|w| w.message.contains("cannot pin to CPU 4000")), "{:?}", r.warnings);
    assert_eq!(r.summary.streams[0].server_cpu, None);
}

fn udp_loss(r: &RunResult) -> (u64, u64, u64) {
    let m = r.summary.ways[0].msgs.unwrap();
    (m.sent, m.lost.unwrap(), m.udp.unwrap().kernel_drops.unwrap())
}

#[test]
fn udp_loss_accounting_matches_the_kernel_drop_counter() {
    let srv = Server::start("127.0.0.1:0").unwrap();
    // As fast as it goes: whatever the receiver misses, the kernel counted as a drop.
    let r = util::run(
        srv.addr,
        msgrate(|m| {
            m.flows = Some(1);
            m.protocol = Protocol::Udp;
        }),
    );
    assert!(r.complete, "{:?}", r.errors);
    let (sent, lost, drops) = udp_loss(&r);
    assert!(sent > 0);
    assert_eq!(lost, drops, "every lost datagram is a kernel drop on loopback");
    assert_eq!(r.summary.ways[0].msgs.unwrap().received, Some(sent - lost));

    // A receiver made to drop: a tiny receive buffer.
    let mut p = msgrate(|m| {
        m.flows = Some(1);
        m.protocol = Protocol::Udp;
    });
    p.tcp.rcvbuf = Some(ByteSize(4096));
    let r = util::run(srv.addr, p);
    assert!(r.complete, "{:?}", r.errors);
    let (sent, lost, drops) = udp_loss(&r);
    assert!(lost > 0, "a 4 KiB receive buffer drops datagrams ({sent} sent)");
    assert_eq!(lost, drops);
    // The verdict puts the loss on the receivers' queues, all of it.
    let v = netblast_report::verdict::of_kind(&r);
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(
        v[0].contains(&format!("{lost} of {sent} datagrams lost"))
            && v[0].contains(&format!("{drops} of them dropped by the receiving sockets' full queues"))
            && !v[0].contains("before the sockets"),
        "{}",
        v[0]
    );
}

/// Per-CPU receivers over `cpus` flows (one per usable CPU), client and server on the same
/// CPU list, with `msg_bytes`-byte datagrams.
fn per_cpu_receivers(msg_bytes: u64) -> RunResult {
    let srv = Server::start("127.0.0.1:0").unwrap();
    let cpus = usable_cpus();
    let r = util::run(
        srv.addr,
        msgrate(|m| {
            m.flows = Some(cpus.len() as u32);
            m.protocol = Protocol::Udp;
            m.msg_bytes = ByteSize(msg_bytes);
            m.receivers = netblast_spec::profile::Receivers::PerCpu;
            m.server_cpus = Some(CpuList(cpus.clone()));
        }),
    );
    assert!(r.complete, "{:?}", r.errors);
    r
}

#[test]
fn per_cpu_receivers_take_what_their_cpu_processed() {
    let r = per_cpu_receivers(1);
    let w = r.summary.ways[0].msgs.unwrap();
    assert!(w.sent > 0);
    // Loss is the way's: sent by every flow less received by every receiver, and on loopback
    // each lost datagram is a named receiver's queue overflow.
    let received: u64 = r.summary.streams.iter().map(|s| s.msgs.unwrap().received.unwrap()).sum();
    assert_eq!(w.received, Some(received));
    assert_eq!(w.lost, Some(w.sent - received));
    let udp = w.udp.expect("the receivers' sockets were read");
    assert_eq!(w.lost, udp.kernel_drops, "every lost datagram is counted by a receiver's socket");
    assert!(udp.rcvbuf.is_some_and(|b| b >= 1 << 20), "receive queues are grown: {:?}", udp.rcvbuf);
    // Loopback processes a datagram on its sender's CPU: the receiver tied to that CPU takes
    // (or drops) exactly what the flows pinned there sent, whichever stream it belongs to (a
    // hash would send whole flows to either receiver; a socket tied only once the test had
    // started took its first datagrams by hash).
    for rx in &r.summary.streams {
        let cpu = rx.server_cpu.expect("receivers are pinned");
        let sent_there: u64 =
            r.summary.streams.iter().filter(|s| s.client_cpu == Some(cpu)).map(|s| s.msgs.unwrap().sent).sum();
        let m = rx.msgs.unwrap();
        assert_eq!(m.lost, None, "a receiver's count is not its stream's: no per-stream loss");
        let took = m.received.unwrap() + m.udp.unwrap().kernel_drops.unwrap();
        assert_eq!(took, sent_there, "the receiver on CPU {cpu} took what the flows on CPU {cpu} sent");
    }
}

#[test]
fn per_cpu_receivers_keep_each_sender_s_sequence_apart() {
    // 64-byte datagrams carry sequence numbers; flows interleave at a receiver, and must not
    // read as reordered or lost.
    let r = per_cpu_receivers(64);
    let w = r.summary.ways[0].msgs.unwrap();
    let q = w.udp.and_then(|u| u.quality).expect("sequenced datagrams are accounted");
    assert_eq!((q.out_of_order, q.duplicates), (0, 0), "{q:?}");
    assert_eq!(q.received, w.received.unwrap());
    // Each flow's datagrams all reach one receiver, so what its sequence misses is at most
    // what that receiver's queue dropped (a dropped tail is not seen as missing).
    let drops = w.udp.unwrap().kernel_drops;
    assert!(q.lost >= 0 && Some(q.lost as u64) <= drops, "{q:?} vs {drops:?} dropped");
}

/// Local UDP ports bound on 127.0.0.1, from /proc/net/udp.
fn loopback_udp_ports() -> Vec<u16> {
    let table = std::fs::read_to_string("/proc/net/udp").unwrap_or_default();
    table
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter_map(|a| a.strip_prefix("0100007F:"))
        .filter_map(|p| u16::from_str_radix(p, 16).ok())
        .collect()
}

#[test]
fn foreign_datagrams_change_no_figure_of_a_udp_run() {
    // Found in the audit: datagrams a stranger sent to a receiver (sequence 2^64-1 and 2^40,
    // duplicates, 0 and 65 507 bytes) left the run "lost 1 099 511 604 451", jitter 1.05e17 ns.
    // Here the stranger is on the client's own address (which per-CPU receivers take from) and
    // sends to every UDP port on loopback while the run lasts.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let stranger = {
        let (stop, sent) = (stop.clone(), sent.clone());
        std::thread::spawn(move || {
            let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            let forged = |seq: u64, len: usize| {
                let mut d = vec![0u8; len];
                if len >= 16 {
                    d[..8].copy_from_slice(&seq.to_le_bytes());
                    d[8..16].copy_from_slice(&1u64.to_le_bytes());
                }
                d
            };
            let datagrams = [
                forged(u64::MAX, 64),
                forged(1 << 40, 64),
                forged(3, 64),
                forged(3, 64),
                forged(0, 0),
                forged(7, 65_507),
            ];
            std::thread::sleep(std::time::Duration::from_millis(300));
            let began = std::time::Instant::now();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && began.elapsed().as_secs() < 10 {
                for port in loopback_udp_ports() {
                    for d in &datagrams {
                        if sock.send_to(d, ("127.0.0.1", port)).is_ok() {
                            sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        })
    };
    let r = per_cpu_receivers(64);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    stranger.join().unwrap();
    assert!(r.complete, "{:?}", r.errors);
    let w = r.summary.ways[0].msgs.unwrap();
    let q = w.udp.and_then(|u| u.quality).expect("sequenced datagrams are accounted");
    assert!(
        q.foreign > 0,
        "the stranger's datagrams reached a receiver: {q:?} ({} sent)",
        sent.load(std::sync::atomic::Ordering::Relaxed)
    );
    assert_eq!((q.out_of_order, q.duplicates), (0, 0), "{q:?}");
    assert_eq!(q.received, w.received.unwrap(), "the foreign ones are not messages received");
    let drops = w.udp.unwrap().kernel_drops;
    assert!(q.lost >= 0 && Some(q.lost as u64) <= drops, "{q:?} vs {drops:?} dropped");
    assert!(q.jitter_ns < 1e9, "{q:?}");
    let text = netblast_report::text::full(&r);
    assert!(text.contains("foreign datagrams reached the receiver"), "{text}");
}

#[test]
fn udp_with_nothing_lost_counts_zero() {
    let srv = Server::start("127.0.0.1:0").unwrap();
    // rr over UDP never has more than one datagram in flight, so nothing overflows.
    let r = util::run(srv.addr, rr(|r| r.protocol = Protocol::Udp));
    assert!(r.complete, "{:?}", r.errors);
    let m = r.summary.ways[0].msgs.unwrap();
    assert!(m.sent > 0);
    assert_eq!(m.lost, Some(0));
    assert_eq!(m.received, Some(m.sent), "the server answered every request the client counted");
}

#[test]
fn rr_histograms_hold_one_sample_per_transaction() {
    let srv = Server::start("127.0.0.1:0").unwrap();
    for (req, resp) in [(1u64, 1u64), (100, 5000)] {
        let r = util::run(
            srv.addr,
            rr(|r| {
                r.flows = 2;
                r.req_bytes = ByteSize(req);
                r.resp_bytes = ByteSize(resp);
            }),
        );
        assert!(r.complete, "{:?}", r.errors);
        let w = &r.summary.ways[0];
        let m = w.msgs.unwrap();
        let lat = w.latency.as_ref().unwrap();
        assert!(m.sent > 0);
        assert_eq!(lat.count, m.sent, "one sample per completed transaction");
        assert_eq!(w.latency.as_ref().unwrap().hist.as_ref().unwrap().decode().unwrap().len(), m.sent);
        let per_interval: u64 =
            r.intervals.iter().flat_map(|i| &i.sums).filter_map(|s| s.latency.as_ref()).map(|l| l.count).sum();
        assert_eq!(per_interval, m.sent);
        for s in &r.summary.streams {
            assert_eq!(s.latency.as_ref().unwrap().count, s.msgs.unwrap().sent);
            assert_eq!(s.msgs.unwrap().received, Some(s.msgs.unwrap().sent), "server answered each request once");
        }
        assert!(lat.min_ns > 0 && lat.min_ns <= lat.p50_ns && lat.p50_ns <= lat.max_ns);
    }
}

#[test]
fn rr_at_a_rate_sends_on_its_schedule() {
    // 200 round trips a second over 2 flows, TCP and UDP, for 2 s: 400 in all, each one counted
    // (a schedule, not back to back: loopback answers in tens of microseconds).
    for udp in [false, true] {
        let srv = Server::start("127.0.0.1:0").unwrap();
        let p = rr(|r| {
            r.flows = 2;
            r.rate = Some(netblast_spec::units::Rate(200.0));
            if udp {
                r.protocol = netblast_spec::profile::Protocol::Udp;
            }
        });
        let mut p = p;
        p.run.duration = Some("2s".parse().unwrap());
        let r = util::run(srv.addr, p);
        assert!(r.complete, "{:?}", r.errors);
        let sent = r.summary.ways[0].msgs.unwrap().sent;
        assert!((380..=402).contains(&sent), "udp {udp}: {sent} round trips at 200/s for 2 s");
    }
    // The flag, as the command line takes it.
    let srv = Server::start("127.0.0.1:0").unwrap();
    let o = util::run_cmd()
        .args(["--profile", "latency", "--rate", "50", "-t", "1s", "-J", "--target", &srv.addr.to_string()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", util::said(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let sent = r["summary"]["ways"][0]["msgs"]["sent"].as_u64().unwrap();
    assert!((45..=51).contains(&sent), "{sent} at 50/s for 1 s");
    let said = r["plan"]["profile"]["description"].as_str().unwrap();
    assert!(said.contains("1 flow at 50.0 /s in all"), "{said}");
    let ramp =
        util::run_cmd().args(["--profile", "latency", "--rate", "10..20", "--target", "127.0.0.1:9"]).output().unwrap();
    assert_eq!(ramp.status.code(), Some(2));
    assert!(util::said(&ramp).contains("an rr test runs at one rate"), "{}", util::said(&ramp));
}

#[test]
fn rr_spin_mode_runs_and_measures() {
    if usable_cpus().len() < 2 {
        crate::util::skipped("rr_spin_mode_runs_and_measures", "spinning needs two CPUs");
        return;
    }
    let srv = Server::start("127.0.0.1:0").unwrap();
    let r = util::run(srv.addr, rr(|r| r.wait = WaitMode::Spin));
    assert!(r.complete, "{:?}", r.errors);
    let w = &r.summary.ways[0];
    assert_eq!(w.latency.as_ref().unwrap().count, w.msgs.unwrap().sent);
}

#[test]
fn pps_8core_runs_here_and_says_how_many_flows() {
    let srv = Server::start("127.0.0.1:0").unwrap();
    let o = util::run_cmd()
        .args(["--profile", "pps-8core", "-t", "1", "--target", &srv.addr.to_string()])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}\n{}", String::from_utf8_lossy(&o.stderr));
    let n = usable_cpus().len();
    if n < 8 {
        assert!(out.contains(&format!("running {n} flows, one per CPU")), "{out}");
    }
    assert!(out.contains("Per client CPU") || n == 1, "{out}");
    assert!(out.contains("segments/s"), "{out}");
}

#[test]
fn pps_8core_counts_wire_packets_as_the_interface_does() {
    // pps-8core reports application messages/s and wire packets/s (both ways, from the
    // kernel's segment counters); held against the loopback counter of a namespace that
    // carries nothing else.
    if !util::netns_or_skip("pps_8core_counts_wire_packets_as_the_interface_does") {
        return;
    }
    let ns = util::NetnsPair::create().unwrap();
    let bin = env!("CARGO_BIN_EXE_netblast");
    let mut serve = ns.cmd(&ns.b, bin);
    serve.args(["serve", "--probe", "tcpinfo", "--bind", "127.0.0.1", "--port", "0"]);
    let (child, addr) = util::spawn_server_from(serve);
    let _serve = util::KillOnDrop(child);
    let before = ns.packets(&ns.b, "lo").1;
    let out = ns
        .cmd(&ns.b, bin)
        .args(["run", "--probe", "tcpinfo", "--target", &addr.to_string(), "--profile", "pps-8core"])
        .args(["--cpus", "0", "--server-cpus", "1", "-t", "2", "--json"])
        .output()
        .unwrap();
    let on_lo = ns.packets(&ns.b, "lo").1 - before;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: RunResult = serde_json::from_slice(&out.stdout).unwrap();
    let m = r.summary.ways[0].msgs.unwrap();
    let tcp = m.tcp.expect("TCP packets counted");
    let wire = tcp.wire_packets.expect("wire packets counted");
    let ratio = wire as f64 / on_lo as f64;
    assert!((0.95..=1.05).contains(&ratio), "wire packets {wire}, loopback counter {on_lo}");
    assert!(tcp.wire_packets_per_s.unwrap() > 0.0 && m.sent_per_s > 0.0);
    // One read per message at the server: it does real work, and says so in CPU time.
    let server = r.summary.cpu.server.unwrap();
    assert!(server.cpu_s() > 0.1, "the server read every message: {server:?}");
    let text = netblast_report::text::summary(&r);
    assert!(text.contains("application messages/s") && text.contains("wire packets/s"), "{text}");
}

#[test]
fn udp_at_a_bitrate_reports_a_one_percent_drop_as_one_percent() {
    udp_one_percent_drop(&[]);
}

#[test]
fn udp_with_gso_and_gro_reports_a_one_percent_drop_as_one_percent() {
    udp_one_percent_drop(&["--gsro"]);
}

/// iperf3 -u -b 100M: paced datagrams, sequence numbers, loss, reordering and jitter at the
/// receiver. 1% of the datagrams dropped by nftables in the server's namespace must read as
/// 1% +- 0.3% lost, on both the count (sent - received) and the sequence numbers.
fn udp_one_percent_drop(extra: &[&str]) {
    if !util::netns_or_skip("udp_at_a_bitrate_reports_a_one_percent_drop") {
        return;
    }
    let ns = util::NetnsPair::create().unwrap();
    let bin = env!("CARGO_BIN_EXE_netblast");
    let (_serve, addr) = ns.serve(&ns.b);
    ns.nft(&ns.b, "add table inet nbu").unwrap();
    ns.nft(&ns.b, "add chain inet nbu input { type filter hook input priority 0; }").unwrap();
    ns.nft(&ns.b, "add rule inet nbu input meta l4proto udp numgen random mod 1000 < 10 counter drop").unwrap();
    let target = format!("{}:{}", ns.addr_b, addr.port());
    let softnet = util::softnet_drops();
    let out = ns
        .cmd(&ns.a, bin)
        .args(["run", "--probe", "tcpinfo", "--target", &target, "--udp", "-b", "100M", "-t", "3", "--json"])
        .args(extra)
        .output()
        .unwrap();
    let softnet = util::softnet_drops() - softnet;
    // What the rule really dropped (its counter): packets, and bytes at the IP layer. A GSO
    // packet (veth passes them whole) is one packet of many datagrams behind one IPv4 and UDP
    // header: datagrams = (bytes - 28 x packets) / datagram size, for both kinds.
    let listing = ns.cmd(&ns.b, "nft").args(["list", "table", "inet", "nbu"]).output().unwrap();
    let listing = String::from_utf8_lossy(&listing.stdout);
    let counter = |name: &str| -> u64 {
        listing
            .split_whitespace()
            .skip_while(|w| *w != name)
            .nth(1)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no counter in {listing}"))
    };
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: RunResult = serde_json::from_slice(&out.stdout).unwrap();
    let Workload::Msgrate(p) = &r.plan.profile.workload else { panic!("not msgrate") };
    let size = p.msg_bytes.bytes();
    let (packets, bytes) = (counter("packets"), counter("bytes"));
    assert_eq!((bytes - 28 * packets) % size, 0, "{packets} packets of {bytes} bytes: whole datagrams of {size}");
    let dropped = (bytes - 28 * packets) / size;
    if extra.contains(&"--gsro") {
        assert!(p.gso && p.gro, "the offloads are in the result's profile");
        let text = netblast_report::text::full(&r);
        assert!(text.contains("sent with GSO and received with GRO"), "{text}");
    }
    let w = &r.summary.ways[0];
    let m = w.msgs.unwrap();
    let q = m.udp.and_then(|u| u.quality).expect("sequenced datagrams accounted");
    // Paced to the target: within 2% over the run.
    assert!((w.sender.bits_per_s / 100e6 - 1.0).abs() < 0.02, "sent {} bit/s", w.sender.bits_per_s);
    let pct = |lost: f64| lost * 100.0 / m.sent as f64;
    let lost = m.lost.unwrap();
    // Every lost datagram is accounted for: the rule's, and any a busy host dropped on the way
    // (the receiving socket's queue, a CPU's backlog), which the report names.
    let host = m.udp.and_then(|u| u.kernel_drops).unwrap_or(0) + softnet;
    assert!(lost >= dropped && lost <= dropped + host, "lost {lost}: rule {dropped}, socket+backlog {host}");
    let path = pct((lost - (lost - dropped).min(host)) as f64);
    // With GSO the rule draws once per packet of several datagrams (about 50 draws in 3 s, each
    // losing 1 to 6 datagrams): its share strays far more than 1% of datagrams drawn one by one
    // (1.48% seen), so only the exact count above judges netblast there. Drawn per datagram
    // (every dropped packet one datagram), the share is held to 1% +- 0.3%.
    if packets == dropped {
        assert!((0.7..=1.3).contains(&path), "the path's loss {path:.3}% (rule {dropped} of {})", m.sent);
    }
    // The receiver's sequence numbers cannot see datagrams lost after the last one it got;
    // the count (sent - received) holds them. So the two agree up to that tail: a datagram or
    // two drawn one by one, one GSO packet (up to 64 datagrams: seen, 5) with the offloads.
    // Two tail packets dropped in a row (1 in 10 000 runs) would exceed it.
    let tail = lost as i64 - q.lost;
    let most = if extra.contains(&"--gsro") { 64 } else { 2 };
    assert!(
        (0..=most).contains(&tail),
        "sequence loss {} vs count {lost} of {} datagrams: {tail} apart, the tail allows 0..={most}",
        q.lost,
        m.sent
    );
    assert_eq!(q.duplicates, 0);
    assert!(q.jitter_ns > 0.0 && q.jitter_ns < 5e6, "jitter {} ns", q.jitter_ns);
    // Every interval carries the receiver's account, and they add up to the total.
    let per_interval: i64 =
        r.intervals.iter().filter_map(|iv| iv.sums[0].msgs.as_ref().and_then(|m| m.udp).map(|u| u.lost)).sum();
    assert_eq!(per_interval, q.lost);
    let text = netblast_report::text::full(&r);
    assert!(text.contains("Lost/Total") && text.contains("jitter") && text.contains("reordered"), "{text}");
}

#[test]
fn udp_bitrate_runs_reverse_and_both_ways() {
    let srv = Server::start("127.0.0.1:0").unwrap();
    for (dir, ways) in [
        ("-R", vec![netblast_spec::profile::Way::Down]),
        ("--bidir", vec![netblast_spec::profile::Way::Up, netblast_spec::profile::Way::Down]),
    ] {
        let o = util::run_cmd()
            .args(["--target", &srv.addr.to_string(), "-u", "-b", "20M", "-l", "1000", "-t", "1", "--json", dir])
            .output()
            .unwrap();
        assert!(o.status.success(), "{dir}: {}", String::from_utf8_lossy(&o.stderr));
        let r: RunResult = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(r.summary.ways.iter().map(|w| w.way).collect::<Vec<_>>(), ways, "{dir}");
        for w in &r.summary.ways {
            let m = w.msgs.unwrap();
            assert_eq!(m.received, Some(m.sent), "{dir} {:?}: loopback loses nothing", w.way);
            let q = m.udp.and_then(|u| u.quality).unwrap();
            assert_eq!((q.lost, q.received), (0, m.sent), "{dir} {:?}", w.way);
            assert!((w.sender.bits_per_s / 20e6 - 1.0).abs() < 0.03, "{dir}: {} bit/s", w.sender.bits_per_s);
        }
    }
}

#[test]
fn a_server_on_the_clients_kernel_keeps_its_end_off_the_clients_cpu() {
    // Two network namespaces on one kernel (pods on one node): no loopback address says the
    // ends share CPUs, their boot id does. Without it both ends of an rr flow pin to the
    // same core and a busy-polling pair takes turns by scheduler tick (4 ms round trips).
    if !util::netns_or_skip("a_server_on_the_clients_kernel_keeps_its_end_off_the_clients_cpu") {
        return;
    }
    if usable_cpus().len() < 2 {
        eprintln!("skipping: one usable CPU");
        return;
    }
    let ns = util::NetnsPair::create().unwrap();
    let bin = env!("CARGO_BIN_EXE_netblast");
    let (_serve, addr) = ns.serve(&ns.b);
    let target = format!("{}:{}", ns.addr_b, addr.port());
    let out = ns
        .cmd(&ns.a, bin)
        .args(["run", "--probe", "tcpinfo", "--target", &target, "--profile", "latency", "-t", "1", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: RunResult = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r.plan.server_cpus.first(), r.plan.client_cpus.first(), "the plan asks for the client's CPU");
    let s = &r.summary.streams[0];
    let (mine, theirs) = (s.client_cpu.expect("client pinned"), s.server_cpu.expect("server pinned"));
    assert_ne!(mine, theirs, "the server's end moved off the client's CPU");
    assert_eq!(r.streams[0].server_cpu, Some(theirs), "the stream names where the server's end ran");
    let said = r
        .warnings
        .iter()
        .any(|w| w.message.contains("the same boot id") && w.message.contains(&format!("CPU {theirs}")));
    assert!(said, "{:?}", r.warnings);
    // The ends no longer take turns on one core: round trips in microseconds, not ticks.
    let p50 = r.summary.ways[0].latency.as_ref().map(|l| l.summary.p50_ns).unwrap_or(u64::MAX);
    assert!(p50 < 1_000_000, "rr p50 {p50} ns");
}
