//! `netblast fleet`: connect the agents, measure their clocks, pair clients with servers, order
//! every test to start at one instant T0, stream and log what comes back, merge it exactly.

use crate::agents::AgentSource;
use crate::pairing::{self, Pairing, Test};
use crate::session::{self, now_ns, Event};
use netblast_wire::auth::Token;
use netblast_spec::fleet::{AgentHello, AgentMsg, CoordMsg, LogAgent, LogHeader, LogRecord, LogTest, Order};
use netblast_wire::gather::Gather;
use netblast_spec::merge;
use netblast_spec::profile::Profile;
use netblast_spec::result::{AgentInfo, AgentStatus, ClockInfo, Interval, RunError, RunResult};
use std::collections::HashMap;
use std::future::Future;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// A fleet run's settings.
#[derive(Debug, Clone)]
pub struct FleetConfig {
    /// The client agents (they originate tests).
    pub clients: Vec<AgentSource>,
    /// The server agents (the peers of tests); empty for http against the profile's URLs.
    pub servers: Vec<AgentSource>,
    /// Which client tests against which server.
    pub pairing: Pairing,
    /// The validated profile.
    pub profile: Profile,
    /// Where the profile came from, for the result.
    pub origin: String,
    /// The fleet's token: agents must prove it, and the coordinator proves it to them.
    pub token: Token,
    /// How long to wait for agents to connect or register.
    pub wait_agents: Duration,
    /// Least time between the orders and T0 (set-up of every test must fit in it).
    pub lead: Duration,
    /// The frame log (JSON lines), written as frames arrive.
    pub log: Option<PathBuf>,
}

impl FleetConfig {
    /// How many agents the fleet names (dialed, and registrations waited for).
    pub fn agent_count(&self) -> usize {
        self.clients
            .iter()
            .chain(&self.servers)
            .map(|s| match s {
                AgentSource::Dial(_) => 1,
                AgentSource::Registered { count, .. } => *count,
            })
            .sum()
    }
}

/// Why a fleet could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// The settings do not work (bad input).
    #[error("{0}")]
    Config(String),
    /// No client agent could take part.
    #[error("no client agent is ready: {0}")]
    NoAgents(String),
    /// The log could not be written.
    #[error("cannot write the fleet log {path}: {error}")]
    Log {
        /// The file.
        path: String,
        /// Why (in the message, not chained: it would print twice).
        error: std::io::Error,
    },
}

/// What the coordinator reports while it runs.
#[derive(Debug)]
pub enum FleetEvent<'a> {
    /// An agent is connected, introduced and clocked.
    AgentReady {
        /// `client` or `server`.
        role: &'a str,
        /// Where.
        address: &'a str,
        /// Its host name.
        hostname: &'a str,
        /// Its clock.
        clock: ClockInfo,
    },
    /// An agent failed (or never came).
    AgentFailed {
        /// `client` or `server`.
        role: &'a str,
        /// Where.
        address: &'a str,
        /// Why.
        why: &'a str,
    },
    /// The orders are out: every test starts at T0.
    Starting {
        /// T0, coordinator clock (UTC ns).
        t0_unix_ns: u64,
        /// Tests ordered.
        tests: usize,
        /// Client agents taking part.
        clients: usize,
        /// Server agents taking part.
        servers: usize,
    },
    /// One interval, fleet-wide, once every running test reported it.
    Interval(&'a FleetInterval),
    /// One test's interval, as its client agent reported it (every frame, as it arrives).
    TestInterval {
        /// The client agent's address.
        agent: &'a str,
        /// Its figures.
        interval: &'a Interval,
    },
}

