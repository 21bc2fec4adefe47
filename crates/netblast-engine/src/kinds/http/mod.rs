//! The http generator: HTTP/1.1, HTTP/2 and HTTPS request floods against any HTTP server
//! (`netblast serve --http`, nginx, envoy, ...), closed or open loop.
//!
//! Threads: one pinned worker per CPU (up to the connection count), each a single-threaded
//! tokio runtime holding its share of the connections (connection c on worker c mod W) and
//! their lanes: a lane is one request in flight, `streams` of them per HTTP/2 connection, one
//! per HTTP/1.1 connection. Sockets: the TCP connections (own HTTP/1.1 client, hyper for
//! HTTP/2, rustls for TLS). Metrics: requests sent and
//! completed, status codes, failures by class, bytes both ways (counted at the TCP level), the
//! latency HDR histogram per interval (open loop: from each request's intended send time), and
//! per request or connection: TCP connect, TLS handshake, time to first byte, body read, send
//! lag. Results are merged by adding counters and histograms.
//!
//! # Layout
//! - [`schedule`]: an open loop's rate over the run (constant, ramp, steps), the pacer's curve.
//! - [`conn`]: opening a connection, byte counting.
//! - [`h1`]: the HTTP/1.1 client connection (HTTP/2 uses hyper).
//! - [`tls`]: client TLS settings.
//! - [`worker`]: a worker's slots, dispatcher and ticker.
//! - [`stats`]: counters and failure classes.
//! - [`timer`]: the dispatcher's microsecond timer.

pub mod conn;
pub mod h1;
pub mod head;
pub mod schedule;
pub mod stats;
pub mod timer;
pub mod tls;
pub mod worker;

use crate::exec::api::{ClientError, Live, Measured, RunOptions};
use crate::exec::collect::Collector;
use crate::exec::generator::{Ending, Generator};
use crate::exec::start::Started;
use crate::exec::worker::{RunFlags, Seat, StartGate};
use crate::os::sys;

use crate::measure::pace::Curve;
use bytes::Bytes;
use conn::Endpoint;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Uri};
use netblast_probe::Probe;
use netblast_spec::hist::Distribution;
use netblast_spec::plan::split_budget;
use netblast_spec::profile::{HttpSection, HttpVersion};
use netblast_spec::result::per_second;
use netblast_spec::result::{
    ClockInfo, CpuSummary, CpuUsage, HostInfo, HttpConnections, HttpErrorCount, HttpInterval, HttpParts, HttpPhases,
    HttpSummary, HttpTcp, Interval, Plan, RunError, RunResult, StreamInfo, Summary, ThreadCpu,
};
use netblast_wire::gather::Gather;
use stats::{IntervalStats, RunStats};
use std::collections::BTreeMap;
use std::net::ToSocketAddrs;
use std::sync::{Arc, mpsc};
use std::time::Duration;
use worker::{Job, Prepared, WorkerMsg};

fn bad(what: impl Into<String>) -> ClientError {
    ClientError::Http(what.into())
}

