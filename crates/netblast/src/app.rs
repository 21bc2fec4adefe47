//! The subcommands: load and resolve, call the engine or the agent, render, pick the exit code.

use crate::cli::{Cli, Command, FleetArgs, MergeArgs, ProfileArgs, ReportArgs, RunArgs, ServeArgs};
use anyhow::Context;
use netblast_engine::api::{ClientError, Live, RunOptions};
use netblast_engine::worker::RunFlags;
use netblast_probe::{Probe, ProbeMode};
use netblast_report::{json, text};
use netblast_wire::auth::Token;
use netblast_spec::Profile;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

/// How a successful command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Everything ran to completion.
    Complete,
    /// The run finished but is partial (errors, interrupted); the result says why.
    Incomplete,
    /// A fleet finished without some of its agents (they failed or never came): exit 3.
    Partial,
    /// The run completed and an `--assert` failed: exit 4.
    AssertFailed,
}

/// Checks `--assert`s on a result, printing each verdict (on stderr beside JSON output).
/// Returns whether all passed.
fn assertions_pass(assertions: &[netblast_spec::assert::Assertion], r: &netblast_spec::RunResult, json: bool) -> bool {
    if assertions.is_empty() {
        return true;
    }
    let (verdicts, ok) = netblast_spec::assert::check_all(assertions, r);
    print_verdicts(&verdicts, json);
    ok
}

/// Checks `--assert`s on a result about to be written, keeping the verdicts in it (`asserts`).
fn judge_into(assertions: &[netblast_spec::assert::Assertion], r: &mut netblast_spec::RunResult) {
    r.asserts = netblast_spec::assert::check_all(assertions, r).0;
}

/// Prints verdicts (on stderr beside JSON output); whether all passed.
fn print_verdicts(verdicts: &[netblast_spec::assert::Verdict], json: bool) -> bool {
    if verdicts.is_empty() {
        return true;
    }
    let text: String = verdicts.iter().map(|v| format!("assert: {v}\n")).collect();
    if json {
        eprint!("{text}");
    } else {
        print_stdout(&text);
    }
    verdicts.iter().all(|v| v.pass)
}

/// Writes `--hlog FILE` (atomically); the error names the file.
fn write_hlog(path: &std::path::Path, r: &netblast_spec::RunResult) -> Result<(), AppError> {
    let (bytes, _) = netblast_report::hlog::write(r)
        .map_err(|e| AppError::input(anyhow::anyhow!("--hlog {}: {e}", path.display())))?;
    json::write_atomic(path, &bytes)
        .with_context(|| format!("cannot write the interval log to {}", path.display()))
        .map_err(AppError::run)
}

/// The outcome of a finished run: incomplete first, then the assertions.
fn judged(complete: bool, asserts_ok: bool) -> Outcome {
    match (complete, asserts_ok) {
        (false, _) => Outcome::Incomplete,
        (true, false) => Outcome::AssertFailed,
        (true, true) => Outcome::Complete,
    }
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
        Command::Merge(a) => merge(&a),
        Command::Fleet(a) => fleet(&a),
        Command::Doctor => {
            print_stdout(&doctor());
            Ok(Outcome::Complete)
        }
    }
}

