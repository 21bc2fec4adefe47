//! The bulk generator: TCP streams that send or receive as fast as the kernel takes bytes.
//!
//! Used by both ends: the client drives its streams with it, and `serve` drives the other end
//! of each stream with the same loop. One worker thread runs [`run_worker`] over its share of
//! the streams: non-blocking sockets on an epoll (mio) instance, each ready socket driven in
//! bursts until the kernel says `EAGAIN`, the clock read once per burst.
//!
//! Sockets touched: the worker's TCP streams only. Per flow it reports bytes sent or received
//! per interval and in total, and the kernel's TCP statistics (RTT, cwnd, retransmitted
//! segments) sampled at each tick from the flow's [`FlowWatch`].
//!
//! Send modes: `copy` (`send` from one pattern buffer per worker), `sendfile` (from an
//! in-memory file holding the same pattern: no copy from user space) and `msg_zerocopy`
//! (`send(MSG_ZEROCOPY)`, completions drained from the error queue).

use crate::sys::CpuMark;
use crate::worker::{
    Deadlines, Event, EventTx, FlowEnd, FlowSample, Pinning, RunFlags, Sampled, StartGate, Ticker, Timing,
};
use mio::net::TcpStream as MioStream;
use mio::{Events, Interest, Poll, Token};
use netblast_probe::{FlowWatch, Probe};
use netblast_spec::profile::SendMode;
use std::io;
use std::net::TcpStream;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a flow does on this end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowRole {
    /// Send until the bound, then shut down the write side.
    Send,
    /// Receive until the peer's end of file.
    Recv,
}

/// One connected stream handed to a worker.
#[derive(Debug)]
pub struct BulkFlow {
    /// Stream id.
    pub id: u32,
    /// The connected socket (any blocking mode; the worker makes it non-blocking).
    pub stream: TcpStream,
    /// Send or receive.
    pub role: FlowRole,
    /// Bytes this flow sends at most (senders only).
    pub budget: Option<u64>,
}

/// Parameters shared by all workers of one test end.
#[derive(Debug, Clone)]
pub struct BulkConfig {
    /// Bytes per send call.
    pub block: usize,
    /// How senders hand bytes to the kernel.
    pub send_mode: SendMode,
    /// Reporting interval.
    pub interval: Duration,
    /// When senders stop and receivers give up.
    pub timing: Timing,
}

/// Bytes read per `recv` call: large reads keep the receiver's syscall count low.
pub const RECV_BYTES: usize = 1 << 20;
/// Send/recv calls per flow before the loop looks at the clock and other flows again.
const BURST: usize = 16;
/// Longest wait, after the senders stopped, for the peer to acknowledge everything.
pub const SETTLE: Duration = Duration::from_secs(2);
/// Longest sleep in `epoll_wait`, so run flags are seen promptly.
const MAX_WAIT: Duration = Duration::from_millis(50);
pub use crate::worker::SAMPLE_SHARE;

struct Flow {
    id: u32,
    sock: MioStream,
    role: FlowRole,
    watch: FlowWatch,
    total: u64,
    at_tick: u64,
    budget_left: Option<u64>,
    ready: bool,
    done: bool,
    last_byte: Instant,
    error: Option<String>,
}

impl Flow {
    fn fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }
}

enum Step {
    /// Moved this many bytes.
    Moved(usize),
    /// Would block.
    Again,
    /// Peer closed its write side (receivers only).
    Eof,
    /// Transmit queue of MSG_ZEROCOPY is full: drain completions and wait.
    NoBufs,
}

fn errno_result(rc: isize) -> io::Result<Step> {
    if rc > 0 {
        return Ok(Step::Moved(rc as usize));
    }
    if rc == 0 {
        return Ok(Step::Eof);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) => Ok(Step::Again),
        Some(libc::ENOBUFS) => Ok(Step::NoBufs),
        Some(libc::EINTR) => Ok(Step::Moved(0)),
        _ => Err(e),
    }
}

/// The per-worker sender state: the pattern buffer and, for sendfile, the in-memory file.
struct Sender {
    mode: SendMode,
    buf: Vec<u8>,
    file: Option<OwnedFd>,
}

