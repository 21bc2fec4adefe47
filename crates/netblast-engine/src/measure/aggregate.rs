//! The aggregator: folds worker events (this end) and server reports (the other end) into the
//! intervals and summary of a [`netblast_spec::RunResult`].
//!
//! For every stream the *sender* side supplies bytes (and messages) sent and the kernel TCP
//! statistics (the sender is where RTT samples exist); the *receiver* side supplies what it
//! read. For an `up` stream the client is the sender; for a `down` stream the server is, and its
//! figures arrive over the control connection. For rr the client is the sender: its messages
//! are completed transactions and its histograms their round-trip times; the server's count is
//! the requests it answered.
//!
//! Latency histograms are added, never averaged: per interval over the streams of a way, and
//! over all intervals for the totals.

use crate::exec::worker::{Event, FlowEnd, FlowSample};
use hdrhistogram::Histogram;
use netblast_spec::hist::{self, Distribution, EncodedHistogram, HistSum};
use netblast_spec::profile::{Way, Workload};
use netblast_spec::result::per_second;
use netblast_spec::result::{
    CpuSummary, CpuUsage, Interval, MAX_STREAM_DETAIL, MsgInterval, MsgTotals, RttSummary, RunError, SideTotal,
    StreamInfo, StreamInterval, StreamSummary, Summary, TcpPackets, ThreadCpu, UdpQuality, UdpTotals, WayInterval,
    WayParts, WaySummary,
};
use netblast_wire::gather::Gather;
use netblast_wire::wire::{ServerSample, ServerStreamFinal, ServerWaySample};
use std::collections::HashMap;

/// One interval's parts from both ends.
#[derive(Debug, Default)]
struct IntervalAcc {
    start_s: Option<f64>,
    end_s: Option<f64>,
    server_span: Option<(f64, f64)>,
    client: HashMap<u32, FlowSample>,
    server: HashMap<u32, ServerSample>,
    /// A large test's server reports way sums instead of streams.
    server_ways: Vec<ServerWaySample>,
}

/// What one end counted for a stream in an interval.
#[derive(Debug, Clone, Copy, Default)]
struct MeterPart {
    bytes: u64,
    msgs: u64,
}

impl MeterPart {
    fn of(f: &FlowSample) -> MeterPart {
        MeterPart { bytes: f.bytes, msgs: f.msgs }
    }

    fn of_server(s: &ServerSample) -> MeterPart {
        MeterPart { bytes: s.bytes, msgs: s.msgs }
    }
}

/// Last cumulative kernel counters seen per stream, to turn them into interval deltas.
#[derive(Debug, Default)]
struct Prev {
    retrans: HashMap<u32, u64>,
    segs: HashMap<u32, u64>,
}

impl Prev {
    fn delta(map: &mut HashMap<u32, u64>, id: u32, now: u64) -> u64 {
        now.saturating_sub(map.insert(id, now).unwrap_or(0))
    }
}

/// What the aggregator needs to know about the test kind.
#[derive(Debug, Clone, Copy)]
pub struct KindInfo {
    /// The server's UDP receivers are per CPU: a stream's received figures are those of the
    /// receiver beside its server end, which takes datagrams of any flow; loss is per way.
    pub shared_receivers: bool,
    /// The streams count messages (the workload's [`Workload::counts_msgs`]).
    pub counts_msgs: bool,
    /// Each flow's operations are connections of their own (cps,
    /// [`netblast_spec::profile::Section::own_listener`]): its kernel statistics are many
    /// sockets', and it counts the connections that failed.
    pub own_listener: bool,
    /// A flow's sending end counts what it lost
    /// ([`netblast_spec::profile::Section::sender_counts_lost`]).
    pub sender_counts_lost: bool,
    /// A flow's receiving end counts what was lost by sequence numbers
    /// ([`netblast_spec::profile::Section::receiver_counts_lost`]).
    pub receiver_counts_lost: bool,
}

impl KindInfo {
    /// The kind information of a workload.
    pub fn of(w: &Workload) -> KindInfo {
        let shared_receivers = w.per_cpu_receivers();
        let section = w.section();
        KindInfo {
            shared_receivers,
            counts_msgs: w.counts_msgs(),
            own_listener: section.own_listener(),
            sender_counts_lost: section.sender_counts_lost(),
            receiver_counts_lost: section.receiver_counts_lost(),
        }
    }

    fn counts_msgs(&self) -> bool {
        self.counts_msgs
    }
}

/// Totals kept while intervals are released, for the summary.
#[derive(Debug, Default)]
struct Totals {
    /// Per stream: its latency histogram over the run (rr).
    latency: HashMap<u32, HistSum>,
    /// Per way: every smoothed-RTT sample (one per stream per interval), ns.
    srtt: HashMap<Way, Histogram<u64>>,
    /// Per way: the exact sum of those samples, µs (the histogram's mean is within 0.1%).
    srtt_sum_us: HashMap<Way, u64>,
    /// Per way: the smallest kernel min-RTT seen, µs.
    min_rtt_us: HashMap<Way, u32>,
    /// Per way: the largest congestion window seen, bytes.
    cwnd_max: HashMap<Way, u64>,
}

