//! A campaign's summary rendered: the text (one block per figure, every cell's median with the
//! mean's 95% interval, min–max and run-to-run spread; the changes along each axis and from a
//! baseline; what limited which cells; failed cells), CSV (a row per cell and figure) and one
//! HTML page with a chart per figure against each axis, error bars from the intervals.

use crate::chart::{MB, ML, MR, MT, PALETTE, Unit, nice_ticks};
use crate::markup::esc;
use netblast_spec::assert::FigureUnit;
use netblast_spec::campaign::summary::{CellSummary, FigureInfo, Summary};
use netblast_spec::stats::{Change, Spread};
use std::fmt::Write;

/// The summary as `summary.json` holds it (pretty, a line break at the end).
pub fn to_json(s: &Summary) -> String {
    let mut out = serde_json::to_string_pretty(s).expect("a summary serializes");
    out.push('\n');
    out
}

/// Whether `bytes` are a campaign's summary (its schema says so), not a run's result.
pub fn is_summary(bytes: &[u8]) -> bool {
    // Only the schema is kept: every other member is skipped as it is read, so a run's result
    // of hundreds of MB is not built into a JSON tree to find it is not a summary (a 196 MB
    // result took `report` to 1.8 GB here).
    #[derive(serde::Deserialize)]
    struct Schema {
        schema: Option<String>,
    }
    serde_json::from_slice::<Schema>(bytes)
        .ok()
        .and_then(|v| v.schema)
        .is_some_and(|s| s.starts_with("netblast.campaign/"))
}

/// A `summary.json` read back; an error says what is wrong (another schema, bad JSON).
pub fn read_json(bytes: &[u8]) -> Result<Summary, String> {
    let v: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    match v.get("schema").and_then(|s| s.as_str()) {
        Some(netblast_spec::campaign::summary::SCHEMA) => {}
        Some(other) => {
            return Err(format!("schema {other}: this build reads {}", netblast_spec::campaign::summary::SCHEMA));
        }
        None => return Err("not a campaign summary (no schema)".into()),
    }
    serde_json::from_value(v).map_err(|e| format!("not a campaign summary: {e}"))
}

/// A figure's value in its unit.
fn show(f: &FigureInfo, v: f64) -> String {
    f.unit.show(v)
}

/// `9.41 Gbit/s [9.30 Gbit/s, 9.52 Gbit/s]`, or the median alone with why there is no interval.
fn spread_words(f: &FigureInfo, s: &Spread) -> String {
    match (s.ci_low, s.ci_high) {
        (Some(lo), Some(hi)) => format!("{} [{}, {}]", show(f, s.median), show(f, lo), show(f, hi)),
        _ => format!("{} [no interval: {} run]", show(f, s.median), s.n),
    }
}

