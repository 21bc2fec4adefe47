//! The eBPF probe. These tests need root and a binary built with the probe; without either
//! they print SKIP and the reason. They take a lock so that no two of them load programs at
//! once (the cleanup test counts what is loaded).

use crate::util::{self, Server, bin};
use netblast_probe::{Probe, ProbeMode};
use netblast_spec::profile::Direction;
use netblast_spec::{Profile, RunResult};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

static EBPF: Mutex<()> = Mutex::new(());

/// The lock, or `None` (after printing why) when eBPF tests cannot run here.
fn ebpf_or_skip(test: &str) -> Option<MutexGuard<'static, ()>> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        crate::util::skipped(test, "needs root to load eBPF programs");
        return None;
    }
    if !netblast_probe::ebpf::built_in() {
        crate::util::skipped(test, &format!("this build has no eBPF probe ({})", netblast_probe::ebpf::BUILD));
        return None;
    }
    // The traffic lane first, then the probe's lock: one order for every test that takes both.
    crate::util::lane();
    Some(EBPF.lock().unwrap_or_else(|e| e.into_inner()))
}

fn open_ebpf() -> Probe {
    Probe::open(ProbeMode::Ebpf).expect("root and a probe built in: eBPF must load")
}

fn run_with(addr: std::net::SocketAddr, p: Profile, probe: &Probe) -> RunResult {
    util::run_with(addr, p, probe)
}

/// Every stream: eBPF and TCP_INFO of the same socket agree (RTT within 25% or 20 us,
/// retransmitted segments exactly).
fn assert_agree(r: &RunResult) {
    for s in &r.summary.streams {
        let e = s.tcp.unwrap_or_else(|| panic!("stream {}: no eBPF figures", s.id));
        let t = s.tcp_info.unwrap_or_else(|| panic!("stream {}: no TCP_INFO cross-check", s.id));
        let diff = (e.rtt_us as f64 - t.rtt_us as f64).abs();
        assert!(
            diff <= (0.25 * t.rtt_us as f64).max(20.0),
            "stream {}: eBPF srtt {} us vs TCP_INFO {} us",
            s.id,
            e.rtt_us,
            t.rtt_us
        );
        assert_eq!(e.retrans_segs, t.retrans_segs, "stream {}: retransmitted segments", s.id);
        assert!(s.kernel_rtt.as_ref().is_some_and(|k| k.count > 0), "stream {}: kernel RTT histogram", s.id);
    }
}

#[test]
fn ebpf_and_tcp_info_agree_on_the_same_sockets() {
    let Some(_lock) = ebpf_or_skip("ebpf_and_tcp_info_agree_on_the_same_sockets") else { return };
    let probe = open_ebpf();
    let srv = Server::start_with("127.0.0.1:0", probe.clone()).unwrap();
    for direction in [Direction::Forward, Direction::Reverse] {
        let p = util::profile(|p| {
            let b = p.workload.bulk_mut().unwrap();
            b.flows = 2;
            b.direction = direction;
        });
        let r = run_with(srv.addr, p, &probe);
        assert!(r.complete, "{:?}", r.errors);
        assert_eq!(r.probe.tcp_source, "ebpf");
        assert_eq!(r.server_probe.as_ref().unwrap().tcp_source, "ebpf");
        assert_agree(&r);
        let w = &r.summary.ways[0];
        assert!(w.kernel_rtt.as_ref().is_some_and(|d| d.hist.is_some()));
    }
    drop(srv);
    assert_eq!(probe.ebpf().unwrap().registered(), 0, "every watched socket was forgotten");
}

