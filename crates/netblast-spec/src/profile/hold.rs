//! `[hold]`: concurrent connections held (RFC 9411's concurrent TCP connection capacity): open
//! `conns` TCP connections, keep every one of them, and check each once per reporting interval
//! with a one-byte echo. What a firewall's, a NAT's or a load balancer's connection table holds,
//! and whether it drops connections that stay open (an idle timeout shorter than the interval).

use super::RunSection;
use super::flags::{SharedFlags, one_rate};
use super::section::{FieldError, Section, check_flows, flows_words};
use super::{Kind, Way};
use crate::error::SpecError;
use crate::units::{CpuList, Dur, Rate};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The `[hold]` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HoldSection {
    /// Flows (pinned workers on each end, each holding its share of the connections); default:
    /// one per CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<u32>,
    /// Connections to hold in all, shared among the flows (default 1000).
    #[serde(default = "default_conns")]
    pub conns: u32,
    /// Connections opened per second in all, until they are held; default: as fast as each
    /// flow's connections are established, one at a time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
    /// A connection not established, or a probe not answered, within this long fails (default
    /// 3s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Dur>,
    /// Server CPUs to pin the flows' server ends to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpus: Option<CpuList>,
}

fn default_conns() -> u32 {
    HoldSection::DEFAULT_CONNS
}

impl HoldSection {
    /// Default connection and probe timeout.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3);
    /// Most connections one test holds (each is a socket on both ends).
    pub const MAX_CONNS: u32 = 1_000_000;
    /// Default connections held.
    pub const DEFAULT_CONNS: u32 = 1000;

    /// The timeout in effect.
    pub fn timeout(&self) -> Duration {
        self.timeout.map(Dur::get).unwrap_or(Self::DEFAULT_TIMEOUT)
    }

    /// The connections flow `i` of `flows` holds: the total split so that the shares add up.
    pub fn share(&self, i: u32, flows: u32) -> u32 {
        let (n, f) = (u64::from(self.conns), u64::from(flows.max(1)));
        let at = |k: u64| n * k / f;
        (at(u64::from(i) + 1) - at(u64::from(i))) as u32
    }
}

impl Default for HoldSection {
    fn default() -> Self {
        HoldSection { flows: None, conns: Self::DEFAULT_CONNS, rate: None, timeout: None, server_cpus: None }
    }
}

/// What is true of every hold test: its streams count the probes their held connections
/// answered (one per connection per interval: an interval's count is the connections held at
/// its end), it takes no `--omit`, and a fleet ranks it by those answers per second.
pub(crate) const FACTS: super::section::KindFacts =
    super::section::KindFacts { unit: "answered probes", takes_omit: false, headline: super::Headline::OpsSent };

impl Section for HoldSection {
    fn kind(&self) -> Kind {
        Kind::Hold
    }

