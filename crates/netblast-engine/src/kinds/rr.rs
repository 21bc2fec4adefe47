//! The rr generator: request/response round trips, one flow per pinned worker.
//!
//! The client sends a request of `req_bytes`, waits for the whole response of `resp_bytes`, and
//! records the round trip (monotonic clock, ns) in its HDR histogram: exactly one sample per
//! completed transaction. The server answers each whole request with one response.
//!
//! Waiting: `block` sleeps in `recv` (as qperf and netperf do), `spin` polls with
//! `MSG_DONTWAIT` in a loop (no wake-up latency; one CPU busy per flow on each end).
//! UDP: one datagram each way; the request's first byte is a sequence number the response
//! echoes, so a late response is not mistaken for the current one; a request without a
//! response within the timeout is counted as lost and gets no latency sample.
//!
//! Sockets touched: the flow's TCP stream, or its connected UDP socket and anchor TCP stream.
//! Metrics: transactions (client) and answered requests (server) per interval, the round-trip
//! histogram per interval, TCP statistics of the client's socket.

use crate::exec::worker::{Ctx, Deadlines, RunFlags, Seat, Timing};
use crate::kinds::flow::{Conn, End};
use crate::kinds::flow::{FlowRole, describe_io};
use crate::kinds::msgrate::{MsgFlow, MsgSocket, WAKE};
use crate::measure::meter::{Meter, run_single, should_stop};
use crate::measure::pace::Pace;
use crate::os::net;
use netblast_spec::profile::RrSection;
use netblast_spec::profile::WaitMode;
use std::io::ErrorKind;
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

/// Parameters of an rr test end.
#[derive(Debug, Clone)]
pub struct RrConfig {
    /// The profile's section: sizes, how to wait, busy polling, the UDP timeout.
    pub section: RrSection,
    /// Reporting interval.
    pub interval: Duration,
    /// When senders stop and receivers give up.
    pub timing: Timing,
}

/// Spawns an end's rr workers, one pinned worker per flow (clients ask, servers answer).
pub fn spawn(end: &End<'_>, r: &RrSection, conns: Vec<Conn>) -> std::io::Result<Vec<std::thread::JoinHandle<()>>> {
    let cfg =
        std::sync::Arc::new(RrConfig { section: r.clone(), interval: end.profile.run.interval(), timing: end.timing });
    end.spawn_per_flow(conns, move |seat, flow, ctx| run_worker(seat, flow, &cfg, ctx))
}

/// Runs one rr flow on the calling (pinned) worker thread until it ends.
pub fn run_worker(seat: Seat, flow: MsgFlow, cfg: &RrConfig, ctx: &Ctx) {
    let client = flow.role == FlowRole::Send;
    let watch = match &flow.socket {
        MsgSocket::Tcp(s) if client => Some(ctx.probe.watch(s.as_raw_fd())),
        _ => None,
    };
    let flags = &*ctx.flags;
    run_single(&seat, flow.id, ctx, (cfg.interval, client, watch), |m, start| {
        let ends = cfg.timing.after(start);
        let data_fd = match &flow.socket {
            MsgSocket::Tcp(s) => s.as_raw_fd(),
            MsgSocket::Udp { udp, .. } => udp.as_raw_fd(),
        };
        prepare(data_fd, cfg).map_err(|e| describe_io(&e))?;
        let outcome = match (&flow.socket, client) {
            (MsgSocket::Tcp(s), true) => tcp_client(s, cfg, m, flags, ends),
            (MsgSocket::Tcp(s), false) => tcp_server(s, cfg, m, flags, ends),
            (MsgSocket::Udp { udp, anchor }, true) => {
                let r = udp_client(udp.as_raw_fd(), cfg, m, flags, ends);
                let _ = anchor.shutdown(std::net::Shutdown::Write);
                r
            }
            (MsgSocket::Udp { udp, anchor }, false) => udp_server(udp.as_raw_fd(), anchor, cfg, m, flags, ends),
        };
        outcome.map(|_| None)
    });
}