/// The summary as text.
pub fn text(s: &Summary) -> String {
    let mut out = String::new();
    let r = &s.runs;
    let _ = writeln!(
        out,
        "\nCampaign: {} cells × {} repeats: {} of {} runs done, {} failed, {} not run",
        s.cells.len(),
        s.repeats,
        r.done,
        r.planned,
        r.failed,
        r.missing
    );
    let _ = writeln!(
        out,
        "Each figure: the median over the runs [{}]; the lowest and highest run; the run-to-run spread (stdev / mean).",
        ci_words()
    );
    if s.repeats < 3 {
        let _ = writeln!(
            out,
            "note: {} repeat{} per cell: {}",
            s.repeats,
            if s.repeats == 1 { "" } else { "s" },
            if s.repeats == 1 { "no interval can be had" } else { "intervals from two runs are wide (t = 12.7)" }
        );
    }
    let width = s.cells.iter().map(|c| c.id.len() + 1 + c.name.chars().count()).max().unwrap_or(8);
    // A figure that is 0 in every run of every cell (no errors, no retransmits) says so in one
    // line; the JSON and CSV keep it.
    let mut zero = Vec::new();
    for f in &s.figures {
        if s.cells.iter().all(|c| s.spread(c, f).is_none_or(|sp| sp.min == 0.0 && sp.max == 0.0)) {
            if !zero.contains(&f.label.as_str()) {
                zero.push(f.label.as_str());
            }
            continue;
        }
        let _ = writeln!(out, "\n{}:", f.label);
        for c in &s.cells {
            let who = format!("{} {}", c.id, c.name);
            match s.spread(c, f) {
                Some(sp) => {
                    let _ = writeln!(
                        out,
                        "  {who:<width$}  n={}  {}  (min {}, max {}, spread {:.1}%)",
                        sp.n,
                        spread_words(f, sp),
                        show(f, sp.min),
                        show(f, sp.max),
                        sp.cv() * 100.0
                    );
                }
                None if c.all_failed => {
                    let _ = writeln!(out, "  {who:<width$}  FAILED: every run failed");
                }
                None => {}
            }
        }
    }
    if !zero.is_empty() {
        let _ = writeln!(out, "\n0 in every run: {}", zero.join("; "));
    }
    comparisons(&mut out, s);
    baseline(&mut out, s);
    causes(&mut out, s);
    failures(&mut out, s);
    out
}

fn ci_words() -> &'static str {
    "95% confidence interval of the mean, Student's t"
}

/// `throughput +10.0% [+7.7%, +12.3%]`, then the other figures that differ; the cell's own
/// headline leads (a campaign of several kinds has one per kind). Against `base` (a cell of
/// this summary), a time also says by how much: `p50 +12.0 us (+6.1% [+2.0%, +10.4%])`.
fn change_words(
    s: &Summary,
    cell: &CellSummary,
    base: Option<&CellSummary>,
    changes: &std::collections::BTreeMap<String, Change>,
) -> String {
    let main = cell.main.as_deref().or_else(|| s.figures.first().map(|f| f.name.as_str()));
    let one = |name: &str, c: &Change| {
        let by = base.zip(s.figure(name)).filter(|(_, f)| f.unit == FigureUnit::Nanoseconds).and_then(|(b, f)| {
            let (now, then) = (cell.figures.get(name)?, b.figures.get(name)?);
            let d = now.mean - then.mean;
            Some(format!("{}{}", if d < 0.0 { "-" } else { "+" }, show(f, d.abs())))
        });
        match by {
            Some(by) => format!("{name} {by} ({c})"),
            None => format!("{name} {c}"),
        }
    };
    let mut parts = Vec::new();
    if let Some(m) = main {
        match changes.get(m) {
            Some(c) => parts.push(one(m, c)),
            None => parts.push(format!("{m}: no interval (fewer than 2 runs on a side)")),
        }
    }
    // The median latency is said always, a difference or not: half of what such a verdict is for.
    let always = |n: &str| n == "p50" && Some(n) != main;
    for (name, c) in changes.iter().filter(|(n, c)| Some(n.as_str()) != main && (c.differs || always(n))) {
        parts.push(one(name, c));
    }
    parts.join("; ")
}

fn comparisons(out: &mut String, s: &Summary) {
    if s.comparisons.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nAlong each axis, each value against the first (the other settings the same):");
    for c in &s.comparisons {
        let (Some(cell), Some(base)) = (s.cell(&c.cell), s.cell(&c.base)) else { continue };
        let value = cell.settings.get(&c.axis).map(|v| v.to_string()).unwrap_or_default();
        let first = base.settings.get(&c.axis).map(|v| v.to_string()).unwrap_or_default();
        let rest: Vec<String> =
            cell.settings.iter().filter(|(k, _)| **k != c.axis).map(|(k, v)| format!("{k}={v}")).collect();
        let at = if rest.is_empty() { String::new() } else { format!(" at {}", rest.join(" ")) };
        let _ = writeln!(out, "  {}={value} vs {first}{at}: {}", c.axis, change_words(s, cell, Some(base), &c.changes));
    }
}

