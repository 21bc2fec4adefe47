//! What a finished (or running) command writes: the result to `-o` (atomically), to stdout as
//! text or JSON, its `--hlog`, its `--assert` verdicts; and, while a run goes, its live lines
//! and partial log.

use crate::outcome::{AppError, Outcome};
use crate::status::{Status, print_stdout};
use anyhow::Context;
use netblast_engine::exec::api::Live;
use netblast_report::{json, text};
use netblast_spec::assert::{Assertion, Verdict};
use netblast_spec::result::StreamInfo;
use netblast_spec::{Profile, RunResult};
use std::path::{Path, PathBuf};

/// Where and how a result is written.
#[derive(Debug, Clone, Default)]
pub struct Sinks {
    /// `-o FILE`.
    pub output: Option<PathBuf>,
    /// `--json` on stdout instead of the text report.
    pub json: bool,
    /// `--hlog FILE`.
    pub hlog: Option<PathBuf>,
    /// `-q`: one line saying what ran above the summary (the live header is not printed).
    pub header: bool,
    /// `--compact`: the `--json` output on one line (a container log keeps it whole).
    pub compact: bool,
    /// `--json-stream`: the result as the stream's last line, `{"event":"end",...}`.
    pub stream: bool,
    /// `--get-server-output`: the server's own lines after the summary.
    pub server_output: bool,
}

impl Sinks {
    /// Checks, before anything is sent, that every file the result goes to can be written:
    /// not a directory, in a directory that exists and takes a new file. The error (exit 2)
    /// names the flag and the path, so no measurement is made only to be lost.
    pub fn check(&self) -> Result<(), AppError> {
        for (flag, path) in [("--output", &self.output), ("--hlog", &self.hlog)] {
            if let Some(p) = path {
                check_writable(flag, p)?;
            }
        }
        Ok(())
    }
}

/// Refuses (exit 2, naming the flag and the path) a file `flag` asks for that cannot be written.
pub fn check_writable(flag: &str, path: &Path) -> Result<(), AppError> {
    writable(path).map_err(|why| AppError::input(anyhow::anyhow!("{flag} {}: {why}", path.display())))
}

/// Whether a file can be written at `path` (atomically: a new file beside it, renamed over it).
fn writable(path: &Path) -> Result<(), String> {
    if path.is_dir() {
        return Err("is a directory".into());
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        return Err(format!("its directory {} does not exist", dir.display()));
    }
    let probe = dir.join(format!(".netblast-write-check-{}", std::process::id()));
    match std::fs::OpenOptions::new().write(true).create_new(true).open(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(format!("cannot create a file in {}: {e}", dir.display())),
    }
}

/// Judges `assertions` and the defaults that apply ([`netblast_spec::assert::with_defaults`]:
/// an HTTP run's share of failed requests) on a result about to be written, keeping the
/// verdicts in it.
pub fn judge_into(assertions: &[Assertion], r: &mut RunResult) {
    let all = netblast_spec::assert::with_defaults(assertions, r);
    r.asserts = netblast_spec::assert::check_all(&all, r).0;
}

/// Prints verdicts (on stderr beside JSON output); whether all passed.
pub fn print_verdicts(verdicts: &[Verdict], json: bool) -> bool {
    if verdicts.is_empty() {
        return true;
    }
    let text: String = verdicts.iter().map(|v| format!("assert: {v}\n")).collect();
    if json {
        eprint!("{text}");
    } else {
        print_stdout(&text);
    }
    verdicts.iter().all(|v| v.pass)
}

/// The outcome of a finished run: incomplete first, then the assertions.
pub fn judged(complete: bool, asserts_ok: bool) -> Outcome {
    match (complete, asserts_ok) {
        (false, _) => Outcome::Incomplete,
        (true, false) => Outcome::AssertFailed,
        (true, true) => Outcome::Complete,
    }
}

/// Writes `--hlog FILE` (atomically); the error names the file.
pub fn write_hlog(path: &Path, r: &RunResult) -> Result<(), AppError> {
    let (bytes, _) = netblast_report::hlog::write(r)
        .map_err(|e| AppError::input(anyhow::anyhow!("--hlog {}: {e}", path.display())))?;
    json::write_atomic(path, &bytes)
        .with_context(|| format!("cannot write the interval log to {}", path.display()))
        .map_err(AppError::run)
}

