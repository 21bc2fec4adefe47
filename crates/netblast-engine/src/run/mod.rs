//! One entry point for every kind: a profile resolved against this host into a plan
//! ([`resolve`]: what `netblast run`, a fleet agent's order and the tests all use), then run
//! ([`run`]): a data-port test against `netblast serve`, cps against any listener, or an HTTP
//! test against any HTTP server, each one [`sequence`](sequence::sequence) of the same steps.

pub mod agentless;
pub mod client;
pub mod latency;
pub mod sequence;

use crate::exec::api::{ClientError, Live, RunOptions};
use crate::exec::worker::RunFlags;
use netblast_probe::Probe;
use netblast_spec::result::{Plan, RunResult};
use std::net::SocketAddr;
use std::sync::Arc;

/// Runs `plan` (`peer` is the resolved data-port address; unused by http, which resolves its
/// URLs), with latency probes beside it when its profile asks ([`latency`]). Errors before
/// the start are returned; after the start everything goes into the result.
pub fn run(
    plan: &Plan,
    peer: SocketAddr,
    probe: &Probe,
    flags: &Arc<RunFlags>,
    opts: &RunOptions,
    live: &mut dyn FnMut(Live<'_>),
) -> Result<RunResult, ClientError> {
    match &plan.profile.run.latency_probe {
        Some(lp) => latency::run(plan, peer, probe, flags, opts, live, lp),
        None => run_load(plan, peer, probe, flags, opts, live),
    }
}

/// Runs `plan` alone: one [`sequence`](sequence::sequence) whose generator is an HTTP test,
/// cps with no agent, or a data-port test against `netblast serve`.
fn run_load(
    plan: &Plan,
    peer: SocketAddr,
    probe: &Probe,
    flags: &Arc<RunFlags>,
    opts: &RunOptions,
    live: &mut dyn FnMut(Live<'_>),
) -> Result<RunResult, ClientError> {
    // An agent's probe is attached only while a test holds it: from before any connection of
    // the test is made (an open loop's unloaded request too) until its result is made.
    let _attached = probe.hold().map_err(|e| ClientError::of_probe("cannot attach the eBPF probe", e))?;
    if plan.profile.workload.aims_at_urls() {
        let (g, rx) = crate::kinds::http::HttpTest::set_up(plan, probe, flags, opts)?;
        sequence::sequence(plan, g, rx, flags, live)
    } else if plan.profile.workload.agentless() {
        agentless::run(plan, peer, probe, flags, opts, live)
    } else {
        crate::run::client::run(plan, peer, probe, flags, opts, live)
    }
}

/// What a run is asked to be, before it is resolved against this host: a validated profile
/// (see `netblast_spec::Overrides::profile`), a target, and the settings that are not the
/// profile's.
#[derive(Debug, Clone)]
pub struct Request {
    /// The validated profile.
    pub profile: netblast_spec::Profile,
    /// Where it came from, for the result.
    pub origin: String,
    /// `HOST[:PORT]` of the `netblast serve` (empty for http with absolute URLs).
    pub target: String,
    /// The CPU list came from `--cpus` (strict) rather than the profile.
    pub cpus_from_flag: bool,
    /// The common start instant (UTC ns), if one was given.
    pub start_at_unix_ns: Option<u64>,
    /// Where the client's sockets leave from.
    pub bind: netblast_spec::result::Binding,
}

impl Request {
    /// A request for `profile` against `target` with nothing else set.
    pub fn new(profile: netblast_spec::Profile, origin: impl Into<String>, target: impl Into<String>) -> Request {
        Request {
            profile,
            origin: origin.into(),
            target: target.into(),
            cpus_from_flag: false,
            start_at_unix_ns: None,
            bind: Default::default(),
        }
    }
}

/// A request resolved against this host: the plan (with what resolving changed in its notes,
/// the client's socket buffers among them) and the peer's address.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The plan.
    pub plan: Plan,
    /// The resolved data-port address (unused by http).
    pub peer: SocketAddr,
    /// What the host did to settings asked for, which a person should see before the run (a
    /// socket buffer the kernel clamped).
    pub warnings: Vec<String>,
}

/// Resolves a request: the `[tcp]` options checked on this host (a congestion control it
/// lacks is bad input; the buffer sizes the kernel applied go into the plan's notes), the
/// binding checked, the target resolved, the CPUs this process may use, the start instant.
pub fn resolve(req: Request) -> Result<Resolved, ClientError> {
    let mut warnings = Vec::new();
    let mut notes = Vec::new();
    if !req.profile.workload.aims_at_urls() {
        let applied = crate::os::sockopt::check(&req.profile.tcp, req.profile.workload.nodelay_default())
            .map_err(|e| ClientError::Setting(e.to_string()))?;
        for b in applied {
            if b.clamped() {
                warnings.push(b.describe());
            }
            notes.push(format!("client socket buffer: {}", b.describe()));
        }
    }
    if let (Some(o), Some(d)) = (req.profile.run.omit, req.profile.run.duration) {
        notes.push(format!(
            "--omit {o}: the first {o} run before the test's {d} and are left out of its totals (iperf3 -O), \
             their intervals marked (omitted); CPU, RTT samples and spurious retransmissions still cover them"
        ));
    }
    if !req.bind.is_empty() {
        crate::os::sockopt::check_binding(&req.bind).map_err(|e| ClientError::Setting(e.to_string()))?;
    }
    let allowed = crate::os::sys::allowed_cpus()
        .map_err(|e| ClientError::Io { what: "cannot read this process's CPU affinity".into(), error: e })?;
    let (mut plan, peer) =
        netblast_spec::plan::plan(req.profile, req.origin, &req.target, &allowed, req.cpus_from_flag)?;
    plan.notes.extend(notes);
    plan.start_at_unix_ns = req.start_at_unix_ns;
    if let Some(room) = req.bind.capacity() {
        let flows = netblast_spec::plan::stream_setups(&plan).len();
        if room < flows {
            return Err(ClientError::Setting(format!(
                "--cport: {} ({room} source address and port pairs) is smaller than the test's {flows} connections: \
                 give a range of {} ports or more",
                req.bind.describe(),
                flows.div_ceil(req.bind.addrs.len().max(1))
            )));
        }
    }
    plan.bind = req.bind;
    Ok(Resolved { plan, peer, warnings })
}

/// Resolves `profile` against `target` and runs it, with no live output: what tests and
/// benches do.
pub fn plan_and_run(
    profile: netblast_spec::Profile,
    origin: &str,
    target: &str,
    probe: &Probe,
    opts: &RunOptions,
) -> Result<RunResult, ClientError> {
    let r = resolve(Request::new(profile, origin, target))?;
    run(&r.plan, r.peer, probe, &RunFlags::new(), opts, &mut |_| {})
}
