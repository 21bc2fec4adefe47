//! A cps test against any TCP listener, with no `netblast serve` on the other side (a web
//! server, a load balancer's address, a firewall in front of a server): the client's flows
//! dial the target themselves, and the client counts alone.
//!
//! 1. Set the exchange up once (what is sent and read, the TLS configuration).
//! 2. Spawn one pinned worker per flow; at the start instant open the start gate.
//! 3. Gather the workers' intervals (each released as soon as every worker reported it: there
//!    is no server to wait for) until every worker is done.
//! 4. Build the result: no server host, no server figures, no server CPU.

use crate::exec::api::{ClientError, Live, Measured, RunOptions};
use crate::exec::collect::{Collector, collect};
use crate::exec::worker::{Ctx, Event, EventTx, RunFlags, StartGate, Timing};
use crate::kinds::cps::any::Agentless;
use crate::measure::aggregate::{Aggregator, KindInfo};
use crate::os::{sockopt, sys};
use crate::run::client::{DRAIN_GRACE, START_LEAD};
use netblast_probe::Probe;
use netblast_spec::plan::{self, stream_setups};
use netblast_spec::result::{HostInfo, Interval, Plan, RunResult, StreamInfo};
use std::net::SocketAddr;
use std::sync::{Arc, mpsc};
use std::time::Duration;

/// Runs a cps test with no agent against `peer` (the plan's target, resolved).
pub fn run(
    plan: &Plan,
    peer: SocketAddr,
    probe: &Probe,
    flags: &Arc<RunFlags>,
    opts: &RunOptions,
    live: &mut dyn FnMut(Live<'_>),
) -> Result<RunResult, ClientError> {
    let c = plan.profile.workload.cps().ok_or_else(|| ClientError::Setting("not a cps profile".into()))?;
    let host = plan::split_host_port(&plan.target).map_or("", |(h, _)| h);
    let any = Agentless::new(c, peer, host).map_err(ClientError::Setting)?;
    let setups = stream_setups(plan);
    sys::ensure_fds(setups.len() as u64 * 2 + 64).map_err(ClientError::Fds)?;
    let probe_stats_at_start = probe.run_stats();
    let _attached = probe.hold().map_err(|e| ClientError::of_probe("cannot attach the eBPF probe", e))?;
    let test = netblast_wire::wire::TestId::random();
    let test_id = test.to_string();
    let (tx, rx) = mpsc::channel::<(usize, Event)>();
    let sink: EventTx = Arc::new(move |w, ev| {
        let _ = tx.send((w, ev));
    });
    let gate = StartGate::new();
    let ctx = Ctx {
        probe: probe.clone(),
        gate: gate.clone(),
        flags: flags.clone(),
        tx: sink,
        bind: plan.bind.clone(),
        test_id: test.0,
    };
    let bound = plan.time_bound.get();
    let timing = Timing { send_for: bound, give_up_after: bound + DRAIN_GRACE };
    let ids: Vec<u32> = setups.iter().map(|s| s.id).collect();
    let cpus: Vec<usize> = (0..setups.len()).map(|i| plan::client_cpu_of(plan, i, setups.len())).collect();
    let handles = crate::kinds::cps::spawn_agentless(
        c,
        (peer, any),
        (&ids, &cpus),
        (&plan.profile.tcp, plan.profile.run.interval(), timing),
        &ctx,
    )
    .map_err(|e| ClientError::Io { what: "cannot start worker threads".into(), error: e })?;
    let infos: Vec<StreamInfo> = setups
        .iter()
        .zip(&cpus)
        .map(|(s, &cpu)| StreamInfo {
            id: s.id,
            way: s.way,
            local: String::new(),
            remote: peer.to_string(),
            client_cpu: cpu,
            server_cpu: None,
            part: None,
            socket: None,
        })
        .collect();
    let started = match crate::exec::start::begin(plan, START_LEAD, &gate, || Ok(())) {
        Ok(s) => s,
        Err(e) => {
            gate.cancel();
            handles.into_iter().for_each(|h| drop(h.join()));
            return Err(e);
        }
    };
    let server = HostInfo::default();
    let (start_unix_ns, actual_start_unix_ns) = (started.start_unix_ns, started.actual_start_unix_ns);
    live(Live::Started {
        plan,
        test_id: &test_id,
        server: &server,
        streams: &infos,
        start_unix_ns,
        actual_start_unix_ns,
    });
    let mut agg = Aggregator::new(infos.clone(), handles.len(), KindInfo::of(&plan.profile.workload));
    // No server reports: an interval is whole once every worker reported it.
    agg.server_gone();
    for n in &plan.notes {
        agg.warn(0.0, "plan", n.clone());
    }
    let mut g = Gathering { agg, handles: &handles };
    collect(&rx, &mut g, live);
    let mut agg = g.agg;
    let cpu = started.thread_cpu();
    agg.load.client = started.host_load();
    flags.abort();
    for h in handles {
        let _ = h.join();
    }
    while let Ok((w, ev)) = rx.try_recv() {
        for iv in agg.on_worker(w, ev) {
            live(Live::Interval(&iv));
        }
    }
    if flags.interrupted() {
        agg.error(started.elapsed_s(), "client", "interrupted by the user");
    }
    let (last, summary) = agg.finish(cpu);
    for iv in &last {
        live(Live::Interval(iv));
    }
    let local_address = sockopt::source_address(peer, &plan.bind).map(|a| a.to_string()).unwrap_or_default();
    let envelope =
        started.envelope(test_id, opts.clock, local_address, None, probe.info_since(probe_stats_at_start), None);
    let measured = Measured {
        complete: agg.errors.is_empty() && agg.all_streams_clean(),
        errors: agg.errors.clone(),
        warnings: agg.warnings.clone(),
        streams: infos,
        intervals: agg.intervals().to_vec(),
        summary,
    };
    Ok(envelope.result(plan, measured))
}

/// The workers' events into the aggregator until every worker is done (or gone).
struct Gathering<'h> {
    agg: Aggregator,
    handles: &'h [std::thread::JoinHandle<()>],
}

impl Collector for Gathering<'_> {
    type Msg = (usize, Event);

    fn tick(&mut self) -> Option<Duration> {
        (!self.agg.workers_done()).then_some(Duration::from_millis(200))
    }

    fn take(&mut self, (w, ev): (usize, Event)) -> Vec<Interval> {
        self.agg.on_worker(w, ev)
    }

    fn idle(&mut self, gone: bool) -> Option<Vec<Interval>> {
        // A worker that is gone without its end will not send it.
        (!gone && !self.handles.iter().all(|h| h.is_finished())).then(Vec::new)
    }
}
