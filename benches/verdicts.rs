//! `truth.verdict.*`: each cause a verdict names, made on purpose, run five times; the check
//! is how many of the five runs name that cause first (5 of 5 to pass).
//!
//! The causes: the rate asked (`-b`, the kernel's pacing), a shaped link (tbf at 200 Mbit/s),
//! 3% of segments dropped (nftables), a busy CPU (a spinner on the sender's CPU), HTTP answers
//! refused by the server (half `400`), a cps rate one flow cannot keep, and cps SYNs dropped (5%
//! by nftables: what a full accept queue does). TCP causes run on a namespace pair this bench makes and removes (root);
//! the others on loopback. A small send buffer (`--sndbuf 16K`) and a small receive buffer (the
//! receiver's `tcp_rmem` capped at 16 KB) are the cause only on a path with delay (on a
//! microsecond path a 16 KB window still carries tens of Gbit/s): they run over a 10 ms round
//! trip made by the delay line (`scripts/delayline.py`) in a middle namespace.

use netblast_benches::netns::{Pair, inside};
use netblast_benches::truth::{self, Tolerance};
use netblast_benches::{LocalServer, ServerIn, profile, run};
use netblast_spec::RunResult;
use netblast_spec::diagnose::Limit;
use netblast_spec::units::{BitRate, Dur};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Runs per cause.
const RUNS: usize = 5;

/// Each run's length.
const RUN: Duration = Duration::from_secs(1);

/// Runs `once` [`RUNS`] times; checks that every run named the cause (`once` says whether it
/// did, and the verdict it read); the note gives the first verdict that named something else.
fn five(name: &str, what: &str, mut once: impl FnMut() -> Result<(bool, String), String>) -> Result<(), String> {
    if !truth::wanted(&format!("truth.verdict.{name}")) {
        return Ok(());
    }
    let mut named = 0;
    let mut wrong = None;
    for _ in 0..RUNS {
        let (ok, verdict) = once()?;
        if ok {
            named += 1;
        } else if wrong.is_none() {
            wrong = Some(verdict);
        }
    }
    let note = match wrong {
        None => format!("{what}: named first in every run"),
        Some(v) => format!("{what}: a run said \"{}\"", v.chars().take(200).collect::<String>()),
    };
    truth::check(&format!("truth.verdict.{name}"), named as f64, RUNS as f64, "runs", Tolerance::Abs(0.0), &note);
    Ok(())
}

/// The first way's TCP diagnosis: its cause and its verdict.
fn first_cause(r: &RunResult) -> Result<(Limit, String), String> {
    let d = netblast_report::limits::tcp(r).into_iter().next().ok_or("no diagnosis (no kernel limit clocks)")?;
    Ok((d.diagnosis.limit, d.verdict))
}

fn bulk(edit: impl FnOnce(&mut netblast_spec::Profile)) -> Result<netblast_spec::Profile, String> {
    profile("bulk-1flow", |p| {
        p.run.duration = Some(Dur(RUN));
        p.run.interval = Some(Dur(Duration::from_millis(500)));
        edit(p);
    })
}

fn sh(ns: &str, args: &[&str]) -> Result<(), String> {
    let st = std::process::Command::new("ip")
        .args(["netns", "exec", ns])
        .args(args)
        .status()
        .map_err(|e| format!("{}: {e}", args[0]))?;
    if st.success() { Ok(()) } else { Err(format!("{} failed in {ns}", args.join(" "))) }
}

