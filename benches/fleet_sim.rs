//! A fleet of simulated agents against the real coordinator: each agent is one real TCP
//! connection on loopback that registers (handshake, hello, clock replies), takes its order
//! and streams one interval frame per interval (eight streams with kernel TCP statistics and a
//! latency histogram: a mid-sized real frame), as `serve --register` agents do, then sends a
//! final result of its own (a real run's, under a test id of its own). The coordinator runs on
//! a thread of its own (a current-thread runtime), so its CPU time is read from that thread
//! alone.

use netblast_spec::fleet::{AgentHello, AgentMsg, CoordMsg};
use netblast_spec::hist::{self, Distribution};
use netblast_spec::profile::Way;
use netblast_spec::result::{AgentInfo, HostInfo, Interval, RunResult, StreamInterval, TcpStats, WayInterval};
use netblast_wire::auth::Token;
use netblast_wire::wire::{self, ClientHandshake, Header, Role, TestId, nonblocking};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

/// What the simulation measured.
#[derive(Debug, Clone)]
pub struct FleetSim {
    /// Agents that streamed.
    pub agents: usize,
    /// Interval frames the agents sent during the measured window.
    pub frames: u64,
    /// Bytes of those frames.
    pub frame_bytes: u64,
    /// Seconds measured.
    pub window_s: f64,
    /// The coordinator thread's CPU over the window, in CPUs (1.0 = one core).
    pub coordinator_cpus: f64,
    /// Growth of the process's resident memory over the window, bytes.
    pub rss_growth: i64,
    /// Seconds from the first connection until every agent was registered and ordered.
    pub setup_s: f64,
    /// Seconds from the last final result sent to the fleet's merged result.
    pub fold_s: f64,
    /// The coordinator thread's CPU seconds from the first final result sent to the merged
    /// result: taking every final and merging them.
    pub fold_cpu_s: f64,
}

fn interval_template() -> Interval {
    let mut h = hist::new_latency_histogram();
    for i in 0..2000u64 {
        hist::record_ns(&mut h, 20_000 + (i * 7919) % 400_000);
    }
    let tcp = TcpStats {
        rtt_us: 120,
        rttvar_us: 30,
        min_rtt_us: 40,
        cwnd_segs: 300,
        mss: 1448,
        segs_out: 123_456,
        ..Default::default()
    };
    let streams: Vec<StreamInterval> = (0..8)
        .map(|id| StreamInterval {
            id,
            sent_bytes: 1_234_567_890,
            received_bytes: Some(1_234_560_000),
            retransmits: Some(3),
            tcp: Some(tcp),
            ..Default::default()
        })
        .collect();
    Interval {
        index: 0,
        start_s: 0.0,
        end_s: 1.0,
        streams,
        sums: vec![WayInterval {
            way: Way::Up,
            sent_bytes: 9_876_543_210,
            sent_bits_per_s: 7.9e10,
            received_bytes: Some(9_876_500_000),
            received_bits_per_s: Some(7.9e10),
            retransmits: Some(24),
            msgs: None,
            latency: Some(Distribution::of(&h)),
        }],
        http: None,
    }
}

/// The CPU time (user + system) of thread `tid` of this process, seconds.
fn thread_cpu_s(tid: i32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // SAFETY: sysconf has no memory-safety preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    // utime and stime are fields 14 and 15 of stat: 11 and 12 after the state field.
    (ticks(11) + ticks(12)) / hz
}

fn now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

/// Frames and bytes the agents sent, and when the first and the last final result went (ns
/// after the Unix epoch).
#[derive(Default)]
struct Counters {
    frames: std::sync::atomic::AtomicU64,
    bytes: std::sync::atomic::AtomicU64,
    first_final_ns: std::sync::atomic::AtomicU64,
    last_final_ns: std::sync::atomic::AtomicU64,
}

fn rss_bytes() -> i64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: i64 = statm.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0);
    pages * 4096
}

/// What every simulated agent sends: an interval frame's template, and a final result's.
struct Templates {
    interval: Interval,
    result: RunResult,
}