    fn shared_flags(&self) -> &'static [&'static str] {
        &["--flows", "--server-cpus", "--rate", "--timeout"]
    }

    fn describe(&self, bound: &str) -> String {
        format!(
            "hold: {} TCP connections held{}, each answering a 1-byte probe every interval, {}, {bound}",
            self.conns,
            self.rate
                .map(|r| format!(", opened at {} in all", crate::units::fmt_per_s(r.per_second())))
                .unwrap_or_default(),
            flows_words(self.flows),
        )
    }

    fn check(&self) -> Result<(), FieldError> {
        check_flows("hold.flows", self.flows)?;
        if self.conns == 0 || self.conns > Self::MAX_CONNS {
            return Err(("hold.conns", format!("{} is outside 1..{}", self.conns, Self::MAX_CONNS)));
        }
        if let Some(f) = self.flows {
            if f > self.conns {
                return Err((
                    "hold.flows",
                    format!("{f} flows for {} connections: each flow holds one at least", self.conns),
                ));
            }
        }
        if let Some(r) = self.rate {
            if !(r.per_second() >= 1.0 && r.per_second() <= 1e7) {
                return Err(("hold.rate", format!("{} connections/s is outside 1..10M", r.per_second())));
            }
        }
        if let Some(t) = self.timeout {
            if t.get() < Duration::from_millis(1) || t.get() > Duration::from_secs(60) {
                return Err(("hold.timeout", format!("{t} is outside 1ms..60s")));
            }
        }
        Ok(())
    }

    fn ways(&self) -> &'static [Way] {
        &[Way::Up]
    }

    fn stream_count(&self, cpus: usize) -> usize {
        self.flows.map(|f| f as usize).unwrap_or(cpus.max(1))
    }

    fn flows_per_cpu(&self) -> bool {
        self.flows.is_none()
    }

    fn flow_count_mut(&mut self) -> Option<&mut u32> {
        self.flows.as_mut()
    }

    fn share_totals(&mut self, f: f64, part_of: &dyn Fn(u64) -> u64) {
        self.conns = part_of(u64::from(self.conns)).max(1) as u32;
        if let Some(r) = self.rate.as_mut() {
            r.0 *= f;
        }
    }

    fn server_cpus(&self) -> Option<&CpuList> {
        self.server_cpus.as_ref()
    }

    fn counts_msgs(&self) -> bool {
        true
    }

    fn nodelay_default(&self) -> bool {
        true
    }

    fn latency_name(&self) -> &'static str {
        "connect latency"
    }

    fn latency_samples(&self) -> &'static str {
        "connections opened"
    }

    fn lost_name(&self) -> &'static str {
        "connections failed or dropped"
    }

    fn own_listener(&self) -> bool {
        true
    }

    fn server_held_conns(&self) -> u64 {
        u64::from(self.conns)
    }

    fn sender_counts_lost(&self) -> bool {
        true
    }

    fn sent_counts_lost(&self) -> bool {
        false
    }

    fn headline_bits(&self) -> bool {
        false
    }

    fn unsearchable(&self) -> Option<&'static str> {
        Some(
            "a hold test's --rate only paces how its connections open; the load it offers is the \
             connections it holds (--conns): run it at the counts to compare",
        )
    }
}

/// hold's own flags (the ones it shares with other kinds are [`SharedFlags`]).
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct HoldFlags {
    /// hold: connections to hold in all, shared among the flows.
    #[cfg_attr(feature = "clap", arg(long, value_name = "N"))]
    pub conns: Option<u32>,
}

impl HoldFlags {
    /// The flags that are set.
    pub(crate) fn set(&self) -> Vec<&'static str> {
        if self.conns.is_some() { vec!["--conns"] } else { Vec::new() }
    }
}

impl HoldSection {
    /// Applies the hold flags (one rate: a ramp is refused).
    pub fn apply(&mut self, own: &HoldFlags, shared: &SharedFlags, _run: &mut RunSection) -> Result<(), SpecError> {
        if shared.flows.is_some() {
            self.flows = shared.flows;
        }
        if let Some(n) = own.conns {
            self.conns = n;
        }
        if let Some(r) = &shared.rate {
            self.rate = Some(one_rate(r, "a hold test opens")?);
        }
        if shared.timeout.is_some() {
            self.timeout = shared.timeout;
        }
        if shared.server_cpus.is_some() {
            self.server_cpus = shared.server_cpus.clone();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shares_add_up_to_the_connections() {
        let h = HoldSection { conns: 10, ..Default::default() };
        let shares: Vec<u32> = (0..3).map(|i| h.share(i, 3)).collect();
        assert_eq!(shares, [3, 3, 4]);
        assert_eq!(shares.iter().sum::<u32>(), 10);
        assert_eq!(h.share(0, 1), 10);
    }

    #[test]
    fn check_names_the_field() {
        let bad = |h: HoldSection| h.check().unwrap_err().0;
        assert_eq!(bad(HoldSection { conns: 0, ..Default::default() }), "hold.conns");
        assert_eq!(bad(HoldSection { conns: 2, flows: Some(3), ..Default::default() }), "hold.flows");
        assert_eq!(bad(HoldSection { rate: Some(Rate(0.5)), ..Default::default() }), "hold.rate");
        assert!(HoldSection::default().check().is_ok());
    }
}
