//! The aggregator: folds worker events (this end) and server reports (the other end) into the
//! intervals and summary of a [`RunResult`].
//!
//! For every stream the *sender* side supplies bytes sent and the kernel TCP statistics (the
//! sender is where RTT samples exist), the *receiver* side supplies bytes received. For an `up`
//! stream the client is the sender; for a `down` stream the server is, and its figures arrive
//! over the control connection.

use crate::worker::{Event, FlowEnd, FlowSample};
use netblast_spec::profile::Way;
use netblast_spec::result::{
    CpuSummary, CpuUsage, Interval, RttSummary, RunError, SideTotal, StreamInfo, StreamInterval, StreamSummary,
    Summary, TcpStats, WayInterval, WaySummary,
};
use netblast_spec::wire::{ServerSample, ServerStreamFinal};
use std::collections::{BTreeMap, HashMap};

#[derive(Debug, Default)]
struct IntervalAcc {
    start_s: Option<f64>,
    end_s: Option<f64>,
    client: HashMap<u32, FlowSample>,
    server: HashMap<u32, ServerSample>,
}

/// Accumulates one run's measurements.
#[derive(Debug)]
pub struct Aggregator {
    streams: Vec<StreamInfo>,
    workers: usize,
    intervals: BTreeMap<u32, IntervalAcc>,
    worker_last: Vec<Option<u32>>,
    worker_done: Vec<bool>,
    printed: u32,
    live_retrans: HashMap<u32, u64>,
    ends: HashMap<u32, FlowEnd>,
    server_final: Option<(Vec<ServerStreamFinal>, CpuUsage)>,
    /// Errors seen so far.
    pub errors: Vec<RunError>,
    worker_cpu: Vec<CpuUsage>,
}

impl Aggregator {
    /// An aggregator for these streams, driven by `workers` workers on this end.
    pub fn new(streams: Vec<StreamInfo>, workers: usize) -> Aggregator {
        Aggregator {
            streams,
            workers,
            intervals: BTreeMap::new(),
            worker_last: vec![None; workers],
            worker_done: vec![false; workers],
            printed: 0,
            live_retrans: HashMap::new(),
            ends: HashMap::new(),
            server_final: None,
            errors: Vec::new(),
            worker_cpu: Vec::new(),
        }
    }

    /// Records an error.
    pub fn error(&mut self, at_s: f64, source: impl Into<String>, message: impl Into<String>) {
        self.errors.push(RunError { at_s, source: source.into(), message: message.into() });
    }

    fn way_of(&self, id: u32) -> Option<Way> {
        self.streams.iter().find(|s| s.id == id).map(|s| s.way)
    }

    /// Takes one event from worker `w`. Returns the intervals that became complete on this
    /// end (every worker reported them or finished), for live output.
    pub fn on_worker(&mut self, w: usize, ev: Event) -> Vec<Interval> {
        match ev {
            Event::Interval { index, start_s, end_s, flows } => {
                let acc = self.intervals.entry(index).or_default();
                acc.start_s = Some(acc.start_s.map_or(start_s, |s| s.min(start_s)));
                acc.end_s = Some(acc.end_s.map_or(end_s, |e| e.max(end_s)));
                for f in flows {
                    acc.client.insert(f.id, f);
                }
                if let Some(last) = self.worker_last.get_mut(w) {
                    *last = Some(index);
                }
            }
            Event::FlowDone(end) => {
                if let Some(err) = &end.error {
                    let way = self.way_of(end.id).map(|w| format!(" ({w:?})").to_lowercase()).unwrap_or_default();
                    self.error(end.seconds, format!("stream {}{way}", end.id), err.clone());
                }
                self.ends.insert(end.id, end);
            }
            Event::WorkerDone { cpu, pinned: _, pin_error } => {
                if let Some(e) = pin_error {
                    self.error(0.0, format!("worker {w}"), e);
                }
                if let Some(d) = self.worker_done.get_mut(w) {
                    *d = true;
                }
                self.worker_cpu.push(cpu);
            }
        }
        self.complete_intervals()
    }

    fn complete_intervals(&mut self) -> Vec<Interval> {
        let mut out = Vec::new();
        loop {
            let i = self.printed;
            if !self.intervals.contains_key(&i) {
                break;
            }
            let all = (0..self.workers).all(|w| self.worker_done[w] || self.worker_last[w].is_some_and(|l| l >= i));
            if !all {
                break;
            }
            // Live lines carry this end's view only; the result merges both ends later.
            let mut prev = std::mem::take(&mut self.live_retrans);
            out.push(self.build_interval(i, &mut prev));
            self.live_retrans = prev;
            self.printed += 1;
        }
        out
    }