/// Writes to stdout; a closed pipe (`| head`) is not an error.
/// Writes to stdout and flushes (a closed stdout is not an error).
pub fn print_stdout(s: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(s.as_bytes()).and_then(|_| out.flush());
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

/// The token: from `file`, else from the `NETBLAST_TOKEN` variable; errors are bad input.
pub fn load_token(file: Option<&Path>) -> Result<Option<Token>, AppError> {
    let bad = |e: String| AppError::input(anyhow::anyhow!(e));
    match file {
        Some(f) => Token::from_file(f).map(Some).map_err(bad),
        None => match std::env::var("NETBLAST_TOKEN") {
            Ok(t) if !t.trim().is_empty() => Token::new(&t).map(Some).map_err(|e| bad(format!("NETBLAST_TOKEN: {e}"))),
            _ => Ok(None),
        },
    }
}

/// The profile named by the flags, with the flags applied and validated, and its origin.
/// Whether a target is a URL (`http://…`, `https://…`): the test is then an HTTP one.
fn is_url(target: &str) -> bool {
    let t = target.to_ascii_lowercase();
    t.starts_with("http://") || t.starts_with("https://")
}

/// The profile the flags name, with their overrides. Without `--profile`: `http-max` when a
/// `--url` or a URL target says the test is HTTP, `udp-1g` with `--udp` or `-b`, else
/// `bulk-1flow`. A URL target is requested
/// as a `--url` would be.
fn load_profile(t: &ProfileArgs, target: Option<&str>) -> Result<(Profile, String), AppError> {
    let url_target = target.filter(|t| is_url(t));
    let name = match &t.profile {
        Some(p) => p.as_str(),
        None if !t.urls.is_empty() || url_target.is_some() => "http-max",
        None if t.udp || t.bitrate.is_some() => "udp-1g",
        None => "bulk-1flow",
    };
    let (mut profile, origin) = Profile::load(name).map_err(AppError::input)?;
    let mut overrides = t.overrides();
    if let Some(u) = url_target {
        if !profile.workload.is_http() {
            return Err(AppError::input(anyhow::anyhow!(
                "--target {u} is a URL, but profile {name} is a {} test: name an http profile, or give HOST[:PORT]",
                profile.kind().name()
            )));
        }
        overrides.urls.insert(0, u.to_string());
    }
    overrides.apply(&mut profile, &origin).map_err(AppError::input)?;
    let origin = if overrides.is_empty() { origin } else { format!("{origin} (with command-line overrides)") };
    profile.validate(&origin).map_err(AppError::input)?;
    Ok((profile, origin))
}

fn run(a: &RunArgs) -> Result<Outcome, AppError> {
    let (profile, origin) = load_profile(&a.test, a.target.as_deref())?;
    let buffers = if profile.workload.is_http() {
        Vec::new()
    } else {
        netblast_engine::sockopt::check(&profile.tcp, profile.workload.nodelay_default())
            .map_err(|e| AppError::input(anyhow::anyhow!("{e}")))?
    };
    let target = match (&a.target, profile.workload.is_http()) {
        // A URL target is requested as a --url; the peer comes from it.
        (Some(t), true) if is_url(t) => String::new(),
        (Some(t), _) => t.clone(),
        (None, true) => String::new(),
        (None, false) => {
            return Err(AppError::input(anyhow::anyhow!(
                "--target HOST[:PORT] is required: where does `netblast serve` run?"
            )))
        }
    };
    let token = load_token(a.token_file.as_deref())?;
    if a.bind.is_some() || a.bind_dev.is_some() {
        let local = netblast_engine::sockopt::Local { addr: a.bind, device: a.bind_dev.clone() };
        netblast_engine::sockopt::set_local(local).map_err(|e| AppError::input(anyhow::anyhow!("{e}")))?;
    }
    let allowed = netblast_engine::sys::allowed_cpus()
        .context("cannot read this process's CPU affinity")
        .map_err(AppError::run)?;
    let (mut plan, peer) = netblast_spec::plan::plan(profile, origin, &target, &allowed, a.test.cpus.is_some())
        .map_err(AppError::input)?;
    for b in &buffers {
        if b.clamped() {
            eprintln!("netblast: warning: {}", b.describe());
        }
        plan.notes.push(format!("client socket buffer: {}", b.describe()));
    }
    if let Some(at) = &a.start_at {
        let ns = netblast_spec::units::parse_instant(at, netblast_engine::clock::now_unix_ns())
            .map_err(|e| AppError::input(anyhow::anyhow!("--start-at: {e}")))?;
        plan.start_at_unix_ns = Some(ns);
    }
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
    let human = !a.json && !a.quiet;
    let mut status = crate::status::Status::new(plan.time_bound.get(), human);
    let mut streams = Vec::new();
    let mut log_full = false;
    let profile = plan.profile.clone();
    let mut live = |ev: Live<'_>| match ev {
        Live::Started { plan, test_id, server, streams: s, .. } => {
            streams = s.to_vec();
            if human {
                let mut out = text::started(test_id, &plan.aimed_at(), plan.profile.kind().name(), s, &server.hostname);
                for n in &plan.notes {
                    out.push_str(&format!("note: {n}\n"));
                }
                out.push_str(&text::interval_header(&plan.profile));
                status.started(&out);
            }
        }
        Live::Interval(iv) => {
            if let Some(p) = partial.as_mut() {
                match p.append(iv) {
                    Ok(true) => {}
                    Ok(false) if !log_full => {
                        log_full = true;
                        eprintln!(
                            "netblast: the partial log reached {} MiB: it stops here (the result will hold every interval)",
                            json::PartialLog::MAX_BYTES >> 20
                        );
                    }
                    Ok(false) => {}
                    Err(e) => eprintln!("netblast: cannot append to the partial log: {e}"),
                }
            }
            if human {
                status.interval(&text::interval(iv, &streams, &profile), iv);
            }
        }
    };
    let opts = RunOptions { token, ..Default::default() };
    let outcome = netblast_engine::runner::run(&plan, peer, &probe, &flags, &opts, &mut live);
    status.finish();
    if let Some(h) = sig {
        h.close();
    }
    if outcome.is_err() {
        // Nothing was measured: no partial log stays behind.
        if let Some(p) = partial.take() {
            let _ = p.remove();
        }
    }
    let mut result = outcome.map_err(|e: ClientError| {
        // A URL, header, body file, TLS file, token or start time that does not work is bad input.
        if e.is_input() {
            AppError::input(e)
        } else {
            AppError::run(e)
        }
    })?;
    judge_into(&a.assert, &mut result);

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
    if let Some(p) = &a.hlog {
        write_hlog(p, &result)?;
    }
    let ok = print_verdicts(&result.asserts, a.json);
    Ok(judged(result.complete, ok))
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
    let text = std::fs::read_to_string(&a.file)
        .with_context(|| format!("cannot read {}", a.file.display()))
        .map_err(AppError::input)?;
    if netblast_report::fleet::is_log(&text) {
        let out = netblast_report::fleet::render(&text)
            .map_err(|e| AppError::input(anyhow::anyhow!("{}: {e}", a.file.display())))?;
        print_stdout(&out);
        return Ok(Outcome::Complete);
    }
    let r = json::read(&a.file)
        .with_context(|| format!("cannot read result {}", a.file.display()))
        .map_err(AppError::input)?;
    if let Some(p) = &a.hlog {
        write_hlog(p, &r)?;
    }
    let base = match &a.compare {
        Some(p) => Some(
            json::read(p)
                .with_context(|| format!("--compare: cannot read result {}", p.display()))
                .map_err(AppError::input)?,
        ),
        None => None,
    };
    let base_name = a.compare.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
    if let Some(p) = &a.html {
        let page = netblast_report::html::render(
            &a.file.display().to_string(),
            &r,
            base.as_ref().map(|b| (base_name.as_str(), b)),
        )
        .map_err(|e| AppError::input(anyhow::anyhow!("--html {}: {e}", p.display())))?;
        json::write_atomic(p, page.as_bytes())
            .with_context(|| format!("cannot write {}", p.display()))
            .map_err(AppError::run)?;
        eprintln!("netblast: wrote {}", p.display());
    }
    if a.csv {
        print_stdout(&netblast_report::csv::intervals(&r));
    } else {
        print_stdout(&text::full(&r));
        if let Some(b) = &base {
            print_stdout(&text::compare(&base_name, b, &r));
        }
    }
    let ok = assertions_pass(&a.assert, &r, a.csv);
    Ok(judged(r.complete, ok))
}

