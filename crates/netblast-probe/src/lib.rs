//! netblast-probe: kernel TCP statistics (RTT, cwnd, retransmits) for netblast's own sockets.
//!
//! # Layout
//! - [`ebpf`]: the eBPF source: a sock_ops program (`ebpf/netblast.bpf.c`) filling per-flow
//!   maps, loaded with aya; an in-kernel RTT histogram per flow.
//! - [`tcpinfo`]: the fallback: `getsockopt(TCP_INFO)`, polled once per interval per socket.
//! - [`abi`]: the map value layout shared with the kernel program.
//! - [`Probe`] / [`FlowWatch`]: what the engine uses: open a source once per process
//!   ([`ProbeMode`] `auto` tries eBPF and falls back with the reason), watch each socket,
//!   sample it at interval ticks. The source in use, and why, goes into every result.

#![warn(missing_docs)]

pub mod abi;
pub mod ebpf;
pub mod tcpinfo;

use hdrhistogram::Histogram;
use netblast_spec::result::{ProbeInfo, TcpStats};
use std::os::fd::RawFd;
use std::sync::Arc;

/// Which source of TCP statistics the user asked for (`--probe`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProbeMode {
    /// eBPF where it loads, else `TCP_INFO` (the reason is reported).
    #[default]
    Auto,
    /// eBPF or fail.
    Ebpf,
    /// Poll `TCP_INFO`.
    TcpInfo,
    /// Collect nothing.
    Off,
}

impl std::str::FromStr for ProbeMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "auto" => ProbeMode::Auto,
            "ebpf" => ProbeMode::Ebpf,
            "tcpinfo" | "tcp_info" => ProbeMode::TcpInfo,
            "off" => ProbeMode::Off,
            _ => return Err(format!("invalid probe {s:?}: expected auto, ebpf, tcpinfo or off")),
        })
    }
}

/// Why the eBPF probe could not be used.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProbeError {
    /// The binary was built without the kernel programs.
    #[error("this netblast was built without the eBPF probe ({0}); install clang and libbpf-dev and rebuild")]
    NotBuilt(String),
    /// No cgroup v2 hierarchy is mounted.
    #[error(
        "no cgroup v2 hierarchy is mounted here (the probe attaches to it); mount one (mount -t cgroup2 none \
         /sys/fs/cgroup/unified). Under `ip netns exec`, which remounts /sys, use `nsenter --net=/run/netns/NAME` instead"
    )]
    NoCgroup2,
    /// Not allowed to load or attach.
    #[error(
        "loading eBPF needs root, or CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN (a container: securityContext \
         capabilities add [BPF, PERFMON, NET_ADMIN], as deploy/k8s does): {0}"
    )]
    Privilege(String),
    /// The kernel refused the object or the program.
    #[error("the kernel refused the eBPF probe: {0}")]
    Load(String),
    /// Attaching failed.
    #[error("{0}")]
    Attach(String),
    /// A map operation failed.
    #[error("eBPF map: {0}")]
    Map(String),
}

#[derive(Debug)]
enum Source {
    Ebpf(Box<ebpf::EbpfProbe>),
    TcpInfo,
    Off,
}

#[derive(Debug)]
struct Inner {
    source: Source,
    fallback_reason: Option<String>,
}

/// The source of TCP statistics for this process; cheap to clone.
#[derive(Debug, Clone)]
pub struct Probe {
    inner: Arc<Inner>,
}

impl Probe {
    /// Opens the requested source. `Ebpf` fails when eBPF cannot be used; `Auto` falls back to
    /// `TCP_INFO` and keeps the reason for the result.
    pub fn open(mode: ProbeMode) -> Result<Probe, ProbeError> {
        Probe::open_with(mode, false)
    }

    /// As [`Probe::open`]; `kernel_stats` also has the kernel count the eBPF program's run
    /// time, reported in [`Probe::info`] (for measuring the probe's overhead).
    pub fn open_with(mode: ProbeMode, kernel_stats: bool) -> Result<Probe, ProbeError> {
        let (source, fallback_reason) = match mode {
            ProbeMode::Off => (Source::Off, None),
            ProbeMode::TcpInfo => (Source::TcpInfo, Some("--probe tcpinfo: eBPF not tried".to_string())),
            ProbeMode::Ebpf => (Source::Ebpf(Box::new(ebpf::EbpfProbe::open(kernel_stats)?)), None),
            ProbeMode::Auto => match ebpf::EbpfProbe::open(kernel_stats) {
                Ok(p) => (Source::Ebpf(Box::new(p)), None),
                Err(e) => (Source::TcpInfo, Some(e.to_string())),
            },
        };
        Ok(Probe { inner: Arc::new(Inner { source, fallback_reason }) })
    }

