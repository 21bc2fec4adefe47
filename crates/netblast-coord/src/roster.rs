//! The fleet's agents, phase 1 and 2 of a run: dial the listed ones and take the registrations
//! of the groups waited for (each a session: hello, clock), until every one is ready or failed,
//! the wait is over or the user interrupts; then pair the ready clients with the ready servers
//! in the order they were listed.

use crate::agents::AgentSource;
use crate::config::{FleetConfig, FleetError, FleetEvent, LiveSink};
use crate::pairing::{self, Test};
use crate::session::{self, Event};
use netblast_spec::fleet::{AgentHello, CoordMsg};
use netblast_spec::profile::{Profile, ServerPort};
use netblast_spec::result::ClockInfo;
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// One agent as the coordinator knows it. Sessions know agents by their index in the roster.
#[derive(Debug)]
pub struct AgentState {
    /// `client` or `server`; empty for a registration whose group is not yet known (or that
    /// was not needed: it takes no part and is left out of the result).
    pub role: &'static str,
    /// Its place in the lists as given (`--clients` then `--servers`); registrations come
    /// after every listed agent, in the order they arrived. Pairing follows it.
    pub place: usize,
    /// Where it was reached (or registered from).
    pub address: String,
    /// What it said of itself.
    pub hello: Option<Box<AgentHello>>,
    /// Its clock against the coordinator's.
    pub clock: Option<ClockInfo>,
    /// Where it is.
    pub status: Status,
    /// Its session's commands; `None` once the session is closed.
    pub cmds: Option<mpsc::UnboundedSender<CoordMsg>>,
    /// When its tests really started, on the coordinator's clock (the latest of them).
    pub actual_start: Option<u64>,
    /// When its last frame arrived (coordinator clock).
    pub last_frame_ns: u64,
}

/// Where an agent is.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    /// Dialed or registered, not yet introduced and clocked.
    Connecting,
    /// Introduced and clocked.
    Ready,
    /// Gone, or never came: why.
    Failed(String),
}

impl AgentState {
    fn new(role: &'static str, place: usize, address: String, status: Status) -> AgentState {
        AgentState {
            role,
            place,
            address,
            hello: None,
            clock: None,
            status,
            cmds: None,
            actual_start: None,
            last_frame_ns: 0,
        }
    }
}

/// Who takes part: the agents (every one, with its state) and the tests between the ready ones.
pub struct Roster<'a> {
    /// The settings.
    pub cfg: &'a FleetConfig,
    /// Where live events go.
    pub live: LiveSink<'a>,
    /// Every agent, by session index.
    pub agents: Vec<AgentState>,
    /// The sessions' events.
    pub events: mpsc::UnboundedReceiver<Event>,
    events_tx: mpsc::UnboundedSender<Event>,
    /// Registrations waited for: group → (role, count).
    wanted: HashMap<String, (&'static str, usize)>,
    /// Registrations taken, by group.
    registered: HashMap<String, usize>,
    /// Whether the user interrupted.
    pub interrupted: bool,
}

