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
//! Receivers read 1 MiB per call and ask the kernel to wake them only once about a millisecond
//! of data at their recent rate is waiting (`SO_RCVLOWAT`, at most one read's worth, reviewed
//! every 50 ms): a receiver woken for every segment costs both ends CPU per byte
//! (on loopback the sender's CPU runs each wake-up), and an interval boundary then misplaces at
//! most that millisecond of data. A profile that fixes the receive buffer (`-w`) keeps the
//! kernel's default (woken per segment), so the window it sets is freed as soon as data lands.
//!
//! Send modes: `copy` (`send` from one pattern buffer per worker), `sendfile` (from an
//! in-memory file holding the same pattern: no copy from user space) and `msg_zerocopy`
//! (`send(MSG_ZEROCOPY)`, completions drained from the error queue).

use crate::exec::worker::{Ctx, Deadlines, Event, FlowEnd, FlowSample, SETTLE, Sampled, Seat, Ticker, Timing};
pub use crate::kinds::flow::FlowRole;
use crate::kinds::flow::{Conn, End, Side, describe_io};
use crate::measure::pace::Pace;
use crate::os::sys::CpuMark;
use mio::net::TcpStream as MioStream;
use mio::{Events, Interest, Poll, Token};
use netblast_probe::{FlowWatch, Probe};
use netblast_spec::plan::split_budget;
use netblast_spec::profile::BulkSection;
use netblast_spec::profile::SendMode;
use std::io;
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod sender;
use sender::{Sender, Step, drain_errqueue, enable_zerocopy, receive};

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
    /// The profile's section: bytes per send call, how senders hand bytes to the kernel.
    pub section: BulkSection,
    /// Reporting interval.
    pub interval: Duration,
    /// When senders stop and receivers give up.
    pub timing: Timing,
    /// Receivers let about a millisecond of data wait before the kernel wakes them (see the
    /// module docs); false when the profile fixes the receive buffer.
    pub batch_reads: bool,
    /// Senders held at a rate (`-b`), bytes per second: besides the kernel's pacing, a sender
    /// hands its socket no more than the schedule since the start and its unsent low-water
    /// mark. The kernel sends a connection's first ten segments unpaced, which on loopback
    /// (64 KiB segments) put `-b 1M -t 3s` at 1.9 Mbit/s.
    pub paced: Option<f64>,
}

/// Bytes read per `recv` call: large reads keep the receiver's syscall count low.
pub const RECV_BYTES: usize = 1 << 20;
/// Send/recv calls per flow before the loop looks at the clock and other flows again.
const BURST: usize = 16;
/// Longest sleep in `epoll_wait`, so run flags are seen promptly.
const MAX_WAIT: Duration = Duration::from_millis(50);
/// A receiver's wake-up mark is this long of data at its recent rate.
const LOWAT_SPAN: Duration = Duration::from_millis(1);
/// The highest wake-up mark: one read.
const LOWAT_MAX: usize = RECV_BYTES;
/// Below this mark a receiver is woken for every segment, as by default: at such rates the
/// wake-ups cost little.
const LOWAT_MIN: usize = 16 << 10;
/// How often each receiver's wake-up mark follows its rate. A receiver whose sender slows
/// down waits at most this long (plus [`MAX_WAIT`]) for the data under its old mark.
const LOWAT_REVIEW: Duration = Duration::from_millis(50);

/// The wake-up mark (`SO_RCVLOWAT`) for a receiver reading `bytes_per_s`: [`LOWAT_SPAN`] of
/// its data rounded down to a power of two, at most [`LOWAT_MAX`]; 1 (the kernel's default,
/// woken for any byte) below [`LOWAT_MIN`].
fn lowat_for(bytes_per_s: f64) -> usize {
    let span = bytes_per_s * LOWAT_SPAN.as_secs_f64();
    if span.is_nan() || span < LOWAT_MIN as f64 {
        return 1;
    }
    let b = (span as usize).min(LOWAT_MAX);
    1 << (usize::BITS - 1 - b.leading_zeros())
}

pub use crate::exec::worker::SAMPLE_SHARE;

