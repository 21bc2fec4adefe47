//! `netblast run --find-max`: the search's steps run one after another against the target, each
//! a whole run at one rate, judged by `netblast_spec::find_max`; one result with every step.

use crate::cli::RunArgs;
use crate::out::{self, Sinks};
use crate::outcome::{AppError, Outcome};
use crate::status::print_stdout;
use netblast_engine::exec::worker::RunFlags;
use netblast_probe::Probe;
use netblast_spec::find_max::{self, Axis, Ending, FindMax, Search, Step};
use netblast_spec::profile::{parse_rate_range, Overrides, Workload};
use netblast_spec::units::{BitRate, BitRateArg};
use netblast_spec::RunResult;
use std::time::Duration;

/// A step's judged length when `-t` does not say.
const DEFAULT_STEP: Duration = Duration::from_secs(2);

/// What the flags ask a search of: the axis and its range, in the flag's own terms.
fn range(o: &Overrides) -> Result<(Axis, f64, f64), AppError> {
    let bad = |m: String| AppError::input(anyhow::anyhow!("--find-max: {m}"));
    let rate = o.shared.rate.as_deref().filter(|r| r.contains(".."));
    let bits = o.shared.bitrate.and_then(|b| b.to.map(|to| (b.from, to)));
    match (rate, bits) {
        (Some(_), Some(_)) => Err(bad("give one range to search: --rate LOW..HIGH or -b LOW..HIGH, not both".into())),
        (Some(r), None) => {
            let (a, b) = parse_rate_range(r).map_err(|e| bad(format!("--rate {r}: {e}")))?;
            Ok((Axis::Rate, a.per_second(), b.map(|b| b.per_second()).unwrap_or(0.0)))
        }
        (None, Some((a, b))) => Ok((Axis::Bitrate, a.bits_per_s(), b.bits_per_s())),
        (None, None) => Err(bad(
            "it searches a range: --rate LOW..HIGH (http, cps: per second in all) or -b LOW..HIGH (UDP and message \
             flows, paced TCP: bits per second per flow)"
                .into(),
        )),
    }
}

/// The flags of one step: the range replaced by the step's rate, the step's length.
fn step_overrides(o: &Overrides, axis: Axis, asked: f64, secs: f64) -> Overrides {
    let mut s = o.clone();
    match axis {
        Axis::Rate => s.shared.rate = Some(format!("{asked:.3}")),
        Axis::Bitrate => s.shared.bitrate = Some(BitRateArg::one(BitRate(asked))),
    }
    s.shared.duration = Some(netblast_spec::units::Dur(Duration::from_secs_f64(secs)));
    s
}

/// Operations per second a step at `asked` offers: what its thresholds' samples are counted in.
fn ops_per_s(w: &Workload, axis: Axis, asked: f64, flows: usize) -> f64 {
    let block = match w {
        Workload::Msgrate(m) => m.msg_bytes.bytes(),
        Workload::Bulk(b) => b.block_bytes.bytes(),
        _ => 0,
    };
    match axis {
        Axis::Rate => asked,
        Axis::Bitrate if block > 0 => asked * flows.max(1) as f64 / (8.0 * block as f64),
        Axis::Bitrate => asked,
    }
}

/// One step's line: `step 3  offered 400 /s  took 400 /s  p50 1.2 ms  p99 3.4 ms  held`.
fn step_line(axis: Axis, s: &Step) -> String {
    let ns = |v: Option<u64>| v.map(|v| netblast_spec::units::fmt_ns(v as f64)).unwrap_or_else(|| "-".into());
    let share = |v: Option<f64>| v.map(|v| format!("{:.2}%", v * 100.0)).unwrap_or_else(|| "-".into());
    format!(
        "step {:>2}{} offered {:>12}  took {:>12}  p50 {:>9}  p99 {:>9}  failed {:>6}  lost {:>6}  {}: {}\n",
        s.n,
        if s.repeat { "r" } else { " " },
        axis.fmt(s.offered),
        axis.fmt(s.achieved),
        ns(s.p50_ns),
        ns(s.p99_ns),
        share(s.failed),
        share(s.lost),
        match s.outcome {
            find_max::StepOutcome::Held => "held",
            find_max::StepOutcome::Failed => "FAILED",
            find_max::StepOutcome::Generator => "GENERATOR",
        },
        s.cause
    )
}

