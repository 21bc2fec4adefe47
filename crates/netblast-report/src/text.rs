//! The human report, rendered from the result (never from live engine state): interval lines
//! that read like iperf3's, then a sender/receiver summary, TCP and CPU lines, and errors.

use crate::figures::{fmt_part_figure, part_figure};
use crate::lines::{count, id_col, retransmissions};
use netblast_spec::profile::{Profile, Way};
use netblast_spec::result::{Interval, RunResult, StreamInfo, Summary};
use netblast_spec::units::{fmt_bits_per_s, fmt_bytes, fmt_ns, fmt_per_s};
use std::fmt::Write;

pub use crate::lines::MAX_STREAM_LINES;

/// The lines printed once the test started: what runs where.
pub fn started(test_id: &str, peer: &str, kind: &str, streams: &[StreamInfo], server: &str) -> String {
    let mut s = String::new();
    // A merged result's name says what it is ("merge of 3 tests, ..."); an id is a test's.
    let test = if test_id.contains(' ') { test_id.to_string() } else { format!("test {test_id}") };
    if server.is_empty() {
        let _ = writeln!(s, "netblast {kind} {test} to {peer}");
    } else {
        let _ = writeln!(s, "netblast {kind} {test} to {peer} (server {server})");
    }
    for st in streams.iter().take(MAX_STREAM_LINES) {
        let server_cpu = st.server_cpu.map(|c| format!(", server CPU {c}")).unwrap_or_default();
        if st.local.is_empty() {
            // A flow of its own connections (cps with no agent): no one connection to name.
            let _ = writeln!(s, "[{}] dials {} (client CPU {})", id_col(st.id), st.remote, st.client_cpu);
            continue;
        }
        let _ = writeln!(
            s,
            "[{}] {} local {} connected to {} (client CPU {}{server_cpu})",
            id_col(st.id),
            match st.way {
                Way::Up => "send",
                Way::Down => "recv",
            },
            st.local,
            st.remote,
            st.client_cpu
        );
    }
    if streams.len() > MAX_STREAM_LINES {
        let _ = writeln!(s, "... and {} more streams", streams.len() - MAX_STREAM_LINES);
    }
    s
}

