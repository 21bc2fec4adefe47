//! The whole host over a test: each CPU's time by state (`/proc/stat`), each interface's drop
//! and error counters (`/proc/net/dev`, of the calling thread's network namespace) and the
//! input backlogs' drops (`/proc/net/softnet_stat`), read at the start and the end. What a
//! flow's verdict needs beyond its own socket: a CPU at 100% in softirq, a NIC that drops.

use netblast_spec::result::{CpuLoad, HostLoad, InterfaceDrops};
use std::collections::BTreeMap;
use std::time::Instant;

/// One CPU's cumulative times (`/proc/stat`, in USER_HZ ticks): user, nice, system, idle,
/// iowait, irq, softirq, steal.
type Ticks = [u64; 8];

/// One interface's cumulative counters: rx_dropped, tx_dropped, rx_errors, tx_errors.
type IfCounters = [u64; 4];

/// The host's counters at one instant.
#[derive(Debug, Clone)]
pub struct HostMark {
    at: Instant,
    cpus: BTreeMap<u32, Ticks>,
    interfaces: BTreeMap<String, IfCounters>,
    backlog_drops: u64,
}

impl HostMark {
    /// Reads the counters now; `None` where `/proc/stat` cannot be read (not Linux).
    pub fn read() -> Option<HostMark> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let dev = std::fs::read_to_string("/proc/net/dev").unwrap_or_default();
        let softnet = std::fs::read_to_string("/proc/net/softnet_stat").unwrap_or_default();
        Some(HostMark {
            at: Instant::now(),
            cpus: parse_stat(&stat),
            interfaces: parse_dev(&dev),
            backlog_drops: parse_softnet(&softnet),
        })
    }

    /// What happened since `self`, read now.
    pub fn load(&self) -> Option<HostLoad> {
        Some(self.until(&HostMark::read()?))
    }

    /// What happened between `self` and `later`: each CPU's shares, the interfaces whose
    /// counters moved, the backlogs' drops.
    pub fn until(&self, later: &HostMark) -> HostLoad {
        let wall_s = later.at.saturating_duration_since(self.at).as_secs_f64();
        // SAFETY: sysconf has no memory-safety preconditions.
        let hz = match unsafe { libc::sysconf(libc::_SC_CLK_TCK) } {
            n if n > 0 => n as f64,
            _ => 100.0,
        };
        let cpus = later
            .cpus
            .iter()
            .filter_map(|(cpu, t)| {
                let d: Vec<u64> = t.iter().zip(self.cpus.get(cpu)?).map(|(b, a)| b.saturating_sub(*a)).collect();
                // A CPU idle in tickless mode can have idle time not yet in its counters (seen
                // here: 2.15 s of ticks in 2.49 s): shares of its own ticks would then overstate
                // busy time. The wall time is the total where the ticks fall short of it; what
                // is missing was idle.
                let ticks = d.iter().sum::<u64>() as f64;
                let total = ticks.max(wall_s * hz).max(1.0);
                let share = |n: u64| n as f64 / total;
                Some(CpuLoad {
                    cpu: *cpu,
                    user: share(d[0] + d[1]),
                    system: share(d[2]),
                    idle: ((d[3] + d[4]) as f64 + (total - ticks)) / total,
                    irq: share(d[5]),
                    softirq: share(d[6]),
                    steal: share(d[7]),
                })
            })
            .collect();
        let interfaces = later
            .interfaces
            .iter()
            .filter_map(|(name, c)| {
                let before = self.interfaces.get(name).copied().unwrap_or_default();
                let d: Vec<u64> = c.iter().zip(before).map(|(b, a)| b.saturating_sub(a)).collect();
                d.iter().any(|n| *n > 0).then(|| InterfaceDrops {
                    name: name.clone(),
                    rx_dropped: d[0],
                    tx_dropped: d[1],
                    rx_errors: d[2],
                    tx_errors: d[3],
                })
            })
            .collect();
        HostLoad {
            wall_s,
            cpus,
            interfaces,
            backlog_drops: later.backlog_drops.saturating_sub(self.backlog_drops),
            threads: Vec::new(),
        }
    }
}

/// Each `cpuN` line of `/proc/stat`: its first eight times (older kernels' missing ones: 0).
fn parse_stat(text: &str) -> BTreeMap<u32, Ticks> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let cpu: u32 = f.next()?.strip_prefix("cpu")?.parse().ok()?;
            let mut t = Ticks::default();
            for (slot, v) in t.iter_mut().zip(f) {
                *slot = v.parse().ok()?;
            }
            Some((cpu, t))
        })
        .collect()
}

