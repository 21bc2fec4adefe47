//! `cargo bench`: netblast measures itself on loopback and prints one line per figure.
//!
//! Figures: bulk Gbit/s for 1 flow and for one flow per CPU (client and server share this
//! machine, so these are the engine's capacity here, not a network's), Gbit per CPU-second on
//! each side; 1-byte TCP messages/s of one pinned flow and the segments/s they became, UDP
//! datagrams/s with one flow per CPU, rr round-trip latency; HTTP requests/s (closed loop,
//! HTTP/1.1 and HTTPS) and open-loop accuracy at 5000/s against the built-in responder; the
//! eBPF probe's cost (root only); and the cost of merging interval histograms (the aggregator's
//! and the fleet merge's inner operation).
//! Set NETBLAST_BENCH_SECS to change the run length (default 3).

use netblast_benches::baseline;
use netblast_benches::truth::{self};
use netblast_benches::{LocalServer, figure, profile, run, run_with, secs};
use netblast_spec::hist::{self, EncodedHistogram};
use netblast_spec::units::Dur;
use std::time::Instant;

mod fleet_scale;
mod truth_attribution;
mod truth_campaign;
mod truth_capacity;
mod truth_checks;
mod truth_latency;
mod verdicts;

use truth_checks::{truth_merge, truth_namespaces, truth_openloop, truth_pacing, truth_pacing_stall, truth_rtt};

fn bulk(server: &LocalServer, flows: u32) -> Result<(), String> {
    let p = profile("bulk-1flow", |p| {
        p.run.duration = Some(Dur(secs()));
        if let Some(b) = p.workload.bulk_mut() {
            b.flows = flows;
        }
    })?;
    let r = run(server.addr, p)?;
    if !r.complete {
        return Err(format!("bulk {flows} flows incomplete: {:?}", r.errors));
    }
    let w = &r.summary.ways[0];
    let rx = w.receiver.ok_or("no receiver report")?;
    let name = format!("bulk.{flows}flow");
    figure(&format!("{name}.gbps"), rx.bits_per_s / 1e9, "Gbit/s", "receiver throughput on loopback");
    figure(
        &format!("{name}.client_gbit_per_cpu_s"),
        r.summary.cpu.bits_per_client_cpu_s / 1e9,
        "Gbit/CPU-s",
        "client CPU cost",
    );
    if let Some(s) = r.summary.cpu.bits_per_server_cpu_s {
        figure(&format!("{name}.server_gbit_per_cpu_s"), s / 1e9, "Gbit/CPU-s", "server CPU cost");
    }
    Ok(())
}