impl Sender {
    fn new(block: usize, mode: SendMode) -> io::Result<Sender> {
        // A fixed pseudo-random pattern: not all zeros, so nothing on the path can compress it.
        let mut buf = vec![0u8; block];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for chunk in buf.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let b = x.to_le_bytes();
            chunk.copy_from_slice(&b[..chunk.len()]);
        }
        let file = match mode {
            SendMode::Sendfile => Some(memfd_with(&buf)?),
            _ => None,
        };
        Ok(Sender { mode, buf, file })
    }

    fn send(&self, fd: RawFd, len: usize) -> io::Result<Step> {
        let len = len.min(self.buf.len());
        let rc = match (self.mode, &self.file) {
            (SendMode::Sendfile, Some(file)) => {
                let mut off: libc::off_t = 0;
                // SAFETY: both descriptors are open for the duration of the call; `off` is a
                // valid off_t the kernel reads and writes.
                unsafe { libc::sendfile(fd, file.as_raw_fd(), &mut off, len) }
            }
            (SendMode::MsgZerocopy, _) => {
                // SAFETY: `buf` is valid for `len` bytes and is never written after creation, so
                // the kernel may keep referencing its pages until completion.
                unsafe { libc::send(fd, self.buf.as_ptr().cast(), len, libc::MSG_NOSIGNAL | libc::MSG_ZEROCOPY) }
            }
            _ => {
                // SAFETY: `buf` is valid for `len` bytes.
                unsafe { libc::send(fd, self.buf.as_ptr().cast(), len, libc::MSG_NOSIGNAL) }
            }
        };
        if rc == 0 && len > 0 {
            // A zero-byte send means nothing was taken; treat as would-block.
            return Ok(Step::Again);
        }
        errno_result(rc)
    }
}