    /// Takes one server interval report.
    pub fn on_server_interval(&mut self, index: u32, start_s: f64, end_s: f64, streams: Vec<ServerSample>) {
        let acc = self.intervals.entry(index).or_default();
        acc.start_s.get_or_insert(start_s);
        acc.end_s.get_or_insert(end_s);
        for s in streams {
            acc.server.insert(s.id, s);
        }
    }

    /// Takes the server's final report.
    pub fn on_server_final(&mut self, streams: Vec<ServerStreamFinal>, cpu: CpuUsage) {
        for s in &streams {
            if let Some(e) = &s.error {
                self.error(s.seconds, format!("server stream {}", s.id), e.clone());
            }
        }
        self.server_final = Some((streams, cpu));
    }

    /// Whether the server's final report arrived.
    pub fn has_server_final(&self) -> bool {
        self.server_final.is_some()
    }

    /// Whether every worker on this end finished.
    pub fn workers_done(&self) -> bool {
        self.worker_done.iter().all(|d| *d)
    }

    /// Whether every stream on this end ended without error.
    pub fn all_streams_clean(&self) -> bool {
        self.streams.iter().all(|s| self.ends.get(&s.id).is_some_and(|e| e.error.is_none()))
    }

    fn build_interval(&self, index: u32, prev: &mut HashMap<u32, u64>) -> Interval {
        let empty = IntervalAcc::default();
        let acc = self.intervals.get(&index).unwrap_or(&empty);
        let mut streams = Vec::with_capacity(self.streams.len());
        for s in &self.streams {
            let c = acc.client.get(&s.id);
            let sv = acc.server.get(&s.id);
            let (sent, recv, tcp) = match s.way {
                Way::Up => (c.map(|x| x.bytes), sv.map(|x| x.bytes), c.and_then(|x| x.tcp)),
                Way::Down => (sv.map(|x| x.bytes), c.map(|x| x.bytes), sv.and_then(|x| x.tcp)),
            };
            // Retransmits in the interval: the sender's cumulative count minus the last one seen.
            let retransmits = match tcp {
                Some(t) => t.retrans_segs.saturating_sub(prev.insert(s.id, t.retrans_segs).unwrap_or(0)),
                None => 0,
            };
            streams.push(StreamInterval {
                id: s.id,
                sent_bytes: sent.unwrap_or(0),
                received_bytes: recv,
                retransmits,
                tcp,
            });
        }
        let start_s = acc.start_s.unwrap_or(0.0);
        let end_s = acc.end_s.unwrap_or(start_s);
        let secs = (end_s - start_s).max(0.0);
        let rate = |b: u64| if secs > 0.0 { b as f64 * 8.0 / secs } else { 0.0 };
        let mut sums = Vec::new();
        for way in [Way::Up, Way::Down] {
            let of_way: Vec<&StreamInterval> = streams.iter().filter(|x| self.way_of(x.id) == Some(way)).collect();
            if of_way.is_empty() {
                continue;
            }
            let sent: u64 = of_way.iter().map(|x| x.sent_bytes).sum();
            let received: Option<u64> = of_way.iter().map(|x| x.received_bytes).sum();
            sums.push(WayInterval {
                way,
                sent_bytes: sent,
                sent_bits_per_s: rate(sent),
                received_bytes: received,
                received_bits_per_s: received.map(rate),
                retransmits: of_way.iter().map(|x| x.retransmits).sum(),
            });
        }
        Interval { index, start_s, end_s, streams, sums }
    }

