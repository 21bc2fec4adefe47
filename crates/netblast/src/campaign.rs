//! `netblast campaign FILE -o DIR`: a matrix of settings × repeats, each run a whole `run` (or
//! `fleet`) made from the file's settings as their flags, its result written to
//! `DIR/runs/CELL-rN.json` as it ends; then one summary (`DIR/summary.json`, `.csv`, `.html`,
//! and the text) made from every result in `DIR/runs`. The same command on the same directory
//! runs only what is missing; a changed file is refused, naming what changed.

use crate::cli::{Cli, Command, FleetArgs, RunArgs};
use crate::outcome::{AppError, Outcome};
use crate::status::print_stdout;
use anyhow::Context;
use clap::{CommandFactory, Parser};
use netblast_engine::exec::worker::RunFlags;
use netblast_report::json;
use netblast_spec::RunResult;
use netblast_spec::campaign::summary::{self, Digest, RunOutcome, Summary};
use netblast_spec::campaign::{Campaign, Cell, RunId, Scalar, Setting};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The copy of the campaign file a directory's runs were made with.
const COPY: &str = "campaign.toml";
/// The command line's own settings beside the file (`--target`, `--set`, `--axis`,
/// `--repeats`), one per line: a resume applies them again.
const COMMAND: &str = "command-line.txt";

/// One cell's command, as its flags parse.
enum CellCommand {
    /// `netblast run …`.
    Run(Box<RunArgs>),
    /// `netblast fleet …`.
    Fleet(Box<FleetArgs>),
}

/// `netblast campaign`.
pub fn run(a: &crate::cli::CampaignArgs) -> Result<Outcome, AppError> {
    let input = |e: String| AppError::input(anyhow::anyhow!(e));
    let origin = a.file.display().to_string();
    let text = std::fs::read_to_string(&a.file).map_err(|e| input(format!("cannot read {origin}: {e}")))?;
    let mut campaign = Campaign::parse(&text, &origin).map_err(AppError::input)?;
    let command_line = own_settings(a);
    apply(&mut campaign, &command_line).map_err(input)?;
    let cells = campaign.cells();
    if cells.len() > netblast_spec::campaign::MAX_CELLS {
        return Err(input(format!("{} cells: at most {}", cells.len(), netblast_spec::campaign::MAX_CELLS)));
    }
    // Every cell's command line parses and its test resolves before anything is sent.
    let commands = cells.iter().map(|c| command(&campaign, c)).collect::<Result<Vec<_>, _>>()?;
    let baseline = match &a.baseline {
        Some(dir) => Some(read_baseline(dir, &cells)?),
        None => None,
    };
    if a.dry_run {
        let mut s = format!("{} cells × {} repeats:\n", cells.len(), campaign.repeats);
        for c in &cells {
            s.push_str(&format!("  {} {}: netblast {}\n", c.id, c.name(), argv(&campaign, c)?[1..].join(" ")));
        }
        print_stdout(&s);
        return Ok(Outcome::Complete);
    }
    let runs_dir = prepare(a, &campaign, &text, &command_line)?;
    let human = !a.json && !a.quiet;
    let schedule = campaign.schedule();
    let mut have = read_runs(&runs_dir, &cells, campaign.repeats)?;
    let todo: Vec<RunId> =
        schedule.iter().copied().filter(|id| !matches!(have.get(id), Some(RunOutcome::Done(_)))).collect();
    if human {
        let done = schedule.len() - todo.len();
        let again = todo.iter().filter(|id| have.contains_key(id)).count();
        let order = match campaign.order {
            netblast_spec::campaign::Order::Shuffled => "shuffled: round by round, the cells shuffled in each",
            netblast_spec::campaign::Order::Grouped => "grouped: each cell's repeats together",
        };
        let mut head = format!(
            "netblast campaign: {} cells × {} repeats ({order}) into {}",
            cells.len(),
            campaign.repeats,
            a.output.display()
        );
        if done > 0 {
            head.push_str(&format!("; {done} runs already there, {} to run", todo.len()));
        }
        if again > 0 {
            head.push_str(&format!(" ({again} that failed before run again)"));
        }
        print_stdout(&format!("{head}\n"));
    }
    let flags = RunFlags::new();
    let sig = crate::signals::watch_signals(flags.clone());
    let started = Instant::now();
    let mut interrupted = false;
    for (i, id) in todo.iter().enumerate() {
        let cell = &cells[id.cell - 1];
        let file = runs_dir.join(id.file_name(&cells));
        let t0 = Instant::now();
        // The run before aborted its workers as it ended.
        flags.rearm();
        let outcome = run_one(&commands[id.cell - 1], &file, &flags);
        if flags.interrupted() {
            interrupted = true;
            if human {
                print_stdout(&format!("interrupted: {} left out, {} not run\n", cell.id, todo.len() - i));
            }
            break;
        }
        let line = record(&runs_dir, &file, outcome, &mut have, *id)?;
        if human {
            let per = started.elapsed().as_secs_f64() / (i + 1) as f64;
            let left = per * (todo.len() - i - 1) as f64;
            print_stdout(&format!(
                "[{:>w$}/{}] {} {} repeat {}/{}: {line} ({:.1} s; about {} left)\n",
                i + 1,
                todo.len(),
                cell.id,
                cell.name(),
                id.repeat,
                campaign.repeats,
                t0.elapsed().as_secs_f64(),
                fmt_left(left),
                w = todo.len().to_string().len(),
            ));
        }
    }
    if let Some(h) = sig {
        h.close();
    }
    // The summary is made from the files, every time: the same files, the same summary.
    let have = read_runs(&runs_dir, &cells, campaign.repeats)?;
    let mut sum = summary::summarize(&campaign, &have);
    if let (Some(base), Some(dir)) = (&baseline, &a.baseline) {
        sum.against(base, &dir.display().to_string());
    }
    write_summary(&a.output, &sum)?;
    if a.json {
        print_stdout(&netblast_report::campaign::to_json(&sum));
    } else {
        print_stdout(&netblast_report::campaign::text(&sum));
    }
    if interrupted || sum.runs.missing > 0 || sum.runs.failed > 0 {
        return Ok(Outcome::Incomplete);
    }
    let asserts_failed = sum.cells.iter().any(|c| c.asserts.as_ref().is_some_and(|a| a.failed > 0));
    Ok(if asserts_failed { Outcome::AssertFailed } else { Outcome::Complete })
}

