//! An HTTP test's report: its interval columns and lines, its totals (hey's latency
//! percentiles and histogram, phases, status codes, errors, connections, kernel TCP figures),
//! and a stepped rate's sweep.

use crate::chart::{Plot, Series, Shape, Unit};
use crate::lines::{iv_span, p50_p99_max, pct, pcts, retransmissions, side_cpu};
use crate::markup::{esc, lat_cells};
use crate::series::{at, secs};
use netblast_spec::diagnose::client_cpus;
use netblast_spec::hist::{Distribution, LatencySummary};
use netblast_spec::profile::{Profile, Workload};
use netblast_spec::result::{HttpSummary, Interval, RunResult};
use netblast_spec::units::{fmt_bits_per_s, fmt_bytes, fmt_ns, fmt_per_s};
use std::collections::BTreeMap;
use std::fmt::Write;

/// HTTP's part of the report: hey's and wrk's figures, the sweep's steps, statuses and errors.
pub(crate) struct Report;

impl super::KindReport for Report {
    fn interval_header(&self, _profile: &Profile) -> String {
        HEADER.to_string()
    }
    fn interval(&self, iv: &Interval, _streams: &[netblast_spec::result::StreamInfo], profile: &Profile) -> String {
        interval(iv, profile)
    }
    fn summary(&self, s: &mut String, r: &RunResult) {
        summary(s, r);
        sweep_lines(s, r);
    }
    fn html_lead(&self, out: &mut String, r: &RunResult) {
        sweep_table(out, r)
    }
    fn html_tables(&self, out: &mut String, r: &RunResult) {
        tables(out, r)
    }
    fn verdicts(&self, r: &RunResult) -> Vec<String> {
        r.summary.http.as_ref().and_then(|h| http(r, h)).into_iter().collect()
    }

    fn plots(&self, r: &RunResult, compact: bool) -> Vec<Plot> {
        plots(r, compact)
    }
}

pub(crate) fn interval(iv: &Interval, profile: &Profile) -> String {
    let Some(h) = &iv.http else { return String::new() };
    let lat = |f: fn(&LatencySummary) -> u64| h.latency.as_ref().map(|l| fmt_ns(f(l) as f64)).unwrap_or_default();
    format!(
        "[SUM] {}  {:>12}  {:>12}  {:>9}  {:>9}  {:>9}  {:>6}  {:>4}\n",
        iv_span(iv, profile),
        fmt_per_s(h.sent_per_s),
        fmt_per_s(h.responses_per_s),
        lat(|l| l.p50_ns),
        lat(|l| l.p99_ns),
        lat(|l| l.max_ns),
        // A response with a status outside the expected set failed as surely as a reset.
        h.errors + h.failed_status,
        h.late
    )
}

/// The column header.
pub(crate) const HEADER: &str =
    "[ ID] Interval           Sent/s        Responses/s   Lat p50    p99        max        Errors  Late\n";

/// Percentiles hey prints in its "Latency distribution".
pub(crate) const HEY_PERCENTILES: [f64; 8] = [10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9];
/// Buckets of the response time histogram, and the longest bar.
pub(crate) const BARS: u64 = 10;
pub(crate) const BAR_WIDTH: u64 = 40;

/// hey's view of a latency distribution: ten equal-width buckets from the fastest to the
/// slowest response with a bar each, then the percentiles.
pub(crate) fn latency_bars(h: &hdrhistogram::Histogram<u64>) -> String {
    let mut s = String::new();
    if h.is_empty() {
        return s;
    }
    let (lo, hi) = (h.min(), h.max());
    let width = ((hi - lo) / BARS).max(1);
    let mut counts = [0u64; BARS as usize];
    for v in h.iter_recorded() {
        let i = ((h.lowest_equivalent(v.value_iterated_to()).max(lo) - lo) / width).min(BARS - 1);
        counts[i as usize] += v.count_at_value();
    }
    let most = counts.iter().copied().max().unwrap_or(1).max(1);
    let _ = writeln!(s, "  Response time histogram (upper bound of each bucket):");
    for (i, n) in counts.iter().enumerate() {
        let upper = if i as u64 == BARS - 1 { hi } else { lo + width * (i as u64 + 1) };
        let bar = "■".repeat(((n * BAR_WIDTH).div_ceil(most)) as usize);
        let _ = writeln!(s, "    {:>10} [{n}]\t|{bar}", fmt_ns(upper as f64));
    }
    let _ = writeln!(s, "  Latency distribution:");
    for p in HEY_PERCENTILES {
        let _ = writeln!(s, "    {p}% in {}", fmt_ns(netblast_spec::hist::at_percentile(h, p) as f64));
    }
    s
}

