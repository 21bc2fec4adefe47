//! Helpers: servers on port 0, runs in-process, and the real binary.

use netblast_probe::Probe;
use netblast_spec::{Profile, RunResult};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The traffic lane: one test at a time sends traffic. On this project's 2-CPU hosts every
/// traffic test wants both CPUs (pinned workers, a server beside its client), and two at once
/// each got half: a timing or a verdict then depended on the test beside it (issue 38). Every
/// helper that starts a server or a namespace takes the lane for the calling test's thread;
/// it is given back when that thread ends (libtest runs each test on a thread of its own), so
/// tests without traffic (parsing, rendering) still run side by side. Only a test's own thread
/// takes it: a thread the test spawns (two clients at once) runs under the test's lane, and
/// must not call a helper that takes it (`run` and `run_with` do not).
pub fn lane() {
    use std::sync::{Mutex, MutexGuard};
    static LANE: Mutex<()> = Mutex::new(());
    thread_local! {
        static HELD: std::cell::RefCell<Option<MutexGuard<'static, ()>>> = const { std::cell::RefCell::new(None) };
    }
    HELD.with(|h| {
        let mut h = h.borrow_mut();
        if h.is_none() {
            // A test that failed while it held the lane poisons it; the next one goes on.
            *h = Some(LANE.lock().unwrap_or_else(|e| e.into_inner()));
        }
    });
}

/// An in-process `netblast serve` on an ephemeral port, stopped on drop.
pub struct Server {
    pub addr: SocketAddr,
    _bg: netblast_agent::Background,
}

impl Server {
    /// Starts a server on `bind` (e.g. "127.0.0.1:0"); `None` when that address family is not
    /// available here (e.g. no IPv6 loopback).
    pub fn start(bind: &str) -> Option<Server> {
        Server::start_with(bind, Probe::tcp_info())
    }

    /// As [`Server::start`], with the given source of TCP statistics.
    pub fn start_with(bind: &str, probe: Probe) -> Option<Server> {
        Server::start_cfg(bind, netblast_agent::ServeConfig { probe, ..Default::default() })
    }

    /// As [`Server::start`], with the given settings.
    pub fn start_cfg(bind: &str, cfg: netblast_agent::ServeConfig) -> Option<Server> {
        lane();
        let listener = std::net::TcpListener::bind(bind.parse::<SocketAddr>().unwrap()).ok()?;
        let bg = netblast_agent::Background::data_port(listener, cfg).unwrap();
        Some(Server { addr: bg.addr(), _bg: bg })
    }
}

/// A bulk profile: `edit` adjusts the built-in bulk-1flow.
pub fn profile(edit: impl FnOnce(&mut Profile)) -> Profile {
    let (mut p, _) = Profile::load("bulk-1flow").unwrap();
    p.run.interval = Some("250ms".parse().unwrap());
    p.run.duration = Some("1s".parse().unwrap());
    edit(&mut p);
    p.validate("test profile").unwrap();
    p
}

/// Runs a profile in-process against `addr`.
pub fn run(addr: SocketAddr, p: Profile) -> RunResult {
    run_with(addr, p, &Probe::tcp_info())
}

/// Runs a profile in-process against `addr` with the given source of TCP statistics.
pub fn run_with(addr: SocketAddr, p: Profile, probe: &Probe) -> RunResult {
    netblast_engine::run::plan_and_run(p, "test profile", &addr.to_string(), probe, &Default::default()).unwrap()
}

