//! Why a TCP flow was as fast as it was, from its sender's kernel clocks ([`TcpLimits`]): the
//! share of the time the receiver's window, the sender's own buffer, the congestion window or
//! path, or the application (nothing to send) held it, and a verdict in words with the numbers
//! behind it and the fix where there is one.
//!
//! The window in flight is the measured rate × the measured RTT (the bandwidth-delay product
//! the path held); a buffer below it for the rate wanted is the limit to raise.

use crate::profile::Way;
use crate::result::{HostInfo, LimitShares, Part, RunResult, Summary, TcpLimits, WaySummary};
use crate::units::{fmt_bits_per_s, fmt_bytes, fmt_ns};

/// What held a way's senders most of the time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// The receiver's advertised window.
    ReceiverWindow,
    /// The sender's send buffer.
    SendBuffer,
    /// The congestion window or the path: busy, sending as fast as they allow.
    Congestion,
    /// Nothing to send: the application, its CPU, or a rate it holds.
    Application,
    /// The rate the user asked (`-b`, the kernel's pacing), held: the clocks read "busy" or
    /// "nothing to send" by how the pacing falls, and neither is the cause.
    AskedRate,
    /// A CPU of the sending host saturated ([`CPU_BOUND`]) while its clocks read busy sending:
    /// a sender that cannot go faster shows the same clocks as a congested path.
    SenderCpu,
}

impl Limit {
    /// Its name in words.
    pub fn name(self) -> &'static str {
        match self {
            Limit::ReceiverWindow => "receiver window",
            Limit::SendBuffer => "send buffer",
            Limit::Congestion => "congestion window or path",
            Limit::Application => "application (nothing to send)",
            Limit::AskedRate => "the rate asked (-b)",
            Limit::SenderCpu => "the sender's CPU",
        }
    }
}

/// One way's diagnosis.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnosis {
    /// The way.
    pub way: Way,
    /// The shares of the senders' time.
    pub shares: LimitShares,
    /// What held them: the largest share, or the receiver's window where the congestion
    /// window only tracked it.
    pub limit: Limit,
    /// The share of the time `limit` held them.
    pub share: f64,
    /// The verdict: the limit, the numbers behind it, the fix.
    pub verdict: String,
}

/// The diagnosis of each way of a bulk run whose senders' kernels reported their limit clocks
/// (other kinds wait on their peer by design: nothing to send is what they do).
///
/// A merged or fleet result of several tests is diagnosed from its tests' own diagnoses (the
/// merged totals' clocks and hosts are no one test's): [`of_tests`].
pub fn tcp(r: &RunResult) -> Vec<Diagnosis> {
    if r.parts.len() > 1 {
        return of_tests(r);
    }
    of(&View { profile: &r.plan.profile, client: Some(&r.client), server: r.server.as_ref(), summary: &r.summary })
}

/// Each way of a result of several tests: the cause most of its tests share leads (a tie goes
/// to the first test's), its verdict counts the tests that share it and names the others' causes
/// with their counts, then gives the first such test's own verdict, so the whole never says
/// what its tests' verdicts contradict. The shares are the merged clocks'; the share is the
/// mean of the leading tests'.
pub fn of_tests(r: &RunResult) -> Vec<Diagnosis> {
    let per: Vec<Diagnosis> = r.parts.iter().flat_map(|p| part(r, p)).collect();
    let mut out = Vec::new();
    for way in [Way::Up, Way::Down] {
        let ds: Vec<&Diagnosis> = per.iter().filter(|d| d.way == way).collect();
        let Some(first) = ds.first() else { continue };
        let mut counts: Vec<(Limit, usize)> = Vec::new();
        for d in &ds {
            match counts.iter_mut().find(|(l, _)| *l == d.limit) {
                Some((_, c)) => *c += 1,
                None => counts.push((d.limit, 1)),
            }
        }
        // Stable: among equal counts the cause seen first (the first test's) stays first.
        counts.sort_by_key(|c| std::cmp::Reverse(c.1));
        let (limit, k) = counts[0];
        let lead: Vec<&&Diagnosis> = ds.iter().filter(|d| d.limit == limit).collect();
        let share = lead.iter().map(|d| d.share).sum::<f64>() / lead.len() as f64;
        let shares =
            r.summary.ways.iter().find(|w| w.way == way).and_then(|w| w.limits?.shares()).unwrap_or(first.shares);
        let others = match &counts[1..] {
            [] => String::new(),
            rest => format!(
                " (the others: {})",
                rest.iter().map(|(l, c)| format!("{} in {c}", l.name())).collect::<Vec<_>>().join(", ")
            ),
        };
        let verdict =
            format!("{} in {k} of {} tests{others}; the first of them: {}", limit.name(), ds.len(), lead[0].verdict);
        out.push(Diagnosis { way, shares, limit, share, verdict });
    }
    out
}

