//! The one kit netblast's integration tests (`crates/netblast/tests`) and its self-validation
//! benches (`benches/`) both use: an in-process `netblast serve` on any address
//! ([`LocalServer`]) or inside a namespace ([`ServerIn`]), a profile run against it ([`run`]),
//! two network namespaces joined directly, through a router or through a delay line
//! ([`netns::Pair`]), child processes stopped on drop ([`KillOnDrop`]), a local nginx
//! ([`Nginx`]), and the traffic lane that keeps two traffic tests from sharing the CPUs
//! ([`lane`]). Everything returns its failure (named) rather than panicking: a test unwraps
//! it, a bench reports it.

#![warn(missing_docs)]

pub mod netns;

use netblast_probe::Probe;
use netblast_spec::{Profile, RunResult};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The traffic lane: one test at a time sends traffic. On this project's 2-CPU hosts every
/// traffic test wants both CPUs (pinned workers, a server beside its client), and two at once
/// each got half: a timing or a verdict then depended on the test beside it (issue 38). Every
/// helper that starts a server or a namespace takes the lane for the calling thread; it is
/// given back when that thread ends (libtest runs each test on a thread of its own), so tests
/// without traffic (parsing, rendering) still run side by side. Only a test's own thread takes
/// it: a thread the test spawns (two clients at once) runs under the test's lane, and must not
/// call a helper that takes it ([`run`] and [`run_with`] do not). A bench runs on one thread:
/// it takes the lane once and keeps it.
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

/// An in-process `netblast serve` (its data port) on an ephemeral port, stopped on drop.
pub struct LocalServer {
    /// Where it listens.
    pub addr: SocketAddr,
    _bg: netblast_agent::Background,
}

impl LocalServer {
    /// Starts a server on `bind` (e.g. "127.0.0.1:0") with `TCP_INFO` statistics; an error
    /// when that address cannot be bound here (no IPv6 loopback, say). Takes the [`lane`].
    pub fn start(bind: &str) -> std::io::Result<LocalServer> {
        LocalServer::start_cfg(bind, Default::default())
    }

    /// As [`LocalServer::start`], with the given source of TCP statistics.
    pub fn start_with(bind: &str, probe: Probe) -> std::io::Result<LocalServer> {
        LocalServer::start_cfg(bind, netblast_agent::ServeConfig { probe, ..Default::default() })
    }

    /// As [`LocalServer::start`], with the given settings.
    pub fn start_cfg(bind: &str, cfg: netblast_agent::ServeConfig) -> std::io::Result<LocalServer> {
        lane();
        LocalServer::bind(bind, cfg)
    }

    /// Starts a server on every address of the calling thread's network namespace, taking
    /// peers that are not on loopback (for a namespace pair the caller made itself). It does
    /// not take the [`lane`]: it runs on a thread that entered the namespace ([`ServerIn`],
    /// [`netns::inside`]), under the lane of the thread that made the pair.
    pub fn start_open() -> std::io::Result<LocalServer> {
        let access = netblast_agent::Access { token: None, open: true };
        LocalServer::bind("0.0.0.0:0", netblast_agent::ServeConfig { access, ..Default::default() })
    }

    /// The server on `bind`, with no lane taken.
    fn bind(bind: &str, cfg: netblast_agent::ServeConfig) -> std::io::Result<LocalServer> {
        let at: SocketAddr =
            bind.parse().map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{bind}: {e}")))?;
        let bg = netblast_agent::Background::data_port(std::net::TcpListener::bind(at)?, cfg)?;
        Ok(LocalServer { addr: bg.addr(), _bg: bg })
    }
}

/// A server living in a network namespace (on a thread that entered it) until dropped: a
/// [`LocalServer::start_open`] ([`ServerIn::start`]) or an HTTP responder ([`ServerIn::http`]).
pub struct ServerIn {
    /// The port it listens on, on every address of its namespace.
    pub port: u16,
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<(), String>>>,
}

impl ServerIn {
    /// `netblast serve`'s data port in namespace `ns`, open to the pair's other side. Takes the
    /// [`lane`].
    pub fn start(ns: &str) -> Result<ServerIn, String> {
        ServerIn::with(ns, || {
            let s = LocalServer::start_open().map_err(|e| e.to_string())?;
            Ok((s.addr.port(), Box::new(s)))
        })
    }

