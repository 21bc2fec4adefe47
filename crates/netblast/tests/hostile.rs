//! Issue 13: `serve` against clients that take more than their share. Each limit refuses the
//! set-up that would pass it, naming the limit, and the server goes on serving others.

use crate::util::{self, Server};
use netblast_agent::{Limits, ServeConfig};
use netblast_spec::RunResult;
use netblast_spec::profile::{Profile, WaitMode, Way};
use netblast_wire::wire::{
    self, ClientHandshake, ClientMsg, Header, Role, ServerMsg, StreamAck, StreamSetup, TestId, TestSetup, blocking,
};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

/// A test set up by hand, its streams connected by hand: a client that does what it likes.
struct RawTest {
    control: TcpStream,
    key: netblast_wire::auth::StreamKey,
    id: TestId,
    addr: SocketAddr,
}

impl RawTest {
    /// Sets a test up; `Err` carries the server's refusal.
    fn set_up(addr: SocketAddr, profile: Profile, ways: &[Way]) -> Result<RawTest, String> {
        let id = TestId::random();
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let hs = ClientHandshake::new(Header::new(Role::Control, id, 0), None, false);
        let session = blocking::handshake(&mut c, &hs).map_err(|e| e.to_string())?;
        let streams = ways
            .iter()
            .enumerate()
            .map(|(i, &way)| StreamSetup { id: i as u32, way, server_cpu: None, client_cpu: None })
            .collect();
        let setup = TestSetup {
            client_version: "hostile".into(),
            time_bound: netblast_spec::units::Dur(profile.time_bound()),
            profile,
            streams,
            kernel: None,
        };
        blocking::write_frame(&mut c, &ClientMsg::Setup(Box::new(setup))).unwrap();
        match blocking::read_frame::<_, ServerMsg>(&mut c).unwrap() {
            Some(ServerMsg::Accepted { .. }) => Ok(RawTest { control: c, key: session.stream_key, id, addr }),
            Some(ServerMsg::Refused { message, .. }) => Err(message),
            other => panic!("unexpected answer {other:?}"),
        }
    }

    /// Connects stream `i` (TCP streams only).
    fn stream(&self, i: u32) -> TcpStream {
        let mut s = TcpStream::connect(self.addr).unwrap();
        s.write_all(&wire::stream_preamble(&Header::new(Role::Stream, self.id, i), &self.key)).unwrap();
        let mut ack = [0u8; 1];
        s.read_exact(&mut ack).unwrap();
        assert_eq!(StreamAck::from_byte(ack[0]), Some(StreamAck::Ok));
        s
    }

    fn start(&mut self) {
        blocking::write_frame(&mut self.control, &ClientMsg::Start).unwrap();
    }
}

fn bulk(secs: u64, interval: &str) -> Profile {
    util::profile(|p| {
        p.run.duration = Some(netblast_spec::units::Dur(Duration::from_secs(secs)));
        p.run.interval = Some(interval.parse().unwrap());
    })
}

fn rr(edit: impl FnOnce(&mut netblast_spec::profile::RrSection)) -> Profile {
    let (mut p, _) = Profile::load("latency").unwrap();
    p.run.duration = Some("5s".parse().unwrap());
    edit(p.workload.rr_mut().unwrap());
    p.validate("test").unwrap();
    p
}

fn good_run(addr: SocketAddr) -> RunResult {
    let r = util::run(addr, util::profile(|_| {}));
    assert!(r.complete, "{:?}", r.errors);
    r
}

/// The real `netblast serve` allowed `n` open descriptors (a process of its own: the limit is
/// per process).
fn serve_with_fd_limit(n: u32) -> (util::KillOnDrop, SocketAddr) {
    let mut c = Command::new("sh");
    c.arg("-c").arg(format!(
        "ulimit -n {n} && exec {} serve --bind 127.0.0.1 --port 0 --probe tcpinfo",
        env!("CARGO_BIN_EXE_netblast")
    ));
    let (serve, addr) = util::spawn_server_from(c);
    (util::KillOnDrop(serve), addr)
}

fn server(limits: Limits) -> Server {
    Server::start_cfg("127.0.0.1:0", ServeConfig { limits, ..Default::default() }).unwrap()
}