/// Writes `token` to a fresh file only its owner can read; returns its path.
pub fn token_file(name: &str, token: &str) -> std::path::PathBuf {
    use std::os::unix::fs::OpenOptionsExt;
    let p = std::env::temp_dir().join(format!("nb-token-{name}-{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new().create(true).write(true).truncate(true).mode(0o600).open(&p).unwrap();
    std::io::Write::write_all(&mut f, format!("{token}\n").as_bytes()).unwrap();
    p
}

/// What a finished command printed: its stdout, then its stderr.
pub fn said(o: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// A JSON file read back.
pub fn json_file(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The netblast binary.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_netblast"))
}

/// `netblast run` with `TCP_INFO` statistics: tests that are not about the eBPF probe leave the
/// kernel alone, so the probe tests count only their own programs.
pub fn run_cmd() -> Command {
    lane();
    let mut c = bin();
    c.args(["run", "--probe", "tcpinfo"]);
    c
}

/// Starts the real `netblast serve` on an ephemeral loopback port; returns it and its address.
pub fn spawn_server() -> (Child, SocketAddr) {
    spawn_server_with(&["--probe", "tcpinfo"])
}

/// As [`spawn_server`], with extra `serve` arguments.
pub fn spawn_server_with(extra: &[&str]) -> (Child, SocketAddr) {
    let mut c = bin();
    c.args(["serve", "--bind", "127.0.0.1", "--port", "0"]).args(extra);
    spawn_server_from(c)
}

/// Starts `netblast serve` as `command` says (it must bind 127.0.0.1:0 and print its address).
pub fn spawn_server_from(mut command: Command) -> (Child, SocketAddr) {
    lane();
    let mut child = command.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    // Keep reading the server's stderr for its whole life: a closed pipe would make its later
    // messages fail.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in std::io::BufRead::lines(std::io::BufReader::new(stderr)).map_while(Result::ok) {
            if !sent {
                // "netblast serve: listening on 127.0.0.1:PORT (data port; ...)"
                if let Some(a) = line
                    .contains("data port")
                    .then(|| line.split_whitespace().find_map(|w| w.parse::<SocketAddr>().ok()))
                    .flatten()
                {
                    let _ = tx.send(a);
                    sent = true;
                }
            }
        }
    });
    let addr = rx.recv_timeout(Duration::from_secs(10)).expect("netblast serve printed its address");
    (child, addr)
}