fn msgrate(server: &LocalServer, cpus: &[usize]) -> Result<(), String> {
    let p = profile("pps-8core", |p| {
        p.run.duration = Some(Dur(secs()));
        p.run.cpus = None;
        if let Some(m) = p.workload.msgrate_mut() {
            m.flows = Some(1);
        }
    })?;
    let r = run(server.addr, p)?;
    let m = r.summary.ways[0].msgs.ok_or("no message totals")?;
    figure("msgrate.tcp.1flow.msgs_per_s", m.sent_per_s / 1e6, "M/s", "1-byte TCP messages, one pinned flow");
    figure(
        "msgrate.tcp.1flow.segs_per_s",
        m.tcp.map_or(0.0, |t| t.segs_out_per_s),
        "/s",
        "TCP segments those messages became",
    );
    let p = profile("pps-udp", |p| {
        p.run.duration = Some(Dur(secs()));
        p.run.cpus = Some(netblast_spec::units::CpuList(cpus.to_vec()));
    })?;
    let r = run(server.addr, p)?;
    let m = r.summary.ways[0].msgs.ok_or("no message totals")?;
    figure("msgrate.udp.per_cpu.sent_per_s", m.sent_per_s / 1e6, "M/s", "1-byte datagrams sent, one flow per CPU");
    figure(
        "msgrate.udp.per_cpu.received_per_s",
        m.received_per_s.unwrap_or(0.0) / 1e6,
        "M/s",
        "datagrams the server received (the rest: kernel drops)",
    );
    figure(
        "msgrate.udp.per_cpu.lost_pct",
        m.lost.unwrap_or(0) as f64 * 100.0 / m.sent.max(1) as f64,
        "%",
        "datagrams lost, per-CPU SO_REUSEPORT receivers (all of them receivers' queue drops on loopback)",
    );
    let spin = cpus.len() >= 2;
    let p = profile("latency", |p| {
        p.run.duration = Some(Dur(secs()));
        if let Some(r) = p.workload.rr_mut() {
            if !spin {
                r.wait = netblast_spec::profile::WaitMode::Block;
            }
        }
    })?;
    let r = run(server.addr, p)?;
    let l = r.summary.ways[0].latency.clone().ok_or("no latency")?;
    let mode = if spin { "spin" } else { "block" };
    figure(
        "rr.tcp.rtt_p50_us",
        l.p50_ns as f64 / 1e3,
        "us",
        &format!("1-byte request/response round trip, wait {mode}"),
    );
    figure("rr.tcp.rtt_p99_us", l.p99_ns as f64 / 1e3, "us", "99th percentile of the same");
    figure("rr.tcp.one_way_mean_us", l.mean_ns / 2e3, "us", "mean round trip / 2 (qperf's latency)");
    let p = profile("cps", |p| p.run.duration = Some(Dur(secs())))?;
    let r = run(server.addr, p)?;
    let w = &r.summary.ways[0];
    let m = w.msgs.ok_or("no connection totals")?;
    figure("cps.per_cpu.conns_per_s", m.sent_per_s / 1e3, "k/s", "new TCP connections, one pinned flow per CPU");
    let l = w.latency.clone().ok_or("no connect latency")?;
    figure("cps.per_cpu.connect_p50_us", l.p50_ns as f64 / 1e3, "us", "connect() to established, median");
    figure("cps.per_cpu.failed", m.lost.unwrap_or(0) as f64, "", "connections that failed");
    Ok(())
}

