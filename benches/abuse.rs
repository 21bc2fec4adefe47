//! `netblast-abuse`: the attacks of `scripts/abuse.sh`, each bounded in time, against a serve
//! on this machine. Every attack holds what it took for `--hold` seconds, then lets go, and
//! prints one line: what it did and how the server answered.
//!
//! ```text
//! netblast-abuse ATTACK --data HOST:PORT [--http HOST:PORT] [--https HOST:PORT] [--hold SECS] [--count N]
//! ```
//!
//! Attacks: `pending` (tests set up and never started), `pending-streams` (two tests of many
//! streams, connected, never started), `rr-silent` (rr flows of 16 MiB messages from a client
//! that sends nothing), `no-read` (a client that never reads its reports), `spin` (busy-polling
//! flows), `idle-data` (connections to the data port that send nothing), `garbage` (bad magic,
//! other versions, malformed frames, wrong tags), `partial-http` (HTTP connections that send
//! half a header), `keepalive-http` (HTTP connections that make one request and stay open);
//! against HTTP/2 (h2c on `--http`): `h2-rapid-reset`, `h2-continuation`, `h2-hpack-bomb`,
//! `h2-zero-window`, `h2-settings-flood`, `h2-ping-flood`; against HTTPS (`--https`):
//! `tls-flood` (full handshakes as fast as they go), `tls-half-open` (connections that send
//! nothing or half a ClientHello). See `abuse_h2.rs`.
//!
//! The attacker is another host: toward a loopback serve its connections come from 127.0.0.2,
//! so limits per peer address apply to it and not to the well-behaved client beside it.

mod abuse_h2;

use netblast_spec::profile::{Direction, Profile, WaitMode, Way};
use netblast_spec::units::{ByteSize, Dur};
use netblast_wire::wire::{
    self, ClientHandshake, ClientMsg, Header, Role, ServerMsg, StreamAck, StreamSetup, TestId, TestSetup, blocking,
};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

struct Args {
    attack: String,
    data: SocketAddr,
    http: Option<SocketAddr>,
    https: Option<SocketAddr>,
    hold: Duration,
    count: usize,
}

fn parse() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let attack =
        it.next().ok_or("usage: netblast-abuse ATTACK --data HOST:PORT [--http HOST:PORT] [--hold S] [--count N]")?;
    let (mut data, mut http, mut https, mut hold, mut count) = (None, None, None, Duration::from_secs(5), 0);
    while let Some(flag) = it.next() {
        let v = it.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--data" => data = Some(v.parse().map_err(|e| format!("--data: {e}"))?),
            "--http" => http = Some(v.parse().map_err(|e| format!("--http: {e}"))?),
            "--https" => https = Some(v.parse().map_err(|e| format!("--https: {e}"))?),
            "--hold" => hold = Duration::from_secs_f64(v.parse().map_err(|e| format!("--hold: {e}"))?),
            "--count" => count = v.parse().map_err(|e| format!("--count: {e}"))?,
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    if hold > Duration::from_secs(120) {
        return Err("--hold is at most 120 s: every attack is bounded".into());
    }
    Ok(Args { attack, data: data.ok_or("--data HOST:PORT is needed")?, http, https, hold, count })
}

/// Connects to `to`, from 127.0.0.2 when `to` is IPv4 loopback (another "host").
fn connect(to: SocketAddr) -> Result<TcpStream, String> {
    let sock = socket2::Socket::new(socket2::Domain::for_address(to), socket2::Type::STREAM, None)
        .map_err(|e| e.to_string())?;
    if let SocketAddr::V4(v4) = to {
        if v4.ip().is_loopback() {
            let from = SocketAddr::from(([127, 0, 0, 2], 0));
            sock.bind(&from.into()).map_err(|e| format!("bind {from}: {e}"))?;
        }
    }
    sock.connect(&to.into()).map_err(|e| e.to_string())?;
    Ok(sock.into())
}

/// A test set up by hand.
struct Raw {
    control: TcpStream,
    key: netblast_wire::auth::StreamKey,
    id: TestId,
    addr: SocketAddr,
}

