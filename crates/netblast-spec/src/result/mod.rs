//! The result of one run: the one document every rendering (text, JSON, CSV) is made from.
//!
//! Versioned by [`SCHEMA`]. Counters are raw (bytes, segments); rates are derived from them and
//! the seconds they were measured over, both of which are stored, so a reader can recompute.

use crate::profile::{Profile, Way};
use crate::units::Dur;
use serde::{Deserialize, Serialize};

mod host;
mod http;
mod interval;
mod probe;
mod search;
mod tcp;
mod way;

pub use host::*;
pub use http::*;
pub use interval::*;
pub use probe::*;
pub use search::*;
pub use tcp::*;
pub use way::*;

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero_u16(n: &u16) -> bool {
    *n == 0
}

/// Schema identifier written into every result. /4 gives a message kind's totals their own
/// types beside the counts every message kind keeps: a TCP stream's packets under `msgs.tcp`
/// ([`TcpPackets`]), a UDP stream's receiving sockets under `msgs.udp` ([`UdpTotals`]), cps'
/// connections under `msgs.conns`. The `upgrade` module reads /3, /2 and /1.
pub const SCHEMA: &str = "netblast.run/4";
/// The third schema: the figures of /4, a message kind's totals in one flat bag (`segs_out`,
/// `wire_packets`, `kernel_drops`, `rcvbuf`, `udp` beside `sent`); /3 nested each kind's
/// figures: an interval's message figures under `msgs` (as the totals' are), every distribution
/// with its histogram (`latency.hist` where /2 had `latency_hist` beside it).
pub const SCHEMA_V3: &str = "netblast.run/3";
/// The second schema: the figures of /3, flat (`sent_msgs`, `latency_hist`). Read (through
/// the `upgrade` module) by `netblast report` and `netblast merge`.
pub const SCHEMA_V2: &str = "netblast.run/2";
/// The first schema: no absolute start, clock or agent, fewer histograms. Still read (and
/// rendered) by `netblast report`; `netblast merge` refuses it, since it cannot be aligned.
pub const SCHEMA_V1: &str = "netblast.run/1";

/// Whether a result document of this schema can be read by this build.
pub fn schema_readable(schema: &str) -> bool {
    [SCHEMA, SCHEMA_V3, SCHEMA_V2, SCHEMA_V1].contains(&schema)
}

/// Most streams whose figures every interval carries. A test with more carries only the way
/// sums in its intervals (and its server reports way sums), so a result's size and the work per
/// interval stay bounded; every stream's totals stay in the summary.
pub const MAX_STREAM_DETAIL: usize = 256;

/// A resolved test plan: the validated profile plus what was resolved against the machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Where the profile came from (`built-in profile NAME` or a path), with CLI overrides applied.
    pub origin: String,
    /// The target as the user wrote it.
    pub target: String,
    /// The address actually connected to.
    pub peer: String,
    /// CPUs the client's workers are pinned to, one worker per CPU.
    pub client_cpus: Vec<usize>,
    /// CPUs the server is asked to pin stream i's peer to (`server_cpus[i]`); empty: unpinned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub server_cpus: Vec<usize>,
    /// What resolving the profile against this machine changed, in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The time bound in effect.
    pub time_bound: Dur,
    /// The common start instant asked for (UTC ns since the Unix epoch: `--start-at`, or the
    /// coordinator's T0); `None`: the next interval boundary of the wall clock after set-up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at_unix_ns: Option<u64>,
    /// Where the client's connections and datagrams leave from (`-B`, `--bind-dev`); empty:
    /// where the route sends them.
    #[serde(default, skip_serializing_if = "Binding::is_empty")]
    pub bind: Binding,
    /// The profile after overrides and validation.
    pub profile: Profile,
}

