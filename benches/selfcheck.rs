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

use netblast_benches::{figure, profile, run, run_with, LocalServer};
use netblast_spec::hist::{self, EncodedHistogram};
use netblast_spec::units::Dur;
use std::time::{Duration, Instant};

fn secs() -> Duration {
    let s: f64 = std::env::var("NETBLAST_BENCH_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(3.0);
    Duration::from_secs_f64(s)
}

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
    figure("msgrate.tcp.1flow.segs_per_s", m.segs_out_per_s.unwrap_or(0.0), "/s", "TCP segments those messages became");
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

/// The fleet coordinator against simulated agents (`NETBLAST_BENCH_FLEET_AGENTS`, default
/// 1000): its CPU while every agent streams an interval frame per second.
fn fleet_scale(server: &LocalServer) -> Result<(), String> {
    // The coordinator's last step: folding each agent's final result into the fleet's.
    let p = profile("latency", |p| {
        p.run.duration = Some(Dur(Duration::from_secs(3)));
    })?;
    let one = run(server.addr, p)?;
    let folds = 50;
    let t = Instant::now();
    let mut acc = netblast_spec::merge::merge(&[("0", &one)]).map_err(|e| e.to_string())?;
    for _ in 1..folds {
        acc = netblast_spec::merge::merge(&[("acc", &acc), ("next", &one)]).map_err(|e| e.to_string())?;
    }
    figure(
        "fleet.merge_per_result_ms",
        t.elapsed().as_secs_f64() / folds as f64 * 1e3,
        "ms",
        &format!("fold one agent's final result ({} intervals, rr) into the fleet's", one.intervals.len()),
    );
    let agents: usize = std::env::var("NETBLAST_BENCH_FLEET_AGENTS").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    let secs = secs().as_secs().max(12);
    let r = netblast_benches::fleet_sim::run(agents, secs)?;
    figure(
        &format!("fleet.coordinator_cpu_{agents}_agents"),
        r.coordinator_cpus * 100.0,
        "% of a CPU",
        &format!(
            "{:.0} interval frames/s ({:.1} MB/s) streamed by {agents} agents, logged and counted; target < 10%",
            r.frames as f64 / r.window_s,
            r.frame_bytes as f64 / r.window_s / 1e6
        ),
    );
    figure(
        "fleet.coordinator_cpu_per_frame",
        r.coordinator_cpus * r.window_s / r.frames.max(1) as f64 * 1e6,
        "us",
        "coordinator CPU per interval frame (read, decode, log, live totals)",
    );
    figure(
        "fleet.rss_growth_while_streaming",
        r.rss_growth as f64 / 1e6,
        "MB",
        &format!("process memory growth over {:.0} s of streaming (bounded: near 0)", r.window_s),
    );
    figure(
        "fleet.setup_s",
        r.setup_s,
        "s",
        &format!("{agents} registrations, 16 clock exchanges each, orders, 2 s lead"),
    );
    Ok(())
}

fn main() {
    // `cargo bench -- <section>...` runs only those sections (bulk, msgrate, http, probe,
    // histogram, fleet); `--bench` is always passed and ignored.
    let only: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let want = |section: &str| only.is_empty() || only.iter().any(|o| section.starts_with(o.as_str()));
    if !only.is_empty() && !["bulk", "msgrate", "http", "probe", "histogram", "fleet"].iter().any(|s| want(s)) {
        eprintln!("no section matches {only:?}: sections are bulk, msgrate, http, probe, histogram, fleet");
        std::process::exit(2);
    }
    let cpus = netblast_engine::sys::allowed_cpus().map(|c| c.len()).unwrap_or(1) as u32;
    println!("netblast self-check on loopback ({cpus} CPUs, client and server on the same host)");
    let server = match LocalServer::start() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cannot start a local server: {e}");
            std::process::exit(1);
        }
    };
    let mut failed = false;
    if want("bulk") {
        for flows in [1, cpus.max(2)] {
            if let Err(e) = bulk(&server, flows) {
                eprintln!("bulk {flows} flows: {e}");
                failed = true;
            }
        }
    }
    let cpu_list = netblast_engine::sys::allowed_cpus().unwrap_or_default();
    if want("msgrate") {
        if let Err(e) = msgrate(&server, &cpu_list) {
            eprintln!("msgrate/rr: {e}");
            failed = true;
        }
    }
    if want("http") {
        if let Err(e) = http_figures(cpu_list.len()) {
            eprintln!("http: {e}");
            failed = true;
        }
    }
    if want("probe") {
        if let Err(e) = probe_overhead(&server) {
            eprintln!("probe: {e}");
            failed = true;
        }
    }
    if want("histogram") {
        histogram_merge();
    }
    if want("fleet") {
        if let Err(e) = fleet_scale(&server) {
            eprintln!("fleet: {e}");
            failed = true;
        }
    }
    drop(server);
    if failed {
        std::process::exit(1);
    }
}