impl Raw {
    fn set_up(addr: SocketAddr, profile: Profile, ways: &[Way]) -> Result<Raw, String> {
        let id = TestId::random();
        let mut c = connect(addr)?;
        c.set_read_timeout(Some(Duration::from_secs(10))).ok();
        let hs = ClientHandshake::new(Header::new(Role::Control, id, 0), None, false);
        let session = blocking::handshake(&mut c, &hs).map_err(|e| e.to_string())?;
        let streams = ways
            .iter()
            .enumerate()
            .map(|(i, &way)| StreamSetup { id: i as u32, way, server_cpu: None, client_cpu: None })
            .collect();
        let setup = TestSetup {
            client_version: "abuse".into(),
            time_bound: Dur(profile.time_bound()),
            profile,
            streams,
            kernel: None,
        };
        blocking::write_frame(&mut c, &ClientMsg::Setup(Box::new(setup))).map_err(|e| e.to_string())?;
        match blocking::read_frame::<_, ServerMsg>(&mut c).map_err(|e| e.to_string())? {
            Some(ServerMsg::Accepted { .. }) => Ok(Raw { control: c, key: session.stream_key, id, addr }),
            Some(ServerMsg::Refused { message, .. }) => Err(format!("refused: {message}")),
            other => Err(format!("unexpected {other:?}")),
        }
    }

    fn stream(&self, i: u32) -> Result<TcpStream, String> {
        let mut s = connect(self.addr)?;
        s.write_all(&wire::stream_preamble(&Header::new(Role::Stream, self.id, i), &self.key))
            .map_err(|e| e.to_string())?;
        let mut ack = [0u8; 1];
        s.read_exact(&mut ack).map_err(|e| e.to_string())?;
        match StreamAck::from_byte(ack[0]) {
            Some(StreamAck::Ok) => Ok(s),
            other => Err(format!("stream {i}: {other:?}")),
        }
    }

    fn start(&mut self) -> Result<(), String> {
        blocking::write_frame(&mut self.control, &ClientMsg::Start).map_err(|e| e.to_string())
    }

    /// Sets a test up, connects the streams it can and starts it: the test and its streams.
    fn started(addr: SocketAddr, profile: Profile, ways: &[Way]) -> Result<(Raw, Vec<TcpStream>), String> {
        let mut r = Raw::set_up(addr, profile, ways)?;
        let streams: Vec<TcpStream> = (0..ways.len() as u32).filter_map(|i| r.stream(i).ok()).collect();
        let _ = r.start();
        Ok((r, streams))
    }
}

fn profile(name: &str, edit: impl FnOnce(&mut Profile)) -> Profile {
    let (mut p, _) = Profile::load(name).expect("built-in profile");
    p.run.duration = Some(Dur(Duration::from_secs(60)));
    edit(&mut p);
    p
}

/// Counts outcomes: what the server took, what it refused (and the first reason).
#[derive(Default)]
struct Tally {
    taken: usize,
    refused: usize,
    first: Option<String>,
}

impl Tally {
    fn note<T>(&mut self, r: Result<T, String>) -> Option<T> {
        match r {
            Ok(t) => {
                self.taken += 1;
                Some(t)
            }
            Err(e) => {
                self.refused += 1;
                self.first.get_or_insert(e);
                None
            }
        }
    }

    fn line(&self, what: &str) -> String {
        format!(
            "{what}: {} taken, {} refused{}",
            self.taken,
            self.refused,
            self.first
                .as_deref()
                .map(|f| format!(" (first: {})", f.chars().take(160).collect::<String>()))
                .unwrap_or_default()
        )
    }
}

fn run(a: &Args) -> Result<String, String> {
    let mut held: Vec<Box<dyn std::any::Any>> = Vec::new();
    let mut t = Tally::default();
    let line = match a.attack.as_str() {
        "pending" => attack_pending(a, &mut t, &mut held)?,
        "pending-streams" => attack_pending_streams(a, &mut t, &mut held)?,
        "rr-silent" => attack_rr_silent(a, &mut t, &mut held)?,
        "no-read" => attack_no_read(a, &mut t, &mut held)?,
        "spin" => attack_spin(a, &mut t, &mut held)?,
        "idle-data" => attack_idle_data(a, &mut t, &mut held)?,
        "garbage" => attack_garbage(a, &mut t, &mut held)?,
        "partial-http" | "keepalive-http" => attack_partial_http(a, &mut t, &mut held)?,
        h2 if h2.starts_with("h2-") || h2.starts_with("tls-") => return attack_h2_tls(a),
        other => return Err(format!("unknown attack {other}")),
    };
    let until = Instant::now() + a.hold;
    while Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(held);
    Ok(line)
}

/// The `pending` attack; what it held, in one line.
fn attack_pending(a: &Args, t: &mut Tally, held: &mut Vec<Box<dyn std::any::Any>>) -> Result<String, String> {
    let n = |default: usize| if a.count > 0 { a.count } else { default };
    for _ in 0..n(1024) {
        if let Some(r) = t.note(Raw::set_up(a.data, profile("bulk-1flow", |_| {}), &[Way::Up])) {
            held.push(Box::new(r));
        }
    }
    Ok(t.line("tests set up, never started"))
}

