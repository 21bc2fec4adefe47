//! The cps generator: new TCP connections as fast as possible (or at a rate), one flow per
//! pinned worker, as netperf `TCP_CRR` and `ethr -t c` measure them.
//!
//! Each flow has its anchor (the stream connection made at set-up, which carries nothing but
//! its end) and, on the server, a listener of its own on a port the server chose; the client
//! learnt that port in the stream's acknowledgement. The client, one connection at a time:
//! `socket`, `connect` (timed: the connect latency, one HDR sample per established
//! connection), `TCP_INFO` for SYN retransmissions (unless the probe is off), the request, the
//! whole response, `close` (FIN, or RST with `SO_LINGER` 0; with `close = "server"` it first
//! reads the server's end of the stream). The server, on its pinned worker: `accept` (only
//! connections from the anchor's peer address; others are reset and not counted), the
//! request, the response, then it waits for the client's close and closes (with `close =
//! "server"` it closes at once, as netperf's `TCP_CRR` server does).
//!
//! A connection that fails is counted by cause (port exhaustion, refused, timed out, reset,
//! other) and the flow goes on: failures are what a firewall or SNAT test is after. Nothing
//! here allocates per connection.
//!
//! Metrics: connections completed (client) and served (server) per interval, failed
//! connections per interval (`lost`), the connect-latency histogram per interval, failure
//! causes and SYN retransmissions in total. With the eBPF probe the client's connections are
//! one kernel group per flow: the kernel RTT histogram and retransmissions per interval come
//! from it, at no per-connection cost in user space; with `TCP_INFO`, one `getsockopt` per
//! connection reads its SYN retransmissions.
//!
//! With no agent on the other side (`cps.agent = false`) the client dials the target itself,
//! one flow per pinned worker, with no anchor and no server end ([`any`]: what it sends and
//! reads, TLS handshakes), and counts alone.

pub mod any;

use crate::exec::worker::{Ctx, Deadlines, RunFlags, Seat, Timing};
use crate::kinds::flow::ListenerEnd;
use crate::kinds::flow::{Cause, FlowRole, cause_of, conn_socket, count, describe_io, fatal};
use crate::kinds::flow::{Conn, End};
use crate::kinds::msgrate::WAKE;
use crate::measure::meter::{Meter, run_single, should_stop};
use crate::measure::pace::Pace;
use crate::os::net;
use netblast_spec::profile::CpsSection;
use netblast_spec::profile::{CloseMode, TcpSection};
use netblast_spec::result::ConnCounts;
use socket2::{SockRef, Socket, Type};
use std::io::{self, ErrorKind};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

/// Parameters of a cps test end.
#[derive(Debug)]
pub struct CpsConfig {
    /// The profile's section: sizes, how connections close, the timeout.
    pub section: CpsSection,
    /// Connections per second of this flow (its share of `section.rate`); `None`: as fast as
    /// it can.
    pub flow_rate: Option<f64>,
    /// The flows sharing the rate: flow i starts i/flows of a gap late, so together they open
    /// connections evenly, not in bursts of one per flow.
    pub flows: u32,
    /// Socket options of each new connection.
    pub tcp: TcpSection,
    /// Where each connection leaves from.
    pub bind: crate::os::sockopt::Binding,
    /// Read SYN retransmissions from each connection's `TCP_INFO` (off with `--probe off`).
    pub kernel_stats: bool,
    /// Reporting interval.
    pub interval: Duration,
    /// When the client stops and the server gives up.
    pub timing: Timing,
    /// With no agent on the other side: each connection's exchange.
    pub any: Option<any::Agentless>,
}

/// Spawns an end's cps workers, one pinned worker per flow, each with its share of the
/// connection rate.
pub fn spawn(end: &End<'_>, c: &CpsSection, conns: Vec<Conn>) -> io::Result<Vec<std::thread::JoinHandle<()>>> {
    let mut flows = Vec::with_capacity(conns.len());
    for conn in conns {
        let Some(other) = conn.listener else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("cps flow {} has no listener", conn.id)));
        };
        let flow = CpsFlow { id: conn.id, role: end.role(conn.way), anchor: Some(conn.tcp), end: other };
        flows.push((flow, conn.cpu));
    }
    let run = (&end.profile.tcp, end.profile.run.interval(), end.timing);
    spawn_flows(config(c, flows.len(), run, end.ctx, None), flows, end.ctx)
}

