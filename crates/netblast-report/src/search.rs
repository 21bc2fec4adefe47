//! A `--find-max` search (`find_max` in the result): one row per step, the answer in one line
//! (the text report's last), an HTML table, and two charts against the offered rate: what the
//! target took, and its latency, the knee (the answer) marked.

use crate::chart::{Plot, Series, Shape, Unit, XAxis};
use crate::markup::esc;
use netblast_spec::RunResult;
use netblast_spec::find_max::{Axis, StepOutcome};
use netblast_spec::units::fmt_ns;
use std::fmt::Write;

fn ns(v: Option<u64>) -> String {
    v.map(|v| fmt_ns(v as f64)).unwrap_or_else(|| "-".into())
}

fn share(v: Option<f64>) -> String {
    v.map(|v| format!("{:.2}%", v * 100.0)).unwrap_or_else(|| "-".into())
}

fn outcome(o: StepOutcome) -> &'static str {
    match o {
        StepOutcome::Held => "held",
        StepOutcome::Failed => "FAILED",
        StepOutcome::Generator => "GENERATOR",
    }
}

/// The search's steps, one line each, then its answer: the text report's last lines.
pub fn lines(s: &mut String, r: &RunResult) {
    let Some(f) = r.find_max.as_deref() else { return };
    let ax = f.axis;
    let _ = writeln!(
        s,
        "Find-max: {} {}..{} to {:.0}%, each step judged after a {:.0} s warm-up",
        ax.flag(),
        ax.fmt(f.range[0]),
        ax.fmt(f.range[1]),
        f.resolution * 100.0,
        f.warmup_s
    );
    let _ =
        writeln!(s, "  step       offered         took     seconds        p50        p99   failed     lost  outcome");
    for st in &f.steps {
        let _ = writeln!(s, "  {}", step_line(ax, st));
    }
    let _ = writeln!(s, "Answer: {}", f.sentence());
}

/// One step in a line: its number (`r` for a repeat), offered and taken rates, judged seconds,
/// p50, p99, failed and lost shares, and its outcome with the cause; what the report's table
/// and `run --find-max`'s live lines print.
pub fn step_line(ax: Axis, st: &netblast_spec::find_max::Step) -> String {
    let [offered, took, secs, p50, p99, failed, lost] = figures(ax, st);
    format!(
        "{:>3}{} {offered:>13} {took:>12} {secs:>11} {p50:>10} {p99:>10} {failed:>8} {lost:>8}  {}: {}",
        st.n,
        if st.repeat { "r" } else { " " },
        outcome(st.outcome),
        st.cause
    )
}

/// A step's figures as the text and the page show them: offered, taken, judged seconds, p50,
/// p99, failed and lost shares.
fn figures(ax: Axis, st: &netblast_spec::find_max::Step) -> [String; 7] {
    [
        ax.fmt(st.offered),
        ax.fmt(st.achieved),
        format!("{:.1}", st.seconds),
        ns(st.p50_ns),
        ns(st.p99_ns),
        share(st.failed),
        share(st.lost),
    ]
}

/// The HTML table of the steps, with the answer above it.
pub fn table(out: &mut String, r: &RunResult) {
    let Some(f) = r.find_max.as_deref() else { return };
    let ax = f.axis;
    let _ = write!(
        out,
        "<h2>Find-max: the highest rate held</h2><p id=\"find-max-answer\">{}</p><table id=\"find-max\"><tr>\
         <th>step</th><th>offered</th><th>took</th><th>seconds</th><th>p50</th><th>p99</th><th>failed</th>\
         <th>lost</th><th class=\"l\">outcome</th></tr>",
        esc(&f.sentence())
    );
    for st in &f.steps {
        let cells: String = figures(ax, st).iter().map(|c| format!("<td>{c}</td>")).collect();
        let _ = write!(
            out,
            "<tr{}><td>{}{}</td>{cells}<td class=\"l\">{}: {}</td></tr>",
            if st.outcome == StepOutcome::Held { "" } else { " class=\"turn\"" },
            st.n,
            if st.repeat { " (repeat)" } else { "" },
            outcome(st.outcome),
            esc(&st.cause)
        );
    }
    out.push_str("</table>\n");
}

/// The search's two charts against the offered rate: what the target took (and the offered
/// rate itself, dashed), and the latency of each step; the answer marked as a vertical line.
pub fn plots(r: &RunResult) -> Vec<Plot> {
    let Some(f) = r.find_max.as_deref() else { return Vec::new() };
    let unit = unit_of(f.axis);
    // One point per rate: the last run of it.
    let mut steps: Vec<_> = f.steps.iter().collect();
    steps.sort_by(|a, b| a.offered.total_cmp(&b.offered));
    steps.dedup_by(|b, a| a.offered == b.offered);
    let pts = |v: &dyn Fn(&netblast_spec::find_max::Step) -> Option<f64>| -> Vec<(f64, f64, f64)> {
        steps.iter().filter_map(|s| v(s).map(|y| (s.offered, s.offered, y))).collect()
    };
    let knee = |top: f64| -> Option<Series> {
        let at = f.rate?;
        Some(Series::new("highest rate held (the answer)", vec![(at, at, 0.0), (at, at, top)]).dashed())
    };
    let took = pts(&|s| Some(s.achieved));
    let top = took.iter().map(|p| p.2).chain(steps.iter().map(|s| s.offered)).fold(0.0, f64::max);
    let mut rate = vec![Series::new("took", took).bold(), Series::new("offered", pts(&|s| Some(s.offered))).dashed()];
    rate.extend(knee(top));
    let mut lat = vec![
        Series::new("p99", pts(&|s| s.p99_ns.map(|v| v as f64))).bold(),
        Series::new("p50", pts(&|s| s.p50_ns.map(|v| v as f64))),
    ];
    let lat_top = lat.iter().flat_map(|s| s.points.iter().map(|p| p.2)).fold(0.0, f64::max);
    let has_latency = lat_top > 0.0;
    lat.extend(knee(lat_top));
    let plot = |id: &str, title: &str, unit: Unit, series: Vec<Series>| Plot {
        id: id.into(),
        title: title.into(),
        unit,
        x: XAxis::Offered(unit_of(f.axis)),
        log_y: false,
        shape: Shape::Line,
        series,
        marks: Vec::new(),
    };
    let mut out = vec![plot("find-max-rate", "Taken against offered, each step", unit, rate)];
    if has_latency {
        out.push(plot("find-max-latency", "Latency against offered, each step", Unit::Nanos, lat));
    }
    out
}

fn unit_of(a: Axis) -> Unit {
    match a {
        Axis::Rate => Unit::PerSecond("operations"),
        Axis::Bitrate => Unit::Bits,
    }
}