/// The diagnosis of each way of one part of a merged or fleet bulk result (one agent's test):
/// its own totals, limit clocks, hosts' settings and load.
pub fn part(r: &RunResult, p: &Part) -> Vec<Diagnosis> {
    let profile = p.profile.as_ref().unwrap_or(&r.plan.profile);
    of(&View { profile, client: p.client.as_ref(), server: p.server.as_ref(), summary: &p.summary })
}

fn of(v: &View) -> Vec<Diagnosis> {
    if !v.profile.workload.section().tcp_sets_the_rate() {
        return Vec::new();
    }
    v.summary.ways.iter().filter_map(|w| way(v, w, w.limits?)).collect()
}

/// What a diagnosis reads: the profile run, the two hosts' settings, the totals.
struct View<'a> {
    profile: &'a crate::profile::Profile,
    client: Option<&'a HostInfo>,
    server: Option<&'a HostInfo>,
    summary: &'a Summary,
}

fn way(r: &View, w: &WaySummary, limits: TcpLimits) -> Option<Diagnosis> {
    let shares = limits.shares()?;
    let ranked = [
        (Limit::ReceiverWindow, shares.rwnd),
        (Limit::SendBuffer, shares.sndbuf),
        (Limit::Congestion, shares.cwnd),
        (Limit::Application, shares.app),
    ];
    let (mut limit, mut share) =
        ranked.into_iter().fold((Limit::Application, -1.0), |a, b| if b.1 > a.1 { b } else { a });
    let tcp = &r.profile.tcp;
    let (sender, receiver) = match w.way {
        Way::Up => (r.client, r.server),
        Way::Down => (r.server, r.client),
    };
    // A send buffer fixed below what autotuning reaches, and the sender often with nothing
    // queued: the buffer, which the kernel's own clock times only until the ACKs free space.
    let starved = small_sndbuf(tcp.sndbuf(), sender).filter(|_| shares.app >= STARVED && shares.rwnd < shares.app);
    if starved.is_some() {
        (limit, share) = (Limit::SendBuffer, shares.app);
    }
    let rate = w.receiver.unwrap_or(w.sender).bits_per_s;
    let wanted = r.profile.workload.section().asked_bits_per_s(w.way);
    let per_flow = rate / f64::from(w.streams.max(1));
    let busy_cpu = sender_busy_cpu(r.summary, w.way);
    let (cpu_clock, decided) = asked_or_cpu(limit, &shares, wanted, per_flow, busy_cpu.is_some());
    if let Some(d) = decided {
        (limit, share) = d;
    }
    let rtt_ns = w.rtt.map(|t| t.mean_us * 1e3).filter(|v| *v > 0.0);
    let window = rtt_ns.map(|t| rate / 8.0 * t / 1e9);
    // A congestion window grown to the receiver's window: with nothing lost, the window in
    // flight filling what the receiver advertised, and the kernel's receiver-window clock
    // running a good part of the time, the congestion window only tracks the receiver's (the
    // kernel tests it first, and does not grow it past what is in flight).
    // Retransmissions the receiver reported getting twice (DSACK) were not losses.
    let lost_rate = w.retransmit_rate.map(|x| match (w.retransmits, w.spurious_retransmits) {
        (Some(n), Some(sp)) if n > 0 => x * n.saturating_sub(sp) as f64 / n as f64,
        _ => x,
    });
    let tracks = limit == Limit::Congestion
        && shares.rwnd >= TRACKS
        && lost_rate.is_none_or(|x| x < 0.001)
        && limits.peer_window > 0
        && window.is_some_and(|win| win >= 0.7 * limits.peer_window as f64);
    if tracks {
        (limit, share) = (Limit::ReceiverWindow, shares.rwnd + shares.cwnd);
    }
    let pct = |x: f64| format!("{:.0}%", x * 100.0);
    let flight = match (rtt_ns, window) {
        (Some(t), Some(win)) => format!(
            ": at the measured RTT of {}, {} is {} in flight",
            fmt_ns(t),
            fmt_bits_per_s(rate),
            fmt_bytes(win as u64)
        ),
        _ => String::new(),
    };
    let needs = match (wanted, rtt_ns) {
        (Some(b), Some(t)) => {
            format!("; {} needs {} at this RTT", fmt_bits_per_s(b), fmt_bytes((b / 8.0 * t / 1e9) as u64))
        }
        _ => String::new(),
    };
    let verdict = match limit {
        Limit::ReceiverWindow => format!(
            "receiver window limited {} of the time{}{flight}{needs}; {}",
            pct(share),
            if tracks {
                format!(
                    " ({} at the receiver's window of {} by the kernel's clock, {} at a congestion window grown to it)",
                    pct(shares.rwnd),
                    fmt_bytes(limits.peer_window),
                    pct(shares.cwnd)
                )
            } else {
                String::new()
            },
            buffer_fix(tcp.rcvbuf(), receiver, "receive", |c| (c.rmem_max, c.tcp_rmem_max), ("rmem_max", "tcp_rmem"))
        ),
        Limit::SendBuffer if starved.is_some() => {
            let (fixed, auto) = starved.unwrap_or_default();
            format!(
                "send buffer limited: nothing was queued {} of the time with the send buffer fixed at {} (-w or \
                 --sndbuf; autotuning reaches {} here){flight}; the sender waits for the returning ACKs to free \
                 space (the kernel's own send-buffer clock, {}, stops when they do): raise it",
                pct(share),
                fmt_bytes(fixed),
                fmt_bytes(auto),
                pct(shares.sndbuf)
            )
        }
        Limit::SendBuffer => format!(
            "send buffer limited {} of the time{flight}{needs}; {}",
            pct(share),
            buffer_fix(tcp.sndbuf(), sender, "send", |c| (c.wmem_max, c.tcp_wmem_max), ("wmem_max", "tcp_wmem"))
        ),
        Limit::Congestion => {
            format!("congestion limited {} of the time{flight}, {}", pct(share), queue_or_loss(w, rate, lost_rate))
        }
        Limit::AskedRate => format!(
            "held at the rate asked: -b {} per flow, {} measured per flow (the kernel's pacing sets the pace; \
             the clocks read busy sending {} and nothing to send {} of the time, as pacing falls)",
            fmt_bits_per_s(wanted.unwrap_or_default()),
            fmt_bits_per_s(per_flow),
            pct(shares.cwnd),
            pct(shares.app)
        ),
        Limit::SenderCpu => format!(
            "CPU limited: the sender's {}{flight}; its kernel clocks read {cpu_clock} {} of the time ({}), \
             which a sender that cannot go faster shows too",
            busy_cpu.clone().unwrap_or_default(),
            pct(share),
            if cpu_clock == "busy sending" {
                "congestion window or path"
            } else {
                "its application did not get the CPU to write more"
            }
        ),
        Limit::Application => {
            let side = if w.way == Way::Up { r.summary.load.client.as_ref() } else { r.summary.load.server.as_ref() };
            let why = match (wanted, side.and_then(|l| side_cpu(l, &sender_cpus(r.summary, w.way)))) {
                (Some(b), _) => format!("held at -b {}", fmt_bits_per_s(b)),
                (None, Some(c)) => format!("the sender's {c}"),
                (None, None) if side.is_some() => "the generator: no CPU of the sending host was saturated".into(),
                (None, None) => "the generator (the sending host's CPU load was not measured)".into(),
            };
            format!("application limited: nothing to send {} of the time ({why})", pct(share))
        }
    };
    Some(Diagnosis { way: w.way, shares, limit, share, verdict })
}