    /// Builds the final intervals and summary. `control_cpu` is the CPU of the thread that ran
    /// the aggregator; the workers' own CPU (reported when they finished) is added to it, so
    /// the client figure covers exactly the threads of this test.
    pub fn finish(&self, control_cpu: CpuUsage) -> (Vec<Interval>, Summary) {
        let mut client_cpu = control_cpu;
        for c in &self.worker_cpu {
            client_cpu.user_s += c.user_s;
            client_cpu.system_s += c.system_s;
        }
        let mut prev = HashMap::new();
        let intervals: Vec<Interval> = self.intervals.keys().map(|&i| self.build_interval(i, &mut prev)).collect();

        let server: HashMap<u32, &ServerStreamFinal> =
            self.server_final.iter().flat_map(|(v, _)| v.iter().map(|s| (s.id, s))).collect();
        let mut stream_sums = Vec::new();
        for s in &self.streams {
            let mine = self.ends.get(&s.id);
            let theirs = server.get(&s.id);
            let mine_total = mine.map(|e| SideTotal::new(e.bytes, e.seconds));
            let theirs_total = theirs.map(|e| SideTotal::new(e.bytes, e.seconds));
            let (sender, receiver, tcp) = match s.way {
                Way::Up => (mine_total, theirs_total, mine.and_then(|e| e.tcp)),
                Way::Down => (theirs_total, mine_total, theirs.and_then(|e| e.tcp)),
            };
            // When the sender's total is missing (server died), fall back to the interval sums.
            let sender = sender.unwrap_or_else(|| {
                let bytes = intervals
                    .iter()
                    .flat_map(|i| i.streams.iter())
                    .filter(|x| x.id == s.id)
                    .map(|x| x.sent_bytes)
                    .sum();
                let secs = intervals.last().map(|i| i.end_s).unwrap_or(0.0);
                SideTotal::new(bytes, secs)
            });
            let last_tcp = tcp.or_else(|| {
                intervals.iter().rev().flat_map(|i| i.streams.iter()).find(|x| x.id == s.id).and_then(|x| x.tcp)
            });
            stream_sums.push(StreamSummary {
                id: s.id,
                way: s.way,
                sender,
                receiver,
                retransmits: last_tcp.map(|t| t.retrans_segs).unwrap_or(0),
                tcp: last_tcp,
            });
        }

        let mut ways = Vec::new();
        for way in [Way::Up, Way::Down] {
            let of_way: Vec<&StreamSummary> = stream_sums.iter().filter(|s| s.way == way).collect();
            if of_way.is_empty() {
                continue;
            }
            let sent: u64 = of_way.iter().map(|s| s.sender.bytes).sum();
            let sent_s = of_way.iter().map(|s| s.sender.seconds).fold(0.0, f64::max);
            let receiver = if of_way.iter().all(|s| s.receiver.is_some()) {
                let b: u64 = of_way.iter().filter_map(|s| s.receiver).map(|r| r.bytes).sum();
                let secs = of_way.iter().filter_map(|s| s.receiver).map(|r| r.seconds).fold(0.0, f64::max);
                Some(SideTotal::new(b, secs))
            } else {
                None
            };
            let samples: Vec<TcpStats> = intervals
                .iter()
                .flat_map(|i| i.streams.iter())
                .filter(|x| self.way_of(x.id) == Some(way))
                .filter_map(|x| x.tcp)
                .filter(|t| t.rtt_us > 0)
                .collect();
            let rtt = (!samples.is_empty()).then(|| RttSummary {
                min_us: samples
                    .iter()
                    .map(|t| if t.min_rtt_us > 0 { t.min_rtt_us } else { t.rtt_us })
                    .min()
                    .unwrap_or(0),
                mean_us: samples.iter().map(|t| t.rtt_us as f64).sum::<f64>() / samples.len() as f64,
                max_us: samples.iter().map(|t| t.rtt_us).max().unwrap_or(0),
            });
            ways.push(WaySummary {
                way,
                streams: of_way.len() as u32,
                sender: SideTotal::new(sent, sent_s),
                receiver,
                retransmits: of_way.iter().map(|s| s.retransmits).sum(),
                rtt,
                cwnd_max_bytes: samples.iter().map(|t| t.cwnd_bytes()).max().unwrap_or(0),
            });
        }

        let duration_s = stream_sums
            .iter()
            .flat_map(|s| [Some(s.sender.seconds), s.receiver.map(|r| r.seconds)])
            .flatten()
            .fold(0.0, f64::max);
        let bits: f64 = ways.iter().map(|w| w.sender.bytes as f64 * 8.0).sum();
        let server_cpu = self.server_final.as_ref().map(|(_, c)| *c);
        let per = |c: &CpuUsage| if c.cpu_s() > 0.0 { bits / c.cpu_s() } else { 0.0 };
        let cpu = CpuSummary {
            client: client_cpu,
            server: server_cpu,
            bits_per_client_cpu_s: per(&client_cpu),
            bits_per_server_cpu_s: server_cpu.as_ref().map(per),
        };
        (intervals, Summary { duration_s, ways, streams: stream_sums, cpu })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(id: u32, way: Way) -> StreamInfo {
        StreamInfo { id, way, local: String::new(), remote: String::new(), client_cpu: 0, server_cpu: None }
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

    #[test]
    fn merges_both_ends_and_derives_rates() {
        let mut a = Aggregator::new(vec![info(0, Way::Up), info(1, Way::Down)], 1);
        let live = a.on_worker(
            0,
            Event::Interval {
                index: 0,
                start_s: 0.0,
                end_s: 1.0,
                flows: vec![
                    FlowSample { id: 0, bytes: 1000, tcp: tcp(2, 100) },
                    FlowSample { id: 1, bytes: 500, tcp: None },
                ],
            },
        );
        assert_eq!(live.len(), 1, "interval 0 is complete on this end");
        a.on_server_interval(
            0,
            0.0,
            1.0,
            vec![ServerSample { id: 0, bytes: 990, tcp: None }, ServerSample { id: 1, bytes: 500, tcp: tcp(1, 300) }],
        );
        a.on_worker(0, Event::FlowDone(FlowEnd { id: 0, bytes: 1000, seconds: 1.0, tcp: tcp(3, 100), error: None }));
        a.on_worker(0, Event::FlowDone(FlowEnd { id: 1, bytes: 500, seconds: 1.1, tcp: None, error: None }));
        a.on_worker(
            0,
            Event::WorkerDone {
                cpu: CpuUsage { user_s: 0.1, system_s: 0.4, wall_s: 1.0 },
                pinned: Some(0),
                pin_error: None,
            },
        );
        a.on_server_final(
            vec![
                ServerStreamFinal { id: 0, bytes: 1000, seconds: 1.05, tcp: None, cpu: None, error: None },
                ServerStreamFinal { id: 1, bytes: 500, seconds: 1.0, tcp: tcp(1, 300), cpu: None, error: None },
            ],
            CpuUsage { user_s: 0.0, system_s: 0.5, wall_s: 1.0 },
        );
        assert!(a.workers_done() && a.has_server_final() && a.all_streams_clean());
        let (iv, sum) = a.finish(CpuUsage { user_s: 0.0, system_s: 0.0, wall_s: 1.2 });
        assert_eq!(iv.len(), 1);
        let up = &iv[0].streams[0];
        assert_eq!((up.sent_bytes, up.received_bytes, up.retransmits), (1000, Some(990), 2));
        let down = &iv[0].streams[1];
        assert_eq!((down.sent_bytes, down.received_bytes, down.retransmits), (500, Some(500), 1));
        assert_eq!(iv[0].sums[0].sent_bits_per_s, 8000.0);
        let w_up = &sum.ways[0];
        assert_eq!(w_up.sender.bytes, 1000);
        assert_eq!(w_up.receiver.unwrap().bytes, 1000);
        assert_eq!(w_up.retransmits, 3);
        assert_eq!(w_up.cwnd_max_bytes, 10_000);
        let w_down = &sum.ways[1];
        assert_eq!(w_down.sender.bytes, 500);
        assert_eq!(w_down.rtt.unwrap().mean_us, 300.0);
        assert!((sum.cpu.bits_per_client_cpu_s - 1500.0 * 8.0 / 0.5).abs() < 1e-6);
        assert_eq!(sum.duration_s, 1.1);
    }

    #[test]
    fn live_intervals_wait_for_every_worker() {
        let mut a = Aggregator::new(vec![info(0, Way::Up), info(1, Way::Up)], 2);
        let iv = |id| Event::Interval {
            index: 0,
            start_s: 0.0,
            end_s: 1.0,
            flows: vec![FlowSample { id, bytes: 1, tcp: None }],
        };
        assert!(a.on_worker(0, iv(0)).is_empty());
        let live = a.on_worker(1, iv(1));
        assert_eq!(live.len(), 1);
        assert_eq!(live[0].sums[0].sent_bytes, 2);
    }

    #[test]
    fn stream_errors_are_kept() {
        let mut a = Aggregator::new(vec![info(0, Way::Up)], 1);
        a.on_worker(
            0,
            Event::FlowDone(FlowEnd {
                id: 0,
                bytes: 10,
                seconds: 2.5,
                tcp: None,
                error: Some("connection reset by peer".into()),
            }),
        );
        assert!(!a.all_streams_clean());
        assert_eq!(a.errors[0].source, "stream 0 (up)");
        assert_eq!(a.errors[0].at_s, 2.5);
    }
}
