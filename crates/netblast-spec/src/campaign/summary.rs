//! A campaign's summary: per cell the spread of each headline figure over its runs (median,
//! the mean's 95% Student-t interval, min, max, run-to-run spread), its runs' verdicts and
//! the causes that limited them; along each axis every value against the axis's first with
//! the change's interval (Welch); with a baseline campaign, every cell against the baseline's
//! cell of the same settings. A pure function of the campaign and its runs' results, so a
//! summary made again from the same files is the same summary.

use super::{Axis, Campaign, Cell, Order, RunId, Scalar};
use crate::assert::{FigureUnit, headline};
use crate::result::RunResult;
use crate::stats::{Change, Spread};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The summary's schema name.
pub const SCHEMA: &str = "netblast.campaign/1";

/// How the intervals are made, as the summary says it.
pub const METHOD: &str = "95% confidence interval of the mean, Student's t over the cell's runs (n - 1 degrees of \
                          freedom), its lower end cut at 0; a change: Welch's t on the difference of the means, as a \
                          share of the base's mean, a difference when its interval leaves out 0 and is not wholly \
                          inside the noise band";

/// How one run of a campaign ended.
#[derive(Debug, Clone)]
pub enum RunOutcome {
    /// It ran and wrote a whole result: what the summary keeps of it.
    Done(Digest),
    /// It failed: why, as the run said it.
    Failed(String),
}

/// What a summary keeps of one run's result: its figures, the causes that limited it and its
/// assertions' verdicts (a campaign of many runs holds these, not the results).
#[derive(Debug, Clone)]
pub struct Digest {
    /// [`figures`].
    pub figures: Vec<(FigureInfo, f64)>,
    /// What limited it, each cause short enough to group cells by (the report words them:
    /// `netblast_report::verdict::causes`).
    pub causes: Vec<String>,
    /// Each assertion's text and whether it held.
    pub asserts: Vec<(String, bool)>,
    /// The test's kind (`bulk`, `rr`, `cps`…).
    pub kind: String,
}

impl Digest {
    /// The digest of a whole result, with what limited it (`causes`).
    pub fn of(r: &RunResult, causes: Vec<String>) -> Digest {
        Digest {
            figures: figures(r),
            causes,
            asserts: r.asserts.iter().map(|v| (v.text.clone(), v.pass)).collect(),
            kind: r.plan.profile.kind().name().to_string(),
        }
    }
}

/// A campaign's summary (`summary.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// [`SCHEMA`].
    pub schema: String,
    /// Runs per cell asked.
    pub repeats: u32,
    /// The runs' order.
    pub order: Order,
    /// The matrix's axes.
    pub axes: Vec<Axis>,
    /// How many runs: planned, done, failed, not yet run.
    pub runs: RunCounts,
    /// How the intervals are made ([`METHOD`]).
    pub method: String,
    /// The noise band a change must leave (0.01: ±1%).
    pub noise: f64,
    /// The figures the cells hold, in the report's order, each with its words and unit.
    pub figures: Vec<FigureInfo>,
    /// Every cell, in the matrix's order.
    pub cells: Vec<CellSummary>,
    /// Along each axis, each value against the axis's first value, the other settings equal.
    pub comparisons: Vec<Comparison>,
    /// The campaign every cell was compared with (`--baseline DIR`), when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
}

/// Counts of a campaign's runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunCounts {
    /// Cells × repeats.
    pub planned: usize,
    /// Runs with a whole result.
    pub done: usize,
    /// Runs that failed (counted in no figure).
    pub failed: usize,
    /// Runs not made yet.
    pub missing: usize,
}

/// A figure of the summary: its name in the assertion grammar, words and unit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FigureInfo {
    /// `throughput`, `p99`, `cpu.ns_per_op`…
    pub name: String,
    /// In words, for the campaign's kind.
    pub label: String,
    /// What its values count.
    pub unit: FigureUnit,
    /// Whether more is better.
    pub higher_is_better: bool,
}

