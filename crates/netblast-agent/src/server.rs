//! `netblast serve` assembled: the data port on its small control runtime, the HTTP/HTTPS
//! responders on a runtime and thread of their own, the metrics endpoint, the probe, and one
//! shutdown for all of them (mini-redis's `server::run` shape: bind first, then run until the
//! shutdown future completes).
//!
//! [`Server::start`] binds every listener and opens the probe, so a port in use or a bad
//! certificate is an error before anything runs; [`Server::run`] serves until shutdown.

use crate::config::{Access, AgentConfig, Limits, ServeConfig, ServeStats};
use crate::http::ResponderConfig;
use netblast_probe::{Probe, ProbeMode};
use netblast_spec::units::Cidr;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// Everything a server is started with (the binary's `serve` flags, resolved).
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// The address every listener binds (`::` takes IPv4 too).
    pub bind: IpAddr,
    /// The data port (0: any free port).
    pub port: u16,
    /// Only this interface (`SO_BINDTODEVICE`) for the data port's and responders' sockets.
    pub bind_dev: Option<String>,
    /// The ports a flow's own sockets take (a cps flow's listener, a UDP flow's socket);
    /// `None`: any the kernel picks.
    pub flow_ports: netblast_engine::os::sockopt::FlowPorts,
    /// Where to serve Prometheus metrics (any interface: monitoring is not test traffic).
    pub metrics: Option<SocketAddr>,
    /// Who may use it.
    pub access: Access,
    /// Networks fleet orders may send to (empty: this host's interfaces' and loopback).
    pub allow: Vec<Cidr>,
    /// The group it registers in.
    pub group: String,
    /// A coordinator to register with (`HOST:PORT`).
    pub register: Option<String>,
    /// Source of the server's kernel TCP statistics.
    pub probe: ProbeMode,
    /// What a peer or test may take.
    pub limits: Limits,
    /// The HTTP responder's port, if any.
    pub http: Option<u16>,
    /// The HTTPS responder's port, if any.
    pub https: Option<u16>,
    /// The HTTPS certificate and key files (PEM); `None`: a self-signed certificate.
    pub tls_files: Option<(String, String)>,
    /// The responders' settings (their metrics are filled in by [`Server::start`]).
    pub responder: ResponderConfig,
    /// The DSCP mark of what the data port's and the responders' listeners send before a test
    /// says its own (SYN-ACKs), and of everything the responders send (`serve --dscp`).
    pub dscp: Option<netblast_spec::mark::Dscp>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            bind: IpAddr::from([0u16; 8]),
            port: netblast_spec::plan::DEFAULT_PORT,
            bind_dev: None,
            flow_ports: None,
            metrics: None,
            access: Access::default(),
            allow: Vec::new(),
            group: "default".into(),
            register: None,
            probe: ProbeMode::Auto,
            limits: Limits::default(),
            http: None,
            https: None,
            tls_files: None,
            responder: ResponderConfig::default(),
            dscp: None,
        }
    }
}

/// Why a server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// A setting does not work here (a certificate that does not load, an interface that
    /// does not exist): bad input.
    #[error("{0}")]
    Input(String),
    /// A port in use, a probe that cannot load, a runtime that cannot start.
    #[error("{0}")]
    Run(String),
}

/// The HTTP/HTTPS responders: their runtime's thread, joined after shutdown.
struct Responders {
    rt: tokio::runtime::Runtime,
    listeners: Vec<(tokio::net::TcpListener, Option<Arc<rustls::ServerConfig>>)>,
    cfg: ResponderConfig,
}

/// A server with every listener bound, ready to [`run`](Server::run).
pub struct Server {
    rt: tokio::runtime::Runtime,
    data: tokio::net::TcpListener,
    metrics: Option<tokio::net::TcpListener>,
    responders: Option<Responders>,
    cfg: ServeConfig,
}