    /// A `TCP_INFO` probe (cannot fail).
    pub fn tcp_info() -> Probe {
        Probe { inner: Arc::new(Inner { source: Source::TcpInfo, fallback_reason: None }) }
    }

    /// This probe, or where it is eBPF, a `TCP_INFO` one that gives `reason` for not using it.
    pub fn without_ebpf(&self, reason: &str) -> Probe {
        match self.inner.source {
            Source::Ebpf(_) => {
                Probe { inner: Arc::new(Inner { source: Source::TcpInfo, fallback_reason: Some(reason.into()) }) }
            }
            _ => self.clone(),
        }
    }

    /// Whether this probe collects anything (`--probe off` does not).
    pub fn collects(&self) -> bool {
        !matches!(self.inner.source, Source::Off)
    }

    /// Where statistics come from, for the result.
    pub fn info(&self) -> ProbeInfo {
        let tcp_source = match self.inner.source {
            Source::Ebpf(_) => "ebpf",
            Source::TcpInfo => "tcp_info",
            Source::Off => "off",
        };
        let stats = self.ebpf().and_then(|e| e.run_stats());
        ProbeInfo {
            tcp_source: tcp_source.into(),
            fallback_reason: self.inner.fallback_reason.clone(),
            kernel_run_ns: stats.map(|s| s.0),
            kernel_runs: stats.map(|s| s.1),
        }
    }

    /// The program's run-time counters now (ns, runs), when BPF statistics are on: taken
    /// when a run begins, for [`Probe::info_since`].
    pub fn run_stats(&self) -> Option<(u64, u64)> {
        self.ebpf().and_then(|e| e.run_stats())
    }

    /// [`Probe::info`], with the program's run time counted from `start` (a
    /// [`Probe::run_stats`] taken when the run began), not from the load: one probe serves
    /// many runs (an agent's, a bench's).
    pub fn info_since(&self, start: Option<(u64, u64)>) -> ProbeInfo {
        let mut info = self.info();
        if let (Some((ns0, runs0)), Some(ns), Some(runs)) = (start, info.kernel_run_ns, info.kernel_runs) {
            info.kernel_run_ns = Some(ns.saturating_sub(ns0));
            info.kernel_runs = Some(runs.saturating_sub(runs0));
        }
        info
    }

    /// The eBPF probe, when that is the source (for tests and `doctor`).
    pub fn ebpf(&self) -> Option<&ebpf::EbpfProbe> {
        match &self.inner.source {
            Source::Ebpf(p) => Some(p),
            _ => None,
        }
    }

    /// From now on the eBPF program is attached to the cgroup only while a [`Probe::hold`]
    /// guard lives (it stays loaded in between): what a server wants, so that while it runs no
    /// test the program runs for none of the host's connections. Without eBPF, nothing.
    pub fn attach_on_demand(&self) {
        if let Source::Ebpf(p) = &self.inner.source {
            p.release_opener();
        }
    }

    /// Keeps the eBPF program attached until the guard drops, attaching it if it was attached
    /// on demand and no one held it. Without eBPF, a guard that does nothing.
    pub fn hold(&self) -> Result<Attached, ProbeError> {
        match &self.inner.source {
            Source::Ebpf(p) => {
                p.acquire()?;
                Ok(Attached { probe: Some(self.inner.clone()) })
            }
            _ => Ok(Attached { probe: None }),
        }
    }

    /// Asks for kernel callbacks on the connections this host makes to `port` from now on (a
    /// client's, to its server; eBPF only; call it before connecting).
    pub fn watch_peer_port(&self, port: u16) -> Result<(), ProbeError> {
        match &self.inner.source {
            Source::Ebpf(p) => p.watch_peer_port(port),
            _ => Ok(()),
        }
    }

