//! `latency_probe` of a result: round trips of a probe flow beside the test, split at the
//! load's start and end into idle and loaded, and the latency the load added (flent's RRUL,
//! the IETF responsiveness measure).
//!
//! The probe flow is its own rr test against the same server, started a whole number of
//! reporting intervals before the load on the same interval boundaries, so each of its
//! intervals falls wholly into one phase; its histograms are added exactly into each phase's.

use super::Interval;
use crate::hist::{Distribution, HistSum};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Where a probe interval falls on the load's time axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Before the load started.
    Idle,
    /// While the load ran, in its left-out first seconds (`--omit`).
    Omitted,
    /// While the load ran, in its measured span.
    Loaded,
    /// After the load's last interval, until the probe stopped.
    After,
}

impl Phase {
    /// The name as written in results and reports.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Omitted => "omitted",
            Phase::Loaded => "loaded",
            Phase::After => "after",
        }
    }
}

/// One reporting interval of the probe flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeInterval {
    /// Start, seconds since the load started (negative in the idle phase).
    pub start_s: f64,
    /// End, seconds since the load started.
    pub end_s: f64,
    /// Which phase it falls in.
    pub phase: Phase,
    /// Round trips completed in it.
    pub round_trips: u64,
    /// Their round-trip times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Distribution>,
}

/// The latency probe's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyProbeResult {
    /// The probe flow's transport (`tcp`, `udp`).
    pub protocol: String,
    /// Round trips per second asked of the probe flow.
    pub rate_per_s: f64,
    /// How long the probe ran before the load started, seconds.
    pub idle_s: f64,
    /// Round trips before the load started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle: Option<Distribution>,
    /// Round trips while the load ran, over its measured span (its `--omit` seconds left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loaded: Option<Distribution>,
    /// The latency the load added at the median: loaded p50 − idle p50 (negative when the
    /// loaded span was the faster).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added_p50_ns: Option<i64>,
    /// The latency the load added at the 99th percentile: loaded p99 − idle p99.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added_p99_ns: Option<i64>,
    /// Responsiveness before the load: round trips per minute, 60 s over the trimmed mean of
    /// the idle round trips (the slowest 5% left out, as the IETF draft trims).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpm_idle: Option<f64>,
    /// Responsiveness under the load, the same way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpm_loaded: Option<f64>,
    /// Probe requests that got no answer within the UDP timeout, over the whole probe run.
    #[serde(default)]
    pub lost: u64,
    /// Per reporting interval, on the load's time axis.
    pub intervals: Vec<ProbeInterval>,
    /// What went wrong with the probe flow (its figures then cover less than asked).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// Share of the slowest round trips a responsiveness figure leaves out.
pub const RPM_TRIM: f64 = 0.05;

/// Round trips per minute of a histogram of round trips (ns): 60 s over their mean with the
/// slowest [`RPM_TRIM`] left out. `None` when it holds nothing.
pub fn rpm(h: &Histogram<u64>) -> Option<f64> {
    let n = h.len();
    if n == 0 {
        return None;
    }
    let keep = ((n as f64) * (1.0 - RPM_TRIM)).ceil().max(1.0) as u64;
    let (mut taken, mut sum) = (0u64, 0f64);
    for v in h.iter_recorded() {
        let k = v.count_at_value().min(keep - taken);
        sum += k as f64 * h.median_equivalent(v.value_iterated_to()) as f64;
        taken += k;
        if taken >= keep {
            break;
        }
    }
    let mean_ns = sum / taken as f64;
    (mean_ns > 0.0).then(|| 60e9 / mean_ns)
}

/// What [`LatencyProbeResult::build`] needs of the probe and of the load.
#[derive(Debug, Clone)]
pub struct ProbeSpan {
    /// The probe's transport.
    pub protocol: String,
    /// Its round trips per second.
    pub rate_per_s: f64,
    /// Seconds from the probe's start to the load's.
    pub idle_s: f64,
    /// The load's left-out first seconds (`--omit`).
    pub omit_s: f64,
    /// Where the load's last interval ended, seconds since its start.
    pub load_end_s: f64,
}

