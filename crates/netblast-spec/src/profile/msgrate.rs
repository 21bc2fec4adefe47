//! `[msgrate]`: small messages as fast as possible, one flow per pinned CPU (qperf `tcp_bw -m 1`
//! pinned with taskset, summed by hand, in one command).

use super::RunSection;
use super::flags::{SharedFlags, set};
use super::section::{FieldError, Section, check_flows, flows_words};
use super::{Direction, Kind, MAX_FLOWS, Way};
use crate::error::SpecError;
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
    /// UDP: the server-to-client flows' rate when it differs (`-b UP/DOWN`); none: `bitrate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bitrate_down: Option<BitRate>,
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
    /// UDP datagrams of at least this many bytes carry a sequence number, a send time and the
    /// test's identity (24 bytes): the receiver reports loss, reordering, duplicates and jitter
    /// from them, and counts datagrams that are not the test's apart.
    pub const SEQ_HEADER: u64 = 24;

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
            bitrate_down: None,
            receivers: Receivers::Flow,
            eor: false,
            gso: false,
            gro: false,
        }
    }
}

/// The largest message of `protocol`: `tcp_max` over TCP, a UDP datagram's payload over UDP.
pub(crate) fn max_message(protocol: Protocol, tcp_max: u64) -> u64 {
    match protocol {
        Protocol::Tcp => tcp_max,
        Protocol::Udp => MsgrateSection::MAX_UDP,
    }
}

/// What is true of every msgrate test: it counts messages (datagrams over UDP, its section
/// says), takes no `--omit`, and a fleet ranks it by messages sent per second.
pub(crate) const FACTS: super::section::KindFacts =
    super::section::KindFacts { unit: "messages", takes_omit: false, headline: super::Headline::OpsSent };

impl Section for MsgrateSection {
    fn kind(&self) -> Kind {
        Kind::Msgrate
    }