impl Server {
    /// Binds the data port, the responders and the metrics endpoint, opens the probe, and says
    /// each thing it set up through `say` (the start-up banner).
    pub fn start(opts: ServerOptions, say: &mut dyn FnMut(String)) -> Result<Server, ServerError> {
        let run = |what: &str, e: std::io::Error| ServerError::Run(format!("{what}: {e}"));
        if let Some(dev) = &opts.bind_dev {
            let only = netblast_engine::os::sockopt::Binding::device(Some(dev.clone()));
            netblast_engine::os::sockopt::check_binding(&only).map_err(|e| ServerError::Input(e.to_string()))?;
            say(format!("only on interface {dev}"));
        }
        let device = opts.bind_dev.as_deref();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("netblast-ctl")
            .enable_all()
            .build()
            .map_err(|e| run("cannot start the control runtime", e))?;
        let stats = Arc::new(ServeStats::default());
        stats.print_tests.store(true, Ordering::Relaxed);
        let responders = Responders::bind(&opts, device, stats.metrics.clone(), say)?;
        let (http_port, https_port) = responders.as_ref().map_or((None, None), |r| r.ports());
        let addr = SocketAddr::new(opts.bind, opts.port);
        let _guard = rt.enter();
        let data = listener(addr, device).map_err(|e| run(&format!("cannot listen on {addr}"), e))?;
        mark(&data, opts.dscp, say).map_err(|e| ServerError::Input(e.to_string()))?;
        say(format!("listening on {} (data port; Ctrl-C to stop)", data.local_addr().unwrap_or(addr)));
        let metrics = match opts.metrics {
            Some(at) => {
                let l = listener(at, None).map_err(|e| run(&format!("--metrics: cannot listen on {at}"), e))?;
                say(format!("metrics on http://{}/metrics", l.local_addr().unwrap_or(at)));
                Some(l)
            }
            None => None,
        };
        let probe = Probe::open(opts.probe).map_err(|e| ServerError::Run(format!("--probe ebpf: {e}")))?;
        // Attached only while a test runs: an idle server runs no program for the host's
        // other connections.
        probe.attach_on_demand();
        let info = probe.info();
        say(format!(
            "TCP statistics from {}{}",
            info.tcp_source,
            info.fallback_reason.map(|r| format!(" ({r})")).unwrap_or_default()
        ));
        say(format!("accepting {}", opts.access.describe()));
        let agent =
            AgentConfig { allow: opts.allow, group: opts.group.clone(), http_port, https_port, ..Default::default() };
        let networks: Vec<String> = agent.allowlist().iter().map(|c| c.to_string()).collect();
        if opts.access.token.is_some() {
            say(format!("fleet orders from a coordinator with the token, toward {}", networks.join(", ")));
        }
        if let Some(c) = &opts.register {
            say(format!("registering with the coordinator at {c} (group {})", opts.group));
        }
        let cfg = ServeConfig {
            probe,
            access: opts.access,
            agent,
            limits: opts.limits,
            register: opts.register,
            stats,
            bind_dev: opts.bind_dev,
            flow_ports: opts.flow_ports,
        };
        Ok(Server { rt, data, metrics, responders, cfg })
    }

    /// The data port's address.
    pub fn data_addr(&self) -> std::io::Result<SocketAddr> {
        self.data.local_addr()
    }

    /// Serves until `shutdown` completes, then stops every part and waits for them.
    pub fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), ServerError> {
        let Server { rt, data, metrics, responders, cfg } = self;
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        let http_thread = match responders {
            Some(r) => Some(r.spawn(stop_rx.clone())?),
            None => None,
        };
        let outcome = rt.block_on(async move {
            if let Some(l) = metrics {
                let registry = cfg.stats.metrics.registry();
                let render = Arc::new(move || crate::metrics::encode(&registry));
                tokio::spawn(crate::metrics::serve_http(l, render, stopped(stop_rx.clone())));
            }
            let shutdown = async move {
                shutdown.await;
                let _ = stop_tx.send(true);
            };
            crate::serve(data, cfg, shutdown).await
        });
        if let Some(t) = http_thread {
            let _ = t.join();
        }
        outcome.map_err(|e| ServerError::Run(format!("server failed: {e}")))
    }
}

