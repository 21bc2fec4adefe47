//! The hold generator: concurrent TCP connections held open and checked (RFC 9411's
//! concurrent connection capacity), one flow per pinned worker, each holding its share.
//!
//! Each flow has its anchor (the stream connection made at set-up) and, on the server, a
//! listener of its own, as cps has. The client opens connections one at a time (at its share
//! of `hold.rate` when one is set; connect latency, one HDR sample per established connection)
//! until it holds its share, and replaces any that fail or drop. A tenth of an interval before
//! each interval's end it probes every held connection: one byte out, the same byte back within
//! the timeout. The connections that answered are the interval's count (`sent`): what was
//! held, alive, through whatever is on the path. A connection that does not answer, is reset or is closed counts as
//! lost (dropped) with its cause, and is closed.
//!
//! The server, on its pinned worker, accepts the flow's connections (only from the anchor's
//! peer address, at most twice its share: a client cannot make it hold more), keeps them and
//! echoes what each sends; it counts the probes it answered.
//!
//! Sockets are non-blocking on one epoll instance per worker (mio); nothing is allocated per
//! probe. The probe round runs before the meter closes the interval, so an interval's count is
//! the connections held at its end (a tenth of an interval before it).
//!
//! Metrics: connections answering (client) and probes answered (server) per interval; failed
//! and dropped connections per interval (`lost`), by cause in total; connect latency.

use crate::exec::worker::{Deadlines, RunFlags, Seat, Timing};
use crate::kinds::flow::{Conn, End, FlowRole, ListenerEnd, cause_of, conn_socket, count, describe_io, fatal};
use crate::kinds::msgrate::WAKE;
use crate::measure::meter::{Meter, run_single, should_stop};
use crate::measure::pace::Pace;
use mio::net::TcpStream as MioStream;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use netblast_spec::profile::{HoldSection, TcpSection};
use netblast_spec::result::ConnCounts;
use socket2::{SockRef, Type};
use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// Parameters of one hold flow.
#[derive(Debug)]
struct HoldConfig {
    section: HoldSection,
    /// Connections this flow holds.
    share: u32,
    /// Connections per second this flow opens (its share of `section.rate`).
    flow_rate: Option<f64>,
    tcp: TcpSection,
    bind: crate::os::sockopt::Binding,
    interval: Duration,
    timing: Timing,
}

/// Spawns an end's hold workers, one pinned worker per flow, each holding its share.
pub fn spawn(end: &End<'_>, h: &HoldSection, conns: Vec<Conn>) -> io::Result<Vec<std::thread::JoinHandle<()>>> {
    let flows = conns.len() as u32;
    // Each end keeps every connection open at once.
    crate::os::sys::ensure_fds(u64::from(h.conns) + 64 + 2 * u64::from(flows)).map_err(io::Error::other)?;
    let mut handles = Vec::with_capacity(conns.len());
    for (i, conn) in conns.into_iter().enumerate() {
        let Some(other) = conn.listener else {
            return Err(io::Error::new(ErrorKind::InvalidInput, format!("hold flow {} has no listener", conn.id)));
        };
        let cfg = HoldConfig {
            section: h.clone(),
            share: h.share(i as u32, flows),
            flow_rate: h.rate.map(|r| r.per_second() / f64::from(flows.max(1))),
            tcp: end.profile.tcp.clone(),
            bind: end.ctx.bind.clone(),
            interval: end.profile.run.interval(),
            timing: end.timing,
        };
        let (role, anchor, id, ctx) = (end.role(conn.way), conn.tcp, conn.id, end.ctx.clone());
        handles.push(crate::exec::worker::spawn(i, conn.cpu, move |pinned| {
            let seat = Seat { index: i, pinned };
            let client = role == FlowRole::Send;
            run_single(&seat, id, &ctx, (cfg.interval, client, None), |m, start| {
                let ends = cfg.timing.after(start);
                let flags = &*ctx.flags;
                match (&other, client) {
                    (ListenerEnd::Dial(to), true) => {
                        let r = Client::new(*to, &cfg).and_then(|mut c| c.run(m, flags, ends));
                        let _ = anchor.shutdown(std::net::Shutdown::Write);
                        r
                    }
                    (ListenerEnd::Listen(l), false) => serve(l, &anchor, &cfg, m, flags, ends),
                    _ => Err("a hold flow's ends do not match its role".into()),
                }
                .map(|()| None)
            })
        })?);
    }
    Ok(handles)
}

/// The token of the connection being opened (held ones are their slot's index).
const OPENING: Token = Token(usize::MAX - 1);
/// The probe's byte.
const PROBE: u8 = 0x68;