/// Where a host's sockets of a test leave from: source addresses (iperf3 `-B`, several for
/// SNAT and ECMP tests), source ports (iperf3 `--cport`, a range) and an interface
/// (`SO_BINDTODEVICE`), each optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    /// Source addresses: the n-th data socket leaves from the (n mod count)-th. (Results before
    /// several addresses were possible name one as `addr`.)
    #[serde(default, skip_serializing_if = "Vec::is_empty", alias = "addr", deserialize_with = "one_or_many")]
    pub addrs: Vec<std::net::IpAddr>,
    /// Source ports, first and last: the n-th data socket takes the (n mod count)-th (the next
    /// free one after it when it is taken). The control connection takes any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<(u16, u16)>,
    /// The interface every socket is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
}

fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<std::net::IpAddr>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        One(std::net::IpAddr),
        Many(Vec<std::net::IpAddr>),
    }
    Ok(match Raw::deserialize(d)? {
        Raw::One(a) => vec![a],
        Raw::Many(v) => v,
    })
}

impl Binding {
    /// Whether it binds nothing.
    pub fn is_empty(&self) -> bool {
        self.addrs.is_empty() && self.ports.is_none() && self.device.is_none()
    }

    /// Only an interface (a server's `--bind-dev`).
    pub fn device(device: Option<String>) -> Binding {
        Binding { device, ..Binding::default() }
    }

    /// The source address of the n-th data socket, if the binding names any.
    pub fn addr(&self, n: usize) -> Option<std::net::IpAddr> {
        (!self.addrs.is_empty()).then(|| self.addrs[n % self.addrs.len()])
    }

    /// How many ports the range holds (0: no range).
    pub fn port_count(&self) -> usize {
        self.ports.map_or(0, |(lo, hi)| usize::from(hi - lo) + 1)
    }

    /// The source port the n-th data socket tries first (0: the kernel's choice). Sockets
    /// spread over addresses first, then ports: with two addresses, sockets 0 and 1 take the
    /// range's first port (one on each address), 2 and 3 the second.
    pub fn port(&self, n: usize) -> u16 {
        match self.ports {
            Some((lo, _)) => lo + ((n / self.addrs.len().max(1)) % self.port_count()) as u16,
            None => 0,
        }
    }

    /// How many data sockets can be open at once from distinct (address, port) pairs: `None`
    /// without a port range.
    pub fn capacity(&self) -> Option<usize> {
        self.ports.map(|_| self.port_count() * self.addrs.len().max(1))
    }

    /// In words, for the report: `from 10.0.0.2, 10.0.0.3, ports 40000-40063, on eth1`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.addrs.is_empty() {
            let a: Vec<String> = self.addrs.iter().map(|a| a.to_string()).collect();
            parts.push(format!("from {}", a.join(", ")));
        }
        if let Some((lo, hi)) = self.ports {
            parts.push(if lo == hi { format!("source port {lo}") } else { format!("source ports {lo}-{hi}") });
        }
        if let Some(d) = &self.device {
            parts.push(format!("on interface {d}"));
        }
        parts.join(", ")
    }
}

impl Plan {
    /// What the run is aimed at, in words: the peer's address, or for http its URLs (paths
    /// completed with the target).
    pub fn aimed_at(&self) -> String {
        self.profile.workload.section().aimed_at(&self.target).unwrap_or_else(|| self.peer.clone())
    }
}

/// One error seen during the run; the run keeps what it measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunError {
    /// Seconds since the start of the test (0 before it started).
    pub at_s: f64,
    /// Who saw it: `client`, `server`, `stream 3`, `control`.
    pub source: String,
    /// What happened.
    pub message: String,
}

/// A connection of the test.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamInfo {
    /// Stream id (0-based, unique within the test).
    pub id: u32,
    /// Which way bytes flow.
    pub way: Way,
    /// Client's local address.
    pub local: String,
    /// Server address.
    pub remote: String,
    /// CPU of the client worker that drives it.
    pub client_cpu: usize,
    /// CPU the server pinned it to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu: Option<usize>,
    /// Merged results: the index in `parts` of the test this stream belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<u32>,
    /// The client socket's options as its kernel held them once connected (`run -V` prints
    /// them); absent where not read (HTTP, merged results of older runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<SocketSetup>,
}

