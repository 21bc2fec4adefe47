//! The search: which rate to run next, given the steps so far, and the answer they make.
//!
//! A geometric climb (×2 from the low end, the last step at the high end) to the first rate
//! that does not hold; bisection at the geometric midpoint of the highest rate that held and
//! the lowest that did not, until the second is within the resolution of the first; then the
//! highest that held is run again, and it is the answer only when both runs held (a repeat that
//! fails makes it the new upper bound and the search goes on below it). A rate that failed once
//! is not run again: one failure within a service level is a failure. A step the generator
//! could not offer ends the search.

use super::{Ending, FindMax, LimitedBy, Step, StepOutcome};

/// Most steps a search runs; past it the search ends with what it narrowed.
pub const MAX_STEPS: usize = 40;

/// A search over `[low, high]` in the flag's own terms.
#[derive(Debug, Clone)]
pub struct Search {
    low: f64,
    high: f64,
    resolution: f64,
    steps: Vec<Step>,
}

impl Search {
    /// A search of `low..=high` (0 < low < high) to `resolution` (e.g. 0.05).
    pub fn new(low: f64, high: f64, resolution: f64) -> Result<Search, String> {
        if !(low.is_finite() && high.is_finite() && low > 0.0) {
            return Err(format!("the range must be of rates above 0 (given {low}..{high})"));
        }
        if high <= low {
            return Err(format!("the range's high end ({high}) must be above its low end ({low})"));
        }
        if !(0.001..=1.0).contains(&resolution) {
            return Err(format!("the resolution must be 0.1% to 100% (given {})", resolution * 100.0));
        }
        Ok(Search { low, high, resolution, steps: Vec::new() })
    }

    /// The steps so far.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// Every run of `asked` held (and there was one).
    fn held(&self, asked: f64) -> bool {
        let mut runs = self.steps.iter().filter(|s| s.asked == asked).peekable();
        runs.peek().is_some() && runs.all(|s| s.outcome == StepOutcome::Held)
    }

    /// The highest rate every run of which held, below `below`.
    fn best_below(&self, below: f64) -> Option<f64> {
        self.steps.iter().map(|s| s.asked).filter(|&a| a < below && self.held(a)).reduce(f64::max)
    }

    /// The lowest rate a run of which failed on the target.
    fn lowest_failed(&self) -> Option<&Step> {
        self.steps.iter().filter(|s| s.outcome == StepOutcome::Failed).min_by(|a, b| a.asked.total_cmp(&b.asked))
    }

    fn generator(&self) -> Option<&Step> {
        self.steps.iter().find(|s| s.outcome == StepOutcome::Generator)
    }

    /// The highest rate that held and the lowest that failed, in the flag's terms.
    pub fn bracket(&self) -> (Option<f64>, Option<f64>) {
        let hi = self.lowest_failed().map(|s| s.asked);
        (self.best_below(hi.unwrap_or(f64::INFINITY)), hi)
    }

    /// The next rate to run and whether it is a repeat; `None`: the search is over.
    pub fn next(&self) -> Option<(f64, bool)> {
        if self.steps.len() >= MAX_STEPS || self.generator().is_some() {
            return None;
        }
        let Some(last) = self.steps.last() else { return Some((self.low, false)) };
        let (lo, hi) = self.bracket();
        let lo = match (lo, hi) {
            (None, _) => return None,
            // Climbing: double, the last step at the top.
            (Some(lo), None) if lo < self.high => return Some(((lo * 2.0).min(self.high), false)),
            (Some(lo), None) => lo,
            (Some(lo), Some(hi)) if hi > lo * (1.0 + self.resolution) => return Some((midpoint(lo, hi), false)),
            (Some(lo), Some(_)) => lo,
        };
        let runs = self.steps.iter().filter(|s| s.asked == lo).count();
        // The decisive rate is run twice; a repeat is never asked of the step just run twice.
        (runs < 2 && !(last.asked == lo && last.repeat)).then_some((lo, true))
    }

