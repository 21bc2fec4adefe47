//! Per-flow counters of the single-flow generators (msgrate, rr): plain fields updated on the
//! hot path, turned into one [`Event::Interval`] per tick, and a [`Event::FlowDone`] at the end.

use crate::exec::worker::{Ctx, Event, EventTx, FlowEnd, FlowSample, RunFlags, Seat, Ticker};
use crate::os::sys::CpuMark;
use hdrhistogram::Histogram;
use netblast_probe::FlowWatch;
use netblast_spec::hist;
use std::time::{Duration, Instant};

/// The counters of one flow, owned by its worker thread.
pub struct Meter {
    worker: usize,
    id: u32,
    start: Instant,
    ticker: Ticker,
    last_tick_s: f64,
    /// Bytes moved.
    pub bytes: u64,
    /// Messages, datagrams or transactions.
    pub msgs: u64,
    /// Lost transactions (rr over UDP).
    pub lost: u64,
    at_bytes: u64,
    at_msgs: u64,
    at_lost: u64,
    hist: Option<Histogram<u64>>,
    watch: Option<FlowWatch>,
    tx: EventTx,
    last_byte: Instant,
    /// A UDP receiver's sequence accounts (sequenced datagrams only).
    pub seq: Option<crate::measure::udpseq::Accounts>,
    /// A UDP receiver's receive queue in bytes, as the kernel applied it.
    pub rcvbuf: Option<u64>,
    /// A cps client's failures by cause and SYN retransmissions.
    pub conns: Option<netblast_spec::result::ConnCounts>,
    at_udp: netblast_spec::result::UdpQuality,
}

impl Meter {
    /// Starts counting at `start`; `latency` turns on the per-interval latency histogram.
    pub fn new(
        worker: usize,
        id: u32,
        start: Instant,
        interval: Duration,
        latency: bool,
        watch: Option<FlowWatch>,
        tx: EventTx,
    ) -> Meter {
        Meter {
            worker,
            id,
            start,
            ticker: Ticker::new(start, interval),
            last_tick_s: 0.0,
            bytes: 0,
            msgs: 0,
            lost: 0,
            at_bytes: 0,
            at_msgs: 0,
            at_lost: 0,
            hist: latency.then(hist::new_latency_histogram),
            watch,
            tx,
            last_byte: start,
            seq: None,
            rcvbuf: None,
            conns: None,
            at_udp: Default::default(),
        }
    }

    /// The kernel statistics source of the flow, if any.
    pub fn watch(&self) -> Option<&FlowWatch> {
        self.watch.as_ref()
    }

    /// Records one round trip.
    #[inline]
    pub fn record_ns(&mut self, ns: u64) {
        if let Some(h) = self.hist.as_mut() {
            hist::record_ns(h, ns);
        }
    }

    /// Notes that bytes moved at `now` (for the flow's seconds).
    #[inline]
    pub fn moved_at(&mut self, now: Instant) {
        self.last_byte = now;
    }

    /// When the current interval ends.
    #[inline]
    pub fn next_tick(&self) -> Instant {
        self.ticker.next()
    }