/// Accumulates one run's measurements: intervals are released once both ends reported them
/// (the live lines, the partial log and the result hold the same intervals), the summary is
/// built at the end.
#[derive(Debug)]
pub struct Aggregator {
    streams: Vec<StreamInfo>,
    /// Way of each stream id: looked up per stream per interval, so a map, not a scan.
    ways: HashMap<u32, Way>,
    info: KindInfo,
    workers: usize,
    gather: Gather<IntervalAcc>,
    prev: Prev,
    intervals: Vec<Interval>,
    totals: Totals,
    ends: HashMap<u32, FlowEnd>,
    server_final: Option<(Vec<ServerStreamFinal>, CpuUsage)>,
    /// Errors seen so far (they make the result incomplete).
    pub errors: Vec<RunError>,
    /// Warnings seen so far (they do not).
    pub warnings: Vec<RunError>,
    worker_cpu: Vec<CpuUsage>,
    /// Each worker thread's CPU time and the CPU it was pinned to.
    threads: Vec<ThreadCpu>,
    sampled: crate::exec::worker::Sampled,
    /// Each host's CPUs and drops over the test, as each side read them.
    pub load: netblast_spec::result::Load,
    /// The server's own lines about the test (escaped: the peer's text).
    pub server_output: Vec<String>,
}

impl Aggregator {
    /// An aggregator for these streams, driven by `workers` workers on this end and the
    /// server's reports.
    pub fn new(streams: Vec<StreamInfo>, workers: usize, info: KindInfo) -> Aggregator {
        Aggregator {
            ways: streams.iter().map(|s| (s.id, s.way)).collect(),
            streams,
            info,
            workers,
            gather: Gather::new(workers + 1),
            prev: Prev::default(),
            intervals: Vec::new(),
            totals: Totals::default(),
            ends: HashMap::new(),
            server_final: None,
            errors: Vec::new(),
            warnings: Vec::new(),
            worker_cpu: Vec::new(),
            threads: Vec::new(),
            sampled: Default::default(),
            load: Default::default(),
            server_output: Vec::new(),
        }
    }

    /// Records an error.
    pub fn error(&mut self, at_s: f64, source: impl Into<String>, message: impl Into<String>) {
        self.errors.push(RunError { at_s, source: source.into(), message: message.into() });
    }

    /// Records a warning.
    pub fn warn(&mut self, at_s: f64, source: impl Into<String>, message: impl Into<String>) {
        self.warnings.push(RunError { at_s, source: source.into(), message: message.into() });
    }

    fn way_of(&self, id: u32) -> Option<Way> {
        self.ways.get(&id).copied()
    }

    /// Takes one event from worker `w`. Returns the intervals that became complete (both ends
    /// reported them), for live output.
    pub fn on_worker(&mut self, w: usize, ev: Event) -> Vec<Interval> {
        match ev {
            Event::Interval { index, start_s, end_s, flows } => {
                let acc = self.gather.part(w, index);
                acc.start_s = Some(acc.start_s.map_or(start_s, |s| s.min(start_s)));
                acc.end_s = Some(acc.end_s.map_or(end_s, |e| e.max(end_s)));
                for f in flows {
                    acc.client.insert(f.id, f);
                }
            }
            Event::FlowDone(end) => {
                if let Some(err) = &end.error {
                    let way = self.way_of(end.id).map(|w| format!(" ({w:?})").to_lowercase()).unwrap_or_default();
                    self.error(end.seconds, format!("stream {}{way}", end.id), err.clone());
                }
                self.ends.insert(end.id, *end);
            }
            Event::WorkerDone { cpu, pinned, pin_error, tcp_samples } => {
                if let Some(e) = pin_error {
                    self.error(0.0, format!("worker {w}"), e);
                }
                self.sampled.add(tcp_samples);
                self.gather.done(w);
                self.worker_cpu.push(cpu);
                self.threads.push(ThreadCpu { name: format!("worker {w}"), cpu: pinned.map(|c| c as u32), usage: cpu });
            }
        }
        self.release()
    }

    /// Takes one server interval report (the server's workers, gathered into one): per stream,
    /// or for a large test per way.
    pub fn on_server_interval(
        &mut self,
        index: u32,
        start_s: f64,
        end_s: f64,
        streams: Vec<ServerSample>,
        ways: Vec<ServerWaySample>,
    ) -> Vec<Interval> {
        let known: Vec<ServerSample> = streams.into_iter().filter(|s| self.ways.contains_key(&s.id)).collect();
        let acc = self.gather.part(self.workers, index);
        acc.server_span = Some((start_s, end_s));
        for s in known {
            acc.server.insert(s.id, s);
        }
        acc.server_ways = ways;
        self.release()
    }

    /// Takes the server's final report: the server reports nothing more.
    pub fn on_server_final(&mut self, streams: Vec<ServerStreamFinal>, cpu: CpuUsage) -> Vec<Interval> {
        // A server's report is checked, not trusted: every stream of the test once, no other.
        let mut seen = std::collections::HashSet::new();
        let mut problems = Vec::new();
        for s in &streams {
            if !self.ways.contains_key(&s.id) {
                problems.push(format!("the server reported stream {}, which this test does not have", s.id));
            } else if !seen.insert(s.id) {
                problems.push(format!("the server reported stream {} twice", s.id));
            }
            if let Some(e) = &s.error {
                self.error(s.seconds, format!("server stream {}", s.id), crate::exec::api::escape(e));
            }
        }
        for p in problems {
            self.error(0.0, "server", p);
        }
        let streams: Vec<ServerStreamFinal> = {
            let mut kept = std::collections::HashSet::new();
            streams.into_iter().filter(|s| self.ways.contains_key(&s.id) && kept.insert(s.id)).collect()
        };
        self.server_final = Some((streams, cpu));
        self.server_gone()
    }

    /// The server will report no more intervals (final report, or its connection is gone).
    pub fn server_gone(&mut self) -> Vec<Interval> {
        self.gather.done(self.workers);
        self.release()
    }

