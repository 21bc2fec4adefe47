//! `[rr]`: request/response round trips (qperf `tcp_lat`, netperf `TCP_RR`).

use super::RunSection;
use super::flags::{SharedFlags, one_rate, set};
use super::msgrate::Protocol;
use super::msgrate::max_message;
use super::section::{FieldError, Section, check_flows, plural};
use super::{Kind, Way};
use crate::error::SpecError;
use crate::units::{ByteSize, CpuList, Dur, Rate};
use serde::{Deserialize, Serialize};

/// How each end waits for the next message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum WaitMode {
    /// Blocking receive: the thread sleeps and is woken by the kernel (qperf, netperf).
    #[default]
    Block,
    /// Busy-poll in user space (non-blocking receive in a loop): no wake-up latency, one CPU
    /// fully used per flow on each end.
    Spin,
}

/// The `[rr]` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RrSection {
    /// Concurrent request/response flows, one per pinned CPU.
    #[serde(default = "one")]
    pub flows: u32,
    /// Request size (default 1 byte).
    #[serde(default = "one_byte")]
    pub req_bytes: ByteSize,
    /// Response size (default 1 byte).
    #[serde(default = "one_byte")]
    pub resp_bytes: ByteSize,
    /// tcp or udp.
    #[serde(default)]
    pub protocol: Protocol,
    /// block or spin, on both ends.
    #[serde(default)]
    pub wait: WaitMode,
    /// SO_BUSY_POLL in microseconds (kernel busy polling of the device queue), both ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_poll_us: Option<u32>,
    /// UDP only: a request without a response after this long counts as lost (default 200ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_timeout: Option<Dur>,
    /// Server CPUs for the peer flows, flow i on the i-th (wrapping); default: the client's list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpus: Option<CpuList>,
    /// Round trips per second in all, spread over the flows: each request sent on its flow's
    /// schedule, or at once when the last answer came after its slot (missed slots are skipped,
    /// never sent in a burst); latency counts from the send. Default: back to back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
}

fn one() -> u32 {
    1
}

fn one_byte() -> ByteSize {
    ByteSize(1)
}

impl RrSection {
    /// Default UDP response timeout.
    pub const DEFAULT_UDP_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(200);

    /// The UDP response timeout in effect.
    pub fn udp_timeout(&self) -> std::time::Duration {
        self.udp_timeout.map(Dur::get).unwrap_or(Self::DEFAULT_UDP_TIMEOUT)
    }
}

impl Default for RrSection {
    fn default() -> Self {
        RrSection {
            flows: 1,
            req_bytes: one_byte(),
            resp_bytes: one_byte(),
            protocol: Protocol::Tcp,
            wait: WaitMode::Block,
            busy_poll_us: None,
            udp_timeout: None,
            server_cpus: None,
            rate: None,
        }
    }
}

/// What is true of every rr test: it counts transactions, takes no `--omit`, and a fleet ranks
/// it by transactions per second.
pub(crate) const FACTS: super::section::KindFacts =
    super::section::KindFacts { unit: "transactions", takes_omit: false, headline: super::Headline::OpsSent };

impl Section for RrSection {
    fn open_loop_rate(&self) -> Option<f64> {
        self.rate.map(|r| r.per_second())
    }

    fn kind(&self) -> Kind {
        Kind::Rr
    }

