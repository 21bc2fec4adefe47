//! The data port: one listener hosts every test of every client at once.
//!
//! Each connection opens with the 32-byte header of [`netblast_wire::wire`]. Control
//! connections shake hands (version, token) and set up a test; stream connections are matched
//! to their test by id and tag and handed to pinned worker threads when the test starts.
//! Anything else is dropped after one log line, counted.

use crate::config::{HANDSHAKE_TIMEOUT, RECV_GRACE, SEND_GRACE, setup_timeout};
use crate::registry::{Extra, TestEntry, UdpReady};
use crate::shared::Shared;
use netblast_engine::exec::worker::{Event, EventTx, RunFlags, StartGate};
use netblast_engine::kinds::{self, Conn, Ctx, Side, Timing};
use netblast_engine::os::sockopt;
use netblast_engine::os::sys;
use netblast_spec::profile::Way;
use netblast_spec::result::{CpuUsage, MAX_STREAM_DETAIL};
use netblast_wire::gather::Gather;
use netblast_wire::wire::{
    self, ClientMsg, Header, Refusal, STREAM_TAG_LEN, ServerMsg, ServerSample, ServerStreamFinal, Session, StreamAck,
    TestId, TestSetup,
};
use socket2::SockRef;
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

mod report;
use report::{ServerInterval, TestTotals, WaySums};

/// Resources a test holds while it runs, given back on drop.
struct Holding<'a> {
    held: &'a crate::config::Held,
    fds: u64,
    spinning: u64,
    /// The eBPF program stays attached while a test holds it (`None`: it could not be).
    _probe: Option<netblast_probe::Attached>,
}

impl Holding<'_> {
    /// One stream connected: its descriptors are open and counted as such now, no longer
    /// promised.
    fn stream_open(&mut self, fds: u64) {
        let fds = fds.min(self.fds);
        self.held.fds.fetch_sub(fds, Ordering::Relaxed);
        self.fds -= fds;
    }

    /// Every stream is connected: nothing stays promised.
    fn streams_open(&mut self) {
        self.held.fds.fetch_sub(self.fds, Ordering::Relaxed);
        self.fds = 0;
    }
}

impl Drop for Holding<'_> {
    fn drop(&mut self) {
        self.held.fds.fetch_sub(self.fds, Ordering::Relaxed);
        self.held.spinning.fetch_sub(self.spinning, Ordering::Relaxed);
    }
}

/// What each stream of a test sets up besides its TCP connection (a descriptor each).
fn extra_of(setup: &TestSetup) -> Extra {
    let w = &setup.profile.workload;
    if setup.profile.workload.per_cpu_receivers() {
        Extra::UdpGroup
    } else if w.uses_udp() {
        Extra::Udp
    } else if w.section().own_listener() {
        Extra::Listener
    } else {
        Extra::None
    }
}

/// Takes what a set-up asks of this server's resources, or says which limit refuses it.
fn hold<'a>(shared: &'a Shared, setup: &TestSetup) -> Result<Holding<'a>, String> {
    let l = &shared.limits;
    let per_stream = if extra_of(setup) == Extra::None { 1 } else { 2 };
    // A hold test's server end keeps each of its connections open too.
    let fds = setup.streams.len() as u64 * per_stream + setup.profile.workload.section().server_held_conns();
    let (soft, _) = netblast_engine::os::sys::nofile_limit();
    let open = std::fs::read_dir("/proc/self/fd").map(|d| d.count() as u64).unwrap_or(0);
    let promised = shared.held.fds.load(Ordering::Relaxed);
    let free = soft.saturating_sub(l.fd_headroom + open + promised);
    if fds > free {
        return Err(format!(
            "the test needs {fds} descriptors and this server has {free} free (limit {soft}, {open} open, \
             {promised} promised to tests being set up, {} kept for connections)",
            l.fd_headroom
        ));
    }
    let spinning = if setup.profile.workload.spins() { setup.streams.len() as u64 } else { 0 };
    let busy = shared.held.spinning.load(Ordering::Relaxed);
    if spinning > 0 && busy + spinning > l.spinning as u64 {
        return Err(format!(
            "wait = spin asks for {spinning} busy-polling flow(s); {busy} run already and this server takes {} \
             at most (one CPU each): use --wait block, or fewer flows",
            l.spinning
        ));
    }
    // Before the streams connect: the kernel callbacks are turned on as they are accepted.
    // Only where the streams carry the test's TCP data: a cps test's connections go to its
    // flows' own listeners, a UDP test's data is not TCP; the program would only cost them.
    let w = &setup.profile.workload;
    let tcp_streams = !w.section().own_listener() && !w.uses_udp();
    let probe = match tcp_streams {
        true => shared
            .probe
            .hold()
            .map_err(|e| tracing::warn!("eBPF probe: {e}; this test's server-side TCP statistics will be missing"))
            .ok(),
        false => None,
    };
    shared.held.fds.fetch_add(fds, Ordering::Relaxed);
    shared.held.spinning.fetch_add(spinning, Ordering::Relaxed);
    Ok(Holding { held: &shared.held, fds, spinning, _probe: probe })
}

