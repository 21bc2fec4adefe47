//! Why a TCP flow was as fast as it was, from its sender's kernel clocks ([`TcpLimits`]): the
//! share of the time the receiver's window, the sender's own buffer, the congestion window or
//! path, or the application (nothing to send) held it, decided with the numbers behind it
//! ([`Facts`]). The report says it in words, with the fix where there is one.
//!
//! The window in flight is the measured rate × the measured RTT (the bandwidth-delay product
//! the path held); a buffer below it for the rate wanted is the limit to raise.

use crate::profile::Way;
use crate::result::{
    CpuLoad, HostInfo, HostLoad, LimitShares, Part, RunResult, Summary, TcpLimits, ThreadCpu, WaySummary,
};

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

/// Which of the sender's clocks a CPU-bound sender's time shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// Busy sending: a sender that cannot go faster looks congested.
    BusySending,
    /// Nothing to send: its application did not get the CPU to write more.
    NothingToSend,
}

/// The numbers a way's limit was decided by.
#[derive(Debug, Clone, PartialEq)]
pub struct Facts {
    /// The way's rate, bits/s: the receiver's where measured, else the sender's.
    pub rate: f64,
    /// The rate per flow, bits/s.
    pub per_flow: f64,
    /// The rate asked per flow (`-b`), bits/s.
    pub wanted: Option<f64>,
    /// The flows' mean RTT, ns.
    pub rtt_ns: Option<f64>,
    /// The window in flight: the rate × the RTT, bytes.
    pub window: Option<f64>,
    /// The congestion window only tracked the receiver's: grown to it with nothing lost.
    pub tracks: bool,
    /// The receiver's advertised window, bytes.
    pub peer_window: u64,
    /// A send buffer fixed below what autotuning reaches, with nothing queued much of the time:
    /// (fixed, autotuning's max), bytes.
    pub starved: Option<(u64, u64)>,
    /// Which clock a CPU-bound sender's time shows.
    pub clock: Clock,
    /// The share of segments lost: retransmitted and not reported as duplicates (DSACK).
    pub lost_rate: Option<f64>,
    /// The path, for a congestion limit: a queue, loss without one, or neither.
    pub path: PathShape,
}

/// What a congestion-limited way's kernel RTT and losses say of its path.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PathShape {
    /// The typical RTT well above the least while the rate held ([`is_queue`]); `lost`: the
    /// share of segments lost where it overflowed, when worth naming.
    Queue {
        /// The least RTT, ns.
        least: f64,
        /// The typical RTT, ns.
        typical: f64,
        /// Which figure the typical one is (`p50`, `mean`).
        what: &'static str,
        /// The share of segments lost, when at least [`LOSS_NAMED`].
        lost: Option<f64>,
    },
    /// Segments lost and the RTT under half again its least: random loss, a policer.
    LossWithoutQueue {
        /// The share of segments lost.
        lost: f64,
        /// The least RTT, ns.
        least: f64,
        /// The typical RTT, ns.
        typical: f64,
        /// Which figure the typical one is.
        what: &'static str,
    },
    /// No RTT rise to read, this share of segments retransmitted and not duplicates.
    Retransmitted(f64),
    /// Next to nothing retransmitted: the congestion window or the path's rate holds it.
    Little,
    /// Retransmissions not counted.
    NotCounted,
}

/// How a result of several tests decided a way: the causes of its tests' own diagnoses.
#[derive(Debug, Clone, PartialEq)]
pub struct Tally {
    /// Each cause with the number of tests it held, the leading one first.
    pub counts: Vec<(Limit, usize)>,
    /// The tests diagnosed on this way.
    pub tests: usize,
    /// The first test (its index in the result's parts) whose cause leads.
    pub first_part: usize,
    /// That test's own diagnosis.
    pub first: Box<Diagnosis>,
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
    /// The numbers behind it (a result of several tests: the first leading test's).
    pub facts: Facts,
    /// A result of several tests: how its tests' diagnoses decided it.
    pub tally: Option<Tally>,
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
    of(&View::whole(r))
}

