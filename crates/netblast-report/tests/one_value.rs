//! One figure, one value: every quantity netblast shows in more than one place (the text
//! report, hey's distribution, the HTML page, the CSV, `--assert`'s verdicts and the headline
//! figures `report --compare` sets side by side) has one value in all of them.
//!
//! Checked on real results of every kind (`testdata/real/`, made by `netblast run` and `merge`
//! on loopback) and on random variations of them: latency histograms of random samples
//! (sample counts that are multiples of 1000 included, where two ways of turning 99.9 into a
//! quantile land on neighbouring buckets), retransmit counts known and unknown, agents'
//! starts, HTTP outcomes.

use netblast_report::{csv, html, text};
use netblast_spec::assert::{Assertion, Figure, headline};
use netblast_spec::hist::{self, Distribution, LatencySummary};
use netblast_spec::result::RunResult;
use netblast_spec::units::{fmt_bits_per_s, fmt_ns};
use proptest::prelude::*;

/// The real results, by file name.
fn real() -> Vec<(String, RunResult)> {
    // `real/`: /2 results (also the upgrade's fixtures); `v3/`: /3 results (one of every kind,
    // bidirectional and paced bulk, HTTP/2 and a sweep, a merge of two tests held by different
    // causes); `v4/`: results of this schema (a bulk run with latency probes).
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
    let mut out: Vec<(String, RunResult)> = ["real", "v3", "v4"]
        .iter()
        .flat_map(|d| std::fs::read_dir(root.join(d)).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let r = netblast_spec::upgrade::read_result(&text).unwrap_or_else(|e| panic!("{p:?}: {e}"));
            (p.file_name().unwrap().to_string_lossy().into_owned(), r)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(out.len() >= 9, "the real results of every kind: {:?}", out.iter().map(|x| &x.0).collect::<Vec<_>>());
    out
}

/// The headline figure `name`, if the result has it.
fn fig<'a>(figs: &'a [Figure], name: &str) -> Option<&'a Figure> {
    figs.iter().find(|f| f.name == name)
}

/// The value `--assert` states for `metric` (a `>= 0` assertion always measures).
fn asserted(r: &RunResult, metric: &str, zero: &str) -> String {
    let v = Assertion::parse(&format!("{metric}>=0{zero}")).unwrap().check(r);
    v.measured
}