#[test]
fn http_connections_get_the_kernel_rtt_distribution() {
    let Some(_lock) = ebpf_or_skip("http_connections_get_the_kernel_rtt_distribution") else { return };
    let probe = open_ebpf();
    // As an agent's probe is: attached only while a test holds it (a fleet's HTTP part runs so).
    probe.attach_on_demand();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    crate::util::lane();
    let responder = netblast_agent::Background::http(listener, None, Default::default(), 2).unwrap();
    let (mut p, _) = Profile::load("http-max").unwrap();
    p.run.duration = None;
    let h = p.workload.http_mut().unwrap();
    h.connections = 4;
    h.requests = Some(2000);
    let r = run_with(responder.addr(), p, &probe);
    assert!(r.complete, "{:?}", r.errors);
    assert_eq!(r.probe.tcp_source, "ebpf");
    let h = r.summary.http.as_ref().unwrap();
    let tcp = h.tcp.as_ref().expect("kernel TCP statistics");
    assert_eq!(tcp.connections, 4);
    let k = tcp.kernel_rtt.as_ref().expect("eBPF RTT distribution of the HTTP connections");
    // One sample per ACK that acknowledged new data: at most one per segment sent, and every
    // request's segment is acknowledged (by its response).
    assert!(k.count >= h.completed / 2 && k.count <= tcp.segs_out, "{} samples, {} segments", k.count, tcp.segs_out);
    // A request's kernel RTT ends when its response arrives, inside the request's latency.
    assert!(
        k.p50_ns as f64 <= h.latency.p50_ns as f64 * 1.05,
        "kernel RTT p50 {} ns vs request latency p50 {} ns",
        k.p50_ns,
        h.latency.p50_ns
    );
    assert!(tcp.kernel_rtt.as_ref().is_some_and(|d| d.hist.is_some()));

    // A connection per request: each connection's own figures from TCP_INFO (the result says
    // why), the kernel RTT samples of all of them from one eBPF group their worker threads were named in.
    let (mut p, _) = Profile::load("http-max").unwrap();
    p.run.duration = None;
    let h = p.workload.http_mut().unwrap();
    h.connections = 4;
    h.requests = Some(200);
    h.keepalive = false;
    let groups_before = probe.ebpf().unwrap().groups();
    let r = run_with(responder.addr(), p, &probe);
    assert!(r.complete, "{:?}", r.errors);
    assert_eq!(r.probe.tcp_source, "tcp_info");
    assert!(r.probe.fallback_reason.as_deref().is_some_and(|w| w.contains("eBPF group")), "{:?}", r.probe);
    let h = r.summary.http.as_ref().unwrap();
    let tcp = h.tcp.as_ref().unwrap();
    assert_eq!(tcp.connections, 200);
    let k = tcp.kernel_rtt.as_ref().expect("kernel RTT of the tagged connections");
    // Every request's segment is acknowledged by its response: one sample at least per
    // connection (the handshake's and the request's), never more than the segments sent.
    assert!(k.count >= 200 && k.count <= tcp.segs_out, "{} samples, {} segments", k.count, tcp.segs_out);
    assert!(k.p50_ns as f64 <= h.latency.p50_ns as f64 * 1.05, "{} vs {}", k.p50_ns, h.latency.p50_ns);
    assert_eq!(probe.ebpf().unwrap().groups(), groups_before, "the group is removed at the end");
    assert_eq!(probe.ebpf().unwrap().registered(), 0, "no socket was registered one by one");
}

/// Answers each 4-byte request on `c` with "pong" until the peer closes.
fn pong_each_ping(mut c: std::net::TcpStream) {
    let mut b = [0u8; 4];
    while std::io::Read::read_exact(&mut c, &mut b).is_ok() {
        std::io::Write::write_all(&mut c, b"pong").unwrap();
    }
}

/// `n` request-response exchanges of 4 bytes on `c`.
fn ping(c: &mut std::net::TcpStream, n: usize) {
    let mut b = [0u8; 4];
    for _ in 0..n {
        std::io::Write::write_all(c, b"ping").unwrap();
        std::io::Read::read_exact(c, &mut b).unwrap();
    }
}

/// Kernel RTT samples of each end of one connection on `port`'s listener after 50 exchanges,
/// (client, server): `None` for an end the kernel program never reported.
fn rtt_of_both_ends(probe: &Probe, listener: &std::net::TcpListener) -> (Option<u64>, Option<u64>) {
    use std::os::fd::AsRawFd;
    let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    let (cw, sw) = (probe.watch(client.as_raw_fd()), probe.watch(server.as_raw_fd()));
    let pong = std::thread::spawn(move || pong_each_ping(server));
    ping(&mut client, 50);
    let counts = (cw.rtt_histogram().map(|h| h.len()), sw.rtt_histogram().map(|h| h.len()));
    drop(client);
    pong.join().unwrap();
    counts
}

