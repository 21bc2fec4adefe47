//! netblast-agent: `netblast serve`, the peer every test runs against.
//!
//! One data port hosts any number of tests from any number of clients at once; each test is
//! identified by the id in its connection headers. The accept loop and control connections run
//! on tokio; stream traffic runs on the engine's pinned worker threads, never on the runtime.
//!
//! # Layout
//! - [`serve`]: the accept loop, taking an already-bound listener and a shutdown future.
//! - [`Background`]: a server on its own thread and runtime, for tests and benches.
//! - [`data`]: one connection: handshake, control of a test, running its streams.
//! - [`fleet`]: `serve` as a fleet agent: authenticated orders to originate tests, the
//!   allowlist, registering with a coordinator.
//! - [`registry`]: tests waiting for their streams.
//! - [`http`]: the built-in HTTP/HTTPS responder (`--http`, `--https`).

#![warn(missing_docs)]

pub mod data;
pub mod fleet;
pub mod http;
pub mod metrics;
pub mod registry;

use netblast_probe::Probe;
use netblast_wire::auth::Token;
use netblast_wire::wire::Refusal;
use registry::Registry;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// Who may use a server: with a token, whoever proves it; without, loopback peers only unless
/// the server was started `--open`.
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// The shared token; `None`: no authentication.
    pub token: Option<Token>,
    /// Without a token, accept peers that are not on loopback too.
    pub open: bool,
}

impl Access {
    /// Whether a peer at `ip` may proceed to the handshake.
    pub fn allows(&self, ip: IpAddr) -> bool {
        self.token.is_some() || self.open || is_loopback(ip)
    }

    /// What a refused peer is told.
    pub fn refusal(&self) -> &'static str {
        "this server has no token (--token-file) and accepts loopback peers only; give it a token, or start it with --open"
    }

    /// One line saying who may use the server, for its start-up banner.
    pub fn describe(&self) -> &'static str {
        match (&self.token, self.open) {
            (Some(_), _) => "peers that prove the token (--token-file)",
            (None, true) => "ANY peer, without authentication (--open): anyone who reaches this port can run tests",
            (None, false) => "loopback peers only (no --token-file; --open to accept others without authentication)",
        }
    }
}

/// Whether `ip` is a loopback address (IPv4-mapped IPv6 included).
pub fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
    }
}

/// Counters of a server's refusals, by reason; each refusal is logged with the peer and the
/// running count.
#[derive(Debug, Default)]
pub struct ServeStats {
    auth: AtomicU64,
    not_allowed: AtomicU64,
    version: AtomicU64,
    invalid: AtomicU64,
    limit: AtomicU64,
    /// What `serve --metrics` exposes.
    pub metrics: metrics::ServeMetrics,
    /// Print one line per finished test on stderr (`netblast serve`, as `iperf3 -s` does).
    pub print_tests: AtomicBool,
}

impl ServeStats {
    fn counter(&self, reason: Refusal) -> &AtomicU64 {
        match reason {
            Refusal::Auth => &self.auth,
            Refusal::NotAllowed => &self.not_allowed,
            Refusal::Version => &self.version,
            Refusal::Limit => &self.limit,
            Refusal::Invalid | Refusal::Shutdown => &self.invalid,
        }
    }

    /// Counts and logs a refused peer.
    pub fn refuse(&self, peer: SocketAddr, reason: Refusal, why: &str) {
        let n = self.counter(reason).fetch_add(1, Ordering::Relaxed) + 1;
        self.metrics.refused.get_or_create(&metrics::label("reason", format!("{reason:?}").to_lowercase())).inc();
        tracing::warn!(%peer, ?reason, refused_so_far = n, "refused connection: {why}");
    }

    /// How many peers were refused for `reason`.
    pub fn refused(&self, reason: Refusal) -> u64 {
        self.counter(reason).load(Ordering::Relaxed)
    }
}

/// The resources one peer or test may take from a server; a set-up beyond them is refused
/// with the limit named. The defaults keep a small host (2 cores) serving while tests and
/// strangers come and go.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Tests set up and waiting for their streams at once.
    pub pending: usize,
    /// Of those, from one peer address.
    pub pending_per_peer: usize,
    /// Descriptors kept free for what is not a test's stream (control connections, accepts).
    pub fd_headroom: u64,
    /// A client that does not read its control connection for this long is dropped (its test
    /// stopped): its reports would pile up in memory otherwise.
    pub control_write_timeout: Duration,
    /// Server flows that may busy-poll (rr `wait = spin`) at once, over all tests: each takes
    /// a CPU.
    pub spinning: usize,
}

impl Default for Limits {
    fn default() -> Self {
        let cpus = netblast_engine::sys::allowed_cpus().map(|c| c.len()).unwrap_or(1);
        Limits {
            pending: 256,
            pending_per_peer: 16,
            fd_headroom: 256,
            control_write_timeout: Duration::from_secs(10),
            spinning: cpus.saturating_sub(1).max(1),
        }
    }
}

/// Connections open in this process, on every port `serve` listens on.
static OPEN_CONNECTIONS: AtomicUsize = AtomicUsize::new(0);

/// One open connection; when the last one closes the process gives back the memory its
/// allocator holds free (a flood of connections would otherwise stay in the RSS).
#[derive(Debug)]
pub(crate) struct OpenConnection(());

