//! A connection-holding test's report: per interval the connections that answered its probe
//! (held at its end), those that failed or dropped, and connect latency; its totals: held at
//! the end against asked, the most held, failures and drops by cause; a chart of held over time.

use crate::chart::{Plot, Series, Shape, Unit};
use crate::lines::{iv_span, lat_cols, pcts, span};
use crate::series::at;
use netblast_spec::profile::{Profile, Workload};
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
            netblast_spec::verdict::held(r).map(|n| n.to_string()).unwrap_or_else(|| "none".into()),
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
