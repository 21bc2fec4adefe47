//! Results as one self-contained HTML page (`netblast report RESULT.json --html FILE`, and
//! `report A.json B.json C.json --compare --html FILE`): inline SVG charts, no external
//! resource, so it reads the same offline, in a mail attachment or in a CI artifact viewer. A
//! short inline script lets a reader hide a line (click its legend entry) and sort a table
//! (click its header); the page reads fully without it.
//!
//! One run: what ran; the headline figures in words; a sweep's steps; each kind's charts
//! ([`crate::plots`]); CPU of both ends; the kind's own tables (cps failures by cause, HTTP
//! status codes, errors and phases, every stream); a fleet's tests (a table, and a client ×
//! server matrix of p50/p99 for a mesh), its agents; the text report's summary.
//!
//! Several runs: what each ran, every headline figure of each with its change from the
//! first, every chart with the runs' lines overlaid on one axis (one unit, one range).

use crate::chart::{self, Plot};
use crate::figures::{change_percent, fmt_part_figure, p50_p99, part_figure, part_figure_name, target, test_name};
use crate::markup::esc;
use crate::markup::lat_cells;
use crate::plots;
use netblast_spec::RunResult;
use netblast_spec::assert::{Figure, headline};
use netblast_spec::hist::LatencySummary;
use netblast_spec::profile::{Headline, Way};
use netblast_spec::result::CpuUsage;
use netblast_spec::units::{fmt_bits_per_s, fmt_bytes, fmt_ns, fmt_per_s};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// Most rows of the per-stream table; the rest are counted.
const MAX_STREAM_ROWS: usize = 64;

const CSS: &str = "body{font-family:sans-serif;margin:1.5em auto;color:#222;max-width:1400px;padding:0 1em}\
h1{font-size:1.4em}h2{font-size:1.15em;margin:1.4em 0 .3em}\
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .6em;text-align:right}\
th{background:#f2f2f2}td.l,th.l{text-align:left}.better{color:#070}.worse{color:#b00}.id{color:#777;font-size:.85em}\
figure{margin:1em 0}figcaption{font-weight:bold;margin-bottom:.2em}svg.plot{width:100%;height:auto;display:block}\
ul.legend{list-style:none;padding:0;margin:.2em 0 0 78px;display:flex;flex-wrap:wrap;gap:.3em 1.2em}\
ul.legend li{cursor:pointer}ul.legend li.off{opacity:.35}.sw{display:inline-block;width:1.4em;height:.35em;\
vertical-align:middle;margin-right:.4em}.warn{color:#a60}.err{color:#b00}tr.turn td{background:#fff1e0}\
th.sort{cursor:pointer}pre{background:#f7f7f7;padding:.6em;overflow-x:auto;white-space:pre-wrap}";

/// Legend entries hide their lines; table headers sort their columns.
const SCRIPT: &str = "document.querySelectorAll('ul.legend li').forEach(function(li){li.onclick=function(){\
var g=document.getElementById(li.dataset.for);if(!g)return;var off=g.style.display!='none';\
g.style.display=off?'none':'';li.classList.toggle('off',off);};});\
document.querySelectorAll('th.sort').forEach(function(th){th.onclick=function(){var t=th.closest('table'),\
i=Array.prototype.indexOf.call(th.parentNode.children,th),rows=Array.prototype.slice.call(t.querySelectorAll('tr')).slice(1),\
up=th.dataset.up!='1';th.dataset.up=up?'1':'0';rows.sort(function(a,b){var x=a.children[i].dataset.v||a.children[i].textContent,\
y=b.children[i].dataset.v||b.children[i].textContent,nx=parseFloat(x),ny=parseFloat(y);\
var c=(!isNaN(nx)&&!isNaN(ny))?nx-ny:x.localeCompare(y);return up?c:-c;});rows.forEach(function(r){t.appendChild(r);});};});";