/// Resolves the section's URLs (paths against `target`) into ready requests.
fn prepare(
    h: &HttpSection,
    target: &str,
    bind: &crate::os::sockopt::Binding,
    dscp: Option<netblast_spec::mark::Dscp>,
) -> Result<(Vec<Prepared>, bool), ClientError> {
    let body = match (&h.body, &h.body_file) {
        (Some(b), _) => Bytes::from(b.clone().into_bytes()),
        (None, Some(path)) => Bytes::from(netblast_spec::profile::read_body_file(path).map_err(bad)?),
        (None, None) => Bytes::new(),
    };
    let method = Method::from_bytes(h.method.as_bytes()).map_err(|_| bad(format!("invalid method {:?}", h.method)))?;
    let mut extra = HeaderMap::new();
    for line in &h.headers {
        let (name, value) =
            line.split_once(':').ok_or_else(|| bad(format!("header {line:?} is not \"Name: value\"")))?;
        let name = HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| bad(format!("invalid header name in {line:?}")))?;
        let value =
            HeaderValue::from_str(value.trim()).map_err(|_| bad(format!("invalid header value in {line:?}")))?;
        extra.append(name, value);
    }
    let mut any_tls = false;
    let mut out = Vec::new();
    for u in &h.urls {
        let full = if u.starts_with('/') {
            if target.is_empty() {
                return Err(bad(format!("URL {u:?} is a path: give --target HOST:PORT (or absolute URLs)")));
            }
            format!("{}://{}{}", if h.tls { "https" } else { "http" }, target, u)
        } else {
            u.clone()
        };
        let uri: Uri = full.parse().map_err(|e| bad(format!("invalid URL {full:?}: {e}")))?;
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(bad(format!("URL {full:?}: scheme must be http or https"))),
        };
        any_tls |= https;
        let authority = uri.authority().ok_or_else(|| bad(format!("URL {full:?} has no host")))?.clone();
        // An IPv6 zone is written %25 in a URL (RFC 6874): `[fe80::1%25eth0]` is fe80::1%eth0.
        let host = authority.host().trim_start_matches('[').trim_end_matches(']').replacen("%25", "%", 1);
        // The authority's own text: a port the URL parser cannot read as a u16 (99999) would
        // otherwise read as "no port" and go to 80.
        let written = authority.as_str().rsplit_once(':').map(|(_, p)| p).filter(|p| !p.contains(']'));
        let port = match written {
            None | Some("") => {
                if https {
                    443
                } else {
                    80
                }
            }
            Some(p) => match p.parse::<u32>() {
                Ok(n @ 1..=65535) => n as u16,
                _ => return Err(bad(format!("URL {full:?}: port {p} is outside 1..65535"))),
            },
        };
        let addr = (host.as_str(), port)
            .to_socket_addrs()
            .map_err(|e| bad(format!("cannot resolve {host}: {e}")))?
            .next()
            .ok_or_else(|| bad(format!("{host} resolves to no address")))?;
        let tls_name = if https {
            let name = h.sni.clone().unwrap_or_else(|| host.clone());
            Some(
                rustls::pki_types::ServerName::try_from(name.clone())
                    .map_err(|_| bad(format!("invalid TLS server name {name:?}")))?,
            )
        } else {
            None
        };
        let path = uri.path_and_query().map(|p| p.as_str().to_string()).unwrap_or_else(|| "/".into());
        let mut headers = extra.clone();
        let send_uri: Uri = match h.version {
            HttpVersion::Http1 => {
                if !headers.contains_key(http::header::HOST) {
                    headers.insert(
                        http::header::HOST,
                        HeaderValue::from_str(authority.as_str()).map_err(|_| bad("invalid host"))?,
                    );
                }
                path.parse().map_err(|e| bad(format!("invalid path {path:?}: {e}")))?
            }
            HttpVersion::Http2 => uri.clone(),
        };
        if !headers.contains_key(http::header::USER_AGENT) {
            headers.insert(
                http::header::USER_AGENT,
                HeaderValue::from_static(concat!("netblast/", env!("CARGO_PKG_VERSION"))),
            );
        }
        if !body.is_empty() && !headers.contains_key(http::header::CONTENT_LENGTH) {
            headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from(body.len()));
        }
        if !h.keepalive && h.version == HttpVersion::Http1 {
            headers.insert(http::header::CONNECTION, HeaderValue::from_static("close"));
        }
        if h.version == HttpVersion::Http2 {
            strip_connection_headers(&mut headers);
        }
        let h1 = serialize_h1(&method, &path, &headers, &body);
        out.push(Prepared {
            h1,
            endpoint: Endpoint { addr, tls_name, authority: authority.to_string(), bind: bind.clone(), dscp },
            method: method.clone(),
            uri: send_uri,
            headers,
            body: body.clone(),
        });
    }
    Ok((out, any_tls))
}

