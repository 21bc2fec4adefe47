//! The subcommands: load and resolve, call the engine or the agent, render, pick the exit code.

use crate::cli::{Cli, Command, ReportArgs, RunArgs, ServeArgs, Wait, ZeroCopy};
use anyhow::Context;
use netblast_engine::client::{self, ClientError, Live};
use netblast_engine::worker::RunFlags;
use netblast_probe::{Probe, ProbeMode};
use netblast_report::{json, text};
use netblast_spec::profile::{BulkSection, Direction, HttpVersion, Kind, Protocol, SendMode, WaitMode};
use netblast_spec::Profile;
use std::io::Write;
use std::sync::Arc;

/// How a successful command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Everything ran to completion.
    Complete,
    /// The run finished but is partial (errors, interrupted); the result says why.
    Incomplete,
}

/// A failure, with the exit code it maps to.
#[derive(Debug)]
pub struct AppError {
    /// 1: the run could not be done; 2: bad input (flags, profile).
    pub code: u8,
    /// The error chain, printed with `{:#}`.
    pub error: anyhow::Error,
}

impl AppError {
    fn input(error: impl Into<anyhow::Error>) -> AppError {
        AppError { code: 2, error: error.into() }
    }

    fn run(error: impl Into<anyhow::Error>) -> AppError {
        AppError { code: 1, error: error.into() }
    }
}

/// Runs a parsed command line.
pub fn dispatch(cli: Cli) -> Result<Outcome, AppError> {
    match cli.command {
        Command::Serve(a) => serve(a),
        Command::Run(a) => run(&a),
        Command::Profiles => {
            let mut out = String::new();
            let list = Profile::builtins();
            let width = list.iter().map(|p| p.name.len()).max().unwrap_or(0);
            for p in list {
                out.push_str(&format!("{:width$}  {}\n", p.name, p.description));
            }
            print_stdout(&out);
            Ok(Outcome::Complete)
        }
        Command::Report(a) => report(&a),
        Command::Doctor => {
            print_stdout(&doctor());
            Ok(Outcome::Complete)
        }
    }
}

/// Writes to stdout; a closed pipe (`| head`) is not an error.
fn print_stdout(s: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(s.as_bytes()).and_then(|_| out.flush());
}

