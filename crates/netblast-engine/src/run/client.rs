//! `netblast run`: the client end of a data-port test, and its part in each step of the
//! [`sequence`].
//!
//! 1. Set-up: connect the control connection, shake hands (protocol version, token), send the
//!    [`TestSetup`], wait for `Accepted`.
//! 2. Open every stream (options set before `connect`), each announced by its header and tag
//!    and acknowledged by the server.
//! 3. Spawn one pinned worker per CPU; before the start instant (the next interval boundary of
//!    the wall clock, or `--start-at`) start reading the server's frames; at it open the start
//!    gate and send `Start`.
//! 4. Aggregate worker events and the server's interval reports: each interval is released
//!    once both ends reported it; at the bound send `Stop`.
//! 5. Wait for the server's `Final`, then build the [`RunResult`]. Whatever goes wrong after
//!    the start (a reset, a dead server, Ctrl-C) is recorded in the result, which is then
//!    marked incomplete; nothing measured is thrown away.

use crate::exec::api::{ClientError, Live, Measured, RunOptions, escape};
use crate::exec::collect::Collector;
use crate::exec::generator::{Ending, Generator};
use crate::exec::start::Started;
use crate::exec::worker::{Event, EventTx, RunFlags, StartGate};
use crate::kinds::ListenerEnd;
use crate::kinds::{self, Conn, Ctx, Side, Timing};
use crate::measure::aggregate::{Aggregator, KindInfo};
use crate::os::sockopt;
use crate::os::sys;
use crate::run::sequence::sequence;
use netblast_probe::Probe;
use netblast_spec::plan::{self, stream_setups};
use netblast_spec::result::{HostInfo, Interval, Plan, RunResult, StreamInfo};
use netblast_wire::auth::StreamKey;
use netblast_wire::wire::{
    BUSY_BACKOFF, ClientHandshake, ClientMsg, HandshakeFailure, Header, Refusal, Role, ServerMsg, StreamAck, TestId,
    TestSetup, blocking, busy_words,
};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, UdpSocket};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a TCP connect may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the server may take to answer a setup or a stream header.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(10);
/// After the bound: how long receivers wait for the peer's end of file, and how long the client
/// waits for the server's final report.
pub const DRAIN_GRACE: Duration = Duration::from_secs(10);
/// Least time between the end of set-up and the start instant, so `Start` reaches the server
/// before the start (the wall-clock boundary after it is taken).
pub const START_LEAD: Duration = Duration::from_millis(20);

