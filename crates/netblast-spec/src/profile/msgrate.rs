//! `[msgrate]`: small messages as fast as possible, one flow per pinned CPU (qperf `tcp_bw -m 1`
//! pinned with taskset, summed by hand, in one command).

use crate::units::{BitRate, ByteSize, CpuList};
use serde::{Deserialize, Serialize};

/// Transport of a message test.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    /// TCP: messages are a byte stream; the kernel may coalesce them into fewer segments.
    #[default]
    Tcp,
    /// UDP: one datagram per message, set up over a TCP handshake.
    Udp,
}

impl Protocol {
    /// The name as written in profiles.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
        }
    }
}

/// How a TCP message receiver reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum RecvMode {
    /// Read what has arrived, up to 256 KiB per call (waking for 4 KiB at least): the
    /// receiver's cost per message is small, and it keeps up with any sender.
    #[default]
    Batch,
    /// Read one message per call, as qperf's receiver does (`qperf -m 1 tcp_bw`): every
    /// message costs the receiver a system call, which is the work qperf measures.
    Each,
}

impl RecvMode {
    /// The name as written in profiles and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            RecvMode::Batch => "batch",
            RecvMode::Each => "each",
        }
    }
}

/// Who receives a UDP msgrate test's datagrams at the server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Receivers {
    /// A socket per flow, connected to its sender: counts, loss and drops per flow.
    #[default]
    Flow,
    /// One socket per receiving server CPU, all on one port in an `SO_REUSEPORT` group, each
    /// taking the datagrams its CPU's network stack processed (`SO_INCOMING_CPU`): a busy CPU's
    /// datagrams never wait for a thread on another one. Counts and queue drops are per
    /// receiver, loss is per test (sent by every flow less received by every receiver).
    PerCpu,
}

impl Receivers {
    /// The name as written in profiles and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Receivers::Flow => "flow",
            Receivers::PerCpu => "per_cpu",
        }
    }
}

/// The `[msgrate]` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MsgrateSection {
    /// Flows; default one per selected client CPU (each pinned to its own CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<u32>,
    /// Bytes per message (default 1).
    #[serde(default = "one_byte")]
    pub msg_bytes: ByteSize,
    /// tcp or udp.
    #[serde(default)]
    pub protocol: Protocol,
    /// Messages handed to the kernel per system call (`sendmmsg`); each is still its own send
    /// operation (TCP) or datagram (UDP). 1 means one `send` call per message.
    #[serde(default = "default_batch")]
    pub batch: u32,
    /// Server CPUs for the peer flows, flow i on the i-th (wrapping); default: the client's list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpus: Option<CpuList>,
    /// How TCP receivers read: `batch` (default) or `each` (one message per call, as qperf).
    #[serde(default, skip_serializing_if = "is_batch")]
    pub recv: RecvMode,
    /// Which way messages go: `forward` (client to server, default), `reverse`, `bidir`
    /// (`flows` each way).
    #[serde(default, skip_serializing_if = "is_forward")]
    pub direction: super::Direction,
    /// UDP: the target bit rate per flow (iperf3 `-b`), datagrams paced evenly; none: as fast
    /// as possible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bitrate: Option<BitRate>,
    /// UDP: the server's receivers, a socket per `flow` (default) or `per_cpu`.
    #[serde(default, skip_serializing_if = "is_flow")]
    pub receivers: Receivers,
    /// TCP: every message ends a record (`MSG_EOR`): the kernel never appends a later message
    /// to its segment, so each leaves as a segment of its own whatever Nagle and autocorking
    /// would join (one message, one packet: a packet rate).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub eor: bool,
    /// UDP: the senders hand the kernel up to 64 datagrams per send (`UDP_SEGMENT`, GSO); the
    /// kernel cuts them into datagrams of `msg_bytes`, each still sequence-numbered: the wire
    /// is unchanged, the sender's system calls are fewer (iperf3 `--gsro`, sending half).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gso: bool,
    /// UDP: the receivers take coalesced datagrams of one flow in one buffer (`UDP_GRO`), cut
    /// by the segment size the kernel gives (iperf3 `--gsro`, receiving half).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gro: bool,
}

fn is_flow(r: &Receivers) -> bool {
    *r == Receivers::Flow
}

fn is_forward(d: &super::Direction) -> bool {
    *d == super::Direction::Forward
}

fn is_batch(r: &RecvMode) -> bool {
    *r == RecvMode::Batch
}

fn one_byte() -> ByteSize {
    ByteSize(1)
}

fn default_batch() -> u32 {
    MsgrateSection::DEFAULT_BATCH
}

impl MsgrateSection {
    /// Default messages per `sendmmsg` call.
    pub const DEFAULT_BATCH: u32 = 64;
    /// Largest UDP payload.
    pub const MAX_UDP: u64 = 65_507;
    /// UDP datagrams of at least this many bytes carry a sequence number and a send time
    /// (16 bytes): the receiver reports loss, reordering, duplicates and jitter from them.
    pub const SEQ_HEADER: u64 = 16;

    /// With GRO, the most datagrams of `msg_bytes` the kernel coalesces into one buffer (64
    /// segments, 64 KB): one drop the kernel counts may be this many datagrams.
    pub fn gro_coalesced(&self) -> u64 {
        (65_535 / self.msg_bytes.bytes().max(1)).clamp(1, 64)
    }
}

impl Default for MsgrateSection {
    fn default() -> Self {
        MsgrateSection {
            flows: None,
            msg_bytes: one_byte(),
            protocol: Protocol::Tcp,
            batch: MsgrateSection::DEFAULT_BATCH,
            server_cpus: None,
            recv: RecvMode::Batch,
            direction: super::Direction::Forward,
            bitrate: None,
            receivers: Receivers::Flow,
            eor: false,
            gso: false,
            gro: false,
        }
    }
}
