//! Shared pieces of the self-validation benches: an in-process server on loopback and a
//! runner for profiles against it.

#![warn(missing_docs)]

pub mod anchor;
pub mod baseline;
pub mod fleet_sim;
pub mod netns;
pub mod truth;

use netblast_probe::Probe;
use netblast_spec::{Profile, RunResult};
use std::net::SocketAddr;

/// An in-process `netblast serve` on 127.0.0.1 with an ephemeral port; stopped on drop.
pub struct LocalServer {
    /// Where it listens.
    pub addr: SocketAddr,
    _bg: netblast_agent::Background,
}

impl LocalServer {
    /// Starts the server.
    pub fn start() -> std::io::Result<LocalServer> {
        let bg =
            netblast_agent::Background::data_port(std::net::TcpListener::bind("127.0.0.1:0")?, Default::default())?;
        Ok(LocalServer { addr: bg.addr(), _bg: bg })
    }

    /// Starts a server on every address of the calling thread's network namespace, taking
    /// peers that are not on loopback (for a namespace pair this bench made itself).
    pub fn start_open() -> std::io::Result<LocalServer> {
        let cfg = netblast_agent::ServeConfig {
            access: netblast_agent::Access { token: None, open: true },
            ..Default::default()
        };
        let bg = netblast_agent::Background::data_port(std::net::TcpListener::bind("0.0.0.0:0")?, cfg)?;
        Ok(LocalServer { addr: bg.addr(), _bg: bg })
    }
}

/// A [`LocalServer::start_open`] living in a network namespace (on a thread that entered it)
/// until dropped.
pub struct ServerIn {
    /// The port it listens on, on every address of its namespace.
    pub port: u16,
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<(), String>>>,
}

impl ServerIn {
    /// Starts the server in namespace `ns`.
    pub fn start(ns: &str) -> Result<ServerIn, String> {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let ns = ns.to_string();
        let thread = std::thread::spawn(move || {
            netns::inside(&ns, move || {
                let s = LocalServer::start_open();
                let _ = addr_tx.send(s.as_ref().map(|s| s.addr.port()).map_err(|e| e.to_string()));
                let _ = rx.recv();
                drop(s);
            })
        });
        let mut server = ServerIn { port: 0, stop: Some(tx), thread: Some(thread) };
        server.port = addr_rx.recv().map_err(|_| "the server thread ended".to_string())??;
        Ok(server)
    }
}

impl Drop for ServerIn {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Loads a built-in profile and lets `edit` adjust it.
pub fn profile(name: &str, edit: impl FnOnce(&mut Profile)) -> Result<Profile, String> {
    let (mut p, origin) = Profile::load(name).map_err(|e| e.to_string())?;
    edit(&mut p);
    p.validate(&origin).map_err(|e| e.to_string())?;
    Ok(p)
}

/// Runs a profile against `addr` and returns the result.
pub fn run(addr: SocketAddr, p: Profile) -> Result<RunResult, String> {
    run_with(addr, p, &Probe::tcp_info())
}

/// Runs a profile against `addr` with the given source of TCP statistics.
pub fn run_with(addr: SocketAddr, p: Profile, probe: &Probe) -> Result<RunResult, String> {
    netblast_engine::run::plan_and_run(p, "bench", &addr.to_string(), probe, &Default::default())
        .map_err(|e| e.to_string())
}

/// Prints one figure as one line (name, value, unit, what it means) and keeps it.
pub fn figure(name: &str, value: f64, unit: &str, note: &str) {
    truth::figure(name, value, unit, note);
}

/// How long each bench run lasts: `NETBLAST_BENCH_SECS` (default 3).
pub fn secs() -> std::time::Duration {
    let s: f64 = std::env::var("NETBLAST_BENCH_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(3.0);
    std::time::Duration::from_secs_f64(s)
}

/// A child process stopped on drop: SIGTERM first, so that nginx's master stops its workers (a
/// killed master leaves them running), SIGKILL after 5 s.
pub struct Stopped(pub std::process::Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        // SAFETY: kill with our child's pid and a valid signal.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let t = std::time::Instant::now();
        while t.elapsed() < std::time::Duration::from_secs(5) {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A local nginx (scripts/nginx-local.sh, one worker) on free loopback ports, its `/limited`
/// behind `limit_req` at `limit` (`2000r/s`), pinned to `cpu` if given (taskset): the process,
/// its HTTP port and its directory (removed on drop of the returned guard's owner by the
/// caller).
pub fn nginx(limit: &str, cpu: Option<usize>) -> Result<(Stopped, u16, std::path::PathBuf), String> {
    use std::process::{Command, Stdio};
    let free = || std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port());
    let (p1, p2) = (free().map_err(|e| e.to_string())?, free().map_err(|e| e.to_string())?);
    let dir = std::env::temp_dir().join(format!("nb-bench-nginx-{}-{p1}", std::process::id()));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/nginx-local.sh");
    let mut c = match cpu {
        Some(n) => {
            let mut c = Command::new("taskset");
            c.args(["-c", &n.to_string(), script]);
            c
        }
        None => Command::new(script),
    };
    let child = c
        .env("LIMIT_RATE", limit)
        .arg(&dir)
        .args([p1.to_string(), p2.to_string(), "1".to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("{script}: {e}"))?;
    let child = Stopped(child);
    let t = std::time::Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", p1)).is_err() {
        if t.elapsed() > std::time::Duration::from_secs(10) {
            return Err("nginx did not start".into());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Ok((child, p1, dir))
}
