//! `serve` as a fleet agent: a coordinator that proves the token may order it to originate a
//! test (a profile against a target, from a given start instant). The agent
//!
//! - takes orders only over an authenticated session (a `serve` without a token refuses them);
//! - runs an order only toward a target inside its allowlist (default: the networks of its own
//!   interfaces and loopback; `--allow CIDR`), and refuses it otherwise, saying why;
//! - logs every order: which coordinator, what test, toward where;
//! - runs at most [`MAX_ORDERS`] orders at once (a client agent of a `spread` or `mesh` fleet
//!   runs one per server), each with the engine's own bounds (the profile's time bound and
//!   grace), and stops the traffic it originates when the coordinator's connection is gone;
//! - streams every interval as it is released, then the whole result.
//!
//! Sessions come from a coordinator that dialed the data port (role `fleet`) or from this
//! agent dialing a coordinator (`serve --register`, role `register`): after the handshake both
//! run [`session`].

use crate::shared::{OrderSlot, Shared};
use netblast_engine::exec::api::{Live, RunOptions};
use netblast_engine::exec::worker::RunFlags;
use netblast_spec::fleet::{AgentHello, AgentMsg, CoordMsg, Order};
use netblast_spec::plan;
use netblast_spec::result::AgentInfo;
use netblast_spec::units::Cidr;
use netblast_wire::wire::{self, nonblocking};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{Mutex, mpsc, watch};

/// Most orders one agent runs at once, over all its coordinators' sessions.
pub const MAX_ORDERS: usize = 64;

/// Interval frames an agent may queue for a coordinator that reads slowly; beyond that they
/// are dropped (and counted): the final result carries every interval anyway.
pub const INTERVAL_BACKLOG: usize = 256;

type Writer<S> = Arc<Mutex<tokio::io::WriteHalf<S>>>;

async fn send<S: AsyncWrite>(w: &Writer<S>, msg: &AgentMsg) -> std::io::Result<()> {
    let frame = wire::encode_frame(msg);
    w.lock().await.write_all(&frame).await
}

/// The order running now, if any.
struct Running {
    id: u32,
    flags: Arc<RunFlags>,
    done: tokio::task::JoinHandle<()>,
}