/// A whole page: `title` as its heading, `body` under it, the shared style and script.
pub(crate) fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" \
         content=\"width=device-width\"><title>{t}</title>\n<style>{CSS}</style></head><body>\n<h1>{t}</h1>\n{body}\
         <script>{SCRIPT}</script>\n</body></html>\n",
        t = esc(title)
    )
}

/// The page of one run, `name` what it is called (its label or file).
pub fn render(name: &str, r: &RunResult) -> Result<String, String> {
    let mut b = String::with_capacity(256 * 1024);
    about(&mut b, &[(name.to_string(), r)]);
    figures_table(&mut b, &[(name.to_string(), r)]);
    crate::search::table(&mut b, r);
    let search = crate::search::plots(r);
    for (i, p) in search.iter().enumerate() {
        figure(&mut b, p, i);
    }
    crate::kinds::of(r).html_lead(&mut b, r);
    for (i, p) in plots::plots(r, false)?.iter().enumerate() {
        figure(&mut b, p, search.len() + i);
    }
    cpu_table(&mut b, &[(name.to_string(), r)]);
    verdicts(&mut b, r);
    crate::kinds::of(r).html_tables(&mut b, r);
    streams_table(&mut b, r);
    mesh_matrix(&mut b, r);
    tests_table(&mut b, r);
    agents_table(&mut b, r);
    let _ = write!(
        b,
        "<h2>The text report's summary</h2><details open><summary>as `netblast report` prints it</summary><pre>{}</pre></details>",
        esc(&crate::text::summary(r))
    );
    Ok(page(&format!("netblast {} — {name}", r.plan.profile.kind().name()), &b))
}

/// The page of several runs side by side: `runs` (name, result), the first the base.
pub fn render_compare(runs: &[(String, &RunResult)]) -> Result<String, String> {
    let mut b = String::with_capacity(512 * 1024);
    about(&mut b, runs);
    figures_table(&mut b, runs);
    // Keyed by (the figure's place in ORDER, the run for per-run figures).
    let mut by_id: BTreeMap<(usize, usize), Plot> = BTreeMap::new();
    // Each run's own title of an overlaid figure: a title's counts are one run's.
    let mut titles: BTreeMap<usize, Vec<(String, String)>> = BTreeMap::new();
    for (k, (name, r)) in runs.iter().enumerate() {
        for mut p in plots::plots(r, true)? {
            let order = plots::ORDER.iter().position(|x| *x == p.id).unwrap_or(usize::MAX);
            if plots::PER_RUN.contains(&p.id.as_str()) {
                p.id = format!("{}-{k}", p.id);
                p.title = format!("{name}: {}", p.title);
                by_id.insert((order, k), p);
                continue;
            }
            for s in &mut p.series {
                s.name = format!("{name}: {}", s.name);
            }
            titles.entry(order).or_default().push((name.clone(), p.title.clone()));
            match by_id.get_mut(&(order, 0)) {
                Some(acc) => acc.series.extend(p.series),
                None => {
                    by_id.insert((order, 0), p);
                }
            }
        }
    }
    for (&(order, k), p) in by_id.iter_mut() {
        if let Some(t) = titles.get(&order).filter(|_| k == 0) {
            p.title = overlaid_title(t);
        }
    }
    for (i, p) in by_id.values().enumerate() {
        figure(&mut b, p, i);
    }
    cpu_table(&mut b, runs);
    let names: Vec<&str> = runs.iter().map(|(n, _)| n.as_str()).collect();
    Ok(page(&format!("netblast: {} compared", names.join(", ")), &b))
}

