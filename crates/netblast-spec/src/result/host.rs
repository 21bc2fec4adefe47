//! The machines a run ran on: the agent, its clock, the probe, host facts and socket
//! defaults, CPU time and load, and a test's CPU cost.

use super::way::per_second;
use serde::{Deserialize, Serialize};

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
        if self.wall_s > 0.0 { (self.user_s + self.system_s) / self.wall_s } else { 0.0 }
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
    /// netblast's own worker threads of this test on this host, each with its CPU time and
    /// the CPU it was pinned to: what tells a CPU saturated by netblast from one saturated by
    /// another process. Empty in results from before it was kept, and on a server.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<ThreadCpu>,
}

/// One of netblast's worker threads over a test: its own CPU time (`RUSAGE_THREAD`) and where
/// it ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadCpu {
    /// Which thread: `worker 0`, `worker 1`, ...
    pub name: String,
    /// The CPU it was pinned to (read back from its affinity); `None`: not pinned, it ran
    /// wherever the scheduler put it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u32>,
    /// Its CPU time over its wall time.
    pub usage: CpuUsage,
}

impl ThreadCpu {
    /// The share of its wall time it ran (user + system), 0..1.
    pub fn busy(&self) -> f64 {
        self.usage.cpus_used().clamp(0.0, 1.0)
    }
}

impl HostLoad {
    /// The busiest CPU.
    pub fn busiest(&self) -> Option<&CpuLoad> {
        self.cpus.iter().max_by(|a, b| a.busy().total_cmp(&b.busy()))
    }

    /// The CPU numbered `cpu`, when it was read.
    pub fn cpu(&self, cpu: u32) -> Option<&CpuLoad> {
        self.cpus.iter().find(|c| c.cpu == cpu)
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
