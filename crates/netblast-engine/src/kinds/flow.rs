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
