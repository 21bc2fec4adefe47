//! netblast-probe: kernel TCP statistics (RTT, cwnd, retransmits) for netblast's own sockets.
//!
//! # Layout
//! - [`tcpinfo`]: `getsockopt(TCP_INFO)`, polled once per interval per socket.
//! - [`Probe`] / [`FlowWatch`]: what the engine uses: pick a source once per process, then
//!   watch each socket and sample it at interval ticks. The source in use, and why, goes into
//!   every result ([`netblast_spec::result::ProbeInfo`]).

pub mod tcpinfo;

use netblast_spec::result::{ProbeInfo, TcpStats};
use std::os::fd::RawFd;

/// Which source of TCP statistics the user asked for (`--probe`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProbeMode {
    /// Poll `TCP_INFO`.
    #[default]
    TcpInfo,
    /// Collect nothing.
    Off,
}

/// The source of TCP statistics for this process.
#[derive(Debug, Clone)]
pub struct Probe {
    mode: ProbeMode,
}

impl Probe {
    /// Opens the requested source.
    pub fn open(mode: ProbeMode) -> Probe {
        Probe { mode }
    }

    /// Where statistics come from, for the result.
    pub fn info(&self) -> ProbeInfo {
        match self.mode {
            ProbeMode::TcpInfo => ProbeInfo { tcp_source: "tcp_info".into(), fallback_reason: None },
            ProbeMode::Off => ProbeInfo { tcp_source: "off".into(), fallback_reason: None },
        }
    }

    /// Starts watching one socket.
    pub fn watch(&self, fd: RawFd) -> FlowWatch {
        FlowWatch { fd, mode: self.mode }
    }
}

/// One watched socket; sampled by the worker that owns the socket.
#[derive(Debug, Clone, Copy)]
pub struct FlowWatch {
    fd: RawFd,
    mode: ProbeMode,
}

impl FlowWatch {
    /// The socket's statistics now; `None` when collection is off or the socket is gone.
    pub fn sample(&self) -> Option<TcpStats> {
        match self.mode {
            ProbeMode::TcpInfo => tcpinfo::read(self.fd),
            ProbeMode::Off => None,
        }
    }
}
