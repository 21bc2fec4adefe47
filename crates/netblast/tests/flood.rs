//! A stranger that keeps every place for unproven connections taken, beside a client with the
//! token that must still run its tests (issue 56): the real `netblast serve`, with 1 024
//! descriptors (256 places for strangers), its log counted.

use crate::util;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const TOKEN: &str = "a-token-long-enough-for-the-flood-tests";

/// The longest a stranger keeps at it, whatever the test does.
const ATTACK_BOUND: Duration = Duration::from_secs(90);

/// `netblast serve` with the token and 1 024 descriptors, its log going to a file.
struct Serve {
    _child: util::KillOnDrop,
    pid: u32,
    addr: SocketAddr,
    log: std::path::PathBuf,
}

impl Serve {
    fn start(token: &std::path::Path) -> Serve {
        util::lane();
        static N: AtomicU64 = AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let log = std::env::temp_dir().join(format!("nb-flood-{}-{n}.log", std::process::id()));
        let mut c = std::process::Command::new("sh");
        c.arg("-c").arg(format!(
            "ulimit -n 1024 && exec {} serve --bind 127.0.0.1 --port 0 --probe tcpinfo --token-file {} 2>{}",
            env!("CARGO_BIN_EXE_netblast"),
            token.display(),
            log.display()
        ));
        let child = c.stdout(std::process::Stdio::null()).spawn().unwrap();
        let pid = child.id();
        let child = util::KillOnDrop(child);
        let until = Instant::now() + Duration::from_secs(10);
        let addr = loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(a) = text
                .lines()
                .filter(|l| l.contains("data port"))
                .find_map(|l| l.split_whitespace().find_map(|w| w.parse::<SocketAddr>().ok()))
            {
                break a;
            }
            assert!(Instant::now() < until, "serve did not start: {text}");
            std::thread::sleep(Duration::from_millis(20));
        };
        Serve { _child: child, pid, addr, log }
    }

    fn log_bytes(&self) -> u64 {
        std::fs::metadata(&self.log).map(|m| m.len()).unwrap_or(0)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.log);
    }
}

/// The descriptors process `pid` holds.
fn fds_of(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0)
}

/// Silent connections from `from` to `to`, `each` per address, each opened again as soon as
/// the server closes it, until `stop` (or [`ATTACK_BOUND`]). Counts the connections opened.
fn stranger(from: Vec<[u8; 4]>, each: usize, to: SocketAddr, stop: Arc<AtomicBool>, opened: Arc<AtomicU64>) {
    let open = |i: usize| {
        let c = connect_silent(from[i % from.len()], to);
        opened.fetch_add(c.is_some() as u64, Ordering::Relaxed);
        c
    };
    util::keep_reopening(from.len() * each, open, &stop, ATTACK_BOUND, Duration::ZERO);
}

fn connect_silent(from: [u8; 4], to: SocketAddr) -> Option<TcpStream> {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
    s.bind(&SocketAddr::from((from, 0)).into()).ok()?;
    // A full accept queue drops the SYN: give up on this one quickly and try again later.
    s.connect_timeout(&to.into(), Duration::from_millis(200)).ok()?;
    s.set_nonblocking(true).ok()?;
    Some(s.into())
}

/// What the server did while strangers held its places and a good client ran 3 tests.
struct Figures {
    good: usize,
    failures: Vec<String>,
    opened: u64,
    most_fds: usize,
    log_per_second: f64,
    secs: f64,
}

