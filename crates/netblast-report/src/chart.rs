//! Charts as inline SVG, drawn by hand: a plot is data in base units (bit/s, ns, counts per
//! second) and is scaled, ticked and labelled when it is drawn, so every line on one plot
//! shares one unit and one axis range (a comparison overlays its runs on one plot).
//!
//! What a reader gets: the full width of the page (a `viewBox`, scaled by CSS), ticks at round
//! values that never collide (about six per axis; a log axis labels its decades), the legend
//! outside the data (an HTML list under the plot, each entry able to hide its line), every
//! interval's value on hover (an SVG `<title>`, no script needed), and negative values kept
//! negative.

use netblast_spec::units::sig3;
use std::fmt::Write;

/// Drawing size in SVG units (the page scales it to its width).
const W: f64 = 1200.0;
const H: f64 = 340.0;
/// Plot area margins: left (tick labels), right, top, bottom (tick labels and axis name).
pub(crate) const ML: f64 = 78.0;
pub(crate) const MR: f64 = 16.0;
pub(crate) const MT: f64 = 12.0;
pub(crate) const MB: f64 = 44.0;
/// Most hover targets per line (one per interval); beyond it only the line.
const MAX_TIPS: usize = 400;

/// Colours of the lines, in order (distinct for colour-blind readers first: Okabe–Ito).
pub(crate) const PALETTE: [&str; 10] =
    ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442", "#999999", "#882255"];

/// What a value axis measures, so one unit is picked for all lines of a plot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// bits per second.
    Bits,
    /// nanoseconds.
    Nanos,
    /// a count per second of the named thing ("transactions").
    PerSecond(&'static str),
    /// a count of the named thing ("segments").
    Count(&'static str),
    /// bytes.
    Bytes,
    /// a fraction shown as a percentage.
    Percent,
}

impl Unit {
    /// The factor and name the axis of a plot whose largest absolute value is `max` uses.
    pub(crate) fn scale(self, max: f64) -> (f64, String) {
        let pick = |steps: &[(f64, &str)]| -> (f64, String) {
            let mut p = steps[0];
            for &s in steps {
                if max >= s.0 {
                    p = s;
                }
            }
            (p.0, p.1.to_string())
        };
        match self {
            Unit::Bits => pick(&[(1.0, "bit/s"), (1e3, "kbit/s"), (1e6, "Mbit/s"), (1e9, "Gbit/s"), (1e12, "Tbit/s")]),
            Unit::Nanos => pick(&[(1.0, "ns"), (1e3, "µs"), (1e6, "ms"), (1e9, "s")]),
            Unit::Bytes => pick(&[(1.0, "bytes"), (1024.0, "KiB"), (1048576.0, "MiB"), (1073741824.0, "GiB")]),
            Unit::Percent => (0.01, "%".into()),
            Unit::PerSecond(what) => {
                let (f, p) = pick(&[(1.0, ""), (1e3, "thousand "), (1e6, "million ")]);
                (f, format!("{p}{what}/s"))
            }
            Unit::Count(what) => {
                let (f, p) = pick(&[(1.0, ""), (1e3, "thousand "), (1e6, "million ")]);
                (f, format!("{p}{what}"))
            }
        }
    }

    /// One value in this unit's own format (for hover text).
    pub fn show(self, v: f64) -> String {
        use netblast_spec::units::{fmt_bits_per_s, fmt_bytes, fmt_ns, fmt_per_s};
        match self {
            Unit::Bits => fmt_bits_per_s(v),
            Unit::Nanos => fmt_ns(v),
            Unit::Bytes => fmt_bytes(v.max(0.0) as u64),
            Unit::Percent => format!("{}%", sig3(v * 100.0)),
            Unit::PerSecond(what) => format!("{} {what}", fmt_per_s(v)),
            Unit::Count(what) => format!("{v:.0} {what}"),
        }
    }
}

/// How a line's points join.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Each point `(x0, x1, y)` a level held over its own span: an interval's rate.
    Steps,
    /// Each point `(x, _, y)` joined straight to the next.
    Line,
    /// Each point `(x0, x1, y)` a bar from 0 over its span.
    Bars,
}

