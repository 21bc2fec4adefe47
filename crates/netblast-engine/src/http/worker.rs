//! One pinned HTTP worker: a single-threaded tokio runtime running this worker's connection
//! slots, its interval ticker and, in open loop, its dispatcher.
//!
//! Closed loop: every slot sends its next request as soon as the previous response is complete
//! (hey, wrk). Open loop: the dispatcher takes this worker's share of the schedule (request j
//! goes to worker j mod W), sleeps until each request's intended time and hands it to a free
//! slot; when no slot is free the request is counted late and waits for one. Latency is measured
//! from the intended time (no coordinated omission, as wrk2), and the lag of each send behind
//! its intended time is recorded.

use super::conn::{self, ByteCount, Endpoint, Meters, Sender};
use super::schedule::Schedule;
use super::stats::{ConnTcp, ErrorKind, IntervalStats, RunStats};
use crate::sys::CpuMark;
use crate::worker::{Pinning, RunFlags, StartGate, Ticker};
use bytes::Bytes;
use http::{HeaderMap, Method, Request, Uri};
use http_body_util::{BodyExt, Full};
use netblast_spec::hist;
use netblast_spec::profile::HttpVersion;
use netblast_spec::result::CpuUsage;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc as amsc;

/// A request ready to be cloned and sent.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// Where it goes.
    pub endpoint: Endpoint,
    /// Method.
    pub method: Method,
    /// URI as sent (path for HTTP/1.1, absolute for HTTP/2).
    pub uri: Uri,
    /// Headers (Host included for HTTP/1.1).
    pub headers: HeaderMap,
    /// Body.
    pub body: Bytes,
    /// The whole HTTP/1.1 request, serialized once.
    pub h1: Bytes,
}

impl Prepared {
    fn request(&self) -> Request<Full<Bytes>> {
        let mut r = Request::new(Full::new(self.body.clone()));
        *r.method_mut() = self.method.clone();
        *r.uri_mut() = self.uri.clone();
        *r.headers_mut() = self.headers.clone();
        r
    }
}

/// What every worker of a test shares.
#[derive(Debug)]
pub struct Job {
    /// The requests, one per URL.
    pub requests: Vec<Prepared>,
    /// Weighted round-robin order of `requests` indices; request j uses `cycle[j % len]`.
    pub cycle: Vec<usize>,
    /// HTTP version.
    pub version: HttpVersion,
    /// TLS settings, for https URLs.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// Reuse connections.
    pub keepalive: bool,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Reporting interval.
    pub interval: Duration,
    /// No new requests after this long.
    pub bound: Duration,
    /// Open loop schedule; `None`: closed loop.
    pub schedule: Option<Schedule>,
    /// Total request bound (`-n`).
    pub requests_bound: Option<u64>,
    /// Total connection slots.
    pub slots: u32,
    /// Workers.
    pub workers: u32,
    /// Kernel TCP statistics source for the connections.
    pub probe: netblast_probe::Probe,
}

impl Job {
    fn pick(&self, j: u64) -> &Prepared {
        &self.requests[self.cycle[(j % self.cycle.len() as u64) as usize]]
    }
}

/// What a worker reports.
#[derive(Debug)]
pub enum WorkerMsg {
    /// One interval.
    Interval {
        /// Interval index.
        index: u32,
        /// Start, s since the start.
        start_s: f64,
        /// End, s since the start.
        end_s: f64,
        /// Its counters.
        stats: Box<IntervalStats>,
    },
    /// The worker finished; its last message.
    Done {
        /// Whole-run counters.
        run: Box<RunStats>,
        /// CPU of the worker thread.
        cpu: CpuUsage,
        /// Why pinning failed, if it did.
        pin_error: Option<String>,
    },
}

struct State {
    interval: IntervalStats,
    run: RunStats,
    meters: Meters,
    start: Instant,
}

type Shared = Rc<RefCell<State>>;