/// Waits for a child with a deadline, killing it if it overruns. Its piped output is read
/// while it runs (a child blocked on a full pipe would otherwise look hung).
pub fn wait_output(mut child: Child, limit: Duration) -> std::process::Output {
    fn drain<R: std::io::Read + Send + 'static>(r: Option<R>) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    }
    let (out, err) = (drain(child.stdout.take()), drain(child.stderr.take()));
    let t = std::time::Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            panic!("child ran past {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    std::process::Output { status, stdout: out.join().unwrap(), stderr: err.join().unwrap() }
}

/// A child process stopped when dropped, so a failing test leaves nothing running: SIGTERM
/// first (a server such as nginx then stops its own workers), SIGKILL if it lingers.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        // SAFETY: kill has no memory-safety preconditions; the pid is our own child's.
        unsafe { libc::kill(self.0.id() as libc::pid_t, libc::SIGTERM) };
        let t = std::time::Instant::now();
        while t.elapsed() < Duration::from_secs(3) {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Two network namespaces joined by a veth pair, removed on drop.
pub struct NetnsPair {
    pub a: String,
    pub b: String,
    pub addr_b: String,
}

pub fn ip(args: &[&str]) {
    let st = Command::new("ip").args(args).status().expect("ip");
    assert!(st.success(), "ip {args:?} failed");
}

impl NetnsPair {
    pub fn create() -> NetnsPair {
        lane();
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tag = std::process::id() % 10_000 * 10 + seq % 10;
        let (a, b) = (format!("nbt{tag}a"), format!("nbt{tag}b"));
        let net = format!("10.{}.{}", 200 + tag % 50, tag % 250);
        let pair = NetnsPair { a: a.clone(), b: b.clone(), addr_b: format!("{net}.2") };
        ip(&["netns", "add", &a]);
        ip(&["netns", "add", &b]);
        ip(&[
            "link",
            "add",
            &format!("{a}v"),
            "netns",
            &a,
            "type",
            "veth",
            "peer",
            "name",
            &format!("{b}v"),
            "netns",
            &b,
        ]);
        for (ns, dev, addr) in
            [(&a, format!("{a}v"), format!("{net}.1/24")), (&b, format!("{b}v"), format!("{net}.2/24"))]
        {
            ip(&["-n", ns, "addr", "add", &addr, "dev", &dev]);
            ip(&["-n", ns, "link", "set", &dev, "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        pair
    }

    /// A `TcpExt` counter of namespace `ns` (`/proc/net/netstat`: a line of names, a line of values).
    pub fn tcp_ext(&self, ns: &str, name: &str) -> u64 {
        self.counter(ns, "/proc/net/netstat", "TcpExt:", name)
    }

    /// A `Tcp:` counter of namespace `ns` (`/proc/net/snmp`: `RetransSegs`, `OutSegs`, ...).
    pub fn tcp_snmp(&self, ns: &str, name: &str) -> u64 {
        self.counter(ns, "/proc/net/snmp", "Tcp:", name)
    }

    /// Counter `name` of the `prefix` rows (a names row, then a values row) of `file` in `ns`.
    fn counter(&self, ns: &str, file: &str, prefix: &str, name: &str) -> u64 {
        let out = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{ns}"))
            .args(["cat", file])
            .output()
            .unwrap_or_else(|e| panic!("nsenter cat {file}: {e}"));
        let text = String::from_utf8_lossy(&out.stdout);
        let mut rows = text.lines().filter(|l| l.starts_with(prefix));
        let (names, values) = (rows.next().expect("names row"), rows.next().expect("values row"));
        let at = names.split_whitespace().position(|n| n == name).unwrap_or_else(|| panic!("no {prefix} {name}"));
        values.split_whitespace().nth(at).and_then(|v| v.parse().ok()).expect("counter value")
    }

    /// The packets the first `counter` of `nft list ARGS` (a table or a chain) counted in `ns`.
    pub fn nft_packets(&self, ns: &str, args: &[&str]) -> u64 {
        let out = self.cmd(ns, "nft").arg("list").args(args).output().expect("nft list");
        let listing = String::from_utf8_lossy(&out.stdout);
        listing
            .split("packets ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no counter in nft list {args:?}: {listing}"))
    }

    pub fn nft(&self, ns: &str, script: &str) {
        let st = Command::new("ip").args(["netns", "exec", ns, "nft", script]).status().expect("nft");
        assert!(st.success(), "nft {script:?} failed in {ns}");
    }
}

impl NetnsPair {
    /// A command run in namespace `ns` (network namespace only: nsenter keeps the cgroup v2
    /// mount that `ip netns exec` would hide).
    pub fn cmd(&self, ns: &str, program: &str) -> Command {
        let mut c = Command::new("nsenter");
        c.arg(format!("--net=/run/netns/{ns}")).arg(program);
        c
    }

    /// The real `netblast serve` (TCP_INFO statistics) in namespace `ns`, open to other
    /// namespaces, on an ephemeral port: it, stopped on drop, and its address.
    pub fn serve(&self, ns: &str) -> (KillOnDrop, SocketAddr) {
        let mut serve = self.cmd(ns, env!("CARGO_BIN_EXE_netblast"));
        serve.args(["serve", "--probe", "tcpinfo", "--open", "--port", "0"]);
        let (child, addr) = spawn_server_from(serve);
        (KillOnDrop(child), addr)
    }

    /// `netblast serve --probe tcpinfo ARGS` in namespace `ns`, its output discarded, stopped on
    /// drop (the caller names its port and waits for it).
    pub fn serve_quiet(&self, ns: &str, args: &[&str]) -> KillOnDrop {
        let mut c = self.cmd(ns, env!("CARGO_BIN_EXE_netblast"));
        c.args(["serve", "--probe", "tcpinfo"]).args(args).stdout(Stdio::null()).stderr(Stdio::null());
        KillOnDrop(c.spawn().unwrap())
    }

    /// Packets received and sent by interface `dev` of namespace `ns` (its /proc/net/dev).
    pub fn packets(&self, ns: &str, dev: &str) -> (u64, u64) {
        let out = self.cmd(ns, "cat").arg("/proc/net/dev").output().expect("read /proc/net/dev");
        let text = String::from_utf8_lossy(&out.stdout);
        let dev = format!("{dev}:");
        let line = text.lines().find(|l| l.trim_start().starts_with(&dev)).expect("the interface's counters");
        let f: Vec<u64> = line.split(':').nth(1).unwrap().split_whitespace().map(|v| v.parse().unwrap()).collect();
        (f[1], f[9])
    }

    /// Bytes received and sent by namespace `ns`'s veth end (its interface counters, from the
    /// namespace's own /proc/net/dev: /sys would show the mounting namespace's devices).
    pub fn veth_bytes(&self, ns: &str) -> (u64, u64) {
        let out = self.cmd(ns, "cat").arg("/proc/net/dev").output().expect("read /proc/net/dev");
        let text = String::from_utf8_lossy(&out.stdout);
        let dev = format!("{ns}v:");
        let line = text.lines().find(|l| l.trim_start().starts_with(&dev)).expect("the veth's counters");
        let f: Vec<u64> = line.split(':').nth(1).unwrap().split_whitespace().map(|v| v.parse().unwrap()).collect();
        (f[0], f[8])
    }
}

/// Packets the kernel dropped because a CPU's input backlog was full, over all CPUs and
/// namespaces (/proc/net/softnet_stat, second column).
pub fn softnet_drops() -> u64 {
    let text = std::fs::read_to_string("/proc/net/softnet_stat").unwrap_or_default();
    text.lines().filter_map(|l| l.split_whitespace().nth(1)).filter_map(|h| u64::from_str_radix(h, 16).ok()).sum()
}

/// A bulk fleet's result (one way) merged exactly: each agent's own totals are the sum of the
/// tests it ran (client) or served (server), the fleet's the sum of its tests, every byte sent
/// was received, and the merged intervals add up to the totals. The bytes received. (The fleet
/// and k8s binaries use it; the integration binary, which shares this file, does not.)
#[allow(dead_code)]
pub fn merged_exactly(what: &str, r: &RunResult) -> u64 {
    for a in &r.agents {
        let own = a.summary.as_ref().expect("an agent's own summary").ways[0].sender.bytes;
        let of_parts: u64 = a.parts.iter().map(|&k| r.parts[k as usize].summary.ways[0].sender.bytes).sum();
        assert_eq!(own, of_parts, "{what}: {} {}", a.role, a.agent.address);
    }
    let way = &r.summary.ways[0];
    let recv: u64 = r.parts.iter().map(|p| p.summary.ways[0].receiver.unwrap().bytes).sum();
    let sent: u64 = r.parts.iter().map(|p| p.summary.ways[0].sender.bytes).sum();
    assert_eq!((way.sender.bytes, way.receiver.unwrap().bytes), (sent, recv), "{what}: merged = sum of parts");
    assert_eq!(sent, recv, "{what}: every byte sent was received");
    let iv: u64 = r.intervals.iter().map(|i| i.sums[0].received_bytes.unwrap()).sum();
    assert_eq!(iv, recv, "{what}: the merged intervals add up to the totals");
    recv
}

/// Where skipped tests are listed, one line each, for scripts/test.sh to count in its summary
/// (a test that cannot run here passes in the harness's count; this list says it did not run).
pub const SKIPPED: &str = concat!(env!("CARGO_TARGET_TMPDIR"), "/skipped-tests.txt");

/// Records that `test` did not run, and why: a line in [`SKIPPED`] and on stderr. With
/// `NETBLAST_NO_SKIP=1` (on a host that should run everything) a skip fails the test instead.
pub fn skipped(test: &str, why: &str) {
    if std::env::var_os("NETBLAST_NO_SKIP").is_some_and(|v| v == "1") {
        panic!("{test} cannot run here ({why}), and NETBLAST_NO_SKIP=1 says every test must");
    }
    eprintln!("SKIP {test}: {why}");
    let line = format!("{test}: {why}\n");
    let file = std::fs::OpenOptions::new().create(true).append(true).open(SKIPPED);
    if let Ok(mut f) = file {
        let _ = std::io::Write::write_all(&mut f, line.as_bytes());
    }
}

/// Whether tests that make network namespaces can run here (root); records why not.
pub fn netns_or_skip(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        skipped(test, "needs root to make network namespaces");
        return false;
    }
    true
}

impl Drop for NetnsPair {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// Namespaces a and b joined through a middle one whose delay line (scripts/delayline.py on a
/// TUN device) holds every packet `delay` each way: a path with a round trip of 2 × delay,
/// made without netem or fq (this kernel has neither). a is 10.1.1.1, b 10.1.2.1 (`pair.addr_b`).
/// Everything is removed on drop.
pub struct DelayPath {
    pub pair: NetnsPair,
    m: String,
    line: Option<KillOnDrop>,
}

impl DelayPath {
    pub fn create(delay: Duration) -> DelayPath {
        let mut pair = NetnsPair::create();
        pair.addr_b = "10.1.2.1".into();
        let (a, b) = (pair.a.clone(), pair.b.clone());
        // The pair's own veth is replaced by two, through the middle namespace.
        ip(&["-n", &a, "link", "del", &format!("{a}v")]);
        let m = format!("{}m", a.trim_end_matches('a'));
        ip(&["netns", "add", &m]);
        let mut path = DelayPath { pair, m: m.clone(), line: None };
        for (ns, dev, mdev, net) in [(&a, format!("{a}v"), "m2a", "10.1.1"), (&b, format!("{b}v"), "m2b", "10.1.2")] {
            ip(&["link", "add", &dev, "netns", ns, "type", "veth", "peer", "name", mdev, "netns", &m]);
            ip(&["-n", ns, "addr", "add", &format!("{net}.1/24"), "dev", &dev]);
            ip(&["-n", &m, "addr", "add", &format!("{net}.2/24"), "dev", mdev]);
            // `dev` always: a bare name that begins a keyword (`ma`: master) is taken for it.
            ip(&["-n", ns, "link", "set", "dev", &dev, "up"]);
            ip(&["-n", &m, "link", "set", "dev", mdev, "up"]);
            ip(&["-n", ns, "route", "add", "default", "via", &format!("{net}.2")]);
        }
        ip(&["-n", &m, "link", "set", "lo", "up"]);
        ip(&["-n", &m, "tuntap", "add", "dev", "dl0", "mode", "tun"]);
        ip(&["-n", &m, "link", "set", "dev", "dl0", "up"]);
        for dev in ["m2a", "m2b"] {
            ip(&["-n", &m, "rule", "add", "iif", dev, "lookup", "100"]);
        }
        ip(&["-n", &m, "route", "add", "default", "dev", "dl0", "table", "100"]);
        let st = Command::new("ip")
            .args(["netns", "exec", &m, "sysctl", "-qw", "net.ipv4.ip_forward=1"])
            .args(["net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.dl0.rp_filter=0"])
            .status()
            .unwrap();
        assert!(st.success(), "forwarding in {m}");
        let line = Command::new("ip")
            .args(["netns", "exec", &m, "python3", concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/delayline.py")])
            .args(["--dev", "dl0", "--delay", &format!("{}us", delay.as_micros()), "--for", "300s"])
            .stdout(Stdio::null())
            .spawn()
            .expect("python3 scripts/delayline.py");
        path.line = Some(KillOnDrop(line));
        // Ready when a connection attempt to a closed port of b is refused (one round trip:
        // no ping here), no sooner than the round trip.
        const PROBE: &str = "import socket, time\n\
            s = socket.socket(); s.settimeout(2); t = time.monotonic()\n\
            try:\n    s.connect(('10.1.2.1', 9))\n\
            except ConnectionRefusedError:\n    print(time.monotonic() - t)\n";
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let out = path.pair.cmd(&a, "python3").args(["-c", PROBE]).output().unwrap();
            if let Ok(rtt) = String::from_utf8_lossy(&out.stdout).trim().parse::<f64>() {
                assert!(rtt >= (delay * 2).as_secs_f64(), "the delay line adds {delay:?} each way: {rtt} s");
                break;
            }
            assert!(std::time::Instant::now() < deadline, "no round trip through the delay line in {m}");
            std::thread::sleep(Duration::from_millis(100));
        }
        path
    }
}

impl Drop for DelayPath {
    fn drop(&mut self) {
        drop(self.line.take());
        let _ = Command::new("ip").args(["netns", "del", &self.m]).status();
    }
}

/// `GET /metrics`, parsed.
pub fn scrape(at: SocketAddr) -> prometheus_parse::Scrape {
    let mut c = std::net::TcpStream::connect(at).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // As Prometheus asks (OpenMetrics first).
    std::io::Write::write_fmt(
        &mut c,
        format_args!(
            "GET /metrics HTTP/1.1\r\nHost: {at}\r\nAccept: application/openmetrics-text;version=1.0.0,\
             text/plain;version=0.0.4;q=0.5\r\nConnection: close\r\n\r\n"
        ),
    )
    .unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut c, &mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.to_lowercase().contains("content-type: application/openmetrics-text"), "{head}");
    // The body may be chunked: keep only the exposition lines.
    let lines: Vec<std::io::Result<String>> =
        body.lines().filter(|l| l.starts_with('#') || l.starts_with("netblast_")).map(|l| Ok(l.to_string())).collect();
    assert!(body.contains("# EOF"), "a whole exposition: {body}");
    prometheus_parse::Scrape::parse(lines.into_iter()).expect("the exposition parses")
}

/// Scrapes `at` as a scraper that does not speak OpenMetrics (`Accept: text/plain`) and holds
/// the answer to `promtool check metrics` (Prometheus's own linter: help text on every family,
/// base units, the format itself); returns false (said on stderr) where promtool is absent.
pub fn promtool_passes(at: SocketAddr) -> bool {
    if Command::new("promtool").arg("--version").output().is_err() {
        skipped("promtool check metrics", "promtool is not installed (Debian: prometheus; scripts/setup.sh)");
        return false;
    }
    let mut c = std::net::TcpStream::connect(at).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let ask =
        format!("GET /metrics HTTP/1.1\r\nHost: {at}\r\nAccept: text/plain;version=0.0.4\r\nConnection: close\r\n\r\n");
    std::io::Write::write_all(&mut c, ask.as_bytes()).unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut c, &mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.to_lowercase().contains("content-type: text/plain; version=0.0.4"), "{head}");
    let mut p = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(p.stdin.as_mut().unwrap(), body.as_bytes()).unwrap();
    drop(p.stdin.take());
    let out = p.wait_with_output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "promtool check metrics: {said}\n{body}");
    true
}

/// The value of the sample `name` whose labels include `labels` (a counter is `NAME_total`).
pub fn value(s: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    s.samples
        .iter()
        .filter(|x| x.metric == name && labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v)))
        .map(|x| match &x.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => *v,
            other => panic!("{name}: not a number: {other:?}"),
        })
        .next()
}

