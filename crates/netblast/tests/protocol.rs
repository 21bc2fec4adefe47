//! The data-port protocol end to end (version 4, speaking with peers back to version 2:
//! `netblast_wire::header`): version negotiation, authentication, stream tags, hostile peers.
//! After every bad peer the server still serves a good client.

use crate::util::{self, InPair, Server};
use netblast_agent::{Access, ServeConfig};
use netblast_engine::exec::api::{ClientError, RunOptions};
use netblast_probe::Probe;
use netblast_wire::auth::Token;
use netblast_wire::wire::{
    self, ClientHandshake, ClientMsg, Header, Refusal, Role, SERVER_HELLO_LEN, ServerHello, ServerMsg, StreamAck,
    TestId, TestSetup, blocking,
};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

const TOKEN: &str = "protocol-test-token-0123456789";

fn connect(addr: SocketAddr) -> TcpStream {
    let c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c
}

fn good_run(addr: SocketAddr, token: Option<&str>) {
    let opts = RunOptions { token: token.map(|t| Token::new(t).unwrap()), ..Default::default() };
    let r =
        netblast_engine::run::plan_and_run(util::profile(|_| {}), "test", &addr.to_string(), &Probe::tcp_info(), &opts)
            .unwrap();
    assert!(r.complete, "{:?}", r.errors);
    let s = &r.summary.streams[0];
    assert_eq!(Some(s.sender.bytes), s.receiver.map(|x| x.bytes));
}

fn try_run(addr: SocketAddr, token: Option<&str>) -> Result<netblast_spec::RunResult, ClientError> {
    let opts = RunOptions { token: token.map(|t| Token::new(t).unwrap()), ..Default::default() };
    netblast_engine::run::plan_and_run(util::profile(|_| {}), "test", &addr.to_string(), &Probe::tcp_info(), &opts)
}

fn header_bytes(version: u16, min: u16) -> [u8; 32] {
    let mut h = Header::new(Role::Control, TestId([9; 16]), 0).encode();
    h[4..6].copy_from_slice(&version.to_be_bytes());
    h[28..30].copy_from_slice(&min.to_be_bytes());
    h
}

