//! Merging results of tests that ran at the same time, on one host or many, into one result:
//! `netblast merge`, and the fleet coordinator's totals. A pure function of its inputs.
//!
//! - Counters are summed; histograms are added (never percentiles averaged), and two
//!   histograms of different configurations are an error naming both inputs.
//! - Intervals are aligned on the reference clock: input `j` started at `S_j` (its own clock,
//!   corrected by its clock offset); the merged series starts at `T0 = min S_j`, and input `j`'s
//!   interval `i` becomes merged interval `i + (S_j − T0) / I`. An input whose start is not a
//!   whole number of intervals from `T0` within the inputs' clock errors is refused, with why.
//! - Stream ids are renumbered so they are unique in the merged result (input `j`'s from
//!   `parts[j].first_stream` on); every input is kept as a [`Part`] with its own totals.
//! - Merging merged results keeps their parts, so merging is associative (a tree of
//!   coordinators merges like one).
//!
//! A figure that is only known when every input knows it (receiver bytes, spurious
//! retransmissions, CPU of the servers) is `None` in the merge when any input lacks it.

use crate::hist::{self, Distribution, EncodedHistogram, HistError};
use crate::result::{AgentStatus, ClockInfo, ClockSource, Part, RunError, RunResult, SCHEMA, SCHEMA_V2, StreamInfo};

mod base;
mod intervals;
mod summary;

use base::{HistAcc, Place};
pub use base::{Input, MergeError};
use intervals::merge_intervals;
pub use intervals::{fold_short_tail, summary_of_intervals};
use summary::merge_summaries;
pub use summary::parts_summary;

/// Extra slack for alignment beyond the clock errors: the conversion of a wall-clock start to
/// the monotonic clock is exact to well under this.
pub const ALIGN_SLACK_NS: u64 = 1_000;

