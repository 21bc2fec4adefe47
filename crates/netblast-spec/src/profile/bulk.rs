//! `[bulk]`: TCP bulk streams (iperf3's test).

use crate::units::ByteSize;
use serde::{Deserialize, Serialize};

/// Which way the bytes of a bulk test flow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Client sends, server receives (iperf3 default).
    #[default]
    Forward,
    /// Server sends, client receives (iperf3 `-R`).
    Reverse,
    /// Both at once, on separate connections (iperf3 `--bidir`).
    Bidir,
}

/// The way one connection carries bytes: from client to server or back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Way {
    /// Client to server.
    Up,
    /// Server to client.
    Down,
}

impl Way {
    /// Its name in reports and logs: `up` or `down` (as serialized).
    pub fn name(self) -> &'static str {
        match self {
            Way::Up => "up",
            Way::Down => "down",
        }
    }
}

impl Direction {
    /// The ways a test of this direction uses, in report order.
    pub fn ways(self) -> &'static [Way] {
        match self {
            Direction::Forward => &[Way::Up],
            Direction::Reverse => &[Way::Down],
            Direction::Bidir => &[Way::Up, Way::Down],
        }
    }
}

/// How the sender hands bytes to the kernel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum SendMode {
    /// `send()` from a user buffer (one copy into the kernel).
    #[default]
    #[cfg_attr(feature = "clap", value(skip))]
    Copy,
    /// `sendfile()` from an in-memory file: the kernel references page-cache pages, no copy
    /// from user space (what iperf3 `-Z` does).
    Sendfile,
    /// `send(MSG_ZEROCOPY)`: pages pinned and referenced; completions read from the error queue.
    /// On loopback the kernel copies anyway at delivery, so it does not help there.
    #[cfg_attr(feature = "clap", value(name = "msg"))]
    MsgZerocopy,
}

/// The `[bulk]` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BulkSection {
    /// Number of parallel flows (per direction).
    #[serde(default = "one")]
    pub flows: u32,
    /// forward, reverse or bidir.
    #[serde(default)]
    pub direction: Direction,
    /// Bytes handed to the kernel per send call (iperf3 `-l`).
    #[serde(default = "default_block")]
    pub block_bytes: ByteSize,
    /// How the sender hands bytes to the kernel (`copy`, `sendfile`, `msg_zerocopy`).
    #[serde(default)]
    pub send_mode: SendMode,
    /// Stop after this many bytes in total, split evenly over the sending flows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<ByteSize>,
    /// Each sending flow held at this rate (iperf3 `-b` over TCP), by the kernel's pacing
    /// (`SO_MAX_PACING_RATE`: payload bytes per second); none: as fast as TCP goes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bitrate: Option<crate::units::BitRate>,
    /// Server CPUs for the server's ends of the flows, flow i's on the i-th (wrapping), one
    /// pinned worker per CPU; none: the server's workers are not pinned (iperf3's default;
    /// its `-A n,m` pins both ends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpus: Option<crate::units::CpuList>,
}

fn one() -> u32 {
    1
}

fn default_block() -> ByteSize {
    ByteSize(BulkSection::DEFAULT_BLOCK)
}

impl BulkSection {
    /// Default send size: 2 MiB. Measured on the 2-core development VM (Linux 6.18, loopback,
    /// one flow): 128-512 KiB sends reach about 30 Gbit/s with the sender's CPU saturated,
    /// 768 KiB-1 MiB about 45, 2 MiB about 49, 4 MiB about 46 (iperf3's default 128 KiB: ~30;
    /// iperf3 -l 1M: ~44). Fewer, larger sends cost the sender fewer cycles per byte.
    pub const DEFAULT_BLOCK: u64 = 2 * 1024 * 1024;
}

impl Default for BulkSection {
    fn default() -> Self {
        BulkSection {
            flows: 1,
            direction: Direction::Forward,
            block_bytes: default_block(),
            send_mode: SendMode::Copy,
            bytes: None,
            bitrate: None,
            server_cpus: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_way_s_name_is_its_serialized_form() {
        for w in [Way::Up, Way::Down] {
            assert_eq!(serde_json::to_string(&w).unwrap(), format!("\"{}\"", w.name()));
        }
    }
}
