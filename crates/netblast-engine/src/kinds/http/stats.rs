//! HTTP counters of one worker: plain fields and HDR histograms, owned by the worker's
//! single-threaded runtime; per-interval parts are handed over at each tick, the rest at the end.
//! Failures are counted per class with one sample message, never logged per request.

use hdrhistogram::Histogram;
use netblast_spec::hist::{self, LatencySummary};
use netblast_spec::result::TcpStats;
use std::collections::HashMap;
use std::io;

/// A failed request or connection: its class and what happened.
pub type Failure = (ErrorKind, String);

/// Responses by status code, counted once per response: keyed by a multiplicative hash of the
/// code (SipHash, the default, is the costlier part of one count).
pub type StatusCounts = HashMap<u16, u64, std::hash::BuildHasherDefault<CodeHasher>>;

/// Hashes a status code: the code times a 64-bit odd constant (Fibonacci hashing), which
/// spreads the few codes a run sees over the table's high bits.
#[derive(Default)]
pub struct CodeHasher(u64);

impl std::hash::Hasher for CodeHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u16(&mut self, n: u16) {
        self.0 = (u64::from(n) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// Class of a failed request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorKind {
    /// Connection refused.
    Refused,
    /// Connection reset or closed before the response was complete.
    Reset,
    /// No complete response within the timeout.
    Timeout,
    /// TLS handshake failure other than an untrusted certificate.
    Tls,
    /// The server's certificate is not trusted (unknown issuer, wrong name, expired): the same
    /// for every connection to that server.
    Certificate,
    /// The peer broke the HTTP protocol.
    Protocol,
    /// TCP connect failed otherwise (unreachable, no route).
    Connect,
    /// Any other I/O failure.
    Io,
}

impl ErrorKind {
    /// The name used in results.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Refused => "refused",
            ErrorKind::Reset => "reset",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Tls => "tls",
            ErrorKind::Certificate => "certificate",
            ErrorKind::Protocol => "protocol",
            ErrorKind::Connect => "connect",
            ErrorKind::Io => "io",
        }
    }

    /// Classifies an I/O error.
    pub fn of_io(e: &io::Error) -> ErrorKind {
        match e.kind() {
            io::ErrorKind::ConnectionRefused => ErrorKind::Refused,
            io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::UnexpectedEof => ErrorKind::Reset,
            io::ErrorKind::TimedOut => ErrorKind::Timeout,
            io::ErrorKind::InvalidData => ErrorKind::Tls,
            _ => ErrorKind::Io,
        }
    }

    /// Classifies an HTTP/2 error: an I/O error by its kind; a breach of the protocol this
    /// client noticed (h2 answered it with RST_STREAM or GOAWAY) as the protocol's; a stream the
    /// server refused or reset, or a connection it sent away, as a reset.
    pub fn of_h2(e: &h2::Error) -> ErrorKind {
        match e.get_io() {
            Some(io) => ErrorKind::of_io(io),
            None if e.is_library() => ErrorKind::Protocol,
            None => ErrorKind::Reset,
        }
    }
}

/// The per-interval part of a worker's counters.
#[derive(Debug, Clone)]
pub struct IntervalStats {
    /// Requests sent.
    pub sent: u64,
    /// Complete responses.
    pub completed: u64,
    /// Failed requests.
    pub errors: u64,
    /// Responses with a status outside the expected set.
    pub failed_status: u64,
    /// Requests sent late for want of a free connection (open loop).
    pub late: u64,
    /// Bytes written.
    pub bytes_sent: u64,
    /// Bytes read.
    pub bytes_received: u64,
    /// Latency of completed requests, ns.
    pub latency: Histogram<u64>,
    /// Responses by status.
    pub status: StatusCounts,
}

impl IntervalStats {
    /// Empty counters.
    pub fn new() -> IntervalStats {
        IntervalStats {
            sent: 0,
            completed: 0,
            errors: 0,
            failed_status: 0,
            late: 0,
            bytes_sent: 0,
            bytes_received: 0,
            latency: hist::new_latency_histogram(),
            status: StatusCounts::default(),
        }
    }