/// Runs one authenticated fleet session until the coordinator says bye, goes away, or `stop`.
pub async fn session<S>(conn: S, peer: SocketAddr, shared: Arc<Shared>, mut stop: watch::Receiver<bool>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut rd, wr) = tokio::io::split(conn);
    let wr: Writer<S> = Arc::new(Mutex::new(wr));
    let cfg = &shared.agent;
    let allow = cfg.allowlist();
    let host = netblast_engine::os::sys::host_info();
    let mut addresses: Vec<IpAddr> = netblast_engine::os::sys::interfaces()
        .unwrap_or_default()
        .into_iter()
        .map(|(a, _)| a)
        .filter(|a| !matches!(a, IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80))
        .collect();
    addresses.dedup();
    // Bound to one address: that is the only one clients can reach it at.
    if let Some(ip) = cfg.data_ip {
        addresses = vec![ip];
    }
    let hello = AgentHello {
        agent: AgentInfo {
            hostname: host.hostname.clone(),
            id: netblast_engine::exec::api::agent_id().to_string(),
            address: String::new(),
        },
        host,
        data_port: cfg.data_port,
        http_port: cfg.http_port,
        https_port: cfg.https_port,
        addresses,
        group: cfg.group.clone(),
        allow: allow.iter().map(|c| c.to_string()).collect(),
        version: env!("CARGO_PKG_VERSION").to_string(),
    };
    if send(&wr, &AgentMsg::Hello(Box::new(hello))).await.is_err() {
        return;
    }
    tracing::info!(%peer, "fleet session opened");
    let mut running: Vec<Running> = Vec::new();
    let why = loop {
        let frame = tokio::select! {
            f = nonblocking::read_frame_bytes(&mut rd) => f,
            _ = stop.changed() => break "this serve is shutting down".to_string(),
        };
        let t2 = netblast_engine::exec::clock::now_unix_ns();
        let frame = match frame {
            Ok(Some(bytes)) => match wire::decode_body::<CoordMsg>(&bytes) {
                Ok(msg) => Ok(Some(msg)),
                Err(e) => match undecodable(&bytes, &e) {
                    // A whole frame was read: the order is refused with the reason, the
                    // session goes on.
                    Some(refusal) => {
                        tracing::warn!(%peer, "refused fleet order: {e}");
                        if send(&wr, &refusal).await.is_err() {
                            break "the coordinator's connection failed".into();
                        }
                        continue;
                    }
                    None => break format!("the coordinator sent a frame that does not decode: {e}"),
                },
            },
            Ok(None) => Ok(None),
            Err(e) => Err(e),
        };
        match frame {
            Ok(Some(CoordMsg::ClockProbe { t1 })) => {
                // t3 as late as possible: just before the reply is written.
                let mut w = wr.lock().await;
                let t3 = netblast_engine::exec::clock::now_unix_ns();
                if w.write_all(&wire::encode_frame(&AgentMsg::ClockReply { t1, t2, t3 })).await.is_err() {
                    break "the coordinator's connection failed".into();
                }
            }
            Ok(Some(CoordMsg::Order(order))) => {
                running.retain(|r| !r.done.is_finished());
                let slot = if running.iter().any(|r| r.id == order.id) {
                    Err(format!("order {} is already running", order.id))
                } else {
                    OrderSlot::take(&shared.orders, MAX_ORDERS).map_err(|n| {
                        format!("{n} orders are running on this agent: the most it runs at once ({MAX_ORDERS})")
                    })
                };
                let slot = match slot {
                    Ok(slot) => slot,
                    Err(reason) => {
                        tracing::warn!(%peer, order = order.id, "refused fleet order: {reason}");
                        let _ = send(&wr, &AgentMsg::Refused { id: order.id, reason }).await;
                        continue;
                    }
                };
                match check_order(&order, &allow) {
                    Err(reason) => {
                        tracing::warn!(%peer, order = order.id, target = %order.target, "refused fleet order: {reason}");
                        let _ = send(&wr, &AgentMsg::Refused { id: order.id, reason }).await;
                    }
                    Ok(()) => {
                        tracing::info!(
                            %peer, order = order.id, label = %order.label, target = %order.target,
                            test = %order.profile.workload.describe(&order.profile.run),
                            "fleet order: originating a test"
                        );
                        if send(&wr, &AgentMsg::Accepted { id: order.id }).await.is_err() {
                            break "the coordinator's connection failed".into();
                        }
                        running.push(start(*order, peer, &shared, wr.clone(), slot));
                    }
                }
            }
            Ok(Some(CoordMsg::Cancel { reason })) => {
                for r in &running {
                    tracing::info!(%peer, order = r.id, "fleet order cancelled: {}", netblast_engine::exec::api::escape(&reason));
                    r.flags.interrupt();
                }
            }
            Ok(Some(CoordMsg::Bye)) => break "the coordinator said bye".into(),
            Ok(None) => break "the coordinator closed the connection".into(),
            Err(e) => break format!("the coordinator's connection failed: {e}"),
        }
    };
    // A dead or departed coordinator never leaves traffic running.
    for r in &running {
        if !r.done.is_finished() {
            tracing::warn!(%peer, order = r.id, "stopping the test: {why}");
            r.flags.stop();
        }
    }
    for r in running {
        let _ = r.done.await;
    }
    tracing::info!(%peer, "fleet session closed: {why}");
}

/// The answer to a frame that does not decode (too deep, a field twice, a list past its
/// bound): a refusal of the order it names, with the reason; `None` if it names none.
fn undecodable(bytes: &[u8], e: &dyn std::fmt::Display) -> Option<AgentMsg> {
    let id = netblast_spec::fleet::order_named(bytes)?;
    Some(AgentMsg::Refused { id, reason: format!("the order does not decode: {e}") })
}

