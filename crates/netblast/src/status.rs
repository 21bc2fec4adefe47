//! The live status line of a run or a fleet on a terminal: elapsed of the bound, the latest
//! interval's rate, for HTTP its errors, for a fleet the tests reporting and agents failed,
//! redrawn in place on stderr below the interval lines. Off when
//! stderr is not a terminal (indicatif draws nothing there) and with `--quiet`.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use netblast_spec::result::Interval;
use netblast_spec::units::{fmt_bits_per_s, fmt_per_s};
use std::time::Duration;

/// Where a command's output goes: stdout, or the file of `--logfile` (appended, as iperf3
/// does); each line after the time of day in `--timestamps`'s format when it is set.
#[derive(Default)]
struct Output {
    file: Option<std::fs::File>,
    stamp: Option<std::ffi::CString>,
    /// Whether the next byte written starts a line.
    mid_line: bool,
}

static OUTPUT: std::sync::Mutex<Output> = std::sync::Mutex::new(Output { file: None, stamp: None, mid_line: false });

/// Sends what [`print_stdout`] prints to `logfile` (appended; created when missing) instead of
/// stdout, and starts each line with the local time in `stamp`'s `strftime` format (iperf3's
/// `--timestamps`, `"%c "` by default). The error names the file.
pub fn set_output(logfile: Option<&std::path::Path>, stamp: Option<&str>) -> Result<(), String> {
    let mut o = OUTPUT.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(path) = logfile {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("--logfile {}: {e}", path.display()))?;
        o.file = Some(f);
    }
    if let Some(fmt) = stamp {
        let c = std::ffi::CString::new(fmt).map_err(|_| "--timestamps: the format holds a NUL byte".to_string())?;
        if fmt.len() > 200 {
            return Err("--timestamps: a format of at most 200 bytes".into());
        }
        o.stamp = Some(c);
    }
    Ok(())
}

/// The local time now in `fmt` (`strftime`).
fn local_time(fmt: &std::ffi::CStr) -> String {
    // SAFETY: `time(NULL)` has no preconditions; `localtime_r` writes into `tm`, which lives
    // here; `strftime` writes at most `buf.len()` bytes into `buf` and returns how many.
    unsafe {
        let now = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&now, &mut tm).is_null() {
            return String::new();
        }
        let mut buf = [0u8; 512];
        let n = libc::strftime(buf.as_mut_ptr().cast(), buf.len(), fmt.as_ptr(), &tm);
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }
}

/// Writes to stdout (or `--logfile`) and flushes; a closed stdout (`| head`) is not an error.
pub fn print_stdout(s: &str) {
    use std::io::Write;
    let mut o = OUTPUT.lock().unwrap_or_else(|p| p.into_inner());
    let text = match o.stamp.clone() {
        Some(fmt) => {
            let now = local_time(&fmt);
            let mut t = String::with_capacity(s.len() + 32);
            for piece in s.split_inclusive('\n') {
                if !o.mid_line {
                    t.push_str(&now);
                }
                t.push_str(piece);
                o.mid_line = !piece.ends_with('\n');
            }
            t
        }
        None => s.to_string(),
    };
    match o.file.as_mut() {
        Some(f) => {
            let _ = f.write_all(text.as_bytes()).and_then(|_| f.flush());
        }
        None => {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
        }
    }
}

/// The status line of one run.
pub struct Status {
    bound: Duration,
    on: bool,
    bar: Option<ProgressBar>,
    http_errors: u64,
}

impl Status {
    /// A status line for a run of `bound`; draws nothing when `on` is false.
    pub fn new(bound: Duration, on: bool) -> Status {
        Status { bound, on, bar: None, http_errors: 0 }
    }

    /// The test started: prints `header`, then shows the line (its clock starts now).
    pub fn started(&mut self, header: &str) {
        print_stdout(header);
        if !self.on {
            return;
        }
        let bar = ProgressBar::with_draw_target(
            Some(self.bound.as_millis().max(1) as u64),
            ProgressDrawTarget::stderr_with_hz(4),
        );
        bar.set_style(
            ProgressStyle::with_template("{spinner} {elapsed_precise} of {len_s} [{wide_bar}] {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .with_key("len_s", |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = write!(w, "{:.0} s", s.len().unwrap_or(0) as f64 / 1000.0);
                })
                .progress_chars("=> "),
        );
        bar.set_message("running");
        bar.enable_steady_tick(Duration::from_millis(250));
        self.bar = Some(bar);
    }

    /// Prints interval lines above the status line, then updates it from the interval.
    pub fn interval(&mut self, lines: &str, iv: &Interval) {
        let Some(b) = self.bar.clone() else {
            return print_stdout(lines);
        };
        b.suspend(|| print_stdout(lines));
        b.set_position((iv.end_s * 1000.0) as u64);
        b.set_message(self.message(iv));
    }

    fn message(&mut self, iv: &Interval) -> String {
        let span = (iv.end_s - iv.start_s).max(1e-9);
        if let Some(h) = &iv.http {
            self.http_errors += h.errors;
            return format!(
                "{} responses, {} errors so far ({:.2}-{:.2} s)",
                fmt_per_s(h.responses_per_s),
                self.http_errors,
                iv.start_s,
                iv.end_s
            );
        }
        let bits: f64 = iv.sums.iter().map(|w| w.received_bits_per_s.unwrap_or(w.sent_bits_per_s)).sum();
        let msgs: Option<f64> = iv
            .sums
            .iter()
            .map(|w| w.msgs.as_ref().and_then(|m| m.received_per_s.or(m.sent_per_s)))
            .try_fold(0.0, |acc, m| m.map(|m| acc + m));
        match msgs {
            Some(m) if m > 0.0 => format!("{} messages ({:.2}-{:.2} s)", fmt_per_s(m), iv.start_s, iv.end_s),
            _ => format!("{} ({:.2} s ending {:.2} s)", fmt_bits_per_s(bits), span, iv.end_s),
        }
    }

    /// Prints a fleet's lines above the status line, then updates it from its latest
    /// fleet-wide interval: rate, tests reporting, agents failed so far.
    pub fn fleet_interval(&mut self, lines: &str, iv: &netblast_coord::FleetInterval, failed: usize) {
        let Some(b) = self.bar.clone() else {
            return print_stdout(lines);
        };
        b.suspend(|| print_stdout(lines));
        b.set_position((iv.end_s * 1000.0) as u64);
        let rate = match iv.ops {
            Some((what, r)) => format!("{} {what}", fmt_per_s(r)),
            None => fmt_bits_per_s(iv.bits_per_s),
        };
        b.set_message(format!(
            "{rate}, {}/{} tests reporting, {failed} agent(s) failed ({:.2}-{:.2} s)",
            iv.reporting, iv.running, iv.start_s, iv.end_s
        ));
    }

    /// Prints lines above the status line (or plainly, when there is none).
    pub fn print(&self, lines: &str) {
        match &self.bar {
            Some(b) => b.suspend(|| print_stdout(lines)),
            None => print_stdout(lines),
        }
    }

    /// Removes the status line (before the summary is printed).
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
