//! An HTTP test's totals: requests, responses, phases, status codes, errors, connections and
//! the kernel's view of them.

use super::way::{per_second, retransmit_rate};
use crate::hist::Distribution;
use crate::profile::StatusSet;
use serde::{Deserialize, Serialize};

/// One class of HTTP failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpErrorCount {
    /// `refused`, `reset`, `timeout`, `tls`, `certificate`, `protocol`, `connect`, `io`.
    pub kind: String,
    /// How many requests failed this way.
    pub count: u64,
    /// One example message.
    pub sample: String,
}

/// Where the time of HTTP requests went (hey's breakdown).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HttpPhases {
    /// TCP connect, per connection opened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect: Option<Distribution>,
    /// TLS handshake, per connection opened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<Distribution>,
    /// Request written to response headers received, per request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfb: Option<Distribution>,
    /// Response headers to the end of the body, per request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Distribution>,
    /// Open loop: actual send time minus intended send time, per request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_lag: Option<Distribution>,
}

/// Connections of an HTTP test.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpConnections {
    /// Connections asked for (`-c`).
    pub configured: u32,
    /// Connections established (TCP and, with TLS, the handshake), over the whole run.
    pub established: u64,
    /// Connection attempts that failed.
    pub failed: u64,
    /// Most connections open at once.
    pub peak_open: u64,
}

/// HTTP totals of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HttpSummary {
    /// `closed_loop` or `open_loop`.
    pub mode: String,
    /// `http1` or `http2`.
    pub version: String,
    /// Whether requests went over TLS.
    pub tls: bool,
    /// Requests sent.
    pub sent: u64,
    /// Responses received in full.
    pub completed: u64,
    /// Responses with a 1xx, 2xx or 3xx status.
    pub succeeded: u64,
    /// succeeded / sent.
    pub success_ratio: f64,
    /// Seconds from the start to the last response.
    pub seconds: f64,
    /// Completed responses per second.
    pub responses_per_s: f64,
    /// Requests sent per second (open loop: the achieved rate).
    pub sent_per_s: f64,
    /// Open loop: the schedule's mean rate over the run (what was asked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_rate: Option<f64>,
    /// Open loop: the fastest first byte of a few requests sent one at a time before the load,
    /// on a connection of their own (ns): what the target answered with nothing of this test
    /// in flight, the time the verdict weighs the lanes against (a fleet's: the least of its
    /// clients'). Not requests of the run's figures; absent in closed loop or when no expected
    /// answer came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unloaded_ttfb_ns: Option<u64>,
    /// Open loop: requests sent later than intended because no connection was free in time.
    pub late: u64,
    /// Bytes written (headers, bodies, TLS records).
    pub bytes_sent: u64,
    /// Bytes read.
    pub bytes_received: u64,
    /// Latency of completed requests (open loop: from the intended send time, so a stalled
    /// server raises it instead of slowing the sender), with the merged histogram.
    pub latency: Distribution,
    /// Time per phase.
    pub phases: HttpPhases,
    /// Responses by status code.
    pub status_codes: std::collections::BTreeMap<String, u64>,
    /// Failures by class.
    pub errors: Vec<HttpErrorCount>,
    /// Connections.
    pub connections: HttpConnections,
    /// Kernel TCP statistics of the connections, each taken as it closed (absent with
    /// `--probe off`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<HttpTcp>,
}

/// Kernel TCP statistics of an HTTP test's connections: `TCP_INFO` of each connection as it
/// closed, and with the eBPF probe every RTT sample the kernel took on them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HttpTcp {
    /// Connections sampled.
    pub connections: u64,
    /// Segments the client sent.
    pub segs_out: u64,
    /// Segments the client retransmitted.
    pub retransmits: u64,
    /// Of those, how many the server got twice (DSACK): spurious, not losses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spurious_retransmits: Option<u64>,
    /// Retransmitted / sent segments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmit_rate: Option<f64>,
    /// Each connection's smoothed RTT when it closed, one sample per connection (`TCP_INFO`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub srtt: Option<Distribution>,
    /// Every RTT sample the kernel took on the connections (eBPF probe), merged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_rtt: Option<Distribution>,
}

