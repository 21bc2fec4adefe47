//! Two network namespaces joined by a veth pair, made and removed by the bench itself (root),
//! and running code inside one: a thread that enters a namespace makes its sockets there, and
//! the threads it starts inherit it.

use std::process::Command;

/// The pair; both namespaces are deleted on drop (and a middle one with its delay line).
pub struct NsPair {
    /// Client side namespace name.
    pub a: String,
    /// Server side namespace name.
    pub b: String,
    /// The server side's veth address.
    pub addr_b: std::net::Ipv4Addr,
    /// A middle namespace ([`NsPair::delayed`]).
    middle: Option<String>,
    /// Its delay line.
    line: Option<std::process::Child>,
}

/// `tc ARGS` in namespace `ns` (a qdisc on a pair's interface).
pub fn tc(ns: &str, args: &str) -> Result<(), String> {
    let st = Command::new("ip")
        .args(["netns", "exec", ns, "tc"])
        .args(args.split_whitespace())
        .status()
        .map_err(|e| format!("tc: {e}"))?;
    st.success().then_some(()).ok_or_else(|| format!("tc {args} failed in {ns}"))
}

fn ip(args: &[&str]) -> Result<(), String> {
    let st = Command::new("ip").args(args).status().map_err(|e| format!("ip: {e}"))?;
    if st.success() { Ok(()) } else { Err(format!("ip {} failed", args.join(" "))) }
}