/// Spawns the client's cps workers of a test with no agent on the other side: flow i dials
/// `to` from its worker pinned to `cpus[i]`, each with its share of the rate.
pub fn spawn_agentless(
    c: &CpsSection,
    (to, any): (SocketAddr, any::Agentless),
    (ids, cpus): (&[u32], &[usize]),
    run: (&TcpSection, Duration, Timing),
    ctx: &Ctx,
) -> io::Result<Vec<std::thread::JoinHandle<()>>> {
    let flows: Vec<(CpsFlow, Option<usize>)> = ids
        .iter()
        .zip(cpus)
        .map(|(&id, &cpu)| (CpsFlow { id, role: FlowRole::Send, anchor: None, end: ListenerEnd::Dial(to) }, Some(cpu)))
        .collect();
    spawn_flows(config(c, flows.len(), run, ctx, Some(any)), flows, ctx)
}

/// What `flows` cps flows of section `c` share: the rate split over them, the socket
/// options, the interval and timing, and with no agent the exchange.
fn config(
    c: &CpsSection,
    flows: usize,
    (tcp, interval, timing): (&TcpSection, Duration, Timing),
    ctx: &Ctx,
    any: Option<any::Agentless>,
) -> std::sync::Arc<CpsConfig> {
    let n = flows.max(1) as f64;
    std::sync::Arc::new(CpsConfig {
        section: c.clone(),
        flow_rate: c.rate.map(|r| r.per_second() / n),
        flows: n as u32,
        tcp: tcp.clone(),
        bind: ctx.bind.clone(),
        kernel_stats: ctx.probe.collects(),
        interval,
        timing,
        any,
    })
}

/// One pinned worker per flow (on the CPU beside it), sharing `cfg`.
fn spawn_flows(
    cfg: std::sync::Arc<CpsConfig>,
    flows: Vec<(CpsFlow, Option<usize>)>,
    ctx: &Ctx,
) -> io::Result<Vec<std::thread::JoinHandle<()>>> {
    let mut handles = Vec::with_capacity(flows.len());
    for (i, (flow, cpu)) in flows.into_iter().enumerate() {
        let (cfg, ctx) = (cfg.clone(), ctx.clone());
        handles.push(crate::exec::worker::spawn(i, cpu, move |pinned| {
            run_worker(Seat { index: i, pinned }, flow, &cfg, &ctx)
        })?);
    }
    Ok(handles)
}

/// One cps flow: its stream id, its role, its anchor (the stream connection that set it up)
/// and its other end.
#[derive(Debug)]
pub struct CpsFlow {
    /// Stream id.
    pub id: u32,
    /// Send: this end dials; recv: it accepts.
    pub role: FlowRole,
    /// The flow's stream connection: shut when the flow ends (none with no agent).
    pub anchor: Option<TcpStream>,
    /// Where connections go, or where they come from.
    pub end: ListenerEnd,
}

/// Runs one cps flow on the calling (pinned) worker thread until it ends.
pub fn run_worker(seat: Seat, flow: CpsFlow, cfg: &CpsConfig, ctx: &Ctx) {
    let CpsFlow { id, role, anchor, end } = flow;
    let (probe, flags) = (&ctx.probe, &*ctx.flags);
    let client = role == FlowRole::Send;
    // With eBPF the kernel keeps the flow's connections as one group (RTT histogram,
    // retransmissions, SYN retransmissions): nothing to register per connection.
    let watch = match &end {
        // (With no agent every flow dials the same port: each connection's TCP_INFO instead.)
        ListenerEnd::Dial(to) if client && cfg.kernel_stats && cfg.any.is_none() => probe.watch_group(to.port()),
        _ => None,
    };
    run_single(&seat, id, ctx, (cfg.interval, client, watch), |m, start| {
        let ends = cfg.timing.after(start);
        let outcome = match (&end, client) {
            (ListenerEnd::Dial(to), true) => {
                m.conns = Some(ConnCounts::default());
                let r = dial_loop(*to, cfg, m, flags, (start, id), ends);
                if let Some(a) = &anchor {
                    let _ = a.shutdown(std::net::Shutdown::Write);
                }
                r
            }
            (ListenerEnd::Listen(l), false) => match &anchor {
                Some(a) => accept_loop(l, a, cfg, m, flags, ends),
                None => Err("a cps listener has no stream to its client".into()),
            },
            _ => Err("a cps flow's ends do not match its role".into()),
        };
        outcome.map(|_| None)
    });
}

