//! `--omit` (iperf3 -O): the first seconds of a bulk test left out of its totals, so slow
//! start does not pull the rate down. The omitted intervals stay in the result (and are shown,
//! marked); the totals are the run's less what those intervals counted, over the seconds after
//! them. The kernel's cumulative clocks (limits, segments) are taken from the last omitted
//! interval's snapshot, spurious retransmissions too. What cannot be split by interval (CPU,
//! RTT samples) still covers the whole run, and the plan's note says so.

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
        let counted = of().map(|x| (x.sent_bytes, x.received_bytes, x.retransmits));
        less(counted, &mut s.sender, &mut s.receiver, &mut s.retransmits, omit_s);
        let snapshot = of().filter_map(|x| x.tcp).next_back();
        if let (Some(t), Some(at)) = (s.tcp.as_mut(), snapshot) {
            t.limits = t.limits.zip(at.limits).map(|(now, then)| now.since(&then, 0));
            t.segs_out = t.segs_out.saturating_sub(at.segs_out);
        }
        // Spurious retransmissions over the same seconds as the retransmissions they are a part
        // of (a part is never larger than its whole: "28 retransmitted, 39 of them spurious").
        let dsack_then = snapshot.and_then(|t| t.dsack_segs).unwrap_or(0);
        s.spurious_retransmits =
            s.spurious_retransmits.map(|n| n.saturating_sub(dsack_then)).map(|n| s.retransmits.map_or(n, |r| n.min(r)));
    }
    for w in &mut summary.ways {
        let of = omitted.iter().filter_map(|iv| iv.sums.iter().find(|x| x.way == w.way));
        let counted = of.map(|x| (x.sent_bytes, x.received_bytes, x.retransmits));
        less(counted, &mut w.sender, &mut w.receiver, &mut w.retransmits, omit_s);
        let streams: Vec<&StreamSummary> = summary.streams.iter().filter(|s| s.way == w.way).collect();
        let segs: u64 = streams.iter().filter_map(|s| s.tcp).map(|t| t.segs_out).sum();
        w.retransmit_rate = w.retransmits.filter(|_| segs > 0).map(|n| n as f64 / segs as f64);
        w.spurious_retransmits = streams.iter().map(|s| s.spurious_retransmits).sum();
        w.limits = limits_of(&streams);
    }
    summary.duration_s = secs(summary.duration_s);
    omitted.len()
}

/// A stream's or a way's totals less what the omitted intervals `counted` (bytes sent, bytes
/// received, retransmissions), over the seconds after `omit_s`.
fn less(
    counted: impl Iterator<Item = (u64, Option<u64>, Option<u64>)>,
    sender: &mut SideTotal,
    receiver: &mut Option<SideTotal>,
    retransmits: &mut Option<u64>,
    omit_s: f64,
) {
    // An unknown count in any omitted interval makes the sum unknown.
    let (mut sent, mut recv, mut retrans) = (0u64, Some(0u64), Some(0u64));
    for (s, r, x) in counted {
        sent += s;
        recv = recv.zip(r).map(|(a, b)| a + b);
        retrans = retrans.zip(x).map(|(a, b)| a + b);
    }
    let secs = |s: f64| (s - omit_s).max(0.0);
    *sender = SideTotal::new(sender.bytes.saturating_sub(sent), secs(sender.seconds));
    *receiver = receiver.map(|r| SideTotal::new(r.bytes.saturating_sub(recv.unwrap_or(0)), secs(r.seconds)));
    *retransmits = retransmits.zip(retrans).map(|(a, b)| a.saturating_sub(b));
}
