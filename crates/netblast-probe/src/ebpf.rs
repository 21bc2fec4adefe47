//! The eBPF source of TCP statistics: loads `ebpf/netblast.bpf.c` (built by build.rs, embedded
//! here) with aya and attaches its sock_ops program to the cgroup v2 root.
//!
//! Hooks: `netblast_sockops` (sock_ops, cgroup v2 root, multi-attach). It enables the RTT,
//! retransmit and state callbacks on connections whose local or remote port is in the `ports`
//! map, and updates the `flows` map entry of a socket only if user space registered its
//! cookie. So other traffic on the host costs one hash lookup per new connection and shows up
//! nowhere.
//!
//! Metrics per watched socket (from the kernel, per callback): measured RTT samples into a
//! histogram (µs, 0.8% buckets), smoothed RTT, min/max RTT, cwnd, MSS, segments in/out, bytes
//! acked, delivery rate, and retransmitted segments summed from the retransmit callbacks.
//! Memory: one ~9 KiB map entry per watched socket, allocated on registration. Short
//! connections are watched as a group instead: one ~9 KiB entry per CPU per group. A cps
//! flow's group is named by its listener's port, so user space does nothing per connection;
//! connections to a port others share (HTTP without keep-alive) are tied to their group by
//! the worker thread that makes them (named once per thread), the program keeping a 12-byte
//! preallocated entry per connection from connect to close.
//!
//! Lifetime: the attachment is a bpf_link owned by this process; dropping [`EbpfProbe`], any
//! exit path, or the process dying detaches it. Nothing is pinned in bpffs. The opener holds
//! the program attached; a server gives that hold up (`Probe::attach_on_demand`) and attaches
//! the program only while a test holds it (`Probe::hold`), so an idle `netblast
//! serve` runs nothing for the host's other connections. The program and its maps stay
//! loaded in between.

use crate::ProbeError;
use crate::abi::{self, NbFlow, NbGroup};
use aya::Ebpf;
use aya::maps::{Array, HashMap, MapData, PerCpuHashMap, PerCpuValues};
use aya::programs::sock_ops::SockOpsLinkId;
use aya::programs::{CgroupAttachMode, SockOps};
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, RwLock};

/// The compiled kernel object; empty when the build had no clang.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/netblast.bpf.o"));

/// How the kernel object was built (`clang`, or `not built: <why>`).
pub const BUILD: &str = env!("NETBLAST_BPF_BUILD");

/// Whether this binary carries the eBPF programs.
pub fn built_in() -> bool {
    !OBJECT.is_empty()
}

/// The cgroup v2 mount point, from /proc/mounts (`/sys/fs/cgroup` on pure v2 hosts,
/// `/sys/fs/cgroup/unified` on hybrid ones). In a mount namespace without it (as
/// `ip netns exec` makes), the host's hierarchy is reached through /proc/1/root.
pub fn cgroup2_root() -> Option<PathBuf> {
    let find = |mounts: &str, field: usize| {
        mounts.lines().find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            match field {
                // /proc/mounts: dev path fstype ...
                1 => (f.get(2) == Some(&"cgroup2")).then(|| PathBuf::from(f[1])),
                // mountinfo: id parent dev root mountpoint options ... - fstype source ...
                _ => {
                    let dash = f.iter().position(|x| *x == "-")?;
                    (f.get(dash + 1) == Some(&"cgroup2")).then(|| PathBuf::from(f[4]))
                }
            }
        })
    };
    if let Some(p) = std::fs::read_to_string("/proc/self/mounts").ok().and_then(|m| find(&m, 1)) {
        return Some(p);
    }
    let host = std::fs::read_to_string("/proc/1/mountinfo").ok().and_then(|m| find(&m, 4))?;
    let via = PathBuf::from("/proc/1/root").join(host.strip_prefix("/").unwrap_or(&host));
    via.is_dir().then_some(via)
}

/// The threads named as groups': the map, and their count, which the program reads before
/// it looks a connection up as a thread's.
struct Threads {
    map: HashMap<MapData, u32, u32>,
    named: Array<MapData, u32>,
    count: u32,
}

impl Threads {
    fn set_count(&mut self, count: u32) -> Result<(), ProbeError> {
        self.named.set(0, count, 0).map_err(|e| ProbeError::Map(format!("cannot count the named threads: {e}")))?;
        self.count = count;
        Ok(())
    }
}

