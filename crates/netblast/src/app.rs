//! The subcommands: flags into the library's requests, the library's outcome into an exit code.

use crate::cli::{Cli, Command, FleetArgs, MergeArgs, ReportArgs, RunArgs, ServeArgs};
use crate::out::{self, Sinks};
pub use crate::outcome::{AppError, Outcome};
use crate::status::{Status, print_stdout};
use anyhow::Context;
use netblast_engine::exec::worker::RunFlags;
use netblast_probe::Probe;
use netblast_report::{json, text};
use netblast_spec::Profile;
use std::path::Path;

/// Runs a parsed command line.
pub fn dispatch(cli: Cli) -> Result<Outcome, AppError> {
    match cli.command {
        Command::Serve(a) => serve(a),
        Command::Run(a) => run(&a),
        Command::Profiles => {
            let list = Profile::builtins();
            let width = list.iter().map(|p| p.name.len()).max().unwrap_or(0);
            print_stdout(&list.iter().map(|p| format!("{:width$}  {}\n", p.name, p.description)).collect::<String>());
            Ok(Outcome::Complete)
        }
        Command::Report(a) => report(&a),
        Command::Merge(a) => merge(&a),
        Command::Fleet(a) => fleet(&a),
        Command::Campaign(a) => crate::campaign::run(&a),
        Command::Doctor => {
            print_stdout(&netblast_engine::os::doctor::doctor());
            Ok(Outcome::Complete)
        }
    }
}

fn run(a: &RunArgs) -> Result<Outcome, AppError> {
    if let Some(resolution) = a.find_max {
        return crate::find_max::run(a, resolution);
    }
    let token = crate::cli::load_token(a.token_file.as_deref())?;
    crate::status::set_output(a.logfile.as_deref(), a.timestamps.as_deref())
        .map_err(|e| AppError::input(anyhow::anyhow!(e)))?;
    let sinks = Sinks {
        output: a.output.clone(),
        json: a.json,
        hlog: a.hlog.clone(),
        header: a.quiet && !a.json && !a.json_stream,
        compact: false,
        stream: a.json_stream,
        server_output: a.get_server_output,
    };
    sinks.check()?;
    let resolved =
        netblast_engine::run::resolve(crate::cli::request(a, &a.test.overrides)?).map_err(AppError::client)?;
    let human = !a.json && !a.quiet && !a.json_stream;
    // A person reading the live header sees them there, among the plan's notes: once.
    for w in resolved.warnings.iter().filter(|_| !human) {
        eprintln!("netblast: warning: {w}");
    }
    let plan = resolved.plan;
    let probe =
        Probe::open_with(a.probe, a.probe_stats).map_err(|e| AppError::run(anyhow::anyhow!("--probe ebpf: {e}")))?;
    let flags = RunFlags::new();
    let sig = crate::signals::watch_signals(flags.clone());
    let mut live =
        out::RunLive::new(&plan.profile, plan.time_bound.get(), (human, a.json_stream), a.output.as_deref())?;
    live.verbose = a.verbose;
    let opts = netblast_engine::exec::api::RunOptions { token, ..Default::default() };
    let outcome = netblast_engine::run::run(&plan, resolved.peer, &probe, &flags, &opts, &mut |ev| live.event(ev));
    live.end(outcome.is_ok());
    if let Some(h) = sig {
        h.close();
    }
    let mut result = outcome.map_err(AppError::client)?;
    result.label = a.test.label.clone();
    out::judge_into(&a.assert, &mut result);
    let outcome = out::finish(&result, &sinks, "result")?;
    live.written();
    Ok(outcome)
}

