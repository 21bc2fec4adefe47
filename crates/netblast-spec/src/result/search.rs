//! A `--find-max` search as the result keeps it (`find_max`): what was varied, every step, and
//! the answer. The search itself is the `find_max` module.

use super::Verdict;
use serde::{Deserialize, Serialize};

/// Which flag a search varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Axis {
    /// `--rate`: operations per second in all (HTTP requests, cps connections).
    Rate,
    /// `-b`: bits per second per flow (UDP and message flows, paced TCP flows).
    Bitrate,
}

impl Axis {
    /// The flag, as the user gives it.
    pub fn flag(self) -> &'static str {
        match self {
            Axis::Rate => "--rate",
            Axis::Bitrate => "-b",
        }
    }

    /// The unit of the answer and of every step's offered and achieved rate.
    pub fn unit(self) -> &'static str {
        match self {
            Axis::Rate => "1/s",
            Axis::Bitrate => "bit/s",
        }
    }

    /// A rate of this axis in the report's own format (`18.2 k/s`, `190 Mbit/s`).
    pub fn fmt(self, v: f64) -> String {
        match self {
            Axis::Rate => crate::units::fmt_per_s(v),
            Axis::Bitrate => crate::units::fmt_bits_per_s(v),
        }
    }
}

/// Who limited a step that did not hold, or the search's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitedBy {
    /// The target (the server, the path): its answers, its latency, its loss.
    Target,
    /// netblast itself: its CPU, its send schedule, its ports or connections, its own
    /// receiving socket.
    Generator,
}

/// How a step went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepOutcome {
    /// Every threshold held and the offered rate was taken.
    Held,
    /// The target did not hold: a threshold failed, or it did not take the offered rate.
    Failed,
    /// netblast could not offer the rate: the step says nothing of the target.
    Generator,
}

/// One step of a search: a run at one offered rate, judged after its warm-up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// 1-based, in the order run.
    pub n: u32,
    /// The flag's value for this step (`--rate` in all, or `-b` per flow).
    pub asked: f64,
    /// The rate offered in all, in the axis' unit (`-b` × the sending flows).
    pub offered: f64,
    /// What the generator sent, in the same unit, over the judged span.
    pub sent: f64,
    /// What the target took (responses, connections, bits received), in the same unit.
    pub achieved: f64,
    /// The judged span, seconds (the step less its warm-up).
    pub seconds: f64,
    /// Operations judged (requests, connections, datagrams, messages).
    pub operations: u64,
    /// Median latency of the judged span, ns, when the kind measures latency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_ns: Option<u64>,
    /// 99th percentile latency of the judged span, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ns: Option<u64>,
    /// Share of HTTP requests without a successful response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<f64>,
    /// Share of messages, datagrams or connections lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost: Option<f64>,
    /// Every threshold, judged on the span.
    pub thresholds: Vec<Verdict>,
    /// How it went.
    pub outcome: StepOutcome,
    /// Why, in words: the cause of a step that did not hold (the server's answers, loss on
    /// the path, latency, the generator's CPU, schedule or ports), or what held.
    pub cause: String,
    /// The run was a repeat, to confirm a rate that held.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub repeat: bool,
    /// The step's run (its test id).
    pub test_id: String,
}

impl Step {
    /// The first failed threshold's text with what was measured (`p99<=20ms: 41.2 ms`), or the
    /// cause when no threshold failed.
    pub fn failing(&self) -> String {
        match self.thresholds.iter().find(|v| !v.pass) {
            Some(v) => format!("{} was {}", v.text, v.measured),
            None => self.cause.clone(),
        }
    }
}

/// How a search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    /// A highest rate that held, within the resolution of the lowest that did not.
    Found,
    /// The top of the range held: the target holds at least that much.
    TopHeld,
    /// Even the lowest rate did not hold.
    BottomFailed,
    /// netblast could not offer a rate: the answer is the highest rate that held below it.
    Generator,
    /// Stopped (Ctrl-C, or a run that failed) before the search ended: the range narrowed so far.
    Interrupted,
}

/// A search's answer and every step of it: `find_max` in the result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FindMax {
    /// What was varied.
    pub axis: Axis,
    /// The unit of `rate` and of every step's rates (`1/s`, `bit/s`).
    pub unit: String,
    /// The range asked, in the flag's own terms (`--rate` in all for a run, per client test
    /// for a fleet; `-b` per flow).
    pub range: [f64; 2],
    /// The resolution: the search stops when the lowest rate that failed is within this share
    /// above the highest that held.
    pub resolution: f64,
    /// Seconds left out at each step's start.
    pub warmup_s: f64,
    /// The thresholds, as given.
    pub thresholds: Vec<String>,
    /// Every step, in the order run.
    pub steps: Vec<Step>,
    /// How it ended.
    pub ending: Ending,
    /// The answer: the highest offered rate (in all, in `unit`) at which every run held;
    /// `None` when none did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Who set the limit: the target, or netblast itself; `None` when the top of the range held
    /// (no limit was reached).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limited_by: Option<LimitedBy>,
    /// The lowest offered rate that did not hold (in all, in `unit`), when one was run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_at: Option<f64>,
    /// What failed there: the threshold and its measured value, or the cause.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failing: Option<String>,
    /// The step's verdict there: its cause in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
}

impl FindMax {
    /// The answer in one line: `holds 18.2 k/s with p99<=20ms and http.failed<=1%; at 19.1 k/s
    /// p99<=20ms was 41.2 ms (the server ...)`.
    pub fn sentence(&self) -> String {
        let ax = self.axis;
        let with = if self.thresholds.is_empty() {
            String::from(" (the offered rate taken)")
        } else {
            format!(" with {}", self.thresholds.join(" and "))
        };
        let beyond = match (self.failed_at, &self.failing) {
            (Some(at), Some(f)) => format!("; at {} {f}", ax.fmt(at)),
            _ => String::new(),
        };
        match (self.ending, self.rate) {
            (Ending::Found, Some(r)) => format!("holds {}{with}{beyond}", ax.fmt(r)),
            (Ending::TopHeld, Some(r)) => {
                format!(
                    "holds {}{with}: the top of the range held, so the limit is higher (search a wider range)",
                    ax.fmt(r)
                )
            }
            (Ending::Generator, r) => format!(
                "the generator was the limit, not the target: {}{}; the target's capacity was not reached",
                r.map(|r| format!("held {}{with}", ax.fmt(r))).unwrap_or_else(|| "nothing held".into()),
                beyond
            ),
            (Ending::Interrupted, r) => format!(
                "interrupted after {} steps: {}{}",
                self.steps.len(),
                r.map(|r| format!("held {}{with}", ax.fmt(r))).unwrap_or_else(|| "nothing held yet".into()),
                self.failed_at.map(|f| format!(", failed at {}", ax.fmt(f))).unwrap_or_default()
            ),
            (_, _) => format!(
                "does not hold even {}{}",
                ax.fmt(self.range[0] * self.per_asked()),
                self.failing.as_ref().map(|f| format!(": {f}")).unwrap_or_default()
            ),
        }
    }

    /// Offered in all per unit of the flag (the sending flows for `-b`, 1 for `--rate`), as
    /// the steps ran.
    fn per_asked(&self) -> f64 {
        self.steps.first().map(|s| if s.asked > 0.0 { s.offered / s.asked } else { 1.0 }).unwrap_or(1.0)
    }
}