/// The title of a figure overlaid from several runs, from each run's own: one title where they
/// agree; where they differ only in their parenthesis (a count of that run's), the words once
/// and each run's parenthesis named ("Retransmitted segments per interval (off: 9 in all;
/// deny: 17 in all)"); otherwise each run's whole title, named.
fn overlaid_title(titles: &[(String, String)]) -> String {
    let first = &titles[0].1;
    if titles.iter().all(|(_, t)| t == first) {
        return first.clone();
    }
    let stem = |t: &str| t.split_once(" (").map(|(a, b)| (a.to_string(), b.trim_end_matches(')').to_string()));
    let parts: Vec<_> = titles.iter().map(|(n, t)| (n, stem(t))).collect();
    let words = stem(first).map(|x| x.0);
    if parts.iter().all(|(_, p)| p.as_ref().map(|x| &x.0) == words.as_ref()) {
        let each: Vec<String> =
            parts.iter().filter_map(|(n, p)| p.as_ref().map(|(_, paren)| format!("{n}: {paren}"))).collect();
        return format!("{} ({})", words.unwrap_or_default(), each.join("; "));
    }
    titles.iter().map(|(n, t)| format!("{n}: {t}")).collect::<Vec<_>>().join("; ")
}

fn figure(out: &mut String, p: &Plot, i: usize) {
    let _ = writeln!(
        out,
        "<figure id=\"chart-{}\" class=\"chart\"><figcaption>{}</figcaption>{}</figure>",
        esc(&p.id),
        esc(&p.title),
        chart::render(p, i)
    );
}

/// A row of the about table: a header and one cell per run.
fn row(out: &mut String, head: &str, cells: impl Iterator<Item = String>) {
    let _ = write!(out, "<tr><th class=\"l\">{head}</th>");
    for c in cells {
        let _ = write!(out, "<td class=\"l\">{c}</td>");
    }
    out.push_str("</tr>");
}

/// Streams, or an HTTP test's connections.
fn streams(r: &RunResult) -> String {
    match r.plan.profile.workload.section().connections_not_streams() {
        Some(n) => format!("{n} connection{}", if n == 1 { "" } else { "s" }),
        None => r.streams.len().to_string(),
    }
}

/// What ran, where, and whether it completed: one column per run.
fn about(out: &mut String, runs: &[(String, &RunResult)]) {
    out.push_str("<table id=\"about\">");
    if runs.len() > 1 {
        row(out, "run", runs.iter().map(|(n, _)| format!("<b>{}</b>", esc(n))));
    }
    let each = |f: &dyn Fn(&RunResult) -> String| runs.iter().map(move |(_, r)| f(r)).collect::<Vec<_>>();
    row(out, "test", each(&|r| esc(&test_name(r))).into_iter());
    row(
        out,
        "profile",
        each(&|r| {
            let p = &r.plan;
            // A description rewritten by flags names its origin already.
            let origin = p.origin.split(" (").next().unwrap_or(&p.origin);
            if p.profile.description.contains(origin) {
                esc(&p.profile.description)
            } else {
                format!("{}: {}", esc(&p.origin), esc(&p.profile.description))
            }
        })
        .into_iter(),
    );
    row(out, "target", each(&|r| esc(&target(r))).into_iter());
    row(out, "started", each(&|r| esc(&r.started_at)).into_iter());
    row(
        out,
        "duration",
        each(&|r| format!("{:.2} s of a {} bound", r.summary.duration_s, r.plan.time_bound)).into_iter(),
    );
    row(out, "streams", each(&|r| streams(r)).into_iter());
    if runs.iter().any(|(_, r)| !r.parts.is_empty()) {
        row(out, "tests", each(&|r| r.parts.len().to_string()).into_iter());
    }
    row(out, "kernel TCP figures", each(&|r| esc(&r.probe.tcp_source)).into_iter());
    // The senders' congestion control, per way when the two differ.
    let cc = |r: &RunResult| {
        let ways: Vec<(Way, String)> =
            r.summary.ways.iter().filter_map(|w| crate::figures::congestion(r, w.way).map(|c| (w.way, c))).collect();
        match ways.as_slice() {
            [] => "—".to_string(),
            [(_, c)] => esc(c),
            [(_, a), (_, b)] if a == b => esc(a),
            many => many.iter().map(|(w, c)| format!("{} {}", w.name(), esc(c))).collect::<Vec<_>>().join(", "),
        }
    };
    row(out, "congestion control", each(&cc).into_iter());
    row(
        out,
        "complete",
        each(&|r| if r.complete { "yes".into() } else { "<span class=\"err\">no: partial result</span>".into() })
            .into_iter(),
    );
    for n in runs.iter().flat_map(|(_, r)| r.plan.notes.iter()).collect::<BTreeSet<_>>() {
        // In a comparison a note names the runs it is about.
        let whose: Vec<&str> =
            runs.iter().filter(|(_, r)| r.plan.notes.contains(n)).map(|(name, _)| name.as_str()).collect();
        let who =
            if runs.len() > 1 && whose.len() < runs.len() { format!("{}: ", whose.join(", ")) } else { String::new() };
        let _ = write!(
            out,
            "<tr><th class=\"l\">note</th><td class=\"l\" colspan=\"{}\">{}{}</td></tr>",
            runs.len(),
            esc(&who),
            esc(n)
        );
    }
    out.push_str("</table>\n");
    for (name, r) in runs {
        let who = if runs.len() > 1 { format!("{}: ", esc(name)) } else { String::new() };
        for e in &r.errors {
            let _ = writeln!(
                out,
                "<div class=\"err\">{who}error at {:.2} s, {}: {}</div>",
                e.at_s,
                esc(&e.source),
                esc(&e.message)
            );
        }
        // A note of the plan is told once, in the table above.
        for w in r.warnings.iter().filter(|w| !r.plan.notes.contains(&w.message)) {
            let _ = writeln!(out, "<div class=\"warn\">{who}warning, {}: {}</div>", esc(&w.source), esc(&w.message));
        }
    }
}

