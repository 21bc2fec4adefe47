//! The types of a run, shared by the data-port client and the http client: options in, live
//! events and errors out, and the envelope every [`RunResult`] is built in.

use crate::exec::clock;
use netblast_spec::plan::PlanError;
use netblast_spec::result::{
    AgentInfo, ClockInfo, HostInfo, Interval, Plan, ProbeInfo, RunError, RunResult, StreamInfo, Summary,
};
use netblast_wire::auth::Token;
use netblast_wire::wire::HandshakeError;
use std::io;
use std::net::SocketAddr;
use std::sync::OnceLock;

/// What a run needs besides its plan.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// The token to prove to the server (`--token-file`, `NETBLAST_TOKEN`).
    pub token: Option<Token>,
    /// This host's clock against the reference (a fleet coordinator's); local by default.
    pub clock: ClockInfo,
}

/// Errors that stop a run before it measured anything.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The plan could not be made (target, CPUs).
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The start instant cannot be used (`--start-at` in the past, or too far ahead).
    #[error(transparent)]
    Start(#[from] clock::StartError),
    /// TCP connect failed.
    #[error("cannot connect to {peer}: {why}")]
    Connect {
        /// The address.
        peer: SocketAddr,
        /// Why, in words.
        why: String,
    },
    /// The peer answered, but not as a netblast server.
    #[error("{peer} does not speak the netblast protocol: {why}")]
    NotNetblast {
        /// The address.
        peer: SocketAddr,
        /// What went wrong.
        why: String,
    },
    /// Authentication failed or is missing (bad input: exit 2).
    #[error("{peer}: {why}")]
    Auth {
        /// The address.
        peer: SocketAddr,
        /// What went wrong.
        why: String,
    },
    /// The server speaks no protocol version in common with this build.
    #[error("{peer}: {why}")]
    Version {
        /// The address.
        peer: SocketAddr,
        /// Both versions.
        why: String,
    },
    /// The server was at its limit of connections that have not proven themselves each time
    /// it was dialed (the attempts and the last failure in the words).
    #[error("{peer}: {why}")]
    Busy {
        /// The address.
        peer: SocketAddr,
        /// The attempts and the last failure.
        why: String,
    },
    /// The server refused the test.
    #[error("{peer} refused the test: {message}")]
    Refused {
        /// The address.
        peer: SocketAddr,
        /// The server's reason (shown escaped: it is the peer's text).
        message: String,
    },
    /// A setting this host cannot take (a congestion control it lacks, a `-B` address that is
    /// not its own, an interface it does not have).
    #[error("{0}")]
    Setting(String),
    /// Not enough file descriptors for the flows.
    #[error("{0}")]
    Fds(String),
    /// An HTTP test cannot start: a URL, header, body file or TLS setting does not work.
    #[error("{0}")]
    Http(String),
    /// Any other I/O failure during setup.
    #[error("{what}: {error}")]
    Io {
        /// What was being done.
        what: String,
        /// The error (in the message, not chained: it would print twice).
        error: io::Error,
    },
}

impl ClientError {
    /// Whether the error is the user's input (flags, profile, token, start time): exit 2.
    pub fn is_input(&self) -> bool {
        matches!(
            self,
            ClientError::Plan(_)
                | ClientError::Start(_)
                | ClientError::Auth { .. }
                | ClientError::Http(_)
                | ClientError::Setting(_)
        )
    }

    /// The error of setting up the eBPF probe for a run (`what` was being done).
    pub fn of_probe(what: &str, e: netblast_probe::ProbeError) -> ClientError {
        ClientError::Io { what: what.to_string(), error: io::Error::other(e.to_string()) }
    }

    /// The error of a failed handshake with `peer`.
    pub fn of_handshake(peer: SocketAddr, e: HandshakeError) -> ClientError {
        match e {
            HandshakeError::Version(v) => ClientError::Version { peer, why: v.to_string() },
            HandshakeError::NotNetblast(why) => ClientError::NotNetblast { peer, why },
            HandshakeError::Refused(message) if message.starts_with("authentication") => {
                ClientError::Auth { peer, why: escape(&message) }
            }
            HandshakeError::Refused(message) => ClientError::Refused { peer, message: escape(&message) },
            other => ClientError::Auth { peer, why: other.to_string() },
        }
    }
}

/// Text from a peer, safe to print: control characters (ESC, newlines) escaped, length capped
/// (at 2000 characters: a server's notes on its socket buffers run to about 1000).
pub fn escape(s: &str) -> String {
    const CAP: usize = 2000;
    let mut out: String = s.chars().take(CAP).flat_map(char::escape_debug).collect();
    if s.chars().count() > CAP {
        out.push_str("...");
    }
    out
}