/// Writes a finished result where `sinks` say (`what` names it in errors: "result", "fleet's
/// result"), prints it, and prints its verdicts; the outcome.
pub fn finish(r: &RunResult, sinks: &Sinks, what: &str) -> Result<Outcome, AppError> {
    // A write that fails at the end (the disk filled, the directory went) keeps the result in
    // a temporary file, says where, and still prints the summary: nothing measured is lost.
    let mut lost_write = None;
    if let Some(path) = &sinks.output {
        let bytes = json::to_string(r);
        if let Err(e) = json::write_atomic(path, bytes.as_bytes()) {
            let fallback = std::env::temp_dir().join(format!("netblast-{}.json", r.test_id));
            let kept = match json::write_atomic(&fallback, bytes.as_bytes()) {
                Ok(()) => format!("kept in {}", fallback.display()),
                Err(e2) => format!("and not in {} either ({e2}): it is on stdout with --json", fallback.display()),
            };
            eprintln!("netblast: cannot write the {what} to {}: {e}; {kept}", path.display());
            lost_write = Some(format!("cannot write the {what} to {}: {e} ({kept})", path.display()));
        }
    }
    if sinks.stream {
        print_stdout(&json::stream_line("end", r));
    } else if sinks.json {
        let text = if sinks.compact { json::to_string_compact(r) } else { json::to_string(r) };
        print_stdout(&format!("{text}\n"));
    } else {
        if sinks.header {
            print_stdout(&text::header_line(r));
        }
        print_stdout(&text::summary(r));
        if sinks.server_output {
            let lines: String = r.server_output.iter().map(|l| format!("  {l}\n")).collect();
            print_stdout(&format!(
                "Server output:\n{}",
                if lines.is_empty() { "  (none: the server sent no lines)\n".into() } else { lines }
            ));
        }
    }
    if let Some(p) = &sinks.hlog {
        write_hlog(p, r)?;
    }
    let ok = print_verdicts(&r.asserts, sinks.json || sinks.stream);
    if let Some(why) = lost_write {
        return Err(AppError::run(anyhow::anyhow!(why)));
    }
    Ok(judged(r.complete, ok))
}

/// A run's live output: its lines and status line for a person, and its partial log.
pub struct RunLive {
    human: bool,
    /// `--json-stream`: each event on stdout as a line of JSON.
    stream: bool,
    /// `-V`: each stream's socket as its kernel holds it, in the header.
    pub verbose: bool,
    status: Status,
    streams: Vec<StreamInfo>,
    partial: Option<json::PartialLog>,
    log_full: bool,
    profile: Profile,
}

impl RunLive {
    /// Live output of a run of `profile` bounded by `bound`; a partial log beside `output`.
    pub fn new(
        profile: &Profile,
        bound: std::time::Duration,
        (human, stream): (bool, bool),
        output: Option<&Path>,
    ) -> Result<Self, AppError> {
        let partial = match output {
            Some(path) => Some(
                json::PartialLog::create(path)
                    .with_context(|| format!("cannot write beside --output {}", path.display()))
                    .map_err(AppError::input)?,
            ),
            None => None,
        };
        let status = Status::new(bound, human);
        Ok(RunLive {
            human,
            stream,
            verbose: false,
            status,
            streams: Vec::new(),
            partial,
            log_full: false,
            profile: profile.clone(),
        })
    }

    /// Takes one live event.
    pub fn event(&mut self, ev: Live<'_>) {
        match ev {
            Live::Started { plan, test_id, server, streams, start_unix_ns, .. } => {
                self.streams = streams.to_vec();
                // The partial log's first record: with it, `report` reads the log back as a
                // result should the run die before writing its own.
                let start = json::PartialStart {
                    test_id: test_id.to_string(),
                    start_unix_ns,
                    plan: plan.clone(),
                    streams: streams.to_vec(),
                };
                if self.stream {
                    print_stdout(&json::stream_line("start", &start));
                }
                if let Some(p) = self.partial.as_mut() {
                    if let Err(e) = p.start(&start) {
                        eprintln!("netblast: cannot append to the partial log: {e}");
                    }
                }
                if self.human {
                    let kind = plan.profile.kind().name();
                    let mut out = text::started(test_id, &plan.aimed_at(), kind, streams, &server.hostname);
                    if let Some(k) = text::knobs(plan) {
                        out.push_str(&format!("{k}\n"));
                    }
                    if self.verbose {
                        out.push_str(&text::sockets(streams));
                    }
                    for n in &plan.notes {
                        out.push_str(&format!("note: {n}\n"));
                    }
                    out.push_str(&text::interval_header(&plan.profile));
                    self.status.started(&out);
                }
            }
            Live::Interval(iv) => {
                // A short tail (the last bytes after the bound) is folded into the interval
                // before it in the result: the stream, like the text, leaves it to the end event.
                if self.stream && !iv.is_short_tail(self.profile.run.interval().as_secs_f64()) {
                    print_stdout(&json::stream_line("interval", iv));
                }
                if let Some(p) = self.partial.as_mut() {
                    match p.append(iv) {
                        Ok(true) => {}
                        Ok(false) if !self.log_full => {
                            self.log_full = true;
                            eprintln!(
                                "netblast: the partial log reached {} MiB: it stops here (the result will hold every interval)",
                                json::PartialLog::MAX_BYTES >> 20
                            );
                        }
                        Ok(false) => {}
                        Err(e) => eprintln!("netblast: cannot append to the partial log: {e}"),
                    }
                }
                if self.human {
                    self.status.interval(&text::interval(iv, &self.streams, &self.profile), iv);
                }
            }
            Live::Probe(p) => {
                if self.stream {
                    print_stdout(&json::stream_line("probe", p));
                }
                if self.human {
                    self.status.print(&netblast_report::probe::interval(p));
                }
            }
        }
    }

    /// The run ended: the status line goes; `measured`: whether there is a result (the
    /// partial log stays until the result is written, and goes with nothing measured).
    pub fn end(&mut self, measured: bool) {
        self.status.finish();
        if !measured {
            if let Some(p) = self.partial.take() {
                let _ = p.remove();
            }
        }
    }

    /// The result is written: the partial log is no longer needed.
    pub fn written(&mut self) {
        if let Some(p) = self.partial.take() {
            let _ = p.remove();
        }
    }
}