/// Starts a server, `threads` strangers with `addresses` each holding `each` connections per
/// address, waits until the places are taken, then runs a good client 3 times.
fn under_attack(addresses: Vec<[u8; 4]>, each: usize, threads: usize) -> Figures {
    let token = util::token_file("flood", TOKEN);
    let serve = Serve::start(&token);
    netblast_engine::os::sys::ensure_fds((addresses.len() * each + 512) as u64).expect("the strangers' descriptors");
    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicU64::new(0));
    let per = addresses.len().div_ceil(threads);
    let strangers: Vec<_> = addresses
        .chunks(per)
        .map(|from| {
            let (from, stop, opened, to) = (from.to_vec(), stop.clone(), opened.clone(), serve.addr);
            std::thread::spawn(move || stranger(from, each, to, stop, opened))
        })
        .collect();
    // The places are taken: more connections opened than the server holds for strangers.
    let until = Instant::now() + Duration::from_secs(20);
    while opened.load(Ordering::Relaxed) < 600 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    let (log_before, began) = (serve.log_bytes(), Instant::now());
    // The server's descriptors, counted every 20 ms while the good client runs.
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (done, pid) = (done.clone(), serve.pid);
        std::thread::spawn(move || {
            let mut most = 0;
            while !done.load(Ordering::Relaxed) {
                most = most.max(fds_of(pid));
                std::thread::sleep(Duration::from_millis(20));
            }
            most
        })
    };
    let mut good = 0;
    let mut failures = Vec::new();
    for _ in 0..3 {
        let out = util::run_cmd()
            .args(["--target", &serve.addr.to_string(), "-t", "1", "--token-file", token.to_str().unwrap()])
            .output()
            .unwrap();
        if out.status.success() {
            good += 1;
        } else {
            failures.push(util::said(&out));
        }
    }
    let secs = began.elapsed().as_secs_f64();
    done.store(true, Ordering::Relaxed);
    let most_fds = sampler.join().unwrap();
    let log_per_second = (serve.log_bytes() - log_before) as f64 / secs;
    stop.store(true, Ordering::Relaxed);
    for s in strangers {
        s.join().unwrap();
    }
    Figures { good, failures, opened: opened.load(Ordering::Relaxed), most_fds, log_per_second, secs }
}

fn judge(what: &str, f: Figures) {
    eprintln!(
        "{what}: {} of 3 good runs in {:.1}s; the stranger opened {} connections; serve held at most {} descriptors; its log grew {:.0} B/s",
        f.good, f.secs, f.opened, f.most_fds, f.log_per_second
    );
    assert_eq!(f.good, 3, "{what}: every good run completes beside the stranger: {:#?}", f.failures);
    assert!(f.opened > 600, "{what}: the stranger kept the places taken ({} connections)", f.opened);
    // 256 places for strangers, 32 closing, the good client's few connections, the runtime's.
    assert!(f.most_fds < 256 + 32 + 64, "{what}: descriptors stay bounded: {}", f.most_fds);
    // At most 10 refusal lines a second and one saying how many more were not logged (lines
    // of 300 to 400 bytes).
    assert!(f.log_per_second < 11.0 * 500.0, "{what}: the log stays rate-limited: {:.0} B/s", f.log_per_second);
}

#[test]
fn a_client_with_the_token_runs_beside_a_stranger_holding_every_place_from_40_addresses() {
    // The attack: 1 100 silent connections from 127.0.0.2-41 (under the per-address
    // cap of 32) against a cap of 256, each reopened as soon as it is closed.
    let addresses = (2..42).map(|i| [127, 0, 0, i]).collect();
    judge("40 addresses", under_attack(addresses, 28, 4));
}

#[test]
fn a_client_with_the_token_runs_beside_a_stranger_on_its_own_address() {
    // A NAT gateway or a proxy: the stranger's silent connections come from the client's own
    // address, far over the per-address cap of 32.
    judge("the client's own address", under_attack(vec![[127, 0, 0, 1]], 300, 2));
}

#[test]
fn a_client_tries_a_busy_server_again_and_says_so_when_it_gives_up() {
    // A server that answers every handshake as one at its limit of unproven connections does.
    util::lane();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    let dialed = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let busy = {
        let (dialed, stop) = (dialed.clone(), stop.clone());
        std::thread::spawn(move || {
            let began = Instant::now();
            while !stop.load(Ordering::Relaxed) && began.elapsed() < ATTACK_BOUND {
                match listener.accept() {
                    Ok((mut c, _)) => {
                        dialed.fetch_add(1, Ordering::Relaxed);
                        let words = "closed to admit a newer connection".to_string();
                        let _ = std::io::Write::write_all(
                            &mut c,
                            &netblast_wire::wire::refusal(netblast_wire::wire::Refusal::Busy, words),
                        );
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        })
    };
    let began = Instant::now();
    let out = util::run_cmd().args(["--target", &addr.to_string(), "-t", "1"]).output().unwrap();
    let took = began.elapsed();
    stop.store(true, Ordering::Relaxed);
    busy.join().unwrap();
    let said = util::said(&out);
    assert!(!out.status.success(), "{said}");
    let tries = netblast_wire::wire::BUSY_BACKOFF.len() + 1;
    assert!(
        said.contains(&format!("refused {tries} times by a server that is at its limit of unproven connections")),
        "{said}"
    );
    assert!(said.contains("closed to admit a newer connection"), "the server's last words: {said}");
    assert_eq!(dialed.load(Ordering::Relaxed), tries as u64, "{said}");
    let pauses: Duration = netblast_wire::wire::BUSY_BACKOFF.iter().sum();
    assert!(took >= pauses, "it paused between attempts: {took:?}");
}