/// Time left, as a person reads it: seconds, then minutes, then hours.
fn fmt_left(secs: f64) -> String {
    match secs {
        s if s < 90.0 => format!("{s:.0} s"),
        s if s < 5400.0 => format!("{:.0} min", s / 60.0),
        s => format!("{:.1} h", s / 3600.0),
    }
}

/// The command line's settings for the campaign, one per line as they are kept.
fn own_settings(a: &crate::cli::CampaignArgs) -> Vec<String> {
    let mut v: Vec<String> = a.target.iter().map(|t| format!("--target={t}")).collect();
    v.extend(a.set.iter().map(|s| format!("--set={s}")));
    v.extend(a.axis.iter().map(|s| format!("--axis={s}")));
    v.extend(a.repeats.map(|n| format!("--repeats={n}")));
    v
}

/// Applies the command line's settings (as [`own_settings`] lists them) to the file's campaign.
fn apply(c: &mut Campaign, settings: &[String]) -> Result<(), String> {
    for line in settings {
        let (flag, rest) = line.split_once('=').ok_or_else(|| format!("cannot read {line:?}"))?;
        let key_value = || {
            rest.split_once('=').ok_or_else(|| format!("{flag} {rest}: KEY=VALUE")).map(|(k, v)| (k.trim(), v.trim()))
        };
        match flag {
            "--target" => c.target = Some(rest.to_string()),
            "--repeats" => c.repeats = rest.parse().map_err(|_| format!("--repeats {rest}: a number"))?,
            "--set" => {
                let (k, v) = key_value()?;
                c.set_value(k, Scalar::from_arg(v)).map_err(|e| format!("--set {rest}: {e}"))?;
            }
            "--axis" => {
                let (k, v) = key_value()?;
                let values = v.split(',').map(|x| Scalar::from_arg(x.trim())).collect();
                c.replace_axis(k, values)?;
            }
            other => return Err(format!("{other}: not a campaign setting")),
        }
    }
    Ok(())
}