/// A client flow: the connections it holds (slots, reused), the one it is opening, and its
/// failure counts.
struct Client<'a> {
    to: SocketAddr,
    cfg: &'a HoldConfig,
    poll: Poll,
    slots: Vec<Option<MioStream>>,
    free: Vec<usize>,
    held: usize,
    opening: Option<(MioStream, Instant)>,
    /// Whether the connection being opened is watched since it started (a probe round in
    /// between takes its events: its connect latency would be the round's).
    opening_timed: bool,
    counts: ConnCounts,
    /// Per slot: the probe of this round is still unanswered.
    waiting: Vec<bool>,
}

impl<'a> Client<'a> {
    fn new(to: SocketAddr, cfg: &'a HoldConfig) -> Result<Client<'a>, String> {
        Ok(Client {
            to,
            cfg,
            poll: Poll::new().map_err(|e| format!("cannot make an epoll instance: {e}"))?,
            slots: Vec::with_capacity(cfg.share as usize),
            free: Vec::new(),
            held: 0,
            opening: None,
            opening_timed: false,
            counts: ConnCounts::default(),
            waiting: Vec::with_capacity(cfg.share as usize),
        })
    }

    fn run(&mut self, m: &mut Meter, flags: &RunFlags, ends: Deadlines) -> Result<(), String> {
        m.conns = Some(ConnCounts::default());
        let mut pace = self.cfg.flow_rate.and_then(|r| Pace::per_second(Instant::now(), r));
        let mut events = Events::with_capacity(1024);
        // The probe goes out a tenth of an interval before the interval's end, so that the
        // server's echoes fall in the same interval as the client's count (on a path shorter
        // than that tenth).
        let lead = self.cfg.interval / 10;
        let mut probed_for = None;
        let result = loop {
            let now = Instant::now();
            let tick = m.next_tick();
            if now + lead >= tick && probed_for != Some(tick) {
                self.probe_round(m, flags, &mut events);
                probed_for = Some(tick);
                continue;
            }
            if now >= tick {
                m.tick(now);
                continue;
            }
            if should_stop(flags, now, ends.send_until) {
                // A last interval long enough to be shown on its own (not a short tail, which
                // is folded into the one before) gets its own probe.
                if probed_for != Some(tick) && now + self.cfg.interval >= tick + lead && !flags.aborting() {
                    self.probe_round(m, flags, &mut events);
                }
                break Ok(());
            }
            let probe_at = if probed_for == Some(tick) { tick } else { tick - lead };
            let mut wake = probe_at.min(ends.send_until).min(now + WAKE);
            if self.opening.is_none() && self.held < self.cfg.share as usize {
                // At the rate, never faster: a late flow skips the slots it missed.
                let due = match pace.as_mut() {
                    None => true,
                    Some(p) => match p.skip_missed(now) {
                        Some(_) => {
                            p.take(1);
                            true
                        }
                        None => {
                            wake = wake.min(p.due());
                            false
                        }
                    },
                };
                if due {
                    if let Err(e) = self.open(m) {
                        break Err(e);
                    }
                    continue;
                }
            }
            match &self.opening {
                Some((_, t0)) => wake = wake.min(*t0 + self.cfg.section.timeout()),
                // epoll waits in whole milliseconds: a shorter wait for the next opening
                // sleeps (held connections' news can wait that long).
                None if wake.saturating_duration_since(now) < Duration::from_millis(2) => {
                    std::thread::sleep(wake.saturating_duration_since(now));
                    continue;
                }
                None => {}
            }
            if let Err(e) = self.poll.poll(&mut events, Some(wake.saturating_duration_since(now))) {
                if e.kind() != ErrorKind::Interrupted {
                    break Err(format!("epoll: {e}"));
                }
            }
            for ev in events.iter() {
                if ev.token() != OPENING {
                    // A held connection between probes: only its end is news.
                    self.drain(ev.token().0, m);
                }
            }
            self.check_opening(m);
        };
        m.conns = Some(self.counts);
        result
    }

    /// Starts the next connection (non-blocking; `check_opening` sees it established).
    fn open(&mut self, m: &mut Meter) -> Result<(), String> {
        let sock = match conn_socket(self.to, &self.cfg.tcp, &self.cfg.bind, Type::STREAM.nonblocking()) {
            Ok(s) => s,
            Err(e) if fatal(&e) => return Err(format!("cannot open a socket: {}", describe_io(&e))),
            Err(e) => {
                count(&mut self.counts, cause_of(&e));
                m.lost += 1;
                return Ok(());
            }
        };
        let t0 = Instant::now();
        match sock.connect(&self.to.into()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) if fatal(&e) => return Err(format!("cannot connect: {}", describe_io(&e))),
            Err(e) => {
                count(&mut self.counts, cause_of(&e));
                m.lost += 1;
                return Ok(());
            }
        }
        let mut stream = MioStream::from_std(TcpStream::from(sock));
        self.poll
            .registry()
            .register(&mut stream, OPENING, Interest::WRITABLE | Interest::READABLE)
            .map_err(|e| format!("epoll: {e}"))?;
        self.opening = Some((stream, t0));
        self.opening_timed = true;
        Ok(())
    }

