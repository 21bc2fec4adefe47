//! netblast-agent: `netblast serve`, the peer every test runs against.
//!
//! One data port hosts any number of tests from any number of clients at once; each test is
//! identified by the id in its connection headers. The accept loop and control connections run
//! on tokio; stream traffic runs on the engine's pinned worker threads, never on the runtime.
//!
//! # Layout
//! - [`server`]: `netblast serve` assembled: data port, responders, metrics, one shutdown.
//! - [`serve`]: the accept loop, taking an already-bound listener and a shutdown future.
//! - [`config`]: who may use a server, what a peer or test may take, its fleet settings.
//! - [`router`]: one accepted connection, routed by its header's role.
//! - [`shared`]: what every connection of one server shares.
//! - [`unproven`]: connections that have not proven themselves yet, and how a full set of
//!   them makes room.
//! - [`Background`]: a server on its own thread and runtime, for tests and benches.
//! - [`data`]: one connection: handshake, control of a test, running its streams.
//! - [`fleet`]: `serve` as a fleet agent: authenticated orders to originate tests, the
//!   allowlist, registering with a coordinator.
//! - [`registry`]: tests waiting for their streams.
//! - [`http`]: the built-in HTTP/HTTPS responder (`--http`, `--https`).

#![warn(missing_docs)]

pub mod config;
pub mod data;
pub mod fleet;
pub mod http;
pub mod metrics;
pub mod registry;
pub mod router;
pub mod server;
pub mod shared;
pub mod unproven;

pub use config::AgentConfig;
pub use config::{Access, Held, Limits, SHUTDOWN_GRACE, ServeConfig, ServeStats, is_loopback};

use registry::Registry;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// Serves the data port on `listener` until `shutdown` completes; then stops accepting,
/// aborts running tests and waits up to [`SHUTDOWN_GRACE`] for them to report.
pub async fn serve(listener: TcpListener, cfg: ServeConfig, shutdown: impl Future<Output = ()>) -> std::io::Result<()> {
    // The kernel callbacks must be on before streams are accepted.
    if let Err(e) = cfg.probe.watch_local_port(listener.local_addr()?.port()) {
        tracing::warn!("eBPF probe: {e}; server-side TCP statistics will be missing");
    }
    let mut agent = cfg.agent;
    let local = listener.local_addr()?;
    agent.data_port = local.port();
    agent.data_ip = Some(local.ip()).filter(|ip| !ip.is_unspecified());
    // As many descriptors as this process may have: each stream is one (two for UDP).
    let (_, hard) = netblast_engine::os::sys::nofile_limit();
    if let Err(e) = netblast_engine::os::sys::ensure_fds(hard) {
        tracing::warn!("{e}");
    }
    // Strangers that have not proven themselves hold a quarter of the descriptors at most.
    let mut limits = cfg.limits;
    limits.unproven = limits.unproven.min((hard / 4).max(1) as usize);
    let shared = Arc::new(shared::Shared {
        reg: Arc::new(Registry::new(limits.pending, limits.pending_per_peer)),
        limits,
        held: Held::default(),
        probe: cfg.probe,
        access: cfg.access,
        stats: cfg.stats,
        agent,
        bind_dev: cfg.bind_dev,
        flow_ports: cfg.flow_ports,
        orders: Default::default(),
        unproven: Default::default(),
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
            // Connections closed to make room close on their own tasks: while too many still
            // hold their descriptors, new ones wait in the kernel's listen queue.
            _ = shared.unproven.one_closed(), if !shared.unproven.room_to_accept() => {}
            accepted = listener.accept(), if shared.unproven.room_to_accept() => match accepted {
                Ok((conn, peer)) => {
                    // Always admitted: at a cap, an older unproven connection makes room
                    // (its own task says so when it closes).
                    let (slot, _) = unproven::Unproven::admit(&shared.unproven, peer.ip(), &shared.limits);
                    let shared = shared.clone();
                    let stop = stop_rx.clone();
                    tasks.spawn(async move {
                        let _open = shared::OpenConnection::new();
                        router::handle(conn, peer, shared, stop, slot).await
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