pub(crate) fn summary(s: &mut String, r: &RunResult) {
    let Some(h) = &r.summary.http else { return };
    let streams = r.plan.profile.workload.http().map_or(1, |x| x.streams);
    let _ = writeln!(
        s,
        "HTTP summary ({}, {}{}, {} connections{}, {:.2} s)",
        h.mode.replace('_', " "),
        h.version,
        if h.tls { " over TLS" } else { "" },
        h.connections.configured,
        if streams > 1 { format!(" x {streams} streams") } else { String::new() },
        h.seconds
    );
    // "Failed" is one count everywhere (text, --assert http.failed, the HTML): sent, not
    // succeeded; those without any response are a part of it.
    let _ = writeln!(
        s,
        "  Requests:     {} sent, {} completed ({} without a response); {} succeeded ({}%, status {}), {} failed",
        h.sent,
        h.completed,
        h.sent.saturating_sub(h.completed),
        h.succeeded,
        netblast_spec::units::sig3(h.success_ratio * 100.0),
        r.plan.profile.workload.http().map(|x| x.expected().to_string()).unwrap_or_default(),
        h.sent.saturating_sub(h.succeeded)
    );
    match h.target_rate {
        Some(t) => {
            let _ = writeln!(
                s,
                "  Rate:         target {}, achieved {} sent, {} responses; {} sent late (no free connection at the intended time)",
                fmt_per_s(t),
                fmt_per_s(h.sent_per_s),
                fmt_per_s(h.responses_per_s),
                h.late
            );
        }
        None => {
            let _ = writeln!(s, "  Rate:         {} responses", fmt_per_s(h.responses_per_s));
        }
    }
    // What succeeded beside what was answered (wrk's "Non-2xx", k6's http_req_failed): a
    // refusal answered fast is not throughput.
    if h.succeeded < h.sent {
        let _ = writeln!(
            s,
            "  Succeeded:    {} (a status in {}), of {} answered",
            fmt_per_s(h.succeeded as f64 / h.seconds.max(1e-9)),
            r.plan.profile.workload.http().map(|x| x.expected().to_string()).unwrap_or_default(),
            fmt_per_s(h.responses_per_s)
        );
    }
    let secs = h.seconds.max(1e-9);
    let _ = writeln!(
        s,
        "  Transfer:     out {} ({}), in {} ({})",
        fmt_bytes(h.bytes_sent),
        fmt_bits_per_s(h.bytes_sent as f64 * 8.0 / secs),
        fmt_bytes(h.bytes_received),
        fmt_bits_per_s(h.bytes_received as f64 * 8.0 / secs)
    );
    if h.latency.count > 0 {
        let from = if h.mode == "open_loop" { "from the intended send time" } else { "from the send" };
        let _ = writeln!(s, "  Latency ({from}): {}", pcts(&h.latency));
        if let Some(hist) = h.latency.histogram() {
            s.push_str(&latency_bars(&hist));
        }
    }
    let phase = |name: &str, l: &Option<Distribution>, s: &mut String| {
        if let Some(l) = l {
            let _ = writeln!(s, "  {name:<13} {} ({} samples)", p50_p99_max(l), l.count);
        }
    };
    phase("TCP connect:", &h.phases.connect, s);
    phase("TLS:", &h.phases.tls, s);
    phase("First byte:", &h.phases.ttfb, s);
    if let Some(ns) = h.unloaded_ttfb_ns {
        let _ = writeln!(
            s,
            "  Alone:        first byte {} (the fastest of a few requests sent one at a time before the load, not counted)",
            fmt_ns(ns as f64)
        );
    }
    phase("Body:", &h.phases.body, s);
    phase("Send lag:", &h.phases.send_lag, s);
    if !h.status_codes.is_empty() {
        let codes: Vec<String> = h.status_codes.iter().map(|(c, n)| format!("[{c}] {n}")).collect();
        let _ = writeln!(s, "  Status codes: {}", codes.join(", "));
    }
    for e in &h.errors {
        let _ = writeln!(s, "  Errors:       {} {} (e.g. {})", e.kind, e.count, e.sample);
    }
    let c = &h.connections;
    let _ = writeln!(
        s,
        "  Connections:  {} configured, {} established, {} failed, {} open at most",
        c.configured, c.established, c.failed, c.peak_open
    );
    if let Some(t) = &h.tcp {
        let _ = writeln!(
            s,
            "  TCP (kernel, source {}, {} connections): {}",
            r.probe.tcp_source,
            t.connections,
            retransmissions(Some(t.retransmits), t.retransmit_rate, t.spurious_retransmits)
        );
        if let Some(k) = &t.kernel_rtt {
            let _ = writeln!(s, "  Kernel RTT:   {} ({} samples: ACKs that timed a segment)", p50_p99_max(k), k.count);
        }
        if let Some(k) = &t.srtt {
            let _ = writeln!(s, "  Smoothed RTT: {} (one per connection, at its close)", p50_p99_max(k));
        }
    }
}