/// A connected socket's options as the kernel reports them (`getsockopt`): what a run really
/// set up, whatever was asked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SocketSetup {
    /// `SO_SNDBUF` as reported (Linux reports twice the size it accepted).
    pub sndbuf: u64,
    /// `SO_RCVBUF` as reported.
    pub rcvbuf: u64,
    /// `TCP_CONGESTION`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub congestion: String,
    /// `TCP_MAXSEG`: the MSS in effect.
    pub mss: u32,
    /// `TCP_NODELAY`.
    pub nodelay: bool,
    /// The TOS byte (IPv4) or traffic class (IPv6): the DSCP mark is its upper six bits.
    pub tos: u8,
    /// The interface the socket's local address is on (`lo`, `eth0`), when found.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub device: String,
    /// That interface's offloads as its driver reports them (ethtool's), when it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offloads: Option<Offloads>,
}

/// An interface's offloads, as `ethtool -k` shows them; `None`: the driver does not say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offloads {
    /// TCP segmentation offload.
    pub tso: Option<bool>,
    /// Generic segmentation offload.
    pub gso: Option<bool>,
    /// Generic receive offload.
    pub gro: Option<bool>,
    /// Scatter-gather.
    pub sg: Option<bool>,
    /// Transmit checksum offload.
    pub tx_checksum: Option<bool>,
    /// Receive checksum offload.
    pub rx_checksum: Option<bool>,
}

impl Offloads {
    /// `TSO on, GSO on, GRO off, SG on, tx-checksum on, rx-checksum on` (the ones known).
    pub fn describe(&self) -> String {
        let on = |b: bool| if b { "on" } else { "off" };
        [
            ("TSO", self.tso),
            ("GSO", self.gso),
            ("GRO", self.gro),
            ("SG", self.sg),
            ("tx-checksum", self.tx_checksum),
            ("rx-checksum", self.rx_checksum),
        ]
        .iter()
        .filter_map(|(n, v)| v.map(|v| format!("{n} {}", on(v))))
        .collect::<Vec<_>>()
        .join(", ")
    }
}

impl SocketSetup {
    /// One line: `SO_SNDBUF 2.50 MBytes, SO_RCVBUF 128 KBytes (as the kernel reports them),
    /// congestion control cubic, MSS 1448 bytes, TCP_NODELAY off, DSCP EF (46)`.
    pub fn describe(&self) -> String {
        let b = crate::units::fmt_bytes;
        let dscp = match crate::mark::Dscp::new(self.tos >> 2) {
            Some(d) if d.value() > 0 => format!("DSCP {d}"),
            _ => "no DSCP mark".into(),
        };
        format!(
            "SO_SNDBUF {}, SO_RCVBUF {} (as the kernel reports them), congestion control {}, MSS {} bytes, \
             TCP_NODELAY {}, {dscp}",
            b(self.sndbuf),
            b(self.rcvbuf),
            if self.congestion.is_empty() { "?" } else { &self.congestion },
            self.mss,
            if self.nodelay { "on" } else { "off" }
        ) + &match (&self.device, &self.offloads) {
            (d, _) if d.is_empty() => String::new(),
            (d, Some(o)) if !o.describe().is_empty() => format!("; via {d}: {}", o.describe()),
            (d, _) => format!("; via {d}"),
        }
    }
}

/// Totals over the whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Wall-clock seconds from the start until the last stream finished.
    pub duration_s: f64,
    /// Per way.
    pub ways: Vec<WaySummary>,
    /// Per stream.
    pub streams: Vec<StreamSummary>,
    /// CPU use.
    pub cpu: CpuSummary,
    /// HTTP totals (http kind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpSummary>,
    /// Each host's CPUs and drops over the test.
    #[serde(default, skip_serializing_if = "Load::is_empty")]
    pub load: Load,
}