    /// `netblast serve --http`'s responder (2 workers) in namespace `ns`, answering any peer.
    /// Takes the [`lane`].
    pub fn http(ns: &str) -> Result<ServerIn, String> {
        ServerIn::with(ns, || {
            let cfg =
                netblast_agent::http::ResponderConfig { peers: netblast_agent::http::Peers::Any, ..Default::default() };
            let l = std::net::TcpListener::bind("0.0.0.0:0").map_err(|e| e.to_string())?;
            let web = netblast_agent::Background::http(l, None, cfg, 2).map_err(|e| e.to_string())?;
            Ok((web.addr().port(), Box::new(web)))
        })
    }

    /// Runs `make` on a thread in `ns` and keeps what it made there until dropped.
    fn with(
        ns: &str,
        make: impl FnOnce() -> Result<(u16, Box<dyn std::any::Any>), String> + Send + 'static,
    ) -> Result<ServerIn, String> {
        lane();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (port_tx, port_rx) = std::sync::mpsc::channel();
        let ns = ns.to_string();
        let thread = std::thread::spawn(move || {
            netns::inside(&ns, move || {
                let made = make();
                let _ = port_tx.send(made.as_ref().map(|(port, _)| *port).map_err(|e| e.clone()));
                let _ = rx.recv();
                drop(made);
            })
        });
        let mut server = ServerIn { port: 0, stop: Some(tx), thread: Some(thread) };
        server.port = port_rx.recv().map_err(|_| "the server thread ended".to_string())??;
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

/// Loads a built-in profile and lets `edit` adjust it; validated.
pub fn profile(name: &str, edit: impl FnOnce(&mut Profile)) -> Result<Profile, String> {
    let (mut p, origin) = Profile::load(name).map_err(|e| e.to_string())?;
    edit(&mut p);
    p.validate(&origin).map_err(|e| e.to_string())?;
    Ok(p)
}

/// Runs a profile in-process against `addr` with `TCP_INFO` statistics.
pub fn run(addr: SocketAddr, p: Profile) -> Result<RunResult, String> {
    run_with(addr, p, &Probe::tcp_info())
}

/// Runs a profile in-process against `addr` with the given source of TCP statistics.
pub fn run_with(addr: SocketAddr, p: Profile, probe: &Probe) -> Result<RunResult, String> {
    netblast_engine::run::plan_and_run(p, "test profile", &addr.to_string(), probe, &Default::default())
        .map_err(|e| e.to_string())
}

/// A child process stopped when dropped, so a failure leaves nothing running: SIGTERM first
/// (nginx's master then stops its workers; a killed master leaves them running), SIGKILL if
/// it lingers past 5 s.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        // SAFETY: kill has no memory-safety preconditions; the pid is our own child's.
        unsafe { libc::kill(self.0.id() as libc::pid_t, libc::SIGTERM) };
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The repository's `scripts/` folder.
pub fn scripts() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts")
}

/// A local nginx (`scripts/nginx-local.sh`, one worker) on free loopback ports, stopped and its
/// directory removed on drop.
pub struct Nginx {
    /// Its HTTP port.
    pub http: u16,
    /// Its HTTPS port (a self-signed certificate).
    pub https: u16,
    process: Option<KillOnDrop>,
    dir: std::path::PathBuf,
}

impl Nginx {
    /// Starts it with its `/limited` behind `limit_req` at `limit` (`2000r/s`), pinned to `cpu`
    /// if given (taskset); ready when its HTTP port takes a connection (10 s at most).
    pub fn start(limit: &str, cpu: Option<usize>) -> Result<Nginx, String> {
        lane();
        let free = || std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port());
        let (http, https) = (free().map_err(|e| e.to_string())?, free().map_err(|e| e.to_string())?);
        let dir = std::env::temp_dir().join(format!("nb-kit-nginx-{}-{http}", std::process::id()));
        let script = scripts().join("nginx-local.sh");
        let mut c = match cpu {
            Some(n) => {
                let mut c = Command::new("taskset");
                c.args(["-c", &n.to_string()]).arg(&script);
                c
            }
            None => Command::new(&script),
        };
        let child = c
            .env("LIMIT_RATE", limit)
            .arg(&dir)
            .args([http.to_string(), https.to_string(), "1".to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("{}: {e}", script.display()))?;
        let nginx = Nginx { http, https, process: Some(KillOnDrop(child)), dir };
        let t = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", http)).is_err() {
            if t.elapsed() > Duration::from_secs(10) {
                return Err("nginx did not start within 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(nginx)
    }

    /// Its directory (configuration, logs).
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        drop(self.process.take());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
