//! The frame log of a fleet run (`FILE.fleet.jsonl`), rendered: what each agent sent, the
//! fleet-wide figures of every interval received, and the exact merge of the final results
//! present. It is what is left when a coordinator dies mid-run.

use crate::text;
use netblast_spec::fleet::{AgentMsg, FleetInterval, LogHeader, LogRecord};
use netblast_spec::merge;
use netblast_spec::profile::{Headline, Kind};
use netblast_spec::result::RunResult;
use netblast_spec::units::{fmt_bits_per_s, fmt_per_s};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Whether `text` looks like a fleet log (its first record is the fleet's header).
pub fn is_log(text: &str) -> bool {
    text.trim_start().starts_with("{\"fleet\"")
}

/// The fleet-wide line of one interval, as the coordinator prints it live and the log's
/// replay prints it: span, total rate, tests reporting, the slowest test.
pub fn interval_line(iv: &FleetInterval) -> String {
    let rate = match iv.ops {
        Some((what, r)) => format!("{} {what} ({})", fmt_per_s(r), fmt_bits_per_s(iv.bits_per_s)),
        None => fmt_bits_per_s(iv.bits_per_s),
    };
    let slowest = iv
        .slowest
        .as_ref()
        .map(|(who, r)| {
            let r = if iv.ops.is_some() { fmt_per_s(*r) } else { fmt_bits_per_s(*r) };
            format!("  slowest {who} {r}")
        })
        .unwrap_or_default();
    format!(
        "[FLEET] {:>6.2}-{:<6.2} sec  {rate:>16}  {}/{} tests reporting{slowest}\n",
        iv.start_s, iv.end_s, iv.reporting, iv.running
    )
}

/// What one test's interval frame adds to the fleet-wide line: bits per second (received
/// where receivers reported, else sent; for http both ways), and the kind's operations per
/// second: responses (http), or what its senders counted (as each test's headline does).
pub fn test_rates(interval: &netblast_spec::result::Interval) -> (f64, Option<f64>) {
    match &interval.http {
        Some(h) => {
            let secs = (interval.end_s - interval.start_s).max(1e-9);
            ((h.bytes_sent + h.bytes_received) as f64 * 8.0 / secs, Some(h.responses_per_s))
        }
        None => {
            let bits = interval.sums.iter().map(|w| w.received_bits_per_s.unwrap_or(w.sent_bits_per_s)).sum();
            let ops = interval
                .sums
                .iter()
                .filter_map(|w| w.msgs.as_ref())
                .map(|m| m.sent_per_s.unwrap_or(0.0))
                .reduce(|a, b| a + b);
            (bits, ops)
        }
    }
}

/// What a kind's operations are called in the fleet-wide line ([`Kind::unit`]); none for bulk,
/// which counts bits only.
pub fn ops_name(kind: Kind) -> Option<&'static str> {
    match kind.headline() {
        Headline::BitsReceived => None,
        Headline::OpsSent | Headline::Responses => Some(kind.unit()),
    }
}

#[derive(Default)]
struct TestLog {
    intervals: BTreeMap<u32, (f64, f64, f64, Option<f64>)>,
    final_result: Option<RunResult>,
    failed: Option<String>,
}

/// A fleet log rendered, and whether it holds a whole fleet run: every test's final result,
/// complete, no agent failed, no line cut.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    /// The text.
    pub text: String,
    /// Whether the log holds a whole, complete run.
    pub complete: bool,
}

/// A fleet log's records, gathered per test and agent.
struct Read {
    header: LogHeader,
    tests: BTreeMap<u32, TestLog>,
    failed_agents: Vec<(usize, String)>,
    /// Each agent's latest actual start, on its own clock.
    started: BTreeMap<usize, u64>,
    /// The last line was cut mid-record, and left out.
    cut: bool,
}

