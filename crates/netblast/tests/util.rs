//! Helpers: servers on port 0, runs in-process, and the real binary.

use netblast_engine::client;
use netblast_engine::worker::RunFlags;
use netblast_probe::Probe;
use netblast_spec::{Profile, RunResult};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

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
        let listener = std::net::TcpListener::bind(bind.parse::<SocketAddr>().unwrap()).ok()?;
        let cfg = netblast_agent::ServeConfig { probe, ..Default::default() };
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
    let (plan, peer) = client::plan(p, "test profile".into(), &addr.to_string(), false).unwrap();
    let flags = RunFlags::new();
    client::run(&plan, peer, &Probe::tcp_info(), &flags, &mut |_| {}).unwrap()
}

/// The netblast binary.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_netblast"))
}

/// `netblast run` with `TCP_INFO` statistics: tests that are not about the eBPF probe leave the
/// kernel alone, so the probe tests count only their own programs.
pub fn run_cmd() -> Command {
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
    let mut child = bin()
        .args(["serve", "--bind", "127.0.0.1", "--port", "0"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    // Keep reading the server's stderr for its whole life: a closed pipe would make its later
    // messages fail.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in std::io::BufRead::lines(std::io::BufReader::new(stderr)).map_while(Result::ok) {
            if !sent {
                // "netblast serve: listening on 127.0.0.1:PORT (data port; ...)"
                if let Some(a) = line.split_whitespace().find_map(|w| w.parse::<SocketAddr>().ok()) {
                    let _ = tx.send(a);
                    sent = true;
                }
            }
        }
    });
    let addr = rx.recv_timeout(Duration::from_secs(10)).expect("netblast serve printed its address");
    (child, addr)
}

/// Waits for a child with a deadline, killing it if it overruns.
pub fn wait_output(mut child: Child, limit: Duration) -> std::process::Output {
    let t = std::time::Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            panic!("child ran past {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
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
