//! Thin wrappers over the few Linux calls the engine needs: CPU affinity, CPU time, host
//! facts, descriptor limits and random test ids.

use netblast_spec::result::{CpuUsage, HostInfo};
use std::io;

/// CPUs this thread may run on (`sched_getaffinity`), sorted.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data; zeroed is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 means the calling thread.
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut cpus = Vec::new();
    for cpu in 0..libc::CPU_SETSIZE as usize {
        // SAFETY: cpu < CPU_SETSIZE, the bound of the set.
        if unsafe { libc::CPU_ISSET(cpu, &set) } {
            cpus.push(cpu);
        }
    }
    Ok(cpus)
}

/// Pins the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("CPU {cpu} is out of range")));
    }
    // SAFETY: zeroed cpu_set_t is a valid empty set; CPU_SET writes within it since cpu is in range.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 means the calling thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn rusage(who: libc::c_int) -> (f64, f64) {
    // SAFETY: rusage is plain data; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid rusage; `who` is RUSAGE_SELF or RUSAGE_THREAD.
    unsafe { libc::getrusage(who, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

/// A point-in-time reading of the calling thread's CPU time and the wall clock.
#[derive(Debug, Clone, Copy)]
pub struct CpuMark {
    user: f64,
    system: f64,
    at: std::time::Instant,
}

impl CpuMark {
    /// Marks the calling thread's CPU time now.
    pub fn thread() -> CpuMark {
        let (user, system) = rusage(libc::RUSAGE_THREAD);
        CpuMark { user, system, at: std::time::Instant::now() }
    }

    /// The same CPU reading, its wall clock counted from `at` (the test's start instant): a
    /// wait for `--start-at` or the lead is not time the test ran, so CPUs used are over the
    /// test's own span, as the server's are.
    pub fn wall_from(self, at: std::time::Instant) -> CpuMark {
        CpuMark { at, ..self }
    }

    /// CPU the calling thread used since this mark (call it on the thread that made the mark).
    pub fn usage(&self) -> CpuUsage {
        let (user, system) = rusage(libc::RUSAGE_THREAD);
        CpuUsage {
            user_s: (user - self.user).max(0.0),
            system_s: (system - self.system).max(0.0),
            wall_s: self.at.elapsed().as_secs_f64(),
        }
    }
}

/// Number of CPUs online.
pub fn cpus_online() -> u32 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    n.max(1) as u32
}

/// Facts about this host for results.
pub fn host_info() -> HostInfo {
    let read = |p: &str| std::fs::read_to_string(p).map(|s| s.trim().to_string()).unwrap_or_default();
    HostInfo {
        hostname: read("/proc/sys/kernel/hostname"),
        kernel: read("/proc/sys/kernel/osrelease"),
        cpus_online: cpus_online(),
        netblast_version: env!("CARGO_PKG_VERSION").to_string(),
        buffers: buffer_caps(),
        tcp: tcp_defaults(),
    }
}

/// This host's TCP defaults (congestion control, local port range, TIME_WAIT reuse); `None`
/// when /proc/sys is not readable.
pub fn tcp_defaults() -> Option<netblast_spec::result::TcpDefaults> {
    let read = |p: &str| std::fs::read_to_string(p).ok();
    let ports: Vec<u16> =
        read("/proc/sys/net/ipv4/ip_local_port_range")?.split_whitespace().filter_map(|v| v.parse().ok()).collect();
    Some(netblast_spec::result::TcpDefaults {
        congestion_control: read("/proc/sys/net/ipv4/tcp_congestion_control")?.trim().to_string(),
        local_ports: [*ports.first()?, *ports.get(1)?],
        tw_reuse: read("/proc/sys/net/ipv4/tcp_tw_reuse")?.trim().parse().ok()?,
    })
}

/// This host's socket buffer caps (`net.core.{r,w}mem_max`, `net.ipv4.tcp_{r,w}mem` max);
/// `None` when /proc/sys is not readable.
pub fn buffer_caps() -> Option<netblast_spec::result::BufferCaps> {
    let one = |p: &str| -> Option<u64> { std::fs::read_to_string(p).ok()?.trim().parse().ok() };
    let third = |p: &str| -> Option<u64> { std::fs::read_to_string(p).ok()?.split_whitespace().nth(2)?.parse().ok() };
    Some(netblast_spec::result::BufferCaps {
        rmem_max: one("/proc/sys/net/core/rmem_max")?,
        wmem_max: one("/proc/sys/net/core/wmem_max")?,
        tcp_rmem_max: third("/proc/sys/net/ipv4/tcp_rmem")?,
        tcp_wmem_max: third("/proc/sys/net/ipv4/tcp_wmem")?,
    })
}

/// The addresses of this host's interfaces with their prefix lengths (`getifaddrs`), loopback
/// last.
pub fn interfaces() -> io::Result<Vec<(std::net::IpAddr, u8)>> {
    let mut out = Vec::new();
    each_ifaddr(|_, addr, mask| {
        if let (Some(addr), Some(mask)) = (addr, mask) {
            let prefix = match mask {
                std::net::IpAddr::V4(m) => u32::from(m).count_ones(),
                std::net::IpAddr::V6(m) => u128::from(m).count_ones(),
            } as u8;
            if !out.contains(&(addr, prefix)) {
                out.push((addr, prefix));
            }
        }
    })?;
    out.sort_by_key(|(a, _)| a.is_loopback());
    Ok(out)
}

/// The interface that holds local address `ip` (`lo` for 127.0.0.1).
pub fn device_of(ip: std::net::IpAddr) -> Option<String> {
    let ip = ip.to_canonical();
    let mut found = None;
    each_ifaddr(|name, addr, _| {
        if found.is_none() && addr == Some(ip) {
            found = Some(name.to_string());
        }
    })
    .ok()?;
    found
}

/// Calls `f` with each `getifaddrs` entry: the interface's name, its address and netmask.
fn each_ifaddr(mut f: impl FnMut(&str, Option<std::net::IpAddr>, Option<std::net::IpAddr>)) -> io::Result<()> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    fn addr_of(sa: *const libc::sockaddr) -> Option<IpAddr> {
        if sa.is_null() {
            return None;
        }
        // SAFETY: `sa` points at a sockaddr of the list getifaddrs built (valid until
        // freeifaddrs); it is read by the layout its family names.
        unsafe {
            match (*sa).sa_family as i32 {
                libc::AF_INET => {
                    let a = &*(sa as *const libc::sockaddr_in);
                    Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr))))
                }
                libc::AF_INET6 => {
                    let a = &*(sa as *const libc::sockaddr_in6);
                    Some(IpAddr::V6(Ipv6Addr::from(a.sin6_addr.s6_addr)))
                }
                _ => None,
            }
        }
    }
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head that is freed with freeifaddrs below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs built.
        let ifa = unsafe { &*cur };
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }.to_string_lossy();
        f(&name, addr_of(ifa.ifa_addr), addr_of(ifa.ifa_netmask));
        cur = ifa.ifa_next;
    }
    // SAFETY: `head` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    Ok(())
}