/// Whether `msg`, logged as `agent`'s, is a frame that agent may send: one of its own tests'
/// (after the header that says whose each test is), or one that names no test.
fn from_its_agent(header: Option<&LogHeader>, agent: usize, msg: &AgentMsg) -> bool {
    let id = match msg {
        AgentMsg::Interval { id, .. }
        | AgentMsg::Final { id, .. }
        | AgentMsg::Failed { id, .. }
        | AgentMsg::Refused { id, .. }
        | AgentMsg::Accepted { id }
        | AgentMsg::Started { id, .. } => *id,
        _ => return true,
    };
    header.and_then(|h| h.tests.get(id as usize)).is_some_and(|t| t.client == agent)
}

/// Reads a fleet log's records; a last line cut mid-record is left out and noted, a bad line
/// elsewhere is an error naming it.
fn read(text: &str) -> Result<Read, String> {
    let mut header: Option<LogHeader> = None;
    let mut tests: BTreeMap<u32, TestLog> = BTreeMap::new();
    let mut failed_agents: Vec<(usize, String)> = Vec::new();
    let mut started: BTreeMap<usize, u64> = BTreeMap::new();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut cut = false;
    for (n, line) in lines.iter().enumerate() {
        let rec: LogRecord = match netblast_spec::upgrade::read(line) {
            Ok(r) => r,
            Err(_) if n + 1 == lines.len() && n > 0 => {
                cut = true;
                break;
            }
            Err(e) => return Err(format!("line {}: {e}", n + 1)),
        };
        match rec {
            LogRecord::Fleet(h) => header = Some(*h),
            LogRecord::Failed { agent, why } => failed_agents.push((agent, why)),
            // A test's frames count only from the agent it was ordered to, and its first final
            // result only, as the coordinator took them.
            LogRecord::Frame { agent, msg, .. } if !from_its_agent(header.as_ref(), agent, &msg) => {}
            LogRecord::Frame { msg, .. } if matches!(&*msg, AgentMsg::Final { id, .. } if tests.get(id).is_some_and(|t| t.final_result.is_some())) =>
                {}
            LogRecord::Frame { agent, msg, .. } => match *msg {
                AgentMsg::Started { actual_start_unix_ns, .. } => {
                    let e = started.entry(agent).or_insert(actual_start_unix_ns);
                    *e = (*e).max(actual_start_unix_ns);
                }
                AgentMsg::Interval { id, interval } => {
                    let (bits, ops) = test_rates(&interval);
                    tests
                        .entry(id)
                        .or_default()
                        .intervals
                        .insert(interval.index, (interval.start_s, interval.end_s, bits, ops));
                }
                AgentMsg::Final { id, result } => tests.entry(id).or_default().final_result = Some(*result),
                AgentMsg::Failed { id, error } | AgentMsg::Refused { id, reason: error } => {
                    tests.entry(id).or_default().failed = Some(error)
                }
                _ => {}
            },
        }
    }
    let header = header.ok_or("not a fleet log: no fleet record first")?;
    Ok(Read { header, tests, failed_agents, started, cut })
}