/// Drops the headers HTTP/2 forbids (RFC 9113 8.2.2: they describe one HTTP/1.1 connection,
/// and a request carrying one is malformed), as hyper's client and h2load do: `connection`,
/// `keep-alive`, `proxy-connection`, `transfer-encoding`, `upgrade`, and `te` other than
/// `trailers`.
fn strip_connection_headers(headers: &mut HeaderMap) {
    for name in ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"] {
        headers.remove(name);
    }
    if headers.get_all(http::header::TE).iter().any(|v| v != "trailers") {
        headers.remove(http::header::TE);
    }
}

/// An HTTP/1.1 request as bytes on the wire.
fn serialize_h1(method: &Method, path: &str, headers: &HeaderMap, body: &Bytes) -> Bytes {
    let mut v = Vec::with_capacity(256 + body.len());
    v.extend_from_slice(method.as_str().as_bytes());
    v.push(b' ');
    v.extend_from_slice(path.as_bytes());
    v.extend_from_slice(b" HTTP/1.1\r\n");
    for (name, value) in headers {
        v.extend_from_slice(name.as_str().as_bytes());
        v.extend_from_slice(b": ");
        v.extend_from_slice(value.as_bytes());
        v.extend_from_slice(b"\r\n");
    }
    v.extend_from_slice(b"\r\n");
    v.extend_from_slice(body);
    Bytes::from(v)
}

/// Weighted round-robin order: each URL index repeated by its weight, interleaved.
fn cycle(weights: Option<&[u32]>, n: usize) -> Vec<usize> {
    let w: Vec<u32> = weights.map(|w| w.to_vec()).unwrap_or_else(|| vec![1; n]);
    let max = w.iter().copied().max().unwrap_or(1);
    let mut out = Vec::new();
    for round in 0..max {
        for (i, wi) in w.iter().enumerate() {
            if round < *wi {
                out.push(i);
            }
        }
    }
    out
}

/// One interval's counters from the workers that reported it.
#[derive(Default)]
struct Acc {
    span: Option<(f64, f64)>,
    stats: IntervalStats,
}