/// One cell over its runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellSummary {
    /// `c001`.
    pub id: String,
    /// `flows=2 block=64K`.
    pub name: String,
    /// Each axis's value.
    pub settings: BTreeMap<String, Scalar>,
    /// Runs with a whole result: what every figure is over.
    pub n: usize,
    /// Runs that failed.
    pub failed: usize,
    /// Every run failed: a failed cell, not a hole in the table.
    pub all_failed: bool,
    /// Why runs failed (each reason once, the first few).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    /// Each figure's spread over the runs, by name.
    pub figures: BTreeMap<String, Spread>,
    /// The kind its runs tested (`bulk`, `rr`, `cps`…; none when no run ended whole): cells
    /// of different kinds are not compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Its headline figure (the kind's first: `throughput`, `msgs`…): what a comparison leads
    /// with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub main: Option<String>,
    /// A figure whose words here differ from the summary's figure of that name (a campaign of
    /// several kinds: `msgs` are transactions in one cell, connections in another): its words.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Runs whose `--assert`s all held, and those where one failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asserts: Option<AssertCounts>,
    /// What limited the runs, each cause with how many runs it held.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<Cause>,
    /// With a baseline: each figure's change from the baseline's cell of the same settings.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub vs_baseline: BTreeMap<String, Change>,
    /// The runs' result files, in `runs/`.
    pub files: Vec<String>,
}

/// How a cell's runs fared against their assertions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssertCounts {
    /// Runs where every assertion held.
    pub passed: usize,
    /// Runs where one failed.
    pub failed: usize,
    /// The assertions that failed in some run, each once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failing: Vec<String>,
}

/// A cause that limited some of a cell's runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cause {
    /// In words: a TCP way's limit (`up: receiver window`), a saturated CPU (`CPU bound on the
    /// client`), or the head of a kind's verdict.
    pub cause: String,
    /// Runs it held.
    pub runs: usize,
}

/// One value of an axis against the axis's first value, every other setting the same.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The axis.
    pub axis: String,
    /// The base cell (the axis's first value).
    pub base: String,
    /// The cell compared with it.
    pub cell: String,
    /// Each figure both cells hold with two runs or more: the change and its interval.
    pub changes: BTreeMap<String, Change>,
}

/// The figures a campaign keeps of one run: the headline figures `report --compare` shows,
/// and its client CPU per unit of work.
pub fn figures(r: &RunResult) -> Vec<(FigureInfo, f64)> {
    let heads = headline(r);
    let main = heads.first().map(|f| f.value);
    // One way's throughput is the throughput: named once.
    let one_way = r.summary.ways.len() < 2;
    let mut v: Vec<(FigureInfo, f64)> = heads
        .into_iter()
        .filter(|f| !(one_way && f.name.starts_with("throughput.")))
        .filter_map(|f| {
            let unit = FigureUnit::of(f.name)?;
            Some((
                FigureInfo { name: f.name.into(), label: f.label, unit, higher_is_better: f.higher_is_better },
                f.value,
            ))
        })
        .collect();
    let cpu = &r.summary.cpu;
    if r.plan.profile.workload.section().headline_bits() {
        if cpu.client.cpu_s() > 0.0 {
            let info = FigureInfo {
                name: "cpu.bits_per_core".into(),
                label: "bits moved per client CPU-second".into(),
                unit: FigureUnit::BitsPerSecond,
                higher_is_better: true,
            };
            v.push((info, cpu.bits_per_client_cpu_s));
        }
    } else if let Some(rate) = main.filter(|m| *m > 0.0) {
        let ops = rate * r.summary.duration_s;
        if ops > 0.0 && cpu.client.cpu_s() > 0.0 {
            let info = FigureInfo {
                name: "cpu.ns_per_op".into(),
                label: format!("client CPU per operation ({})", r.plan.profile.kind().unit()),
                unit: FigureUnit::Nanoseconds,
                higher_is_better: false,
            };
            v.push((info, cpu.client.cpu_s() * 1e9 / ops));
        }
    }
    v
}

