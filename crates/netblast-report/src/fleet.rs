//! The frame log of a fleet run (`FILE.fleet.jsonl`), rendered: what each agent sent, the
//! fleet-wide figures of every interval received, and the exact merge of the final results
//! present. It is what is left when a coordinator dies mid-run.

use crate::text;
use netblast_spec::fleet::{AgentMsg, LogHeader, LogRecord};
use netblast_spec::merge;
use netblast_spec::result::RunResult;
use netblast_spec::units::{fmt_bits_per_s, fmt_per_s};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Whether `text` looks like a fleet log (its first record is the fleet's header).
pub fn is_log(text: &str) -> bool {
    text.trim_start().starts_with("{\"fleet\"")
}

#[derive(Default)]
struct TestLog {
    intervals: BTreeMap<u32, (f64, f64, f64)>,
    final_result: Option<RunResult>,
    failed: Option<String>,
}

/// Renders a fleet log. A truncated last line (a coordinator killed mid-write) is skipped.
pub fn render(text: &str) -> Result<String, String> {
    let mut header: Option<LogHeader> = None;
    let mut tests: BTreeMap<u32, TestLog> = BTreeMap::new();
    let mut failed_agents: Vec<(usize, String)> = Vec::new();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    for (n, line) in lines.iter().enumerate() {
        let rec: LogRecord = match serde_json::from_str(line) {
            Ok(r) => r,
            Err(_) if n + 1 == lines.len() => break,
            Err(e) => return Err(format!("line {}: {e}", n + 1)),
        };
        match rec {
            LogRecord::Fleet(h) => header = Some(*h),
            LogRecord::Failed { agent, why } => failed_agents.push((agent, why)),
            LogRecord::Frame { msg, .. } => match *msg {
                AgentMsg::Interval { id, interval } => {
                    let rate = match &interval.http {
                        Some(h) => h.responses_per_s,
                        None => interval.sums.iter().map(|w| w.received_bits_per_s.unwrap_or(w.sent_bits_per_s)).sum(),
                    };
                    tests
                        .entry(id)
                        .or_default()
                        .intervals
                        .insert(interval.index, (interval.start_s, interval.end_s, rate));
                }
                AgentMsg::Final { id, result } => tests.entry(id).or_default().final_result = Some(*result),
                AgentMsg::Failed { id, error } | AgentMsg::Refused { id, reason: error } => {
                    tests.entry(id).or_default().failed = Some(error)
                }
                _ => {}
            },
        }
    }
    let h = header.ok_or("not a fleet log: no fleet record first")?;
    let http = h.profile.workload.is_http();
    let fmt = |r: f64| if http { fmt_per_s(r) } else { fmt_bits_per_s(r) };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "fleet log: {} agents, {} tests, from {}: {}",
        h.agents.len(),
        h.tests.len(),
        netblast_spec::units::fmt_rfc3339(h.t0_unix_ns),
        h.profile.description
    );
    for (i, t) in h.tests.iter().enumerate() {
        let log = tests.get(&(i as u32));
        let client = h.agents.get(t.client).map(|a| a.address.as_str()).unwrap_or("?");
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
    let mut by_index: BTreeMap<u32, (f64, f64, f64, usize)> = BTreeMap::new();
    for t in tests.values() {
        for (&i, &(a, b, r)) in &t.intervals {
            let e = by_index.entry(i).or_insert((a, b, 0.0, 0));
            e.0 = e.0.min(a);
            e.1 = e.1.max(b);
            e.2 += r;
            e.3 += 1;
        }
    }
    for (i, (a, b, r, n)) in &by_index {
        let _ = writeln!(s, "[FLEET] {a:>6.2}-{b:<6.2} sec  {:>16}  {n} tests reporting  (interval {i})", fmt(*r));
    }
    let finals: Vec<(String, &RunResult)> =
        tests.iter().filter_map(|(id, t)| t.final_result.as_ref().map(|r| (format!("test {id}"), r))).collect();
    if finals.is_empty() {
        let _ = writeln!(s, "no final result in the log: the totals above are all there is");
        return Ok(s);
    }
    let refs: Vec<merge::Input<'_>> = finals.iter().map(|(n, r)| (n.as_str(), *r)).collect();
    match merge::merge(&refs) {
        Ok(m) => {
            let _ = writeln!(s, "The {} final result(s) in the log, merged:", finals.len());
            s.push_str(&text::summary(&m));
        }
        Err(e) => {
            let _ = writeln!(s, "the final results cannot be merged: {e}");
        }
    }
    Ok(s)
}
