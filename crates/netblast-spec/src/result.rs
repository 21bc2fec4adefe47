//! The result of one run: the one document every rendering (text, JSON, CSV) is made from.
//!
//! Versioned by [`SCHEMA`]. Counters are raw (bytes, segments); rates are derived from them and
//! the seconds they were measured over, both of which are stored, so a reader can recompute.

use crate::hist::{Distribution, EncodedHistogram};
use crate::profile::{Profile, Way};
use crate::units::Dur;
use serde::{Deserialize, Serialize};

/// Schema identifier written into every result. /3 nests each kind's figures: an interval's
/// message figures under `msgs` (as the totals' are), every distribution with its histogram
/// (`latency.hist` where /2 had `latency_hist` beside it). The `upgrade` module reads /2 and /1.
pub const SCHEMA: &str = "netblast.run/3";
/// The second schema: the figures of /3, flat (`sent_msgs`, `latency_hist`). Read (through
/// the `upgrade` module) by `netblast report` and `netblast merge`.
pub const SCHEMA_V2: &str = "netblast.run/2";
/// The first schema: no absolute start, clock or agent, fewer histograms. Still read (and
/// rendered) by `netblast report`; `netblast merge` refuses it, since it cannot be aligned.
pub const SCHEMA_V1: &str = "netblast.run/1";

/// Whether a result document of this schema can be read by this build.
pub fn schema_readable(schema: &str) -> bool {
    schema == SCHEMA || schema == SCHEMA_V2 || schema == SCHEMA_V1
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

/// Where a host's sockets of a test leave from: a source address (iperf3 `-B`) and an
/// interface (`SO_BINDTODEVICE`), each optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    /// Source address of every connection and datagram socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addr: Option<std::net::IpAddr>,
    /// The interface every socket is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
}

impl Binding {
    /// Whether it binds nothing.
    pub fn is_empty(&self) -> bool {
        self.addr.is_none() && self.device.is_none()
    }

    /// Only an interface (a server's `--bind-dev`).
    pub fn device(device: Option<String>) -> Binding {
        Binding { addr: None, device }
    }
}

impl Plan {
    /// What the run is aimed at, in words: the peer's address, or for http its URLs (paths
    /// completed with the target).
    pub fn aimed_at(&self) -> String {
        let Some(h) = self.profile.workload.http() else { return self.peer.clone() };
        let scheme = if h.tls { "https" } else { "http" };
        let urls: Vec<String> = h
            .urls
            .iter()
            .map(|u| if u.starts_with('/') { format!("{scheme}://{}{u}", self.target) } else { u.clone() })
            .collect();
        urls.join(", ")
    }
}

/// How far this result's clock is from the reference clock, and how well that is known.
///
/// On one host the reference is the host's own clock (`source = "local"`, offset 0, error 0).
/// In a fleet it is the coordinator's clock, measured by a four-timestamp exchange:
/// `offset_ns` = this host's clock − the reference clock, within ± `error_ns`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockInfo {
    /// `local`, or `coordinator` (measured by the fleet's clock exchange).
    pub source: ClockSource,
    /// This host's clock minus the reference clock, ns.
    pub offset_ns: i64,
    /// Bound on the error of `offset_ns`, ns (half the best exchange's round trip).
    pub error_ns: u64,
}

/// Where a result's clock offset comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockSource {
    /// The measuring host's own clock is the reference.
    #[default]
    Local,
    /// Measured against a fleet coordinator's clock.
    Coordinator,
}

impl ClockInfo {
    /// Converts an instant of this host's clock to the reference clock.
    pub fn to_reference(&self, local_ns: u64) -> i128 {
        local_ns as i128 - self.offset_ns as i128
    }
}

/// Who measured a result: the host that ran the client end.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentInfo {
    /// Host name.
    pub hostname: String,
    /// Random id of the netblast process that measured (distinguishes several on one host).
    pub id: String,
    /// The address it measured from (the local address of its connection to the peer).
    pub address: String,
}