/// Bulk throughput with the eBPF probe on vs off (interleaved), and the probe's own kernel run
/// time. Needs root and a build with the probe; says so and skips otherwise.
fn probe_overhead(server: &LocalServer) -> Result<(), String> {
    let probe = match netblast_probe::Probe::open_with(netblast_probe::ProbeMode::Ebpf, true) {
        Ok(p) => p,
        Err(e) => {
            println!("{:<36} skipped: {e}", "probe.*");
            return Ok(());
        }
    };
    let off = netblast_probe::Probe::tcp_info();
    let mut ratios = Vec::new();
    let mut core = Vec::new();
    for round in 0..4 {
        let p = || profile("bulk-1flow", |p| p.run.duration = Some(Dur(secs())));
        let (first, second) = if round % 2 == 0 { (&probe, &off) } else { (&off, &probe) };
        let a = run_with(server.addr, p()?, first)?;
        let b = run_with(server.addr, p()?, second)?;
        let (on_r, off_r) = if round % 2 == 0 { (&a, &b) } else { (&b, &a) };
        let bps = |r: &netblast_spec::RunResult| r.summary.ways[0].receiver.map(|x| x.bits_per_s).unwrap_or(0.0);
        ratios.push(bps(on_r) / bps(off_r));
        let ns = on_r.probe.kernel_run_ns.unwrap_or(0) as f64;
        core.push(ns / 1e9 / on_r.summary.duration_s / (bps(on_r) / 1e10));
    }
    ratios.sort_by(f64::total_cmp);
    core.sort_by(f64::total_cmp);
    figure(
        "probe.throughput_on_over_off",
        (ratios[1] + ratios[2]) / 2.0,
        "ratio",
        "bulk 1 flow, eBPF probe on / off (median)",
    );
    figure(
        "probe.cpu_pct_per_10gbit",
        (core[1] + core[2]) / 2.0 * 100.0,
        "% core",
        "probe run time per 10 Gbit/s (loopback)",
    );

    // Short connections: cps with the eBPF probe (one kernel group per flow) against no probe
    // at all, interleaved; connections/s and the client's CPU per connection (the steadier
    // figure where client and server share the CPUs). First the program's own run time per
    // connection (the kernel's BPF statistics: exact, not subject to this host's noise) beside
    // the CPU a connection costs both ends; then the ratios, without BPF run-time statistics,
    // which cost every program run two clock reads.
    let r = run_with(server.addr, profile("cps", |p| p.run.duration = Some(Dur(secs())))?, &probe)?;
    let conns = r.summary.ways[0].msgs.map(|m| m.sent).unwrap_or(0).max(1) as f64;
    let prog_ns = r.probe.kernel_run_ns.unwrap_or(0) as f64 / conns;
    let both_ns = (r.summary.cpu.client.cpu_s() + r.summary.cpu.server.map(|s| s.cpu_s()).unwrap_or(0.0)) * 1e9 / conns;
    figure(
        "probe.cps_kernel_ns_per_conn",
        prog_ns,
        "ns",
        "eBPF program run time per cps connection (both ends' sockets)",
    );
    figure(
        "probe.cps_kernel_cost_pct",
        prog_ns / both_ns.max(1.0) * 100.0,
        "%",
        "that, of the CPU a connection costs client and server (target <= 3)",
    );
    drop(probe);
    let probe = netblast_probe::Probe::open(netblast_probe::ProbeMode::Ebpf).map_err(|e| e.to_string())?;
    let none = netblast_probe::Probe::open(netblast_probe::ProbeMode::Off).map_err(|e| e.to_string())?;
    let (mut rate, mut cpu) = (Vec::new(), Vec::new());
    for round in 0..6 {
        let p = || profile("cps", |p| p.run.duration = Some(Dur(secs())));
        let (first, second) = if round % 2 == 0 { (&probe, &none) } else { (&none, &probe) };
        let a = run_with(server.addr, p()?, first)?;
        let b = run_with(server.addr, p()?, second)?;
        let (on_r, off_r) = if round % 2 == 0 { (&a, &b) } else { (&b, &a) };
        let conns = |r: &netblast_spec::RunResult| r.summary.ways[0].msgs.map(|m| m.sent_per_s).unwrap_or(0.0);
        let cpu_per = |r: &netblast_spec::RunResult| {
            let n = r.summary.ways[0].msgs.map(|m| m.sent).unwrap_or(0).max(1) as f64;
            r.summary.cpu.client.cpu_s() / n
        };
        rate.push(conns(on_r) / conns(off_r).max(1e-9));
        cpu.push(cpu_per(on_r) / cpu_per(off_r).max(1e-12));
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    };
    figure(
        "probe.cps_on_over_off",
        median(&mut rate),
        "ratio",
        "cps connections/s, eBPF probe / --probe off (median of 6; target >= 0.97)",
    );
    figure(
        "probe.cps_client_cpu_on_over_off",
        median(&mut cpu),
        "ratio",
        "cps client CPU per connection, eBPF / --probe off (median of 6; target <= 1.03)",
    );
    Ok(())
}