    /// Nanoseconds since the flow's start.
    #[inline]
    pub fn since_start_ns(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.start).as_nanos() as u64
    }

    fn sample(&mut self, tcp: bool) -> FlowSample {
        let udp = self.seq.as_ref().map(|t| {
            let total = t.total();
            let d = crate::measure::udpseq::delta(&total, &self.at_udp);
            self.at_udp = total;
            d
        });
        let s = FlowSample {
            udp,
            id: self.id,
            bytes: self.bytes - self.at_bytes,
            msgs: self.msgs - self.at_msgs,
            lost: self.lost - self.at_lost,
            tcp: if tcp { self.watch.as_ref().and_then(|w| w.sample()) } else { None },
            hist: self.hist.as_mut().map(|h| {
                let out = Box::new(h.clone());
                h.reset();
                out
            }),
        };
        self.at_bytes = self.bytes;
        self.at_msgs = self.msgs;
        self.at_lost = self.lost;
        s
    }

    /// Emits every interval that has ended by `now`.
    #[inline]
    pub fn tick(&mut self, now: Instant) {
        if now < self.ticker.next() {
            return;
        }
        while let Some((index, end)) = self.ticker.due(now) {
            let end_s = (end - self.start).as_secs_f64();
            let flow = self.sample(true);
            (self.tx)(self.worker, Event::Interval { index, start_s: self.last_tick_s, end_s, flows: vec![flow] });
            self.last_tick_s = end_s;
        }
    }

    /// Emits the last (partial) interval and the flow's end (`cpu`: where the worker ran,
    /// `kernel_drops`: a UDP receiver's drop count).
    pub fn finish(mut self, error: Option<String>, cpu: Option<usize>, kernel_drops: Option<u64>) {
        let end_s = (self.last_byte.max(self.start) - self.start).as_secs_f64().max(self.last_tick_s);
        if self.bytes > self.at_bytes || self.msgs > self.at_msgs || self.lost > self.at_lost {
            let index = self.ticker.index();
            let flow = self.sample(true);
            (self.tx)(self.worker, Event::Interval { index, start_s: self.last_tick_s, end_s, flows: vec![flow] });
        }
        if error.is_none() {
            if let Some(w) = &self.watch {
                w.settle(crate::exec::worker::SETTLE);
            }
        }
        let end = FlowEnd {
            id: self.id,
            bytes: self.bytes,
            msgs: self.msgs,
            lost: self.lost,
            seconds: end_s,
            tcp: self.watch.as_ref().and_then(|w| w.sample()),
            error,
            cpu,
            kernel_drops,
            rtt_hist: self.watch.as_ref().and_then(|w| w.rtt_histogram()).map(Box::new),
            tcp_info: self.watch.as_ref().and_then(|w| w.tcp_info_check()),
            udp: self.seq.as_ref().map(|t| t.total()),
            rcvbuf: self.rcvbuf,
            conns: self.conns,
        };
        (self.tx)(self.worker, Event::FlowDone(Box::new(end)));
    }
}

/// What a single-flow body returns: `Ok(kernel drops of a UDP receiver)` or why it failed.
pub type BodyResult = Result<Option<u64>, String>;

/// Runs a single-flow worker body: waits at the gate, hands the body a [`Meter`], reports the
/// flow's end and the worker's CPU.
pub fn run_single(
    seat: &Seat,
    id: u32,
    ctx: &Ctx,
    meter_cfg: (Duration, bool, Option<FlowWatch>),
    body: impl FnOnce(&mut Meter, Instant) -> BodyResult,
) {
    let cpu_mark = CpuMark::thread();
    let (worker, cpu, pin_error, tx) = (seat.index, seat.cpu(), seat.pin_error(), &ctx.tx);
    match ctx.gate.wait() {
        Some(start) => {
            let (interval, latency, watch) = meter_cfg;
            let mut meter = Meter::new(worker, id, start, interval, latency, watch, tx.clone());
            match body(&mut meter, start) {
                Ok(drops) => meter.finish(None, cpu, drops),
                Err(e) => meter.finish(Some(e), cpu, None),
            }
        }
        None => tx(
            worker,
            Event::FlowDone(Box::new(FlowEnd {
                id,
                error: Some("test cancelled before start".into()),
                cpu,
                ..Default::default()
            })),
        ),
    }
    // One flow per worker: its statistics are read at every tick.
    tx(worker, Event::WorkerDone { cpu: cpu_mark.usage(), pinned: cpu, pin_error, tcp_samples: Default::default() });
}

/// Why a loop stopped waiting: the flags or a deadline.
pub fn should_stop(flags: &RunFlags, now: Instant, until: Instant) -> bool {
    flags.stopping() || now >= until
}