/// Kernel TCP statistics of one socket at one instant (cumulative counters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpStats {
    /// Smoothed RTT (µs).
    pub rtt_us: u32,
    /// RTT variance (µs).
    pub rttvar_us: u32,
    /// Minimum RTT seen by the kernel (µs).
    pub min_rtt_us: u32,
    /// Congestion window (segments).
    pub cwnd_segs: u32,
    /// Sender MSS (bytes).
    pub mss: u32,
    /// Total segments retransmitted over the socket's life.
    pub retrans_segs: u64,
    /// Segments sent.
    pub segs_out: u64,
    /// Segments received.
    pub segs_in: u64,
    /// Bytes acknowledged by the peer.
    pub bytes_acked: u64,
    /// Most recent delivery-rate estimate, in bytes/s (`tcpi_delivery_rate`). Written as
    /// `delivery_rate_bps` before, a name that said bits for a count of bytes; read under both.
    #[serde(alias = "delivery_rate_bps")]
    pub delivery_rate_bytes_per_s: u64,
    /// Retransmitted segments the receiver reported getting twice (DSACK): spurious
    /// retransmissions (`tcpi_dsack_dups`). `None` where the source does not carry it (eBPF).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dsack_segs: Option<u64>,
    /// What limited the sender, by the kernel's own clocks (`TCP_INFO`, Linux 4.10+), over the
    /// socket's life. `None` where the kernel does not report them or the figures are a group's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<TcpLimits>,
}

/// How long a sender was limited by what, in µs, from the kernel's chronographs (`TCP_INFO`:
/// `tcpi_busy_time`, `tcpi_rwnd_limited`, `tcpi_sndbuf_limited`; the kernel counts them in
/// jiffies, 1 to 4 ms). Additive: a way's is the sum of its streams', over the sum of their
/// times (`wall_us`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpLimits {
    /// Time the socket had data in flight or queued (`tcpi_busy_time`), the two below included.
    pub busy_us: u64,
    /// Of it, time the receiver's advertised window stopped the sender.
    pub rwnd_limited_us: u64,
    /// Of it, time the sender's own send buffer stopped it.
    pub sndbuf_limited_us: u64,
    /// The time these are out of: the sender's seconds (0 in a kernel snapshot, which has
    /// no span of its own).
    #[serde(default)]
    pub wall_us: u64,
    /// The receiver's advertised window at the last sample, bytes (`tcpi_snd_wnd`, Linux
    /// 5.4+; 0 unknown); a way's is its streams' sum.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub peer_window: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The shares of a sender's time (fractions of `wall_us`) by what limited it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LimitShares {
    /// The receiver's window.
    pub rwnd: f64,
    /// The sender's send buffer.
    pub sndbuf: f64,
    /// Busy with neither: the congestion window or the path (sending as fast as it lets).
    pub cwnd: f64,
    /// Nothing to send: the application (the generator, its CPU, a rate it holds).
    pub app: f64,
}

impl TcpLimits {
    /// This and `o` added (a way's from its streams', a fleet's from its tests').
    pub fn add(&self, o: &TcpLimits) -> TcpLimits {
        TcpLimits {
            busy_us: self.busy_us + o.busy_us,
            rwnd_limited_us: self.rwnd_limited_us + o.rwnd_limited_us,
            sndbuf_limited_us: self.sndbuf_limited_us + o.sndbuf_limited_us,
            wall_us: self.wall_us + o.wall_us,
            peer_window: self.peer_window + o.peer_window,
        }
    }

    /// The clocks' advance since `earlier` (an interval's, from two snapshots), over `wall_us`.
    pub fn since(&self, earlier: &TcpLimits, wall_us: u64) -> TcpLimits {
        TcpLimits {
            busy_us: self.busy_us.saturating_sub(earlier.busy_us),
            rwnd_limited_us: self.rwnd_limited_us.saturating_sub(earlier.rwnd_limited_us),
            sndbuf_limited_us: self.sndbuf_limited_us.saturating_sub(earlier.sndbuf_limited_us),
            wall_us,
            peer_window: self.peer_window,
        }
    }

    /// The shares of `wall_us`; `None` without a span.
    pub fn shares(&self) -> Option<LimitShares> {
        if self.wall_us == 0 {
            return None;
        }
        let w = self.wall_us as f64;
        let busy = self.busy_us.min(self.wall_us) as f64;
        let rwnd = (self.rwnd_limited_us as f64).min(busy);
        let sndbuf = (self.sndbuf_limited_us as f64).min(busy - rwnd);
        Some(LimitShares { rwnd: rwnd / w, sndbuf: sndbuf / w, cwnd: (busy - rwnd - sndbuf) / w, app: (w - busy) / w })
    }
}

impl TcpStats {
    /// Congestion window in bytes (segments × MSS).
    pub fn cwnd_bytes(&self) -> u64 {
        self.cwnd_segs as u64 * self.mss as u64
    }
}