/// The `+Inf` bucket (the sample count) of histogram `name`.
pub fn histogram_count(s: &prometheus_parse::Scrape, name: &str) -> f64 {
    let h = s.samples.iter().find(|x| x.metric == name).unwrap_or_else(|| panic!("no histogram {name}"));
    match &h.value {
        prometheus_parse::Value::Histogram(b) => {
            assert!(b.windows(2).all(|w| w[0].count <= w[1].count), "{name}: buckets are cumulative");
            b.iter().find(|c| c.less_than.is_infinite()).expect("+Inf bucket").count
        }
        other => panic!("{name}: not a histogram: {other:?}"),
    }
}

/// The client arguments of the kill tests' run of `kind` (bulk, udp, rr or http) against
/// data port `target` or responder `url`.
pub fn kind_args(kind: &str, target: &str, url: &str) -> Vec<String> {
    let args: Vec<&str> = match kind {
        "bulk" => vec!["--target", target],
        "udp" => vec!["--target", target, "-u", "-b", "50M"],
        "rr" => vec!["--target", target, "--profile", "latency"],
        "http" => vec!["--url", url, "-c", "2"],
        other => panic!("no kill-test arguments for {other}"),
    };
    args.into_iter().map(String::from).collect()
}

/// Random instants and cut points for tests that kill processes "at a random instant": seeded
/// from `NETBLAST_TEST_SEED` when set (to replay a failure), else from the clock; the seed is in
/// every failure message of the tests that use it.
pub struct Chance {
    /// The seed this sequence started from.
    pub seed: u64,
    state: u64,
}

