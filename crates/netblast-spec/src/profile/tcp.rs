//! `[tcp]`: socket options applied to every TCP socket of the test, on both ends (the buffer
//! sizes and the DSCP mark to its UDP sockets too).

use crate::mark::Dscp;
use crate::units::ByteSize;
use serde::{Deserialize, Serialize};

/// The `[tcp]` section. Every field is optional; unset means the kernel's default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpSection {
    /// Sets both SO_SNDBUF and SO_RCVBUF (iperf3 `-w`); `sndbuf`/`rcvbuf` win where set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<ByteSize>,
    /// SO_SNDBUF.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sndbuf: Option<ByteSize>,
    /// SO_RCVBUF.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcvbuf: Option<ByteSize>,
    /// TCP_MAXSEG, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mss: Option<u32>,
    /// TCP_CONGESTION algorithm name (e.g. `cubic`, `bbr`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion: Option<String>,
    /// TCP_NODELAY; unset means the kind's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodelay: Option<bool>,
    /// The DSCP mark of every data packet, both ways (`IP_TOS`, `IPV6_TCLASS`), on TCP and UDP
    /// sockets alike: a name (`EF`, `AF41`, `CS1`) or a number 0-63.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dscp: Option<Dscp>,
}

impl TcpSection {
    /// The SO_SNDBUF to set, if any.
    pub fn sndbuf(&self) -> Option<u64> {
        self.sndbuf.or(self.window).map(ByteSize::bytes)
    }

    /// The SO_RCVBUF to set, if any.
    pub fn rcvbuf(&self) -> Option<u64> {
        self.rcvbuf.or(self.window).map(ByteSize::bytes)
    }
}
