//! `[cps]`: connections per second (netperf `TCP_CRR`, `ethr -t c`): open a TCP connection,
//! optionally exchange a request and a response, close it, and again, one flow per pinned CPU.
//! What firewall, SNAT and load-balancer tests measure.

use super::flags::{flag_err, parse_rate_range, set, SharedFlags};
use super::section::{check_flows, flows_words, FieldError, Section};
use super::RunSection;
use super::{Kind, Way};
use crate::error::SpecError;
use crate::units::{ByteSize, CpuList, Dur, Rate};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How each connection ends, and so which end keeps its TIME_WAIT.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum CloseMode {
    /// An orderly close (FIN): the client's end waits in TIME_WAIT for 60 s, holding its port,
    /// as real clients do; ports run out at about 28 000 / 60 s per destination unless the
    /// kernel reuses them (`net.ipv4.tcp_tw_reuse`).
    #[default]
    Fin,
    /// An abortive close (RST, `SO_LINGER` 0), as `ethr` does: no TIME_WAIT, so no port
    /// exhaustion; the server sees a reset, not a FIN.
    Rst,
    /// The server closes first, right after its response, as netperf `TCP_CRR`'s server and
    /// HTTP/1.0 servers do; the client reads the end of the stream, then closes. The TIME_WAIT
    /// is the server's, so the client's ports do not run out.
    Server,
}

impl CloseMode {
    /// The name as written in profiles and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            CloseMode::Fin => "fin",
            CloseMode::Rst => "rst",
            CloseMode::Server => "server",
        }
    }
}

/// The `[cps]` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpsSection {
    /// Flows, each opening one connection at a time; default one per selected client CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<u32>,
    /// Bytes the client sends on each connection before waiting for the response (0: none;
    /// default 1, as netperf TCP_CRR).
    #[serde(default = "one_byte")]
    pub req_bytes: ByteSize,
    /// Bytes the server answers each request with (0: none; default 1).
    #[serde(default = "one_byte")]
    pub resp_bytes: ByteSize,
    /// New connections per second in all, spread evenly over the flows; none: as fast as each
    /// flow can. A flow that falls behind opens its next connection at once (paced, closed
    /// loop: a slow connection delays the ones after it on its flow).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
    /// `fin` (default: the client closes first), `rst` or `server` (the server closes first).
    #[serde(default, skip_serializing_if = "is_fin")]
    pub close: CloseMode,
    /// A connection not established, or not answered, within this long fails as timed out
    /// (default 3 s: one SYN retransmission, at 1 s, still succeeds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Dur>,
    /// Server CPUs for the flows' listeners, flow i on the i-th (wrapping); default: the
    /// client's list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpus: Option<CpuList>,
}

fn one_byte() -> ByteSize {
    ByteSize(1)
}

fn is_fin(c: &CloseMode) -> bool {
    *c == CloseMode::Fin
}

impl CpsSection {
    /// Default connection timeout.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3);
    /// Longest timeout a profile may set.
    pub const MAX_TIMEOUT: Duration = Duration::from_secs(60);
    /// Largest request or response.
    pub const MAX_MSG: u64 = 1 << 24;

    /// The connection timeout in effect.
    pub fn timeout(&self) -> Duration {
        self.timeout.map(Dur::get).unwrap_or(Self::DEFAULT_TIMEOUT)
    }
}

impl Default for CpsSection {
    fn default() -> Self {
        CpsSection {
            flows: None,
            req_bytes: one_byte(),
            resp_bytes: one_byte(),
            rate: None,
            close: CloseMode::Fin,
            timeout: None,
            server_cpus: None,
        }
    }
}

impl Section for CpsSection {
    fn kind(&self) -> Kind {
        Kind::Cps
    }

    fn shared_flags(&self) -> &'static [&'static str] {
        &["--flows", "--req-size", "--resp-size", "--server-cpus", "--rate", "--timeout"]
    }

    fn describe(&self, bound: &str) -> String {
        format!(
            "cps: TCP connections{}, {}-byte request and {}-byte response on each, close with {}, {}, {bound}",
            self.rate.map(|r| format!(" at {} in all", crate::units::fmt_per_s(r.per_second()))).unwrap_or_default(),
            self.req_bytes.bytes(),
            self.resp_bytes.bytes(),
            self.close.name().to_uppercase(),
            flows_words(self.flows),
        )
    }

    fn check(&self) -> Result<(), FieldError> {
        check_flows("cps.flows", self.flows)?;
        for (field, v) in [("cps.req_bytes", self.req_bytes), ("cps.resp_bytes", self.resp_bytes)] {
            if v.bytes() > CpsSection::MAX_MSG {
                return Err((field, format!("{} is outside 0..{} bytes", v.bytes(), CpsSection::MAX_MSG)));
            }
        }
        if let Some(r) = self.rate {
            if !(r.per_second() >= 1.0 && r.per_second() <= 1e8) {
                return Err(("cps.rate", format!("{} connections/s is outside 1..100M", r.per_second())));
            }
        }
        if let Some(t) = self.timeout {
            if t.get() < Duration::from_millis(1) || t.get() > CpsSection::MAX_TIMEOUT {
                return Err(("cps.timeout", format!("{t} is outside 1ms..60s")));
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

    fn share_totals(&mut self, f: f64, _part_of: &dyn Fn(u64) -> u64) {
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

    fn lost_name(&self) -> &'static str {
        "connections failed"
    }

    fn own_listener(&self) -> bool {
        true
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
}

/// cps' own flags (the ones it shares with other kinds are [`SharedFlags`]).
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct CpsFlags {
    /// cps: how each connection ends: fin (the client closes first; its port waits in
    /// TIME_WAIT), rst (SO_LINGER 0, as ethr: no TIME_WAIT, no port exhaustion) or server (the
    /// server closes first, as netperf TCP_CRR: the TIME_WAIT is the server's).
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    pub close: Option<CloseMode>,
}

impl CpsFlags {
    /// The flags that are set.
    pub(crate) fn set(&self) -> Vec<&'static str> {
        let set = [("--close", self.close.is_some())];
        set.into_iter().filter(|(_, on)| *on).map(|(f, _)| f).collect()
    }
}

impl CpsSection {
    /// Applies the cps flags (one rate: a ramp is refused).
    pub fn apply(&mut self, own: &CpsFlags, shared: &SharedFlags, _run: &mut RunSection) -> Result<(), SpecError> {
        if shared.flows.is_some() {
            self.flows = shared.flows;
        }
        set(&mut self.req_bytes, shared.req_size);
        set(&mut self.resp_bytes, shared.resp_size);
        if let Some(r) = &shared.rate {
            let (rate, to) = parse_rate_range(r).map_err(|e| flag_err("--rate", e))?;
            if to.is_some() {
                return Err(flag_err("--rate", "a cps test runs at one rate; ramps are for http tests".into()));
            }
            self.rate = Some(rate);
        }
        if shared.timeout.is_some() {
            self.timeout = shared.timeout;
        }
        set(&mut self.close, own.close);
        if shared.server_cpus.is_some() {
            self.server_cpus = shared.server_cpus.clone();
        }
        Ok(())
    }
}