/// Creates an in-memory file holding `data` (for sendfile).
fn memfd_with(data: &[u8]) -> io::Result<OwnedFd> {
    // SAFETY: the name is a valid NUL-terminated string; flags are valid.
    let fd = unsafe { libc::memfd_create(c"netblast-sendfile".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just returned by memfd_create and is owned by nobody else.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut file = std::fs::File::from(owned);
    io::Write::write_all(&mut file, data)?;
    Ok(OwnedFd::from(file))
}

/// Enables MSG_ZEROCOPY on a socket.
fn enable_zerocopy(fd: RawFd) -> io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: `one` is a valid c_int for the option length given.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ZEROCOPY,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Drains MSG_ZEROCOPY completion notifications from the socket's error queue.
fn drain_errqueue(fd: RawFd) {
    let mut control = [0u8; 256];
    loop {
        // SAFETY: msghdr is plain data; zeroed is valid (no name, no iov).
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = control.len();
        // SAFETY: `msg` points at `control`, which outlives the call.
        let rc = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
        if rc < 0 {
            return;
        }
    }
}

fn receive(fd: RawFd, buf: &mut [u8]) -> io::Result<Step> {
    // SAFETY: `buf` is valid and writable for its length.
    let rc = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
    errno_result(rc)
}

/// Runs one bulk worker over `flows` until every flow is done; reports through `tx`.
///
/// Waits at `gate` for the common start instant. Senders stop at `send_for` after the start, when
/// their budget is spent or when `flags.stopping()`; receivers run until end of file or until
/// `give_up_after`. Every flow ends with an [`Event::FlowDone`], the worker with
/// [`Event::WorkerDone`].
#[allow(clippy::too_many_arguments)]
pub fn run_worker(
    worker: usize,
    pinned: Pinning,
    flows: Vec<BulkFlow>,
    cfg: &BulkConfig,
    probe: &Probe,
    gate: &StartGate,
    flags: &RunFlags,
    tx: &EventTx,
) {
    let cpu_mark = CpuMark::thread();
    let send = |ev: Event| {
        tx(worker, ev);
    };
    let cpu = pinned.as_ref().ok().copied().flatten();
    let pin_error = pinned.err();
    let mut sampled = Sampled::default();
    let finish_worker = |pin_error: Option<String>, tcp_samples: Sampled| {
        send(Event::WorkerDone { cpu: cpu_mark.usage(), pinned: cpu, pin_error, tcp_samples })
    };
    let ids: Vec<u32> = flows.iter().map(|f| f.id).collect();
    let setup = || -> io::Result<(Poll, Vec<Flow>, Sender)> {
        let poll = Poll::new()?;
        let sender = Sender::new(cfg.block.max(1), cfg.send_mode)?;
        let mut out = Vec::with_capacity(flows.len());
        for (i, f) in flows.into_iter().enumerate() {
            f.stream.set_nonblocking(true)?;
            if f.role == FlowRole::Send && cfg.send_mode == SendMode::MsgZerocopy {
                enable_zerocopy(f.stream.as_raw_fd()).map_err(|e| {
                    io::Error::new(e.kind(), format!("MSG_ZEROCOPY is not available on this kernel or socket: {e}"))
                })?;
            }
            let watch = probe.watch(f.stream.as_raw_fd());
            let mut sock = MioStream::from_std(f.stream);
            let interest = match f.role {
                FlowRole::Send => Interest::WRITABLE,
                FlowRole::Recv => Interest::READABLE,
            };
            poll.registry().register(&mut sock, Token(i), interest)?;
            out.push(Flow {
                id: f.id,
                sock,
                role: f.role,
                watch,
                total: 0,
                at_tick: 0,
                budget_left: if f.role == FlowRole::Send { f.budget } else { None },
                ready: true,
                done: false,
                last_byte: Instant::now(),
                error: None,
            });
        }
        Ok((poll, out, sender))
    };
    let (mut poll, mut flows, sender) = match setup() {
        Ok(x) => x,
        Err(e) => {
            // Report every flow as failed so the aggregator is not left waiting.
            for id in ids {
                send(Event::FlowDone(Box::new(FlowEnd {
                    msgs: 0,
                    lost: 0,
                    id,
                    bytes: 0,
                    seconds: 0.0,
                    tcp: None,
                    error: Some(format!("worker {worker} setup failed: {e}")),
                    cpu,
                    ..Default::default()
                })));
            }
            finish_worker(pin_error, sampled);
            return;
        }
    };
    let Some(start) = gate.wait() else {
        for f in &flows {
            send(Event::FlowDone(Box::new(FlowEnd {
                msgs: 0,
                lost: 0,
                id: f.id,
                bytes: 0,
                seconds: 0.0,
                tcp: None,
                error: Some("test cancelled before start".into()),
                cpu,
                ..Default::default()
            })));
        }
        finish_worker(pin_error, sampled);
        return;
    };
    let Deadlines { send_until, give_up: give_up_at } = cfg.timing.after(start);
    let mut ticker = Ticker::new(start, cfg.interval);
    let mut rbuf = vec![0u8; RECV_BYTES];
    let mut events = Events::with_capacity(1024);
    let mut active = flows.len();
    let mut last_tick_s = 0.0f64;
    let zerocopy = cfg.send_mode == SendMode::MsgZerocopy;

    let end_flow = |f: &mut Flow, now: Instant, error: Option<String>, poll: &Poll| {
        if f.done {
            return;
        }
        if f.role == FlowRole::Send {
            // Our end of file tells the receiver the test is over for this flow.
            let _ = f.sock.shutdown(std::net::Shutdown::Write);
            f.last_byte = now;
        }
        let _ = poll.registry().deregister(&mut f.sock);
        f.done = true;
        f.error = error;
    };

    let budget = cfg.interval.mul_f64(SAMPLE_SHARE);
    let mut cursor = 0usize;
    loop {
        let now = Instant::now();
        while let Some((index, end)) = ticker.due(now) {
            let end_s = (end - start).as_secs_f64();
            let mut samples: Vec<FlowSample> = flows
                .iter_mut()
                .map(|f| {
                    let s = FlowSample { id: f.id, bytes: f.total - f.at_tick, ..Default::default() };
                    f.at_tick = f.total;
                    s
                })
                .collect();
            // Kernel statistics of the live flows, in turn from where the last tick stopped,
            // within the budget.
            let live = flows.iter().filter(|f| !f.done).count();
            let until = Instant::now() + budget;
            let mut read = 0usize;
            for k in 0..flows.len() {
                let i = (cursor + k) % flows.len();
                if flows[i].done {
                    continue;
                }
                if read > 0 && read % 8 == 0 && Instant::now() >= until {
                    cursor = i;
                    break;
                }
                samples[i].tcp = flows[i].watch.sample();
                read += 1;
            }
            sampled.add(Sampled { read: read as u64, wanted: live as u64 });
            send(Event::Interval { index, start_s: last_tick_s, end_s, flows: samples });
            last_tick_s = end_s;
        }
        let stop_senders = flags.stopping() || now >= send_until;
        let give_up = flags.aborting() || now >= give_up_at;
        if stop_senders || give_up {
            for f in flows.iter_mut().filter(|f| !f.done) {
                if give_up {
                    let why = if flags.aborting() { "aborted" } else { "timed out waiting for the peer to finish" };
                    end_flow(f, now, (f.role == FlowRole::Recv).then(|| why.to_string()), &poll);
                    active -= 1;
                } else if f.role == FlowRole::Send {
                    end_flow(f, now, None, &poll);
                    active -= 1;
                }
            }
        }
        if active == 0 {
            break;
        }

        let mut any_ready = false;
        // A burst ends at the next tick or the senders' bound, so no bytes spill across them.
        let mut burst_until = ticker.next();
        if !stop_senders {
            burst_until = burst_until.min(send_until);
        }
        for f in flows.iter_mut().filter(|f| f.ready && !f.done) {
            let fd = f.fd();
            let mut moved = false;
            let mut outcome: io::Result<()> = Ok(());
            for i in 0..BURST {
                if i > 0 && Instant::now() >= burst_until {
                    break;
                }
                let step = match f.role {
                    FlowRole::Send => {
                        let len = f.budget_left.map_or(cfg.block, |b| (b as usize).min(cfg.block));
                        sender.send(fd, len)
                    }
                    FlowRole::Recv => receive(fd, &mut rbuf),
                };
                match step {
                    Ok(Step::Moved(n)) => {
                        f.total += n as u64;
                        moved = true;
                        if let Some(b) = f.budget_left.as_mut() {
                            *b -= n as u64;
                            if *b == 0 {
                                break;
                            }
                        }
                    }
                    Ok(Step::Again) => {
                        f.ready = false;
                        break;
                    }
                    Ok(Step::NoBufs) => {
                        drain_errqueue(fd);
                        f.ready = false;
                        break;
                    }
                    Ok(Step::Eof) => {
                        outcome = Err(io::Error::from(io::ErrorKind::UnexpectedEof));
                        break;
                    }
                    Err(e) => {
                        outcome = Err(e);
                        break;
                    }
                }
            }
            if zerocopy && f.role == FlowRole::Send {
                drain_errqueue(fd);
            }
            let now = Instant::now();
            if moved && f.role == FlowRole::Recv {
                f.last_byte = now;
            }
            match outcome {
                Ok(()) if f.budget_left == Some(0) => {
                    end_flow(f, now, None, &poll);
                    active -= 1;
                }
                Ok(()) => any_ready |= f.ready,
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    // The sender's end of file: the normal end of a receiving flow.
                    end_flow(f, now, None, &poll);
                    active -= 1;
                }
                Err(e) => {
                    let msg = describe_io(&e);
                    end_flow(f, now, Some(msg), &poll);
                    active -= 1;
                }
            }
        }
        if active == 0 {
            continue; // report the tick (if due) and leave through the top of the loop
        }

        let now = Instant::now();
        let timeout = if any_ready {
            Duration::ZERO
        } else {
            let mut wake = ticker.next().min(give_up_at).min(now + MAX_WAIT);
            if flows.iter().any(|f| !f.done && f.role == FlowRole::Send) {
                wake = wake.min(send_until);
            }
            wake.saturating_duration_since(now)
        };
        if let Err(e) = poll.poll(&mut events, Some(timeout)) {
            if e.kind() != io::ErrorKind::Interrupted {
                for f in flows.iter_mut().filter(|f| !f.done) {
                    end_flow(f, Instant::now(), Some(format!("epoll failed: {e}")), &poll);
                }
                break;
            }
        }
        for ev in events.iter() {
            if let Some(f) = flows.get_mut(ev.token().0) {
                f.ready = true;
            }
        }
    }

    // The last, usually shorter, interval: whatever moved since the last tick.
    if flows.iter().any(|f| f.total > f.at_tick) {
        let end_s = flows.iter().map(|f| (f.last_byte.max(start) - start).as_secs_f64()).fold(last_tick_s, f64::max);
        let samples = flows
            .iter_mut()
            .map(|f| {
                let s =
                    FlowSample { id: f.id, bytes: f.total - f.at_tick, tcp: f.watch.sample(), ..Default::default() };
                f.at_tick = f.total;
                s
            })
            .collect();
        send(Event::Interval { index: ticker.index(), start_s: last_tick_s, end_s, flows: samples });
    }
    // Final figures once the peer acknowledged everything (retransmissions can run on after
    // the last send); a peer that does not acknowledge costs at most SETTLE in all.
    let settle_until = Instant::now() + SETTLE;
    for f in flows.iter().filter(|f| f.role == FlowRole::Send && f.error.is_none()) {
        f.watch.settle(settle_until.saturating_duration_since(Instant::now()));
    }
    for f in &flows {
        send(Event::FlowDone(Box::new(FlowEnd {
            msgs: 0,
            lost: 0,
            id: f.id,
            bytes: f.total,
            seconds: (f.last_byte.max(start) - start).as_secs_f64(),
            tcp: f.watch.sample(),
            error: f.error.clone(),
            cpu,
            kernel_drops: None,
            rcvbuf: None,
            rtt_hist: f.watch.rtt_histogram().map(Box::new),
            tcp_info: f.watch.tcp_info_check(),
            udp: None,
            conns: None,
        })));
    }
    finish_worker(pin_error, sampled);
}

/// Words a socket error the way users read it (reset, broken pipe, timeout).
pub fn describe_io(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ECONNRESET) => "connection reset by peer".into(),
        Some(libc::EPIPE) => "peer closed the connection (broken pipe)".into(),
        Some(libc::ETIMEDOUT) => "connection timed out".into(),
        Some(libc::EHOSTUNREACH) => "host unreachable".into(),
        _ => e.to_string(),
    }
}

