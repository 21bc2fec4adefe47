//! The result as one self-contained HTML page (`netblast report RESULT.json --html FILE`):
//! inline SVG charts drawn with plotters' SVG backend, no script, no external resource, so it
//! reads the same offline, in a mail attachment or in a CI artifact viewer.
//!
//! Charts, each present when the result holds its figures (`<figure id="chart-NAME">`):
//! - `throughput`: bits/s over time, the total and per stream (per agent for merged and fleet
//!   results), received where a receiver reported, sent otherwise;
//! - `latency`: the latency percentile spectrum of the whole run (HdrHistogram's plot: the
//!   tail on a log axis of 1/(1-q), labelled 90%, 99%, 99.9%…), per way or HTTP;
//! - `rtt`: the kernel's RTT samples as the same spectrum (eBPF; TCP_INFO srtt samples else);
//! - `retransmits`: retransmitted segments per interval;
//! - `http-rate`: requests sent and responses per second over time (and the target rate);
//! - `http-status`: responses per second by status code over time.
//!
//! Tables: the headline figures (with `--compare BASE`, the base's beside them and the change
//! in %), the agents of a merged or fleet result with their start skew, errors and warnings.

use netblast_spec::assert::{headline, Figure};
use netblast_spec::hist::{hist_of, EncodedHistogram};
use netblast_spec::profile::Way;
use netblast_spec::units::{fmt_bits_per_s, fmt_ns};
use netblast_spec::RunResult;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Width and height of every chart, in SVG pixels.
const SIZE: (u32, u32) = (760, 330);
/// Most per-stream (or per-agent) lines on the throughput chart; beyond it only the total.
const MAX_LINES: usize = 16;

/// One chart of a result.
struct Chart {
    id: &'static str,
    title: String,
    svg: String,
}

/// A named line: (x, y) points.
type Line = (String, Vec<(f64, f64)>);

/// Renders the page for `r`; with `base`, the run it is compared with (its name and result).
pub fn render(name: &str, r: &RunResult, base: Option<(&str, &RunResult)>) -> Result<String, String> {
    let mut out = String::with_capacity(256 * 1024);
    let title = format!("netblast {} — {}", r.plan.profile.kind().name(), esc(name));
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>\n<style>{CSS}</style></head><body>\n<h1>{title}</h1>\n"
    );
    match base {
        Some((bname, b)) => {
            out.push_str("<div class=\"pair\">");
            about(&mut out, bname, b, "base");
            about(&mut out, name, r, "this run");
            out.push_str("</div>\n");
            compare_table(&mut out, &headline(b), &headline(r));
        }
        None => {
            about(&mut out, name, r, "");
            figures_table(&mut out, &headline(r));
        }
    }
    let now = charts(r)?;
    match base {
        Some((_, b)) => {
            let before = charts(b)?;
            let mut ids: Vec<&'static str> = before.iter().chain(&now).map(|c| c.id).collect();
            let order = |id: &str| CHART_IDS.iter().position(|x| *x == id).unwrap_or(usize::MAX);
            ids.sort_by_key(|id| order(id));
            ids.dedup();
            for id in ids {
                out.push_str("<div class=\"pair\">");
                for (prefix, set, label) in [("base-", &before, "base"), ("", &now, "this run")] {
                    match set.iter().find(|c| c.id == id) {
                        Some(c) => figure(&mut out, prefix, c, label),
                        None => {
                            let _ = write!(out, "<div class=\"missing\">{label}: no {id} figures</div>");
                        }
                    }
                }
                out.push_str("</div>\n");
            }
        }
        None => now.iter().for_each(|c| figure(&mut out, "", c, "")),
    }
    if let Some((_, b)) = base {
        agents_table(&mut out, b, "base");
    }
    agents_table(&mut out, r, if base.is_some() { "this run" } else { "" });
    out.push_str("</body></html>\n");
    Ok(out)
}

const CHART_IDS: [&str; 6] = ["throughput", "latency", "rtt", "retransmits", "http-rate", "http-status"];