/// A loaded and attached probe. Dropping it detaches everything.
pub struct EbpfProbe {
    stats: Option<std::os::fd::OwnedFd>,
    /// Read by every worker at its ticks (shared), written only when a socket is registered or
    /// forgotten: workers never wait on each other to read.
    flows: RwLock<HashMap<MapData, u64, NbFlow>>,
    groups: RwLock<PerCpuHashMap<MapData, u32, NbGroup>>,
    /// A slot per port (0: not watched).
    ports: Mutex<Array<MapData, u32>>,
    /// Thread id -> group id (`None`: the kernel's verifier refused the program that reads
    /// the current thread, and the one without thread groups is loaded).
    threads: Option<Mutex<Threads>>,
    next_group: std::sync::atomic::AtomicU32,
    /// The program loaded.
    prog_name: &'static str,
    cgroup: PathBuf,
    /// Whether the opener's hold on the attachment is still held (given up once, by a server).
    opener_holds: std::sync::atomic::AtomicBool,
    // Owns the program and its link; declared last so the maps above are closed first.
    attachment: Mutex<Attachment>,
}

/// The loaded object and, while anyone holds it, the program's link to the cgroup.
struct Attachment {
    ebpf: Ebpf,
    link: Option<SockOpsLinkId>,
    holds: usize,
}

/// The loaded sock_ops program named `name` in `ebpf`.
fn sock_ops<'a>(ebpf: &'a mut Ebpf, name: &str) -> Result<&'a mut SockOps, ProbeError> {
    ebpf.program_mut(name)
        .ok_or_else(|| ProbeError::Load(format!("program {name} missing from the object")))?
        .try_into()
        .map_err(|e: aya::programs::ProgramError| ProbeError::Load(e.to_string()))
}

/// Attaches the loaded program `name` to the cgroup at `cgroup`.
fn attach(ebpf: &mut Ebpf, name: &str, cgroup: &Path) -> Result<SockOpsLinkId, ProbeError> {
    let prog = sock_ops(ebpf, name)?;
    let dir = std::fs::File::open(cgroup)
        .map_err(|e| ProbeError::Attach(format!("cannot open cgroup {}: {e}", cgroup.display())))?;
    // On kernels with bpf_link (5.7+) aya attaches through a link, which the kernel always
    // runs beside other programs on the cgroup and which takes no flags: `Single` is the
    // mode that maps to flags 0 (AllowMultiple would be refused with EINVAL).
    prog.attach(dir, CgroupAttachMode::Single).map_err(|e| {
        if denied(&e) {
            ProbeError::Privilege(chain(&e))
        } else {
            ProbeError::Attach(format!("cannot attach sock_ops to {}: {}", cgroup.display(), chain(&e)))
        }
    })
}

impl std::fmt::Debug for EbpfProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EbpfProbe").field("cgroup", &self.cgroup).finish_non_exhaustive()
    }
}

/// An error with its sources, on one line; a verifier's log (many lines of instructions) is
/// cut to its first line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    match s.split_once('\n') {
        Some((first, _)) => format!("{first} (verifier log cut)"),
        None => s,
    }
}

fn denied(e: &dyn std::error::Error) -> bool {
    let s = chain(e);
    s.contains("Operation not permitted") || s.contains("Permission denied") || s.contains("EPERM")
}

