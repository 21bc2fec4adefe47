//! A connection-holding test's report: per interval the connections that answered its probe
//! (held at its end), those that failed or dropped, and connect latency; its totals: held at
//! the end against asked, the most held, failures and drops by cause; a chart of held over time.

use crate::chart::{Plot, Series, Shape, Unit};
use crate::lines::{iv_span, lat_cols, pcts, span};
use crate::series::at;
use netblast_spec::profile::{HoldSection, Profile, Way, Workload};
use netblast_spec::result::{Interval, RunResult, StreamInfo};
use std::fmt::Write;

/// hold's part of the report: connections held per interval, failures named.
pub(crate) struct Report;

impl super::KindReport for Report {
    fn interval_header(&self, _profile: &Profile) -> String {
        "[ ID] Interval           Held       Failed  Connect p50  p99        p99.9      max\n".to_string()
    }

    /// Held is a count at the interval's end (its probe's answers), not a rate.
    fn interval(&self, iv: &Interval, streams: &[StreamInfo], profile: &Profile) -> String {
        super::msg::rows(iv, streams, |r| {
            format!(
                "[{}] {}  {:>9}  {:>6}  {}\n",
                r.label,
                iv_span(iv, profile),
                r.sent(),
                r.msgs.and_then(|m| m.failed).unwrap_or(0),
                // An interval that opened nothing has no connect latency.
                r.latency.filter(|l| l.count > 0).map(lat_cols).unwrap_or_default()
            )
        })
    }

    fn summary(&self, s: &mut String, r: &RunResult) {
        let Workload::Hold(h) = &r.plan.profile.workload else { return };
        let Some(w) = r.summary.ways.first() else { return };
        let Some(m) = w.msgs else { return };
        let most = held_series(r).iter().map(|p| p.2 as u64).max().unwrap_or(0);
        let _ = writeln!(
            s,
            "[SUM] {}  {} of {} connections held at the end (answered the last interval's probe), {most} at most \
             ({} flow{})",
            span(0.0, w.sender.seconds),
            r.held().map(|n| n.to_string()).unwrap_or_else(|| "none".into()),
            h.conns,
            w.streams,
            if w.streams == 1 { "" } else { "s" },
        );
        if let Some(rate) = h.rate {
            let _ = writeln!(s, "      opened at {} in all", netblast_spec::units::fmt_per_s(rate.per_second()));
        }
        let k = m.conns.unwrap_or_default();
        let failed = m.lost.unwrap_or(0);
        if failed > 0 {
            let timed_out = format!("not established or not answered within {:?}", h.timeout());
            let causes = super::cps::causes_words(&k, &timed_out, "reset or closed by the other end");
            let _ = writeln!(s, "      {failed} connections failed or dropped: {causes}");
        } else {
            let _ = writeln!(s, "      no connection failed or dropped");
        }
        if let (Some(answered), Some(rv)) = (m.received, w.receiver) {
            let _ = writeln!(s, "      the server answered {answered} probes over {:.2} s", rv.seconds);
        }
        if let Some(l) = &w.latency {
            let _ = writeln!(s, "Connect latency (connect() call to established, client clock): {}", pcts(l));
        }
    }

    fn verdicts(&self, r: &RunResult) -> Vec<String> {
        hold(r)
    }

    fn plots(&self, r: &RunResult, _compact: bool) -> Vec<Plot> {
        let points = held_series(r);
        if points.is_empty() {
            return Vec::new();
        }
        let series = vec![Series::new("held (answered the probe)".to_string(), points).bold()];
        vec![Plot::over_time("held", "Connections held".to_string(), Unit::Count("connections"), Shape::Steps, series)]
    }
}

/// The connections held at each interval's end, as the chart's steps.
fn held_series(r: &RunResult) -> Vec<(f64, f64, f64)> {
    r.intervals.iter().filter_map(|iv| Some(at(iv, iv.sums.first()?.msgs.as_ref()?.sent as f64))).collect()
}

/// Why a hold test held fewer connections than it asked for, by the causes its client counted.
pub(crate) fn hold(r: &RunResult) -> Vec<String> {
    let Workload::Hold(h) = &r.plan.profile.workload else { return Vec::new() };
    let Some(held) = r.held() else { return Vec::new() };
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
    match (crate::lines::sender_cpu(r, Way::Up), crate::lines::sender_cpu(r, Way::Down)) {
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
    use netblast_spec::result::{ConnCounts, CpuLoad, HostLoad, MsgInterval, MsgTotals, RunError};

    /// A hold result that held `held` of the profile's 1 000 over 10 s, its failures `conns`.
    fn result(held: usize, rate: Option<&str>, conns: ConnCounts) -> RunResult {
        let (mut p, _) = Profile::load("hold").unwrap();
        p.run.duration = Some("10s".parse().unwrap());
        if let Workload::Hold(h) = &mut p.workload {
            h.conns = 1000;
            h.rate = rate.map(|x| x.parse().unwrap());
        }
        let mut r = crate::verdict::stored("cps");
        // One whole interval whose probe `held` connections answered.
        r.intervals.truncate(1);
        r.intervals[0].sums[0].msgs = Some(MsgInterval { sent: held as u64, ..Default::default() });
        r.summary.ways[0].msgs = Some(MsgTotals { conns: Some(conns), ..Default::default() });
        r.plan.profile = p;
        r
    }

    #[test]
    fn fewer_held_names_whose_limit_it_was() {
        let r = result(1000, None, ConnCounts::default());
        assert_eq!(r.held(), Some(1000));
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