/// A stream whose header and tag were read: handed to its test if the tag is its test's.
pub(crate) async fn stream_conn(
    mut conn: TcpStream,
    peer: SocketAddr,
    header: Header,
    tag: [u8; STREAM_TAG_LEN],
    shared: &Shared,
) {
    let offer = shared.reg.offer_stream(&header.test_id, header.stream_id, &tag);
    if offer.ack == StreamAck::BadTag {
        shared.stats.refuse(peer, Refusal::Auth, "stream tag does not match its test");
    }
    let Some(tx) = offer.tx.filter(|_| offer.ack == StreamAck::Ok) else {
        tracing::info!(%peer, test = %header.test_id, stream = header.stream_id, "refused stream: {}", offer.ack.describe());
        let _ = conn.write_all(&[offer.ack as u8]).await;
        return;
    };
    // Marked as soon as its test is known: the acknowledgement and all after it carry the mark.
    if let Err(e) = netblast_engine::os::sockopt::mark(socket2::SockRef::from(&conn), offer.udp.tcp.dscp) {
        tracing::warn!(%peer, "cannot mark the stream: {e}");
    }
    // A UDP flow: the client's port follows the header. Our socket is connected to exactly that
    // address and port (the address being the TCP peer's), so it exchanges datagrams with that
    // one peer and nobody else.
    let mut reply = vec![StreamAck::Ok as u8];
    // Per-CPU receivers: the socket joins the test's group on one port instead, unconnected;
    // its receiver takes only the client's datagrams.
    let udp = if matches!(offer.extra, Extra::Udp | Extra::UdpGroup) {
        let mut port = [0u8; 2];
        if tokio::time::timeout(HANDSHAKE_TIMEOUT, conn.read_exact(&mut port)).await.map_or(true, |r| r.is_err()) {
            tracing::info!(%peer, "dropped UDP stream: no client port");
            return;
        }
        let client_udp = netblast_engine::os::sockopt::with_port(peer, u16::from_be_bytes(port));
        let opened = conn.local_addr().and_then(|local| {
            let sock = if offer.extra == Extra::UdpGroup {
                shared.reg.udp_group_socket(&header.test_id, local, shared.bind_dev.as_deref(), shared.flow_ports)?
            } else {
                let sock =
                    netblast_engine::os::sockopt::udp_on_in(local, shared.bind_dev.as_deref(), shared.flow_ports)?;
                sock.connect(client_udp)?;
                sock
            };
            // Ready before the ack: the client sends as soon as it has started.
            offer.udp.apply(&sock, header.stream_id)?;
            Ok(sock)
        });
        match opened.and_then(|s| s.local_addr().map(|a| (s, a.port()))) {
            Ok((sock, port)) => {
                reply.extend_from_slice(&port.to_be_bytes());
                Some(sock)
            }
            Err(e) => {
                tracing::warn!(%peer, "cannot open a UDP socket for the test: {e}");
                if e.kind() == std::io::ErrorKind::AddrInUse {
                    let _ = conn.write_all(&[StreamAck::NoPort as u8]).await;
                }
                return;
            }
        }
    } else {
        None
    };
    // A flow whose operations are connections (cps): a listener of its own, on the address
    // the client reached, for them; its port goes back in the acknowledgement.
    let listener = if offer.extra == Extra::Listener {
        let opened = conn.local_addr().and_then(|local| {
            let l = netblast_engine::kinds::listen_on(local, shared.flow_ports)?;
            // Marked before a SYN arrives: its SYN-ACKs and accepted connections carry the mark.
            netblast_engine::os::sockopt::mark(socket2::SockRef::from(&l), offer.udp.tcp.dscp)?;
            let port = l.local_addr()?.port();
            Ok((l, port))
        });
        match opened {
            Ok((l, port)) => {
                reply.extend_from_slice(&port.to_be_bytes());
                Some(l)
            }
            Err(e) => {
                tracing::warn!(%peer, "cannot open a listener for the flow: {e}");
                if e.kind() == std::io::ErrorKind::AddrInUse {
                    let _ = conn.write_all(&[StreamAck::NoPort as u8]).await;
                }
                return;
            }
        }
    } else {
        None
    };
    // Hand the socket to the test before acknowledging it: the client starts the test only
    // after every ack, so the test's control task has every socket by then.
    let taken = conn.into_std().and_then(|s| s.try_clone().map(|w| (s, w)));
    match taken {
        Ok((stream, mut ack_writer)) => {
            if tx.send((header.stream_id, stream, udp, listener)).is_ok() {
                let _ = netblast_engine::os::net::set_blocking(std::os::fd::AsRawFd::as_raw_fd(&ack_writer), true);
                let _ = std::io::Write::write_all(&mut ack_writer, &reply);
            }
        }
        Err(e) => tracing::warn!(%peer, "cannot take over stream socket: {e}"),
    }
}