/// How far the flows' typical RTT may rise over their least before the rise is a queue: half
/// the least, and at least [`QUEUE_MIN_NS`]. Half, not less: under loss the kernel's least RTT
/// can read a few ms under the path's (16.1 ms seen on a 20.6 ms path with 3% of segments
/// dropped), and a rise read from it is then no queue.
pub const QUEUE_RISE: f64 = 0.5;
/// The least rise of the RTT called a queue, ns.
pub const QUEUE_MIN_NS: f64 = 1e6;
/// A share of segments lost (retransmitted and not duplicates) worth naming.
const LOSS_NAMED: f64 = 0.001;

/// A way's least RTT and its typical one (ns) with the typical's name: the median of the
/// kernel's RTT samples where the eBPF program kept them (`p50`), else the mean of the smoothed
/// RTT read each interval (`mean`). `None` without both.
pub fn rtt_rise(w: &WaySummary) -> Option<(f64, f64, &'static str)> {
    let least = w.rtt.map(|t| f64::from(t.min_us) * 1e3).filter(|v| *v > 0.0)?;
    match (&w.kernel_rtt, w.rtt) {
        (Some(k), _) if k.count > 0 => Some((least, k.p50_ns as f64, "p50")),
        (_, Some(t)) if t.mean_us > 0.0 => Some((least, t.mean_us * 1e3, "mean")),
        _ => None,
    }
}

