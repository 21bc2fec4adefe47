//! A cps test against any TCP listener, with no `netblast serve` on the other side (a web
//! server, a load balancer's address, a firewall in front of a server): the client's flows
//! dial the target themselves, and the client counts alone.
//!
//! Its part in each step of the [`sequence`]: set-up makes the exchange once (what is sent
//! and read, the TLS configuration) and one pinned worker per flow; collecting releases an
//! interval as soon as every worker reported it (there is no server to wait for) until every
//! worker is done; the result has no server host, no server figures, no server CPU.

use crate::exec::api::{ClientError, Live, Measured, RunOptions};
use crate::exec::collect::Collector;
use crate::exec::generator::{Ending, Generator};
use crate::exec::start::Started;
use crate::exec::worker::{Ctx, Event, EventTx, RunFlags, StartGate, Timing};
use crate::kinds::cps::any::Agentless as Exchange;
use crate::measure::aggregate::{Aggregator, KindInfo};
use crate::os::{sockopt, sys};
use crate::run::client::{DRAIN_GRACE, START_LEAD};
use crate::run::sequence::sequence;
use netblast_probe::Probe;
use netblast_spec::plan::{self, stream_setups};
use netblast_spec::result::{ClockInfo, HostInfo, Interval, Plan, RunResult, StreamInfo};
use std::net::SocketAddr;
use std::sync::{Arc, mpsc};
use std::time::Duration;

/// Runs a cps test with no agent against `peer` (the plan's target, resolved): set up
/// (`Agentless::set_up`), then the [`sequence`].
pub fn run(
    plan: &Plan,
    peer: SocketAddr,
    probe: &Probe,
    flags: &Arc<RunFlags>,
    opts: &RunOptions,
    live: &mut dyn FnMut(Live<'_>),
) -> Result<RunResult, ClientError> {
    let (g, rx) = Agentless::set_up(plan, peer, probe, flags, opts)?;
    sequence(plan, g, rx, flags, live)
}

/// A cps test with no agent from its set-up to its result: the flows' workers, and the
/// aggregator that releases an interval once every worker reported it.
struct Agentless<'a> {
    plan: &'a Plan,
    peer: SocketAddr,
    probe: &'a Probe,
    probe_stats_at_start: Option<(u64, u64)>,
    clock: ClockInfo,
    flags: &'a Arc<RunFlags>,
    test_id: String,
    gate: Arc<StartGate>,
    handles: Vec<std::thread::JoinHandle<()>>,
    infos: Vec<StreamInfo>,
    agg: Aggregator,
    /// There is no server to show.
    server: HostInfo,
}

impl<'a> Agentless<'a> {
    /// Sets the test up: the exchange (what is sent and read, the TLS configuration), the
    /// probe (attached by `run`), one pinned worker per flow at a shut gate.
    fn set_up(
        plan: &'a Plan,
        peer: SocketAddr,
        probe: &'a Probe,
        flags: &'a Arc<RunFlags>,
        opts: &RunOptions,
    ) -> Result<(Agentless<'a>, mpsc::Receiver<(usize, Event)>), ClientError> {
        let c = plan.profile.workload.cps().ok_or_else(|| ClientError::Setting("not a cps profile".into()))?;
        let host = plan::split_host_port(&plan.target).map_or("", |(h, _)| h);
        let any = Exchange::new(c, peer, host).map_err(ClientError::Setting)?;
        let setups = stream_setups(plan);
        sys::ensure_fds(setups.len() as u64 * 2 + 64).map_err(ClientError::Fds)?;
        let probe_stats_at_start = probe.run_stats();
        let test = netblast_wire::wire::TestId::random();
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
        let mut agg = Aggregator::new(infos.clone(), handles.len(), KindInfo::of(&plan.profile.workload));
        // No server reports: an interval is whole once every worker reported it.
        agg.server_gone();
        for n in &plan.notes {
            agg.warn(0.0, "plan", n.clone());
        }
        let g = Agentless {
            plan,
            peer,
            probe,
            probe_stats_at_start,
            clock: opts.clock,
            flags,
            test_id: test.to_string(),
            gate,
            handles,
            infos,
            agg,
            server: HostInfo::default(),
        };
        Ok((g, rx))
    }
}

impl Generator for Agentless<'_> {
    const LEAD: Duration = START_LEAD;

    fn gate(&self) -> Arc<StartGate> {
        self.gate.clone()
    }

    fn test_id(&self) -> String {
        self.test_id.clone()
    }

    fn shown(&self) -> (&HostInfo, &[StreamInfo]) {
        (&self.server, &self.infos)
    }

    fn abandon(&mut self) {
        self.gate.cancel();
        self.handles.drain(..).for_each(|h| drop(h.join()));
    }

    fn stop(&mut self, rx: &mpsc::Receiver<(usize, Event)>, live: &mut dyn FnMut(Live<'_>)) {
        self.flags.abort();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
        while let Ok((w, ev)) = rx.try_recv() {
            for iv in self.agg.on_worker(w, ev) {
                live(Live::Interval(&iv));
            }
        }
    }

    /// The result: no server host, no server figures, no server CPU.
    fn result(mut self, started: &Started, end: Ending, live: &mut dyn FnMut(Live<'_>)) -> RunResult {
        let agg = &mut self.agg;
        agg.load.client = end.load;
        if let Some(at) = end.interrupted_at {
            agg.error(at, "client", "interrupted by the user");
        }
        let (last, summary) = agg.finish(end.cpu);
        for iv in &last {
            live(Live::Interval(iv));
        }
        let local_address =
            sockopt::source_address(self.peer, &self.plan.bind).map(|a| a.to_string()).unwrap_or_default();
        let envelope = started.envelope(
            self.test_id.clone(),
            self.clock,
            local_address,
            None,
            self.probe.info_since(self.probe_stats_at_start),
            None,
        );
        let measured = Measured {
            complete: agg.errors.is_empty() && agg.all_streams_clean(),
            errors: agg.errors.clone(),
            warnings: agg.warnings.clone(),
            streams: std::mem::take(&mut self.infos),
            intervals: agg.intervals().to_vec(),
            summary,
        };
        envelope.result(self.plan, measured)
    }
}

/// The workers' events into the aggregator until every worker is done (or gone).
impl Collector for Agentless<'_> {
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