/// `/proc/net/dev`: each interface's receive drops and errors (fields 3 and 2 after the
/// colon) and transmit drops and errors (fields 11 and 10).
fn parse_dev(text: &str) -> BTreeMap<String, IfCounters> {
    text.lines()
        .filter_map(|l| {
            let (name, rest) = l.split_once(':')?;
            let f: Vec<u64> = rest.split_whitespace().map(|v| v.parse().ok()).collect::<Option<_>>()?;
            (f.len() >= 16).then(|| (name.trim().to_string(), [f[3], f[11], f[2], f[10]]))
        })
        .collect()
}

/// `/proc/net/softnet_stat`: the second column (hex) of every CPU's line, summed.
fn parse_softnet(text: &str) -> u64 {
    text.lines().filter_map(|l| l.split_whitespace().nth(1)).filter_map(|h| u64::from_str_radix(h, 16).ok()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT_A: &str = "cpu  10 0 10 80 0 0 0 0 0 0\n\
                          cpu0 0 0 0 100 0 0 0 0 0 0\n\
                          cpu1 100 0 100 800 0 0 0 0 0 0\n\
                          intr 1 2 3\n";
    const STAT_B: &str = "cpu  10 0 10 80 0 0 0 0 0 0\n\
                          cpu0 10 0 20 100 0 0 70 0 0 0\n\
                          cpu1 150 10 140 900 0 0 0 0 0 0\n";
    const DEV_A: &str = "Inter-|   Receive                                                |  Transmit\n \
        face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n\
            lo: 100 1 0 0 0 0 0 0 100 1 0 0 0 0 0 0\n\
          eth0: 5000 50 1 2 0 0 0 0 6000 60 3 4 0 0 0 0\n";
    const DEV_B: &str = "    lo: 900 9 0 0 0 0 0 0 900 9 0 0 0 0 0 0\n\
          eth0: 9000 90 1 12 0 0 0 0 9000 90 3 9 0 0 0 0\n";

    fn mark(stat: &str, dev: &str, softnet: &str) -> HostMark {
        HostMark {
            at: Instant::now(),
            cpus: parse_stat(stat),
            interfaces: parse_dev(dev),
            backlog_drops: parse_softnet(softnet),
        }
    }

    #[test]
    fn shares_are_of_each_cpu_s_own_ticks_and_only_moved_counters_are_kept() {
        let a = mark(STAT_A, DEV_A, "00000010 00000002 0\n00000001 00000001 0\n");
        let b = mark(STAT_B, DEV_B, "00000020 0000000a 0\n00000001 00000001 0\n");
        let l = a.until(&b);
        assert_eq!(l.cpus.len(), 2, "the aggregate `cpu` line is not a CPU");
        let c0 = l.cpus[0];
        assert_eq!(c0.cpu, 0);
        assert!((c0.softirq - 0.7).abs() < 1e-9 && (c0.system - 0.2).abs() < 1e-9 && c0.idle == 0.0, "{c0:?}");
        assert!((c0.busy() - 1.0).abs() < 1e-9);
        assert_eq!(c0.mostly(), ("softirq", 0.7));
        let c1 = l.cpus[1];
        // 50 user + 10 nice of 200 ticks; 100 idle.
        assert!((c1.user - 0.3).abs() < 1e-9 && (c1.idle - 0.5).abs() < 1e-9, "nice counts as user: {c1:?}");
        assert_eq!(
            l.interfaces,
            vec![InterfaceDrops { name: "eth0".into(), rx_dropped: 10, tx_dropped: 5, rx_errors: 0, tx_errors: 0 }]
        );
        assert_eq!(l.backlog_drops, 8);
    }

    #[test]
    fn ticks_short_of_the_wall_time_were_idle() {
        // 4 s between the readings, 100 ticks a second: CPU 1's 200 ticks are half the time
        // (its idle time not yet counted): 60 of 400 user, the missing 200 idle.
        let a = mark(STAT_A, DEV_A, "");
        let mut b = mark(STAT_B, DEV_B, "");
        b.at = a.at + std::time::Duration::from_secs(4);
        // SAFETY: sysconf has no memory-safety preconditions.
        assert_eq!(unsafe { libc::sysconf(libc::_SC_CLK_TCK) }, 100, "USER_HZ is 100 on Linux");
        let c1 = a.until(&b).cpus[1];
        assert!((c1.user - 0.15).abs() < 1e-9 && (c1.idle - 0.75).abs() < 1e-9, "{c1:?}");
        assert!((c1.user + c1.system + c1.idle + c1.irq + c1.softirq + c1.steal - 1.0).abs() < 1e-9);
    }

    #[test]
    fn garbage_reads_as_nothing() {
        assert!(parse_stat("cpuX 1 2\ncpu0 a b c\n").is_empty());
        assert!(parse_dev("eth0: 1 2 3\nnot a line\n").is_empty());
        assert_eq!(parse_softnet("zz qq\n"), 0);
    }
}