/// The summary of `c`'s runs: `runs` holds each run that was made.
pub fn summarize(c: &Campaign, runs: &BTreeMap<RunId, RunOutcome>) -> Summary {
    let cells = c.cells();
    let mut infos: Vec<FigureInfo> = Vec::new();
    let mut out = Vec::with_capacity(cells.len());
    let mut counts = RunCounts { planned: cells.len() * c.repeats as usize, ..Default::default() };
    for cell in &cells {
        let mine: Vec<(&RunId, &RunOutcome)> = runs.iter().filter(|(id, _)| id.cell == cell.index).collect();
        let s = cell_summary(cell, &mine, &mut infos);
        counts.done += s.n;
        counts.failed += s.failed;
        out.push(s);
    }
    counts.missing = counts.planned.saturating_sub(counts.done + counts.failed);
    let comparisons = compare_along_axes(&c.axes, &cells, &out, c.noise);
    // The report's order: the headline's, then the CPU figure.
    Summary {
        schema: SCHEMA.into(),
        repeats: c.repeats,
        order: c.order,
        axes: c.axes.clone(),
        runs: counts,
        method: METHOD.into(),
        noise: c.noise,
        figures: infos,
        cells: out,
        comparisons,
        baseline: None,
    }
}

/// One cell's runs summed up; figures seen for the first time join `infos`.
fn cell_summary(cell: &Cell, runs: &[(&RunId, &RunOutcome)], infos: &mut Vec<FigureInfo>) -> CellSummary {
    let mut samples: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let (mut n, mut failed, mut errors) = (0, 0, Vec::<String>::new());
    let mut asserts: Option<AssertCounts> = None;
    let mut causes_seen: Vec<Cause> = Vec::new();
    let mut files = Vec::new();
    let (mut kind, mut main, mut labels) = (None, None, BTreeMap::new());
    for (id, outcome) in runs {
        match outcome {
            RunOutcome::Failed(why) => {
                failed += 1;
                if errors.len() < 5 && !errors.contains(why) {
                    errors.push(why.clone());
                }
            }
            RunOutcome::Done(r) => {
                n += 1;
                files.push(format!("{}-r{}.json", cell.id, id.repeat));
                kind.get_or_insert_with(|| r.kind.clone());
                main = main.or_else(|| r.figures.first().map(|(f, _)| f.name.clone()));
                for (info, value) in r.figures.iter().cloned() {
                    match infos.iter().find(|i| i.name == info.name) {
                        None => infos.push(info.clone()),
                        Some(first) if first.label != info.label => {
                            if !infos.iter().any(|i| i.name == info.name && i.label == info.label) {
                                infos.push(info.clone());
                            }
                            labels.insert(info.name.clone(), info.label.clone());
                        }
                        Some(_) => {}
                    }
                    samples.entry(info.name).or_default().push(value);
                }
                if !r.asserts.is_empty() {
                    let a = asserts.get_or_insert(AssertCounts { passed: 0, failed: 0, failing: Vec::new() });
                    let bad: Vec<&str> = r.asserts.iter().filter(|(_, pass)| !pass).map(|(t, _)| t.as_str()).collect();
                    if bad.is_empty() {
                        a.passed += 1;
                    } else {
                        a.failed += 1;
                    }
                    for b in bad {
                        if !a.failing.iter().any(|f| f == b) {
                            a.failing.push(b.to_string());
                        }
                    }
                }
                for cause in r.causes.iter().cloned() {
                    match causes_seen.iter_mut().find(|c| c.cause == cause) {
                        Some(c) => c.runs += 1,
                        None => causes_seen.push(Cause { cause, runs: 1 }),
                    }
                }
            }
        }
    }
    // The most frequent first; ties in the order they were seen.
    causes_seen.sort_by_key(|c| std::cmp::Reverse(c.runs));
    CellSummary {
        id: cell.id.clone(),
        name: cell.name(),
        settings: cell.settings.iter().cloned().collect(),
        n,
        failed,
        all_failed: n == 0 && failed > 0,
        errors,
        figures: samples
            .into_iter()
            .filter_map(|(k, v)| Spread::of(&v).map(|s| (k.clone(), if signed(&k) { s } else { at_least_zero(s) })))
            .collect(),
        kind,
        main,
        labels,
        asserts,
        causes: causes_seen,
        vs_baseline: BTreeMap::new(),
        files,
    }
}