/// The marks and the binding of the test's sockets in words (`packets marked DSCP EF (46) both
/// ways, from 10.0.0.2, 10.0.0.3, source ports 40000-40063`), if it has any.
pub fn knobs(plan: &netblast_spec::result::Plan) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(d) = plan.profile.tcp.dscp {
        parts.push(format!("packets marked DSCP {d} both ways"));
    }
    if !plan.bind.is_empty() {
        parts.push(plan.bind.describe());
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// Each stream's socket as its kernel held it once connected (`run -V`), one line each (the
/// first few), or nothing where none was read.
pub fn sockets(streams: &[StreamInfo]) -> String {
    let mut s = String::new();
    for st in streams.iter().take(MAX_STREAM_LINES) {
        if let Some(k) = &st.socket {
            let _ = writeln!(s, "[{}] socket: {}", id_col(st.id), k.describe());
        }
    }
    s
}

/// The column header of interval lines: the kind's.
pub fn interval_header(profile: &Profile) -> String {
    crate::kinds::for_kind(profile.kind()).interval_header(profile)
}

/// One interval as text: per-stream lines (when few), then one line per way.
/// A short tail prints nothing: the result folds it into the interval before (a live view
/// cannot, and leaves it to the summary).
pub fn interval(iv: &Interval, streams: &[StreamInfo], profile: &Profile) -> String {
    if iv.is_short_tail(profile.run.interval().as_secs_f64()) {
        return String::new();
    }
    let lines = crate::kinds::for_kind(profile.kind()).interval(iv, streams, profile);
    if netblast_spec::omit::is_omitted(iv, profile.run.omit().as_secs_f64()) {
        // Shown as iperf3 -O shows them, and left out of the totals.
        return lines.replace('\n', "  (omitted)\n");
    }
    lines
}

/// The least CPU time a figure per CPU-second is computed over (five 10 ms clock ticks).
const MIN_CPU_S: f64 = 0.05;

/// The headline figures of a summary on one line: rate per way (and latency or messages for
/// the kinds that have them), or requests for http.
pub fn headline(sum: &Summary) -> String {
    if let Some(h) = &sum.http {
        return format!(
            "{} responses, {}, p50 {} p99 {}",
            h.completed,
            fmt_per_s(h.responses_per_s),
            fmt_ns(h.latency.p50_ns as f64),
            fmt_ns(h.latency.p99_ns as f64)
        );
    }
    let parts: Vec<String> = sum
        .ways
        .iter()
        .map(|w| {
            let way = w.way.name();
            let rate = w.receiver.map(|r| r.bits_per_s).unwrap_or(w.sender.bits_per_s);
            let mut t = format!("{way} {}", fmt_bits_per_s(rate));
            if let Some(m) = &w.msgs {
                let _ = write!(t, " {}", fmt_per_s(m.sent_per_s));
            }
            if let Some(l) = &w.latency {
                let _ = write!(t, " p50 {} p99 {}", fmt_ns(l.p50_ns as f64), fmt_ns(l.p99_ns as f64));
            }
            t
        })
        .collect();
    parts.join(", ")
}

/// Most tests a merged or fleet result lists one by one; more are summarised as a
/// distribution with the slowest and fastest few named.
const MAX_PART_LINES: usize = 12;
/// Tests named at the slow end of a large fleet.
const SLOWEST: usize = 5;
/// Tests named at the fast end of a large fleet.
const FASTEST: usize = 3;
/// Agents named per failure reason; the rest are counted.
const MAX_AGENTS_NAMED: usize = 8;

/// One test of a merged result on one line.
fn part_line(i: usize, p: &netblast_spec::result::Part) -> String {
    let streams = match p.streams {
        0 => String::new(),
        n => format!("  streams {}..{}", p.first_stream, p.first_stream + n - 1),
    };
    format!(
        "  [{i:>3}] {} {} -> {}{streams}  from interval {}{}  {}{}\n",
        if p.agent.hostname.is_empty() { "?" } else { p.agent.hostname.as_str() },
        p.agent.address,
        p.peer,
        p.interval_offset,
        if p.complete { "" } else { "  INCOMPLETE" },
        headline(&p.summary),
        p.latency_probe.as_deref().map(crate::probe::part_words).unwrap_or_default()
    )
}

/// The tests of a large fleet: their figure's spread, the slowest and the fastest few.
fn parts_spread(s: &mut String, r: &RunResult) {
    let kind = r.plan.profile.kind();
    let mut ranked: Vec<(f64, usize)> =
        r.parts.iter().enumerate().map(|(i, p)| (part_figure(kind, &p.summary), i)).collect();
    ranked.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let at = |q: f64| ranked[((ranked.len() - 1) as f64 * q).round() as usize].0;
    let _ = writeln!(
        s,
        "  Per test: min {}  p10 {}  median {}  p90 {}  max {}",
        fmt_part_figure(kind, at(0.0)),
        fmt_part_figure(kind, at(0.1)),
        fmt_part_figure(kind, at(0.5)),
        fmt_part_figure(kind, at(0.9)),
        fmt_part_figure(kind, at(1.0))
    );
    let _ = writeln!(s, "  Slowest {SLOWEST}:");
    for &(_, i) in ranked.iter().take(SLOWEST) {
        let line = part_line(i, &r.parts[i]);
        let limits = part_limits(r, &r.parts[i]);
        match limits.is_empty() {
            true => s.push_str(&line),
            false => {
                let _ = writeln!(s, "{}  ({limits})", line.trim_end());
            }
        }
    }
    let _ = writeln!(s, "  Fastest {FASTEST}:");
    for &(_, i) in ranked.iter().rev().take(FASTEST) {
        s.push_str(&part_line(i, &r.parts[i]));
    }
    limits_spread(s, r);
    let incomplete = r.parts.iter().filter(|p| !p.complete).count();
    if incomplete > 0 {
        let _ = writeln!(s, "  {incomplete} of the {} tests INCOMPLETE", r.parts.len());
    }
    let _ = writeln!(s, "  (every test, with its own totals: the result's parts, --json or report --html)");
}

/// What held each way of one test, shortly: "limited by receiver window 93%".
fn part_limits(r: &RunResult, p: &netblast_spec::result::Part) -> String {
    let d = netblast_spec::diagnose::part(r, p);
    let two = d.len() > 1;
    d.iter()
        .map(|d| {
            let way = if two { format!("{}: ", crate::plots::way_name(d.way)) } else { String::new() };
            format!("{way}limited by {} {:.0}%", crate::limits::name(d.limit), d.share * 100.0)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The tests of a large fleet grouped by what held them (each way's limit), the groups'
/// tests counted and the first few named: "receiver window: 12 tests (vm001, ...)".
fn limits_spread(s: &mut String, r: &RunResult) {
    use netblast_spec::diagnose::Limit;
    let mut groups: Vec<(Limit, Vec<String>)> = Vec::new();
    for p in &r.parts {
        for d in netblast_spec::diagnose::part(r, p) {
            let name = if p.agent.hostname.is_empty() { p.agent.address.clone() } else { p.agent.hostname.clone() };
            match groups.iter_mut().find(|(l, _)| *l == d.limit) {
                Some((_, v)) => v.push(name),
                None => groups.push((d.limit, vec![name])),
            }
        }
    }
    if groups.is_empty() {
        return;
    }
    groups.sort_by_key(|g| std::cmp::Reverse(g.1.len()));
    let _ = writeln!(s, "  What held each test (its senders' kernel clocks):");
    for (limit, names) in groups {
        let more = names.len().saturating_sub(MAX_AGENTS_NAMED);
        let mut listed = names.iter().take(MAX_AGENTS_NAMED).cloned().collect::<Vec<_>>().join(", ");
        if more > 0 {
            let _ = write!(listed, " and {more} more");
        }
        let n = names.len();
        let _ = writeln!(s, "    {}: {n} test{} ({listed})", crate::limits::name(limit), if n == 1 { "" } else { "s" });
    }
}

/// The agents that are not `ok`, grouped by role, status and reason: each reason once, with
/// its agents named (the first few) and counted.
fn agents_not_ok(s: &mut String, r: &RunResult) {
    // (role, status, reason) and the agents of that reason, in the order first seen.
    type Reason<'a> = (&'a str, &'a str, &'a str);
    let mut groups: Vec<(Reason, Vec<String>)> = Vec::new();
    for a in r.agents.iter().filter(|a| a.status != "ok") {
        let key = (a.role.as_str(), a.status.as_str(), a.why.as_deref().unwrap_or(""));
        let name = if a.agent.hostname.is_empty() {
            a.agent.address.clone()
        } else {
            format!("{} ({})", a.agent.address, a.agent.hostname)
        };
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(name),
            None => groups.push((key, vec![name])),
        }
    }
    for ((role, status, why), names) in groups {
        let why = if why.is_empty() { String::new() } else { format!(": {why}") };
        if names.len() == 1 {
            let _ = writeln!(s, "  {role} agent {}: {status}{why}", names[0]);
            continue;
        }
        let more = names.len().saturating_sub(MAX_AGENTS_NAMED);
        let mut listed = names.iter().take(MAX_AGENTS_NAMED).cloned().collect::<Vec<_>>().join(", ");
        if more > 0 {
            let _ = write!(listed, " and {more} more");
        }
        let _ = writeln!(s, "  {} {role} agents {status}{why}: {listed}", names.len());
    }
}

/// The parts and agents of a merged or fleet result.
fn parts_and_agents(s: &mut String, r: &RunResult) {
    if r.parts.is_empty() {
        return;
    }
    // The agents whose tests were merged; those that failed without a part are named below.
    let took_part = |role: &str| r.agents.iter().filter(|a| a.role == role && !a.parts.is_empty()).count();
    let (agents, servers) = (took_part("client"), took_part("server"));
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    let _ = write!(
        s,
        "Merged {} test{} from {agents} client agent{}",
        r.parts.len(),
        plural(r.parts.len()),
        plural(agents)
    );
    if servers > 0 {
        let _ = write!(s, " and {servers} server agent{}", plural(servers));
    }
    let _ = writeln!(s, ", intervals from {}:", r.started_at);
    if r.parts.len() > MAX_PART_LINES {
        parts_spread(s, r);
    } else {
        for (i, p) in r.parts.iter().enumerate() {
            s.push_str(&part_line(i, p));
            // Each test's own verdict, where there is more than one test to tell apart.
            for d in crate::limits::part(r, p).iter().filter(|_| r.parts.len() > 1) {
                let way = if p.summary.ways.len() > 1 {
                    format!(" {}", crate::plots::way_name(d.diagnosis.way))
                } else {
                    String::new()
                };
                let _ = writeln!(s, "        verdict{way}: {}", d.verdict);
            }
        }
    }
    let starts: Vec<u64> = r.agents.iter().filter_map(|a| a.actual_start_unix_ns).collect();
    if let (Some(lo), Some(hi), true) = (starts.iter().min(), starts.iter().max(), starts.len() > 1) {
        let _ =
            writeln!(s, "Start skew between agents: {} (latest minus earliest actual start)", fmt_ns((hi - lo) as f64));
    }
    agents_not_ok(s, r);
}

/// The summary block printed at the end.
pub fn summary(r: &RunResult) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "- - - - - - - - - - - - - - - - - - - - - - - - -");
    parts_and_agents(&mut s, r);
    crate::kinds::of(r).summary(&mut s, r);
    if let Some(p) = &r.latency_probe {
        s.push_str(&crate::probe::summary_line(p));
    }
    tcp_cpu_and_errors(&mut s, r);
    crate::search::lines(&mut s, r);
    s
}

/// The CPU line: each side's CPUs used and the cost per operation (per CPU-second).
fn cpu_line(r: &RunResult) -> String {
    let c = &r.summary.cpu;
    if c.client.wall_s == 0.0 && c.server.is_none() {
        return "CPU: not measured".into();
    }
    let mut cpu = format!(
        "CPU: client {:.2} CPUs (user {:.2} s, system {:.2} s)",
        c.client.cpus_used(),
        c.client.user_s,
        c.client.system_s
    );
    if let Some(sv) = &c.server {
        let _ =
            write!(cpu, ", server {:.2} CPUs (user {:.2} s, system {:.2} s)", sv.cpus_used(), sv.user_s, sv.system_s);
    }
    let msgs: Option<u64> = match &r.summary.http {
        Some(h) => Some(h.completed),
        None if r.summary.ways.is_empty() => None,
        None => r.summary.ways.iter().map(|w| w.msgs.map(|m| m.sent)).sum(),
    };
    let unit = r.plan.profile.kind().unit();
    // Below 50 ms of CPU (five clock ticks) a figure per CPU-second is mostly rounding: unknown.
    let per_cpu = |amount: f64, cpu_s: f64, fmt: &dyn Fn(f64) -> String| {
        if cpu_s >= MIN_CPU_S { fmt(amount / cpu_s) } else { "\u{2014}".to_string() }
    };
    let bits = |v: f64| format!("{:.1} Gbit", v / 1e9);
    let n = |v: f64| format!("{} {unit}", count(v.round() as u64));
    let total_bits: f64 = c.bits_per_client_cpu_s * c.client.cpu_s();
    let (amount, fmt): (f64, &dyn Fn(f64) -> String) = match msgs {
        // Message kinds: the cost that matters is per message.
        Some(m) => (m as f64, &n),
        None => (total_bits, &bits),
    };
    let _ = write!(cpu, "; {} per client CPU-second", per_cpu(amount, c.client.cpu_s(), fmt));
    if let Some(sv) = &c.server {
        let server_amount = match msgs {
            Some(_) => Some(amount),
            None => c.bits_per_server_cpu_s.map(|b| b * sv.cpu_s()),
        };
        if let Some(a) = server_amount {
            let _ = write!(cpu, ", {} per server CPU-second", per_cpu(a, sv.cpu_s(), fmt));
        }
    }
    if c.client.cpu_s() < MIN_CPU_S || c.server.as_ref().is_some_and(|sv| sv.cpu_s() < MIN_CPU_S) {
        let _ = write!(cpu, " (\u{2014}: under {} ms of CPU, too little to divide by)", MIN_CPU_S * 1e3);
    }
    cpu
}

fn tcp_cpu_and_errors(s: &mut String, r: &RunResult) {
    // A flow whose operations are connections is many sockets, not one: its kernel figures
    // are in its summary.
    let one_socket_per_stream = !r.plan.profile.workload.section().own_listener();
    for w in r.summary.ways.iter().filter(|_| one_socket_per_stream) {
        let (side, probe) = match w.way {
            Way::Up => ("client", Some(&r.probe)),
            Way::Down => ("server", r.server_probe.as_ref()),
        };
        let source = probe.map(|p| p.tcp_source.as_str()).unwrap_or("?");
        let cc =
            crate::figures::congestion(r, w.way).map(|cc| format!(", congestion control {cc}")).unwrap_or_default();
        let way = w.way.name();
        let retrans = retransmissions(w.retransmits, w.retransmit_rate, w.spurious_retransmits);
        // The senders' MSS as the kernel settled it (after -M, the path and the peer's SYN).
        let mss: Vec<u32> = r
            .summary
            .streams
            .iter()
            .filter(|st| st.way == w.way)
            .filter_map(|st| st.tcp.or(st.tcp_info).map(|t| t.mss))
            .filter(|m| *m > 0)
            .collect();
        let retrans = match (mss.iter().min(), mss.iter().max()) {
            (Some(a), Some(b)) if a == b => format!("MSS {a} bytes, {retrans}"),
            (Some(a), Some(b)) => format!("MSS {a}-{b} bytes, {retrans}"),
            _ => retrans,
        };
        if let Some(k) = &w.kernel_rtt {
            let _ = writeln!(
                s,
                "TCP {way} (kernel, {side} side{cc}, source {source}, {} RTT samples): RTT min {} / p50 {} / p99 {} / max {}, max cwnd {}, {retrans}",
                k.count,
                fmt_ns(k.min_ns as f64),
                fmt_ns(k.p50_ns as f64),
                fmt_ns(k.p99_ns as f64),
                fmt_ns(k.max_ns as f64),
                fmt_bytes(w.cwnd_max_bytes),
            );
        } else if let Some(rtt) = w.rtt {
            let _ = writeln!(
                s,
                "TCP {way} (kernel, {side} side{cc}, source {source}, sampled per interval): RTT min {} / mean {} / max {}, max cwnd {}, {retrans}",
                fmt_ns(rtt.min_us as f64 * 1e3),
                fmt_ns(rtt.mean_us * 1e3),
                fmt_ns(rtt.max_us as f64 * 1e3),
                fmt_bytes(w.cwnd_max_bytes),
            );
        }
        crate::kinds::of(r).way_tcp(s, r, w.way);
    }
    for (who, p) in [("client", Some(&r.probe)), ("server", r.server_probe.as_ref())] {
        if let Some((ns, runs)) = p.and_then(|p| p.kernel_run_ns.zip(p.kernel_runs)) {
            let _ = writeln!(
                s,
                "eBPF probe cost ({who}): {} of CPU in {runs} runs ({} per run)",
                fmt_ns(ns as f64),
                fmt_ns(if runs > 0 { ns as f64 / runs as f64 } else { 0.0 })
            );
        }
    }
    let _ = writeln!(s, "{}", cpu_line(r));
    // UDP, HTTP and the hosts' verdicts (TCP's are under each way's line).
    for line in crate::verdict::all(r) {
        let _ = writeln!(s, "verdict: {line}");
    }
    if let Some(fb) = r.probe.fallback_reason.as_ref().filter(|_| r.probe.tcp_source != "off") {
        let _ = writeln!(s, "TCP statistics from {} ({fb})", r.probe.tcp_source);
    }
    if let Some(sp) = r.server_probe.as_ref().filter(|sp| sp.tcp_source != r.probe.tcp_source) {
        let why = sp.fallback_reason.as_deref().map(|f| format!(" ({f})")).unwrap_or_default();
        let _ = writeln!(s, "Server TCP statistics from {}{why}", sp.tcp_source);
    }
    crate::kinds::of(r).tcp_notes(s, r);
    // Plan notes were printed with the header; the rest come here.
    for w in r.warnings.iter().filter(|w| w.source != "plan") {
        let _ = writeln!(s, "note: {}: {}", w.source, w.message);
    }
    if !r.complete {
        let _ = writeln!(s, "INCOMPLETE RUN: the figures above cover what was measured before:");
        for e in &r.errors {
            let _ = writeln!(s, "  at {:.2} s, {}: {}", e.at_s, e.source, e.message);
        }
    }
}

/// The whole report of a finished run: header, intervals, summary.
pub fn full(r: &RunResult) -> String {
    let mut s = started(
        &crate::figures::test_name(r),
        &crate::figures::target(r),
        r.plan.profile.kind().name(),
        &r.streams,
        r.server.as_ref().map(|h| h.hostname.as_str()).unwrap_or(""),
    );
    if let Some(k) = knobs(&r.plan) {
        let _ = writeln!(s, "{k}");
    }
    for n in &r.plan.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s.push_str(&interval_header(&r.plan.profile));
    let mut probes: &[netblast_spec::result::ProbeInterval] =
        r.latency_probe.as_ref().map(|p| p.intervals.as_slice()).unwrap_or_default();
    s.push_str(&crate::probe::lines_until(&mut probes, Some(0.0)));
    for iv in &r.intervals {
        s.push_str(&interval(iv, &r.streams, &r.plan.profile));
        s.push_str(&crate::probe::lines_until(&mut probes, Some(iv.end_s)));
    }
    s.push_str(&crate::probe::lines_until(&mut probes, None));
    s.push_str(&summary(r));
    s
}

/// One line saying what ran: the kind, the label, the test, what it was aimed at, when
/// (what `-q` keeps above the summary).
pub fn header_line(r: &RunResult) -> String {
    let label = r.label.as_deref().map(|l| format!(" [{l}]")).unwrap_or_default();
    let target = crate::figures::target(r);
    let marked = knobs(&r.plan).map(|k| format!(", {k}")).unwrap_or_default();
    format!(
        "netblast {}{label}: {}{marked} against {}, {}, started {}\n",
        r.plan.profile.kind().name(),
        r.plan.profile.description,
        target,
        match crate::figures::test_name(r) {
            n if n.contains(' ') => n,
            id => format!("test {id}"),
        },
        r.started_at
    )
}

/// Every headline figure of each run side by side, in words, each after the first with its
/// change from the first in %. `runs`: (name, result), the first the base.
pub fn compare(runs: &[(String, &RunResult)]) -> String {
    let figs: Vec<Vec<netblast_spec::assert::Figure>> =
        runs.iter().map(|(_, r)| netblast_spec::assert::headline(r)).collect();
    let mut s = String::from("\nCompared:\n");
    for (i, (name, r)) in runs.iter().enumerate() {
        let _ = writeln!(
            s,
            "  {}{name}: {} ({})",
            if i == 0 { "base " } else { "" },
            crate::figures::test_name(r),
            r.started_at
        );
    }
    let mut names: Vec<(&str, &str)> = Vec::new();
    for f in figs.iter().flatten() {
        if !names.iter().any(|(n, _)| *n == f.name) {
            names.push((f.name, &f.label));
        }
    }
    let width = names.iter().map(|(_, l)| l.chars().count()).max().unwrap_or(6).max(6);
    let _ = write!(s, "  {:<width$}", "figure");
    for (i, (name, _)) in runs.iter().enumerate() {
        let _ = write!(s, " {name:>18}");
        if i > 0 {
            let _ = write!(s, " {:>9}", "change");
        }
    }
    s.push('\n');
    for (name, label) in names {
        let _ = write!(s, "  {label:<width$}");
        let base = figs[0].iter().find(|f| f.name == name);
        for (i, fs) in figs.iter().enumerate() {
            let f = fs.iter().find(|f| f.name == name);
            let _ = write!(s, " {:>18}", f.map(|f| f.shown.clone()).unwrap_or_else(|| "-".into()));
            if i == 0 {
                continue;
            }
            let change = match (base, f) {
                (Some(x), Some(y)) => match crate::figures::change_percent(x.value, y.value) {
                    Some(p) => format!("{p:+.1}%"),
                    None if y.value == 0.0 => "0".into(),
                    None => "new".into(),
                },
                _ => "-".into(),
            };
            let _ = write!(s, " {change:>9}");
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::http::{BAR_WIDTH, BARS, latency_bars};

    use netblast_spec::result::{StreamInterval, WayInterval};

    fn bulk_interval(start_s: f64, end_s: f64, sent: u64, received: u64) -> (Interval, Vec<StreamInfo>, Profile) {
        let (profile, _) = Profile::load("bulk-1flow").unwrap();
        let streams: Vec<StreamInfo> = (0..4).map(|id| stream_info(id, Way::Up)).collect();
        let iv = Interval {
            index: 3,
            start_s,
            end_s,
            streams: (0..4)
                .map(|id| StreamInterval { id, sent_bytes: sent, received_bytes: Some(received), ..Default::default() })
                .collect(),
            sums: vec![empty_way(Way::Up)],
            http: None,
        };
        (iv, streams, profile)
    }

    /// A stream of a test, addresses and CPUs left blank.
    fn stream_info(id: u32, way: Way) -> StreamInfo {
        StreamInfo {
            id,
            way,
            local: String::new(),
            remote: String::new(),
            client_cpu: 0,
            server_cpu: None,
            part: None,
            socket: None,
        }
    }

    /// A way's interval with nothing counted.
    fn empty_way(way: Way) -> WayInterval {
        WayInterval {
            way,
            sent_bytes: 0,
            sent_bits_per_s: 0.0,
            received_bytes: None,
            received_bits_per_s: None,
            retransmits: Some(0),
            msgs: None,
            latency: None,
        }
    }

    #[test]
    fn stream_lines_and_their_sum_count_the_same_side_and_say_which() {
        // Found in a run: four streams received 3.12 MBytes each in an interval where nothing
        // was sent, and [SUM] said 0 Bytes (it took the sender's count).
        let (iv, streams, profile) = bulk_interval(3.0, 4.0, 0, 3_271_557);
        let out = interval(&iv, &streams, &profile);
        let sum = out.lines().find(|l| l.starts_with("[SUM]")).unwrap();
        assert!(sum.contains("12.5 MBytes") && sum.ends_with("receiver"), "{out}");
        assert_eq!(out.lines().filter(|l| l.contains("3.12 MBytes") && l.ends_with("receiver")).count(), 4, "{out}");
        // While the sender sends, every line is the sender's, unmarked.
        let (iv, streams, profile) = bulk_interval(1.0, 2.0, 1 << 20, 1000);
        let out = interval(&iv, &streams, &profile);
        assert!(out.lines().all(|l| l.contains("1.00 MBytes") || l.contains("4.00 MBytes")), "{out}");
        assert!(!out.contains("receiver"), "{out}");
    }

    #[test]
    fn the_wire_line_names_autocorking_with_and_without_nodelay() {
        // Found in a run: with --nodelay, 145.8 messages per segment on loopback, while the
        // hint said --nodelay gives one segment per send.
        // A real msgrate result (one flow, batched sends), its figures then set.
        let mut r: RunResult = netblast_spec::upgrade::read_result(include_str!("../testdata/msgrate.json")).unwrap();
        let w = &mut r.summary.ways[0];
        let m = w.msgs.as_mut().unwrap();
        m.sent_per_s = 1_458_000.0;
        m.tcp.as_mut().unwrap().segs_out_per_s = 10_000.0;
        r.plan.profile.tcp.nodelay = Some(true);
        let out = summary(&r);
        assert!(out.contains("with --nodelay the kernel's autocorking still joins"), "{out}");
        r.plan.profile.tcp.nodelay = None;
        let out = summary(&r);
        assert!(out.contains("--nodelay stops Nagle only; net.ipv4.tcp_autocorking=0"), "{out}");
        // One segment per message: no hint at all.
        r.summary.ways[0].msgs.as_mut().unwrap().tcp.as_mut().unwrap().segs_out_per_s = 1_458_000.0;
        assert!(!summary(&r).contains("autocorking"));
    }

    #[test]
    fn a_short_tail_is_folded_and_never_printed_with_its_own_rate() {
        // Found in runs: "[SUM] 2.0000-2.0093 sec ... 48.81 Gbits/sec", "3.00-3.00 sec 2.30 MBytes
        // 72.02 Gbits/sec": a rate over a few milliseconds.
        let (before, streams, profile) = bulk_interval(2.0, 3.0, 600_000, 600_000);
        let (mut tail, _, _) = bulk_interval(3.0, 3.004, 60_000, 60_000);
        tail.index = before.index + 1;
        assert_eq!(interval(&tail, &streams, &profile), "", "a live view leaves the tail to the summary");
        let mut ivs = vec![before, tail];
        assert!(netblast_spec::merge::fold_short_tail(&mut ivs, 1.0).unwrap());
        assert_eq!(ivs.len(), 1);
        let out = interval(&ivs[0], &streams, &profile);
        // 660 000 bytes per stream over 1.004 s, the joined span.
        assert!(out.contains("  2.00-3.00   sec") && out.contains(&fmt_bits_per_s(660_000.0 * 8.0 / 1.004)), "{out}");
        // A whole interval is never folded, and a run of one short interval keeps it.
        let (a, _, _) = bulk_interval(2.0, 3.0, 1, 1);
        let (mut b, _, _) = bulk_interval(3.0, 4.0, 1, 1);
        b.index = a.index + 1;
        let mut ivs = vec![a, b];
        assert!(!netblast_spec::merge::fold_short_tail(&mut ivs, 1.0).unwrap());
        let (mut only, _, _) = bulk_interval(0.0, 0.004, 1, 1);
        only.index = 0;
        assert!(interval(&only, &streams, &profile).contains("0.0000-0.0040 "));
    }

    #[test]
    fn latency_bars_count_every_sample_once_and_list_heys_percentiles() {
        let mut h = netblast_spec::hist::new_latency_histogram();
        // 90 fast responses around 1 ms, 10 slow ones at 10 ms.
        for i in 0..90 {
            h.record(1_000_000 + i * 1_000).unwrap();
        }
        for _ in 0..10 {
            h.record(10_000_000).unwrap();
        }
        let out = latency_bars(&h);
        let counts: Vec<u64> = out
            .lines()
            .filter_map(|l| l.split_once('[').and_then(|(_, r)| r.split_once(']')).map(|(n, _)| n.parse().unwrap()))
            .collect();
        assert_eq!(counts.len(), BARS as usize, "{out}");
        assert_eq!(counts.iter().sum::<u64>(), 100, "{out}");
        assert_eq!((counts[0], counts[9]), (90, 10), "fast ones in the first bucket, slow in the last: {out}");
        assert_eq!(out.matches('■').count() as u64, BAR_WIDTH + 5, "the longest bar is full width: {out}");
        for p in ["10% in", "50% in 1.0", "99% in 10.0", "99.9% in 10.0"] {
            assert!(out.contains(p), "{p}: {out}");
        }
    }
}
