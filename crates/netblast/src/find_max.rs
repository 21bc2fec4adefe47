//! `netblast run --find-max` and `netblast fleet --find-max`: the search's steps run one after
//! another, each a whole run (or a whole fleet) at one rate, judged by
//! `netblast_spec::find_max`; one result with every step, rewritten after each step so a search
//! cut short keeps what it measured.

use crate::cli::{FleetArgs, RunArgs};
use crate::out::{self, Sinks};
use crate::outcome::{AppError, Outcome};
use crate::status::{Status, print_stdout};
use netblast_engine::exec::worker::RunFlags;
use netblast_probe::Probe;
use netblast_spec::assert::Assertion;
use netblast_spec::find_max::{self, Axis, Ending, Search};
use netblast_spec::profile::{Overrides, parse_rate_range};
use netblast_spec::units::{BitRate, BitRateArg};
use netblast_spec::{Profile, RunResult};
use std::path::{Path, PathBuf};
use std::sync::Arc;
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

/// A search as the flags ask it, whatever runs its steps.
struct Ask<'a> {
    axis: Axis,
    low: f64,
    high: f64,
    resolution: f64,
    /// Each step's judged seconds, at the least.
    step_s: f64,
    assertions: &'a [Assertion],
    sinks: Sinks,
    label: Option<String>,
    human: bool,
}

