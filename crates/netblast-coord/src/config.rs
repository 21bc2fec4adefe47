//! What a fleet is given and what it reports: its settings, why it could not run, the events
//! it reports while it runs, its time bounds, where its frame log goes by default.

use crate::agents::AgentSource;
use crate::pairing::Pairing;
use netblast_spec::fleet::FleetInterval;
use netblast_spec::profile::Profile;
use netblast_spec::result::{ClockInfo, Interval};
use netblast_wire::auth::Token;
use std::path::PathBuf;
use std::time::Duration;

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
    /// One test's final result, taken for the fleet's.
    TestDone {
        /// The client agent's address.
        agent: &'a str,
        /// Its result.
        result: &'a netblast_spec::RunResult,
    },
}

/// Where the coordinator's live events go.
pub type LiveSink<'a> = &'a mut (dyn for<'b> FnMut(FleetEvent<'b>) + Send);

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