fn baseline(out: &mut String, s: &Summary) {
    let Some(name) = &s.baseline else { return };
    let _ = writeln!(out, "\nAgainst the baseline {name} (the cell of the same settings there):");
    for c in &s.cells {
        if c.vs_baseline.is_empty() {
            let _ = writeln!(
                out,
                "  {} {}: nothing to compare (no cell of these settings there, or fewer than 2 runs on a side)",
                c.id, c.name
            );
        } else {
            let _ = writeln!(out, "  {} {}: {}", c.id, c.name, change_words(s, c, None, &c.vs_baseline));
        }
    }
}

/// Which cause limited which cells: each cause with its cells and how many of their runs.
fn causes(out: &mut String, s: &Summary) {
    let mut by: Vec<(String, Vec<String>)> = Vec::new();
    for c in &s.cells {
        for k in &c.causes {
            let entry = format!("{} ({} of {} runs)", c.id, k.runs, c.n);
            match by.iter_mut().find(|(cause, _)| *cause == k.cause) {
                Some((_, cells)) => cells.push(entry),
                None => by.push((k.cause.clone(), vec![entry])),
            }
        }
    }
    if by.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nWhat limited the runs:");
    for (cause, cells) in by {
        let _ = writeln!(out, "  {cause}: {}", cells.join(", "));
    }
}

fn failures(out: &mut String, s: &Summary) {
    let asserts: Vec<&CellSummary> = s.cells.iter().filter(|c| c.asserts.is_some()).collect();
    if !asserts.is_empty() {
        let _ = writeln!(out, "\nAssertions:");
        for c in asserts {
            let a = c.asserts.as_ref().expect("filtered");
            let failing =
                if a.failing.is_empty() { String::new() } else { format!("; failed: {}", a.failing.join(", ")) };
            let _ =
                writeln!(out, "  {} {}: held in {} of {} runs{failing}", c.id, c.name, a.passed, a.passed + a.failed);
        }
    }
    for c in s.cells.iter().filter(|c| c.failed > 0) {
        let what = if c.all_failed { "FAILED cell" } else { "failed runs" };
        let _ = writeln!(
            out,
            "{what} {} {}: {} of {} runs failed: {}",
            c.id,
            c.name,
            c.failed,
            c.failed + c.n,
            c.errors.join("; ")
        );
    }
}

/// One row per cell and figure: the cell's settings (a column per axis), the figure, its unit,
/// n, median, mean, stdev, the interval, min, max, the spread; with a baseline, the change and
/// its interval.
pub fn csv(s: &Summary) -> String {
    let mut out = String::from("cell");
    for a in &s.axes {
        let _ = write!(out, ",{}", field(&a.name));
    }
    out.push_str(",figure,unit,n,failed,median,mean,stdev,ci_low,ci_high,min,max,cv");
    if s.baseline.is_some() {
        out.push_str(",change,change_low,change_high,differs");
    }
    out.push('\n');
    let opt = |v: Option<f64>| v.map(|x| x.to_string()).unwrap_or_default();
    for c in &s.cells {
        for f in &s.figures {
            let Some(sp) = s.spread(c, f) else { continue };
            let _ = write!(out, "{}", c.id);
            for a in &s.axes {
                let _ = write!(out, ",{}", field(&c.settings.get(&a.name).map(|v| v.to_string()).unwrap_or_default()));
            }
            let unit =
                serde_json::to_value(f.unit).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
            let _ = write!(
                out,
                ",{},{unit},{},{},{},{},{},{},{},{},{},{}",
                field(&f.name),
                sp.n,
                c.failed,
                sp.median,
                sp.mean,
                sp.stdev,
                opt(sp.ci_low),
                opt(sp.ci_high),
                sp.min,
                sp.max,
                sp.cv()
            );
            if s.baseline.is_some() {
                match c.vs_baseline.get(&f.name) {
                    Some(ch) => {
                        let _ = write!(out, ",{},{},{},{}", ch.change, ch.ci_low, ch.ci_high, ch.differs);
                    }
                    None => out.push_str(",,,,"),
                }
            }
            out.push('\n');
        }
    }
    out
}