fn connect_error(peer: SocketAddr, e: io::Error) -> ClientError {
    let why = match e.kind() {
        io::ErrorKind::ConnectionRefused => "connection refused (is `netblast serve` running there?)".to_string(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => {
            format!("no answer within {}s (host down or filtered?)", CONNECT_TIMEOUT.as_secs())
        }
        _ => kinds::flow::describe_io(&e),
    };
    ClientError::Connect { peer, why }
}

enum Incoming {
    Worker(usize, Event),
    Server(ServerMsg),
    ControlClosed(String),
}

/// One attempt at a connection's handshake: failed for good, or closed or refused by a server
/// at its limit of unproven connections (tried again).
enum Attempt {
    Busy(String),
    Failed(ClientError),
}

impl From<ClientError> for Attempt {
    fn from(e: ClientError) -> Self {
        Attempt::Failed(e)
    }
}

/// An I/O failure of a handshake: the server closing it is a busy server's answer.
fn busy_or(e: io::Error, other: impl FnOnce(io::Error) -> ClientError) -> Attempt {
    if netblast_wire::wire::closed_early(&e) {
        Attempt::Busy(kinds::flow::describe_io(&e))
    } else {
        Attempt::Failed(other(e))
    }
}

/// Runs `attempt`, again after each pause of [`BUSY_BACKOFF`] while a busy server closes or
/// refuses it; says how many times it was refused when it gives up.
fn retry_busy<T>(peer: SocketAddr, mut attempt: impl FnMut() -> Result<T, Attempt>) -> Result<T, ClientError> {
    let mut pauses = BUSY_BACKOFF.iter();
    let mut tries = 0;
    loop {
        tries += 1;
        match attempt() {
            Ok(t) => return Ok(t),
            Err(Attempt::Failed(e)) => return Err(e),
            Err(Attempt::Busy(last)) => match pauses.next() {
                Some(pause) => std::thread::sleep(*pause),
                None => return Err(ClientError::Busy { peer, why: busy_words(tries, &last) }),
            },
        }
    }
}

/// Opens one stream: TCP connect with options, header and tag (and UDP port), ack (and the
/// server's UDP port); for UDP flows the datagram socket ends up connected to the server's.
fn open_stream(
    peer: SocketAddr,
    plan: &Plan,
    test_id: TestId,
    key: &StreamKey,
    (id, n): (u32, usize),
) -> Result<(TcpStream, Option<UdpSocket>, Option<ListenerEnd>), Attempt> {
    let io_err =
        |what: &'static str| move |error: io::Error| ClientError::Io { what: format!("{what} ({peer})"), error };
    let profile = &plan.profile;
    let dial = sockopt::Dial {
        tcp: &profile.tcp,
        nodelay_default: profile.workload.nodelay_default(),
        timeout: CONNECT_TIMEOUT,
        bind: &plan.bind,
        n,
    };
    let stream = sockopt::connect(peer, dial).map_err(|e| connect_error(peer, e))?;
    stream.set_read_timeout(Some(REPLY_TIMEOUT)).ok();
    let mut hello = netblast_wire::wire::stream_preamble(&Header::new(Role::Stream, test_id, id), key);
    let udp_sock = if profile.workload.uses_udp() {
        let local = stream.local_addr().map_err(io_err("cannot read the stream's address"))?;
        // With --cport, the flow's datagrams leave from its connection's port.
        let port = plan.bind.ports.map(|_| (local.port(), local.port()));
        let sock =
            sockopt::udp_on_in(local, plan.bind.device.as_deref(), port).map_err(io_err("cannot open a UDP socket"))?;
        sockopt::ready_udp(&sock, &profile.tcp).map_err(io_err("cannot size the UDP socket's buffers"))?;
        let port = sock.local_addr().map_err(io_err("cannot read the UDP port"))?.port();
        hello.extend_from_slice(&port.to_be_bytes());
        Some(sock)
    } else {
        None
    };
    (&stream).write_all(&hello).map_err(|e| busy_or(e, io_err("cannot open a stream")))?;
    let mut ack = [0u8; 1];
    (&stream).read_exact(&mut ack).map_err(|e| busy_or(e, io_err("no answer to a stream handshake")))?;
    match StreamAck::from_byte(ack[0]) {
        Some(StreamAck::Ok) => {}
        Some(other) => {
            return Err(ClientError::Refused { peer, message: format!("stream {id}: {}", other.describe()) }.into());
        }
        None => return Err(ClientError::NotNetblast { peer, why: format!("stream ack byte {}", ack[0]) }.into()),
    }
    if let Some(sock) = &udp_sock {
        let mut port = [0u8; 2];
        (&stream).read_exact(&mut port).map_err(io_err("no UDP port from the server"))?;
        sock.connect(sockopt::with_port(peer, u16::from_be_bytes(port)))
            .map_err(io_err("cannot connect the UDP socket"))?;
    }
    // A flow whose operations are connections (cps): the port of the listener the server
    // opened for them.
    let listener = if profile.workload.section().own_listener() {
        let mut port = [0u8; 2];
        (&stream).read_exact(&mut port).map_err(io_err("no listener port from the server"))?;
        Some(ListenerEnd::Dial(sockopt::with_port(peer, u16::from_be_bytes(port))))
    } else {
        None
    };
    stream.set_read_timeout(None).ok();
    Ok((stream, udp_sock, listener))
}

/// The control connection after the handshake and the set-up: the server's answer.
struct Control {
    stream: TcpStream,
    key: StreamKey,
    server: netblast_spec::result::HostInfo,
    server_probe: netblast_spec::result::ProbeInfo,
}

/// Connects, shakes hands and sets the test up; again while a busy server closes or refuses
/// the handshake.
fn set_up(
    peer: SocketAddr,
    test_id: TestId,
    setup: TestSetup,
    opts: &RunOptions,
    bind: &sockopt::Binding,
) -> Result<Control, ClientError> {
    retry_busy(peer, || set_up_once(peer, test_id, &setup, opts, bind))
}

/// One attempt of [`set_up`].
fn set_up_once(
    peer: SocketAddr,
    test_id: TestId,
    setup: &TestSetup,
    opts: &RunOptions,
    bind: &sockopt::Binding,
) -> Result<Control, Attempt> {
    let mut control = sockopt::connect_plain(peer, CONNECT_TIMEOUT, bind, setup.profile.tcp.dscp)
        .map_err(|e| connect_error(peer, e))?;
    control.set_nodelay(true).ok();
    control.set_read_timeout(Some(REPLY_TIMEOUT)).ok();
    let no_answer = |e: io::Error| match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => ClientError::NotNetblast {
            peer,
            why: format!("no answer to the handshake within {}s", REPLY_TIMEOUT.as_secs()),
        }
        .into(),
        io::ErrorKind::InvalidData => ClientError::NotNetblast { peer, why: e.to_string() }.into(),
        _ => busy_or(e, |error| ClientError::Io { what: format!("handshake with {peer}"), error }),
    };
    let hs = ClientHandshake::new(Header::new(Role::Control, test_id, 0), opts.token.clone(), false);
    let session = blocking::handshake(&mut control, &hs).map_err(|e| match e {
        e if e.is_busy() => Attempt::Busy(e.to_string()),
        HandshakeFailure::Io(e) => no_answer(e),
        HandshakeFailure::Handshake(e) => ClientError::of_handshake(peer, e).into(),
    })?;
    blocking::write_frame(&mut control, &ClientMsg::Setup(Box::new(setup.clone()))).map_err(|e| {
        busy_or(e, |error| ClientError::Io { what: format!("cannot send the test setup ({peer})"), error })
    })?;
    let reply: Option<ServerMsg> = blocking::read_frame(&mut control).map_err(no_answer)?;
    match reply {
        Some(ServerMsg::Accepted { server, probe }) => {
            Ok(Control { stream: control, key: session.stream_key, server, server_probe: probe })
        }
        Some(ServerMsg::Refused { message, reason: Some(Refusal::Busy) }) => Err(Attempt::Busy(escape(&message))),
        Some(ServerMsg::Refused { message, reason: Some(Refusal::Auth) }) => {
            Err(ClientError::Auth { peer, why: escape(&message) }.into())
        }
        Some(ServerMsg::Refused { message, .. }) => {
            Err(ClientError::Refused { peer, message: escape(&message) }.into())
        }
        Some(other) => Err(ClientError::NotNetblast { peer, why: format!("unexpected first frame {other:?}") }.into()),
        None => Err(Attempt::Busy("it closed the connection without answering".into())),
    }
}

