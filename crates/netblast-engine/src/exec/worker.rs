//! What every generator's worker shares: a pinned OS thread, a start gate, an interval ticker,
//! run flags and the event channel to the aggregator.
//!
//! A worker owns its sockets, counters and histograms; nothing on its hot path is shared. At
//! each interval tick it sends one [`Event::Interval`] with its deltas and goes on.

use hdrhistogram::Histogram;
use netblast_spec::result::{CpuUsage, TcpStats};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Longest wait, after the senders stopped, for the peer to acknowledge everything.
pub const SETTLE: Duration = Duration::from_secs(2);

/// Flags a worker reads once per loop iteration (never per message).
#[derive(Debug, Default)]
pub struct RunFlags {
    stop: AtomicBool,
    abort: AtomicBool,
    interrupted: AtomicBool,
}

impl RunFlags {
    /// New flags, all clear.
    pub fn new() -> Arc<RunFlags> {
        Arc::new(RunFlags::default())
    }

    /// Asks senders to stop gracefully (bound reached, peer asked, Ctrl-C).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Asks everything to stop now (fatal error, second Ctrl-C).
    pub fn abort(&self) {
        self.stop();
        self.abort.store(true, Ordering::Relaxed);
    }

    /// Stops gracefully because the user asked (Ctrl-C); the result is marked incomplete.
    pub fn interrupt(&self) {
        self.interrupted.store(true, Ordering::Relaxed);
        self.stop();
    }

    /// Clears the stop and abort a finished run leaves (every run aborts its workers as it
    /// winds down), so the same flags serve the next run of a sequence: a search's steps, a
    /// campaign's runs. An interruption stays: the next run stops at once.
    pub fn rearm(&self) {
        self.stop.store(false, Ordering::Relaxed);
        self.abort.store(false, Ordering::Relaxed);
        // A Ctrl-C that came while clearing is not lost.
        if self.interrupted() {
            self.stop();
        }
    }

    /// Whether the user interrupted the run.
    pub fn interrupted(&self) -> bool {
        self.interrupted.load(Ordering::Relaxed)
    }

    /// Whether senders should stop.
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Whether everything should stop now.
    pub fn aborting(&self) -> bool {
        self.abort.load(Ordering::Relaxed)
    }
}

/// Holds workers until the test starts, then hands each the common start instant.
#[derive(Debug, Default)]
pub struct StartGate {
    state: Mutex<GateState>,
    cv: Condvar,
}

#[derive(Debug, Default, Clone, Copy)]
enum GateState {
    #[default]
    Closed,
    Open(Instant),
    Cancelled,
}

impl StartGate {
    /// A closed gate.
    pub fn new() -> Arc<StartGate> {
        Arc::new(StartGate::default())
    }

    /// Releases every waiter with `start` as the test's time zero.
    pub fn open(&self, start: Instant) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = GateState::Open(start);
        self.cv.notify_all();
    }

    /// Releases every waiter without starting.
    pub fn cancel(&self) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = GateState::Cancelled;
        self.cv.notify_all();
    }

    /// Waits for the start; `None` when cancelled.
    pub fn wait(&self) -> Option<Instant> {
        let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            match *g {
                GateState::Open(t) => return Some(t),
                GateState::Cancelled => return None,
                GateState::Closed => g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner()),
            }
        }
    }
}

/// When one end's senders stop and its receivers give up, counted from the start.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Senders stop (rr: the client stops asking).
    pub send_for: Duration,
    /// Receivers (and every waiting end) give up waiting for the end.
    pub give_up_after: Duration,
}

impl Timing {
    /// The instants this timing gives for a test that started at `start`.
    pub fn after(&self, start: Instant) -> Deadlines {
        Deadlines { send_until: start + self.send_for, give_up: start + self.give_up_after }
    }
}

/// When one end's senders stop and its receivers give up, as instants.
#[derive(Debug, Clone, Copy)]
pub struct Deadlines {
    /// Senders stop.
    pub send_until: Instant,
    /// Everyone still waiting gives up.
    pub give_up: Instant,
}

/// Interval boundaries at `start + k × interval`, independent of when the loop wakes up.
#[derive(Debug, Clone, Copy)]
pub struct Ticker {
    start: Instant,
    interval: Duration,
    index: u32,
    next: Instant,
}

impl Ticker {
    /// A ticker whose first interval ends at `start + interval`.
    pub fn new(start: Instant, interval: Duration) -> Ticker {
        Ticker { start, interval, index: 0, next: start + interval }
    }

    /// When the current interval ends.
    pub fn next(&self) -> Instant {
        self.next
    }

