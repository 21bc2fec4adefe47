//! `netblast run`: the client end of a test.
//!
//! 1. Connect the control connection, send the header and the [`TestSetup`], wait for
//!    `Accepted`.
//! 2. Open every stream (options set before `connect`), each announced by its header and
//!    acknowledged by the server.
//! 3. Spawn one pinned worker per CPU, send `Start`, open the start gate.
//! 4. Aggregate worker events and the server's interval reports; at the bound send `Stop`.
//! 5. Wait for the server's `Final`, then build the [`RunResult`]. Whatever goes wrong after
//!    the start (a reset, a dead server, Ctrl-C) is recorded in the result, which is then
//!    marked incomplete; nothing measured is thrown away.

use crate::aggregate::{Aggregator, KindInfo};
use crate::bulk;
use crate::end::{self, Conn, Ctx, Side, Timing};
use crate::sockopt;
use crate::sys::{self, CpuMark};
use crate::worker::{Event, EventTx, RunFlags, StartGate};
use netblast_probe::Probe;
use netblast_spec::profile::{Kind, Profile, Protocol, Way};
use netblast_spec::result::{HostInfo, Interval, Plan, RunResult, StreamInfo, SCHEMA};
use netblast_spec::units::{CpuList, Dur};
use netblast_spec::wire::{
    self, blocking, ClientMsg, Header, Role, ServerMsg, StreamAck, StreamSetup, TestId, TestSetup,
};
use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpStream, ToSocketAddrs, UdpSocket};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Port `netblast serve` listens on unless told otherwise.
pub const DEFAULT_PORT: u16 = 5210;
/// How long a TCP connect may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the server may take to answer a setup or a stream header.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(10);
/// After the bound: how long receivers wait for the peer's end of file, and how long the client
/// waits for the server's final report.
pub const DRAIN_GRACE: Duration = Duration::from_secs(10);

/// Errors that stop a run before it measured anything.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The target could not be parsed or resolved.
    #[error("invalid target {target:?}: {why}")]
    Target {
        /// What the user wrote.
        target: String,
        /// Why it does not work.
        why: String,
    },
    /// `--cpus` names CPUs this process cannot use.
    #[error("{0}")]
    Cpus(String),
    /// TCP connect failed.
    #[error("cannot connect to {peer}: {why}")]
    Connect {
        /// The address.
        peer: SocketAddr,
        /// Why, in words.
        why: String,
    },
    /// The peer answered, but not as a netblast server.
    #[error("{peer} does not speak the netblast protocol: {why}")]
    NotNetblast {
        /// The address.
        peer: SocketAddr,
        /// What went wrong.
        why: String,
    },
    /// The server refused the test.
    #[error("{peer} refused the test: {message}")]
    Refused {
        /// The address.
        peer: SocketAddr,
        /// The server's reason.
        message: String,
    },
    /// Not enough file descriptors for the flows.
    #[error("{0}")]
    Fds(String),
    /// An HTTP test cannot start: a URL, header, body file or TLS setting does not work.
    #[error("{0}")]
    Http(String),
    /// Any other I/O failure during setup.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: io::Error,
    },
}

/// What the client reports while it runs (for live output).
#[derive(Debug)]
pub enum Live<'a> {
    /// The server accepted the test and every stream is connected.
    Started {
        /// The plan.
        plan: &'a Plan,
        /// The test id.
        test_id: &'a str,
        /// The server host.
        server: &'a HostInfo,
        /// The streams.
        streams: &'a [StreamInfo],
    },
    /// One interval, this end's view (the server's view is merged into the final result).
    Interval(&'a Interval),
}

/// Parses `HOST`, `HOST:PORT`, `[V6]:PORT` or a bare IPv6 address, defaulting the port.
pub fn resolve_target(target: &str) -> Result<SocketAddr, ClientError> {
    resolve_target_port(target, DEFAULT_PORT)
}

/// As [`resolve_target`] with another default port.
pub fn resolve_target_port(target: &str, default_port: u16) -> Result<SocketAddr, ClientError> {
    let bad = |why: String| ClientError::Target { target: target.to_string(), why };
    let t = target.trim();
    if t.is_empty() {
        return Err(bad("empty".into()));
    }
    if let Ok(ip) = t.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, default_port));
    }
    if let Ok(sa) = t.parse::<SocketAddr>() {
        return Ok(sa);
    }
    let with_port = if t.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u16>().is_ok()) {
        t.to_string()
    } else {
        format!("{t}:{default_port}")
    };
    let mut addrs = with_port.to_socket_addrs().map_err(|e| bad(format!("cannot resolve: {e}")))?;
    addrs.next().ok_or_else(|| bad("name resolves to no address".into()))
}