#[test]
fn one_peer_may_hold_only_so_many_tests_waiting_to_start() {
    let srv = server(Limits { pending_per_peer: 2, ..Default::default() });
    let a = RawTest::set_up(srv.addr, bulk(1, "1s"), &[Way::Up]).unwrap();
    let _b = RawTest::set_up(srv.addr, bulk(1, "1s"), &[Way::Up]).unwrap();
    let e = RawTest::set_up(srv.addr, bulk(1, "1s"), &[Way::Up]).err().expect("the third is refused");
    assert!(e.contains("127.0.0.1") && e.contains("max-pending-per-peer"), "{e}");
    // Its own tests leave with their connections, and the peer is served again.
    drop(a);
    std::thread::sleep(Duration::from_millis(200));
    good_run(srv.addr);
}

#[test]
fn a_test_needing_more_descriptors_than_are_free_is_refused() {
    // A serve allowed 400 descriptors keeps 256 for connections: a 200-stream test cannot fit.
    let (_serve, addr) = serve_with_fd_limit(400);
    let mut p = bulk(1, "1s");
    p.workload.bulk_mut().unwrap().flows = 200;
    let e = RawTest::set_up(addr, p, &[Way::Up; 200]).err().expect("refused");
    assert!(e.contains("descriptors") && e.contains("200"), "{e}");
    good_run(addr);
}

#[test]
fn descriptors_promised_to_a_test_are_released_as_its_streams_connect() {
    // 600 descriptors, 256 kept: about 320 free. A test of 150 streams, all connected and never
    // started, holds 150 open descriptors and no promise: another test of 150 fits. (Counting
    // the connected streams both as open and as promised refused it.)
    let (_serve, addr) = serve_with_fd_limit(600);
    let p = || {
        let mut p = bulk(1, "1s");
        p.workload.bulk_mut().unwrap().flows = 150;
        p
    };
    let first = RawTest::set_up(addr, p(), &[Way::Up; 150]).unwrap();
    let _streams: Vec<TcpStream> = (0..150).map(|i| first.stream(i)).collect();
    let second = RawTest::set_up(addr, p(), &[Way::Up; 150]);
    assert!(second.is_ok(), "{:?}", second.err());
}

#[test]
fn a_setup_naming_more_streams_than_its_profile_runs_is_refused() {
    let srv = server(Limits::default());
    // One flow, a thousand streams: before, the server took them all (up to 2 × MAX_FLOWS).
    let e = RawTest::set_up(srv.addr, bulk(1, "1s"), &[Way::Up; 1000]).err().expect("refused");
    assert!(e.contains("1000 streams") && e.contains("has 1"), "{e}");
    good_run(srv.addr);
}

#[test]
fn a_peer_that_is_not_netblast_is_dropped_on_its_first_bytes() {
    let srv = server(Limits::default());
    let mut c = TcpStream::connect(srv.addr).unwrap();
    c.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    // Shorter than a header: before, the server waited out the 5 s handshake timeout.
    assert!(closed_within(&mut c, Duration::from_secs(2)), "still open 2 s after an HTTP request");
    good_run(srv.addr);
}

#[test]
fn busy_polling_flows_are_limited() {
    let srv = server(Limits { spinning: 1, ..Default::default() });
    let spin = rr(|r| {
        r.flows = 2;
        r.wait = WaitMode::Spin;
    });
    let e = RawTest::set_up(srv.addr, spin, &[Way::Up; 2]).err().expect("refused");
    assert!(e.contains("spin") && e.contains("at most"), "{e}");
    let one = rr(|r| r.wait = WaitMode::Spin);
    let _ok = RawTest::set_up(srv.addr, one, &[Way::Up]).expect("one busy-polling flow fits");
    good_run(srv.addr);
}

#[test]
fn rr_buffers_follow_what_the_peer_sends_not_what_it_announces() {
    let (serve, addr) = util::spawn_server();
    let serve = util::KillOnDrop(serve);
    let before = rss_of(serve.0.id());
    // 64 flows of 16 MiB requests and responses, blocking waits, and the client sends nothing:
    // 2 GiB if buffers were sized from the announcement.
    let big = rr(|r| {
        r.flows = 64;
        r.wait = WaitMode::Block;
        r.req_bytes = netblast_spec::units::ByteSize(16 << 20);
        r.resp_bytes = netblast_spec::units::ByteSize(16 << 20);
    });
    let mut t = RawTest::set_up(addr, big, &[Way::Up; 64]).unwrap();
    let streams: Vec<TcpStream> = (0..64).map(|i| t.stream(i)).collect();
    t.start();
    std::thread::sleep(Duration::from_secs(1));
    let grown = rss_of(serve.0.id()).saturating_sub(before);
    assert!(grown < 128 << 20, "serve grew {} MiB for a peer that sent nothing", grown >> 20);
    drop(streams);
}