#[test]
fn a_newer_peer_is_refused_naming_both_versions() {
    let srv = Server::start("127.0.0.1:0").unwrap();
    let mut c = connect(srv.addr);
    c.write_all(&header_bytes(99, 99)).unwrap();
    c.write_all(&[7u8; 32]).unwrap();
    let mut hello = [0u8; SERVER_HELLO_LEN];
    c.read_exact(&mut hello).unwrap();
    let hello = ServerHello::decode(&hello).expect("a hello");
    assert_eq!(hello.status, ServerHello::REFUSED);
    assert_eq!(hello.range, (wire::MIN_VERSION, wire::VERSION));
    match blocking::read_frame::<_, ServerMsg>(&mut c).unwrap() {
        Some(ServerMsg::Refused { message, reason }) => {
            assert!(message.contains("version 99") && message.contains("version 2"), "{message}");
            assert_eq!(reason, Some(Refusal::Version));
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    good_run(srv.addr, None);
}

#[test]
fn a_version_1_client_reads_a_refusal_naming_both_versions() {
    let srv = Server::start("127.0.0.1:0").unwrap();
    let mut c = connect(srv.addr);
    // What netblast 0.1 with protocol 1 sent: its header, then its setup frame at once.
    c.write_all(&header_bytes(1, 0)).unwrap();
    let msg: ServerMsg = blocking::read_frame(&mut c).unwrap().expect("a refusal frame, as version 1 reads it");
    let ServerMsg::Refused { message, .. } = msg else { panic!("{msg:?}") };
    assert!(message.contains("version 1") && message.contains("version 2"), "{message}");
    good_run(srv.addr, None);
}

/// Shakes hands as a control connection; returns the stream and the session.
fn handshake(addr: SocketAddr, test: TestId, token: Option<&str>) -> (TcpStream, wire::Session) {
    let mut c = connect(addr);
    let hs = ClientHandshake::new(Header::new(Role::Control, test, 0), token.map(|t| Token::new(t).unwrap()), false);
    let s = blocking::handshake(&mut c, &hs).unwrap();
    (c, s)
}

#[test]
fn malformed_frames_get_a_refusal_and_the_server_goes_on() {
    let srv = Server::start("127.0.0.1:0").unwrap();
    let bodies: [&[u8]; 3] = [
        br#"{"type":"setup","profile":{"description":"x","run":{"kind":"bulk","duration":"1s","warp":9}},"time_bound":"1s","streams":[],"client_version":"0"}"#,
        br#"{"type":"launch_missiles"}"#,
        b"\xff\xfe not json",
    ];
    for body in bodies {
        let (mut c, _) = handshake(srv.addr, TestId::random(), None);
        c.write_all(&(body.len() as u32).to_be_bytes()).unwrap();
        c.write_all(body).unwrap();
        match blocking::read_frame::<_, ServerMsg>(&mut c) {
            Ok(Some(ServerMsg::Refused { message, reason })) => {
                assert_eq!(reason, Some(Refusal::Invalid), "{message}");
            }
            other => panic!("expected a refusal naming the problem, got {other:?}"),
        }
        good_run(srv.addr, None);
    }
    // A length prefix over the limit: refused, not read.
    let (mut c, _) = handshake(srv.addr, TestId::random(), None);
    c.write_all(&u32::MAX.to_be_bytes()).unwrap();
    let msg = blocking::read_frame::<_, ServerMsg>(&mut c).unwrap();
    assert!(matches!(msg, Some(ServerMsg::Refused { ref message, .. }) if message.contains("limit")), "{msg:?}");
    good_run(srv.addr, None);
}

fn token_server() -> (Server, std::sync::Arc<netblast_agent::ServeStats>) {
    let stats = std::sync::Arc::new(netblast_agent::ServeStats::default());
    let cfg = ServeConfig {
        access: Access { token: Some(Token::new(TOKEN).unwrap()), open: false },
        stats: stats.clone(),
        ..Default::default()
    };
    (Server::start_cfg("127.0.0.1:0", cfg).unwrap(), stats)
}

#[test]
fn a_token_server_takes_only_peers_that_prove_the_token() {
    let (srv, stats) = token_server();
    let e = try_run(srv.addr, None).unwrap_err();
    assert!(e.is_input() && e.to_string().contains("authentication required"), "{e}");
    let e = try_run(srv.addr, Some("a-wrong-token-of-enough-length")).unwrap_err();
    assert!(e.is_input() && e.to_string().contains("authentication failed"), "{e}");
    good_run(srv.addr, Some(TOKEN));
    // Both refusals were counted (the wrong token's when its connection closed).
    let t = Instant::now();
    while stats.refused(Refusal::Auth) < 2 && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(stats.refused(Refusal::Auth), 2);
}

#[test]
fn the_binary_exits_2_naming_authentication() {
    let tok = util::token_file("serve", TOKEN);
    let (server, addr) = util::spawn_server_with(&["--probe", "tcpinfo", "--token-file", tok.to_str().unwrap()]);
    let _server = util::KillOnDrop(server);
    let wrong = util::token_file("wrong", "another-token-of-enough-length");
    for (args, env) in [
        (vec![], None),
        (vec!["--token-file", wrong.to_str().unwrap()], None),
        (vec![], Some("yet-another-token-of-length")),
    ] {
        let mut c = util::run_cmd();
        c.args(["--target", &addr.to_string(), "-t", "1"]).args(&args).env_remove("NETBLAST_TOKEN");
        if let Some(t) = env {
            c.env("NETBLAST_TOKEN", t);
        }
        let out = c.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("authentication"), "{args:?}: {err}");
    }
    let out = util::run_cmd()
        .args(["--target", &addr.to_string(), "-t", "1", "--json", "--token-file", tok.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let _ = std::fs::remove_file(tok);
    let _ = std::fs::remove_file(wrong);
}

/// A one-flow bulk test's set-up message.
fn one_flow_setup() -> TestSetup {
    TestSetup {
        client_version: "test".into(),
        profile: util::profile(|_| {}),
        time_bound: "1s".parse().unwrap(),
        streams: vec![wire::StreamSetup {
            id: 0,
            way: netblast_spec::profile::Way::Up,
            server_cpu: None,
            client_cpu: None,
        }],
        kernel: None,
    }
}

/// Sets a one-flow bulk test up on a control connection; returns it with its session.
fn set_up(addr: SocketAddr, test: TestId) -> (TcpStream, wire::Session) {
    let (mut c, s) = handshake(addr, test, None);
    let setup = one_flow_setup();
    blocking::write_frame(&mut c, &ClientMsg::Setup(Box::new(setup))).unwrap();
    let reply: Option<ServerMsg> = blocking::read_frame(&mut c).unwrap();
    assert!(matches!(reply, Some(ServerMsg::Accepted { .. })), "{reply:?}");
    (c, s)
}

fn stream_ack(addr: SocketAddr, test: TestId, key: &netblast_wire::auth::StreamKey) -> Option<StreamAck> {
    let mut s = connect(addr);
    s.write_all(&wire::stream_preamble(&Header::new(Role::Stream, test, 0), key)).unwrap();
    let mut ack = [0u8; 1];
    s.read_exact(&mut ack).ok()?;
    StreamAck::from_byte(ack[0])
}

#[test]
fn only_the_connection_that_set_a_test_up_can_use_or_cancel_it() {
    let srv = Server::start("127.0.0.1:0").unwrap();
    let test = TestId::random();
    let (_control, session) = set_up(srv.addr, test);
    // Another connection's key (a stranger who learnt the test id) cannot attach a stream.
    let (_other, stranger) = handshake(srv.addr, TestId::random(), None);
    assert_eq!(stream_ack(srv.addr, test, &stranger.stream_key), Some(StreamAck::BadTag));
    // A second set-up with the same id is refused, and does not remove the first test.
    let (mut dup, _) = handshake(srv.addr, test, None);
    let setup = one_flow_setup();
    blocking::write_frame(&mut dup, &ClientMsg::Setup(Box::new(setup))).unwrap();
    let reply: Option<ServerMsg> = blocking::read_frame(&mut dup).unwrap();
    assert!(matches!(reply, Some(ServerMsg::Refused { ref message, .. }) if message.contains("in use")), "{reply:?}");
    drop(dup);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(stream_ack(srv.addr, test, &session.stream_key), Some(StreamAck::Ok), "the first test is still there");
}

#[test]
fn a_default_serve_refuses_other_namespaces_and_a_token_serve_sends_nothing_unauthenticated() {
    if !util::netns_or_skip("a_default_serve_refuses_other_namespaces") {
        return;
    }
    let ns = util::NetnsPair::create().unwrap();
    let bin = env!("CARGO_BIN_EXE_netblast");
    let serve = |extra: &[&str]| ns.serve_quiet(&ns.b, &[&["--port", "5210"], extra].concat());
    let run = |ns_name: &str, target: &str, extra: &[&str]| {
        ns.cmd(ns_name, bin)
            .args(["run", "--probe", "tcpinfo", "--target", target, "-t", "1", "--json"])
            .args(extra)
            .env_remove("NETBLAST_TOKEN")
            .output()
            .unwrap()
    };
    let remote = format!("{}:5210", ns.addr_b);
    {
        let _s = serve(&[]);
        std::thread::sleep(Duration::from_millis(400));
        let out = run(&ns.a, &remote, &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains("loopback peers only"), "{err}");
        let out = run(&ns.b, "127.0.0.1:5210", &[]);
        assert!(out.status.success(), "loopback is accepted: {}", String::from_utf8_lossy(&out.stderr));
    }
    std::thread::sleep(Duration::from_millis(200));
    let tok = util::token_file("netns", TOKEN);
    let _s = serve(&["--token-file", tok.to_str().unwrap()]);
    std::thread::sleep(Duration::from_millis(400));
    let before = ns.veth_bytes(&ns.b);
    let out = run(&ns.a, &remote, &[]);
    let after = ns.veth_bytes(&ns.b);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("authentication"));
    // Only the handshake crossed: a few packets, no test traffic.
    assert!(after.0 - before.0 < 16 * 1024, "server received {} bytes", after.0 - before.0);
    let out = run(&ns.a, &remote, &["--token-file", tok.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let moved = ns.veth_bytes(&ns.b).0 - after.0;
    assert!(moved > 1 << 20, "with the token the test ran: {moved} bytes");
    let _ = std::fs::remove_file(tok);
}