/// A CSV field, quoted when it holds a comma, a quote or a line break.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() }
}

/// The chart unit a figure's values are drawn in.
fn chart_unit(u: FigureUnit) -> Unit {
    match u {
        FigureUnit::BitsPerSecond => Unit::Bits,
        FigureUnit::Nanoseconds => Unit::Nanos,
        FigureUnit::PerSecond => Unit::PerSecond("operations"),
        FigureUnit::Count => Unit::Count(""),
        FigureUnit::Share => Unit::Percent,
    }
}

/// The summary as one HTML page: the text's tables, then for each figure a chart against each
/// axis (the axis's values across, one line per combination of the other axes; a dot at the
/// mean, a bar over its 95% interval, a faint bar over min–max).
pub fn html(s: &Summary) -> String {
    let mut body = String::new();
    let _ = writeln!(
        body,
        "<p>{} cells × {} repeats: {} of {} runs done, {} failed, {} not run. Dots: the mean of a cell's runs; \
         bars: its {}; faint bars: min–max. Tables: the median.</p>",
        s.cells.len(),
        s.repeats,
        s.runs.done,
        s.runs.planned,
        s.runs.failed,
        s.runs.missing,
        ci_words()
    );
    table(&mut body, s);
    let mut n = 0;
    for f in &s.figures {
        for (ai, axis) in s.axes.iter().enumerate() {
            let svg = chart(s, f, ai);
            let _ = writeln!(
                body,
                "<figure id=\"chart-{n}\" class=\"chart\"><figcaption>{} against {}</figcaption>{svg}</figure>",
                esc(&f.label),
                esc(&axis.name)
            );
            n += 1;
        }
    }
    body.push_str("<h2>Summary</h2><pre>");
    body.push_str(&esc(&text(s)));
    body.push_str("</pre>");
    crate::html::page("netblast campaign", &body)
}