    /// Index of the current (not yet reported) interval.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// If the current interval has ended at `now`, returns its index and end and moves on.
    pub fn due(&mut self, now: Instant) -> Option<(u32, Instant)> {
        if now < self.next {
            return None;
        }
        let r = (self.index, self.next);
        self.index += 1;
        self.next = self.start + self.interval * (self.index + 1);
        Some(r)
    }
}

/// Counters of one flow over one interval (or in total).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FlowSample {
    /// Stream id.
    pub id: u32,
    /// Bytes moved (sent or received, by the flow's role).
    pub bytes: u64,
    /// Messages, datagrams or transactions (message kinds; 0 for bulk).
    pub msgs: u64,
    /// Transactions that got no response (rr over UDP).
    pub lost: u64,
    /// Kernel TCP statistics at the end of the interval.
    pub tcp: Option<TcpStats>,
    /// Latency of the interval's transactions (rr client), ns.
    pub hist: Option<Box<Histogram<u64>>>,
    /// A UDP receiver's account of the interval's sequenced datagrams.
    pub udp: Option<netblast_spec::result::UdpQuality>,
}

/// How a flow ended.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FlowEnd {
    /// Stream id.
    pub id: u32,
    /// Bytes moved in total.
    pub bytes: u64,
    /// Messages, datagrams or transactions in total.
    pub msgs: u64,
    /// Lost transactions in total (rr over UDP).
    pub lost: u64,
    /// Seconds from the start to the flow's last byte (or to its stop).
    pub seconds: f64,
    /// Kernel TCP statistics at the end.
    pub tcp: Option<TcpStats>,
    /// Why it ended early, if it did.
    pub error: Option<String>,
    /// The CPU its worker was verified pinned to.
    pub cpu: Option<usize>,
    /// Datagrams the kernel dropped at this (receiving) UDP socket, from /proc/net/udp.
    pub kernel_drops: Option<u64>,
    /// The kernel's RTT histogram of the socket (eBPF probe), ns.
    pub rtt_hist: Option<Box<Histogram<u64>>>,
    /// `TCP_INFO` at the end, as a cross-check when the statistics came from eBPF.
    pub tcp_info: Option<TcpStats>,
    /// A UDP receiver's account of the flow's sequenced datagrams, in total.
    pub udp: Option<netblast_spec::result::UdpQuality>,
    /// A cps client's failures by cause and SYN retransmissions, in total.
    pub conns: Option<netblast_spec::result::ConnCounts>,
    /// A UDP receiver's receive queue in bytes, as the kernel applied it.
    pub rcvbuf: Option<u64>,
}

/// What workers tell the aggregator.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// One interval's deltas. `end_s` is seconds since the start.
    Interval {
        /// Interval index.
        index: u32,
        /// Start of the interval (s since start).
        start_s: f64,
        /// End of the interval (s since start); shorter than `interval` for the last one.
        end_s: f64,
        /// Per flow.
        flows: Vec<FlowSample>,
    },
    /// A flow finished.
    FlowDone(Box<FlowEnd>),
    /// The worker has finished all its flows; the last event it sends.
    WorkerDone {
        /// CPU used by the worker thread.
        cpu: CpuUsage,
        /// CPU it was verified pinned to, if any.
        pinned: Option<usize>,
        /// Why pinning failed, if it did.
        pin_error: Option<String>,
        /// Kernel TCP statistics read at the ticks, and the reads the ticks asked for (a worker
        /// with more flows than it can read in its per-tick budget reads them in turn).
        tcp_samples: Sampled,
    },
}

/// Kernel statistics read at interval ticks: how many were read, of how many asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sampled {
    /// Flow-ticks whose statistics were read.
    pub read: u64,
    /// Flow-ticks of live flows.
    pub wanted: u64,
}

impl Sampled {
    /// Adds another count.
    pub fn add(&mut self, o: Sampled) {
        self.read += o.read;
        self.wanted += o.wanted;
    }

    /// The note a result carries when not every flow was read at every tick.
    pub fn note(&self, side: &str) -> Option<String> {
        (self.read < self.wanted).then(|| {
            format!(
                "{side}: kernel TCP statistics read for {:.1}% of flow-intervals ({} of {}): reading every flow at \
                 every tick would take more than {:.0}% of the interval, so flows were read in turn (a longer \
                 interval or fewer flows reads them all)",
                self.read as f64 * 100.0 / self.wanted as f64,
                self.read,
                self.wanted,
                SAMPLE_SHARE * 100.0
            )
        })
    }
}

