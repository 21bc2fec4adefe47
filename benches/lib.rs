//! Shared pieces of the self-validation benches: an in-process server on loopback and a
//! runner for profiles against it.

use netblast_engine::client;
use netblast_engine::worker::RunFlags;
use netblast_probe::Probe;
use netblast_spec::{Profile, RunResult};
use std::net::SocketAddr;

/// An in-process `netblast serve` on 127.0.0.1 with an ephemeral port; stopped on drop.
pub struct LocalServer {
    /// Where it listens.
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LocalServer {
    /// Starts the server.
    pub fn start() -> std::io::Result<LocalServer> {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("bench runtime");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(std_listener).expect("listener");
                let _ = netblast_agent::serve(listener, netblast_agent::ServeConfig::default(), async {
                    let _ = rx.await;
                })
                .await;
            });
        });
        Ok(LocalServer { addr, stop: Some(tx), thread: Some(thread) })
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
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
    let (plan, peer) = client::plan(p, "bench".into(), &addr.to_string(), false).map_err(|e| e.to_string())?;
    let flags = RunFlags::new();
    client::run(&plan, peer, probe, &flags, &mut |_| {}).map_err(|e| e.to_string())
}

/// Prints one figure as one line: name, value, unit, and what it means.
pub fn figure(name: &str, value: f64, unit: &str, note: &str) {
    println!("{name:<36} {value:>12.3} {unit:<10} {note}");
}