/// The kernel paces a `-b` sender's socket this much above the rate; the schedule in user
/// space ([`paced_due`]) holds the mean. The kernel's pacing timer fires late where its CPU
/// idles (a VM's vCPU waits for its host to wake it), and the kernel forgives each segment at
/// most half its own time: a socket paced at exactly the rate falls behind and never catches up
/// (`-b 500M` on a quiet 2-CPU VM here: 482..492 Mbit/s in three runs of four, 500 with a busy
/// CPU). With headroom it catches up, and its bursts stay within the schedule's 20 ms ahead.
const KERNEL_PACING_HEADROOM: f64 = 1.25;

/// What a sender held at `rate` bytes/s (`pace`: a byte a slot) may have handed its socket by
/// `now`: the schedule, and its unsent low-water mark ahead of it (so the kernel, which paces,
/// always has something to send).
fn paced_due(pace: &Pace, rate: f64, now: Instant) -> u64 {
    pace.count_by(now) + u64::from(crate::os::sockopt::paced_notsent_lowat(rate * 8.0))
}

/// The least a sender held at `rate` bytes/s hands its socket at once: half its unsent
/// low-water mark (10 ms of data, 2 KiB at least). The socket still holds the other half,
/// which the kernel paces out meanwhile, so it never runs dry; and the sender wakes at most
/// every 10 ms with a chunk the kernel sends as a few large segments. Handing over what one
/// microsecond more of the schedule allowed (a few hundred bytes per `send`, 18 000 calls a
/// second at 100 Mbit/s) cost a whole CPU where iperf3 -b took 4% (issue 54).
fn paced_quantum(rate: f64) -> u64 {
    u64::from(crate::os::sockopt::paced_notsent_lowat(rate * 8.0) / 2)
}

/// The least a paced sender with `budget_left` bytes to go hands over at once: a quantum, or
/// the last of its byte budget when that is less.
fn paced_least(rate: f64, budget_left: Option<u64>) -> u64 {
    budget_left.map_or(paced_quantum(rate), |b| b.min(paced_quantum(rate))).max(1)
}

/// When a sender held at `rate` that has handed over `total` bytes may hand over its next
/// [`paced_quantum`]: the inverse of [`paced_due`].
fn paced_at(pace: &Pace, rate: f64, total: u64) -> Instant {
    let ahead = u64::from(crate::os::sockopt::paced_notsent_lowat(rate * 8.0));
    pace.at((total + paced_quantum(rate)).saturating_sub(ahead))
}

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
    /// Receivers: the wake-up mark set on the socket (1: the kernel's default).
    lowat: usize,
    /// Receivers: `total` at the last review of the mark.
    at_review: u64,
    /// Paced senders: waiting for the schedule, not for the socket.
    paced_wait: bool,
}

impl Flow {
    fn fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }
}

/// Runs one bulk worker over `flows` until every flow is done; reports through `ctx`.
///
/// Waits at the start gate for the common start instant. Senders stop at `send_for` after the
/// start, when their budget is spent or when the run stops; receivers run until end of file or
/// until `give_up_after`. Every flow ends with an [`Event::FlowDone`], the worker with
/// [`Event::WorkerDone`].
pub fn run_worker(seat: Seat, flows: Vec<BulkFlow>, cfg: &BulkConfig, ctx: &Ctx) {
    let cpu_mark = CpuMark::thread();
    let ids: Vec<u32> = flows.iter().map(|f| f.id).collect();
    let (poll, flows, sender) = match open_flows(flows, cfg, &ctx.probe) {
        Ok(x) => x,
        Err(e) => {
            // Every flow reported failed, so the aggregator is not left waiting.
            let why = format!("worker {} setup failed: {e}", seat.index);
            fail_flows(&seat, ctx, &ids, &why);
            return worker_done(&seat, ctx, &cpu_mark, Sampled::default());
        }
    };
    let Some(start) = ctx.gate.wait() else {
        fail_flows(&seat, ctx, &ids, "test cancelled before start");
        return worker_done(&seat, ctx, &cpu_mark, Sampled::default());
    };
    let mut w = Loop::new(&seat, cfg, ctx, poll, flows, sender, start);
    w.run();
    w.tail();
    w.finish();
    let sampled = w.sampled;
    worker_done(&seat, ctx, &cpu_mark, sampled);
}

