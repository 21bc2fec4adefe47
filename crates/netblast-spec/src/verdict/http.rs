//! An HTTP test's verdict: its failed share, then its pool, server or rate.

use super::pct;
use crate::diagnose::{client_cpus, side_cpu};
use crate::profile::Workload;
use crate::result::{HttpSummary, RunResult};
use crate::units::{fmt_ns, fmt_per_s};

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
pub fn http(r: &RunResult, h: &HttpSummary) -> Option<String> {
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
    let worker = crate::diagnose::saturated_worker(r);
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
fn http_failures(h: &HttpSummary, expected: &crate::profile::StatusSet) -> Option<String> {
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
