//! `netblast fleet` wired: the flags into a `FleetConfig`, the coordinator on a runtime of its
//! own with its registration listener and metrics endpoint, its live events to the terminal.

use crate::cli::FleetArgs;
use crate::outcome::AppError;
use crate::status::Status;
use anyhow::Context;
use netblast_coord::live::{FleetMetrics, Live, Shown};
use netblast_coord::{FleetConfig, FleetError, agents};
use netblast_spec::RunResult;
use netblast_spec::units::Dur;

/// The coordinator's settings from the flags, and what discovering the agents found (for a
/// person). Says where the frame log goes when no `-o` or `--frames` chose it.
pub fn config(a: &FleetArgs, human: bool) -> Result<(FleetConfig, Vec<String>), AppError> {
    let input = |e: String| AppError::input(anyhow::anyhow!(e));
    let (mut profile, origin) = a.test.overrides.profile(a.test.profile.as_deref(), None).map_err(AppError::input)?;
    // Agents open no path a peer names: the body travels in the orders.
    profile.workload.section_mut().inline_host_files().map_err(input)?;
    let token = crate::cli::load_token(a.token_file.as_deref())?.ok_or_else(|| {
        input(
            "a fleet needs the agents' token: --token-file FILE or NETBLAST_TOKEN (agents take orders only from a \
             coordinator that proves it)"
                .into(),
        )
    })?;
    let mut notes = Vec::new();
    let wait = a.wait_agents.get();
    let clients = agents::parse_noted(&a.clients, "--clients", &mut notes, wait).map_err(input)?;
    let servers = a
        .servers
        .as_deref()
        .map(|s| agents::parse_noted(s, "--servers", &mut notes, wait))
        .transpose()
        .map_err(input)?;
    let log = a
        .frames
        .clone()
        .or_else(|| a.output.as_ref().map(|o| netblast_report::json::PartialLog::path_for_suffix(o, ".fleet.jsonl")));
    let log = log.unwrap_or_else(|| {
        let path = netblast_coord::default_log_path(netblast_engine::exec::clock::now_unix_ns() / 1_000_000_000);
        // Said once where no human header says it; `-q` asks for silence (a Kubernetes Job's
        // log is its result: `kubectl logs` mixes stderr into stdout).
        if !human && !a.quiet {
            eprintln!(
                "netblast fleet: agents' frames logged to {} (-o FILE or --frames FILE puts them elsewhere)",
                path.display()
            );
        }
        path
    });
    notes.insert(0, format!("netblast fleet: {}; agents' frames logged to {}", profile.description, log.display()));
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
    Ok((cfg, notes))
}

/// The `--metrics` endpoint, still served by the coordinator's runtime after the fleet's result
/// is in, until [`Endpoint::linger`] ends.
pub struct Endpoint {
    rt: tokio::runtime::Runtime,
}

impl Endpoint {
    /// Keeps serving the final figures for `d` (a Ctrl-C or SIGTERM ends it early), then stops.
    pub fn linger(self, d: std::time::Duration, human: bool) {
        if d.is_zero() {
            return;
        }
        if human {
            eprintln!("netblast fleet: metrics stay up {} more (--metrics-linger)", Dur(d));
        }
        // The result is out: end stdout now, so a pipe reading it (`| jq`) is not held open.
        use std::io::Write;
        let _ = std::io::stdout().flush();
        if let Ok(null) = std::fs::File::open("/dev/null") {
            // SAFETY: dup2 onto descriptor 1 of two descriptors this process owns; nothing is
            // written to stdout after this.
            unsafe { libc::dup2(std::os::fd::AsRawFd::as_raw_fd(&null), 1) };
        }
        self.rt.block_on(async {
            tokio::select! {
                _ = tokio::time::sleep(d) => {}
                _ = crate::signals::shutdown_signal() => {}
            }
        });
    }
}

/// Runs the coordinator on a runtime of its own; its live events go to `status` for a person
/// and to the metrics endpoint if `--metrics` serves one. With one, the runtime comes back to
/// keep serving it after the result is written.
pub fn run(
    a: &FleetArgs,
    cfg: FleetConfig,
    human: bool,
    status: &mut Status,
) -> Result<(RunResult, Option<Endpoint>), AppError> {
    run_until(a, cfg, human, status, crate::signals::shutdown_signal())
}

/// [`run`], the fleet cancelled (what was measured kept) when `shutdown` completes.
pub fn run_until(
    a: &FleetArgs,
    cfg: FleetConfig,
    human: bool,
    status: &mut Status,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(RunResult, Option<Endpoint>), AppError> {
    // One session per agent, and a registration may come and go before it is needed.
    netblast_engine::os::sys::ensure_fds(cfg.agent_count() as u64 * 2 + 256)
        .map_err(|e| AppError::run(anyhow::anyhow!(e)))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("netblast-coord")
        .enable_all()
        .build()
        .context("cannot start the coordinator's runtime")
        .map_err(AppError::run)?;
    let result = rt.block_on(async {
        let listen = |addr, what: &str| {
            netblast_agent::server::listener(addr, None)
                .with_context(|| format!("{what}cannot listen on {addr}"))
                .map_err(AppError::run)
        };
        let listener = match a.listen {
            Some(addr) => {
                let l = listen(addr, "")?;
                if human {
                    println!("netblast fleet: taking registrations on {}", l.local_addr().unwrap_or(addr));
                }
                Some(l)
            }
            None => None,
        };
        let metrics = match a.metrics {
            Some(at) => {
                let l = listen(at, "--metrics: ")?;
                if human {
                    println!("netblast fleet: metrics on http://{}/metrics", l.local_addr().unwrap_or(at));
                }
                let m = FleetMetrics::default();
                let registry = m.registry();
                let render = std::sync::Arc::new(move || netblast_metrics::encode(&registry));
                // Stops with the runtime: after the result and the linger.
                tokio::spawn(netblast_metrics::serve_http(l, render, std::future::pending::<()>()));
                Some(m)
            }
            None => None,
        };
        let served = metrics.clone();
        let mut live = Live::new(metrics);
        let mut on_event = |ev: netblast_coord::FleetEvent<'_>| match live.event(&ev) {
            _ if !human => {}
            None => {}
            Some(Shown::Line(l)) => status.print(&l),
            Some(Shown::Starting(l)) => status.started(&l),
            Some(Shown::Interval { line, interval, failed }) => status.fleet_interval(&line, &interval, failed),
        };
        let result = netblast_coord::run(cfg, listener, shutdown, &mut on_event).await.map_err(|e| match e {
            FleetError::Config(_) => AppError::input(e),
            _ => AppError::run(e),
        });
        if let Some(m) = served {
            m.finished();
        }
        result
    })?;
    Ok((result, a.metrics.map(|_| Endpoint { rt })))
}