/// Whether a typical RTT this far above the least is a queue ([`QUEUE_RISE`], [`QUEUE_MIN_NS`]).
pub fn is_queue(least: f64, typical: f64) -> bool {
    typical - least >= (QUEUE_RISE * least).max(QUEUE_MIN_NS)
}

/// A congestion-limited way's path in words, from its kernel RTT and losses: a queue (the
/// typical RTT well above the least, while the rate held), loss without a queue (segments
/// lost and the RTT under half again its least: random loss, a policer), or neither.
fn queue_or_loss(w: &WaySummary, rate: f64, lost_rate: Option<f64>) -> String {
    let (least, typical, what) = match rtt_rise(w) {
        Some((lo, ty, what)) => (Some(lo), Some(ty), what),
        None => (None, None, ""),
    };
    let lost = lost_rate.filter(|x| *x >= LOSS_NAMED);
    match (least, typical) {
        (Some(lo), Some(ty)) if is_queue(lo, ty) => {
            let dropped = match lost {
                Some(x) => format!("; {:.2}% of segments lost where it overflowed", x * 100.0),
                None => String::new(),
            };
            format!(
                "a queue: RTT rose from {} (least) to {} ({what}) while the rate held at {}{dropped}",
                fmt_ns(lo),
                fmt_ns(ty),
                fmt_bits_per_s(rate)
            )
        }
        (Some(lo), Some(ty)) if lost.is_some() => format!(
            "loss without a queue: {:.2}% of segments lost, RTT under half again its least ({} least, {} {what}): random loss or a \
             policer, not a full queue",
            lost.unwrap_or_default() * 100.0,
            fmt_ns(lo),
            fmt_ns(ty)
        ),
        _ => match lost_rate {
            Some(x) if x >= LOSS_NAMED => {
                format!("with {:.2}% of segments retransmitted and not duplicates: the path drops or queues", x * 100.0)
            }
            Some(_) => "with next to nothing retransmitted: the congestion window or the path's rate holds it".into(),
            None => "(retransmits not counted)".into(),
        },
    }
}