/// HTTP without keep-alive (a connection per request) with the eBPF probe (one kernel group,
/// its connections tied to it by the worker threads that make them: nothing per connection
/// in user space) against `--probe off` and TCP_INFO, interleaved: requests/s, CPU per
/// request, and the program's run time per connection.
fn probe_http_no_keepalive(cpus: usize) -> Result<(), String> {
    let probe = match netblast_probe::Probe::open_with(netblast_probe::ProbeMode::Ebpf, true) {
        Ok(p) => p,
        Err(e) => {
            println!("{:<36} skipped: {e}", "probe.http_*");
            return Ok(());
        }
    };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let responder =
        netblast_agent::Background::http(listener, None, Default::default(), cpus).map_err(|e| e.to_string())?;
    let p = || {
        profile("http-max", |p| {
            p.run.duration = Some(Dur(secs()));
            if let Some(h) = p.workload.http_mut() {
                h.keepalive = false;
                h.connections = 8;
            }
        })
    };
    let requests = |r: &netblast_spec::RunResult| r.summary.http.as_ref().map(|h| h.completed).unwrap_or(0);
    let r = run_with(responder.addr(), p()?, &probe)?;
    let conns = r.summary.http.as_ref().and_then(|h| h.tcp.as_ref()).map(|t| t.connections).unwrap_or(0).max(1);
    let prog_ns = r.probe.kernel_run_ns.unwrap_or(0) as f64 / conns as f64;
    // The responder runs in this process: the client's CPU figure is both ends'.
    let both_ns = r.summary.cpu.client.cpu_s() * 1e9 / requests(&r).max(1) as f64;
    figure(
        "probe.http_nokeepalive_kernel_ns_per_conn",
        prog_ns,
        "ns",
        "eBPF program run time per HTTP connection (one request each)",
    );
    figure(
        "probe.http_nokeepalive_kernel_cost_pct",
        prog_ns / both_ns.max(1.0) * 100.0,
        "%",
        "that, of the CPU a request costs client and responder (target <= 3)",
    );
    drop(probe);
    let probe = netblast_probe::Probe::open(netblast_probe::ProbeMode::Ebpf).map_err(|e| e.to_string())?;
    let none = netblast_probe::Probe::open(netblast_probe::ProbeMode::Off).map_err(|e| e.to_string())?;
    let info = netblast_probe::Probe::tcp_info();
    let (mut rate, mut cpu, mut cpu_info) = (Vec::new(), Vec::new(), Vec::new());
    let per_s = |r: &netblast_spec::RunResult| r.summary.http.as_ref().map(|h| h.responses_per_s).unwrap_or(0.0);
    let cpu_per = |r: &netblast_spec::RunResult| r.summary.cpu.client.cpu_s() / requests(r).max(1) as f64;
    for round in 0..6 {
        // eBPF, off and TCP_INFO in a rotating order.
        let order = [[0, 1, 2], [1, 2, 0], [2, 0, 1]][round % 3];
        let mut got: [Option<netblast_spec::RunResult>; 3] = [None, None, None];
        for i in order {
            let which = [&probe, &none, &info][i];
            got[i] = Some(run_with(responder.addr(), p()?, which)?);
        }
        let [Some(on_r), Some(off_r), Some(info_r)] = &got else { return Err("a run is missing".into()) };
        rate.push(per_s(on_r) / per_s(off_r).max(1e-9));
        cpu.push(cpu_per(on_r) / cpu_per(off_r).max(1e-12));
        cpu_info.push(cpu_per(info_r) / cpu_per(off_r).max(1e-12));
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    };
    figure(
        "probe.http_nokeepalive_on_over_off",
        median(&mut rate),
        "ratio",
        "HTTP --no-keepalive requests/s, eBPF probe / --probe off (median of 6; target >= 0.97)",
    );
    figure(
        "probe.http_nokeepalive_cpu_on_over_off",
        median(&mut cpu),
        "ratio",
        "client and responder CPU per request, eBPF / --probe off (median of 6; target <= 1.03)",
    );
    figure(
        "probe.http_nokeepalive_cpu_tcpinfo_over_off",
        median(&mut cpu_info),
        "ratio",
        "the same with TCP_INFO only (each connection's figures at close, no eBPF)",
    );
    Ok(())
}