/// Every cell's median of each figure, its interval and n.
fn table(out: &mut String, s: &Summary) {
    out.push_str("<table><tr><th class=\"l sort\">cell</th>");
    for a in &s.axes {
        let _ = write!(out, "<th class=\"l sort\">{}</th>", esc(&a.name));
    }
    out.push_str("<th class=\"sort\">n</th>");
    for f in &s.figures {
        let _ = write!(out, "<th class=\"sort\">{}</th>", esc(&f.label));
    }
    out.push_str("</tr>\n");
    for c in &s.cells {
        let _ = write!(out, "<tr><td class=\"l\">{}</td>", esc(&c.id));
        for a in &s.axes {
            let v = c.settings.get(&a.name).map(|v| v.to_string()).unwrap_or_default();
            let _ = write!(out, "<td class=\"l\">{}</td>", esc(&v));
        }
        let failed =
            if c.failed > 0 { format!(" <span class=\"err\">({} failed)</span>", c.failed) } else { String::new() };
        let _ = write!(out, "<td>{}{failed}</td>", c.n);
        for f in &s.figures {
            match s.spread(c, f) {
                Some(sp) => {
                    let ci = match (sp.ci_low, sp.ci_high) {
                        (Some(lo), Some(hi)) => {
                            format!("<br><span class=\"id\">[{}, {}]</span>", show(f, lo), show(f, hi))
                        }
                        _ => String::new(),
                    };
                    let _ = write!(out, "<td data-v=\"{}\">{}{ci}</td>", sp.median, esc(&show(f, sp.median)));
                }
                None => out.push_str("<td>-</td>"),
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

/// Chart size (the margins and colours are the run charts').
const W: f64 = 900.0;
const H: f64 = 300.0;

/// One figure against axis `ai`: the axis's values across, a line per combination of the
/// other axes' values.
fn chart(s: &Summary, f: &FigureInfo, ai: usize) -> String {
    let axis = &s.axes[ai];
    // Lines: the other axes' values, in the cells' order.
    let mut lines: Vec<(String, Vec<(usize, &Spread)>)> = Vec::new();
    for c in &s.cells {
        let Some(sp) = s.spread(c, f) else { continue };
        let Some(x) = c.settings.get(&axis.name).and_then(|v| axis.values.iter().position(|a| a == v)) else {
            continue;
        };
        let key: Vec<String> = s
            .axes
            .iter()
            .filter(|a| a.name != axis.name)
            .filter_map(|a| c.settings.get(&a.name).map(|v| format!("{}={v}", a.name)))
            .collect();
        let key = if key.is_empty() { f.label.clone() } else { key.join(" ") };
        match lines.iter_mut().find(|(k, _)| *k == key) {
            Some((_, pts)) => pts.push((x, sp)),
            None => lines.push((key, vec![(x, sp)])),
        }
    }
    let hi = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(_, sp)| sp.max.max(sp.ci_high.unwrap_or(sp.max))))
        .fold(0.0f64, f64::max);
    let lo = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(_, sp)| sp.min.min(sp.ci_low.unwrap_or(sp.min))))
        .fold(0.0f64, f64::min);
    let unit = chart_unit(f.unit);
    let (factor, unit_name) = unit.scale(hi.abs().max(lo.abs()));
    let top = if hi > lo { hi + (hi - lo) * 0.05 } else { lo + 1.0 };
    let ticks = nice_ticks(lo / factor, top / factor, 5);
    let top = ticks.last().map(|t| (t * factor).max(top)).unwrap_or(top);
    let y = |v: f64| MT + (H - MT - MB) * (1.0 - (v - lo) / (top - lo).max(f64::MIN_POSITIVE));
    let k = axis.values.len().max(1) as f64;
    let x = |i: usize, line: usize| {
        let slot = (W - ML - MR) / k;
        // Lines side by side within a slot, so their bars do not hide each other.
        let spread = (slot * 0.08).min(12.0 * lines.len() as f64);
        let off = if lines.len() > 1 { spread * (line as f64 / (lines.len() - 1) as f64 - 0.5) } else { 0.0 };
        ML + slot * (i as f64 + 0.5) + off
    };
    let mut svg = format!("<svg class=\"plot\" viewBox=\"0 0 {W} {H}\" role=\"img\">");
    for t in &ticks {
        let yy = y(t * factor);
        let _ = write!(
            svg,
            "<line x1=\"{ML}\" x2=\"{}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\" stroke=\"#e5e5e5\"/><text x=\"{}\" y=\"{:.1}\" \
             font-size=\"12\" text-anchor=\"end\">{}</text>",
            W - MR,
            ML - 6.0,
            yy + 4.0,
            netblast_spec::units::sig3(*t)
        );
    }
    let _ = write!(
        svg,
        "<text x=\"14\" y=\"{:.1}\" font-size=\"12\" transform=\"rotate(-90 14 {:.1})\" text-anchor=\"middle\">{}</text>",
        (H - MB + MT) / 2.0,
        (H - MB + MT) / 2.0,
        esc(&unit_name)
    );
    for (i, v) in axis.values.iter().enumerate() {
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\">{}={}</text>",
            ML + (W - ML - MR) / k * (i as f64 + 0.5),
            H - MB + 18.0,
            esc(&axis.name),
            esc(&v.to_string())
        );
    }
    for (li, (name, pts)) in lines.iter().enumerate() {
        let colour = PALETTE[li % PALETTE.len()];
        let _ = write!(
            svg,
            "<g id=\"l{ai}-{li}-{}\" stroke=\"{colour}\" fill=\"{colour}\"><title>{}</title>",
            esc(&f.name),
            esc(name)
        );
        let path: Vec<String> = pts.iter().map(|(i, sp)| format!("{:.1},{:.1}", x(*i, li), y(sp.mean))).collect();
        let _ = write!(svg, "<polyline points=\"{}\" fill=\"none\" stroke-width=\"1.5\"/>", path.join(" "));
        for (i, sp) in pts {
            let xx = x(*i, li);
            let _ = write!(
                svg,
                "<line x1=\"{xx:.1}\" x2=\"{xx:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke-width=\"5\" stroke-opacity=\"0.2\"/>",
                y(sp.min),
                y(sp.max)
            );
            if let (Some(a), Some(b)) = (sp.ci_low, sp.ci_high) {
                let _ = write!(
                    svg,
                    "<line x1=\"{xx:.1}\" x2=\"{xx:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke-width=\"1.5\"/><line x1=\"{:.1}\" \
                     x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/><line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/>",
                    y(a),
                    y(b),
                    xx - 5.0,
                    xx + 5.0,
                    y(a),
                    y(a),
                    xx - 5.0,
                    xx + 5.0,
                    y(b),
                    y(b)
                );
            }
            let tip = format!("{name}: mean {}, median {}, n={}", show(f, sp.mean), show(f, sp.median), sp.n);
            let _ = write!(
                svg,
                "<circle cx=\"{xx:.1}\" cy=\"{:.1}\" r=\"4\"><title>{}</title></circle>",
                y(sp.mean),
                esc(&tip)
            );
        }
        svg.push_str("</g>");
    }
    svg.push_str("</svg>");
    if lines.len() > 1 {
        svg.push_str("<ul class=\"legend\">");
        for (li, (name, _)) in lines.iter().enumerate() {
            let _ = write!(
                svg,
                "<li data-for=\"l{ai}-{li}-{}\"><span class=\"sw\" style=\"background:{}\"></span>{}</li>",
                esc(&f.name),
                PALETTE[li % PALETTE.len()],
                esc(name)
            );
        }
        svg.push_str("</ul>");
    }
    svg
}