/// The sending side's CPU at [`CPU_BOUND`] or more, in words: the busiest of those its
/// streams were pinned to (another process's busy CPU is not the sender's limit), or, where
/// they were not pinned, the host's busiest, said so.
fn sender_busy_cpu(s: &Summary, way: Way) -> Option<String> {
    let load = if way == Way::Up { s.load.client.as_ref() } else { s.load.server.as_ref() }?;
    let mine = sender_cpus(s, way);
    let c = load
        .cpus
        .iter()
        .filter(|c| c.busy() >= CPU_BOUND && (mine.is_empty() || mine.contains(&c.cpu)))
        .max_by(|a, b| a.busy().total_cmp(&b.busy()))?;
    Some(if mine.is_empty() {
        format!("{} (not pinned: a CPU of its host)", cpu_words(c))
    } else {
        format!("{}{}", cpu_words(c), who_ran(load, c))
    })
}

/// What the clocks cannot tell apart, decided by what the run asked and saw: a rate asked and
/// held (the flows' mean within 5% of it, above or below) is the cause whatever the clocks
/// read; a sending host with a CPU at 95% or more, where the clocks read busy sending or (with
/// no rate asked) nothing to send, is CPU bound. Returns which clock a CPU-bound sender's time
/// shows (busy sending: a sender that cannot go faster looks congested; nothing to send: its
/// application did not get the CPU to write more), and the cause and share decided, if any.
fn asked_or_cpu(
    limit: Limit,
    shares: &LimitShares,
    wanted: Option<f64>,
    per_flow: f64,
    cpu_busy: bool,
) -> (&'static str, Option<(Limit, f64)>) {
    if wanted.is_some_and(|b| (per_flow - b).abs() <= 0.05 * b) {
        ("busy sending", Some((Limit::AskedRate, 1.0)))
    } else if limit == Limit::Congestion && cpu_busy {
        ("busy sending", Some((Limit::SenderCpu, shares.cwnd)))
    } else if limit == Limit::Application && cpu_busy && wanted.is_none() {
        ("nothing to send", Some((Limit::SenderCpu, shares.app)))
    } else {
        ("busy sending", None)
    }
}

/// The least share of the receiver-window clock for a congestion window that fills the
/// receiver's window to be taken as tracking it.
const TRACKS: f64 = 0.2;

/// A CPU busy this share of the time or more is saturated.
pub const SATURATED: f64 = 0.9;

/// A sending host's CPU busy this share of the time or more makes a flow whose clocks read
/// "busy sending" CPU bound, not congestion limited.
pub const CPU_BOUND: f64 = 0.95;

/// A host's saturated CPUs, busiest first.
pub fn saturated(load: &crate::result::HostLoad) -> Vec<&crate::result::CpuLoad> {
    let mut v: Vec<_> = load.cpus.iter().filter(|c| c.busy() >= SATURATED).collect();
    v.sort_by(|a, b| b.busy().total_cmp(&a.busy()));
    v
}

/// A CPU in words: `CPU 1 at 99% busy, 61% of it in softirq`.
pub fn cpu_words(c: &crate::result::CpuLoad) -> String {
    let (state, share) = c.mostly();
    format!("CPU {} at {:.0}% busy, {:.0}% in {state}", c.cpu, c.busy() * 100.0, share * 100.0)
}

/// The busiest saturated CPU of a side's host that the side's threads of this test ran on, in
/// words with who ran there: `cpus` are the CPUs they were pinned to (the client's worker
/// threads, the server's streams); empty when they were not pinned, and then any saturated CPU
/// of the host is named as such, never as theirs. `None` when none was saturated.
pub fn side_cpu(load: &crate::result::HostLoad, cpus: &[u32]) -> Option<String> {
    if cpus.is_empty() {
        let c = saturated(load).into_iter().next()?;
        return Some(format!(
            "{} (its threads were not pinned: a CPU of its host, not known to be theirs)",
            cpu_words(c)
        ));
    }
    let c = saturated(load).into_iter().find(|c| cpus.contains(&c.cpu))?;
    Some(format!("{}{}", cpu_words(c), who_ran(load, c)))
}