fn prepare(fd: RawFd, cfg: &RrConfig) -> std::io::Result<()> {
    if let Some(us) = cfg.section.busy_poll_us {
        net::set_int_opt(fd, libc::SOL_SOCKET, libc::SO_BUSY_POLL, us as libc::c_int).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("cannot set SO_BUSY_POLL to {us} us: {e} (raising it needs CAP_NET_ADMIN)"),
            )
        })?;
    }
    // Blocking calls with a timeout in block mode; the spin loops pass MSG_DONTWAIT themselves.
    net::set_blocking(fd, true)?;
    net::set_timeouts(fd, WAKE)
}

/// Why a wait ended without data.
enum Stop {
    /// End of file: the peer finished.
    Eof,
    /// Told to stop, or past the give-up instant.
    Abort(String),
    /// A socket error.
    Failed(String),
}

/// Reads exactly `buf.len()` bytes. `Eof` only when nothing of this message was read yet.
fn recv_exact(fd: RawFd, buf: &mut [u8], wait: WaitMode, flags: &RunFlags, give_up: Instant) -> Result<(), Stop> {
    let spin = wait == WaitMode::Spin;
    let mut got = 0;
    let mut spins: u32 = 0;
    while got < buf.len() {
        let r = net::recv(fd, &mut buf[got..], if spin { libc::MSG_DONTWAIT } else { 0 });
        match r {
            Ok(0) if got == 0 => return Err(Stop::Eof),
            Ok(0) => return Err(Stop::Failed("peer closed in the middle of a message".into())),
            Ok(n) => got += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                spins = spins.wrapping_add(1);
                // Look at the clock and flags on every timeout, and every 1024 polls when spinning.
                if !spin || spins % 1024 == 0 {
                    if flags.aborting() {
                        return Err(Stop::Abort("aborted".into()));
                    }
                    if Instant::now() >= give_up {
                        return Err(Stop::Abort("timed out waiting for the peer".into()));
                    }
                }
            }
            Err(e) => return Err(Stop::Failed(describe_io(&e))),
        }
    }
    Ok(())
}

/// Largest buffer a TCP rr flow holds for a message, whatever the message size: larger
/// requests and responses are sent from, and read into, this much memory in turn, so memory
/// follows what the peer actually sends, not what it announced.
pub const MAX_MSG_BUF: usize = 64 * 1024;

/// Reads exactly `n` bytes, keeping none of them (into `scratch`, in turn).
fn recv_count(
    fd: RawFd,
    mut n: usize,
    scratch: &mut [u8],
    wait: WaitMode,
    flags: &RunFlags,
    give_up: Instant,
) -> Result<(), Stop> {
    let mut first = true;
    while n > 0 {
        let k = n.min(scratch.len());
        match recv_exact(fd, &mut scratch[..k], wait, flags, give_up) {
            Err(Stop::Eof) if !first => return Err(Stop::Failed("peer closed in the middle of a message".into())),
            r => r?,
        }
        first = false;
        n -= k;
    }
    Ok(())
}

/// Sends `n` bytes of `pattern`, repeated.
fn send_count(fd: RawFd, mut n: usize, pattern: &[u8], flags: &RunFlags, give_up: Instant) -> Result<(), Stop> {
    while n > 0 {
        let k = n.min(pattern.len());
        send_all(fd, &pattern[..k], flags, give_up)?;
        n -= k;
    }
    Ok(())
}

fn send_all(fd: RawFd, mut buf: &[u8], flags: &RunFlags, give_up: Instant) -> Result<(), Stop> {
    while !buf.is_empty() {
        match net::send(fd, buf, 0) {
            Ok(n) => buf = &buf[n..],
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                if flags.aborting() || Instant::now() >= give_up {
                    return Err(Stop::Abort("timed out sending".into()));
                }
            }
            Err(e) => return Err(Stop::Failed(describe_io(&e))),
        }
    }
    Ok(())
}