const CSS: &str = "body{font-family:sans-serif;margin:1.5em;color:#222;max-width:1600px}\
h1{font-size:1.4em}h2{font-size:1.1em;margin:1.2em 0 .3em}\
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .6em;text-align:right}\
th{background:#f2f2f2}td.l,th.l{text-align:left}.better{color:#070}.worse{color:#b00}\
.pair{display:grid;grid-template-columns:1fr 1fr;gap:1em}figure{margin:.5em 0}\
figcaption{font-weight:bold;margin-bottom:.2em}svg{max-width:100%;height:auto}\
.missing{color:#888;padding:2em}.warn{color:#a60}.err{color:#b00}";

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn figure(out: &mut String, prefix: &str, c: &Chart, label: &str) {
    let label = if label.is_empty() { String::new() } else { format!("{label}: ") };
    let _ = writeln!(
        out,
        "<figure id=\"{prefix}chart-{}\" class=\"chart\"><figcaption>{}{}</figcaption>{}</figure>",
        c.id,
        esc(&label),
        esc(&c.title),
        c.svg
    );
}

/// What was run, where, and whether it completed.
fn about(out: &mut String, name: &str, r: &RunResult, label: &str) {
    let p = &r.plan;
    let head = if label.is_empty() { esc(name) } else { format!("{}: {}", esc(label), esc(name)) };
    let _ = write!(
        out,
        "<div><h2>{head}</h2><table>\
         <tr><th class=\"l\">test</th><td class=\"l\">{}</td></tr>\
         <tr><th class=\"l\">profile</th><td class=\"l\">{} ({})</td></tr>\
         <tr><th class=\"l\">target</th><td class=\"l\">{}</td></tr>\
         <tr><th class=\"l\">started</th><td class=\"l\">{}</td></tr>\
         <tr><th class=\"l\">duration</th><td class=\"l\">{:.2} s of a {} bound</td></tr>\
         <tr><th class=\"l\">streams</th><td class=\"l\">{}</td></tr>\
         <tr><th class=\"l\">kernel TCP figures</th><td class=\"l\">{}</td></tr>\
         <tr><th class=\"l\">complete</th><td class=\"l\">{}</td></tr></table>",
        esc(&r.test_id),
        esc(&p.origin),
        esc(&p.profile.description),
        esc(&if p.profile.workload.is_http() {
            p.aimed_at()
        } else if p.peer.starts_with("0.0.0.0") || p.peer == p.target {
            p.target.clone()
        } else {
            format!("{} ({})", p.target, p.peer)
        }),
        esc(&r.started_at),
        r.summary.duration_s,
        p.time_bound,
        r.streams.len(),
        esc(&r.probe.tcp_source),
        if r.complete { "yes" } else { "<span class=\"err\">no: partial result</span>" },
    );
    for e in &r.errors {
        let _ =
            write!(out, "<div class=\"err\">error at {:.2} s, {}: {}</div>", e.at_s, esc(&e.source), esc(&e.message));
    }
    for w in &r.warnings {
        let _ = write!(out, "<div class=\"warn\">warning, {}: {}</div>", esc(&w.source), esc(&w.message));
    }
    out.push_str("</div>\n");
}

fn figures_table(out: &mut String, figs: &[Figure]) {
    out.push_str("<h2>Headline figures</h2><table id=\"figures\"><tr><th class=\"l\">figure</th><th>value</th></tr>");
    for f in figs {
        let _ = write!(out, "<tr><td class=\"l\">{}</td><td>{}</td></tr>", f.name, esc(&f.shown));
    }
    out.push_str("</table>\n");
}

/// The change from `base` to `now` in %, `None` when the base is 0 (no ratio).
pub fn change_percent(base: f64, now: f64) -> Option<f64> {
    (base != 0.0).then(|| (now - base) / base.abs() * 100.0)
}

fn compare_table(out: &mut String, base: &[Figure], now: &[Figure]) {
    out.push_str(
        "<h2>Headline figures</h2><table id=\"figures\"><tr><th class=\"l\">figure</th><th>base</th><th>this run</th>\
         <th>change</th></tr>",
    );
    let names: Vec<&str> = {
        let mut v: Vec<&str> = base.iter().chain(now).map(|f| f.name).collect();
        let order: Vec<&str> = now.iter().chain(base).map(|f| f.name).collect();
        v.sort_by_key(|n| order.iter().position(|x| x == n));
        v.dedup();
        v
    };
    for n in names {
        let b = base.iter().find(|f| f.name == n);
        let c = now.iter().find(|f| f.name == n);
        let cell = |f: Option<&Figure>| f.map(|f| esc(&f.shown)).unwrap_or_else(|| "—".into());
        let change = match (b, c) {
            (Some(b), Some(c)) => match change_percent(b.value, c.value) {
                Some(pct) => {
                    let class = if pct == 0.0 {
                        ""
                    } else if (pct > 0.0) == c.higher_is_better {
                        "better"
                    } else {
                        "worse"
                    };
                    format!("<td class=\"{class}\">{pct:+.1}%</td>")
                }
                None if c.value == 0.0 => "<td>0</td>".into(),
                None => "<td>new (base 0)</td>".into(),
            },
            _ => "<td>—</td>".into(),
        };
        let _ = write!(out, "<tr><td class=\"l\">{n}</td><td>{}</td><td>{}</td>{change}</tr>", cell(b), cell(c));
    }
    out.push_str("</table>\n");
}