/// Who of netblast's worker threads ran on `c`, and whether another process took most of it:
/// ` (netblast's worker 1 ran 12% of it; another process took the rest)`; empty when no thread
/// record names it.
pub fn who_ran(load: &crate::result::HostLoad, c: &crate::result::CpuLoad) -> String {
    let on: Vec<&crate::result::ThreadCpu> = load.threads.iter().filter(|t| t.cpu == Some(c.cpu)).collect();
    if on.is_empty() {
        return String::new();
    }
    let took: f64 = on.iter().map(|t| t.busy()).sum();
    let rest = if took < 0.5 * c.busy() { "; another process took the rest" } else { "" };
    if on.len() > WHO_RAN_NAMED {
        // 64 flows put 32 workers on each CPU: their sum, and the busiest, not 32 names.
        let top = on.iter().max_by(|a, b| a.busy().total_cmp(&b.busy())).expect("not empty");
        return format!(
            " (netblast's {} threads {:.0}% of it in all, the busiest {} {:.0}%{rest})",
            on.len(),
            took * 100.0,
            top.name,
            top.busy() * 100.0
        );
    }
    let names: Vec<String> = on.iter().map(|t| format!("{} {:.0}%", t.name, t.busy() * 100.0)).collect();
    format!(" (netblast's {} of it{rest})", names.join(", "))
}

/// At most this many threads on one CPU are named one by one in [`who_ran`]; more are summed.
const WHO_RAN_NAMED: usize = 3;

/// The client's worker thread that ran 90% of its time or more (the busiest), in words:
/// `the client's worker 0 on CPU 0 ran 97% of the time`; `None` when none did, or when the
/// result has no thread records.
pub fn saturated_worker(r: &RunResult) -> Option<String> {
    let l = r.summary.load.client.as_ref()?;
    let t = l.threads.iter().filter(|t| t.busy() >= SATURATED).max_by(|a, b| a.busy().total_cmp(&b.busy()))?;
    let on = t.cpu.map(|c| format!(" on CPU {c}")).unwrap_or_default();
    Some(format!("the client's {}{on} ran {:.0}% of the time", t.name, t.busy() * 100.0))
}

/// The CPUs the client's threads of `r` were pinned to: its worker threads' (as recorded), else
/// its streams' workers', else the plan's.
pub fn client_cpus(r: &RunResult) -> Vec<u32> {
    let mut v: Vec<u32> = match r.summary.load.client.as_ref().filter(|l| !l.threads.is_empty()) {
        Some(l) => l.threads.iter().filter_map(|t| t.cpu).collect(),
        None if !r.streams.is_empty() => r.streams.iter().map(|s| s.client_cpu as u32).collect(),
        None => r.plan.client_cpus.iter().map(|&c| c as u32).collect(),
    };
    v.sort_unstable();
    v.dedup();
    v
}

/// The saturated CPU of `way`'s sending side (the client for `Up`, the server for `Down`)
/// that its threads of `r` ran on, in words ([`side_cpu`]).
pub fn sender_cpu(r: &RunResult, way: Way) -> Option<String> {
    match way {
        Way::Up => side_cpu(r.summary.load.client.as_ref()?, &client_cpus(r)),
        Way::Down => side_cpu(r.summary.load.server.as_ref()?, &server_cpus(r)),
    }
}