/// A new socket for the next connection, its options set; the connect timeout is SO_SNDTIMEO
/// (which Linux applies to a blocking `connect`) and the response timeout SO_RCVTIMEO.
fn new_socket(to: SocketAddr, cfg: &CpsConfig) -> io::Result<Socket> {
    let sock = conn_socket(to, &cfg.tcp, &cfg.bind, Type::STREAM)?;
    sock.set_write_timeout(Some(cfg.section.timeout()))?;
    if cfg.section.resp_bytes.to_usize() > 0 || cfg.section.close == CloseMode::Server || cfg.any.is_some() {
        sock.set_read_timeout(Some(cfg.section.timeout()))?;
    }
    Ok(sock)
}

/// The bytes one connection carries, read and written in turn from this much memory.
const CHUNK: usize = 64 * 1024;

/// Sends `n` bytes of `pattern`, repeated.
fn send_n(fd: RawFd, mut n: usize, pattern: &[u8]) -> io::Result<()> {
    while n > 0 {
        let k = n.min(pattern.len());
        let sent = net::send(fd, &pattern[..k], 0)?;
        n -= sent;
    }
    Ok(())
}

/// Reads exactly `n` bytes into `scratch`, in turn. The peer closing first is a reset: the
/// other end did not finish its part.
fn recv_n(fd: RawFd, mut n: usize, scratch: &mut [u8]) -> io::Result<()> {
    while n > 0 {
        let k = n.min(scratch.len());
        match net::recv(fd, &mut scratch[..k], 0) {
            Ok(0) => return Err(io::Error::from_raw_os_error(libc::ECONNRESET)),
            Ok(got) => n -= got,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A netblast server's connection: the request, the response, and with `close = "server"`
/// its end of the stream.
fn exchange(fd: RawFd, cfg: &CpsConfig, req: &[u8], resp: &mut [u8]) -> io::Result<()> {
    if cfg.section.req_bytes.to_usize() > 0 {
        send_n(fd, cfg.section.req_bytes.to_usize(), req)?;
    }
    if cfg.section.resp_bytes.to_usize() > 0 {
        recv_n(fd, cfg.section.resp_bytes.to_usize(), resp)?;
    }
    if cfg.section.close == CloseMode::Server {
        recv_end(fd, resp)?;
    }
    Ok(())
}

/// Waits for the server's end of the stream (its FIN) after the whole response. A byte more
/// than the response is the server's error: the connection fails as `other`.
fn recv_end(fd: RawFd, scratch: &mut [u8]) -> io::Result<()> {
    loop {
        match net::recv(fd, &mut scratch[..1], 0) {
            Ok(0) => return Ok(()),
            Ok(_) => return Err(io::Error::new(ErrorKind::InvalidData, "the server sent more than its response")),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

fn dial_loop(
    to: SocketAddr,
    cfg: &CpsConfig,
    m: &mut Meter,
    flags: &RunFlags,
    (start, id): (Instant, u32),
    ends: Deadlines,
) -> Result<(), String> {
    let req = vec![0x11u8; cfg.section.req_bytes.to_usize().clamp(1, CHUNK)];
    let scratch = if cfg.any.is_some() { 16 * 1024 } else { cfg.section.resp_bytes.to_usize().clamp(1, CHUNK) };
    let mut resp = vec![0u8; scratch];
    // The flows' schedules interleave: flow `id` of n opens its first connection id/n of a gap
    // in (every flow at the same instants would send bursts of n SYNs, which a SYN rate limit
    // or a small accept queue drops though the mean rate is well within it).
    let phase = f64::from(id % cfg.flows.max(1)) / f64::from(cfg.flows.max(1));
    let mut pace = cfg.flow_rate.and_then(|r| Pace::per_second(start + Duration::from_secs_f64(phase / r), r));
    let mut counts = ConnCounts { syn_retransmits: cfg.kernel_stats.then_some(0), ..Default::default() };
    // TCP_INFO of each connection for its SYN retransmissions, unless the kernel counts them.
    let read_info = cfg.kernel_stats && m.watch().is_none();
    let to_addr = socket2::SockAddr::from(to);
    let result = loop {
        let now = Instant::now();
        m.tick(now);
        if should_stop(flags, now, ends.send_until) {
            break Ok(());
        }
        if let Some(p) = pace.as_mut() {
            // Never faster than the rate: a flow that fell behind skips the slots it missed.
            match p.skip_missed(now) {
                None => {
                    let wait = p.due().saturating_duration_since(now);
                    std::thread::sleep(wait.min(m.next_tick().saturating_duration_since(now)).min(WAKE));
                    continue;
                }
                Some(missed) => {
                    if missed > 0 {
                        counts.behind += 1;
                    }
                    p.take(1);
                }
            }
        }
        let sock = match new_socket(to, cfg) {
            Ok(s) => s,
            Err(e) if fatal(&e) => break Err(format!("cannot open a socket: {}", describe_io(&e))),
            Err(e) if cause_of(&e) == Cause::Other => break Err(format!("cannot set a socket up: {e}")),
            Err(e) => {
                count(&mut counts, cause_of(&e));
                m.lost += 1;
                continue;
            }
        };
        let t0 = Instant::now();
        let connected = sock.connect(&to_addr);
        let t1 = Instant::now();
        let fd = sock.as_raw_fd();
        // Read on failure too: a connect that timed out retransmitted its SYNs.
        if read_info {
            if let Some(info) = netblast_probe::tcpinfo::read_raw(fd) {
                *counts.syn_retransmits.get_or_insert(0) += u64::from(info.total_retrans);
            }
        }
        if let Err(e) = connected {
            if fatal(&e) {
                break Err(format!("cannot connect: {}", describe_io(&e)));
            }
            count(&mut counts, cause_of(&e));
            m.lost += 1;
            continue;
        }
        let exchanged = match &cfg.any {
            None => exchange(fd, cfg, &req, &mut resp).map(|()| t1),
            Some(a) => match any::exchange(&sock, a, &mut counts, &mut resp, (t0, t0 + cfg.section.timeout())) {
                Ok(timed_to) => Ok(timed_to),
                Err(any::Failed::Io(e)) => Err(e),
                Err(any::Failed::Tls(why)) if m.msgs == 0 => {
                    // The first handshakes fail: a certificate not trusted, a version the
                    // server refuses. Every one after would too.
                    break Err(format!("TLS handshake with {to} failed: {why}"));
                }
                Err(any::Failed::Tls(_)) => Err(io::Error::other("TLS")),
            },
        };
        if cfg.section.close == CloseMode::Rst {
            let _ = sock.set_linger(Some(Duration::ZERO));
        }
        drop(sock);
        match exchanged {
            Ok(timed_to) => {
                m.record_ns((timed_to - t0).as_nanos() as u64);
                m.msgs += 1;
                m.bytes += cfg.section.req_bytes.bytes();
                m.moved_at(Instant::now());
            }
            Err(e) => {
                count(&mut counts, cause_of(&e));
                m.lost += 1;
            }
        }
    };
    if let Some((_, syn)) = m.watch().and_then(|w| w.group_connections()) {
        counts.syn_retransmits = Some(syn);
    }
    m.conns = Some(counts);
    result
}

fn accept_loop(
    listener: &TcpListener,
    anchor: &TcpStream,
    cfg: &CpsConfig,
    m: &mut Meter,
    flags: &RunFlags,
    ends: Deadlines,
) -> Result<(), String> {
    let allowed = anchor.peer_addr().map_err(|e| describe_io(&e))?.ip().to_canonical();
    let lfd = listener.as_raw_fd();
    let afd = anchor.as_raw_fd();
    listener.set_nonblocking(false).map_err(|e| describe_io(&e))?;
    // accept wakes every WAKE to look at the anchor, the clock and the flags; accepted sockets
    // inherit the timeout, and a connection's whole exchange is bounded by `cfg.section.timeout()`.
    net::set_timeouts(lfd, WAKE).map_err(|e| describe_io(&e))?;
    let mut buf = vec![0u8; cfg.section.req_bytes.to_usize().max(cfg.section.resp_bytes.to_usize()).clamp(16, CHUNK)];
    let resp = vec![0x22u8; cfg.section.resp_bytes.to_usize().clamp(1, CHUNK)];
    let mut foreign = 0u64;
    loop {
        match accept(listener) {
            Ok((conn, peer)) => {
                if peer.to_canonical() != allowed {
                    // Not the test's client: reset, not counted.
                    let _ = conn.set_linger(Some(Duration::ZERO));
                    foreign += 1;
                    if foreign == 1 {
                        tracing::warn!(%peer, "reset a connection to a cps listener from another address than its test's");
                    }
                    continue;
                }
                let served = serve_one(&conn, cfg, &mut buf, &resp, flags);
                let now = Instant::now();
                if served.is_ok() {
                    m.msgs += 1;
                    m.bytes += cfg.section.req_bytes.bytes();
                    m.moved_at(now);
                }
                m.tick(now);
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                let now = Instant::now();
                m.tick(now);
                let mut b = [0u8; 16];
                match net::recv(afd, &mut b, libc::MSG_DONTWAIT) {
                    Ok(0) => return Ok(()),
                    Ok(_) => {}
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                    Err(e) => return Err(format!("the test's TCP stream failed: {}", describe_io(&e))),
                }
                if flags.aborting() || now >= ends.give_up {
                    return Err("gave up waiting for the client to finish".into());
                }
            }
            // A connection reset while it waited in the queue, or a transient shortage.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ECONNABORTED | libc::EPROTO)) => {}
            Err(e) if fatal(&e) => {
                if flags.aborting() {
                    return Err(format!("cannot accept: {}", describe_io(&e)));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(format!("cannot accept: {}", describe_io(&e))),
        }
    }
}

/// One accepted connection: the request, the response, then the client's close (or, with
/// `close = "server"`, none: the caller's drop closes first).
fn serve_one(conn: &Socket, cfg: &CpsConfig, buf: &mut [u8], resp: &[u8], flags: &RunFlags) -> io::Result<()> {
    let fd = conn.as_raw_fd();
    let deadline = Instant::now() + cfg.section.timeout();
    // Reads wake every WAKE (inherited from the listener) until the connection's deadline.
    let read = |buf: &mut [u8]| loop {
        match net::recv(fd, buf, 0) {
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                if flags.aborting() || Instant::now() >= deadline {
                    return Err(io::Error::from_raw_os_error(libc::ETIMEDOUT));
                }
            }
            r => return r,
        }
    };
    let mut need = cfg.section.req_bytes.to_usize();
    while need > 0 {
        let k = need.min(buf.len());
        match read(&mut buf[..k])? {
            0 => return Err(io::Error::from_raw_os_error(libc::ECONNRESET)),
            n => need -= n,
        }
    }
    if cfg.section.resp_bytes.to_usize() > 0 {
        send_n(fd, cfg.section.resp_bytes.to_usize(), resp)?;
    }
    if cfg.section.close == CloseMode::Server {
        // The server's FIN goes now; the request was read whole, so the close is not a reset.
        return Ok(());
    }
    // The client closes first (its end keeps the TIME_WAIT, as a real client's does); anything
    // more it sends is read and dropped.
    loop {
        match read(buf) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ECONNRESET) => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

/// `accept4(2)` with `SOCK_CLOEXEC` (socket2's accept): the connection and its peer.
fn accept(listener: &TcpListener) -> io::Result<(Socket, IpAddr)> {
    let (sock, addr) = SockRef::from(listener).accept()?;
    let ip = addr.as_socket().map(|a| a.ip()).unwrap_or(IpAddr::from([0, 0, 0, 0]));
    Ok((sock, ip))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_are_named_by_errno() {
        let c = |n| cause_of(&io::Error::from_raw_os_error(n));
        assert_eq!(c(libc::EADDRNOTAVAIL), Cause::PortExhausted);
        assert_eq!(c(libc::ECONNREFUSED), Cause::Refused);
        assert_eq!(c(libc::EINPROGRESS), Cause::TimedOut);
        assert_eq!(c(libc::ETIMEDOUT), Cause::TimedOut);
        assert_eq!(c(libc::ECONNRESET), Cause::Reset);
        assert_eq!(c(libc::EHOSTUNREACH), Cause::Other);
        let mut counts = ConnCounts::default();
        for cause in [Cause::PortExhausted, Cause::Refused, Cause::TimedOut, Cause::Reset, Cause::Other] {
            count(&mut counts, cause);
        }
        assert_eq!(counts.failed(), 5);
    }
}