/// Where kernel TCP statistics came from, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeInfo {
    /// `ebpf`, `tcp_info` or `off`.
    pub tcp_source: String,
    /// Why eBPF was not used, when it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_reason: Option<String>,
    /// The eBPF program's own run time during this run, ns (with `--probe-stats`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_run_ns: Option<u64>,
    /// Times the eBPF program ran during this run (with `--probe-stats`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_runs: Option<u64>,
}

/// Facts about one end of the test.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostInfo {
    /// Host name.
    pub hostname: String,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// CPUs online.
    pub cpus_online: u32,
    /// netblast version running there.
    pub netblast_version: String,
    /// Its socket buffer caps, as the report's advice needs them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffers: Option<BufferCaps>,
    /// Its TCP defaults that decide results: the congestion control and the local ports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpDefaults>,
}

/// A host's TCP defaults: what a socket gets unless the profile says otherwise.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpDefaults {
    /// `net.ipv4.tcp_congestion_control`: every TCP socket's unless `tcp.congestion` names one.
    pub congestion_control: String,
    /// `net.ipv4.ip_local_port_range`: the first and last port `connect` picks from.
    pub local_ports: [u16; 2],
    /// `net.ipv4.tcp_tw_reuse`: 0 off, 1 on, 2 on loopback only.
    pub tw_reuse: u8,
}

impl TcpDefaults {
    /// Ports in the local range.
    pub fn port_count(&self) -> u32 {
        u32::from(self.local_ports[1]).saturating_sub(u32::from(self.local_ports[0])) + 1
    }
}

/// A host's socket buffer caps (bytes): what a fixed `-w` can reach (`net.core.*mem_max`) and
/// what autotuning grows a buffer to (the third field of `net.ipv4.tcp_*mem`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BufferCaps {
    /// `net.core.rmem_max`.
    pub rmem_max: u64,
    /// `net.core.wmem_max`.
    pub wmem_max: u64,
    /// `net.ipv4.tcp_rmem` max.
    pub tcp_rmem_max: u64,
    /// `net.ipv4.tcp_wmem` max.
    pub tcp_wmem_max: u64,
}

/// CPU time used by one side over the test.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuUsage {
    /// User-mode CPU seconds.
    pub user_s: f64,
    /// Kernel-mode CPU seconds.
    pub system_s: f64,
    /// Wall-clock seconds the usage was measured over.
    pub wall_s: f64,
}

impl CpuUsage {
    /// Average number of CPUs busy: (user + system) / wall (qperf's `cpus_used`).
    pub fn cpus_used(&self) -> f64 {
        if self.wall_s > 0.0 {
            (self.user_s + self.system_s) / self.wall_s
        } else {
            0.0
        }
    }

    /// User + system seconds.
    pub fn cpu_s(&self) -> f64 {
        self.user_s + self.system_s
    }
}

/// Each host's CPUs and packet drops over a test (`summary.load`): the whole host, not only
/// netblast, read from `/proc` at the test's start and end on each side.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Load {
    /// The client's host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<HostLoad>,
    /// The server's host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<HostLoad>,
}

impl Load {
    /// Neither side read.
    pub fn is_empty(&self) -> bool {
        self.client.is_none() && self.server.is_none()
    }
}

/// One host over a test: how busy each CPU was and in what, and what its interfaces and input
/// backlogs dropped.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostLoad {
    /// Seconds between the two readings.
    pub wall_s: f64,
    /// Each CPU online (`/proc/stat`), shares of the time between the readings.
    pub cpus: Vec<CpuLoad>,
    /// The interfaces (of the namespace the side ran in) whose drop or error counters moved.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<InterfaceDrops>,
    /// Packets dropped because a CPU's input backlog was full (`/proc/net/softnet_stat`).
    #[serde(default)]
    pub backlog_drops: u64,
}

impl HostLoad {
    /// The busiest CPU.
    pub fn busiest(&self) -> Option<&CpuLoad> {
        self.cpus.iter().max_by(|a, b| a.busy().total_cmp(&b.busy()))
    }
}

/// One CPU's time between two readings, as shares of it (0..1): user (with nice), system, hard
/// and soft interrupts, stolen by the hypervisor, idle (with I/O wait).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuLoad {
    /// The CPU's number.
    pub cpu: u32,
    /// User mode (and nice).
    pub user: f64,
    /// Kernel mode outside interrupts (system calls: the socket work of a sender).
    pub system: f64,
    /// Hardware interrupts.
    pub irq: f64,
    /// Software interrupts (the network stack's receive and transmit processing).
    pub softirq: f64,
    /// Stolen by the hypervisor for other guests.
    pub steal: f64,
    /// Idle (and waiting for I/O).
    pub idle: f64,
}