    fn shared_flags(&self) -> &'static [&'static str] {
        &["--flows", "--reverse", "--bidir", "--block", "--udp", "--bitrate", "--server-cpus"]
    }

    fn describe(&self, bound: &str) -> String {
        format!(
            "msgrate: {}-byte {} messages, {}{}, {bound}",
            self.msg_bytes.bytes(),
            self.protocol.name().to_uppercase(),
            flows_words(self.flows),
            [
                if self.recv == RecvMode::Each { ", read one message per call" } else { "" }.to_string(),
                match (self.bitrate, self.rate(crate::profile::Way::Down)) {
                    (up, down) if up != down => format!(
                        ", paced at {} up and {} down per flow",
                        up.map_or("no limit".to_string(), |r| r.to_string()),
                        down.map_or("no limit".to_string(), |r| r.to_string())
                    ),
                    (Some(b), _) => format!(", paced at {b} per flow"),
                    _ => String::new(),
                },
                if self.receivers == Receivers::PerCpu { ", one receiver per server CPU" } else { "" }.to_string(),
                match (self.gso, self.gro) {
                    (true, true) => ", sent with GSO and received with GRO",
                    (true, false) => ", sent with GSO",
                    (false, true) => ", received with GRO",
                    (false, false) => "",
                }
                .to_string(),
                match self.direction {
                    Direction::Forward => String::new(),
                    Direction::Reverse => ", server to client".into(),
                    Direction::Bidir => ", both ways".into(),
                },
            ]
            .concat()
        )
    }

    fn check(&self) -> Result<(), FieldError> {
        check_flows("msgrate.flows", self.flows)?;
        let max = max_message(self.protocol, 1 << 20);
        if self.msg_bytes.bytes() == 0 || self.msg_bytes.bytes() > max {
            return Err(("msgrate.msg_bytes", format!("{} is outside 1..{max} bytes", self.msg_bytes.bytes())));
        }
        if self.batch == 0 || self.batch > 1024 {
            return Err(("msgrate.batch", format!("{} is outside 1..1024", self.batch)));
        }
        for b in [self.bitrate, self.bitrate_down].into_iter().flatten() {
            if self.protocol != Protocol::Udp {
                return Err((
                    "msgrate.bitrate",
                    "paces UDP datagrams (protocol = \"udp\", --udp); TCP runs as fast as the path allows".into(),
                ));
            }
            if b.0 <= 0.0 || b.0 < 8.0 * self.msg_bytes.bytes() as f64 {
                return Err(("msgrate.bitrate", format!("{b} is less than one datagram per second")));
            }
        }
        if self.eor && self.protocol != Protocol::Tcp {
            return Err(("msgrate.eor", "ends TCP records; a UDP datagram is always its own packet".into()));
        }
        for (on, field) in [(self.gso, "msgrate.gso"), (self.gro, "msgrate.gro")] {
            if on && self.protocol != Protocol::Udp {
                return Err((
                    field,
                    "is UDP's segmentation offload (protocol = \"udp\", --udp); TCP has its own, always on".into(),
                ));
            }
        }
        if self.receivers == Receivers::PerCpu {
            if self.protocol != Protocol::Udp {
                return Err((
                    "msgrate.receivers",
                    "per_cpu is for UDP (protocol = \"udp\", --udp): a TCP flow is its own socket".into(),
                ));
            }
            if self.direction != Direction::Forward {
                return Err((
                    "msgrate.receivers",
                    "per_cpu receivers are the server's: client to server only (no --reverse or --bidir)".into(),
                ));
            }
        }
        let flows = self.flows.unwrap_or(1) as usize * self.direction.ways().len();
        if flows > MAX_FLOWS as usize {
            return Err(("msgrate.flows", format!("{flows} flows in all is over {MAX_FLOWS}")));
        }
        Ok(())
    }

    fn ways(&self) -> &'static [Way] {
        self.direction.ways()
    }

    fn stream_count(&self, cpus: usize) -> usize {
        self.flows.map(|f| f as usize).unwrap_or(cpus.max(1)) * self.direction.ways().len()
    }

    fn flows_per_cpu(&self) -> bool {
        self.flows.is_none()
    }

    fn per_cpu_receivers(&self) -> bool {
        // `check` refuses per_cpu for TCP; a section not checked yet still answers for UDP only.
        self.receivers == Receivers::PerCpu && self.protocol == Protocol::Udp
    }

    fn flow_count_mut(&mut self) -> Option<&mut u32> {
        self.flows.as_mut()
    }

    fn server_cpus(&self) -> Option<&CpuList> {
        self.server_cpus.as_ref()
    }

    fn headline_bits(&self) -> bool {
        // TCP messages are counted as messages (and packets); UDP at a bit rate as bits too.
        self.protocol == Protocol::Udp
    }

    fn protocol(&self) -> Protocol {
        self.protocol
    }

    fn counts_msgs(&self) -> bool {
        true
    }

    fn op_bytes(&self) -> Option<u64> {
        Some(self.msg_bytes.bytes())
    }

    fn receiver_counts_lost(&self) -> bool {
        self.protocol == Protocol::Udp
    }

    fn unit(&self) -> &'static str {
        if self.protocol == Protocol::Udp { "datagrams" } else { "messages" }
    }

    fn lost_name(&self) -> &'static str {
        match self.protocol {
            Protocol::Udp => "datagrams lost",
            Protocol::Tcp => "messages lost",
        }
    }
}

