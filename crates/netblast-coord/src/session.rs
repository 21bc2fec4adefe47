//! One agent's session, as the coordinator runs it: connect (or take a registration), the
//! agent's hello, the clock exchange, then orders out and frames in. Each session is a task;
//! it tells the coordinator's loop what happened through [`Event`]s and takes [`CoordMsg`]s to
//! send.

use netblast_spec::fleet::{self, AgentHello, AgentMsg, ClockSample, CoordMsg};
use netblast_spec::result::ClockInfo;
use netblast_wire::auth::Token;
use netblast_wire::wire::{
    self, BUSY_BACKOFF, ClientHandshake, HEADER_LEN, Header, Role, TestId, busy_words, nonblocking,
};
use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

/// How long connecting and the handshake may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an agent may take to answer its hello or a clock probe.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(10);
/// Clock exchanges per agent.
pub const CLOCK_SAMPLES: usize = 16;

/// Now on the coordinator's clock, UTC ns.
pub fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

/// What a session tells the coordinator.
#[derive(Debug)]
pub enum Event {
    /// The agent introduced itself and its clock is measured.
    Ready {
        /// The session.
        agent: usize,
        /// What it said.
        hello: Box<AgentHello>,
        /// Its clock against the coordinator's.
        clock: ClockInfo,
    },
    /// A frame from the agent, with its raw bytes (for the log) and when it arrived.
    Frame {
        /// The session.
        agent: usize,
        /// The message.
        msg: Box<AgentMsg>,
        /// Its JSON as received.
        raw: Vec<u8>,
        /// Arrival, coordinator clock.
        at_ns: u64,
    },
    /// The session ended (connection lost, refused, a malformed frame).
    Gone {
        /// The session.
        agent: usize,
        /// Why.
        why: String,
    },
}

/// Dials an agent and proves the token both ways (an agent that cannot prove it is not given
/// orders); again after each pause of [`BUSY_BACKOFF`] while the agent, at its limit of
/// connections that have not proven themselves, closes or refuses the handshake.
pub async fn dial(addr: SocketAddr, token: &Token) -> Result<TcpStream, String> {
    dial_patiently(addr, token).await.map_err(|(_, why)| why)
}

/// [`dial`], saying how it failed.
async fn dial_patiently(addr: SocketAddr, token: &Token) -> Result<TcpStream, (Dial, String)> {
    let mut pauses = BUSY_BACKOFF.iter();
    let mut tries = 0;
    loop {
        tries += 1;
        match dial_once(addr, token).await {
            Err((Dial::Busy, why)) => match pauses.next() {
                Some(pause) => tokio::time::sleep(*pause).await,
                None => return Err((Dial::Busy, busy_words(tries, &why))),
            },
            r => return r,
        }
    }
}

/// How often a refused dial is tried again.
const REDIAL: std::time::Duration = std::time::Duration::from_millis(500);

/// [`dial`], trying again every half second while the connection is refused (a pod that is not
/// listening yet, a Service with no ready endpoint yet) until `until`: a Job started beside its
/// agents waits for them. Any other failure is final.
pub async fn dial_until(addr: SocketAddr, token: &Token, until: tokio::time::Instant) -> Result<TcpStream, String> {
    let mut said = false;
    loop {
        match dial_patiently(addr, token).await {
            Err((Dial::Refused, why)) if tokio::time::Instant::now() + REDIAL < until => {
                if !said {
                    tracing::warn!(%addr, "{why}: trying again until --wait-agents runs out");
                    said = true;
                }
                tokio::time::sleep(REDIAL).await
            }
            r => return r.map_err(|(_, why)| why),
        }
    }
}

/// How one dial failed: the connection refused (nobody listening yet), the handshake closed or
/// refused by a busy agent, or for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dial {
    Refused,
    Busy,
    Failed,
}

/// One dial: the connection, or how and why it failed.
async fn dial_once(addr: SocketAddr, token: &Token) -> Result<TcpStream, (Dial, String)> {
    let connect = async {
        let mut s = TcpStream::connect(addr).await.map_err(|e| {
            let how = if e.kind() == std::io::ErrorKind::ConnectionRefused { Dial::Refused } else { Dial::Failed };
            (how, format!("cannot connect: {e}"))
        })?;
        s.set_nodelay(true).ok();
        let hs = ClientHandshake::new(Header::new(Role::Fleet, TestId::random(), 0), Some(token.clone()), true);
        nonblocking::client_handshake(&mut s, &hs)
            .await
            .map_err(|e| (if e.is_busy() { Dial::Busy } else { Dial::Failed }, e.to_string()))?;
        Ok(s)
    };
    tokio::time::timeout(CONNECT_TIMEOUT, connect).await.map_err(|_| (Dial::Failed, "no answer in time".to_string()))?
}