/// Runs one test against a `netblast serve` at `peer`: set up on the control connection,
/// streams opened, workers spawned (`DataPort::set_up`), then the [`sequence`].
///
/// Errors before the start are returned; after the start everything goes into the result.
pub fn run(
    plan: &Plan,
    peer: SocketAddr,
    probe: &Probe,
    flags: &Arc<RunFlags>,
    opts: &RunOptions,
    live: &mut dyn FnMut(Live<'_>),
) -> Result<RunResult, ClientError> {
    let (g, rx) = DataPort::set_up(plan, peer, probe, flags, opts)?;
    sequence(plan, g, rx, flags, live)
}

/// Opens every stream of the plan; returns what the result says of each, and the connections.
fn open_streams(
    plan: &Plan,
    peer: SocketAddr,
    test_id: TestId,
    key: &StreamKey,
    setups: &[netblast_spec::plan::StreamSetup],
) -> Result<(Vec<StreamInfo>, Vec<Conn>), ClientError> {
    let mut infos = Vec::with_capacity(setups.len());
    let mut conns = Vec::with_capacity(setups.len());
    for (i, s) in setups.iter().enumerate() {
        let (tcp, udp_sock, listener) = retry_busy(peer, || open_stream(peer, plan, test_id, key, (s.id, i)))?;
        let client_cpu = plan::client_cpu_of(plan, i, setups.len());
        infos.push(StreamInfo {
            id: s.id,
            way: s.way,
            local: tcp.local_addr().map(|a| a.to_string()).unwrap_or_default(),
            remote: peer.to_string(),
            client_cpu,
            server_cpu: s.server_cpu,
            part: None,
            socket: Some(sockopt::read_back(socket2::SockRef::from(&tcp))),
        });
        conns.push(Conn { id: s.id, way: s.way, tcp, udp: udp_sock, listener, cpu: Some(client_cpu) });
    }
    Ok((infos, conns))
}

/// This end's workers for the streams, waiting at a start gate; their events go to `tx`.
fn spawn_workers(
    (plan, test_id): (&Plan, [u8; 16]),
    conns: Vec<Conn>,
    probe: &Probe,
    flags: &Arc<RunFlags>,
    tx: &mpsc::Sender<Incoming>,
) -> Result<(Arc<StartGate>, Vec<std::thread::JoinHandle<()>>), ClientError> {
    let wtx = tx.clone();
    let sink: EventTx = Arc::new(move |w, ev| {
        let _ = wtx.send(Incoming::Worker(w, ev));
    });
    let gate = StartGate::new();
    let ctx = Ctx {
        probe: probe.clone(),
        gate: gate.clone(),
        flags: flags.clone(),
        tx: sink,
        bind: plan.bind.clone(),
        test_id,
    };
    let timing = Timing { send_for: plan.time_bound.get(), give_up_after: plan.time_bound.get() + DRAIN_GRACE };
    let bulk_workers = plan.client_cpus.len().max(1).min(conns.len()).max(1);
    let bulk_cpus: Vec<Option<usize>> = plan.client_cpus.iter().take(bulk_workers).map(|&c| Some(c)).collect();
    let handles = kinds::spawn(Side::Client, &plan.profile, timing, conns, &bulk_cpus, &ctx)
        .map_err(|e| ClientError::Io { what: "cannot start worker threads".into(), error: e })?;
    Ok((gate, handles))
}

/// A data-port test (every stream kind against `netblast serve`) from its set-up to its
/// result: the control connection, the streams' workers, and the aggregator that matches the
/// workers' intervals to the server's reports.
struct DataPort<'a> {
    plan: &'a Plan,
    peer: SocketAddr,
    probe: &'a Probe,
    probe_stats_at_start: Option<(u64, u64)>,
    clock: netblast_spec::result::ClockInfo,
    flags: &'a Arc<RunFlags>,
    test_id: TestId,
    control: Control,
    /// Where the control reader sends the server's frames (given to it before the start).
    tx: Option<mpsc::Sender<Incoming>>,
    handles: Vec<std::thread::JoinHandle<()>>,
    gate: Arc<StartGate>,
    infos: Vec<StreamInfo>,
    /// The thread reading the server's frames.
    reader: Option<std::thread::JoinHandle<()>>,
    agg: Aggregator,
    /// The start instant (monotonic), and the bound after it.
    start: Instant,
    bound_at: Instant,
    stop_sent: bool,
    control_closed: bool,
    /// When every worker was done.
    workers_done_at: Option<Instant>,
}