impl CpuLoad {
    /// The share busy: everything but idle.
    pub fn busy(&self) -> f64 {
        (1.0 - self.idle).clamp(0.0, 1.0)
    }

    /// The largest share of its busy time and its name (`softirq`, `system`, ...).
    pub fn mostly(&self) -> (&'static str, f64) {
        [
            ("user", self.user),
            ("system", self.system),
            ("irq", self.irq),
            ("softirq", self.softirq),
            ("steal", self.steal),
        ]
        .into_iter()
        .fold(("user", -1.0), |a, b| if b.1 > a.1 { b } else { a })
    }
}

/// An interface's drops and errors between two readings (`/proc/net/dev`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterfaceDrops {
    /// The interface.
    pub name: String,
    /// Received packets dropped (a full ring or queue, no buffer).
    pub rx_dropped: u64,
    /// Packets to send dropped.
    pub tx_dropped: u64,
    /// Receive errors.
    pub rx_errors: u64,
    /// Transmit errors.
    pub tx_errors: u64,
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
}

/// What a UDP receiver saw of sequenced datagrams (at least [`crate::profile::MsgrateSection::SEQ_HEADER`]
/// bytes: each carries its sequence number and send time).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct UdpQuality {
    /// Datagrams missing: the sequence numbers up to the highest seen, minus those received.
    /// Per interval it is the change of that count, so a datagram that arrives an interval late
    /// is lost in one interval and found (negative) in the next; over a whole run it is exact.
    pub lost: i64,
    /// Datagrams that arrived after one with a higher sequence number.
    pub out_of_order: u64,
    /// Datagrams received more than once.
    pub duplicates: u64,
    /// Interarrival jitter as RFC 3550 defines it (the smoothed difference between successive
    /// datagrams' transit times, gain 1/16), ns, at the end of the interval or run.
    pub jitter_ns: f64,
    /// Datagrams received (each sequence number once).
    pub received: u64,
}

impl UdpQuality {
    /// Sums counts; jitter is the mean of the parts' (iperf3's `[SUM]`).
    pub fn sum<'a>(parts: impl IntoIterator<Item = &'a UdpQuality>) -> Option<UdpQuality> {
        let mut n = 0usize;
        let mut out = UdpQuality::default();
        for p in parts {
            n += 1;
            out.lost += p.lost;
            out.out_of_order += p.out_of_order;
            out.duplicates += p.duplicates;
            out.received += p.received;
            out.jitter_ns += p.jitter_ns;
        }
        (n > 0).then(|| UdpQuality { jitter_ns: out.jitter_ns / n as f64, ..out })
    }
}

/// One stream during one interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamInterval {
    /// Stream id.
    pub id: u32,
    /// Bytes the sender handed to the kernel in the interval.
    pub sent_bytes: u64,
    /// Bytes the receiver read in its interval (from the other end's report when that end is
    /// the server); absent when the receiver did not report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received_bytes: Option<u64>,
    /// Segments retransmitted by the sender in the interval (absent when the sender's kernel was not read: `--probe off`, or a side that did not report; unknown, not zero).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    /// Sender-side kernel TCP statistics at the end of the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpStats>,
    /// Message kinds (msgrate, UDP, rr, cps): the stream's messages in the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msgs: Option<MsgInterval>,
    /// Round-trip latency of the interval's transactions (rr, cps: connect), with its histogram.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Distribution>,
}

/// The message figures of one interval (msgrate, UDP, rr, cps): of a stream, or of a way summed
/// over its streams, which also carries their rates over the interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MsgInterval {
    /// Messages (msgrate), datagrams (UDP), completed transactions (rr) or connections (cps)
    /// of the sender.
    pub sent: u64,
    /// Of a way: `sent` per second of the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_per_s: Option<f64>,
    /// Messages the receiver got (rr: requests the server answered), when it reported (of a
    /// way: when every receiver did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received: Option<u64>,
    /// Of a way: `received` per second of the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received_per_s: Option<f64>,
    /// Segments the sending TCP sockets put on the wire in the interval (`tcpi_segs_out` delta).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segs_out: Option<u64>,
    /// Of a way: TCP segments per second sent (packets on the wire, not messages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segs_out_per_s: Option<f64>,
    /// UDP: what the receivers saw of the sequenced datagrams in the interval (of a way: counts
    /// summed, jitter the streams' mean).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpQuality>,
    /// cps: connections that failed in the interval (`sent` counts those completed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<u64>,
}

