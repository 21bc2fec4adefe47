//! The JSON rendering of a result and atomic result files.

use netblast_spec::RunResult;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The result as pretty JSON (the `--json` output).
pub fn to_string(r: &RunResult) -> String {
    // RunResult is plain data with string keys; serialising cannot fail (a panic is a bug).
    serde_json::to_string_pretty(r).expect("RunResult serialises")
}

/// The result as JSON on one line (`fleet --json --compact`): in a container's log, where each
/// line costs a timestamp and a kubelet keeps 10 MiB per container by default, a quarter of the
/// pretty form's bytes.
pub fn to_string_compact(r: &RunResult) -> String {
    serde_json::to_string(r).expect("RunResult serialises")
}

/// Reads a result written by `--output` or `--json`, by this build or an older one (see
/// [`netblast_spec::upgrade`]).
pub fn read(path: &Path) -> io::Result<RunResult> {
    let text = std::fs::read_to_string(path)?;
    netblast_spec::upgrade::read_result(&text)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", path.display())))
}

/// Writes `bytes` to `path` atomically: a temporary file in the same directory, flushed to
/// disk, then renamed over `path`. A reader sees the old file or the new one, never a part.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name =
        path.file_name().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "output path has no file name"))?;
    let tmp: PathBuf = dir.join(format!(".{}.tmp.{}", name.to_string_lossy(), std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Appends interval records as JSON lines while a run is in progress, so a crash keeps what
/// was measured (`<output>.partial.jsonl`, removed once the final result is written). It stops
/// growing at [`PartialLog::MAX_BYTES`] and says so in a last record.
pub struct PartialLog {
    path: PathBuf,
    file: std::fs::File,
    written: u64,
    full: bool,
}

impl PartialLog {
    /// The partial-log path for a final output path.
    pub fn path_for(output: &Path) -> PathBuf {
        Self::path_for_suffix(output, ".partial.jsonl")
    }

    /// `output` with `suffix` appended (a companion file beside it).
    pub fn path_for_suffix(output: &Path, suffix: &str) -> PathBuf {
        let mut p = output.as_os_str().to_owned();
        p.push(suffix);
        PathBuf::from(p)
    }

    /// Largest partial log: beyond it intervals are no longer appended (the final result
    /// still holds them all).
    pub const MAX_BYTES: u64 = 256 << 20;

    /// Creates (truncates) the partial log beside `output`.
    pub fn create(output: &Path) -> io::Result<PartialLog> {
        let path = Self::path_for(output);
        let file = std::fs::File::create(&path)?;
        Ok(PartialLog { path, file, written: 0, full: false })
    }

    /// Appends one record and flushes it. Returns `Ok(false)` once the log is full (the record
    /// was not written; a note saying so was, once).
    pub fn append<T: serde::Serialize>(&mut self, record: &T) -> io::Result<bool> {
        if self.full {
            return Ok(false);
        }
        let mut line = serde_json::to_vec(record).map_err(io::Error::other)?;
        line.push(b'\n');
        if self.written + line.len() as u64 > Self::MAX_BYTES {
            self.full = true;
            let note = format!(
                "{{\"note\":\"the partial log stopped at {} bytes; the final result holds every interval\"}}\n",
                self.written
            );
            self.file.write_all(note.as_bytes())?;
            return Ok(false);
        }
        self.file.write_all(&line)?;
        self.written += line.len() as u64;
        self.file.flush()?;
        Ok(true)
    }

    /// Appends the start record (first, before any interval).
    pub fn start(&mut self, start: &PartialStart) -> io::Result<bool> {
        #[derive(serde::Serialize)]
        struct Record<'a> {
            partial: &'a PartialStart,
        }
        self.append(&Record { partial: start })
    }

    /// Removes the log (after the final result is safely written).
    pub fn remove(self) -> io::Result<()> {
        std::fs::remove_file(&self.path)
    }
}

/// One line of `--json-stream` (iperf3 3.17's shape): `{"event":"start"|"interval"|"end",
/// "data":…}` on one line, ending in a newline; each line parses alone.
pub fn stream_line<T: serde::Serialize>(event: &str, data: &T) -> String {
    #[derive(serde::Serialize)]
    struct Line<'a, T> {
        event: &'a str,
        data: &'a T,
    }
    let mut s = serde_json::to_string(&Line { event, data }).expect("a stream record serialises");
    s.push('\n');
    s
}