    /// Whether the server's final report arrived.
    pub fn has_server_final(&self) -> bool {
        self.server_final.is_some()
    }

    /// Whether every worker on this end finished.
    pub fn workers_done(&self) -> bool {
        (0..self.workers).all(|w| self.gather.is_done(w))
    }

    /// Whether every stream on this end ended without error.
    pub fn all_streams_clean(&self) -> bool {
        self.streams.iter().all(|s| self.ends.get(&s.id).is_some_and(|e| e.error.is_none()))
    }

    fn release(&mut self) -> Vec<Interval> {
        let ready = self.gather.ready();
        let mut out = Vec::with_capacity(ready.len());
        for (i, acc) in ready {
            let iv = self.build_interval(i, acc);
            self.intervals.push(iv.clone());
            out.push(iv);
        }
        out
    }

    fn build_interval(&mut self, index: u32, acc: IntervalAcc) -> Interval {
        let msgs = self.info.counts_msgs();
        let mut streams = Vec::with_capacity(self.streams.len());
        let mut way_hists: HashMap<Way, HistSum> = HashMap::new();
        let mut problems = Vec::new();
        // A released interval has every reporter's part: a stream missing from an end that
        // reported (its worker had finished) moved nothing in it. Only an end that reported
        // nothing at all (a server gone without its final report) leaves its figures unknown.
        let server_knows = acc.server_span.is_some() || self.server_final.is_some();
        let zero = MeterPart::default();
        for s in &self.streams {
            let c = acc.client.get(&s.id).map(MeterPart::of).unwrap_or(zero);
            let sv = acc.server.get(&s.id).map(MeterPart::of_server).or(server_knows.then_some(zero));
            let c_tcp = acc.client.get(&s.id).and_then(|x| x.tcp);
            let sv_tcp = acc.server.get(&s.id).and_then(|x| x.tcp);
            let (sent, recv, tcp, sent_msgs, recv_msgs) = match s.way {
                Way::Up => (Some(c.bytes), sv.map(|x| x.bytes), c_tcp, Some(c.msgs), sv.map(|x| x.msgs)),
                Way::Down => (sv.map(|x| x.bytes), Some(c.bytes), sv_tcp, sv.map(|x| x.msgs), Some(c.msgs)),
            };
            let hist = acc.client.get(&s.id).and_then(|x| x.hist.as_deref());
            if let Some(h) = hist {
                let way = way_hists.entry(s.way).or_default().add(h);
                let total = self.totals.latency.entry(s.id).or_default().add(h);
                for r in [way, total] {
                    if let Err(e) = r {
                        problems.push(format!("stream {}: {e}", s.id));
                    }
                }
            }
            let (retransmits, segs_out) = match tcp {
                Some(t) => {
                    if t.rtt_us > 0 {
                        let h = self.totals.srtt.entry(s.way).or_insert_with(hist::new_latency_histogram);
                        hist::record_ns(h, t.rtt_us as u64 * 1000);
                        *self.totals.srtt_sum_us.entry(s.way).or_insert(0) += t.rtt_us as u64;
                        let min = if t.min_rtt_us > 0 { t.min_rtt_us } else { t.rtt_us };
                        let m = self.totals.min_rtt_us.entry(s.way).or_insert(min);
                        *m = (*m).min(min);
                    }
                    let c = self.totals.cwnd_max.entry(s.way).or_insert(0);
                    *c = (*c).max(t.cwnd_bytes());
                    (
                        Some(Prev::delta(&mut self.prev.retrans, s.id, t.retrans_segs)),
                        Some(Prev::delta(&mut self.prev.segs, s.id, t.segs_out)),
                    )
                }
                // Not read (--probe off, or the sender is the server): unknown.
                None => (None, None),
            };
            streams.push(StreamInterval {
                id: s.id,
                sent_bytes: sent.unwrap_or(0),
                received_bytes: recv,
                retransmits,
                tcp,
                msgs: msgs.then(|| MsgInterval {
                    sent: sent_msgs.unwrap_or(0),
                    received: recv_msgs,
                    segs_out: if self.info.own_listener { None } else { segs_out },
                    // The receiver's account: the server's for up streams, this end's for down.
                    udp: match s.way {
                        Way::Up => acc.server.get(&s.id).and_then(|x| x.udp),
                        Way::Down => acc.client.get(&s.id).and_then(|x| x.udp),
                    },
                    failed: self.info.own_listener.then(|| acc.client.get(&s.id).map(|x| x.lost).unwrap_or(0)),
                    ..MsgInterval::default()
                }),
                latency: hist.map(Distribution::of),
            });
        }
        for p in problems {
            self.error(0.0, "aggregator", p);
        }
        // This end's span; the server's only when this end reported nothing for the interval.
        let (start_s, end_s) = match (acc.start_s, acc.end_s, acc.server_span) {
            (Some(a), Some(b), _) => (a, b),
            (_, _, Some((a, b))) => (a, b),
            _ => (0.0, 0.0),
        };
        let sums = self.way_sums(&streams, &acc.server_ways, &way_hists, end_s - start_s);
        // A large test's intervals keep the way sums only (its summary keeps every stream).
        if self.streams.len() > MAX_STREAM_DETAIL {
            streams = Vec::new();
        }
        Interval { index, start_s, end_s, streams, sums, http: None }
    }