/// An HTTP rate sweep's steps, one line each, the first that did not hold marked.
pub(crate) fn sweep_lines(s: &mut String, r: &RunResult) {
    let Some(steps) = crate::sweep::steps(r) else { return };
    let _ = writeln!(s, "Rate sweep: step  seconds        offered     achieved        p50        p99   failed");
    for st in &steps {
        let (p50, p99) = match &st.latency {
            Some(l) => (fmt_ns(l.p50_ns as f64), fmt_ns(l.p99_ns as f64)),
            None => ("-".into(), "-".into()),
        };
        let _ = writeln!(
            s,
            "            {:>4}  {:>7} {:>14} {:>12} {:>10} {:>10} {:>8}{}",
            st.n,
            format!("{:.0}-{:.0}", st.span.0, st.span.1),
            fmt_per_s(st.offered),
            fmt_per_s(st.achieved),
            p50,
            p99,
            st.errors,
            if st.turned.is_some() { format!("  <- {}", crate::sweep::why(st)) } else { String::new() }
        );
    }
}

/// An HTTP rate sweep: one row per step, the first that missed its rate or latency marked.
pub(crate) fn sweep_table(out: &mut String, r: &RunResult) {
    let Some(steps) = crate::sweep::steps(r) else { return };
    out.push_str(
        "<h2>Rate sweep: one row per step</h2><table id=\"sweep\"><tr><th>step</th><th>seconds</th>\
         <th>offered</th><th>achieved</th><th>p50</th><th>p99</th><th>failed</th><th class=\"l\"></th></tr>",
    );
    for s in &steps {
        let _ = write!(
            out,
            "<tr{}><td>{}</td><td>{:.0}–{:.0}</td><td>{}</td><td>{}</td>{}<td>{}</td><td class=\"l\">{}</td></tr>",
            if s.turned.is_some() { " class=\"turn\"" } else { "" },
            s.n,
            s.span.0,
            s.span.1,
            fmt_per_s(s.offered),
            fmt_per_s(s.achieved),
            lat_cells(s.latency.as_ref()),
            s.errors,
            esc(&crate::sweep::why(s))
        );
    }
    out.push_str("</table>\n");
}

