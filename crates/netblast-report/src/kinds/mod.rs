//! Each kind's part of the human report: its interval columns and lines, its summary, and what
//! it adds to the TCP lines. The text frame (`text.rs`) asks here and prints the rest (the
//! header, fleet parts and agents, TCP, CPU, verdicts, notes and errors) the same for every kind.
//!
//! A kind plugs in with its module and one arm in each function below; its verdicts too
//! ([`verdicts`]), which the spec's `verdict` module writes.

pub(crate) mod bulk;
pub(crate) mod cps;
pub(crate) mod http;
pub(crate) mod msg;
pub(crate) mod rr;

use netblast_spec::profile::{Kind, Profile, Way};
use netblast_spec::result::{Interval, RunResult, StreamInfo};

/// The column header of interval lines.
pub(crate) fn interval_header(profile: &Profile) -> String {
    match profile.kind() {
        Kind::Bulk => bulk::header(profile),
        Kind::Msgrate => msg::header(profile).to_string(),
        Kind::Rr => rr::HEADER.to_string(),
        Kind::Cps => cps::header(profile).to_string(),
        Kind::Http => http::HEADER.to_string(),
    }
}

/// One interval's lines (an interval neither omitted nor a short tail).
pub(crate) fn interval(iv: &Interval, streams: &[StreamInfo], profile: &Profile) -> String {
    match profile.kind() {
        Kind::Bulk => bulk::interval(iv, streams, profile),
        Kind::Msgrate => msg::interval(iv, streams, profile),
        Kind::Rr => rr::interval(iv, streams, profile),
        Kind::Cps => cps::interval(iv, streams, profile),
        Kind::Http => http::interval(iv, profile),
    }
}

/// The kind's totals, after the separator and the fleet's parts.
pub(crate) fn summary(s: &mut String, r: &RunResult) {
    match r.plan.profile.kind() {
        Kind::Bulk => bulk::summary(s, r),
        Kind::Msgrate => msg::summary(s, r),
        Kind::Rr => rr::summary(s, r),
        Kind::Cps => cps::summary(s, r),
        Kind::Http => {
            http::summary(s, r);
            http::sweep_lines(s, r);
        }
    }
}

/// What the kind adds under a way's TCP line.
pub(crate) fn way_tcp(s: &mut String, r: &RunResult, way: Way) {
    if r.plan.profile.kind() == Kind::Bulk {
        bulk::limit_lines(s, r, way);
    }
}

/// What the kind adds after the TCP and CPU lines.
pub(crate) fn tcp_notes(s: &mut String, r: &RunResult) {
    if r.plan.profile.kind() == Kind::Rr {
        rr::kernel_note(s, r);
    }
}

/// The kind's tables of the HTML page above its figures.
pub(crate) fn html_lead(out: &mut String, r: &RunResult) {
    if r.plan.profile.kind() == Kind::Http {
        http::sweep_table(out, r);
    }
}

/// The kind's tables of the HTML page after the CPU table and the verdicts.
pub(crate) fn html_tables(out: &mut String, r: &RunResult) {
    match r.plan.profile.kind() {
        Kind::Bulk => bulk::limits_table(out, r),
        Kind::Cps => cps::failures_table(out, r),
        Kind::Http => http::tables(out, r),
        Kind::Msgrate | Kind::Rr => {}
    }
}

/// The kind's own charts (the HTML page's; every kind's common ones are `plots`').
pub(crate) fn plots(r: &RunResult, compact: bool) -> Vec<crate::chart::Plot> {
    match r.plan.profile.kind() {
        Kind::Bulk => bulk::plots(r, compact),
        Kind::Msgrate => msg::plots(r, "sent"),
        Kind::Rr => msg::plots(r, "completed"),
        Kind::Cps => msg::plots(r, "established"),
        Kind::Http => http::plots(r, compact),
    }
}

/// The verdicts beside the TCP ways' (which are printed under each way): the kind's own (UDP
/// ways', cps', HTTP's), then each host's.
pub(crate) fn verdicts(r: &RunResult) -> Vec<String> {
    use netblast_spec::verdict;
    let mut v = verdict::of_kind(r);
    v.extend(verdict::latency_probe(r));
    v.extend(verdict::hosts(r));
    v
}
