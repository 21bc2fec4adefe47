//! `truth.attribution.*`: every CPU a verdict names is one the test's own threads ran on, or is
//! said to be another process's. Each check makes a cause on purpose and counts the wrong
//! claims (truth: none):
//! - `bulk_busy_loop`: bulk, one flow, client and server pinned to CPU 0, a busy loop (another
//!   process) pinned to CPU 1: no claim that CPU 1 limited the sender or the test;
//! - `http2_shared`: HTTP/2 (h2c) `-c 4 -m 32`, closed loop, against netblast's responder on this
//!   host: "the client's CPU is the limit" only when a client worker thread ran 90% of its time;
//! - `nginx_pinned`: open loop at 70 000/s against nginx pinned to CPU 1, the client on CPU 0:
//!   CPU 1 is never the client's, and a server slower than the rate is named as such when the
//!   client's worker was not saturated;
//! - `sweep_knee`: the HTTP sweep's knee against nginx is not below half the rate nginx answers
//!   closed loop (the p99-doubling rule marked 5 k/s against an nginx that held 62 k/s).
//!
//! Each needs two CPUs; nginx and `taskset` for the nginx ones.

use netblast_benches::truth::{self, Tolerance};
use netblast_benches::{KillOnDrop, LocalServer, Nginx, profile, run};
use netblast_spec::RunResult;
use netblast_spec::profile::HttpVersion;
use netblast_spec::units::{CpuList, Dur, Rate};
use std::process::{Command, Stdio};

use std::time::Duration;

/// A shell busy loop pinned to `cpu`, bounded to 60 s.
fn busy_loop(cpu: usize) -> Result<KillOnDrop, String> {
    Command::new("taskset")
        .args(["-c", &cpu.to_string(), "timeout", "60", "sh", "-c", "while :; do :; done"])
        .stdout(Stdio::null())
        .spawn()
        .map(KillOnDrop)
        .map_err(|e| format!("taskset: {e}"))
}

/// Every verdict line of `r` a person reads: the TCP ways', the kind's own, the hosts'.
fn verdicts(r: &RunResult) -> Vec<String> {
    let mut v: Vec<String> = netblast_report::limits::tcp(r).into_iter().map(|d| d.verdict).collect();
    v.extend(netblast_report::verdict::of_kind(r));
    v.extend(netblast_report::verdict::hosts(r));
    v
}

/// Runs the attribution checks that can run here.
pub(crate) fn truth_attribution(server: &LocalServer, cpus: usize) -> Result<(), String> {
    if cpus < 2 {
        for n in ["bulk_busy_loop", "http2_shared", "nginx_pinned", "sweep_knee"] {
            truth::skip(&format!("truth.attribution.{n}"), "needs two CPUs");
        }
        return Ok(());
    }
    if truth::wanted("truth.attribution.bulk_busy_loop") {
        bulk_busy_loop(server)?;
    }
    if truth::wanted("truth.attribution.http2_shared") {
        http2_shared(cpus)?;
    }
    let nginx_here = Command::new("nginx").arg("-v").output().is_ok();
    for n in ["nginx_pinned", "sweep_knee"] {
        let name = format!("truth.attribution.{n}");
        if !truth::wanted(&name) {
            continue;
        }
        if !nginx_here {
            truth::skip(&name, "nginx is not installed");
        } else if n == "nginx_pinned" {
            nginx_pinned()?;
        } else {
            sweep_knee()?;
        }
    }
    Ok(())
}

fn bulk_busy_loop(server: &LocalServer) -> Result<(), String> {
    let _spin = busy_loop(1)?;
    let p = profile("bulk-1flow", |p| {
        p.run.duration = Some(Dur(Duration::from_secs(2)));
        p.run.cpus = Some(CpuList(vec![0]));
        if let Some(b) = p.workload.bulk_mut() {
            b.server_cpus = Some(CpuList(vec![0]));
        }
    })?;
    let r = run(server.addr, p)?;
    let lines = verdicts(&r);
    // CPU 1 may be named only as another process's.
    let wrong: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("CPU 1 at") && !l.contains("none of this test's threads ran there"))
        .collect();
    truth::check(
        "truth.attribution.bulk_busy_loop",
        wrong.len() as f64,
        0.0,
        "claims",
        Tolerance::Abs(0.0),
        &format!(
            "bulk pinned to CPU 0 both ends, a busy loop on CPU 1: claims that CPU 1 was the test's{}",
            wrong.first().map(|l| format!(": \"{}\"", l.chars().take(160).collect::<String>())).unwrap_or_default()
        ),
    );
    Ok(())
}