/// Fleet-wide figures of one interval (from the tests' counters; the exact merge, with
/// histograms, is made from their final results).
#[derive(Debug, Clone, PartialEq)]
pub struct FleetInterval {
    /// Interval index.
    pub index: u32,
    /// Start, s after T0.
    pub start_s: f64,
    /// End, s after T0.
    pub end_s: f64,
    /// Bits per second over every test (received where the receivers reported, else sent).
    pub bits_per_s: f64,
    /// Responses per second (http).
    pub responses_per_s: Option<f64>,
    /// Tests that reported this interval.
    pub reporting: usize,
    /// Tests running.
    pub running: usize,
    /// The test with the lowest rate: its client agent's address and its rate (bit/s, or
    /// responses/s for http).
    pub slowest: Option<(String, f64)>,
}

#[derive(Debug, Default)]
struct LiveAcc {
    span: Option<(f64, f64)>,
    bits: f64,
    responses: Option<f64>,
    reporting: usize,
    slowest: Option<(usize, f64)>,
}

impl LiveAcc {
    fn add(&mut self, agent: usize, iv: &Interval) {
        self.span = Some(self.span.map_or((iv.start_s, iv.end_s), |(a, b)| (a.min(iv.start_s), b.max(iv.end_s))));
        let (rate, rank) = match &iv.http {
            Some(h) => {
                *self.responses.get_or_insert(0.0) += h.responses_per_s;
                let bits = (h.bytes_sent + h.bytes_received) as f64 * 8.0 / (iv.end_s - iv.start_s).max(1e-9);
                (bits, h.responses_per_s)
            }
            None => {
                let r: f64 = iv.sums.iter().map(|w| w.received_bits_per_s.unwrap_or(w.sent_bits_per_s)).sum();
                (r, r)
            }
        };
        self.bits += rate;
        self.reporting += 1;
        if self.slowest.is_none_or(|(_, r)| rank < r) {
            self.slowest = Some((agent, rank));
        }
    }
}

#[derive(Debug)]
struct AgentState {
    role: &'static str,
    /// Its place in the lists as given (`--clients` then `--servers`); registrations come
    /// after every listed agent, in the order they arrived. Pairing follows it.
    place: usize,
    address: String,
    hello: Option<Box<AgentHello>>,
    clock: Option<ClockInfo>,
    status: Status,
    cmds: Option<mpsc::UnboundedSender<CoordMsg>>,
    actual_start: Option<u64>,
    last_frame_ns: u64,
}

#[derive(Debug, Clone, PartialEq)]
enum Status {
    Connecting,
    Ready,
    Failed(String),
}

#[derive(Debug, Clone, PartialEq)]
enum TestState {
    Ordered,
    Running,
    Done,
    Failed(String),
}

/// Appends fleet log records as they happen, each with one write (no user-space buffer), so
/// a coordinator that dies loses nothing it received.
struct Log {
    file: std::fs::File,
    path: String,
}

impl Log {
    fn record(&mut self, r: &LogRecord) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(r).map_err(std::io::Error::other)?;
        line.push(b'\n');
        self.file.write_all(&line)
    }

    fn frame(&mut self, agent: usize, at_ns: u64, raw: &[u8]) -> std::io::Result<()> {
        let mut line = format!("{{\"frame\":{{\"agent\":{agent},\"at_ns\":{at_ns},\"msg\":").into_bytes();
        line.extend_from_slice(raw);
        line.extend_from_slice(b"}}\n");
        self.file.write_all(&line)
    }
}

/// Where a fleet logs its frames when not told (no `-o`, no `--frames`): the user's state
/// directory (`$XDG_STATE_HOME/netblast`, else `~/.local/state/netblast`), else the temporary
/// directory; `fleet-UNIXTIME-PID.jsonl` there. The directory is made if missing.
pub fn default_log_path(unix_s: u64) -> PathBuf {
    let state = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").filter(|v| !v.is_empty()).map(|h| PathBuf::from(h).join(".local/state")))
        .map(|d| d.join("netblast"));
    let dir = match state {
        Some(d) if std::fs::create_dir_all(&d).is_ok() => d,
        _ => std::env::temp_dir(),
    };
    dir.join(format!("fleet-{unix_s}-{}.jsonl", std::process::id()))
}