fn status_map(m: &stats::StatusCounts) -> BTreeMap<String, u64> {
    m.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

fn http_interval(index: u32, a: &Acc, schedule: Option<&Curve>) -> Interval {
    let (start_s, end_s) = a.span.unwrap_or((0.0, 0.0));
    let secs = end_s - start_s;
    let s = &a.stats;
    Interval {
        index,
        start_s,
        end_s,
        streams: Vec::new(),
        sums: Vec::new(),
        http: Some(HttpInterval {
            sent: s.sent,
            completed: s.completed,
            errors: s.errors,
            failed_status: s.failed_status,
            late: s.late,
            responses_per_s: per_second(s.completed as f64, secs),
            target_rate: schedule.map(|sc| sc.rate_between(start_s, end_s)),
            sent_per_s: per_second(s.sent as f64, secs),
            bytes_sent: s.bytes_sent,
            bytes_received: s.bytes_received,
            latency: Distribution::if_any(&s.latency),
            status: status_map(&s.status),
        }),
    }
}

/// The run's kernel TCP figures from the workers' connection samples.
fn http_tcp(t: &stats::ConnTcp) -> HttpTcp {
    HttpTcp::new(
        t.connections,
        t.segs_out,
        t.retransmits,
        t.dsack.filter(|_| t.connections > 0),
        Distribution::if_any(&t.srtt),
        t.kernel_rtt.histogram().and_then(Distribution::if_any),
    )
}

/// Time to let the workers reach the start gate before the start instant.
const START_LEAD: Duration = Duration::from_millis(5);

/// An HTTP test set up: the job its workers share, and what the result needs of the set-up.
struct Setup {
    h: HttpSection,
    job: Arc<Job>,
    /// The probe the connections use (without eBPF registration when not kept alive).
    probe: Probe,
    /// The kernel group of connections made without keep-alive, read once at the end.
    group_watch: Option<netblast_probe::FlowWatch>,
    schedule: Option<Curve>,
    any_tls: bool,
    local_address: String,
}

impl Setup {
    /// Resolves the URLs into requests, the TLS configuration, how the probe sees the
    /// connections, the schedule, and the job.
    fn new(plan: &Plan, probe: &Probe) -> Result<Setup, ClientError> {
        let h = plan.profile.workload.http().cloned().ok_or_else(|| bad("not an http profile"))?;
        let (requests, any_tls) = prepare(&h, &plan.target, &plan.bind, plan.profile.tcp.dscp)?;
        let tls = if any_tls { Some(tls::client_config(&h).map_err(bad)?) } else { None };
        // Registering a socket with the eBPF probe costs two map updates of its 9 KiB RTT
        // histogram: nothing next to a kept-alive connection's requests, more than the request
        // itself when every request opens a connection (-36% requests/s measured). Without
        // keep-alive the connections are one kernel group instead, tied to it by the worker
        // thread that makes them; each one's own figures come from TCP_INFO as it closes.
        let group = if h.keepalive { None } else { probe.thread_group() };
        let conn_probe = if h.keepalive {
            probe.clone()
        } else {
            probe.without_ebpf(if group.is_some() {
                "without keep-alive each connection's own figures are its TCP_INFO at close; kernel RTT samples of all of them come from one eBPF group"
            } else {
                "http without keep-alive opens a connection per request; registering each with the eBPF probe would cost more than the request"
            })
        };
        let (group_watch, group_tag) = group.unzip();
        // The kernel callbacks (eBPF) must be on before the connections are made.
        for port in requests.iter().map(|r| r.endpoint.addr.port()).collect::<std::collections::BTreeSet<_>>() {
            conn_probe.watch_peer_port(port).map_err(|e| ClientError::of_probe("cannot set up the eBPF probe", e))?;
        }
        // The address this client reaches its (first) server from, as a bulk test's control
        // connection shows it: fleet parts name the client agent by it.
        let local_address = requests
            .first()
            .and_then(|r| crate::os::sockopt::source_address(r.endpoint.addr, &r.endpoint.bind).ok())
            .map(|a| a.to_string())
            .unwrap_or_default();
        let bound = plan.time_bound.get();
        let schedule = schedule::from_section(&h, bound);
        let streams = h.streams.max(1);
        let workers = (plan.client_cpus.len() as u32).min(h.connections).max(1);
        sys::ensure_fds(h.connections as u64 * 2 + 64).map_err(ClientError::Fds)?;
        let job = Arc::new(Job {
            cycle: cycle(h.weights.as_deref(), requests.len()),
            requests,
            version: h.version,
            tls,
            keepalive: h.keepalive,
            expected: h.expected(),
            timeout: h.timeout(),
            interval: plan.profile.run.interval(),
            bound,
            schedule: schedule.clone(),
            requests_bound: h.requests,
            slots: h.connections * streams,
            streams,
            workers,
            probe: conn_probe.clone(),
            group: group_tag,
            early: Default::default(),
        });
        Ok(Setup { h, job, probe: conn_probe, group_watch, schedule, any_tls, local_address })
    }

    /// One pinned worker thread per client CPU (at most one per connection), each with its
    /// lanes: lane k belongs to connection k / streams, on worker (k / streams) mod W; in
    /// closed loop each lane sends its exact share of `-n`.
    fn spawn(&self, plan: &Plan, links: &worker::Links) -> Result<Vec<std::thread::JoinHandle<()>>, ClientError> {
        let (slots, streams, workers) = (self.job.slots, self.job.streams, self.job.workers);
        let mut handles = Vec::new();
        for w in 0..workers as usize {
            let my: Vec<(u32, Option<u64>)> = (0..slots)
                .filter(|k| (k / streams) as usize % workers as usize == w)
                .map(|k| {
                    let budget = self.h.requests.map(|n| split_budget(n, slots as u64, k as u64));
                    (k, if self.schedule.is_none() { budget } else { None })
                })
                .collect();
            let (job, links) = (self.job.clone(), links.clone());
            let cpu = plan.client_cpus.get(w).copied();
            let body = move |pinned| worker::run_worker(Seat { index: w, pinned }, my, job, links);
            handles.push(
                crate::exec::worker::spawn(w, cpu, body)
                    .map_err(|e| ClientError::Io { what: "cannot start worker threads".into(), error: e })?,
            );
        }
        Ok(handles)
    }
}

/// What the workers reported, gathered.
#[derive(Default)]
struct Collected {
    intervals: Vec<Interval>,
    total: IntervalStats,
    run: RunStats,
    worker_cpu: CpuUsage,
    threads: Vec<ThreadCpu>,
    errors: Vec<RunError>,
    merge_errors: Vec<String>,
}

/// The run's HTTP figures from the gathered totals.
fn summarize(setup: &Setup, c: &Collected, bound: Duration) -> HttpSummary {
    let (total, run, h) = (&c.total, &c.run, &setup.h);
    let seconds = run.last_done_s.max(1e-9);
    // The window requests were sent in: the schedule's (open loop) or the run's (closed loop).
    let send_window = match &setup.schedule {
        Some(s) => s.end().as_secs_f64().min(bound.as_secs_f64()),
        None => seconds,
    };
    let errors: Vec<HttpErrorCount> = {
        let mut v: Vec<_> = run.errors.iter().collect();
        v.sort_by_key(|(k, _)| **k);
        v.into_iter()
            .map(|(k, (n, s))| HttpErrorCount { kind: k.name().into(), count: *n, sample: s.clone() })
            .collect()
    };
    let phases = HttpPhases {
        connect: Distribution::if_any(&run.connect),
        tls: Distribution::if_any(&run.tls),
        ttfb: Distribution::if_any(&run.ttfb),
        body: Distribution::if_any(&run.body),
        send_lag: Distribution::if_any(&run.send_lag),
    };
    HttpSummary::new(HttpParts {
        mode: if setup.schedule.is_some() { "open_loop" } else { "closed_loop" }.into(),
        version: h.version.name().into(),
        tls: setup.any_tls,
        sent: total.sent,
        completed: total.completed,
        succeeded: run.succeeded,
        seconds,
        send_window,
        target_rate: setup.schedule.as_ref().map(|s| s.rate_between(0.0, send_window)),
        late: total.late,
        bytes_sent: total.bytes_sent,
        bytes_received: total.bytes_received,
        latency: Distribution::if_any(&total.latency).unwrap_or_default(),
        phases,
        status_codes: status_map(&total.status),
        errors,
        connections: HttpConnections {
            configured: h.connections,
            established: run.established,
            failed: run.failed,
            peak_open: run.peak_open,
        },
        tcp: setup.probe.collects().then(|| http_tcp(&run.tcp)),
    })
}

/// The run's errors: the workers', an interruption, the aggregator's, a run stopped at its first
/// handshakes (an untrusted certificate), and a run in which not
/// one request got a response (failed requests are results, not run errors; but such a run
/// measured nothing of the server).
fn run_errors(
    c: &mut Collected,
    summary: &HttpSummary,
    expected: &str,
    interrupted_at: Option<f64>,
    early: Option<(f64, String)>,
) -> Vec<RunError> {
    let mut errors = std::mem::take(&mut c.errors);
    if let Some(at_s) = interrupted_at {
        errors.push(RunError { at_s, source: "client".into(), message: "interrupted by the user".into() });
    }
    c.merge_errors.extend(c.run.tcp.problem.clone());
    for e in c.merge_errors.drain(..) {
        errors.push(RunError { at_s: 0.0, source: "aggregator".into(), message: e });
    }
    if let Some((at_s, why)) = early {
        errors.push(RunError {
            at_s,
            source: "client".into(),
            message: format!("stopped at the first handshakes: {why}"),
        });
    } else if summary.completed == 0 {
        let why: Vec<String> =
            summary.errors.iter().map(|e| format!("{} {} (e.g. {})", e.kind, e.count, e.sample)).collect();
        errors.push(RunError {
            at_s: summary.seconds,
            source: "client".into(),
            message: if why.is_empty() {
                "no request got a response".into()
            } else {
                format!("every request failed: {}", why.join("; "))
            },
        });
    } else if summary.succeeded == 0 {
        // Responses, but none the profile expects: a failed run, as a bulk run that moved nothing.
        let codes: Vec<String> = summary.status_codes.iter().map(|(k, n)| format!("[{k}] {n}")).collect();
        errors.push(RunError {
            at_s: summary.seconds,
            source: "client".into(),
            message: format!(
                "no response had an expected status ({expected}): {} (--expect-status sets what succeeds)",
                codes.join(" ")
            ),
        });
    }
    errors
}

/// An HTTP test from its set-up to its result, its part in each step of the run sequence
/// (`run::sequence`): the workers, and the gathering of their intervals (each released, and
/// shown live, once every worker reported it) and of their run totals; collecting is done when
/// every worker is.
pub struct HttpTest<'a> {
    plan: &'a Plan,
    /// The run's probe (the connections' may be it without eBPF: [`Setup::probe`]).
    probe: &'a Probe,
    probe_stats_at_start: Option<(u64, u64)>,
    clock: ClockInfo,
    setup: Setup,
    /// Open loop: what one request alone was answered in, before the load.
    unloaded: Option<Duration>,
    test_id: String,
    gate: Arc<StartGate>,
    handles: Vec<std::thread::JoinHandle<()>>,
    gather: Gather<Acc>,
    c: Collected,
    /// There is no agent on the other side to show.
    server: HostInfo,
}

