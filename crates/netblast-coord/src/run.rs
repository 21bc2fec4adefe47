//! `netblast fleet`: connect the agents, measure their clocks, pair clients with servers, order
//! every test to start at one instant T0, stream and log what comes back, merge it exactly.
//!
//! The phases: [`Roster::connect`] (1: agents dialed and registered, each introduced and
//! clocked), [`Roster::pair`] (2: the tests), [`Collect::order`] (3: T0 and the orders),
//! [`Collect::collect`] (4: frames logged and gathered, failures found), [`Collect::result`]
//! (5: the exact merge and every agent's status).

use crate::collect::Collect;
use crate::config::{FleetConfig, FleetError, LiveSink};
use crate::roster::Roster;
use netblast_spec::result::RunResult;
use std::future::Future;
use tokio::net::TcpListener;

/// Runs a fleet. `listener` takes registering agents; `shutdown` (Ctrl-C) cancels every test
/// and keeps what was measured. The result's `summary` is the fleet's exact merge; `agents`
/// lists every agent with its status; `parts` every test that sent a result.
pub async fn run(
    cfg: FleetConfig,
    listener: Option<TcpListener>,
    shutdown: impl Future<Output = ()>,
    live: LiveSink<'_>,
) -> Result<RunResult, FleetError> {
    tokio::pin!(shutdown);
    let mut roster = Roster::new(&cfg, live, listener.is_some())?;
    roster.connect(listener, &mut shutdown).await;
    let tests = roster.pair()?;
    let mut fleet = Collect::order(roster, tests)?;
    fleet.collect(&mut shutdown).await;
    fleet.result()
}