    fn way_sums(
        &self,
        streams: &[StreamInterval],
        server_ways: &[ServerWaySample],
        hists: &HashMap<Way, HistSum>,
        secs: f64,
    ) -> Vec<WayInterval> {
        let per_s = |n: f64| per_second(n, secs);
        let mut sums = Vec::new();
        for way in [Way::Up, Way::Down] {
            let of_way: Vec<&StreamInterval> = streams.iter().filter(|x| self.way_of(x.id) == Some(way)).collect();
            if of_way.is_empty() {
                continue;
            }
            let mut sent: u64 = of_way.iter().map(|x| x.sent_bytes).sum();
            let mut received: Option<u64> = of_way.iter().map(|x| x.received_bytes).sum();
            let mut msgs = MsgInterval::add_up(of_way.iter().filter_map(|x| x.msgs.as_ref()), None);
            let mut retransmits = of_way.iter().filter_map(|x| x.retransmits).reduce(|a, b| a + b);
            // A large test's server reported the way, not its streams: its side of the sums.
            if let Some(sw) = server_ways.iter().find(|w| w.way == way) {
                match way {
                    Way::Up => {
                        received = Some(sw.bytes);
                        if let Some(m) = msgs.as_mut() {
                            m.received = Some(sw.msgs);
                        }
                    }
                    Way::Down => {
                        sent = sw.bytes;
                        retransmits = Some(sw.retransmits);
                        if let Some(m) = msgs.as_mut() {
                            m.sent = sw.msgs;
                            m.segs_out = sw.segs_out;
                        }
                    }
                }
            }
            if let Some(m) = msgs.as_mut() {
                m.sent_per_s = Some(per_s(m.sent as f64));
                m.received_per_s = m.received.map(|n| per_s(n as f64));
                m.segs_out_per_s = m.segs_out.map(|n| per_s(n as f64));
            }
            let merged = hists.get(&way).and_then(HistSum::histogram);
            sums.push(WayInterval {
                way,
                sent_bytes: sent,
                sent_bits_per_s: per_s(sent as f64 * 8.0),
                received_bytes: received,
                received_bits_per_s: received.map(|b| per_s(b as f64 * 8.0)),
                retransmits,
                msgs,
                latency: merged.map(Distribution::of),
            });
        }
        sums
    }

    /// Releases whatever is still held (every reporter is treated as done), then builds the
    /// summary. `control_cpu` is the CPU of the thread that ran the aggregator; the workers'
    /// own CPU (reported when they finished) is added to it, so the client figure covers
    /// exactly the threads of this test. Returns the intervals released by this call and the
    /// summary.
    pub fn finish(&mut self, control_cpu: CpuUsage) -> (Vec<Interval>, Summary) {
        for r in 0..=self.workers {
            self.gather.done(r);
        }
        if let Some(n) = self.sampled.note("client") {
            self.warn(0.0, "client", n);
        }
        let last = self.release();
        let summary = self.summary(control_cpu);
        (last, summary)
    }

    /// Every interval released so far, in order.
    pub fn intervals(&self) -> &[Interval] {
        &self.intervals
    }

    fn summary(&mut self, control_cpu: CpuUsage) -> Summary {
        let mut client_cpu = control_cpu;
        for c in &self.worker_cpu {
            client_cpu.user_s += c.user_s;
            client_cpu.system_s += c.system_s;
        }
        let mut acc = WayAcc::default();
        let server: HashMap<u32, &ServerStreamFinal> =
            self.server_final.iter().flat_map(|(v, _)| v.iter().map(|s| (s.id, s))).collect();
        let stream_sums: Vec<StreamSummary> =
            self.streams.iter().map(|s| self.stream_summary(s, server.get(&s.id).copied(), &mut acc)).collect();
        let ways: Vec<WaySummary> = [Way::Up, Way::Down]
            .into_iter()
            .filter_map(|way| {
                let of_way: Vec<&StreamSummary> = stream_sums.iter().filter(|s| s.way == way).collect();
                (!of_way.is_empty()).then(|| self.way_summary(way, &of_way, &mut acc))
            })
            .collect();
        for p in std::mem::take(&mut acc.problems) {
            self.error(0.0, "aggregator", p);
        }
        let duration_s = stream_sums
            .iter()
            .flat_map(|s| [Some(s.sender.seconds), s.receiver.map(|r| r.seconds)])
            .flatten()
            .fold(0.0, f64::max);
        let bits: f64 = ways.iter().map(|w| w.sender.bytes as f64 * 8.0).sum();
        let server_cpu = self.server_final.as_ref().map(|(_, c)| *c);
        let cpu = CpuSummary::new(client_cpu, server_cpu, bits);
        let mut load = std::mem::take(&mut self.load);
        if let Some(c) = load.client.as_mut() {
            c.threads = std::mem::take(&mut self.threads);
            c.threads.sort_by_key(|t| t.name.trim_start_matches("worker ").parse::<usize>().unwrap_or(usize::MAX));
        }
        Summary { duration_s, ways, streams: stream_sums, cpu, http: None, load }
    }

