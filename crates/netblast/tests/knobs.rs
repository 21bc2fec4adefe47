//! The knobs firewall, load-balancer and QoS tests turn (issue 54), each checked by the kernel:
//! `--dscp` by nftables counters of the marked and unmarked packets each namespace receives,
//! `--cport` by `ss` and by nftables counting the SYNs from outside the range, `-B` with
//! several addresses by the server's own view of its peers (`ss`).

use crate::util::{self, InPair, NetnsPair};
use netblast_spec::result::RunResult;

/// `netblast run ARGS --json` in namespace a, its result.
fn run_in(ns: &NetnsPair, args: &[&str]) -> RunResult {
    let out = ns
        .cmd(&ns.a, env!("CARGO_BIN_EXE_netblast"))
        .args(["run", "--probe", "tcpinfo", "--json", "-i", "1s"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Counter `name` of table `inet nbk` in namespace `ns`: (packets, bytes).
fn counter(ns: &NetnsPair, n: &str, name: &str) -> (u64, u64) {
    let out = ns.cmd(n, "nft").args(["-j", "list", "counter", "inet", "nbk", name]).output().unwrap();
    assert!(out.status.success(), "nft list counter {name}: {}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = v["nftables"].as_array().unwrap().iter().find_map(|e| e.get("counter")).expect("a counter");
    (c["packets"].as_u64().unwrap(), c["bytes"].as_u64().unwrap())
}

/// What namespace `n` received in a run, packets (and bytes where said).
#[derive(Debug)]
struct Seen {
    /// Marked EF: packets, bytes.
    marked: (u64, u64),
    /// Marked AF41.
    af41: u64,
    /// Every packet.
    all: u64,
    /// Not EF: SYN-ACKs.
    synack: u64,
    /// Not EF: the rest from the server's data port.
    from_data_port: u64,
    /// Not EF: the rest (other ports, UDP).
    elsewhere: u64,
}

fn seen(ns: &NetnsPair, n: &str) -> Seen {
    Seen {
        marked: counter(ns, n, "marked"),
        af41: counter(ns, n, "af41").0,
        all: counter(ns, n, "every").0,
        synack: counter(ns, n, "synack").0,
        from_data_port: counter(ns, n, "data_port").0,
        elsewhere: counter(ns, n, "elsewhere").0,
    }
}

/// Counts, in namespace `n`'s input from its veth, EF-marked packets and unmarked ones (split
/// as [`Seen`] says), `data_port` being the server's.
fn count_marks(ns: &NetnsPair, n: &str, data_port: u16) {
    let dev = format!("{n}v");
    ns.nft(n, "add table inet nbk").unwrap();
    ns.nft(n, "add chain inet nbk input { type filter hook input priority 0; }").unwrap();
    for c in ["every", "marked", "af41", "synack", "data_port", "elsewhere"] {
        ns.nft(n, &format!("add counter inet nbk {c}")).unwrap();
    }
    let rules = [
        "counter name every".to_string(),
        "ip dscp ef counter name marked".into(),
        "ip dscp af41 counter name af41".into(),
        "ip dscp != ef tcp flags & (syn | ack) == syn | ack counter name synack".into(),
        format!("ip dscp != ef tcp flags & (syn | ack) != syn | ack th sport {data_port} counter name data_port"),
        format!("ip dscp != ef tcp flags & (syn | ack) != syn | ack th sport != {data_port} counter name elsewhere"),
        "ip dscp != ef meta l4proto != tcp counter name elsewhere".into(),
    ];
    for r in rules {
        ns.nft(n, &format!("add rule inet nbk input iifname {dev} {r}")).unwrap();
    }
}

fn reset(ns: &NetnsPair) {
    for n in [&ns.a, &ns.b] {
        let st = ns.cmd(n, "nft").args(["reset", "counters", "table", "inet", "nbk"]).output().unwrap();
        assert!(st.status.success());
    }
}

/// Bytes a way of the run carried (the receiver's count).
fn bytes(r: &RunResult, way: netblast_spec::profile::Way) -> u64 {
    r.summary.ways.iter().filter(|w| w.way == way).map(|w| w.receiver.as_ref().unwrap_or(&w.sender).bytes).sum()
}

#[test]
fn dscp_marks_every_packet_of_every_kind_both_ways() {
    if !util::netns_or_skip("dscp_marks_every_packet_of_every_kind_both_ways") {
        return;
    }
    let ns = NetnsPair::create().unwrap();
    // The server has no mark of its own: what it sends is marked by the test's --dscp alone.
    let (_serve, addr) = ns.serve(&ns.b);
    let target = format!("{}:{}", ns.addr_b, addr.port());
    count_marks(&ns, &ns.a, addr.port());
    count_marks(&ns, &ns.b, 0);
    use netblast_spec::profile::Way::{Down, Up};
    for (what, args) in [
        ("bulk both ways", vec!["--bidir"]),
        ("UDP both ways", vec!["-u", "-b", "50M", "--bidir"]),
        ("rr", vec!["--profile", "latency"]),
        ("cps", vec!["--profile", "cps", "-P", "2"]),
    ] {
        reset(&ns);
        let r = run_in(&ns, &[&["--target", target.as_str(), "-t", "1", "--dscp", "EF"], &args[..]].concat());
        assert_eq!(r.plan.profile.tcp.dscp.map(|d| d.value()), Some(46), "{what}: the mark is kept in the result");
        let (to_server, to_client) = (seen(&ns, &ns.b), seen(&ns, &ns.a));
        // Client to server: every packet, the SYNs and the control connection included.
        assert!(to_server.marked.0 > 0, "{what}: {to_server:?}");
        assert_eq!(
            (to_server.synack, to_server.from_data_port, to_server.elsewhere),
            (0, 0, 0),
            "{what}: the client sent unmarked packets: {to_server:?}"
        );
        // Server to client: every packet but the data port's SYN-ACKs (its listener is shared
        // by every test) and the control connection's few before the set-up names the test.
        assert_eq!(to_client.elsewhere, 0, "{what}: unmarked packets from a flow's own port: {to_client:?}");
        assert!(to_client.from_data_port <= 6, "{what}: unmarked packets after the set-up: {to_client:?}");
        assert!(to_client.synack <= 3, "{what}: {to_client:?}");
        // The data itself went marked: at least the payload each way carried.
        assert!(to_server.marked.1 >= bytes(&r, Up), "{what}: {to_server:?} for {} bytes up", bytes(&r, Up));
        assert!(to_client.marked.1 >= bytes(&r, Down), "{what}: {to_client:?} for {} bytes down", bytes(&r, Down));
    }

    // HTTP against the built-in responder of a `serve --dscp EF`: both ways, the handshake
    // included (the responder's listener carries the mark).
    let mut serve = ns.cmd(&ns.b, env!("CARGO_BIN_EXE_netblast"));
    serve.args(["serve", "--probe", "tcpinfo", "--open", "--port", "0", "--http", "8099", "--dscp", "EF"]);
    let (child, _) = util::spawn_server_from(serve);
    let _responder = util::KillOnDrop(child);
    reset(&ns);
    let url = format!("http://{}:8099/", ns.addr_b);
    let r = run_in(&ns, &["--url", &url, "-c", "2", "-t", "1", "--dscp", "AF41"]);
    assert!(r.summary.http.as_ref().is_some_and(|h| h.succeeded > 0));
    // The client marks AF41, the responder EF: each namespace sees only the other's mark.
    let (to_server, to_client) = (seen(&ns, &ns.b), seen(&ns, &ns.a));
    assert_eq!(to_client.synack + to_client.from_data_port + to_client.elsewhere, 0, "{to_client:?}");
    assert!(to_client.marked.0 > 0);
    assert_eq!(to_server.marked.0, 0, "the client's packets are AF41, not EF: {to_server:?}");
    assert!(to_server.all > 0 && to_server.af41 == to_server.all, "{to_server:?}");
}

/// Established TCP connections in namespace `n` (`ss -tnH`): (local, peer) addresses.
fn established(ns: &NetnsPair, n: &str) -> Vec<(std::net::SocketAddr, std::net::SocketAddr)> {
    let out = ns.cmd(n, "ss").args(["-tnH", "state", "established"]).output().unwrap();
    let norm = |s: &str| s.replace("[::ffff:", "").replace("]:", ":");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some((norm(f.get(2)?).parse().ok()?, norm(f.get(3)?).parse().ok()?))
        })
        .collect()
}

/// Runs `args` in namespace a in the background, and samples the server's established
/// connections while it lasts: the sample with the most connections.
fn peers_during(ns: &NetnsPair, args: &[&str]) -> (Vec<std::net::SocketAddr>, RunResult) {
    let child = ns
        .cmd(&ns.a, env!("CARGO_BIN_EXE_netblast"))
        .args(["run", "--probe", "tcpinfo", "--json", "-t", "3", "-i", "1s"])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut best: Vec<std::net::SocketAddr> = Vec::new();
    let t0 = std::time::Instant::now();
    while t0.elapsed() < std::time::Duration::from_secs(5) {
        let now: Vec<_> = established(ns, &ns.b).into_iter().map(|(_, peer)| peer).collect();
        if now.len() > best.len() {
            best = now;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let out = util::wait_output(child, std::time::Duration::from_secs(30));
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    (best, serde_json::from_slice(&out.stdout).unwrap())
}

#[test]
fn source_ports_and_addresses_are_the_ones_named() {
    if !util::netns_or_skip("source_ports_and_addresses_are_the_ones_named") {
        return;
    }
    let ns = NetnsPair::create().unwrap();
    let net = ns.addr_b.to_string().rsplit_once('.').unwrap().0.to_string();
    let (a1, a3) = (format!("{net}.1"), format!("{net}.3"));
    netblast_testkit::netns::ip(&["-n", &ns.a, "addr", "add", &format!("{a3}/24"), "dev", &format!("{}v", ns.a)])
        .unwrap();
    let (_serve, addr) = ns.serve(&ns.b);
    let target = format!("{}:{}", ns.addr_b, addr.port());

    // --cport 40000-40063 -P 64: the server sees 64 data connections from exactly those ports
    // (and the control connection from another).
    let (peers, r) = peers_during(&ns, &["--target", &target, "--cport", "40000-40063", "-P", "64"]);
    let mut ports: Vec<u16> = peers.iter().map(|p| p.port()).filter(|p| (40000..=40063).contains(p)).collect();
    ports.sort_unstable();
    assert_eq!(ports, (40000..=40063).collect::<Vec<u16>>(), "{peers:?}");
    assert_eq!(peers.len(), 65, "64 data connections and the control connection: {peers:?}");
    assert_eq!(r.plan.bind.ports, Some((40000, 40063)));

    // -B two addresses, 8 flows: 4 from each, as the server sees them.
    let (peers, r) = peers_during(&ns, &["--target", &target, "-B", &format!("{a1},{a3}"), "-P", "8"]);
    let from = |a: &str| peers.iter().filter(|p| p.ip().to_string() == a).count();
    // The control connection leaves from the first address.
    assert_eq!((from(&a1), from(&a3)), (5, 4), "{peers:?}");
    assert_eq!(r.plan.bind.addrs.len(), 2);
    assert!(netblast_report::text::full(&r).contains(&format!("from {a1}, {a3}")));

    // cps: every connection's SYN comes from the range, as the server's kernel counts them.
    ns.nft(&ns.b, "add table inet nbp").unwrap();
    ns.nft(&ns.b, "add chain inet nbp input { type filter hook input priority 0; }").unwrap();
    ns.nft(&ns.b, "add counter inet nbp inside").unwrap();
    ns.nft(&ns.b, "add counter inet nbp outside").unwrap();
    let syn = format!("tcp flags & (syn | ack) == syn tcp dport != {}", addr.port());
    ns.nft(&ns.b, &format!("add rule inet nbp input {syn} tcp sport 41000-41015 counter name inside")).unwrap();
    ns.nft(&ns.b, &format!("add rule inet nbp input {syn} tcp sport != 41000-41015 counter name outside")).unwrap();
    let r = run_in(
        &ns,
        &["--target", &target, "--profile", "cps", "-P", "2", "-t", "1", "--close", "rst", "--cport", "41000-41015"],
    );
    let done = r.summary.ways[0].msgs.unwrap().sent;
    let count = |c: &str| {
        let out = ns.cmd(&ns.b, "nft").args(["-j", "list", "counter", "inet", "nbp", c]).output().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["nftables"].as_array().unwrap().iter().find_map(|e| e.get("counter")).unwrap()["packets"].as_u64().unwrap()
    };
    assert!(done > 100, "{done} connections");
    assert_eq!(count("outside"), 0, "a connection left from outside --cport");
    assert!(count("inside") >= done, "{} SYNs for {done} connections", count("inside"));

    // A range smaller than the flows is refused before anything is sent, saying what to give.
    let out = ns
        .cmd(&ns.a, env!("CARGO_BIN_EXE_netblast"))
        .args(["run", "--target", &target, "--cport", "42000-42003", "-P", "8", "-t", "1"])
        .output()
        .unwrap();
    let said = util::said(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("smaller than the test's 8 connections") && said.contains("a range of 8 ports"), "{said}");
}

#[test]
fn scoped_ipv6_link_local_addresses_work_for_every_kind() {
    if !util::netns_or_skip("scoped_ipv6_link_local_addresses_work_for_every_kind") {
        return;
    }
    let ns = NetnsPair::create().unwrap();
    // Link-local addresses of our own, usable at once (no duplicate address detection).
    for (n, addr) in [(&ns.a, "fe80::a/64"), (&ns.b, "fe80::b/64")] {
        netblast_testkit::netns::ip(&["-n", n, "addr", "add", addr, "dev", &format!("{n}v"), "nodad"]).unwrap();
    }
    let mut serve = ns.cmd(&ns.b, env!("CARGO_BIN_EXE_netblast"));
    serve.args(["serve", "--probe", "tcpinfo", "--open", "--bind", "::", "--port", "0", "--http", "8098"]);
    let (child, addr) = util::spawn_server_from(serve);
    let _serve = util::KillOnDrop(child);
    // The zone as an interface name, as `ping fe80::b%eth0` takes it.
    let scoped = format!("fe80::b%{}v", ns.a);
    let p = addr.port().to_string();
    for (what, args) in [
        ("bulk", vec![]),
        ("UDP", vec!["-u", "-b", "20M"]),
        ("UDP per-CPU receivers", vec!["--profile", "pps-udp"]),
        ("rr", vec!["--profile", "latency"]),
        ("cps", vec!["--profile", "cps"]),
    ] {
        let r = run_in(&ns, &[&[scoped.as_str(), "-p", &p, "-t", "1"], &args[..]].concat());
        assert!(r.complete, "{what}: {:?}", r.errors);
        let remote: std::net::SocketAddr = r.streams[0].remote.parse().unwrap();
        assert!(matches!(remote, std::net::SocketAddr::V6(a) if a.scope_id() > 0), "{what}: {remote}");
        assert!(bytes(&r, netblast_spec::profile::Way::Up) > 0, "{what}");
    }
    // The zone in a URL is %25 (RFC 6874); with no agent, the target as given.
    let url = format!("http://[fe80::b%25{}v]:8098/", ns.a);
    let r = run_in(&ns, &["--url", &url, "-c", "2", "-t", "1"]);
    assert!(r.summary.http.as_ref().is_some_and(|h| h.succeeded > 0), "{:?}", r.errors);
    let target = format!("[{scoped}]:8098");
    let r = run_in(&ns, &["--target", &target, "--profile", "cps", "--no-agent", "-t", "1"]);
    assert!(r.complete && r.summary.ways[0].msgs.is_some_and(|m| m.sent > 0), "{:?}", r.errors);
}

/// A TCP connection from 127.0.0.1:`port` to `to` (`SO_REUSEADDR`, as netblast binds).
fn hold_from(port: u16, to: std::net::SocketAddr) -> std::net::TcpStream {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.set_reuse_address(true).unwrap();
    s.bind(&std::net::SocketAddr::from(([127, 0, 0, 1], port)).into()).unwrap();
    s.connect(&to.into()).unwrap();
    s.into()
}

/// Whether `ss` lists a TCP socket from 127.0.0.1:`port` to `to` in `state`.
fn tuple_in(state: &str, port: u16, to: std::net::SocketAddr) -> bool {
    let out = std::process::Command::new("ss")
        .args(["-Htan", "state", state, &format!("( sport = :{port} and dport = :{} )", to.port())])
        .output()
        .unwrap();
    !String::from_utf8_lossy(&out.stdout).trim().is_empty()
}

#[test]
fn a_source_port_held_to_the_same_peer_gives_way_or_is_named() {
    // The docs test's `--cport 40000-40063` failed on CI with "Cannot assign requested address":
    // an earlier run's connection from one of those ports to the same server was still in
    // TIME_WAIT, and connect refuses a four-tuple that is held. Ports outside the kernel's
    // ephemeral range, so nothing else takes them.
    let (serve, addr) = util::spawn_server();
    // Stopped on every exit path, a failed assertion's too.
    let _serve = util::KillOnDrop(serve);
    let run = |cport: &str| {
        util::run_cmd().args(["--target", &addr.to_string(), "--cport", cport, "-P", "1", "-t", "1"]).output().unwrap()
    };
    // A live connection holds 23100: the flow gives way to 23101.
    let held = hold_from(23100, addr);
    let out = run("23100-23101");
    assert!(out.status.success(), "{}", util::said(&out));
    // With no other port in the range it waits for the connect timeout, then says what holds it.
    let out = run("23100-23100");
    let said = util::said(&out);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("--cport 23100-23100") && said.contains("is held by another connection"), "{said}");
    drop(held);

    // A connection just closed by this side waits in TIME_WAIT; to a loopback peer the kernel
    // lets it be reused a second later (tcp_tw_reuse, 2 by default), so the run goes on.
    let reuse = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_tw_reuse").unwrap_or_default();
    if reuse.trim() != "0" {
        let s = hold_from(23102, addr);
        std::thread::sleep(std::time::Duration::from_millis(50));
        drop(s);
        let t = std::time::Instant::now();
        while !tuple_in("time-wait", 23102, addr) && t.elapsed() < std::time::Duration::from_secs(2) {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(tuple_in("time-wait", 23102, addr), "no TIME_WAIT from 23102 was made");
        let out = run("23102-23102");
        assert!(out.status.success(), "{}", util::said(&out));
    }
}