/// The headline figures in words: one value column per run, each after the first with its
/// change from the first (green where better, red where worse).
fn figures_table(out: &mut String, runs: &[(String, &RunResult)]) {
    let figs: Vec<Vec<Figure>> = runs.iter().map(|(_, r)| headline(r)).collect();
    let mut names: Vec<(&str, &str)> = Vec::new();
    for f in figs.iter().flatten() {
        if !names.iter().any(|(n, _)| *n == f.name) {
            names.push((f.name, &f.label));
        }
    }
    out.push_str("<h2>Headline figures</h2><table id=\"figures\"><tr><th class=\"l\">figure</th>");
    for (i, (n, _)) in runs.iter().enumerate() {
        let _ = write!(out, "<th>{}</th>", if runs.len() == 1 { "value".into() } else { esc(n) });
        if i > 0 {
            out.push_str("<th>change</th>");
        }
    }
    out.push_str("</tr>");
    for (name, label) in names {
        let _ = write!(
            out,
            "<tr data-metric=\"{name}\"><td class=\"l\">{} <span class=\"id\">({name})</span></td>",
            esc(label)
        );
        let base = figs[0].iter().find(|f| f.name == name);
        for (i, fs) in figs.iter().enumerate() {
            let f = fs.iter().find(|f| f.name == name);
            let _ = write!(out, "<td>{}</td>", f.map(|f| esc(&f.shown)).unwrap_or_else(|| "—".into()));
            if i == 0 {
                continue;
            }
            let change = match (base, f) {
                (Some(b), Some(c)) => match change_percent(b.value, c.value) {
                    Some(pct) => {
                        let class = match pct {
                            0.0 => "",
                            p if (p > 0.0) == c.higher_is_better => "better",
                            _ => "worse",
                        };
                        format!("<td class=\"{class}\">{pct:+.1}%</td>")
                    }
                    None if c.value == 0.0 => "<td>0</td>".into(),
                    None => "<td>new (base 0)</td>".into(),
                },
                _ => "<td>—</td>".into(),
            };
            out.push_str(&change);
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>\n");
}

fn cpu_cells(c: Option<&CpuUsage>) -> String {
    match c.filter(|c| c.wall_s > 0.0) {
        Some(c) => format!(
            "{:.2} CPUs (user {:.2} s, system {:.2} s over {:.2} s)",
            c.cpus_used(),
            c.user_s,
            c.system_s,
            c.wall_s
        ),
        None => "not measured".into(),
    }
}

/// CPU of both ends, and what a CPU-second of each carried in the kind's unit.
fn cpu_table(out: &mut String, runs: &[(String, &RunResult)]) {
    out.push_str("<h2>CPU</h2><table id=\"cpu\">");
    // One run needs no header row: its name heads the page.
    if runs.len() > 1 {
        out.push_str("<tr><th class=\"l\"></th>");
        for (n, _) in runs {
            let _ = write!(out, "<th class=\"l\">{}</th>", esc(n));
        }
        out.push_str("</tr>");
    }
    let each = |f: &dyn Fn(&RunResult) -> String| runs.iter().map(move |(_, r)| f(r)).collect::<Vec<_>>();
    row(out, "client", each(&|r| cpu_cells(Some(&r.summary.cpu.client))).into_iter());
    row(out, "server", each(&|r| cpu_cells(r.summary.cpu.server.as_ref())).into_iter());
    let per = |r: &RunResult, cpu: Option<&CpuUsage>, bits_per_cpu_s: Option<f64>| -> String {
        let Some(c) = cpu.filter(|c| c.cpu_s() >= 0.05) else { return "—".into() };
        let kind = r.plan.profile.kind();
        let ops = match &r.summary.http {
            Some(h) => Some(h.completed),
            None => r.summary.ways.iter().map(|w| w.msgs.map(|m| m.sent)).sum::<Option<u64>>(),
        };
        match (ops, kind) {
            (Some(n), _) if n > 0 => {
                format!(
                    "{} per CPU-second ({:.2} µs per {})",
                    fmt_per_s(n as f64 / c.cpu_s()),
                    c.cpu_s() * 1e6 / n as f64,
                    {
                        let u = kind.unit();
                        u.strip_suffix('s').unwrap_or(u).to_string()
                    }
                )
            }
            _ => bits_per_cpu_s.map(|b| format!("{} per CPU-second", fmt_bits_per_s(b))).unwrap_or_else(|| "—".into()),
        }
    };
    row(
        out,
        "client's work",
        each(&|r| per(r, Some(&r.summary.cpu.client), Some(r.summary.cpu.bits_per_client_cpu_s))).into_iter(),
    );
    row(
        out,
        "server's work",
        each(&|r| per(r, r.summary.cpu.server.as_ref(), r.summary.cpu.bits_per_server_cpu_s)).into_iter(),
    );
    out.push_str("</table>\n");
}

/// The UDP, HTTP and hosts' verdicts, and each host's CPUs over the test.
fn verdicts(out: &mut String, r: &RunResult) {
    let v = crate::verdict::all(r);
    if !v.is_empty() {
        out.push_str("<h2>Verdicts</h2><ul id=\"verdicts\">");
        for line in &v {
            let _ = write!(out, "<li>{}</li>", esc(line));
        }
        out.push_str("</ul>\n");
    }
    let load = &r.summary.load;
    let sides = [("client", load.client.as_ref()), ("server", load.server.as_ref())];
    if sides.iter().all(|(_, l)| l.is_none()) {
        return;
    }
    out.push_str(
        "<h2>The hosts' CPUs over the test</h2><table id=\"host-cpus\"><tr><th class=\"l\">host</th><th>CPU</th>\
         <th>busy</th><th>user</th><th>system</th><th>softirq</th><th>irq</th><th>steal</th></tr>",
    );
    for (who, l) in sides {
        for c in l.map(|l| l.cpus.as_slice()).unwrap_or_default() {
            let p = |x: f64| format!("{:.0}%", x * 100.0);
            let _ = write!(
                out,
                "<tr><td class=\"l\">{who}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                c.cpu,
                p(c.busy()),
                p(c.user),
                p(c.system),
                p(c.softirq),
                p(c.irq),
                p(c.steal)
            );
        }
    }
    out.push_str("</table>\n");
}

/// Every stream's totals with the kind's columns (the first [`MAX_STREAM_ROWS`]).
fn streams_table(out: &mut String, r: &RunResult) {
    let ss = &r.summary.streams;
    if ss.is_empty() || !r.parts.is_empty() {
        return;
    }
    // Streams count messages (msgrate, rr, cps) or carry bytes (bulk); http has none.
    let msgs = r.plan.profile.workload.counts_msgs();
    let udp = plots::is_udp(r);
    let unit = r.plan.profile.workload.unit();
    let _ = write!(
        out,
        "<h2>Streams</h2><table id=\"streams\" class=\"sortable\"><tr><th class=\"sort\">stream</th>\
         <th class=\"l sort\">way</th><th class=\"l sort\">local → remote</th><th class=\"sort\">CPU client/server</th>"
    );
    let bytes = !msgs || udp;
    let per_cpu = r.plan.profile.workload.per_cpu_receivers();
    if bytes && per_cpu {
        // One receiver per server CPU takes what the kernel steers to it, not one flow's.
        out.push_str(
            "<th class=\"sort\">sent</th><th class=\"sort\" title=\"what the server's receiver on this row's server CPU \
             took: one receiver per CPU (SO_INCOMING_CPU), the kernel decides which datagrams each takes\">received \
             on its server CPU</th>",
        );
    } else if bytes {
        out.push_str("<th class=\"sort\">sent</th><th class=\"sort\">received</th>");
    }
    if msgs {
        let _ = write!(out, "<th class=\"sort\">{unit}/s</th><th class=\"sort\">lost</th>");
    }
    if !msgs {
        out.push_str("<th class=\"sort\">retransmits</th><th class=\"sort\">cwnd</th><th class=\"sort\">srtt</th>");
    }
    if msgs {
        out.push_str("<th class=\"sort\">p50</th><th class=\"sort\">p99</th>");
    }
    out.push_str("</tr>");
    for s in ss.iter().take(MAX_STREAM_ROWS) {
        let info = r.streams.iter().find(|i| i.id == s.id);
        let cpu = |c: Option<usize>| c.map(|c| c.to_string()).unwrap_or_else(|| "—".into());
        let _ = write!(
            out,
            "<tr><td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}/{}</td>",
            s.id,
            plots::way_name(s.way),
            info.map(|i| esc(&format!("{} → {}", i.local, i.remote))).unwrap_or_default(),
            cpu(s.client_cpu),
            cpu(s.server_cpu),
        );
        if bytes {
            let _ = write!(
                out,
                "<td data-v=\"{}\">{}</td><td data-v=\"{}\">{}</td>",
                s.sender.bits_per_s,
                fmt_bits_per_s(s.sender.bits_per_s),
                s.receiver.map(|x| x.bits_per_s).unwrap_or(0.0),
                s.receiver.map(|x| fmt_bits_per_s(x.bits_per_s)).unwrap_or_else(|| "—".into())
            );
        }
        if msgs {
            let m = s.msgs.as_ref();
            let _ = write!(
                out,
                "<td data-v=\"{}\">{}</td><td>{}</td>",
                m.map(|m| m.sent_per_s).unwrap_or(0.0),
                m.map(|m| fmt_per_s(m.sent_per_s)).unwrap_or_else(|| "—".into()),
                m.and_then(|m| m.lost).map(|n| n.to_string()).unwrap_or_else(|| "—".into())
            );
        }
        if !msgs {
            let t = s.tcp.as_ref();
            let _ = write!(
                out,
                "<td>{}</td><td data-v=\"{}\">{}</td><td data-v=\"{}\">{}</td>",
                s.retransmits.map(|n| n.to_string()).unwrap_or_else(|| "—".into()),
                t.map(|t| t.cwnd_segs as u64 * t.mss as u64).unwrap_or(0),
                t.map(|t| fmt_bytes(t.cwnd_segs as u64 * t.mss as u64)).unwrap_or_else(|| "—".into()),
                t.map(|t| t.rtt_us).unwrap_or(0),
                t.map(|t| fmt_ns(t.rtt_us as f64 * 1e3)).unwrap_or_else(|| "—".into()),
            );
        }
        if msgs {
            out.push_str(&lat_cells(s.latency.as_deref()));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>\n");
    // Fairness across flows: Jain's index of the streams' rates (1: equal shares; 1/n: one
    // flow took everything).
    let rates: Vec<f64> = ss.iter().map(|s| s.receiver.unwrap_or(s.sender).bits_per_s).collect();
    if !msgs && rates.len() > 1 {
        let (sum, sq) = rates.iter().fold((0.0, 0.0), |(a, b), x| (a + x, b + x * x));
        if sq > 0.0 {
            let jain = sum * sum / (rates.len() as f64 * sq);
            let (lo, hi) = rates.iter().fold((f64::MAX, 0.0f64), |(a, b), x| (a.min(*x), b.max(*x)));
            let _ = writeln!(
                out,
                "<p id=\"fairness\">Fairness across the {} streams: Jain's index {jain:.3} (1 is equal shares); slowest {}, fastest {}.</p>",
                rates.len(),
                fmt_bits_per_s(lo),
                fmt_bits_per_s(hi)
            );
        }
    }
    if ss.len() > MAX_STREAM_ROWS {
        let _ = writeln!(
            out,
            "<p>and {} more streams (every one in the JSON and `report --csv streams`)</p>",
            ss.len() - MAX_STREAM_ROWS
        );
    }
}

/// A fleet's (or merge's) tests, one row each, sortable: agent, peer, the kind's figure, p50,
/// p99, complete.
fn tests_table(out: &mut String, r: &RunResult) {
    if r.parts.is_empty() {
        return;
    }
    let kind = r.plan.profile.kind();
    let lats: Vec<Option<LatencySummary>> = r
        .parts
        .iter()
        .map(|p| {
            p50_p99(&p.summary).map(|(a, b)| LatencySummary { count: 1, p50_ns: a, p99_ns: b, ..Default::default() })
        })
        .collect();
    let verdicts: Vec<Vec<crate::limits::WayVerdict>> = r.parts.iter().map(|p| crate::limits::part(r, p)).collect();
    // Columns only where some test has the figure: latency, or what held a TCP sender.
    let (has_lat, has_limits) = (lats.iter().any(Option::is_some), verdicts.iter().any(|v| !v.is_empty()));
    let _ = write!(
        out,
        "<h2>Tests ({})</h2><table id=\"tests\" class=\"sortable\"><tr><th class=\"sort\">#</th>\
         <th class=\"l sort\">client</th><th class=\"l sort\">address</th><th class=\"l sort\">peer</th>\
         <th class=\"sort\">{}</th>{}{}<th class=\"l sort\">complete</th></tr>",
        r.parts.len(),
        match kind.headline() {
            Headline::BitsReceived => "throughput".to_string(),
            Headline::OpsSent | Headline::Responses => format!("{}/s", kind.unit()),
        },
        if has_lat { "<th class=\"sort\">p50</th><th class=\"sort\">p99</th>" } else { "" },
        if has_limits { "<th class=\"l sort\">what held it</th><th class=\"l\">verdict</th>" } else { "" }
    );
    let two_ways = r.summary.ways.len() > 1;
    for (i, p) in r.parts.iter().enumerate() {
        let v = part_figure(kind, &p.summary);
        let mut extra = String::new();
        if has_lat {
            extra.push_str(&lat_cells(lats[i].as_ref()));
        }
        if has_limits {
            let way = |d: &crate::limits::WayVerdict| {
                if two_ways { format!("{}: ", plots::way_name(d.diagnosis.way)) } else { String::new() }
            };
            let held: Vec<String> = verdicts[i]
                .iter()
                .map(|d| {
                    format!("{}{} {:.0}%", way(d), crate::limits::name(d.diagnosis.limit), d.diagnosis.share * 100.0)
                })
                .collect();
            let said: Vec<String> = verdicts[i].iter().map(|d| format!("{}{}", way(d), d.verdict)).collect();
            let _ = write!(
                extra,
                "<td class=\"l\">{}</td><td class=\"l verdict\">{}</td>",
                esc(&held.join("; ")),
                esc(&said.join("; "))
            );
        }
        let _ = write!(
            out,
            "<tr><td>{i}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td>\
             <td data-v=\"{v}\">{}</td>{extra}<td class=\"l\">{}</td></tr>",
            esc(&p.agent.hostname),
            esc(&p.agent.address),
            esc(&p.peer),
            fmt_part_figure(kind, v),
            if p.complete { "yes" } else { "no" }
        );
    }
    out.push_str("</table>\n");
}

/// A mesh (each client against several servers) as a client × server matrix of p50 / p99 (the
/// kind's figure where there is no latency): placement groups, zones and regions in one table.
fn mesh_matrix(out: &mut String, r: &RunResult) {
    let client = |p: &netblast_spec::result::Part| format!("{} {}", p.agent.hostname, p.agent.address);
    let clients: BTreeSet<String> = r.parts.iter().map(client).collect();
    let peers: BTreeSet<&str> = r.parts.iter().map(|p| p.peer.as_str()).collect();
    let pairs: BTreeSet<(String, &str)> = r.parts.iter().map(|p| (client(p), p.peer.as_str())).collect();
    // A mesh: some client ran against more than one server.
    if pairs.len() <= clients.len() || peers.len() < 2 {
        return;
    }
    let kind = r.plan.profile.kind();
    out.push_str("<h2>Mesh: client × server</h2><table id=\"mesh\"><tr><th class=\"l\">client \\ server</th>");
    for p in &peers {
        let _ = write!(out, "<th>{}</th>", esc(p));
    }
    out.push_str("</tr>");
    for c in &clients {
        let _ = write!(out, "<tr><th class=\"l\">{}</th>", esc(c));
        for peer in &peers {
            let cell = r.parts.iter().find(|p| client(p) == *c && p.peer == *peer).map(|p| match p50_p99(&p.summary) {
                Some((a, b)) => format!("{} / {}", fmt_ns(a as f64), fmt_ns(b as f64)),
                None => fmt_part_figure(kind, part_figure(kind, &p.summary)),
            });
            let _ = write!(out, "<td>{}</td>", cell.map(|c| esc(&c)).unwrap_or_else(|| "—".into()));
        }
        out.push_str("</tr>");
    }
    // The caption says what the cells hold: latency where the kind has it, else its figure.
    let latency = r.parts.iter().any(|p| p50_p99(&p.summary).is_some());
    let what = if latency { "latency p50 / p99".to_string() } else { part_figure_name(kind).to_string() };
    let _ = writeln!(out, "</table><p>Each cell: the {what} of the client's test against that server.</p>");
}

/// The agents of a merged or fleet result, with each client's start skew (its real start
/// minus the earliest, on the reference clock) and its clock's offset (signed) and error.
fn agents_table(out: &mut String, r: &RunResult) {
    if r.agents.is_empty() {
        return;
    }
    let first = r.agents.iter().filter_map(|a| a.actual_start_unix_ns).min();
    out.push_str(
        "<h2>Agents</h2><table id=\"agents\" class=\"sortable\"><tr><th class=\"l sort\">agent</th><th class=\"l sort\">address</th>\
         <th class=\"l sort\">role</th><th class=\"l sort\">status</th><th class=\"sort\">start skew</th>\
         <th class=\"sort\">clock offset ± error</th><th class=\"l sort\">why</th></tr>",
    );
    for a in &r.agents {
        let skew = match (a.actual_start_unix_ns, first) {
            (Some(t), Some(f)) => fmt_ns((t - f) as f64),
            _ => "—".into(),
        };
        let _ = write!(
            out,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td>\
             <td>{skew}</td><td data-v=\"{}\">{} ± {}</td><td class=\"l\">{}</td></tr>",
            esc(&a.agent.hostname),
            esc(&a.agent.address),
            esc(&a.role),
            esc(&a.status),
            a.clock.offset_ns,
            fmt_ns(a.clock.offset_ns as f64),
            fmt_ns(a.clock.error_ns as f64),
            esc(a.why.as_deref().unwrap_or("")),
        );
    }
    out.push_str("</table>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped() {
        assert_eq!(esc("<a href=\"x\">&</a>"), "&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;");
    }
}