fn stop_msg(s: Stop, what: &str) -> String {
    match s {
        Stop::Eof => format!("peer closed the connection while {what}"),
        Stop::Abort(m) | Stop::Failed(m) => m,
    }
}

/// A paced flow's schedule (`rr.rate`), `None` back to back.
fn schedule(cfg: &RrConfig, start: Instant) -> Option<Pace> {
    cfg.section.gap().map(|gap| Pace::new(start, gap))
}

/// Waits until the next request is due, ticking the meter and watching the flags; false when
/// the run ends first. A request due in the past goes at once, and the slots it missed are
/// skipped: a late answer never makes a burst.
fn wait(pace: &mut Pace, m: &mut Meter, flags: &RunFlags, until: Instant) -> bool {
    loop {
        let now = Instant::now();
        m.tick(now);
        if should_stop(flags, now, until) {
            return false;
        }
        if pace.skip_missed(now).is_some() {
            pace.take(1);
            return true;
        }
        std::thread::sleep(pace.due().saturating_duration_since(now).min(WAKE));
    }
}

fn tcp_client(s: &TcpStream, cfg: &RrConfig, m: &mut Meter, flags: &RunFlags, ends: Deadlines) -> Result<(), String> {
    let fd = s.as_raw_fd();
    let req = vec![0x11u8; cfg.section.req_bytes.to_usize().min(MAX_MSG_BUF)];
    let mut resp = vec![0u8; cfg.section.resp_bytes.to_usize().min(MAX_MSG_BUF)];
    let mut pace = schedule(cfg, Instant::now());
    let result = loop {
        if let Some(p) = pace.as_mut() {
            if !wait(p, m, flags, ends.send_until) {
                break Ok(());
            }
        }
        let t0 = Instant::now();
        m.tick(t0);
        if should_stop(flags, t0, ends.send_until) {
            break Ok(());
        }
        if let Err(e) = send_count(fd, cfg.section.req_bytes.to_usize(), &req, flags, ends.give_up) {
            break Err(stop_msg(e, "sending a request"));
        }
        if let Err(e) =
            recv_count(fd, cfg.section.resp_bytes.to_usize(), &mut resp, cfg.section.wait, flags, ends.give_up)
        {
            break Err(stop_msg(e, "waiting for a response"));
        }
        let t1 = Instant::now();
        m.record_ns((t1 - t0).as_nanos() as u64);
        m.msgs += 1;
        m.bytes += cfg.section.req_bytes.bytes();
        m.moved_at(t1);
    };
    let _ = s.shutdown(std::net::Shutdown::Write);
    result
}

fn tcp_server(s: &TcpStream, cfg: &RrConfig, m: &mut Meter, flags: &RunFlags, ends: Deadlines) -> Result<(), String> {
    let fd = s.as_raw_fd();
    let mut req = vec![0u8; cfg.section.req_bytes.to_usize().min(MAX_MSG_BUF)];
    let resp = vec![0x22u8; cfg.section.resp_bytes.to_usize().min(MAX_MSG_BUF)];
    loop {
        match recv_count(fd, cfg.section.req_bytes.to_usize(), &mut req, cfg.section.wait, flags, ends.give_up) {
            Ok(()) => {}
            Err(Stop::Eof) => return Ok(()),
            Err(e) => return Err(stop_msg(e, "waiting for a request")),
        }
        send_count(fd, cfg.section.resp_bytes.to_usize(), &resp, flags, ends.give_up)
            .map_err(|e| stop_msg(e, "sending a response"))?;
        let now = Instant::now();
        m.msgs += 1;
        m.bytes += cfg.section.req_bytes.bytes();
        m.moved_at(now);
        m.tick(now);
    }
}