/// The flags a setting stands for: `--key=value` per value, a switch for `true`, nothing for
/// `false`; `direction` as `-R`/`--bidir`.
fn flags_of(key: &str, values: &[Scalar]) -> Result<Vec<String>, String> {
    if key == "direction" {
        return values
            .iter()
            .map(|v| match v.to_string().as_str() {
                "up" => Ok(None),
                "down" | "reverse" => Ok(Some("--reverse".to_string())),
                "bidir" => Ok(Some("--bidir".to_string())),
                other => Err(format!("direction {other:?}: up, down or bidir")),
            })
            .filter_map(Result::transpose)
            .collect();
    }
    Ok(values
        .iter()
        .filter_map(|v| match v {
            Scalar::Bool(true) => Some(format!("--{key}")),
            Scalar::Bool(false) => None,
            v => Some(format!("--{key}={v}")),
        })
        .collect())
}

/// The command line of one cell: `netblast run` (or `fleet`) with the base profile and target,
/// `[fleet]`'s settings, `[set]`'s and the cell's own (a cell's `profile` or `target` takes the
/// base's place).
fn argv(c: &Campaign, cell: &Cell) -> Result<Vec<String>, AppError> {
    let sub = if c.fleet.is_some() { "fleet" } else { "run" };
    let mut v = vec!["netblast".to_string(), sub.to_string()];
    let known = long_flags(sub);
    let mut all: Vec<(String, &str, Vec<Scalar>)> = Vec::new();
    let own = c.cell_settings(cell);
    let mine = |key: &str| own.iter().any(|(k, _)| k == key);
    for (key, base) in [("profile", &c.profile), ("target", &c.target)] {
        if let Some(b) = base.as_ref().filter(|_| !mine(key)) {
            all.push((key.into(), "", vec![Scalar::Str(b.clone())]));
        }
    }
    // A cell's own setting (an axis, a named set's) takes the place of the fleet's.
    for Setting { key, values } in c.fleet.iter().flatten().filter(|s| !mine(&s.key)) {
        all.push((key.clone(), "fleet", values.clone()));
    }
    for Setting { key, values } in &c.set {
        all.push((key.clone(), "set", values.clone()));
    }
    for (key, value) in own {
        all.push((key, "axes", vec![value]));
    }
    for (key, section, values) in all {
        let field = if section.is_empty() { key.clone() } else { format!("{section}.{key}") };
        if key != "direction" && !known.contains(&key) {
            let near = known.iter().find(|k| strsim_close(k, &key)).map(|k| format!(" (--{k}?)")).unwrap_or_default();
            return Err(AppError::input(anyhow::anyhow!(
                "{}: {field}: `netblast {sub}` has no flag --{key}{near}",
                cell_where(cell)
            )));
        }
        let f = flags_of(&key, &values).map_err(|e| AppError::input(anyhow::anyhow!("{field}: {e}")))?;
        v.extend(f);
    }
    Ok(v)
}

/// Whether two flag names are one typo apart (a letter changed, added, left out or swapped).
fn strsim_close(a: &str, b: &str) -> bool {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    // Levenshtein distance, small strings.
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()] <= 1 || (a.len() == b.len() && a.len() > 2 && prev[b.len()] == 2 && sorted(&a) == sorted(&b))
}

fn sorted(v: &[char]) -> Vec<char> {
    let mut s = v.to_vec();
    s.sort_unstable();
    s
}

/// The long names (and visible aliases) of a subcommand's flags.
fn long_flags(sub: &str) -> Vec<String> {
    let cmd = Cli::command();
    let Some(s) = cmd.find_subcommand(sub) else { return Vec::new() };
    s.get_arguments()
        .flat_map(|a| a.get_long().into_iter().chain(a.get_visible_aliases().into_iter().flatten()))
        .map(str::to_string)
        .collect()
}

fn cell_where(cell: &Cell) -> String {
    format!("cell {} ({})", cell.id, cell.name())
}