/// `serve`'s resident memory, in bytes.
fn rss_of(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = s.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

#[test]
fn serve_gives_back_the_memory_of_a_test_when_it_ends() {
    // Found in the audit: the binary allocates with mimalloc, whose free pages malloc_trim
    // does not reach; after 64 flows of 1 MiB messages serve kept what the test had used (the
    // debug build: 26.8 -> 80.4 MB, and 81.6 MB after two more). Its own allocator's release
    // now runs when the last connection closes: 27.8 -> 33.9-39.4 MB (what stays is mimalloc's
    // segments, partly transparent huge pages).
    let (serve, addr) = util::spawn_server();
    let serve = util::KillOnDrop(serve);
    std::thread::sleep(Duration::from_millis(500));
    let before = rss_of(serve.0.id());
    let o = util::run_cmd()
        .args(["--target", &addr.to_string(), "--profile", "latency", "-P", "64", "--wait", "block"])
        .args(["--req-size", "1M", "--resp-size", "1M", "-t", "2s"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", util::said(&o));
    let bound = before + (24 << 20);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut after = rss_of(serve.0.id());
    while after > bound && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        after = rss_of(serve.0.id());
    }
    assert!(
        after <= bound,
        "serve held {:.1} MB after the test, {:.1} MB before it (at most 24 MiB more)",
        after as f64 / 1e6,
        before as f64 / 1e6
    );
}

#[test]
fn a_client_that_stops_reading_its_reports_is_dropped() {
    let srv = server(Limits { control_write_timeout: Duration::from_secs(1), ..Default::default() });
    // 200 streams the server sends on, reported every 10 ms: its reports fill the control
    // connection's buffers within seconds when nobody reads them.
    let mut reverse = bulk(30, "10ms");
    let b = reverse.workload.bulk_mut().unwrap();
    b.direction = netblast_spec::profile::Direction::Reverse;
    b.flows = 200;
    let mut t = RawTest::set_up(srv.addr, reverse, &[Way::Down; 200]).unwrap_or_else(|e| panic!("{e}"));
    let streams: Vec<TcpStream> = (0..200).map(|i| t.stream(i)).collect();
    t.start();
    // We read nothing. Within the write timeout after the buffers filled, the server ends the
    // test: it shuts its streams down, long before the 30 s bound.
    let started = Instant::now();
    let mut s0 = streams[0].try_clone().unwrap();
    s0.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let ended = loop {
        match s0.read(&mut buf) {
            Ok(0) => break true,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
            _ => {}
        }
        if started.elapsed() > Duration::from_secs(25) {
            break false;
        }
    };
    assert!(ended, "the server kept sending to a client that reads no report");
    assert!(started.elapsed() < Duration::from_secs(20), "took {:?}", started.elapsed());
    drop(streams);
    good_run(srv.addr);
}

/// The built-in responder with a short header timeout and a small cap, on loopback.
fn responder(header_timeout: Duration, max_connections: usize) -> netblast_agent::Background {
    responder_with(header_timeout, max_connections, Some(max_connections))
}

/// As [`responder`], with a cap per peer address (`None`: the default, half the cap).
fn responder_with(
    header_timeout: Duration,
    max_connections: usize,
    max_per_peer: Option<usize>,
) -> netblast_agent::Background {
    let cfg =
        netblast_agent::http::ResponderConfig { header_timeout, max_connections, max_per_peer, ..Default::default() };
    crate::util::lane();
    netblast_agent::Background::http(std::net::TcpListener::bind("127.0.0.1:0").unwrap(), None, cfg, 2).unwrap()
}

/// Whether the server closes `c` within `within` (its read ends).
fn closed_within(c: &mut TcpStream, within: Duration) -> bool {
    c.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match c.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

#[test]
fn the_responder_closes_silent_slow_and_idle_connections() {
    let r = responder(Duration::from_secs(1), 1000);
    let mut silent = TcpStream::connect(r.addr()).unwrap();
    let mut partial = TcpStream::connect(r.addr()).unwrap();
    partial.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ").unwrap();
    let mut idle = TcpStream::connect(r.addr()).unwrap();
    idle.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let t = Instant::now();
    for (what, c) in [("silent", &mut silent), ("partial headers", &mut partial), ("idle keep-alive", &mut idle)] {
        assert!(closed_within(c, Duration::from_secs(5)), "{what}: still open after {:?}", t.elapsed());
    }
    assert!(t.elapsed() < Duration::from_secs(4), "took {:?}", t.elapsed());
}

#[test]
fn the_responder_turns_away_connections_beyond_its_cap_and_serves_again_after() {
    let r = responder(Duration::from_secs(2), 20);
    let held: Vec<TcpStream> = (0..20)
        .map(|_| {
            let mut c = TcpStream::connect(r.addr()).unwrap();
            c.write_all(b"G").unwrap();
            c
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut extra = TcpStream::connect(r.addr()).unwrap();
    assert!(closed_within(&mut extra, Duration::from_secs(1)), "the 21st connection is closed at once");
    drop(held);
    // The held connections' tasks see them closed and give their places back.
    let (out, after) = served_within(|| TcpStream::connect(r.addr()).unwrap(), Duration::from_secs(5));
    assert!(out.starts_with(b"HTTP/1.1 200"), "{:?} after {after:?}", String::from_utf8_lossy(&out));
}

/// One small GET on `c`, its whole answer (the body is random bytes: bytes, not text).
fn get_small(mut c: TcpStream) -> Vec<u8> {
    c.write_all(b"GET /?size=5 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    out
}

/// Asks on new connections from `connect` until one is answered or `limit` passes: the
/// answer, and how long it took.
fn served_within(connect: impl Fn() -> TcpStream, limit: Duration) -> (Vec<u8>, Duration) {
    let t = Instant::now();
    loop {
        let out = get_small(connect());
        if !out.is_empty() || t.elapsed() > limit {
            return (out, t.elapsed());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A TCP connection to `to` from local address `from` (another "host" on loopback).
fn connect_from(from: [u8; 4], to: std::net::SocketAddr) -> TcpStream {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.bind(&std::net::SocketAddr::from((from, 0)).into()).unwrap();
    sock.connect(&to.into()).unwrap();
    sock.into()
}

#[test]
fn one_address_cannot_take_every_responder_slot() {
    // Found by abuse.sh's half-open TLS attack: one address could hold every connection the
    // responder takes until the header timeout.
    let r = responder_with(Duration::from_secs(5), 20, None);
    let held: Vec<TcpStream> = (0..10)
        .map(|_| {
            let mut c = connect_from([127, 0, 0, 2], r.addr());
            c.write_all(b"G").unwrap();
            c
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut eleventh = connect_from([127, 0, 0, 2], r.addr());
    assert!(closed_within(&mut eleventh, Duration::from_secs(1)), "the 11th from one address is closed (half of 20)");
    let out = get_small(connect_from([127, 0, 0, 1], r.addr()));
    assert!(out.starts_with(b"HTTP/1.1 200"), "another address is served: {:?}", String::from_utf8_lossy(&out));
    drop(held);
    // Its places come back as its connections close.
    let (out, after) = served_within(|| connect_from([127, 0, 0, 2], r.addr()), Duration::from_secs(5));
    assert!(out.starts_with(b"HTTP/1.1 200"), "{:?} after {after:?}", String::from_utf8_lossy(&out));
}

#[test]
fn silent_strangers_cannot_take_the_descriptors_of_peers_that_prove_themselves() {
    // Found in the audit: 2 100 silent connections against a serve with 2 048 descriptors failed
    // 4 of 5 good runs ("Too many open files", "this server has 0 free"). Here a stranger at
    // 127.0.0.2 opens 2 100 and says nothing, while a client at 127.0.0.1 runs its tests.
    let (_serve, addr) = serve_with_fd_limit(2048);
    netblast_engine::os::sys::ensure_fds(2400).expect("this test holds 2 100 connections");
    let stranger: SocketAddr = "127.0.0.2:0".parse().unwrap();
    let mut silent = Vec::new();
    for _ in 0..2100 {
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        s.bind(&stranger.into()).unwrap();
        // The kernel completes the handshake before the server accepts: each connects.
        if s.connect(&addr.into()).is_ok() {
            silent.push(s);
        }
    }
    assert!(silent.len() >= 2000, "{} connected", silent.len());
    for _ in 0..3 {
        good_run(addr);
    }
    drop(silent);
}