#[cfg(test)]
mod tests {
    use super::*;
    use netblast_spec::campaign::summary::{Digest, RunOutcome, summarize};
    use netblast_spec::campaign::{Campaign, RunId};
    use std::collections::BTreeMap;

    fn digest(v: f64) -> Digest {
        let info = FigureInfo {
            name: "throughput".into(),
            label: "throughput (received)".into(),
            unit: FigureUnit::BitsPerSecond,
            higher_is_better: true,
        };
        Digest {
            figures: vec![(info, v)],
            causes: vec!["receiver window".into()],
            asserts: Vec::new(),
            kind: "bulk".into(),
        }
    }

    /// A run of `kind` at `rate` per second with a p50 of `p50_ns`, its rate named in the
    /// kind's words.
    fn message_digest(kind: &str, rate: f64, p50_ns: f64) -> Digest {
        let unit = if kind == "rr" { "transactions" } else { "connections" };
        let info = |name: &str, label: String, unit, higher_is_better| FigureInfo {
            name: name.into(),
            label,
            unit,
            higher_is_better,
        };
        Digest {
            figures: vec![
                (info("msgs", format!("{unit} per second"), FigureUnit::PerSecond, true), rate),
                (info("p50", "latency p50".into(), FigureUnit::Nanoseconds, false), p50_ns),
            ],
            causes: Vec::new(),
            asserts: Vec::new(),
            kind: kind.into(),
        }
    }