/// The `pending-streams` attack; what it held, in one line.
fn attack_pending_streams(a: &Args, t: &mut Tally, held: &mut Vec<Box<dyn std::any::Any>>) -> Result<String, String> {
    let n = |default: usize| if a.count > 0 { a.count } else { default };
    let streams = n(10_000);
    for _ in 0..2 {
        let p = profile("bulk-1flow", |p| p.workload.bulk_mut().expect("bulk").flows = streams as u32);
        if let Some(r) = t.note(Raw::set_up(a.data, p, &vec![Way::Up; streams])) {
            let mut connected = Vec::new();
            for i in 0..streams as u32 {
                match r.stream(i) {
                    Ok(s) => connected.push(s),
                    Err(_) => break,
                }
            }
            held.push(Box::new((r, connected)));
        }
    }
    Ok(t.line(&format!("tests of {streams} streams, connected, never started")))
}

/// The `rr-silent` attack; what it held, in one line.
fn attack_rr_silent(a: &Args, t: &mut Tally, held: &mut Vec<Box<dyn std::any::Any>>) -> Result<String, String> {
    let n = |default: usize| if a.count > 0 { a.count } else { default };
    let flows = n(100);
    let p = profile("latency", |p| {
        let r = p.workload.rr_mut().expect("rr");
        r.flows = flows as u32;
        r.wait = WaitMode::Block;
        r.req_bytes = ByteSize(16 << 20);
        r.resp_bytes = ByteSize(16 << 20);
    });
    if let Some(running) = t.note(Raw::started(a.data, p, &vec![Way::Up; flows])) {
        held.push(Box::new(running));
    }
    Ok(t.line(&format!("rr of {flows} flows of 16 MiB messages, the client sending nothing")))
}

/// The `no-read` attack; what it held, in one line.
fn attack_no_read(a: &Args, t: &mut Tally, held: &mut Vec<Box<dyn std::any::Any>>) -> Result<String, String> {
    let n = |default: usize| if a.count > 0 { a.count } else { default };
    let flows = n(200);
    let p = profile("bulk-1flow", |p| {
        p.run.interval = Some("10ms".parse().expect("interval"));
        let b = p.workload.bulk_mut().expect("bulk");
        b.flows = flows as u32;
        b.direction = Direction::Reverse;
    });
    if let Some(running) = t.note(Raw::started(a.data, p, &vec![Way::Down; flows])) {
        held.push(Box::new(running));
    }
    Ok(t.line(&format!("reverse test of {flows} streams whose client never reads its reports")))
}

/// The `spin` attack; what it held, in one line.
fn attack_spin(a: &Args, t: &mut Tally, held: &mut Vec<Box<dyn std::any::Any>>) -> Result<String, String> {
    let n = |default: usize| if a.count > 0 { a.count } else { default };
    let flows = n(4);
    let p = profile("latency", |p| {
        let r = p.workload.rr_mut().expect("rr");
        r.flows = flows as u32;
        r.wait = WaitMode::Spin;
    });
    if let Some(r) = t.note(Raw::set_up(a.data, p, &vec![Way::Up; flows])) {
        held.push(Box::new(r));
    }
    Ok(t.line(&format!("rr of {flows} busy-polling flows")))
}

/// The `idle-data` attack; what it held, in one line.
fn attack_idle_data(a: &Args, t: &mut Tally, held: &mut Vec<Box<dyn std::any::Any>>) -> Result<String, String> {
    let n = |default: usize| if a.count > 0 { a.count } else { default };
    for _ in 0..n(10_000) {
        if let Some(c) = t.note(connect(a.data)) {
            held.push(Box::new(c));
        }
    }
    Ok(t.line("connections to the data port that send nothing"))
}

