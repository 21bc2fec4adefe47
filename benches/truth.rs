//! The lines `cargo bench` prints, and the judge of truth checks: a measured value held
//! against an independent truth with a stated tolerance, `ok`, `FAIL` or `SKIP` (with why).
//!
//! Every line is also kept, so the run can end with a JSON file of all of them and an exit
//! status that is non-zero when any check failed (a speed figure never fails a run).

use std::sync::Mutex;

/// How far a measured value may be from its truth.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Tolerance {
    /// Within this fraction of the truth, either way (0.01: ±1%).
    Rel(f64),
    /// Within this absolute amount, either way.
    Abs(f64),
    /// Between truth + `lo` and truth + `hi` (absolute; `lo` may be negative).
    Range(f64, f64),
    /// Between truth × (1 + `lo`) and truth × (1 + `hi`).
    RelRange(f64, f64),
}

impl Tolerance {
    /// The interval of accepted values around `truth`.
    pub fn bounds(self, truth: f64) -> (f64, f64) {
        match self {
            Tolerance::Rel(f) => (truth - truth.abs() * f, truth + truth.abs() * f),
            Tolerance::Abs(a) => (truth - a, truth + a),
            Tolerance::Range(lo, hi) => (truth + lo, truth + hi),
            Tolerance::RelRange(lo, hi) => (truth + truth.abs() * lo, truth + truth.abs() * hi),
        }
    }

    fn describe(self) -> String {
        match self {
            Tolerance::Rel(f) => format!("±{}%", f * 100.0),
            Tolerance::Abs(a) => format!("±{a}"),
            Tolerance::Range(lo, hi) => format!("{lo:+}..{hi:+}"),
            // At most a tenth of a percent shown: -9.5%, not -9.523809523809534%.
            Tolerance::RelRange(lo, hi) => {
                let pct = |x: f64| format!("{:+.1}", x * 100.0).trim_end_matches(".0").to_string();
                format!("{}%..{}%", pct(lo), pct(hi))
            }
        }
    }
}

/// What a check concluded.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Within tolerance.
    Ok,
    /// Outside it.
    Fail,
    /// Not run here, and why.
    Skip(String),
}

/// One printed line.
#[derive(Debug, Clone, PartialEq)]
pub enum Line {
    /// A speed or cost figure.
    Figure {
        /// Dotted name (`bulk.1flow.gbps`).
        name: String,
        /// The value.
        value: f64,
        /// Its unit.
        unit: String,
        /// What it is.
        note: String,
    },
    /// A truth check.
    Check {
        /// Dotted name under `truth.`.
        name: String,
        /// What netblast measured (`None` when skipped).
        measured: Option<f64>,
        /// The independent truth it is held against.
        truth: Option<f64>,
        /// Its unit.
        unit: String,
        /// The tolerance, in words.
        tolerance: String,
        /// The verdict.
        outcome: Outcome,
        /// Where the truth comes from.
        note: String,
    },
}

static LINES: Mutex<Vec<Line>> = Mutex::new(Vec::new());

/// Prefixes the run was asked for (`cargo bench -- truth. http.`); empty: everything.
static FILTER: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Sets the name prefixes lines must match to be printed and kept.
pub fn set_filter(prefixes: Vec<String>) {
    *FILTER.lock().unwrap_or_else(|e| e.into_inner()) = prefixes;
}

/// Whether a line named `name` is wanted.
pub fn wanted(name: &str) -> bool {
    let f = FILTER.lock().unwrap_or_else(|e| e.into_inner());
    f.is_empty() || f.iter().any(|p| name.starts_with(p.as_str()))
}

/// Whether anything in section `section` (a name prefix such as `http` or `truth.loss`) can be
/// wanted: a filter that is a prefix of the section's names, or that names inside it.
pub fn section_wanted(section: &str) -> bool {
    let f = FILTER.lock().unwrap_or_else(|e| e.into_inner());
    f.is_empty() || f.iter().any(|p| section.starts_with(p.as_str()) || p.starts_with(section))
}

fn keep(line: Line) {
    LINES.lock().unwrap_or_else(|e| e.into_inner()).push(line);
}

/// Prints and keeps a figure.
pub fn figure(name: &str, value: f64, unit: &str, note: &str) {
    if !wanted(name) {
        return;
    }
    println!("{name:<40} {value:>12.3} {unit:<10} {note}");
    keep(Line::Figure { name: name.into(), value, unit: unit.into(), note: note.into() });
}

/// Judges `measured` against `truth` within `tol`.
pub fn judge(measured: f64, truth: f64, tol: Tolerance) -> Outcome {
    let (lo, hi) = tol.bounds(truth);
    if measured.is_finite() && measured >= lo && measured <= hi { Outcome::Ok } else { Outcome::Fail }
}