/// The server's own line about a test from its totals and its problem, if any.
type ServerLine<'a> = dyn Fn(&TestTotals, Option<&str>) -> String + Sync + 'a;

/// A stream's sockets: its TCP connection, a UDP flow's datagram socket, a cps flow's listener.
type Sockets = (std::net::TcpStream, Option<std::net::UdpSocket>, Option<std::net::TcpListener>);

/// Reads one control frame.
async fn read_frame(conn: &mut tokio::net::tcp::OwnedReadHalf) -> Result<Option<ClientMsg>, String> {
    wire::nonblocking::read_frame(conn).await.map_err(|e| e.to_string())
}

fn check_setup(setup: &TestSetup) -> Result<(), String> {
    if setup.profile.workload.aims_at_urls() {
        return Err("http tests go to the HTTP port (serve --http), not the data port".into());
    }
    setup.profile.validate("client's profile").map_err(|e| e.to_string())?;
    if setup.streams.is_empty() {
        return Err("the setup names no stream".into());
    }
    let max = netblast_spec::profile::MAX_FLOWS as usize * 2;
    if setup.streams.len() > max {
        return Err(format!("{} streams is more than the {max} one test may open", setup.streams.len()));
    }
    // The profile says how many streams its test has (msgrate without a flow count: one per
    // client CPU, which only the client knows); a setup naming more would hold more than it runs.
    let w = &setup.profile.workload;
    let per_cpu = w.flows_per_cpu();
    let runs = w.stream_count(1);
    if !per_cpu && setup.streams.len() != runs {
        return Err(format!("the setup names {} streams and its profile has {runs}", setup.streams.len()));
    }
    let mut seen = HashSet::new();
    if !setup.streams.iter().all(|s| seen.insert(s.id)) {
        return Err("stream ids repeat".into());
    }
    if setup.time_bound.get() > netblast_spec::profile::MAX_DURATION {
        return Err("time bound over 24h".into());
    }
    let ways: &[Way] = setup.profile.workload.ways();
    if let Some(s) = setup.streams.iter().find(|s| !ways.contains(&s.way)) {
        return Err(format!("stream {} goes {:?}, which the profile does not allow", s.id, s.way));
    }
    Ok(())
}

enum Ctl {
    Frame(Result<Option<ClientMsg>, String>),
}

