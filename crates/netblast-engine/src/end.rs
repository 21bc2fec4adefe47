//! One end of a test: turns connected streams into the right generator's workers, on either
//! side. The client and `serve` both call [`spawn`]; only the roles differ (for an `up` stream
//! the client sends and the server receives; rr clients ask and servers answer).

use crate::bulk::{self, BulkConfig, BulkFlow, FlowRole};
use crate::cps::{self, CpsConfig, CpsEnd};
use crate::msgrate::{self, MsgConfig, MsgFlow, MsgSocket};
use crate::rr::{self, RrConfig};
use crate::worker::{self, Seat};
use netblast_spec::plan::split_budget;
use netblast_spec::profile::{Profile, Way, Workload};
use std::io;
use std::net::{TcpStream, UdpSocket};
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
    /// A cps flow's other end: where its connections go (client), its listener (server).
    pub cps: Option<CpsEnd>,
    /// CPU to pin this stream's worker to (message kinds: one worker per stream).
    pub cpu: Option<usize>,
}

pub use crate::worker::Ctx;
pub use crate::worker::Timing;

fn role(side: Side, way: Way) -> FlowRole {
    match (side, way) {
        (Side::Client, Way::Up) | (Side::Server, Way::Down) => FlowRole::Send,
        _ => FlowRole::Recv,
    }
}

/// Spawns this end's workers for `conns`. Bulk streams are spread round-robin over one worker
/// per entry of `bulk_cpus` (pinned where `Some`); message kinds get one worker per stream,
/// pinned to the stream's `cpu`. Returns the workers' handles, in worker-index order.
pub fn spawn(
    side: Side,
    profile: &Profile,
    timing: Timing,
    conns: Vec<Conn>,
    bulk_cpus: &[Option<usize>],
    ctx: &Ctx,
) -> io::Result<Vec<JoinHandle<()>>> {
    let interval = profile.run.interval();
    match &profile.workload {
        Workload::Bulk(b) => {
            let senders = conns.iter().filter(|c| role(side, c.way) == FlowRole::Send).count() as u64;
            let mut rank = 0u64;
            let mut flows = Vec::with_capacity(conns.len());
            for c in conns {
                let role = role(side, c.way);
                let budget = match (role, b.bytes) {
                    (FlowRole::Send, Some(total)) => {
                        rank += 1;
                        Some(split_budget(total.bytes(), senders, rank - 1))
                    }
                    _ => None,
                };
                flows.push(BulkFlow { id: c.id, stream: c.tcp, role, budget });
            }
            let cfg = Arc::new(BulkConfig {
                block: b.block_bytes.bytes() as usize,
                send_mode: b.send_mode,
                interval,
                timing,
            });
            bulk::spawn_workers(bulk::spread(flows, bulk_cpus.len().max(1)), bulk_cpus, &cfg, ctx)
        }
        Workload::Msgrate(m) => {
            let cfg = Arc::new(MsgConfig {
                msg_bytes: m.msg_bytes.bytes() as usize,
                batch: m.batch as usize,
                recv_each: m.recv == netblast_spec::profile::RecvMode::Each,
                bitrate: m.bitrate.map(|b| b.bits_per_s()),
                sequenced: m.protocol == netblast_spec::profile::Protocol::Udp
                    && m.msg_bytes.bytes() >= netblast_spec::profile::MsgrateSection::SEQ_HEADER,
                group: per_cpu_receivers(side, m, &conns)?,
                interval,
                timing,
            });
            spawn_per_flow(side, conns, ctx, move |i, pinned, flow, ctx| {
                msgrate::run_worker(Seat { index: i, pinned }, flow, &cfg, ctx)
            })
        }
        Workload::Rr(r) => {
            let cfg = Arc::new(RrConfig {
                req_bytes: r.req_bytes.bytes() as usize,
                resp_bytes: r.resp_bytes.bytes() as usize,
                wait: r.wait,
                busy_poll_us: r.busy_poll_us,
                udp_timeout: r.udp_timeout(),
                interval,
                timing,
            });
            spawn_per_flow(side, conns, ctx, move |i, pinned, flow, ctx| {
                rr::run_worker(Seat { index: i, pinned }, flow, &cfg, ctx)
            })
        }
        Workload::Cps(c) => {
            let flows = conns.len().max(1) as f64;
            let cfg = Arc::new(CpsConfig {
                req_bytes: c.req_bytes.bytes() as usize,
                resp_bytes: c.resp_bytes.bytes() as usize,
                rate: c.rate.map(|r| r.per_second() / flows),
                close: c.close,
                timeout: c.timeout(),
                tcp: profile.tcp.clone(),
                bind: ctx.bind.clone(),
                kernel_stats: ctx.probe.collects(),
                interval,
                timing,
            });
            let mut handles = Vec::with_capacity(conns.len());
            for (i, c) in conns.into_iter().enumerate() {
                let Some(end) = c.cps else {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("cps flow {} has no listener", c.id),
                    ));
                };
                let (cfg, ctx) = (cfg.clone(), ctx.clone());
                let flow = cps::CpsFlow { id: c.id, role: role(side, c.way), anchor: c.tcp, end };
                handles.push(worker::spawn(i, c.cpu, move |pinned| {
                    cps::run_worker(Seat { index: i, pinned }, flow, &cfg, &ctx)
                })?);
            }
            Ok(handles)
        }
        Workload::Http(_) => Err(io::Error::new(io::ErrorKind::InvalidInput, "http tests have no netblast streams")),
    }
}

/// The server's per-CPU receivers of a UDP msgrate test that asks for them: all its streams
/// receive (the profile allows client to server only), from the client at the other end.
fn per_cpu_receivers(
    side: Side,
    m: &netblast_spec::profile::MsgrateSection,
    conns: &[Conn],
) -> io::Result<Option<Arc<msgrate::RecvGroup>>> {
    if side != Side::Server || m.receivers != netblast_spec::profile::Receivers::PerCpu {
        return Ok(None);
    }
    let receiving = conns.iter().filter(|c| role(side, c.way) == FlowRole::Recv).count();
    let client = match conns.first() {
        Some(c) => c.tcp.peer_addr()?.ip(),
        None => return Ok(None),
    };
    Ok(Some(Arc::new(msgrate::RecvGroup::new(receiving, client))))
}

/// One pinned worker per stream (message kinds): stream i's worker runs `run` on its CPU.
fn spawn_per_flow<F>(side: Side, conns: Vec<Conn>, ctx: &Ctx, run: F) -> io::Result<Vec<JoinHandle<()>>>
where
    F: Fn(usize, worker::Pinning, MsgFlow, &Ctx) + Send + Sync + 'static,
{
    let run = Arc::new(run);
    let mut handles = Vec::with_capacity(conns.len());
    for (i, c) in conns.into_iter().enumerate() {
        let flow = MsgFlow { id: c.id, role: role(side, c.way), socket: socket_of(c.tcp, c.udp) };
        let (run, ctx, cpu) = (run.clone(), ctx.clone(), c.cpu);
        handles.push(worker::spawn(i, cpu, move |pinned| run(i, pinned, flow, &ctx))?);
    }
    Ok(handles)
}

fn socket_of(tcp: TcpStream, udp: Option<UdpSocket>) -> MsgSocket {
    match udp {
        Some(udp) => MsgSocket::Udp { udp, anchor: tcp },
        None => MsgSocket::Tcp(tcp),
    }
}