/// The client CPUs: the requested list, or all usable. With `strict` (the list came from
/// `--cpus`) a CPU this process cannot use is an error; otherwise (the list came from a
/// profile written for a bigger machine) the usable part is taken and a note says so.
pub fn resolve_cpus(requested: Option<&CpuList>, strict: bool) -> Result<(Vec<usize>, Option<String>), ClientError> {
    let allowed = sys::allowed_cpus()
        .map_err(|e| ClientError::Io { what: "cannot read this process's CPU affinity".into(), source: e })?;
    let Some(list) = requested else { return Ok((allowed, None)) };
    let missing: Vec<usize> = list.0.iter().copied().filter(|c| !allowed.contains(c)).collect();
    if missing.is_empty() {
        return Ok((list.0.clone(), None));
    }
    let usable: Vec<usize> = list.0.iter().copied().filter(|c| allowed.contains(c)).collect();
    if strict || usable.is_empty() {
        return Err(ClientError::Cpus(format!(
            "--cpus names CPU {} which this process cannot use (usable CPUs: {})",
            CpuList(missing),
            CpuList(allowed)
        )));
    }
    let note = format!(
        "the profile asks for CPUs {}; this host lets netblast use {}: running on those",
        CpuList(list.0.clone()),
        CpuList(usable.clone())
    );
    Ok((usable, Some(note)))
}

/// Resolves a validated profile against this machine and a target into a [`Plan`].
/// `cpus_from_flag`: the CPU list came from `--cpus` (strict) rather than the profile.
pub fn plan(
    profile: Profile,
    origin: String,
    target: &str,
    cpus_from_flag: bool,
) -> Result<(Plan, SocketAddr), ClientError> {
    let peer = match profile.run.kind {
        // HTTP targets are resolved per URL by the http generator; --target only completes paths.
        Kind::Http => {
            let port = if profile.http().tls { 443 } else { 80 };
            resolve_target_port(target, port).unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0)))
        }
        _ => resolve_target(target)?,
    };
    let (client_cpus, note) = resolve_cpus(profile.run.cpus.as_ref(), cpus_from_flag)?;
    // A msgrate profile without a flow count runs one flow per CPU: say that in flow terms.
    let per_cpu_flows = profile.run.kind == Kind::Msgrate && profile.msgrate().flows.is_none();
    let mut notes: Vec<String> = note.filter(|_| !per_cpu_flows).into_iter().collect();
    let server_list = match profile.run.kind {
        Kind::Bulk | Kind::Http => None,
        Kind::Msgrate => Some(profile.msgrate().server_cpus),
        Kind::Rr => Some(profile.rr().server_cpus),
    };
    let n_streams = stream_count(&profile, client_cpus.len());
    let server_cpus = match server_list {
        None => Vec::new(),
        Some(Some(list)) => (0..n_streams).map(|i| list.0[i % list.0.len()]).collect(),
        Some(None) => {
            // Stream i's client end runs on client_cpus[i % n]. A peer on this same host gets the
            // CPU half the list away, so the two ends of a flow never share a core.
            let n = client_cpus.len();
            let shift = if peer.ip().is_loopback() && n > 1 { n / 2 } else { 0 };
            if shift > 0 {
                notes.push("the server is on this host: each flow's server end is pinned half the CPU list away from its client end".into());
            }
            (0..n_streams).map(|i| client_cpus[(i + shift) % n]).collect()
        }
    };
    if per_cpu_flows {
        if let Some(asked) = profile.run.cpus.as_ref().filter(|c| c.0.len() != client_cpus.len()) {
            notes.insert(
                0,
                format!(
                    "the profile asks for one flow per CPU on CPUs {} ({} flows); this host lets netblast use {} CPUs ({}): running {} flows, one per CPU",
                    CpuList(asked.0.clone()),
                    asked.0.len(),
                    client_cpus.len(),
                    CpuList(client_cpus.clone()),
                    client_cpus.len()
                ),
            );
        }
    }
    if profile.run.kind == Kind::Rr
        && profile.rr().wait == netblast_spec::profile::WaitMode::Spin
        && peer.ip().is_loopback()
        && 2 * n_streams > client_cpus.len()
    {
        notes.push(format!(
            "wait = spin with {n_streams} flow(s) on this host: {} busy-polling threads share {} CPU(s) and will \
             take turns, which shows as millisecond outliers; use fewer flows or --wait block",
            2 * n_streams,
            client_cpus.len()
        ));
    }
    let plan = Plan {
        origin,
        target: target.to_string(),
        peer: peer.to_string(),
        client_cpus,
        server_cpus,
        notes,
        time_bound: Dur(profile.time_bound()),
        profile,
    };
    Ok((plan, peer))
}