/// The agents of a merged or fleet result, with each client's start skew (its real start
/// minus the earliest, on the reference clock) and its clock's error bound.
fn agents_table(out: &mut String, r: &RunResult, label: &str) {
    if r.agents.is_empty() {
        return;
    }
    let first = r.agents.iter().filter_map(|a| a.actual_start_unix_ns).min();
    let head = if label.is_empty() { String::new() } else { format!("{label}: ") };
    let _ = write!(
        out,
        "<h2>{head}Agents</h2><table class=\"agents\"><tr><th class=\"l\">agent</th><th class=\"l\">address</th>\
         <th class=\"l\">role</th><th class=\"l\">status</th><th>start skew</th><th>clock ± error</th>\
         <th>throughput</th><th>p99</th><th class=\"l\">why</th></tr>"
    );
    for a in &r.agents {
        let skew = match (a.actual_start_unix_ns, first) {
            (Some(t), Some(f)) => fmt_ns((t - f) as f64),
            _ => "—".into(),
        };
        let (tput, p99) = match &a.summary {
            Some(s) => {
                let bps: f64 = s.ways.iter().map(|w| w.receiver.as_ref().unwrap_or(&w.sender).bits_per_s).sum();
                let p99 = s
                    .ways
                    .iter()
                    .filter_map(|w| w.latency.as_ref())
                    .chain(s.http.as_ref().map(|h| &h.latency))
                    .filter(|l| l.count > 0)
                    .map(|l| l.p99_ns)
                    .max();
                (fmt_bits_per_s(bps), p99.map(|v| fmt_ns(v as f64)).unwrap_or_else(|| "—".into()))
            }
            None => ("—".into(), "—".into()),
        };
        let _ = write!(
            out,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td>\
             <td>{skew}</td><td>{} ± {}</td><td>{tput}</td><td>{p99}</td><td class=\"l\">{}</td></tr>",
            esc(&a.agent.hostname),
            esc(&a.agent.address),
            esc(&a.role),
            esc(&a.status),
            fmt_ns(a.clock.offset_ns.unsigned_abs() as f64),
            fmt_ns(a.clock.error_ns as f64),
            esc(a.why.as_deref().unwrap_or("")),
        );
    }
    out.push_str("</table>\n");
}

