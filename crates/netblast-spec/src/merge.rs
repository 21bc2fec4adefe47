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
use crate::profile::Way;
use crate::result::per_second;
use crate::result::{
    AgentStatus, ClockInfo, ClockSource, CpuSummary, CpuUsage, HttpConnections, HttpErrorCount, HttpInterval,
    HttpParts, HttpPhases, HttpSummary, HttpTcp, Interval, MsgInterval, MsgTotals, Part, RttSummary, RunError,
    RunResult, StreamInfo, StreamInterval, StreamSummary, Summary, WayInterval, WayParts, WaySummary, SCHEMA,
    SCHEMA_V2,
};
use std::collections::BTreeMap;

/// Why results cannot be merged; every variant names the inputs at fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MergeError {
    /// Nothing to merge.
    #[error("nothing to merge")]
    Empty,
    /// An input of another schema (a /1 result has no absolute start).
    #[error("{input}: schema {schema} cannot be merged (needs {SCHEMA_V2} or later, which records when the run started; rerun with this netblast)")]
    Schema {
        /// The input.
        input: String,
        /// Its schema.
        schema: String,
    },
    /// Two inputs of different kinds.
    #[error("{a} is a {a_kind} test and {b} a {b_kind} test: only results of one kind merge")]
    Kind {
        /// First input.
        a: String,
        /// Its kind.
        a_kind: String,
        /// Second input.
        b: String,
        /// Its kind.
        b_kind: String,
    },
    /// Two inputs with different reporting intervals.
    #[error("{a} reports every {a_ms} ms and {b} every {b_ms} ms: intervals cannot be aligned")]
    Interval {
        /// First input.
        a: String,
        /// Its interval.
        a_ms: f64,
        /// Second input.
        b: String,
        /// Its interval.
        b_ms: f64,
    },
    /// An input's start is not on the others' interval grid within the clock errors.
    #[error(
        "{input} started {residual_ms:.3} ms off the interval grid of {reference} (allowed: {allowed_ms:.3} ms from \
         their clock errors): its intervals cover other wall-clock spans; start runs with the same --start-at, or \
         let them start on the default boundary"
    )]
    Unaligned {
        /// The input.
        input: String,
        /// The input that sets the grid (the earliest start).
        reference: String,
        /// How far off, ms.
        residual_ms: f64,
        /// What the clock errors allow, ms.
        allowed_ms: f64,
    },
    /// A counter that would overflow, or a test given twice.
    #[error("{0}")]
    Sums(crate::sums::SumError),
    /// Two histograms that cannot be added.
    #[error("{what}: {a} and {b} cannot be added: {detail}")]
    Histogram {
        /// Which figure.
        what: String,
        /// First input (or `merged so far`).
        a: String,
        /// Second input.
        b: String,
        /// Why.
        detail: String,
    },
}

/// Extra slack for alignment beyond the clock errors: the conversion of a wall-clock start to
/// the monotonic clock is exact to well under this.
pub const ALIGN_SLACK_NS: u64 = 1_000;

/// One input: a name for messages (a file path, an agent address) and the result.
pub type Input<'a> = (&'a str, &'a RunResult);

/// Encoded histograms of the inputs being added (a [`hist::HistSum`]), with the name of the
/// inputs so far for error messages.
struct HistAcc<'a> {
    what: &'a str,
    h: hist::HistSum,
    from: String,
}

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

/// `Some(sum)` when every value is known.
fn sum_all(v: impl Iterator<Item = Option<u64>>) -> Option<u64> {
    v.sum()
}

/// `Some(sum of the known)` when any value is known.
fn sum_any(v: impl Iterator<Item = Option<u64>>) -> Option<u64> {
    v.fold(None, |acc, x| match (acc, x) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    })
}