/// msgrate's own flags (the ones it shares with other kinds are [`SharedFlags`]).
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct MsgrateFlags {
    /// msgrate: bytes per message (default 1).
    #[cfg_attr(feature = "clap", arg(long))]
    pub msg_size: Option<ByteSize>,
    /// msgrate: messages per sendmmsg call (1: one send per message).
    #[cfg_attr(feature = "clap", arg(long))]
    pub batch: Option<u32>,
    /// msgrate over TCP: every message its own segment (MSG_EOR: the kernel never joins two);
    /// --eor false lets the kernel join them (pps-8core sets it).
    #[cfg_attr(feature = "clap", arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL"))]
    pub eor: Option<bool>,
    /// msgrate over TCP: how receivers read: batch (what has arrived, up to 256 KiB) or each
    /// (one message per call, as qperf's receiver: the work qperf -m 1 tcp_bw measures).
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    pub recv: Option<RecvMode>,
    /// msgrate over UDP: the server's receivers: flow (a socket per flow) or per-cpu (one
    /// SO_REUSEPORT socket per server CPU, each taking what its CPU's stack processed;
    /// drops are named per receiver, loss per test).
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    pub receivers: Option<Receivers>,
    /// msgrate over UDP: send with GSO (UDP_SEGMENT: up to 64 datagrams per send, cut by the
    /// kernel; the datagrams on the wire are unchanged).
    #[cfg_attr(feature = "clap", arg(long))]
    pub gso: bool,
    /// msgrate over UDP: receive with GRO (UDP_GRO: coalesced datagrams, cut by the segment
    /// size the kernel gives).
    #[cfg_attr(feature = "clap", arg(long))]
    pub gro: bool,
    /// msgrate over UDP: both --gso and --gro (iperf3 --gsro).
    #[cfg_attr(feature = "clap", arg(long))]
    pub gsro: bool,
}

impl MsgrateFlags {
    /// The flags that are set.
    pub(crate) fn set(&self) -> Vec<&'static str> {
        let set = [
            ("--msg-size", self.msg_size.is_some()),
            ("--batch", self.batch.is_some()),
            ("--eor", self.eor.is_some()),
            ("--recv", self.recv.is_some()),
            ("--receivers", self.receivers.is_some()),
            ("--gso", self.gso),
            ("--gro", self.gro),
            ("--gsro", self.gsro),
        ];
        set.into_iter().filter(|(_, on)| *on).map(|(f, _)| f).collect()
    }
}

impl MsgrateSection {
    /// The rate each sending UDP flow going `way` is paced at (`-b`, `-b UP/DOWN`).
    pub fn rate(&self, way: crate::profile::Way) -> Option<BitRate> {
        match way {
            crate::profile::Way::Up => self.bitrate,
            crate::profile::Way::Down => self.bitrate_down.or(self.bitrate),
        }
    }
}

impl MsgrateSection {
    /// Applies the msgrate flags.
    pub fn apply(&mut self, own: &MsgrateFlags, shared: &SharedFlags, _run: &mut RunSection) -> Result<(), SpecError> {
        if shared.flows.is_some() {
            self.flows = shared.flows;
        }
        // -l is the datagram (message) size here, as iperf3 -u -l.
        set(&mut self.msg_bytes, own.msg_size.or(shared.block));
        set(&mut self.batch, own.batch);
        set(&mut self.eor, own.eor);
        if shared.reverse {
            self.direction = Direction::Reverse;
        }
        if shared.bidir {
            self.direction = Direction::Bidir;
        }
        if let Some((b, down)) = shared.bitrate.map(super::flags::one_bitrate).transpose()? {
            self.bitrate_down = super::flags::down_rate(b, down)?;
            // -b 0: as fast as the sender can (iperf3's unlimited).
            self.bitrate = (b.0 > 0.0).then_some(b);
        }
        set(&mut self.recv, own.recv);
        set(&mut self.receivers, own.receivers);
        self.gso |= own.gso || own.gsro;
        self.gro |= own.gro || own.gsro;
        if shared.udp {
            self.protocol = Protocol::Udp;
            // A datagram is its own packet: a TCP profile's record marks do not carry over.
            self.eor = own.eor == Some(true);
        }
        if shared.server_cpus.is_some() {
            self.server_cpus = shared.server_cpus.clone();
        }
        Ok(())
    }
}