impl<'a> Ask<'a> {
    /// The search `o` asks for, `resolution` its stopping width (0.05: 5%): refused before
    /// anything is sent when its flags cannot make one.
    fn new(o: &Overrides, resolution: f64, assertions: &'a [Assertion], sinks: Sinks) -> Result<Ask<'a>, AppError> {
        let (axis, low, high) = range(o)?;
        if o.kinds.http.ramp.is_some() {
            return Err(AppError::input(anyhow::anyhow!(
                "--find-max runs each step at one rate: --ramp does not apply"
            )));
        }
        Search::new(low, high, resolution).map_err(|e| AppError::input(anyhow::anyhow!("--find-max: {e}")))?;
        sinks.check()?;
        let step_s = o.shared.duration.map(|d| d.get()).unwrap_or(DEFAULT_STEP).as_secs_f64();
        Ok(Ask { axis, low, high, resolution, step_s, assertions, sinks, label: None, human: false })
    }

    /// Runs the search: each step `run(asked, seconds)`, until it ends or `flags` says it was
    /// interrupted. `profile` is the first step's (its interval and workload), `aimed` what the
    /// steps aim at, in words.
    fn search(
        &self,
        profile: &Profile,
        aimed: &str,
        flags: &RunFlags,
        run: &mut dyn FnMut(f64, f64) -> Result<RunResult, AppError>,
    ) -> Result<Outcome, AppError> {
        if let Some(why) = profile.workload.section().unsearchable() {
            return Err(AppError::input(anyhow::anyhow!(
                "--find-max cannot search a {} test: {why}",
                profile.kind().name()
            )));
        }
        let (axis, step_s) = (self.axis, self.step_s);
        let interval = profile.run.interval().as_secs_f64().max(1e-3);
        // The warm-up: a whole number of intervals, at least one second.
        let warmup_s = (1.0 / interval).ceil() * interval;
        if self.human {
            print_stdout(&format!(
                "find-max: {} {}..{} to {:.0}%, steps of {step_s:.0} s after a {warmup_s:.0} s warm-up, against {aimed}\n",
                axis.flag(),
                axis.fmt(self.low),
                axis.fmt(self.high),
                self.resolution * 100.0,
            ));
        }
        let steps =
            find_max::Steps { axis, warmup_s, step_s, assertions: self.assertions, workload: &profile.workload };
        let mut search = Search::new(self.low, self.high, self.resolution)
            .map_err(|e| AppError::input(anyhow::anyhow!("--find-max: {e}")))?;
        let mut kept: Option<std::io::Error> = None;
        let (runs, failure) = steps.drive(&mut search, run, &|| flags.interrupted(), &mut |search, runs| {
            if let Some(s) = search.steps().last().filter(|_| self.human) {
                print_stdout(&format!("step {}\n", netblast_report::search::step_line(axis, s)));
            }
            // The search so far, as it would be written were it to stop here.
            if let (Some(path), Some(mut r)) = (&self.sinks.output, steps.finish(search, runs, true)) {
                r.label = self.label.clone();
                if let Err(e) =
                    netblast_report::json::write_atomic(path, netblast_report::json::to_string(&r).as_bytes())
                {
                    kept.get_or_insert(e);
                }
            }
        });
        if let (Some(e), Some(path)) = (kept, &self.sinks.output) {
            eprintln!("netblast: warning: the search so far could not be kept in {}: {e}", path.display());
        }
        let interrupted = flags.interrupted() || failure.is_some();
        let Some(mut result) = steps.finish(&search, &runs, interrupted) else {
            return Err(failure.unwrap_or_else(|| AppError::run(anyhow::anyhow!("--find-max: no step ran"))));
        };
        if let Some(e) = failure {
            eprintln!("netblast: {:#}", e.error);
        }
        result.label = self.label.clone();
        let ending = result.find_max.as_ref().map(|f| f.ending);
        let written = out::finish(&result, &self.sinks, "result")?;
        Ok(match ending {
            Some(Ending::Interrupted) => Outcome::Incomplete,
            Some(Ending::BottomFailed) => Outcome::AssertFailed,
            _ => written,
        })
    }
}

/// `netblast run --find-max`: the search `a` asks for, `resolution` its stopping width.
pub fn run(a: &RunArgs, resolution: f64) -> Result<Outcome, AppError> {
    let o = &a.test.overrides;
    let sinks = Sinks {
        output: a.output.clone(),
        json: a.json,
        hlog: None,
        header: a.quiet && !a.json,
        compact: false,
        stream: false,
        server_output: false,
    };
    let mut ask = Ask::new(o, resolution, &a.assert, sinks)?;
    (ask.label, ask.human) = (a.test.label.clone(), !a.json && !a.quiet);
    let token = crate::cli::load_token(a.token_file.as_deref())?;
    // The first step's plan checks every flag before anything is sent, and names the interval.
    let first =
        netblast_engine::run::resolve(crate::cli::request(a, &step_overrides(o, ask.axis, ask.low, ask.step_s))?)
            .map_err(AppError::client)?;
    let probe =
        Probe::open_with(a.probe, a.probe_stats).map_err(|e| AppError::run(anyhow::anyhow!("--probe ebpf: {e}")))?;
    let flags = RunFlags::new();
    let sig = crate::signals::watch_signals(flags.clone());
    let opts = netblast_engine::exec::api::RunOptions { token, ..Default::default() };
    let outcome = ask.search(&first.plan.profile, &first.plan.aimed_at(), &flags, &mut |asked, secs| {
        let ov = step_overrides(o, ask.axis, asked, secs);
        let resolved = netblast_engine::run::resolve(crate::cli::request(a, &ov)?).map_err(AppError::client)?;
        // The step before aborted its workers as it ended.
        flags.rearm();
        netblast_engine::run::run(&resolved.plan, resolved.peer, &probe, &flags, &opts, &mut |_| {})
            .map_err(AppError::client)
    });
    if let Some(h) = sig {
        h.close();
    }
    outcome
}

/// `FILE.jsonl` as `FILE.step-N.jsonl`: where step `n` of a fleet's search logs its frames.
fn step_log(base: &Path, n: usize) -> PathBuf {
    let stem = base.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let ext = base.extension().map(|e| format!(".{}", e.to_string_lossy())).unwrap_or_default();
    base.with_file_name(format!("{stem}.step-{n}{ext}"))
}

/// `netblast fleet --find-max`: each step a whole fleet (every client agent at the step's
/// rate, as `fleet` runs the profile), judged on the fleet's merged figures; the rate a step
/// offered is the fleet's in all.
pub fn fleet(a: &FleetArgs, resolution: f64) -> Result<Outcome, AppError> {
    if a.metrics.is_some() {
        return Err(AppError::input(anyhow::anyhow!(
            "--find-max runs one fleet per step: --metrics serves one fleet's figures; scrape the steps' agents \
             (serve --metrics) instead"
        )));
    }
    let o = &a.test.overrides;
    let sinks = Sinks {
        output: a.output.clone(),
        json: a.json,
        hlog: None,
        header: a.quiet && !a.json,
        compact: a.compact,
        stream: false,
        server_output: false,
    };
    let mut ask = Ask::new(o, resolution, &a.assert, sinks)?;
    (ask.label, ask.human) = (a.test.label.clone(), !a.json && !a.quiet);
    if let Some(frames) = &a.frames {
        out::check_writable("--frames", frames)?;
    }
    // Every step's frames beside one base: --frames, -o's, or one named for this search.
    let base = a.frames.clone().unwrap_or_else(|| match &a.output {
        Some(o) => netblast_report::json::PartialLog::path_for_suffix(o, ".fleet.jsonl"),
        None => netblast_coord::default_log_path(netblast_engine::exec::clock::now_unix_ns() / 1_000_000_000),
    });
    let step_args = |asked: f64, secs: f64, n: usize| {
        let mut s = a.clone();
        s.test.overrides = step_overrides(o, ask.axis, asked, secs);
        s.frames = Some(step_log(&base, n));
        s
    };
    // The first step's settings check the profile, the token and the agents' list before
    // anything is sent.
    let (first, notes) = crate::fleet::config(&step_args(ask.low, ask.step_s, 1), false)?;
    if ask.human {
        // The first note names the first step's log: each step's is said here instead.
        for n in notes.iter().skip(1) {
            println!("{n}");
        }
        print_stdout(&format!(
            "netblast fleet: {}; each step's agents' frames logged to {}\n",
            first.profile.description,
            step_log(&base, 0).display().to_string().replace(".step-0", ".step-N")
        ));
    } else if !a.quiet && a.frames.is_none() && a.output.is_none() {
        eprintln!("netblast fleet: each step's frames logged to {}", step_log(&base, 0).display());
    }
    let flags = RunFlags::new();
    let sig = crate::signals::watch_signals(flags.clone());
    let aimed = format!(
        "the fleet's targets ({} pairing): every client test at the step's {}, the offered column the fleet's in all",
        a.pairing,
        ask.axis.flag()
    );
    let mut n = 0;
    let outcome = ask.search(&first.profile, &aimed, &flags, &mut |asked, secs| {
        n += 1;
        let s = step_args(asked, secs, n);
        let (cfg, _) = crate::fleet::config(&s, false)?;
        let mut status = Status::new(cfg.profile.time_bound(), false);
        let stop = stopped(flags.clone());
        crate::fleet::run_until(&s, cfg, false, &mut status, stop).map(|(r, _)| r)
    });
    if let Some(h) = sig {
        h.close();
    }
    outcome
}

/// Completes once `flags` says the search was interrupted (the signal watcher sets it).
pub(crate) async fn stopped(flags: Arc<RunFlags>) {
    while !flags.interrupted() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