/// Runs one worker on the calling (pinned) thread until its slots are done.
#[allow(clippy::too_many_arguments)]
pub fn run_worker(
    w: usize,
    pinned: Pinning,
    slots: Vec<(u32, Option<u64>)>,
    job: Arc<Job>,
    gate: Arc<StartGate>,
    flags: Arc<RunFlags>,
    tx: mpsc::Sender<(usize, WorkerMsg)>,
) {
    let cpu_mark = CpuMark::thread();
    let pin_error = pinned.err();
    let done = |run: RunStats, pin_error: Option<String>| {
        let _ = tx.send((w, WorkerMsg::Done { run: Box::new(run), cpu: cpu_mark.usage(), pin_error }));
    };
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            let mut run = RunStats::new();
            run.fail(ErrorKind::Io, format!("worker {w}: cannot start its runtime: {e}"));
            done(run, pin_error);
            return;
        }
    };
    let Some(start) = gate.wait() else {
        done(RunStats::new(), pin_error);
        return;
    };
    let state: Shared = Rc::new(RefCell::new(State {
        interval: IntervalStats::new(),
        run: RunStats::new(),
        meters: Meters {
            bytes: Rc::new(ByteCount::default()),
            tcp: Rc::new(RefCell::new(ConnTcp::new())),
            probe: job.probe.clone(),
        },
        start,
    }));
    let local = tokio::task::LocalSet::new();
    let end = start + job.bound;
    local.block_on(&rt, async {
        let finished = Rc::new(std::cell::Cell::new(false));
        let ticker = tokio::task::spawn_local(tick_loop(w, state.clone(), job.interval, tx.clone(), finished.clone()));
        let work = async {
            let mut handles = Vec::new();
            match &job.schedule {
                None => {
                    for (k, budget) in slots {
                        let (job, state, flags) = (job.clone(), state.clone(), flags.clone());
                        handles.push(tokio::task::spawn_local(closed_slot(k, budget, job, state, end, flags)));
                    }
                }
                Some(_) => {
                    let (free_tx, free_rx) = amsc::unbounded_channel::<usize>();
                    let mut slot_txs = Vec::new();
                    for (i, _) in slots.iter().enumerate() {
                        let (job_tx, job_rx) = amsc::unbounded_channel::<(u64, Instant)>();
                        slot_txs.push(job_tx);
                        let (job, state, free_tx) = (job.clone(), state.clone(), free_tx.clone());
                        handles.push(tokio::task::spawn_local(open_slot(i, job_rx, free_tx, job, state)));
                    }
                    drop(free_tx);
                    dispatch(w, &job, slot_txs, free_rx, &state, end, &flags).await;
                }
            }
            for h in handles {
                let _ = h.await;
            }
        };
        // A second Ctrl-C (abort) stops waiting for requests in flight.
        let abort = async {
            while !flags.aborting() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        tokio::select! {
            _ = work => {}
            _ = abort => {}
        }
        finished.set(true);
        let _ = ticker.await;
    });
    // Tasks still holding connections (HTTP/2 drivers) go with the task set: each connection
    // adds its kernel statistics as it drops.
    drop(local);
    let mut run = std::mem::take(&mut state.borrow_mut().run);
    run.tcp = state.borrow().meters.tcp.take();
    done(run, pin_error);
}

/// Turns the worker's counters into interval messages (byte counts as deltas).
struct Emitter {
    w: usize,
    tx: mpsc::Sender<(usize, WorkerMsg)>,
    last_s: f64,
    sent_at: u64,
    recv_at: u64,
}

impl Emitter {
    fn emit(&mut self, state: &Shared, index: u32, end_s: f64) {
        let mut st = state.borrow_mut();
        let (sent, recv) = (st.meters.bytes.sent.get(), st.meters.bytes.received.get());
        let mut stats = std::mem::take(&mut st.interval);
        stats.bytes_sent = sent - self.sent_at;
        stats.bytes_received = recv - self.recv_at;
        self.sent_at = sent;
        self.recv_at = recv;
        let msg = WorkerMsg::Interval { index, start_s: self.last_s, end_s, stats: Box::new(stats) };
        let _ = self.tx.send((self.w, msg));
        self.last_s = end_s;
    }

    /// Whether anything happened since the last interval.
    fn pending(&self, state: &Shared) -> bool {
        let st = state.borrow();
        st.interval.sent + st.interval.completed + st.interval.errors > 0
            || st.meters.bytes.sent.get() > self.sent_at
            || st.meters.bytes.received.get() > self.recv_at
    }
}