/// Share of an interval a worker may spend reading kernel TCP statistics at a tick. With more
/// flows than fit in it, flows are read in turn over several ticks (each tick reads at least
/// one), so the loop never falls behind its ticks.
pub const SAMPLE_SHARE: f64 = 0.05;

/// Where workers deliver their events, tagged with the worker index. A closure, so the client
/// (std channel) and the server (tokio channel) can each route events their own way.
pub type EventTx = Arc<dyn Fn(usize, Event) + Send + Sync>;

/// Where a worker runs: `Ok(Some(cpu))` pinned, and the thread's affinity read back says so;
/// `Ok(None)` not asked to pin; `Err` pinning failed (the worker runs unpinned and says why).
pub type Pinning = Result<Option<usize>, String>;

/// A worker thread's place: its index (events are tagged with it) and its pinning.
#[derive(Debug, Clone)]
pub struct Seat {
    /// Worker index.
    pub index: usize,
    /// The CPU it is pinned to, or why pinning failed.
    pub pinned: Pinning,
}

impl Seat {
    /// The CPU it runs on, if pinned.
    pub fn cpu(&self) -> Option<usize> {
        self.pinned.as_ref().ok().copied().flatten()
    }

    /// Why pinning failed, if it did.
    pub fn pin_error(&self) -> Option<String> {
        self.pinned.as_ref().err().cloned()
    }
}

/// What every worker of one end of a test shares: the probe, the start gate, the run flags,
/// where events go, and where this end's own connections leave from. Every generator's
/// `run_worker` takes its [`Seat`], its flows, its kind's configuration and this.
#[derive(Clone)]
pub struct Ctx {
    /// Source of TCP statistics.
    pub probe: netblast_probe::Probe,
    /// Start gate.
    pub gate: Arc<StartGate>,
    /// Run flags.
    pub flags: Arc<RunFlags>,
    /// Event sink.
    pub tx: EventTx,
    /// Where this end's own connections leave from (a cps client dials one per connection).
    pub bind: crate::os::sockopt::Binding,
    /// The test's id (both ends know it): its UDP datagrams carry an identity made from it.
    pub test_id: [u8; 16],
}

impl Ctx {
    /// Sends `ev` tagged with worker `index`.
    pub fn send(&self, index: usize, ev: Event) {
        (self.tx)(index, ev)
    }
}

/// Spawns a worker thread named `netblast-w<index>`, pinned to `cpu` when given, and checks the
/// pinning by reading the thread's affinity back. A failure is reported by the body in its
/// final [`Event::WorkerDone`], not fatal.
pub fn spawn<F>(index: usize, cpu: Option<usize>, body: F) -> std::io::Result<JoinHandle<()>>
where
    F: FnOnce(Pinning) + Send + 'static,
{
    std::thread::Builder::new().name(format!("netblast-w{index}")).spawn(move || {
        let pinned = match cpu {
            Some(c) => crate::os::sys::pin_current_thread(c)
                .map_err(|e| format!("cannot pin worker to CPU {c}: {e}"))
                .and_then(|_| match crate::os::sys::allowed_cpus() {
                    Ok(now) if now == [c] => Ok(Some(c)),
                    Ok(now) => Err(format!("pinned to CPU {c} but the thread's affinity reads {now:?}")),
                    Err(e) => Err(format!("cannot read back the affinity after pinning to CPU {c}: {e}")),
                }),
            None => Ok(None),
        };
        body(pinned)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticker_boundaries_do_not_drift() {
        let t0 = Instant::now();
        let mut t = Ticker::new(t0, Duration::from_millis(100));
        assert!(t.due(t0 + Duration::from_millis(99)).is_none());
        assert_eq!(t.due(t0 + Duration::from_millis(150)), Some((0, t0 + Duration::from_millis(100))));
        // Late wake-up: two intervals are due, each reported with its own end.
        let late = t0 + Duration::from_millis(320);
        assert_eq!(t.due(late), Some((1, t0 + Duration::from_millis(200))));
        assert_eq!(t.due(late), Some((2, t0 + Duration::from_millis(300))));
        assert!(t.due(late).is_none());
        assert_eq!(t.next(), t0 + Duration::from_millis(400));
    }

    #[test]
    fn gate_releases_all_waiters_with_one_start() {
        let g = StartGate::new();
        let hs: Vec<_> = (0..3)
            .map(|_| {
                let g = g.clone();
                std::thread::spawn(move || g.wait())
            })
            .collect();
        let t = Instant::now();
        g.open(t);
        for h in hs {
            assert_eq!(h.join().unwrap(), Some(t));
        }
        let g2 = StartGate::new();
        g2.cancel();
        assert_eq!(g2.wait(), None);
    }
}