/// Renders a fleet log. A truncated last line (a coordinator killed mid-write) is skipped and
/// said; a log without every test's final result renders what it has and says so.
pub fn render(text: &str) -> Result<Rendered, String> {
    let Read { header: h, tests, failed_agents, started, cut } = read(text)?;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "fleet log: {} agents, {} tests, from {}: {}",
        h.agents.len(),
        h.tests.len(),
        netblast_spec::units::fmt_rfc3339(h.t0_unix_ns),
        h.profile.description
    );
    let address = |t: &netblast_spec::fleet::LogTest| h.agents.get(t.client).map(|a| a.address.as_str()).unwrap_or("?");
    for (i, t) in h.tests.iter().enumerate() {
        let log = tests.get(&(i as u32));
        let client = address(t);
        let server = t.server.and_then(|k| h.agents.get(k)).map(|a| a.address.as_str()).unwrap_or("its URLs");
        let state = match log {
            Some(TestLog { final_result: Some(r), .. }) => {
                if r.complete {
                    "final result".to_string()
                } else {
                    "final result (incomplete)".to_string()
                }
            }
            Some(TestLog { failed: Some(w), .. }) => format!("failed: {w}"),
            _ => "no final result".to_string(),
        };
        let n = log.map(|l| l.intervals.len()).unwrap_or(0);
        let _ = writeln!(s, "  test {i}: {client} -> {server}: {n} intervals received, {state}");
    }
    for (agent, why) in &failed_agents {
        let addr = h.agents.get(*agent).map(|a| a.address.as_str()).unwrap_or("?");
        let _ = writeln!(s, "  agent {addr} failed: {why}");
    }
    // Fleet-wide, from the interval frames (counters only: the exact merge needs the finals).
    let running = h.tests.len() - tests.values().filter(|t| t.failed.is_some()).count();
    let mut by_index: BTreeMap<u32, FleetInterval> = BTreeMap::new();
    for (id, t) in &tests {
        let who = h.tests.get(*id as usize).map(address).unwrap_or("?");
        for (&i, &(a, b, bits, ops)) in &t.intervals {
            let e = by_index.entry(i).or_insert(FleetInterval {
                index: i,
                start_s: a,
                end_s: b,
                bits_per_s: 0.0,
                ops: None,
                reporting: 0,
                running,
                slowest: None,
            });
            e.start_s = e.start_s.min(a);
            e.end_s = e.end_s.max(b);
            e.bits_per_s += bits;
            if let (Some(r), Some(what)) = (ops, ops_name(h.profile.kind())) {
                e.ops = Some((what, e.ops.map_or(0.0, |(_, x)| x) + r));
            }
            e.reporting += 1;
            let rank = ops.unwrap_or(bits);
            if e.slowest.as_ref().is_none_or(|(_, r)| rank < *r) {
                e.slowest = Some((who.to_string(), rank));
            }
        }
    }
    let interval_s = h.profile.run.interval().as_secs_f64();
    for iv in by_index.values().filter(|iv| !iv.is_short_tail(interval_s)) {
        s.push_str(&interval_line(iv));
    }
    let finals: Vec<(String, &RunResult)> =
        tests.iter().filter_map(|(id, t)| t.final_result.as_ref().map(|r| (format!("test {id}"), r))).collect();
    let whole = finals.len() == h.tests.len() && finals.iter().all(|(_, r)| r.complete) && failed_agents.is_empty();
    let complete = whole && !cut;
    let ending = |s: &mut String| {
        if cut {
            let _ =
                writeln!(s, "its last line was cut mid-record (the coordinator stopped while writing it): left out");
        }
        if !whole {
            let _ = writeln!(
                s,
                "INCOMPLETE: {} of {} tests have a final result{}",
                finals.len(),
                h.tests.len(),
                if failed_agents.is_empty() {
                    String::new()
                } else {
                    format!(", {} agent(s) failed", failed_agents.len())
                }
            );
        }
    };
    if finals.is_empty() {
        let _ = writeln!(s, "no final result in the log: the totals above are all there is");
        ending(&mut s);
        return Ok(Rendered { text: s, complete });
    }
    let refs: Vec<merge::Input<'_>> = finals.iter().map(|(n, r)| (n.as_str(), *r)).collect();
    match merge::merge(&refs) {
        Ok(mut m) => {
            // The agents' actual starts as the coordinator took them (their Started frames, on
            // the reference clock): the skew the fleet's own result states.
            // Merged part j is final j, the result of test `ids[j]`, whose client is a log agent.
            let ids: Vec<u32> = tests.iter().filter(|(_, t)| t.final_result.is_some()).map(|(id, _)| *id).collect();
            for a in m.agents.iter_mut().filter(|a| a.role == "client") {
                let client =
                    a.parts.first().and_then(|&j| ids.get(j as usize)).and_then(|&id| h.tests.get(id as usize));
                let from_log = client.and_then(|t| {
                    let clock = h.agents.get(t.client).map(|l| &l.clock);
                    started.get(&t.client).map(|&at| netblast_spec::fleet::reference_start(at, clock))
                });
                if let Some(t) = from_log {
                    a.actual_start_unix_ns = Some(t);
                }
            }
            let _ = writeln!(s, "The {} final result(s) in the log, merged:", finals.len());
            s.push_str(&text::summary(&m));
        }
        Err(e) => {
            let _ = writeln!(s, "the final results cannot be merged: {e}");
        }
    }
    ending(&mut s);
    Ok(Rendered { text: s, complete })
}