#[test]
fn a_port_is_watched_on_its_own_side_only() {
    let Some(_lock) = ebpf_or_skip("a_port_is_watched_on_its_own_side_only") else { return };
    let probe = open_ebpf();
    // A server watches its listener: the connections it accepts report, not the sockets a
    // client on the same host connects from (whose callbacks would cost that client a program
    // run per acknowledgement, which it did not ask for).
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    probe.watch_local_port(listener.local_addr().unwrap().port()).unwrap();
    let (client, server) = rtt_of_both_ends(&probe, &listener);
    assert!(client.is_none(), "the server's watch turned the client's callbacks on: {client:?} RTT samples");
    assert!(server.is_some_and(|n| n >= 25), "the server's own connection: {server:?} RTT samples");
    // A client watches its server's port: its own socket reports, not the accepting one.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    probe.watch_peer_port(listener.local_addr().unwrap().port()).unwrap();
    let (client, server) = rtt_of_both_ends(&probe, &listener);
    assert!(client.is_some_and(|n| n >= 25), "the client's own connection: {client:?} RTT samples");
    assert!(server.is_none(), "the client's watch turned the server's callbacks on: {server:?} RTT samples");
    // One probe doing both (a client and a server in one process): both ends report.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    probe.watch_local_port(port).unwrap();
    probe.watch_peer_port(port).unwrap();
    let (client, server) = rtt_of_both_ends(&probe, &listener);
    assert!(client.is_some() && server.is_some(), "{client:?} {server:?}");
    assert_eq!(probe.ebpf().unwrap().registered(), 0, "every watched socket was forgotten");
}

#[test]
fn only_a_group_thread_s_connections_count_in_it() {
    let Some(_lock) = ebpf_or_skip("only_a_group_thread_s_connections_count_in_it") else { return };
    let probe = open_ebpf();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let Some((watch, tag)) = probe.thread_group() else {
        crate::util::skipped(
            "only_a_group_thread_s_connections_count_in_it",
            "this kernel's sock_ops cannot read the thread",
        );
        return;
    };
    let server = std::thread::spawn(move || {
        // Echo each connection's five requests, then take the next.
        for c in listener.incoming().take(9) {
            pong_each_ping(c.unwrap());
        }
    });
    let exchange = move || ping(&mut std::net::TcpStream::connect(addr).unwrap(), 5);
    // Another thread's connections to the same port are not the group's.
    for _ in 0..3 {
        exchange();
    }
    assert_eq!(watch.group_connections(), Some((0, 0)));
    let t = tag.clone();
    std::thread::spawn(move || {
        let joined = t.join_thread().unwrap();
        for _ in 0..4 {
            exchange();
        }
        drop(joined);
        // Once it has left, its connections are not the group's either.
        for _ in 0..2 {
            exchange();
        }
    })
    .join()
    .unwrap();
    server.join().unwrap();
    assert_eq!(watch.group_connections(), Some((4, 0)));
    let h = watch.rtt_histogram().expect("RTT samples of the group's connections");
    assert!(h.len() >= 4 * 5, "{} samples for 20 acknowledged requests", h.len());
}

#[test]
fn connections_sharing_a_local_port_both_count() {
    // The program finds a thread's connection by its local port's entry (cookie-checked);
    // a second live connection from the same port, to another server, is kept on the socket
    // instead. Both are the group's, and nothing is counted twice.
    let Some(_lock) = ebpf_or_skip("connections_sharing_a_local_port_both_count") else { return };
    let probe = open_ebpf();
    let Some((watch, tag)) = probe.thread_group() else {
        crate::util::skipped(
            "connections_sharing_a_local_port_both_count",
            "this kernel's sock_ops cannot read the thread",
        );
        return;
    };
    let echo = || {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let h = std::thread::spawn(move || pong_each_ping(l.accept().unwrap().0));
        (addr, h)
    };
    let ((one, h1), (two, h2)) = (echo(), echo());
    std::thread::spawn(move || {
        let _joined = tag.join_thread().unwrap();
        let from = |port: u16| {
            let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            s.set_reuse_address(true).unwrap();
            s.bind(&std::net::SocketAddr::from(([127, 0, 0, 1], port)).into()).unwrap();
            s
        };
        let a = from(0);
        let port = a.local_addr().unwrap().as_socket().unwrap().port();
        a.connect(&one.into()).unwrap();
        let b = from(port);
        b.connect(&two.into()).unwrap();
        let (mut a, mut b): (std::net::TcpStream, std::net::TcpStream) = (a.into(), b.into());
        for _ in 0..5 {
            ping(&mut a, 1);
            ping(&mut b, 1);
        }
    })
    .join()
    .unwrap();
    h1.join().unwrap();
    h2.join().unwrap();
    assert_eq!(watch.group_connections(), Some((2, 0)));
    let h = watch.rtt_histogram().expect("RTT samples of both connections");
    assert!(h.len() >= 2 * 5, "{} samples for 10 acknowledged requests on 2 connections", h.len());
}