pub(crate) async fn control_conn(
    conn: TcpStream,
    peer: SocketAddr,
    test_id: TestId,
    session: Session,
    shared: &Shared,
    mut stop: watch::Receiver<bool>,
) -> Result<(), String> {
    conn.set_nodelay(true).ok();
    let (mut rd, mut wr) = conn.into_split();
    let send = |msg: ServerMsg| wire::encode_frame(&msg);
    let refused = |reason: Refusal, message: String| wire::refusal(reason, message);

    // Setup.
    let first = match tokio::time::timeout(HANDSHAKE_TIMEOUT, read_frame(&mut rd)).await {
        Ok(Ok(f)) => f,
        Ok(Err(e)) => {
            let _ = wr.write_all(&refused(Refusal::Invalid, format!("bad control frame: {e}"))).await;
            return Err(format!("bad control frame: {e}"));
        }
        Err(_) => return Err("no setup frame in time".to_string()),
    };
    let setup = match first {
        Some(ClientMsg::Setup(s)) => *s,
        Some(other) => {
            let m = format!("expected a setup frame, got {other:?}");
            let _ = wr.write_all(&refused(Refusal::Invalid, m.clone())).await;
            return Err(m);
        }
        None => return Err("closed before sending a setup".into()),
    };
    if let Err(m) = check_setup(&setup) {
        let _ = wr.write_all(&refused(Refusal::Invalid, m.clone())).await;
        return Err(format!("refused setup: {m}"));
    }
    // The test's mark on its control connection too: what the server says from here is marked.
    if let Err(e) = netblast_engine::os::sockopt::mark(socket2::SockRef::from(wr.as_ref()), setup.profile.tcp.dscp) {
        tracing::warn!(%peer, "cannot mark the control connection: {e}");
    }
    let mut holding = match hold(shared, &setup) {
        Ok(h) => h,
        Err(m) => {
            let _ = wr.write_all(&refused(Refusal::Limit, m.clone())).await;
            return Err(format!("refused setup: {m}"));
        }
    };
    let (stream_tx, mut stream_rx) = mpsc::unbounded_channel();
    let ways: HashMap<u32, Way> = setup.streams.iter().map(|s| (s.id, s.way)).collect();
    let entry = TestEntry::new(ways.clone(), extra_of(&setup), session.stream_key, stream_tx).with_udp(UdpReady {
        tcp: setup.profile.tcp.clone(),
        // Tied to the CPU its worker will be pinned to (where it can be, as below).
        cpus: if setup.profile.workload.per_cpu_receivers() {
            let usable = sys::allowed_cpus().unwrap_or_default();
            let same = same_kernel(&setup);
            setup
                .streams
                .iter()
                .filter_map(|s| {
                    let asked = s.server_cpu.filter(|c| usable.contains(c))?;
                    Some((s.id, away_from_client(s, same, &usable).unwrap_or(asked)))
                })
                .collect()
        } else {
            HashMap::new()
        },
    });
    let registered = match shared.reg.insert(test_id, peer.ip(), entry) {
        Ok(r) => r,
        Err(m) => {
            let _ = wr.write_all(&refused(Refusal::Limit, m.clone())).await;
            return Err(m);
        }
    };
    let accepted = ServerMsg::Accepted { server: sys::host_info(), probe: shared.probe.info() };
    wr.write_all(&send(accepted)).await.map_err(|e| e.to_string())?;
    tracing::info!(
        %peer, test = %test_id, kind = setup.profile.kind().name(), streams = setup.streams.len(),
        bound = %setup.time_bound, authenticated = session.authenticated, "test set up"
    );

    // Collect streams until Start.
    let (ctl_tx, mut ctl_rx) = mpsc::unbounded_channel::<Ctl>();
    let reader = tokio::spawn(async move {
        loop {
            let f = read_frame(&mut rd).await;
            let end = !matches!(f, Ok(Some(_)));
            if ctl_tx.send(Ctl::Frame(f)).is_err() || end {
                return;
            }
        }
    });
    let mut sockets: HashMap<u32, Sockets> = HashMap::new();
    let wait = setup_timeout(setup.profile.run.interval());
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        tokio::select! {
            Some((id, s, u, l)) = stream_rx.recv() => {
                holding.stream_open(1 + u64::from(u.is_some()) + u64::from(l.is_some()));
                sockets.insert(id, (s, u, l));
            }
            msg = ctl_rx.recv() => match msg {
                Some(Ctl::Frame(Ok(Some(ClientMsg::Start)))) => break,
                Some(Ctl::Frame(Ok(Some(other)))) => {
                    reader.abort();
                    return Err(format!("expected start, got {other:?}"));
                }
                Some(Ctl::Frame(Ok(None))) | None => { reader.abort(); return Err("client left before starting".into()); }
                Some(Ctl::Frame(Err(e))) => { reader.abort(); return Err(format!("bad control frame: {e}")); }
            },
            _ = tokio::time::sleep_until(deadline) => {
                reader.abort();
                return Err(format!("test not started within {}s of setup", wait.as_secs()));
            }
        }
    }
    drop(registered);
    holding.streams_open();
    while let Ok((id, s, u, l)) = stream_rx.try_recv() {
        sockets.insert(id, (s, u, l));
    }
    if sockets.len() != ways.len() {
        let m = format!("start with {} of {} streams connected", sockets.len(), ways.len());
        let _ = wr.write_all(&refused(Refusal::Invalid, m.clone())).await;
        reader.abort();
        return Err(m);
    }

    // Run.
    let m = &shared.stats.metrics;
    m.tests_active.inc();
    let line = |t: &TestTotals, problem: Option<&str>| t.line(peer, &test_id, &setup, problem);
    let outcome = run_test((&setup, &test_id), sockets, &ways, shared, (&mut wr, &line), &mut ctl_rx, &mut stop).await;
    drop(holding);
    reader.abort();
    let (outcome, totals) = outcome;
    m.tests_active.dec();
    m.tests.get_or_create(&crate::metrics::label("result", if outcome.is_none() { "ok" } else { "failed" })).inc();
    if shared.stats.print_tests.load(std::sync::atomic::Ordering::Relaxed) {
        eprintln!("{}", totals.line(peer, &test_id, &setup, outcome.as_deref()));
    }
    tracing::info!(%peer, test = %test_id, "test finished: {}", outcome.as_deref().unwrap_or("ok"));
    outcome.map_or(Ok(()), Err)
}