impl<'a> HttpTest<'a> {
    /// Sets an HTTP test up: the URLs resolved into requests, the TLS configuration, how the
    /// probe sees the connections, the schedule; in open loop one request alone, timed before
    /// the load (the verdict's measure of the lanes; not a request of the run); the workers
    /// spawned at a shut gate. Their messages arrive on the receiver returned.
    pub fn set_up(
        plan: &'a Plan,
        probe: &'a Probe,
        flags: &Arc<RunFlags>,
        opts: &RunOptions,
    ) -> Result<(HttpTest<'a>, mpsc::Receiver<(usize, WorkerMsg)>), ClientError> {
        let probe_stats_at_start = probe.run_stats();
        let setup = Setup::new(plan, probe)?;
        let unloaded = setup.job.schedule.as_ref().and_then(|_| worker::unloaded_first_byte(&setup.job));
        let gate = StartGate::new();
        let (tx, rx) = mpsc::channel::<(usize, WorkerMsg)>();
        let handles = setup.spawn(plan, &worker::Links { gate: gate.clone(), flags: flags.clone(), tx })?;
        let g = HttpTest {
            plan,
            probe,
            probe_stats_at_start,
            clock: opts.clock,
            gather: Gather::new(setup.job.workers as usize),
            c: Collected { total: IntervalStats::new(), run: RunStats::new(), ..Default::default() },
            setup,
            unloaded,
            test_id: netblast_wire::wire::TestId::random().to_string(),
            gate,
            handles,
            server: HostInfo::default(),
        };
        Ok((g, rx))
    }
}