    /// Adds `o` into `self`; histograms of another configuration are an error.
    pub fn add(&mut self, o: &IntervalStats) -> Result<(), hist::HistError> {
        self.sent += o.sent;
        self.completed += o.completed;
        self.errors += o.errors;
        self.failed_status += o.failed_status;
        self.late += o.late;
        self.bytes_sent += o.bytes_sent;
        self.bytes_received += o.bytes_received;
        for (k, v) in &o.status {
            *self.status.entry(*k).or_default() += v;
        }
        hist::merge(&mut self.latency, &o.latency)
    }
}

impl Default for IntervalStats {
    fn default() -> Self {
        IntervalStats::new()
    }
}

/// A worker's counters over the whole run (besides the sum of its intervals).
#[derive(Debug, Clone)]
pub struct RunStats {
    /// TCP connect time per connection opened.
    pub connect: Histogram<u64>,
    /// TLS handshake time per connection opened.
    pub tls: Histogram<u64>,
    /// Time to first byte per request.
    pub ttfb: Histogram<u64>,
    /// Body read time per request.
    pub body: Histogram<u64>,
    /// Send lag (actual - intended) per request, open loop.
    pub send_lag: Histogram<u64>,
    /// Failures per class: count and one sample message.
    pub errors: HashMap<ErrorKind, (u64, String)>,
    /// Responses with status < 400.
    pub succeeded: u64,
    /// Connections established.
    pub established: u64,
    /// Connection attempts that failed.
    pub failed: u64,
    /// Connections open now.
    pub open: u64,
    /// Most connections open at once.
    pub peak_open: u64,
    /// Seconds from the start to the last completed (or failed) request.
    pub last_done_s: f64,
    /// Kernel TCP statistics of the closed connections.
    pub tcp: ConnTcp,
}

/// Kernel TCP statistics of a worker's connections, added up as each one closes.
#[derive(Debug, Clone)]
pub struct ConnTcp {
    /// Connections sampled.
    pub connections: u64,
    /// Segments sent.
    pub segs_out: u64,
    /// Segments retransmitted.
    pub retransmits: u64,
    /// Retransmitted segments the peer got twice (DSACK); `None` once a connection's kernel
    /// could not tell.
    pub dsack: Option<u64>,
    /// Each connection's final smoothed RTT, ns.
    pub srtt: Histogram<u64>,
    /// Every kernel RTT sample (eBPF), ns, in the probe's histogram layout.
    pub kernel_rtt: hist::HistSum,
    /// The first histogram that could not be added (recorded where no error can be returned).
    pub problem: Option<String>,
}

impl ConnTcp {
    /// Nothing sampled yet.
    pub fn new() -> ConnTcp {
        ConnTcp {
            connections: 0,
            segs_out: 0,
            retransmits: 0,
            dsack: Some(0),
            srtt: hist::new_latency_histogram(),
            kernel_rtt: hist::HistSum::default(),
            problem: None,
        }
    }

    /// Adds one closing connection: its `TCP_INFO` now and, with eBPF, its RTT histogram.
    pub fn record(&mut self, info: &TcpStats, rtt: Option<&Histogram<u64>>) -> Result<(), hist::HistError> {
        self.connections += 1;
        self.segs_out += info.segs_out;
        self.retransmits += info.retrans_segs;
        self.dsack = self.dsack.zip(info.dsack_segs).map(|(a, b)| a + b);
        if info.rtt_us > 0 {
            hist::record_ns(&mut self.srtt, info.rtt_us as u64 * 1000);
        }
        match rtt {
            Some(h) => self.kernel_rtt.add(h),
            None => Ok(()),
        }
    }

    /// Adds `o` into `self`; histograms of another configuration are an error.
    pub fn add(&mut self, o: &ConnTcp) -> Result<(), hist::HistError> {
        self.connections += o.connections;
        self.segs_out += o.segs_out;
        self.retransmits += o.retransmits;
        self.dsack = self.dsack.zip(o.dsack).map(|(a, b)| a + b);
        if self.problem.is_none() {
            self.problem.clone_from(&o.problem);
        }
        hist::merge(&mut self.srtt, &o.srtt)?;
        match o.kernel_rtt.histogram() {
            Some(h) => self.kernel_rtt.add(h),
            None => Ok(()),
        }
    }
}