/// Each way of a result of several tests: the cause most of its tests share leads (a tie goes
/// to the first test's), with every cause's count and the first such test's own diagnosis, so
/// the whole never says what its tests' verdicts contradict. The shares are the merged
/// clocks'; the share is the mean of the leading tests'.
pub fn of_tests(r: &RunResult) -> Vec<Diagnosis> {
    let per: Vec<(usize, Diagnosis)> =
        r.parts.iter().enumerate().flat_map(|(i, p)| part(r, p).into_iter().map(move |d| (i, d))).collect();
    let mut out = Vec::new();
    for way in [Way::Up, Way::Down] {
        let ds: Vec<&(usize, Diagnosis)> = per.iter().filter(|(_, d)| d.way == way).collect();
        let Some((_, first)) = ds.first() else { continue };
        let mut counts: Vec<(Limit, usize)> = Vec::new();
        for (_, d) in &ds {
            match counts.iter_mut().find(|(l, _)| *l == d.limit) {
                Some((_, c)) => *c += 1,
                None => counts.push((d.limit, 1)),
            }
        }
        // Stable: among equal counts the cause seen first (the first test's) stays first.
        counts.sort_by_key(|c| std::cmp::Reverse(c.1));
        let limit = counts[0].0;
        let lead: Vec<&&(usize, Diagnosis)> = ds.iter().filter(|(_, d)| d.limit == limit).collect();
        let share = lead.iter().map(|(_, d)| d.share).sum::<f64>() / lead.len() as f64;
        let shares =
            r.summary.ways.iter().find(|w| w.way == way).and_then(|w| w.limits?.shares()).unwrap_or(first.shares);
        let (first_part, lead_d) = (lead[0].0, lead[0].1.clone());
        out.push(Diagnosis {
            way,
            shares,
            limit,
            share,
            facts: lead_d.facts.clone(),
            tally: Some(Tally { counts, tests: ds.len(), first_part, first: Box::new(lead_d) }),
        });
    }
    out
}

/// The diagnosis of each way of one part of a merged or fleet bulk result (one agent's test):
/// its own totals, limit clocks, hosts' settings and load.
pub fn part(r: &RunResult, p: &Part) -> Vec<Diagnosis> {
    of(&View::part(r, p))
}

fn of(v: &View) -> Vec<Diagnosis> {
    if !v.profile.workload.section().tcp_sets_the_rate() {
        return Vec::new();
    }
    v.summary.ways.iter().filter_map(|w| way(v, w, w.limits?)).collect()
}

/// What a diagnosis reads: the profile run, the two hosts' settings, the totals (a whole
/// result's, or one of its tests').
#[derive(Debug, Clone, Copy)]
pub struct View<'a> {
    /// The profile the test ran.
    pub profile: &'a crate::profile::Profile,
    /// The client's host.
    pub client: Option<&'a HostInfo>,
    /// The server's host.
    pub server: Option<&'a HostInfo>,
    /// The totals.
    pub summary: &'a Summary,
}

impl<'a> View<'a> {
    /// A whole result's.
    pub fn whole(r: &'a RunResult) -> View<'a> {
        View { profile: &r.plan.profile, client: Some(&r.client), server: r.server.as_ref(), summary: &r.summary }
    }

    /// One test's of a result of several (`p`, one of `r.parts`).
    pub fn part(r: &'a RunResult, p: &'a Part) -> View<'a> {
        let profile = p.profile.as_ref().unwrap_or(&r.plan.profile);
        View { profile, client: p.client.as_ref(), server: p.server.as_ref(), summary: &p.summary }
    }

    /// The sending and the receiving host of `way`.
    pub fn ends(&self, way: Way) -> (Option<&'a HostInfo>, Option<&'a HostInfo>) {
        match way {
            Way::Up => (self.client, self.server),
            Way::Down => (self.server, self.client),
        }
    }

    /// The load of `way`'s sending host.
    pub fn sender_load(&self, way: Way) -> Option<&'a HostLoad> {
        match way {
            Way::Up => self.summary.load.client.as_ref(),
            Way::Down => self.summary.load.server.as_ref(),
        }
    }
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
    let (sender, _) = r.ends(w.way);
    // A send buffer fixed below what autotuning reaches, and the sender often with nothing
    // queued: the buffer, which the kernel's own clock times only until the ACKs free space.
    let starved =
        small_sndbuf(r.profile.tcp.sndbuf(), sender).filter(|_| shares.app >= STARVED && shares.rwnd < shares.app);
    if starved.is_some() {
        (limit, share) = (Limit::SendBuffer, shares.app);
    }
    let rate = w.receiver.unwrap_or(w.sender).bits_per_s;
    let wanted = r.profile.workload.section().asked_bits_per_s(w.way);
    let per_flow = rate / f64::from(w.streams.max(1));
    let cpu_busy = sender_busy_cpu(r.summary, w.way).is_some();
    let (clock, decided) = asked_or_cpu(limit, &shares, wanted, per_flow, cpu_busy);
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
    let facts = Facts {
        rate,
        per_flow,
        wanted,
        rtt_ns,
        window,
        tracks,
        peer_window: limits.peer_window,
        starved,
        clock,
        lost_rate,
        path: path_shape(w, lost_rate),
    };
    Some(Diagnosis { way: w.way, shares, limit, share, facts, tally: None })
}

/// How far the flows' typical RTT may rise over their least before the rise is a queue: half
/// the least, and at least [`QUEUE_MIN_NS`]. Half, not less: under loss the kernel's least RTT
/// can read a few ms under the path's (16.1 ms seen on a 20.6 ms path with 3% of segments
/// dropped), and a rise read from it is then no queue.
pub const QUEUE_RISE: f64 = 0.5;
/// The least rise of the RTT called a queue, ns.
pub const QUEUE_MIN_NS: f64 = 1e6;
/// A share of segments lost (retransmitted and not duplicates) worth naming.
pub const LOSS_NAMED: f64 = 0.001;

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