impl Generator for HttpTest<'_> {
    const LEAD: Duration = START_LEAD;

    fn gate(&self) -> Arc<StartGate> {
        self.gate.clone()
    }

    fn test_id(&self) -> String {
        self.test_id.clone()
    }

    fn shown(&self) -> (&HostInfo, &[StreamInfo]) {
        (&self.server, &[])
    }

    fn abandon(&mut self) {
        self.gate.cancel();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }

    /// Every worker said it is done (or is gone): joined.
    fn stop(&mut self, _rx: &mpsc::Receiver<(usize, WorkerMsg)>, _live: &mut dyn FnMut(Live<'_>)) {
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }

    fn result(mut self, started: &Started, end: Ending, _live: &mut dyn FnMut(Live<'_>)) -> RunResult {
        let (plan, setup, c) = (self.plan, &self.setup, &mut self.c);
        let mut client_load = end.load;
        if let Some(l) = client_load.as_mut() {
            c.threads.sort_by_key(|t| t.name.trim_start_matches("worker ").parse::<usize>().unwrap_or(usize::MAX));
            l.threads = std::mem::take(&mut c.threads);
        }
        let mut cpu = end.cpu;
        cpu.user_s += c.worker_cpu.user_s;
        cpu.system_s += c.worker_cpu.system_s;
        // The group's kernel RTT samples: every connection's, in one read.
        if let Some(h) = setup.group_watch.as_ref().and_then(|w| w.rtt_histogram()) {
            if let Err(e) = c.run.tcp.kernel_rtt.add(&h) {
                c.merge_errors.push(e.to_string());
            }
        }
        let mut http = summarize(setup, c, plan.time_bound.get());
        http.unloaded_ttfb_ns = self.unloaded.map(|d| d.as_nanos() as u64);
        let expected = setup.h.expected().to_string();
        let errors = run_errors(c, &http, &expected, end.interrupted_at, setup.job.early.cause());
        let bits = (http.bytes_sent + http.bytes_received) as f64 * 8.0;
        // The program runs on every connection while it is attached: its run time, when
        // counted, is the attached probe's.
        let mut probe_info = setup.probe.info_since(self.probe_stats_at_start);
        if !setup.h.keepalive {
            let k = self.probe.info_since(self.probe_stats_at_start);
            (probe_info.kernel_run_ns, probe_info.kernel_runs) = (k.kernel_run_ns, k.kernel_runs);
        }
        let envelope =
            started.envelope(self.test_id.clone(), self.clock, setup.local_address.clone(), None, probe_info, None);
        let warnings =
            plan.notes.iter().map(|n| RunError { at_s: 0.0, source: "plan".into(), message: n.clone() }).collect();
        let summary = Summary {
            duration_s: http.seconds,
            ways: Vec::new(),
            streams: Vec::new(),
            cpu: CpuSummary::new(cpu, None, bits),
            http: Some(http),
            load: netblast_spec::result::Load { client: client_load, server: None },
        };
        let measured = Measured {
            complete: errors.is_empty(),
            errors,
            warnings,
            streams: Vec::new(),
            intervals: std::mem::take(&mut c.intervals),
            summary,
        };
        envelope.result(plan, measured)
    }
}

impl Collector for HttpTest<'_> {
    type Msg = (usize, WorkerMsg);

    fn tick(&mut self) -> Option<Duration> {
        (!self.gather.all_done()).then_some(Duration::from_millis(200))
    }

    fn take(&mut self, (w, msg): (usize, WorkerMsg)) -> Vec<Interval> {
        let c = &mut self.c;
        match msg {
            WorkerMsg::Interval { index, start_s, end_s, stats } => {
                let a = self.gather.part(w, index);
                a.span = Some(a.span.map_or((start_s, end_s), |(s, e)| (s.min(start_s), e.max(end_s))));
                if let Err(e) = a.stats.add(&stats) {
                    c.merge_errors.push(e.to_string());
                }
            }
            WorkerMsg::Done { run, cpu, pinned, pin_error } => {
                if let Err(e) = c.run.add(&run) {
                    c.merge_errors.push(e.to_string());
                }
                c.worker_cpu.user_s += cpu.user_s;
                c.worker_cpu.system_s += cpu.system_s;
                c.threads.push(ThreadCpu { name: format!("worker {w}"), cpu: pinned.map(|c| c as u32), usage: cpu });
                if let Some(e) = pin_error {
                    c.errors.push(RunError { at_s: 0.0, source: format!("worker {w}"), message: e });
                }
                self.gather.done(w);
            }
        }
        self.release()
    }

    fn idle(&mut self, gone: bool) -> Option<Vec<Interval>> {
        if gone || self.handles.iter().all(|h| h.is_finished()) {
            // Every worker is gone: whatever it did not report will not come.
            (0..self.setup.job.workers as usize).for_each(|w| self.gather.done(w));
        }
        Some(self.release())
    }
}

