//! Baselines of `cargo bench`: every figure's median and spread over the repeats of a run,
//! saved under a name (`--save-baseline NAME`) and compared with later (`--baseline NAME`):
//! the change of each figure, flagged when it is beyond the noise both runs measured.

use crate::truth::Line;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One figure over the repeats of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stat {
    /// Median over the repeats.
    pub median: f64,
    /// Smallest value seen.
    pub min: f64,
    /// Largest value seen.
    pub max: f64,
    /// Repeats.
    pub n: usize,
    /// Unit.
    pub unit: String,
}

impl Stat {
    /// Half the range over the repeats: the noise this run measured.
    pub fn half_range(&self) -> f64 {
        (self.max - self.min) / 2.0
    }
}

/// Every figure of `lines` (repeats of one name together), by name.
pub fn stats(lines: &[Line]) -> BTreeMap<String, Stat> {
    let mut by: BTreeMap<String, (Vec<f64>, String)> = BTreeMap::new();
    for l in lines {
        if let Line::Figure { name, value, unit, .. } = l {
            let e = by.entry(name.clone()).or_insert_with(|| (Vec::new(), unit.clone()));
            e.0.push(*value);
        }
    }
    by.into_iter()
        .map(|(name, (mut v, unit))| {
            v.sort_by(f64::total_cmp);
            let n = v.len();
            let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
            (name, Stat { median, min: v[0], max: v[n - 1], n, unit })
        })
        .collect()
}

/// Where baseline `name` is kept.
pub fn path(target_dir: &Path, name: &str) -> PathBuf {
    target_dir.join("netblast-baselines").join(format!("{name}.json"))
}

/// Saves a baseline (atomically: a temporary file renamed over it).
pub fn save(file: &Path, figures: &BTreeMap<String, Stat>) -> Result<(), String> {
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(figures).map_err(|e| e.to_string())?;
    let tmp = file.with_extension("json.tmp");
    std::fs::write(&tmp, text).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, file).map_err(|e| format!("{}: {e}", file.display()))
}

/// Loads a baseline; the error names the file.
pub fn load(file: &Path) -> Result<BTreeMap<String, Stat>, String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("baseline {}: {e} (save one with --save-baseline NAME)", file.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("baseline {}: {e}", file.display()))
}

/// Whether a smaller value of this figure is the better one (times, costs, sizes, lags).
pub fn lower_is_better(name: &str, unit: &str) -> bool {
    matches!(unit, "us" | "ms" | "s" | "ns" | "MB" | "bytes" | "% core" | "% of a CPU")
        || ["cpu_per", "lag", "rss", "p99", "p50", "latency", "merge_us", "codec", "setup"]
            .iter()
            .any(|k| name.contains(k))
}

/// What a change amounts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Inside the noise the two runs measured.
    WithinNoise,
    /// Beyond the noise, for the better.
    Better,
    /// Beyond the noise, for the worse.
    Regression,
}

/// One figure against its baseline.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// Figure name.
    pub name: String,
    /// The baseline's.
    pub base: Stat,
    /// This run's.
    pub now: Stat,
    /// (now − base) / base, in %.
    pub pct: f64,
    /// Beyond the noise, and which way.
    pub verdict: Verdict,
}

/// Every figure present in both, with its change. A change is beyond the noise when the two
/// medians differ by more than both runs' half-ranges together, and by more than 1% (a
/// single-repeat run has no spread of its own).
pub fn compare(base: &BTreeMap<String, Stat>, now: &BTreeMap<String, Stat>) -> Vec<Change> {
    now.iter()
        .filter_map(|(name, n)| {
            let b = base.get(name)?;
            let diff = n.median - b.median;
            let pct = if b.median != 0.0 { diff / b.median.abs() * 100.0 } else { 0.0 };
            let noise = b.half_range() + n.half_range();
            let beyond = diff.abs() > noise && pct.abs() > 1.0;
            let worse = if lower_is_better(name, &n.unit) { diff > 0.0 } else { diff < 0.0 };
            let verdict = match (beyond, worse) {
                (false, _) => Verdict::WithinNoise,
                (true, true) => Verdict::Regression,
                (true, false) => Verdict::Better,
            };
            Some(Change { name: name.clone(), base: b.clone(), now: n.clone(), pct, verdict })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(name: &str, v: f64, unit: &str) -> Line {
        Line::Figure { name: name.into(), value: v, unit: unit.into(), note: String::new() }
    }

    #[test]
    fn medians_spreads_and_verdicts() {
        let base = stats(&[
            fig("bulk.gbps", 40.0, "Gbit/s"),
            fig("bulk.gbps", 44.0, "Gbit/s"),
            fig("bulk.gbps", 42.0, "Gbit/s"),
            fig("rr.rtt_p50_us", 10.0, "us"),
            fig("rr.rtt_p50_us", 10.2, "us"),
            fig("rr.rtt_p50_us", 10.1, "us"),
        ]);
        assert_eq!(base["bulk.gbps"], Stat { median: 42.0, min: 40.0, max: 44.0, n: 3, unit: "Gbit/s".into() });
        // Within the 2 Gbit/s half-range: noise. 10% slower latency: a regression. Faster: better.
        let now = stats(&[fig("bulk.gbps", 41.0, "Gbit/s"), fig("rr.rtt_p50_us", 11.0, "us")]);
        let c = compare(&base, &now);
        assert_eq!(c.len(), 2);
        let v = |n: &str| c.iter().find(|x| x.name == n).unwrap();
        assert_eq!(v("bulk.gbps").verdict, Verdict::WithinNoise);
        assert_eq!(v("rr.rtt_p50_us").verdict, Verdict::Regression);
        assert!((v("rr.rtt_p50_us").pct - 8.9108).abs() < 0.01, "{}", v("rr.rtt_p50_us").pct);
        let now = stats(&[fig("bulk.gbps", 30.0, "Gbit/s"), fig("rr.rtt_p50_us", 8.0, "us")]);
        let c = compare(&base, &now);
        assert_eq!(c.iter().find(|x| x.name == "bulk.gbps").unwrap().verdict, Verdict::Regression);
        assert_eq!(c.iter().find(|x| x.name == "rr.rtt_p50_us").unwrap().verdict, Verdict::Better);
        // Saved and loaded unchanged.
        let file = std::env::temp_dir().join(format!("nb-baseline-{}.json", std::process::id()));
        save(&file, &base).unwrap();
        assert_eq!(load(&file).unwrap(), base);
        let _ = std::fs::remove_file(&file);
        assert!(load(Path::new("/nonexistent/x.json")).unwrap_err().contains("--save-baseline"));
    }
}