/// Every quantity shown in more than one place, compared; the first disagreement, named.
fn one_value(name: &str, r: &RunResult) -> Result<(), String> {
    let full = text::full(r);
    let page = html::render(name, r)?;
    let rows = csv::intervals(r);
    let figs = headline(r);
    let differ = |what: &str, a: &str, b: &str| Err(format!("{name}: {what}: {a:?} vs {b:?}"));
    for f in &figs {
        // The HTML's figures table and --assert state each headline figure as it is.
        if !page.contains(&f.shown) {
            return differ(&format!("headline {} in the HTML", f.name), &f.shown, "absent");
        }
        let (metric, zero) = match f.name {
            n if n.ends_with('%') => (&n[..n.len() - 1], "%"),
            n if n.starts_with("throughput") => (n, "bit/s"),
            n if n.starts_with('p')
                || ["latency.", "rtt.", "loaded.", "added.", "idle."].iter().any(|x| n.starts_with(x))
                || n == "jitter" =>
            {
                (n, "ns")
            }
            n => (n, ""),
        };
        let a = asserted(r, metric, zero);
        if a != f.shown {
            return differ(&format!("{} by --assert and the headline", f.name), &a, &f.shown);
        }
    }
    // The latency probes: their line under the totals and the headline figures.
    if let Some(l) = r.latency_probe.as_deref().and_then(|p| p.loaded.as_ref()) {
        let shown = fmt_ns(l.p50_ns as f64);
        if fig(&figs, "loaded.p50").map(|f| f.shown.as_str()) != Some(shown.as_str()) {
            return differ("loaded.p50 by the headline and the result", &shown, "another");
        }
        if !full.contains(&format!("loaded {shown} p50")) {
            return differ("loaded p50 in the probe's line", &shown, "absent");
        }
    }
    // Latency percentiles: the summary line, hey's distribution, the headline.
    let lat: Vec<&LatencySummary> = r
        .summary
        .ways
        .iter()
        .filter_map(|w| w.latency.as_deref())
        .chain(r.summary.http.as_ref().map(|h| &*h.latency))
        .filter(|l| l.count > 0)
        .collect();
    if let [l] = lat[..] {
        for (p, v, hey) in [
            ("p50", l.p50_ns, "50% in"),
            ("p90", l.p90_ns, "90% in"),
            ("p99", l.p99_ns, "99% in"),
            ("p99.9", l.p999_ns, "99.9% in"),
        ] {
            let shown = fmt_ns(v as f64);
            if !full.contains(&format!(" {p} {shown} ")) {
                return differ(&format!("{p} in the text's latency line"), &shown, "absent");
            }
            if let Some(f) = fig(&figs, p) {
                if f.shown != shown {
                    return differ(&format!("{p}: headline and text"), &f.shown, &shown);
                }
            }
            if r.summary.http.is_some() {
                let line = full.lines().find(|x| x.trim_start().starts_with(hey)).unwrap_or("");
                if line.trim() != format!("{hey} {shown}") {
                    return differ(&format!("{p}: hey's distribution and the summary"), line.trim(), &shown);
                }
            }
        }
    }
    // Retransmits: the headline, the text's kernel line, the HTML chart's title. Unknown is
    // absent, never 0.
    match (r.summary.retransmits(), fig(&figs, "retransmits")) {
        (Some(n), Some(f)) => {
            if f.shown != n.to_string() {
                return differ("retransmits: headline and summary", &f.shown, &n.to_string());
            }
            let one_socket = !r.plan.profile.workload.section().own_listener() || r.summary.http.is_some();
            // A test of two ways states each way's count (as iperf3 --bidir does), adding up
            // to the total.
            let each: Vec<u64> = r.summary.ways.iter().filter_map(|w| w.retransmits).collect();
            let by_way = each.len() > 1
                && each.iter().sum::<u64>() == n
                && each.iter().all(|k| full.contains(&format!("{k} retransmitted segments")));
            if one_socket && !full.contains(&format!("{n} retransmitted segments")) && !by_way {
                return differ("retransmits in the text", &n.to_string(), "absent");
            }
            if page.contains("Retransmitted segments per interval") && !page.contains(&format!("({n} in all")) {
                return differ("retransmits in the HTML chart's title", &n.to_string(), "absent");
            }
        }
        (None, None) => {
            if full.contains("0 retransmitted segments") {
                return differ("retransmits not counted", "0 retransmitted segments", "unknown");
            }
            let json = serde_json::to_string(&r.summary.ways).unwrap();
            if json.contains("\"retransmits\"") {
                return differ("retransmits not counted, in the JSON", "present", "absent");
            }
        }
        (a, b) => {
            return differ(
                "retransmits: summary and headline",
                &format!("{a:?}"),
                &format!("{:?}", b.map(|f| &f.shown)),
            );
        }
    }
    // Throughput per way: the headline and the text's summary lines.
    for f in figs.iter().filter(|f| f.name.starts_with("throughput.")) {
        if !full.contains(&format!(" {} ", f.shown)) {
            return differ(&format!("{} in the text", f.name), &f.shown, "absent");
        }
    }
    // HTTP: requests per second, failed and succeeded, in the text and the headline.
    if let Some(h) = &r.summary.http {
        if let Some(f) = fig(&figs, "rps") {
            let rate = full.lines().find(|l| l.trim_start().starts_with("Rate:")).unwrap_or("");
            if !rate.contains(&format!("{} responses", f.shown)) {
                return differ("rps in the text", &f.shown, "absent");
            }
        }
        let failed = h.sent.saturating_sub(h.succeeded);
        if fig(&figs, "http.failed").is_some_and(|f| f.shown != failed.to_string())
            || !full.contains(&format!("), {failed} failed"))
        {
            return differ(
                "http.failed: headline and text",
                &format!("{:?}", fig(&figs, "http.failed").map(|f| &f.shown)),
                &failed.to_string(),
            );
        }
        let pct = |x: f64| netblast_spec::units::sig3(x * 100.0);
        let success = pct(h.success_ratio);
        if !full.contains(&format!("{} succeeded ({success}%", h.succeeded)) {
            return differ("success share in the text", &success, "absent");
        }
        if h.sent > 0 && (h.success_ratio - h.succeeded as f64 / h.sent as f64).abs() > 1e-12 {
            return differ("success share and counts", &h.success_ratio.to_string(), &h.succeeded.to_string());
        }
    }
    // Start skew: the text's line and the HTML agents table's largest skew.
    let starts: Vec<u64> = r.agents.iter().filter_map(|a| a.actual_start_unix_ns).collect();
    if starts.len() > 1 {
        let skew = fmt_ns((starts.iter().max().unwrap() - starts.iter().min().unwrap()) as f64);
        if !full.contains(&format!("Start skew between agents: {skew} ")) {
            return differ("start skew in the text", &skew, "absent");
        }
        if !page.contains(&format!("<td>{skew}</td>")) {
            return differ("start skew in the HTML agents table", &skew, "absent");
        }
    }
    // Verdicts: the text prints each way's; a result of several tests counts the tests that
    // share its leading cause as they are; no "congestion" while the sender's CPU is saturated.
    use netblast_spec::diagnose::{self, Limit};
    for said in netblast_report::limits::tcp(r) {
        let d = &said.diagnosis;
        if !full.contains(&said.verdict) {
            return differ("verdict in the text", &said.verdict, "absent");
        }
        if r.parts.len() > 1 {
            let n = r.parts.iter().flat_map(|p| diagnose::part(r, p)).filter(|x| x.way == d.way).count();
            let k = r.parts.iter().flat_map(|p| diagnose::part(r, p)).filter(|x| x.way == d.way && x.limit == d.limit);
            let shown = format!("{} in {} of {n} tests", netblast_report::limits::name(d.limit), k.count());
            if !said.verdict.starts_with(&shown) {
                return differ("a merged verdict and its tests' verdicts", &said.verdict, &shown);
            }
        }
        let sender = match d.way {
            netblast_spec::profile::Way::Up => r.summary.load.client.as_ref(),
            netblast_spec::profile::Way::Down => r.summary.load.server.as_ref(),
        };
        let busy = sender.is_some_and(|l| l.cpus.iter().any(|c| c.busy() >= diagnose::CPU_BOUND));
        if r.parts.len() <= 1 && d.limit == Limit::Congestion && busy {
            return differ("congestion verdict with the sender's CPU saturated", &said.verdict, "the sender's CPU");
        }
    }
    // Spurious retransmissions are a part of the retransmissions.
    for w in &r.summary.ways {
        if let (Some(sp), Some(all)) = (w.spurious_retransmits, w.retransmits) {
            if sp > all {
                return differ("spurious retransmits above retransmits", &sp.to_string(), &all.to_string());
            }
        }
    }
    // Intervals: the text's rate of each bulk way and the CSV's are the result's.
    if r.plan.profile.kind() == netblast_spec::profile::Kind::Bulk {
        for iv in &r.intervals {
            let t = text::interval(iv, &r.streams, &r.plan.profile);
            for w in &iv.sums {
                let sender = w.sent_bytes > 0;
                let rate = if sender { w.sent_bits_per_s } else { w.received_bits_per_s.unwrap_or(0.0) };
                if !t.is_empty() && !t.contains(&format!(" {} ", fmt_bits_per_s(rate))) {
                    return differ(&format!("interval {} rate: text and result", iv.index), &t, &fmt_bits_per_s(rate));
                }
                let row = format!(",{:.0},", w.sent_bits_per_s);
                if !rows.contains(&row) {
                    return differ(&format!("interval {} sent rate in the CSV", iv.index), &row, "absent");
                }
            }
        }
    }
    Ok(())
}