#[test]
fn the_program_s_run_time_is_the_run_s_own() {
    // One probe serves many runs (an agent's, a bench's): each result counts the program's
    // runs during that run, not since it was loaded.
    let Some(_lock) = ebpf_or_skip("the_program_s_run_time_is_the_run_s_own") else { return };
    let probe = Probe::open_with(ProbeMode::Ebpf, true).expect("root and a probe built in: eBPF must load");
    let srv = Server::start("127.0.0.1:0").unwrap();
    let p = || util::profile(|p| p.run.duration = Some(netblast_spec::units::Dur(Duration::from_millis(500))));
    let runs = |r: &RunResult| (r.probe.kernel_run_ns.unwrap(), r.probe.kernel_runs.unwrap());
    let (first, second) = (runs(&run_with(srv.addr, p(), &probe)), runs(&run_with(srv.addr, p(), &probe)));
    let total = probe.run_stats().unwrap();
    assert!(first.1 > 0 && second.1 > 0 && first.0 > 0 && second.0 > 0, "{first:?} {second:?}");
    assert!(first.1 + second.1 <= total.1, "runs {first:?} + {second:?} within the {total:?} since the load");
    assert!(second.1 < total.1 && second.0 < total.0, "the second run's count excludes the first's");
}

#[test]
fn unrelated_traffic_adds_nothing() {
    let Some(_lock) = ebpf_or_skip("unrelated_traffic_adds_nothing") else { return };
    if Command::new("iperf3").arg("--version").output().is_err() {
        crate::util::skipped("unrelated_traffic_adds_nothing", "iperf3 is not installed");
        return;
    }
    let probe = open_ebpf();
    let srv = Server::start_with("127.0.0.1:0", probe.clone()).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string();
    let _iperf_s =
        util::KillOnDrop(Command::new("iperf3").args(["-s", "-1", "-p", &port]).stdout(Stdio::null()).spawn().unwrap());
    std::thread::sleep(Duration::from_millis(300));
    let mut iperf_c = util::KillOnDrop(
        Command::new("iperf3")
            .args(["-c", "127.0.0.1", "-p", &port, "-t", "3"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(300));
    let r = run_with(srv.addr, util::profile(|p| p.workload.bulk_mut().unwrap().flows = 2), &probe);
    let _ = iperf_c.0.wait();
    assert!(r.complete, "{:?}", r.errors);
    assert_agree(&r);
    for s in &r.summary.streams {
        let (e, t) = (s.tcp.unwrap(), s.tcp_info.unwrap());
        // The probe's counters are this socket's own: never more than the kernel's for it.
        assert!(e.segs_out <= t.segs_out && t.segs_out - e.segs_out <= t.segs_out / 100 + 2, "{e:?} vs {t:?}");
        assert!(e.bytes_acked <= t.bytes_acked);
        // And the bytes they saw acknowledged are this stream's (its data, the 32-byte stream
        // header and 16-byte tag, and the SYN and FIN sequence numbers), not iperf3's.
        let wire_bytes =
            s.sender.bytes + (netblast_wire::wire::HEADER_LEN + netblast_wire::wire::STREAM_TAG_LEN) as u64 + 2;
        assert!(e.bytes_acked <= wire_bytes, "{} acked > {wire_bytes} sent", e.bytes_acked);
    }
    drop(srv);
    assert_eq!(probe.ebpf().unwrap().registered(), 0);
}

/// Names programs of netblast currently loaded in the kernel.
fn loaded_programs() -> Vec<String> {
    let out = Command::new("bpftool").args(["prog", "show"]).output().expect("bpftool");
    String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.contains("netblast")).map(str::to_string).collect()
}

fn attached_to_cgroup() -> Vec<String> {
    let Some(root) = netblast_probe::ebpf::cgroup2_root() else { return vec![] };
    let out = Command::new("bpftool").args(["cgroup", "show"]).arg(root).output().expect("bpftool");
    String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.contains("netblast")).map(str::to_string).collect()
}

