//! What held each TCP way, in words: the spec's `diagnose` decides the limit from the senders'
//! kernel clocks with the numbers behind it ([`Facts`]); this says it, with the numbers and the
//! fix where there is one. A result of several tests says how many of its tests share the
//! cause, the others' causes, and the first such test's own verdict.

use crate::lines::{cpu_words, side_cpu, who_ran};
use netblast_spec::diagnose::{self, Clock, Diagnosis, Facts, Limit, PathShape, View};
use netblast_spec::profile::Way;
use netblast_spec::result::{BufferCaps, HostInfo, Part, RunResult};
use netblast_spec::units::{fmt_bits_per_s, fmt_bytes, fmt_ns};

/// A limit's name in words.
pub fn name(l: Limit) -> &'static str {
    match l {
        Limit::ReceiverWindow => "receiver window",
        Limit::SendBuffer => "send buffer",
        Limit::Congestion => "congestion window or path",
        Limit::Application => "application (nothing to send)",
        Limit::AskedRate => "the rate asked (-b)",
        Limit::SenderCpu => "the sender's CPU",
    }
}

/// A way's diagnosis with its verdict in words.
#[derive(Debug, Clone, PartialEq)]
pub struct WayVerdict {
    /// What the spec decided.
    pub diagnosis: Diagnosis,
    /// The verdict: the limit, the numbers behind it, the fix.
    pub verdict: String,
}

/// Each TCP way of a result with its verdict ([`diagnose::tcp`]).
pub fn tcp(r: &RunResult) -> Vec<WayVerdict> {
    let v = View::whole(r);
    diagnose::tcp(r).into_iter().map(|d| WayVerdict { verdict: say(r, &v, &d), diagnosis: d }).collect()
}

/// Each TCP way of one test of a result of several, with its verdict ([`diagnose::part`]).
pub fn part(r: &RunResult, p: &Part) -> Vec<WayVerdict> {
    let v = View::part(r, p);
    diagnose::part(r, p).into_iter().map(|d| WayVerdict { verdict: say(r, &v, &d), diagnosis: d }).collect()
}

/// `d`'s verdict, read against `v` (or, for a result of several tests, against its first
/// leading test's view).
fn say(r: &RunResult, v: &View, d: &Diagnosis) -> String {
    let Some(t) = &d.tally else { return one(v, d) };
    let k = t.counts[0].1;
    let others = match &t.counts[1..] {
        [] => String::new(),
        rest => format!(
            " (the others: {})",
            rest.iter().map(|(l, c)| format!("{} in {c}", name(*l))).collect::<Vec<_>>().join(", ")
        ),
    };
    let first = match r.parts.get(t.first_part) {
        Some(p) => one(&View::part(r, p), &t.first),
        None => one(v, &t.first),
    };
    format!("{} in {k} of {} tests{others}; the first of them: {first}", name(d.limit), t.tests)
}