/// A cell's command, parsed as the command line would be and resolved as far as can be
/// without sending anything: a flag a kind does not take, a value a flag refuses or a profile
/// that does not load is named with the cell.
fn command(c: &Campaign, cell: &Cell) -> Result<CellCommand, AppError> {
    let v = argv(c, cell)?;
    let at = cell_where(cell);
    let cli = Cli::try_parse_from(&v).map_err(|e| {
        let msg = e.render().to_string();
        let first = msg.lines().next().unwrap_or("").trim_start_matches("error: ").to_string();
        AppError::input(anyhow::anyhow!("{at}: {first}"))
    })?;
    let wrap = |e: AppError| AppError { code: e.code, error: e.error.context(at.clone()) };
    match cli.command {
        Command::Run(r) => {
            crate::cli::request(&r, &r.test.overrides)
                .and_then(|req| netblast_engine::run::resolve(req).map_err(AppError::client))
                .map_err(wrap)?;
            Ok(CellCommand::Run(r))
        }
        Command::Fleet(f) => {
            // Each run's frames go beside its result (run_one): no default log to speak of.
            let mut check = f.clone();
            check.frames = Some(PathBuf::from("frames.jsonl"));
            crate::fleet::config(&check, false).map_err(wrap)?;
            Ok(CellCommand::Fleet(f))
        }
        _ => unreachable!("argv names run or fleet"),
    }
}

/// Makes `DIR/runs` for a new campaign, with a copy of its file; for a directory that holds
/// one, checks that the file is the same (more repeats may be added) and returns `runs/`.
fn prepare(a: &crate::cli::CampaignArgs, c: &Campaign, text: &str, own: &[String]) -> Result<PathBuf, AppError> {
    let dir = &a.output;
    let input = |e: String| AppError::input(anyhow::anyhow!(e));
    let copy = dir.join(COPY);
    if copy.exists() {
        let then_text =
            std::fs::read_to_string(&copy).map_err(|e| input(format!("cannot read {}: {e}", copy.display())))?;
        let mut then = Campaign::parse(&then_text, &copy.display().to_string()).map_err(AppError::input)?;
        let then_own = std::fs::read_to_string(dir.join(COMMAND)).unwrap_or_default();
        let then_own: Vec<String> = then_own.lines().filter(|l| !l.is_empty()).map(str::to_string).collect();
        apply(&mut then, &then_own).map_err(|e| input(format!("{}: {e}", dir.join(COMMAND).display())))?;
        let diff = c.differences(&then);
        if !diff.is_empty() {
            return Err(input(format!(
                "{} holds a campaign made from another file; what changed: {}. Give another -o DIR, or put the file \
                 back",
                dir.display(),
                diff.join("; ")
            )));
        }
        if c.repeats > then.repeats {
            // More repeats: the copy says so, so a later resume compares with this file.
            json::write_atomic(&copy, text.as_bytes()).map_err(|e| AppError::run(anyhow::anyhow!(e)))?;
            json::write_atomic(&dir.join(COMMAND), own.join("\n").as_bytes())
                .map_err(|e| AppError::run(anyhow::anyhow!(e)))?;
        }
    } else if a.resume {
        return Err(input(format!("--resume: {} holds no campaign ({COPY} is not there)", dir.display())));
    } else {
        if dir.exists() && std::fs::read_dir(dir).map(|mut d| d.next().is_some()).unwrap_or(true) {
            return Err(input(format!(
                "-o {}: the directory is not empty and holds no campaign: give a new or empty directory",
                dir.display()
            )));
        }
        std::fs::create_dir_all(dir.join("runs"))
            .with_context(|| format!("-o {}: cannot create the directory", dir.display()))
            .map_err(AppError::input)?;
        json::write_atomic(&copy, text.as_bytes()).map_err(|e| AppError::run(anyhow::anyhow!(e)))?;
        json::write_atomic(&dir.join(COMMAND), own.join("\n").as_bytes())
            .map_err(|e| AppError::run(anyhow::anyhow!(e)))?;
    }
    let runs = dir.join("runs");
    std::fs::create_dir_all(&runs)
        .with_context(|| format!("cannot create {}", runs.display()))
        .map_err(AppError::run)?;
    Ok(runs)
}

