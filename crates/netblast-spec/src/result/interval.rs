//! One interval of a run: per stream, per way (with its message figures) and HTTP's.

use super::tcp::TcpStats;
use super::way::{UdpQuality, per_second};
use crate::hist::Distribution;
use crate::profile::Way;
use serde::{Deserialize, Serialize};

/// One stream during one interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamInterval {
    /// Stream id.
    pub id: u32,
    /// Bytes the sender handed to the kernel in the interval.
    pub sent_bytes: u64,
    /// Bytes the receiver read in its interval (from the other end's report when that end is
    /// the server); absent when the receiver did not report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received_bytes: Option<u64>,
    /// Segments retransmitted by the sender in the interval (absent when the sender's kernel was not read: `--probe off`, or a side that did not report; unknown, not zero).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    /// Sender-side kernel TCP statistics at the end of the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpStats>,
    /// Message kinds (msgrate, UDP, rr, cps): the stream's messages in the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msgs: Option<MsgInterval>,
    /// Round-trip latency of the interval's transactions (rr, cps: connect), with its histogram.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Distribution>,
}

/// The message figures of one interval (msgrate, UDP, rr, cps): of a stream, or of a way summed
/// over its streams, which also carries their rates over the interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MsgInterval {
    /// Messages (msgrate), datagrams (UDP), completed transactions (rr) or connections (cps)
    /// of the sender.
    pub sent: u64,
    /// Of a way: `sent` per second of the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_per_s: Option<f64>,
    /// Messages the receiver got (rr: requests the server answered), when it reported (of a
    /// way: when every receiver did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received: Option<u64>,
    /// Of a way: `received` per second of the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received_per_s: Option<f64>,
    /// Segments the sending TCP sockets put on the wire in the interval (`tcpi_segs_out` delta).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segs_out: Option<u64>,
    /// Of a way: TCP segments per second sent (packets on the wire, not messages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segs_out_per_s: Option<f64>,
    /// UDP: what the receivers saw of the sequenced datagrams in the interval (of a way: counts
    /// summed, jitter the streams' mean).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpQuality>,
    /// cps: connections that failed in the interval (`sent` counts those completed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<u64>,
}

impl MsgInterval {
    /// The message figures of several streams or tests in one interval, added: `sent` and
    /// `failed` summed, `received` known only when every part knows it, `segs_out` the sum of
    /// the parts that counted them, datagram quality added; with `secs`, the rates over it (a
    /// way's). `None` when no part has message figures. The one place interval message
    /// figures are added: the aggregator's ways, a merge's, a short tail folded in.
    pub fn add_up<'a>(parts: impl IntoIterator<Item = &'a MsgInterval>, secs: Option<f64>) -> Option<MsgInterval> {
        let parts: Vec<&MsgInterval> = parts.into_iter().collect();
        if parts.is_empty() {
            return None;
        }
        let any = |f: fn(&MsgInterval) -> Option<u64>| parts.iter().filter_map(|x| f(x)).reduce(|a, b| a + b);
        let sent = parts.iter().map(|x| x.sent).sum();
        let received = parts.iter().map(|x| x.received).sum::<Option<u64>>();
        let segs_out = any(|x| x.segs_out);
        let per_s = |n: u64| secs.map(|s| per_second(n as f64, s));
        Some(MsgInterval {
            sent,
            sent_per_s: per_s(sent),
            received,
            received_per_s: received.and_then(per_s),
            segs_out,
            segs_out_per_s: segs_out.and_then(per_s),
            udp: UdpQuality::sum(parts.iter().filter_map(|x| x.udp.as_ref())),
            failed: any(|x| x.failed),
        })
    }
}

/// The sum over the streams of one way during one interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WayInterval {
    /// Which way.
    pub way: Way,
    /// Bytes sent by all senders.
    pub sent_bytes: u64,
    /// Sender bit rate.
    pub sent_bits_per_s: f64,
    /// Bytes read by all receivers, when every receiver reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received_bytes: Option<u64>,
    /// Receiver bit rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received_bits_per_s: Option<f64>,
    /// Retransmitted segments (absent when the sender's kernel was not read: `--probe off`, or a side that did not report; unknown, not zero).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    /// Message kinds: the way's messages in the interval, summed over its streams, with rates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msgs: Option<MsgInterval>,
    /// Latency over all streams of the way in the interval, with the merged histogram
    /// (lossless, for exact merging across hosts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Distribution>,
}

/// One reporting interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// 0-based index.
    pub index: u32,
    /// Start, seconds since the test started.
    pub start_s: f64,
    /// End, seconds since the test started.
    pub end_s: f64,
    /// Per stream.
    pub streams: Vec<StreamInterval>,
    /// Per way, summed over streams.
    pub sums: Vec<WayInterval>,
    /// HTTP figures (http kind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpInterval>,
}

impl Interval {
    /// A last interval shorter than a tenth of the reporting interval (the stragglers after the
    /// last tick): its rate would mislead, so it is folded into the interval before it
    /// (by `fold_short_tail` of the merge module) and never shown on its own.
    pub fn is_short_tail(&self, interval_s: f64) -> bool {
        self.index > 0 && self.end_s - self.start_s < interval_s * 0.1
    }
}

/// HTTP figures of one interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HttpInterval {
    /// Requests sent.
    pub sent: u64,
    /// Responses received in full (any status).
    pub completed: u64,
    /// Requests that failed (no complete response).
    pub errors: u64,
    /// Responses with a status outside the expected set (`--expect-status`): counted in
    /// `completed`, and failures all the same.
    #[serde(default, skip_serializing_if = "super::is_zero")]
    pub failed_status: u64,
    /// Open loop: requests sent later than their intended time by more than the lag allowance.
    pub late: u64,
    /// Completed responses per second.
    pub responses_per_s: f64,
    /// Open loop: the schedule's rate over the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_rate: Option<f64>,
    /// Requests sent per second.
    pub sent_per_s: f64,
    /// Bytes written to the connections (headers, bodies, TLS).
    pub bytes_sent: u64,
    /// Bytes read from the connections.
    pub bytes_received: u64,
    /// Latency of the interval's completed requests (open loop: from the intended send time),
    /// with its histogram.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Distribution>,
    /// Responses by status code.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub status: std::collections::BTreeMap<String, u64>,
}
