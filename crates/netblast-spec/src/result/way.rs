//! Totals of a stream and of a way: bytes and their spans, RTT, retransmissions, and the
//! message, datagram and connection figures of the message kinds; every rate is [`per_second`].

use super::tcp::{TcpLimits, TcpStats};
use crate::hist::{Distribution, EncodedHistogram};
use crate::profile::Way;
use serde::{Deserialize, Serialize};

/// What a UDP receiver saw of sequenced datagrams (at least [`crate::profile::MsgrateSection::SEQ_HEADER`]
/// bytes: each carries its sequence number and send time).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct UdpQuality {
    /// Datagrams missing: the sequence numbers up to the highest seen, minus those received.
    /// Per interval it is the change of that count, so a datagram that arrives an interval late
    /// is lost in one interval and found (negative) in the next; over a whole run it is exact.
    pub lost: i64,
    /// Datagrams that arrived after one with a higher sequence number.
    pub out_of_order: u64,
    /// Datagrams received more than once.
    pub duplicates: u64,
    /// Interarrival jitter as RFC 3550 defines it (the smoothed difference between successive
    /// datagrams' transit times, gain 1/16), ns, at the end of the interval or run.
    pub jitter_ns: f64,
    /// Datagrams received (each sequence number once).
    pub received: u64,
    /// Datagrams that were not the test's (without its identity, from a stranger's address,
    /// or a sequence number past any plausible loss): counted apart, in no other figure.
    #[serde(default, skip_serializing_if = "crate::result::is_zero")]
    pub foreign: u64,
}

impl UdpQuality {
    /// Sums counts; jitter is the mean of the parts' (iperf3's `[SUM]`).
    pub fn sum<'a>(parts: impl IntoIterator<Item = &'a UdpQuality>) -> Option<UdpQuality> {
        let mut n = 0usize;
        let mut out = UdpQuality::default();
        for p in parts {
            n += 1;
            out.lost += p.lost;
            out.out_of_order += p.out_of_order;
            out.duplicates += p.duplicates;
            out.received += p.received;
            out.foreign += p.foreign;
            out.jitter_ns += p.jitter_ns;
        }
        (n > 0).then(|| UdpQuality { jitter_ns: out.jitter_ns / n as f64, ..out })
    }
}

/// One side's total for a way or a stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SideTotal {
    /// Bytes.
    pub bytes: u64,
    /// Seconds from the start to the last byte of this side.
    pub seconds: f64,
    /// bytes × 8 / seconds.
    pub bits_per_s: f64,
}

impl SideTotal {
    /// Builds a total, deriving the rate.
    pub fn new(bytes: u64, seconds: f64) -> SideTotal {
        SideTotal { bytes, seconds, bits_per_s: per_second(bytes as f64 * 8.0, seconds) }
    }
}

/// Min / mean / max of the sender's smoothed RTT over the interval samples (µs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RttSummary {
    /// Smallest kernel min-RTT seen.
    pub min_us: u32,
    /// Mean of the smoothed RTT samples.
    pub mean_us: f64,
    /// Largest smoothed RTT sample.
    pub max_us: u32,
    /// How many samples the mean is over (one per stream per interval); 0 in /1 results.
    #[serde(default)]
    pub samples: u64,
}

/// Totals of one stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamSummary {
    /// Stream id.
    pub id: u32,
    /// Which way.
    pub way: Way,
    /// Sender side.
    pub sender: SideTotal,
    /// Receiver side, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver: Option<SideTotal>,
    /// Segments retransmitted by the sender (absent when the sender's kernel was not read: `--probe off`, or a side that did not report; unknown, not zero).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    /// Of those, how many the receiver got twice (DSACK): spurious, not losses. From
    /// `TCP_INFO` of the sending socket at the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spurious_retransmits: Option<u64>,
    /// Sender-side TCP statistics at the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpStats>,
    /// Message counts and rates, for message kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msgs: Option<MsgTotals>,
    /// Round-trip latency (rr; cps: connect), with its histogram.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Distribution>,
    /// The sender's kernel RTT distribution (eBPF probe: every RTT sample the kernel took).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_rtt: Option<Distribution>,
    /// `TCP_INFO` of the sending socket at the end, beside eBPF figures as a cross-check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_info: Option<TcpStats>,
    /// CPU the client's worker for this stream ran pinned to (read back from its affinity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cpu: Option<usize>,
    /// CPU the server's worker for this stream ran pinned to (read back from its affinity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu: Option<usize>,
}

