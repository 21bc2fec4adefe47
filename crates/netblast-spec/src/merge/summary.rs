//! Totals merged: each way's, HTTP's and the CPU cost, with spans shifted onto the merged
//! clock; and an agent's own totals from its parts.

use super::base::{HistAcc, MergeError, Place, sum_all, sum_any};
use crate::profile::Way;
use crate::result::{
    CpuSummary, CpuUsage, HttpConnections, HttpErrorCount, HttpParts, HttpPhases, HttpSummary, HttpTcp, MsgTotals,
    Part, RttSummary, RunResult, StreamSummary, Summary, WayParts, WaySummary,
};
use std::collections::BTreeMap;

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

pub(crate) fn merge_summaries(names: &[&str], sums: &[&Summary], places: &[Place]) -> Result<Summary, MergeError> {
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
        if parts.is_empty() { None } else { Some(merge_http_summary(names, &parts, &shifted)?) }
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

pub(crate) fn merge_way_summary(
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

pub(crate) fn merge_http_summary(
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
        if parts.iter().all(|(_, h)| f(h) == f(first)) { f(first).to_string() } else { "mixed".to_string() }
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
    let mut merged = HttpSummary::new(HttpParts {
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
    });
    merged.unloaded_ttfb_ns = parts.iter().filter_map(|(_, h)| h.unloaded_ttfb_ns).min();
    Ok(merged)
}