fn http2_shared(cpus: usize) -> Result<(), String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let web = netblast_agent::Background::http(l, None, Default::default(), cpus).map_err(|e| e.to_string())?;
    let p = profile("http-max", |p| {
        p.run.duration = Some(Dur(Duration::from_secs(2)));
        if let Some(h) = p.workload.http_mut() {
            (h.version, h.connections, h.streams) = (HttpVersion::Http2, 4, 32);
        }
    })?;
    let r = run(web.addr(), p)?;
    let claims = verdicts(&r).into_iter().filter(|l| l.contains("the client's CPU is the limit")).count();
    let saturated = netblast_spec::diagnose::saturated_thread(&r).is_some();
    let wrong = if saturated { 0 } else { claims };
    truth::check(
        "truth.attribution.http2_shared",
        wrong as f64,
        0.0,
        "claims",
        Tolerance::Abs(0.0),
        &format!(
            "h2c -c 4 -m 32 against this host's responder: 'the client's CPU is the limit' without a saturated worker \
             (client {:.2} CPUs)",
            r.summary.cpu.client.cpus_used()
        ),
    );
    Ok(())
}

fn nginx_pinned() -> Result<(), String> {
    let nginx = Nginx::start("2000r/s", Some(1))?;
    let port = nginx.http;
    let p = profile("http-max", |p| {
        p.run.duration = Some(Dur(Duration::from_secs(2)));
        p.run.cpus = Some(CpuList(vec![0]));
        if let Some(h) = p.workload.http_mut() {
            h.rate = Some(Rate(70_000.0));
        }
    })?;
    let r = run(format!("127.0.0.1:{port}").parse().map_err(|e| format!("{e}"))?, p);
    let r = r?;
    let lines = verdicts(&r);
    let mut wrong: Vec<String> = lines.iter().filter(|l| l.contains("client's CPU 1")).cloned().collect();
    let h = r.summary.http.as_ref().ok_or("no HTTP summary")?;
    let slower = h.responses_per_s < 70_000.0 * 0.95;
    if slower && netblast_spec::diagnose::saturated_thread(&r).is_none() {
        if let Some(v) = lines.first().filter(|l| !l.contains("the server is slower than the offered rate")) {
            wrong.push(v.clone());
        }
    }
    truth::check(
        "truth.attribution.nginx_pinned",
        wrong.len() as f64,
        0.0,
        "claims",
        Tolerance::Abs(0.0),
        &format!(
            "70 k/s against nginx on CPU 1 (answered {:.0}/s), the client on CPU 0: wrong claims{}",
            h.responses_per_s,
            wrong.first().map(|l| format!(": \"{}\"", l.chars().take(160).collect::<String>())).unwrap_or_default()
        ),
    );
    Ok(())
}

fn sweep_knee() -> Result<(), String> {
    let nginx = Nginx::start("2000r/s", None)?;
    let port = nginx.http;
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().map_err(|e| format!("{e}"))?;
    let closed = profile("http-max", |p| p.run.duration = Some(Dur(Duration::from_secs(2))))?;
    let capacity = run(addr, closed).map(|r| r.summary.http.map(|h| h.responses_per_s).unwrap_or(0.0));
    let sweep = profile("http-sweep", |p| {
        if let Some(h) = p.workload.http_mut() {
            h.steps = (0..8)
                .map(|i| netblast_spec::profile::RateStep {
                    rate: Rate(1000.0 * f64::from(1u32 << i)),
                    duration: Dur(Duration::from_secs(2)),
                })
                .collect();
        }
    })?;
    let r = run(addr, sweep);
    let (capacity, r) = (capacity?, r?);
    let steps = netblast_report_sweep(&r);
    let knee = steps.iter().find(|(_, turned)| *turned).map(|(offered, _)| *offered);
    let ratio = knee.map(|k| k / capacity.max(1.0)).unwrap_or(f64::NAN);
    truth::check(
        "truth.attribution.sweep_knee",
        ratio,
        1.0,
        "x capacity",
        Tolerance::RelRange(-0.5, 1.0),
        &format!(
            "sweep 1k..128k/s against nginx: the marked step over what nginx answers closed loop ({capacity:.0}/s): \
             at least half of it"
        ),
    );
    Ok(())
}

/// The sweep's steps (offered, marked) as the report marks them.
fn netblast_report_sweep(r: &RunResult) -> Vec<(f64, bool)> {
    netblast_report::sweep::steps(r).unwrap_or_default().iter().map(|s| (s.offered, s.turned.is_some())).collect()
}