/// Message totals of a stream or a way (msgrate, rr, cps): the counts every message kind
/// keeps, and beside them the figures only its transport or kind has, each its own type
/// (`tcp`, `udp`, `conns`: at most one of them in a result this build writes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct MsgTotals {
    /// Messages sent (rr: transactions completed by the client; cps: connections completed).
    pub sent: u64,
    /// Messages per second sent, over the sender's seconds.
    pub sent_per_s: f64,
    /// Messages received (rr: requests answered by the server), when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received: Option<u64>,
    /// Messages per second received, over the receiver's seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received_per_s: Option<f64>,
    /// Sent but never received (UDP datagrams; rr over UDP: requests without a response; cps:
    /// connections that failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost: Option<u64>,
    /// Over TCP, one socket per stream (msgrate, rr): the packets those messages became.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpPackets>,
    /// Over UDP (msgrate): what the receiving sockets saw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpTotals>,
    /// cps: the connections that failed, by cause, and the SYNs retransmitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conns: Option<ConnCounts>,
}

/// The packets a TCP message stream's one socket put on the wire, from the kernel's counters
/// (`tcpi_segs_out`, `tcpi_segs_in`): what to set against messages (Nagle and the kernel
/// coalesce them). A cps flow has none: its statistics are many connections'.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TcpPackets {
    /// TCP segments the senders put on the wire.
    pub segs_out: u64,
    /// `segs_out` per second of the senders' time.
    pub segs_out_per_s: f64,
    /// Packets on the wire, both ways: the senders' segments out (data) plus their segments in
    /// (the receivers' ACKs). What an interface's packet counters see of the test. `None` in
    /// totals rebuilt from intervals (a partial log), which count segments out only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire_packets: Option<u64>,
    /// `wire_packets` per second of the senders' time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire_packets_per_s: Option<f64>,
}

impl TcpPackets {
    /// Segments out and packets both ways, with their rates over the senders' `secs`.
    pub fn new(segs_out: u64, wire_packets: Option<u64>, secs: f64) -> TcpPackets {
        TcpPackets {
            segs_out,
            segs_out_per_s: per_second(segs_out as f64, secs),
            wire_packets,
            wire_packets_per_s: wire_packets.map(|n| per_second(n as f64, secs)),
        }
    }
}

/// What a UDP message stream's receiving sockets saw over the whole run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct UdpTotals {
    /// Datagrams the kernel dropped at the receiving sockets because their queues were full
    /// (/proc/net/udp); on a host-local test this accounts for every lost datagram. `None`
    /// when not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_drops: Option<u64>,
    /// The receiving socket's queue in bytes as the kernel applied it (of a way: the smallest
    /// of its receivers').
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcvbuf: Option<u64>,
    /// The receivers' view of the sequenced datagrams (`None` when the datagrams are too small
    /// to carry a sequence number: under [`crate::profile::MsgrateSection::SEQ_HEADER`] bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<UdpQuality>,
}

