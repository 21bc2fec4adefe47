//! The JSON rendering of a result and atomic result files.

use netblast_spec::RunResult;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The result as pretty JSON (the `--json` output).
pub fn to_string(r: &RunResult) -> String {
    // RunResult is plain data with string keys; serialising cannot fail (a panic is a bug).
    serde_json::to_string_pretty(r).expect("RunResult serialises")
}

/// Reads a result written by `--output` or `--json`.
pub fn read(path: &Path) -> io::Result<RunResult> {
    let text = std::fs::read_to_string(path)?;
    serde_json::from_str(&text)
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

    /// Removes the log (after the final result is safely written).
    pub fn remove(self) -> io::Result<()> {
        std::fs::remove_file(&self.path)
    }
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