/// Splits `total` bytes over `n` flows so the parts add up exactly; part `k` of `n`.
pub fn split_budget(total: u64, n: u64, k: u64) -> u64 {
    let n = n.max(1);
    total / n + u64::from(k < total % n)
}

/// Number of streams a profile opens, given the client's CPU count.
pub fn stream_count(profile: &Profile, cpus: usize) -> usize {
    match profile.run.kind {
        Kind::Bulk => {
            let b = profile.bulk();
            b.flows as usize * b.direction.ways().len()
        }
        Kind::Msgrate => profile.msgrate().flows.map(|f| f as usize).unwrap_or(cpus.max(1)),
        Kind::Rr => profile.rr().flows as usize,
        Kind::Http => 0,
    }
}

/// Whether a profile's streams carry UDP datagrams (set up over their TCP streams).
pub fn uses_udp(profile: &Profile) -> bool {
    match profile.run.kind {
        Kind::Bulk | Kind::Http => false,
        Kind::Msgrate => profile.msgrate().protocol == Protocol::Udp,
        Kind::Rr => profile.rr().protocol == Protocol::Udp,
    }
}

fn connect_error(peer: SocketAddr, e: io::Error) -> ClientError {
    let why = match e.kind() {
        io::ErrorKind::ConnectionRefused => "connection refused (is `netblast serve` running there?)".to_string(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => {
            format!("no answer within {}s (host down or filtered?)", CONNECT_TIMEOUT.as_secs())
        }
        _ => bulk::describe_io(&e),
    };
    ClientError::Connect { peer, why }
}

enum Incoming {
    Worker(usize, Event),
    Server(ServerMsg),
    ControlClosed(String),
}

/// The streams of a plan, ids in order (up streams first), with their server CPUs.
pub fn stream_setups(plan: &Plan) -> Vec<StreamSetup> {
    let profile = &plan.profile;
    let n = stream_count(profile, plan.client_cpus.len());
    let ways: Vec<Way> = match profile.run.kind {
        Kind::Bulk => {
            let b = profile.bulk();
            b.direction.ways().iter().flat_map(|&w| std::iter::repeat_n(w, b.flows as usize)).collect()
        }
        Kind::Msgrate | Kind::Rr => vec![Way::Up; n],
        Kind::Http => Vec::new(),
    };
    ways.into_iter()
        .enumerate()
        .map(|(i, way)| StreamSetup { id: i as u32, way, server_cpu: plan.server_cpus.get(i).copied() })
        .collect()
}

/// TCP_NODELAY when the profile does not say: on for rr (a latency test must not wait for
/// Nagle), off for bulk and msgrate (as iperf3 and qperf).
pub fn nodelay_default(kind: Kind) -> bool {
    kind == Kind::Rr
}

/// Opens one stream: TCP connect with options, header (and UDP port), ack (and the server's UDP
/// port); for UDP flows the datagram socket ends up connected to the server's.
fn open_stream(
    peer: SocketAddr,
    profile: &Profile,
    test_id: TestId,
    id: u32,
    udp: bool,
) -> Result<(TcpStream, Option<UdpSocket>), ClientError> {
    let io_err =
        |what: &'static str| move |source: io::Error| ClientError::Io { what: format!("{what} ({peer})"), source };
    let stream = sockopt::connect(peer, &profile.tcp, nodelay_default(profile.run.kind), CONNECT_TIMEOUT)
        .map_err(|e| connect_error(peer, e))?;
    stream.set_read_timeout(Some(REPLY_TIMEOUT)).ok();
    let mut hello = Header { version: wire::VERSION, role: Role::Stream, test_id, stream_id: id }.encode().to_vec();
    let udp_sock = if udp {
        let local = stream.local_addr().map_err(io_err("cannot read the stream's address"))?;
        let sock = UdpSocket::bind(SocketAddr::new(local.ip(), 0)).map_err(io_err("cannot open a UDP socket"))?;
        let port = sock.local_addr().map_err(io_err("cannot read the UDP port"))?.port();
        hello.extend_from_slice(&port.to_be_bytes());
        Some(sock)
    } else {
        None
    };
    (&stream).write_all(&hello).map_err(io_err("cannot open a stream"))?;
    let mut ack = [0u8; 1];
    (&stream).read_exact(&mut ack).map_err(io_err("no answer to a stream handshake"))?;
    match StreamAck::from_byte(ack[0]) {
        Some(StreamAck::Ok) => {}
        Some(other) => {
            return Err(ClientError::Refused { peer, message: format!("stream {id}: {}", other.describe()) })
        }
        None => return Err(ClientError::NotNetblast { peer, why: format!("stream ack byte {}", ack[0]) }),
    }
    if let Some(sock) = &udp_sock {
        let mut port = [0u8; 2];
        (&stream).read_exact(&mut port).map_err(io_err("no UDP port from the server"))?;
        sock.connect(SocketAddr::new(peer.ip(), u16::from_be_bytes(port)))
            .map_err(io_err("cannot connect the UDP socket"))?;
    }
    stream.set_read_timeout(None).ok();
    Ok((stream, udp_sock))
}

/// Runs one test against a `netblast serve` at `peer`.
///
/// Errors before the start are returned; after the start everything goes into the result.
pub fn run(
    plan: &Plan,
    peer: SocketAddr,
    probe: &Probe,
    flags: &Arc<RunFlags>,
    live: &mut dyn FnMut(Live<'_>),
) -> Result<RunResult, ClientError> {
    let profile = &plan.profile;
    let kind = profile.run.kind;
    if kind == Kind::Http {
        // No netblast server involved: the target is any HTTP server.
        return crate::http::run(plan, probe, flags, live);
    }
    let udp = uses_udp(profile);
    let setups = stream_setups(plan);
    sys::ensure_fds(setups.len() as u64 * if udp { 2 } else { 1 } + 64).map_err(ClientError::Fds)?;
    let test_id = TestId(sys::random_bytes());
    let test_id_s = test_id.to_string();
    let started_at = sys::now_rfc3339();

    // The kernel callbacks (eBPF) must be on before the streams connect.
    if let Err(e) = probe.watch_port(peer.port()) {
        return Err(ClientError::Io {
            what: "cannot set up the eBPF probe".into(),
            source: io::Error::other(e.to_string()),
        });
    }

    // 1. Control connection and setup.
    let mut control = TcpStream::connect_timeout(&peer, CONNECT_TIMEOUT).map_err(|e| connect_error(peer, e))?;
    control.set_nodelay(true).ok();
    control.set_read_timeout(Some(REPLY_TIMEOUT)).ok();
    let io_err = |what: &str| {
        let what = what.to_string();
        move |source: io::Error| ClientError::Io { what: format!("{what} ({peer})"), source }
    };
    let header = Header { version: wire::VERSION, role: Role::Control, test_id, stream_id: 0 };
    control.write_all(&header.encode()).map_err(io_err("cannot send the handshake"))?;
    let setup = TestSetup {
        client_version: env!("CARGO_PKG_VERSION").to_string(),
        profile: profile.clone(),
        time_bound: plan.time_bound,
        streams: setups.clone(),
    };
    blocking::write_frame(&mut control, &ClientMsg::Setup(Box::new(setup)))
        .map_err(io_err("cannot send the test setup"))?;
    let reply: Option<ServerMsg> = blocking::read_frame(&mut control).map_err(|e| match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => ClientError::NotNetblast {
            peer,
            why: format!("no answer to the handshake within {}s", REPLY_TIMEOUT.as_secs()),
        },
        io::ErrorKind::InvalidData => ClientError::NotNetblast { peer, why: e.to_string() },
        _ => ClientError::Io { what: format!("reading the server's answer ({peer})"), source: e },
    })?;
    let (server_host, server_probe) = match reply {
        Some(ServerMsg::Accepted { server, probe }) => (server, probe),
        Some(ServerMsg::Refused { message }) => return Err(ClientError::Refused { peer, message }),
        Some(other) => {
            return Err(ClientError::NotNetblast { peer, why: format!("unexpected first frame {other:?}") });
        }
        None => {
            return Err(ClientError::NotNetblast { peer, why: "it closed the connection without answering".into() });
        }
    };

    // 2. Streams. Bulk spreads streams round-robin over one worker per CPU; the message kinds
    // run one worker per stream, stream i on CPU i (wrapping).
    let ncpu = plan.client_cpus.len().max(1);
    let bulk_workers = ncpu.min(setups.len()).max(1);
    let mut infos = Vec::with_capacity(setups.len());
    let mut conns = Vec::with_capacity(setups.len());
    for (i, s) in setups.iter().enumerate() {
        let (tcp, udp_sock) = open_stream(peer, profile, test_id, s.id, udp)?;
        let client_cpu = match kind {
            Kind::Bulk | Kind::Http => plan.client_cpus[i % bulk_workers],
            Kind::Msgrate | Kind::Rr => plan.client_cpus[i % ncpu],
        };
        infos.push(StreamInfo {
            id: s.id,
            way: s.way,
            local: tcp.local_addr().map(|a| a.to_string()).unwrap_or_default(),
            remote: peer.to_string(),
            client_cpu,
            server_cpu: s.server_cpu,
        });
        conns.push(Conn { id: s.id, way: s.way, tcp, udp: udp_sock, cpu: Some(client_cpu) });
    }

    // 3. Workers, then start.
    let (tx, rx) = mpsc::channel::<Incoming>();
    let wtx = tx.clone();
    let sink: EventTx = Arc::new(move |w, ev| {
        let _ = wtx.send(Incoming::Worker(w, ev));
    });
    let gate = StartGate::new();
    let ctx = Ctx { probe: probe.clone(), gate: gate.clone(), flags: flags.clone(), tx: sink };
    let timing = Timing { send_for: plan.time_bound.get(), give_up_after: plan.time_bound.get() + DRAIN_GRACE };
    let bulk_cpus: Vec<Option<usize>> = plan.client_cpus.iter().take(bulk_workers).map(|&c| Some(c)).collect();
    let handles = end::spawn(Side::Client, profile, timing, conns, &bulk_cpus, &ctx)
        .map_err(|e| ClientError::Io { what: "cannot start worker threads".into(), source: e })?;
    drop(ctx);

    control.set_read_timeout(None).ok();
    let reader = {
        let mut r = control.try_clone().map_err(io_err("cannot clone the control connection"))?;
        let tx = tx.clone();
        std::thread::Builder::new()
            .name("netblast-ctl".into())
            .spawn(move || loop {
                match blocking::read_frame::<_, ServerMsg>(&mut r) {
                    Ok(Some(msg)) => {
                        if tx.send(Incoming::Server(msg)).is_err() {
                            return;
                        }
                    }
                    Ok(None) => {
                        let _ = tx.send(Incoming::ControlClosed("the server closed the control connection".into()));
                        return;
                    }
                    Err(e) => {
                        let _ = tx.send(Incoming::ControlClosed(format!(
                            "control connection failed: {}",
                            bulk::describe_io(&e)
                        )));
                        return;
                    }
                }
            })
            .map_err(|e| ClientError::Io { what: "cannot start the control reader".into(), source: e })?
    };
    drop(tx);

    let cpu_mark = CpuMark::thread();
    if let Err(e) = blocking::write_frame(&mut control, &ClientMsg::Start) {
        gate.cancel();
        flags.abort();
        for h in handles {
            let _ = h.join();
        }
        let _ = control.shutdown(Shutdown::Both);
        let _ = reader.join();
        return Err(ClientError::Io { what: format!("cannot start the test ({peer})"), source: e });
    }
    let start = Instant::now();
    gate.open(start);
    live(Live::Started { plan, test_id: &test_id_s, server: &server_host, streams: &infos });

    // 4. Aggregate until every worker is done and the server has reported.
    let protocol = match kind {
        Kind::Bulk | Kind::Http => Protocol::Tcp,
        Kind::Msgrate => profile.msgrate().protocol,
        Kind::Rr => profile.rr().protocol,
    };
    let mut agg = Aggregator::new(infos.clone(), handles.len(), KindInfo { kind, protocol });
    for n in &plan.notes {
        agg.warn(0.0, "plan", n.clone());
    }
    let bound_at = start + plan.time_bound.get();
    let mut stop_sent = false;
    let mut control_closed = false;
    let mut workers_done_at: Option<Instant> = None;
    loop {
        let now = Instant::now();
        if !stop_sent && (now >= bound_at || flags.stopping()) {
            // The server stops its senders; our own workers stop by themselves.
            if !control_closed {
                if let Err(e) = blocking::write_frame(&mut control, &ClientMsg::Stop) {
                    agg.error(
                        start.elapsed().as_secs_f64(),
                        "control",
                        format!("cannot send stop: {}", bulk::describe_io(&e)),
                    );
                }
            }
            stop_sent = true;
        }
        if agg.workers_done() {
            let t = *workers_done_at.get_or_insert(now);
            if agg.has_server_final() || control_closed || now >= t + DRAIN_GRACE {
                break;
            }
        }
        let wait = if stop_sent {
            Duration::from_millis(100)
        } else {
            bound_at.saturating_duration_since(now).min(Duration::from_millis(100))
        };
        match rx.recv_timeout(wait) {
            Ok(Incoming::Worker(w, ev)) => {
                for iv in agg.on_worker(w, ev) {
                    live(Live::Interval(&iv));
                }
            }
            Ok(Incoming::Server(ServerMsg::Interval { index, start_s, end_s, streams })) => {
                agg.on_server_interval(index, start_s, end_s, streams)
            }
            Ok(Incoming::Server(ServerMsg::Final { streams, cpu })) => {
                for s in &streams {
                    if let Some(n) = &s.note {
                        agg.warn(0.0, format!("server stream {}", s.id), n.clone());
                    }
                }
                agg.on_server_final(streams, cpu)
            }
            Ok(Incoming::Server(ServerMsg::Refused { message })) => {
                agg.error(start.elapsed().as_secs_f64(), "server", message);
            }
            Ok(Incoming::Server(other)) => {
                agg.error(
                    start.elapsed().as_secs_f64(),
                    "control",
                    format!("unexpected frame from the server: {other:?}"),
                );
            }
            Ok(Incoming::ControlClosed(why)) => {
                control_closed = true;
                if !agg.has_server_final() {
                    agg.error(
                        start.elapsed().as_secs_f64(),
                        "server",
                        format!("{why} before its final report ({peer})"),
                    );
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let control_cpu = cpu_mark.usage();
    if !agg.has_server_final() && !control_closed {
        agg.error(
            start.elapsed().as_secs_f64(),
            "server",
            format!("no final report within {}s after the end", DRAIN_GRACE.as_secs()),
        );
    }
    flags.abort();
    for h in handles {
        let _ = h.join();
    }
    let _ = control.shutdown(Shutdown::Both);
    let _ = reader.join();
    if flags.interrupted() {
        agg.error(start.elapsed().as_secs_f64(), "client", "interrupted by the user");
    }

    // 5. The result.
    let complete = agg.errors.is_empty() && agg.all_streams_clean() && agg.has_server_final();
    let (intervals, summary) = agg.finish(control_cpu);
    Ok(RunResult {
        schema: SCHEMA.to_string(),
        netblast_version: env!("CARGO_PKG_VERSION").to_string(),
        test_id: test_id_s,
        started_at,
        complete,
        errors: agg.errors.clone(),
        warnings: agg.warnings.clone(),
        plan: plan.clone(),
        client: sys::host_info(),
        server: Some(server_host),
        probe: probe.info(),
        server_probe: Some(server_probe),
        streams: infos,
        intervals,
        summary,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        assert_eq!(resolve_target("127.0.0.1").unwrap(), "127.0.0.1:5210".parse().unwrap());
        assert_eq!(resolve_target("127.0.0.1:9").unwrap(), "127.0.0.1:9".parse().unwrap());
        assert_eq!(resolve_target("::1").unwrap(), "[::1]:5210".parse().unwrap());
        assert_eq!(resolve_target("[::1]:7").unwrap(), "[::1]:7".parse().unwrap());
        assert_eq!(resolve_target("localhost:8").unwrap().port(), 8);
        assert!(resolve_target("").is_err());
        assert!(resolve_target("no-such-host.invalid").is_err());
    }

    #[test]
    fn budgets_add_up() {
        for (total, n) in [(10u64, 3u64), (1, 4), (1 << 30, 7), (5, 5)] {
            let sum: u64 = (0..n).map(|k| split_budget(total, n, k)).sum();
            assert_eq!(sum, total);
        }
    }

    #[test]
    fn missing_cpu_is_a_clear_error() {
        let e = resolve_cpus(Some(&CpuList(vec![4000])), true).unwrap_err().to_string();
        assert!(e.contains("CPU 4000"), "{e}");
        assert!(e.contains("usable CPUs"), "{e}");
        // From a profile written for a bigger host: the usable part, with a note.
        let (cpus, note) = resolve_cpus(Some(&CpuList(vec![0, 4000])), false).unwrap();
        assert_eq!(cpus, vec![0]);
        assert!(note.unwrap().contains("4000"));
    }
}