fn report(a: &ReportArgs) -> Result<Outcome, AppError> {
    let mut files = a.files.clone();
    let comparing = a.compare.is_some();
    match &a.compare {
        // `report NEW --compare BASE`: the base first.
        Some(base) if !base.is_empty() => files.insert(0, base.into()),
        _ => {}
    }
    if files.len() > 1 && !comparing {
        return Err(AppError::input(anyhow::anyhow!(
            "{} results given: add --compare to set them side by side (the first is the base)",
            files.len()
        )));
    }
    if comparing && files.len() < 2 {
        return Err(AppError::input(anyhow::anyhow!("--compare needs two results or more (the first is the base)")));
    }
    if !a.labels.is_empty() && a.labels.len() != files.len() {
        return Err(AppError::input(anyhow::anyhow!(
            "--labels names {} runs; {} results are compared",
            a.labels.len(),
            files.len()
        )));
    }
    if comparing {
        return compare(a, &files);
    }
    let file = &files[0];
    let bytes =
        std::fs::read(file).with_context(|| format!("cannot read {}", file.display())).map_err(AppError::input)?;
    if netblast_report::campaign::is_summary(&bytes) {
        return campaign_summary(a, file, &bytes);
    }
    // A log cut by a kill may end inside a character: that line is the cut record, left out;
    // every line before it is whole.
    let text = String::from_utf8_lossy(&bytes);
    if netblast_report::fleet::is_log(&text) {
        let out = netblast_report::fleet::render(&text)
            .map_err(|e| AppError::input(anyhow::anyhow!("{}: {e}", file.display())))?;
        print_stdout(&out.text);
        return Ok(if out.complete { Outcome::Complete } else { Outcome::Incomplete });
    }
    let r = if json::is_partial(&text) {
        json::read_partial(&text).map_err(|e| AppError::input(anyhow::anyhow!("{}: {e}", file.display())))?
    } else {
        // From the text already read: a result of hundreds of MB is not read twice.
        netblast_spec::upgrade::read_result(&text)
            .with_context(|| format!("cannot read result {}", file.display()))
            .map_err(AppError::input)?
    };
    if let Some(p) = &a.hlog {
        out::write_hlog(p, &r)?;
    }
    if let Some(p) = &a.html {
        let name = a
            .labels
            .first()
            .cloned()
            .unwrap_or_else(|| netblast_report::figures::run_name(&r, &file.display().to_string()));
        let page = netblast_report::html::render(&name, &r)
            .map_err(|e| AppError::input(anyhow::anyhow!("--html {}: {e}", p.display())))?;
        write_page(p, &page)?;
    }
    match a.csv {
        Some(rows) => print_stdout(&csv_rows(rows, &r)),
        // The page is the report asked for; the text is not printed beside it.
        None if a.html.is_some() => {}
        None => print_stdout(&text::full(&r)),
    }
    let (verdicts, _) = netblast_spec::assert::check_all(&a.assert, &r);
    let ok = out::print_verdicts(&verdicts, a.csv.is_some());
    Ok(out::judged(r.complete, ok))
}

/// `report DIR/summary.json`: a campaign's summary as text, `--csv` or `--html`.
fn campaign_summary(a: &ReportArgs, file: &Path, bytes: &[u8]) -> Result<Outcome, AppError> {
    if !a.assert.is_empty() || a.hlog.is_some() {
        return Err(AppError::input(anyhow::anyhow!(
            "{}: a campaign's summary renders as text, --csv or --html; --assert and --hlog take a run's result (in \
             its runs/)",
            file.display()
        )));
    }
    let s = netblast_report::campaign::read_json(bytes)
        .map_err(|e| AppError::input(anyhow::anyhow!("{}: {e}", file.display())))?;
    if let Some(p) = &a.html {
        write_page(p, &netblast_report::campaign::html(&s))?;
    }
    match a.csv {
        Some(_) => print_stdout(&netblast_report::campaign::csv(&s)),
        None if a.html.is_some() => {}
        None => print_stdout(&netblast_report::campaign::text(&s)),
    }
    let whole = s.runs.failed == 0 && s.runs.missing == 0;
    Ok(if whole { Outcome::Complete } else { Outcome::Incomplete })
}

fn read_result(p: &Path) -> Result<netblast_spec::RunResult, AppError> {
    json::read(p).with_context(|| format!("cannot read result {}", p.display())).map_err(AppError::input)
}

fn write_page(p: &Path, page: &str) -> Result<(), AppError> {
    json::write_atomic(p, page.as_bytes())
        .with_context(|| format!("cannot write {}", p.display()))
        .map_err(AppError::run)?;
    eprintln!("netblast: wrote {}", p.display());
    Ok(())
}

fn csv_rows(rows: crate::cli::CsvRows, r: &netblast_spec::RunResult) -> String {
    use crate::cli::CsvRows;
    match rows {
        CsvRows::Intervals => netblast_report::csv::intervals(r),
        CsvRows::Streams => netblast_report::csv::streams(r),
        CsvRows::Tests => netblast_report::csv::tests(r),
    }
}