/// Judges, prints and keeps a truth check; returns whether it passed.
pub fn check(name: &str, measured: f64, truth: f64, unit: &str, tol: Tolerance, note: &str) -> bool {
    let outcome = judge(measured, truth, tol);
    let ok = outcome == Outcome::Ok;
    if !wanted(name) {
        return ok;
    }
    println!(
        "{name:<40} {measured:>12.4} {unit:<8} truth {truth:.4} {} {:<4} {note}",
        tol.describe(),
        if ok { "ok" } else { "FAIL" }
    );
    keep(Line::Check {
        name: name.into(),
        measured: Some(measured),
        truth: Some(truth),
        unit: unit.into(),
        tolerance: tol.describe(),
        outcome,
        note: note.into(),
    });
    ok
}

/// Prints and keeps a check that cannot run here, with why.
pub fn skip(name: &str, why: &str) {
    if !wanted(name) {
        return;
    }
    println!("{name:<40} SKIP {why}");
    keep(Line::Check {
        name: name.into(),
        measured: None,
        truth: None,
        unit: String::new(),
        tolerance: String::new(),
        outcome: Outcome::Skip(why.into()),
        note: String::new(),
    });
}

/// Every line kept so far.
pub fn lines() -> Vec<Line> {
    LINES.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// The run's exit status from its lines: 1 when any check failed, else 0.
pub fn exit_code(lines: &[Line]) -> i32 {
    i32::from(lines.iter().any(|l| matches!(l, Line::Check { outcome: Outcome::Fail, .. })))
}

fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn json_num(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v}"),
        _ => "null".into(),
    }
}

/// All lines as one JSON document (`{"lines": [...]}`), for tools.
pub fn to_json(lines: &[Line]) -> String {
    let items: Vec<String> = lines
        .iter()
        .map(|l| match l {
            Line::Figure { name, value, unit, note } => format!(
                "{{\"kind\":\"figure\",\"name\":{},\"value\":{},\"unit\":{},\"note\":{}}}",
                json_str(name),
                json_num(Some(*value)),
                json_str(unit),
                json_str(note)
            ),
            Line::Check { name, measured, truth, unit, tolerance, outcome, note } => {
                let (status, why) = match outcome {
                    Outcome::Ok => ("ok", String::new()),
                    Outcome::Fail => ("FAIL", String::new()),
                    Outcome::Skip(w) => ("SKIP", w.clone()),
                };
                format!(
                    "{{\"kind\":\"check\",\"name\":{},\"measured\":{},\"truth\":{},\"unit\":{},\"tolerance\":{},\"status\":{},\"why\":{},\"note\":{}}}",
                    json_str(name),
                    json_num(*measured),
                    json_num(*truth),
                    json_str(unit),
                    json_str(tolerance),
                    json_str(status),
                    json_str(&why),
                    json_str(note)
                )
            }
        })
        .collect();
    format!("{{\"lines\":[\n{}\n]}}\n", items.join(",\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_five_percent_off_its_truth_fails_and_the_run_exits_non_zero() {
        assert_eq!(judge(105.0, 100.0, Tolerance::Rel(0.01)), Outcome::Fail);
        assert_eq!(judge(100.5, 100.0, Tolerance::Rel(0.01)), Outcome::Ok);
        assert_eq!(judge(95.0, 100.0, Tolerance::Rel(0.03)), Outcome::Fail);
        assert_eq!(judge(f64::NAN, 100.0, Tolerance::Rel(0.5)), Outcome::Fail);
        // Never below a delay, at most 1 ms above it.
        assert_eq!(judge(9.9, 10.0, Tolerance::Range(0.0, 1.0)), Outcome::Fail);
        assert_eq!(judge(10.4, 10.0, Tolerance::Range(0.0, 1.0)), Outcome::Ok);
        assert_eq!(judge(1.07, 1.0, Tolerance::RelRange(0.0, 0.06)), Outcome::Fail);
        let fig = Line::Figure { name: "a".into(), value: 1.0, unit: "x".into(), note: String::new() };
        let line = |outcome| Line::Check {
            name: "truth.x".into(),
            measured: Some(105.0),
            truth: Some(100.0),
            unit: String::new(),
            tolerance: "±1%".into(),
            outcome,
            note: String::new(),
        };
        assert_eq!(exit_code(&[fig.clone(), line(Outcome::Ok), line(Outcome::Skip("not root".into()))]), 0);
        assert_eq!(exit_code(&[fig, line(Outcome::Ok), line(Outcome::Fail)]), 1);
        let j = to_json(&[line(Outcome::Fail)]);
        assert!(j.contains("\"status\":\"FAIL\"") && j.contains("\"measured\":105"), "{j}");
    }

    #[test]
    fn filters_select_by_name_prefix_and_sections_by_either_side() {
        set_filter(vec!["truth.".into(), "http.h1".into()]);
        assert!(wanted("truth.merge.exact") && wanted("http.h1.closed_loop_rps"));
        assert!(!wanted("http.h2c_4x16.closed_loop_rps") && !wanted("bulk.1flow.gbps"));
        assert!(section_wanted("truth") && section_wanted("http") && !section_wanted("bulk"));
        set_filter(Vec::new());
        assert!(wanted("anything") && section_wanted("bulk"));
    }
}