/// HTTP: status codes, failures by class, where the time went (phases), connections.
pub(crate) fn tables(out: &mut String, r: &RunResult) {
    let Some(h) = &r.summary.http else { return };
    let _ = write!(
        out,
        "<h2>HTTP</h2><table id=\"http\"><tr><th class=\"l\">mode</th><td class=\"l\">{} {}{}</td></tr>\
         <tr><th class=\"l\">requests sent</th><td>{} ({})</td></tr>\
         <tr><th class=\"l\">responses</th><td>{} ({})</td></tr>\
         <tr><th class=\"l\">succeeded (expected status)</th><td>{} ({:.2}%)</td></tr>\
         <tr><th class=\"l\">sent late (open loop: behind the schedule)</th><td>{}</td></tr>\
         <tr><th class=\"l\">bytes sent / received</th><td>{} / {}</td></tr>\
         <tr><th class=\"l\">connections configured / established / failed / most open</th><td>{} / {} / {} / {}</td></tr>",
        esc(&h.mode.replace('_', " ")),
        esc(match h.version.as_str() {
            "http1" => "HTTP/1.1",
            "http2" => "HTTP/2",
            v => v,
        }),
        if h.tls { " over TLS" } else { "" },
        h.sent,
        fmt_per_s(h.sent_per_s),
        h.completed,
        fmt_per_s(h.responses_per_s),
        h.succeeded,
        h.success_ratio * 100.0,
        h.late,
        fmt_bytes(h.bytes_sent),
        fmt_bytes(h.bytes_received),
        h.connections.configured,
        h.connections.established,
        h.connections.failed,
        h.connections.peak_open,
    );
    if let Some(t) = h.target_rate {
        let _ = write!(out, "<tr><th class=\"l\">target rate</th><td>{}</td></tr>", fmt_per_s(t));
    }
    out.push_str("</table>\n<table id=\"status\"><tr><th class=\"l\">status</th><th>responses</th></tr>");
    for (code, n) in &h.status_codes {
        let _ = write!(out, "<tr><td class=\"l\">{}</td><td>{n}</td></tr>", esc(code));
    }
    out.push_str("</table>\n");
    if !h.errors.is_empty() {
        out.push_str(
            "<table id=\"errors\"><tr><th class=\"l\">failure</th><th>count</th><th class=\"l\">e.g.</th></tr>",
        );
        for e in &h.errors {
            let _ = write!(
                out,
                "<tr><td class=\"l\">{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
                esc(&e.kind),
                e.count,
                esc(&e.sample)
            );
        }
        out.push_str("</table>\n");
    }
    let ph = &h.phases;
    let phases = [
        ("TCP connect", &ph.connect),
        ("TLS handshake", &ph.tls),
        ("time to first byte", &ph.ttfb),
        ("body", &ph.body),
        ("send lag (open loop: sent after its scheduled instant)", &ph.send_lag),
    ];
    out.push_str(
        "<table id=\"phases\"><tr><th class=\"l\">phase</th><th>count</th><th>p50</th><th>p99</th><th>max</th></tr>",
    );
    for (name, d) in phases {
        let Some(l) = d.as_deref().filter(|l| l.count > 0) else { continue };
        let _ = write!(
            out,
            "<tr><td class=\"l\">{name}</td><td>{}</td>{}<td>{}</td></tr>",
            l.count,
            lat_cells(Some(l)),
            fmt_ns(l.max_ns as f64)
        );
    }
    out.push_str("</table>\n");
}

/// HTTP: requests sent and responses per second, and the target rate in open loop.
pub(crate) fn http_rate(r: &RunResult) -> Option<Plot> {
    let ivs: Vec<_> = r.intervals.iter().filter_map(|iv| Some((iv, iv.http.as_ref()?))).collect();
    if ivs.is_empty() {
        return None;
    }
    let mut series = vec![
        Series::new("responses", ivs.iter().map(|(iv, h)| at(iv, h.responses_per_s)).collect()).bold(),
        Series::new("requests sent", ivs.iter().map(|(iv, h)| at(iv, h.sent_per_s)).collect()),
    ];
    let target: Vec<_> = ivs.iter().filter_map(|(iv, h)| Some(at(iv, h.target_rate?))).collect();
    if !target.is_empty() {
        series.push(Series::new("target (offered rate)", target).dashed());
    }
    Some(Plot::over_time("http-rate", "Requests per second", Unit::PerSecond("requests"), Shape::Steps, series))
}