/// The runs already in `runs/`: a result file is a done run (an incomplete result, or an
/// unreadable one, a failed run), an `.error` file a failed one. Files of cells or repeats
/// past the campaign's are left alone.
fn read_runs(runs: &Path, cells: &[Cell], repeats: u32) -> Result<BTreeMap<RunId, RunOutcome>, AppError> {
    let mut out = BTreeMap::new();
    for cell in cells {
        for repeat in 1..=repeats {
            let id = RunId { cell: cell.index, repeat };
            let file = runs.join(id.file_name(cells));
            if file.exists() {
                let o = match json::read(&file) {
                    Ok(r) if r.complete => RunOutcome::Done(Digest::of(&r, netblast_report::verdict::causes(&r))),
                    Ok(r) => RunOutcome::Failed(incomplete(&r)),
                    Err(e) => RunOutcome::Failed(format!("{}: unreadable: {e}", file.display())),
                };
                out.insert(id, o);
            } else if let Ok(why) = std::fs::read_to_string(file.with_extension("error")) {
                out.insert(id, RunOutcome::Failed(why.trim().to_string()));
            }
        }
    }
    Ok(out)
}

/// Why a result is not whole, in one line.
fn incomplete(r: &RunResult) -> String {
    match r.errors.first() {
        Some(e) => format!("incomplete: {}", e.message),
        None => "incomplete".into(),
    }
}

/// Runs one cell's command; its result, or why it failed.
fn run_one(cmd: &CellCommand, file: &Path, flags: &std::sync::Arc<RunFlags>) -> Result<RunResult, String> {
    match cmd {
        CellCommand::Run(a) => {
            let token = crate::cli::load_token(a.token_file.as_deref()).map_err(|e| format!("{:#}", e.error))?;
            let req = crate::cli::request(a, &a.test.overrides).map_err(|e| format!("{:#}", e.error))?;
            let resolved = netblast_engine::run::resolve(req).map_err(|e| e.to_string())?;
            let probe =
                netblast_probe::Probe::open_with(a.probe, a.probe_stats).map_err(|e| format!("--probe: {e}"))?;
            let opts = netblast_engine::exec::api::RunOptions { token, ..Default::default() };
            let mut r = netblast_engine::run::run(&resolved.plan, resolved.peer, &probe, flags, &opts, &mut |_| {})
                .map_err(|e| e.to_string())?;
            r.label = a.test.label.clone();
            crate::out::judge_into(&a.assert, &mut r);
            Ok(r)
        }
        CellCommand::Fleet(f) => {
            let mut s = (**f).clone();
            s.frames = Some(file.with_extension("fleet.jsonl"));
            let (cfg, _) = crate::fleet::config(&s, false).map_err(|e| format!("{:#}", e.error))?;
            let mut status = crate::status::Status::new(cfg.profile.time_bound(), false);
            let (mut r, _) =
                crate::fleet::run_until(&s, cfg, false, &mut status, crate::find_max::stopped(flags.clone()))
                    .map_err(|e| format!("{:#}", e.error))?;
            r.label = s.test.label.clone();
            crate::out::judge_into(&s.assert, &mut r);
            Ok(r)
        }
    }
}

/// Writes a run's outcome where it belongs (the result atomically; a failure's reason beside
/// where it would be) and keeps its digest; the line the progress shows.
fn record(
    runs: &Path,
    file: &Path,
    outcome: Result<RunResult, String>,
    have: &mut BTreeMap<RunId, RunOutcome>,
    id: RunId,
) -> Result<String, AppError> {
    let error_file = file.with_extension("error");
    let write = |p: &Path, bytes: &[u8]| {
        json::write_atomic(p, bytes)
            .with_context(|| format!("cannot write {} (in {})", p.display(), runs.display()))
            .map_err(AppError::run)
    };
    match outcome {
        Ok(r) if r.complete => {
            write(file, json::to_string(&r).as_bytes())?;
            let _ = std::fs::remove_file(&error_file);
            let d = Digest::of(&r, netblast_report::verdict::causes(&r));
            let line = d
                .figures
                .first()
                .map(|(f, v)| format!("{} {}", f.name, f.unit.show(*v)))
                .unwrap_or_else(|| "done".into());
            have.insert(id, RunOutcome::Done(d));
            Ok(line)
        }
        Ok(r) => {
            // Kept beside, for the record: what it measured is not lost, and not counted.
            write(&file.with_extension("incomplete.json"), json::to_string(&r).as_bytes())?;
            let why = incomplete(&r);
            write(&error_file, format!("{why}\n").as_bytes())?;
            have.insert(id, RunOutcome::Failed(why.clone()));
            Ok(format!("FAILED ({why}; run again on resume)"))
        }
        Err(why) => {
            write(&error_file, format!("{why}\n").as_bytes())?;
            have.insert(id, RunOutcome::Failed(why.clone()));
            Ok(format!("FAILED ({why}; run again on resume)"))
        }
    }
}