impl MsgInterval {
    /// The message figures of several streams or tests in one interval, added: `sent` and
    /// `failed` summed, `received` known only when every part knows it, `segs_out` the sum of
    /// the parts that counted them, datagram quality added; with `secs`, the rates over it (a
    /// way's). `None` when no part has message figures. The one place interval message
    /// figures are added: the aggregator's ways, a merge's, a short tail folded in.
    pub fn add_up<'a>(parts: impl IntoIterator<Item = &'a MsgInterval>, secs: Option<f64>) -> Option<MsgInterval> {
        let parts: Vec<&MsgInterval> = parts.into_iter().collect();
        if parts.is_empty() {
            return None;
        }
        let any = |f: fn(&MsgInterval) -> Option<u64>| parts.iter().filter_map(|x| f(x)).reduce(|a, b| a + b);
        let sent = parts.iter().map(|x| x.sent).sum();
        let received = parts.iter().map(|x| x.received).sum::<Option<u64>>();
        let segs_out = any(|x| x.segs_out);
        let per_s = |n: u64| secs.map(|s| per_second(n as f64, s));
        Some(MsgInterval {
            sent,
            sent_per_s: per_s(sent),
            received,
            received_per_s: received.and_then(per_s),
            segs_out,
            segs_out_per_s: segs_out.and_then(per_s),
            udp: UdpQuality::sum(parts.iter().filter_map(|x| x.udp.as_ref())),
            failed: any(|x| x.failed),
        })
    }
}

/// The sum over the streams of one way during one interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WayInterval {
    /// Which way.
    pub way: Way,
    /// Bytes sent by all senders.
    pub sent_bytes: u64,
    /// Sender bit rate.
    pub sent_bits_per_s: f64,
    /// Bytes read by all receivers, when every receiver reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received_bytes: Option<u64>,
    /// Receiver bit rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received_bits_per_s: Option<f64>,
    /// Retransmitted segments (absent when the sender's kernel was not read: `--probe off`, or a side that did not report; unknown, not zero).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    /// Message kinds: the way's messages in the interval, summed over its streams, with rates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msgs: Option<MsgInterval>,
    /// Latency over all streams of the way in the interval, with the merged histogram
    /// (lossless, for exact merging across hosts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Distribution>,
}

/// One reporting interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// 0-based index.
    pub index: u32,
    /// Start, seconds since the test started.
    pub start_s: f64,
    /// End, seconds since the test started.
    pub end_s: f64,
    /// Per stream.
    pub streams: Vec<StreamInterval>,
    /// Per way, summed over streams.
    pub sums: Vec<WayInterval>,
    /// HTTP figures (http kind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpInterval>,
}

impl Interval {
    /// A last interval shorter than a tenth of the reporting interval (the stragglers after the
    /// last tick): its rate would mislead, so it is folded into the interval before it
    /// (by `fold_short_tail` of the merge module) and never shown on its own.
    pub fn is_short_tail(&self, interval_s: f64) -> bool {
        self.index > 0 && self.end_s - self.start_s < interval_s * 0.1
    }
}

/// HTTP figures of one interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HttpInterval {
    /// Requests sent.
    pub sent: u64,
    /// Responses received in full (any status).
    pub completed: u64,
    /// Requests that failed (no complete response).
    pub errors: u64,
    /// Responses with a status outside the expected set (`--expect-status`): counted in
    /// `completed`, and failures all the same.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed_status: u64,
    /// Open loop: requests sent later than their intended time by more than the lag allowance.
    pub late: u64,
    /// Completed responses per second.
    pub responses_per_s: f64,
    /// Open loop: the schedule's rate over the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_rate: Option<f64>,
    /// Requests sent per second.
    pub sent_per_s: f64,
    /// Bytes written to the connections (headers, bodies, TLS).
    pub bytes_sent: u64,
    /// Bytes read from the connections.
    pub bytes_received: u64,
    /// Latency of the interval's completed requests (open loop: from the intended send time),
    /// with its histogram.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Distribution>,
    /// Responses by status code.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub status: std::collections::BTreeMap<String, u64>,
}

/// One class of HTTP failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpErrorCount {
    /// `refused`, `reset`, `timeout`, `tls`, `certificate`, `protocol`, `connect`, `io`.
    pub kind: String,
    /// How many requests failed this way.
    pub count: u64,
    /// One example message.
    pub sample: String,
}

/// Where the time of HTTP requests went (hey's breakdown).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HttpPhases {
    /// TCP connect, per connection opened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect: Option<Distribution>,
    /// TLS handshake, per connection opened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<Distribution>,
    /// Request written to response headers received, per request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfb: Option<Distribution>,
    /// Response headers to the end of the body, per request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Distribution>,
    /// Open loop: actual send time minus intended send time, per request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_lag: Option<Distribution>,
}

