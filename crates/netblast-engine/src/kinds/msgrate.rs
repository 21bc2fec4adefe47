//! The msgrate generator: small messages as fast as possible, one flow per pinned worker.
//!
//! Client to server only. Sockets touched: the flow's TCP stream, or for UDP its connected UDP
//! socket plus the TCP stream that set it up (the *anchor*, whose end of file ends the test).
//!
//! - TCP sender: one `send` per message (`batch = 1`) or `sendmmsg` of `batch` messages, each
//!   still its own `sendmsg` in the kernel; messages are never joined in user space. With Nagle
//!   on (the default, as qperf) the kernel coalesces them into fewer segments; `tcpi_segs_out`
//!   tells how many, and the report puts segments/s beside messages/s.
//! - TCP receiver: reads up to 256 KiB per call with `SO_RCVLOWAT` = 4 KiB, so it wakes for
//!   batches of messages rather than each one; messages = bytes / message size. With
//!   `recv = "each"` it reads one message per call instead, as qperf's receiver does.
//! - UDP sender: `sendmmsg`, one datagram per message; with a bit rate, paced: each datagram
//!   goes at its due time (to a 500 us grain). Datagrams of 16 bytes or more carry a sequence
//!   number and send time. UDP receiver: `recvmmsg`, counting datagrams (and accounting
//!   sequenced ones: loss, reordering, duplicates, jitter); after the anchor's end of file it
//!   drains what is queued, then stops. Its receive queue is grown to [`UDP_RCVBUF`] unless
//!   `-w` sets it. With per-CPU receivers ([`RecvGroup`]) the server's sockets share one port
//!   and each takes what its CPU processed, from any of the test's flows.
//! - UDP offloads, each asked for: GSO (`gso`) sends super-datagrams of up to 64 datagrams the
//!   kernel cuts, each datagram still numbered; GRO (`gro`) receives coalesced runs of one
//!   flow's datagrams and cuts them by the segment size in the `UDP_GRO` control message, so
//!   loss, reordering and jitter are accounted per datagram as without.
//!
//! [`UDP_RCVBUF`]: crate::os::sockopt::UDP_RCVBUF
//!
//! Metrics: messages and bytes per interval and in total on both ends, TCP statistics of the
//! sending socket (segments out: packets on the wire).