    #[test]
    fn a_campaign_of_two_kinds_names_each_kinds_figures_and_compares_a_kind_with_itself() {
        let file = "repeats = 3\n[axes]\npath = [{ name = \"pod\", target = \"a\" }, { name = \"service\", target = \"b\" }]\n\
                    profile = [\"latency\", \"cps\"]\n";
        let c = Campaign::parse(file, "c").unwrap();
        let mut runs = BTreeMap::new();
        for (rep, jitter) in [(1, 0.0), (2, 1.0), (3, -1.0)] {
            // c001 pod/latency, c002 pod/cps, c003 service/latency (+12 us), c004 service/cps.
            let mut at = |cell, d| runs.insert(RunId { cell, repeat: rep }, RunOutcome::Done(d));
            at(1, message_digest("rr", 50_000.0 + jitter, 20_000.0 + jitter));
            at(2, message_digest("cps", 9_000.0 + jitter, 60_000.0 + jitter));
            at(3, message_digest("rr", 40_000.0 + jitter, 32_000.0 + jitter));
            at(4, message_digest("cps", 9_000.0 - jitter, 60_000.0 - jitter));
        }
        let s = summarize(&c, &runs);
        let t = text(&s);
        // Each block: its heading, then its cells' lines.
        let block = |head: &str| -> Vec<String> {
            let from = t.find(&format!("\n{head}:\n")).unwrap_or_else(|| panic!("no block {head}: {t}"));
            t[from + head.len() + 3..].lines().take_while(|l| l.starts_with("  ")).map(str::to_string).collect()
        };
        let rr = block("transactions per second");
        assert!(
            rr.len() == 2 && rr[0].starts_with("  c001 path=pod profile=latency ") && rr[0].contains("50.0 k/s"),
            "{t}"
        );
        let cps = block("connections per second");
        assert!(
            cps.len() == 2 && cps[0].starts_with("  c002 path=pod profile=cps ") && cps[0].contains("9.00 k/s"),
            "{t}"
        );
        assert!(
            t.contains("path=service vs pod at profile=latency: msgs -20.0% [") && t.contains("p50 +12.0 us (+60.0% ["),
            "the service path's verdict, with its added time: {t}"
        );
        assert!(t.contains("path=service vs pod at profile=cps: msgs +0.0% ["), "{t}");
        assert!(
            !t.contains("profile=cps vs latency"),
            "a connection rate is not compared with a transaction rate: {t}"
        );
        let csv = csv(&s);
        assert_eq!(csv.lines().filter(|l| l.starts_with("c002,") && l.contains(",msgs,")).count(), 1, "{csv}");
    }

    #[test]
    fn a_summary_renders_every_cell_its_changes_and_causes() {
        let c = Campaign::parse("repeats = 3\n[axes]\ncongestion = [\"cubic\", \"bbr\"]\n", "c").unwrap();
        let mut runs = BTreeMap::new();
        for (rep, v) in [(1, 100e6), (2, 101e6), (3, 99e6)] {
            runs.insert(RunId { cell: 1, repeat: rep }, RunOutcome::Done(digest(v)));
            runs.insert(RunId { cell: 2, repeat: rep }, RunOutcome::Done(digest(v * 1.1)));
        }
        let s = summarize(&c, &runs);
        let t = text(&s);
        assert!(
            t.contains(
                "c001 congestion=cubic  n=3  100 Mbits/sec [97.5 Mbits/sec, 102 Mbits/sec]  (min 99.0 Mbits/sec"
            ),
            "{t}"
        );
        assert!(t.contains("congestion=bbr vs cubic: throughput +10.0% [+"), "{t}");
        assert!(t.contains("receiver window: c001 (3 of 3 runs), c002 (3 of 3 runs)"), "{t}");
        let csv = csv(&s);
        assert_eq!(
            csv.lines().next().unwrap(),
            "cell,congestion,figure,unit,n,failed,median,mean,stdev,ci_low,ci_high,min,max,cv"
        );
        assert!(
            csv.lines().nth(1).unwrap().starts_with("c001,cubic,throughput,bits_per_second,3,0,100000000,"),
            "{csv}"
        );
        let page = html(&s);
        assert!(page.contains("<figure id=\"chart-0\"") && page.contains("throughput (received) against congestion"));
        assert_eq!(page.matches("<circle").count(), 2, "a dot per cell");
    }
}