impl Default for ConnTcp {
    fn default() -> Self {
        ConnTcp::new()
    }
}

impl RunStats {
    /// Empty counters.
    pub fn new() -> RunStats {
        RunStats {
            connect: hist::new_latency_histogram(),
            tls: hist::new_latency_histogram(),
            ttfb: hist::new_latency_histogram(),
            body: hist::new_latency_histogram(),
            send_lag: hist::new_latency_histogram(),
            errors: HashMap::new(),
            succeeded: 0,
            established: 0,
            failed: 0,
            open: 0,
            peak_open: 0,
            last_done_s: 0.0,
            tcp: ConnTcp::new(),
        }
    }

    /// Counts one failure.
    pub fn fail(&mut self, kind: ErrorKind, msg: String) {
        let e = self.errors.entry(kind).or_insert((0, String::new()));
        e.0 += 1;
        if e.1.is_empty() {
            e.1 = msg;
        }
    }

    /// Adds `o` into `self` (peak open connections add up: workers' peaks can coincide);
    /// histograms of another configuration are an error.
    pub fn add(&mut self, o: &RunStats) -> Result<(), hist::HistError> {
        for (a, b) in [
            (&mut self.connect, &o.connect),
            (&mut self.tls, &o.tls),
            (&mut self.ttfb, &o.ttfb),
            (&mut self.body, &o.body),
            (&mut self.send_lag, &o.send_lag),
        ] {
            hist::merge(a, b)?;
        }
        for (k, (n, sample)) in &o.errors {
            let e = self.errors.entry(*k).or_insert((0, sample.clone()));
            if e.1.is_empty() {
                e.1 = sample.clone();
            }
            e.0 += n;
        }
        self.succeeded += o.succeeded;
        self.established += o.established;
        self.failed += o.failed;
        self.peak_open += o.peak_open;
        self.last_done_s = self.last_done_s.max(o.last_done_s);
        self.tcp.add(&o.tcp)
    }
}

impl Default for RunStats {
    fn default() -> Self {
        RunStats::new()
    }
}

/// Summary of a histogram, `None` when empty.
pub fn summary(h: &Histogram<u64>) -> Option<LatencySummary> {
    (!h.is_empty()).then(|| LatencySummary::of(h))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_keep_one_sample_and_add_up() {
        let mut a = RunStats::new();
        a.fail(ErrorKind::Reset, "first".into());
        a.fail(ErrorKind::Reset, "second".into());
        let mut b = RunStats::new();
        b.fail(ErrorKind::Reset, "third".into());
        b.fail(ErrorKind::Timeout, "slow".into());
        a.add(&b).unwrap();
        assert_eq!(a.errors[&ErrorKind::Reset], (3, "first".to_string()));
        assert_eq!(a.errors[&ErrorKind::Timeout].0, 1);
    }

    #[test]
    fn io_errors_are_classified() {
        let k = |kind| ErrorKind::of_io(&io::Error::from(kind));
        assert_eq!(k(io::ErrorKind::ConnectionRefused), ErrorKind::Refused);
        assert_eq!(k(io::ErrorKind::ConnectionReset), ErrorKind::Reset);
        assert_eq!(k(io::ErrorKind::UnexpectedEof), ErrorKind::Reset);
        assert_eq!(k(io::ErrorKind::TimedOut), ErrorKind::Timeout);
    }

    #[test]
    fn interval_counts_merge_exactly() {
        let mut a = IntervalStats::new();
        a.sent = 3;
        a.status.insert(200, 2);
        hist::record_ns(&mut a.latency, 1000);
        let mut b = IntervalStats::new();
        b.sent = 4;
        b.status.insert(200, 1);
        b.status.insert(503, 3);
        hist::record_ns(&mut b.latency, 2000);
        a.add(&b).unwrap();
        assert_eq!(a.sent, 7);
        assert_eq!(a.status[&200], 3);
        assert_eq!(a.status[&503], 3);
        assert_eq!(a.latency.len(), 2);
    }
}