/// Takes a registration on the coordinator's listener: the header, the handshake (the agent
/// must prove the token, and the coordinator proves it back), role `register`.
pub async fn accept(mut s: TcpStream, token: &Token) -> Result<TcpStream, String> {
    let take = async {
        let mut hdr = [0u8; HEADER_LEN];
        tokio::io::AsyncReadExt::read_exact(&mut s, &mut hdr).await.map_err(|e| format!("no header: {e}"))?;
        let header = Header::decode(&hdr).map_err(|e| e.to_string())?;
        if let Err(e) = header.negotiate() {
            let _ = s.write_all(&wire::version_refusal(&header, &e)).await;
            return Err(e.to_string());
        }
        let wrong_role = (header.role != Role::Register)
            .then_some("this is a fleet coordinator: only agents registering (serve --register) connect here");
        let session =
            nonblocking::server_handshake(&mut s, &header, &hdr, Some(token), wrong_role).await.map_err(|r| r.why)?;
        if !session.authenticated {
            return Err("the agent did not authenticate".into());
        }
        s.set_nodelay(true).ok();
        Ok(s)
    };
    tokio::time::timeout(CONNECT_TIMEOUT, take).await.map_err(|_| "registration not completed in time".to_string())?
}

async fn read(s: &mut TcpStream) -> Result<(AgentMsg, Vec<u8>), String> {
    let raw = tokio::time::timeout(REPLY_TIMEOUT, nonblocking::read_frame_bytes(s))
        .await
        .map_err(|_| format!("no answer within {}s", REPLY_TIMEOUT.as_secs()))?
        .map_err(|e| e.to_string())?
        .ok_or_else(|| "the agent closed the connection".to_string())?;
    let msg = wire::decode_body(&raw).map_err(|e| e.to_string())?;
    Ok((msg, raw))
}

/// The agent's hello and its clock (the least-delay of [`CLOCK_SAMPLES`] exchanges).
async fn introduce(s: &mut TcpStream) -> Result<(AgentHello, ClockInfo), String> {
    let hello = match read(s).await?.0 {
        AgentMsg::Hello(h) => *h,
        other => return Err(format!("expected a hello, got {other:?}")),
    };
    let mut samples = Vec::with_capacity(CLOCK_SAMPLES);
    for _ in 0..CLOCK_SAMPLES {
        let t1 = now_ns();
        nonblocking::write_frame(s, &CoordMsg::ClockProbe { t1 }).await.map_err(|e| e.to_string())?;
        let (msg, _) = read(s).await?;
        let t4 = now_ns();
        match msg {
            AgentMsg::ClockReply { t1: echo, t2, t3 } if echo == t1 => samples.push(ClockSample { t1, t2, t3, t4 }),
            other => return Err(format!("expected a clock reply, got {other:?}")),
        }
    }
    let clock = fleet::checked_clock(&samples)?;
    Ok((hello, clock))
}

/// Runs a session over an authenticated connection until the coordinator drops `cmds` (after
/// sending `Bye`) or the connection ends.
pub async fn run(
    agent: usize,
    mut s: TcpStream,
    events: mpsc::UnboundedSender<Event>,
    mut cmds: mpsc::UnboundedReceiver<CoordMsg>,
) {
    match introduce(&mut s).await {
        Ok((hello, clock)) => {
            if events.send(Event::Ready { agent, hello: Box::new(hello), clock }).is_err() {
                return;
            }
        }
        Err(why) => {
            let _ = events.send(Event::Gone { agent, why });
            return;
        }
    }
    let (mut rd, mut wr) = s.into_split();
    let why = loop {
        tokio::select! {
            cmd = cmds.recv() => match cmd {
                Some(msg) => {
                    let bye = msg == CoordMsg::Bye;
                    if let Err(e) = nonblocking::write_frame(&mut wr, &msg).await {
                        break format!("cannot send to the agent: {e}");
                    }
                    if bye {
                        let _ = wr.shutdown().await;
                        return;
                    }
                }
                None => return,
            },
            frame = nonblocking::read_frame_bytes(&mut rd) => match frame {
                Ok(Some(raw)) => {
                    let at_ns = now_ns();
                    match wire::decode_body::<AgentMsg>(&raw) {
                        Ok(msg) => {
                            if events.send(Event::Frame { agent, msg: Box::new(msg), raw, at_ns }).is_err() {
                                return;
                            }
                        }
                        Err(e) => break format!("malformed frame: {e}"),
                    }
                }
                Ok(None) => break "the agent closed the connection".to_string(),
                Err(e) => break format!("connection lost: {e}"),
            },
        }
    };
    let _ = events.send(Event::Gone { agent, why });
}