/// A dial's outcome: role, place, address, the connection or why not.
type Dialed = (&'static str, usize, SocketAddr, Result<TcpStream, String>);

impl<'a> Roster<'a> {
    /// An empty roster for `cfg`; the groups it names are checked (a group is one role's, and
    /// registrations need a listener).
    pub fn new(cfg: &'a FleetConfig, live: LiveSink<'a>, listening: bool) -> Result<Roster<'a>, FleetError> {
        let mut wanted: HashMap<String, (&'static str, usize)> = HashMap::new();
        for (role, list) in [("client", &cfg.clients), ("server", &cfg.servers)] {
            for src in list {
                if let AgentSource::Registered { group, count } = src {
                    if let Some((other, _)) = wanted.insert(group.clone(), (role, *count)) {
                        return Err(FleetError::Config(format!(
                            "group {group} is named for both {other}s and {role}s: give each role its own group"
                        )));
                    }
                }
            }
        }
        if !wanted.is_empty() && !listening {
            return Err(FleetError::Config("registered agents need the coordinator to --listen".into()));
        }
        let (events_tx, events) = mpsc::unbounded_channel();
        Ok(Roster {
            cfg,
            live,
            agents: Vec::new(),
            events,
            events_tx,
            wanted,
            registered: HashMap::new(),
            interrupted: false,
        })
    }

    /// Phase 1: dials the listed agents and takes registrations on `listener` until every
    /// agent is ready or failed and every group has its count, the wait is over, or
    /// `shutdown` completes (then `interrupted`). Agents still connecting, and registrations
    /// that never came, are failures.
    pub async fn connect<F: Future<Output = ()>>(&mut self, listener: Option<TcpListener>, shutdown: &mut Pin<&mut F>) {
        let dials: Vec<(&'static str, usize, SocketAddr)> =
            [("client", &self.cfg.clients), ("server", &self.cfg.servers)]
                .into_iter()
                .flat_map(|(role, list)| {
                    list.iter().filter_map(move |s| if let AgentSource::Dial(a) = s { Some((role, *a)) } else { None })
                })
                .enumerate()
                .map(|(place, (role, a))| (role, place, a))
                .collect();
        let (dial_tx, mut dial_rx) = mpsc::unbounded_channel::<Dialed>();
        let deadline = tokio::time::Instant::now() + self.cfg.wait_agents;
        for &(role, place, a) in &dials {
            let (tx, token) = (dial_tx.clone(), self.cfg.token.clone());
            tokio::spawn(async move {
                let r = session::dial_until(a, &token, deadline).await;
                let _ = tx.send((role, place, a, r));
            });
        }
        drop(dial_tx);
        let (reg_tx, mut reg_rx) = mpsc::unbounded_channel::<(SocketAddr, Result<TcpStream, String>)>();
        let accept_task = listener.map(|l| {
            let token = self.cfg.token.clone();
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
        let mut dials_left = dials.len();
        while !self.settled(dials_left) {
            tokio::select! {
                Some(d) = dial_rx.recv() => {
                    dials_left -= 1;
                    self.dialed(d);
                }
                Some((peer, r)) = reg_rx.recv() => match r {
                    // Its role is known once its hello names its group.
                    Ok(conn) => self.spawn_session("", dials.len() + self.agents.len(), peer.to_string(), conn),
                    Err(why) => tracing::warn!(%peer, "refused registration: {why}"),
                },
                Some(ev) = self.events.recv() => self.session_event(ev),
                _ = tokio::time::sleep_until(deadline) => break,
                _ = shutdown.as_mut() => { self.interrupted = true; break; }
            }
        }
        if let Some(t) = &accept_task {
            t.abort();
        }
        // A dial still retrying a refusal at the deadline ends within its connect timeout: its
        // agent is named (failed, or not ready in time), not left out.
        while dials_left > 0 && !self.interrupted {
            let Some(d) = dial_rx.recv().await else { break };
            dials_left -= 1;
            self.dialed(d);
        }
        self.missing();
    }

    /// Whether every dial answered, every session settled and every group has its count.
    fn settled(&self, dials_left: usize) -> bool {
        dials_left == 0
            && self.agents.iter().all(|a| a.status != Status::Connecting)
            && self.wanted.iter().all(|(g, (_, n))| self.registered.get(g).copied().unwrap_or(0) >= *n)
    }

    /// A session for a connection that proved the token; it reports as agent `agents.len()`.
    fn spawn_session(&mut self, role: &'static str, place: usize, address: String, conn: TcpStream) {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut a = AgentState::new(role, place, address, Status::Connecting);
        a.cmds = Some(tx);
        self.agents.push(a);
        tokio::spawn(session::run(self.agents.len() - 1, conn, self.events_tx.clone(), rx));
    }

    /// A dial answered: a session, or a failure named live.
    fn dialed(&mut self, (role, place, addr, r): Dialed) {
        match r {
            Ok(conn) => self.spawn_session(role, place, addr.to_string(), conn),
            Err(why) => {
                (self.live)(FleetEvent::AgentFailed { role, address: &addr.to_string(), why: &why });
                self.agents.push(AgentState::new(role, place, addr.to_string(), Status::Failed(why)));
            }
        }
    }

    /// A session's event while agents gather: ready (a registration takes its group's role,
    /// or is sent away when the group is full), or gone.
    fn session_event(&mut self, ev: Event) {
        match ev {
            Event::Ready { agent, hello, clock } => {
                let a = &mut self.agents[agent];
                if a.role.is_empty() {
                    let have = self.registered.entry(hello.group.clone()).or_insert(0);
                    match self.wanted.get(&hello.group) {
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
                            return;
                        }
                    }
                }
                let hostname = hello.agent.hostname.clone();
                a.hello = Some(hello);
                a.clock = Some(clock);
                a.status = Status::Ready;
                (self.live)(FleetEvent::AgentReady { role: a.role, address: &a.address, hostname: &hostname, clock });
            }
            Event::Gone { agent, why } => {
                let a = &mut self.agents[agent];
                a.cmds = None;
                if !a.role.is_empty() {
                    (self.live)(FleetEvent::AgentFailed { role: a.role, address: &a.address, why: &why });
                }
                a.status = Status::Failed(why);
            }
            Event::Frame { .. } => {}
        }
    }

    /// Registrations that never came, and agents still connecting, become failures.
    fn missing(&mut self) {
        let wait = self.cfg.wait_agents;
        let mut groups: Vec<(&String, &(&'static str, usize))> = self.wanted.iter().collect();
        groups.sort();
        for (g, &(role, n)) in groups {
            let have = self.registered.get(g).copied().unwrap_or(0);
            for _ in have..n {
                let why = format!("group {g}: only {have} of {n} agents registered within {wait:?}");
                (self.live)(FleetEvent::AgentFailed { role, address: "(not registered)", why: &why });
                self.agents.push(AgentState::new(role, usize::MAX, format!("registered:{g}"), Status::Failed(why)));
            }
        }
        for a in self.agents.iter_mut().filter(|a| a.status == Status::Connecting) {
            a.status = Status::Failed(format!("not ready within {wait:?}"));
            a.cmds = None;
        }
    }

    /// The ready agents of `role`, in the order they were listed (not the order they happened
    /// to answer in: client i meets server i mod S of the lists as given).
    pub fn ready(&self, role: &str) -> Vec<usize> {
        let mut r: Vec<usize> = self
            .agents
            .iter()
            .enumerate()
            .filter(|(_, a)| a.role == role && a.status == Status::Ready)
            .map(|(i, _)| i)
            .collect();
        r.sort_by_key(|&i| self.agents[i].place);
        r
    }

    /// Phase 2: the tests between the ready agents (indices into the roster), or why the fleet
    /// cannot run (no client ready, no server ready when servers were named, interrupted).
    pub fn pair(&self) -> Result<Vec<Test>, FleetError> {
        let (clients, servers) = (self.ready("client"), self.ready("server"));
        if clients.is_empty() || self.interrupted {
            let why: Vec<String> = self
                .agents
                .iter()
                .filter_map(|a| match &a.status {
                    Status::Failed(w) => Some(format!("{} {}: {w}", a.role, a.address)),
                    _ => None,
                })
                .collect();
            self.bye();
            return Err(FleetError::NoAgents(if self.interrupted { "interrupted".into() } else { why.join("; ") }));
        }
        if !self.cfg.servers.is_empty() && servers.is_empty() {
            self.bye();
            return Err(FleetError::NoAgents("no server agent is ready".into()));
        }
        let tests = pairing::tests(clients.len(), servers.len(), self.cfg.pairing, &self.cfg.profile)
            .map_err(FleetError::Config)?;
        Ok(tests
            .into_iter()
            .map(|t| Test { client: clients[t.client], server: t.server.map(|s| servers[s]), profile: t.profile })
            .collect())
    }

    /// Tells every agent still in session that the fleet is done with it.
    pub fn bye(&self) {
        for a in &self.agents {
            if let Some(c) = &a.cmds {
                let _ = c.send(CoordMsg::Bye);
            }
        }
    }
}

/// The data-port (or, for http, HTTP) address a client reaches a server agent at: the
/// address the coordinator reached it at, or for a registered agent its first interface
/// address that is not loopback.
pub fn server_target(server: &AgentState, profile: &Profile) -> Result<String, String> {
    let hello = server.hello.as_ref().ok_or("server not introduced")?;
    let ip = match server.address.parse::<SocketAddr>() {
        Ok(a) if hello.addresses.contains(&a.ip()) || !a.ip().is_loopback() => a.ip(),
        Ok(a) if hello.addresses.is_empty() => a.ip(),
        _ => *hello.addresses.iter().find(|a| !a.is_loopback()).or(hello.addresses.first()).ok_or("no address")?,
    };
    let missing = |what: &str, flag: &str| {
        format!("server agent {} runs no {what} responder: start it with serve {flag}", server.address)
    };
    let port = match profile.workload.section().server_port() {
        ServerPort::Data => hello.data_port,
        ServerPort::Http => hello.http_port.ok_or_else(|| missing("HTTP", "--http"))?,
        ServerPort::Https => hello.https_port.ok_or_else(|| missing("HTTPS", "--https"))?,
    };
    Ok(SocketAddr::new(ip, port).to_string())
}