impl Responders {
    /// Binds the responders the options ask for (none: `None`).
    fn bind(
        opts: &ServerOptions,
        device: Option<&str>,
        metrics: crate::metrics::ServeMetrics,
        say: &mut dyn FnMut(String),
    ) -> Result<Option<Responders>, ServerError> {
        if opts.http.is_none() && opts.https.is_none() {
            return Ok(None);
        }
        let threads = netblast_engine::os::sys::allowed_cpus().map(|c| c.len()).unwrap_or(2).max(1);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("netblast-http")
            .enable_all()
            .build()
            .map_err(|e| ServerError::Run(format!("cannot start the HTTP runtime: {e}")))?;
        let mut cfg = opts.responder.clone();
        // Counted per response only when someone scrapes them.
        cfg.metrics = opts.metrics.is_some().then_some(metrics);
        // The peers the data port takes: loopback without a token, the allowed networks with
        // one, anyone with --open.
        cfg.peers = match (&opts.access.token, opts.access.open) {
            (_, true) => crate::http::Peers::Any,
            (Some(_), false) => crate::http::Peers::Networks(
                AgentConfig { allow: opts.allow.clone(), ..Default::default() }.allowlist(),
            ),
            (None, false) => crate::http::Peers::Loopback,
        };
        say(format!(
            "HTTP responses for {}; bodies up to {}",
            cfg.peers.describe(),
            netblast_spec::units::fmt_bytes(cfg.max_body)
        ));
        let mut listeners = Vec::new();
        let _guard = rt.enter();
        for (port, secure) in [(opts.http, false), (opts.https, true)] {
            let Some(port) = port else { continue };
            let addr = SocketAddr::new(opts.bind, port);
            let s = if secure { "S" } else { "" };
            let l = listener(addr, device)
                .map_err(|e| ServerError::Run(format!("cannot listen on {addr} for HTTP{s}: {e}")))?;
            netblast_engine::os::sockopt::mark(socket2::SockRef::from(&l), opts.dscp)
                .map_err(|e| ServerError::Input(e.to_string()))?;
            let bound = l.local_addr().unwrap_or(addr);
            let tls = if secure {
                let names = tls_names(opts.bind);
                let files = opts.tls_files.as_ref().map(|(c, k)| (c.as_str(), k.as_str()));
                let tls = crate::http::tls_config(files, names.clone()).map_err(ServerError::Input)?;
                let what = match files {
                    Some((c, _)) => format!("certificate {c}"),
                    None => format!("self-signed certificate for {}", names.join(", ")),
                };
                say(format!("HTTPS (HTTP/1.1, h2) on {bound}, {what}"));
                Some(tls)
            } else {
                say(format!("HTTP (HTTP/1.1, h2c) on {bound}"));
                None
            };
            listeners.push((l, tls));
        }
        drop(_guard);
        Ok(Some(Responders { rt, listeners, cfg }))
    }

    /// The ports bound: (HTTP, HTTPS).
    fn ports(&self) -> (Option<u16>, Option<u16>) {
        let port = |secure: bool| {
            self.listeners
                .iter()
                .find(|(_, t)| t.is_some() == secure)
                .and_then(|(l, _)| l.local_addr().ok())
                .map(|a| a.port())
        };
        (port(false), port(true))
    }

    /// Serves on a thread of its own until `stop` turns true.
    fn spawn(self, stop: tokio::sync::watch::Receiver<bool>) -> Result<std::thread::JoinHandle<()>, ServerError> {
        let Responders { rt, listeners, cfg } = self;
        std::thread::Builder::new()
            .name("netblast-http".into())
            .spawn(move || {
                rt.block_on(async move {
                    let mut tasks = Vec::new();
                    for (l, tls) in listeners {
                        let mut stop = stop.clone();
                        tasks.push(tokio::spawn(crate::http::serve(l, tls, cfg.clone(), async move {
                            let _ = stop.wait_for(|s| *s).await;
                        })));
                    }
                    for t in tasks {
                        let _ = t.await;
                    }
                });
            })
            .map_err(|e| ServerError::Run(format!("cannot start the HTTP thread: {e}")))
    }
}

/// The names a self-signed certificate is made for: loopback's, the bound address, the host.
fn tls_names(bind: IpAddr) -> Vec<String> {
    let mut names = vec!["localhost".to_string(), "127.0.0.1".to_string(), "::1".to_string()];
    let host = netblast_engine::os::sys::host_info().hostname;
    let bound = (!bind.is_unspecified()).then(|| bind.to_string());
    for name in bound.into_iter().chain((!host.is_empty()).then_some(host)) {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// Marks a listener with `dscp`, saying so: its SYN-ACKs and the connections it accepts carry
/// the mark until a test sets its own.
fn mark(
    l: &tokio::net::TcpListener,
    dscp: Option<netblast_spec::mark::Dscp>,
    say: &mut dyn FnMut(String),
) -> std::io::Result<()> {
    if let Some(d) = dscp {
        netblast_engine::os::sockopt::mark(socket2::SockRef::from(l), Some(d))?;
        say(format!("what it sends marked DSCP {d} (a test's --dscp marks its own flows)"));
    }
    Ok(())
}

/// A listener on `addr` (`::` takes IPv4 too), on interface `device` if given; must be called
/// inside a tokio runtime.
pub fn listener(addr: SocketAddr, device: Option<&str>) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::from_std(netblast_engine::os::sockopt::listener(addr, device)?)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_certificate_names_each_name_once() {
        let names = super::tls_names("127.0.0.1".parse().unwrap());
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        assert!(super::tls_names("10.1.2.3".parse().unwrap()).contains(&"10.1.2.3".to_string()));
    }
}
