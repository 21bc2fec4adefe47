//! `--omit` (iperf3 -O): the first seconds of a bulk test left out of its totals, so slow
//! start does not pull the rate down. The omitted intervals stay in the result (and are shown,
//! marked); the totals are the run's less what those intervals counted, over the seconds after
//! them. The kernel's cumulative clocks (limits, segments) are taken from the last omitted
//! interval's snapshot. What cannot be split by interval (CPU, RTT samples, spurious
//! retransmissions) still covers the whole run, and the plan's note says so.

use crate::result::{Interval, SideTotal, StreamSummary, Summary, TcpLimits};

/// Whether `iv` ends within the omitted start (`omit_s` seconds).
pub fn is_omitted(iv: &Interval, omit_s: f64) -> bool {
    omit_s > 0.0 && iv.end_s <= omit_s + 1e-6
}

/// A way's (or any set of streams') sender limits: each stream's kernel clocks over its
/// sender's seconds, summed; `None` unless every stream's kernel reported them.
pub fn limits_of(streams: &[&StreamSummary]) -> Option<TcpLimits> {
    streams
        .iter()
        .map(|s| {
            let mut l = s.tcp?.limits?;
            l.wall_us = (s.sender.seconds * 1e6) as u64;
            Some(l)
        })
        .collect::<Option<Vec<_>>>()?
        .into_iter()
        .reduce(|a, b| a.add(&b))
}

/// Leaves the intervals ending within `omit_s` out of `summary` (a bulk test's): bytes and
/// retransmissions less theirs, over the seconds after them; the kernel clocks since the last
/// of them. Returns how many intervals were omitted (0: nothing changed).
pub fn omit_start(intervals: &[Interval], summary: &mut Summary, omit_s: f64) -> usize {
    let omitted: Vec<&Interval> = intervals.iter().filter(|iv| is_omitted(iv, omit_s)).collect();
    if omitted.is_empty() {
        return 0;
    }
    let secs = |s: f64| (s - omit_s).max(0.0);
    for s in &mut summary.streams {
        let of = || omitted.iter().filter_map(|iv| iv.streams.iter().find(|x| x.id == s.id));
        let sent: u64 = of().map(|x| x.sent_bytes).sum();
        let recv: Option<u64> = of().map(|x| x.received_bytes).sum();
        let retrans: Option<u64> = of().map(|x| x.retransmits).sum();
        s.sender = SideTotal::new(s.sender.bytes.saturating_sub(sent), secs(s.sender.seconds));
        s.receiver = s.receiver.map(|r| SideTotal::new(r.bytes.saturating_sub(recv.unwrap_or(0)), secs(r.seconds)));
        s.retransmits = s.retransmits.zip(retrans).map(|(a, b)| a.saturating_sub(b));
        let snapshot = of().filter_map(|x| x.tcp).next_back();
        if let (Some(t), Some(at)) = (s.tcp.as_mut(), snapshot) {
            t.limits = t.limits.zip(at.limits).map(|(now, then)| now.since(&then, 0));
            t.segs_out = t.segs_out.saturating_sub(at.segs_out);
        }
    }
    for w in &mut summary.ways {
        let of = || omitted.iter().filter_map(|iv| iv.sums.iter().find(|x| x.way == w.way));
        let sent: u64 = of().map(|x| x.sent_bytes).sum();
        let recv: Option<u64> = of().map(|x| x.received_bytes).sum();
        let retrans: Option<u64> = of().map(|x| x.retransmits).sum();
        w.sender = SideTotal::new(w.sender.bytes.saturating_sub(sent), secs(w.sender.seconds));
        w.receiver = w.receiver.map(|r| SideTotal::new(r.bytes.saturating_sub(recv.unwrap_or(0)), secs(r.seconds)));
        w.retransmits = w.retransmits.zip(retrans).map(|(a, b)| a.saturating_sub(b));
        let streams: Vec<&StreamSummary> = summary.streams.iter().filter(|s| s.way == w.way).collect();
        let segs: u64 = streams.iter().filter_map(|s| s.tcp).map(|t| t.segs_out).sum();
        w.retransmit_rate = w.retransmits.filter(|_| segs > 0).map(|n| n as f64 / segs as f64);
        w.limits = limits_of(&streams);
    }
    summary.duration_s = secs(summary.duration_s);
    omitted.len()
}
