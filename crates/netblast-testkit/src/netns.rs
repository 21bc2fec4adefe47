//! Two network namespaces, a (the client's side) and b (the server's), made and removed by the
//! caller (root): joined by a veth pair ([`Pair::create`]), through a router namespace with
//! nothing in the way ([`Pair::routed`]: where a qdisc on the path goes), or through a delay
//! line ([`Pair::delayed`]: a round trip without netem, which this kernel lacks). Everything a
//! pair made, its delay line too, is removed on drop, whatever step of its making failed.
//!
//! Commands run in a namespace with `nsenter --net` (the network namespace only: it keeps the
//! cgroup v2 mount that `ip netns exec` would hide); code runs in one on a thread that entered
//! it ([`inside`]).

use crate::KillOnDrop;
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The namespaces of a pair; deleted on drop (a middle one and its delay line with them).
pub struct Pair {
    /// The client side's namespace.
    pub a: String,
    /// The server side's namespace.
    pub b: String,
    /// The server side's address.
    pub addr_b: Ipv4Addr,
    /// The router or delay namespace between them.
    middle: Option<String>,
    /// The delay line's process.
    line: Option<KillOnDrop>,
}

/// `ip ARGS`, or why it failed.
pub fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip").args(args).output().map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("ip {} failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

/// Whether namespaces can be made here (root); when not, why.
pub fn can_make() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 { Err("needs root to make network namespaces".into()) } else { Ok(()) }
}

/// Names for a new pair's namespaces, unique on this host while this process lives: a
/// process's pairs are numbered, and the number is in the names.
fn names() -> (String, String, String, u32) {
    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // An interface is named after its namespace plus one letter: 15 bytes at most.
    let tag = format!("nbk{}x{}", std::process::id() % 100_000, seq % 100);
    (format!("{tag}a"), format!("{tag}b"), format!("{tag}m"), seq)
}

impl Pair {
    /// a and b joined by a veth pair (`{a}v`, `{b}v`), a at .1 and b at .2 of a /24 of their
    /// own; loopbacks up. Takes the [`crate::lane`].
    pub fn create() -> Result<Pair, String> {
        crate::lane();
        let (a, b, _, seq) = names();
        let net = format!("10.{}.{}", 200 + seq % 50, std::process::id() % 250);
        let pair =
            Pair { a, b, addr_b: format!("{net}.2").parse().map_err(|e| format!("{e}"))?, middle: None, line: None };
        let (a, b) = (&pair.a, &pair.b);
        ip(&["netns", "add", a])?;
        ip(&["netns", "add", b])?;
        let (va, vb) = (format!("{a}v"), format!("{b}v"));
        ip(&["link", "add", &va, "netns", a, "type", "veth", "peer", "name", &vb, "netns", b])?;
        for (ns, dev, addr) in [(a, &va, format!("{net}.1/24")), (b, &vb, format!("{net}.2/24"))] {
            ip(&["-n", ns, "addr", "add", &addr, "dev", dev])?;
            ip(&["-n", ns, "link", "set", "dev", dev, "up"])?;
            ip(&["-n", ns, "link", "set", "dev", "lo", "up"])?;
        }
        Ok(pair)
    }

    /// a (10.252.0.1) and b (10.253.0.1) joined through a router namespace that forwards
    /// between them with nothing in the way; its interface toward b is [`Pair::toward_b`].
    /// Takes the [`crate::lane`].
    pub fn routed() -> Result<Pair, String> {
        crate::lane();
        let pair = Pair::through()?;
        pair.sysctl(pair.middle(), &["net.ipv4.ip_forward=1"])?;
        Ok(pair)
    }

