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
use super::stats::{ConnTcp, ErrorKind, IntervalStats, RunStats};
use crate::exec::worker::{RunFlags, Seat, StartGate, Ticker};
use crate::measure::pace::{Curve, Pace};
use crate::os::sys::CpuMark;
use bytes::Bytes;
use http::{HeaderMap, Method, Request, Uri};
use netblast_spec::hist;
use netblast_spec::profile::HttpVersion;
use netblast_spec::result::CpuUsage;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
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
    fn head(&self) -> Request<()> {
        let mut r = Request::new(());
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
    /// The status codes that count as succeeded.
    pub expected: netblast_spec::profile::StatusSet,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Reporting interval.
    pub interval: Duration,
    /// No new requests after this long.
    pub bound: Duration,
    /// Open loop: the rate over the run; `None`: closed loop.
    pub schedule: Option<Curve>,
    /// Total request bound (`-n`).
    pub requests_bound: Option<u64>,
    /// Lanes (requests in flight at once) over all workers: connections × streams.
    pub slots: u32,
    /// Lanes per connection (HTTP/2 streams; 1 for HTTP/1.1).
    pub streams: u32,
    /// Workers.
    pub workers: u32,
    /// Kernel TCP statistics source for the connections.
    pub probe: netblast_probe::Probe,
    /// Without keep-alive, with eBPF: the kernel group whose threads' connections count in it.
    pub group: Option<netblast_probe::GroupTag>,
    /// Whether the run stops before its bound, and why.
    pub early: EarlyStop,
}

/// Stops an HTTP run before its bound when its first handshakes fail on a certificate this
/// client does not trust: every later one would fail the same way, and thousands of counted
/// failures say less than the one cause and the flag that fixes it. Once any connection of
/// the run has been made the run goes on (a certificate failure then is a result).
#[derive(Debug, Default)]
pub struct EarlyStop {
    connected: AtomicBool,
    stopped: AtomicBool,
    cause: Mutex<Option<(f64, String)>>,
}

impl EarlyStop {
    /// Notes that a connection of the run was established.
    fn connected(&self) {
        if !self.connected.load(Ordering::Relaxed) {
            self.connected.store(true, Ordering::Relaxed);
        }
    }

    /// Considers a failed connection `at_s` into the run: a certificate failure before any
    /// connection was made stops the run.
    fn failed(&self, kind: ErrorKind, msg: &str, at_s: f64) {
        if kind != ErrorKind::Certificate || self.connected.load(Ordering::Relaxed) {
            return;
        }
        if let Ok(mut cause) = self.cause.lock() {
            cause.get_or_insert_with(|| (at_s, msg.to_string()));
        }
        self.stopped.store(true, Ordering::Relaxed);
    }

    /// Whether the run should send no more requests.
    pub fn stopping(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }

    /// When (s into the run) and why the run stopped early, if it did.
    pub fn cause(&self) -> Option<(f64, String)> {
        self.cause.lock().ok().and_then(|c| c.clone())
    }
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
        /// The CPU it was pinned to (read back from its affinity), if it was.
        pinned: Option<usize>,
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

/// What the HTTP run gives each of its workers besides the job: the start gate, the run
/// flags, where its messages go.
#[derive(Clone)]
pub struct Links {
    /// Start gate.
    pub gate: Arc<StartGate>,
    /// Run flags.
    pub flags: Arc<RunFlags>,
    /// Where the worker's interval and final messages go, tagged with its index.
    pub tx: mpsc::Sender<(usize, WorkerMsg)>,
}

/// Runs one worker on the calling (pinned) thread until its slots (lane, request budget)
/// are done.
pub fn run_worker(seat: Seat, slots: Vec<(u32, Option<u64>)>, job: Arc<Job>, links: Links) {
    let Links { gate, flags, tx } = links;
    let (w, pin_error, pinned) = (seat.index, seat.pin_error(), seat.cpu());
    let cpu_mark = CpuMark::thread();
    let done = |run: RunStats, pin_error: Option<String>| {
        let _ = tx.send((w, WorkerMsg::Done { run: Box::new(run), cpu: cpu_mark.usage(), pinned, pin_error }));
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
    // Every connection this thread opens counts in the kernel group (the runtime is this
    // thread's alone). Not joined, its connections are only missing from the kernel RTT.
    let (_in_group, group_error) = match job.group.as_ref().map(|g| g.join_thread()) {
        Some(Err(e)) => (None, Some(format!("eBPF: {e}"))),
        Some(Ok(g)) => (Some(g), None),
        None => (None, None),
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
            tcp: Rc::new(RefCell::new(ConnTcp { problem: group_error, ..ConnTcp::new() })),
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
            // Lane k uses connection k / streams; the lanes of a connection share it.
            let mut conns: std::collections::HashMap<u32, Rc<Conn>> = std::collections::HashMap::new();
            let mut conn_of = |k: u32| conns.entry(k / job.streams).or_insert_with(|| Conn::new(state.clone())).clone();
            match &job.schedule {
                None => {
                    for (k, budget) in slots {
                        let (job, flags, conn) = (job.clone(), flags.clone(), conn_of(k));
                        handles.push(tokio::task::spawn_local(closed_slot(k, budget, conn, job, end, flags)));
                    }
                }
                Some(_) => {
                    let (free_tx, free_rx) = amsc::unbounded_channel::<usize>();
                    let mut slot_txs = Vec::new();
                    for (i, (k, _)) in slots.iter().enumerate() {
                        let (job_tx, job_rx) = amsc::unbounded_channel::<(u64, Instant)>();
                        slot_txs.push(job_tx);
                        let (job, free_tx, conn) = (job.clone(), free_tx.clone(), conn_of(*k));
                        // Free from the start, before its task first runs: the first request
                        // due at the start must find it (it was counted late otherwise).
                        let _ = free_tx.send(i);
                        handles.push(tokio::task::spawn_local(open_slot(i, job_rx, free_tx, conn, job)));
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
            // The tail ends with the worker's last response, as the summary's span does (not
            // at this wake-up, up to 20 ms later): one span, one rate.
            let done = state.borrow().run.last_done_s;
            let end_s = if done > em.last_s { done } else { now.duration_since(start).as_secs_f64().max(em.last_s) };
            if em.pending(&state) {
                em.emit(&state, ticker.index(), end_s);
            }
            return;
        }
    }
}

async fn closed_slot(k: u32, budget: Option<u64>, conn: Rc<Conn>, job: Arc<Job>, end: Instant, flags: Arc<RunFlags>) {
    let mut n = 0u64;
    let mut j = k as u64;
    let mut deadline = Deadline::new();
    // The end of one request is the start of the next: one clock read serves both.
    let mut now = Instant::now();
    loop {
        if flags.stopping() || job.early.stopping() || now >= end || budget.is_some_and(|b| n >= b) {
            break;
        }
        let p = job.pick(j);
        j += job.slots as u64;
        n += 1;
        let (ok, done) = exec(&conn, p, &job, now, true, &mut deadline).await;
        now = done;
        if !ok {
            // A refused or failing connection must not turn into a busy loop.
            tokio::time::sleep(Duration::from_millis(10)).await;
            now = Instant::now();
        }
    }
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
    let Some(curve) = &job.schedule else { return };
    // Request j of the whole test is worker j mod W's: this worker's slots are w, w + W, ...
    let mut pace = Pace::over(state.borrow().start, curve.clone());
    pace.take(w as u64);
    let timer = match super::timer::HrTimer::new() {
        Ok(t) => Some(t),
        Err(e) => {
            state.borrow_mut().run.fail(ErrorKind::Io, format!("no timerfd ({e}); using millisecond timers"));
            None
        }
    };
    loop {
        let j = pace.next_slot();
        if job.requests_bound.is_some_and(|n| j >= n) || flags.stopping() || job.early.stopping() {
            break;
        }
        // Catch up, one request at a time: each is sent at its intended time or, late, at once.
        let Some(intended) = pace.next_due() else { break };
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
        // The wait for a free connection may have outlasted the run's stop.
        if flags.stopping() || job.early.stopping() {
            break;
        }
        if slot_txs[slot].send((j, intended)).is_err() {
            break;
        }
        pace.take(job.workers as u64);
    }
}

async fn open_slot(
    id: usize,
    mut jobs: amsc::UnboundedReceiver<(u64, Instant)>,
    free: amsc::UnboundedSender<usize>,
    conn: Rc<Conn>,
    job: Arc<Job>,
) {
    let mut deadline = Deadline::new();
    while let Some((j, intended)) = jobs.recv().await {
        let lag = Instant::now().saturating_duration_since(intended);
        hist::record_ns(&mut conn.state.borrow_mut().run.send_lag, lag.as_nanos() as u64);
        exec(&conn, job.pick(j), &job, intended, false, &mut deadline).await;
        if free.send(id).is_err() {
            break;
        }
    }
}

/// One connection and the lanes (requests in flight) that share it: one lane with HTTP/1.1,
/// `streams` with HTTP/2. The lanes open it when it is missing or broken, one at a time; it
/// closes when the last lane is done with it.
struct Conn {
    sender: RefCell<Option<Sender>>,
    /// A lane is connecting; the others wait for it instead of opening their own.
    opening: Cell<bool>,
    opened: tokio::sync::Notify,
    state: Shared,
}

impl Conn {
    fn new(state: Shared) -> Rc<Conn> {
        Rc::new(Conn { sender: RefCell::new(None), opening: Cell::new(false), opened: Default::default(), state })
    }

    fn usable(&self) -> bool {
        self.sender.borrow_mut().as_mut().is_some_and(Sender::is_usable)
    }

    /// Drops the connection, if there is one.
    fn close(&self) {
        if self.sender.borrow_mut().take().is_some() {
            self.state.borrow_mut().run.open -= 1;
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.close();
    }
}

/// Waits for a usable connection: the one there is, the one another lane is opening, or a new
/// one opened here. Returns whether this lane opened it, or `None` when opening failed (the
/// failure is counted against this request) or the run stopped at its first handshakes (the
/// request is not sent, and not counted).
async fn connect(conn: &Conn, p: &Prepared, job: &Job) -> Option<bool> {
    let state = &conn.state;
    while !conn.usable() {
        if conn.opening.get() {
            conn.opened.notified().await;
            continue;
        }
        // A run stopped at its first handshakes opens no more connections: each connection
        // fails its handshake once at most, whatever was queued or due when the stop came.
        if job.early.stopping() {
            return None;
        }
        conn.close();
        conn.opening.set(true);
        let meters = state.borrow().meters.clone();
        let opened =
            tokio::time::timeout(job.timeout, conn::open(&p.endpoint, job.version, job.tls.as_ref(), &meters)).await;
        conn.opening.set(false);
        conn.opened.notify_waiters();
        let mut st = state.borrow_mut();
        st.interval.sent += 1;
        let failure = match opened {
            Ok(Ok((s, times))) => {
                hist::record_ns(&mut st.run.connect, times.connect.as_nanos() as u64);
                if let Some(t) = times.tls {
                    hist::record_ns(&mut st.run.tls, t.as_nanos() as u64);
                }
                st.run.established += 1;
                job.early.connected();
                st.run.open += 1;
                st.run.peak_open = st.run.peak_open.max(st.run.open);
                *conn.sender.borrow_mut() = Some(s);
                None
            }
            Ok(Err(f)) => Some(f),
            Err(_) => {
                Some((ErrorKind::Timeout, format!("connect to {} took over {:?}", p.endpoint.authority, job.timeout)))
            }
        };
        return match failure {
            None => Some(true),
            Some((kind, msg)) => {
                st.run.failed += 1;
                st.interval.errors += 1;
                job.early.failed(kind, &msg, Instant::now().duration_since(st.start).as_secs_f64());
                st.run.fail(kind, msg);
                None
            }
        };
    }
    state.borrow_mut().interval.sent += 1;
    Some(false)
}

/// A lane's request timeout: one timer kept for the lane's life and moved forward for each
/// request. Moving a tokio timer later only updates its deadline (the timer wheel is touched
/// when the old deadline passes), where a `tokio::time::timeout` per request inserted and
/// removed a wheel entry each time (the timer functions were ~1.5% of the client's CPU samples
/// at 60 k requests/s; the saving is below this 2-core host's run-to-run noise).
struct Deadline(Pin<Box<tokio::time::Sleep>>);

/// A request that did not complete within its limit.
struct Elapsed;

impl Deadline {
    fn new() -> Deadline {
        Deadline(Box::pin(tokio::time::sleep(Duration::from_secs(3600))))
    }

    /// Runs `fut` for at most `limit` from now.
    async fn within<F: Future>(&mut self, limit: Duration, fut: F) -> Result<F::Output, Elapsed> {
        self.0.as_mut().reset(tokio::time::Instant::now() + limit);
        let mut fut = std::pin::pin!(fut);
        std::future::poll_fn(|cx| {
            if let std::task::Poll::Ready(v) = fut.as_mut().poll(cx) {
                return std::task::Poll::Ready(Ok(v));
            }
            self.0.as_mut().poll(cx).map(|()| Err(Elapsed))
        })
        .await
    }
}

/// Sends one request on the lane's connection (opening one if needed) and reads the whole
/// response. Latency is measured from `t_ref`: in closed loop (`t_ref_is_now`) the moment the
/// request is due, which is also when it is sent on an open connection; in open loop the
/// intended time. Returns whether a response arrived, and when the attempt ended.
async fn exec(
    conn: &Conn,
    p: &Prepared,
    job: &Job,
    t_ref: Instant,
    t_ref_is_now: bool,
    deadline: &mut Deadline,
) -> (bool, Instant) {
    let state = &conn.state;
    let Some(opened_here) = connect(conn, p, job).await else {
        let now = Instant::now();
        let mut st = state.borrow_mut();
        st.run.last_done_s = now.duration_since(st.start).as_secs_f64();
        return (false, now);
    };
    let t_send = if !opened_here && t_ref_is_now { t_ref } else { Instant::now() };
    // HTTP/1.1: this lane has the connection to itself while the exchange lasts (it is put back
    // even when the exchange times out). HTTP/2: a handle; the streams share the connection.
    let leased = {
        let mut cell = conn.sender.borrow_mut();
        match &*cell {
            Some(Sender::H2(h)) => Some(Sender::H2(h.clone())),
            _ => cell.take(),
        }
    };
    let h1 = matches!(leased, Some(Sender::H1(_)));
    let outcome = match leased {
        Some(Sender::H1(mut c)) => {
            let r = deadline.within(job.timeout, c.exchange(&p.h1, p.method == Method::HEAD)).await;
            *conn.sender.borrow_mut() = Some(Sender::H1(c));
            r.map(|x| x.map(|a| (a.status, a.head_at)))
        }
        Some(Sender::H2(h)) => deadline.within(job.timeout, h2_exchange(h, p)).await,
        None => Ok(Err((ErrorKind::Reset, "the connection was gone".to_string()))),
    };
    let t_done = Instant::now();
    let mut st = state.borrow_mut();
    st.run.last_done_s = t_done.duration_since(st.start).as_secs_f64();
    let failure = match outcome {
        Ok(Ok((status, t_headers))) => {
            st.interval.completed += 1;
            *st.interval.status.entry(status).or_default() += 1;
            if job.expected.contains(status) {
                st.run.succeeded += 1;
            } else {
                st.interval.failed_status += 1;
            }
            hist::record_ns(&mut st.interval.latency, t_done.duration_since(t_ref).as_nanos() as u64);
            hist::record_ns(&mut st.run.ttfb, t_headers.duration_since(t_send).as_nanos() as u64);
            hist::record_ns(&mut st.run.body, t_done.duration_since(t_headers).as_nanos() as u64);
            drop(st);
            if !job.keepalive {
                conn.close();
            }
            return (true, t_done);
        }
        Ok(Err(f)) => f,
        Err(_) => (ErrorKind::Timeout, format!("no complete response within {:?}", job.timeout)),
    };
    st.interval.errors += 1;
    st.run.fail(failure.0, failure.1);
    drop(st);
    // An HTTP/1.1 connection is in an unknown state after a failure; an HTTP/2 one only when
    // the connection itself broke (a stream's failure leaves the others alone).
    if h1 || !conn.usable() {
        conn.close();
    }
    (false, t_done)
}

/// Requests sent one at a time before an open-loop load to learn what the target answers
/// alone: the first on a new connection is slower (nginx: 210-230 us; the fastest of five 60-80 us).
const ALONE: usize = 5;

/// The fastest first byte of five (`ALONE`) requests sent one at a time before the load, on a
/// connection of its own that is closed after them (open loop): what the target answers with
/// nothing of this test in flight, measured as the run's first-byte times are (from the send,
/// after the connect). The verdict weighs the lanes against it, since under a load the target
/// cannot keep up with, even the fastest answer of the run waited in its queue. `None` when no
/// expected answer came within the request timeout (2 s at most in all); these requests are
/// not counted in the run's figures.
pub fn unloaded_first_byte(job: &Job) -> Option<Duration> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
    let local = tokio::task::LocalSet::new();
    let p = job.requests.first()?;
    let meters = Meters {
        bytes: Rc::new(ByteCount::default()),
        tcp: Rc::new(RefCell::new(ConnTcp::new())),
        probe: job.probe.clone(),
    };
    let alone = async {
        let (mut sender, _) = conn::open(&p.endpoint, job.version, job.tls.as_ref(), &meters).await.ok()?;
        let mut fastest: Option<Duration> = None;
        for _ in 0..ALONE {
            let t_send = Instant::now();
            let answer = match &mut sender {
                Sender::H1(c) => c.exchange(&p.h1, p.method == Method::HEAD).await.map(|a| (a.status, a.head_at)),
                Sender::H2(h) => h2_exchange(h.clone(), p).await,
            };
            match answer {
                Ok((status, t_headers)) if job.expected.contains(status) => {
                    let took = t_headers.duration_since(t_send);
                    fastest = Some(fastest.map_or(took, |f| f.min(took)));
                }
                _ => break,
            }
            if !sender.is_usable() {
                break;
            }
        }
        fastest
    };
    let limit = job.timeout.min(Duration::from_secs(2));
    local.block_on(&rt, async { tokio::time::timeout(limit, alone).await.ok().flatten() })
}

/// One HTTP/2 request on a stream of its own: (status, when the response head arrived). The
/// body, if any, goes out as the peer's flow-control window allows; the response's data is
/// counted and its window handed back at once, as a client that reads it would.
async fn h2_exchange(h: h2::client::SendRequest<Bytes>, p: &Prepared) -> Result<(u16, Instant), super::stats::Failure> {
    let fail = |what: &str, e: h2::Error| (ErrorKind::of_h2(&e), format!("{what}: {e}"));
    let mut h = h.ready().await.map_err(|e| fail("request", e))?;
    let (resp, mut send) = h.send_request(p.head(), p.body.is_empty()).map_err(|e| fail("request", e))?;
    let mut rest = p.body.clone();
    while !rest.is_empty() {
        send.reserve_capacity(rest.len());
        let n = match std::future::poll_fn(|cx| send.poll_capacity(cx)).await {
            Some(Ok(n)) => n.min(rest.len()),
            Some(Err(e)) => return Err(fail("request body", e)),
            None => return Err((ErrorKind::Reset, "request body: the stream was closed".to_string())),
        };
        let chunk = rest.split_to(n);
        send.send_data(chunk, rest.is_empty()).map_err(|e| fail("request body", e))?;
    }
    let resp = resp.await.map_err(|e| fail("request", e))?;
    let t_headers = Instant::now();
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    while let Some(data) = body.data().await {
        let data = data.map_err(|e| fail("response body", e))?;
        let _ = body.flow_control().release_capacity(data.len());
    }
    Ok((status, t_headers))
}