/// Every chart the result has figures for, in [`CHART_IDS`] order.
fn charts(r: &RunResult) -> Result<Vec<Chart>, String> {
    let mut out = Vec::new();
    if let Some(lines) = throughput_lines(r) {
        let (scale, unit) = bit_scale(max_y(&lines));
        let lines = rescale(lines, scale);
        out.push(Chart {
            id: "throughput",
            title: format!("Throughput over time ({unit})"),
            svg: time_chart(&lines, unit)?,
        });
    }
    let lat = latency_hists(r);
    if !lat.is_empty() {
        out.push(Chart { id: "latency", title: "Latency by percentile".into(), svg: spectrum_chart(&lat)? });
    }
    let (rtt_source, rtt) = rtt_hists(r);
    if !rtt.is_empty() {
        out.push(Chart {
            id: "rtt",
            title: format!("Kernel RTT by percentile ({rtt_source})"),
            svg: spectrum_chart(&rtt)?,
        });
    }
    let counted = r.summary.retransmits();
    if let Some(total) = counted.filter(|_| r.intervals.iter().any(|iv| !iv.sums.is_empty())) {
        let pts: Vec<(f64, f64, f64)> = r
            .intervals
            .iter()
            .map(|iv| (iv.start_s, iv.end_s, iv.sums.iter().filter_map(|s| s.retransmits).sum::<u64>() as f64))
            .collect();
        // The title's count is the summary's (the headline's); segments retransmitted outside
        // every interval (after the last tick, while closing) are said, not lost.
        let in_intervals = pts.iter().map(|p| p.2).sum::<f64>() as u64;
        let outside = total.saturating_sub(in_intervals);
        let title = if outside > 0 {
            format!("Retransmitted segments per interval ({total} in all, {outside} of them after the last interval)")
        } else {
            format!("Retransmitted segments per interval ({total} in all)")
        };
        out.push(Chart { id: "retransmits", title, svg: bar_chart(&pts, "segments")? });
    }
    if r.intervals.iter().any(|iv| iv.http.is_some()) {
        let mut sent = Vec::new();
        let mut done = Vec::new();
        let mut target = Vec::new();
        let mut codes: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for iv in &r.intervals {
            let Some(h) = &iv.http else { continue };
            let span = (iv.end_s - iv.start_s).max(1e-9);
            let step = |v: f64| [(iv.start_s, v), (iv.end_s, v)];
            sent.extend(step(h.sent_per_s));
            done.extend(step(h.responses_per_s));
            if let Some(t) = h.target_rate {
                target.extend(step(t));
            }
            for (code, n) in &h.status {
                codes.entry(code.clone()).or_default().extend(step(*n as f64 / span));
            }
        }
        let mut lines = vec![("responses/s".to_string(), done), ("requests sent/s".to_string(), sent)];
        if !target.is_empty() {
            lines.push(("target/s".to_string(), target));
        }
        out.push(Chart {
            id: "http-rate",
            title: "Requests per second".into(),
            svg: time_chart(&lines, "per second")?,
        });
        if !codes.is_empty() {
            let lines: Vec<Line> = codes.into_iter().map(|(c, v)| (format!("status {c}"), v)).collect();
            out.push(Chart {
                id: "http-status",
                title: "Responses per second by status code".into(),
                svg: time_chart(&lines, "responses/s")?,
            });
        }
    }
    Ok(out)
}

/// The total and the per-stream (per-agent, for merged results) throughput lines, in bits/s,
/// each interval's rate drawn as a step over its own span; `None` when the result moved no bytes over the data path.
fn throughput_lines(r: &RunResult) -> Option<Vec<Line>> {
    if !r.intervals.iter().any(|iv| iv.sums.iter().any(|s| s.sent_bytes > 0)) {
        return None;
    }
    let bits = |sent: u64, recv: Option<u64>, span: f64| recv.unwrap_or(sent) as f64 * 8.0 / span;
    let mut total = Vec::new();
    let mut groups: BTreeMap<String, BTreeMap<u32, f64>> = BTreeMap::new();
    // Streams to groups: one agent each for merged results, else one stream each.
    let group_of = |id: u32| -> String {
        match r.parts.iter().find(|p| id >= p.first_stream && id < p.first_stream + p.streams) {
            Some(p) => format!("{} {} → {}", p.agent.hostname, p.agent.address, p.peer),
            None => format!("stream {id}"),
        }
    };
    for iv in &r.intervals {
        let span = (iv.end_s - iv.start_s).max(1e-9);
        let t: f64 = iv.sums.iter().map(|s| bits(s.sent_bytes, s.received_bytes, span)).sum();
        total.extend([(iv.start_s, t), (iv.end_s, t)]);
        for s in &iv.streams {
            *groups.entry(group_of(s.id)).or_default().entry(iv.index).or_default() +=
                bits(s.sent_bytes, s.received_bytes, span);
        }
    }
    let mut lines = vec![("total".to_string(), total)];
    if groups.len() > 1 && groups.len() <= MAX_LINES {
        let span: BTreeMap<u32, (f64, f64)> = r.intervals.iter().map(|iv| (iv.index, (iv.start_s, iv.end_s))).collect();
        for (name, pts) in groups {
            lines.push((name, pts.into_iter().flat_map(|(i, v)| [(span[&i].0, v), (span[&i].1, v)]).collect()));
        }
    }
    Some(lines)
}

fn way_name(w: Way) -> &'static str {
    match w {
        Way::Up => "up",
        Way::Down => "down",
    }
}

