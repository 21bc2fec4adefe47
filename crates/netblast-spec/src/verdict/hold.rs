//! hold's verdict: fewer connections held than asked, and whose limit that was (the client's
//! ports are the generator's; a refusal, a silence or a drop is the target's).

use crate::profile::Workload;
use crate::result::RunResult;

/// The connections a hold test's way held: those that answered the probe of the last whole
/// interval (a short tail has no probe of its own).
pub fn held(r: &RunResult) -> Option<u64> {
    let interval_s = r.plan.profile.run.interval().as_secs_f64();
    let last = r.intervals.iter().rev().find(|iv| !iv.is_short_tail(interval_s))?;
    last.sums.first()?.msgs.as_ref().map(|m| m.sent)
}

/// Why a hold test held fewer connections than it asked for, by the causes its client counted.
pub fn hold(r: &RunResult) -> Vec<String> {
    let Workload::Hold(h) = &r.plan.profile.workload else { return Vec::new() };
    let Some(held) = held(r) else { return Vec::new() };
    let asked = u64::from(h.conns);
    if held >= asked {
        return Vec::new();
    }
    let c = r.summary.ways.first().and_then(|w| w.msgs.as_ref()).and_then(|m| m.conns).unwrap_or_default();
    let mut causes = Vec::new();
    if c.port_exhausted > 0 {
        causes.push(format!(
            "{} found no free local port on the client (the generator's limit, not the target's: \
             more source addresses with --bind, or a wider net.ipv4.ip_local_port_range)",
            c.port_exhausted
        ));
    }
    if c.refused > 0 {
        causes.push(format!("{} were refused by the target (a reset to the SYN)", c.refused));
    }
    if c.timed_out > 0 {
        causes.push(format!(
            "{} were not established or not answered within {:?} (SYNs or probes dropped on the way)",
            c.timed_out,
            h.timeout()
        ));
    }
    if c.reset > 0 {
        causes.push(format!("{} held connections were reset or closed by the other end", c.reset));
    }
    if c.other > 0 {
        causes.push(format!("{} failed otherwise", c.other));
    }
    let why = if causes.is_empty() {
        "no connection failed: the flows were still opening them when the test ended (a longer run \
         or a higher --rate)"
            .to_string()
    } else {
        causes.join("; ")
    };
    vec![format!("hold: {held} of {asked} connections answered the last interval's probe: {why}")]
}