/// Where input `j` sits in the merged result.
#[derive(Debug, Clone, Copy)]
struct Place {
    /// Merged index of its interval 0.
    offset: u32,
    /// Its start, seconds after T0 (= offset × interval).
    shift_s: f64,
    /// Its stream ids are renumbered from here.
    first_stream: u32,
    /// Index of its first part in the merged parts.
    first_part: u32,
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
        probe: first.probe.clone(),
        server_probe: first.server_probe.clone(),
        parts: m.parts,
        agents: m.agents,
        // The inputs' label when they share one (the agents of one labelled fleet).
        label: first.label.clone().filter(|l| inputs.iter().all(|(_, r)| r.label.as_ref() == Some(l))),
        ..RunResult::new(merged_id(inputs), t0_ns, plan, m.streams, intervals, summary)
    };
    fill_agent_summaries(&mut out)?;
    Ok(out)
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

fn merge_intervals(inputs: &[Input<'_>], places: &[Place]) -> Result<Vec<Interval>, MergeError> {
    // Merged index -> (input, interval) pairs.
    let mut by_index: BTreeMap<u32, Vec<(usize, &Interval)>> = BTreeMap::new();
    for (j, (_, r)) in inputs.iter().enumerate() {
        for iv in &r.intervals {
            by_index.entry(iv.index.saturating_add(places[j].offset)).or_default().push((j, iv));
        }
    }
    let names: Vec<&str> = inputs.iter().map(|(n, _)| *n).collect();
    let mut out = Vec::with_capacity(by_index.len());
    for (index, group) in by_index {
        let start_s = group.iter().map(|(j, iv)| places[*j].shift_s + iv.start_s).fold(f64::INFINITY, f64::min);
        let end_s = group.iter().map(|(j, iv)| places[*j].shift_s + iv.end_s).fold(0.0, f64::max);
        let secs = end_s - start_s;
        let mut streams = Vec::new();
        for (j, iv) in &group {
            streams
                .extend(iv.streams.iter().map(|s| StreamInterval { id: s.id + places[*j].first_stream, ..s.clone() }));
        }
        let mut sums = Vec::new();
        for way in [Way::Up, Way::Down] {
            let of_way: Vec<(usize, &WayInterval)> = group
                .iter()
                .flat_map(|(j, iv)| iv.sums.iter().filter(|w| w.way == way).map(move |w| (*j, w)))
                .collect();
            if !of_way.is_empty() {
                sums.push(merge_way_interval(&names, way, &of_way, secs)?);
            }
        }
        let http_parts: Vec<(usize, &HttpInterval)> =
            group.iter().filter_map(|(j, iv)| iv.http.as_ref().map(|h| (*j, h))).collect();
        let http = if http_parts.is_empty() { None } else { Some(merge_http_interval(&names, &http_parts, secs)?) };
        out.push(Interval { index, start_s, end_s, streams, sums, http });
    }
    Ok(out)
}

/// Folds a last interval shorter than a tenth of the reporting interval (the stragglers after
/// the last tick) into the one before it, so no rate is printed over a few milliseconds: its
/// counts are added, its histograms merged, the rates taken over the joined span. Every
/// rendering then shows the same intervals. Returns whether it folded.
pub fn fold_short_tail(intervals: &mut Vec<Interval>, interval_s: f64) -> Result<bool, MergeError> {
    let n = intervals.len();
    if n < 2 || !intervals[n - 1].is_short_tail(interval_s) {
        return Ok(false);
    }
    let (prev, tail) = (&intervals[n - 2], &intervals[n - 1]);
    let (start_s, end_s) = (prev.start_s, tail.end_s.max(prev.end_s));
    let secs = end_s - start_s;
    let names = ["the interval", "its tail"];
    let mut streams = prev.streams.clone();
    for t in &tail.streams {
        match streams.iter_mut().find(|s| s.id == t.id) {
            Some(s) => add_stream_interval(s, t)?,
            None => streams.push(t.clone()),
        }
    }
    let mut sums = Vec::new();
    for way in [Way::Up, Way::Down] {
        let of_way: Vec<(usize, &WayInterval)> = [prev, tail]
            .iter()
            .enumerate()
            .flat_map(|(j, iv)| iv.sums.iter().filter(|w| w.way == way).map(move |w| (j, w)))
            .collect();
        if !of_way.is_empty() {
            sums.push(merge_way_interval(&names, way, &of_way, secs)?);
        }
    }
    let http_parts: Vec<(usize, &HttpInterval)> =
        [prev, tail].iter().enumerate().filter_map(|(j, iv)| iv.http.as_ref().map(|h| (j, h))).collect();
    let mut http = if http_parts.is_empty() { None } else { Some(merge_http_interval(&names, &http_parts, secs)?) };
    // One schedule over the joined span: its rate is the time-weighted mean of the two.
    if let (Some(h), Some(a), Some(b)) =
        (http.as_mut(), prev.http.as_ref().and_then(|h| h.target_rate), tail.http.as_ref().and_then(|h| h.target_rate))
    {
        let (sa, sb) = (prev.end_s - prev.start_s, tail.end_s - tail.start_s);
        h.target_rate = Some(per_second(a * sa + b * sb, sa + sb));
    }
    let index = prev.index;
    intervals.truncate(n - 2);
    intervals.push(Interval { index, start_s, end_s, streams, sums, http });
    Ok(true)
}

/// The totals a run's intervals add up to, for a run that ended before its own summary (a
/// client killed mid-run, read back from its partial log): per way, bytes and messages over
/// the span from the start to the last interval's end, retransmits, the latency histograms
/// merged; HTTP counts, rates and status codes. Figures only a summary holds (CPU, kernel
/// RTT, the phases) are absent.
pub fn summary_of_intervals(intervals: &[Interval]) -> Result<Summary, MergeError> {
    let secs = intervals.iter().map(|iv| iv.end_s).fold(0.0, f64::max);
    let mut ways = Vec::new();
    for way in [Way::Up, Way::Down] {
        let of_way: Vec<&WayInterval> =
            intervals.iter().flat_map(|iv| iv.sums.iter().filter(move |w| w.way == way)).collect();
        if of_way.is_empty() {
            continue;
        }
        let mut lat = HistAcc::new("interval latency");
        for w in &of_way {
            lat.add_dist("the partial log", w.latency.as_ref())?;
        }
        let sent: u64 = of_way.iter().map(|w| w.sent_bytes).sum();
        let received = sum_all(of_way.iter().map(|w| w.received_bytes));
        let msgs = MsgInterval::add_up(of_way.iter().filter_map(|w| w.msgs.as_ref()), Some(secs)).map(|m| MsgTotals {
            sent: m.sent,
            sent_per_s: m.sent_per_s.unwrap_or(0.0),
            received: m.received,
            received_per_s: m.received_per_s,
            segs_out: m.segs_out,
            segs_out_per_s: m.segs_out_per_s,
            udp: m.udp,
            ..MsgTotals::default()
        });
        // Intervals carry no segment counts: the retransmit rate stays unknown.
        ways.push(WaySummary::new(WayParts {
            way,
            streams: 0,
            sent: (sent, secs),
            received: received.map(|b| (b, secs)),
            retransmits: sum_any(of_way.iter().map(|w| w.retransmits)),
            spurious_retransmits: None,
            segs_out: 0,
            rtt: None,
            rtt_hist: None,
            cwnd_max_bytes: 0,
            msgs,
            latency: lat.distribution(),
            kernel_rtt: None,
            limits: None,
        }));
    }
    let http_parts: Vec<&HttpInterval> = intervals.iter().filter_map(|iv| iv.http.as_ref()).collect();
    let http = if http_parts.is_empty() {
        None
    } else {
        let mut lat = HistAcc::new("interval latency");
        let mut status: BTreeMap<String, u64> = BTreeMap::new();
        for h in &http_parts {
            lat.add_dist("the partial log", h.latency.as_ref())?;
            for (k, v) in &h.status {
                *status.entry(k.clone()).or_default() += v;
            }
        }
        let sum = |f: fn(&HttpInterval) -> u64| http_parts.iter().map(|h| f(h)).sum::<u64>();
        let (sent, completed) = (sum(|h| h.sent), sum(|h| h.completed));
        Some(HttpSummary::new(HttpParts {
            sent,
            completed,
            seconds: secs,
            send_window: secs,
            late: sum(|h| h.late),
            bytes_sent: sum(|h| h.bytes_sent),
            bytes_received: sum(|h| h.bytes_received),
            latency: lat.distribution().unwrap_or_default(),
            status_codes: status,
            ..HttpParts::default()
        }))
    };
    Ok(Summary { duration_s: secs, ways, streams: Vec::new(), cpu: Default::default(), http, load: Default::default() })
}

/// Adds a stream's tail to its interval: counts added (a receiver count only when both have
/// one), the later kernel statistics kept, histograms merged.
fn add_stream_interval(s: &mut StreamInterval, t: &StreamInterval) -> Result<(), MergeError> {
    let mut lat = HistAcc::new("interval latency");
    lat.add_dist("the interval", s.latency.as_ref())?;
    lat.add_dist("its tail", t.latency.as_ref())?;
    s.sent_bytes += t.sent_bytes;
    s.received_bytes = sum_all([s.received_bytes, t.received_bytes].into_iter());
    s.retransmits = sum_any([s.retransmits, t.retransmits].into_iter());
    s.tcp = t.tcp.or(s.tcp);
    s.msgs = MsgInterval::add_up(s.msgs.iter().chain(t.msgs.iter()), None);
    s.latency = lat.distribution();
    Ok(())
}

fn merge_way_interval(
    names: &[&str],
    way: Way,
    parts: &[(usize, &WayInterval)],
    secs: f64,
) -> Result<WayInterval, MergeError> {
    let per_s = |n: u64| per_second(n as f64, secs);
    let mut lat = HistAcc::new("interval latency");
    for (j, w) in parts {
        lat.add_dist(names[*j], w.latency.as_ref())?;
    }
    let sent: u64 = parts.iter().map(|(_, w)| w.sent_bytes).sum();
    let received = sum_all(parts.iter().map(|(_, w)| w.received_bytes));
    Ok(WayInterval {
        way,
        sent_bytes: sent,
        sent_bits_per_s: per_s(sent * 8),
        received_bytes: received,
        received_bits_per_s: received.map(|b| per_s(b * 8)),
        retransmits: sum_any(parts.iter().map(|(_, w)| w.retransmits)),
        msgs: MsgInterval::add_up(parts.iter().filter_map(|(_, w)| w.msgs.as_ref()), Some(secs)),
        latency: lat.distribution(),
    })
}

fn merge_http_interval(
    names: &[&str],
    parts: &[(usize, &HttpInterval)],
    secs: f64,
) -> Result<HttpInterval, MergeError> {
    let mut lat = HistAcc::new("interval latency");
    let mut status: BTreeMap<String, u64> = BTreeMap::new();
    for (j, h) in parts {
        lat.add_dist(names[*j], h.latency.as_ref())?;
        for (k, v) in &h.status {
            *status.entry(k.clone()).or_default() += v;
        }
    }
    let sum = |f: fn(&HttpInterval) -> u64| parts.iter().map(|(_, h)| f(h)).sum::<u64>();
    let (sent, completed) = (sum(|h| h.sent), sum(|h| h.completed));
    let targets: Vec<f64> = parts.iter().filter_map(|(_, h)| h.target_rate).collect();
    Ok(HttpInterval {
        sent,
        completed,
        errors: sum(|h| h.errors),
        failed_status: sum(|h| h.failed_status),
        late: sum(|h| h.late),
        responses_per_s: per_second(completed as f64, secs),
        target_rate: (!targets.is_empty()).then(|| targets.iter().sum()),
        sent_per_s: per_second(sent as f64, secs),
        bytes_sent: sum(|h| h.bytes_sent),
        bytes_received: sum(|h| h.bytes_received),
        latency: lat.distribution(),
        status,
    })
}

/// The totals of some parts of a merged result, merged as `merge` merges whole results (the
/// summary of one agent's tests, say). `part_indices` index `r.parts`; their streams keep the
/// merged result's ids.
pub fn parts_summary(r: &RunResult, part_indices: &[u32]) -> Result<Option<Summary>, MergeError> {
    let interval_s = r.plan.profile.run.interval().as_secs_f64();
    let chosen: Vec<&Part> = part_indices.iter().filter_map(|&k| r.parts.get(k as usize)).collect();
    if chosen.is_empty() {
        return Ok(None);
    }
    let names: Vec<String> = chosen.iter().map(|p| format!("test {} ({})", p.test_id, p.agent.address)).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let sums: Vec<&Summary> = chosen.iter().map(|p| &p.summary).collect();
    let places: Vec<Place> = chosen
        .iter()
        .map(|p| Place {
            offset: p.interval_offset,
            shift_s: p.interval_offset as f64 * interval_s,
            first_stream: p.first_stream,
            first_part: 0,
        })
        .collect();
    merge_summaries(&names, &sums, &places).map(Some)
}

fn merge_summaries(names: &[&str], sums: &[&Summary], places: &[Place]) -> Result<Summary, MergeError> {
    let shifted = |j: usize, secs: f64| places[j].shift_s + secs;
    let mut streams = Vec::new();
    for (j, s) in sums.iter().enumerate() {
        streams.extend(s.streams.iter().map(|x| StreamSummary { id: x.id + places[j].first_stream, ..x.clone() }));
    }
    let mut ways = Vec::new();
    for way in [Way::Up, Way::Down] {
        let parts: Vec<(usize, &WaySummary)> = sums
            .iter()
            .enumerate()
            .flat_map(|(j, s)| s.ways.iter().filter(|w| w.way == way).map(move |w| (j, w)))
            .collect();
        if parts.is_empty() {
            continue;
        }
        ways.push(merge_way_summary(names, way, &parts, &shifted, &streams)?);
    }
    let duration_s = sums.iter().enumerate().map(|(j, s)| shifted(j, s.duration_s)).fold(0.0, f64::max);
    let add_cpu = |a: CpuUsage, b: &CpuUsage| CpuUsage {
        user_s: a.user_s + b.user_s,
        system_s: a.system_s + b.system_s,
        wall_s: a.wall_s.max(b.wall_s),
    };
    let client = sums.iter().map(|s| &s.cpu.client).fold(CpuUsage::default(), add_cpu);
    let server = if sums.iter().all(|s| s.cpu.server.is_some()) {
        Some(sums.iter().filter_map(|s| s.cpu.server.as_ref()).fold(CpuUsage::default(), add_cpu))
    } else {
        None
    };
    let http = {
        let parts: Vec<(usize, &HttpSummary)> =
            sums.iter().enumerate().filter_map(|(j, s)| s.http.as_ref().map(|h| (j, h))).collect();
        if parts.is_empty() {
            None
        } else {
            Some(merge_http_summary(names, &parts, &shifted)?)
        }
    };
    let bits: f64 = match &http {
        Some(h) => (h.bytes_sent + h.bytes_received) as f64 * 8.0,
        None => ways.iter().map(|w| w.sender.bytes as f64 * 8.0).sum(),
    };
    Ok(Summary {
        duration_s,
        ways,
        streams,
        cpu: CpuSummary::new(client, server, bits),
        http,
        // Each test's hosts stay in its part (`parts[].summary.load`): a sum of hosts means nothing.
        load: Default::default(),
    })
}

fn merge_way_summary(
    names: &[&str],
    way: Way,
    parts: &[(usize, &WaySummary)],
    shifted: &dyn Fn(usize, f64) -> f64,
    streams: &[StreamSummary],
) -> Result<WaySummary, MergeError> {
    let (mut lat, mut krtt, mut srtt) =
        (HistAcc::new("latency"), HistAcc::new("kernel RTT"), HistAcc::new("smoothed RTT"));
    for (j, w) in parts {
        lat.add_dist(names[*j], w.latency.as_ref())?;
        krtt.add_dist(names[*j], w.kernel_rtt.as_ref())?;
        srtt.add(names[*j], w.rtt_hist.as_ref())?;
    }
    let sent: u64 = parts.iter().map(|(_, w)| w.sender.bytes).sum();
    let sent_s = parts.iter().map(|(j, w)| shifted(*j, w.sender.seconds)).fold(0.0, f64::max);
    let received = parts.iter().all(|(_, w)| w.receiver.is_some()).then(|| {
        let bytes = parts.iter().filter_map(|(_, w)| w.receiver).map(|r| r.bytes).sum();
        (bytes, parts.iter().filter_map(|(j, w)| w.receiver.map(|r| shifted(*j, r.seconds))).fold(0.0, f64::max))
    });
    let rtt = srtt.h.histogram().filter(|h| !h.is_empty()).map(|h| {
        // The inputs' exact means, weighted by their sample counts (the histogram's mean is
        // within 0.1%).
        let rtts: Vec<RttSummary> = parts.iter().filter_map(|(_, w)| w.rtt).collect();
        let n: u64 = rtts.iter().map(|r| r.samples).sum();
        let mean_us = if n == h.len() {
            rtts.iter().map(|r| r.mean_us * r.samples as f64).sum::<f64>() / n as f64
        } else {
            h.mean() / 1000.0
        };
        RttSummary {
            min_us: rtts.iter().map(|r| r.min_us).min().unwrap_or(0),
            mean_us,
            max_us: rtts.iter().map(|r| r.max_us).max().unwrap_or((h.max() / 1000) as u32),
            samples: h.len(),
        }
    });
    let msgs = {
        let m: Vec<&MsgTotals> = parts.iter().filter_map(|(_, w)| w.msgs.as_ref()).collect();
        (!m.is_empty()).then(|| MsgTotals::add_up(&m, sent_s, received.map(|r| r.1).unwrap_or(0.0)))
    };
    Ok(WaySummary::new(WayParts {
        way,
        streams: parts.iter().map(|(_, w)| w.streams).sum(),
        sent: (sent, sent_s),
        received,
        retransmits: sum_any(parts.iter().map(|(_, w)| w.retransmits)),
        spurious_retransmits: sum_all(parts.iter().map(|(_, w)| w.spurious_retransmits)),
        segs_out: streams.iter().filter(|s| s.way == way).filter_map(|s| s.tcp).map(|t| t.segs_out).sum(),
        rtt,
        rtt_hist: srtt.encoded(),
        cwnd_max_bytes: parts.iter().map(|(_, w)| w.cwnd_max_bytes).max().unwrap_or(0),
        msgs,
        latency: lat.distribution(),
        kernel_rtt: krtt.distribution(),
        // Known only when every part knows it: a share over part of the senders misleads.
        limits: parts
            .iter()
            .map(|(_, w)| w.limits)
            .collect::<Option<Vec<_>>>()
            .and_then(|v| v.into_iter().reduce(|a, b| a.add(&b))),
    }))
}

fn merge_http_summary(
    names: &[&str],
    parts: &[(usize, &HttpSummary)],
    shifted: &dyn Fn(usize, f64) -> f64,
) -> Result<HttpSummary, MergeError> {
    let mut lat = HistAcc::new("latency");
    let mut phases = [
        HistAcc::new("connect time"),
        HistAcc::new("TLS handshake time"),
        HistAcc::new("time to first byte"),
        HistAcc::new("body time"),
        HistAcc::new("send lag"),
    ];
    let (mut srtt, mut krtt) = (HistAcc::new("smoothed RTT"), HistAcc::new("kernel RTT"));
    let mut status: BTreeMap<String, u64> = BTreeMap::new();
    let mut errors: BTreeMap<String, HttpErrorCount> = BTreeMap::new();
    for (j, h) in parts {
        let name = names[*j];
        lat.add_dist(name, Some(&h.latency))?;
        let p = &h.phases;
        for (acc, d) in phases.iter_mut().zip([&p.connect, &p.tls, &p.ttfb, &p.body, &p.send_lag]) {
            acc.add_dist(name, d.as_ref())?;
        }
        if let Some(t) = &h.tcp {
            srtt.add_dist(name, t.srtt.as_ref())?;
            krtt.add_dist(name, t.kernel_rtt.as_ref())?;
        }
        for (k, v) in &h.status_codes {
            *status.entry(k.clone()).or_default() += v;
        }
        for e in &h.errors {
            let entry = errors.entry(e.kind.clone()).or_insert_with(|| HttpErrorCount { count: 0, ..e.clone() });
            entry.count += e.count;
        }
    }
    let sum = |f: fn(&HttpSummary) -> u64| parts.iter().map(|(_, h)| f(h)).sum::<u64>();
    let (sent, completed, succeeded) = (sum(|h| h.sent), sum(|h| h.completed), sum(|h| h.succeeded));
    let seconds = parts.iter().map(|(j, h)| shifted(*j, h.seconds)).fold(0.0, f64::max);
    // Each input's send window, recovered from its own rate: concurrent windows overlap.
    let window = parts
        .iter()
        .map(|(j, h)| shifted(*j, if h.sent_per_s > 0.0 { h.sent as f64 / h.sent_per_s } else { 0.0 }))
        .fold(0.0, f64::max);
    let targets: Vec<f64> = parts.iter().filter_map(|(_, h)| h.target_rate).collect();
    let first = parts[0].1;
    let same = |f: fn(&HttpSummary) -> &str| {
        if parts.iter().all(|(_, h)| f(h) == f(first)) {
            f(first).to_string()
        } else {
            "mixed".to_string()
        }
    };
    let tcp_parts: Vec<&HttpTcp> = parts.iter().filter_map(|(_, h)| h.tcp.as_ref()).collect();
    let tcp = (tcp_parts.len() == parts.len()).then(|| {
        let segs: u64 = tcp_parts.iter().map(|t| t.segs_out).sum();
        let retrans: u64 = tcp_parts.iter().map(|t| t.retransmits).sum();
        HttpTcp::new(
            tcp_parts.iter().map(|t| t.connections).sum(),
            segs,
            retrans,
            sum_all(tcp_parts.iter().map(|t| t.spurious_retransmits)),
            srtt.distribution(),
            krtt.distribution(),
        )
    });
    let [connect, tls, ttfb, body, send_lag] = phases;
    Ok(HttpSummary::new(HttpParts {
        mode: same(|h| &h.mode),
        version: same(|h| &h.version),
        tls: parts.iter().any(|(_, h)| h.tls),
        sent,
        completed,
        succeeded,
        seconds,
        send_window: window,
        target_rate: (!targets.is_empty()).then(|| targets.iter().sum()),
        late: sum(|h| h.late),
        bytes_sent: sum(|h| h.bytes_sent),
        bytes_received: sum(|h| h.bytes_received),
        latency: lat.distribution().unwrap_or_default(),
        phases: HttpPhases {
            connect: connect.distribution(),
            tls: tls.distribution(),
            ttfb: ttfb.distribution(),
            body: body.distribution(),
            send_lag: send_lag.distribution(),
        },
        status_codes: status,
        errors: errors.into_values().collect(),
        connections: HttpConnections {
            configured: parts.iter().map(|(_, h)| h.connections.configured).sum(),
            established: parts.iter().map(|(_, h)| h.connections.established).sum(),
            failed: parts.iter().map(|(_, h)| h.connections.failed).sum(),
            peak_open: parts.iter().map(|(_, h)| h.connections.peak_open).sum(),
        },
        tcp,
    }))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::profile::Profile;
    use crate::result::{HostInfo, Plan, ProbeInfo, SideTotal, SCHEMA_V1};
    use crate::units::Dur;
    use hdrhistogram::Histogram;
    use proptest::prelude::*;

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