/// Reports every flow of `ids` ended with `why` before it moved a byte.
fn fail_flows(seat: &Seat, ctx: &Ctx, ids: &[u32], why: &str) {
    for &id in ids {
        let end = FlowEnd { id, error: Some(why.to_string()), cpu: seat.cpu(), ..Default::default() };
        ctx.send(seat.index, Event::FlowDone(Box::new(end)));
    }
}

/// The worker's last event: its CPU time, pinning and kernel-statistics sampling.
fn worker_done(seat: &Seat, ctx: &Ctx, cpu_mark: &CpuMark, tcp_samples: Sampled) {
    let ev = Event::WorkerDone { cpu: cpu_mark.usage(), pinned: seat.cpu(), pin_error: seat.pin_error(), tcp_samples };
    ctx.send(seat.index, ev);
}

/// Sets the worker's flows up: non-blocking, MSG_ZEROCOPY where asked, watched by the probe,
/// registered with one epoll instance; and the sender's pattern (or file).
fn open_flows(flows: Vec<BulkFlow>, cfg: &BulkConfig, probe: &Probe) -> io::Result<(Poll, Vec<Flow>, Sender)> {
    let poll = Poll::new()?;
    let sender = Sender::new(cfg.section.block_bytes.to_usize().max(1), cfg.section.send_mode)?;
    let mut out = Vec::with_capacity(flows.len());
    for (i, f) in flows.into_iter().enumerate() {
        f.stream.set_nonblocking(true)?;
        if f.role == FlowRole::Send && cfg.section.send_mode == SendMode::MsgZerocopy {
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
            lowat: 1,
            at_review: 0,
            paced_wait: false,
        });
    }
    Ok((poll, out, sender))
}

/// A bulk worker's loop state, from the start to the last flow's end.
struct Loop<'a> {
    seat: &'a Seat,
    cfg: &'a BulkConfig,
    ctx: &'a Ctx,
    poll: Poll,
    flows: Vec<Flow>,
    sender: Sender,
    start: Instant,
    /// A `-b` sender's schedule, a byte a slot, and its rate in bytes/s.
    pace: Option<(Pace, f64)>,
    deadlines: Deadlines,
    ticker: Ticker,
    rbuf: Vec<u8>,
    events: Events,
    /// Flows not yet done.
    active: usize,
    last_tick_s: f64,
    /// Where the next tick's kernel-statistics reading starts (flows are read in turn).
    cursor: usize,
    sampled: Sampled,
    /// The last review of the receivers' wake-up marks; `None`: the marks stay the default.
    reviewed: Option<Instant>,
}

