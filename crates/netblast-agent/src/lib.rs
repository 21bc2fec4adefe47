//! netblast-agent: `netblast serve`, the peer every test runs against.
//!
//! One data port hosts any number of tests from any number of clients at once; each test is
//! identified by the id in its connection headers. The accept loop and control connections run
//! on tokio; stream traffic runs on the engine's pinned worker threads, never on the runtime.
//!
//! # Layout
//! - [`serve`]: the accept loop, taking an already-bound listener and a shutdown future.
//! - [`data`]: one connection: handshake, control of a test, running its streams.
//! - [`registry`]: tests waiting for their streams.
//! - [`http`]: the built-in HTTP/HTTPS responder (`--http`, `--https`).

pub mod data;
pub mod http;
pub mod registry;

use netblast_probe::Probe;
use registry::Registry;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// Settings of a server.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Source of TCP statistics for the server's sockets.
    pub probe: Probe,
    /// Most tests that may be set up and waiting for their streams at once.
    pub max_pending_tests: usize,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig { probe: Probe::tcp_info(), max_pending_tests: 1024 }
    }
}

/// How long running tests get to wind down after shutdown is requested.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Serves the data port on `listener` until `shutdown` completes; then stops accepting,
/// aborts running tests and waits up to [`SHUTDOWN_GRACE`] for them to report.
pub async fn serve(listener: TcpListener, cfg: ServeConfig, shutdown: impl Future<Output = ()>) -> std::io::Result<()> {
    let reg = Arc::new(Registry::new(cfg.max_pending_tests));
    // The kernel callbacks must be on before streams are accepted.
    if let Err(e) = cfg.probe.watch_port(listener.local_addr()?.port()) {
        tracing::warn!("eBPF probe: {e}; server-side TCP statistics will be missing");
    }
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((conn, peer)) => {
                    let reg = reg.clone();
                    let probe = cfg.probe.clone();
                    let stop = stop_rx.clone();
                    tasks.spawn(async move { data::handle(conn, peer, reg, probe, stop).await });
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