impl EbpfProbe {
    /// Loads the programs and attaches them to the cgroup v2 root. With `kernel_stats` the
    /// kernel also counts the program's run time (BPF_ENABLE_STATS: a small cost for every BPF
    /// program on the host until this probe is dropped).
    pub fn open(kernel_stats: bool) -> Result<EbpfProbe, ProbeError> {
        if !built_in() {
            return Err(ProbeError::NotBuilt(BUILD.trim_start_matches("not built: ").to_string()));
        }
        let cgroup = cgroup2_root().ok_or(ProbeError::NoCgroup2)?;
        raise_memlock();
        let mut ebpf = Ebpf::load(OBJECT)
            .map_err(|e| if denied(&e) { ProbeError::Privilege(chain(&e)) } else { ProbeError::Load(chain(&e)) })?;
        // The build with thread groups where this kernel's verifier takes it (sock_ops reading
        // the current thread), else the one without.
        let mut by_thread = true;
        for name in ["netblast_sockops_threads", "netblast_sockops"] {
            match sock_ops(&mut ebpf, name)?.load() {
                Ok(()) => break,
                // A verifier's refusal reads EACCES too: the plain build tells which it was.
                Err(_) if by_thread => by_thread = false,
                Err(e) if denied(&e) => return Err(ProbeError::Privilege(chain(&e))),
                Err(e) => return Err(ProbeError::Load(chain(&e))),
            }
        }
        let name = if by_thread { "netblast_sockops_threads" } else { "netblast_sockops" };
        let link = attach(&mut ebpf, name, &cgroup)?;
        let take = |ebpf: &mut Ebpf, name: &str| {
            ebpf.take_map(name).ok_or_else(|| ProbeError::Load(format!("map {name} missing from the object")))
        };
        let flows = HashMap::try_from(take(&mut ebpf, "flows")?).map_err(|e| ProbeError::Load(e.to_string()))?;
        let ports = Array::try_from(take(&mut ebpf, "ports")?).map_err(|e| ProbeError::Load(e.to_string()))?;
        let groups =
            PerCpuHashMap::try_from(take(&mut ebpf, "groups")?).map_err(|e| ProbeError::Load(e.to_string()))?;
        let threads = match by_thread {
            true => Some(Mutex::new(Threads {
                map: HashMap::try_from(take(&mut ebpf, "threads")?).map_err(|e| ProbeError::Load(e.to_string()))?,
                named: Array::try_from(take(&mut ebpf, "threads_named")?)
                    .map_err(|e| ProbeError::Load(e.to_string()))?,
                count: 0,
            })),
            false => None,
        };
        let stats = if kernel_stats {
            Some(
                aya::sys::enable_stats(aya::sys::Stats::RunTime)
                    .map_err(|e| ProbeError::Load(format!("cannot enable BPF run-time statistics: {}", chain(&e))))?,
            )
        } else {
            None
        };
        Ok(EbpfProbe {
            stats,
            flows: RwLock::new(flows),
            groups: RwLock::new(groups),
            ports: Mutex::new(ports),
            threads,
            prog_name: name,
            next_group: std::sync::atomic::AtomicU32::new(abi::GROUP_FIRST),
            cgroup,
            opener_holds: std::sync::atomic::AtomicBool::new(true),
            attachment: Mutex::new(Attachment { ebpf, link: Some(link), holds: 1 }),
        })
    }

    /// Holds the program attached, attaching it again when no one held it. Each call needs
    /// its [`EbpfProbe::release`].
    pub(crate) fn acquire(&self) -> Result<(), ProbeError> {
        let mut guard = self.attachment.lock().unwrap_or_else(|e| e.into_inner());
        let a = &mut *guard;
        if a.link.is_none() {
            a.link = Some(attach(&mut a.ebpf, self.prog_name, &self.cgroup)?);
        }
        a.holds += 1;
        Ok(())
    }

    /// Gives a hold back: with none left the program is detached (it stays loaded, with its
    /// maps and their entries, until the probe is dropped).
    pub(crate) fn release(&self) {
        let mut guard = self.attachment.lock().unwrap_or_else(|e| e.into_inner());
        let a = &mut *guard;
        a.holds = a.holds.saturating_sub(1);
        if a.holds == 0 {
            if let Some(link) = a.link.take() {
                if let Ok(prog) = sock_ops(&mut a.ebpf, self.prog_name) {
                    let _ = prog.detach(link);
                }
            }
        }
    }

    /// Gives the opener's hold back (once; later calls do nothing): from then on the program
    /// is attached only while an [`EbpfProbe::acquire`] holds it.
    pub(crate) fn release_opener(&self) {
        if self.opener_holds.swap(false, std::sync::atomic::Ordering::AcqRel) {
            self.release();
        }
    }

    /// The program's own cost so far: (run time in ns, runs), when statistics are enabled.
    pub fn run_stats(&self) -> Option<(u64, u64)> {
        self.stats.as_ref()?;
        let a = self.attachment.lock().unwrap_or_else(|e| e.into_inner());
        let info = a.ebpf.program(self.prog_name)?.info().ok()?;
        Some((info.run_time().as_nanos() as u64, info.run_count()))
    }

    /// The cgroup the program is attached to.
    pub fn cgroup(&self) -> &std::path::Path {
        &self.cgroup
    }

    /// Enables the kernel callbacks for the connections this host makes to `port` from now on
    /// (a client's, to its server).
    pub fn watch_peer_port(&self, port: u16) -> Result<(), ProbeError> {
        self.watch_port(port, abi::PORT_WATCH_PEER)
    }