use crate::exec::worker::{Ctx, Deadlines, RunFlags, Seat, Timing};
use crate::kinds::flow::describe_io;
use crate::kinds::flow::{Conn, End, Side};
pub use crate::kinds::flow::{FlowRole, MsgFlow, MsgSocket};
use crate::measure::meter::{Meter, run_single, should_stop};
use crate::measure::pace::Pace;
use crate::measure::udpseq;
use crate::os::net::{self, GsoBatch, OwnBatch, RecvBatch, SendBatch};
use netblast_spec::profile::{MsgrateSection, Section as _};
use std::io::{self, ErrorKind};
use std::net::{IpAddr, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long a blocking call waits before the loop looks at the clock and flags again.
pub const WAKE: Duration = Duration::from_millis(50);
/// `SO_RCVLOWAT` of TCP message receivers.
pub const RCVLOWAT: usize = 4096;

/// Parameters of a msgrate test end.
#[derive(Debug, Clone)]
pub struct MsgConfig {
    /// The profile's section: message size, batch, record marks, how receivers read,
    /// pacing, offloads.
    pub section: MsgrateSection,
    /// UDP: datagrams carry a sequence number, send time and the test's identity
    /// ([`crate::measure::udpseq`]).
    pub sequenced: bool,
    /// The identity this test's datagrams carry.
    pub identity: u64,
    /// The server's per-CPU receivers, when the profile asks for them.
    pub group: Option<Arc<RecvGroup>>,
    /// Reporting interval.
    pub interval: Duration,
    /// When senders stop and receivers give up.
    pub timing: Timing,
}

/// Spawns an end's msgrate workers, one pinned worker per flow (and on the server of a UDP
/// test that asks for them, the per-CPU receivers' group).
pub fn spawn(end: &End<'_>, m: &MsgrateSection, conns: Vec<Conn>) -> io::Result<Vec<std::thread::JoinHandle<()>>> {
    // Every flow this end sends goes one way (the client's up, the server's down): its rate.
    let mut section = m.clone();
    section.bitrate = m.rate(match end.side {
        Side::Client => netblast_spec::profile::Way::Up,
        Side::Server => netblast_spec::profile::Way::Down,
    });
    let cfg = Arc::new(MsgConfig {
        section,
        sequenced: m.protocol == netblast_spec::profile::Protocol::Udp
            && m.msg_bytes.bytes() >= MsgrateSection::SEQ_HEADER,
        identity: crate::measure::udpseq::identity(&end.ctx.test_id),
        group: per_cpu_receivers(end, m, &conns)?,
        interval: end.profile.run.interval(),
        timing: end.timing,
    });
    end.spawn_per_flow(conns, move |seat, flow, ctx| run_worker(seat, flow, &cfg, ctx))
}

/// The server's per-CPU receivers of a UDP msgrate test that asks for them: all its streams
/// receive (the profile allows client to server only), from the client at the other end.
fn per_cpu_receivers(end: &End<'_>, m: &MsgrateSection, conns: &[Conn]) -> io::Result<Option<Arc<RecvGroup>>> {
    if end.side != Side::Server || !m.per_cpu_receivers() {
        return Ok(None);
    }
    let receiving = conns.iter().filter(|c| end.role(c.way) == FlowRole::Recv).count();
    let client = match conns.first() {
        Some(c) => c.tcp.peer_addr()?.ip(),
        None => return Ok(None),
    };
    Ok(Some(Arc::new(RecvGroup::new(receiving, client))))
}

/// Runs one msgrate flow on the calling (pinned) worker thread until it ends.
pub fn run_worker(seat: Seat, flow: MsgFlow, cfg: &MsgConfig, ctx: &Ctx) {
    let watch = match &flow.socket {
        MsgSocket::Tcp(s) if flow.role == FlowRole::Send => Some(ctx.probe.watch(s.as_raw_fd())),
        _ => None,
    };
    let flags = &*ctx.flags;
    run_single(&seat, flow.id, ctx, (cfg.interval, false, watch), |m, start| {
        let Deadlines { send_until, give_up } = cfg.timing.after(start);
        match (&flow.socket, flow.role) {
            (MsgSocket::Tcp(s), FlowRole::Send) => tcp_send(s, cfg, m, flags, send_until, give_up).map(|_| None),
            (MsgSocket::Tcp(s), FlowRole::Recv) => tcp_recv(s, cfg, m, flags, give_up).map(|_| None),
            (MsgSocket::Udp { udp, anchor }, FlowRole::Send) => {
                udp_send(udp, anchor, cfg, m, flags, (start, send_until)).map(|_| None)
            }
            (MsgSocket::Udp { udp, anchor }, FlowRole::Recv) => {
                udp_recv(udp, anchor, cfg, m, flags, give_up).map(|_| net::udp_drops(udp.as_raw_fd()))
            }
        }
    });
}

fn io_msg(e: &io::Error) -> String {
    describe_io(e)
}

/// Sends `buf` completely on a blocking socket with timeouts, unless told to abort.
fn send_rest(fd: RawFd, mut buf: &[u8], flags: &RunFlags, give_up: Instant) -> Result<(), String> {
    while !buf.is_empty() {
        match net::send(fd, buf, 0) {
            Ok(n) => buf = &buf[n..],
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                if flags.aborting() || Instant::now() >= give_up {
                    return Err("gave up sending the last message".into());
                }
            }
            Err(e) => return Err(io_msg(&e)),
        }
    }
    Ok(())
}