/// Sends an interval at every tick, and the last partial one when the worker is finished.
async fn tick_loop(
    w: usize,
    state: Shared,
    interval: Duration,
    tx: mpsc::Sender<(usize, WorkerMsg)>,
    finished: Rc<std::cell::Cell<bool>>,
) {
    let start = state.borrow().start;
    let mut ticker = Ticker::new(start, interval);
    let mut em = Emitter { w, tx, last_s: 0.0, sent_at: 0, recv_at: 0 };
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(ticker.next().into()) => {}
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
        let now = Instant::now();
        while let Some((index, end)) = ticker.due(now) {
            em.emit(&state, index, (end - start).as_secs_f64());
        }
        if finished.get() {
            let end_s = now.duration_since(start).as_secs_f64().max(em.last_s);
            if em.pending(&state) {
                em.emit(&state, ticker.index(), end_s);
            }
            return;
        }
    }
}

async fn closed_slot(k: u32, budget: Option<u64>, job: Arc<Job>, state: Shared, end: Instant, flags: Arc<RunFlags>) {
    let mut sender: Option<Sender> = None;
    let mut n = 0u64;
    let mut j = k as u64;
    // The end of one request is the start of the next: one clock read serves both.
    let mut now = Instant::now();
    loop {
        if flags.stopping() || now >= end || budget.is_some_and(|b| n >= b) {
            break;
        }
        let p = job.pick(j);
        j += job.slots as u64;
        n += 1;
        let (ok, done) = exec(&mut sender, p, &job, &state, now, true).await;
        now = done;
        if !ok {
            // A refused or failing connection must not turn into a busy loop.
            tokio::time::sleep(Duration::from_millis(10)).await;
            now = Instant::now();
        }
    }
    close(&mut sender, &state);
}

async fn dispatch(
    w: usize,
    job: &Job,
    slot_txs: Vec<amsc::UnboundedSender<(u64, Instant)>>,
    mut free_rx: amsc::UnboundedReceiver<usize>,
    state: &Shared,
    end: Instant,
    flags: &RunFlags,
) {
    let Some(schedule) = &job.schedule else { return };
    let start = state.borrow().start;
    let timer = match super::timer::HrTimer::new() {
        Ok(t) => Some(t),
        Err(e) => {
            state.borrow_mut().run.fail(ErrorKind::Io, format!("no timerfd ({e}); using millisecond timers"));
            None
        }
    };
    let mut j = w as u64;
    loop {
        if job.requests_bound.is_some_and(|n| j >= n) || flags.stopping() {
            break;
        }
        let Some(due) = schedule.due(j) else { break };
        let intended = start + due;
        if intended >= end {
            break;
        }
        if intended > Instant::now() {
            match &timer {
                Some(t) if t.sleep_until(intended).await.is_ok() => {}
                _ => tokio::time::sleep_until(intended.into()).await,
            }
        }
        let slot = match free_rx.try_recv() {
            Ok(s) => s,
            Err(_) => {
                // No connection is free at the intended time: the request waits, and its
                // latency (from the intended time) will show the wait.
                state.borrow_mut().interval.late += 1;
                match free_rx.recv().await {
                    Some(s) => s,
                    None => break,
                }
            }
        };
        if slot_txs[slot].send((j, intended)).is_err() {
            break;
        }
        j += job.workers as u64;
    }
}

async fn open_slot(
    id: usize,
    mut jobs: amsc::UnboundedReceiver<(u64, Instant)>,
    free: amsc::UnboundedSender<usize>,
    job: Arc<Job>,
    state: Shared,
) {
    let mut sender: Option<Sender> = None;
    let _ = free.send(id);
    while let Some((j, intended)) = jobs.recv().await {
        let lag = Instant::now().saturating_duration_since(intended);
        hist::record_ns(&mut state.borrow_mut().run.send_lag, lag.as_nanos() as u64);
        exec(&mut sender, job.pick(j), &job, &state, intended, false).await;
        if free.send(id).is_err() {
            break;
        }
    }
    close(&mut sender, &state);
}