impl<'a> DataPort<'a> {
    /// Sets the test up: the probe (attached by `run`) watching the server's port (the kernel
    /// callbacks must be on before the streams connect), the test accepted on the control
    /// connection, every stream opened, the workers spawned at a shut gate.
    fn set_up(
        plan: &'a Plan,
        peer: SocketAddr,
        probe: &'a Probe,
        flags: &'a Arc<RunFlags>,
        opts: &RunOptions,
    ) -> Result<(DataPort<'a>, mpsc::Receiver<Incoming>), ClientError> {
        let setups = stream_setups(plan);
        let per_stream = if plan.profile.workload.uses_udp() { 2 } else { 1 };
        sys::ensure_fds(setups.len() as u64 * per_stream + 64).map_err(ClientError::Fds)?;
        let test_id = TestId::random();
        let probe_stats_at_start = probe.run_stats();
        probe.watch_peer_port(peer.port()).map_err(|e| ClientError::of_probe("cannot set up the eBPF probe", e))?;
        let setup = TestSetup {
            client_version: env!("CARGO_PKG_VERSION").to_string(),
            profile: plan.profile.clone(),
            time_bound: plan.time_bound,
            streams: setups.clone(),
            kernel: sys::boot_id(),
        };
        let control = set_up(peer, test_id, setup, opts, &plan.bind)?;
        let (infos, conns) = open_streams(plan, peer, test_id, &control.key, &setups)?;
        let (tx, rx) = mpsc::channel::<Incoming>();
        let (gate, handles) = spawn_workers((plan, test_id.0), conns, probe, flags, &tx)?;
        let mut agg = Aggregator::new(infos.clone(), handles.len(), KindInfo::of(&plan.profile.workload));
        for n in &plan.notes {
            agg.warn(0.0, "plan", n.clone());
        }
        let now = Instant::now();
        let g = DataPort {
            plan,
            peer,
            probe,
            probe_stats_at_start,
            clock: opts.clock,
            flags,
            test_id,
            control,
            tx: Some(tx),
            handles,
            gate,
            infos,
            reader: None,
            agg,
            start: now,
            bound_at: now + plan.time_bound.get(),
            stop_sent: false,
            control_closed: false,
            workers_done_at: None,
        };
        Ok((g, rx))
    }
}

