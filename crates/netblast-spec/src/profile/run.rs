//! `[run]`: how long, how often to report, which CPUs (and, in the file, which kind of test:
//! the kind is the [`super::Workload`]'s tag, [`super::Kind`]).

use crate::units::{CpuList, Dur};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The `[run]` section, less the kind (which the workload carries).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSection {
    /// How long to run; a test needs this or a count bound of its kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<Dur>,
    /// Reporting interval (default 1 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Dur>,
    /// Client CPUs to run pinned workers on (default: every CPU this process may use).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<CpuList>,
    /// Bulk: run this long first and leave it out of the totals (iperf3 -O: skip slow
    /// start); the test lasts `duration` more. A whole number of reporting intervals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub omit: Option<Dur>,
    /// Latency probes beside the test (`[run.latency_probe]`, `--latency-probe`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_probe: Option<super::LatencyProbe>,
}

impl RunSection {
    /// Default reporting interval.
    pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);

    /// The reporting interval in effect.
    pub fn interval(&self) -> Duration {
        self.interval.map(Dur::get).unwrap_or(Self::DEFAULT_INTERVAL)
    }

    /// The time left out of the totals at the start (`--omit`), zero without it.
    pub fn omit(&self) -> Duration {
        self.omit.map(Dur::get).unwrap_or_default()
    }
}