fn tcp_send(
    s: &TcpStream,
    cfg: &MsgConfig,
    m: &mut Meter,
    flags: &RunFlags,
    send_until: Instant,
    give_up: Instant,
) -> Result<(), String> {
    let fd = s.as_raw_fd();
    s.set_nonblocking(false).map_err(|e| io_msg(&e))?;
    net::set_timeouts(fd, WAKE).map_err(|e| io_msg(&e))?;
    let payload = vec![0x5au8; cfg.section.msg_bytes.to_usize()];
    let mut batch = (cfg.section.batch > 1).then(|| SendBatch::new(&payload, cfg.section.batch as usize));
    let send_flags = if cfg.section.eor { libc::MSG_EOR } else { 0 };
    let msg = cfg.section.msg_bytes.bytes();
    let result = loop {
        let now = Instant::now();
        m.tick(now);
        if should_stop(flags, now, send_until) {
            break Ok(());
        }
        let mut failed = None;
        for _ in 0..16 {
            let r = match batch.as_mut() {
                Some(b) => b.send(fd, send_flags).map(|(_, bytes)| bytes),
                None => net::send(fd, &payload, send_flags).map(|n| n as u64),
            };
            match r {
                Ok(bytes) => m.bytes += bytes,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => break,
                Err(e) => {
                    failed = Some(io_msg(&e));
                    break;
                }
            }
        }
        m.msgs = m.bytes / msg;
        if let Some(e) = failed {
            break Err(e);
        }
    };
    // Complete a message cut by a timeout, so both ends count the same whole messages.
    let partial = (m.bytes % msg) as usize;
    let result =
        result.and_then(|_| if partial > 0 { send_rest(fd, &payload[partial..], flags, give_up) } else { Ok(()) });
    if result.is_ok() && partial > 0 {
        m.bytes += msg - partial as u64;
        m.msgs = m.bytes / msg;
    }
    m.moved_at(Instant::now());
    let _ = s.shutdown(std::net::Shutdown::Write);
    result
}