    /// One stream's totals: each end's count (the sender's from the interval sums when its end
    /// died), its messages, its kernel figures; its histograms added to its way's.
    fn stream_summary(&self, s: &StreamInfo, theirs: Option<&ServerStreamFinal>, acc: &mut WayAcc) -> StreamSummary {
        let intervals = &self.intervals;
        let mine = self.ends.get(&s.id);
        let mine_total = mine.map(|e| SideTotal::new(e.bytes, e.seconds));
        let theirs_total = theirs.map(|e| SideTotal::new(e.bytes, e.seconds));
        let (sender, receiver, tcp, sent_msgs, recv_msgs) = match s.way {
            Way::Up => {
                (mine_total, theirs_total, mine.and_then(|e| e.tcp), mine.map(|e| e.msgs), theirs.map(|e| e.msgs))
            }
            Way::Down => {
                (theirs_total, mine_total, theirs.and_then(|e| e.tcp), theirs.map(|e| e.msgs), mine.map(|e| e.msgs))
            }
        };
        let of_stream = || intervals.iter().flat_map(|i| i.streams.iter()).filter(move |x| x.id == s.id);
        // When the sender's total is missing (its end died), fall back to the interval sums.
        let sender = sender.unwrap_or_else(|| {
            let bytes = of_stream().map(|x| x.sent_bytes).sum();
            SideTotal::new(bytes, intervals.last().map(|i| i.end_s).unwrap_or(0.0))
        });
        let sent_msgs = sent_msgs.unwrap_or_else(|| of_stream().filter_map(|x| x.msgs.as_ref()).map(|m| m.sent).sum());
        let last_tcp = tcp.or_else(|| {
            intervals.iter().rev().flat_map(|i| i.streams.iter()).find(|x| x.id == s.id).and_then(|x| x.tcp)
        });
        let latency_hist = self.totals.latency.get(&s.id).and_then(HistSum::histogram);
        if let Some(h) = latency_hist {
            if let Err(e) = acc.latency.entry(s.way).or_default().add(h) {
                acc.problems.push(format!("stream {} latency: {e}", s.id));
            }
        }
        let msgs = self.info.counts_msgs().then(|| {
            let receiving = match s.way {
                Way::Up => theirs.map(ReceivingEnd::of_server),
                Way::Down => mine.map(ReceivingEnd::of_client),
            };
            self.stream_msgs((sent_msgs, recv_msgs), (sender, receiver), last_tcp, receiving, mine)
        });
        // Kernel RTT histogram and TCP_INFO cross-check of the sending socket.
        let (rtt_hist, tcp_info) = match s.way {
            Way::Up => (mine.and_then(|e| e.rtt_hist.as_deref().cloned()), mine.and_then(|e| e.tcp_info)),
            Way::Down => {
                let decoded = theirs.and_then(|e| e.rtt_hist.as_ref()).map(|h| h.decode()).transpose();
                let h = decoded.unwrap_or_else(|e| {
                    acc.problems.push(format!("server's RTT histogram of stream {}: {e}", s.id));
                    None
                });
                (h, theirs.and_then(|e| e.tcp_info))
            }
        };
        if let Some(h) = &rtt_hist {
            if let Err(e) = acc.rtt.entry(s.way).or_default().add(h) {
                acc.problems.push(format!("stream {} kernel RTT: {e}", s.id));
            }
        }
        // A receiver cannot read more than its sender sent: a report that says so is wrong
        // (a broken or hostile peer), and the run is not complete.
        if let Some(r) = receiver.filter(|r| r.bytes > sender.bytes && !self.info.shared_receivers) {
            let who = if s.way == Way::Up { "server (receiver)" } else { "server (sender)" };
            acc.problems.push(format!(
                "stream {}: the {who} reports {} bytes received of {} sent: the report is wrong",
                s.id, r.bytes, sender.bytes
            ));
        }
        StreamSummary {
            kernel_rtt: rtt_hist.as_ref().map(Distribution::of),
            tcp_info,
            id: s.id,
            way: s.way,
            sender,
            receiver,
            retransmits: last_tcp.map(|t| t.retrans_segs),
            // TCP_INFO at the end: the cross-check beside eBPF, else the last poll.
            spurious_retransmits: tcp_info.or(last_tcp).and_then(|t| t.dsack_segs),
            tcp: last_tcp,
            msgs,
            latency: latency_hist.map(Distribution::of),
            client_cpu: mine.and_then(|e| e.cpu),
            server_cpu: theirs.and_then(|e| e.cpu),
        }
    }

    /// A message kind's stream totals: sent and received (each over its end's span), lost
    /// (as the kind defines it), segments and wire packets of its one socket, the receiving
    /// end's drops, queue and datagram quality, a cps flow's connection counts.
    fn stream_msgs(
        &self,
        (sent, received): (u64, Option<u64>),
        (sender, receiver): (SideTotal, Option<SideTotal>),
        last_tcp: Option<netblast_spec::result::TcpStats>,
        receiving: Option<ReceivingEnd>,
        mine: Option<&FlowEnd>,
    ) -> MsgTotals {
        let lost = if self.info.receiver_counts_lost {
            // A per-CPU receiver's count is not its stream's: loss is the way's.
            received.filter(|_| !self.info.shared_receivers).map(|r| sent.saturating_sub(r))
        } else if self.info.sender_counts_lost {
            Some(mine.map(|e| e.lost).unwrap_or(0))
        } else {
            None
        };
        // A cps flow's statistics are many connections': no one socket's segment count.
        let one_socket = last_tcp.filter(|_| !self.info.own_listener);
        MsgTotals {
            sent,
            sent_per_s: per_second(sent as f64, sender.seconds),
            received,
            received_per_s: received.zip(receiver).map(|(m, r)| per_second(m as f64, r.seconds)),
            lost,
            tcp: one_socket.map(|t| TcpPackets::new(t.segs_out, Some(t.segs_out + t.segs_in), sender.seconds)),
            udp: receiving.and_then(ReceivingEnd::totals),
            conns: mine.and_then(|e| e.conns),
        }
    }

