//! `fleet.*`: the fleet coordinator at scale, against simulated agents
//! (`netblast_benches::fleet_sim`).

use netblast_benches::{LocalServer, figure, profile, run, secs};
use netblast_spec::units::Dur;
use std::time::Duration;

/// The fleet coordinator against simulated agents, 240 and 1 000 (or
/// `NETBLAST_BENCH_FLEET_AGENTS`): its CPU while every agent streams an interval frame per
/// second, and what taking and merging their final results (a real 3 s rr run's, each under a
/// test id of its own) costs.
pub fn fleet_scale(server: &LocalServer) -> Result<(), String> {
    let p = profile("latency", |p| {
        p.run.duration = Some(Dur(Duration::from_secs(3)));
    })?;
    let one = run(server.addr, p)?;
    let counts: Vec<usize> = match std::env::var("NETBLAST_BENCH_FLEET_AGENTS").ok().and_then(|v| v.parse().ok()) {
        Some(n) => vec![n],
        None => vec![240, 1000],
    };
    let secs = secs().as_secs().max(12);
    for agents in counts {
        let r = netblast_benches::fleet_sim::run(agents, secs, &one)?;
        let target = if agents <= 240 { 10.0 } else { 30.0 };
        figure(
            &format!("fleet.coordinator_cpu_{agents}_agents"),
            r.coordinator_cpus * 100.0,
            "% of a CPU",
            &format!(
                "{:.0} interval frames/s ({:.1} MB/s) streamed by {agents} agents, logged and counted; target < {target:.0}%",
                r.frames as f64 / r.window_s,
                r.frame_bytes as f64 / r.window_s / 1e6
            ),
        );
        figure(
            &format!("fleet.coordinator_cpu_per_frame_{agents}_agents"),
            r.coordinator_cpus * r.window_s / r.frames.max(1) as f64 * 1e6,
            "us",
            "coordinator CPU per interval frame (read, decode, log, live totals)",
        );
        figure(
            &format!("fleet.rss_growth_{agents}_agents"),
            r.rss_growth as f64 / 1e6,
            "MB",
            &format!("process memory growth over {:.0} s of streaming (bounded: near 0)", r.window_s),
        );
        figure(
            &format!("fleet.setup_s_{agents}_agents"),
            r.setup_s,
            "s",
            &format!("{agents} registrations, 16 clock exchanges each, orders, 2 s lead"),
        );
        figure(
            &format!("fleet.finals_s_{agents}_agents"),
            r.fold_s,
            "s",
            &format!(
                "from the last of {agents} final results ({} intervals, rr) sent to the fleet's merged result; target < 1 s \
                 at 240",
                one.intervals.len()
            ),
        );
        figure(
            &format!("fleet.finals_cpu_ms_per_agent_{agents}_agents"),
            r.fold_cpu_s / agents as f64 * 1e3,
            "ms",
            "coordinator CPU per final result, taking it and merging it with the others",
        );
    }
    Ok(())
}