impl<'a> HistAcc<'a> {
    fn new(what: &'a str) -> HistAcc<'a> {
        HistAcc { what, h: hist::HistSum::default(), from: String::new() }
    }

    fn add(&mut self, input: &str, e: Option<&EncodedHistogram>) -> Result<(), MergeError> {
        let Some(e) = e else { return Ok(()) };
        let err = |a: &str, detail: HistError| MergeError::Histogram {
            what: self.what.to_string(),
            a: a.to_string(),
            b: input.to_string(),
            detail: detail.to_string(),
        };
        let h = e.decode().map_err(|d| err(input, d))?;
        let first = self.h.histogram().is_none();
        self.h.add_owned(h).map_err(|d| err(&self.from, d))?;
        if first {
            self.from = input.to_string();
        }
        Ok(())
    }

    /// Adds a distribution's histogram, when it has one.
    fn add_dist(&mut self, input: &str, d: Option<&Distribution>) -> Result<(), MergeError> {
        self.add(input, d.and_then(|d| d.hist.as_ref()))
    }

    fn distribution(&self) -> Option<Distribution> {
        self.h.distribution()
    }

    fn encoded(&self) -> Option<EncodedHistogram> {
        self.h.encoded()
    }
}

/// Checks that the inputs can merge (this schema, one kind, one interval); each one's start on
/// the reference clock, and its clock.
fn reference_starts(inputs: &[Input<'_>]) -> Result<Vec<(i128, ClockInfo)>, MergeError> {
    let (first_name, first) = *inputs.first().ok_or(MergeError::Empty)?;
    let interval = first.plan.profile.run.interval();
    let kind = first.plan.profile.kind();
    let mut refs = Vec::with_capacity(inputs.len());
    for &(name, r) in inputs {
        let Some(start) = r.start_unix_ns.filter(|_| r.schema == SCHEMA || r.schema == SCHEMA_V2) else {
            return Err(MergeError::Schema { input: name.to_string(), schema: r.schema.clone() });
        };
        if r.plan.profile.kind() != kind {
            return Err(MergeError::Kind {
                a: first_name.to_string(),
                a_kind: kind.name().into(),
                b: name.to_string(),
                b_kind: r.plan.profile.kind().name().into(),
            });
        }
        if r.plan.profile.run.interval() != interval {
            return Err(MergeError::Interval {
                a: first_name.to_string(),
                a_ms: interval.as_secs_f64() * 1e3,
                b: name.to_string(),
                b_ms: r.plan.profile.run.interval().as_secs_f64() * 1e3,
            });
        }
        let clock = r.clock.unwrap_or_default();
        refs.push((clock.to_reference(start), clock));
    }
    Ok(refs)
}

/// Where each input sits: its interval offset from the earliest start (which must be a whole
/// number of intervals, within the clocks' errors), its first stream id and part index.
fn places(inputs: &[Input<'_>], refs: &[(i128, ClockInfo)]) -> Result<Vec<Place>, MergeError> {
    let interval = inputs[0].1.plan.profile.run.interval();
    let interval_ns = interval.as_nanos() as i128;
    let (t0_idx, &(t0, t0_clock)) = refs.iter().enumerate().min_by_key(|(_, (s, _))| *s).expect("non-empty");
    let mut places = Vec::with_capacity(inputs.len());
    let (mut next_stream, mut next_part) = (0u32, 0u32);
    for (j, &(name, r)) in inputs.iter().enumerate() {
        let (s, clock) = refs[j];
        let delta = s - t0;
        let offset = (delta + interval_ns / 2) / interval_ns;
        let residual = (delta - offset * interval_ns).unsigned_abs();
        let allowed = clock.error_ns as u128 + t0_clock.error_ns as u128 + ALIGN_SLACK_NS as u128;
        if residual > allowed {
            return Err(MergeError::Unaligned {
                input: name.to_string(),
                reference: inputs[t0_idx].0.to_string(),
                residual_ms: residual as f64 / 1e6,
                allowed_ms: allowed as f64 / 1e6,
            });
        }
        let offset = u32::try_from(offset).unwrap_or(u32::MAX);
        places.push(Place {
            offset,
            shift_s: offset as f64 * interval.as_secs_f64(),
            first_stream: next_stream,
            first_part: next_part,
        });
        next_stream += r.streams.iter().map(|s| s.id + 1).max().unwrap_or(0);
        next_part += r.parts.len().max(1) as u32;
    }
    Ok(places)
}

/// The inputs' streams (renumbered), parts (one per plain input, the parts of merged ones),
/// agents, errors and warnings (tagged with the input's name).
#[derive(Default)]
struct Members {
    streams: Vec<StreamInfo>,
    parts: Vec<Part>,
    agents: Vec<AgentStatus>,
    errors: Vec<RunError>,
    warnings: Vec<RunError>,
}

impl Members {
    /// Adds input `r` (named `name`) placed at `p`.
    fn add(&mut self, name: &str, r: &RunResult, p: Place) {
        let (start_local, clock) = (r.start_unix_ns.unwrap_or(0), r.clock.unwrap_or_default());
        for s in &r.streams {
            let part = p.first_part + s.part.unwrap_or(0);
            self.streams.push(StreamInfo { id: s.id + p.first_stream, part: Some(part), ..s.clone() });
        }
        if r.parts.is_empty() {
            self.parts.push(Part {
                agent: r.agent.clone().unwrap_or_default(),
                peer: r.plan.aimed_at(),
                test_id: r.test_id.clone(),
                start_unix_ns: start_local,
                clock,
                interval_offset: p.offset,
                first_stream: p.first_stream,
                streams: r.streams.len() as u32,
                complete: r.complete,
                client: Some(r.client.clone()),
                server: r.server.clone(),
                profile: Some(r.plan.profile.clone()),
                summary: r.summary.clone(),
                latency_probe: r.latency_probe.as_ref().map(|p| Box::new(p.totals())),
            });
        } else {
            self.parts.extend(r.parts.iter().map(|q| Part {
                interval_offset: q.interval_offset + p.offset,
                first_stream: q.first_stream + p.first_stream,
                profile: Some(q.profile.clone().unwrap_or_else(|| r.plan.profile.clone())),
                ..q.clone()
            }));
        }
        if r.agents.is_empty() {
            self.add_client(name, r, p, clock);
        } else {
            let shift = |a: &AgentStatus| AgentStatus {
                parts: a.parts.iter().map(|k| k + p.first_part).collect(),
                ..a.clone()
            };
            self.agents.extend(r.agents.iter().map(shift));
        }
        let tag = |e: &RunError| RunError { source: format!("{name}: {}", e.source), ..e.clone() };
        self.errors.extend(r.errors.iter().map(tag));
        self.warnings.extend(r.warnings.iter().map(tag));
    }

    /// A plain input's client as an agent (one per client: its parts gathered).
    fn add_client(&mut self, name: &str, r: &RunResult, p: Place, clock: ClockInfo) {
        let agent = r.agent.clone().unwrap_or_default();
        let status = if r.complete { "ok" } else { "partial" };
        match self.agents.iter_mut().find(|a| a.agent == agent && a.role == "client") {
            Some(a) => {
                a.parts.push(p.first_part);
                if !r.complete {
                    a.status = status.into();
                }
            }
            None => self.agents.push(AgentStatus {
                agent,
                role: "client".into(),
                clock,
                // When its gate really opened, as it recorded it: a result without it (before
                // it was recorded) has no actual start, and no skew is claimed from its plan.
                actual_start_unix_ns: r.actual_start_unix_ns.and_then(|a| u64::try_from(clock.to_reference(a)).ok()),
                status: status.into(),
                why: (!r.complete).then(|| format!("{name}: incomplete run")),
                parts: vec![p.first_part],
                summary: None,
            }),
        }
    }
}

/// A merged result's id: `merge-of-N-ID`, N the tests in it (a merged input counts its parts),
/// ID the first test's own id (never a chain of `merge-of-` prefixes).
fn merged_id(inputs: &[(&str, &RunResult)]) -> String {
    let tests: usize = inputs.iter().map(|(_, r)| r.parts.len().max(1)).sum();
    let mut base = inputs.first().map(|(_, r)| r.test_id.as_str()).unwrap_or("");
    while let Some(rest) = base.strip_prefix("merge-of-") {
        base = rest.split_once('-').map(|(_, b)| b).unwrap_or(rest);
    }
    format!("merge-of-{tests}-{base}")
}

/// Merges results of concurrent tests into one: aligned on the reference clock, counters and
/// histograms added, streams renumbered, each input kept as a part.
pub fn merge(inputs: &[Input<'_>]) -> Result<RunResult, MergeError> {
    let refs = reference_starts(inputs)?;
    crate::sums::check(inputs).map_err(MergeError::Sums)?;
    let places = places(inputs, &refs)?;
    let first = inputs[0].1;
    let names: Vec<&str> = inputs.iter().map(|(n, _)| *n).collect();
    let intervals = merge_intervals(inputs, &places)?;
    let summary = merge_summaries(&names, &inputs.iter().map(|(_, r)| &r.summary).collect::<Vec<_>>(), &places)?;
    let mut m = Members::default();
    for (j, &(name, r)) in inputs.iter().enumerate() {
        m.add(name, r, places[j]);
    }
    let mut plan = first.plan.clone();
    // A part keeps its profile only where it is not the plan's.
    for part in &mut m.parts {
        if part.profile.as_ref() == Some(&plan.profile) {
            part.profile = None;
        }
    }
    if inputs.iter().any(|(_, r)| r.plan.profile != first.plan.profile) {
        plan.notes.push("the merged tests ran different profiles; this plan is the first one's (see parts)".into());
    }
    let source = if refs.iter().all(|(_, c)| c.source == ClockSource::Local) {
        ClockSource::Local
    } else {
        ClockSource::Coordinator
    };
    let t0_ns = u64::try_from(refs.iter().map(|(s, _)| *s).min().unwrap_or(0)).unwrap_or(0);
    let mut out = RunResult {
        // Each input's own actual start is its agent's (in its part): a merge has no one gate.
        clock: Some(ClockInfo { source, offset_ns: 0, error_ns: 0 }),
        complete: inputs.iter().all(|(_, r)| r.complete),
        errors: m.errors,
        warnings: m.warnings,
        client: first.client.clone(),
        server: first.server.clone(),
        server_probe: first.server_probe.clone(),
        parts: m.parts,
        agents: m.agents,
        // The inputs' label when they share one (the agents of one labelled fleet).
        label: first.label.clone().filter(|l| inputs.iter().all(|(_, r)| r.label.as_ref() == Some(l))),
        ..RunResult::new(merged_id(inputs), t0_ns, plan, first.probe.clone(), m.streams, intervals, summary)
    };
    out.latency_probe = merged_probes(inputs).map(Box::new);
    fill_agent_summaries(&mut out)?;
    Ok(out)
}

/// The inputs' latency probes as one (see [`crate::result::LatencyProbeResult::merge`]): an
/// input that is itself merged brings its merged probes.
fn merged_probes(inputs: &[Input<'_>]) -> Option<crate::result::LatencyProbeResult> {
    let all: Vec<(&str, &crate::result::LatencyProbeResult)> =
        inputs.iter().filter_map(|(n, r)| Some((*n, r.latency_probe.as_deref()?))).collect();
    crate::result::LatencyProbeResult::merge(&all)
}

/// Gives every agent of a merged result without one its own summary: the merge of its parts.
pub fn fill_agent_summaries(r: &mut RunResult) -> Result<(), MergeError> {
    let mut sums = Vec::with_capacity(r.agents.len());
    for a in &r.agents {
        sums.push(match &a.summary {
            Some(_) => None,
            None => parts_summary(r, &a.parts)?,
        });
    }
    for (a, s) in r.agents.iter_mut().zip(sums) {
        if s.is_some() {
            a.summary = s;
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::profile::Profile;
    use crate::profile::Way;
    use crate::result::{
        CpuSummary, HostInfo, Interval, MsgInterval, MsgTotals, Plan, ProbeInfo, SCHEMA_V1, SideTotal, StreamInterval,
        StreamSummary, Summary, WayInterval, WaySummary, per_second,
    };
    use crate::units::Dur;
    use hdrhistogram::Histogram;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// One stream in one interval: bytes moved and round-trip samples (ns).
    #[derive(Debug, Clone)]
    pub(crate) struct Cell {
        pub(crate) bytes: u64,
        pub(crate) lat: Vec<u64>,
    }

    /// Samples of one test: interval index -> stream id -> cell.
    pub(crate) type Samples = BTreeMap<u32, BTreeMap<u32, Cell>>;

    const SECOND: u64 = 1_000_000_000;
    const T0: u64 = 1_800_000_000 * SECOND;

    fn hist_of<'a>(vals: impl Iterator<Item = &'a u64>) -> Histogram<u64> {
        let mut h = hist::new_latency_histogram();
        for v in vals {
            hist::record_ns(&mut h, *v);
        }
        h
    }

    fn dist(h: &Histogram<u64>) -> Option<Distribution> {
        (!h.is_empty()).then(|| Distribution::of(h))
    }

    /// A result as the engine would build it from these samples: 1 s intervals from
    /// `start_ns`, every stream up, the receiver reading what was sent.
    pub(crate) fn build(samples: &Samples, start_ns: u64, agent: &str) -> RunResult {
        let (profile, origin) = Profile::load("latency").unwrap();
        let ids: Vec<u32> = {
            let mut v: Vec<u32> = samples.values().flat_map(|m| m.keys().copied()).collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        let mut intervals = Vec::new();
        for (&i, cells) in samples {
            let streams: Vec<StreamInterval> = cells
                .iter()
                .map(|(&id, c)| {
                    let h = hist_of(c.lat.iter());
                    StreamInterval {
                        id,
                        sent_bytes: c.bytes,
                        received_bytes: Some(c.bytes),
                        msgs: Some(MsgInterval {
                            sent: c.lat.len() as u64,
                            received: Some(c.lat.len() as u64),
                            ..Default::default()
                        }),
                        latency: dist(&h),
                        ..Default::default()
                    }
                })
                .collect();
            let h = hist_of(cells.values().flat_map(|c| c.lat.iter()));
            let bytes: u64 = cells.values().map(|c| c.bytes).sum();
            let msgs: u64 = cells.values().map(|c| c.lat.len() as u64).sum();
            intervals.push(Interval {
                index: i,
                start_s: i as f64,
                end_s: i as f64 + 1.0,
                streams,
                sums: vec![WayInterval {
                    way: Way::Up,
                    sent_bytes: bytes,
                    sent_bits_per_s: bytes as f64 * 8.0,
                    received_bytes: Some(bytes),
                    received_bits_per_s: Some(bytes as f64 * 8.0),
                    retransmits: Some(0),
                    msgs: Some(MsgInterval {
                        sent: msgs,
                        sent_per_s: Some(msgs as f64),
                        received: Some(msgs),
                        received_per_s: Some(msgs as f64),
                        ..Default::default()
                    }),
                    latency: dist(&h),
                }],
                http: None,
            });
        }
        let secs = samples.keys().max().map(|m| *m as f64 + 1.0).unwrap_or(0.0);
        let stream_sums: Vec<StreamSummary> = ids
            .iter()
            .map(|&id| {
                let cells: Vec<&Cell> = samples.values().filter_map(|m| m.get(&id)).collect();
                let bytes = cells.iter().map(|c| c.bytes).sum();
                let h = hist_of(cells.iter().flat_map(|c| c.lat.iter()));
                StreamSummary {
                    id,
                    way: Way::Up,
                    sender: SideTotal::new(bytes, secs),
                    receiver: Some(SideTotal::new(bytes, secs)),
                    retransmits: Some(0),
                    spurious_retransmits: None,
                    tcp: None,
                    msgs: None,
                    latency: dist(&h),
                    kernel_rtt: None,
                    tcp_info: None,
                    client_cpu: None,
                    server_cpu: None,
                }
            })
            .collect();
        let all = hist_of(samples.values().flat_map(|m| m.values()).flat_map(|c| c.lat.iter()));
        let bytes: u64 = samples.values().flat_map(|m| m.values()).map(|c| c.bytes).sum();
        let msgs: u64 = samples.values().flat_map(|m| m.values()).map(|c| c.lat.len() as u64).sum();
        RunResult {
            schema: SCHEMA.into(),
            netblast_version: "test".into(),
            test_id: agent.into(),
            started_at: String::new(),
            start_unix_ns: Some(start_ns),
            actual_start_unix_ns: None,
            clock: Some(ClockInfo::default()),
            agent: Some(crate::result::AgentInfo { hostname: agent.into(), id: agent.into(), address: String::new() }),
            complete: true,
            errors: Vec::new(),
            warnings: Vec::new(),
            plan: Plan {
                origin,
                target: String::new(),
                peer: String::new(),
                client_cpus: vec![0],
                server_cpus: Vec::new(),
                notes: Vec::new(),
                time_bound: Dur(std::time::Duration::from_secs(10)),
                start_at_unix_ns: None,
                bind: Default::default(),
                profile,
            },
            client: HostInfo::default(),
            server: None,
            probe: ProbeInfo {
                tcp_source: "off".into(),
                fallback_reason: None,
                kernel_run_ns: None,
                kernel_runs: None,
            },
            server_probe: None,
            streams: ids
                .iter()
                .map(|&id| StreamInfo {
                    id,
                    way: Way::Up,
                    local: String::new(),
                    remote: String::new(),
                    client_cpu: 0,
                    server_cpu: None,
                    part: None,
                    socket: None,
                })
                .collect(),
            intervals,
            summary: Summary {
                duration_s: secs,
                ways: vec![WaySummary {
                    way: Way::Up,
                    streams: ids.len() as u32,
                    sender: SideTotal::new(bytes, secs),
                    receiver: Some(SideTotal::new(bytes, secs)),
                    retransmits: Some(0),
                    spurious_retransmits: None,
                    rtt: None,
                    rtt_hist: None,
                    cwnd_max_bytes: 0,
                    msgs: Some(MsgTotals {
                        sent: msgs,
                        sent_per_s: per_second(msgs as f64, secs),
                        received: Some(msgs),
                        received_per_s: Some(per_second(msgs as f64, secs)),
                        ..Default::default()
                    }),
                    latency: dist(&all),
                    retransmit_rate: None,
                    kernel_rtt: None,
                    limits: None,
                }],
                streams: stream_sums,
                cpu: CpuSummary::default(),
                http: None,
                load: Default::default(),
            },
            parts: Vec::new(),
            agents: Vec::new(),
            asserts: Vec::new(),
            label: None,
            find_max: None,
            latency_probe: None,
            server_output: Vec::new(),
        }
    }

    fn cell() -> impl Strategy<Value = Cell> {
        (0u64..1 << 40, proptest::collection::vec(1u64..50_000_000_000, 0..24))
            .prop_map(|(bytes, lat)| Cell { bytes, lat })
    }

    /// One test: its start (whole intervals after T0), its streams' cells per interval.
    fn test_samples() -> impl Strategy<Value = (u32, Samples)> {
        (0u32..4, 1usize..4, 1usize..6).prop_flat_map(|(offset, streams, intervals)| {
            proptest::collection::vec(proptest::collection::vec(cell(), streams), intervals).prop_map(move |grid| {
                let s: Samples = grid
                    .into_iter()
                    .enumerate()
                    .map(|(i, row)| (i as u32, row.into_iter().enumerate().map(|(k, c)| (k as u32, c)).collect()))
                    .collect();
                (offset, s)
            })
        })
    }

    fn decoded(d: &Option<Distribution>) -> Option<Histogram<u64>> {
        d.as_ref().and_then(|d| d.hist.as_ref()).map(|e| e.decode().unwrap())
    }

    fn summary(d: &Option<Distribution>) -> Option<&crate::hist::LatencySummary> {
        d.as_deref()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 100, ..ProptestConfig::default() })]

        #[test]
        fn merging_equals_the_union_of_the_samples(tests in proptest::collection::vec(test_samples(), 1..5)) {
            let inputs: Vec<RunResult> = tests
                .iter()
                .enumerate()
                .map(|(j, (off, s))| build(s, T0 + *off as u64 * SECOND, &format!("agent{j}")))
                .collect();
            let named: Vec<(String, &RunResult)> = inputs.iter().enumerate().map(|(j, r)| (format!("in{j}"), r)).collect();
            let refs: Vec<Input<'_>> = named.iter().map(|(n, r)| (n.as_str(), *r)).collect();
            let merged = merge(&refs).unwrap();

            // The union: every sample at its absolute interval, streams renumbered as merge does.
            let t0_off = tests.iter().map(|(o, _)| *o).min().unwrap();
            let mut union: Samples = BTreeMap::new();
            let mut base = 0u32;
            for (off, s) in &tests {
                let n = s.values().map(|m| m.len() as u32).max().unwrap_or(0);
                for (i, cells) in s {
                    for (id, c) in cells {
                        union.entry(i + off - t0_off).or_default().insert(base + id, c.clone());
                    }
                }
                base += n;
            }
            let truth = build(&union, T0 + t0_off as u64 * SECOND, "union");

            prop_assert_eq!(merged.intervals.len(), truth.intervals.len());
            for (m, t) in merged.intervals.iter().zip(&truth.intervals) {
                prop_assert_eq!(m.index, t.index);
                prop_assert_eq!((m.start_s, m.end_s), (t.start_s, t.end_s), "same wall-clock span");
                let (ms, ts) = (&m.sums[0], &t.sums[0]);
                prop_assert_eq!(ms.sent_bytes, ts.sent_bytes);
                prop_assert_eq!(ms.received_bytes, ts.received_bytes);
                prop_assert_eq!(ms.msgs.as_ref().map(|m| m.sent), ts.msgs.as_ref().map(|m| m.sent));
                prop_assert_eq!(decoded(&ms.latency), decoded(&ts.latency));
                prop_assert_eq!(summary(&ms.latency), summary(&ts.latency), "every percentile equal");
                let ids = |iv: &Interval| iv.streams.iter().map(|s| (s.id, s.sent_bytes)).collect::<BTreeMap<_, _>>();
                prop_assert_eq!(ids(m), ids(t));
            }
            let (mw, tw) = (&merged.summary.ways[0], &truth.summary.ways[0]);
            prop_assert_eq!(mw.sender.bytes, tw.sender.bytes);
            prop_assert_eq!(mw.receiver.map(|r| r.bytes), tw.receiver.map(|r| r.bytes));
            prop_assert_eq!(mw.msgs.map(|m| m.sent), tw.msgs.map(|m| m.sent));
            prop_assert_eq!(decoded(&mw.latency), decoded(&tw.latency));
            prop_assert_eq!(summary(&mw.latency), summary(&tw.latency));
            prop_assert_eq!(merged.summary.streams.len(), truth.summary.streams.len());
            for (m, t) in merged.summary.streams.iter().zip(&truth.summary.streams) {
                prop_assert_eq!((m.id, m.sender.bytes), (t.id, t.sender.bytes));
                prop_assert_eq!(decoded(&m.latency), decoded(&t.latency));
            }
            prop_assert_eq!(merged.parts.len(), inputs.len());
            prop_assert_eq!(merged.start_unix_ns, Some(T0 + t0_off as u64 * SECOND));
            // Merging is associative: merging the merge of the first inputs with the rest.
            if inputs.len() > 2 {
                let head = merge(&refs[..2]).unwrap();
                let mut again: Vec<Input<'_>> = vec![("head", &head)];
                again.extend_from_slice(&refs[2..]);
                let m2 = merge(&again).unwrap();
                prop_assert_eq!(decoded(&m2.summary.ways[0].latency), decoded(&mw.latency));
                prop_assert_eq!(m2.summary.ways[0].sender.bytes, mw.sender.bytes);
                prop_assert_eq!(m2.parts.len(), merged.parts.len());
            }
        }
    }

    fn one(cells: &[(u32, u64)]) -> Samples {
        let mut s = Samples::new();
        for (i, b) in cells {
            s.entry(*i).or_default().insert(0, Cell { bytes: *b, lat: vec![1000] });
        }
        s
    }

    #[test]
    fn start_skew_is_from_the_starts_results_record_and_unknown_without_them() {
        // Found by a user: a merge of two --start-at runs stated "start skew 0.00 ns" from
        // their planned starts, the only ones results carried.
        let (mut a, mut b) = (build(&one(&[(0, 1)]), T0, "a"), build(&one(&[(0, 1)]), T0, "b"));
        let m = merge(&[("a.json", &a), ("b.json", &b)]).unwrap();
        assert!(m.agents.iter().all(|x| x.actual_start_unix_ns.is_none()), "no skew is claimed from plans");
        a.actual_start_unix_ns = Some(T0 + 40_000);
        // b's clock runs 200 us ahead of the reference: its planned start reads 200 us later
        // on it, and its actual start is 200 us earlier on the reference.
        b.start_unix_ns = Some(T0 + 200_000);
        b.actual_start_unix_ns = Some(T0 + 1_250_000);
        b.clock = Some(ClockInfo { source: ClockSource::Coordinator, offset_ns: 200_000, error_ns: 10 });
        let m = merge(&[("a.json", &a), ("b.json", &b)]).unwrap();
        let starts: Vec<u64> = m.agents.iter().filter_map(|x| x.actual_start_unix_ns).collect();
        assert_eq!(starts, vec![T0 + 40_000, T0 + 1_050_000]);
    }

    #[test]
    fn inputs_off_the_grid_are_refused_with_the_reason() {
        let a = build(&one(&[(0, 1)]), T0, "a");
        let b = build(&one(&[(0, 1)]), T0 + SECOND / 3, "b");
        let e = merge(&[("a.json", &a), ("b.json", &b)]).unwrap_err().to_string();
        assert!(e.contains("b.json") && e.contains("333.333 ms off") && e.contains("a.json"), "{e}");
        // Within the clock errors it is accepted.
        let mut b2 = b.clone();
        b2.clock = Some(ClockInfo { source: ClockSource::Coordinator, offset_ns: 0, error_ns: SECOND / 2 });
        assert!(merge(&[("a.json", &a), ("b.json", &b2)]).is_ok());
        // A clock offset moves the start onto the grid.
        let mut b3 = b.clone();
        b3.clock = Some(ClockInfo { source: ClockSource::Coordinator, offset_ns: (SECOND / 3) as i64, error_ns: 0 });
        let m = merge(&[("a.json", &a), ("b.json", &b3)]).unwrap();
        assert_eq!(m.intervals.len(), 1);
        assert_eq!(m.clock.unwrap().source, ClockSource::Coordinator);
    }

    #[test]
    fn other_schemas_kinds_intervals_and_histograms_are_refused() {
        let a = build(&one(&[(0, 1)]), T0, "a");
        // Each an other test (the same test twice is refused on its own).
        let a2 = |id: &str| RunResult { test_id: id.into(), ..a.clone() };
        let mut v2 = a2("v2");
        v2.schema = SCHEMA_V2.into();
        assert!(merge(&[("a", &a), ("v2.json", &v2)]).is_ok(), "a /2 result merges");
        let mut v1 = a2("v1");
        v1.schema = SCHEMA_V1.into();
        v1.start_unix_ns = None;
        assert!(merge(&[("a", &a), ("old.json", &v1)]).unwrap_err().to_string().contains("old.json"));
        let mut bulk = a2("bulk");
        bulk.plan.profile = Profile::load("bulk-1flow").unwrap().0;
        assert!(matches!(merge(&[("a", &a), ("b", &bulk)]), Err(MergeError::Kind { .. })));
        let mut slow = a2("slow");
        slow.plan.profile.run.interval = Some("2s".parse().unwrap());
        assert!(matches!(merge(&[("a", &a), ("b", &slow)]), Err(MergeError::Interval { .. })));
        let mut other = a2("other");
        let h = Histogram::<u64>::new_with_bounds(1, 1_000_000, 2).unwrap();
        other.summary.ways[0].latency.as_mut().unwrap().hist = Some(EncodedHistogram::encode(&h).unwrap());
        let e = merge(&[("a.json", &a), ("c.json", &other)]).unwrap_err().to_string();
        assert!(e.contains("a.json") && e.contains("c.json") && e.contains("configuration"), "{e}");
        assert_eq!(merge(&[]).unwrap_err(), MergeError::Empty);
    }

    #[test]
    fn a_total_past_u64_and_a_test_given_twice_are_refused_naming_the_input_and_field() {
        // Found in the audit: a sender count of 2^64 - 1 wrapped the total below one part, and
        // the same file given twice was accepted and doubled.
        let a = build(&one(&[(0, 5)]), T0, "a");
        let mut b = build(&one(&[(0, 7)]), T0, "b");
        b.summary.ways[0].sender.bytes = u64::MAX;
        let e = merge(&[("a.json", &a), ("b.json", &b)]).unwrap_err().to_string();
        assert!(e.contains("b.json") && e.contains("summary.ways.sender.bytes") && e.contains("2^64"), "{e}");
        let e = merge(&[("a.json", &a), ("again.json", &a)]).unwrap_err().to_string();
        assert!(e.contains("a.json") && e.contains("again.json") && e.contains("twice"), "{e}");
        // A merged result already holds its parts' tests.
        let b = build(&one(&[(0, 7)]), T0, "b");
        let ab = merge(&[("a.json", &a), ("b.json", &b)]).unwrap();
        let e = merge(&[("ab.json", &ab), ("b.json", &b)]).unwrap_err().to_string();
        assert!(e.contains("ab.json") && e.contains("b.json"), "{e}");
        // Instants are not counters: many results of one day add.
        let many: Vec<RunResult> = (0..12).map(|i| build(&one(&[(0, 1)]), T0, &format!("t{i}"))).collect();
        let inputs: Vec<(&str, &RunResult)> = many.iter().map(|r| ("r", r)).collect();
        assert!(merge(&inputs).is_ok());
    }

    #[test]
    fn totals_taken_one_at_a_time_refuse_what_a_merge_refuses_and_keep_nothing_refused() {
        use crate::sums::{SumError, Totals};
        let a = build(&one(&[(0, 5)]), T0, "a");
        let b = build(&one(&[(0, 7)]), T0, "b");
        let mut big = build(&one(&[(0, 7)]), T0, "big");
        big.summary.ways[0].sender.bytes = u64::MAX;
        let mut t = Totals::default();
        t.add("a", &a).unwrap();
        let twice = t.add("again", &a).unwrap_err();
        assert_eq!(twice, SumError::Twice { a: "a".into(), b: "again".into(), test_id: a.test_id.clone() });
        let over = t.add("big", &big).unwrap_err();
        assert!(
            matches!(&over, SumError::Overflow { input, field } if input == "big" && field == "summary.ways.sender.bytes")
        );
        // Neither refusal was taken: b still fits, and is taken.
        t.add("b", &b).unwrap();
        // The merge names the same input to leave out.
        assert_eq!(merge(&[("a", &a), ("big", &big)]).unwrap_err().input(), Some("big"));
        assert_eq!(merge(&[("a", &a), ("again", &a)]).unwrap_err().input(), Some("again"));
        let mut slow = build(&one(&[(0, 7)]), T0, "slow");
        slow.plan.profile.run.interval = Some("2s".parse().unwrap());
        assert_eq!(merge(&[("a", &a), ("slow", &slow)]).unwrap_err().input(), Some("slow"));
        assert_eq!(MergeError::Empty.input(), None);
    }

    #[test]
    fn a_figure_one_input_lacks_is_unknown_in_the_merge() {
        let a = build(&one(&[(0, 5)]), T0, "a");
        let mut b = build(&one(&[(0, 7)]), T0, "b");
        b.summary.ways[0].receiver = None;
        b.intervals[0].sums[0].received_bytes = None;
        let m = merge(&[("a", &a), ("b", &b)]).unwrap();
        assert_eq!(m.summary.ways[0].sender.bytes, 12);
        assert_eq!(m.summary.ways[0].receiver, None);
        assert_eq!(m.intervals[0].sums[0].received_bytes, None);
        assert_eq!(m.agents.len(), 2);
        let own = |i: usize| m.agents[i].summary.as_ref().unwrap().ways[0].sender.bytes;
        assert_eq!((own(0), own(1)), (5, 7), "each agent carries its own totals");
        assert_eq!(m.streams.iter().map(|s| (s.id, s.part)).collect::<Vec<_>>(), [(0, Some(0)), (1, Some(1))]);
    }
}