/// One simulated agent: register, answer clocks, stream an interval per interval from the
/// start instant until the bound, then send the final result under a test id of its own,
/// started at the order's instant.
async fn agent(
    coord: SocketAddr,
    token: Token,
    n: usize,
    template: Arc<Templates>,
    counter: Arc<Counters>,
) -> Result<(), String> {
    use std::sync::atomic::Ordering::Relaxed;
    let mut s = TcpStream::connect(coord).await.map_err(|e| e.to_string())?;
    s.set_nodelay(true).ok();
    let hs = ClientHandshake::new(Header::new(Role::Register, TestId::random(), 0), Some(token), true);
    nonblocking::client_handshake(&mut s, &hs).await.map_err(|e| e.to_string())?;
    let hello = AgentHello {
        agent: AgentInfo { hostname: format!("sim{n}"), id: format!("sim{n}"), address: String::new() },
        host: HostInfo::default(),
        data_port: 5210,
        http_port: None,
        https_port: None,
        addresses: vec!["127.0.0.1".parse().unwrap()],
        group: "sim".into(),
        allow: Vec::new(),
        version: "sim".into(),
    };
    nonblocking::write_frame(&mut s, &AgentMsg::Hello(Box::new(hello))).await.map_err(|e| e.to_string())?;
    let order = loop {
        let now = now_ns;
        match nonblocking::read_frame::<_, CoordMsg>(&mut s).await.map_err(|e| e.to_string())? {
            Some(CoordMsg::ClockProbe { t1 }) => {
                let t = now();
                nonblocking::write_frame(&mut s, &AgentMsg::ClockReply { t1, t2: t, t3: t })
                    .await
                    .map_err(|e| e.to_string())?;
            }
            Some(CoordMsg::Order(o)) => break *o,
            Some(_) | None => return Ok(()),
        }
    };
    let id = order.id;
    nonblocking::write_frame(&mut s, &AgentMsg::Accepted { id }).await.map_err(|e| e.to_string())?;
    let interval = order.profile.run.interval();
    let bound = order.profile.time_bound();
    let start_ns = order.start_at_unix_ns;
    let wait = Duration::from_nanos(start_ns.saturating_sub(now_ns()));
    tokio::time::sleep(wait).await;
    let started = AgentMsg::Started { id, start_unix_ns: start_ns, actual_start_unix_ns: now_ns() };
    nonblocking::write_frame(&mut s, &started).await.map_err(|e| e.to_string())?;
    let t0 = tokio::time::Instant::now();
    let ticks = (bound.as_secs_f64() / interval.as_secs_f64()).round() as u32;
    for k in 0..ticks {
        tokio::time::sleep_until(t0 + interval * (k + 1)).await;
        let mut iv = template.interval.clone();
        iv.index = k;
        iv.start_s = k as f64 * interval.as_secs_f64();
        iv.end_s = iv.start_s + interval.as_secs_f64();
        let frame = wire::encode_frame(&AgentMsg::Interval { id, interval: Box::new(iv) });
        tokio::io::AsyncWriteExt::write_all(&mut s, &frame).await.map_err(|e| e.to_string())?;
        counter.frames.fetch_add(1, Relaxed);
        counter.bytes.fetch_add(frame.len() as u64, Relaxed);
    }
    let mut result = template.result.clone();
    result.test_id = format!("sim-{n}-{id}");
    result.start_unix_ns = Some(start_ns);
    result.actual_start_unix_ns = Some(start_ns);
    result.clock = Some(order.clock);
    nonblocking::write_frame(&mut s, &AgentMsg::Final { id, result: Box::new(result) })
        .await
        .map_err(|e| e.to_string())?;
    let sent = now_ns();
    let _ = counter.first_final_ns.compare_exchange(0, sent, Relaxed, Relaxed);
    counter.last_final_ns.fetch_max(sent, Relaxed);
    Ok(())
}

