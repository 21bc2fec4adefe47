//! What every generator's flows are made of: which end this is, a connected stream, a flow's
//! role, the sockets of a single-flow kind's flow, a cps flow's other end; and what spawning an
//! end's workers takes ([`End`]). Every kind's `spawn` takes an [`End`], its profile section and
//! its connections.

use crate::exec::worker::{self, Ctx, Seat, Timing};
use netblast_spec::profile::{Profile, Way};
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Which end this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// `netblast run`.
    Client,
    /// `netblast serve`.
    Server,
}

/// One connected stream.
#[derive(Debug)]
pub struct Conn {
    /// Stream id.
    pub id: u32,
    /// Which way its bytes (or requests) go.
    pub way: Way,
    /// The TCP stream (the data itself, or the anchor of a UDP flow).
    pub tcp: TcpStream,
    /// The connected UDP socket of a UDP flow.
    pub udp: Option<UdpSocket>,
    /// The flow's own listener where its operations are connections of their own
    /// ([`netblast_spec::profile::Section::own_listener`]): where they go (client), the
    /// listener (server).
    pub listener: Option<ListenerEnd>,
    /// CPU to pin this stream's worker to (message kinds: one worker per stream).
    pub cpu: Option<usize>,
}

/// What a flow does on this end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowRole {
    /// Send until the bound, then shut down the write side.
    Send,
    /// Receive until the peer's end of file.
    Recv,
}

/// The sockets of one message flow.
#[derive(Debug)]
pub enum MsgSocket {
    /// A TCP stream carrying the messages.
    Tcp(TcpStream),
    /// A connected UDP socket carrying the messages, and the TCP stream that set it up.
    Udp {
        /// The datagram socket (connected to the peer's).
        udp: UdpSocket,
        /// The TCP stream: its end of file ends the flow.
        anchor: TcpStream,
    },
}

/// One single-flow worker's flow (msgrate, and rr where `Send` asks and `Recv` answers).
#[derive(Debug)]
pub struct MsgFlow {
    /// Stream id.
    pub id: u32,
    /// Its sockets.
    pub socket: MsgSocket,
    /// Send or receive.
    pub role: FlowRole,
}

/// The other end of a flow whose operations are connections of their own (cps), besides its
/// anchor.
#[derive(Debug)]
pub enum ListenerEnd {
    /// Client: where the flow's connections go.
    Dial(SocketAddr),
    /// Server: the flow's own listener.
    Listen(TcpListener),
}

/// Opens a flow's own listener on `at`'s address (the one its client reached, its IPv6 scope
/// kept), on the first free port of `ports` (`None`: the kernel's choice).
pub fn listen_on(at: SocketAddr, ports: crate::os::sockopt::FlowPorts) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let sock = crate::os::sockopt::bind_in(ports, |port| {
        let sock = Socket::new(Domain::for_address(at), Type::STREAM, None)?;
        sock.set_reuse_address(true)?;
        sock.bind(&crate::os::sockopt::with_port(at, port).into())?;
        Ok(sock)
    })?;
    // The kernel caps the backlog at net.core.somaxconn.
    sock.listen(4096)?;
    Ok(sock.into())
}

/// One end of a test about to spawn its workers: which end, the profile, its time bounds, the
/// CPUs of the bulk workers (pinned where `Some`), and the context every worker shares.
pub struct End<'a> {
    /// Client or server.
    pub side: Side,
    /// The test's profile.
    pub profile: &'a Profile,
    /// When senders stop and receivers give up.
    pub timing: Timing,
    /// One bulk worker per entry (message kinds: one worker per stream, on the stream's CPU).
    pub bulk_cpus: &'a [Option<usize>],
    /// What every worker shares.
    pub ctx: &'a Ctx,
}