    /// One way's totals from its streams': bytes over the longest span, RTT from the sampled
    /// smoothed RTTs, messages, retransmissions, the way's histograms.
    fn way_summary(&self, way: Way, of_way: &[&StreamSummary], acc: &mut WayAcc) -> WaySummary {
        let sent: u64 = of_way.iter().map(|s| s.sender.bytes).sum();
        let sent_s = of_way.iter().map(|s| s.sender.seconds).fold(0.0, f64::max);
        let received = of_way.iter().all(|s| s.receiver.is_some()).then(|| {
            let b: u64 = of_way.iter().filter_map(|s| s.receiver).map(|r| r.bytes).sum();
            (b, of_way.iter().filter_map(|s| s.receiver).map(|r| r.seconds).fold(0.0, f64::max))
        });
        let srtt = self.totals.srtt.get(&way);
        let rtt = srtt.filter(|h| !h.is_empty()).map(|h| RttSummary {
            min_us: self.totals.min_rtt_us.get(&way).copied().unwrap_or(0),
            mean_us: self.totals.srtt_sum_us.get(&way).copied().unwrap_or(0) as f64 / h.len() as f64,
            max_us: (h.max() / 1000) as u32,
            samples: h.len(),
        });
        let received_s = received.map(|r| r.1);
        let msgs = self.info.counts_msgs().then(|| self.way_msgs(of_way, sent_s, received_s, &mut acc.problems));
        let merged = acc.latency.get(&way).and_then(HistSum::histogram);
        let rtt_merged = acc.rtt.get(&way).and_then(HistSum::histogram);
        WaySummary::new(WayParts {
            way,
            streams: of_way.len() as u32,
            sent: (sent, sent_s),
            received,
            retransmits: of_way.iter().filter_map(|s| s.retransmits).reduce(|a, b| a + b),
            spurious_retransmits: of_way.iter().map(|s| s.spurious_retransmits).sum(),
            segs_out: of_way.iter().filter_map(|s| s.tcp).map(|t| t.segs_out).sum(),
            rtt,
            rtt_hist: srtt.filter(|h| !h.is_empty()).and_then(|h| EncodedHistogram::encode(h).ok()),
            cwnd_max_bytes: self.totals.cwnd_max.get(&way).copied().unwrap_or(0),
            msgs,
            latency: merged.map(Distribution::of),
            kernel_rtt: rtt_merged.map(Distribution::of),
            limits: netblast_spec::omit::limits_of(of_way),
        })
    }

    /// A way's message totals from its streams': counts added, rates over the way's spans,
    /// loss per way when the server's per-CPU receivers take the datagrams.
    fn way_msgs(
        &self,
        of_way: &[&StreamSummary],
        sent_s: f64,
        received_s: Option<f64>,
        problems: &mut Vec<String>,
    ) -> MsgTotals {
        let m: Vec<&MsgTotals> = of_way.iter().filter_map(|s| s.msgs.as_ref()).collect();
        let mut t = MsgTotals::add_up(&m, sent_s, received_s.unwrap_or(0.0));
        // The server's per-CPU receivers count the way, not a stream: loss is the way's.
        if self.info.shared_receivers {
            t.lost = t.received.map(|r| t.sent.saturating_sub(r));
            if let Some(r) = t.received.filter(|&r| r > t.sent) {
                problems.push(format!(
                    "the server's receivers report {r} datagrams received of {} sent: the report is wrong",
                    t.sent
                ));
            }
        }
        t
    }
}

/// What the summary gathers per way while it goes over the streams: their latency and kernel
/// RTT histograms added, and the problems found.
#[derive(Default)]
struct WayAcc {
    latency: HashMap<Way, HistSum>,
    rtt: HashMap<Way, HistSum>,
    problems: Vec<String>,
}

/// What a stream's receiving end reports of its socket: kernel drops, its receive queue,
/// datagram quality (client and server report them in their own shapes).
#[derive(Clone, Copy)]
struct ReceivingEnd {
    kernel_drops: Option<u64>,
    rcvbuf: Option<u64>,
    udp: Option<UdpQuality>,
}

impl ReceivingEnd {
    /// The UDP figures it read; `None` when it read none (a TCP stream's end).
    fn totals(self) -> Option<UdpTotals> {
        let t = UdpTotals { kernel_drops: self.kernel_drops, rcvbuf: self.rcvbuf, quality: self.udp };
        (t != UdpTotals::default()).then_some(t)
    }

    fn of_server(e: &ServerStreamFinal) -> ReceivingEnd {
        ReceivingEnd { kernel_drops: e.kernel_drops, rcvbuf: e.rcvbuf, udp: e.udp }
    }