    /// Asks for kernel callbacks on the connections accepted on local `port` from now on (a
    /// server's listener; eBPF only; call it before accepting). Connections this host makes to
    /// the port are not watched by it: on one host a server does not instrument its clients.
    pub fn watch_local_port(&self, port: u16) -> Result<(), ProbeError> {
        match &self.inner.source {
            Source::Ebpf(p) => p.watch_local_port(port),
            _ => Ok(()),
        }
    }

    /// Starts watching one socket. With eBPF a failure to register falls back to `TCP_INFO`
    /// for that socket.
    pub fn watch(&self, fd: RawFd) -> FlowWatch {
        let cookie = match &self.inner.source {
            Source::Ebpf(p) => p.register(fd).ok(),
            _ => None,
        };
        FlowWatch { fd, cookie, group: None, probe: self.inner.clone() }
    }

    /// Starts watching every connection this host makes to `port` from now on, as one group
    /// (a cps flow's listener), in the kernel: nothing to do per connection. `None` unless the
    /// source is eBPF (and the group could be made).
    pub fn watch_group(&self, port: u16) -> Option<FlowWatch> {
        let Source::Ebpf(p) = &self.inner.source else { return None };
        let id = p.add_group(port).ok()?;
        Some(FlowWatch { fd: -1, cookie: None, group: Some((id, Some(port))), probe: self.inner.clone() })
    }

    /// A group for the connections of the threads that join it ([`GroupTag::join_thread`]):
    /// what HTTP without keep-alive uses, where the server's port is shared with others. The
    /// watch reads the group; the tag names threads. `None` unless the source is eBPF on a
    /// kernel that lets the program tell threads apart (and the group could be made).
    pub fn thread_group(&self) -> Option<(FlowWatch, GroupTag)> {
        let Source::Ebpf(p) = &self.inner.source else { return None };
        if !p.thread_groups() {
            return None;
        }
        let id = p.new_group().ok()?;
        let watch = FlowWatch { fd: -1, cookie: None, group: Some((id, None)), probe: self.inner.clone() };
        Some((watch, GroupTag { id, probe: self.inner.clone() }))
    }
}

/// Names threads as a kernel group's (see [`Probe::thread_group`]); cheap to clone.
#[derive(Debug, Clone)]
pub struct GroupTag {
    id: u32,
    probe: Arc<Inner>,
}

impl GroupTag {
    /// Makes every connection the calling thread opens, while the guard lives, the group's.
    pub fn join_thread(&self) -> Result<ThreadInGroup, ProbeError> {
        let tid = match &self.probe.source {
            Source::Ebpf(p) => Some(p.join_thread(self.id)?),
            _ => None,
        };
        Ok(ThreadInGroup { tid, probe: self.probe.clone() })
    }
}

/// Keeps the eBPF program attached while it lives ([`Probe::hold`]).
#[derive(Debug)]
pub struct Attached {
    probe: Option<Arc<Inner>>,
}

impl Drop for Attached {
    fn drop(&mut self) {
        if let Some(Source::Ebpf(p)) = self.probe.as_ref().map(|p| &p.source) {
            p.release();
        }
    }
}

/// A thread named as a group's; dropping it forgets the thread.
#[derive(Debug)]
pub struct ThreadInGroup {
    tid: Option<u32>,
    probe: Arc<Inner>,
}

impl Drop for ThreadInGroup {
    fn drop(&mut self) {
        if let (Source::Ebpf(p), Some(tid)) = (&self.probe.source, self.tid) {
            p.leave_thread(tid);
        }
    }
}

/// One watched socket; sampled by the worker that owns the socket, forgotten on drop.
#[derive(Debug)]
pub struct FlowWatch {
    fd: RawFd,
    cookie: Option<u64>,
    /// A group of connections (id, and the port naming it, if one does) rather than one socket.
    group: Option<(u32, Option<u16>)>,
    probe: Arc<Inner>,
}

impl FlowWatch {
    /// The socket's statistics now; `None` when collection is off, the socket is gone, or (eBPF)
    /// the kernel has not reported an RTT sample for it yet (a socket that only receives).
    pub fn sample(&self) -> Option<TcpStats> {
        if let Some(g) = self.group_figures() {
            return Some(from_group(&g));
        }
        match (&self.probe.source, self.cookie) {
            (Source::Off, _) => None,
            (Source::Ebpf(p), Some(c)) => p.read(c).filter(|f| f.rtt_samples > 0).map(|f| TcpStats {
                // The sock_ops program does not see the kernel's limit clocks; TCP_INFO does.
                limits: tcpinfo::read_limits(self.fd),
                ..from_ebpf(&f)
            }),
            _ => tcpinfo::read(self.fd),
        }
    }