/// Applies the `run` flags to a loaded profile. Errors name the flag.
pub fn apply_overrides(p: &mut Profile, a: &RunArgs) -> Result<(), String> {
    if let Some(d) = a.duration {
        p.run.duration = Some(d);
    }
    if let Some(i) = a.interval {
        p.run.interval = Some(i);
    }
    if let Some(c) = &a.cpus {
        p.run.cpus = Some(c.clone());
    }
    let tcp = &mut p.tcp;
    if a.window.is_some() {
        tcp.window = a.window;
    }
    if a.sndbuf.is_some() {
        tcp.sndbuf = a.sndbuf;
    }
    if a.rcvbuf.is_some() {
        tcp.rcvbuf = a.rcvbuf;
    }
    if a.mss.is_some() {
        tcp.mss = a.mss;
    }
    if a.congestion.is_some() {
        tcp.congestion = a.congestion.clone();
    }
    if a.nodelay {
        tcp.nodelay = Some(true);
    }
    let kind = p.run.kind;
    // Which kinds each kind-specific flag applies to.
    let http_flags = [
        ("--url", !a.urls.is_empty()),
        ("--method", a.method.is_some()),
        ("--header", !a.headers.is_empty()),
        ("--body", a.body.is_some()),
        ("--body-file", a.body_file.is_some()),
        ("--http1", a.http1),
        ("--http2", a.http2),
        ("--tls", a.tls),
        ("--insecure", a.insecure),
        ("--cacert", a.cacert.is_some()),
        ("--sni", a.sni.is_some()),
        ("--connections", a.connections.is_some()),
        ("--streams", a.streams.is_some()),
        ("--no-keepalive", a.no_keepalive),
        ("--requests", a.requests.is_some()),
        ("--rate", a.rate.is_some()),
        ("--ramp", a.ramp.is_some()),
        ("--timeout", a.timeout.is_some()),
    ];
    if kind != Kind::Http {
        if let Some((flag, _)) = http_flags.iter().find(|(_, set)| *set) {
            return Err(format!("{flag} applies to http tests; this profile's kind is {}", kind.name()));
        }
    }
    let flags: [(&str, bool, &[Kind]); 13] = [
        ("--bytes", a.bytes.is_some(), &[Kind::Bulk]),
        ("--reverse", a.reverse, &[Kind::Bulk]),
        ("--bidir", a.bidir, &[Kind::Bulk]),
        ("--block", a.block.is_some(), &[Kind::Bulk]),
        ("--zerocopy", a.zerocopy.is_some(), &[Kind::Bulk]),
        ("--msg-size", a.msg_size.is_some(), &[Kind::Msgrate]),
        ("--batch", a.batch.is_some(), &[Kind::Msgrate]),
        ("--req-size", a.req_size.is_some(), &[Kind::Rr]),
        ("--resp-size", a.resp_size.is_some(), &[Kind::Rr]),
        ("--wait", a.wait.is_some(), &[Kind::Rr]),
        ("--busy-poll", a.busy_poll.is_some(), &[Kind::Rr]),
        ("--udp", a.udp, &[Kind::Msgrate, Kind::Rr]),
        ("--server-cpus", a.server_cpus.is_some(), &[Kind::Msgrate, Kind::Rr]),
    ];
    if let Some((flag, _, kinds)) = flags.iter().find(|(_, set, kinds)| *set && !kinds.contains(&kind)) {
        let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
        return Err(format!("{flag} applies to {} tests; this profile's kind is {}", names.join(" and "), kind.name()));
    }
    match kind {
        Kind::Bulk => {
            let mut b: BulkSection = p.bulk();
            if let Some(n) = a.flows {
                b.flows = n;
            }
            if let Some(n) = a.bytes {
                b.bytes = Some(n);
                if a.duration.is_none() {
                    // As iperf3 -n: the byte count is the bound; the time cap still applies.
                    p.run.duration = None;
                }
            }
            if a.reverse {
                b.direction = Direction::Reverse;
            }
            if a.bidir {
                b.direction = Direction::Bidir;
            }
            if let Some(n) = a.block {
                b.block_bytes = n;
            }
            match a.zerocopy {
                Some(ZeroCopy::Sendfile) => b.send_mode = SendMode::Sendfile,
                Some(ZeroCopy::Msg) => b.send_mode = SendMode::MsgZerocopy,
                None => {}
            }
            p.bulk = Some(b);
        }
        Kind::Msgrate => {
            let mut m = p.msgrate();
            if a.flows.is_some() {
                m.flows = a.flows;
            }
            if let Some(n) = a.msg_size {
                m.msg_bytes = n;
            }
            if let Some(n) = a.batch {
                m.batch = n;
            }
            if a.udp {
                m.protocol = Protocol::Udp;
            }
            if a.server_cpus.is_some() {
                m.server_cpus = a.server_cpus.clone();
            }
            p.msgrate = Some(m);
        }
        Kind::Rr => {
            let mut r = p.rr();
            if let Some(n) = a.flows {
                r.flows = n;
            }
            if let Some(n) = a.req_size {
                r.req_bytes = n;
            }
            if let Some(n) = a.resp_size {
                r.resp_bytes = n;
            }
            if a.udp {
                r.protocol = Protocol::Udp;
            }
            match a.wait {
                Some(Wait::Block) => r.wait = WaitMode::Block,
                Some(Wait::Spin) => r.wait = WaitMode::Spin,
                None => {}
            }
            if a.busy_poll.is_some() {
                r.busy_poll_us = a.busy_poll;
            }
            if a.server_cpus.is_some() {
                r.server_cpus = a.server_cpus.clone();
            }
            p.rr = Some(r);
        }
        Kind::Http => {
            let mut h = p.http();
            if !a.urls.is_empty() {
                h.urls = a.urls.clone();
                h.weights = None;
            }
            if let Some(m) = &a.method {
                h.method = m.to_ascii_uppercase();
            }
            h.headers.extend(a.headers.iter().cloned());
            if a.body.is_some() {
                h.body = a.body.clone();
                h.body_file = None;
            }
            if a.body_file.is_some() {
                h.body_file = a.body_file.clone();
                h.body = None;
            }
            if a.http1 {
                h.version = HttpVersion::Http1;
            }
            if a.http2 {
                h.version = HttpVersion::Http2;
            }
            h.tls |= a.tls;
            h.insecure |= a.insecure;
            if a.cacert.is_some() {
                h.cacert = a.cacert.clone();
            }
            if a.sni.is_some() {
                h.sni = a.sni.clone();
            }
            if let Some(c) = a.connections {
                h.connections = c;
            }
            if let Some(m) = a.streams {
                h.streams = m;
            }
            if a.no_keepalive {
                h.keepalive = false;
            }
            if let Some(n) = a.requests {
                h.requests = Some(n);
                if a.duration.is_none() {
                    // As hey -n: the request count is the bound; the time cap still applies.
                    p.run.duration = None;
                }
            }
            if let Some(r) = &a.rate {
                let (from, to) = match r.split_once("..") {
                    Some((x, y)) => (x, Some(y)),
                    None => (r.as_str(), None),
                };
                h.steps.clear();
                h.rate = Some(from.parse().map_err(|e| format!("--rate: {e}"))?);
                h.rate_to = to.map(|t| t.parse()).transpose().map_err(|e| format!("--rate: {e}"))?;
            }
            if a.ramp.is_some() {
                h.ramp = a.ramp;
            }
            if a.timeout.is_some() {
                h.timeout = a.timeout;
            }
            p.http = Some(h);
        }
    }
    Ok(())
}