/// Whether a figure can be below 0: the latency a load added (`added.*`: loaded − idle, the
/// loaded phase may be the faster). Every other is a rate, latency, count or share.
fn signed(name: &str) -> bool {
    name.starts_with("added.")
}

/// No figure a run gives is below 0 but the [`signed`] ones: an interval of the mean that
/// reaches below it is cut at 0.
fn at_least_zero(mut s: Spread) -> Spread {
    s.ci_low = s.ci_low.map(|l| l.max(0.0));
    s
}

/// Along each axis of two values or more: every cell whose value is not the axis's first,
/// against the cell of the first value with every other setting the same.
fn compare_along_axes(axes: &[Axis], cells: &[Cell], sums: &[CellSummary], noise: f64) -> Vec<Comparison> {
    let mut v = Vec::new();
    for axis in axes.iter().filter(|a| a.values.len() > 1) {
        let first = &axis.values[0];
        for (cell, sum) in cells.iter().zip(sums) {
            if cell.get(&axis.name) == Some(first) {
                continue;
            }
            let base = cells.iter().zip(sums).find(|(b, _)| {
                b.settings.iter().all(|(k, val)| if *k == axis.name { val == first } else { cell.get(k) == Some(val) })
            });
            let Some((b, bsum)) = base else { continue };
            // A rate of transactions is no baseline for one of connections.
            if bsum.kind.is_some() && sum.kind.is_some() && bsum.kind != sum.kind {
                continue;
            }
            v.push(Comparison {
                axis: axis.name.clone(),
                base: b.id.clone(),
                cell: cell.id.clone(),
                changes: changes(bsum, sum, noise),
            });
        }
    }
    v
}

/// Each figure both cells hold (two runs or more each): its change from `base` to `other`,
/// judged against the noise band.
pub fn changes(base: &CellSummary, other: &CellSummary, noise: f64) -> BTreeMap<String, Change> {
    other
        .figures
        .iter()
        .filter_map(|(name, s)| {
            let mut c = Change::between(base.figures.get(name)?, s)?;
            // A figure that is never negative falls by no more than all of it.
            if !signed(name) {
                c.ci_low = c.ci_low.max(-1.0);
            }
            Some((name.clone(), c.beyond(noise)))
        })
        .collect()
}

impl Summary {
    /// Compares every cell with `base`'s cell of the same settings (an earlier campaign over
    /// the same axes, `name` its directory); the number of cells that found theirs.
    pub fn against(&mut self, base: &Summary, name: &str) -> usize {
        self.baseline = Some(name.into());
        let mut matched = 0;
        for cell in &mut self.cells {
            if let Some(b) = base.cells.iter().find(|b| b.settings == cell.settings) {
                cell.vs_baseline = changes(b, cell, self.noise);
                matched += 1;
            }
        }
        matched
    }

    /// A figure's words and unit.
    pub fn figure(&self, name: &str) -> Option<&FigureInfo> {
        self.figures.iter().find(|f| f.name == name)
    }