    /// Takes a judged step.
    pub fn record(&mut self, mut step: Step) {
        step.n = self.steps.len() as u32 + 1;
        self.steps.push(step);
    }

    /// The answer the steps make; `interrupted` when the search was stopped before it ended.
    pub fn answer(&self, interrupted: bool, thresholds: Vec<String>, warmup_s: f64) -> FindMax {
        let (lo, hi) = self.bracket();
        let offered = |asked: f64| self.steps.iter().find(|s| s.asked == asked).map(|s| s.offered);
        let failed = self.lowest_failed();
        let (ending, limited_by, at) = match (self.generator(), lo, failed) {
            _ if interrupted => (Ending::Interrupted, None, failed),
            (Some(g), _, _) => (Ending::Generator, Some(LimitedBy::Generator), Some(g)),
            (None, None, _) => (Ending::BottomFailed, Some(LimitedBy::Target), failed),
            (None, Some(_), None) => (Ending::TopHeld, None, None),
            (None, Some(_), Some(_)) => (Ending::Found, Some(LimitedBy::Target), failed),
        };
        FindMax {
            axis: super::Axis::Rate,
            unit: String::new(),
            range: [self.low, self.high],
            resolution: self.resolution,
            warmup_s,
            thresholds,
            steps: self.steps.clone(),
            ending,
            rate: lo.and_then(offered),
            limited_by,
            failed_at: at.map(|s| s.offered).or(hi.and_then(offered)),
            failing: at.map(Step::failing),
            cause: at.map(|s| s.cause.clone()),
        }
    }
}