/// Connections of an HTTP test.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpConnections {
    /// Connections asked for (`-c`).
    pub configured: u32,
    /// Connections established (TCP and, with TLS, the handshake), over the whole run.
    pub established: u64,
    /// Connection attempts that failed.
    pub failed: u64,
    /// Most connections open at once.
    pub peak_open: u64,
}

/// HTTP totals of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HttpSummary {
    /// `closed_loop` or `open_loop`.
    pub mode: String,
    /// `http1` or `http2`.
    pub version: String,
    /// Whether requests went over TLS.
    pub tls: bool,
    /// Requests sent.
    pub sent: u64,
    /// Responses received in full.
    pub completed: u64,
    /// Responses with a 1xx, 2xx or 3xx status.
    pub succeeded: u64,
    /// succeeded / sent.
    pub success_ratio: f64,
    /// Seconds from the start to the last response.
    pub seconds: f64,
    /// Completed responses per second.
    pub responses_per_s: f64,
    /// Requests sent per second (open loop: the achieved rate).
    pub sent_per_s: f64,
    /// Open loop: the schedule's mean rate over the run (what was asked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_rate: Option<f64>,
    /// Open loop: requests sent later than intended because no connection was free in time.
    pub late: u64,
    /// Bytes written (headers, bodies, TLS records).
    pub bytes_sent: u64,
    /// Bytes read.
    pub bytes_received: u64,
    /// Latency of completed requests (open loop: from the intended send time, so a stalled
    /// server raises it instead of slowing the sender), with the merged histogram.
    pub latency: Distribution,
    /// Time per phase.
    pub phases: HttpPhases,
    /// Responses by status code.
    pub status_codes: std::collections::BTreeMap<String, u64>,
    /// Failures by class.
    pub errors: Vec<HttpErrorCount>,
    /// Connections.
    pub connections: HttpConnections,
    /// Kernel TCP statistics of the connections, each taken as it closed (absent with
    /// `--probe off`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<HttpTcp>,
}

/// Kernel TCP statistics of an HTTP test's connections: `TCP_INFO` of each connection as it
/// closed, and with the eBPF probe every RTT sample the kernel took on them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HttpTcp {
    /// Connections sampled.
    pub connections: u64,
    /// Segments the client sent.
    pub segs_out: u64,
    /// Segments the client retransmitted.
    pub retransmits: u64,
    /// Of those, how many the server got twice (DSACK): spurious, not losses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spurious_retransmits: Option<u64>,
    /// Retransmitted / sent segments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmit_rate: Option<f64>,
    /// Each connection's smoothed RTT when it closed, one sample per connection (`TCP_INFO`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub srtt: Option<Distribution>,
    /// Every RTT sample the kernel took on the connections (eBPF probe), merged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_rtt: Option<Distribution>,
}

/// One side's total for a way or a stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SideTotal {
    /// Bytes.
    pub bytes: u64,
    /// Seconds from the start to the last byte of this side.
    pub seconds: f64,
    /// bytes × 8 / seconds.
    pub bits_per_s: f64,
}

impl SideTotal {
    /// Builds a total, deriving the rate.
    pub fn new(bytes: u64, seconds: f64) -> SideTotal {
        SideTotal { bytes, seconds, bits_per_s: per_second(bytes as f64 * 8.0, seconds) }
    }
}

/// Min / mean / max of the sender's smoothed RTT over the interval samples (µs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RttSummary {
    /// Smallest kernel min-RTT seen.
    pub min_us: u32,
    /// Mean of the smoothed RTT samples.
    pub mean_us: f64,
    /// Largest smoothed RTT sample.
    pub max_us: u32,
    /// How many samples the mean is over (one per stream per interval); 0 in /1 results.
    #[serde(default)]
    pub samples: u64,
}

/// Totals of one stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamSummary {
    /// Stream id.
    pub id: u32,
    /// Which way.
    pub way: Way,
    /// Sender side.
    pub sender: SideTotal,
    /// Receiver side, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver: Option<SideTotal>,
    /// Segments retransmitted by the sender (absent when the sender's kernel was not read: `--probe off`, or a side that did not report; unknown, not zero).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    /// Of those, how many the receiver got twice (DSACK): spurious, not losses. From
    /// `TCP_INFO` of the sending socket at the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spurious_retransmits: Option<u64>,
    /// Sender-side TCP statistics at the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpStats>,
    /// Message counts and rates, for message kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msgs: Option<MsgTotals>,
    /// Round-trip latency (rr; cps: connect), with its histogram.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Distribution>,
    /// The sender's kernel RTT distribution (eBPF probe: every RTT sample the kernel took).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_rtt: Option<Distribution>,
    /// `TCP_INFO` of the sending socket at the end, beside eBPF figures as a cross-check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_info: Option<TcpStats>,
    /// CPU the client's worker for this stream ran pinned to (read back from its affinity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cpu: Option<usize>,
    /// CPU the server's worker for this stream ran pinned to (read back from its affinity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu: Option<usize>,
}