#[test]
fn every_real_result_shows_one_value_per_quantity() {
    for (name, r) in real() {
        if let Err(e) = one_value(&name, &r) {
            panic!("{e}");
        }
    }
}

/// A histogram of `samples` in ns, encoded, and its summary.
fn dist_of(samples: &[u64]) -> Distribution {
    let mut h = hist::new_latency_histogram();
    for &v in samples {
        hist::record_ns(&mut h, v);
    }
    Distribution::of(&h)
}

/// Latency samples: a body and a tail, `1000 × k` of them or any count.
fn samples() -> impl Strategy<Value = Vec<u64>> {
    let n = prop_oneof![(1usize..5).prop_map(|k| k * 1000), 10usize..3000];
    (n, 1_000u64..100_000, 1u64..1000).prop_flat_map(|(n, body, tail)| {
        proptest::collection::vec(prop_oneof![9 => body / 2..body * 2, 1 => body * tail..body * tail + body], n..=n)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn random_variations_of_real_results_show_one_value_per_quantity(
        pick in 0usize..64,
        lat in samples(),
        retrans in proptest::option::of(0u64..100_000),
        starts in proptest::collection::vec(0u64..50_000_000, 2..6),
        succeeded_share in 0.0f64..=1.0,
    ) {
        let all = real();
        let (name, mut r) = all[pick % all.len()].clone();
        let l = dist_of(&lat);
        for w in r.summary.ways.iter_mut() {
            if w.latency.is_some() {
                w.latency = Some(l.clone());
            }
            if w.retransmits.is_some() || retrans.is_none() {
                w.retransmits = retrans;
                w.retransmit_rate = retrans.map(|n| n as f64 / 1e6);
            }
        }
        if retrans.is_none() {
            for iv in r.intervals.iter_mut() {
                for w in iv.sums.iter_mut() {
                    w.retransmits = None;
                }
                for s in iv.streams.iter_mut() {
                    s.retransmits = None;
                }
            }
            for s in r.summary.streams.iter_mut() {
                s.retransmits = None;
            }
            if let Some(t) = r.summary.http.as_mut() {
                t.tcp = None;
            }
        }
        if let Some(h) = r.summary.http.as_mut() {
            h.latency = l.clone();
            h.succeeded = (h.sent as f64 * succeeded_share) as u64;
            h.success_ratio = if h.sent > 0 { h.succeeded as f64 / h.sent as f64 } else { 0.0 };
        }
        for (a, s) in r.agents.iter_mut().zip(starts.iter().cycle()) {
            if a.actual_start_unix_ns.is_some() {
                a.actual_start_unix_ns = Some(1_800_000_000_000_000_000 + s);
            }
        }
        prop_assert!(one_value(&name, &r).is_ok(), "{}", one_value(&name, &r).unwrap_err());
    }
}

#[test]
fn a_compared_chart_states_each_runs_own_count() {
    // Found by a user: the retransmit chart of `report --compare` said "(9 in all)", the base
    // run's count, over runs that had 36 and 17.
    let runs: Vec<(String, RunResult)> =
        real().into_iter().filter(|(_, r)| r.summary.retransmits().is_some_and(|n| n > 0)).collect();
    assert!(runs.len() >= 2, "real results with retransmissions: {}", runs.len());
    let named: Vec<(String, &RunResult)> = runs.iter().map(|(n, r)| (n.clone(), r)).collect();
    let page = html::render_compare(&named).unwrap();
    let title = page.lines().find(|l| l.contains("Retransmitted segments per interval")).expect("the chart");
    for (name, r) in &named {
        let n = r.summary.retransmits().unwrap();
        assert!(title.contains(&format!("{name}: {n} in all")), "{name} ({n}) in {title}");
    }
}

#[test]
fn per_cpu_receivers_are_named_per_cpu_not_per_flow() {
    // Found by a user: `--profile pps-udp` showed a flow's Received/s above its Sent/s (400 k vs
    // 282 k): the receivers are one per server CPU, and the kernel decides which takes what.
    let per_cpu: Vec<(String, RunResult)> = real()
        .into_iter()
        .filter(|(_, r)| r.plan.profile.workload.per_cpu_receivers())
        .filter(|(_, r)| r.plan.profile.workload.uses_udp())
        .collect();
    assert!(!per_cpu.is_empty(), "a real per-CPU UDP result");
    for (name, r) in &per_cpu {
        let header = text::interval_header(&r.plan.profile);
        assert!(header.contains("Recv/s/CPU") && !header.contains("Received/s"), "{name}: {header}");
        let page = html::render(name, r).unwrap();
        assert!(page.contains("received on its server CPU"), "{name}");
    }
}
