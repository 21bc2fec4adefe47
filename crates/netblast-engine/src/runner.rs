//! One entry point for every kind: a data-port test against `netblast serve`, or an HTTP test
//! against any HTTP server.

use crate::api::{ClientError, Live, RunOptions};
use crate::worker::RunFlags;
use netblast_probe::Probe;
use netblast_spec::result::{Plan, RunResult};
use std::net::SocketAddr;
use std::sync::Arc;

/// Runs `plan` (`peer` is the resolved data-port address; unused by http, which resolves its
/// URLs). Errors before the start are returned; after the start everything goes into the
/// result.
pub fn run(
    plan: &Plan,
    peer: SocketAddr,
    probe: &Probe,
    flags: &Arc<RunFlags>,
    opts: &RunOptions,
    live: &mut dyn FnMut(Live<'_>),
) -> Result<RunResult, ClientError> {
    if plan.profile.workload.is_http() {
        crate::http::run(plan, probe, flags, opts, live)
    } else {
        crate::client::run(plan, peer, probe, flags, opts, live)
    }
}

/// Plans `profile` against `target` on the CPUs this process may use and runs it, with no
/// live output: what tests, benches and agents do.
pub fn plan_and_run(
    profile: netblast_spec::Profile,
    origin: &str,
    target: &str,
    probe: &Probe,
    opts: &RunOptions,
) -> Result<RunResult, ClientError> {
    let allowed = crate::sys::allowed_cpus()
        .map_err(|e| ClientError::Io { what: "cannot read this process's CPU affinity".into(), error: e })?;
    let (plan, peer) = netblast_spec::plan::plan(profile, origin.to_string(), target, &allowed, false)?;
    run(&plan, peer, probe, &RunFlags::new(), opts, &mut |_| {})
}
