//! `[cps]`: connections per second (netperf `TCP_CRR`, `ethr -t c`): open a TCP connection,
//! optionally exchange a request and a response, close it, and again, one flow per pinned CPU.
//! What firewall, SNAT and load-balancer tests measure.

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