    /// Enables the kernel callbacks for the connections accepted on local `port` from now on
    /// (a server's listener); not for the connections made to it from this host.
    pub fn watch_local_port(&self, port: u16) -> Result<(), ProbeError> {
        self.watch_port(port, abi::PORT_WATCH_LOCAL)
    }

    /// Adds a `PORT_WATCH_*` bit to the port's slot (a group there gives way to the watch).
    fn watch_port(&self, port: u16, bit: u32) -> Result<(), ProbeError> {
        let mut p = self.ports.lock().unwrap_or_else(|e| e.into_inner());
        let key = u32::from(port);
        let cur = p.get(&key, 0).unwrap_or(0);
        let value = if cur < abi::GROUP_FIRST { cur | bit } else { bit };
        p.set(key, value, 0).map_err(|e| ProbeError::Map(format!("cannot watch port {port}: {e}")))
    }

    /// Creates an empty group, for connections tied to it one by one ([`EbpfProbe::join_thread`]).
    /// Returns the group id.
    pub fn new_group(&self) -> Result<u32, ProbeError> {
        let id = self.next_group.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let n = aya::util::nr_cpus().map_err(|(_, e)| ProbeError::Map(format!("cannot count CPUs: {e}")))?;
        let zero = PerCpuValues::try_from(vec![*NbGroup::zeroed(); n])
            .map_err(|e| ProbeError::Map(format!("cannot create a connection group: {e}")))?;
        let mut g = self.groups.write().unwrap_or_else(|e| e.into_inner());
        g.insert(id, zero, 0).map_err(|e| ProbeError::Map(format!("cannot create a connection group: {e}")))?;
        Ok(id)
    }

    /// Whether connections can be tied to groups by the thread that makes them.
    pub fn thread_groups(&self) -> bool {
        self.threads.is_some()
    }

    /// Names the calling thread as group `id`'s: every connection it makes from now on is the
    /// group's, until [`EbpfProbe::leave_thread`]. Returns the thread id.
    pub fn join_thread(&self, id: u32) -> Result<u32, ProbeError> {
        let Some(t) = &self.threads else {
            return Err(ProbeError::Map("this kernel cannot tie connections to groups by thread".into()));
        };
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as u32;
        let mut t = t.lock().unwrap_or_else(|e| e.into_inner());
        let new = t.map.get(&tid, 0).is_err();
        t.map.insert(tid, id, 0).map_err(|e| ProbeError::Map(format!("cannot name a thread's group: {e}")))?;
        if new {
            let count = t.count + 1;
            if let Err(e) = t.set_count(count) {
                let _ = t.map.remove(&tid);
                return Err(e);
            }
        }
        Ok(tid)
    }

    /// Forgets a thread's group. Connections it opened stay the group's until they close, as
    /// long as some thread is still named (with none, the program looks no connection up as
    /// a thread's).
    pub fn leave_thread(&self, tid: u32) {
        if let Some(t) = &self.threads {
            let mut t = t.lock().unwrap_or_else(|e| e.into_inner());
            if t.map.remove(&tid).is_ok() {
                let count = t.count.saturating_sub(1);
                let _ = t.set_count(count);
            }
        }
    }

    /// Creates a group for every connection this host makes to `port` from now on (a cps
    /// flow's listener): the kernel ties each to the group as it is established. Returns the
    /// group id.
    pub fn add_group(&self, port: u16) -> Result<u32, ProbeError> {
        let id = self.new_group()?;
        let mut p = self.ports.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = p.set(u32::from(port), id, 0) {
            drop(p);
            self.remove_group(id, None);
            return Err(ProbeError::Map(format!("cannot watch port {port}: {e}")));
        }
        Ok(id)
    }

    /// The kernel's figures for a group: its CPUs' entries added up.
    pub fn read_group(&self, id: u32) -> Option<Box<NbGroup>> {
        let per_cpu = {
            let g = self.groups.read().unwrap_or_else(|e| e.into_inner());
            g.get(&id, 0).ok()?
        };
        let mut sum = NbGroup::zeroed();
        for c in per_cpu.iter() {
            sum.conns += c.conns;
            sum.syn_retrans += c.syn_retrans;
            sum.rtt_samples += c.rtt_samples;
            sum.rtt_sum_us += c.rtt_sum_us;
            sum.retrans_segs += c.retrans_segs;
            sum.retrans_events += c.retrans_events;
            if c.rtt_samples > 0 {
                sum.last_rtt_us = c.last_rtt_us;
            }
            if c.min_rtt_us > 0 && (sum.min_rtt_us == 0 || c.min_rtt_us < sum.min_rtt_us) {
                sum.min_rtt_us = c.min_rtt_us;
            }
            sum.max_rtt_us = sum.max_rtt_us.max(c.max_rtt_us);
            for (s, v) in sum.hist.iter_mut().zip(c.hist.iter()) {
                *s += v;
            }
        }
        Some(sum)
    }