impl MsgTotals {
    /// The totals of several streams or tests, added: counts summed (a count is known only
    /// when every part knows it), rates over the spans given (`sent_s` for what was sent,
    /// `recv_s` for what was received), each transport's and kind's figures added (TCP
    /// packets when every part counted them; UDP drops when every part read them, datagram
    /// quality of the parts that have it, the smallest receive queue; connection counts). The
    /// one place message totals are added: the aggregator's ways and a merge's both come
    /// through here.
    pub fn add_up(parts: &[&MsgTotals], sent_s: f64, recv_s: f64) -> MsgTotals {
        let rate = |n: u64, secs: f64| per_second(n as f64, secs);
        let all = |f: fn(&MsgTotals) -> Option<u64>| parts.iter().map(|x| f(x)).sum::<Option<u64>>();
        let sent: u64 = parts.iter().map(|x| x.sent).sum();
        let received = all(|x| x.received);
        let tcp = all(|x| x.tcp.map(|t| t.segs_out))
            .filter(|_| !parts.is_empty())
            .map(|segs| TcpPackets::new(segs, all(|x| x.tcp?.wire_packets), sent_s));
        let udp = parts.iter().any(|x| x.udp.is_some()).then(|| UdpTotals {
            kernel_drops: all(|x| x.udp.and_then(|u| u.kernel_drops)),
            rcvbuf: parts.iter().filter_map(|x| x.udp?.rcvbuf).min(),
            quality: UdpQuality::sum(parts.iter().filter_map(|x| x.udp.as_ref()?.quality.as_ref())),
        });
        MsgTotals {
            sent,
            sent_per_s: rate(sent, sent_s),
            received,
            received_per_s: received.map(|r| rate(r, recv_s)),
            lost: all(|x| x.lost),
            tcp,
            udp,
            conns: ConnCounts::sum(parts.iter().filter_map(|x| x.conns.as_ref())),
        }
    }
}

/// What happened to a cps test's connections besides succeeding: failures by cause, and SYN
/// retransmissions (each a second or more of connect latency). Sums of counters: they add up
/// over flows, agents and merges.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnCounts {
    /// SYNs the client retransmitted on connections that were then established (each
    /// connection's `tcpi_total_retrans` right after `connect`; a failed connection's
    /// retransmissions are in its failure). `None` when not read (`--probe off`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syn_retransmits: Option<u64>,
    /// No local port was free for the destination (`EADDRNOTAVAIL`): ports held in TIME_WAIT
    /// or by other connections; `close = "rst"` avoids TIME_WAIT.
    pub port_exhausted: u64,
    /// The server answered the SYN with a reset (`ECONNREFUSED`): nothing listening, or a
    /// full accept queue with `tcp_abort_on_overflow`.
    pub refused: u64,
    /// Not established, or not answered, within the timeout (SYNs or the request lost).
    pub timed_out: u64,
    /// Reset, or closed by the server, after it was established.
    pub reset: u64,
    /// Any other error (the flow's error or the log names it).
    pub other: u64,
    /// With a rate asked (`--rate`): connections opened more than one gap after their
    /// scheduled time, the flow still busy with the one before (a flow opens one connection at
    /// a time). Not a failure: what tells a flow that could not keep the rate from one that did.
    #[serde(default, skip_serializing_if = "super::is_zero")]
    pub behind: u64,
    /// With no agent on the other side: what the server sent on the completed connections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answers: Option<Answers>,
    /// With TLS: the handshakes of the completed connections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsCounts>,
}

/// What a server that is not netblast sent on each completed connection before the client
/// closed it, as the client read it (`cps.read`): the connections by what their first bytes
/// were.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answers {
    /// Connections on which the client read nothing: it read none (`read = "none"`), or the
    /// server closed without a byte.
    pub nothing: u64,
    /// Connections whose first bytes were an HTTP response (`HTTP/`).
    pub http: u64,
    /// The status of the last HTTP response read (0: none).
    #[serde(default, skip_serializing_if = "super::is_zero_u16")]
    pub http_status: u16,
    /// Connections whose first bytes were anything else: a banner (SSH, SMTP, FTP), a
    /// protocol's greeting.
    pub banner: u64,
    /// Bytes read in all.
    pub bytes: u64,
}

impl Answers {
    /// Adds another count (the later status wins when both have one).
    pub fn add(&mut self, o: &Answers) {
        self.nothing += o.nothing;
        self.http += o.http;
        self.banner += o.banner;
        self.bytes += o.bytes;
        if o.http_status != 0 {
            self.http_status = o.http_status;
        }
    }
}