fn close(sender: &mut Option<Sender>, state: &Shared) {
    if sender.take().is_some() {
        state.borrow_mut().run.open -= 1;
    }
}

/// Sends one request on the slot's connection (opening one if needed) and reads the whole
/// response. Latency is measured from `t_ref`: in closed loop (`t_ref_is_now`) the moment the
/// request is due, which is also when it is sent on an open connection; in open loop the
/// intended time. Returns whether a response arrived, and when the attempt ended.
async fn exec(
    sender: &mut Option<Sender>,
    p: &Prepared,
    job: &Job,
    state: &Shared,
    t_ref: Instant,
    t_ref_is_now: bool,
) -> (bool, Instant) {
    let had_conn = sender.as_ref().is_some_and(Sender::is_usable);
    if !had_conn {
        close(sender, state);
        let meters = state.borrow().meters.clone();
        let opened =
            tokio::time::timeout(job.timeout, conn::open(&p.endpoint, job.version, job.tls.as_ref(), &meters)).await;
        let mut st = state.borrow_mut();
        st.interval.sent += 1;
        let failure = match opened {
            Ok(Ok((s, times))) => {
                hist::record_ns(&mut st.run.connect, times.connect.as_nanos() as u64);
                if let Some(t) = times.tls {
                    hist::record_ns(&mut st.run.tls, t.as_nanos() as u64);
                }
                st.run.established += 1;
                st.run.open += 1;
                st.run.peak_open = st.run.peak_open.max(st.run.open);
                *sender = Some(s);
                None
            }
            Ok(Err(f)) => Some(f),
            Err(_) => {
                Some((ErrorKind::Timeout, format!("connect to {} took over {:?}", p.endpoint.authority, job.timeout)))
            }
        };
        if let Some((kind, msg)) = failure {
            st.run.failed += 1;
            st.interval.errors += 1;
            st.run.fail(kind, msg);
            let now = Instant::now();
            st.run.last_done_s = now.duration_since(st.start).as_secs_f64();
            return (false, now);
        }
    } else {
        state.borrow_mut().interval.sent += 1;
    }
    let t_send = if had_conn && t_ref_is_now { t_ref } else { Instant::now() };
    let Some(s) = sender.as_mut() else { return (false, Instant::now()) };
    let exchange = async {
        match s {
            Sender::H1(c) => c.exchange(&p.h1, p.method == Method::HEAD).await.map(|a| (a.status, a.head_at)),
            Sender::H2(h) => {
                let resp = h
                    .send_request(p.request())
                    .await
                    .map_err(|e| (ErrorKind::of_hyper(&e), format!("request: {e}")))?;
                let t_headers = Instant::now();
                let status = resp.status().as_u16();
                let mut body = resp.into_body();
                while let Some(frame) = body.frame().await {
                    frame.map_err(|e| (ErrorKind::of_hyper(&e), format!("response body: {e}")))?;
                }
                Ok::<_, conn::Failure>((status, t_headers))
            }
        }
    };
    let outcome = tokio::time::timeout(job.timeout, exchange).await;
    let t_done = Instant::now();
    let mut st = state.borrow_mut();
    st.run.last_done_s = t_done.duration_since(st.start).as_secs_f64();
    let failure = match outcome {
        Ok(Ok((status, t_headers))) => {
            st.interval.completed += 1;
            *st.interval.status.entry(status).or_default() += 1;
            if status < 400 {
                st.run.succeeded += 1;
            }
            hist::record_ns(&mut st.interval.latency, t_done.duration_since(t_ref).as_nanos() as u64);
            hist::record_ns(&mut st.run.ttfb, t_headers.duration_since(t_send).as_nanos() as u64);
            hist::record_ns(&mut st.run.body, t_done.duration_since(t_headers).as_nanos() as u64);
            drop(st);
            if !job.keepalive {
                close(sender, state);
            }
            return (true, t_done);
        }
        Ok(Err(f)) => f,
        Err(_) => (ErrorKind::Timeout, format!("no complete response within {:?}", job.timeout)),
    };
    st.interval.errors += 1;
    st.run.fail(failure.0, failure.1);
    drop(st);
    close(sender, state);
    (false, t_done)
}