/// Message totals of a stream or a way (msgrate, rr).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct MsgTotals {
    /// Messages sent (rr: transactions completed by the client).
    pub sent: u64,
    /// Messages per second sent, over the sender's seconds.
    pub sent_per_s: f64,
    /// Messages received (rr: requests answered by the server), when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received: Option<u64>,
    /// Messages per second received, over the receiver's seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received_per_s: Option<f64>,
    /// Sent but never received (UDP datagrams; rr over UDP: requests without a response).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost: Option<u64>,
    /// TCP segments the senders put on the wire (`tcpi_segs_out`), to set against messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segs_out: Option<u64>,
    /// TCP segments per second sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segs_out_per_s: Option<f64>,
    /// Datagrams the kernel dropped at the receiving UDP sockets because their queues were full
    /// (/proc/net/udp); on a host-local test this accounts for every lost datagram.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_drops: Option<u64>,
    /// UDP: the receivers' view of the sequenced datagrams over the whole run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpQuality>,
    /// UDP: the receiving socket's queue in bytes as the kernel applied it (of a way: the
    /// smallest of its receivers').
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcvbuf: Option<u64>,
    /// TCP: packets on the wire, both ways: the senders' segments out (data) plus their
    /// segments in (the receivers' ACKs), from the kernel's counters (`tcpi_segs_out`,
    /// `tcpi_segs_in`). What an interface's packet counters see of the test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire_packets: Option<u64>,
    /// `wire_packets` per second of the senders' time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire_packets_per_s: Option<f64>,
    /// cps: the connections that failed, by cause, and the SYNs retransmitted (`sent` counts
    /// the connections completed; `lost` every failed one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conns: Option<ConnCounts>,
}

impl MsgTotals {
    /// The totals of several streams or tests, added: counts summed (a count is known only
    /// when every part knows it), rates over the spans given (`sent_s` for what was sent,
    /// `recv_s` for what was received), datagram quality and connection counts added, the
    /// smallest receive queue. The one place message totals are added: the aggregator's ways
    /// and a merge's both come through here.
    pub fn add_up(parts: &[&MsgTotals], sent_s: f64, recv_s: f64) -> MsgTotals {
        let rate = |n: u64, secs: f64| per_second(n as f64, secs);
        let all = |f: fn(&MsgTotals) -> Option<u64>| parts.iter().map(|x| f(x)).sum::<Option<u64>>();
        let sent: u64 = parts.iter().map(|x| x.sent).sum();
        let received = all(|x| x.received);
        let segs = all(|x| x.segs_out);
        let wire = all(|x| x.wire_packets);
        MsgTotals {
            sent,
            sent_per_s: rate(sent, sent_s),
            received,
            received_per_s: received.map(|r| rate(r, recv_s)),
            lost: all(|x| x.lost),
            segs_out: segs,
            segs_out_per_s: segs.map(|n| rate(n, sent_s)),
            kernel_drops: all(|x| x.kernel_drops),
            wire_packets: wire,
            wire_packets_per_s: wire.map(|n| rate(n, sent_s)),
            udp: UdpQuality::sum(parts.iter().filter_map(|x| x.udp.as_ref())),
            rcvbuf: parts.iter().filter_map(|x| x.rcvbuf).min(),
            conns: ConnCounts::sum(parts.iter().filter_map(|x| x.conns.as_ref())),
        }
    }
}