/// The first record of a run's partial log: what a result needs besides its intervals.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PartialStart {
    /// The test's id.
    pub test_id: String,
    /// The start instant, ns since the Unix epoch.
    pub start_unix_ns: u64,
    /// The plan the run carried out.
    pub plan: netblast_spec::result::Plan,
    /// Its streams.
    pub streams: Vec<netblast_spec::result::StreamInfo>,
}

/// One line of a partial log.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum PartialRecord {
    Start {
        partial: Box<PartialStart>,
    },
    Note {
        #[allow(dead_code)]
        note: String,
    },
    Interval(Box<netblast_spec::result::Interval>),
}

/// Whether `text` is a run's partial log (its first record is the start).
pub fn is_partial(text: &str) -> bool {
    text.trim_start().starts_with("{\"partial\"")
}

/// A run's partial log (`<output>.partial.jsonl`) read back as an incomplete result: its
/// intervals, the totals they add up to, and an error saying the run ended before its result.
/// A last line cut mid-record (a client killed with -9 while writing it) is left out and said;
/// a bad line elsewhere is an error naming it.
pub fn read_partial(text: &str) -> Result<RunResult, String> {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut start: Option<PartialStart> = None;
    let mut intervals = Vec::new();
    let mut cut = false;
    for (n, line) in lines.iter().enumerate() {
        match netblast_spec::upgrade::read::<PartialRecord>(line) {
            Ok(PartialRecord::Start { partial }) if n == 0 => start = Some(*partial),
            Ok(PartialRecord::Start { .. }) => return Err(format!("line {}: a second start record", n + 1)),
            Ok(PartialRecord::Note { .. }) => {}
            Ok(PartialRecord::Interval(iv)) => intervals.push(*iv),
            Err(_) if n + 1 == lines.len() && n > 0 => cut = true,
            Err(e) => return Err(format!("line {}: {e}", n + 1)),
        }
    }
    let start = start.ok_or("not a partial log: no start record first")?;
    let mut summary = netblast_spec::merge::summary_of_intervals(&intervals).map_err(|e| e.to_string())?;
    // What only the section knows: which answers succeeded, the loop, the version.
    let section = start.plan.profile.workload.section();
    if let (Some(h), Some(ok)) = (summary.http.as_mut(), section.expected_statuses()) {
        h.count_succeeded(&ok);
        let open = section.open_loop_rate().is_some() || !section.rate_steps().is_empty();
        h.mode = if open { "open_loop" } else { "closed_loop" }.into();
        h.version = section.version_name().unwrap_or_default();
    }
    let message = format!(
        "the run ended before its result was written: {} interval(s) read back from its partial log{}; the totals are \
         theirs (no CPU, kernel RTT or server figures)",
        intervals.len(),
        if cut { ", its last line cut mid-record and left out" } else { "" }
    );
    let probe = netblast_spec::result::ProbeInfo {
        tcp_source: "unknown (partial log)".into(),
        fallback_reason: None,
        kernel_run_ns: None,
        kernel_runs: None,
    };
    Ok(RunResult {
        // The run's own version is not in its log.
        netblast_version: String::new(),
        errors: vec![netblast_spec::result::RunError { at_s: summary.duration_s, source: "report".into(), message }],
        ..RunResult::new(start.test_id, start.start_unix_ns, start.plan, probe, start.streams, intervals, summary)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_whole_file() {
        let dir = std::env::temp_dir().join(format!("nb-atomic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("r.json");
        write_atomic(&p, b"first").unwrap();
        write_atomic(&p, b"second").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"second");
        let leftovers: Vec<_> =
            std::fs::read_dir(&dir).unwrap().flatten().filter(|e| e.file_name() != "r.json").collect();
        assert!(leftovers.is_empty(), "no temp files left");
        assert!(write_atomic(&dir.join("missing-dir/x.json"), b"x").is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