/// One named line of a plot.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The legend's name.
    pub name: String,
    /// `(x0, x1, y)`: x1 is the span's end for steps and bars, ignored for lines.
    pub points: Vec<(f64, f64, f64)>,
    /// Drawn wider (a total beside its parts).
    pub bold: bool,
    /// Drawn dashed (a target the measured lines are held against, which they may hide under).
    pub dashed: bool,
}

impl Series {
    /// A series of `points`.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64, f64)>) -> Series {
        Series { name: name.into(), points, bold: false, dashed: false }
    }

    /// This series, drawn wider.
    pub fn bold(mut self) -> Series {
        self.bold = true;
        self
    }

    /// This series, drawn dashed.
    pub fn dashed(mut self) -> Series {
        self.dashed = true;
        self
    }
}

/// The horizontal axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XAxis {
    /// Seconds since the run's start.
    Seconds,
    /// HdrHistogram's percentile spectrum: 1/(1−q) on a log axis, labelled 90%, 99%, 99.9%…
    Percentile,
    /// An offered rate in this unit (a search's steps), linear from 0.
    Offered(Unit),
}

/// One chart: its lines, in base units.
#[derive(Debug, Clone, PartialEq)]
pub struct Plot {
    /// The figure's id (`chart-ID` in the page): the same figure across runs of a comparison.
    pub id: String,
    /// The caption, without the unit (the axis names it).
    pub title: String,
    /// What the values measure.
    pub unit: Unit,
    /// The horizontal axis.
    pub x: XAxis,
    /// A log value axis (latency spectra: the body and the tail both readable).
    pub log_y: bool,
    /// How the lines join.
    pub shape: Shape,
    /// The lines, the first on top of the legend.
    pub series: Vec<Series>,
    /// Instants marked across the plot with a name (a load's start and end), seconds.
    pub marks: Vec<(f64, String)>,
}

impl Plot {
    /// A plot over the run's seconds.
    pub fn over_time(id: &str, title: impl Into<String>, unit: Unit, shape: Shape, series: Vec<Series>) -> Plot {
        Plot {
            id: id.into(),
            title: title.into(),
            unit,
            x: XAxis::Seconds,
            log_y: false,
            shape,
            series,
            marks: Vec::new(),
        }
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Round tick values covering `[lo, hi]`: steps of 1, 2 or 5 times a power of ten, about
/// `want` of them.
pub fn nice_ticks(lo: f64, hi: f64, want: usize) -> Vec<f64> {
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) || !lo.is_finite() || !hi.is_finite() {
        return vec![lo];
    }
    let raw = (hi - lo) / want.max(1) as f64;
    let e = raw.log10().floor() as i32;
    // A multiple of a power of ten, divided (not multiplied) by 10^-e below 1: 6/10 is 0.6
    // exactly as a double, 6 × 0.1 is not.
    let scale = |k: f64| if e < 0 { k / 10f64.powi(-e) } else { k * 10f64.powi(e) };
    // The round step whose tick count is nearest `want`.
    let n = |m: f64| ((hi - lo) / scale(m) - want as f64).abs();
    let m = [1.0, 2.0, 5.0, 10.0].into_iter().min_by(|a, b| n(*a).total_cmp(&n(*b))).unwrap_or(1.0);
    let step = scale(m);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step + 1e-9).floor() as i64;
    (first..=last).map(|i| scale(i as f64 * m)).collect()
}