fn merge(a: &MergeArgs) -> Result<Outcome, AppError> {
    let mut inputs = Vec::with_capacity(a.files.len());
    for f in &a.files {
        let r =
            json::read(f).with_context(|| format!("cannot read result {}", f.display())).map_err(AppError::input)?;
        inputs.push((f.display().to_string(), r));
    }
    let refs: Vec<(&str, &netblast_spec::RunResult)> = inputs.iter().map(|(n, r)| (n.as_str(), r)).collect();
    let merged = netblast_spec::merge::merge(&refs).map_err(AppError::input)?;
    if let Some(path) = &a.output {
        json::write_atomic(path, json::to_string(&merged).as_bytes())
            .with_context(|| format!("cannot write the merged result to {}", path.display()))
            .map_err(AppError::run)?;
    }
    if a.json {
        print_stdout(&format!("{}\n", json::to_string(&merged)));
    } else if a.output.is_none() {
        print_stdout(&text::full(&merged));
    }
    Ok(if merged.complete { Outcome::Complete } else { Outcome::Incomplete })
}

fn serve(a: ServeArgs) -> Result<Outcome, AppError> {
    if let Some(dev) = &a.bind_dev {
        let local = netblast_engine::sockopt::Local { addr: None, device: Some(dev.clone()) };
        netblast_engine::sockopt::set_local(local).map_err(|e| AppError::input(anyhow::anyhow!("{e}")))?;
        eprintln!("netblast serve: only on interface {dev}");
    }
    let token = match &a.token_file {
        Some(f) => Some(Token::from_file(f).map_err(|e| AppError::input(anyhow::anyhow!(e)))?),
        None => None,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("netblast-ctl")
        .enable_all()
        .build()
        .context("cannot start the control runtime")
        .map_err(AppError::run)?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stats = std::sync::Arc::new(netblast_agent::ServeStats::default());
    stats.print_tests.store(true, std::sync::atomic::Ordering::Relaxed);
    let http = start_http(&a, stats.metrics.clone(), stop_rx.clone())?;
    let (http_port, https_port) = http.as_ref().map_or((None, None), |h| (h.http_port, h.https_port));
    let addr = std::net::SocketAddr::new(a.bind, a.port);
    let outcome = rt.block_on(async move {
        let listener = bind(addr).with_context(|| format!("cannot listen on {addr}")).map_err(AppError::run)?;
        let bound = listener.local_addr().unwrap_or(addr);
        eprintln!("netblast serve: listening on {bound} (data port; Ctrl-C to stop)");
        if let Some(at) = a.metrics {
            let l = bind_any(at).with_context(|| format!("--metrics: cannot listen on {at}")).map_err(AppError::run)?;
            eprintln!("netblast serve: metrics on http://{}/metrics", l.local_addr().unwrap_or(at));
            let registry = stats.metrics.registry();
            let render = std::sync::Arc::new(move || netblast_agent::metrics::encode(&registry));
            let mut stop = stop_rx.clone();
            tokio::spawn(netblast_agent::metrics::serve_http(l, render, async move {
                let _ = stop.wait_for(|s| *s).await;
            }));
        }
        let probe = Probe::open(a.probe).map_err(|e| AppError::run(anyhow::anyhow!("--probe ebpf: {e}")))?;
        let info = probe.info();
        eprintln!(
            "netblast serve: TCP statistics from {}{}",
            info.tcp_source,
            info.fallback_reason.map(|r| format!(" ({r})")).unwrap_or_default()
        );
        let access = netblast_agent::Access { token, open: a.open };
        eprintln!("netblast serve: accepting {}", access.describe());
        let agent = netblast_agent::fleet::AgentConfig {
            allow: a.allow.clone(),
            group: a.group.clone(),
            http_port,
            https_port,
            ..Default::default()
        };
        let networks: Vec<String> = agent.allowlist().iter().map(|c| c.to_string()).collect();
        if access.token.is_some() {
            eprintln!("netblast serve: fleet orders from a coordinator with the token, toward {}", networks.join(", "));
        }
        if let Some(c) = &a.register {
            eprintln!("netblast serve: registering with the coordinator at {c} (group {})", a.group);
        }
        let mut limits =
            netblast_agent::Limits { pending_per_peer: a.max_pending_per_peer.max(1), ..Default::default() };
        if let Some(n) = a.max_spinning {
            limits.spinning = n;
        }
        let cfg = netblast_agent::ServeConfig { probe, access, agent, limits, register: a.register.clone(), stats };
        let shutdown = async move {
            shutdown_signal().await;
            let _ = stop_tx.send(true);
        };
        netblast_agent::serve(listener, cfg, shutdown).await.context("server failed").map_err(AppError::run)?;
        Ok(Outcome::Complete)
    });
    if let Some(h) = http {
        let _ = h.thread.join();
    }
    eprintln!("netblast serve: stopped");
    outcome
}

/// Starts the HTTP/HTTPS responders, if asked, on their own runtime and thread (the data
/// port's control runtime stays small and undisturbed). They stop when `stop` turns true.
/// The responders `serve` started: their thread and the ports they listen on.
struct Responders {
    thread: std::thread::JoinHandle<()>,
    http_port: Option<u16>,
    https_port: Option<u16>,
}

fn start_http(
    a: &ServeArgs,
    metrics: netblast_agent::metrics::ServeMetrics,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Result<Option<Responders>, AppError> {
    if a.http.is_none() && a.https.is_none() {
        return Ok(None);
    }
    let (mut http_port, mut https_port) = (None, None);
    let threads = netblast_engine::sys::allowed_cpus().map(|c| c.len()).unwrap_or(2).max(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("netblast-http")
        .enable_all()
        .build()
        .context("cannot start the HTTP runtime")
        .map_err(AppError::run)?;
    let cfg = netblast_agent::http::ResponderConfig {
        default_size: a.http_size.bytes(),
        max_connections: a.http_max_connections.max(1),
        header_timeout: a.http_timeout.get(),
        // Counted per response only when someone scrapes them.
        metrics: a.metrics.is_some().then_some(metrics),
        ..Default::default()
    };
    let mut listeners = Vec::new();
    for (port, secure) in [(a.http, false), (a.https, true)] {
        let Some(port) = port else { continue };
        let addr = std::net::SocketAddr::new(a.bind, port);
        let l = rt
            .block_on(async { bind(addr) })
            .with_context(|| format!("cannot listen on {addr} for HTTP{}", if secure { "S" } else { "" }))
            .map_err(AppError::run)?;
        let bound = l.local_addr().unwrap_or(addr);
        *(if secure { &mut https_port } else { &mut http_port }) = Some(bound.port());
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
    Ok(Some(Responders { thread: handle, http_port, https_port }))
}

/// Binds a listener; `::` also accepts IPv4 (dual stack); on the `--bind-dev` interface if set.
pub fn bind(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    bind_on(addr, netblast_engine::sockopt::local().and_then(|l| l.device.as_deref()))
}

/// Binds a listener on any interface (the metrics endpoint: monitoring is not test traffic).
pub fn bind_any(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    bind_on(addr, None)
}

fn bind_on(addr: std::net::SocketAddr, device: Option<&str>) -> std::io::Result<tokio::net::TcpListener> {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    s.set_reuse_address(true)?;
    if let Some(dev) = device {
        s.bind_device(Some(dev.as_bytes()))?;
    }
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

fn fleet(a: &FleetArgs) -> Result<Outcome, AppError> {
    use netblast_coord::{agents, FleetConfig, FleetError, FleetEvent};
    use netblast_spec::units::{fmt_bits_per_s, fmt_ns, fmt_per_s};
    let input = |e: String| AppError::input(anyhow::anyhow!(e));
    let (profile, origin) = load_profile(&a.test, None)?;
    let token = load_token(a.token_file.as_deref())?.ok_or_else(|| {
        input(
            "a fleet needs the agents' token: --token-file FILE or NETBLAST_TOKEN (agents take orders only from a \
             coordinator that proves it)"
                .into(),
        )
    })?;
    let mut notes = Vec::new();
    let clients = agents::parse_noted(&a.clients, "--clients", &mut notes).map_err(input)?;
    let servers =
        a.servers.as_deref().map(|s| agents::parse_noted(s, "--servers", &mut notes)).transpose().map_err(input)?;
    let log =
        a.frames.clone().or_else(|| a.output.as_ref().map(|o| json::PartialLog::path_for_suffix(o, ".fleet.jsonl")));
    let human = !a.json && !a.quiet;
    let log = log.unwrap_or_else(|| {
        let path = netblast_coord::default_log_path(netblast_engine::clock::now_unix_ns() / 1_000_000_000);
        if !human {
            eprintln!(
                "netblast fleet: agents' frames logged to {} (-o FILE or --frames FILE puts them elsewhere)",
                path.display()
            );
        }
        path
    });
    if human {
        println!("netblast fleet: {}; agents' frames logged to {}", profile.description, log.display());
        for n in &notes {
            println!("{n}");
        }
    }
    let mut status = crate::status::Status::new(profile.time_bound(), human);
    let mut failed = 0usize;
    let cfg = FleetConfig {
        clients,
        servers: servers.unwrap_or_default(),
        pairing: a.pairing,
        profile,
        origin,
        token,
        wait_agents: a.wait_agents.get(),
        lead: a.lead.get(),
        log: Some(log),
    };
    // One session per agent, and a registration may come and go before it is needed.
    netblast_engine::sys::ensure_fds(cfg.agent_count() as u64 * 2 + 256)
        .map_err(|e| AppError::run(anyhow::anyhow!(e)))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("netblast-coord")
        .enable_all()
        .build()
        .context("cannot start the coordinator's runtime")
        .map_err(AppError::run)?;
    let outcome = rt.block_on(async {
        let listener = match a.listen {
            Some(addr) => {
                let l = bind(addr).with_context(|| format!("cannot listen on {addr}")).map_err(AppError::run)?;
                if human {
                    println!("netblast fleet: taking registrations on {}", l.local_addr().unwrap_or(addr));
                }
                Some(l)
            }
            None => None,
        };
        let metrics = netblast_agent::metrics::FleetMetrics::default();
        if let Some(at) = a.metrics {
            let l = bind_any(at).with_context(|| format!("--metrics: cannot listen on {at}")).map_err(AppError::run)?;
            if human {
                println!("netblast fleet: metrics on http://{}/metrics", l.local_addr().unwrap_or(at));
            }
            let registry = metrics.registry();
            let render = std::sync::Arc::new(move || netblast_agent::metrics::encode(&registry));
            // Stops with the runtime, when the fleet's result is in.
            tokio::spawn(netblast_agent::metrics::serve_http(l, render, std::future::pending::<()>()));
        }
        let counting = a.metrics.is_some();
        let mut live = |ev: FleetEvent<'_>| {
            // Every agent's interval frame: decoded for the metrics only when they are served.
            if let FleetEvent::TestInterval { interval, .. } = &ev {
                if counting {
                    metrics.test_interval(interval);
                }
                return;
            }
            if counting {
                match &ev {
                    FleetEvent::AgentReady { role, address, .. } => metrics.agent_ready(role, address),
                    FleetEvent::AgentFailed { role, address, .. } => metrics.agent_failed(role, address),
                    FleetEvent::Starting { tests, .. } => {
                        metrics.tests_running.set(*tests as i64);
                    }
                    FleetEvent::Interval(iv) => {
                        metrics.tests_running.set(iv.running as i64);
                        metrics.tests_reporting.set(iv.reporting as i64);
                        metrics.bits_per_second.set(iv.bits_per_s);
                        metrics.responses_per_second.set(iv.responses_per_s.unwrap_or(0.0));
                        metrics.intervals.inc();
                    }
                    FleetEvent::TestInterval { .. } => {}
                }
            }
            if !human {
                return;
            }
            if let FleetEvent::AgentFailed { .. } = ev {
                failed += 1;
            }
            let line = match ev {
                FleetEvent::TestInterval { .. } => return,
                FleetEvent::AgentReady { role, address, hostname, clock } => format!(
                    "{role} {address} ({hostname}) ready: clock {:+} ± {}\n",
                    fmt_ns(clock.offset_ns as f64),
                    fmt_ns(clock.error_ns as f64)
                ),
                FleetEvent::AgentFailed { role, address, why } => format!("{role} {address} FAILED: {why}\n"),
                FleetEvent::Starting { t0_unix_ns, tests, clients, servers } => format!(
                    "{tests} test(s) on {clients} client and {servers} server agent(s) start together at {}\n",
                    netblast_engine::clock::rfc3339(t0_unix_ns)
                ),
                FleetEvent::Interval(iv) => {
                    let rate = match iv.responses_per_s {
                        Some(r) => format!("{} ({})", fmt_per_s(r), fmt_bits_per_s(iv.bits_per_s)),
                        None => fmt_bits_per_s(iv.bits_per_s),
                    };
                    let slowest = iv
                        .slowest
                        .as_ref()
                        .map(|(who, r)| {
                            let r = if iv.responses_per_s.is_some() { fmt_per_s(*r) } else { fmt_bits_per_s(*r) };
                            format!("  slowest {who} {r}")
                        })
                        .unwrap_or_default();
                    let line = format!(
                        "[FLEET] {:>6.2}-{:<6.2} sec  {rate:>16}  {}/{} tests reporting{slowest}\n",
                        iv.start_s, iv.end_s, iv.reporting, iv.running
                    );
                    return status.fleet_interval(&line, iv, failed);
                }
            };
            if let FleetEvent::Starting { .. } = ev {
                return status.started(&line);
            }
            status.print(&line);
        };
        netblast_coord::run(cfg, listener, shutdown_signal(), &mut live).await.map_err(|e| match e {
            FleetError::Config(_) => AppError::input(e),
            _ => AppError::run(e),
        })
    });
    status.finish();
    let mut outcome = outcome?;
    judge_into(&a.assert, &mut outcome);
    if let Some(path) = &a.output {
        json::write_atomic(path, json::to_string(&outcome).as_bytes())
            .with_context(|| format!("cannot write the fleet's result to {}", path.display()))
            .map_err(AppError::run)?;
    }
    if a.json {
        print_stdout(&format!("{}\n", json::to_string(&outcome)));
    } else {
        print_stdout(&text::summary(&outcome));
    }
    let ok = print_verdicts(&outcome.asserts, a.json);
    Ok(match judged(outcome.complete, ok) {
        Outcome::Incomplete => Outcome::Partial,
        o => o,
    })
}