fn tcp_recv(s: &TcpStream, cfg: &MsgConfig, m: &mut Meter, flags: &RunFlags, give_up: Instant) -> Result<(), String> {
    let fd = s.as_raw_fd();
    s.set_nonblocking(false).map_err(|e| io_msg(&e))?;
    net::set_timeouts(fd, WAKE).map_err(|e| io_msg(&e))?;
    let mut buf = if cfg.section.recv == netblast_spec::profile::RecvMode::Each {
        // One message per call: a read costs what it costs qperf's receiver.
        vec![0u8; cfg.section.msg_bytes.to_usize().max(1)]
    } else {
        // Wake for a batch of messages, not each one; the end of file and timeouts still
        // return less.
        let _ = net::set_int_opt(fd, libc::SOL_SOCKET, libc::SO_RCVLOWAT, RCVLOWAT as libc::c_int);
        vec![0u8; 256 * 1024]
    };
    let msg = cfg.section.msg_bytes.bytes();
    loop {
        let r = net::recv(fd, &mut buf, 0);
        let now = Instant::now();
        match r {
            Ok(0) => {
                m.tick(now);
                return Ok(());
            }
            Ok(n) => {
                m.bytes += n as u64;
                m.msgs = m.bytes / msg;
                m.moved_at(now);
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
            Err(e) => return Err(io_msg(&e)),
        }
        m.tick(now);
        if flags.aborting() || now >= give_up {
            return Err("gave up waiting for the sender to finish".into());
        }
    }
}

/// How far ahead of its due time a paced sender sends: the datagrams due within it go in one
/// `sendmmsg`, so pacing is even to this grain and never a burst of an interval's budget.
/// Each grain costs a sleep and a wake-up: at 50 us the sender spent 9.6 us of CPU per 1400-byte
/// datagram at 500 Mbit/s (iperf3: 5.0), at 200 us 5.8, at 500 us 4.8-5.0. iperf3 paces to
/// 1 ms (its `--pacing-timer`).
const PACE_GRAIN: Duration = Duration::from_micros(500);

/// With GSO, super-datagrams (up to 64 datagrams, 64 KB each) per `sendmmsg`.
const GSO_PER_CALL: usize = 4;

fn udp_send(
    udp: &UdpSocket,
    anchor: &TcpStream,
    cfg: &MsgConfig,
    m: &mut Meter,
    flags: &RunFlags,
    (start, send_until): (Instant, Instant),
) -> Result<(), String> {
    let fd = udp.as_raw_fd();
    udp.set_nonblocking(false).map_err(|e| io_msg(&e))?;
    net::set_timeouts(fd, WAKE).map_err(|e| io_msg(&e))?;
    // One payload for every datagram, or a buffer each (a header each, or a part of a batch),
    // or with GSO super-datagrams the kernel cuts.
    enum Batch {
        Same(SendBatch),
        Own(OwnBatch),
        Gso(GsoBatch),
    }
    let mut batch = if cfg.section.gso {
        net::set_udp_gso(fd, cfg.section.msg_bytes.to_usize())
            .map_err(|e| format!("--gso: the kernel refused UDP_SEGMENT ({})", io_msg(&e)))?;
        Batch::Gso(GsoBatch::new(cfg.section.msg_bytes.to_usize(), GSO_PER_CALL * net::GSO_MAX_SEGMENTS, 0x5a))
    } else if cfg.sequenced || cfg.section.bitrate.is_some() {
        Batch::Own(OwnBatch::new(cfg.section.msg_bytes.to_usize(), (cfg.section.batch as usize).max(1), 0x5a))
    } else {
        Batch::Same(SendBatch::new(
            &vec![0x5au8; cfg.section.msg_bytes.to_usize()],
            (cfg.section.batch as usize).max(1),
        ))
    };
    // Datagrams one call sends at most.
    let n = match &batch {
        Batch::Gso(b) => b.capacity(),
        _ => (cfg.section.batch as usize).max(1),
    };
    if cfg.section.bitrate.is_some() {
        // Sleeps end when asked, not up to 50 us later (the default timer slack).
        // SAFETY: prctl(PR_SET_TIMERSLACK) only changes this thread's timer slack.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64, 0u64, 0u64, 0u64) };
    }
    // Catch up: every datagram due by now and a grain ahead goes, a batch a call at most.
    let mut pace = cfg
        .section
        .bitrate
        .and_then(|b| Pace::per_second(start, b.bits_per_s() / (cfg.section.msg_bytes.to_usize() as f64 * 8.0)));
    let mut seq: u64 = 0;
    let result = loop {
        let now = Instant::now();
        m.tick(now);
        if should_stop(flags, now, send_until) {
            break Ok(());
        }
        // How many to send now: a batch, or those due by now plus the grain.
        let k = match &pace {
            None => n,
            Some(p) => {
                let due = p.due();
                if due > now {
                    let wait = (due - now).min(WAKE).min(send_until.saturating_duration_since(now));
                    if wait > Duration::from_micros(2) {
                        std::thread::sleep(wait);
                    } else {
                        std::hint::spin_loop();
                    }
                    continue;
                }
                p.due_by(now + PACE_GRAIN).clamp(1, n as u64) as usize
            }
        };
        // Sequenced datagrams have buffers of their own, laid end to end.
        let own = match &mut batch {
            Batch::Own(b) => Some(b.datagrams_mut()),
            Batch::Gso(b) => Some(b.datagrams_mut()),
            Batch::Same(_) => None,
        };
        if let (true, Some((bufs, size))) = (cfg.sequenced, own) {
            let at = m.since_start_ns(now);
            for (i, d) in bufs.chunks_exact_mut(size).take(k).enumerate() {
                udpseq::write_header(d, seq + i as u64, at, cfg.identity);
            }
        }
        let sent = match &mut batch {
            Batch::Own(b) => b.send(fd, k),
            Batch::Gso(b) => b.send(fd, k),
            Batch::Same(b) => b.send(fd, 0),
        };
        match sent {
            Ok((done, bytes)) => {
                seq += done as u64;
                if let Some(p) = pace.as_mut() {
                    p.take(done as u64);
                }
                m.msgs += done as u64;
                m.bytes += bytes;
            }
            // The local queue is full: the datagram was not sent, so it is not counted.
            Err(e)
                if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted)
                    || e.raw_os_error() == Some(libc::ENOBUFS) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                break Err("the server's UDP port is closed (ICMP port unreachable)".to_string());
            }
            Err(e) if cfg.section.gso && e.raw_os_error() == Some(libc::EINVAL) => {
                break Err(format!(
                    "--gso: the kernel refused a send of {}-byte segments (larger than the path's MTU, or a \
                     device without UDP segmentation): {}",
                    cfg.section.msg_bytes.to_usize(),
                    io_msg(&e)
                ));
            }
            Err(e) => break Err(io_msg(&e)),
        }
    };
    m.moved_at(Instant::now());
    // The anchor's end of file tells the server the last datagram has been sent.
    let _ = anchor.shutdown(std::net::Shutdown::Write);
    result
}