impl HttpTest<'_> {
    /// The intervals every worker has reported, added to the run's total and kept.
    fn release(&mut self) -> Vec<Interval> {
        let mut out = Vec::new();
        for (i, a) in self.gather.ready() {
            if let Err(e) = self.c.total.add(&a.stats) {
                self.c.merge_errors.push(e.to_string());
            }
            let iv = http_interval(i, &a, self.setup.schedule.as_ref());
            self.c.intervals.push(iv.clone());
            out.push(iv);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weighted_cycle_interleaves() {
        assert_eq!(cycle(None, 3), vec![0, 1, 2]);
        assert_eq!(cycle(Some(&[3, 1]), 2), vec![0, 1, 0, 0]);
        assert_eq!(cycle(Some(&[0, 2]), 2), vec![1, 1]);
    }

    #[test]
    fn paths_need_a_target_and_urls_resolve() {
        let h = HttpSection { urls: vec!["/x".into()], ..Default::default() };
        assert!(prepare(&h, "", &Default::default(), None).unwrap_err().to_string().contains("--target"));
        let (p, tls) = prepare(&h, "127.0.0.1:8080", &Default::default(), None).unwrap();
        assert!(!tls);
        assert_eq!(p[0].uri, "/x");
        assert_eq!(p[0].headers[http::header::HOST], "127.0.0.1:8080");
        let h2 = HttpSection {
            urls: vec!["https://localhost:8443/y?size=1".into()],
            version: HttpVersion::Http2,
            ..Default::default()
        };
        let (p, tls) = prepare(&h2, "", &Default::default(), None).unwrap();
        assert!(tls);
        assert_eq!(p[0].uri.to_string(), "https://localhost:8443/y?size=1");
        assert!(p[0].endpoint.tls_name.is_some());
        for url in ["http://127.0.0.1:99999/", "http://127.0.0.1:0/"] {
            let h = HttpSection { urls: vec![url.into()], ..Default::default() };
            assert!(
                prepare(&h, "", &Default::default(), None).unwrap_err().to_string().contains("outside 1..65535"),
                "{url}"
            );
        }
        let v6 = HttpSection { urls: vec!["http://[::1]/".into()], ..Default::default() };
        assert_eq!(prepare(&v6, "", &Default::default(), None).unwrap().0[0].endpoint.addr.port(), 80);
        let bad_header = HttpSection { headers: vec!["no colon".into()], ..Default::default() };
        assert!(prepare(&bad_header, "127.0.0.1:1", &Default::default(), None).is_err());
    }

    #[test]
    fn http2_requests_carry_no_connection_headers() {
        let headers = ["Connection: keep-alive", "Keep-Alive: 5", "Upgrade: h2c", "TE: gzip", "X-Kept: 1"];
        let mut h = HttpSection {
            urls: vec!["http://127.0.0.1:8080/".into()],
            headers: headers.iter().map(|s| s.to_string()).collect(),
            keepalive: false,
            ..Default::default()
        };
        let (p, _) = prepare(&h, "", &Default::default(), None).unwrap();
        assert_eq!(p[0].headers["connection"], "close", "HTTP/1.1 keeps them, and says close");
        assert_eq!(p[0].headers["te"], "gzip");
        h.version = HttpVersion::Http2;
        let (p, _) = prepare(&h, "", &Default::default(), None).unwrap();
        for name in ["connection", "keep-alive", "upgrade", "te"] {
            assert!(!p[0].headers.contains_key(name), "{name} sent over HTTP/2");
        }
        assert_eq!(p[0].headers["x-kept"], "1");
        h.headers = vec!["TE: trailers".into()];
        let (p, _) = prepare(&h, "", &Default::default(), None).unwrap();
        assert_eq!(p[0].headers["te"], "trailers", "the one te HTTP/2 allows");
    }
}