fn udp_client(fd: RawFd, cfg: &RrConfig, m: &mut Meter, flags: &RunFlags, ends: Deadlines) -> Result<(), String> {
    // A blocking wait must not overshoot the loss timeout.
    let timeout = cfg.section.udp_timeout();
    net::set_timeouts(fd, timeout.min(WAKE)).map_err(|e| describe_io(&e))?;
    let mut req = vec![0x11u8; cfg.section.req_bytes.to_usize()];
    let mut resp = vec![0u8; cfg.section.resp_bytes.to_usize().max(1) + 1];
    let spin = cfg.section.wait == WaitMode::Spin;
    let mut seq: u8 = 0;
    let mut pace = schedule(cfg, Instant::now());
    loop {
        if let Some(p) = pace.as_mut() {
            if !wait(p, m, flags, ends.send_until) {
                return Ok(());
            }
        }
        let t0 = Instant::now();
        m.tick(t0);
        if should_stop(flags, t0, ends.send_until) {
            return Ok(());
        }
        seq = seq.wrapping_add(1);
        req[0] = seq;
        match net::send(fd, &req, 0) {
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => continue,
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => continue,
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                return Err("the server's UDP port is closed (ICMP port unreachable)".into());
            }
            Err(e) => return Err(describe_io(&e)),
        }
        let deadline = t0 + timeout;
        let answered = loop {
            match net::recv(fd, &mut resp, if spin { libc::MSG_DONTWAIT } else { 0 }) {
                Ok(n) if n > 0 && resp[0] == seq => break true,
                Ok(_) => {} // a late answer to an earlier request: not this one
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                    return Err("the server's UDP port is closed (ICMP port unreachable)".into());
                }
                Err(e) => return Err(describe_io(&e)),
            }
            let now = Instant::now();
            if now >= deadline {
                break false;
            }
            if flags.aborting() {
                return Err("aborted".into());
            }
        };
        let t1 = Instant::now();
        if answered {
            m.record_ns((t1 - t0).as_nanos() as u64);
            m.msgs += 1;
            m.bytes += cfg.section.req_bytes.bytes();
            m.moved_at(t1);
        } else {
            m.lost += 1;
        }
    }
}

fn udp_server(
    fd: RawFd,
    anchor: &TcpStream,
    cfg: &RrConfig,
    m: &mut Meter,
    flags: &RunFlags,
    ends: Deadlines,
) -> Result<(), String> {
    let afd = anchor.as_raw_fd();
    anchor.set_nonblocking(true).map_err(|e| describe_io(&e))?;
    let mut req = vec![0u8; cfg.section.req_bytes.to_usize().max(1) + 1];
    let mut resp = vec![0x22u8; cfg.section.resp_bytes.to_usize()];
    let spin = cfg.section.wait == WaitMode::Spin;
    let mut scratch = [0u8; 16];
    let mut idle: u32 = 0;
    loop {
        match net::recv(fd, &mut req, libc::MSG_DONTWAIT) {
            Ok(n) if n > 0 => {
                resp[0] = req[0];
                match net::send(fd, &resp, 0) {
                    Ok(_) => {
                        let now = Instant::now();
                        m.msgs += 1;
                        m.bytes += n as u64;
                        m.moved_at(now);
                        m.tick(now);
                    }
                    Err(e) if e.kind() == ErrorKind::ConnectionRefused => {}
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                    Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {}
                    Err(e) => return Err(describe_io(&e)),
                }
                continue;
            }
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(describe_io(&e)),
        }
        idle = idle.wrapping_add(1);
        if spin && idle % 1024 != 0 {
            continue;
        }
        let now = Instant::now();
        m.tick(now);
        if flags.aborting() || now >= ends.give_up {
            return Err("gave up waiting for the client to finish".into());
        }
        let ready = if spin {
            vec![false, true]
        } else {
            let wait = m.next_tick().saturating_duration_since(now).min(WAKE);
            net::poll_readable(&[fd, afd], wait).map_err(|e| describe_io(&e))?
        };
        if ready[1] {
            match net::recv(afd, &mut scratch, libc::MSG_DONTWAIT) {
                Ok(0) => return Ok(()),
                Ok(_) => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                Err(e) => return Err(format!("the test's TCP stream failed: {}", describe_io(&e))),
            }
        }
    }
}