    /// Whether the connection being opened is established (held from now on), failed, or past
    /// its timeout.
    fn check_opening(&mut self, m: &mut Meter) {
        let Some((stream, t0)) = &self.opening else { return };
        let failed = match stream.take_error() {
            Ok(Some(e)) | Err(e) => Some(e),
            Ok(None) => match stream.peer_addr() {
                Ok(_) => None,
                Err(e) if e.kind() == ErrorKind::NotConnected => {
                    if t0.elapsed() < self.cfg.section.timeout() {
                        return;
                    }
                    Some(io::Error::from_raw_os_error(libc::ETIMEDOUT))
                }
                Err(e) => Some(e),
            },
        };
        let t1 = Instant::now();
        let (mut stream, t0) = self.opening.take().expect("checked above");
        if let Some(e) = failed {
            count(&mut self.counts, cause_of(&e));
            m.lost += 1;
            return;
        }
        if self.opening_timed {
            m.record_ns((t1 - t0).as_nanos() as u64);
        }
        let slot = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.waiting.push(false);
            self.slots.len() - 1
        });
        if self.poll.registry().reregister(&mut stream, Token(slot), Interest::READABLE).is_err() {
            self.counts.other += 1;
            m.lost += 1;
            self.free.push(slot);
            return;
        }
        self.slots[slot] = Some(stream);
        self.held += 1;
    }

    /// Reads what a held connection has (edge-triggered: all of it). Returns whether it is
    /// still held; one that ended or failed is closed and counted.
    fn drain(&mut self, slot: usize, m: &mut Meter) -> bool {
        let Some(Some(stream)) = self.slots.get_mut(slot) else { return false };
        let mut buf = [0u8; 64];
        let mut got = false;
        let ended = loop {
            match stream.read(&mut buf) {
                Ok(0) => break Some(io::Error::from_raw_os_error(libc::ECONNRESET)),
                Ok(_) => got = true,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break None,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => break Some(e),
            }
        };
        if got && self.waiting[slot] {
            self.waiting[slot] = false;
            m.msgs += 1;
            m.bytes += 1;
        }
        match ended {
            None => true,
            Some(e) => {
                self.drop_slot(slot, &e, m);
                false
            }
        }
    }

    fn drop_slot(&mut self, slot: usize, why: &io::Error, m: &mut Meter) {
        if let Some(mut s) = self.slots[slot].take() {
            let _ = self.poll.registry().deregister(&mut s);
            self.waiting[slot] = false;
            self.free.push(slot);
            self.held -= 1;
            count(&mut self.counts, cause_of(why));
            m.lost += 1;
        }
    }

    /// One byte to every held connection, then their answers until the timeout: the ones that
    /// answered count in the interval, the rest are dropped.
    fn probe_round(&mut self, m: &mut Meter, flags: &RunFlags, events: &mut Events) {
        self.opening_timed = false;
        let mut outstanding = 0usize;
        for slot in 0..self.slots.len() {
            let Some(stream) = self.slots[slot].as_mut() else { continue };
            match stream.write(&[PROBE]) {
                Ok(1) => {
                    self.waiting[slot] = true;
                    outstanding += 1;
                }
                Ok(_) => self.drop_slot(slot, &io::Error::from_raw_os_error(libc::ETIMEDOUT), m),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    // One byte does not fit: the connection's window is shut; as unanswered.
                    self.drop_slot(slot, &io::Error::from_raw_os_error(libc::ETIMEDOUT), m)
                }
                Err(e) => self.drop_slot(slot, &e, m),
            }
        }
        let deadline = Instant::now() + self.cfg.section.timeout();
        while outstanding > 0 && !flags.aborting() {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            if let Err(e) = self.poll.poll(events, Some((deadline - now).min(WAKE))) {
                if e.kind() != ErrorKind::Interrupted {
                    break;
                }
            }
            for ev in events.iter() {
                let slot = ev.token().0;
                if ev.token() == OPENING {
                    continue;
                }
                let was_waiting = self.waiting.get(slot).copied().unwrap_or(false);
                let held = self.drain(slot, m);
                if was_waiting && (!held || !self.waiting[slot]) {
                    outstanding -= 1;
                }
            }
        }
        for slot in 0..self.slots.len() {
            if self.waiting[slot] {
                self.drop_slot(slot, &io::Error::from_raw_os_error(libc::ETIMEDOUT), m);
            }
        }
        m.moved_at(Instant::now());
    }
}