impl LatencyProbeResult {
    /// Splits the probe flow's intervals (seconds since the probe's start) into phases and adds
    /// each phase's histograms; `lost` and `errors` are the probe run's.
    pub fn build(span: &ProbeSpan, probe: &[Interval], lost: u64, errors: Vec<String>) -> LatencyProbeResult {
        let (mut idle, mut loaded) = (HistSum::default(), HistSum::default());
        let mut intervals = Vec::with_capacity(probe.len());
        for iv in probe {
            let (pi, sum) = ProbeInterval::of(iv, span);
            if let Some(h) = sum.histogram() {
                let _ = match pi.phase {
                    Phase::Idle => idle.add(h),
                    Phase::Loaded => loaded.add(h),
                    Phase::Omitted | Phase::After => Ok(()),
                };
            }
            intervals.push(pi);
        }
        let mut r = LatencyProbeResult {
            protocol: span.protocol.clone(),
            rate_per_s: span.rate_per_s,
            idle_s: span.idle_s,
            idle: None,
            loaded: None,
            added_p50_ns: None,
            added_p99_ns: None,
            rpm_idle: None,
            rpm_loaded: None,
            lost,
            intervals,
            errors,
        };
        r.set_phases(&idle, &loaded);
        r
    }

    /// The phases' figures from their summed histograms: the distributions, what the load
    /// added, responsiveness.
    fn set_phases(&mut self, idle: &HistSum, loaded: &HistSum) {
        let (i, l) = (idle.distribution(), loaded.distribution());
        let added = |f: fn(&Distribution) -> u64| Some(f(l.as_ref()?) as i64 - f(i.as_ref()?) as i64);
        self.added_p50_ns = added(|d| d.p50_ns);
        self.added_p99_ns = added(|d| d.p99_ns);
        self.rpm_idle = idle.histogram().and_then(rpm);
        self.rpm_loaded = loaded.histogram().and_then(rpm);
        (self.idle, self.loaded) = (i, l);
    }

    /// The probes of several tests that started together (a fleet's, a merge's) as one: their
    /// phases' histograms added, their intervals added where they cover the same span, their
    /// losses summed, each one's errors named after its test. `None` when none had probes.
    pub fn merge(all: &[(&str, &LatencyProbeResult)]) -> Option<LatencyProbeResult> {
        let (_, first) = all.first()?;
        let (mut idle, mut loaded) = (HistSum::default(), HistSum::default());
        let mut spans: Vec<(ProbeInterval, HistSum)> = Vec::new();
        let mut out = LatencyProbeResult { lost: 0, errors: Vec::new(), intervals: Vec::new(), ..(*first).clone() };
        let add = |sum: &mut HistSum, d: &Option<Distribution>| {
            if let Some(h) = d.as_ref().and_then(Distribution::histogram) {
                let _ = sum.add_owned(h);
            }
        };
        for (name, p) in all {
            add(&mut idle, &p.idle);
            add(&mut loaded, &p.loaded);
            for iv in &p.intervals {
                match spans.iter_mut().find(|s| (s.0.start_s - iv.start_s).abs() < 1e-3) {
                    Some((m, sum)) => {
                        m.round_trips += iv.round_trips;
                        m.end_s = m.end_s.max(iv.end_s);
                        add(sum, &iv.latency);
                    }
                    None => {
                        let mut sum = HistSum::default();
                        add(&mut sum, &iv.latency);
                        spans.push((iv.clone(), sum));
                    }
                }
            }
            out.lost += p.lost;
            out.errors.extend(p.errors.iter().map(|e| format!("{name}: {e}")));
        }
        spans.sort_by(|a, b| a.0.start_s.total_cmp(&b.0.start_s));
        out.intervals =
            spans.into_iter().map(|(iv, sum)| ProbeInterval { latency: sum.distribution(), ..iv }).collect();
        out.set_phases(&idle, &loaded);
        Some(out)
    }

    /// These figures without their intervals: what a merged result keeps of each test.
    pub fn totals(&self) -> LatencyProbeResult {
        LatencyProbeResult { intervals: Vec::new(), ..self.clone() }
    }
}