/// `report A B C --compare`: the runs side by side, the first the base.
fn compare(a: &ReportArgs, files: &[std::path::PathBuf]) -> Result<Outcome, AppError> {
    if a.csv.is_some() || a.hlog.is_some() {
        return Err(AppError::input(anyhow::anyhow!(
            "--compare renders text or --html; --csv and --hlog take one result"
        )));
    }
    let mut results = Vec::with_capacity(files.len());
    for (i, f) in files.iter().enumerate() {
        let r = read_result(f)?;
        let name = a
            .labels
            .get(i)
            .cloned()
            .unwrap_or_else(|| netblast_report::figures::run_name(&r, &f.display().to_string()));
        results.push((name, r));
    }
    let runs: Vec<(String, &netblast_spec::RunResult)> = results.iter().map(|(n, r)| (n.clone(), r)).collect();
    if let Some(p) = &a.html {
        let page = netblast_report::html::render_compare(&runs)
            .map_err(|e| AppError::input(anyhow::anyhow!("--html {}: {e}", p.display())))?;
        write_page(p, &page)?;
    } else {
        print_stdout(&text::compare(&runs));
    }
    // The assertions judge the last run (the one compared with the base).
    let last = runs[runs.len() - 1].1;
    let (verdicts, _) = netblast_spec::assert::check_all(&a.assert, last);
    let ok = out::print_verdicts(&verdicts, false);
    Ok(out::judged(runs.iter().all(|(_, r)| r.complete), ok))
}

fn merge(a: &MergeArgs) -> Result<Outcome, AppError> {
    let mut inputs = Vec::with_capacity(a.files.len());
    for f in &a.files {
        let r =
            json::read(f).with_context(|| format!("cannot read result {}", f.display())).map_err(AppError::input)?;
        inputs.push((f.display().to_string(), r));
    }
    let refs: Vec<(&str, &netblast_spec::RunResult)> = inputs.iter().map(|(n, r)| (n.as_str(), r)).collect();
    let merged = netblast_spec::merge::merge(&refs).map_err(AppError::input)?;
    if let Some(path) = &a.output {
        json::write_atomic(path, json::to_string(&merged).as_bytes())
            .with_context(|| format!("cannot write the merged result to {}", path.display()))
            .map_err(AppError::run)?;
    }
    if a.json {
        print_stdout(&format!("{}\n", json::to_string(&merged)));
    } else if a.output.is_none() {
        print_stdout(&text::full(&merged));
    }
    Ok(if merged.complete { Outcome::Complete } else { Outcome::Incomplete })
}

fn serve(a: ServeArgs) -> Result<Outcome, AppError> {
    use netblast_agent::server::{Server, ServerError};
    let opts = a.options()?;
    let server = Server::start(opts, &mut |line| eprintln!("netblast serve: {line}")).map_err(|e| match e {
        ServerError::Input(m) => AppError::input(anyhow::anyhow!(m)),
        ServerError::Run(m) => AppError::run(anyhow::anyhow!(m)),
    })?;
    server.run(crate::signals::shutdown_signal()).map_err(|e| AppError::run(anyhow::anyhow!("{e}")))?;
    eprintln!("netblast serve: stopped");
    Ok(Outcome::Complete)
}

fn fleet(a: &FleetArgs) -> Result<Outcome, AppError> {
    if let Some(resolution) = a.find_max {
        return crate::find_max::fleet(a, resolution);
    }
    let human = !a.json && !a.quiet;
    let sinks = Sinks {
        output: a.output.clone(),
        json: a.json,
        hlog: None,
        header: a.quiet && !a.json,
        compact: a.compact,
        stream: false,
        server_output: false,
    };
    sinks.check()?;
    if let Some(frames) = &a.frames {
        out::check_writable("--frames", frames)?;
    }
    let (cfg, notes) = crate::fleet::config(a, human)?;
    if human {
        for n in notes {
            println!("{n}");
        }
    }
    let mut status = Status::new(cfg.profile.time_bound(), human);
    let outcome = crate::fleet::run(a, cfg, human, &mut status);
    status.finish();
    let (mut result, endpoint) = outcome?;
    result.label = a.test.label.clone();
    out::judge_into(&a.assert, &mut result);
    let written = out::finish(&result, &sinks, "fleet's result");
    // The result first, kept whatever a scrape does; then the final counts stay scrapable.
    if let Some(e) = endpoint {
        e.linger(a.metrics_linger.get(), !a.quiet);
    }
    Ok(match written? {
        Outcome::Incomplete => Outcome::Partial,
        o => o,
    })
}