/// What happened to a cps test's connections besides succeeding: failures by cause, and SYN
/// retransmissions (each a second or more of connect latency). Sums of counters: they add up
/// over flows, agents and merges.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnCounts {
    /// SYNs the client retransmitted on connections that were then established (each
    /// connection's `tcpi_total_retrans` right after `connect`; a failed connection's
    /// retransmissions are in its failure). `None` when not read (`--probe off`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syn_retransmits: Option<u64>,
    /// No local port was free for the destination (`EADDRNOTAVAIL`): ports held in TIME_WAIT
    /// or by other connections; `close = "rst"` avoids TIME_WAIT.
    pub port_exhausted: u64,
    /// The server answered the SYN with a reset (`ECONNREFUSED`): nothing listening, or a
    /// full accept queue with `tcp_abort_on_overflow`.
    pub refused: u64,
    /// Not established, or not answered, within the timeout (SYNs or the request lost).
    pub timed_out: u64,
    /// Reset, or closed by the server, after it was established.
    pub reset: u64,
    /// Any other error (the flow's error or the log names it).
    pub other: u64,
    /// With a rate asked (`--rate`): connections opened more than one gap after their
    /// scheduled time, the flow still busy with the one before (a flow opens one connection at
    /// a time). Not a failure: what tells a flow that could not keep the rate from one that did.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub behind: u64,
}

impl ConnCounts {
    /// Adds another count.
    pub fn add(&mut self, o: &ConnCounts) {
        self.syn_retransmits = match (self.syn_retransmits, o.syn_retransmits) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        self.port_exhausted += o.port_exhausted;
        self.refused += o.refused;
        self.timed_out += o.timed_out;
        self.reset += o.reset;
        self.other += o.other;
        self.behind += o.behind;
    }

    /// The sum of `counts`; `None` when there is none.
    pub fn sum<'a>(counts: impl Iterator<Item = &'a ConnCounts>) -> Option<ConnCounts> {
        counts.fold(None, |acc: Option<ConnCounts>, c| {
            Some(match acc {
                None => *c,
                Some(mut t) => {
                    t.add(c);
                    t
                }
            })
        })
    }

    /// Failed connections, every cause.
    pub fn failed(&self) -> u64 {
        self.port_exhausted + self.refused + self.timed_out + self.reset + self.other
    }
}

/// Totals of one way (summed over its streams).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WaySummary {
    /// Which way.
    pub way: Way,
    /// Number of streams.
    pub streams: u32,
    /// All senders.
    pub sender: SideTotal,
    /// All receivers, when every receiver reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver: Option<SideTotal>,
    /// Segments retransmitted (absent when the sender's kernel was not read: `--probe off`, or a side that did not report; unknown, not zero).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    /// Of those, how many the receivers got twice (DSACK): spurious, not losses; `None` unless
    /// every stream reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spurious_retransmits: Option<u64>,
    /// Sender RTT over the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt: Option<RttSummary>,
    /// The smoothed-RTT samples behind `rtt` (one per stream per interval, ns), lossless.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_hist: Option<EncodedHistogram>,
    /// Largest congestion window seen on any stream (bytes).
    pub cwnd_max_bytes: u64,
    /// Message counts and rates, for message kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msgs: Option<MsgTotals>,
    /// Round-trip latency over all streams (rr; cps: connect), with the merged histogram of
    /// the whole run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Distribution>,
    /// Retransmitted segments / segments sent by the senders.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmit_rate: Option<f64>,
    /// The senders' kernel RTT distribution over all streams (eBPF probe), merged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_rtt: Option<Distribution>,
    /// What limited the senders, their kernels' clocks summed over the streams (each over its
    /// sender's seconds): [`TcpLimits::shares`] of the way. `None` where the kernel does not
    /// report them (before Linux 4.10, UDP, a group of connections).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<TcpLimits>,
}

/// `n` per second over `secs` seconds; 0 over an empty span (a count without a span has no
/// rate). Every rate in a result is computed here.
pub fn per_second(n: f64, secs: f64) -> f64 {
    if secs > 0.0 {
        n / secs
    } else {
        0.0
    }
}

/// CPU cost of the test on each side.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuSummary {
    /// The client threads of this test (workers and control).
    pub client: CpuUsage,
    /// The server threads that carried this test's streams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<CpuUsage>,
    /// Bits moved (both ways) per client CPU-second.
    pub bits_per_client_cpu_s: f64,
    /// Bits moved (both ways) per server CPU-second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bits_per_server_cpu_s: Option<f64>,
}

impl CpuSummary {
    /// Each side's CPU time and the bits the test moved (both ways) per CPU-second of it, 0
    /// for a side that used none. The one place a test's CPU cost is put together: the
    /// aggregator, the HTTP generator and merge call it.
    pub fn new(client: CpuUsage, server: Option<CpuUsage>, bits: f64) -> CpuSummary {
        let per = |c: &CpuUsage| per_second(bits, c.cpu_s());
        CpuSummary {
            bits_per_client_cpu_s: per(&client),
            bits_per_server_cpu_s: server.as_ref().map(per),
            client,
            server,
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
