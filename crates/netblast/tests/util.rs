//! Helpers: servers on port 0, runs in-process, and the real binary.

use netblast_probe::Probe;
use netblast_spec::{Profile, RunResult};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub use netblast_testkit::netns::Pair as NetnsPair;
pub use netblast_testkit::{KillOnDrop, LocalServer as Server, lane};

/// A bulk profile: `edit` adjusts the built-in bulk-1flow.
pub fn profile(edit: impl FnOnce(&mut Profile)) -> Profile {
    netblast_testkit::profile("bulk-1flow", |p| {
        p.run.interval = Some("250ms".parse().unwrap());
        p.run.duration = Some("1s".parse().unwrap());
        edit(p);
    })
    .unwrap()
}

/// Runs a profile in-process against `addr`.
pub fn run(addr: SocketAddr, p: Profile) -> RunResult {
    run_with(addr, p, &Probe::tcp_info())
}

/// Runs a profile in-process against `addr` with the given source of TCP statistics.
pub fn run_with(addr: SocketAddr, p: Profile, probe: &Probe) -> RunResult {
    netblast_testkit::run_with(addr, p, probe).unwrap()
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

/// What the tests do with a namespace pair beyond the kit's: the real binary served in one of
/// its namespaces, and its interfaces' counters read (each a test's failure when it cannot).
pub trait InPair {
    /// The real `netblast serve` (TCP_INFO statistics) in namespace `ns`, open to other
    /// namespaces, on an ephemeral port: it, stopped on drop, and its address.
    fn serve(&self, ns: &str) -> (KillOnDrop, SocketAddr);
    /// `netblast serve --probe tcpinfo ARGS` in namespace `ns`, its output discarded, stopped on
    /// drop (the caller names its port and waits for it).
    fn serve_quiet(&self, ns: &str, args: &[&str]) -> KillOnDrop;
    /// Packets received and sent by interface `dev` of namespace `ns`.
    fn packets(&self, ns: &str, dev: &str) -> (u64, u64);
    /// Bytes received and sent by namespace `ns`'s veth end.
    fn veth_bytes(&self, ns: &str) -> (u64, u64);
}

impl InPair for NetnsPair {
    fn serve(&self, ns: &str) -> (KillOnDrop, SocketAddr) {
        let mut serve = self.cmd(ns, env!("CARGO_BIN_EXE_netblast"));
        serve.args(["serve", "--probe", "tcpinfo", "--open", "--port", "0"]);
        let (child, addr) = spawn_server_from(serve);
        (KillOnDrop(child), addr)
    }

    fn serve_quiet(&self, ns: &str, args: &[&str]) -> KillOnDrop {
        let mut c = self.cmd(ns, env!("CARGO_BIN_EXE_netblast"));
        c.args(["serve", "--probe", "tcpinfo"]).args(args).stdout(Stdio::null()).stderr(Stdio::null());
        KillOnDrop(c.spawn().unwrap())
    }

    fn packets(&self, ns: &str, dev: &str) -> (u64, u64) {
        let c = self.dev_counters(ns, dev).unwrap();
        (c.rx_packets, c.tx_packets)
    }

    fn veth_bytes(&self, ns: &str) -> (u64, u64) {
        let c = self.dev_counters(ns, &self.veth(ns)).unwrap();
        (c.rx_bytes, c.tx_bytes)
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
    match netblast_testkit::netns::can_make() {
        Ok(()) => true,
        Err(why) => {
            skipped(test, &why);
            false
        }
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

/// A local nginx (the kit's) with its `/limited` behind limit_req at `rate` (`1000r/s`);
/// `None` (said) without nginx.
pub(crate) fn nginx_limited(rate: &str) -> Option<netblast_testkit::Nginx> {
    lane();
    if std::process::Command::new("nginx").arg("-v").output().is_err() {
        skipped("nginx tests", "nginx is not installed");
        return None;
    }
    Some(netblast_testkit::Nginx::start(rate, None).unwrap())
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