impl<'a> Loop<'a> {
    fn new(
        seat: &'a Seat,
        cfg: &'a BulkConfig,
        ctx: &'a Ctx,
        poll: Poll,
        flows: Vec<Flow>,
        sender: Sender,
        start: Instant,
    ) -> Loop<'a> {
        let reviewed = (cfg.batch_reads && flows.iter().any(|f| f.role == FlowRole::Recv)).then_some(start);
        Loop {
            active: flows.len(),
            seat,
            cfg,
            ctx,
            poll,
            flows,
            sender,
            start,
            pace: cfg.paced.and_then(|r| Some((Pace::per_second(start, r)?, r))),
            deadlines: cfg.timing.after(start),
            ticker: Ticker::new(start, cfg.interval),
            rbuf: vec![0u8; RECV_BYTES],
            events: Events::with_capacity(1024),
            last_tick_s: 0.0,
            cursor: 0,
            sampled: Sampled::default(),
            reviewed,
        }
    }

    /// Ticks, bounds, bursts and waits until every flow is done.
    fn run(&mut self) {
        loop {
            let now = Instant::now();
            self.ticks(now);
            self.review_lowat(now);
            let stop_senders = self.bounds(Instant::now());
            if self.active == 0 {
                return;
            }
            let any_ready = self.bursts(stop_senders);
            if self.active == 0 {
                continue; // report the tick (if due) and leave through the top of the loop
            }
            if !self.wait(any_ready) {
                return;
            }
        }
    }

    /// Reports every interval that ended by `now`: each flow's bytes, and the kernel
    /// statistics of the live flows in turn from where the last tick stopped, within
    /// [`SAMPLE_SHARE`] of the interval.
    fn ticks(&mut self, now: Instant) {
        let budget = self.cfg.interval.mul_f64(SAMPLE_SHARE);
        while let Some((index, end)) = self.ticker.due(now) {
            let end_s = (end - self.start).as_secs_f64();
            let mut samples: Vec<FlowSample> = self
                .flows
                .iter_mut()
                .map(|f| {
                    let s = FlowSample { id: f.id, bytes: f.total - f.at_tick, ..Default::default() };
                    f.at_tick = f.total;
                    s
                })
                .collect();
            let live = self.flows.iter().filter(|f| !f.done).count();
            let until = Instant::now() + budget;
            let mut read = 0usize;
            let n = self.flows.len();
            for k in 0..n {
                let i = (self.cursor + k) % n;
                if self.flows[i].done {
                    continue;
                }
                if read > 0 && read % 8 == 0 && Instant::now() >= until {
                    self.cursor = i;
                    break;
                }
                samples[i].tcp = self.flows[i].watch.sample();
                read += 1;
            }
            self.sampled.add(Sampled { read: read as u64, wanted: live as u64 });
            self.ctx.send(self.seat.index, Event::Interval { index, start_s: self.last_tick_s, end_s, flows: samples });
            self.last_tick_s = end_s;
        }
    }

    /// Every [`LOWAT_REVIEW`], sets each live receiver's wake-up mark from the bytes it read
    /// since the last review (one `setsockopt` when the mark changes). The kernel wakes a
    /// receiver at once when its new, lower mark is already met.
    fn review_lowat(&mut self, now: Instant) {
        let Some(last) = self.reviewed.filter(|&last| now - last >= LOWAT_REVIEW) else { return };
        let secs = (now - last).as_secs_f64();
        self.reviewed = Some(now);
        for f in self.flows.iter_mut().filter(|f| f.role == FlowRole::Recv && !f.done) {
            let want = lowat_for((f.total - f.at_review) as f64 / secs);
            f.at_review = f.total;
            if want == f.lowat {
                continue;
            }
            let mark = libc::c_int::try_from(want).unwrap_or(libc::c_int::MAX);
            match crate::os::net::set_int_opt(f.fd(), libc::SOL_SOCKET, libc::SO_RCVLOWAT, mark) {
                Ok(()) => f.lowat = want,
                // A kernel that refuses the mark: no more reviews (a receiver left with a mark
                // is still woken at its end of file and at its give-up bound).
                Err(_) => self.reviewed = None,
            }
        }
    }

    /// Ends the senders once the run stops or their bound passed, and every flow once the run
    /// aborts or the give-up bound passed; returns whether senders are stopped.
    fn bounds(&mut self, now: Instant) -> bool {
        let flags = &self.ctx.flags;
        let stop_senders = flags.stopping() || now >= self.deadlines.send_until;
        let give_up = flags.aborting() || now >= self.deadlines.give_up;
        if stop_senders || give_up {
            let why = if flags.aborting() { "aborted" } else { "timed out waiting for the peer to finish" };
            for k in 0..self.flows.len() {
                let f = &self.flows[k];
                if f.done {
                    continue;
                }
                if give_up {
                    let error = (f.role == FlowRole::Recv).then(|| why.to_string());
                    self.end_flow(k, now, error);
                } else if f.role == FlowRole::Send {
                    self.end_flow(k, now, None);
                }
            }
        }
        stop_senders
    }

    /// Ends flow `k` (once): a sender shuts its write side (its end of file tells the
    /// receiver the test is over for this flow); the flow leaves the epoll set.
    fn end_flow(&mut self, k: usize, now: Instant, error: Option<String>) {
        let f = &mut self.flows[k];
        if f.done {
            return;
        }
        if f.role == FlowRole::Send {
            let _ = f.sock.shutdown(std::net::Shutdown::Write);
            f.last_byte = now;
        }
        let _ = self.poll.registry().deregister(&mut f.sock);
        f.done = true;
        f.error = error;
        self.active -= 1;
    }

    /// Drives every ready flow for a burst (at most [`BURST`] calls, ending at the next tick or
    /// the senders' bound, so no bytes spill across them); whether any flow is still ready.
    fn bursts(&mut self, stop_senders: bool) -> bool {
        let mut burst_until = self.ticker.next();
        if !stop_senders {
            burst_until = burst_until.min(self.deadlines.send_until);
        }
        let mut any_ready = false;
        for k in 0..self.flows.len() {
            if !self.flows[k].ready || self.flows[k].done {
                continue;
            }
            let (moved, outcome) = self.burst(k, burst_until);
            let now = Instant::now();
            let f = &mut self.flows[k];
            if moved && f.role == FlowRole::Recv {
                f.last_byte = now;
            }
            match outcome {
                Ok(()) if f.budget_left == Some(0) => self.end_flow(k, now, None),
                Ok(()) => any_ready |= f.ready,
                // The sender's end of file: the normal end of a receiving flow.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => self.end_flow(k, now, None),
                Err(e) => self.end_flow(k, now, Some(describe_io(&e))),
            }
        }
        any_ready
    }

    /// One flow's burst: whether it moved bytes, and how it ended (end of file and errors as
    /// `Err`).
    fn burst(&mut self, k: usize, until: Instant) -> (bool, io::Result<()>) {
        let (cfg, sender, rbuf, pace) = (self.cfg, &self.sender, &mut self.rbuf, &self.pace);
        let f = &mut self.flows[k];
        let fd = f.fd();
        let mut moved = false;
        let mut outcome = Ok(());
        for i in 0..BURST {
            if i > 0 && Instant::now() >= until {
                break;
            }
            let mut len = f
                .budget_left
                .map_or(cfg.section.block_bytes.to_usize(), |b| (b as usize).min(cfg.section.block_bytes.to_usize()));
            if let (FlowRole::Send, Some((pace, rate))) = (f.role, pace) {
                let due = paced_due(pace, *rate, Instant::now()).saturating_sub(f.total);
                if due < paced_least(*rate, f.budget_left) {
                    // Ahead of the schedule: wait for it (`wait` wakes at the next byte's time).
                    f.ready = false;
                    f.paced_wait = true;
                    break;
                }
                len = len.min(due as usize);
            }
            let step = match f.role {
                FlowRole::Send => sender.send(fd, len),
                FlowRole::Recv => receive(fd, rbuf),
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
        if cfg.section.send_mode == SendMode::MsgZerocopy && f.role == FlowRole::Send {
            drain_errqueue(fd);
        }
        (moved, outcome)
    }

    /// Waits for sockets to be ready (not at all when one still is), at most until the next
    /// tick, a bound or [`MAX_WAIT`]; false when epoll failed (every flow then ended).
    fn wait(&mut self, any_ready: bool) -> bool {
        let now = Instant::now();
        let timeout = if any_ready {
            Duration::ZERO
        } else {
            let mut wake = self.ticker.next().min(self.deadlines.give_up).min(now + MAX_WAIT);
            if self.flows.iter().any(|f| !f.done && f.role == FlowRole::Send) {
                wake = wake.min(self.deadlines.send_until);
            }
            // A paced sender ahead of its schedule wakes when its next byte is due (less what
            // its unsent mark holds: the kernel still has that much to send meanwhile).
            if let Some((pace, rate)) = &self.pace {
                for f in self.flows.iter().filter(|f| f.paced_wait && !f.done) {
                    wake = wake.min(paced_at(pace, *rate, f.total));
                }
            }
            wake.saturating_duration_since(now)
        };
        if let Err(e) = self.poll.poll(&mut self.events, Some(timeout)) {
            if e.kind() != io::ErrorKind::Interrupted {
                for k in 0..self.flows.len() {
                    self.end_flow(k, Instant::now(), Some(format!("epoll failed: {e}")));
                }
                return false;
            }
        }
        for ev in self.events.iter() {
            if let Some(f) = self.flows.get_mut(ev.token().0) {
                f.ready = true;
            }
        }
        // Its socket stayed writable (no new edge comes): the schedule makes it ready.
        if let Some((pace, rate)) = &self.pace {
            let due = paced_due(pace, *rate, Instant::now());
            for f in self.flows.iter_mut().filter(|f| f.paced_wait) {
                if due >= f.total + paced_least(*rate, f.budget_left) {
                    f.paced_wait = false;
                    f.ready = true;
                }
            }
        }
        true
    }

    /// The last, usually shorter, interval: whatever moved since the last tick.
    fn tail(&mut self) {
        if !self.flows.iter().any(|f| f.total > f.at_tick) {
            return;
        }
        let start = self.start;
        let end_s =
            self.flows.iter().map(|f| (f.last_byte.max(start) - start).as_secs_f64()).fold(self.last_tick_s, f64::max);
        let samples = self
            .flows
            .iter_mut()
            .map(|f| {
                let s =
                    FlowSample { id: f.id, bytes: f.total - f.at_tick, tcp: f.watch.sample(), ..Default::default() };
                f.at_tick = f.total;
                s
            })
            .collect();
        let index = self.ticker.index();
        self.ctx.send(self.seat.index, Event::Interval { index, start_s: self.last_tick_s, end_s, flows: samples });
    }

    /// Every flow's final figures, once the peer acknowledged everything (retransmissions can
    /// run on after the last send); a peer that does not acknowledge costs at most [`SETTLE`].
    fn finish(&mut self) {
        let settle_until = Instant::now() + SETTLE;
        for f in self.flows.iter().filter(|f| f.role == FlowRole::Send && f.error.is_none()) {
            f.watch.settle(settle_until.saturating_duration_since(Instant::now()));
        }
        for f in &self.flows {
            let end = FlowEnd {
                id: f.id,
                bytes: f.total,
                seconds: (f.last_byte.max(self.start) - self.start).as_secs_f64(),
                tcp: f.watch.sample(),
                error: f.error.clone(),
                cpu: self.seat.cpu(),
                rtt_hist: f.watch.rtt_histogram().map(Box::new),
                tcp_info: f.watch.tcp_info_check(),
                ..Default::default()
            };
            self.ctx.send(self.seat.index, Event::FlowDone(Box::new(end)));
        }
    }
}

/// Spawns one pinned worker thread per group of flows. `cpus[i]` (when given) pins group `i`.
pub fn spawn_workers(
    groups: Vec<Vec<BulkFlow>>,
    cpus: &[Option<usize>],
    cfg: &Arc<BulkConfig>,
    ctx: &Ctx,
) -> io::Result<Vec<std::thread::JoinHandle<()>>> {
    let mut handles = Vec::with_capacity(groups.len());
    for (i, group) in groups.into_iter().enumerate() {
        let cpu = cpus.get(i).copied().flatten();
        let (cfg, ctx) = (cfg.clone(), ctx.clone());
        handles.push(crate::exec::worker::spawn(i, cpu, move |pinned| {
            run_worker(Seat { index: i, pinned }, group, &cfg, &ctx)
        })?);
    }
    Ok(handles)
}

/// Spawns an end's bulk workers: each sending stream gets its share of a byte budget (`--bytes`),
/// the streams are spread round-robin over one worker per CPU of `end.bulk_cpus`, except on a
/// server asked to pin every stream (`server_cpus`): one worker per CPU named, with its streams.
pub fn spawn(end: &End<'_>, b: &BulkSection, conns: Vec<Conn>) -> io::Result<Vec<std::thread::JoinHandle<()>>> {
    // Every flow this end sends goes one way (the client's up, the server's down): its rate.
    let rate = b.rate(match end.side {
        Side::Client => netblast_spec::profile::Way::Up,
        Side::Server => netblast_spec::profile::Way::Down,
    });
    let senders = conns.iter().filter(|c| end.role(c.way) == FlowRole::Send).count() as u64;
    // A server's streams the client asked to pin (the profile's `server_cpus`): one worker per
    // CPU named, each with the flows pinned there. (A client's spread over `bulk_cpus`.)
    let cpus: Option<Vec<usize>> = if end.side == Side::Server { conns.iter().map(|c| c.cpu).collect() } else { None };
    let mut rank = 0u64;
    let mut flows = Vec::with_capacity(conns.len());
    for c in conns {
        let role = end.role(c.way);
        let budget = match (role, b.bytes) {
            (FlowRole::Send, Some(total)) => {
                rank += 1;
                Some(split_budget(total.bytes(), senders, rank - 1))
            }
            _ => None,
        };
        if let (FlowRole::Send, Some(rate)) = (role, rate) {
            use crate::os::sockopt::{paced_notsent_lowat, set_max_pacing_rate, set_notsent_lowat};
            set_max_pacing_rate(c.tcp.as_raw_fd(), rate.bits_per_s() * KERNEL_PACING_HEADROOM)?;
            // What is counted as sent is on its way, and the test ends when its bound does.
            set_notsent_lowat(c.tcp.as_raw_fd(), paced_notsent_lowat(rate.bits_per_s()))?;
        }
        flows.push(BulkFlow { id: c.id, stream: c.tcp, role, budget });
    }
    let interval = end.profile.run.interval();
    let cfg = Arc::new(BulkConfig {
        section: b.clone(),
        interval,
        timing: end.timing,
        batch_reads: end.profile.tcp.rcvbuf().is_none(),
        paced: rate.map(|r| r.bits_per_s() / 8.0),
    });
    match cpus.filter(|c| !c.is_empty()) {
        Some(cpus) => {
            let (groups, pins) = by_cpu(flows, &cpus);
            spawn_workers(groups, &pins, &cfg, end.ctx)
        }
        None => spawn_workers(spread(flows, end.bulk_cpus.len().max(1)), end.bulk_cpus, &cfg, end.ctx),
    }
}

/// Groups items by the CPU beside each (`cpus[i]` for item i), in the order the CPUs first
/// appear; the groups and the CPU of each.
fn by_cpu<T>(items: Vec<T>, cpus: &[usize]) -> (Vec<Vec<T>>, Vec<Option<usize>>) {
    let mut pins: Vec<Option<usize>> = Vec::new();
    let mut groups: Vec<Vec<T>> = Vec::new();
    for (it, &cpu) in items.into_iter().zip(cpus) {
        match pins.iter().position(|&p| p == Some(cpu)) {
            Some(g) => groups[g].push(it),
            None => {
                pins.push(Some(cpu));
                groups.push(vec![it]);
            }
        }
    }
    (groups, pins)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_group_by_their_cpu_in_first_seen_order() {
        let (groups, pins) = by_cpu(vec!["a", "b", "c", "d", "e"], &[3, 1, 3, 1, 0]);
        assert_eq!(groups, vec![vec!["a", "c"], vec!["b", "d"], vec!["e"]]);
        assert_eq!(pins, vec![Some(3), Some(1), Some(0)]);
        let (groups, pins) = by_cpu(Vec::<u8>::new(), &[]);
        assert!(groups.is_empty() && pins.is_empty());
    }

    #[test]
    fn a_receiver_s_wake_up_mark_is_a_millisecond_of_its_rate() {
        // Idle, slow or unknown: woken for any byte, as by default.
        for r in [0.0, 1e6, 15.9e6, f64::NAN] {
            assert_eq!(lowat_for(r), 1, "{r} B/s");
        }
        // 16 MB/s is 16 000 B a millisecond: under 16 KiB.
        assert_eq!(lowat_for(16e6), 1);
        assert_eq!(lowat_for(16.4e6), 16 << 10);
        // 1 Gbit/s: 125 000 B a millisecond -> 64 KiB.
        assert_eq!(lowat_for(125e6), 64 << 10);
        // 10 Gbit/s and faster: one read.
        assert_eq!(lowat_for(1.25e9), RECV_BYTES);
        assert_eq!(lowat_for(1e12), RECV_BYTES);
    }
}