/// Installs SIGINT/SIGTERM handling for a run: the first signal stops gracefully (the result is
/// kept and marked incomplete), the second aborts.
fn watch_signals(flags: Arc<RunFlags>) -> Option<signal_hook::iterator::Handle> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]).ok()?;
    let handle = signals.handle();
    std::thread::Builder::new()
        .name("netblast-sig".into())
        .spawn(move || {
            for _ in signals.forever() {
                if flags.stopping() {
                    eprintln!("netblast: aborting");
                    flags.abort();
                } else {
                    eprintln!("netblast: interrupted; stopping and keeping what was measured (again to abort)");
                    flags.interrupt();
                }
            }
        })
        .ok()?;
    Some(handle)
}

fn run(a: &RunArgs) -> Result<Outcome, AppError> {
    let (mut profile, origin) = Profile::load(&a.profile).map_err(AppError::input)?;
    apply_overrides(&mut profile, a).map_err(|e| AppError::input(anyhow::anyhow!(e)))?;
    let origin = format!("{origin} (with command-line overrides)");
    profile.validate(&origin).map_err(AppError::input)?;
    let target = match (&a.target, profile.run.kind) {
        (Some(t), _) => t.clone(),
        (None, Kind::Http) => String::new(),
        (None, _) => {
            return Err(AppError::input(anyhow::anyhow!(
                "--target HOST[:PORT] is required: where does `netblast serve` run?"
            )))
        }
    };
    let (plan, peer) = client::plan(profile, origin, &target, a.cpus.is_some()).map_err(|e| match e {
        ClientError::Target { .. } | ClientError::Cpus(_) => AppError::input(e),
        _ => AppError::run(e),
    })?;
    let probe =
        Probe::open_with(a.probe, a.probe_stats).map_err(|e| AppError::run(anyhow::anyhow!("--probe ebpf: {e}")))?;
    let flags = RunFlags::new();
    let sig = watch_signals(flags.clone());

    let mut partial = match &a.output {
        Some(path) => Some(
            json::PartialLog::create(path)
                .with_context(|| format!("cannot write beside --output {}", path.display()))
                .map_err(AppError::input)?,
        ),
        None => None,
    };
    let human = !a.json;
    let mut streams = Vec::new();
    let profile = plan.profile.clone();
    let mut live = |ev: Live<'_>| match ev {
        Live::Started { plan, test_id, server, streams: s } => {
            streams = s.to_vec();
            if human {
                let mut out =
                    text::started(test_id, &text::aimed_at(plan), plan.profile.run.kind.name(), s, &server.hostname);
                for n in &plan.notes {
                    out.push_str(&format!("note: {n}\n"));
                }
                out.push_str(&text::interval_header(&plan.profile));
                print_stdout(&out);
            }
        }
        Live::Interval(iv) => {
            if let Some(p) = partial.as_mut() {
                if let Err(e) = p.append(iv) {
                    eprintln!("netblast: cannot append to the partial log: {e}");
                }
            }
            if human {
                print_stdout(&text::interval(iv, &streams, &profile));
            }
        }
    };
    let outcome = client::run(&plan, peer, &probe, &flags, &mut live);
    if let Some(h) = sig {
        h.close();
    }
    let result = outcome.map_err(|e| match e {
        // A URL, header, body file or TLS file that does not work is bad input.
        ClientError::Http(_) => AppError::input(e),
        _ => AppError::run(e),
    })?;

    if let Some(path) = &a.output {
        json::write_atomic(path, json::to_string(&result).as_bytes())
            .with_context(|| format!("cannot write the result to {}", path.display()))
            .map_err(AppError::run)?;
        if let Some(p) = partial.take() {
            let _ = p.remove();
        }
    }
    if a.json {
        print_stdout(&format!("{}\n", json::to_string(&result)));
    } else {
        print_stdout(&text::summary(&result));
    }
    Ok(if result.complete { Outcome::Complete } else { Outcome::Incomplete })
}