/// The `garbage` attack; what it held, in one line.
fn attack_garbage(a: &Args, _: &mut Tally, _: &mut Vec<Box<dyn std::any::Any>>) -> Result<String, String> {
    let n = |default: usize| if a.count > 0 { a.count } else { default };
    let (mut answered, mut held_open) = (0, 0);
    let tries: Vec<Vec<u8>> = vec![
        b"GET / HTTP/1.1\r\n\r\n".to_vec(),
        {
            let mut h = Header::new(Role::Control, TestId([1; 16]), 0).encode();
            h[4..6].copy_from_slice(&1u16.to_be_bytes());
            h[28..30].copy_from_slice(&[0, 0]);
            h.to_vec()
        },
        Header::new(Role::Stream, TestId([2; 16]), 0).encode().iter().chain(&[0u8; 16]).copied().collect(),
        (0..4096u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect(),
    ];
    for _ in 0..n(50) {
        for bytes in &tries {
            if let Ok(mut c) = connect(a.data) {
                c.set_read_timeout(Some(Duration::from_secs(6))).ok();
                let _ = c.write_all(bytes);
                let mut buf = [0u8; 256];
                // An answer (a refusal frame) or a close is what a server should give;
                // a connection still open after 6 s is one it let linger.
                match c.read(&mut buf) {
                    Ok(_) => answered += 1,
                    Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                        held_open += 1
                    }
                    Err(_) => answered += 1,
                }
            }
        }
    }
    Ok(format!("garbage: {answered} connections refused or closed by the server, {held_open} left open 6 s"))
}

/// The `partial-http` / `keepalive-http` attack; what it held, in one line.
fn attack_partial_http(a: &Args, t: &mut Tally, held: &mut Vec<Box<dyn std::any::Any>>) -> Result<String, String> {
    let n = |default: usize| if a.count > 0 { a.count } else { default };
    let http = a.http.ok_or("--http HOST:PORT is needed")?;
    let full = a.attack == "keepalive-http";
    for _ in 0..n(10_000) {
        let c = connect(http).and_then(|mut c| {
            if full {
                c.write_all(b"GET /?size=1 HTTP/1.1\r\nHost: x\r\n\r\n").map_err(|e| e.to_string())?;
                let mut buf = [0u8; 512];
                c.set_read_timeout(Some(Duration::from_secs(5))).ok();
                let k = c.read(&mut buf).map_err(|e| e.to_string())?;
                if !buf[..k].starts_with(b"HTTP/1.1 200") {
                    return Err("no 200".into());
                }
            } else {
                c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ").map_err(|e| e.to_string())?;
            }
            Ok(c)
        });
        if let Some(c) = t.note(c) {
            held.push(Box::new(c));
        }
    }
    Ok(t.line(if full {
        "HTTP keep-alive connections, one request each"
    } else {
        "HTTP connections with half a header"
    }))
}

/// The HTTP/2 and TLS attacks: floods last `--hold`; what they hold is let go after `--hold`.
fn attack_h2_tls(a: &Args) -> Result<String, String> {
    let n = |default: usize| if a.count > 0 { a.count } else { default };
    let need = |addr: Option<SocketAddr>, flag: &str| addr.ok_or(format!("{} needs {flag} HOST:PORT", a.attack));
    let mut held: Vec<Box<dyn std::any::Any>> = Vec::new();
    let line = if a.attack.starts_with("tls-") {
        let https = need(a.https, "--https")?;
        let to = move || connect(https);
        match a.attack.as_str() {
            "tls-flood" => abuse_h2::tls_flood(&to, n(4), a.hold)?,
            "tls-half-open" => abuse_h2::half_open_tls(&to, n(10_000), a.hold, &mut held)?,
            other => return Err(format!("unknown attack {other}")),
        }
    } else {
        let http = need(a.http, "--http")?;
        let to = move || connect(http);
        match a.attack.as_str() {
            "h2-rapid-reset" => abuse_h2::rapid_reset(&to, n(4), a.hold)?,
            "h2-continuation" => abuse_h2::continuation_flood(&to, n(4), a.hold)?,
            "h2-hpack-bomb" => abuse_h2::hpack_bomb(&to, n(4), a.hold)?,
            "h2-zero-window" => {
                let line = abuse_h2::zero_window(&to, n(100), &mut held)?;
                std::thread::sleep(a.hold);
                line
            }
            "h2-settings-flood" => abuse_h2::ack_flood(&to, 0x4, n(4), a.hold)?,
            "h2-ping-flood" => abuse_h2::ack_flood(&to, 0x6, n(4), a.hold)?,
            other => return Err(format!("unknown attack {other}")),
        }
    };
    drop(held);
    Ok(line)
}

fn main() {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("netblast-abuse: {e}");
            std::process::exit(2);
        }
    };
    // Every attack holds at most about 20 000 descriptors; take what the hard limit allows.
    let (_, hard) = netblast_engine::os::sys::nofile_limit();
    if let Err(e) = netblast_engine::os::sys::ensure_fds(hard.min(40_000)) {
        eprintln!("netblast-abuse: {e}");
    }
    match run(&args) {
        Ok(line) => println!("{line}"),
        Err(e) => {
            eprintln!("netblast-abuse: {e}");
            std::process::exit(1);
        }
    }
}