/// A way's path from its kernel RTT and losses: a queue (the typical RTT well above the least,
/// while the rate held), loss without a queue (segments lost and the RTT under half again its
/// least: random loss, a policer), or neither.
fn path_shape(w: &WaySummary, lost_rate: Option<f64>) -> PathShape {
    let lost = lost_rate.filter(|x| *x >= LOSS_NAMED);
    match rtt_rise(w) {
        Some((least, typical, what)) if is_queue(least, typical) => PathShape::Queue { least, typical, what, lost },
        Some((least, typical, what)) if lost.is_some() => {
            PathShape::LossWithoutQueue { lost: lost.unwrap_or_default(), least, typical, what }
        }
        _ => match lost_rate {
            Some(x) if x >= LOSS_NAMED => PathShape::Retransmitted(x),
            Some(_) => PathShape::Little,
            None => PathShape::NotCounted,
        },
    }
}

/// The sending side's busiest CPU at [`CPU_BOUND`] or more: of those its streams were pinned
/// to (another process's busy CPU is not the sender's limit), or, where they were not pinned
/// ([`sender_cpus`] empty), of the host.
pub fn sender_busy_cpu(s: &Summary, way: Way) -> Option<&CpuLoad> {
    let load = if way == Way::Up { s.load.client.as_ref() } else { s.load.server.as_ref() }?;
    let mine = sender_cpus(s, way);
    load.cpus
        .iter()
        .filter(|c| c.busy() >= CPU_BOUND && (mine.is_empty() || mine.contains(&c.cpu)))
        .max_by(|a, b| a.busy().total_cmp(&b.busy()))
}

/// What the clocks cannot tell apart, decided by what the run asked and saw: a rate asked and
/// held (the flows' mean within 5% of it, above or below) is the cause whatever the clocks
/// read; a sending host with a CPU at 95% or more, where the clocks read busy sending or (with
/// no rate asked) nothing to send, is CPU bound. Returns which clock a CPU-bound sender's time
/// shows, and the cause and share decided, if any.
fn asked_or_cpu(
    limit: Limit,
    shares: &LimitShares,
    wanted: Option<f64>,
    per_flow: f64,
    cpu_busy: bool,
) -> (Clock, Option<(Limit, f64)>) {
    if wanted.is_some_and(|b| (per_flow - b).abs() <= 0.05 * b) {
        (Clock::BusySending, Some((Limit::AskedRate, 1.0)))
    } else if limit == Limit::Congestion && cpu_busy {
        (Clock::BusySending, Some((Limit::SenderCpu, shares.cwnd)))
    } else if limit == Limit::Application && cpu_busy && wanted.is_none() {
        (Clock::NothingToSend, Some((Limit::SenderCpu, shares.app)))
    } else {
        (Clock::BusySending, None)
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
pub fn saturated(load: &HostLoad) -> Vec<&CpuLoad> {
    let mut v: Vec<_> = load.cpus.iter().filter(|c| c.busy() >= SATURATED).collect();
    v.sort_by(|a, b| b.busy().total_cmp(&a.busy()));
    v
}

/// The busiest saturated CPU of a side's host that the side's threads of this test ran on:
/// `cpus` are the CPUs they were pinned to (the client's worker threads, the server's streams);
/// empty when they were not pinned, and then the host's busiest saturated CPU, not known to be
/// theirs. `None` when none was saturated.
pub fn side_saturated<'a>(load: &'a HostLoad, cpus: &[u32]) -> Option<&'a CpuLoad> {
    if cpus.is_empty() {
        return saturated(load).into_iter().next();
    }
    saturated(load).into_iter().find(|c| cpus.contains(&c.cpu))
}

/// The threads of netblast that ran on CPU `cpu` of a host.
pub fn ran_on(load: &HostLoad, cpu: u32) -> Vec<&ThreadCpu> {
    load.threads.iter().filter(|t| t.cpu == Some(cpu)).collect()
}

/// The client's worker thread that ran [`SATURATED`] of its time or more (the busiest);
/// `None` when none did, or when the result has no thread records.
pub fn saturated_thread(r: &RunResult) -> Option<&ThreadCpu> {
    let l = r.summary.load.client.as_ref()?;
    l.threads.iter().filter(|t| t.busy() >= SATURATED).max_by(|a, b| a.busy().total_cmp(&b.busy()))
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

/// The CPUs the server pinned `r`'s streams to (any way); empty when it did not pin them.
pub fn server_cpus(r: &RunResult) -> Vec<u32> {
    let mut v: Vec<u32> = r.summary.streams.iter().filter_map(|x| x.server_cpu).map(|c| c as u32).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The CPUs the sending end of `way`'s streams was pinned to, from their totals (client
/// workers for `Up`, the server's for `Down`); empty when not pinned or not known.
pub fn sender_cpus(s: &Summary, way: Way) -> Vec<u32> {
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
}