/// Spins on `cpu` until dropped: a busy CPU made on purpose.
struct Spinner {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Spinner {
    fn on(cpu: usize) -> Spinner {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            // SAFETY: a zeroed cpu_set_t is valid; CPU_SET and sched_setaffinity(0, ...) act on
            // this thread only.
            unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu, &mut set);
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
            }
            while !flag.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
        Spinner { stop, thread: Some(thread) }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The TCP causes, on a namespace pair (a sends to b).
fn tcp_causes() -> Result<(), String> {
    let ns = Pair::create()?;
    let server = ServerIn::start(&ns.b)?;
    let port = server.port;
    let target = SocketAddr::from((ns.addr_b, port));
    let a = ns.a.clone();
    let run_in_a = move |p: netblast_spec::Profile| inside(&a, move || run(target, p)).and_then(|r| r);
    let result = (|| -> Result<(), String> {
        five("asked_rate", "-b 300M on a veth pair: held at the rate asked", || {
            let r = run_in_a(bulk(|p| {
                if let Some(b) = p.workload.bulk_mut() {
                    b.bitrate = Some(BitRate(300e6));
                }
            })?)?;
            let (limit, v) = first_cause(&r)?;
            Ok((limit == Limit::AskedRate, v))
        })?;
        let dev_a = format!("{}v", ns.a);
        sh(
            &ns.a,
            &["tc", "qdisc", "add", "dev", &dev_a, "root", "tbf", "rate", "200mbit", "burst", "64kb", "limit", "8mb"],
        )?;
        let shaped = five("congestion", "tbf 200 Mbit/s on the sender's link: congestion window or path", || {
            let r = run_in_a(bulk(|_| {})?)?;
            let (limit, v) = first_cause(&r)?;
            Ok((limit == Limit::Congestion, v))
        });
        sh(&ns.a, &["tc", "qdisc", "del", "dev", &dev_a, "root"])?;
        shaped?;
        ns.nft(&ns.b, "add table inet nbv")?;
        ns.nft(&ns.b, "add chain inet nbv input { type filter hook input priority 0 ; }")?;
        ns.nft(&ns.b, &format!("add rule inet nbv input tcp dport {port} numgen random mod 100 < 3 drop"))?;
        // 3%: at 1% a microsecond path still carries 20 Gbit/s and more, its sender's CPU the
        // limit (the verdict then says so, rightly); at 3% the losses hold it to a few.
        let lossy = five("loss", "3% of segments dropped by nftables: the path drops", || {
            let r = run_in_a(bulk(|_| {})?)?;
            let (limit, v) = first_cause(&r)?;
            // A microsecond path's RTT stays flat: loss without a queue.
            Ok((limit == Limit::Congestion && (v.contains("loss without a queue") || v.contains("the path drops")), v))
        });
        ns.nft(&ns.b, "delete table inet nbv")?;
        lossy?;
        let cpu = netblast_engine::os::sys::allowed_cpus().ok().and_then(|c| c.first().copied()).unwrap_or(0);
        five("sender_cpu", "a spinner on the sender's CPU: CPU limited", || {
            let _busy = Spinner::on(cpu);
            let r = run_in_a(bulk(|_| {})?)?;
            let (limit, v) = first_cause(&r)?;
            Ok((limit == Limit::SenderCpu && v.contains(&format!("CPU {cpu} at")), v))
        })?;
        ns.nft(&ns.b, "add table inet nbv")?;
        ns.nft(&ns.b, "add chain inet nbv input { type filter hook input priority 0 ; }")?;
        let rule = "add rule inet nbv input tcp flags & (syn | ack) == syn numgen random mod 100 < 5 counter drop";
        ns.nft(&ns.b, rule)?;
        let rate: netblast_spec::units::Rate = "2k".parse().map_err(|e| format!("{e}"))?;
        let syns = five("cps_syn_drops", "5% of SYNs dropped by nftables, cps at 2k/s: SYNs retransmitted", || {
            let p = profile("cps", |p| {
                p.run.duration = Some(Dur(Duration::from_secs(2)));
                if let Some(c) = p.workload.cps_mut() {
                    c.flows = Some(4);
                    c.rate = Some(rate);
                }
            })?;
            let r = run_in_a(p)?;
            let v = netblast_report::verdict::of_kind(&r).into_iter().next().unwrap_or_default();
            Ok((v.contains("SYNs were retransmitted"), v))
        });
        ns.nft(&ns.b, "delete table inet nbv")?;
        syns
    })();
    drop(server);
    drop(ns);
    result
}

/// A small send buffer and a small receive buffer, on a path with a 10 ms round trip (the delay
/// line): the only place either is the cause. On a microsecond path a 16 KB window still carries
/// tens of Gbit/s, and a fast machine's sender CPU, not the window, sets the rate (CI found a
/// run at 24.9 Gbit/s with the sender's CPU 96% busy, rightly named).
fn delayed_causes() -> Result<(), String> {
    let wanted = ["send_buffer", "receiver_window"];
    if !wanted.iter().any(|n| truth::wanted(&format!("truth.verdict.{n}"))) {
        return Ok(());
    }
    let ns = Pair::delayed(Duration::from_millis(5))?;
    std::thread::sleep(Duration::from_millis(300));
    // The server, then the namespaces, go on every exit (drop order: reverse of declaration).
    let server = ServerIn::start(&ns.b)?;
    let target = SocketAddr::from((ns.addr_b, server.port));
    let a = ns.a.clone();
    let run_in_a = move |p: netblast_spec::Profile| inside(&a, move || run(target, p)).and_then(|r| r);
    let two_s = |edit: fn(&mut netblast_spec::Profile)| {
        bulk(|p| {
            p.run.duration = Some(Dur(Duration::from_secs(2)));
            edit(p);
        })
    };
    five("send_buffer", "--sndbuf 16K over a 10 ms round trip: send buffer", || {
        let r = run_in_a(two_s(|p| p.tcp.sndbuf = Some(netblast_spec::units::ByteSize(16 * 1024)))?)?;
        let (limit, v) = first_cause(&r)?;
        Ok((limit == Limit::SendBuffer, v))
    })?;
    sh(&ns.b, &["sysctl", "-qw", "net.ipv4.tcp_rmem=4096 16384 16384"])?;
    let small = five(
        "receiver_window",
        "the receiver's tcp_rmem capped at 16 KB over a 10 ms round trip: receiver window",
        || {
            let r = run_in_a(two_s(|_| {})?)?;
            let (limit, v) = first_cause(&r)?;
            Ok((limit == Limit::ReceiverWindow && v.contains("tcp_rmem"), v))
        },
    );
    sh(&ns.b, &["sysctl", "-qw", "net.ipv4.tcp_rmem=4096 131072 6291456"])?;
    small
}

/// HTTP answers the server refuses, and a cps rate one flow cannot keep, on loopback.
fn loopback_causes(server: &LocalServer) -> Result<(), String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let http = netblast_agent::Background::http(listener, None, Default::default(), 1).map_err(|e| e.to_string())?;
    let addr = http.addr();
    five("http_failures", "half the answers 400: the failed share first", || {
        let p = profile("http-max", |p| {
            p.run.duration = Some(Dur(RUN));
            if let Some(h) = p.workload.http_mut() {
                h.connections = 4;
                h.urls = vec!["/".into(), "/?status=400".into()];
            }
        })?;
        let r = run(addr, p)?;
        let v = netblast_report::verdict::of_kind(&r).into_iter().next().unwrap_or_default();
        Ok((v.starts_with("HTTP: requests failed") && v.contains("[400]"), v))
    })?;
    five("cps_behind", "one flow at --rate 200k: behind its schedule", || {
        let rate: netblast_spec::units::Rate = "200k".parse().map_err(|e| format!("{e}"))?;
        let p = profile("cps", |p| {
            p.run.duration = Some(Dur(RUN));
            if let Some(c) = p.workload.cps_mut() {
                c.flows = Some(1);
                c.rate = Some(rate);
            }
        })?;
        let r = run(server.addr, p)?;
        let v = netblast_report::verdict::of_kind(&r).into_iter().next().unwrap_or_default();
        Ok((v.contains("behind the schedule"), v))
    })
}

/// Every `truth.verdict.*` check that can run here.
pub fn truth_verdicts(server: &LocalServer) -> Result<(), String> {
    loopback_causes(server)?;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        for name in
            ["asked_rate", "congestion", "loss", "receiver_window", "sender_cpu", "cps_syn_drops", "send_buffer"]
        {
            truth::skip(&format!("truth.verdict.{name}"), "needs root (network namespaces, tc, nftables)");
        }
        return Ok(());
    }
    tcp_causes()?;
    delayed_causes()
}
