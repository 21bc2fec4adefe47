//! Each kind's part of the human report: its interval columns and lines, its summary, and what
//! it adds to the TCP lines, the HTML page and its charts. The text frame (`text.rs`) and the
//! page (`html.rs`) ask [`for_kind`] and print the rest (the header, fleet parts and agents,
//! TCP, CPU, verdicts, notes and errors) the same for every kind.
//!
//! A kind plugs in with its file, one [`KindReport`] for it, and one arm in [`for_kind`]; its
//! verdicts' sentences are in its file too ([`KindReport::verdicts`]).

pub(crate) mod bulk;
pub(crate) mod cps;
pub(crate) mod hold;
pub(crate) mod http;
pub(crate) mod msg;
pub(crate) mod rr;

use crate::chart::Plot;
use netblast_spec::profile::{Kind, Profile, Way};
use netblast_spec::result::{Interval, RunResult, StreamInfo};

/// A kind's part of the report. The methods with a body are what most kinds leave out.
pub(crate) trait KindReport: Sync {
    /// The column header of interval lines.
    fn interval_header(&self, profile: &Profile) -> String;

    /// One interval's lines (an interval neither a short tail nor, for kinds that take no
    /// `--omit`, omitted).
    fn interval(&self, iv: &Interval, streams: &[StreamInfo], profile: &Profile) -> String;

    /// The kind's totals, after the separator and the fleet's parts.
    fn summary(&self, s: &mut String, r: &RunResult);

    /// What the kind adds under a way's TCP line.
    fn way_tcp(&self, _s: &mut String, _r: &RunResult, _way: Way) {}

    /// What the kind adds after the TCP and CPU lines.
    fn tcp_notes(&self, _s: &mut String, _r: &RunResult) {}

    /// The kind's tables of the HTML page above its figures.
    fn html_lead(&self, _out: &mut String, _r: &RunResult) {}

    /// The kind's tables of the HTML page after the CPU table and the verdicts.
    fn html_tables(&self, _out: &mut String, _r: &RunResult) {}

    /// The kind's own charts (the HTML page's; every kind's common ones are `plots`').
    fn plots(&self, r: &RunResult, compact: bool) -> Vec<Plot>;

    /// The kind's own verdicts in words, before the latency probes' and the hosts'
    /// (the report's `verdict::all`); bulk and rr have theirs under each TCP way.
    fn verdicts(&self, _r: &RunResult) -> Vec<String> {
        Vec::new()
    }
}

/// The report of `kind`: the one place the report decides by kind.
pub(crate) fn for_kind(kind: Kind) -> &'static dyn KindReport {
    match kind {
        Kind::Bulk => &bulk::Report,
        Kind::Msgrate => &msg::Report,
        Kind::Rr => &rr::Report,
        Kind::Cps => &cps::Report,
        Kind::Hold => &hold::Report,
        Kind::Http => &http::Report,
    }
}

/// The report of a result's kind.
pub(crate) fn of(r: &RunResult) -> &'static dyn KindReport {
    for_kind(r.plan.profile.kind())
}