    fn of_client(e: &FlowEnd) -> ReceivingEnd {
        ReceivingEnd { kernel_drops: e.kernel_drops, rcvbuf: e.rcvbuf, udp: e.udp }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netblast_spec::result::TcpStats;

    fn info(id: u32, way: Way) -> StreamInfo {
        StreamInfo {
            id,
            way,
            local: String::new(),
            remote: String::new(),
            client_cpu: 0,
            server_cpu: None,
            part: None,
            socket: None,
        }
    }

    fn tcp(retrans: u64, rtt: u32) -> Option<TcpStats> {
        Some(TcpStats {
            retrans_segs: retrans,
            rtt_us: rtt,
            min_rtt_us: rtt / 2,
            cwnd_segs: 10,
            mss: 1000,
            ..Default::default()
        })
    }

    const BULK: KindInfo = KindInfo {
        shared_receivers: false,
        counts_msgs: false,
        own_listener: false,
        sender_counts_lost: false,
        receiver_counts_lost: false,
    };

    fn sample(id: u32, bytes: u64, tcp: Option<TcpStats>) -> FlowSample {
        FlowSample { id, bytes, tcp, ..Default::default() }
    }

    fn end(id: u32, bytes: u64, seconds: f64, tcp: Option<TcpStats>) -> FlowEnd {
        FlowEnd { id, bytes, seconds, tcp, ..Default::default() }
    }

    fn server(id: u32, bytes: u64, tcp: Option<TcpStats>) -> ServerSample {
        ServerSample { id, bytes, msgs: 0, tcp, udp: None }
    }

    fn server_final(id: u32, bytes: u64, seconds: f64, tcp: Option<TcpStats>) -> ServerStreamFinal {
        ServerStreamFinal { id, bytes, seconds, tcp, ..Default::default() }
    }

    #[test]
    fn spurious_retransmits_add_up_only_when_every_stream_reports_them() {
        let with_dsack = |retrans, dsack| tcp(retrans, 100).map(|t| TcpStats { dsack_segs: dsack, ..t });
        let summarize = |second: Option<u64>| {
            let mut a = Aggregator::new(vec![info(0, Way::Up), info(1, Way::Up)], 1, BULK);
            a.on_worker(0, Event::FlowDone(Box::new(end(0, 1000, 1.0, with_dsack(5, Some(2))))));
            a.on_worker(0, Event::FlowDone(Box::new(end(1, 1000, 1.0, with_dsack(3, second)))));
            a.finish(CpuUsage::default()).1
        };
        let sum = summarize(Some(3));
        assert_eq!(sum.ways[0].retransmits, Some(8));
        assert_eq!(sum.ways[0].spurious_retransmits, Some(5));
        assert_eq!(sum.streams[0].spurious_retransmits, Some(2));
        let sum = summarize(None);
        assert_eq!(sum.ways[0].spurious_retransmits, None, "one stream's source (eBPF) cannot tell");
        assert_eq!(sum.streams[0].spurious_retransmits, Some(2));
    }

    #[test]
    fn merges_both_ends_and_derives_rates() {
        let mut a = Aggregator::new(vec![info(0, Way::Up), info(1, Way::Down)], 1, BULK);
        let live = a.on_worker(
            0,
            Event::Interval {
                index: 0,
                start_s: 0.0,
                end_s: 1.0,
                flows: vec![sample(0, 1000, tcp(2, 100)), sample(1, 500, None)],
            },
        );
        assert!(live.is_empty(), "interval 0 waits for the server's view");
        let live = a.on_server_interval(0, 0.0, 1.0, vec![server(0, 990, None), server(1, 500, tcp(1, 300))], vec![]);
        assert_eq!(live.len(), 1, "both ends reported interval 0");
        assert_eq!(live[0].streams[0].received_bytes, Some(990), "the live interval holds the server's view");
        a.on_worker(0, Event::FlowDone(Box::new(end(0, 1000, 1.0, tcp(3, 100)))));
        a.on_worker(0, Event::FlowDone(Box::new(end(1, 500, 1.1, None))));
        a.on_worker(
            0,
            Event::WorkerDone {
                cpu: CpuUsage { user_s: 0.1, system_s: 0.4, wall_s: 1.0 },
                pinned: Some(0),
                pin_error: None,
                tcp_samples: Default::default(),
            },
        );
        a.on_server_final(
            vec![server_final(0, 1000, 1.05, None), server_final(1, 500, 1.0, tcp(1, 300))],
            CpuUsage { user_s: 0.0, system_s: 0.5, wall_s: 1.0 },
        );
        assert!(a.workers_done() && a.has_server_final() && a.all_streams_clean());
        let (rest, sum) = a.finish(CpuUsage { user_s: 0.0, system_s: 0.0, wall_s: 1.2 });
        assert!(rest.is_empty(), "everything was released live");
        let iv = a.intervals().to_vec();
        assert_eq!(iv.len(), 1);
        let up = &iv[0].streams[0];
        assert_eq!((up.sent_bytes, up.received_bytes, up.retransmits), (1000, Some(990), Some(2)));
        assert_eq!(up.msgs, None, "bulk carries no message counts");
        let down = &iv[0].streams[1];
        assert_eq!((down.sent_bytes, down.received_bytes, down.retransmits), (500, Some(500), Some(1)));
        assert_eq!(iv[0].sums[0].sent_bits_per_s, 8000.0);
        let w_up = &sum.ways[0];
        assert_eq!(w_up.sender.bytes, 1000);
        assert_eq!(w_up.receiver.unwrap().bytes, 1000);
        assert_eq!(w_up.retransmits, Some(3));
        assert_eq!(w_up.cwnd_max_bytes, 10_000);
        let w_down = &sum.ways[1];
        assert_eq!(w_down.sender.bytes, 500);
        assert_eq!(w_down.rtt.unwrap().mean_us, 300.0);
        assert!((sum.cpu.bits_per_client_cpu_s - 1500.0 * 8.0 / 0.5).abs() < 1e-6);
        assert_eq!(sum.duration_s, 1.1);
    }

    #[test]
    fn live_intervals_wait_for_every_worker() {
        let mut a = Aggregator::new(vec![info(0, Way::Up), info(1, Way::Up)], 2, BULK);
        let iv = |id| Event::Interval { index: 0, start_s: 0.0, end_s: 1.0, flows: vec![sample(id, 1, None)] };
        assert!(a.on_worker(0, iv(0)).is_empty());
        assert!(a.on_worker(1, iv(1)).is_empty(), "and for the server");
        let live = a.on_server_interval(0, 0.0, 1.0, vec![server(0, 1, None), server(99, 7, None)], vec![]);
        assert_eq!(live.len(), 1);
        assert_eq!(live[0].sums[0].sent_bytes, 2);
        assert_eq!(
            live[0].sums[0].received_bytes,
            Some(1),
            "the server reported the interval without stream 1: it read nothing of it; stream 99 is not ours"
        );
        // An interval the server never reported (its connection lost, no final report) is
        // unknown on its side, not zero.
        a.on_worker(0, Event::Interval { index: 1, start_s: 1.0, end_s: 2.0, flows: vec![sample(0, 5, None)] });
        a.on_worker(1, Event::Interval { index: 1, start_s: 1.0, end_s: 2.0, flows: vec![sample(1, 5, None)] });
        let live = a.server_gone();
        assert_eq!(live.len(), 1);
        assert_eq!((live[0].sums[0].sent_bytes, live[0].sums[0].received_bytes), (10, None));
    }

    #[test]
    fn a_server_report_that_cannot_be_true_makes_the_run_incomplete() {
        let mut a = Aggregator::new(vec![info(0, Way::Up)], 1, BULK);
        a.on_worker(0, Event::FlowDone(Box::new(end(0, 1000, 1.0, None))));
        a.on_server_final(
            vec![server_final(0, u64::MAX, 1.0, None), server_final(0, 5, 1.0, None), server_final(9, 5, 1.0, None)],
            CpuUsage::default(),
        );
        let (_, sum) = a.finish(CpuUsage::default());
        let msgs: Vec<&str> = a.errors.iter().map(|e| e.message.as_str()).collect();
        assert!(msgs.iter().any(|m| m.contains("stream 9") && m.contains("does not have")), "{msgs:?}");
        assert!(msgs.iter().any(|m| m.contains("twice")), "{msgs:?}");
        assert!(msgs.iter().any(|m| m.contains("the report is wrong")), "{msgs:?}");
        assert_eq!(sum.streams.len(), 1);
    }

    #[test]
    fn stream_errors_are_kept() {
        let mut a = Aggregator::new(vec![info(0, Way::Up)], 1, BULK);
        let mut e = end(0, 10, 2.5, None);
        e.error = Some("connection reset by peer".into());
        a.on_worker(0, Event::FlowDone(Box::new(e)));
        assert!(!a.all_streams_clean());
        assert_eq!(a.errors[0].source, "stream 0 (up)");
        assert_eq!(a.errors[0].at_s, 2.5);
    }

    #[test]
    fn latency_histograms_are_added_not_averaged() {
        let rr = KindInfo {
            shared_receivers: false,
            counts_msgs: true,
            own_listener: false,
            sender_counts_lost: false,
            receiver_counts_lost: false,
        };
        let mut a = Aggregator::new(vec![info(0, Way::Up), info(1, Way::Up)], 2, rr);
        let hist_of = |v: u64, n: u64| {
            let mut h = hist::new_latency_histogram();
            for _ in 0..n {
                hist::record_ns(&mut h, v);
            }
            Some(Box::new(h))
        };
        // Stream 0: 900 fast transactions; stream 1: 100 slow ones. An average of the two p99s
        // would say ~500 us; the merged histogram's p99 is the slow value.
        for (w, id, v, n) in [(0usize, 0u32, 10_000u64, 900u64), (1, 1, 1_000_000, 100)] {
            let f = FlowSample { id, msgs: n, hist: hist_of(v, n), ..Default::default() };
            a.on_worker(w, Event::Interval { index: 0, start_s: 0.0, end_s: 1.0, flows: vec![f] });
            a.on_worker(w, Event::FlowDone(Box::new(FlowEnd { id, msgs: n, seconds: 1.0, ..Default::default() })));
        }
        let (iv, sum) = a.finish(CpuUsage::default());
        let l = iv[0].sums[0].latency.clone().unwrap();
        assert_eq!(
            iv[0].sums[0].latency.as_ref().unwrap().hist.as_ref().unwrap().count,
            1000,
            "the interval carries its histogram"
        );
        assert_eq!(l.count, 1000);
        assert!(l.p50_ns < 11_000 && l.p99_ns > 990_000, "{l:?}");
        let total = sum.ways[0].latency.clone().unwrap();
        assert_eq!(total.count, 1000);
        let decoded = sum.ways[0].latency.as_ref().unwrap().histogram().unwrap();
        assert_eq!(decoded.len(), 1000);
        assert_eq!(sum.ways[0].msgs.unwrap().sent, 1000);
        assert_eq!(sum.streams[1].latency.as_ref().unwrap().count, 100);
        assert_eq!(sum.streams[1].latency.as_ref().unwrap().histogram().unwrap().len(), 100);
    }

    #[test]
    fn udp_loss_is_sent_minus_received() {
        let udp = KindInfo {
            shared_receivers: false,
            counts_msgs: true,
            own_listener: false,
            sender_counts_lost: false,
            receiver_counts_lost: true,
        };
        let mut a = Aggregator::new(vec![info(0, Way::Up)], 1, udp);
        a.on_worker(
            0,
            Event::FlowDone(Box::new(FlowEnd { id: 0, msgs: 1000, bytes: 1000, seconds: 1.0, ..Default::default() })),
        );
        a.on_server_final(
            vec![ServerStreamFinal { id: 0, bytes: 990, msgs: 990, seconds: 1.0, ..Default::default() }],
            CpuUsage::default(),
        );
        let (_, sum) = a.finish(CpuUsage::default());
        let m = sum.ways[0].msgs.unwrap();
        assert_eq!((m.sent, m.received, m.lost), (1000, Some(990), Some(10)));
    }
}
