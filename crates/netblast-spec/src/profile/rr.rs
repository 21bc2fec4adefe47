//! `[rr]`: request/response round trips (qperf `tcp_lat`, netperf `TCP_RR`).

use super::msgrate::Protocol;
use crate::units::{ByteSize, CpuList, Dur};
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
        }
    }
}