/// A report the client does not take within the timeout ends its test: the reports would
/// otherwise pile up in this server's memory.
async fn send_report(wr: &mut tokio::net::tcp::OwnedWriteHalf, bytes: &[u8], timeout: Duration) -> Result<(), String> {
    match tokio::time::timeout(timeout, wr.write_all(bytes)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(format!("cannot write to the client: {e}")),
        Err(_) => Err(format!("the client did not read its reports for {}s", timeout.as_secs())),
    }
}

/// The test's connected streams, in id order, with the profile's socket options applied and
/// pinned where asked and possible (a note says where not).
fn connections(
    setup: &TestSetup,
    mut sockets: HashMap<u32, Sockets>,
    notes: &mut HashMap<u32, String>,
) -> Result<Vec<Conn>, String> {
    let profile = &setup.profile;
    let usable = sys::allowed_cpus().unwrap_or_default();
    let mut streams = setup.streams.clone();
    streams.sort_by_key(|s| s.id);
    let same_kernel = same_kernel(setup);
    let mut conns = Vec::with_capacity(streams.len());
    for st in &streams {
        let Some((tcp, udp, listener)) = sockets.remove(&st.id) else { continue };
        sockopt::apply(SockRef::from(&tcp), &profile.tcp, profile.workload.nodelay_default())
            .map_err(|e| format!("cannot apply socket options: {e}"))?;
        // -w on this end: what this host's kernel applied, said once (on the first stream).
        if conns.is_empty() {
            let said: Vec<String> = sockopt::applied(SockRef::from(&tcp), &profile.tcp)
                .unwrap_or_default()
                .iter()
                .map(|b| format!("server socket buffer: {}", b.describe()))
                .collect();
            if !said.is_empty() {
                notes.insert(st.id, said.join("; "));
            }
        }
        let mut note = |why: String| {
            notes.entry(st.id).and_modify(|n| *n = format!("{n}; {why}")).or_insert(why);
        };
        let cpu = st.server_cpu.filter(|c| {
            let ok = usable.contains(c);
            if !ok {
                note(format!(
                    "cannot pin to CPU {c}: this server can use CPUs {}",
                    netblast_spec::units::CpuList(usable.clone())
                ));
            }
            ok
        });
        let cpu = match cpu.zip(away_from_client(st, same_kernel, &usable)) {
            Some((c, away)) => {
                note(format!(
                    "the client shares this kernel (the same boot id) and runs its end of this stream on CPU {c}: \
                     this end is pinned to CPU {away} instead, half the CPU list away"
                ));
                Some(away)
            }
            None => cpu,
        };
        let listener = listener.map(netblast_engine::kinds::ListenerEnd::Listen);
        conns.push(Conn { id: st.id, way: st.way, tcp, udp, listener, cpu });
    }
    Ok(conns)
}

