//! hold's verdict: fewer connections held than asked, and whose limit that was. The client's
//! ports, its schedule (`--rate`), its CPU and a flow that stopped are the generator's; a
//! refusal, a silence or a drop is the target's; the server's CPU is the server's.

use crate::profile::{HoldSection, Way, Workload};
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
    let why = if causes.is_empty() { unfailed(r, h, asked) } else { causes.join("; ") };
    vec![format!("hold: {held} of {asked} connections answered the last interval's probe: {why}")]
}

/// Why fewer were held though no connection failed: the generator's own limits first (a flow
/// that stopped, the schedule asked, its CPU), then the server's CPU; otherwise the flows,
/// each opening one connection at a time, had not opened them all yet.
fn unfailed(r: &RunResult, h: &HoldSection, asked: u64) -> String {
    if let Some(e) = r.errors.first() {
        // Not claimed for either end: the errors are listed with the run.
        return format!("no connection failed, but the run had errors (the first, {}: {})", e.source, e.message);
    }
    let ran_s = r.plan.profile.run.duration.map_or(r.summary.duration_s, |d| d.0.as_secs_f64());
    if let Some(rate) = h.rate.map(|x| x.per_second()).filter(|x| *x > 0.0) {
        let need_s = asked as f64 / rate;
        // Probed a tenth of an interval before the end: the last connections opened after that.
        if need_s > 0.9 * ran_s {
            return format!(
                "no connection failed: at --rate {rate}/s the {asked} connections take {need_s:.1} s to open and \
                 the test ran {ran_s:.1} s: the schedule asked for, not a limit of the target (a longer run or a \
                 higher --rate)"
            );
        }
    }
    match (crate::diagnose::sender_cpu(r, Way::Up), crate::diagnose::sender_cpu(r, Way::Down)) {
        (Some(cpu), _) => format!(
            "no connection failed, with the client's {cpu}: the generator's CPU set how fast they were opened, \
             not the target (more client CPUs or a longer run)"
        ),
        (None, Some(cpu)) => {
            format!("no connection failed, with the server's {cpu}: the server's CPU set how fast they were accepted")
        }
        (None, None) => "no connection failed and no CPU saturated: the flows, each opening one connection at \
                         a time, were still opening them when the test ended (a longer run, or more flows)"
            .to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{ConnCounts, CpuLoad, HostLoad, MsgTotals, RunError};

    /// A hold result that held `held` of the profile's 1 000 over 10 s, its failures `conns`.
    fn result(held: usize, rate: Option<&str>, conns: ConnCounts) -> RunResult {
        use crate::merge::tests::{Cell, build};
        let (mut p, _) = crate::profile::Profile::load("hold").unwrap();
        p.run.duration = Some("10s".parse().unwrap());
        if let Workload::Hold(h) = &mut p.workload {
            h.conns = 1000;
            h.rate = rate.map(|x| x.parse().unwrap());
        }
        let one = [(0, [(0, Cell { bytes: 1, lat: vec![1000; held] })].into_iter().collect())].into_iter().collect();
        let mut r = build(&one, 0, "a");
        r.summary.ways.truncate(1);
        r.summary.ways[0].msgs = Some(MsgTotals { conns: Some(conns), ..Default::default() });
        r.plan.profile = p;
        r
    }

    #[test]
    fn fewer_held_names_whose_limit_it_was() {
        let r = result(1000, None, ConnCounts::default());
        assert_eq!(held(&r), Some(1000));
        assert!(hold(&r).is_empty(), "all held: nothing to say");
        // Refused: the target's.
        let v = hold(&result(900, None, ConnCounts { refused: 100, ..Default::default() }));
        assert!(v[0].starts_with("hold: 900 of 1000 connections") && v[0].contains("100 were refused by the target"));
        // Nothing failed, nothing saturated: still opening.
        let mut r = result(500, None, ConnCounts::default());
        let v = hold(&r);
        assert!(v[0].contains("no CPU saturated") && v[0].contains("still opening"), "{}", v[0]);
        // The client's CPU saturated: the generator's, never the target's.
        r.summary.load.client = Some(HostLoad {
            wall_s: 1.0,
            cpus: vec![CpuLoad { cpu: 0, user: 0.2, system: 0.79, idle: 0.01, ..Default::default() }],
            ..Default::default()
        });
        let v = hold(&r);
        assert!(v[0].contains("with the client's CPU 0 at 99% busy") && v[0].contains("not the target"), "{}", v[0]);
        // A flow's error comes first, claimed for neither end.
        r.errors.push(RunError { at_s: 1.0, source: "stream 3".into(), message: "out of descriptors".into() });
        let v = hold(&r);
        assert!(v[0].contains("the run had errors (the first, stream 3: out of descriptors)"), "{}", v[0]);
        // The schedule asked for fewer than the test could open: the generator's schedule.
        let v = hold(&result(200, Some("20"), ConnCounts::default()));
        assert!(
            v[0].contains("at --rate 20/s the 1000 connections take 50.0 s to open and the test ran 10.0 s")
                && v[0].contains("not a limit of the target"),
            "{}",
            v[0]
        );
        // A rate the test had time for is not blamed.
        let v = hold(&result(200, Some("1000"), ConnCounts::default()));
        assert!(!v[0].contains("--rate 1000/s"), "{}", v[0]);
    }
}
