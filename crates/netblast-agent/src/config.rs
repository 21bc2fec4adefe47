//! What a server is configured with: who may use it, what one peer or test may take, its
//! fleet settings, the time bounds of a connection, and its refusal counters.

use netblast_probe::Probe;
use netblast_spec::units::Cidr;
use netblast_wire::auth::Token;
use netblast_wire::wire::Refusal;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// How long a new connection may take to send its header (and handshake).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client may take between setup and start, besides the wait for its start instant
/// ([`setup_timeout`]).
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the server waits for a test's `Start`: [`SETUP_TIMEOUT`] plus one reporting
/// interval, since a client starts at the next interval boundary of the wall clock (up to one
/// interval after its set-up). With a fixed 30 s an interval of 30 s or more had the server
/// drop the test while the client still waited for its boundary. The interval counts up to
/// [`MAX_INTERVAL`](netblast_spec::profile::MAX_INTERVAL) whatever a peer asks: a set-up holds
/// one of the server's pending slots for 90 s at most.
pub fn setup_timeout(interval: Duration) -> Duration {
    SETUP_TIMEOUT.saturating_add(interval.min(netblast_spec::profile::MAX_INTERVAL))
}
/// Server senders stop by themselves this long after the client's bound, if no `Stop` came.
pub const SEND_GRACE: Duration = Duration::from_secs(5);
/// Server receivers give up this long after the client's bound.
pub const RECV_GRACE: Duration = Duration::from_secs(30);

/// Who may use a server: with a token, whoever proves it; without, loopback peers only unless
/// the server was started `--open`.
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// The shared token; `None`: no authentication.
    pub token: Option<Token>,
    /// Without a token, accept peers that are not on loopback too.
    pub open: bool,
}

impl Access {
    /// Whether a peer at `ip` may proceed to the handshake.
    pub fn allows(&self, ip: IpAddr) -> bool {
        self.token.is_some() || self.open || is_loopback(ip)
    }

    /// What a refused peer is told.
    pub fn refusal(&self) -> &'static str {
        "this server has no token (--token-file) and accepts loopback peers only; give it a token, or start it with --open"
    }

    /// One line saying who may use the server, for its start-up banner.
    pub fn describe(&self) -> &'static str {
        match (&self.token, self.open) {
            (Some(_), _) => "peers that prove the token (--token-file)",
            (None, true) => "ANY peer, without authentication (--open): anyone who reaches this port can run tests",
            (None, false) => "loopback peers only (no --token-file; --open to accept others without authentication)",
        }
    }
}

/// Whether `ip` is a loopback address (IPv4-mapped IPv6 included).
pub fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
    }
}

/// Counters of a server's refusals, by reason; each refusal is logged with the peer and the
/// running count.
#[derive(Debug, Default)]
pub struct ServeStats {
    auth: AtomicU64,
    not_allowed: AtomicU64,
    version: AtomicU64,
    invalid: AtomicU64,
    limit: AtomicU64,
    /// What `serve --metrics` exposes.
    pub metrics: crate::metrics::ServeMetrics,
    /// Print one line per finished test on stderr (`netblast serve`, as `iperf3 -s` does).
    pub print_tests: AtomicBool,
    log_budget: LogBudget,
}

/// Refusal lines logged in one second at most.
pub const REFUSALS_LOGGED: u64 = 10;

/// The refusal lines left to log this second.
#[derive(Debug, Default)]
struct LogBudget {
    second: AtomicU64,
    used: AtomicU64,
    unlogged: AtomicU64,
}

impl LogBudget {
    /// Whether one more line may be logged now; says, once a second, how many were not.
    fn take(&self) -> bool {
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default();
        let then = self.second.load(Ordering::Relaxed);
        if now != then && self.second.compare_exchange(then, now, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
            self.used.store(0, Ordering::Relaxed);
            let n = self.unlogged.swap(0, Ordering::Relaxed);
            if n > 0 {
                tracing::warn!(
                    unlogged = n,
                    "{n} more refused connections were not logged (over {REFUSALS_LOGGED} a second; counted in the metrics)"
                );
            }
        }
        if self.used.fetch_add(1, Ordering::Relaxed) < REFUSALS_LOGGED {
            true
        } else {
            self.unlogged.fetch_add(1, Ordering::Relaxed);
            false
        }
    }
}

impl ServeStats {
    fn counter(&self, reason: Refusal) -> &AtomicU64 {
        match reason {
            Refusal::Auth => &self.auth,
            Refusal::NotAllowed => &self.not_allowed,
            Refusal::Version => &self.version,
            Refusal::Limit | Refusal::Busy => &self.limit,
            Refusal::Invalid | Refusal::Shutdown => &self.invalid,
        }
    }

    /// Counts a connection that closed without sending a byte: a TCP health probe, not a
    /// peer to warn of (a probe every 10 s wrote ~17 000 warnings a day per pod).
    pub fn probed(&self, peer: SocketAddr) {
        self.metrics.probes.inc();
        tracing::debug!(%peer, "a connection closed without a byte (a TCP health probe)");
    }

    /// Counts and logs a refused peer: at most [`REFUSALS_LOGGED`] lines a second (a flood of
    /// strangers would otherwise fill the disk); the rest are counted, in the metrics and in
    /// one line that says how many went unlogged.
    pub fn refuse(&self, peer: SocketAddr, reason: Refusal, why: &str) {
        let n = self.counter(reason).fetch_add(1, Ordering::Relaxed) + 1;
        self.metrics
            .refused
            .get_or_create(&crate::metrics::label("reason", format!("{reason:?}").to_lowercase()))
            .inc();
        if self.log_budget.take() {
            tracing::warn!(%peer, reason = reason.words(), refused_so_far = n, "refused connection: {why}");
        }
    }