/// HTTP: responses per second by status code.
pub(crate) fn http_status(r: &RunResult, compact: bool) -> Option<Plot> {
    let mut codes: BTreeMap<&str, Vec<(f64, f64, f64)>> = BTreeMap::new();
    for iv in &r.intervals {
        let Some(h) = &iv.http else { continue };
        for (code, n) in &h.status {
            codes.entry(code).or_default().push(at(iv, *n as f64 / secs(iv)));
        }
    }
    // One code only says what the rate chart says; a comparison keeps its charts few.
    if codes.len() < 2 || compact {
        return None;
    }
    let series = codes.into_iter().map(|(c, v)| Series::new(format!("status {c}"), v)).collect();
    Some(Plot::over_time(
        "http-status",
        "Responses per second by status code",
        Unit::PerSecond("responses"),
        Shape::Steps,
        series,
    ))
}

/// HTTP's own charts: requests sent and responses per second, responses by status code.
pub(crate) fn plots(r: &RunResult, compact: bool) -> Vec<Plot> {
    let mut out: Vec<Plot> = http_rate(r).into_iter().collect();
    out.extend(http_status(r, compact));
    out
}

/// How many times its fastest answer (the run's, or that of a few requests sent one at a time
/// before an open-loop load) a server's answers may take before a pool that ran out is said
/// to have run out because the server slowed: one request alone on a lane takes up to about
/// three times the fastest (57 µs against 19 µs from netblast's responder, 97 µs against 30 µs
/// from nginx, on loopback); a queue at the server takes many more (1.2 ms against 145 µs from
/// nginx at 50 lanes it could not serve).
const SLOWED: f64 = 3.0;