impl NsPair {
    /// Makes `nbb{tag}a` and `nbb{tag}b`, 10.251.{tag}.1/24 and .2/24, links and loopbacks up.
    pub fn create(tag: u8) -> Result<NsPair, String> {
        let pid = std::process::id() % 1000;
        let (a, b) = (format!("nbb{pid}{tag}a"), format!("nbb{pid}{tag}b"));
        let pair = NsPair {
            a: a.clone(),
            b: b.clone(),
            addr_b: std::net::Ipv4Addr::new(10, 251, tag, 2),
            middle: None,
            line: None,
        };
        ip(&["netns", "add", &a])?;
        ip(&["netns", "add", &b])?;
        let (va, vb) = (format!("{a}v"), format!("{b}v"));
        ip(&["link", "add", &va, "netns", &a, "type", "veth", "peer", "name", &vb, "netns", &b])?;
        for (ns, dev, addr) in [(&a, &va, format!("10.251.{tag}.1/24")), (&b, &vb, format!("10.251.{tag}.2/24"))] {
            ip(&["-n", ns, "addr", "add", &addr, "dev", dev])?;
            ip(&["-n", ns, "link", "set", dev, "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        Ok(pair)
    }

    /// `nbb{tag}a` and `nbb{tag}b` joined through `nbb{tag}m`, whose delay line
    /// (`scripts/delayline.py` on a TUN device, policy-routed as its header says) holds every
    /// packet `delay` each way: a round trip of 2 × `delay` without netem. a is
    /// 10.252.{tag}.1, b 10.253.{tag}.1; the line stops by itself after 10 minutes.
    pub fn delayed(tag: u8, delay: std::time::Duration) -> Result<NsPair, String> {
        let pid = std::process::id() % 1000;
        let (a, b, m) = (format!("nbb{pid}{tag}a"), format!("nbb{pid}{tag}b"), format!("nbb{pid}{tag}m"));
        // Every namespace goes on drop, whatever step fails.
        let mut pair = NsPair {
            a: a.clone(),
            b: b.clone(),
            addr_b: std::net::Ipv4Addr::new(10, 253, tag, 1),
            middle: Some(m.clone()),
            line: None,
        };
        for ns in [&a, &b, &m] {
            ip(&["netns", "add", ns])?;
        }
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/delayline.py");
        for (ns, side, net) in [(&a, "ma", 252), (&b, "mb", 253)] {
            let dev = format!("{ns}v");
            ip(&["link", "add", &dev, "netns", ns, "type", "veth", "peer", "name", side, "netns", &m])?;
            ip(&["-n", ns, "addr", "add", &format!("10.{net}.{tag}.1/24"), "dev", &dev])?;
            ip(&["-n", &m, "addr", "add", &format!("10.{net}.{tag}.2/24"), "dev", side])?;
            ip(&["-n", ns, "link", "set", "dev", &dev, "up"])?;
            ip(&["-n", ns, "link", "set", "dev", "lo", "up"])?;
            ip(&["-n", &m, "link", "set", "dev", side, "up"])?;
            ip(&["-n", ns, "route", "add", "default", "via", &format!("10.{net}.{tag}.2")])?;
            ip(&["-n", &m, "rule", "add", "iif", side, "lookup", "100"])?;
        }
        ip(&["-n", &m, "tuntap", "add", "dev", "dl0", "mode", "tun"])?;
        ip(&["-n", &m, "link", "set", "dev", "dl0", "up"])?;
        ip(&["-n", &m, "route", "add", "default", "dev", "dl0", "table", "100"])?;
        let st = Command::new("ip")
            .args(["netns", "exec", &m, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=0"])
            .arg("net.ipv4.conf.dl0.rp_filter=0")
            .status()
            .map_err(|e| format!("sysctl: {e}"))?;
        if !st.success() {
            return Err(format!("forwarding in {m}"));
        }
        let child = Command::new("ip")
            .args(["netns", "exec", &m, "python3", script, "--dev", "dl0"])
            .args(["--delay", &format!("{}us", delay.as_micros()), "--for", "600s"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .map_err(|e| format!("python3 {script}: {e}"))?;
        pair.line = Some(child);
        Ok(pair)
    }

    /// `nbb{tag}a` and `nbb{tag}b` joined through a router, `nbb{tag}m`, that forwards between
    /// them with nothing in the way: where a qdisc on the path goes ([`NsPair::toward_b`]). a is
    /// 10.252.{tag}.1, b 10.253.{tag}.1.
    pub fn routed(tag: u8) -> Result<NsPair, String> {
        let pid = std::process::id() % 1000;
        let (a, b, m) = (format!("nbb{pid}{tag}a"), format!("nbb{pid}{tag}b"), format!("nbb{pid}{tag}m"));
        let pair = NsPair {
            a: a.clone(),
            b: b.clone(),
            addr_b: std::net::Ipv4Addr::new(10, 253, tag, 1),
            middle: Some(m.clone()),
            line: None,
        };
        for ns in [&a, &b, &m] {
            ip(&["netns", "add", ns])?;
        }
        for (ns, side, net) in [(&a, "ma", 252), (&b, "mb", 253)] {
            let dev = format!("{ns}v");
            ip(&["link", "add", &dev, "netns", ns, "type", "veth", "peer", "name", side, "netns", &m])?;
            ip(&["-n", ns, "addr", "add", &format!("10.{net}.{tag}.1/24"), "dev", &dev])?;
            ip(&["-n", &m, "addr", "add", &format!("10.{net}.{tag}.2/24"), "dev", side])?;
            ip(&["-n", ns, "link", "set", "dev", &dev, "up"])?;
            ip(&["-n", ns, "link", "set", "dev", "lo", "up"])?;
            ip(&["-n", &m, "link", "set", "dev", side, "up"])?;
            ip(&["-n", ns, "route", "add", "default", "via", &format!("10.{net}.{tag}.2")])?;
        }
        let st = Command::new("ip")
            .args(["netns", "exec", &m, "sysctl", "-qw", "net.ipv4.ip_forward=1"])
            .status()
            .map_err(|e| format!("sysctl: {e}"))?;
        if !st.success() {
            return Err(format!("forwarding in {m}"));
        }
        Ok(pair)
    }

    /// The middle namespace of a [`NsPair::routed`] or [`NsPair::delayed`] pair ("" without one).
    pub fn middle(&self) -> &str {
        self.middle.as_deref().unwrap_or("")
    }

    /// The router's interface toward b (of a [`NsPair::routed`] pair): what b receives leaves here.
    pub fn toward_b(&self) -> &str {
        "mb"
    }

    /// Runs `nft SCRIPT` in namespace `ns`.
    pub fn nft(&self, ns: &str, script: &str) -> Result<String, String> {
        let out = Command::new("ip")
            .args(["netns", "exec", ns, "nft"])
            .args(script.split_whitespace())
            .output()
            .map_err(|e| format!("nft: {e}"))?;
        if !out.status.success() {
            return Err(format!("nft {script}: {}", String::from_utf8_lossy(&out.stderr)));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

impl Drop for NsPair {
    fn drop(&mut self) {
        if let Some(mut line) = self.line.take() {
            let _ = line.kill();
            let _ = line.wait();
        }
        if let Some(m) = self.middle.take() {
            let _ = Command::new("ip").args(["netns", "del", &m]).status();
        }
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
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

/// (rx bytes, rx packets, tx bytes, tx packets) of interface `dev` as the calling thread's
/// namespace counts them.
pub fn counters(dev: &str) -> Result<(u64, u64, u64, u64), String> {
    let text = std::fs::read_to_string("/proc/thread-self/net/dev").map_err(|e| e.to_string())?;
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{dev}:")))
        .ok_or_else(|| format!("no interface {dev}"))?;
    let f: Vec<u64> =
        line.split(':').nth(1).unwrap_or_default().split_whitespace().filter_map(|v| v.parse().ok()).collect();
    if f.len() < 10 {
        return Err(format!("short counters line for {dev}"));
    }
    Ok((f[0], f[1], f[8], f[9]))
}