/// HTTP against the built-in responder (in this process, on its own runtime): closed-loop
/// requests/s over HTTP/1.1, HTTPS and multiplexed HTTP/2, and open-loop accuracy at 5000/s.
fn http_figures(cpus: usize) -> Result<(), String> {
    let bind = || std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string());
    let tls = netblast_agent::http::tls_config(None, vec!["127.0.0.1".into()])?;
    let plain = netblast_agent::Background::http(bind()?, None, Default::default(), cpus).map_err(|e| e.to_string())?;
    let secure =
        netblast_agent::Background::http(bind()?, Some(tls), Default::default(), cpus).map_err(|e| e.to_string())?;
    let (addr, tls_addr) = (plain.addr(), secure.addr());
    let result = (|| {
        for (name, target, tls) in [("http.h1", addr, false), ("http.h1_tls", tls_addr, true)] {
            let p = profile("http-max", |p| {
                p.run.duration = Some(Dur(secs()));
                if let Some(h) = p.workload.http_mut() {
                    h.tls = tls;
                    h.insecure = tls;
                }
            })?;
            let r = run(target, p)?;
            let h = r.summary.http.ok_or("no http summary")?;
            figure(
                &format!("{name}.closed_loop_rps"),
                h.responses_per_s / 1e3,
                "k req/s",
                "50 connections, 45-byte responses, built-in responder",
            );
            figure(&format!("{name}.p99_ms"), h.latency.p99_ns as f64 / 1e6, "ms", "latency p99 of the same");
        }
        let p = profile("http-max", |p| {
            p.run.duration = Some(Dur(secs()));
            if let Some(h) = p.workload.http_mut() {
                h.version = netblast_spec::profile::HttpVersion::Http2;
                h.connections = 4;
                h.streams = 16;
            }
        })?;
        let r = run(addr, p)?;
        let h = r.summary.http.ok_or("no http summary")?;
        figure(
            "http.h2c_4x16.closed_loop_rps",
            h.responses_per_s / 1e3,
            "k req/s",
            "HTTP/2 prior knowledge, 4 connections x 16 streams, built-in responder",
        );
        let p = profile("http-max", |p| {
            p.run.duration = Some(Dur(secs()));
            if let Some(h) = p.workload.http_mut() {
                h.rate = Some(netblast_spec::units::Rate(5000.0));
                h.connections = 20;
            }
        })?;
        let r = run(addr, p)?;
        let h = r.summary.http.ok_or("no http summary")?;
        figure("http.open_loop_5k.achieved_per_s", h.sent_per_s, "req/s", "open loop, target 5000/s");
        figure(
            "http.open_loop_5k.send_lag_p99_us",
            h.phases.send_lag.map(|l| l.p99_ns as f64 / 1e3).unwrap_or(0.0),
            "us",
            "send time behind intended time, p99",
        );
        Ok(())
    })();
    drop((plain, secure));
    result
}

fn histogram_merge() {
    // Interval histograms as a worker produces them: ~100k latency samples spread over 5 decades.
    let mut src = Vec::new();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for _ in 0..64 {
        let mut h = hist::new_latency_histogram();
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            hist::record_ns(&mut h, 1_000 + x % 100_000_000);
        }
        src.push(h);
    }
    let rounds = 2_000;
    let mut total = hist::new_latency_histogram();
    let t = Instant::now();
    for i in 0..rounds {
        hist::merge(&mut total, &src[i % src.len()]).expect("same configuration");
    }
    let per = t.elapsed().as_secs_f64() / rounds as f64;
    figure("hist.merge_us", per * 1e6, "us", "add one interval histogram (100k samples, 3 digits)");
    let t = Instant::now();
    let mut bytes = 0;
    for h in src.iter().take(16) {
        let e = EncodedHistogram::encode(h).expect("encode");
        bytes += e.hdr_v2_deflate_b64.len();
        let d = e.decode().expect("decode");
        assert_eq!(d.len(), h.len());
    }
    figure("hist.codec_roundtrip_us", t.elapsed().as_secs_f64() / 16.0 * 1e6, "us", "encode + decode one histogram");
    figure("hist.encoded_bytes", bytes as f64 / 16.0, "bytes", "V2+DEFLATE+base64 size of one histogram");
}