/// An HTTP test: first, when a share of its requests failed (a status outside the expected
/// set, or no response), that share and its causes, since failed answers are not throughput;
/// then, open loop, whether the pool kept up with the schedule and the server with the rate;
/// closed loop, what the lanes' latency allows (Little's law). Lanes are every connection of
/// the run (every test's, in a merged result) times its HTTP/2 streams.
pub(crate) fn http(r: &RunResult, h: &HttpSummary) -> Option<String> {
    let Workload::Http(w) = &r.plan.profile.workload else { return None };
    let conns = f64::from(h.connections.configured.max(1));
    let streams = f64::from(w.streams.max(1));
    let lanes = conns * streams;
    let lane_words = if streams > 1.0 {
        format!("{conns:.0} connections x {streams:.0} streams")
    } else {
        format!("{conns:.0} connections")
    };
    let mean_s = h.latency.mean_ns / 1e9;
    // A worker thread that ran nearly all the time is the client's own limit; a saturated CPU it
    // ran on but shared is named with who took it.
    let worker = crate::lines::saturated_worker(r);
    let shared = r.summary.load.client.as_ref().and_then(|l| side_cpu(l, &client_cpus(r)));
    let own =
        worker.is_some() || (shared.is_some() && r.summary.load.client.as_ref().is_none_or(|l| l.threads.is_empty()));
    let cpu = match (&worker, &shared) {
        (Some(w), _) => format!("; {w}"),
        (None, Some(c)) => format!("; the client's {c}"),
        (None, None) => String::new(),
    };
    let failures = http_failures(h, &w.expected());
    if h.completed == 0 {
        return Some(format!(
            "HTTP: no response completed of {} requests{}{cpu}",
            h.sent,
            failures.unwrap_or_default()
        ));
    }
    if h.succeeded == 0 {
        return Some(format!(
            "HTTP: every request failed{}: {} answered, none with an expected status, so nothing measured the \
             server's service{cpu}",
            failures.unwrap_or_default(),
            fmt_per_s(h.responses_per_s)
        ));
    }
    let lead = failures.map(|f| format!("HTTP: requests failed{f}; of what succeeded: ")).unwrap_or_default();
    let head = if lead.is_empty() { "HTTP: " } else { "" };
    let ok_per_s = h.succeeded as f64 / h.seconds.max(1e-9);
    if let Some(target) = h.target_rate {
        let late = h.late as f64 / h.sent.max(1) as f64;
        // Lanes the rate needs in flight (Little's law) at each request's own time on its
        // lane, written to answered: the latency from the intended time also counts the wait
        // for a free lane, and read "111 244 requests are in flight, 50 lanes".
        let on_lane_ns = match (&h.phases.ttfb, &h.phases.body) {
            (Some(t), body) => t.summary.mean_ns + body.as_ref().map_or(0.0, |b| b.summary.mean_ns),
            (None, _) => h.latency.mean_ns,
        };
        let needed = (target * on_lane_ns / 1e9).ceil();
        // The server answering slower than the rate, with the client's own threads not
        // saturated and lanes enough for the rate at a few times its fastest answer, is the
        // server's limit: its lanes ran out because its answers slowed. Lanes too few for the
        // rate even then are the pool's limit, whatever the server could do with more.
        // The fastest answer: the run's, or the requests' sent alone before the load when faster
        // (a server that could not keep up from the first request on queued even the run's
        // fastest: 275-330 us against nginx's 60-80 us alone).
        let fastest_ns = h.phases.ttfb.as_ref().map(|t| t.summary.min_ns).into_iter().chain(h.unloaded_ttfb_ns).min();
        let room = fastest_ns.is_some_and(|f| lanes >= target * SLOWED * f as f64 / 1e9);
        if h.responses_per_s < target * 0.95 && late >= 0.01 && worker.is_none() && room {
            return Some(format!(
                "{lead}{head}the server is slower than the offered rate: {} answered of {} offered (p99 {}); the pool \
                 ran out as its answers slowed ({} of {} requests waited for a free connection){cpu}",
                fmt_per_s(h.responses_per_s),
                fmt_per_s(target),
                fmt_ns(h.latency.p99_ns as f64),
                h.late,
                h.sent
            ));
        }
        if late >= 0.01 {
            return Some(format!(
                "{lead}{head}connection pool exhausted: {} of {} requests ({}) waited for a free connection; at {} \
                 and a mean {} from a request written to its answer, {needed:.0} requests are in flight, {lanes:.0} \
                 lanes open ({lane_words}; raise --connections){cpu}",
                h.late,
                h.sent,
                pct(late),
                fmt_per_s(target),
                fmt_ns(on_lane_ns)
            ));
        }
        if h.responses_per_s < target * 0.95 {
            return Some(format!(
                "{lead}{head}the server is slower than the offered rate: {} answered of {} offered (p99 {}){cpu}",
                fmt_per_s(h.responses_per_s),
                fmt_per_s(target),
                fmt_ns(h.latency.p99_ns as f64)
            ));
        }
        return Some(format!(
            "{lead}{head}the offered {} held with {} late; p99 {}{cpu}",
            fmt_per_s(target),
            pct(late),
            fmt_ns(h.latency.p99_ns as f64)
        ));
    }
    let bound = if mean_s > 0.0 { lanes / mean_s } else { 0.0 };
    let limit = if cpu.is_empty() {
        "the time per response (the server's, and the path's) is the limit; more lanes ask more of it".to_string()
    } else if own {
        format!("the client's CPU is the limit, not the server{cpu}")
    } else {
        format!(
            "the CPUs the client ran on were saturated but not by the client alone{cpu}: the host's CPU is the limit, \
             shared by the client ({:.2} CPUs) and whatever else runs there (the server, if it is on this host)",
            r.summary.cpu.client.cpus_used()
        )
    };
    let ok = if lead.is_empty() { String::new() } else { format!(" ({} succeeded)", fmt_per_s(ok_per_s)) };
    Some(format!(
        "{lead}{}closed loop: {lane_words} each waiting a mean {} per response allow {}, and {} were answered{ok}: \
         {limit}",
        if lead.is_empty() { "HTTP " } else { "" },
        fmt_ns(h.latency.mean_ns),
        fmt_per_s(bound),
        fmt_per_s(h.responses_per_s)
    ))
}

/// The requests that failed, when they are 1% of those sent or more: ` (N of M, X%: [503] n,
/// timeout n, ...)`, the unexpected statuses first, then the failures without a response.
fn http_failures(h: &HttpSummary, expected: &netblast_spec::profile::StatusSet) -> Option<String> {
    let failed = h.sent.saturating_sub(h.succeeded);
    let share = failed as f64 / h.sent.max(1) as f64;
    if failed == 0 || share < 0.01 {
        return None;
    }
    Some(format!(
        " ({failed} of {}, {}: {}; expected status {expected})",
        h.sent,
        pct(share),
        h.failure_causes(expected).join(", ")
    ))
}
