//! The generators, one module per kind, and one end of a test: [`spawn`] turns connected
//! streams into the right kind's workers, on either side. The client and `serve` both call it;
//! only the roles differ (for an `up` stream the client sends and the server receives; rr
//! clients ask and servers answer).
//!
//! A kind plugs in here: its module (its configuration, its `spawn(end, section, conns)`, its
//! worker's `run_worker(seat, flow, config, ctx)`), and one arm of [`spawn`]. What a kind's
//! flows are made of is [`flow`]'s.

pub mod bulk;
pub mod cps;
pub mod flow;
pub mod hold;
pub mod http;
pub mod msgrate;
pub mod rr;

pub use flow::{Conn, End, FlowRole, ListenerEnd, MsgFlow, MsgSocket, Side, listen_on};
use netblast_spec::profile::{Profile, Workload};
use std::io;
use std::thread::JoinHandle;

pub use crate::exec::worker::{Ctx, Timing};

/// Spawns this end's workers for `conns`: each kind spawns its own (bulk streams spread
/// round-robin over one worker per entry of `bulk_cpus`, pinned where `Some`; single-flow kinds
/// one worker per stream, pinned to the stream's `cpu`). Returns the workers' handles, in
/// worker-index order.
pub fn spawn(
    side: Side,
    profile: &Profile,
    timing: Timing,
    conns: Vec<Conn>,
    bulk_cpus: &[Option<usize>],
    ctx: &Ctx,
) -> io::Result<Vec<JoinHandle<()>>> {
    let end = End { side, profile, timing, bulk_cpus, ctx };
    match &profile.workload {
        Workload::Bulk(b) => bulk::spawn(&end, b, conns),
        Workload::Msgrate(m) => msgrate::spawn(&end, m, conns),
        Workload::Rr(r) => rr::spawn(&end, r, conns),
        Workload::Cps(c) => cps::spawn(&end, c, conns),
        Workload::Hold(h) => hold::spawn(&end, h, conns),
        Workload::Http(_) => Err(io::Error::new(io::ErrorKind::InvalidInput, "http tests have no netblast streams")),
    }
}