/// The whole run's latency histograms: per way (rr, msgrate) and HTTP.
fn latency_hists(r: &RunResult) -> Vec<(String, &EncodedHistogram)> {
    let mut v: Vec<(String, &EncodedHistogram)> =
        r.summary.ways.iter().filter_map(|w| hist_of(&w.latency).map(|h| (way_name(w.way).to_string(), h))).collect();
    if let Some(h) = r.summary.http.as_ref().and_then(|h| h.latency.hist.as_ref()) {
        v.push(("HTTP requests".into(), h));
    }
    v.retain(|(_, h)| h.count > 0);
    v
}

/// The kernel RTT histograms: eBPF samples where there are any, else TCP_INFO srtt samples.
fn rtt_hists(r: &RunResult) -> (&'static str, Vec<(String, &EncodedHistogram)>) {
    let http_tcp = r.summary.http.as_ref().and_then(|h| h.tcp.as_ref());
    let mut ebpf: Vec<(String, &EncodedHistogram)> = r
        .summary
        .ways
        .iter()
        .filter_map(|w| hist_of(&w.kernel_rtt).map(|h| (format!("{} senders", way_name(w.way)), h)))
        .collect();
    if let Some(h) = http_tcp.and_then(|t| hist_of(&t.kernel_rtt)) {
        ebpf.push(("HTTP connections".into(), h));
    }
    ebpf.retain(|(_, h)| h.count > 0);
    if !ebpf.is_empty() {
        return ("eBPF, every RTT sample", ebpf);
    }
    let mut srtt: Vec<(String, &EncodedHistogram)> = r
        .summary
        .ways
        .iter()
        .filter_map(|w| w.rtt_hist.as_ref().map(|h| (format!("{} senders", way_name(w.way)), h)))
        .collect();
    if let Some(h) = http_tcp.and_then(|t| hist_of(&t.srtt)) {
        srtt.push(("HTTP connections".into(), h));
    }
    srtt.retain(|(_, h)| h.count > 0);
    ("TCP_INFO smoothed RTT, sampled", srtt)
}

fn max_y(lines: &[Line]) -> f64 {
    lines.iter().flat_map(|(_, p)| p.iter().map(|x| x.1)).fold(0.0, f64::max)
}

fn rescale(lines: Vec<Line>, by: f64) -> Vec<Line> {
    lines.into_iter().map(|(n, p)| (n, p.into_iter().map(|(x, y)| (x, y / by)).collect())).collect()
}

fn bit_scale(max: f64) -> (f64, &'static str) {
    match max {
        m if m >= 1e9 => (1e9, "Gbit/s"),
        m if m >= 1e6 => (1e6, "Mbit/s"),
        m if m >= 1e3 => (1e3, "kbit/s"),
        _ => (1.0, "bit/s"),
    }
}

fn time_scale(max_ns: f64) -> (f64, &'static str) {
    match max_ns {
        m if m >= 1e9 => (1e9, "s"),
        m if m >= 1e6 => (1e6, "ms"),
        m if m >= 1e3 => (1e3, "µs"),
        _ => (1.0, "ns"),
    }
}

fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("drawing a chart: {e:?}")
}

/// Draws one chart of [`SIZE`] into an SVG string: a white canvas, then `draw`.
fn svg(draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> Result<(), String>) -> Result<String, String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        draw(&root)?;
        root.present().map_err(err)?;
    }
    Ok(out)
}

/// The chart frame every chart shares: margins and label areas.
fn frame<'a, 'b>(root: &'a DrawingArea<SVGBackend<'b>, Shift>) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut b = ChartBuilder::on(root);
    b.margin(12).x_label_area_size(40).y_label_area_size(70);
    b
}

/// Draws `lines` (line `i` `width(i)` pixels wide, colour `i` of the palette) with a legend.
fn draw_lines<'a, X, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    lines: &[Line],
    width: fn(usize) -> u32,
    legend_at: SeriesLabelPosition,
) -> Result<(), String>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    for (i, (name, pts)) in lines.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(width(i))))
            .map_err(err)?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(3)));
    }
    chart
        .configure_series_labels()
        .position(legend_at)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)
}

/// Lines over the run's seconds (the first, the total, drawn wider).
fn time_chart(lines: &[Line], unit: &str) -> Result<String, String> {
    let x_max = lines.iter().flat_map(|(_, p)| p.iter().map(|x| x.0)).fold(0.0, f64::max).max(1e-3);
    let y_max = (max_y(lines) * 1.1).max(1e-9);
    svg(|root| {
        let mut chart = frame(root).build_cartesian_2d(0f64..x_max, 0f64..y_max).map_err(err)?;
        chart.configure_mesh().x_desc("seconds since the start").y_desc(unit).draw().map_err(err)?;
        draw_lines(&mut chart, lines, |i| if i == 0 { 3 } else { 1 }, SeriesLabelPosition::LowerRight)
    })
}