/// `anchor.*`: the same-run ratios of netblast against the anchor tools that are installed,
/// from the comparison scripts themselves (short: 2 interleaved rounds of 2 s each).
fn anchors() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    // Bulk runs twice: under the host's congestion control and under cubic for both tools
    // (with bbr's internal pacing the ratio on loopback differs; see compare-iperf3.sh).
    let none: &[(&str, &str)] = &[];
    let short = &["2", "2"][..];
    for (tool, needs, script, env, args) in [
        ("iperf3", &["iperf3"][..], "compare-iperf3.sh", none, short),
        ("iperf3_cubic", &["iperf3"][..], "compare-iperf3.sh", &[("CONGESTION", "cubic")][..], short),
        // iperf3 3.21 (scripts/anchors-build.sh) when built, with a --gsro pair; else Debian's.
        ("iperf3_udp", &["iperf3"][..], "compare-udp.sh", none, short),
        ("h2load", &["h2load", "nginx"][..], "compare-h2.sh", none, short),
        // The seeds' own commands: hey -c 250 -n 10000, vegeta at 50/s of 1 MiB (2 s here).
        ("seeds", &["hey", "vegeta", "nginx"][..], "compare-seeds.sh", none, short),
        ("qperf", &["qperf"][..], "compare-qperf.sh", none, short),
        ("wrk", &["wrk", "nginx"][..], "compare-http.sh", none, short),
        ("sockperf", &["sockperf"][..], "compare-sockperf.sh", none, short),
        ("netperf", &["netperf", "netserver"][..], "compare-netperf.sh", none, short),
        // Runs of 1 s and 3 s under callgrind: the instructions of one more operation.
        ("instructions", &["valgrind"][..], "instructions.sh", none, &["1", "3"][..]),
    ] {
        let name = format!("anchor.{tool}");
        if !truth::wanted(&name) && !truth::section_wanted(&name) {
            continue;
        }
        let missing: Vec<&str> = needs
            .iter()
            .copied()
            .filter(|t| {
                !std::process::Command::new("sh")
                    .args(["-c", &format!("command -v {t}")])
                    .output()
                    .is_ok_and(|o| o.status.success())
            })
            .collect();
        if !missing.is_empty() {
            let hint =
                if tool == "netperf" { " (Debian non-free; scripts/compare-netperf.sh adds it as root)" } else { "" };
            println!("{name:<40} skipped: {} not installed{hint}", missing.join(", "));
            continue;
        }
        let out = std::process::Command::new(format!("{root}/scripts/{script}"))
            .args(args)
            .envs(env.iter().copied())
            .output();
        let how: String = env.iter().map(|(k, v)| format!("{k}={v} ")).collect();
        match out {
            Ok(o) if o.status.success() => {
                let text = String::from_utf8_lossy(&o.stdout);
                let found = netblast_benches::anchor::ratios_of(&text);
                if found.is_empty() {
                    eprintln!("{name}: no ratio in the output of {script}");
                }
                for (label, v) in found {
                    figure(
                        &format!("{name}.{label}"),
                        v,
                        "ratio",
                        &format!(
                            "netblast / {}, same run ({how}scripts/{script} {})",
                            if tool == "instructions" { "the tool beside it" } else { tool },
                            args.join(" ")
                        ),
                    );
                }
            }
            Ok(o) => eprintln!(
                "{name}: scripts/{script} failed: {}",
                String::from_utf8_lossy(&o.stderr).lines().last().unwrap_or("")
            ),
            Err(e) => eprintln!("{name}: scripts/{script}: {e}"),
        }
    }
}

/// The bench's options (after `cargo bench --`).
struct Options {
    /// Name prefixes of the lines wanted.
    only: Vec<String>,
    json: String,
    save_baseline: Option<String>,
    baseline: Option<String>,
    fail_on_regression: bool,
    repeat: usize,
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        only: Vec::new(),
        json: target_dir().join("netblast-bench.json").display().to_string(),
        save_baseline: None,
        baseline: None,
        fail_on_regression: false,
        repeat: 0,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |flag: &str| args.next().ok_or_else(|| format!("{flag} needs a value"));
        match a.as_str() {
            "--bench" => {}
            "--json" => o.json = value("--json")?,
            "--save-baseline" => o.save_baseline = Some(value("--save-baseline")?),
            "--baseline" => o.baseline = Some(value("--baseline")?),
            "--fail-on-regression" => o.fail_on_regression = true,
            "--repeat" => {
                let v = value("--repeat")?;
                o.repeat = v.parse().ok().filter(|n| (1..=20).contains(n)).ok_or(format!("--repeat {v}: 1..20"))?;
            }
            f if f.starts_with('-') => {
                return Err(format!(
                    "unknown option {f} (PREFIX..., --json FILE, --save-baseline NAME, --baseline NAME, \
                     --fail-on-regression, --repeat N)"
                ));
            }
            prefix => o.only.push(prefix.to_string()),
        }
    }
    if o.fail_on_regression && o.baseline.is_none() {
        return Err("--fail-on-regression compares with a baseline: add --baseline NAME".into());
    }
    // A saved baseline needs a spread: three repeats unless told.
    if o.repeat == 0 {
        o.repeat = if o.save_baseline.is_some() { 3 } else { 1 };
    }
    Ok(o)
}

