//! The one run sequence of every test, whatever it aims at: a data-port test against
//! `netblast serve` (`run::client`), a cps test against any listener (`run::agentless`), an
//! HTTP test against any HTTP server (`kinds::http`). Each is a [`Generator`]: what differs
//! between them is what each step does, never the steps.
//!
//! 1. Set-up (the generator's constructor): whatever the test needs before its start (a
//!    control connection and streams, resolved URLs), its workers spawned and waiting at a
//!    start gate.
//! 2. The start instant ([`crate::exec::start::begin`]), a last step before it
//!    ([`Generator::before_start`]), the wait, the gate opened; the live view told; the
//!    generator's step at the start ([`Generator::at_start`]). A failure up to here stops the
//!    workers ([`Generator::abandon`]) and is returned: nothing was measured.
//! 3. Collect ([`collect`]): the generator is its own collector.
//! 4. Stop ([`Generator::stop`]): the workers stopped and joined, what they sent meanwhile taken.
//! 5. The result ([`Generator::result`]): from here on everything, a failure too, is in it.

use crate::exec::api::{ClientError, Live};
use crate::exec::collect::collect;
use crate::exec::generator::{Ending, Generator};
use crate::exec::start::begin;
use crate::exec::worker::RunFlags;
use netblast_spec::result::{Plan, RunResult};
use std::sync::mpsc;

/// Runs a set-up test `g` whose workers send on `rx`: started together at the start instant,
/// collected, stopped, its result made. Errors before the start are returned.
pub fn sequence<G: Generator>(
    plan: &Plan,
    mut g: G,
    rx: mpsc::Receiver<G::Msg>,
    flags: &RunFlags,
    live: &mut dyn FnMut(Live<'_>),
) -> Result<RunResult, ClientError> {
    let gate = g.gate();
    let started = match begin(plan, G::LEAD, &gate, || g.before_start()) {
        Ok(s) => s,
        Err(e) => {
            g.abandon();
            return Err(e);
        }
    };
    let test_id = g.test_id();
    let (server, streams) = g.shown();
    let (start_unix_ns, actual_start_unix_ns) = (started.start_unix_ns, started.actual_start_unix_ns);
    live(Live::Started { plan, test_id: &test_id, server, streams, start_unix_ns, actual_start_unix_ns });
    if let Err(e) = g.at_start(started.at) {
        g.abandon();
        return Err(e);
    }
    collect(&rx, &mut g, live);
    let mut end = Ending { cpu: started.thread_cpu(), load: started.host_load(), interrupted_at: None };
    g.stop(&rx, live);
    end.interrupted_at = flags.interrupted().then(|| started.elapsed_s());
    Ok(g.result(&started, end, live))
}