/// Per interval bars from its start to its end.
fn bar_chart(pts: &[(f64, f64, f64)], unit: &str) -> Result<String, String> {
    let x_max = pts.iter().map(|p| p.1).fold(0.0, f64::max).max(1e-3);
    let y_max = (pts.iter().map(|p| p.2).fold(0.0, f64::max) * 1.1).max(1.0);
    svg(|root| {
        let mut chart = frame(root).build_cartesian_2d(0f64..x_max, 0f64..y_max).map_err(err)?;
        chart.configure_mesh().x_desc("seconds since the start").y_desc(unit).draw().map_err(err)?;
        let color = Palette99::pick(1).to_rgba();
        chart
            .draw_series(pts.iter().map(|&(a, b, y)| Rectangle::new([(a, 0.0), (b, y)], color.filled())))
            .map_err(err)?;
        Ok(())
    })
}

/// Percentiles shown on the spectrum's axis, as 1/(1-q).
const SPECTRUM_TICKS: [(f64, &str); 7] =
    [(1.0, "0%"), (10.0, "90%"), (100.0, "99%"), (1e3, "99.9%"), (1e4, "99.99%"), (1e5, "99.999%"), (1e6, "99.9999%")];

/// The percentile spectrum of each histogram (HdrHistogram's plot): the value at quantile q
/// against 1/(1-q) on a log axis, up to the quantile the sample count supports.
fn spectrum_chart(hists: &[(String, &EncodedHistogram)]) -> Result<String, String> {
    let mut lines: Vec<Line> = Vec::new();
    let mut x_max: f64 = 10.0;
    for (name, enc) in hists {
        let h = enc.decode().map_err(|e| format!("{name}: {e}"))?;
        // The deepest quantile with at least one sample beyond it.
        let top = (1.0 - 1.0 / h.len().max(1) as f64).max(0.9);
        let x_top = (1.0 / (1.0 - top)).min(1e6);
        x_max = x_max.max(x_top);
        let steps = 200;
        let pts: Vec<(f64, f64)> = (0..=steps)
            .map(|i| {
                let x = x_top.powf(i as f64 / steps as f64);
                let q = 1.0 - 1.0 / x;
                (x, netblast_spec::hist::at_percentile(&h, q * 100.0) as f64)
            })
            .chain(std::iter::once((x_top, h.max() as f64)))
            .collect();
        lines.push((format!("{name} ({} samples)", h.len()), pts));
    }
    let (scale, unit) = time_scale(max_y(&lines));
    let lines = rescale(lines, scale);
    // A log value axis: the body (µs) and the tail (ms) of one distribution both readable.
    let y_max = (max_y(&lines) * 1.5).max(1e-9);
    let y_min = lines.iter().flat_map(|(_, p)| p.iter().map(|x| x.1)).filter(|v| *v > 0.0).fold(f64::MAX, f64::min);
    let y_min = if y_min == f64::MAX { y_max / 10.0 } else { (y_min / 1.5).min(y_max / 10.0) };
    let lines: Vec<Line> =
        lines.into_iter().map(|(n, p)| (n, p.into_iter().map(|(x, y)| (x, y.max(y_min))).collect())).collect();
    svg(|root| {
        let mut chart =
            frame(root).build_cartesian_2d((1f64..x_max).log_scale(), (y_min..y_max).log_scale()).map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("percentile")
            .y_desc(format!("{unit} (log scale)"))
            .x_label_formatter(&|x| {
                SPECTRUM_TICKS
                    .iter()
                    .find(|(t, _)| (x / t - 1.0).abs() < 1e-6)
                    .map(|(_, s)| s.to_string())
                    .unwrap_or_default()
            })
            .draw()
            .map_err(err)?;
        draw_lines(&mut chart, &lines, |_| 2, SeriesLabelPosition::UpperLeft)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_is_relative_to_the_base() {
        assert_eq!(change_percent(100.0, 110.0), Some(10.0));
        assert_eq!(change_percent(200.0, 100.0), Some(-50.0));
        assert_eq!(change_percent(0.0, 5.0), None);
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(esc("<a href=\"x\">&</a>"), "&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;");
    }
}
