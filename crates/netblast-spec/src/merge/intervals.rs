//! Intervals merged on the reference clock, a short tail folded into the interval before it,
//! and the totals of a partial log added up from its intervals.

use super::base::{HistAcc, Input, MergeError, Place, sum_all, sum_any};
use crate::profile::Way;
use crate::result::per_second;
use crate::result::{
    HttpInterval, HttpParts, HttpSummary, Interval, MsgInterval, MsgTotals, StreamInterval, Summary, TcpPackets,
    UdpTotals, WayInterval, WayParts, WaySummary,
};
use std::collections::BTreeMap;

pub(crate) fn merge_intervals(inputs: &[Input<'_>], places: &[Place]) -> Result<Vec<Interval>, MergeError> {
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
    // The span they cover: from the start for a whole run, from the first kept interval for a
    // window of one (a search step less its warm-up).
    let first = intervals.iter().map(|iv| iv.start_s).fold(f64::INFINITY, f64::min);
    let last = intervals.iter().map(|iv| iv.end_s).fold(0.0, f64::max);
    let secs = if intervals.is_empty() { 0.0 } else { (last - first).max(0.0) };
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
            tcp: m.segs_out.map(|segs| TcpPackets::new(segs, None, secs)),
            // cps counts its failed connections, UDP its missing datagrams: what was lost.
            lost: m.failed.or(m.udp.map(|q| q.lost.max(0) as u64)),
            udp: m.udp.map(|q| UdpTotals { quality: Some(q), ..UdpTotals::default() }),
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
pub(crate) fn add_stream_interval(s: &mut StreamInterval, t: &StreamInterval) -> Result<(), MergeError> {
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

pub(crate) fn merge_way_interval(
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

pub(crate) fn merge_http_interval(
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