/// What this host supports, one line per fact (`netblast doctor`).
pub fn doctor() -> String {
    use netblast_probe::ebpf;
    let mut out = String::new();
    let mut line = |k: &str, v: String| out.push_str(&format!("{k:<22} {v}\n"));
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    line(
        "privilege",
        if euid == 0 { "root".into() } else { format!("uid {euid} (eBPF needs root: CAP_BPF, CAP_NET_ADMIN)") },
    );
    line(
        "BTF",
        if std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
            "/sys/kernel/btf/vmlinux".into()
        } else {
            "missing".into()
        },
    );
    line("cgroup v2", ebpf::cgroup2_root().map(|p| p.display().to_string()).unwrap_or_else(|| "not mounted".into()));
    line(
        "eBPF probe built in",
        if ebpf::built_in() { "yes (clang at build time)".into() } else { format!("no ({})", ebpf::BUILD) },
    );
    let probe = match Probe::open(ProbeMode::Ebpf) {
        Ok(p) => {
            format!("loads and attaches to {}", p.ebpf().map(|e| e.cgroup().display().to_string()).unwrap_or_default())
        }
        Err(e) => format!("unavailable: {e}; runs use TCP_INFO"),
    };
    line("eBPF probe", probe);
    let cpus = netblast_engine::sys::allowed_cpus().unwrap_or_default();
    line(
        "CPUs",
        format!(
            "{} online, {} usable ({})",
            netblast_engine::sys::cpus_online(),
            cpus.len(),
            netblast_spec::units::CpuList(cpus)
        ),
    );
    let (soft, hard) = netblast_engine::sys::nofile_limit();
    line("open files limit", format!("{soft} (hard {hard}): about {} bulk flows", soft.saturating_sub(64)));
    line("kernel", netblast_engine::sys::host_info().kernel);
    out
}

fn report(a: &ReportArgs) -> Result<Outcome, AppError> {
    let r = json::read(&a.file)
        .with_context(|| format!("cannot read result {}", a.file.display()))
        .map_err(AppError::input)?;
    print_stdout(&text::full(&r));
    Ok(if r.complete { Outcome::Complete } else { Outcome::Incomplete })
}