/// Whether an order may run here: a valid profile, a start instant the agent will wait for,
/// and every address it sends to inside the allowlist.
pub fn check_order(order: &Order, allow: &[Cidr]) -> Result<(), String> {
    order.profile.validate("the order's profile").map_err(|e| e.to_string())?;
    use netblast_engine::exec::clock::{self, StartError};
    if let Err(e @ StartError::TooFar { .. }) = clock::instant_at(order.start_at_unix_ns, Duration::ZERO) {
        return Err(format!("start_at_unix_ns: {e}"));
    }
    if let Some((field, instead)) = order.profile.workload.section().host_path() {
        return Err(format!("{field}: an agent opens no path a peer names; {instead}"));
    }
    for (t, port) in order.profile.workload.section().dial_targets(&order.target, plan::DEFAULT_PORT) {
        let addrs = plan::resolve_all(&t, port).map_err(|e| e.to_string())?;
        if let Some(a) = addrs.iter().find(|a| !allow.iter().any(|n| n.contains(a.ip()))) {
            let list: Vec<String> = allow.iter().map(|n| n.to_string()).collect();
            return Err(format!("target {t} ({}) is outside this agent's allowlist ({})", a.ip(), list.join(", ")));
        }
    }
    Ok(())
}

/// Starts an accepted order on a thread of its own; its frames go to the coordinator.
fn start<S>(order: Order, peer: SocketAddr, shared: &Arc<Shared>, wr: Writer<S>, slot: OrderSlot) -> Running
where
    S: AsyncWrite + Send + 'static,
{
    let flags = RunFlags::new();
    let (tx, mut rx) = mpsc::channel::<AgentMsg>(INTERVAL_BACKLOG);
    let id = order.id;
    let probe = shared.probe.clone();
    let token = shared.access.token.clone();
    let run_flags = flags.clone();
    let dropped = Arc::new(AtomicU64::new(0));
    let dropped_in = dropped.clone();
    let runner = std::thread::Builder::new().name(format!("netblast-order{id}")).spawn(move || {
        // The order holds its place until its thread ends.
        let _slot = slot;
        let outcome = (|| {
            let origin = format!("fleet order {id} ({}) from {peer}", order.label);
            let mut req = netblast_engine::run::Request::new(order.profile, origin, order.target);
            req.start_at_unix_ns = Some(order.start_at_unix_ns);
            let r = netblast_engine::run::resolve(req).map_err(|e| e.to_string())?;
            let (p, addr) = (r.plan, r.peer);
            let opts = RunOptions { token, clock: order.clock };
            let mut live = |ev: Live<'_>| {
                let msg = match ev {
                    Live::Started { start_unix_ns, actual_start_unix_ns, .. } => {
                        AgentMsg::Started { id, start_unix_ns, actual_start_unix_ns }
                    }
                    Live::Interval(iv) => AgentMsg::Interval { id, interval: Box::new(iv.clone()) },
                    // The probe's figures travel in the final result.
                    Live::Probe(_) => return,
                };
                if tx.try_send(msg).is_err() {
                    dropped_in.fetch_add(1, Ordering::Relaxed);
                }
            };
            netblast_engine::run::run(&p, addr, &probe, &run_flags, &opts, &mut live).map_err(|e| e.to_string())
        })();
        let last = match outcome {
            Ok(result) => AgentMsg::Final { id, result: Box::new(result) },
            Err(error) => AgentMsg::Failed { id, error },
        };
        let _ = tx.blocking_send(last);
    });
    let done = tokio::spawn(async move {
        while let Some(msg) = rx.recv().await {
            if send(&wr, &msg).await.is_err() {
                break;
            }
        }
        let n = dropped.load(Ordering::Relaxed);
        if n > 0 {
            tracing::warn!(%peer, order = id, "dropped {n} interval frames: the coordinator read too slowly");
        }
    });
    if let Err(e) = runner {
        tracing::warn!(%peer, order = id, "cannot start the order's thread: {e}");
    }
    Running { id, flags, done }
}

/// How long a registering agent waits before dialing again, at most.
pub const REGISTER_BACKOFF_MAX: Duration = Duration::from_secs(30);