/// An earlier campaign's summary, refused when none of its cells has the settings of a cell
/// here.
fn read_baseline(dir: &Path, cells: &[Cell]) -> Result<Summary, AppError> {
    let p = dir.join("summary.json");
    let input = |e: String| AppError::input(anyhow::anyhow!(e));
    let bytes = std::fs::read(&p)
        .map_err(|e| input(format!("--baseline {}: cannot read {}: {e}", dir.display(), p.display())))?;
    let base =
        netblast_report::campaign::read_json(&bytes).map_err(|e| input(format!("--baseline {}: {e}", p.display())))?;
    let matched = cells.iter().filter(|c| {
        let settings: BTreeMap<String, Scalar> = c.settings.iter().cloned().collect();
        base.cells.iter().any(|b| b.settings == settings)
    });
    if matched.count() == 0 {
        let axes: Vec<&str> = base.axes.iter().map(|a| a.name.as_str()).collect();
        return Err(input(format!(
            "--baseline {}: none of its cells has the settings of a cell here (its axes: {}): cells are compared \
             by their axes' values",
            dir.display(),
            if axes.is_empty() { "none".to_string() } else { axes.join(", ") }
        )));
    }
    Ok(base)
}

/// `summary.json`, `summary.csv` and `summary.html` in `dir`, each written atomically.
fn write_summary(dir: &Path, s: &Summary) -> Result<(), AppError> {
    let run_err = |p: &Path, e: std::io::Error| AppError::run(anyhow::anyhow!("cannot write {}: {e}", p.display()));
    let p = dir.join("summary.json");
    json::write_atomic(&p, netblast_report::campaign::to_json(s).as_bytes()).map_err(|e| run_err(&p, e))?;
    let p = dir.join("summary.csv");
    json::write_atomic(&p, netblast_report::campaign::csv(s).as_bytes()).map_err(|e| run_err(&p, e))?;
    let p = dir.join("summary.html");
    json::write_atomic(&p, netblast_report::campaign::html(s).as_bytes()).map_err(|e| run_err(&p, e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_become_flags() {
        let s = |x: &str| Scalar::Str(x.into());
        assert_eq!(flags_of("block", &[s("64K")]).unwrap(), ["--block=64K"]);
        assert_eq!(flags_of("nodelay", &[Scalar::Bool(true)]).unwrap(), ["--nodelay"]);
        assert!(flags_of("nodelay", &[Scalar::Bool(false)]).unwrap().is_empty());
        assert_eq!(
            flags_of("assert", &[s("p99<1ms"), s("errors==0")]).unwrap(),
            ["--assert=p99<1ms", "--assert=errors==0"]
        );
        assert_eq!(flags_of("direction", &[s("down")]).unwrap(), ["--reverse"]);
        assert!(flags_of("direction", &[s("up")]).unwrap().is_empty());
        assert!(flags_of("direction", &[s("sideways")]).unwrap_err().contains("up, down or bidir"));
        assert!(strsim_close("flows", "flws") && strsim_close("block", "blokc") && !strsim_close("flows", "rate"));
    }

    #[test]
    fn an_unknown_or_misplaced_setting_is_named_with_its_cell() {
        let c = Campaign::parse("[axes]\nflws = [1, 2]\n", "c").unwrap();
        let e = command(&c, &c.cells()[0]).err().unwrap().error.to_string();
        assert!(e.contains("axes.flws") && e.contains("--flows?") && e.contains("c001"), "{e}");
        let c = Campaign::parse("target = \"127.0.0.1\"\n[axes]\nblock = [\"64K\"]\nrate = [\"100\"]\n", "c").unwrap();
        let e = command(&c, &c.cells()[0]).err().unwrap();
        let msg = format!("{:#}", e.error);
        assert!(msg.contains("--rate") && msg.contains("c001"), "{msg}");
        let c = Campaign::parse("target = \"127.0.0.1\"\n[axes]\nflows = [\"many\"]\n", "c").unwrap();
        let msg = format!("{:#}", command(&c, &c.cells()[0]).err().unwrap().error);
        assert!(msg.contains("many") && msg.contains("--flows"), "{msg}");
    }
}