impl Chance {
    /// A new sequence, from the environment's seed or the clock.
    pub fn seeded() -> Chance {
        let seed = std::env::var("NETBLAST_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1)
        });
        eprintln!("random instants from NETBLAST_TEST_SEED={seed}");
        Chance { seed, state: seed | 1 }
    }

    /// A number in `lo..hi` (xorshift64*).
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        lo + self.state.wrapping_mul(0x2545_f491_4f6c_dd1d) % (hi - lo).max(1)
    }

    /// A duration between `lo_ms` and `hi_ms` milliseconds.
    pub fn millis(&mut self, lo_ms: u64, hi_ms: u64) -> Duration {
        Duration::from_millis(self.between(lo_ms, hi_ms))
    }
}

/// Cuts `file` at a random byte after its first line (the start record a log opens with), as a
/// process killed while writing leaves it; returns the new length.
pub fn cut_after_first_line(file: &std::path::Path, chance: &mut Chance) -> u64 {
    let bytes = std::fs::read(file).unwrap();
    let first = bytes.iter().position(|&b| b == b'\n').map(|i| i as u64 + 1).unwrap_or(bytes.len() as u64);
    let at = chance.between(first, bytes.len() as u64 + 1);
    std::fs::OpenOptions::new().write(true).open(file).unwrap().set_len(at).unwrap();
    at
}