    fn shared_flags(&self) -> &'static [&'static str] {
        &["--flows", "--req-size", "--resp-size", "--udp", "--server-cpus", "--rate"]
    }

    fn describe(&self, bound: &str) -> String {
        format!(
            "rr: {}-byte requests, {}-byte responses over {}, {} flow{}{}, wait {}, {bound}",
            self.req_bytes.bytes(),
            self.resp_bytes.bytes(),
            self.protocol.name().to_uppercase(),
            self.flows,
            plural(self.flows),
            self.rate.map(|r| format!(" at {} in all", crate::units::fmt_per_s(r.per_second()))).unwrap_or_default(),
            match self.wait {
                WaitMode::Block => "block",
                WaitMode::Spin => "spin",
            }
        )
    }

    fn check(&self) -> Result<(), FieldError> {
        check_flows("rr.flows", Some(self.flows))?;
        let max = max_message(self.protocol, 1 << 24);
        for (field, v) in [("rr.req_bytes", self.req_bytes), ("rr.resp_bytes", self.resp_bytes)] {
            if v.bytes() == 0 || v.bytes() > max {
                return Err((field, format!("{} is outside 1..{max} bytes", v.bytes())));
            }
        }
        if self.udp_timeout.is_some_and(|t| t.get() < std::time::Duration::from_millis(1)) {
            return Err(("rr.udp_timeout", "must be at least 1ms".into()));
        }
        if let Some(r) = self.rate {
            let per_flow = r.per_second() / f64::from(self.flows.max(1));
            if !(0.01..=1e7).contains(&per_flow) {
                return Err((
                    "rr.rate",
                    format!("{}/s over {} flows is outside 0.01..10M per flow", r.per_second(), self.flows),
                ));
            }
        }
        Ok(())
    }

    fn ways(&self) -> &'static [Way] {
        &[Way::Up]
    }

    fn stream_count(&self, _cpus: usize) -> usize {
        self.flows as usize
    }

    fn flow_count_mut(&mut self) -> Option<&mut u32> {
        Some(&mut self.flows)
    }

    fn server_cpus(&self) -> Option<&CpuList> {
        self.server_cpus.as_ref()
    }

    fn protocol(&self) -> Protocol {
        self.protocol
    }

    fn counts_msgs(&self) -> bool {
        true
    }

    fn nodelay_default(&self) -> bool {
        true
    }

    fn spins(&self) -> bool {
        self.wait == WaitMode::Spin
    }

    fn latency_name(&self) -> &'static str {
        "round-trip latency"
    }

    fn lost_name(&self) -> &'static str {
        "requests without a response"
    }

    fn sender_counts_lost(&self) -> bool {
        self.protocol == Protocol::Udp
    }

    fn headline_bits(&self) -> bool {
        false
    }
}

/// rr's own flags (the ones it shares with other kinds are [`SharedFlags`]).
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct RrFlags {
    /// rr: how both ends wait for the next message: block (sleep in recv) or spin (busy-poll).
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    pub wait: Option<WaitMode>,
    /// rr: SO_BUSY_POLL in microseconds on both ends.
    #[cfg_attr(feature = "clap", arg(long))]
    pub busy_poll: Option<u32>,
}

impl RrFlags {
    /// The flags that are set.
    pub(crate) fn set(&self) -> Vec<&'static str> {
        let set = [("--wait", self.wait.is_some()), ("--busy-poll", self.busy_poll.is_some())];
        set.into_iter().filter(|(_, on)| *on).map(|(f, _)| f).collect()
    }
}

impl RrSection {
    /// Applies the rr flags.
    pub fn apply(&mut self, own: &RrFlags, shared: &SharedFlags, _run: &mut RunSection) -> Result<(), SpecError> {
        set(&mut self.flows, shared.flows);
        set(&mut self.req_bytes, shared.req_size);
        set(&mut self.resp_bytes, shared.resp_size);
        if shared.udp {
            self.protocol = Protocol::Udp;
        }
        set(&mut self.wait, own.wait);
        if own.busy_poll.is_some() {
            self.busy_poll_us = own.busy_poll;
        }
        if shared.server_cpus.is_some() {
            self.server_cpus = shared.server_cpus.clone();
        }
        if let Some(r) = &shared.rate {
            self.rate = Some(one_rate(r, "an rr test runs")?);
        }
        Ok(())
    }

    /// The gap between one flow's requests at the rate asked, `None` back to back.
    pub fn gap(&self) -> Option<std::time::Duration> {
        let per_flow = self.rate?.per_second() / f64::from(self.flows.max(1));
        (per_flow > 0.0).then(|| std::time::Duration::from_secs_f64(1.0 / per_flow))
    }
}