impl Summary {
    /// The run's retransmitted segments: its ways' and its HTTP connections'; `None` when no
    /// kernel counted them (`--probe off`), which is unknown, not zero. The one count the text,
    /// the HTML and `--assert` show.
    pub fn retransmits(&self) -> Option<u64> {
        let http = self.http.as_ref().and_then(|h| h.tcp.as_ref()).map(|t| t.retransmits);
        self.ways.iter().map(|w| w.retransmits).chain(std::iter::once(http)).flatten().reduce(|a, b| a + b)
    }
}

/// One test of a merged result: an input of `netblast merge`, or one client agent's test
/// toward one server in a fleet run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Part {
    /// Who measured it.
    pub agent: AgentInfo,
    /// The peer it ran against (`plan.peer` of the input).
    pub peer: String,
    /// The input's test id.
    pub test_id: String,
    /// The input's start instant on the measuring host's clock (UTC ns).
    pub start_unix_ns: u64,
    /// The measuring host's clock against the merged result's reference.
    pub clock: ClockInfo,
    /// Index, in the merged interval series, of the input's interval 0.
    pub interval_offset: u32,
    /// The input's stream ids were renumbered from this id on (same order).
    pub first_stream: u32,
    /// Number of its streams.
    pub streams: u32,
    /// Whether the input was complete.
    pub complete: bool,
    /// The client host (its settings, for the part's own verdict); absent in results from
    /// before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<HostInfo>,
    /// The server host, when it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<HostInfo>,
    /// The profile it ran, when it is not the merged plan's (a merge of different tests, a
    /// fleet test given its share of a rate): what its own verdict reads its asked rate and
    /// settings from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<crate::profile::Profile>,
    /// The input's own totals.
    pub summary: Summary,
    /// The input's latency probes, without their intervals (the merged result's hold those).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_probe: Option<Box<LatencyProbeResult>>,
}

/// One agent of a merged or fleet result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentStatus {
    /// The agent.
    pub agent: AgentInfo,
    /// `client` (originated tests) or `server` (the peer of tests).
    pub role: String,
    /// Its clock against the reference.
    pub clock: ClockInfo,
    /// When it really started, on the reference clock (UTC ns); `None` if it never started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actual_start_unix_ns: Option<u64>,
    /// `ok`, `partial` (it ran, but a test is incomplete) or `failed`.
    pub status: String,
    /// Why, when not `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// Indices in `parts` of the tests it ran (clients) or served (servers).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<u32>,
    /// Its own totals: the merge of those tests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Summary>,
}

/// The whole result of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// [`SCHEMA`] (or [`SCHEMA_V1`] in a file written by an older netblast).
    pub schema: String,
    /// Version of the client that produced it.
    pub netblast_version: String,
    /// Random id shared by client and server for this test.
    pub test_id: String,
    /// The common start instant (RFC 3339, UTC, to the nanosecond): interval 0 starts here.
    pub started_at: String,
    /// `started_at` in ns since the Unix epoch, UTC, on the measuring host's clock; absent in
    /// /1 results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_unix_ns: Option<u64>,
    /// When the start gate really opened (the workers were let go), on the measuring host's
    /// clock, UTC ns: what a start skew between results is measured from. Absent in results
    /// of versions before it was recorded (their skew is not known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actual_start_unix_ns: Option<u64>,
    /// The measuring host's clock against the reference clock; absent in /1 results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockInfo>,
    /// Who measured; absent in /1 results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentInfo>,
    /// True when every stream ran to its bound and the server's final report arrived.
    pub complete: bool,
    /// Errors seen; a partial result lists why it is partial.
    pub errors: Vec<RunError>,
    /// Things the user should know that do not make the result partial (e.g. a CPU the
    /// server could not pin to, fewer CPUs than a profile asks for).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<RunError>,
    /// What was run.
    pub plan: Plan,
    /// The client host.
    pub client: HostInfo,
    /// The server host, once it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<HostInfo>,
    /// Source of the client's TCP statistics.
    pub probe: ProbeInfo,
    /// Source of the server's TCP statistics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_probe: Option<ProbeInfo>,
    /// Connections.
    pub streams: Vec<StreamInfo>,
    /// Time series.
    pub intervals: Vec<Interval>,
    /// Totals.
    pub summary: Summary,
    /// Merged and fleet results: the tests merged, each with its own totals.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<Part>,
    /// Merged and fleet results: every agent, with its status.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<AgentStatus>,
    /// The `--assert`s checked on this result when it was made (`run`, `fleet`), each with its
    /// verdict and the figure measured; empty when none was given. A merge judges afresh.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub asserts: Vec<Verdict>,
    /// The user's name for this run (`--label`, e.g. `idps-off`): what `report --compare`
    /// calls it beside other runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// `run --find-max`: the search's steps and its answer; the rest of the result is the run
    /// of the answer (the highest rate that held, else the last step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub find_max: Option<Box<FindMax>>,
    /// Latency probes beside the test (`--latency-probe`): idle and loaded round trips and
    /// the latency the load added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_probe: Option<Box<LatencyProbeResult>>,
    /// The server's own lines about the test, as `netblast serve` printed them (`run
    /// --get-server-output` shows them; iperf3's server output).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub server_output: Vec<String>,
}