impl ProbeInterval {
    /// One interval of the probe flow (seconds since the probe's start) on the load's time
    /// axis, in the phase its middle falls in, and its streams' histograms summed.
    pub fn of(iv: &Interval, span: &ProbeSpan) -> (ProbeInterval, HistSum) {
        let (start_s, end_s) = (iv.start_s - span.idle_s, iv.end_s - span.idle_s);
        let mid = (start_s + end_s) / 2.0;
        let phase = if mid < 0.0 {
            Phase::Idle
        } else if mid < span.omit_s {
            Phase::Omitted
        } else if mid < span.load_end_s {
            Phase::Loaded
        } else {
            Phase::After
        };
        let mut sum = HistSum::default();
        for h in iv.streams.iter().filter_map(|s| s.latency.as_ref().and_then(Distribution::histogram)) {
            let _ = sum.add_owned(h);
        }
        let round_trips = iv.streams.iter().filter_map(|s| s.msgs.as_ref()).map(|m| m.sent).sum();
        (ProbeInterval { start_s, end_s, phase, round_trips, latency: sum.distribution() }, sum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hist::new_latency_histogram;
    use crate::result::{MsgInterval, StreamInterval};

    fn iv(index: u32, start_s: f64, samples: &[u64]) -> Interval {
        let mut h = new_latency_histogram();
        for &s in samples {
            h.record(s).unwrap();
        }
        Interval {
            index,
            start_s,
            end_s: start_s + 1.0,
            streams: vec![StreamInterval {
                id: 0,
                msgs: Some(MsgInterval { sent: samples.len() as u64, ..Default::default() }),
                latency: Distribution::if_any(&h),
                ..Default::default()
            }],
            sums: vec![],
            http: None,
        }
    }

    #[test]
    fn phases_split_at_the_load_and_add_exactly() {
        let ms = 1_000_000;
        let probe = vec![
            iv(0, 0.0, &[20 * ms, 20 * ms]),
            iv(1, 1.0, &[20 * ms, 22 * ms]),
            iv(2, 2.0, &[60 * ms; 3]),
            iv(3, 3.0, &[50 * ms, 70 * ms]),
            iv(4, 4.0, &[90 * ms; 2]),
            iv(5, 5.0, &[21 * ms]),
        ];
        let span = ProbeSpan { protocol: "tcp".into(), rate_per_s: 2.0, idle_s: 2.0, omit_s: 1.0, load_end_s: 3.0 };
        let r = LatencyProbeResult::build(&span, &probe, 0, vec![]);
        let phases: Vec<Phase> = r.intervals.iter().map(|i| i.phase).collect();
        use Phase::*;
        assert_eq!(phases, [Idle, Idle, Omitted, Loaded, Loaded, After]);
        assert_eq!((r.intervals[0].start_s, r.intervals[5].end_s), (-2.0, 4.0));
        let (idle, loaded) = (r.idle.as_ref().unwrap(), r.loaded.as_ref().unwrap());
        assert_eq!((idle.count, loaded.count), (4, 4));
        assert!((19_990_000..=20_010_000).contains(&idle.p50_ns), "{}", idle.p50_ns);
        assert!((69_900_000..=70_100_000).contains(&loaded.p50_ns), "{}", loaded.p50_ns);
        let added = r.added_p50_ns.unwrap();
        assert!((49_800_000..=50_200_000).contains(&added), "{added}");
        // 60 s over a 20.5 ms mean (no sample trimmed of 4: ceil(3.8) = 4 kept).
        let rpm = r.rpm_idle.unwrap();
        assert!((2900.0..2950.0).contains(&rpm), "{rpm}");
        assert_eq!(r.intervals[2].round_trips, 3);
    }

    #[test]
    fn probes_of_tests_that_ran_together_merge_exactly() {
        let ms = 1_000_000;
        let span = ProbeSpan { protocol: "tcp".into(), rate_per_s: 2.0, idle_s: 1.0, omit_s: 0.0, load_end_s: 1.0 };
        let a = LatencyProbeResult::build(&span, &[iv(0, 0.0, &[10 * ms]), iv(1, 1.0, &[30 * ms])], 1, vec![]);
        let b =
            LatencyProbeResult::build(&span, &[iv(0, 0.0, &[12 * ms]), iv(1, 1.0, &[50 * ms])], 0, vec!["x".into()]);
        let m = LatencyProbeResult::merge(&[("test 0", &a), ("test 1", &b)]).unwrap();
        assert_eq!((m.idle.as_ref().unwrap().count, m.loaded.as_ref().unwrap().count), (2, 2));
        assert_eq!(m.intervals.len(), 2);
        assert_eq!(m.intervals[1].round_trips, 2);
        assert_eq!(m.intervals[1].latency.as_ref().unwrap().max_ns, b.loaded.as_ref().unwrap().max_ns);
        assert_eq!((m.lost, m.errors.clone()), (1, vec!["test 1: x".to_string()]));
        let (i, l) = (m.idle.unwrap(), m.loaded.unwrap());
        assert_eq!(m.added_p50_ns, Some(l.p50_ns as i64 - i.p50_ns as i64));
        assert!(LatencyProbeResult::merge(&[]).is_none());
    }

    #[test]
    fn rpm_trims_the_slowest_five_percent() {
        let mut h = new_latency_histogram();
        for _ in 0..95 {
            h.record(10_000_000).unwrap();
        }
        for _ in 0..5 {
            h.record(1_000_000_000).unwrap();
        }
        let r = rpm(&h).unwrap();
        assert!((5990.0..6010.0).contains(&r), "{r}");
        assert_eq!(rpm(&new_latency_histogram()), None);
    }
}