/// The geometric midpoint of `lo` and `hi` to four significant digits (a rate a person can
/// read and type again: 1 987/s, not 1 986.972/s), kept strictly between them.
fn midpoint(lo: f64, hi: f64) -> f64 {
    let m = (lo * hi).sqrt();
    // Decimals kept: dividing by an exact power of ten gives the double nearest the decimal
    // (475.7, not 475.7000000000001).
    let decimals = 3 - m.log10().floor() as i32;
    let r = if decimals > 0 {
        let p = 10f64.powi(decimals);
        (m * p).round() / p
    } else {
        let p = 10f64.powi(-decimals);
        (m / p).round() * p
    };
    if r > lo && r < hi { r } else { m }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(asked: f64, outcome: StepOutcome, repeat: bool) -> Step {
        Step {
            n: 0,
            asked,
            offered: asked,
            sent: asked,
            achieved: asked,
            seconds: 2.0,
            operations: 0,
            p50_ns: None,
            p99_ns: None,
            failed: None,
            lost: None,
            thresholds: Vec::new(),
            outcome,
            cause: String::new(),
            repeat,
            test_id: String::new(),
        }
    }

    /// Runs a search against a target that holds up to `capacity`, with `flaky` rates failing
    /// once; the rates run in order.
    fn against(capacity: f64, low: f64, high: f64, flaky: &[f64]) -> (Vec<f64>, FindMax) {
        let mut s = Search::new(low, high, 0.05).unwrap();
        let mut ran = Vec::new();
        let mut flaked = Vec::new();
        while let Some((r, repeat)) = s.next() {
            ran.push(r);
            let flake = flaky.iter().any(|f| (f - r).abs() < 1e-9) && !flaked.contains(&r.to_bits());
            if flake {
                flaked.push(r.to_bits());
            }
            let ok = r <= capacity && !flake;
            s.record(step(r, if ok { StepOutcome::Held } else { StepOutcome::Failed }, repeat));
        }
        let a = s.answer(false, vec!["p99<=20ms".into()], 1.0);
        (ran, a)
    }

    #[test]
    fn climbs_bisects_and_confirms_within_the_resolution() {
        let (ran, a) = against(2000.0, 100.0, 50_000.0, &[]);
        assert_eq!(&ran[..6], &[100.0, 200.0, 400.0, 800.0, 1600.0, 3200.0]);
        assert_eq!(a.ending, Ending::Found);
        let r = a.rate.unwrap();
        assert!((2000.0 / 1.05..=2000.0).contains(&r), "{r}");
        let f = a.failed_at.unwrap();
        assert!(f > 2000.0 && f <= r * 1.05 + 1e-9, "{r} {f}");
        // The answer was run twice, both held.
        assert_eq!(ran.iter().filter(|&&x| x == r).count(), 2);
        assert!(ran.len() <= 12, "{ran:?}");
        assert_eq!(a.limited_by, Some(LimitedBy::Target));
    }

    #[test]
    fn a_repeat_that_fails_moves_the_answer_below_it() {
        // The first answer candidate fails its repeat: the search goes on below it.
        let (_, clean) = against(2000.0, 100.0, 50_000.0, &[]);
        let candidate = clean.rate.unwrap();
        let mut s = Search::new(100.0, 50_000.0, 0.05).unwrap();
        let mut failed_repeat = false;
        while let Some((r, repeat)) = s.next() {
            let ok = r <= 2000.0 && !(repeat && r == candidate && !failed_repeat);
            if repeat && r == candidate {
                failed_repeat = true;
            }
            s.record(step(r, if ok { StepOutcome::Held } else { StepOutcome::Failed }, repeat));
        }
        let a = s.answer(false, Vec::new(), 1.0);
        assert!(failed_repeat);
        assert!(a.rate.unwrap() < candidate, "{:?} {candidate}", a.rate);
        assert_eq!(a.failed_at, Some(candidate));
    }

    #[test]
    fn the_ends_of_the_range_are_said() {
        let (ran, a) = against(1e9, 100.0, 1000.0, &[]);
        assert_eq!(a.ending, Ending::TopHeld);
        assert_eq!(a.rate, Some(1000.0));
        assert_eq!(a.limited_by, None);
        assert_eq!(ran, vec![100.0, 200.0, 400.0, 800.0, 1000.0, 1000.0]);
        let (ran, a) = against(50.0, 100.0, 1000.0, &[]);
        assert_eq!(ran, vec![100.0]);
        assert_eq!((a.ending, a.rate), (Ending::BottomFailed, None));
        assert!(a.sentence().starts_with("does not hold even 100 /s"), "{}", a.sentence());
    }

    #[test]
    fn the_generator_ends_the_search_and_is_never_the_targets_capacity() {
        let mut s = Search::new(1000.0, 100_000.0, 0.05).unwrap();
        while let Some((r, repeat)) = s.next() {
            let o = if r < 10_000.0 { StepOutcome::Held } else { StepOutcome::Generator };
            s.record(step(r, o, repeat));
        }
        let a = s.answer(false, Vec::new(), 1.0);
        assert_eq!(a.ending, Ending::Generator);
        assert_eq!(a.limited_by, Some(LimitedBy::Generator));
        assert_eq!(a.rate, Some(8000.0));
        assert!(a.sentence().contains("the generator was the limit, not the target"), "{}", a.sentence());
    }

    #[test]
    fn a_failure_below_the_capacity_is_kept_conservatively() {
        // A rate that failed once is not run again: the answer stays below it.
        let (_, a) = against(2000.0, 100.0, 50_000.0, &[800.0]);
        assert!(a.rate.unwrap() < 800.0, "{:?}", a.rate);
        assert!(Search::new(0.0, 10.0, 0.05).is_err());
        assert_eq!(midpoint(1600.0, 3200.0), 2263.0);
        assert_eq!(midpoint(1.0, 1.1), 1.049);
        assert_eq!(midpoint(400.0, 565.7).to_string(), "475.7", "the decimal itself, not its neighbour");
        assert!(Search::new(10.0, 10.0, 0.05).is_err());
    }
}