/// The server's per-CPU UDP receivers of one test (`receivers = "per_cpu"`): a socket per
/// receiving flow, all in one `SO_REUSEPORT` group, each pinned worker taking the datagrams its
/// CPU's network stack processed (`SO_INCOMING_CPU`, set when each socket was opened:
/// [`crate::os::sockopt::tie_to_cpu`]). A receiver takes any of the test's flows, so it stops only
/// when every sender is done.
#[derive(Debug)]
pub struct RecvGroup {
    /// Senders still sending (their anchors not yet at end of file).
    open: AtomicUsize,
    /// The test client's address: datagrams from anywhere else are not the test's.
    client: IpAddr,
    /// The test's flows: at most this many senders are accounted per receiver.
    flows: usize,
}

impl RecvGroup {
    /// The receivers of `flows` flows from `client`.
    pub fn new(flows: usize, client: IpAddr) -> RecvGroup {
        RecvGroup { open: AtomicUsize::new(flows), client: client.to_canonical(), flows }
    }
}

/// One sender of a [`RecvGroup`] counted done once: at its anchor's end, or when its receiver
/// leaves for any reason.
struct Sending<'a>(Option<&'a RecvGroup>);

impl Sending<'_> {
    fn done(&mut self) {
        if let Some(g) = self.0.take() {
            g.open.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Drop for Sending<'_> {
    fn drop(&mut self) {
        self.done();
    }
}

fn udp_recv(
    udp: &UdpSocket,
    anchor: &TcpStream,
    cfg: &MsgConfig,
    m: &mut Meter,
    flags: &RunFlags,
    give_up: Instant,
) -> Result<(), String> {
    let fd = udp.as_raw_fd();
    let afd = anchor.as_raw_fd();
    udp.set_nonblocking(true).map_err(|e| io_msg(&e))?;
    anchor.set_nonblocking(true).map_err(|e| io_msg(&e))?;
    // Sized when the socket was opened ([`crate::os::sockopt::ready_udp`]): reported as it is.
    let rcvbuf = crate::os::sockopt::rcvbuf_of(fd);
    m.rcvbuf = Some(rcvbuf.map_err(|e| format!("cannot read the UDP receive queue's size: {}", io_msg(&e)))?);
    let group = cfg.group.as_deref();
    let mut sending = Sending(group);
    // With GRO a buffer holds a coalesced run of one flow's datagrams (up to 64 KB).
    let (n, size) = if cfg.section.gro { (16, 65_536) } else { (64, cfg.section.msg_bytes.to_usize().max(1) + 1) };
    let mut batch = match group {
        Some(_) => RecvBatch::with_sources(n, size),
        None => RecvBatch::new(n, size),
    };
    if cfg.section.gro {
        net::set_udp_gro(fd).map_err(|e| format!("--gro: the kernel refused UDP_GRO ({})", io_msg(&e)))?;
        batch = batch.with_gro();
    }
    let mut scratch = [0u8; 64];
    if cfg.sequenced {
        m.seq = Some(match group {
            Some(g) => udpseq::Accounts::by_source(g.flows),
            None => udpseq::Accounts::one(),
        });
    }
    // Counts (and accounts, when sequenced) the datagrams of the last batch that are the
    // test's: on a shared socket, those from the client; one arrival time for the batch.
    // A buffer is one datagram, or with GRO several of one source, cut by their segment size.
    // Sequenced, a datagram without the test's identity or from a stranger is foreign: counted
    // apart, in no other figure.
    let identity = cfg.identity;
    let take = |m: &mut Meter, batch: &RecvBatch, n: usize| {
        let at = m.since_start_ns(Instant::now());
        let (mut msgs, mut bytes) = (0u64, 0u64);
        for i in 0..n {
            let from = match group {
                Some(g) => match batch.source(i) {
                    Some(a) if a.ip() == g.client => Some(a),
                    _ => {
                        if let Some(t) = m.seq.as_mut() {
                            batch.segments(i).for_each(|_| t.foreign());
                        }
                        continue;
                    }
                },
                None => None,
            };
            for d in batch.segments(i) {
                if let Some(t) = m.seq.as_mut() {
                    match udpseq::read_header(d, identity) {
                        Some((seq, sent)) if t.on_datagram(from, seq, sent, at) => {}
                        Some(_) => continue,
                        None => {
                            t.foreign();
                            continue;
                        }
                    }
                }
                msgs += 1;
                bytes += d.len() as u64;
            }
        }
        m.msgs += msgs;
        m.bytes += bytes;
    };
    let mut anchor_open = true;
    loop {
        // Drain what is queued.
        loop {
            match batch.recv(fd) {
                Ok((0, _)) => break,
                Ok((n, _)) => {
                    take(m, &batch, n);
                    m.moved_at(Instant::now());
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // A refused send of ours earlier (peer gone) surfaces here; the anchor tells the rest.
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => break,
                Err(e) => return Err(io_msg(&e)),
            }
        }
        let now = Instant::now();
        m.tick(now);
        if flags.aborting() || now >= give_up {
            return Err("gave up waiting for the sender to finish".into());
        }
        // Every sender is done (a shared receiver waits for all of them, not only its own).
        let senders_done = !anchor_open && group.is_none_or(|g| g.open.load(Ordering::Acquire) == 0);
        if senders_done {
            // On loopback every datagram sent is queued by now; elsewhere allow a moment for
            // those still in flight.
            let until = Instant::now() + Duration::from_millis(100);
            loop {
                match batch.recv(fd) {
                    Ok((0, _)) => {
                        let more = Instant::now() < until
                            && net::poll_readable(&[fd], Duration::from_millis(10)).is_ok_and(|r| r[0]);
                        if !more {
                            break;
                        }
                    }
                    Ok((n, _)) => take(m, &batch, n),
                    Err(_) => break,
                }
            }
            m.moved_at(Instant::now());
            m.tick(Instant::now());
            return Ok(());
        }
        let wait = m.next_tick().saturating_duration_since(now).min(WAKE);
        // After its own sender's end a shared receiver looks at the others' every few ms.
        let fds: &[RawFd] = if anchor_open { &[fd, afd] } else { &[fd] };
        let wait = if anchor_open { wait } else { wait.min(Duration::from_millis(5)) };
        let ready = net::poll_readable(fds, wait).map_err(|e| io_msg(&e))?;
        if anchor_open && ready[1] {
            match net::recv(afd, &mut scratch, 0) {
                Ok(0) => {
                    anchor_open = false;
                    sending.done();
                }
                Ok(_) => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                Err(e) => return Err(format!("the test's TCP stream failed: {}", io_msg(&e))),
            }
        }
    }
}