    /// `c`'s spread of figure `f`, when it holds that figure in those words (in a campaign of
    /// several kinds one name can mean transactions in one cell, connections in another).
    pub fn spread<'a>(&self, c: &'a CellSummary, f: &FigureInfo) -> Option<&'a Spread> {
        let first = self.figure(&f.name).map(|i| &i.label);
        let words = c.labels.get(&f.name).or(first);
        c.figures.get(&f.name).filter(|_| words == Some(&f.label))
    }

    /// The cell with this id.
    pub fn cell(&self, id: &str) -> Option<&CellSummary> {
        self.cells.iter().find(|c| c.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::campaign::Campaign;

    /// A real bulk result (the report's stored one) whose receiver read `bits_per_s`.
    fn result(bits_per_s: f64) -> RunResult {
        let text = include_str!("../../../netblast-report/testdata/real/bulk.json");
        let mut r = crate::upgrade::read_result(text).unwrap();
        r.summary.ways.truncate(1);
        for w in &mut r.summary.ways {
            w.sender.bits_per_s = bits_per_s;
            if let Some(rx) = w.receiver.as_mut() {
                rx.bits_per_s = bits_per_s;
            }
        }
        r
    }

    #[test]
    fn cells_compare_along_their_axes_and_failed_cells_are_named() {
        let c = Campaign::parse("repeats = 3\n[axes]\nblock = [\"64K\", \"1M\"]\nflows = [1, 2]\n", "c").unwrap();
        let mut runs = BTreeMap::new();
        // c001 block=64K flows=1 at 100, 101, 99; c003 block=1M flows=1 at 110, 111, 109; c002
        // at 100 twice; c004 failed every time.
        for (rep, v) in [(1, 100.0), (2, 101.0), (3, 99.0)] {
            runs.insert(RunId { cell: 1, repeat: rep }, RunOutcome::Done(Digest::of(&result(v * 1e6), Vec::new())));
            runs.insert(
                RunId { cell: 3, repeat: rep },
                RunOutcome::Done(Digest::of(&result((v + 10.0) * 1e6), Vec::new())),
            );
            runs.insert(RunId { cell: 4, repeat: rep }, RunOutcome::Failed("connection refused".into()));
        }
        runs.insert(RunId { cell: 2, repeat: 1 }, RunOutcome::Done(Digest::of(&result(100e6), Vec::new())));
        runs.insert(RunId { cell: 2, repeat: 2 }, RunOutcome::Done(Digest::of(&result(100e6), Vec::new())));
        let s = summarize(&c, &runs);
        assert_eq!(s.runs, RunCounts { planned: 12, done: 8, failed: 3, missing: 1 });
        let c1 = s.cell("c001").unwrap();
        let t = &c1.figures["throughput"];
        assert_eq!((c1.n, t.n, t.median, t.min, t.max), (3, 3, 100e6, 99e6, 101e6));
        assert!(t.ci_low.unwrap() < 100e6 && t.ci_high.unwrap() > 100e6);
        let c4 = s.cell("c004").unwrap();
        assert!(c4.all_failed && c4.figures.is_empty() && c4.errors == ["connection refused"]);
        // block=1M against block=64K at flows=1: +10%, a difference; flows=2 against flows=1 at
        // 64K: the same rate, not one.
        let by = |cell: &str| s.comparisons.iter().find(|x| x.cell == cell).unwrap();
        let block = &by("c003").changes["throughput"];
        assert_eq!(by("c003").base, "c001");
        assert!(block.differs && (block.change - 0.10).abs() < 1e-9, "{block}");
        let flows = &by("c002").changes["throughput"];
        assert!(!flows.differs, "{flows}");
        assert!(s.figure("throughput").is_some_and(|f| f.unit == FigureUnit::BitsPerSecond));
        // Against itself as a baseline: every cell found, nothing differs.
        let mut again = s.clone();
        assert_eq!(again.against(&s, "base"), 4);
        assert!(again.cells.iter().flat_map(|c| c.vs_baseline.values()).all(|ch| !ch.differs));
        let json = serde_json::to_string(&s).unwrap();
        // Read back exactly (serde_json's float_roundtrip): a baseline is the summary written.
        assert_eq!(serde_json::from_str::<Summary>(&json).unwrap(), s);
    }
}