/// What an HTTP test's totals are made of, however they were gathered: a run's workers (the
/// HTTP generator), merged results (merge, the coordinator) or a partial log's intervals.
/// [`HttpSummary::new`] derives the ratios and rates, so they are computed in one place.
#[derive(Debug, Clone, Default)]
pub struct HttpParts {
    /// `closed_loop` or `open_loop` (`mixed` in a merge of both).
    pub mode: String,
    /// `http1` or `http2` (`mixed` in a merge of both).
    pub version: String,
    /// Whether requests went over TLS.
    pub tls: bool,
    /// Requests sent.
    pub sent: u64,
    /// Responses received in full.
    pub completed: u64,
    /// Responses with a 1xx, 2xx or 3xx status.
    pub succeeded: u64,
    /// Seconds from the start to the last response: what the response rate is over.
    pub seconds: f64,
    /// Seconds requests were sent in (open loop: the schedule's): what the send rate is over.
    pub send_window: f64,
    /// Open loop: the schedule's mean rate.
    pub target_rate: Option<f64>,
    /// Open loop: requests sent late.
    pub late: u64,
    /// Bytes written.
    pub bytes_sent: u64,
    /// Bytes read.
    pub bytes_received: u64,
    /// Latency of completed requests.
    pub latency: Distribution,
    /// Time per phase.
    pub phases: HttpPhases,
    /// Responses by status code.
    pub status_codes: std::collections::BTreeMap<String, u64>,
    /// Failures by class.
    pub errors: Vec<HttpErrorCount>,
    /// Connections.
    pub connections: HttpConnections,
    /// Kernel TCP statistics of the connections.
    pub tcp: Option<HttpTcp>,
}

impl HttpSummary {
    /// The totals from what they are made of: the success ratio out of requests sent, the
    /// response rate over `seconds`, the send rate over the send window.
    pub fn new(p: HttpParts) -> HttpSummary {
        HttpSummary {
            mode: p.mode,
            version: p.version,
            tls: p.tls,
            sent: p.sent,
            completed: p.completed,
            succeeded: p.succeeded,
            success_ratio: success_ratio(p.succeeded, p.sent),
            seconds: p.seconds,
            responses_per_s: per_second(p.completed as f64, p.seconds),
            sent_per_s: per_second(p.sent as f64, p.send_window),
            target_rate: p.target_rate,
            unloaded_ttfb_ns: None,
            late: p.late,
            bytes_sent: p.bytes_sent,
            bytes_received: p.bytes_received,
            latency: p.latency,
            phases: p.phases,
            status_codes: p.status_codes,
            errors: p.errors,
            connections: p.connections,
            tcp: p.tcp,
        }
    }
}

impl HttpSummary {
    /// Counts the successes again from the status codes, those in `expected` (a result rebuilt
    /// from its intervals: a partial log read back, a step less its warm-up), and the success
    /// ratio with them.
    pub fn count_succeeded(&mut self, expected: &StatusSet) {
        self.succeeded = self.statuses(expected, true).map(|(_, n)| n).sum();
        self.success_ratio = success_ratio(self.succeeded, self.sent);
    }

    /// Responses with a status outside `expected`.
    pub fn unexpected(&self, expected: &StatusSet) -> u64 {
        self.statuses(expected, false).map(|(_, n)| n).sum()
    }

    /// Why requests failed: each status outside `expected` with its count (`[503] 3998`), then
    /// each class of failure without a response (`timeout 3`); `no response` when neither.
    pub fn failure_causes(&self, expected: &StatusSet) -> Vec<String> {
        let mut causes: Vec<String> = self.statuses(expected, false).map(|(code, n)| format!("[{code}] {n}")).collect();
        causes.extend(self.errors.iter().map(|e| format!("{} {}", e.kind, e.count)));
        if causes.is_empty() {
            causes.push("no response".into());
        }
        causes
    }

    /// The status codes in `expected` (`inside`) or outside it, with their counts; a code that
    /// is not a number is in neither.
    fn statuses<'a>(&'a self, expected: &'a StatusSet, inside: bool) -> impl Iterator<Item = (&'a str, u64)> + 'a {
        self.status_codes
            .iter()
            .filter(move |(code, _)| code.parse::<u16>().is_ok_and(|c| expected.contains(c) == inside))
            .map(|(code, n)| (code.as_str(), *n))
    }
}

/// Succeeded out of sent; 0 when nothing was sent.
fn success_ratio(succeeded: u64, sent: u64) -> f64 {
    if sent > 0 { succeeded as f64 / sent as f64 } else { 0.0 }
}

impl HttpTcp {
    /// The connections' kernel figures, with their retransmit rate.
    pub fn new(
        connections: u64,
        segs_out: u64,
        retransmits: u64,
        spurious_retransmits: Option<u64>,
        srtt: Option<Distribution>,
        kernel_rtt: Option<Distribution>,
    ) -> HttpTcp {
        HttpTcp {
            connections,
            segs_out,
            retransmits,
            spurious_retransmits,
            retransmit_rate: retransmit_rate(Some(retransmits), segs_out),
            srtt,
            kernel_rtt,
        }
    }
}