    /// a (10.252.0.1) and b (10.253.0.1) joined through a middle namespace whose delay line
    /// (`scripts/delayline.py` on a TUN device, policy-routed as its header says) holds every
    /// packet `delay` each way: a round trip of 2 × `delay`. Ready when a connection attempt
    /// from a to a closed port of b is refused no sooner than that round trip (10 s at most);
    /// the line stops by itself after 10 minutes. Takes the [`crate::lane`].
    pub fn delayed(delay: Duration) -> Result<Pair, String> {
        crate::lane();
        let mut pair = Pair::through()?;
        let m = pair.middle().to_string();
        for dev in ["ma", "mb"] {
            ip(&["-n", &m, "rule", "add", "iif", dev, "lookup", "100"])?;
        }
        ip(&["-n", &m, "tuntap", "add", "dev", "dl0", "mode", "tun"])?;
        ip(&["-n", &m, "link", "set", "dev", "dl0", "up"])?;
        ip(&["-n", &m, "route", "add", "default", "dev", "dl0", "table", "100"])?;
        pair.sysctl(&m, &["net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.dl0.rp_filter=0"])?;
        let script = crate::scripts().join("delayline.py");
        let line = pair
            .cmd(&m, "python3")
            .arg(&script)
            .args(["--dev", "dl0", "--delay", &format!("{}us", delay.as_micros()), "--for", "600s"])
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| format!("python3 {}: {e}", script.display()))?;
        pair.line = Some(KillOnDrop(line));
        // No ping here: a refused connection is one round trip.
        let probe = format!(
            "import socket, time\n\
             s = socket.socket(); s.settimeout(2); t = time.monotonic()\n\
             try:\n    s.connect(('{}', 9))\n\
             except ConnectionRefusedError:\n    print(time.monotonic() - t)\n",
            pair.addr_b
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let out =
                pair.cmd(&pair.a, "python3").args(["-c", &probe]).output().map_err(|e| format!("python3: {e}"))?;
            if let Ok(rtt) = String::from_utf8_lossy(&out.stdout).trim().parse::<f64>() {
                if rtt < (delay * 2).as_secs_f64() {
                    return Err(format!(
                        "the delay line in {m} should add {delay:?} each way: a round trip took {rtt} s"
                    ));
                }
                return Ok(pair);
            }
            if Instant::now() >= deadline {
                return Err(format!("no round trip through the delay line in {m} within 10 s"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// a and b, each joined by a veth to a middle namespace (`ma`, `mb` there), routed through it.
    fn through() -> Result<Pair, String> {
        let (a, b, m, _) = names();
        let pair = Pair { a, b, addr_b: Ipv4Addr::new(10, 253, 0, 1), middle: Some(m), line: None };
        let m = pair.middle();
        for ns in [&pair.a, &pair.b, m] {
            ip(&["netns", "add", ns])?;
        }
        ip(&["-n", m, "link", "set", "dev", "lo", "up"])?;
        for (ns, side, net) in [(&pair.a, "ma", "10.252.0"), (&pair.b, "mb", "10.253.0")] {
            let dev = format!("{ns}v");
            ip(&["link", "add", &dev, "netns", ns, "type", "veth", "peer", "name", side, "netns", m])?;
            ip(&["-n", ns, "addr", "add", &format!("{net}.1/24"), "dev", &dev])?;
            ip(&["-n", m, "addr", "add", &format!("{net}.2/24"), "dev", side])?;
            // `dev` always: a bare name that begins a keyword (`ma`: master) is taken for it.
            ip(&["-n", ns, "link", "set", "dev", &dev, "up"])?;
            ip(&["-n", ns, "link", "set", "dev", "lo", "up"])?;
            ip(&["-n", m, "link", "set", "dev", side, "up"])?;
            ip(&["-n", ns, "route", "add", "default", "via", &format!("{net}.2")])?;
        }
        Ok(pair)
    }

    /// The middle namespace of a [`Pair::routed`] or [`Pair::delayed`] pair ("" without one).
    pub fn middle(&self) -> &str {
        self.middle.as_deref().unwrap_or("")
    }

    /// The middle namespace's interface toward b: what b receives leaves here.
    pub fn toward_b(&self) -> &str {
        "mb"
    }

    /// A command run in namespace `ns`.
    pub fn cmd(&self, ns: &str, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("nsenter");
        c.arg(format!("--net=/run/netns/{ns}")).arg(program);
        c
    }

    /// Runs `program ARGS` in namespace `ns`: its standard output, or why it failed.
    fn output(&self, ns: &str, program: &str, args: &[&str]) -> Result<String, String> {
        let out = self.cmd(ns, program).args(args).output().map_err(|e| format!("{program}: {e}"))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(format!("{program} {} in {ns}: {}", args.join(" "), err.trim()));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `sysctl -qw SETTINGS` in namespace `ns`.
    fn sysctl(&self, ns: &str, settings: &[&str]) -> Result<(), String> {
        self.output(ns, "sysctl", &[&["-qw"], settings].concat()).map(drop)
    }

    /// `nft SCRIPT` (one command) in namespace `ns`: what it printed.
    pub fn nft(&self, ns: &str, script: &str) -> Result<String, String> {
        self.output(ns, "nft", &[script])
    }

    /// The first `counter` of `nft list ARGS` (a table or a chain) in namespace `ns`: packets
    /// and bytes it counted.
    pub fn nft_counter(&self, ns: &str, args: &[&str]) -> Result<NftCounter, String> {
        let listing = self.output(ns, "nft", &[&["list"], args].concat())?;
        let after =
            |word: &str| listing.split_whitespace().skip_while(|w| *w != word).nth(1).and_then(|v| v.parse().ok());
        match (after("packets"), after("bytes")) {
            (Some(packets), Some(bytes)) => Ok(NftCounter { packets, bytes }),
            _ => Err(format!("no counter in nft list {}: {listing}", args.join(" "))),
        }
    }

    /// `tc ARGS` in namespace `ns` (a qdisc on one of the pair's interfaces).
    pub fn tc(&self, ns: &str, args: &str) -> Result<(), String> {
        self.output(ns, "tc", &args.split_whitespace().collect::<Vec<_>>()).map(drop)
    }

    /// A `TcpExt` counter of namespace `ns` (`/proc/net/netstat`).
    pub fn tcp_ext(&self, ns: &str, name: &str) -> Result<u64, String> {
        self.counter(ns, "/proc/net/netstat", "TcpExt:", name)
    }

    /// A `Tcp:` counter of namespace `ns` (`/proc/net/snmp`: `RetransSegs`, `OutSegs`, ...).
    pub fn tcp_snmp(&self, ns: &str, name: &str) -> Result<u64, String> {
        self.counter(ns, "/proc/net/snmp", "Tcp:", name)
    }

    /// Counter `name` of the `prefix` rows (a names row, then a values row) of `file` in `ns`.
    fn counter(&self, ns: &str, file: &str, prefix: &str, name: &str) -> Result<u64, String> {
        let text = self.output(ns, "cat", &[file])?;
        let mut rows = text.lines().filter(|l| l.starts_with(prefix));
        let (Some(names), Some(values)) = (rows.next(), rows.next()) else {
            return Err(format!("no {prefix} rows in {file} of {ns}"));
        };
        let at = names.split_whitespace().position(|n| n == name).ok_or_else(|| format!("no {prefix} {name}"))?;
        values
            .split_whitespace()
            .nth(at)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{prefix} {name}: no value"))
    }

    /// Interface `dev` of namespace `ns`, as its own `/proc/net/dev` counts it (`/sys` would
    /// show the mounting namespace's devices).
    pub fn dev_counters(&self, ns: &str, dev: &str) -> Result<DevCounters, String> {
        parse_dev(&self.output(ns, "cat", &["/proc/net/dev"])?, dev)
    }

    /// The veth end of namespace `ns` of a [`Pair::create`] pair (`{ns}v`).
    pub fn veth(&self, ns: &str) -> String {
        format!("{ns}v")
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        drop(self.line.take());
        for ns in self.middle.iter().chain([&self.a, &self.b]) {
            let _ = Command::new("ip").args(["netns", "del", ns]).stderr(Stdio::null()).status();
        }
    }
}

/// What an nftables counter counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NftCounter {
    /// Packets.
    pub packets: u64,
    /// Bytes.
    pub bytes: u64,
}

/// An interface's counters (`/proc/net/dev`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DevCounters {
    /// Bytes received.
    pub rx_bytes: u64,
    /// Packets received.
    pub rx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Packets sent.
    pub tx_packets: u64,
}

/// Interface `dev`'s line of a `/proc/net/dev` text.
fn parse_dev(text: &str, dev: &str) -> Result<DevCounters, String> {
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{dev}:")))
        .ok_or_else(|| format!("no interface {dev}"))?;
    let f: Vec<u64> =
        line.split(':').nth(1).unwrap_or_default().split_whitespace().filter_map(|v| v.parse().ok()).collect();
    if f.len() < 10 {
        return Err(format!("short counters line for {dev}"));
    }
    Ok(DevCounters { rx_bytes: f[0], rx_packets: f[1], tx_bytes: f[8], tx_packets: f[9] })
}

/// Interface `dev`'s counters as the calling thread's namespace counts them.
pub fn counters(dev: &str) -> Result<DevCounters, String> {
    parse_dev(&std::fs::read_to_string("/proc/thread-self/net/dev").map_err(|e| e.to_string())?, dev)
}

/// Runs `f` on a new thread inside namespace `ns`; its result, or why it could not enter.
pub fn inside<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).map_err(|e| format!("{path}: {e}"))?;
        // SAFETY: setns on a namespace file descriptor we own; it changes only this thread.
        let rc = unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&file), libc::CLONE_NEWNET) };
        if rc != 0 {
            return Err(format!("setns {path}: {}", std::io::Error::last_os_error()));
        }
        Ok(f())
    })
    .join()
    .map_err(|_| format!("a thread in {ns} panicked"))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_an_interface_s_line() {
        let text = "Inter-|   Receive\n face |bytes    packets\n    lo: 100 2 0 0 0 0 0 0 300 4 0 0 0 0 0 0\n";
        let c = parse_dev(text, "lo").unwrap();
        assert_eq!(c, DevCounters { rx_bytes: 100, rx_packets: 2, tx_bytes: 300, tx_packets: 4 });
        assert!(parse_dev(text, "eth0").unwrap_err().contains("no interface eth0"));
        assert!(parse_dev("  lo: 1 2 3\n", "lo").unwrap_err().contains("short"));
    }

    #[test]
    fn names_are_unique_and_fit_an_interface() {
        let (a1, b1, m1, _) = names();
        let (a2, ..) = names();
        assert_ne!(a1, a2);
        for n in [&a1, &b1, &m1] {
            assert!(n.len() < 15, "{n}v is longer than an interface name may be");
        }
    }
}
