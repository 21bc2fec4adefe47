//! `[run.latency_probe]`: latency probes beside a test (`--latency-probe`): small round trips
//! on a flow of their own to the same server, from an idle phase before the load through the
//! load, so a result says how much delay the load itself added (flent's RRUL, the IETF
//! responsiveness measure).

use super::msgrate::Protocol;
use super::section::{FieldError, Section};
use crate::units::{Dur, Rate};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The latency probe's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatencyProbe {
    /// Round trips per second on the probe flow (default [`LatencyProbe::DEFAULT_RATE`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
    /// How long the probe runs before the load starts (default [`LatencyProbe::DEFAULT_IDLE`]):
    /// a whole number of reporting intervals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle: Option<Dur>,
    /// The probe flow's transport: tcp (default) or udp.
    #[serde(default)]
    pub protocol: Protocol,
}

impl Default for LatencyProbe {
    fn default() -> Self {
        LatencyProbe { rate: None, idle: None, protocol: Protocol::Tcp }
    }
}

impl LatencyProbe {
    /// Probe round trips per second when none is given: a few, so the probe adds no load.
    pub const DEFAULT_RATE: f64 = 5.0;
    /// The idle phase when none is given.
    pub const DEFAULT_IDLE: Duration = Duration::from_secs(2);
    /// Most probe round trips per second: a probe measures, it does not load.
    pub const MAX_RATE: f64 = 1000.0;
    /// Longest idle phase.
    pub const MAX_IDLE: Duration = Duration::from_secs(60);
    /// Least time from now to the probe's start: its control connection, handshake and
    /// stream (a coordinator's lead grows by it and the idle phase).
    pub const SETUP: Duration = Duration::from_millis(500);

    /// Round trips per second in effect.
    pub fn rate(&self) -> f64 {
        self.rate.map(Rate::per_second).unwrap_or(Self::DEFAULT_RATE)
    }

    /// The idle phase in effect.
    pub fn idle(&self) -> Duration {
        self.idle.map(Dur::get).unwrap_or(Self::DEFAULT_IDLE)
    }

    /// The idle phase in reporting intervals of `interval`.
    pub fn idle_intervals(&self, interval: Duration) -> u32 {
        (self.idle().as_nanos() / interval.as_nanos().max(1)) as u32
    }

    /// Checks the settings against the kind and the reporting interval.
    pub fn check(&self, section: &dyn Section, interval: Duration) -> Result<(), FieldError> {
        if section.aims_at_urls() {
            return Err((
                "run.latency_probe",
                "applies to tests against `netblast serve` (bulk, udp, msgrate, rr, cps); an HTTP test's \
                 server has no probe port"
                    .into(),
            ));
        }
        let rate = self.rate();
        if !(rate.is_finite() && rate > 0.0 && rate <= Self::MAX_RATE) {
            return Err((
                "run.latency_probe.rate",
                format!("{rate}/s is outside 0..{}/s: a probe measures, it does not load", Self::MAX_RATE),
            ));
        }
        let idle = self.idle();
        if idle.is_zero() || idle > Self::MAX_IDLE || idle.as_nanos() % interval.as_nanos().max(1) != 0 {
            return Err((
                "run.latency_probe.idle",
                format!(
                    "{} must be a whole number of reporting intervals ({}), at most {}s",
                    Dur(idle),
                    Dur(interval),
                    Self::MAX_IDLE.as_secs()
                ),
            ));
        }
        // The idle phase needs a few samples to mean anything.
        if rate * idle.as_secs_f64() < 2.0 {
            return Err((
                "run.latency_probe.idle",
                format!("{} at {rate}/s holds fewer than 2 round trips: raise the rate or the idle phase", Dur(idle)),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{BulkSection, HttpSection, RrSection};

    #[test]
    fn defaults_and_checks() {
        let p = LatencyProbe::default();
        assert_eq!(p.rate(), 5.0);
        assert_eq!(p.idle(), Duration::from_secs(2));
        assert_eq!(p.idle_intervals(Duration::from_millis(500)), 4);
        let s = Duration::from_secs(1);
        assert!(p.check(&BulkSection::default(), s).is_ok());
        assert!(p.check(&HttpSection::default(), s).unwrap_err().1.contains("netblast serve"));
        let odd = LatencyProbe { idle: Some(Dur(Duration::from_millis(1500))), ..p.clone() };
        assert_eq!(odd.check(&BulkSection::default(), s).unwrap_err().0, "run.latency_probe.idle");
        let fast = LatencyProbe { rate: Some(Rate(5000.0)), ..p.clone() };
        assert_eq!(fast.check(&RrSection::default(), s).unwrap_err().0, "run.latency_probe.rate");
        let sparse = LatencyProbe { rate: Some(Rate(0.5)), ..p };
        assert!(sparse.check(&BulkSection::default(), s).unwrap_err().1.contains("fewer than 2"));
    }
}