/// The release of the process's own allocator, when it is not glibc's (set once by the
/// binary: [`set_allocator_release`]).
static ALLOCATOR_RELEASE: std::sync::OnceLock<fn()> = std::sync::OnceLock::new();

/// Sets what [`release_free_memory`] calls besides `malloc_trim`: the release of the global
/// allocator the binary chose (the netblast binary's mimalloc, whose free pages `malloc_trim`
/// cannot reach). Only the first call counts.
pub fn set_allocator_release(release: fn()) {
    let _ = ALLOCATOR_RELEASE.set(release);
}

/// Gives the system back the memory the allocator holds free. glibc keeps what busy threads
/// freed in their arenas: after 10 000 connections closed, a server held 350 MB it no longer
/// used. Servers call this when they go idle; it takes milliseconds.
pub fn release_free_memory() {
    if let Some(release) = ALLOCATOR_RELEASE.get() {
        release();
    }
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only returns free pages to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// This kernel's boot id (`/proc/sys/kernel/random/boot_id`): the same in every container and
/// network namespace of one running kernel, so two ends that read the same one share CPUs.
pub fn boot_id() -> Option<String> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    Some(id.trim().to_string()).filter(|s| !s.is_empty())
}

/// The open-files limit (soft, hard).
pub fn nofile_limit() -> (u64, u64) {
    // SAFETY: rlimit is plain data; getrlimit fills it.
    let mut rl: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to an rlimit.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) };
    (rl.rlim_cur as u64, rl.rlim_max as u64)
}

/// Makes sure `needed` descriptors can be open at once, raising the soft limit up to the hard
/// limit when that is enough. The error says how to raise the limit.
pub fn ensure_fds(needed: u64) -> Result<(), String> {
    let (soft, hard) = nofile_limit();
    if needed <= soft {
        return Ok(());
    }
    if needed <= hard {
        let rl = libc::rlimit { rlim_cur: needed as libc::rlim_t, rlim_max: hard as libc::rlim_t };
        // SAFETY: valid pointer to an rlimit.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &rl) } == 0 {
            return Ok(());
        }
    }
    Err(format!(
        "this test needs about {needed} open files but the limit is {soft} (hard limit {hard}); \
         raise it with `ulimit -n {needed}` (or LimitNOFILE= for a service) and try again"
    ))
}

/// 16 random bytes from the kernel.
pub fn random_bytes() -> [u8; 16] {
    let mut b = [0u8; 16];
    // SAFETY: `b` is a writable buffer of the length passed.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n != b.len() as isize {
        // getrandom cannot fail for 16 bytes after boot; fall back to time and pid anyway.
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
        b[..16].copy_from_slice(&(t ^ ((std::process::id() as u128) << 64)).to_le_bytes());
    }
    b
}

/// Current time as RFC 3339 (UTC, seconds precision with fraction).
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interfaces_include_loopback_last() {
        let ifs = interfaces().unwrap();
        assert!(ifs.iter().any(|(a, p)| a.is_loopback() && *p > 0), "{ifs:?}");
        assert!(ifs.last().unwrap().0.is_loopback());
    }

    #[test]
    fn pinning_is_visible_in_affinity() {
        let cpus = allowed_cpus().unwrap();
        let target = *cpus.last().unwrap();
        std::thread::spawn(move || {
            pin_current_thread(target).unwrap();
            assert_eq!(allowed_cpus().unwrap(), vec![target]);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn pinning_to_missing_cpu_fails() {
        std::thread::spawn(|| {
            assert!(pin_current_thread(libc::CPU_SETSIZE as usize - 1).is_err());
            assert!(pin_current_thread(1 << 20).is_err());
        })
        .join()
        .unwrap();
    }

    #[test]
    fn thread_cpu_counts_work() {
        let m = CpuMark::thread();
        let mut x = 0u64;
        let t = std::time::Instant::now();
        while t.elapsed().as_millis() < 50 {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        let u = m.usage();
        assert!(u.cpu_s() > 0.02, "{u:?} {x}");
    }
}