/// A tick label: as few digits as tell the ticks apart.
fn tick_label(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let s = format!("{v:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.len() > 7 { sig3(v) } else { s.to_string() }
}

/// The x range of a plot: seconds from 0, or the spectrum's 1 … 1/(1−q) of its deepest line.
fn x_range(p: &Plot) -> (f64, f64) {
    let hi = p.series.iter().flat_map(|s| s.points.iter().map(|q| q.0.max(q.1))).fold(0.0, f64::max);
    match p.x {
        // Seconds before the start (a latency probe's idle phase) are drawn left of 0.
        XAxis::Seconds => {
            let lo = p.series.iter().flat_map(|s| s.points.iter().map(|q| q.0)).fold(0.0, f64::min);
            (lo, hi.max(lo + 1e-3))
        }
        XAxis::Offered(_) => (0.0, hi.max(1e-3)),
        XAxis::Percentile => (1.0, hi.max(10.0)),
    }
}

/// Where a plot's values land: its axes' ranges (values in the axis's unit: base units
/// divided by `factor`) and the drawing's coordinates of a point.
struct Frame {
    x: XAxis,
    x0: f64,
    x1: f64,
    log_y: bool,
    lo: f64,
    hi: f64,
    /// Base units per axis unit.
    factor: f64,
    /// The axis's unit's name.
    unit: String,
    yticks: Vec<f64>,
}

impl Frame {
    fn of(p: &Plot) -> Frame {
        let ys = p.series.iter().flat_map(|s| s.points.iter().map(|q| q.2));
        let (y_min_v, y_max_v) = ys.fold((f64::MAX, f64::MIN), |(a, b), y| (a.min(y), b.max(y)));
        let (y_min_v, y_max_v) = if y_min_v > y_max_v { (0.0, 1.0) } else { (y_min_v, y_max_v) };
        let (factor, unit) = p.unit.scale(y_min_v.abs().max(y_max_v.abs()));
        let (x0, x1) = x_range(p);
        let (lo, hi, yticks) = if p.log_y {
            let pos_min = p
                .series
                .iter()
                .flat_map(|s| s.points.iter().map(|q| q.2 / factor))
                .filter(|v| *v > 0.0)
                .fold(f64::MAX, f64::min);
            log_axis(pos_min, (y_max_v / factor).max(1e-9))
        } else {
            let lo = (y_min_v / factor).min(0.0);
            // An all-zero line still gets an axis of one unit, not ticks that all read 0.
            let hi = if y_max_v / factor <= 0.0 { 1.0 } else { y_max_v / factor * 1.08 };
            let t = nice_ticks(lo, hi, 6);
            // The axis ends on the first tick at or above the headroom: the top line never
            // sits on the frame.
            let hi = match t.as_slice() {
                // A share never passes the whole: its axis stops at 100%.
                _ if p.unit == Unit::Percent && y_max_v <= 1.0 && y_max_v > 0.0 => 100.0,
                [a, b, ..] => ((hi / (b - a)).ceil() * (b - a)).max(hi),
                _ => hi,
            };
            (lo, hi, nice_ticks(lo, hi, 6))
        };
        Frame { x: p.x, x0, x1, log_y: p.log_y, lo, hi, factor, unit, yticks }
    }

    fn sx(&self, x: f64) -> f64 {
        let pw = W - ML - MR;
        match self.x {
            XAxis::Seconds | XAxis::Offered(_) => ML + (x - self.x0) / (self.x1 - self.x0) * pw,
            XAxis::Percentile => ML + x.max(1.0).log10() / self.x1.log10() * pw,
        }
    }

    /// A value in base units to its height.
    fn sy(&self, v: f64) -> f64 {
        let (y, ph) = (v / self.factor, H - MT - MB);
        let f = if self.log_y {
            (y.max(self.lo).log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (y - self.lo) / (self.hi - self.lo)
        };
        MT + ph - f.clamp(-0.02, 1.02) * ph
    }
}

/// A log axis from the decade at or below `lo` to the one at or above `hi`: ticks at each
/// decade, and at 2 and 5 between them where the axis spans two decades or fewer.
fn log_axis(pos_min: f64, hi: f64) -> (f64, f64, Vec<f64>) {
    let lo = if pos_min == f64::MAX { hi / 10.0 } else { pos_min.min(hi / 10.0) };
    let (dlo, dhi) = (lo.log10().floor(), hi.log10().ceil());
    let decades = (dhi - dlo) as i32;
    let mut t = Vec::new();
    for d in dlo as i32..=dhi as i32 {
        for m in [1.0, 2.0, 5.0] {
            if m == 1.0 || decades <= 2 {
                t.push(m * 10f64.powi(d));
            }
        }
    }
    let (lo, hi) = (10f64.powf(dlo), 10f64.powf(dhi));
    t.retain(|v| *v >= lo * 0.999 && *v <= hi * 1.001);
    (lo, hi, t)
}

/// The grid, the ticks and their labels, the frame and the axes' names.
fn axes(s: &mut String, f: &Frame) {
    let ph = H - MT - MB;
    for t in &f.yticks {
        let y = f.sy(*t * f.factor);
        let _ = write!(
            s,
            "<line x1=\"{ML}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#e4e4e4\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" class=\"tick\">{}</text>",
            W - MR,
            ML - 6.0,
            y + 4.0,
            tick_label(*t)
        );
    }
    let xticks: Vec<(f64, String)> = match f.x {
        XAxis::Seconds => nice_ticks(f.x0, f.x1, 10).into_iter().map(|t| (t, tick_label(t))).collect(),
        XAxis::Offered(u) => {
            let (k, _) = u.scale(f.x1);
            nice_ticks(f.x0 / k, f.x1 / k, 10).into_iter().map(|t| (t * k, tick_label(t))).collect()
        }
        XAxis::Percentile => {
            let names = ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%", "99.9999%"];
            names
                .iter()
                .enumerate()
                .map(|(d, n)| (10f64.powi(d as i32), n.to_string()))
                .filter(|(t, _)| *t <= f.x1 * 1.001)
                .collect()
        }
    };
    for (t, label) in &xticks {
        let x = f.sx(*t);
        let _ = write!(
            s,
            "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{MT}\" y2=\"{:.1}\" stroke=\"#eeeeee\"/>\
             <text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" class=\"tick\">{}</text>",
            MT + ph,
            MT + ph + 17.0,
            esc(label)
        );
    }
    let x_name = match f.x {
        XAxis::Seconds => "seconds since the start".to_string(),
        XAxis::Percentile => "percentile".to_string(),
        XAxis::Offered(u) => format!("offered ({})", u.scale(f.x1).1),
    };
    let y_name = if f.log_y { format!("{} (log scale)", f.unit) } else { f.unit.clone() };
    let _ = write!(
        s,
        "<rect x=\"{ML}\" y=\"{MT}\" width=\"{}\" height=\"{ph}\" fill=\"none\" stroke=\"#888\"/>\
         <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" class=\"axis\">{}</text>\
         <text transform=\"translate(16 {:.1}) rotate(-90)\" text-anchor=\"middle\" class=\"axis\">{}</text>",
        W - ML - MR,
        ML + (W - ML - MR) / 2.0,
        H - 6.0,
        esc(&x_name),
        MT + ph / 2.0,
        esc(&y_name)
    );
    if !f.log_y && f.lo < 0.0 {
        let y = f.sy(0.0);
        let _ = write!(s, "<line x1=\"{ML}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#555\"/>", W - MR);
    }
}

/// Series `i` of `p` (of `n`), in a group the legend can hide.
fn series(s: &mut String, p: &Plot, f: &Frame, idx: usize, i: usize) {
    let ser = &p.series[i];
    let n = p.series.len();
    let color = PALETTE[i % PALETTE.len()];
    let width = if ser.bold { 3.0 } else { 1.6 };
    let tip = |a: f64, b: f64, y: f64| {
        format!("<title>{}: {}–{} s: {}</title>", esc(&ser.name), tick_label(a), tick_label(b), esc(&p.unit.show(y)))
    };
    let _ = write!(s, "<g id=\"s{idx}-{i}\" data-series=\"{}\">", esc(&ser.name));
    match p.shape {
        Shape::Bars => {
            // Bars of several series share each span side by side.
            for &(a, b, y) in &ser.points {
                let (xa, xb) = (f.sx(a), f.sx(b));
                let w = ((xb - xa) / n as f64 - 1.0).max(0.5);
                let x = xa + w * i as f64 + 0.5;
                let (top, base) = (f.sy(y.max(0.0)), f.sy(0f64.max(f.lo) * f.factor));
                let _ = write!(
                    s,
                    "<rect x=\"{x:.1}\" y=\"{top:.1}\" width=\"{w:.1}\" height=\"{:.1}\" fill=\"{color}\">{}</rect>",
                    (base - top).max(0.0),
                    tip(a, b, y)
                );
            }
        }
        Shape::Steps | Shape::Line => {
            let mut d = String::new();
            for (k, &(a, b, y)) in ser.points.iter().enumerate() {
                let cmd = if k == 0 { 'M' } else { 'L' };
                if p.shape == Shape::Steps {
                    let _ = write!(d, "{cmd}{:.1} {:.1}H{:.1}", f.sx(a), f.sy(y), f.sx(b));
                } else {
                    let _ = write!(d, "{cmd}{:.1} {:.1}", f.sx(a), f.sy(y));
                }
            }
            let dash = if ser.dashed { " stroke-dasharray=\"8 5\"" } else { "" };
            let _ = write!(
                s,
                "<path d=\"{d}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"{width}\"{dash} stroke-linejoin=\"round\"/>"
            );
            if p.shape == Shape::Steps && ser.points.len() <= MAX_TIPS {
                for &(a, b, y) in &ser.points {
                    let _ = write!(
                        s,
                        "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"5\" fill=\"{color}\" fill-opacity=\"0.01\">{}</circle>",
                        (f.sx(a) + f.sx(b)) / 2.0,
                        f.sy(y),
                        tip(a, b, y)
                    );
                }
            }
        }
    }
    s.push_str("</g>");
}

/// Draws `p` as an SVG element followed by its legend (an HTML list), `idx` making the ids of
/// its lines unique in the page.
pub fn render(p: &Plot, idx: usize) -> String {
    let f = Frame::of(p);
    let mut s = String::with_capacity(16 * 1024);
    let _ = write!(
        s,
        "<svg class=\"plot\" viewBox=\"0 0 {W} {H}\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" \
         aria-label=\"{}\" font-family=\"sans-serif\" font-size=\"13\">",
        esc(&p.title)
    );
    axes(&mut s, &f);
    for (x, name) in &p.marks {
        let (sx, top, bottom) = (f.sx(*x), MT, H - MB);
        let _ = write!(
            s,
            "<line class=\"mark\" x1=\"{sx:.1}\" x2=\"{sx:.1}\" y1=\"{top:.1}\" y2=\"{bottom:.1}\" stroke=\"#666\" \
             stroke-dasharray=\"4 3\"/><text x=\"{:.1}\" y=\"{:.1}\" class=\"tick\">{}</text>",
            sx + 3.0,
            top + 12.0,
            esc(name)
        );
    }
    for i in 0..p.series.len() {
        series(&mut s, p, &f, idx, i);
    }
    s.push_str("</svg>\n<ul class=\"legend\">");
    for (i, ser) in p.series.iter().enumerate() {
        let _ = write!(
            s,
            "<li data-for=\"s{idx}-{i}\"><span class=\"sw\" style=\"background:{}\"></span>{}</li>",
            PALETTE[i % PALETTE.len()],
            esc(&ser.name)
        );
    }
    s.push_str("</ul>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(nice_ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(nice_ticks(0.0, 0.9, 4), vec![0.0, 0.2, 0.4, 0.6, 0.8]);
        let t = nice_ticks(-721.0, 300.0, 6);
        assert!(t.contains(&0.0) && t[0] < 0.0, "{t:?}");
        assert_eq!(tick_label(0.30000000000000004), "0.3");
        assert_eq!(tick_label(-200.0), "-200");
    }

    #[test]
    fn one_unit_per_plot_from_its_largest_value() {
        assert_eq!(Unit::Nanos.scale(14e6), (1e6, "ms".to_string()));
        assert_eq!(Unit::Bits.scale(9.4e9), (1e9, "Gbit/s".to_string()));
        assert_eq!(Unit::PerSecond("transactions").scale(23_000.0).1, "thousand transactions/s");
    }

    #[test]
    fn a_plot_draws_every_series_with_its_legend_and_hover_values() {
        let p = Plot::over_time(
            "throughput",
            "Throughput",
            Unit::Bits,
            Shape::Steps,
            vec![
                Series::new("total", vec![(0.0, 1.0, 9.4e9), (1.0, 2.0, 9.2e9)]).bold(),
                Series::new("stream <1>", vec![(0.0, 1.0, 4.7e9), (1.0, 2.0, 4.6e9)]),
            ],
        );
        let svg = render(&p, 3);
        assert!(svg.contains("Gbit/s") && svg.contains("stream &lt;1&gt;"));
        assert!(svg.contains("<title>total: 0–1 s: 9.40 Gbits/sec</title>"), "{svg}");
        assert_eq!(svg.matches("<li data-for=\"s3-").count(), 2);
    }
}