    /// Waits (up to `limit`) until the peer has acknowledged everything the socket sent, so
    /// the final figures are final: a sender's kernel keeps retransmitting after the last
    /// `send` returned. Returns whether it settled.
    pub fn settle(&self, limit: std::time::Duration) -> bool {
        if self.group.is_some() {
            return true;
        }
        let until = std::time::Instant::now() + limit;
        loop {
            match tcpinfo::read_raw(self.fd) {
                Some(i) if i.unacked > 0 || i.notsent_bytes > 0 => {}
                _ => return true,
            }
            if std::time::Instant::now() >= until {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// The kernel's RTT histogram of the socket (eBPF only), in ns.
    pub fn rtt_histogram(&self) -> Option<Histogram<u64>> {
        if self.group.is_some() {
            return self.group_figures().filter(|g| g.rtt_samples > 0).map(|g| ebpf::group_histogram(&g));
        }
        match (&self.probe.source, self.cookie) {
            (Source::Ebpf(p), Some(c)) => p.read(c).filter(|f| f.rtt_samples > 0).map(|f| ebpf::rtt_histogram(&f)),
            _ => None,
        }
    }

    /// `TCP_INFO` of the socket, when the main source is eBPF: the cross-check the result
    /// carries beside the eBPF figures.
    pub fn tcp_info_check(&self) -> Option<TcpStats> {
        if self.group.is_some() {
            return None;
        }
        match self.probe.source {
            Source::Ebpf(_) => tcpinfo::read(self.fd),
            _ => None,
        }
    }
}

impl FlowWatch {
    /// A group's figures now (a group watch only).
    fn group_figures(&self) -> Option<Box<abi::NbGroup>> {
        match (&self.probe.source, self.group) {
            (Source::Ebpf(p), Some((id, _))) => p.read_group(id),
            _ => None,
        }
    }

    /// A group watch's connections established and the SYNs they retransmitted first.
    pub fn group_connections(&self) -> Option<(u64, u64)> {
        self.group_figures().map(|g| (g.conns, g.syn_retrans))
    }
}

impl Drop for FlowWatch {
    fn drop(&mut self) {
        if let (Source::Ebpf(p), Some((id, port))) = (&self.probe.source, self.group) {
            p.remove_group(id, port);
        }
        if let (Source::Ebpf(p), Some(c)) = (&self.probe.source, self.cookie) {
            p.unregister(c);
        }
    }
}

/// A group's figures as one flow's: the mean of its RTT samples as the RTT, its smallest, the
/// retransmissions of all its connections since they were established.
fn from_group(g: &abi::NbGroup) -> TcpStats {
    TcpStats {
        rtt_us: g.rtt_sum_us.checked_div(g.rtt_samples).unwrap_or(0) as u32,
        rttvar_us: 0,
        min_rtt_us: g.min_rtt_us,
        cwnd_segs: 0,
        mss: 0,
        retrans_segs: g.retrans_segs,
        segs_out: 0,
        segs_in: 0,
        bytes_acked: 0,
        delivery_rate_bytes_per_s: 0,
        dsack_segs: None,
        limits: None,
    }
}

fn from_ebpf(f: &abi::NbFlow) -> TcpStats {
    TcpStats {
        rtt_us: f.srtt_us,
        rttvar_us: 0,
        min_rtt_us: f.min_rtt_us,
        cwnd_segs: f.snd_cwnd,
        mss: f.mss,
        // The kernel's own counter as of the last callback; every retransmission fires one,
        // after the count is updated. (The sum of the callbacks' segments would miss
        // retransmissions made before the socket was registered, such as a SYN's, and those
        // whose transmission failed, which tcpi_total_retrans counts too.)
        retrans_segs: f.total_retrans as u64,
        segs_out: f.segs_out as u64,
        segs_in: f.segs_in as u64,
        bytes_acked: f.bytes_acked,
        delivery_rate_bytes_per_s: f.delivery_rate,
        dsack_segs: None,
        limits: None,
    }
}