/// Where cargo puts its output, and so the bench's JSON and baselines: CARGO_TARGET_DIR when
/// set (relative to the workspace), else the workspace's target/.
fn target_dir() -> std::path::PathBuf {
    let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    root.join(std::env::var_os("CARGO_TARGET_DIR").unwrap_or_else(|| "target".into()))
}

fn main() {
    // `cargo bench -- PREFIX...` keeps the lines whose names start with a prefix (`truth.`,
    // `http.h1`, `bulk`); `--bench` is always passed and ignored. `--json FILE` writes every
    // line (default target/netblast-bench.json).
    let o = match options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("cargo bench: {e}");
            std::process::exit(2);
        }
    };
    truth::set_filter(o.only.clone());
    const SECTIONS: [&str; 8] = ["bulk", "msgrate", "rr", "http", "probe", "hist", "fleet", "anchor"];
    if !o.only.is_empty() && !SECTIONS.iter().chain(["truth"].iter()).any(|s| truth::section_wanted(s)) {
        eprintln!("no figure matches {:?}: names start with truth., {}", o.only, SECTIONS.join("., "));
        std::process::exit(2);
    }
    let target = target_dir();
    let base = match &o.baseline {
        Some(name) => match baseline::load(&baseline::path(&target, name)) {
            Ok(b) => Some(b),
            Err(e) => {
                eprintln!("cargo bench: {e}");
                std::process::exit(2);
            }
        },
        None => None,
    };
    let cpus = netblast_engine::os::sys::allowed_cpus().map(|c| c.len()).unwrap_or(1) as u32;
    println!("netblast self-check on loopback ({cpus} CPUs, client and server on the same host)");
    let server = match LocalServer::start("127.0.0.1:0") {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cannot start a local server: {e}");
            std::process::exit(1);
        }
    };
    let mut failed = false;
    for round in 1..=o.repeat {
        if o.repeat > 1 {
            println!("-- repeat {round} of {}", o.repeat);
        }
        failed |= sections(&server, cpus);
    }
    drop(server);
    let lines = truth::lines();
    if let Err(e) = std::fs::write(&o.json, truth::to_json(&lines)) {
        eprintln!("cannot write {}: {e}", o.json);
    } else {
        eprintln!("every line as JSON: {}", o.json);
    }
    let now = baseline::stats(&lines);
    if o.repeat > 1 {
        println!("-- medians over {} repeats (min..max)", o.repeat);
        for (name, st) in &now {
            println!("{name:<40} {:>12.3} {:<10} {:.3}..{:.3}", st.median, st.unit, st.min, st.max);
        }
    }
    if let Some(name) = &o.save_baseline {
        let file = baseline::path(&target, name);
        match baseline::save(&file, &now) {
            Ok(()) => println!("baseline {name}: {} figures saved to {}", now.len(), file.display()),
            Err(e) => {
                eprintln!("cannot save the baseline: {e}");
                failed = true;
            }
        }
    }
    let mut regressions = 0;
    if let (Some(b), Some(name)) = (&base, &o.baseline) {
        println!("-- against baseline {name} (change beyond both runs' spread and 1% is flagged)");
        println!("{:<40} {:>12} {:>12} {:>8}  verdict", "figure", "base", "now", "change");
        for c in baseline::compare(b, &now) {
            let verdict = match c.verdict {
                baseline::Verdict::WithinNoise => "within noise",
                baseline::Verdict::Better => "better",
                baseline::Verdict::Regression => {
                    regressions += 1;
                    "REGRESSION"
                }
            };
            println!(
                "{:<40} {:>12.3} {:>12.3} {:>+7.1}%  {verdict} (base ±{:.3}, now ±{:.3})",
                c.name,
                c.base.median,
                c.now.median,
                c.pct,
                c.base.half_range(),
                c.now.half_range()
            );
        }
    }
    let checks = lines.iter().filter(|l| matches!(l, truth::Line::Check { .. })).count();
    let bad: Vec<&str> = lines
        .iter()
        .filter_map(|l| match l {
            truth::Line::Check { name, outcome: truth::Outcome::Fail, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    if checks > 0 {
        // The failed names again on the last line: a log cut to its tail still says which.
        let failed_names = if bad.is_empty() { String::new() } else { format!(", FAILED: {}", bad.join(", ")) };
        println!("truth checks: {} of {checks} ok{failed_names}", checks - bad.len());
    }
    if failed {
        std::process::exit(1);
    }
    if o.fail_on_regression && regressions > 0 {
        eprintln!("cargo bench: {regressions} regression(s) beyond the noise (--fail-on-regression)");
        std::process::exit(1);
    }
    std::process::exit(truth::exit_code(&lines));
}

/// Runs every wanted section once; whether one of them could not run.
fn sections(server: &LocalServer, cpus: u32) -> bool {
    let mut failed = false;
    let mut fail = |what: &str, e: String| {
        eprintln!("{what}: {e}");
        failed = true;
    };
    if truth::section_wanted("truth") {
        truth_merge();
        let cpu_list = netblast_engine::os::sys::allowed_cpus().unwrap_or_default();
        if let Err(e) = truth_openloop(cpu_list.len()) {
            fail("truth.openloop", e);
        }
        if truth::section_wanted("truth.pacing") {
            if let Err(e) = truth_pacing(server) {
                fail("truth.pacing", e);
            }
            // SAFETY: geteuid has no preconditions.
            if unsafe { libc::geteuid() } != 0 {
                truth::skip("truth.pacing.after_a_stall", "needs root (network namespaces, nftables)");
            } else if let Err(e) = truth_pacing_stall() {
                fail("truth.pacing.after_a_stall", e);
            }
        }
        if let Err(e) = truth_capacity::truth_find_max(server, cpu_list.len()) {
            fail("truth.find_max, truth.attribution", e);
        }
        if truth::section_wanted("truth.campaign") {
            if let Err(e) = truth_campaign::truth_campaign() {
                fail("truth.campaign", e);
            }
        }
        if truth::section_wanted("truth.verdict") {
            if let Err(e) = verdicts::truth_verdicts(server) {
                fail("truth.verdict", e);
            }
        }
        if truth::section_wanted("truth.latency") || truth::section_wanted("truth.verdict") {
            if let Err(e) = truth_latency::truth_latency() {
                fail("truth.latency", e);
            }
        }
        if truth::section_wanted("truth.rtt") || truth::section_wanted("truth.retransmits") {
            if let Err(e) = truth_rtt(server) {
                fail("truth.rtt", e);
            }
        }
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            for name in [
                "truth.bytes.veth",
                "truth.packets.loopback",
                "truth.packets.pps8core_segments_per_message",
                "truth.loss.udp_datagrams",
                "truth.loss.udp_percent",
                "truth.loss.udp_datagrams_gsro",
                "truth.retransmits.tcp_vs_nstat",
            ] {
                truth::skip(name, "needs root (network namespaces, nftables)");
            }
        } else if ["truth.bytes", "truth.packets", "truth.loss", "truth.retransmits"]
            .iter()
            .any(|s| truth::section_wanted(s))
        {
            if let Err(e) = truth_namespaces() {
                fail("truth (namespaces)", e);
            }
        }
    }
    if truth::section_wanted("bulk") {
        for flows in [1, cpus.max(2)] {
            if let Err(e) = bulk(server, flows) {
                fail(&format!("bulk {flows} flows"), e);
            }
        }
    }
    let cpu_list = netblast_engine::os::sys::allowed_cpus().unwrap_or_default();
    if truth::section_wanted("msgrate") || truth::section_wanted("rr") {
        if let Err(e) = msgrate(server, &cpu_list) {
            fail("msgrate/rr", e);
        }
    }
    if truth::section_wanted("http") {
        if let Err(e) = http_figures(cpu_list.len()) {
            fail("http", e);
        }
    }
    if truth::section_wanted("probe") {
        if let Err(e) = probe_overhead(server) {
            fail("probe", e);
        }
        if let Err(e) = probe_http_no_keepalive(cpu_list.len()) {
            fail("probe.http", e);
        }
    }
    if truth::section_wanted("hist") {
        histogram_merge();
    }
    if truth::section_wanted("fleet") {
        if let Err(e) = fleet_scale::fleet_scale(server) {
            fail("fleet", e);
        }
    }
    if truth::section_wanted("anchor") {
        anchors();
    }
    failed
}