/// Runs `agents` simulated agents for `secs` of streaming against the real coordinator, each
/// ending with `result` (a real run's) as its final result under a test id of its own.
pub fn run(agents: usize, secs: u64, result: &RunResult) -> Result<FleetSim, String> {
    use std::sync::atomic::Ordering::Relaxed;
    netblast_engine::os::sys::ensure_fds(agents as u64 * 2 + 256)?;
    let token = Token::new("a-token-for-the-fleet-simulation").map_err(|e| e.to_string())?;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let coord_addr = listener.local_addr().map_err(|e| e.to_string())?;
    let (mut profile, origin) = netblast_spec::Profile::load("http-max").map_err(|e| e.to_string())?;
    profile.run.duration = Some(netblast_spec::units::Dur(Duration::from_secs(secs)));
    if let Some(h) = profile.workload.http_mut() {
        h.urls = vec!["http://127.0.0.1:9/".into()];
    }
    let cfg = netblast_coord::FleetConfig {
        clients: vec![netblast_coord::agents::AgentSource::Registered { group: "sim".into(), count: agents }],
        servers: Vec::new(),
        pairing: Default::default(),
        profile,
        origin,
        token: token.clone(),
        wait_agents: Duration::from_secs(120),
        lead: Duration::from_secs(2),
        log: Some(std::env::temp_dir().join(format!("nb-fleet-sim-{}.jsonl", std::process::id()))),
    };
    let log = cfg.log.clone();
    // The coordinator: its own thread and current-thread runtime, its thread id sent back.
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let coordinator = std::thread::Builder::new()
        .name("netblast-coord".into())
        .spawn(move || {
            // SAFETY: gettid has no preconditions.
            let _ = tid_tx.send(unsafe { libc::gettid() });
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            let merged = rt.block_on(async move {
                let l = tokio::net::TcpListener::from_std(listener).expect("listener");
                netblast_coord::run(cfg, Some(l), std::future::pending(), &mut |_| {}).await
            });
            // SAFETY: gettid has no preconditions.
            let cpu = thread_cpu_s(unsafe { libc::gettid() });
            (merged, now_ns(), cpu)
        })
        .map_err(|e| e.to_string())?;
    let tid = tid_rx.recv().map_err(|e| e.to_string())?;
    // The agents: a multi-thread runtime of their own.
    let sim = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let template = Arc::new(Templates { interval: interval_template(), result: result.clone() });
    let counter = Arc::new(Counters::default());
    let t_setup = Instant::now();
    let mut handles = Vec::with_capacity(agents);
    for n in 0..agents {
        handles.push(sim.spawn(agent(coord_addr, token.clone(), n, template.clone(), counter.clone())));
    }
    // Registration, clocks and orders first: the first interval frame marks the start.
    let deadline = Instant::now() + Duration::from_secs(180);
    while counter.frames.load(Relaxed) == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let setup_s = t_setup.elapsed().as_secs_f64();
    // The window: every agent streaming, from 2 s after the first frame to 2 s before the end.
    std::thread::sleep(Duration::from_secs(2));
    let window = Duration::from_secs(secs.saturating_sub(5).max(3));
    let sample = || (thread_cpu_s(tid), rss_bytes(), counter.frames.load(Relaxed), counter.bytes.load(Relaxed));
    let (cpu0, rss0, f0, b0) = sample();
    let t = Instant::now();
    std::thread::sleep(window);
    let window_s = t.elapsed().as_secs_f64();
    let (cpu1, rss1, f1, b1) = sample();
    // The finals: the coordinator thread's CPU from the first final result sent (read while it
    // lives) to the merged result (read by itself at the end).
    let mut cpu_at_first = cpu1;
    while counter.first_final_ns.load(Relaxed) == 0 && Instant::now() < deadline + Duration::from_secs(secs) {
        cpu_at_first = thread_cpu_s(tid);
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut failed = Vec::new();
    for h in handles {
        match sim.block_on(h) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failed.push(e),
            Err(e) => failed.push(e.to_string()),
        }
    }
    let (merged, done_ns, cpu_end) = coordinator.join().map_err(|_| "the coordinator panicked".to_string())?;
    let merged = merged.map_err(|e| format!("the coordinator: {e}"))?;
    if let Some(l) = log {
        let _ = std::fs::remove_file(l);
    }
    if let Some(e) = failed.first() {
        return Err(format!("{} of {agents} simulated agents failed, e.g. {e}", failed.len()));
    }
    if merged.parts.len() != agents {
        let why: Vec<&str> = merged.errors.iter().take(3).map(|e| e.message.as_str()).collect();
        return Err(format!(
            "the fleet's result holds {} of {agents} agents' results: {}",
            merged.parts.len(),
            why.join("; ")
        ));
    }
    let last_final_ns = counter.last_final_ns.load(Relaxed);
    Ok(FleetSim {
        agents,
        frames: f1 - f0,
        frame_bytes: b1 - b0,
        window_s,
        coordinator_cpus: (cpu1 - cpu0) / window_s,
        rss_growth: rss1 - rss0,
        setup_s,
        fold_s: done_ns.saturating_sub(last_final_ns) as f64 / 1e9,
        fold_cpu_s: cpu_end - cpu_at_first,
    })
}