/// Convenience for callers that spawn one bulk worker per CPU: everything a worker thread needs.
#[derive(Clone)]
pub struct WorkerShared {
    /// Test parameters.
    pub cfg: Arc<BulkConfig>,
    /// Source of TCP statistics.
    pub probe: Probe,
    /// Start gate.
    pub gate: Arc<StartGate>,
    /// Run flags.
    pub flags: Arc<RunFlags>,
    /// Event channel.
    pub tx: EventTx,
}

/// Spawns one pinned worker thread per group of flows. `cpus[i]` (when given) pins group `i`.
pub fn spawn_workers(
    groups: Vec<Vec<BulkFlow>>,
    cpus: &[Option<usize>],
    shared: &WorkerShared,
) -> io::Result<Vec<std::thread::JoinHandle<()>>> {
    let mut handles = Vec::with_capacity(groups.len());
    for (i, group) in groups.into_iter().enumerate() {
        let cpu = cpus.get(i).copied().flatten();
        let sh = shared.clone();
        handles.push(crate::worker::spawn(i, cpu, move |pinned| {
            run_worker(i, pinned, group, &sh.cfg, &sh.probe, &sh.gate, &sh.flags, &sh.tx)
        })?);
    }
    Ok(handles)
}

/// Splits flows over `n` workers round-robin (flow i goes to worker i mod n).
pub fn spread<T>(items: Vec<T>, n: usize) -> Vec<Vec<T>> {
    let n = n.max(1);
    let mut groups: Vec<Vec<T>> = (0..n).map(|_| Vec::new()).collect();
    for (i, it) in items.into_iter().enumerate() {
        groups[i % n].push(it);
    }
    groups.retain(|g| !g.is_empty());
    groups
}