impl End<'_> {
    /// What a stream going `way` does on this end: for an `up` stream the client sends and the
    /// server receives; rr clients ask and servers answer.
    pub fn role(&self, way: Way) -> FlowRole {
        match (self.side, way) {
            (Side::Client, Way::Up) | (Side::Server, Way::Down) => FlowRole::Send,
            _ => FlowRole::Recv,
        }
    }

    /// One pinned worker per stream (single-flow kinds): stream i's worker runs `run` on its CPU.
    pub fn spawn_per_flow<F>(&self, conns: Vec<Conn>, run: F) -> io::Result<Vec<JoinHandle<()>>>
    where
        F: Fn(Seat, MsgFlow, &Ctx) + Send + Sync + 'static,
    {
        let run = Arc::new(run);
        let mut handles = Vec::with_capacity(conns.len());
        for (i, c) in conns.into_iter().enumerate() {
            let flow = MsgFlow { id: c.id, role: self.role(c.way), socket: socket_of(c.tcp, c.udp) };
            let (run, ctx, cpu) = (run.clone(), self.ctx.clone(), c.cpu);
            handles.push(worker::spawn(i, cpu, move |pinned| run(Seat { index: i, pinned }, flow, &ctx))?);
        }
        Ok(handles)
    }
}

fn socket_of(tcp: TcpStream, udp: Option<UdpSocket>) -> MsgSocket {
    match udp {
        Some(udp) => MsgSocket::Udp { udp, anchor: tcp },
        None => MsgSocket::Tcp(tcp),
    }
}

/// Why one connection failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cause {
    /// No local port (`EADDRNOTAVAIL`).
    PortExhausted,
    /// `ECONNREFUSED`.
    Refused,
    /// Not established or not answered in time.
    TimedOut,
    /// Reset, or closed by the peer.
    Reset,
    /// Anything else.
    Other,
}

/// The cause of a connection's error, by its errno.
pub(crate) fn cause_of(e: &io::Error) -> Cause {
    match e.raw_os_error() {
        Some(libc::EADDRNOTAVAIL) => Cause::PortExhausted,
        Some(libc::ECONNREFUSED) => Cause::Refused,
        // A blocking connect past SO_SNDTIMEO returns EINPROGRESS; SYNs retried out, ETIMEDOUT.
        Some(libc::EINPROGRESS | libc::ETIMEDOUT | libc::EAGAIN) => Cause::TimedOut,
        Some(libc::ECONNRESET | libc::EPIPE | libc::ECONNABORTED) => Cause::Reset,
        _ => Cause::Other,
    }
}

/// Counts one failed connection under its cause.
pub(crate) fn count(c: &mut netblast_spec::result::ConnCounts, cause: Cause) {
    match cause {
        Cause::PortExhausted => c.port_exhausted += 1,
        Cause::Refused => c.refused += 1,
        Cause::TimedOut => c.timed_out += 1,
        Cause::Reset => c.reset += 1,
        Cause::Other => c.other += 1,
    }
}

/// Whether an error means the flow cannot go on at all (not a connection's failure).
pub(crate) fn fatal(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM | libc::EACCES))
}

/// A new socket of type `ty` for a flow's next connection to `to` (cps, hold): the run's TCP
/// options set, bound as the run asks (with several source addresses and no port range, the
/// port chosen at connect time, per destination).
pub(crate) fn conn_socket(
    to: SocketAddr,
    tcp: &netblast_spec::profile::TcpSection,
    bind: &crate::os::sockopt::Binding,
    ty: socket2::Type,
) -> io::Result<socket2::Socket> {
    use std::os::fd::AsRawFd;
    let sock = socket2::Socket::new(socket2::Domain::for_address(to), ty, None)?;
    crate::os::sockopt::apply(socket2::SockRef::from(&sock), tcp, true)?;
    if !bind.addrs.is_empty() && bind.ports.is_none() {
        crate::os::net::set_int_opt(sock.as_raw_fd(), libc::IPPROTO_IP, libc::IP_BIND_ADDRESS_NO_PORT, 1)?;
    }
    crate::os::sockopt::bind_nth(&sock, bind, crate::os::sockopt::next_socket())?;
    Ok(sock)
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