impl RunResult {
    /// The connections a hold test's way held: those that answered the probe of the last whole
    /// interval (a short tail has no probe of its own).
    pub fn held(&self) -> Option<u64> {
        let interval_s = self.plan.profile.run.interval().as_secs_f64();
        let last = self.intervals.iter().rev().find(|iv| !iv.is_short_tail(interval_s))?;
        last.sums.first()?.msgs.as_ref().map(|m| m.sent)
    }

    /// The envelope every result starts from (a run, a merge, a partial log read back): this
    /// build's schema and version, the test, its start instant on the wall clock, its plan,
    /// where its TCP statistics came from, and its figures. Not complete, no errors, no hosts,
    /// no parts: the caller fills in what it knows.
    pub fn new(
        test_id: String,
        start_unix_ns: u64,
        plan: Plan,
        probe: ProbeInfo,
        streams: Vec<StreamInfo>,
        intervals: Vec<Interval>,
        summary: Summary,
    ) -> RunResult {
        RunResult {
            schema: SCHEMA.to_string(),
            netblast_version: env!("CARGO_PKG_VERSION").to_string(),
            test_id,
            started_at: crate::units::fmt_rfc3339(start_unix_ns),
            start_unix_ns: Some(start_unix_ns),
            actual_start_unix_ns: None,
            clock: None,
            agent: None,
            complete: false,
            errors: Vec::new(),
            warnings: Vec::new(),
            plan,
            client: HostInfo::default(),
            server: None,
            probe,
            server_probe: None,
            streams,
            intervals,
            summary,
            parts: Vec::new(),
            agents: Vec::new(),
            asserts: Vec::new(),
            label: None,
            find_max: None,
            latency_probe: None,
            server_output: Vec::new(),
        }
    }
}

/// The outcome of one assertion; a result's `asserts` holds those checked when it was made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// The assertion as written.
    pub text: String,
    /// Whether it holds.
    pub pass: bool,
    /// The measured figure (formatted in the assertion's unit), or why there is none.
    pub measured: String,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: measured {}", if self.pass { "pass" } else { "FAIL" }, self.text, self.measured)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_needs_its_span_and_cpu_cost_is_per_side() {
        assert_eq!(per_second(10.0, 2.0), 5.0);
        assert_eq!(per_second(10.0, 0.0), 0.0, "no span, no rate");
        let client = CpuUsage { user_s: 1.0, system_s: 1.0, wall_s: 4.0 };
        let idle = CpuUsage { user_s: 0.0, system_s: 0.0, wall_s: 4.0 };
        let c = CpuSummary::new(client, Some(idle), 8e9);
        assert_eq!((c.bits_per_client_cpu_s, c.bits_per_server_cpu_s), (4e9, Some(0.0)));
        assert_eq!(CpuSummary::new(client, None, 8e9).bits_per_server_cpu_s, None);
    }
}
