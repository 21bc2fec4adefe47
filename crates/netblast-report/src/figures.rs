//! Figures the text, HTML and CSV renderings share: a fleet test's headline figure in its
//! kind's unit, the change between two runs, a run's name for people.

use netblast_spec::RunResult;
use netblast_spec::profile::{Headline, Kind};
use netblast_spec::result::Summary;
use netblast_spec::units::{fmt_bits_per_s, fmt_per_s};

/// A test's headline figure in the kind's own unit, for ranking the tests of a fleet: bits/s
/// received (bulk), messages, transactions or connections per second (msgrate, rr, cps),
/// responses per second (http).
pub fn part_figure(kind: Kind, sum: &Summary) -> f64 {
    match kind.headline() {
        Headline::Responses => sum.http.as_ref().map(|h| h.responses_per_s).unwrap_or(0.0),
        Headline::BitsReceived => {
            sum.ways.iter().map(|w| w.receiver.map(|r| r.bits_per_s).unwrap_or(w.sender.bits_per_s)).sum()
        }
        Headline::OpsSent => sum.ways.iter().filter_map(|w| w.msgs.as_ref()).map(|m| m.sent_per_s).sum(),
    }
}

/// What [`part_figure`] is, in words.
pub fn part_figure_name(kind: Kind) -> &'static str {
    match kind.headline() {
        Headline::Responses => "responses per second",
        Headline::BitsReceived => "throughput (bits/s received; sent where no receiver reported)",
        Headline::OpsSent => "operations per second",
    }
}

/// [`part_figure`] in words, with its unit.
pub fn fmt_part_figure(kind: Kind, v: f64) -> String {
    match kind.headline() {
        Headline::BitsReceived => fmt_bits_per_s(v),
        Headline::OpsSent | Headline::Responses => format!("{} {}", fmt_per_s(v), kind.unit()),
    }
}

/// The worst p50 and p99 of a summary's latencies (rr, cps, msgrate ways; HTTP), in ns.
pub fn p50_p99(sum: &Summary) -> Option<(u64, u64)> {
    sum.ways
        .iter()
        .filter_map(|w| w.latency.as_deref())
        .chain(sum.http.as_ref().map(|h| &*h.latency))
        .filter(|l| l.count > 0)
        .map(|l| (l.p50_ns, l.p99_ns))
        .reduce(|a, b| (a.0.max(b.0), a.1.max(b.1)))
}

/// The change from `base` to `now` in %, `None` when the base is 0 (no ratio).
pub fn change_percent(base: f64, now: f64) -> Option<f64> {
    (base != 0.0).then(|| (now - base) / base.abs() * 100.0)
}

/// What a test id is, for people: a merged result says how many tests it holds (never the
/// chain of ids it was made of); a single test its id.
pub fn test_name(r: &RunResult) -> String {
    match r.test_id.strip_prefix("merge-of-").and_then(|rest| rest.split_once('-')) {
        Some((n, first)) => {
            let n: usize = n.parse().unwrap_or(r.parts.len());
            format!("merge of {n} test{}, the first {first}", if n == 1 { "" } else { "s" })
        }
        None => r.test_id.clone(),
    }
}

/// What a result was aimed at: HTTP's URLs, else the target (and the peer it resolved to); a
/// fleet's or merge's tests against several servers name them all (the first four, and how
/// many more).
pub fn target(r: &RunResult) -> String {
    let p = &r.plan;
    let peers: std::collections::BTreeSet<&str> = r.parts.iter().map(|p| p.peer.as_str()).collect();
    if peers.len() > 1 {
        let named: Vec<&str> = peers.iter().take(4).copied().collect();
        let more = if peers.len() > 4 { format!(" and {} more", peers.len() - 4) } else { String::new() };
        return format!("{} servers: {}{more}", peers.len(), named.join(", "));
    }
    if p.profile.workload.aims_at_urls() {
        return p.aimed_at();
    }
    if p.peer.is_empty() || p.peer.starts_with("0.0.0.0") || p.peer == p.target {
        p.target.clone()
    } else {
        format!("{} ({})", p.target, p.peer)
    }
}

/// The name a run goes by beside others: its `--label`, else the file it was read from.
pub fn run_name(r: &RunResult, file: &str) -> String {
    r.label.clone().unwrap_or_else(|| {
        std::path::Path::new(file).file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| file.into())
    })
}

/// The congestion control of the TCP senders of `way`: the profile's (`-C`), else the sending
/// host's default as its result recorded it; `None` for UDP traffic or when neither is known.
pub fn congestion(r: &RunResult, way: netblast_spec::profile::Way) -> Option<String> {
    if r.plan.profile.workload.uses_udp() {
        return None;
    }
    let host = match way {
        netblast_spec::profile::Way::Up => Some(&r.client),
        netblast_spec::profile::Way::Down => r.server.as_ref(),
    };
    r.plan
        .profile
        .tcp
        .congestion
        .clone()
        .or_else(|| host.and_then(|h| h.tcp.as_ref()).map(|t| t.congestion_control.clone()).filter(|c| !c.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_is_relative_to_the_base() {
        assert_eq!(change_percent(100.0, 110.0), Some(10.0));
        assert_eq!(change_percent(200.0, 100.0), Some(-50.0));
        assert_eq!(change_percent(0.0, 5.0), None);
    }
}