/// A TLS handshake test's handshakes: full and resumed, and what was negotiated (IANA codes;
/// [`TlsCounts::version_name`] and [`TlsCounts::cipher_name`] name them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TlsCounts {
    /// Full handshakes (a certificate sent and checked, a key exchange).
    pub full: u64,
    /// Resumed handshakes (a session ticket or id the server took).
    pub resumed: u64,
    /// The protocol version of the last handshake (0x0303: TLS 1.2, 0x0304: TLS 1.3).
    pub version: u16,
    /// The cipher suite of the last handshake (IANA code).
    pub cipher: u16,
}

impl TlsCounts {
    /// Adds another count (the later negotiation wins when both have one).
    pub fn add(&mut self, o: &TlsCounts) {
        self.full += o.full;
        self.resumed += o.resumed;
        if o.version != 0 {
            (self.version, self.cipher) = (o.version, o.cipher);
        }
    }

    /// "TLS 1.2", "TLS 1.3", or the code.
    pub fn version_name(&self) -> String {
        match self.version {
            0x0301 => "TLS 1.0".into(),
            0x0302 => "TLS 1.1".into(),
            0x0303 => "TLS 1.2".into(),
            0x0304 => "TLS 1.3".into(),
            v => format!("version 0x{v:04x}"),
        }
    }

    /// The cipher suite's IANA name, or its code.
    pub fn cipher_name(&self) -> String {
        let name = match self.cipher {
            0x1301 => "TLS_AES_128_GCM_SHA256",
            0x1302 => "TLS_AES_256_GCM_SHA384",
            0x1303 => "TLS_CHACHA20_POLY1305_SHA256",
            0xc02b => "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
            0xc02c => "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
            0xc02f => "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            0xc030 => "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
            0xcca8 => "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
            0xcca9 => "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
            c => return format!("cipher suite 0x{c:04x}"),
        };
        name.into()
    }
}

/// Adds `b` into `a`, either of which may be absent.
fn add_opt<T: Copy>(a: &mut Option<T>, b: &Option<T>, add: impl Fn(&mut T, &T)) {
    match (a.as_mut(), b) {
        (Some(x), Some(y)) => add(x, y),
        (None, Some(y)) => *a = Some(*y),
        _ => {}
    }
}

impl ConnCounts {
    /// Adds another count.
    pub fn add(&mut self, o: &ConnCounts) {
        self.syn_retransmits = match (self.syn_retransmits, o.syn_retransmits) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        self.port_exhausted += o.port_exhausted;
        self.refused += o.refused;
        self.timed_out += o.timed_out;
        self.reset += o.reset;
        self.other += o.other;
        self.behind += o.behind;
        add_opt(&mut self.answers, &o.answers, Answers::add);
        add_opt(&mut self.tls, &o.tls, TlsCounts::add);
    }

    /// The sum of `counts`; `None` when there is none.
    pub fn sum<'a>(counts: impl Iterator<Item = &'a ConnCounts>) -> Option<ConnCounts> {
        counts.fold(None, |acc: Option<ConnCounts>, c| {
            Some(match acc {
                None => *c,
                Some(mut t) => {
                    t.add(c);
                    t
                }
            })
        })
    }

    /// Failed connections, every cause.
    pub fn failed(&self) -> u64 {
        self.port_exhausted + self.refused + self.timed_out + self.reset + self.other
    }
}

