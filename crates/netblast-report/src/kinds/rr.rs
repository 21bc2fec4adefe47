//! A request/response test's report: transactions per second and round-trip latency per
//! interval, its totals, and the kernel's RTT beside the application's round trip.

use crate::lines::{iv_span, lat_cols, pcts, span, udp};
use netblast_spec::profile::{Profile, Workload};
use netblast_spec::result::{Interval, RunResult, StreamInfo};
use netblast_spec::units::{fmt_ns, fmt_per_s};
use std::fmt::Write;

/// rr's part of the report: transactions and round trips, the kernel's RTT beside them.
pub(crate) struct Report;

impl super::KindReport for Report {
    fn interval_header(&self, _profile: &Profile) -> String {
        HEADER.to_string()
    }
    fn interval(&self, iv: &Interval, streams: &[StreamInfo], profile: &Profile) -> String {
        interval(iv, streams, profile)
    }
    fn summary(&self, s: &mut String, r: &RunResult) {
        summary(s, r)
    }
    fn tcp_notes(&self, s: &mut String, r: &RunResult) {
        kernel_note(s, r)
    }
    fn plots(&self, r: &RunResult, _compact: bool) -> Vec<crate::chart::Plot> {
        super::msg::plots(r, "completed")
    }
}

/// The column header of rr's interval lines.
pub(crate) const HEADER: &str = "[ ID] Interval           Trans/s       RTT p50    p99        p99.9      max\n";

/// One interval of rr: transactions per second and round-trip latency.
pub(crate) fn interval(iv: &Interval, streams: &[StreamInfo], profile: &Profile) -> String {
    let per = super::msg::per_interval(iv);
    super::msg::rows(iv, streams, |r| {
        format!(
            "[{}] {}  {:>12}  {}\n",
            r.label,
            iv_span(iv, profile),
            per(r.sent()),
            r.latency.map(lat_cols).unwrap_or_default()
        )
    })
}

/// rr's totals: transactions and their rate, requests left without a response, and the
/// round trip.
pub(crate) fn summary(s: &mut String, r: &RunResult) {
    let profile = &r.plan.profile;
    let is_udp = udp(profile);
    for w in &r.summary.ways {
        let Some(m) = w.msgs else { continue };
        let _ = writeln!(
            s,
            "[SUM] {}  {} transactions, {} ({} flow{}{}, wait {})",
            span(0.0, w.sender.seconds),
            m.sent,
            fmt_per_s(m.sent_per_s),
            w.streams,
            if w.streams == 1 { "" } else { "s" },
            if is_udp { ", UDP" } else { ", TCP" },
            if profile.workload.spins() { "spin" } else { "block" }
        );
        if let Some(lost) = m.lost {
            let timeout = match &profile.workload {
                Workload::Rr(rr) => rr.udp_timeout(),
                _ => netblast_spec::profile::RrSection::DEFAULT_UDP_TIMEOUT,
            };
            let _ = writeln!(s, "      {lost} requests got no response within {timeout:?}");
        }
        if let Some(l) = &w.latency {
            let _ = writeln!(s, "Round trip (application, client clock): {}", pcts(l));
            let _ = writeln!(
                s,
                "One way (round trip / 2, what qperf calls latency): mean {}, p50 {}",
                fmt_ns(l.mean_ns / 2.0),
                fmt_ns(l.p50_ns as f64 / 2.0)
            );
        }
    }
}

/// What the kernel's RTT is beside the application's round trip.
pub(crate) fn kernel_note(s: &mut String, r: &RunResult) {
    let w = r.summary.ways.first();
    let kernel = w
        .and_then(|w| w.kernel_rtt.as_ref().map(|k| format!("p50 {}", fmt_ns(k.p50_ns as f64))))
        .or_else(|| w.and_then(|w| w.rtt).map(|rtt| format!("mean {:.0} us", rtt.mean_us)));
    if let (Some(kernel), Some(app)) = (kernel, w.and_then(|w| w.latency.as_ref())) {
        let _ = writeln!(
            s,
            "Kernel RTT ({kernel}) is TCP's view: segment sent to ACK received inside the kernel. The \
             application round trip (p50 {}) adds both ends' system calls, wake-ups and copies.",
            fmt_ns(app.p50_ns as f64)
        );
    }
}
