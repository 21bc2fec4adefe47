//! Latency probes beside a test (`--latency-probe`): a paced rr flow of its own against the
//! same server, started a whole number of reporting intervals before the load (the idle
//! phase) on the same interval boundaries, and stopped once the load's result is in.
//!
//! The probe is a second test on the server: its own control connection, stream, worker
//! thread (pinned to a CPU the load's workers do not use, where there is one) and run flags;
//! its traffic is in none of the load's figures. Its intervals are split at the load's start
//! and end ([`LatencyProbeResult::build`]) into the result's `latency_probe`.

use crate::exec::api::{ClientError, Live, RunOptions};
use crate::exec::clock;
use crate::exec::worker::RunFlags;
use netblast_probe::Probe;
use netblast_spec::profile::{LatencyProbe, Profile, RrSection, RunSection, Workload};
use netblast_spec::result::{Interval, LatencyProbeResult, Plan, ProbeInterval, ProbeSpan, RunResult};
use netblast_spec::units::{CpuList, Dur, Rate};
use std::net::SocketAddr;
use std::sync::{Arc, mpsc};
use std::time::Duration;

/// Least time from now to the probe's start.
const PROBE_SETUP: Duration = LatencyProbe::SETUP;

/// What the probe's thread tells the test's.
enum FromProbe {
    /// The probe started.
    Started,
    /// One of its intervals.
    Interval(Box<Interval>),
}