/// The CPUs the server pinned `r`'s streams to (any way); empty when it did not pin them.
pub fn server_cpus(r: &RunResult) -> Vec<u32> {
    let mut v: Vec<u32> = r.summary.streams.iter().filter_map(|x| x.server_cpu).map(|c| c as u32).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The CPUs the sending end of `way`'s streams was pinned to, from their totals (client
/// workers for `Up`, the server's for `Down`); empty when not pinned or not known.
fn sender_cpus(s: &Summary, way: Way) -> Vec<u32> {
    let mut v: Vec<u32> = s
        .streams
        .iter()
        .filter(|x| x.way == way)
        .filter_map(|x| if way == Way::Up { x.client_cpu } else { x.server_cpu })
        .map(|c| c as u32)
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The share of time with nothing queued past which a small fixed send buffer is the limit.
const STARVED: f64 = 0.2;

/// A send buffer fixed below what autotuning reaches on the sending host: (fixed, autotuning's max).
fn small_sndbuf(fixed: Option<u64>, sender: Option<&HostInfo>) -> Option<(u64, u64)> {
    let auto = sender?.buffers?.tcp_wmem_max;
    fixed.filter(|f| *f < auto).map(|f| (f, auto))
}

/// The fix of a buffer limit: a fixed size (`-w`) and the cap it may reach, or autotuning's
/// maximum on the host, with the sysctl to raise.
fn buffer_fix(
    fixed: Option<u64>,
    host: Option<&HostInfo>,
    what: &str,
    caps: fn(&crate::result::BufferCaps) -> (u64, u64),
    names: (&str, &str),
) -> String {
    let name = host.map(|h| h.hostname.as_str()).filter(|h| !h.is_empty()).unwrap_or("the host");
    let c = host.and_then(|h| h.buffers).map(|b| caps(&b));
    match (fixed, c) {
        (Some(w), Some((core, _))) => format!(
            "the {what} buffer is fixed at {} (-w or --{}; autotuning off): raise it (net.core.{} on {name} is {}; sysctl -w net.core.{}=N to go past it)",
            fmt_bytes(w),
            if what == "send" { "sndbuf" } else { "rcvbuf" },
            names.0,
            fmt_bytes(core),
            names.0
        ),
        (Some(w), None) => format!("the {what} buffer is fixed at {} (-w; autotuning off): raise it", fmt_bytes(w)),
        (None, Some((core, auto))) => format!(
            "autotuning grows the {what} buffer up to net.ipv4.{} max = {} on {name}: raise it past the window \
             wanted (sysctl -w net.ipv4.{}='4096 131072 N'; net.core.{} = {} caps -w)",
            names.1,
            fmt_bytes(auto),
            names.1,
            names.0,
            fmt_bytes(core),
        ),
        (None, None) => format!("raise the {what} buffer (-w, or net.ipv4.{} max)", names.1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_to_the_whole_and_name_the_largest() {
        let l = TcpLimits {
            busy_us: 900_000,
            rwnd_limited_us: 800_000,
            sndbuf_limited_us: 50_000,
            wall_us: 1_000_000,
            peer_window: 0,
        };
        let s = l.shares().unwrap();
        assert!((s.rwnd + s.sndbuf + s.cwnd + s.app - 1.0).abs() < 1e-9, "{s:?}");
        assert!((s.rwnd - 0.8).abs() < 1e-9 && (s.app - 0.1).abs() < 1e-9, "{s:?}");
        // A busy clock past the span (jiffies rounding) is held to it.
        let l = TcpLimits {
            busy_us: 1_004_000,
            rwnd_limited_us: 0,
            sndbuf_limited_us: 0,
            wall_us: 1_000_000,
            peer_window: 0,
        };
        assert_eq!(l.shares().unwrap().app, 0.0);
        assert_eq!(TcpLimits::default().shares(), None);
    }

    #[test]
    fn many_threads_on_one_cpu_are_summed_not_listed() {
        use crate::result::{CpuLoad, CpuUsage, HostLoad, ThreadCpu};
        let c = CpuLoad { cpu: 1, user: 0.3, system: 0.6, irq: 0.0, softirq: 0.0, steal: 0.0, idle: 0.1 };
        let thread = |i: u32, busy: f64| ThreadCpu {
            name: format!("worker {i}"),
            cpu: Some(1),
            usage: CpuUsage { user_s: 0.0, system_s: busy, wall_s: 1.0 },
        };
        // 64 flows on 2 CPUs: 32 workers each (the busiest 4%), as a real run's verdict had them
        // one by one in 1 300 characters.
        let many = HostLoad {
            threads: (0..32).map(|i| thread(i, if i == 7 { 0.04 } else { 0.02 })).collect(),
            ..Default::default()
        };
        let said = who_ran(&many, &c);
        assert_eq!(said, " (netblast's 32 threads 66% of it in all, the busiest worker 7 4%)");
        let few = HostLoad { threads: vec![thread(0, 0.12), thread(1, 0.1)], ..Default::default() };
        assert_eq!(who_ran(&few, &c), " (netblast's worker 0 12%, worker 1 10% of it; another process took the rest)");
    }
}