fn signal(child: &std::process::Child, sig: libc::c_int) {
    // SAFETY: kill has no memory-safety preconditions; the pid is our own child's.
    unsafe { libc::kill(child.id() as libc::pid_t, sig) };
}

#[test]
fn nothing_stays_attached_after_interrupt_or_kill() {
    let Some(_lock) = ebpf_or_skip("nothing_stays_attached_after_interrupt_or_kill") else { return };
    if Command::new("bpftool").arg("version").output().is_err() {
        crate::util::skipped("nothing_stays_attached_after_interrupt_or_kill", "bpftool is not installed");
        return;
    }
    // Programs of netblast processes outside this test (a `serve` left running on the host)
    // are not this test's business: compare against what was loaded before.
    let before_progs = loaded_programs();
    let before_links = attached_to_cgroup();
    for sig in [libc::SIGINT, libc::SIGKILL] {
        let (server, addr) = util::spawn_server_with(&["--probe", "ebpf"]);
        let mut server = util::KillOnDrop(server);
        // An idle server has its program loaded, not attached: it runs for no connection. (It
        // says where it listens before it loads the program.)
        let idle = || loaded_programs().len() == before_progs.len() + 1 && attached_to_cgroup() == before_links;
        let t = std::time::Instant::now();
        while !idle() && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(
            idle(),
            "an idle server loads its program and attaches nothing: {:?} {:?}",
            loaded_programs(),
            attached_to_cgroup()
        );
        let client = bin()
            .args(["run", "--target", &addr.to_string(), "-t", "20", "--probe", "ebpf", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(1500));
        assert_eq!(loaded_programs().len(), before_progs.len() + 2, "client and server each attached one program");
        assert_eq!(attached_to_cgroup().len(), before_links.len() + 2);
        signal(&client, sig);
        let out = util::wait_output(client, Duration::from_secs(30));
        if sig == libc::SIGINT {
            let r: RunResult = serde_json::from_slice(&out.stdout).unwrap();
            assert!(!r.complete && r.errors.iter().any(|e| e.message.contains("interrupted")));
            assert!(r.summary.ways[0].sender.bytes > 0, "measured bytes are kept");
        }
        // The test over (the client stopped or gone), the server detaches its program again.
        let t = std::time::Instant::now();
        while attached_to_cgroup() != before_links && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(attached_to_cgroup(), before_links, "after signal {sig}: the server idles attached");
        assert_eq!(loaded_programs().len(), before_progs.len() + 1, "and keeps its program loaded");
        signal(&server.0, libc::SIGTERM);
        let _ = server.0.wait();
        // Links are released when their owners' descriptors close; give the kernel a moment.
        let t = std::time::Instant::now();
        let settled =
            || loaded_programs().len() <= before_progs.len() && attached_to_cgroup().len() <= before_links.len();
        while !settled() && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(settled(), "after signal {sig}: {:?} {:?}", loaded_programs(), attached_to_cgroup());
    }
}

#[test]
fn induced_loss_is_seen_and_matches_the_kernel() {
    let Some(_lock) = ebpf_or_skip("induced_loss_is_seen_and_matches_the_kernel") else { return };
    if Command::new("nft").arg("--version").output().is_err() {
        crate::util::skipped("induced_loss_is_seen_and_matches_the_kernel", "nft is not installed");
        return;
    }
    let ns = util::NetnsPair::create().unwrap();
    // nsenter switches the network namespace only (ip netns exec would also hide the cgroup v2
    // mount the probe attaches to).
    let _server = util::KillOnDrop(
        Command::new("nsenter")
            .arg(format!("--net=/run/netns/{}", ns.b))
            .args([env!("CARGO_BIN_EXE_netblast"), "serve", "--bind", &ns.addr_b.to_string()])
            .args(["--port", "5210", "--probe", "ebpf", "--open"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(500));
    let run = |secs: &str, extra: &[&str]| -> RunResult {
        let out = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{}", ns.a))
            .args([env!("CARGO_BIN_EXE_netblast"), "run", "--target"])
            .arg(format!("{}:5210", ns.addr_b))
            .args(["-t", secs, "--probe", "ebpf", "--flows", "2", "--json"])
            .args(extra)
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
    };
    // Retransmissions of the control connection, counted by the namespace but not the test.
    const CONTROL: u64 = 3;
    // 1% of the packets arriving at the server dropped at random.
    ns.nft(&ns.b, "add table inet nbt").unwrap();
    ns.nft(&ns.b, "add chain inet nbt input { type filter hook input priority 0; }").unwrap();
    ns.nft(&ns.b, "add rule inet nbt input tcp dport 5210 numgen random mod 100 < 1 counter drop").unwrap();
    let lossy_before = ns.tcp_snmp(&ns.a, "RetransSegs").unwrap();
    let lossy = run("3", &[]);
    assert!(lossy.complete, "{:?}", lossy.errors);
    assert_eq!(lossy.probe.tcp_source, "ebpf");
    let retransmits = lossy.summary.ways[0].retransmits.expect("eBPF counts retransmissions");
    // The namespace's own counter (the control connection's few beside the test's).
    let kernel = ns.tcp_snmp(&ns.a, "RetransSegs").unwrap() - lossy_before;
    assert!(
        retransmits <= kernel && kernel - retransmits <= CONTROL,
        "1% loss: the probe counted {retransmits} retransmissions, the namespace's kernel {kernel}"
    );
    assert!(retransmits > 0, "1% loss causes retransmissions");
    assert_agree(&lossy);
    // Every segment the rule dropped is sent again: the retransmissions the receiver did not
    // report as duplicates (DSACK) cover most of the rule's drops. (On a busy host the sender
    // also retransmits spuriously, which the receiver reports; how many varies with the load,
    // so only the real ones are held against the rule.)
    let dropped = ns.nft_counter(&ns.b, &["table", "inet", "nbt"]).unwrap().packets;
    let spurious = lossy.summary.ways[0].spurious_retransmits.expect("TCP_INFO reports DSACKs on this kernel");
    let real = retransmits.saturating_sub(spurious);
    eprintln!("1% loss: {dropped} dropped by the rule, {retransmits} retransmissions, {spurious} DSACKed");
    assert!(dropped > 0, "the rule dropped nothing");
    assert!(
        real * 2 >= dropped,
        "{dropped} segments dropped by the rule, {retransmits} retransmitted, {spurious} of them DSACKed"
    );

    ns.nft(&ns.b, "delete table inet nbt").unwrap();
    // Without loss. The path can still make TCP retransmit: veth delivers through per-CPU
    // backlogs, so a sender that moves between CPUs reorders its own packets, and a receiver
    // starved of CPU for a few milliseconds fires a tail-loss probe. Those retransmissions are
    // real (the kernel sent the segments again) and spurious; how many depends on the load
    // beside the test (0 on a quiet host, thousands in CI beside a compile). So the oracle is
    // the client namespace's own counter (`Tcp: RetransSegs`, segments, as the probe counts):
    // the probe counts every retransmission the kernel made on the test's connections, and
    // nothing else. The namespace's counter also holds the control connection's, a few at most.
    // The receiver's duplicate reports (DSACK) are a floor, not a match: one DSACK block per
    // acknowledgement, so duplicates arriving together are reported as one.
    let (kernel_before, dsacked_before) =
        (ns.tcp_snmp(&ns.a, "RetransSegs").unwrap(), ns.tcp_ext(&ns.a, "TCPDSACKRecvSegs").unwrap());
    let clean = run("2", &["--window", "256K"]);
    assert!(clean.complete, "{:?}", clean.errors);
    assert_agree(&clean);
    let retrans = clean.summary.ways[0].retransmits.expect("eBPF counts retransmissions");
    let kernel = ns.tcp_snmp(&ns.a, "RetransSegs").unwrap() - kernel_before;
    let dsacked = ns.tcp_ext(&ns.a, "TCPDSACKRecvSegs").unwrap() - dsacked_before;
    let reported = clean.summary.ways[0].spurious_retransmits.expect("TCP_INFO reports DSACKs on this kernel");
    eprintln!(
        "without loss: {retrans} retransmissions counted, {kernel} by the namespace's kernel, {dsacked} DSACKed, \
         {reported} reported spurious"
    );
    assert!(reported <= retrans && reported <= dsacked, "{reported} spurious of {retrans}, {dsacked} DSACKed");
    assert!(
        retrans <= kernel && kernel - retrans <= CONTROL,
        "no loss: the probe counted {retrans} retransmissions, the namespace's kernel {kernel}"
    );
}

#[test]
fn cps_connections_are_one_kernel_group_per_flow() {
    let Some(_lock) = ebpf_or_skip("cps_connections_are_one_kernel_group_per_flow") else { return };
    let probe = open_ebpf();
    let srv = Server::start("127.0.0.1:0").unwrap();
    let (mut p, _) = Profile::load("cps").unwrap();
    p.run.duration = Some("1s".parse().unwrap());
    p.workload.cps_mut().unwrap().flows = Some(2);
    let r = run_with(srv.addr, p, &probe);
    assert!(r.complete, "{:?}", r.errors);
    let m = r.summary.ways[0].msgs.unwrap();
    assert!(m.sent > 50);
    // Every connection's request is acknowledged (by its response): one RTT sample at least,
    // all of them in the flow's kernel group, none registered from user space.
    let mut samples = 0;
    for s in &r.summary.streams {
        let k = s.kernel_rtt.as_ref().unwrap_or_else(|| panic!("flow {}: no kernel RTT", s.id));
        samples += k.count;
    }
    assert!(samples >= m.sent, "{samples} kernel RTT samples for {} connections", m.sent);
    assert_eq!(m.conns.unwrap().syn_retransmits, Some(0), "no SYN is lost on loopback");
    assert!(m.tcp.is_none(), "no one socket's segments stand for the flow's");
    let e = probe.ebpf().unwrap();
    assert_eq!((e.groups(), e.registered()), (0, 0), "groups and sockets are forgotten at the end");
    let text = netblast_report::text::full(&r);
    assert!(text.contains("Kernel RTT of the connections (eBPF"), "{text}");
}

/// The capabilities the Kubernetes manifests grant the agents, read from the DaemonSet.
fn manifest_capabilities() -> Vec<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/k8s/agents-daemonset.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    let line = text.lines().find_map(|l| l.trim().strip_prefix("add: [")).expect("capabilities: add: [...]");
    line.trim_end_matches(']').split(',').map(|c| c.trim().to_lowercase()).collect()
}

/// `serve`'s line on where TCP statistics come from, run with only `caps` in its bounding set.
fn statistics_with(caps: &[String]) -> String {
    let set = std::iter::once("-all".to_string()).chain(caps.iter().map(|c| format!("+{c}"))).collect::<Vec<_>>();
    let mut child = Command::new("setpriv")
        .arg(format!("--bounding-set={}", set.join(",")))
        .args(["--inh-caps=-all", "--"])
        .arg(env!("CARGO_BIN_EXE_netblast"))
        .args(["serve", "--port", "0", "--bind", "127.0.0.1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let readers: [Box<dyn std::io::Read + Send>; 2] =
        [Box::new(child.stdout.take().unwrap()), Box::new(child.stderr.take().unwrap())];
    for r in readers {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in std::io::BufRead::lines(std::io::BufReader::new(r)).map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
    }
    drop(tx);
    let mut seen = Vec::new();
    let found = loop {
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(l) if l.contains("TCP statistics from") => break Some(l),
            Ok(l) => seen.push(l),
            Err(_) => break None,
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    found.unwrap_or_else(|| panic!("no statistics line: {seen:?}"))
}

#[test]
fn the_manifests_capabilities_load_the_probe_and_each_is_needed() {
    let Some(_lock) = ebpf_or_skip("the_manifests_capabilities_load_the_probe_and_each_is_needed") else { return };
    if Command::new("setpriv").arg("--version").output().is_err() {
        crate::util::skipped("the_manifests_capabilities_load_the_probe_and_each_is_needed", "no setpriv (util-linux)");
        return;
    }
    let caps = manifest_capabilities();
    assert_eq!(caps, ["bpf", "perfmon", "net_admin"], "the manifests' set changed: test it");
    let line = statistics_with(&caps);
    assert!(line.ends_with("TCP statistics from ebpf"), "with {caps:?}: {line}");
    for i in 0..caps.len() {
        let fewer: Vec<String> = caps.iter().enumerate().filter(|&(j, _)| j != i).map(|(_, c)| c.clone()).collect();
        let line = statistics_with(&fewer);
        assert!(
            line.contains("TCP statistics from tcp_info (") && line.contains("CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN"),
            "without {}: {line}",
            caps[i]
        );
    }
}
