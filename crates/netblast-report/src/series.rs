//! What every chart is made of: an interval's span as a point, one line per agent or stream,
//! and whether a result is UDP.

use crate::chart::Series;
use netblast_spec::RunResult;
use netblast_spec::result::Interval;
use std::collections::BTreeMap;

/// Most per-stream (or per-agent) lines on a chart; beyond it only the total.
pub(crate) const MAX_LINES: usize = 16;

/// Whether the result is UDP (msgrate or rr over UDP).
pub fn is_udp(r: &RunResult) -> bool {
    r.plan.profile.workload.uses_udp()
}

/// An interval's span, as the first two fields of a plot point.
pub(crate) fn at(iv: &Interval, y: f64) -> (f64, f64, f64) {
    (iv.start_s, iv.end_s, y)
}

pub(crate) fn secs(iv: &Interval) -> f64 {
    (iv.end_s - iv.start_s).max(1e-9)
}

/// One line per agent (merged results) or per stream, of `f` summed over its streams; none
/// when there is one group or more than [`MAX_LINES`].
pub(crate) fn groups(r: &RunResult, f: impl Fn(&netblast_spec::result::StreamInterval, f64) -> f64) -> Vec<Series> {
    let name_of = |id: u32| -> String {
        match r.parts.iter().enumerate().find(|(_, p)| id >= p.first_stream && id < p.first_stream + p.streams) {
            Some((i, p)) => format!("test {i}: {} → {}", p.agent.hostname, p.peer),
            None => format!("stream {id}"),
        }
    };
    let mut by: BTreeMap<String, Vec<(f64, f64, f64)>> = BTreeMap::new();
    for iv in &r.intervals {
        let mut this: BTreeMap<String, f64> = BTreeMap::new();
        for s in &iv.streams {
            *this.entry(name_of(s.id)).or_default() += f(s, secs(iv));
        }
        for (k, v) in this {
            by.entry(k).or_default().push(at(iv, v));
        }
    }
    if by.len() < 2 || by.len() > MAX_LINES {
        return Vec::new();
    }
    by.into_iter().map(|(k, v)| Series::new(k, v)).collect()
}