/// The tokens of the server's listener and anchor (held connections are their slot's index).
const LISTENER: Token = Token(usize::MAX - 1);
const ANCHOR: Token = Token(usize::MAX - 2);

/// A flow's server end: accepts its client's connections (at most twice the flow's share),
/// keeps them, echoes their probes, until the client shuts its anchor.
fn serve(
    listener: &TcpListener,
    anchor: &TcpStream,
    cfg: &HoldConfig,
    m: &mut Meter,
    flags: &RunFlags,
    ends: Deadlines,
) -> Result<(), String> {
    let io_err = |e: io::Error| describe_io(&e);
    let allowed = anchor.peer_addr().map_err(io_err)?.ip().to_canonical();
    let mut poll = Poll::new().map_err(io_err)?;
    listener.set_nonblocking(true).map_err(io_err)?;
    anchor.set_nonblocking(true).map_err(io_err)?;
    let reg = poll.registry().try_clone().map_err(io_err)?;
    reg.register(&mut SourceFd(&listener.as_raw_fd()), LISTENER, Interest::READABLE).map_err(io_err)?;
    reg.register(&mut SourceFd(&anchor.as_raw_fd()), ANCHOR, Interest::READABLE).map_err(io_err)?;
    let most = 2 * cfg.share as usize + 16;
    let (mut slots, mut free): (Vec<Option<MioStream>>, Vec<usize>) = (Vec::new(), Vec::new());
    let (mut held, mut refused) = (0usize, 0u64);
    let mut events = Events::with_capacity(1024);
    let mut buf = [0u8; 256];
    loop {
        let now = Instant::now();
        m.tick(now);
        if flags.aborting() || now >= ends.give_up {
            return Err("gave up waiting for the client to finish".into());
        }
        if let Err(e) = poll.poll(&mut events, Some(WAKE.min(m.next_tick().saturating_duration_since(now)))) {
            if e.kind() != ErrorKind::Interrupted {
                return Err(format!("epoll: {e}"));
            }
        }
        for ev in events.iter() {
            match ev.token() {
                LISTENER => loop {
                    let (sock, peer) = match SockRef::from(listener).accept() {
                        Ok(x) => x,
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(e) if matches!(e.raw_os_error(), Some(libc::ECONNABORTED | libc::EPROTO | libc::EINTR)) => {
                            continue;
                        }
                        Err(e) if fatal(&e) => return Err(format!("cannot accept: {}", describe_io(&e))),
                        Err(e) => return Err(format!("cannot accept: {}", describe_io(&e))),
                    };
                    let from = peer.as_socket().map(|a| a.ip().to_canonical());
                    if from != Some(allowed) || held >= most {
                        // Not the test's client, or more than it asked for: reset, not kept.
                        let _ = sock.set_linger(Some(Duration::ZERO));
                        refused += 1;
                        if refused == 1 {
                            tracing::warn!(
                                ?from,
                                held,
                                "reset a connection to a hold listener: another address, or more than the test asked for"
                            );
                        }
                        continue;
                    }
                    if sock.set_nonblocking(true).is_err() {
                        continue;
                    }
                    let mut stream = MioStream::from_std(TcpStream::from(sock));
                    let slot = free.pop().unwrap_or_else(|| {
                        slots.push(None);
                        slots.len() - 1
                    });
                    if reg.register(&mut stream, Token(slot), Interest::READABLE).is_ok() {
                        slots[slot] = Some(stream);
                        held += 1;
                    } else {
                        free.push(slot);
                    }
                },
                ANCHOR => loop {
                    let mut b = [0u8; 16];
                    match (&*anchor).read(&mut b) {
                        Ok(0) => return Ok(()),
                        Ok(_) => {}
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == ErrorKind::Interrupted => {}
                        Err(e) => return Err(format!("the test's TCP stream failed: {}", describe_io(&e))),
                    }
                },
                Token(slot) => {
                    let Some(Some(stream)) = slots.get_mut(slot) else { continue };
                    let gone = loop {
                        match stream.read(&mut buf) {
                            Ok(0) => break true,
                            Ok(n) => {
                                if stream.write_all(&buf[..n]).is_err() {
                                    break true;
                                }
                                m.msgs += n as u64;
                                m.bytes += n as u64;
                                m.moved_at(Instant::now());
                            }
                            Err(e) if e.kind() == ErrorKind::WouldBlock => break false,
                            Err(e) if e.kind() == ErrorKind::Interrupted => {}
                            Err(_) => break true,
                        }
                    };
                    if gone {
                        if let Some(mut s) = slots[slot].take() {
                            let _ = reg.deregister(&mut s);
                            free.push(slot);
                            held -= 1;
                        }
                    }
                }
            }
        }
    }
}