/// Runs the search `a` asks for, `resolution` its stopping width (0.05: 5%).
pub fn run(a: &RunArgs, resolution: f64) -> Result<Outcome, AppError> {
    let o = &a.test.overrides;
    let (axis, low, high) = range(o)?;
    if o.kinds.http.ramp.is_some() {
        return Err(AppError::input(anyhow::anyhow!("--find-max runs each step at one rate: --ramp does not apply")));
    }
    let search = Search::new(low, high, resolution).map_err(|e| AppError::input(anyhow::anyhow!("--find-max: {e}")))?;
    let token = crate::cli::load_token(a.token_file.as_deref())?;
    let sinks = Sinks { output: a.output.clone(), json: a.json, hlog: None, header: a.quiet && !a.json };
    sinks.check()?;
    let step_s = o.shared.duration.map(|d| d.get()).unwrap_or(DEFAULT_STEP).as_secs_f64();
    // The first step's plan checks every flag before anything is sent, and names the interval.
    let first = netblast_engine::run::resolve(crate::app::request(a, &step_overrides(o, axis, low, step_s))?)
        .map_err(AppError::client)?;
    let interval = first.plan.profile.run.interval().as_secs_f64().max(1e-3);
    // The warm-up: a whole number of intervals, at least one second.
    let warmup_s = (1.0 / interval).ceil() * interval;
    let probe =
        Probe::open_with(a.probe, a.probe_stats).map_err(|e| AppError::run(anyhow::anyhow!("--probe ebpf: {e}")))?;
    let flags = RunFlags::new();
    let sig = crate::signals::watch_signals(flags.clone());
    let mut s = Searching { a, axis, search, warmup_s, step_s, token, probe, flags, runs: Vec::new(), baseline: None };
    let human = !a.json && !a.quiet;
    if human {
        print_stdout(&format!(
            "find-max: {} {}..{} to {:.0}%, steps of {step_s:.0} s after a {warmup_s:.0} s warm-up, against {}\n",
            axis.flag(),
            axis.fmt(low),
            axis.fmt(high),
            resolution * 100.0,
            first.plan.aimed_at()
        ));
    }
    let failure = s.steps(human, &first.plan.profile.workload);
    if let Some(h) = sig {
        h.close();
    }
    let interrupted = s.flags.interrupted() || failure.is_some();
    let thresholds = match s.runs.first() {
        Some((r, _)) => netblast_spec::assert::with_defaults(&a.assert, r),
        None => a.assert.clone(),
    }
    .iter()
    .map(|x| x.text.clone())
    .collect();
    let mut answer = s.search.answer(interrupted, thresholds, warmup_s);
    (answer.axis, answer.unit) = (axis, axis.unit().to_string());
    let Some(mut result) = s.result_of(&answer) else {
        return Err(failure.unwrap_or_else(|| AppError::run(anyhow::anyhow!("--find-max: no step ran"))));
    };
    if let Some(e) = failure {
        eprintln!("netblast: {:#}", e.error);
    }
    result.label = a.test.label.clone();
    result.find_max = Some(Box::new(answer.clone()));
    let written = out::finish(&result, &sinks, "result")?;
    Ok(match answer.ending {
        Ending::Interrupted => Outcome::Incomplete,
        Ending::BottomFailed => Outcome::AssertFailed,
        _ => written,
    })
}

/// A search under way: what it runs with, and every step's run.
struct Searching<'a> {
    a: &'a RunArgs,
    axis: Axis,
    search: Search,
    warmup_s: f64,
    step_s: f64,
    token: Option<netblast_wire::auth::Token>,
    probe: Probe,
    flags: std::sync::Arc<RunFlags>,
    /// Each step's run, with the rate asked.
    runs: Vec<(RunResult, f64)>,
    /// The lowest step's median latency.
    baseline: Option<u64>,
}

impl Searching<'_> {
    /// Runs steps until the search ends or is stopped; the error that stopped it, if one did.
    fn steps(&mut self, human: bool, workload: &Workload) -> Option<AppError> {
        while let Some((asked, repeat)) = self.search.next() {
            if self.flags.interrupted() {
                return None;
            }
            // The flows a step runs are known once one ran (until then, one: a longer step).
            let flows = self.runs.last().map(|(r, _)| r.streams.len()).unwrap_or(1);
            let ops = ops_per_s(workload, self.axis, asked, flows);
            let secs = find_max::step_seconds(&self.a.assert, ops, self.step_s) + self.warmup_s;
            let r = match self.one(asked, secs) {
                Ok(r) => r,
                Err(e) => return Some(e),
            };
            if self.flags.interrupted() && !r.complete {
                return None;
            }
            let j = find_max::judge(&r, self.axis, asked, self.warmup_s, &self.a.assert, self.baseline);
            let mut step = j.step;
            step.repeat = repeat;
            if self.baseline.is_none() {
                self.baseline = step.p50_ns;
            }
            self.runs.push((r, asked));
            self.search.record(step);
            if human {
                if let Some(s) = self.search.steps().last() {
                    print_stdout(&step_line(self.axis, s));
                }
            }
        }
        None
    }

    /// One step's run at `asked`, `secs` long.
    fn one(&self, asked: f64, secs: f64) -> Result<RunResult, AppError> {
        let ov = step_overrides(&self.a.test.overrides, self.axis, asked, secs);
        let resolved = netblast_engine::run::resolve(crate::app::request(self.a, &ov)?).map_err(AppError::client)?;
        let opts = netblast_engine::exec::api::RunOptions { token: self.token.clone(), ..Default::default() };
        netblast_engine::run::run(&resolved.plan, resolved.peer, &self.probe, &self.flags, &opts, &mut |_| {})
            .map_err(AppError::client)
    }

    /// The result the search is written as: the last run of the answer's rate (else the last
    /// step's), its thresholds those judged on its window.
    fn result_of(&self, answer: &FindMax) -> Option<RunResult> {
        let steps = self.search.steps();
        let at = answer
            .rate
            .and_then(|rate| steps.iter().rposition(|s| s.offered == rate))
            .or_else(|| steps.len().checked_sub(1))?;
        let (r, _) = self.runs.get(at)?;
        let mut r = r.clone();
        r.asserts = steps[at].thresholds.clone();
        Some(r)
    }
}