/// Totals of one way (summed over its streams).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WaySummary {
    /// Which way.
    pub way: Way,
    /// Number of streams.
    pub streams: u32,
    /// All senders.
    pub sender: SideTotal,
    /// All receivers, when every receiver reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver: Option<SideTotal>,
    /// Segments retransmitted (absent when the sender's kernel was not read: `--probe off`, or a side that did not report; unknown, not zero).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    /// Of those, how many the receivers got twice (DSACK): spurious, not losses; `None` unless
    /// every stream reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spurious_retransmits: Option<u64>,
    /// Sender RTT over the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt: Option<RttSummary>,
    /// The smoothed-RTT samples behind `rtt` (one per stream per interval, ns), lossless.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_hist: Option<EncodedHistogram>,
    /// Largest congestion window seen on any stream (bytes).
    pub cwnd_max_bytes: u64,
    /// Message counts and rates, for message kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msgs: Option<MsgTotals>,
    /// Round-trip latency over all streams (rr; cps: connect), with the merged histogram of
    /// the whole run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Distribution>,
    /// Retransmitted segments / segments sent by the senders.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmit_rate: Option<f64>,
    /// The senders' kernel RTT distribution over all streams (eBPF probe), merged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_rtt: Option<Distribution>,
    /// What limited the senders, their kernels' clocks summed over the streams (each over its
    /// sender's seconds): [`TcpLimits::shares`] of the way. `None` where the kernel does not
    /// report them (before Linux 4.10, UDP, a group of connections).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<TcpLimits>,
}

/// Retransmitted segments over segments sent; `None` when the retransmissions are unknown or
/// nothing was sent. Every retransmit rate in a result is computed here.
pub fn retransmit_rate(retransmits: Option<u64>, segs_out: u64) -> Option<f64> {
    retransmits.filter(|_| segs_out > 0).map(|n| n as f64 / segs_out as f64)
}

/// What a way's totals are made of, however they were gathered: a run's streams (the
/// aggregator), merged results' ways (merge, the coordinator) or a partial log's intervals.
/// Counts are already added up and spans already on one clock; [`WaySummary::new`] derives
/// the rest, so a way's rates are computed in one place.
#[derive(Debug, Clone)]
pub struct WayParts {
    /// Which way.
    pub way: Way,
    /// Number of streams.
    pub streams: u32,
    /// Bytes all senders sent, and the longest sender's seconds.
    pub sent: (u64, f64),
    /// Bytes all receivers got, and the longest receiver's seconds, when every receiver
    /// reported.
    pub received: Option<(u64, f64)>,
    /// Segments retransmitted (unknown when no sender's kernel was read).
    pub retransmits: Option<u64>,
    /// Of those, the ones received twice (unknown unless every stream reported it).
    pub spurious_retransmits: Option<u64>,
    /// Segments the senders sent (0 when unknown): what the retransmit rate is out of.
    pub segs_out: u64,
    /// Sender RTT over the run.
    pub rtt: Option<RttSummary>,
    /// The smoothed-RTT samples behind `rtt`.
    pub rtt_hist: Option<EncodedHistogram>,
    /// Largest congestion window seen on any stream (bytes).
    pub cwnd_max_bytes: u64,
    /// Message counts and rates, for message kinds.
    pub msgs: Option<MsgTotals>,
    /// Round-trip latency over all streams.
    pub latency: Option<Distribution>,
    /// The senders' kernel RTT distribution.
    pub kernel_rtt: Option<Distribution>,
    /// What limited the senders.
    pub limits: Option<TcpLimits>,
}

impl WaySummary {
    /// A way's totals from what they are made of: sides with their rates, the retransmit rate.
    pub fn new(p: WayParts) -> WaySummary {
        WaySummary {
            way: p.way,
            streams: p.streams,
            sender: SideTotal::new(p.sent.0, p.sent.1),
            receiver: p.received.map(|(bytes, secs)| SideTotal::new(bytes, secs)),
            retransmit_rate: retransmit_rate(p.retransmits, p.segs_out),
            retransmits: p.retransmits,
            spurious_retransmits: p.spurious_retransmits,
            rtt: p.rtt,
            rtt_hist: p.rtt_hist,
            cwnd_max_bytes: p.cwnd_max_bytes,
            msgs: p.msgs,
            latency: p.latency,
            kernel_rtt: p.kernel_rtt,
            limits: p.limits,
        }
    }
}

/// `n` per second over `secs` seconds; 0 over an empty span (a count without a span has no
/// rate). Every rate in a result is computed here.
pub fn per_second(n: f64, secs: f64) -> f64 {
    if secs > 0.0 { n / secs } else { 0.0 }
}