/// One test's way in words.
fn one(r: &View, d: &Diagnosis) -> String {
    let f: &Facts = &d.facts;
    let tcp = &r.profile.tcp;
    let (sender, receiver) = r.ends(d.way);
    let shares = &d.shares;
    let pct = |x: f64| format!("{:.0}%", x * 100.0);
    let flight = match (f.rtt_ns, f.window) {
        (Some(t), Some(win)) => format!(
            ": at the measured RTT of {}, {} is {} in flight",
            fmt_ns(t),
            fmt_bits_per_s(f.rate),
            fmt_bytes(win as u64)
        ),
        _ => String::new(),
    };
    let needs = match (f.wanted, f.rtt_ns) {
        (Some(b), Some(t)) => {
            format!("; {} needs {} at this RTT", fmt_bits_per_s(b), fmt_bytes((b / 8.0 * t / 1e9) as u64))
        }
        _ => String::new(),
    };
    match d.limit {
        Limit::ReceiverWindow => format!(
            "receiver window limited {} of the time{}{flight}{needs}; {}",
            pct(d.share),
            if f.tracks {
                format!(
                    " ({} at the receiver's window of {} by the kernel's clock, {} at a congestion window grown to it)",
                    pct(shares.rwnd),
                    fmt_bytes(f.peer_window),
                    pct(shares.cwnd)
                )
            } else {
                String::new()
            },
            buffer_fix(tcp.rcvbuf(), receiver, "receive", |c| (c.rmem_max, c.tcp_rmem_max), ("rmem_max", "tcp_rmem"))
        ),
        Limit::SendBuffer if f.starved.is_some() => {
            let (fixed, auto) = f.starved.unwrap_or_default();
            format!(
                "send buffer limited: nothing was queued {} of the time with the send buffer fixed at {} (-w or \
                 --sndbuf; autotuning reaches {} here){flight}; the sender waits for the returning ACKs to free \
                 space (the kernel's own send-buffer clock, {}, stops when they do): raise it",
                pct(d.share),
                fmt_bytes(fixed),
                fmt_bytes(auto),
                pct(shares.sndbuf)
            )
        }
        Limit::SendBuffer => format!(
            "send buffer limited {} of the time{flight}{needs}; {}",
            pct(d.share),
            buffer_fix(tcp.sndbuf(), sender, "send", |c| (c.wmem_max, c.tcp_wmem_max), ("wmem_max", "tcp_wmem"))
        ),
        Limit::Congestion => {
            format!("congestion limited {} of the time{flight}, {}", pct(d.share), path(f.path, f.rate))
        }
        Limit::AskedRate => format!(
            "held at the rate asked: -b {} per flow, {} measured per flow (the kernel's pacing sets the pace; \
             the clocks read busy sending {} and nothing to send {} of the time, as pacing falls)",
            fmt_bits_per_s(f.wanted.unwrap_or_default()),
            fmt_bits_per_s(f.per_flow),
            pct(shares.cwnd),
            pct(shares.app)
        ),
        Limit::SenderCpu => format!(
            "CPU limited: the sender's {}{flight}; its kernel clocks read {} {} of the time ({}), \
             which a sender that cannot go faster shows too",
            busy_cpu(r, d.way).unwrap_or_default(),
            if f.clock == Clock::BusySending { "busy sending" } else { "nothing to send" },
            pct(d.share),
            if f.clock == Clock::BusySending {
                "congestion window or path"
            } else {
                "its application did not get the CPU to write more"
            }
        ),
        Limit::Application => {
            let side = r.sender_load(d.way);
            let why = match (f.wanted, side.and_then(|l| side_cpu(l, &diagnose::sender_cpus(r.summary, d.way)))) {
                (Some(b), _) => format!("held at -b {}", fmt_bits_per_s(b)),
                (None, Some(c)) => format!("the sender's {c}"),
                (None, None) if side.is_some() => "the generator: no CPU of the sending host was saturated".into(),
                (None, None) => "the generator (the sending host's CPU load was not measured)".into(),
            };
            format!("application limited: nothing to send {} of the time ({why})", pct(d.share))
        }
    }
}

/// The sending side's busy CPU ([`diagnose::sender_busy_cpu`]) in words, with who ran there, or
/// said not to be pinned.
fn busy_cpu(r: &View, way: Way) -> Option<String> {
    let c = diagnose::sender_busy_cpu(r.summary, way)?;
    Some(if diagnose::sender_cpus(r.summary, way).is_empty() {
        format!("{} (not pinned: a CPU of its host)", cpu_words(c))
    } else {
        format!("{}{}", cpu_words(c), r.sender_load(way).map(|l| who_ran(l, c)).unwrap_or_default())
    })
}

/// A congestion-limited way's path in words ([`PathShape`]).
fn path(p: PathShape, rate: f64) -> String {
    match p {
        PathShape::Queue { least, typical, what, lost } => {
            let dropped = match lost {
                Some(x) => format!("; {:.2}% of segments lost where it overflowed", x * 100.0),
                None => String::new(),
            };
            format!(
                "a queue: RTT rose from {} (least) to {} ({what}) while the rate held at {}{dropped}",
                fmt_ns(least),
                fmt_ns(typical),
                fmt_bits_per_s(rate)
            )
        }
        PathShape::LossWithoutQueue { lost, least, typical, what } => format!(
            "loss without a queue: {:.2}% of segments lost, RTT under half again its least ({} least, {} {what}): random loss or a \
             policer, not a full queue",
            lost * 100.0,
            fmt_ns(least),
            fmt_ns(typical)
        ),
        PathShape::Retransmitted(x) => {
            format!("with {:.2}% of segments retransmitted and not duplicates: the path drops or queues", x * 100.0)
        }
        PathShape::Little => {
            "with next to nothing retransmitted: the congestion window or the path's rate holds it".into()
        }
        PathShape::NotCounted => "(retransmits not counted)".into(),
    }
}

/// The fix of a buffer limit: a fixed size (`-w`) and the cap it may reach, or autotuning's
/// maximum on the host, with the sysctl to raise.
fn buffer_fix(
    fixed: Option<u64>,
    host: Option<&HostInfo>,
    what: &str,
    caps: fn(&BufferCaps) -> (u64, u64),
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