/// `serve --register COORD`: dials the coordinator, proves the token (and checks the
/// coordinator's proof), and serves its orders; dials again after a failure or the end of a
/// session, with backoff, until `stop`.
pub async fn register(coordinator: String, shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let Some(token) = shared.access.token.clone() else {
        tracing::error!(
            "--register needs --token-file: orders are taken only from a coordinator that proves the token"
        );
        return;
    };
    let mut backoff = Duration::from_secs(1);
    loop {
        let attempt = async {
            let addr = plan::resolve_target(&coordinator, plan::DEFAULT_PORT).map_err(|e| e.to_string())?;
            let mut conn = tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(addr))
                .await
                .map_err(|_| format!("no answer from {addr}"))?
                .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
            conn.set_nodelay(true).ok();
            let header = wire::Header::new(wire::Role::Register, wire::TestId::random(), 0);
            let hs = wire::ClientHandshake::new(header, Some(token.clone()), true);
            tokio::time::timeout(Duration::from_secs(10), nonblocking::client_handshake(&mut conn, &hs))
                .await
                .map_err(|_| format!("{addr}: no handshake in time"))?
                .map_err(|e| format!("{addr}: {e}"))?;
            Ok::<_, String>((conn, addr))
        };
        match attempt.await {
            Ok((conn, addr)) => {
                tracing::info!(coordinator = %addr, "registered with the coordinator");
                backoff = Duration::from_secs(1);
                session(conn, addr, shared.clone(), stop.clone()).await;
            }
            Err(e) => tracing::warn!(coordinator = %coordinator, "cannot register: {e}; retrying in {backoff:?}"),
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stop.changed() => return,
        }
        backoff = (backoff * 2).min(REGISTER_BACKOFF_MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netblast_spec::result::ClockInfo;

    fn order(kind: &str, target: &str, urls: Option<&str>) -> Order {
        let (mut profile, _) = netblast_spec::Profile::load(kind).unwrap();
        if let (Some(u), Some(h)) = (urls, profile.workload.http_mut()) {
            h.urls = vec![u.to_string()];
        }
        Order {
            id: 1,
            profile,
            target: target.into(),
            start_at_unix_ns: 0,
            clock: ClockInfo::default(),
            label: String::new(),
        }
    }

    #[test]
    fn targets_outside_the_allowlist_are_refused() {
        let allow: Vec<Cidr> = vec!["10.9.0.0/16".parse().unwrap(), "127.0.0.0/8".parse().unwrap()];
        assert!(check_order(&order("bulk-1flow", "10.9.3.4:5210", None), &allow).is_ok());
        assert!(check_order(&order("bulk-1flow", "127.0.0.1", None), &allow).is_ok());
        let e = check_order(&order("bulk-1flow", "10.10.0.1:5210", None), &allow).unwrap_err();
        assert!(e.contains("10.10.0.1") && e.contains("allowlist") && e.contains("10.9.0.0/16"), "{e}");
        // http: absolute URLs carry their own hosts; paths go to the target.
        assert!(check_order(&order("http-max", "10.9.0.1:80", Some("/")), &allow).is_ok());
        let e = check_order(&order("http-max", "10.9.0.1:80", Some("http://192.0.2.7:8080/x")), &allow).unwrap_err();
        assert!(e.contains("192.0.2.7"), "{e}");
    }

    #[test]
    fn an_order_that_names_a_file_is_refused_and_a_body_travels_as_data_within_its_cap() {
        // Found in the audit: `http.body_file = "/etc/shadow"` had every agent read it as root.
        let allow: Vec<Cidr> = vec!["127.0.0.0/8".parse().unwrap()];
        let mut o = order("http-max", "127.0.0.1:80", Some("/"));
        let h = o.profile.workload.http_mut().unwrap();
        h.method = "POST".into();
        h.body_file = Some("/etc/shadow".into());
        let e = check_order(&o, &allow).unwrap_err();
        assert!(e.contains("http.body_file") && e.contains("opens no path"), "{e}");
        let h = o.profile.workload.http_mut().unwrap();
        h.body_file = None;
        h.body = Some("x".repeat(1000));
        assert!(check_order(&o, &allow).is_ok());
        o.profile.workload.http_mut().unwrap().body = Some("x".repeat(netblast_spec::profile::MAX_BODY as usize + 1));
        let e = check_order(&o, &allow).unwrap_err();
        assert!(e.contains("http.body") && e.contains("limit"), "{e}");
    }

    #[test]
    fn the_default_allowlist_is_this_hosts_networks() {
        let a = crate::config::AgentConfig::default().allowlist();
        assert!(a.iter().any(|n| n.contains("127.0.0.1".parse().unwrap())));
        assert!(!a.iter().any(|n| n.contains("8.8.8.8".parse().unwrap())), "{a:?}");
    }
}