impl Generator for DataPort<'_> {
    const LEAD: Duration = START_LEAD;

    fn gate(&self) -> Arc<StartGate> {
        self.gate.clone()
    }

    fn test_id(&self) -> String {
        self.test_id.to_string()
    }

    /// The server's frames are read from the start on; the server starts when `Start` reaches
    /// it (its intervals count from then, and are matched to ours by index).
    fn before_start(&mut self) -> Result<(), ClientError> {
        let (control, peer) = (&self.control, self.peer);
        control.stream.set_read_timeout(None).ok();
        let r = control.stream.try_clone().map_err(|error| ClientError::Io {
            what: format!("cannot clone the control connection ({peer})"),
            error,
        })?;
        let tx = self.tx.take().ok_or_else(|| ClientError::Setting("the control reader started twice".into()))?;
        self.reader = Some(spawn_reader(r, tx)?);
        Ok(())
    }

    fn shown(&self) -> (&HostInfo, &[StreamInfo]) {
        (&self.control.server, &self.infos)
    }

    fn at_start(&mut self, at: Instant) -> Result<(), ClientError> {
        self.start = at;
        self.bound_at = at + self.plan.time_bound.get();
        blocking::write_frame(&mut self.control.stream, &ClientMsg::Start)
            .map_err(|e| ClientError::Io { what: format!("cannot start the test ({})", self.peer), error: e })
    }

    /// Stops the workers before they measured anything, and closes the control connection.
    fn abandon(&mut self) {
        self.gate.cancel();
        self.flags.abort();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
        let _ = self.control.stream.shutdown(Shutdown::Both);
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }

    /// Stops and joins the workers, takes the events they sent while stopping, closes the
    /// control connection.
    fn stop(&mut self, rx: &mpsc::Receiver<Incoming>, live: &mut dyn FnMut(Live<'_>)) {
        let agg = &mut self.agg;
        if !agg.has_server_final() && !self.control_closed {
            let why = format!("no final report within {}s after the end", DRAIN_GRACE.as_secs());
            agg.error(since(self.start), "server", why);
        }
        self.flags.abort();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
        while let Ok(msg) = rx.try_recv() {
            if let Incoming::Worker(w, ev) = msg {
                for iv in self.agg.on_worker(w, ev) {
                    live(Live::Interval(&iv));
                }
            }
        }
        let _ = self.control.stream.shutdown(Shutdown::Both);
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }

    /// The result: the aggregator's last intervals (to `live`) and summary, complete when
    /// nothing failed, every stream ended clean and the server reported.
    fn result(mut self, started: &Started, end: Ending, live: &mut dyn FnMut(Live<'_>)) -> RunResult {
        let agg = &mut self.agg;
        agg.load.client = end.load;
        if let Some(at) = end.interrupted_at {
            agg.error(at, "client", "interrupted by the user");
        }
        let (last, summary) = agg.finish(end.cpu);
        for iv in &last {
            live(Live::Interval(iv));
        }
        let complete = agg.errors.is_empty() && agg.all_streams_clean() && agg.has_server_final();
        // Where the server's end really ran, as it said (it moves off a CPU the client's end
        // holds when both share one kernel), not where the plan asked.
        let mut streams = std::mem::take(&mut self.infos);
        for info in &mut streams {
            if let Some(cpu) = summary.streams.iter().find(|s| s.id == info.id).and_then(|s| s.server_cpu) {
                info.server_cpu = Some(cpu);
            }
        }
        let local_address = self.control.stream.local_addr().map(|a| a.ip().to_string()).unwrap_or_default();
        let envelope = started.envelope(
            self.test_id.to_string(),
            self.clock,
            local_address,
            Some(self.control.server.clone()),
            self.probe.info_since(self.probe_stats_at_start),
            Some(self.control.server_probe.clone()),
        );
        let measured = Measured {
            complete,
            errors: agg.errors.clone(),
            warnings: agg.warnings.clone(),
            streams,
            intervals: agg.intervals().to_vec(),
            summary,
        };
        let mut r = envelope.result(self.plan, measured);
        r.server_output = std::mem::take(&mut agg.server_output);
        r
    }
}

/// The most lines of the server's own output a result keeps.
const MAX_SERVER_LINES: usize = 16;

/// Seconds from `start` to now.
fn since(start: Instant) -> f64 {
    Instant::now().saturating_duration_since(start).as_secs_f64()
}

/// The workers' events and the server's frames into the aggregator; `stop` on the control
/// connection at the bound.
impl Collector for DataPort<'_> {
    type Msg = Incoming;

    /// Sends `stop` at the bound (or when the run stops: the server stops its senders, ours
    /// stop by themselves); done once every worker is and the server reported, or closed, or
    /// [`DRAIN_GRACE`] passed.
    fn tick(&mut self) -> Option<Duration> {
        let now = Instant::now();
        if !self.stop_sent && (now >= self.bound_at || self.flags.stopping()) {
            if !self.control_closed {
                if let Err(e) = blocking::write_frame(&mut self.control.stream, &ClientMsg::Stop) {
                    let why = format!("cannot send stop: {}", kinds::flow::describe_io(&e));
                    self.agg.error(since(self.start), "control", why);
                }
            }
            self.stop_sent = true;
        }
        if self.agg.workers_done() {
            let t = *self.workers_done_at.get_or_insert(now);
            if self.agg.has_server_final() || self.control_closed || now >= t + DRAIN_GRACE {
                return None;
            }
        }
        Some(if self.stop_sent {
            Duration::from_millis(100)
        } else {
            self.bound_at.saturating_duration_since(now).min(Duration::from_millis(100))
        })
    }

    /// One worker event or server frame into the aggregator; the intervals it released.
    fn take(&mut self, msg: Incoming) -> Vec<Interval> {
        let agg = &mut self.agg;
        match msg {
            Incoming::Worker(w, ev) => agg.on_worker(w, ev),
            Incoming::Server(ServerMsg::Interval { index, start_s, end_s, streams, ways }) => {
                agg.on_server_interval(index, start_s, end_s, streams, ways)
            }
            Incoming::Server(ServerMsg::Final { streams, cpu, tcp_samples, load, output }) => {
                agg.load.server = load;
                // The peer's text: a few lines, each bounded and escaped.
                agg.server_output = output
                    .iter()
                    .take(MAX_SERVER_LINES)
                    .map(|l| escape(&l.chars().take(2000).collect::<String>()))
                    .collect();
                for s in &streams {
                    if let Some(n) = &s.note {
                        agg.warn(0.0, format!("server stream {}", s.id), escape(n));
                    }
                }
                let read = tcp_samples.map(|[read, wanted]| crate::exec::worker::Sampled { read, wanted });
                if let Some(n) = read.and_then(|r| r.note("server")) {
                    agg.warn(0.0, "server", n);
                }
                agg.on_server_final(streams, cpu)
            }
            Incoming::Server(ServerMsg::Refused { message, .. }) => {
                agg.error(since(self.start), "server", escape(&message));
                Vec::new()
            }
            Incoming::Server(other) => {
                agg.error(since(self.start), "control", format!("unexpected frame from the server: {other:?}"));
                Vec::new()
            }
            Incoming::ControlClosed(why) => {
                self.control_closed = true;
                if !agg.has_server_final() {
                    // The server is gone: nothing more can be measured at its end. Our senders
                    // stop now (a UDP sender would otherwise send into a closed port until the
                    // bound: its ICMP errors are rate-limited and a batch send loses all but
                    // the first).
                    self.flags.stop();
                    agg.error(since(self.start), "server", format!("{why} before its final report ({})", self.peer));
                }
                agg.server_gone()
            }
        }
    }

    fn idle(&mut self, gone: bool) -> Option<Vec<Interval>> {
        (!gone).then(Vec::new)
    }
}

/// The thread that reads the server's frames off the control connection into `tx`.
fn spawn_reader(mut r: TcpStream, tx: mpsc::Sender<Incoming>) -> Result<std::thread::JoinHandle<()>, ClientError> {
    std::thread::Builder::new()
        .name("netblast-ctl".into())
        .spawn(move || {
            loop {
                let msg = match blocking::read_frame::<_, ServerMsg>(&mut r) {
                    Ok(Some(msg)) => Incoming::Server(msg),
                    Ok(None) => Incoming::ControlClosed("the server closed the control connection".into()),
                    Err(e) => {
                        Incoming::ControlClosed(format!("control connection failed: {}", kinds::flow::describe_io(&e)))
                    }
                };
                let last = matches!(msg, Incoming::ControlClosed(_));
                if tx.send(msg).is_err() || last {
                    return;
                }
            }
        })
        .map_err(|e| ClientError::Io { what: "cannot start the control reader".into(), error: e })
}