impl OpenConnection {
    pub(crate) fn new() -> Self {
        OPEN_CONNECTIONS.fetch_add(1, Ordering::Relaxed);
        OpenConnection(())
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        if OPEN_CONNECTIONS.fetch_sub(1, Ordering::AcqRel) == 1 {
            netblast_engine::sys::release_free_memory();
        }
    }
}

/// Resources held by the tests a server runs now.
#[derive(Debug, Default)]
pub struct Held {
    /// Descriptors promised to tests set up but not started (their streams are still coming).
    pub fds: AtomicU64,
    /// Server flows busy-polling now.
    pub spinning: AtomicU64,
}

/// Settings of a server.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Source of TCP statistics for the server's sockets.
    pub probe: Probe,
    /// What a peer or test may take.
    pub limits: Limits,
    /// Who may connect.
    pub access: Access,
    /// Refusal counters (shared with whoever started the server).
    pub stats: Arc<ServeStats>,
    /// How it takes fleet orders (its data port is filled in by [`serve`]).
    pub agent: fleet::AgentConfig,
    /// A coordinator to dial and take orders from (`--register HOST:PORT`).
    pub register: Option<String>,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            probe: Probe::tcp_info(),
            limits: Limits::default(),
            access: Access::default(),
            stats: Arc::default(),
            agent: fleet::AgentConfig::default(),
            register: None,
        }
    }
}

/// How long running tests get to wind down after shutdown is requested.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Serves the data port on `listener` until `shutdown` completes; then stops accepting,
/// aborts running tests and waits up to [`SHUTDOWN_GRACE`] for them to report.
pub async fn serve(listener: TcpListener, cfg: ServeConfig, shutdown: impl Future<Output = ()>) -> std::io::Result<()> {
    // The kernel callbacks must be on before streams are accepted.
    if let Err(e) = cfg.probe.watch_port(listener.local_addr()?.port()) {
        tracing::warn!("eBPF probe: {e}; server-side TCP statistics will be missing");
    }
    let mut agent = cfg.agent;
    let local = listener.local_addr()?;
    agent.data_port = local.port();
    agent.data_ip = Some(local.ip()).filter(|ip| !ip.is_unspecified());
    // As many descriptors as this process may have: each stream is one (two for UDP).
    let (_, hard) = netblast_engine::sys::nofile_limit();
    if let Err(e) = netblast_engine::sys::ensure_fds(hard) {
        tracing::warn!("{e}");
    }
    let shared = Arc::new(data::Shared {
        reg: Arc::new(Registry::new(cfg.limits.pending, cfg.limits.pending_per_peer)),
        limits: cfg.limits,
        held: Held::default(),
        probe: cfg.probe,
        access: cfg.access,
        stats: cfg.stats,
        agent,
    });
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    if let Some(coord) = cfg.register {
        tasks.spawn(fleet::register(coord, shared.clone(), stop_rx.clone()));
    }
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((conn, peer)) => {
                    let shared = shared.clone();
                    let stop = stop_rx.clone();
                    tasks.spawn(async move {
                        let _open = OpenConnection::new();
                        data::handle(conn, peer, shared, stop).await
                    });
                }
                Err(e) => {
                    // Out of descriptors and similar: log, back off briefly, keep serving.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
    let _ = stop_tx.send(true);
    let drain = async { while tasks.join_next().await.is_some() {} };
    if tokio::time::timeout(SHUTDOWN_GRACE, drain).await.is_err() {
        tasks.abort_all();
    }
    Ok(())
}

/// A server (data port or HTTP responder) running on its own thread and tokio runtime, stopped
/// and joined when dropped: what tests, benches and embedding tools start.
pub struct Background {
    addr: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Background {
    /// Serves the data port on an already-bound listener.
    pub fn data_port(listener: std::net::TcpListener, cfg: ServeConfig) -> std::io::Result<Background> {
        Background::spawn(listener, 2, move |l, stop| async move {
            if let Err(e) = serve(l, cfg, stop).await {
                tracing::warn!("background server failed: {e}");
            }
        })
    }

    /// Serves HTTP (HTTPS with `tls`) on an already-bound listener with `threads` runtime threads.
    pub fn http(
        listener: std::net::TcpListener,
        tls: Option<Arc<rustls::ServerConfig>>,
        cfg: http::ResponderConfig,
        threads: usize,
    ) -> std::io::Result<Background> {
        Background::spawn(listener, threads, move |l, stop| async move {
            if let Err(e) = http::serve(l, tls, cfg, stop).await {
                tracing::warn!("background HTTP server failed: {e}");
            }
        })
    }

    fn spawn<F, Fut>(listener: std::net::TcpListener, threads: usize, run: F) -> std::io::Result<Background>
    where
        F: FnOnce(TcpListener, std::pin::Pin<Box<dyn Future<Output = ()> + Send>>) -> Fut + Send + 'static,
        Fut: Future<Output = ()>,
    {
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(threads.max(1)).enable_all().build()?;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new().name("netblast-bg".into()).spawn(move || {
            rt.block_on(async move {
                match TcpListener::from_std(listener) {
                    Ok(l) => {
                        run(
                            l,
                            Box::pin(async move {
                                let _ = rx.await;
                            }),
                        )
                        .await
                    }
                    Err(e) => tracing::warn!("background server: {e}"),
                }
            });
        })?;
        Ok(Background { addr, stop: Some(tx), thread: Some(thread) })
    }

    /// Where it listens.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