/// Whether the client runs on this kernel (its boot id is this one's).
fn same_kernel(setup: &TestSetup) -> bool {
    setup.kernel.is_some() && setup.kernel == sys::boot_id()
}

/// Where a stream's server end goes when the client shares this kernel (a peer in another
/// network namespace, a pod on the same node: no loopback address tells the client) and asked
/// for the very CPU its own end runs on: half this server's CPU list away, so the two ends of
/// a flow never share a core. `None`: keep what was asked.
fn away_from_client(st: &netblast_spec::plan::StreamSetup, same_kernel: bool, usable: &[usize]) -> Option<usize> {
    let (asked, theirs) = (st.server_cpu?, st.client_cpu?);
    if !same_kernel || asked != theirs || usable.len() < 2 {
        return None;
    }
    let at = usable.iter().position(|&c| c == asked)?;
    Some(usable[(at + usable.len() / 2) % usable.len()])
}

/// Runs a started test on this server: its workers, one interval frame per interval once
/// every worker reported it, the client's stop, the final report.
async fn run_test(
    (setup, test_id): (&TestSetup, &TestId),
    sockets: HashMap<u32, Sockets>,
    ways: &HashMap<u32, Way>,
    shared: &Shared,
    (wr, line): (&mut tokio::net::tcp::OwnedWriteHalf, &ServerLine<'_>),
    ctl_rx: &mut mpsc::UnboundedReceiver<Ctl>,
    stop: &mut watch::Receiver<bool>,
) -> (Option<String>, TestTotals) {
    let mut notes: HashMap<u32, String> = HashMap::new();
    let conns = match connections(setup, sockets, &mut notes) {
        Ok(c) => c,
        Err(m) => {
            let _ = wr.write_all(&wire::refusal(Refusal::Invalid, m.clone())).await;
            return (Some(m), TestTotals::default());
        }
    };
    let bulk_workers = (sys::cpus_online() as usize).min(conns.len()).max(1);
    let (ev_tx, mut ev_rx) = mpsc::unbounded_channel::<(usize, Event)>();
    let sink: EventTx = Arc::new(move |w, ev| {
        let _ = ev_tx.send((w, ev));
    });
    let flags = RunFlags::new();
    let gate = StartGate::new();
    let ctx = Ctx {
        probe: shared.probe.clone(),
        gate: gate.clone(),
        flags: flags.clone(),
        tx: sink,
        bind: netblast_engine::os::sockopt::Binding::device(shared.bind_dev.clone()),
        test_id: test_id.0,
    };
    let bound = setup.time_bound.get();
    let timing = Timing { send_for: bound + SEND_GRACE, give_up_after: bound + RECV_GRACE };
    let handles = match kinds::spawn(Side::Server, &setup.profile, timing, conns, &vec![None; bulk_workers], &ctx) {
        Ok(h) => h,
        Err(e) => {
            gate.cancel();
            let m = format!("cannot start worker threads: {e}");
            let _ = wr.write_all(&wire::refusal(Refusal::Limit, m.clone())).await;
            return (Some(m), TestTotals::default());
        }
    };
    drop(ctx);
    let mut t = ServerTest::new(ways, shared, flags, notes, handles.len(), wr);
    gate.open(t.start);
    while !t.gather.all_done() {
        tokio::select! {
            ev = ev_rx.recv() => match ev {
                Some((w, ev)) => t.event(w, ev),
                None => break,
            },
            _ = stop.changed(), if !t.flags.aborting() => t.shutdown().await,
            msg = ctl_rx.recv(), if !t.client_gone => t.control(msg),
        }
        t.report_intervals().await;
    }
    for h in handles {
        let _ = tokio::task::spawn_blocking(move || h.join()).await;
    }
    t.finish(line).await
}

/// A test running on this server, from its start to its final report.
struct ServerTest<'a, 'w> {
    ways: &'a HashMap<u32, Way>,
    shared: &'a Shared,
    wr: &'w mut tokio::net::tcp::OwnedWriteHalf,
    flags: Arc<RunFlags>,
    start: Instant,
    /// Why a stream's server end is not as asked (pinning), said in its final report.
    notes: HashMap<u32, String>,
    finals: Vec<ServerStreamFinal>,
    cpu: CpuUsage,
    gather: Gather<ServerInterval>,
    /// Tests of more than `MAX_STREAM_DETAIL` streams report way sums.
    coarse: WaySums,
    sampled: netblast_engine::exec::worker::Sampled,
    client_gone: bool,
    problem: Option<String>,
    /// The host's counters at the start.
    host: Option<netblast_engine::os::host::HostMark>,
}

impl<'a, 'w> ServerTest<'a, 'w> {
    fn new(
        ways: &'a HashMap<u32, Way>,
        shared: &'a Shared,
        flags: Arc<RunFlags>,
        notes: HashMap<u32, String>,
        workers: usize,
        wr: &'w mut tokio::net::tcp::OwnedWriteHalf,
    ) -> Self {
        ServerTest {
            ways,
            shared,
            wr,
            flags,
            start: Instant::now(),
            notes,
            finals: Vec::new(),
            cpu: CpuUsage::default(),
            gather: Gather::new(workers),
            coarse: WaySums::default(),
            sampled: Default::default(),
            client_gone: false,
            problem: None,
            host: netblast_engine::os::host::HostMark::read(),
        }
    }

    /// One worker event: an interval's part (counted in the metrics), a flow's end, a
    /// worker's end.
    fn event(&mut self, w: usize, ev: Event) {
        let (metrics, ways) = (&self.shared.stats.metrics, self.ways);
        match ev {
            Event::Interval { index, start_s, end_s, flows } => {
                // One frame per interval, once every worker of this test reported it.
                let part = self.gather.part(w, index);
                part.span = Some(part.span.map_or((start_s, end_s), |(a, b)| (a.min(start_s), b.max(end_s))));
                for f in &flows {
                    let dir = crate::metrics::label(
                        "direction",
                        match ways.get(&f.id) {
                            Some(Way::Down) => "sent",
                            _ => "received",
                        },
                    );
                    metrics.bytes.get_or_create(&dir).inc_by(f.bytes);
                    if f.msgs > 0 {
                        metrics.messages.get_or_create(&dir).inc_by(f.msgs);
                    }
                }
                // Kernel statistics matter where the server sends (`down` streams); the client
                // has its own where it sends.
                part.streams.extend(flows.into_iter().map(|f| {
                    let tcp = f.tcp.filter(|_| ways.get(&f.id) == Some(&Way::Down));
                    ServerSample { id: f.id, bytes: f.bytes, msgs: f.msgs, tcp, udp: f.udp }
                }));
            }
            Event::FlowDone(f) => {
                if let (Some(t), Some(Way::Down)) = (&f.tcp, ways.get(&f.id)) {
                    metrics.retransmits.inc_by(t.retrans_segs);
                }
                if let Some(h) = f.rtt_hist.as_deref() {
                    metrics.rtt.add(h);
                }
                self.finals.push(ServerStreamFinal {
                    id: f.id,
                    bytes: f.bytes,
                    msgs: f.msgs,
                    seconds: f.seconds,
                    tcp: f.tcp,
                    cpu: f.cpu,
                    kernel_drops: f.kernel_drops,
                    rtt_hist: f.rtt_hist.as_deref().and_then(|h| netblast_spec::hist::EncodedHistogram::encode(h).ok()),
                    tcp_info: f.tcp_info,
                    note: self.notes.remove(&f.id),
                    error: f.error,
                    udp: f.udp,
                    rcvbuf: f.rcvbuf,
                });
            }
            Event::WorkerDone { cpu: c, pin_error, tcp_samples, .. } => {
                if let Some(e) = pin_error {
                    tracing::warn!("{e}");
                }
                self.sampled.add(tcp_samples);
                self.cpu.user_s += c.user_s;
                self.cpu.system_s += c.system_s;
                self.gather.done(w);
            }
        }
    }

    /// The server shuts down: the test is aborted and the client told why.
    async fn shutdown(&mut self) {
        self.flags.abort();
        self.problem = Some("server shutting down".into());
        let msg = wire::refusal(Refusal::Shutdown, "the server is shutting down; test aborted".into());
        if !self.client_gone && self.wr.write_all(&msg).await.is_err() {
            self.client_gone = true;
        }
    }

    /// A control frame during the test: `stop` stops the senders; anything else, or the
    /// connection's end, stops the test with the reason.
    fn control(&mut self, msg: Option<Ctl>) {
        let problem = match msg {
            Some(Ctl::Frame(Ok(Some(ClientMsg::Stop)))) => {
                self.flags.stop();
                return;
            }
            Some(Ctl::Frame(Ok(Some(other)))) => format!("unexpected control frame during the test: {other:?}"),
            Some(Ctl::Frame(Ok(None))) | None => {
                self.client_gone = true;
                "client closed the control connection during the test".into()
            }
            Some(Ctl::Frame(Err(e))) => {
                self.client_gone = true;
                format!("bad control frame: {e}")
            }
        };
        self.flags.stop();
        self.problem = Some(problem);
    }

    /// Every interval each worker has now reported, one frame each (way sums only for tests
    /// of more than `MAX_STREAM_DETAIL` streams).
    async fn report_intervals(&mut self) {
        let timeout = self.shared.limits.control_write_timeout;
        for (index, part) in self.gather.ready() {
            let (start_s, end_s) = part.span.unwrap_or((0.0, 0.0));
            let msg = if self.ways.len() > MAX_STREAM_DETAIL {
                let ways = self.coarse.sums(&part.streams, self.ways);
                ServerMsg::Interval { index, start_s, end_s, streams: Vec::new(), ways }
            } else {
                ServerMsg::Interval { index, start_s, end_s, streams: part.streams, ways: Vec::new() }
            };
            if !self.client_gone {
                if let Err(e) = send_report(self.wr, &wire::encode_frame(&msg), timeout).await {
                    self.client_gone = true;
                    self.flags.abort();
                    self.problem = Some(e);
                }
            }
        }
    }

    /// The final report (every stream's totals, the CPU used) and the test's totals for the
    /// server's own line.
    async fn finish(mut self, line: &ServerLine<'_>) -> (Option<String>, TestTotals) {
        self.cpu.wall_s = self.start.elapsed().as_secs_f64();
        self.finals.sort_by_key(|f| f.id);
        let mut totals = TestTotals { streams: self.finals.len(), ..Default::default() };
        for f in &self.finals {
            let sent = self.ways.get(&f.id) == Some(&Way::Down);
            *(if sent { &mut totals.sent } else { &mut totals.received }) += f.bytes;
            *(if sent { &mut totals.msgs_sent } else { &mut totals.msgs_received }) += f.msgs;
            totals.seconds = totals.seconds.max(f.seconds);
        }
        if !self.client_gone {
            let s = &self.sampled;
            let tcp_samples = (s.read < s.wanted).then_some([s.read, s.wanted]);
            let load = self.host.as_ref().and_then(|m| m.load());
            let output = vec![line(&totals, self.problem.as_deref())];
            let msg = ServerMsg::Final {
                streams: std::mem::take(&mut self.finals),
                cpu: self.cpu,
                tcp_samples,
                load,
                output,
            };
            let timeout = self.shared.limits.control_write_timeout;
            if let Err(e) = send_report(self.wr, &wire::encode_frame(&msg), timeout).await {
                return (Some(format!("cannot send the final report: {e}")), totals);
            }
            let _ = self.wr.shutdown().await;
        }
        (self.problem, totals)
    }
}