/// Whether cutting `whole` at byte `len` leaves its last line a part of a record (a line that
/// only lost its newline is still whole).
pub fn cut_mid_record(whole: &[u8], len: usize) -> bool {
    let start = whole[..len].iter().rposition(|&b| b == b'\n').map(|i| i + 1).unwrap_or(0);
    let line = whole[start..].iter().position(|&b| b == b'\n').unwrap_or(whole.len() - start);
    len > start && len - start < line
}

/// The whole records of `whole` cut at byte `len`: what a reader should keep.
pub fn whole_records(whole: &[u8], len: usize) -> String {
    let keep = if cut_mid_record(whole, len) {
        whole[..len].iter().rposition(|&b| b == b'\n').map(|i| i + 1).unwrap_or(0)
    } else {
        len
    };
    String::from_utf8(whole[..keep].to_vec()).expect("whole records are UTF-8")
}

/// A local nginx from scripts/nginx-local.sh on free ports: (process, http, https, its
/// directory), its `/limited` behind limit_req at `rate` (`1000r/s`); `None` (said) without
/// nginx.
pub(crate) fn nginx_limited(rate: &str) -> Option<(KillOnDrop, u16, u16, tempdir::Dir)> {
    lane();
    if std::process::Command::new("nginx").arg("-v").output().is_err() {
        skipped("nginx tests", "nginx is not installed");
        return None;
    }
    let free = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (p1, p2) = (free(), free());
    let dir = tempdir::Dir::new("nb-nginx");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/nginx-local.sh");
    let child = std::process::Command::new(script)
        .env("LIMIT_RATE", rate)
        .arg(dir.path())
        .args([p1.to_string(), p2.to_string(), "1".to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let guard = KillOnDrop(child);
    let t = std::time::Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", p1)).is_err() {
        assert!(t.elapsed() < Duration::from_secs(10), "nginx did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    Some((guard, p1, p2, dir))
}

pub(crate) mod tempdir {
    /// A directory removed on drop.
    pub struct Dir(std::path::PathBuf);
    impl Dir {
        pub fn new(prefix: &str) -> Dir {
            let p =
                std::env::temp_dir().join(format!("{prefix}-{}-{:?}", std::process::id(), std::thread::current().id()));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            Dir(p)
        }
        pub fn path(&self) -> &std::path::Path {
            &self.0
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Keeps `slots` connections open, each made by `open(slot)` (non-blocking) and made again as
/// soon as its peer closes it, until `stop` or `bound`, pausing `pause` between passes; returns
/// how many it opened. A stranger's connections in the hostile tests.
pub fn keep_reopening(
    slots: usize,
    mut open: impl FnMut(usize) -> Option<std::net::TcpStream>,
    stop: &std::sync::atomic::AtomicBool,
    bound: Duration,
    pause: Duration,
) -> u64 {
    use std::io::Read;
    let began = std::time::Instant::now();
    let mut held: Vec<Option<std::net::TcpStream>> = (0..slots).map(|_| None).collect();
    let (mut opened, mut buf) = (0, [0u8; 256]);
    while !stop.load(std::sync::atomic::Ordering::Relaxed) && began.elapsed() < bound {
        for (i, slot) in held.iter_mut().enumerate() {
            let closed = match slot {
                None => true,
                Some(c) => match c.read(&mut buf) {
                    Ok(0) => true,
                    Ok(_) => false,
                    Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
                },
            };
            if closed {
                *slot = open(i);
                opened += slot.is_some() as u64;
            }
        }
        std::thread::sleep(pause);
    }
    opened
}