    /// How many peers were refused for `reason`.
    pub fn refused(&self, reason: Refusal) -> u64 {
        self.counter(reason).load(Ordering::Relaxed)
    }
}

/// The resources one peer or test may take from a server; a set-up beyond them is refused
/// with the limit named. The defaults keep a small host (2 cores) serving while tests and
/// strangers come and go.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Tests set up and waiting for their streams at once.
    pub pending: usize,
    /// Of those, from one peer address.
    pub pending_per_peer: usize,
    /// Descriptors kept free for what is not a test's stream (control connections, accepts).
    pub fd_headroom: u64,
    /// A client that does not read its control connection for this long is dropped (its test
    /// stopped): its reports would pile up in memory otherwise.
    pub control_write_timeout: Duration,
    /// Server flows that may busy-poll (rr `wait = spin`) at once, over all tests: each takes
    /// a CPU.
    pub spinning: usize,
    /// Connections that have not yet proven who they are (read their header, finished the
    /// handshake, shown their stream's tag), over all peers; a connection past it is closed
    /// at once. `serve` holds it to a quarter of its descriptors: the rest is kept for peers
    /// that proved themselves.
    pub unproven: usize,
    /// Of those, from one peer address. A netblast client proves each connection before it
    /// opens the next (a stream waits for its ack), so a few are all one peer needs.
    pub unproven_per_peer: usize,
}

impl Default for Limits {
    fn default() -> Self {
        let cpus = netblast_engine::os::sys::allowed_cpus().map(|c| c.len()).unwrap_or(1);
        Limits {
            pending: 256,
            pending_per_peer: 16,
            fd_headroom: 256,
            control_write_timeout: Duration::from_secs(10),
            spinning: cpus.saturating_sub(1).max(1),
            unproven: 512,
            unproven_per_peer: 32,
        }
    }
}

/// Resources held by the tests a server runs now.
#[derive(Debug, Default)]
pub struct Held {
    /// Descriptors promised to tests set up but not started (their streams are still coming).
    pub fds: AtomicU64,
    /// Server flows busy-polling now.
    pub spinning: AtomicU64,
}

/// Settings of a server.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Source of TCP statistics for the server's sockets.
    pub probe: Probe,
    /// What a peer or test may take.
    pub limits: Limits,
    /// Who may connect.
    pub access: Access,
    /// Refusal counters (shared with whoever started the server).
    pub stats: Arc<ServeStats>,
    /// How it takes fleet orders (its data port is filled in by [`crate::serve`]).
    pub agent: AgentConfig,
    /// A coordinator to dial and take orders from (`--register HOST:PORT`).
    pub register: Option<String>,
    /// The one interface its test sockets use (`--bind-dev`); `None`: any.
    pub bind_dev: Option<String>,
    /// The ports its per-flow sockets take (`--flow-ports`); `None`: the kernel's.
    pub flow_ports: netblast_engine::os::sockopt::FlowPorts,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            probe: Probe::tcp_info(),
            limits: Limits::default(),
            access: Access::default(),
            stats: Arc::default(),
            agent: AgentConfig::default(),
            register: None,
            bind_dev: None,
            flow_ports: None,
        }
    }
}

/// How long running tests get to wind down after shutdown is requested.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// How this serve takes part in fleets.
#[derive(Debug, Clone, Default)]
pub struct AgentConfig {
    /// Networks orders may send traffic to; empty: this host's interface networks and loopback.
    pub allow: Vec<Cidr>,
    /// The group it registers in (`serve --group`).
    pub group: String,
    /// This serve's data port.
    pub data_port: u16,
    /// The one address the data port listens on (`serve --bind ADDR`); `None`: every address.
    pub data_ip: Option<IpAddr>,
    /// Its HTTP responder's port.
    pub http_port: Option<u16>,
    /// Its HTTPS responder's port.
    pub https_port: Option<u16>,
}

impl AgentConfig {
    /// The allowlist in effect: the configured networks, or the interfaces' and loopback.
    pub fn allowlist(&self) -> Vec<Cidr> {
        if !self.allow.is_empty() {
            return self.allow.clone();
        }
        let mut v: Vec<Cidr> = netblast_engine::os::sys::interfaces()
            .unwrap_or_default()
            .into_iter()
            .map(|(a, p)| Cidr::new(a, p))
            .collect();
        for lo in ["127.0.0.0/8", "::1/128"] {
            let c: Cidr = lo.parse().expect("valid loopback network");
            if !v.contains(&c) {
                v.push(c);
            }
        }
        v
    }
}

#[cfg(test)]
mod setup_tests {
    use super::*;

    #[test]
    fn refusal_lines_are_logged_ten_a_second_at_most() {
        let b = LogBudget::default();
        // 1000 refusals within one second, or two if the second turns meanwhile.
        let logged = (0..1000).filter(|_| b.take()).count() as u64;
        assert!((REFUSALS_LOGGED..=2 * REFUSALS_LOGGED).contains(&logged), "{logged} lines for 1000 refusals");
    }

    #[test]
    fn the_wait_for_start_covers_one_interval_past_the_set_up_time() {
        assert_eq!(setup_timeout(Duration::from_secs(1)), Duration::from_secs(31));
        assert_eq!(setup_timeout(Duration::from_secs(60)), Duration::from_secs(90));
        assert_eq!(setup_timeout(Duration::MAX), Duration::from_secs(90), "a peer's interval is bounded");
    }
}