fn serve(a: ServeArgs) -> Result<Outcome, AppError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("netblast-ctl")
        .enable_all()
        .build()
        .context("cannot start the control runtime")
        .map_err(AppError::run)?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let http = start_http(&a, stop_rx.clone())?;
    let addr = std::net::SocketAddr::new(a.bind, a.port);
    let outcome = rt.block_on(async move {
        let listener = bind(addr).with_context(|| format!("cannot listen on {addr}")).map_err(AppError::run)?;
        let bound = listener.local_addr().unwrap_or(addr);
        eprintln!("netblast serve: listening on {bound} (data port; Ctrl-C to stop)");
        let probe = Probe::open(a.probe).map_err(|e| AppError::run(anyhow::anyhow!("--probe ebpf: {e}")))?;
        let info = probe.info();
        eprintln!(
            "netblast serve: TCP statistics from {}{}",
            info.tcp_source,
            info.fallback_reason.map(|r| format!(" ({r})")).unwrap_or_default()
        );
        let cfg = netblast_agent::ServeConfig { probe, ..Default::default() };
        let shutdown = async move {
            shutdown_signal().await;
            let _ = stop_tx.send(true);
        };
        netblast_agent::serve(listener, cfg, shutdown).await.context("server failed").map_err(AppError::run)?;
        Ok(Outcome::Complete)
    });
    if let Some(t) = http {
        let _ = t.join();
    }
    eprintln!("netblast serve: stopped");
    outcome
}

/// Starts the HTTP/HTTPS responders, if asked, on their own runtime and thread (the data
/// port's control runtime stays small and undisturbed). They stop when `stop` turns true.
fn start_http(
    a: &ServeArgs,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Result<Option<std::thread::JoinHandle<()>>, AppError> {
    if a.http.is_none() && a.https.is_none() {
        return Ok(None);
    }
    let threads = netblast_engine::sys::allowed_cpus().map(|c| c.len()).unwrap_or(2).max(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("netblast-http")
        .enable_all()
        .build()
        .context("cannot start the HTTP runtime")
        .map_err(AppError::run)?;
    let cfg = netblast_agent::http::ResponderConfig { default_size: a.http_size.bytes() };
    let mut listeners = Vec::new();
    for (port, secure) in [(a.http, false), (a.https, true)] {
        let Some(port) = port else { continue };
        let addr = std::net::SocketAddr::new(a.bind, port);
        let l = rt
            .block_on(async { bind(addr) })
            .with_context(|| format!("cannot listen on {addr} for HTTP{}", if secure { "S" } else { "" }))
            .map_err(AppError::run)?;
        let bound = l.local_addr().unwrap_or(addr);
        let tls = if secure {
            let mut names = vec!["localhost".to_string(), "127.0.0.1".to_string(), "::1".to_string()];
            if !a.bind.is_unspecified() {
                names.push(a.bind.to_string());
            }
            let host = netblast_engine::sys::host_info().hostname;
            if !host.is_empty() {
                names.push(host);
            }
            let files = a.cert.as_deref().zip(a.key.as_deref());
            let tls = netblast_agent::http::tls_config(files, names.clone())
                .map_err(|e| AppError::input(anyhow::anyhow!(e)))?;
            let what = match files {
                Some((c, _)) => format!("certificate {c}"),
                None => format!("self-signed certificate for {}", names.join(", ")),
            };
            eprintln!("netblast serve: HTTPS (HTTP/1.1, h2) on {bound}, {what}");
            Some(tls)
        } else {
            eprintln!("netblast serve: HTTP (HTTP/1.1, h2c) on {bound}");
            None
        };
        listeners.push((l, tls));
    }
    let handle = std::thread::Builder::new()
        .name("netblast-http".into())
        .spawn(move || {
            rt.block_on(async move {
                let mut tasks = Vec::new();
                for (l, tls) in listeners {
                    let mut stop = stop.clone();
                    let cfg = cfg.clone();
                    tasks.push(tokio::spawn(netblast_agent::http::serve(l, tls, cfg, async move {
                        let _ = stop.wait_for(|s| *s).await;
                    })));
                }
                for t in tasks {
                    let _ = t.await;
                }
            });
        })
        .context("cannot start the HTTP thread")
        .map_err(AppError::run)?;
    Ok(Some(handle))
}

/// Binds a listener; `::` also accepts IPv4 (dual stack).
pub fn bind(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    s.set_reuse_address(true)?;
    if addr.is_ipv6() {
        s.set_only_v6(false)?;
    }
    s.bind(&addr.into())?;
    s.listen(1024)?;
    s.set_nonblocking(true)?;
    tokio::net::TcpListener::from_std(s.into())
}

/// Completes on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
