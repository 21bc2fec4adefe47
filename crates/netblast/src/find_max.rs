//! `netblast run --find-max`: the search's steps run one after another against the target, each
//! a whole run at one rate, judged by `netblast_spec::find_max`; one result with every step.

use crate::cli::RunArgs;
use crate::out::{self, Sinks};
use crate::outcome::{AppError, Outcome};
use crate::status::print_stdout;
use netblast_engine::exec::worker::RunFlags;
use netblast_probe::Probe;
use netblast_spec::find_max::{self, Axis, Ending, Search};
use netblast_spec::profile::{parse_rate_range, Overrides};
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
        Axis::Rate => s.shared.rate = Some(format!("{asked}")),
        Axis::Bitrate => s.shared.bitrate = Some(BitRateArg::one(BitRate(asked))),
    }
    s.shared.duration = Some(netblast_spec::units::Dur(Duration::from_secs_f64(secs)));
    s
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
    let first = netblast_engine::run::resolve(crate::cli::request(a, &step_overrides(o, axis, low, step_s))?)
        .map_err(AppError::client)?;
    let interval = first.plan.profile.run.interval().as_secs_f64().max(1e-3);
    // The warm-up: a whole number of intervals, at least one second.
    let warmup_s = (1.0 / interval).ceil() * interval;
    let probe =
        Probe::open_with(a.probe, a.probe_stats).map_err(|e| AppError::run(anyhow::anyhow!("--probe ebpf: {e}")))?;
    let flags = RunFlags::new();
    let sig = crate::signals::watch_signals(flags.clone());
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
    let steps =
        find_max::Steps { axis, warmup_s, step_s, assertions: &a.assert, workload: &first.plan.profile.workload };
    let mut search = search;
    let runner = Runner { a, axis, token, probe, flags: flags.clone() };
    let (runs, failure) =
        steps.drive(&mut search, &mut |asked, secs| runner.one(asked, secs), &|| flags.interrupted(), &mut |s| {
            if human {
                print_stdout(&format!("step {}\n", netblast_report::search::step_line(axis, s)));
            }
        });
    if let Some(h) = sig {
        h.close();
    }
    let interrupted = flags.interrupted() || failure.is_some();
    let Some(mut result) = steps.finish(&search, &runs, interrupted) else {
        return Err(failure.unwrap_or_else(|| AppError::run(anyhow::anyhow!("--find-max: no step ran"))));
    };
    if let Some(e) = failure {
        eprintln!("netblast: {:#}", e.error);
    }
    result.label = a.test.label.clone();
    let ending = result.find_max.as_ref().map(|f| f.ending);
    let written = out::finish(&result, &sinks, "result")?;
    Ok(match ending {
        Some(Ending::Interrupted) => Outcome::Incomplete,
        Some(Ending::BottomFailed) => Outcome::AssertFailed,
        _ => written,
    })
}

/// What runs a search's steps.
struct Runner<'a> {
    a: &'a RunArgs,
    axis: Axis,
    token: Option<netblast_wire::auth::Token>,
    probe: Probe,
    flags: std::sync::Arc<RunFlags>,
}

impl Runner<'_> {
    /// One step's run at `asked`, `secs` long.
    fn one(&self, asked: f64, secs: f64) -> Result<RunResult, AppError> {
        let ov = step_overrides(&self.a.test.overrides, self.axis, asked, secs);
        let resolved = netblast_engine::run::resolve(crate::cli::request(self.a, &ov)?).map_err(AppError::client)?;
        let opts = netblast_engine::exec::api::RunOptions { token: self.token.clone(), ..Default::default() };
        netblast_engine::run::run(&resolved.plan, resolved.peer, &self.probe, &self.flags, &opts, &mut |_| {})
            .map_err(AppError::client)
    }
}