    /// Forgets a group (and its port, when given): connections still open stop counting.
    pub fn remove_group(&self, id: u32, port: Option<u16>) {
        if let Some(port) = port {
            let mut p = self.ports.lock().unwrap_or_else(|e| e.into_inner());
            if p.get(&u32::from(port), 0).is_ok_and(|v| v == id) {
                let _ = p.set(u32::from(port), 0, 0);
            }
        }
        let mut g = self.groups.write().unwrap_or_else(|e| e.into_inner());
        let _ = g.remove(&id);
    }

    /// Registers a socket: from now on the kernel program records it. Returns its cookie.
    pub fn register(&self, fd: RawFd) -> Result<u64, ProbeError> {
        let cookie = socket_cookie(fd).map_err(|e| ProbeError::Map(format!("SO_COOKIE: {e}")))?;
        let mut f = self.flows.write().unwrap_or_else(|e| e.into_inner());
        f.insert(cookie, NbFlow::zeroed().as_ref(), 0)
            .map_err(|e| ProbeError::Map(format!("cannot register socket: {e}")))?;
        Ok(cookie)
    }

    /// The kernel's figures for a registered socket.
    pub fn read(&self, cookie: u64) -> Option<Box<NbFlow>> {
        let f = self.flows.read().unwrap_or_else(|e| e.into_inner());
        f.get(&cookie, 0).ok().map(Box::new)
    }

    /// Forgets a socket.
    pub fn unregister(&self, cookie: u64) {
        let mut f = self.flows.write().unwrap_or_else(|e| e.into_inner());
        let _ = f.remove(&cookie);
    }

    /// Number of connection groups held (for tests).
    pub fn groups(&self) -> usize {
        let g = self.groups.read().unwrap_or_else(|e| e.into_inner());
        g.keys().count()
    }

    /// Number of sockets registered (for tests and `doctor`).
    pub fn registered(&self) -> usize {
        let f = self.flows.read().unwrap_or_else(|e| e.into_inner());
        f.keys().count()
    }
}

fn raise_memlock() {
    // Kernels before 5.11 charge BPF memory to RLIMIT_MEMLOCK; later ones ignore it.
    let rl = libc::rlimit { rlim_cur: libc::RLIM_INFINITY, rlim_max: libc::RLIM_INFINITY };
    // SAFETY: valid pointer to an rlimit; failure is harmless (the load reports it).
    unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &rl) };
}

/// `getsockopt(SO_COOKIE)`: the kernel's 64-bit identifier of a socket.
pub fn socket_cookie(fd: RawFd) -> std::io::Result<u64> {
    let mut cookie: u64 = 0;
    let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
    // SAFETY: `cookie` is a valid u64 buffer of `len` bytes.
    let rc =
        unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_COOKIE, (&mut cookie as *mut u64).cast(), &mut len) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cookie)
}

/// Turns the kernel's RTT buckets into an HDR histogram of nanoseconds (each bucket's count
/// recorded at its midpoint; 2 significant digits, so no precision is lost that the buckets
/// kept).
pub fn rtt_histogram(f: &NbFlow) -> hdrhistogram::Histogram<u64> {
    buckets_histogram(&f.hist)
}

/// [`rtt_histogram`] of a group.
pub fn group_histogram(g: &NbGroup) -> hdrhistogram::Histogram<u64> {
    buckets_histogram(&g.hist)
}

fn buckets_histogram(hist: &[u32; abi::RTT_BUCKETS]) -> hdrhistogram::Histogram<u64> {
    // A panic here means the constant bounds are inconsistent: a bug.
    let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 100_000_000_000, 2).expect("valid bounds");
    for (b, &n) in hist.iter().enumerate() {
        if n == 0 {
            continue;
        }
        let (lo, hi) = abi::bucket_range(b);
        let mid_ns = (lo + hi) * 1000 / 2;
        let _ = h.record_n(mid_ns.max(1), n as u64);
    }
    h
}