/// Runs `plan` with latency probes beside it (`lp`): the probe set up and started, the load
/// started `lp.idle()` later (or at the plan's start instant, the probe that much before it),
/// the probe stopped after the load, its figures in the result's `latency_probe`.
pub fn run(
    plan: &Plan,
    peer: SocketAddr,
    probe: &Probe,
    flags: &Arc<RunFlags>,
    opts: &RunOptions,
    live: &mut dyn FnMut(Live<'_>),
    lp: &LatencyProbe,
) -> Result<RunResult, ClientError> {
    let interval = plan.profile.run.interval();
    let (probe_start, idle) = start_instants(plan.start_at_unix_ns, lp.idle(), interval)?;
    let mut load = plan.clone();
    load.start_at_unix_ns = Some(probe_start + idle.as_nanos() as u64);
    let mut probe_plan = probe_plan(plan, lp, idle, peer)?;
    probe_plan.start_at_unix_ns = Some(probe_start);
    let pflags = RunFlags::new();
    let (tx, rx) = mpsc::channel::<FromProbe>();
    let thread = {
        let (pflags, opts) = (pflags.clone(), opts.clone());
        std::thread::Builder::new()
            .name("netblast-latency-probe".into())
            .spawn(move || {
                let tcp_info = Probe::tcp_info();
                crate::run::client::run(&probe_plan, peer, &tcp_info, &pflags, &opts, &mut |l| {
                    let _ = tx.send(match l {
                        Live::Started { .. } => FromProbe::Started,
                        Live::Interval(iv) => FromProbe::Interval(Box::new(iv.clone())),
                        Live::Probe(_) => return,
                    });
                })
            })
            .map_err(|e| ClientError::Io { what: "cannot start the latency probe's thread".into(), error: e })?
    };
    // The load is set up once the probe has started: a probe that cannot start stops the run.
    let idle_s = idle.as_secs_f64();
    let mut pending: Vec<Box<Interval>> = Vec::new();
    loop {
        match rx.recv() {
            Ok(FromProbe::Started) => break,
            Ok(FromProbe::Interval(iv)) => pending.push(iv),
            Err(_) => {
                let e =
                    thread.join().map_err(|_| ClientError::Setting("the latency probe's thread panicked".into()))?;
                return Err(e.err().unwrap_or_else(|| ClientError::Setting("the latency probe ended at once".into())));
            }
        }
    }
    let mut shown = 0;
    let outcome = crate::run::run_load(&load, peer, probe, flags, opts, &mut |l| {
        live(l);
        // Probe lines follow the load's: the idle phase's at the start, then as they come.
        pending.extend(rx.try_iter().filter_map(|m| match m {
            FromProbe::Interval(iv) => Some(iv),
            FromProbe::Started => None,
        }));
        for iv in pending.drain(..) {
            live(Live::Probe(&live_interval(&iv, idle_s)));
            shown += 1;
        }
    });
    pflags.stop();
    let probe_outcome = thread.join();
    let mut result = outcome?;
    let span = ProbeSpan {
        protocol: lp.protocol.name().into(),
        rate_per_s: lp.rate(),
        idle_s,
        omit_s: plan.profile.run.omit().as_secs_f64(),
        load_end_s: result.intervals.last().map(|iv| iv.end_s).unwrap_or(0.0),
    };
    let built = match probe_outcome {
        Ok(Ok(p)) => {
            let lost = p.summary.ways.iter().filter_map(|w| w.msgs.as_ref()).filter_map(|m| m.lost).sum();
            let errors: Vec<String> = p.errors.iter().map(|e| format!("{}: {}", e.source, e.message)).collect();
            LatencyProbeResult::build(&span, &p.intervals, lost, errors)
        }
        Ok(Err(e)) => LatencyProbeResult::build(&span, &[], 0, vec![e.to_string()]),
        Err(_) => LatencyProbeResult::build(&span, &[], 0, vec!["the latency probe's thread panicked".into()]),
    };
    for e in &built.errors {
        result.warnings.push(netblast_spec::result::RunError {
            at_s: 0.0,
            source: "latency probe".into(),
            message: e.clone(),
        });
    }
    // The probe's last lines, their phases now known (the load's last interval, after it).
    for p in built.intervals.iter().skip(shown) {
        live(Live::Probe(p));
    }
    result.latency_probe = Some(Box::new(built));
    Ok(result)
}

/// The probe's start (UTC ns) and the idle phase before the load's: `idle` before the start
/// instant asked for, or before `idle` after the next interval boundary at least
/// [`PROBE_SETUP`] from now. When a start instant asked for leaves less time than that, the
/// idle phase is shortened by whole intervals; with not even one left, it is an error.
fn start_instants(start_at: Option<u64>, idle: Duration, interval: Duration) -> Result<(u64, Duration), ClientError> {
    let earliest = clock::now_unix_ns() + PROBE_SETUP.as_nanos() as u64;
    let (idle_ns, iv) = (idle.as_nanos() as u64, interval.as_nanos().max(1) as u64);
    match start_at {
        None => Ok((clock::next_boundary(earliest, interval), idle)),
        Some(at) => {
            let want = at.saturating_sub(idle_ns);
            if want >= earliest {
                return Ok((want, idle));
            }
            let short = (earliest - want).div_ceil(iv) * iv;
            if short >= idle_ns {
                return Err(ClientError::Setting(format!(
                    "the start instant leaves no time for the latency probes' idle phase ({} before it, and {} \
                     to set the probe up)",
                    Dur(idle),
                    Dur(PROBE_SETUP)
                )));
            }
            Ok((want + short, Duration::from_nanos(idle_ns - short)))
        }
    }
}

/// The probe's plan: one rr flow at the probe's rate, the load's interval and binding, pinned
/// to a CPU the load's workers leave free (else the last this process may use), bounded by
/// the idle phase, the load's time bound and its drain.
fn probe_plan(plan: &Plan, lp: &LatencyProbe, idle: Duration, peer: SocketAddr) -> Result<Plan, ClientError> {
    let allowed = crate::os::sys::allowed_cpus()
        .map_err(|e| ClientError::Io { what: "cannot read this process's CPU affinity".into(), error: e })?;
    let cpu = allowed
        .iter()
        .copied()
        .find(|c| !plan.client_cpus.contains(c))
        .or_else(|| allowed.last().copied())
        .unwrap_or(0);
    let bound = idle + plan.time_bound.get() + 2 * crate::run::client::DRAIN_GRACE;
    let profile = Profile {
        description: format!("latency probe: 1-byte round trips at {}/s", lp.rate()),
        run: RunSection {
            duration: Some(Dur(bound.min(netblast_spec::profile::MAX_DURATION))),
            interval: Some(Dur(plan.profile.run.interval())),
            cpus: Some(CpuList(vec![cpu])),
            ..Default::default()
        },
        tcp: Default::default(),
        workload: Workload::Rr(RrSection { protocol: lp.protocol, rate: Some(Rate(lp.rate())), ..Default::default() }),
    };
    let (mut p, _) = netblast_spec::plan::plan(profile, "latency probe".into(), &peer.to_string(), &allowed, true)?;
    p.bind = plan.bind.clone();
    Ok(p)
}

/// A probe interval as the live view shows it: on the load's time axis, before the load
/// idle, after that loaded (the load's end is known only at the end).
fn live_interval(iv: &Interval, idle_s: f64) -> ProbeInterval {
    let span = ProbeSpan { protocol: String::new(), rate_per_s: 0.0, idle_s, omit_s: 0.0, load_end_s: f64::MAX };
    ProbeInterval::of(iv, &span).0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_late_start_instant_shortens_the_idle_phase_by_whole_intervals() {
        let s = Duration::from_secs(1);
        let now = clock::now_unix_ns();
        let far = now + 10_000_000_000;
        assert_eq!(start_instants(Some(far), 2 * s, s).unwrap(), (far - 2_000_000_000, 2 * s));
        // 2.2 s ahead with a 2 s idle phase: the probe cannot start 0.2 s from now (set-up).
        let near = now + 2_200_000_000;
        let (ps, idle) = start_instants(Some(near), 2 * s, s).unwrap();
        assert_eq!((ps, idle), (near - 1_000_000_000, s));
        assert!(start_instants(Some(now + 1_200_000_000), s, s).is_err());
        let (ps, idle) = start_instants(None, 3 * s, s).unwrap();
        assert_eq!((ps % 1_000_000_000, idle), (0, 3 * s));
        assert!(ps >= now + PROBE_SETUP.as_nanos() as u64);
    }
}