/// What the client reports while it runs (for live output).
#[derive(Debug)]
pub enum Live<'a> {
    /// The server accepted the test and every stream is connected.
    Started {
        /// The plan.
        plan: &'a Plan,
        /// The test id.
        test_id: &'a str,
        /// The server host.
        server: &'a HostInfo,
        /// The streams.
        streams: &'a [StreamInfo],
        /// The common start instant, UTC ns.
        start_unix_ns: u64,
        /// When the start gate really opened, UTC ns (read just before it opened: woken
        /// workers may take this thread's CPU right after).
        actual_start_unix_ns: u64,
    },
    /// One interval, complete: both ends' counters and its histograms, exactly as the result
    /// will hold it.
    Interval(&'a Interval),
    /// One interval of the latency probes beside the test, on the test's time axis (its
    /// phase provisional: the load's end is known only at the end).
    Probe(&'a netblast_spec::result::ProbeInterval),
}

/// The random id of this process, reported as the agent id of its results.
pub fn agent_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| netblast_wire::wire::TestId::random().to_string()[..16].to_string())
}

/// Everything of a result that is not a measurement.
#[derive(Debug, Clone)]
pub struct Envelope {
    /// The test id.
    pub test_id: String,
    /// The common start instant, UTC ns.
    pub start_unix_ns: u64,
    /// When the start gate really opened, UTC ns.
    pub actual_start_unix_ns: u64,
    /// Clock against the reference.
    pub clock: ClockInfo,
    /// The address this host measured from.
    pub local_address: String,
    /// The server host, once it answered.
    pub server: Option<HostInfo>,
    /// Where this end's TCP statistics came from.
    pub probe: ProbeInfo,
    /// Where the server's came from.
    pub server_probe: Option<ProbeInfo>,
}

/// What was measured, to put in an [`Envelope`].
#[derive(Debug)]
pub struct Measured {
    /// Whether the run is complete.
    pub complete: bool,
    /// Errors.
    pub errors: Vec<RunError>,
    /// Warnings.
    pub warnings: Vec<RunError>,
    /// Streams.
    pub streams: Vec<StreamInfo>,
    /// Intervals.
    pub intervals: Vec<Interval>,
    /// Totals.
    pub summary: Summary,
}

impl Envelope {
    /// The result of `plan` with these measurements.
    pub fn result(self, plan: &Plan, m: Measured) -> RunResult {
        let client = crate::os::sys::host_info();
        // A tail of a few milliseconds after the last tick joins the interval before it (in
        // every rendering, since they all read these intervals); the live view skipped it.
        let mut intervals = m.intervals;
        if let Err(e) = netblast_spec::merge::fold_short_tail(&mut intervals, plan.profile.run.interval().as_secs_f64())
        {
            tracing::debug!("the short last interval stays apart: {e}");
        }
        // --omit: the first seconds ran, and are left out of the totals.
        let mut summary = m.summary;
        netblast_spec::omit::omit_start(&intervals, &mut summary, plan.profile.run.omit().as_secs_f64());
        RunResult {
            actual_start_unix_ns: Some(self.actual_start_unix_ns),
            clock: Some(self.clock),
            agent: Some(AgentInfo {
                hostname: client.hostname.clone(),
                id: agent_id().to_string(),
                address: self.local_address,
            }),
            complete: m.complete,
            errors: m.errors,
            warnings: m.warnings,
            client,
            server: self.server,
            server_probe: self.server_probe,
            ..RunResult::new(self.test_id, self.start_unix_ns, plan.clone(), self.probe, m.streams, intervals, summary)
        }
    }
}

/// The start instant of a plan: `plan.start_at_unix_ns`, else the first interval boundary of
/// the wall clock at least `lead` from now. Returns it (UTC ns) and the monotonic instant.
pub fn start_instant(plan: &Plan, lead: std::time::Duration) -> Result<(u64, std::time::Instant), ClientError> {
    let at = match plan.start_at_unix_ns {
        Some(t) => t,
        None => clock::next_boundary(clock::now_unix_ns() + lead.as_nanos() as u64, plan.profile.run.interval()),
    };
    // An instant given by the user or a coordinator may be a few ms late by the time the
    // streams are up; later than that it would shift every interval, which is an error.
    let t = clock::instant_at(at, std::time::Duration::from_millis(5))?;
    Ok((at, t))
}