/// How long after the time bound a test's final result may take (the server's receivers give
/// up 30 s after the bound; the client drains 10 s).
pub const FINAL_GRACE: Duration = Duration::from_secs(45);
/// After Ctrl-C, how long the agents get to send what they measured.
pub const CANCEL_GRACE: Duration = Duration::from_secs(15);

/// Runs a fleet. `listener` takes registering agents; `shutdown` (Ctrl-C) cancels every test
/// and keeps what was measured. The result's `summary` is the fleet's exact merge; `agents`
/// lists every agent with its status; `parts` every test that sent a result.
pub async fn run(
    cfg: FleetConfig,
    listener: Option<TcpListener>,
    shutdown: impl Future<Output = ()>,
    live: &mut (dyn for<'a> FnMut(FleetEvent<'a>) + Send),
) -> Result<RunResult, FleetError> {
    let interval = cfg.profile.run.interval();
    let bound = cfg.profile.time_bound();
    let mut agents: Vec<AgentState> = Vec::new();
    let (ev_tx, mut ev_rx) = mpsc::unbounded_channel::<Event>();
    let spawn_session = |agents: &mut Vec<AgentState>,
                         role: &'static str,
                         place: usize,
                         address: String,
                         conn: tokio::net::TcpStream| {
        let (tx, rx) = mpsc::unbounded_channel();
        let idx = agents.len();
        agents.push(AgentState {
            role,
            place,
            address,
            hello: None,
            clock: None,
            status: Status::Connecting,
            cmds: Some(tx),
            actual_start: None,
            last_frame_ns: 0,
        });
        tokio::spawn(session::run(idx, conn, ev_tx.clone(), rx));
    };

    // 1. Agents: dial the listed ones, take registrations for the groups.
    let mut wanted: HashMap<String, (&'static str, usize)> = HashMap::new();
    let mut dials: Vec<(&'static str, usize, SocketAddr)> = Vec::new();
    for (role, list) in [("client", &cfg.clients), ("server", &cfg.servers)] {
        for src in list {
            match src {
                AgentSource::Dial(a) => dials.push((role, dials.len(), *a)),
                AgentSource::Registered { group, count } => {
                    if let Some((other, _)) = wanted.insert(group.clone(), (role, *count)) {
                        return Err(FleetError::Config(format!(
                            "group {group} is named for both {other}s and {role}s: give each role its own group"
                        )));
                    }
                }
            }
        }
    }
    if !wanted.is_empty() && listener.is_none() {
        return Err(FleetError::Config("registered agents need the coordinator to --listen".into()));
    }
    let (dial_tx, mut dial_rx) =
        mpsc::unbounded_channel::<(&'static str, usize, SocketAddr, Result<tokio::net::TcpStream, String>)>();
    for (role, place, a) in &dials {
        let (tx, token, role, place, a) = (dial_tx.clone(), cfg.token.clone(), *role, *place, *a);
        tokio::spawn(async move {
            let r = session::dial(a, &token).await;
            let _ = tx.send((role, place, a, r));
        });
    }
    drop(dial_tx);
    let (reg_tx, mut reg_rx) = mpsc::unbounded_channel::<(SocketAddr, Result<tokio::net::TcpStream, String>)>();
    let accept_task = listener.map(|l| {
        let token = cfg.token.clone();
        tokio::spawn(async move {
            loop {
                let Ok((conn, peer)) = l.accept().await else { continue };
                let (tx, token) = (reg_tx.clone(), token.clone());
                tokio::spawn(async move {
                    let r = session::accept(conn, &token).await;
                    let _ = tx.send((peer, r));
                });
            }
        })
    });
    let mut registered: HashMap<String, usize> = HashMap::new();
    let mut dials_left = dials.len();
    let deadline = tokio::time::Instant::now() + cfg.wait_agents;
    tokio::pin!(shutdown);
    let mut interrupted = false;
    let settled = |agents: &[AgentState], dials_left: usize, registered: &HashMap<String, usize>| {
        dials_left == 0
            && agents.iter().all(|a| a.status != Status::Connecting)
            && wanted.iter().all(|(g, (_, n))| registered.get(g).copied().unwrap_or(0) >= *n)
    };
    while !settled(&agents, dials_left, &registered) {
        tokio::select! {
            Some((role, place, addr, r)) = dial_rx.recv() => {
                dials_left -= 1;
                match r {
                    Ok(conn) => spawn_session(&mut agents, role, place, addr.to_string(), conn),
                    Err(why) => {
                        live(FleetEvent::AgentFailed { role, address: &addr.to_string(), why: &why });
                        agents.push(AgentState {
                            role, place, address: addr.to_string(), hello: None, clock: None, status: Status::Failed(why),
                            cmds: None, actual_start: None, last_frame_ns: 0,
                        });
                    }
                }
            }
            Some((peer, r)) = reg_rx.recv() => match r {
                // Its role is known once its hello names its group.
                Ok(conn) => {
                    let place = dials.len() + agents.len();
                    spawn_session(&mut agents, "", place, peer.to_string(), conn)
                }
                Err(why) => tracing::warn!(%peer, "refused registration: {why}"),
            },
            Some(ev) = ev_rx.recv() => match ev {
                Event::Ready { agent, hello, clock } => {
                    let a = &mut agents[agent];
                    if a.role.is_empty() {
                        // A registration: wanted if its group still needs agents.
                        let have = registered.entry(hello.group.clone()).or_insert(0);
                        match wanted.get(&hello.group) {
                            Some((role, n)) if *have < *n => {
                                *have += 1;
                                a.role = role;
                            }
                            _ => {
                                tracing::info!(address = %a.address, group = %hello.group, "registration not needed: sent away");
                                if let Some(c) = a.cmds.take() {
                                    let _ = c.send(CoordMsg::Bye);
                                }
                                a.status = Status::Failed("not needed".into());
                                continue;
                            }
                        }
                    }
                    a.hello = Some(hello);
                    a.clock = Some(clock);
                    a.status = Status::Ready;
                    let h = a.hello.as_ref().expect("set above");
                    live(FleetEvent::AgentReady { role: a.role, address: &a.address, hostname: &h.agent.hostname, clock });
                }
                Event::Gone { agent, why } => {
                    let a = &mut agents[agent];
                    a.cmds = None;
                    if a.role.is_empty() {
                        a.status = Status::Failed(why);
                        continue;
                    }
                    live(FleetEvent::AgentFailed { role: a.role, address: &a.address, why: &why });
                    a.status = Status::Failed(why);
                }
                Event::Frame { .. } => {}
            },
            _ = tokio::time::sleep_until(deadline) => break,
            _ = &mut shutdown => { interrupted = true; break; }
        }
    }
    if let Some(t) = &accept_task {
        t.abort();
    }
    // Registrations that never came, and agents still connecting, are failures.
    for (g, (role, n)) in &wanted {
        let have = registered.get(g).copied().unwrap_or(0);
        for _ in have..*n {
            let why = format!("group {g}: only {have} of {n} agents registered within {:?}", cfg.wait_agents);
            live(FleetEvent::AgentFailed { role, address: "(not registered)", why: &why });
            agents.push(AgentState {
                role,
                place: usize::MAX,
                address: format!("registered:{g}"),
                hello: None,
                clock: None,
                status: Status::Failed(why),
                cmds: None,
                actual_start: None,
                last_frame_ns: 0,
            });
        }
    }
    for a in agents.iter_mut().filter(|a| a.status == Status::Connecting) {
        a.status = Status::Failed(format!("not ready within {:?}", cfg.wait_agents));
        a.cmds = None;
    }
    // Registrations that were not needed keep their place (sessions know agents by index)
    // with no role; they take no part and are left out of the result.

    // 2. Pairing over the agents that are ready, in the order they were listed (not the order
    // they happened to answer in: client i meets server i mod S of the lists as given).
    let ready = |role: &str| -> Vec<usize> {
        let mut r: Vec<usize> = agents
            .iter()
            .enumerate()
            .filter(|(_, a)| a.role == role && a.status == Status::Ready)
            .map(|(i, _)| i)
            .collect();
        r.sort_by_key(|&i| agents[i].place);
        r
    };
    let (clients, servers) = (ready("client"), ready("server"));
    if clients.is_empty() || interrupted {
        let why: Vec<String> = agents
            .iter()
            .filter_map(|a| match &a.status {
                Status::Failed(w) => Some(format!("{} {}: {w}", a.role, a.address)),
                _ => None,
            })
            .collect();
        bye(&agents);
        return Err(FleetError::NoAgents(if interrupted { "interrupted".into() } else { why.join("; ") }));
    }
    if !cfg.servers.is_empty() && servers.is_empty() {
        bye(&agents);
        return Err(FleetError::NoAgents("no server agent is ready".into()));
    }
    let tests: Vec<Test> =
        pairing::tests(clients.len(), servers.len(), cfg.pairing, &cfg.profile).map_err(FleetError::Config)?;
    // Test indices refer to agents.
    let tests: Vec<Test> = tests
        .into_iter()
        .map(|t| Test { client: clients[t.client], server: t.server.map(|s| servers[s]), profile: t.profile })
        .collect();

    // 3. Orders: everyone starts at T0 on the coordinator's clock, its own T0 on its clock.
    let max_delay = agents.iter().filter_map(|a| a.clock).map(|c| c.error_ns * 2).max().unwrap_or(0);
    let lead = cfg.lead + Duration::from_nanos(4 * max_delay) + Duration::from_micros(200 * tests.len() as u64);
    let interval_ns = interval.as_nanos() as u64;
    let t0 = (now_ns() + lead.as_nanos() as u64).div_ceil(interval_ns) * interval_ns;
    let mut log = match &cfg.log {
        Some(p) => Some(Log {
            file: std::fs::File::create(p).map_err(|error| FleetError::Log { path: p.display().to_string(), error })?,
            path: p.display().to_string(),
        }),
        None => None,
    };
    let header = LogHeader {
        t0_unix_ns: t0,
        profile: cfg.profile.clone(),
        agents: agents
            .iter()
            .map(|a| LogAgent {
                role: a.role.into(),
                address: a.address.clone(),
                hostname: a.hello.as_ref().map(|h| h.agent.hostname.clone()).unwrap_or_default(),
                clock: a.clock.unwrap_or_default(),
            })
            .collect(),
        tests: tests.iter().map(|t| LogTest { client: t.client, server: t.server }).collect(),
    };
    if let Some(l) = log.as_mut() {
        l.record(&LogRecord::Fleet(Box::new(header)))
            .map_err(|error| FleetError::Log { path: l.path.clone(), error })?;
    }
    let mut state: Vec<TestState> = vec![TestState::Ordered; tests.len()];
    for (id, t) in tests.iter().enumerate() {
        let client = &agents[t.client];
        let clock = client.clock.unwrap_or_default();
        let target = match t.server {
            Some(s) => server_target(&agents[s], &t.profile).map_err(FleetError::Config)?,
            None => String::new(),
        };
        let order = Order {
            id: id as u32,
            profile: t.profile.clone(),
            target: target.clone(),
            start_at_unix_ns: (t0 as i128 + clock.offset_ns as i128) as u64,
            clock,
            label: format!("client {} -> {}", client.address, if target.is_empty() { "its URLs" } else { &target }),
        };
        if client.cmds.as_ref().is_none_or(|c| c.send(CoordMsg::Order(Box::new(order))).is_err()) {
            state[id] = TestState::Failed("its agent is gone".into());
        }
    }
    live(FleetEvent::Starting { t0_unix_ns: t0, tests: tests.len(), clients: clients.len(), servers: servers.len() });

    // 4. Collect until every test is done or failed.
    let mut gather: Gather<LiveAcc> = Gather::new(tests.len());
    for (id, s) in state.iter().enumerate() {
        if *s != TestState::Ordered {
            gather.done(id);
        }
    }
    let mut merged: Option<RunResult> = None;
    let mut part_of: HashMap<usize, u32> = HashMap::new();
    let mut errors: Vec<RunError> = Vec::new();
    let stall = (interval * 3).max(Duration::from_secs(5)).as_nanos() as u64;
    let end_by = t0 + (bound + FINAL_GRACE).as_nanos() as u64;
    let mut cancel_by: Option<u64> = None;
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let since_t0 = |ns: u64| (ns as f64 - t0 as f64) / 1e9;
    let tests_of = |agent: usize| -> Vec<usize> {
        tests.iter().enumerate().filter(|(_, t)| t.client == agent).map(|(i, _)| i).collect()
    };
    while state.iter().any(|s| matches!(s, TestState::Ordered | TestState::Running)) {
        let mut failed_now: Vec<(usize, String)> = Vec::new();
        tokio::select! {
            Some(ev) = ev_rx.recv() => match ev {
                Event::Frame { agent, msg, raw, at_ns } => {
                    agents[agent].last_frame_ns = at_ns;
                    if let Some(l) = log.as_mut() {
                        if let Err(e) = l.frame(agent, at_ns, &raw) {
                            errors.push(RunError { at_s: since_t0(at_ns), source: "coordinator".into(), message: format!("cannot write the fleet log {}: {e}", l.path) });
                            log = None;
                        }
                    }
                    let id = match &*msg {
                        AgentMsg::Accepted { id } | AgentMsg::Refused { id, .. } | AgentMsg::Started { id, .. }
                        | AgentMsg::Interval { id, .. } | AgentMsg::Final { id, .. } | AgentMsg::Failed { id, .. } => *id as usize,
                        _ => continue,
                    };
                    // Only the client agent of a test speaks for it.
                    if tests.get(id).is_none_or(|t| t.client != agent) {
                        continue;
                    }
                    match *msg {
                        AgentMsg::Accepted { .. } if state[id] == TestState::Ordered => state[id] = TestState::Running,
                        AgentMsg::Refused { reason, .. } => {
                            state[id] = TestState::Failed(format!("refused the order: {reason}"));
                            gather.done(id);
                        }
                        AgentMsg::Started { actual_start_unix_ns, .. } => {
                            let a = &mut agents[agent];
                            let off = a.clock.map(|c| c.offset_ns).unwrap_or(0);
                            let reference = (actual_start_unix_ns as i128 - off as i128) as u64;
                            a.actual_start = Some(a.actual_start.map_or(reference, |x| x.max(reference)));
                        }
                        AgentMsg::Interval { interval, .. } => {
                            live(FleetEvent::TestInterval { agent: &agents[agent].address, interval: &interval });
                            gather.part(id, interval.index).add(agent, &interval);
                        }
                        AgentMsg::Final { result, .. } => {
                            let label = format!("test {id} ({})", agents[agent].address);
                            let next = match &merged {
                                None => merge::merge(&[(label.as_str(), &result)]),
                                Some(m) => merge::merge(&[("fleet", m), (label.as_str(), &result)]),
                            };
                            match next {
                                Ok(m) => {
                                    part_of.insert(id, m.parts.len() as u32 - 1);
                                    merged = Some(m);
                                    state[id] = TestState::Done;
                                }
                                Err(e) => state[id] = TestState::Failed(format!("its result cannot be merged: {e}")),
                            }
                            gather.done(id);
                        }
                        AgentMsg::Failed { error, .. } => {
                            state[id] = TestState::Failed(error);
                            gather.done(id);
                        }
                        _ => {}
                    }
                }
                Event::Gone { agent, why } => failed_now.push((agent, why)),
                Event::Ready { .. } => {}
            },
            _ = tick.tick() => {
                let now = now_ns();
                if let Some(by) = cancel_by.filter(|by| now > *by) {
                    let _ = by;
                    for (id, s) in state.iter_mut().enumerate() {
                        if matches!(s, TestState::Ordered | TestState::Running) {
                            *s = TestState::Failed("no result after the cancel".into());
                            gather.done(id);
                        }
                    }
                }
                for (i, a) in agents.iter().enumerate() {
                    let running = tests_of(i).iter().any(|&t| state[t] == TestState::Running);
                    if !running || a.status != Status::Ready {
                        continue;
                    }
                    let seen = a.last_frame_ns.max(t0 + interval_ns);
                    let in_bound = now < t0 + bound.as_nanos() as u64;
                    if in_bound && now > seen + stall {
                        failed_now.push((i, format!("no report for {:.1} s: stalled", (now - seen) as f64 / 1e9)));
                    } else if now > end_by {
                        failed_now.push((i, format!("no final result {} s after the end", FINAL_GRACE.as_secs())));
                    }
                }
            }
            _ = &mut shutdown, if !interrupted => {
                interrupted = true;
                for a in &agents {
                    if let Some(c) = &a.cmds {
                        let _ = c.send(CoordMsg::Cancel { reason: "the coordinator was interrupted".into() });
                    }
                }
                cancel_by = Some(now_ns() + CANCEL_GRACE.as_nanos() as u64);
            }
        }
        for (agent, why) in failed_now {
            let a = &mut agents[agent];
            if matches!(a.status, Status::Failed(_)) {
                continue;
            }
            live(FleetEvent::AgentFailed { role: a.role, address: &a.address, why: &why });
            if let Some(l) = log.as_mut() {
                let _ = l.record(&LogRecord::Failed { agent, why: why.clone() });
            }
            // Dropping the session's command channel closes the connection: the agent stops.
            if let Some(c) = a.cmds.take() {
                let _ = c.send(CoordMsg::Cancel { reason: why.clone() });
            }
            a.status = Status::Failed(why.clone());
            for t in tests_of(agent) {
                if matches!(state[t], TestState::Ordered | TestState::Running) {
                    state[t] = TestState::Failed(format!("its agent failed: {why}"));
                    gather.done(t);
                }
            }
        }
        for (index, acc) in gather.ready() {
            let (start_s, end_s) = acc.span.unwrap_or((0.0, 0.0));
            let running = state.iter().filter(|s| !matches!(s, TestState::Failed(_))).count();
            live(FleetEvent::Interval(&FleetInterval {
                index,
                start_s,
                end_s,
                bits_per_s: acc.bits,
                responses_per_s: acc.responses,
                reporting: acc.reporting,
                running,
                slowest: acc.slowest.map(|(a, r)| (agents[a].address.clone(), r)),
            }));
        }
    }
    bye(&agents);

    // 5. The fleet's result: the merge of every final result, and every agent's status.
    for (id, s) in state.iter().enumerate() {
        if let TestState::Failed(why) = s {
            let t = &tests[id];
            errors.push(RunError {
                at_s: 0.0,
                source: format!("test {id}: client {}", agents[t.client].address),
                message: why.clone(),
            });
        }
    }
    // Every agent that failed is an error of the fleet's, named with why: a server, and a
    // client whose failure is not already a failed test's (one that never connected,
    // authenticated, registered or got a test).
    for (i, a) in agents.iter().enumerate().filter(|(_, a)| !a.role.is_empty()) {
        if let Status::Failed(why) = &a.status {
            if a.role == "client" && !tests_of(i).is_empty() {
                continue;
            }
            errors.push(RunError {
                at_s: 0.0,
                source: format!("{} agent {}", a.role, a.address),
                message: why.clone(),
            });
        }
    }
    if interrupted {
        errors.push(RunError { at_s: 0.0, source: "coordinator".into(), message: "interrupted by the user".into() });
    }
    let Some(mut result) = merged else {
        return Err(FleetError::NoAgents(
            errors.iter().map(|e| format!("{}: {}", e.source, e.message)).collect::<Vec<_>>().join("; "),
        ));
    };
    result.agents = agents
        .iter()
        .enumerate()
        .filter(|(_, a)| !a.role.is_empty())
        .map(|(i, a)| {
            let mine: Vec<usize> = tests
                .iter()
                .enumerate()
                .filter(|(_, t)| t.client == i || t.server == Some(i))
                .map(|(k, _)| k)
                .collect();
            let failed = match &a.status {
                Status::Failed(w) => Some(w.clone()),
                _ => mine.iter().find_map(|&k| match &state[k] {
                    TestState::Failed(w) if tests[k].client == i => Some(w.clone()),
                    _ => None,
                }),
            };
            let incomplete = mine.iter().filter_map(|k| part_of.get(k)).any(|&p| !result.parts[p as usize].complete);
            let (status, why) = match (failed, incomplete) {
                (Some(w), _) => ("failed", Some(w)),
                (None, true) => ("partial", Some("a test it took part in is incomplete".to_string())),
                (None, false) => ("ok", None),
            };
            AgentStatus {
                agent: AgentInfo {
                    hostname: a.hello.as_ref().map(|h| h.agent.hostname.clone()).unwrap_or_default(),
                    id: a.hello.as_ref().map(|h| h.agent.id.clone()).unwrap_or_default(),
                    address: a.address.clone(),
                },
                role: a.role.into(),
                clock: a.clock.unwrap_or_default(),
                actual_start_unix_ns: a.actual_start,
                status: status.into(),
                why,
                parts: mine.iter().filter_map(|k| part_of.get(k).copied()).collect(),
                summary: None,
            }
        })
        .collect();
    if let Err(e) = merge::fill_agent_summaries(&mut result) {
        errors.push(RunError { at_s: 0.0, source: "coordinator".into(), message: format!("agents' own totals: {e}") });
    }
    result.plan.origin = cfg.origin.clone();
    result.plan.notes.push(format!(
        "fleet: {} client agent(s), {} server agent(s), {} test(s), pairing {:?}; every test started at T0 on the coordinator's clock",
        clients.len(),
        servers.len(),
        tests.len(),
        cfg.pairing
    ));
    result.complete = result.complete && errors.is_empty();
    result.errors.extend(errors);
    Ok(result)
}

/// The data-port (or, for http, HTTP) address a client reaches a server agent at: the
/// address the coordinator reached it at, or for a registered agent its first interface
/// address that is not loopback.
fn server_target(server: &AgentState, profile: &Profile) -> Result<String, String> {
    let hello = server.hello.as_ref().ok_or("server not introduced")?;
    let ip = match server.address.parse::<SocketAddr>() {
        Ok(a) if hello.addresses.contains(&a.ip()) || !a.ip().is_loopback() => a.ip(),
        Ok(a) if hello.addresses.is_empty() => a.ip(),
        _ => *hello.addresses.iter().find(|a| !a.is_loopback()).or(hello.addresses.first()).ok_or("no address")?,
    };
    let port = match profile.workload.http() {
        Some(h) => {
            let p = if h.tls { hello.https_port } else { hello.http_port };
            p.ok_or_else(|| {
                format!(
                    "server agent {} runs no HTTP{} responder: start it with serve --http{}",
                    server.address,
                    if h.tls { "S" } else { "" },
                    if h.tls { "s" } else { "" }
                )
            })?
        }
        None => hello.data_port,
    };
    Ok(SocketAddr::new(ip, port).to_string())
}

fn bye(agents: &[AgentState]) {
    for a in agents {
        if let Some(c) = &a.cmds {
            let _ = c.send(CoordMsg::Bye);
        }
    }
}
