//! A search driven to its end: each step's length chosen, its run asked of the caller (who has
//! the runtime: `netblast run`, the self-check), judged and recorded; the result the search is
//! written as.

use super::{Axis, Ending, FindMax, Search, judge, step_seconds};
use crate::assert::Assertion;
use crate::profile::Workload;
use crate::result::RunResult;

/// What every step of a search shares.
#[derive(Debug, Clone)]
pub struct Steps<'a> {
    /// What is varied.
    pub axis: Axis,
    /// Seconds left out at each step's start.
    pub warmup_s: f64,
    /// Each step's judged seconds, at the least.
    pub step_s: f64,
    /// The thresholds.
    pub assertions: &'a [Assertion],
    /// The workload searched (what a step's operations are).
    pub workload: &'a Workload,
}

impl Steps<'_> {
    /// Operations per second a step at `asked` offers over `flows` flows: what its thresholds'
    /// samples are counted in (datagrams or messages of the block size for `-b`).
    pub fn ops_per_s(&self, asked: f64, flows: usize) -> f64 {
        let block = self.workload.section().op_bytes().unwrap_or(0);
        match self.axis {
            Axis::Bitrate if block > 0 => asked * flows.max(1) as f64 / (8.0 * block as f64),
            _ => asked,
        }
    }

    /// Runs `search` to its end: each step `run(asked, seconds)` (the step's whole length, its
    /// warm-up in it), judged and recorded, then `each` called with the search and its runs so
    /// far (its last step the one just run); until the search ends or `stop` says so. Every
    /// run, and the error that ended the search early, if one did.
    pub fn drive<E>(
        &self,
        search: &mut Search,
        run: &mut dyn FnMut(f64, f64) -> Result<RunResult, E>,
        stop: &dyn Fn() -> bool,
        each: &mut dyn FnMut(&Search, &[RunResult]),
    ) -> (Vec<RunResult>, Option<E>) {
        let mut runs: Vec<RunResult> = Vec::new();
        let mut baseline = None;
        while let Some((asked, repeat)) = search.next() {
            if stop() {
                break;
            }
            // The flows a step runs are known once one ran (until then, one: a longer step).
            let flows = runs.last().map(|r| r.streams.len()).unwrap_or(1);
            let secs = step_seconds(self.assertions, self.ops_per_s(asked, flows), self.step_s) + self.warmup_s;
            let r = match run(asked, secs) {
                Ok(r) => r,
                Err(e) => return (runs, Some(e)),
            };
            if stop() && !r.complete {
                break;
            }
            let mut step = judge(&r, self.axis, asked, self.warmup_s, self.assertions, baseline).step;
            step.repeat = repeat;
            baseline = baseline.or(step.p50_ns);
            runs.push(r);
            search.record(step);
            each(search, &runs);
        }
        (runs, None)
    }

    /// The search's answer, and the result it is written as: the last run of the answer's
    /// rate (else the last step's), its thresholds those judged on its window, `find_max` in it.
    pub fn finish(&self, search: &Search, runs: &[RunResult], interrupted: bool) -> Option<RunResult> {
        let thresholds = match runs.first() {
            Some(r) => crate::assert::with_defaults(self.assertions, r),
            None => self.assertions.to_vec(),
        };
        let mut answer: FindMax =
            search.answer(interrupted, thresholds.iter().map(|a| a.text.clone()).collect(), self.warmup_s);
        (answer.axis, answer.unit) = (self.axis, self.axis.unit().to_string());
        let steps = search.steps();
        let at = answer
            .rate
            .and_then(|rate| steps.iter().rposition(|s| s.offered == rate))
            .or_else(|| steps.len().checked_sub(1))?;
        let mut r = runs.get(at)?.clone();
        r.asserts = steps[at].thresholds.clone();
        r.find_max = Some(Box::new(answer));
        Some(r)
    }
}

/// Whether a search's answer fails its command: even the lowest rate did not hold.
pub fn bottom_failed(r: &RunResult) -> bool {
    r.find_max.as_ref().is_some_and(|f| f.ending == Ending::BottomFailed)
}
