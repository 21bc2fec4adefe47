//! `truth.campaign.*`: a campaign's intervals against a difference made on purpose. One TCP
//! flow through a router whose `tbf` is set, before each run, to its cell's rate: 100 Mbit/s,
//! 110 Mbit/s, and 100 Mbit/s again, five runs each in the campaign's shuffled rounds. The
//! summary must call 110 against 100 a difference whose interval holds +10% (the rates' own
//! ratio: the same headers on both), and the two cells of 100 Mbit/s no difference. Needs root
//! (namespaces, tbf).

use netblast_benches::netns::{Pair, inside};
use netblast_benches::truth::{self, Tolerance};
use netblast_benches::{ServerIn, profile, secs};
use netblast_probe::Probe;
use netblast_spec::campaign::Campaign;
use netblast_spec::campaign::summary::{Digest, RunOutcome, summarize};
use netblast_spec::units::Dur;
use std::collections::BTreeMap;
use std::time::Duration;

/// The campaign: the cell's label names its tbf rate.
const FILE: &str = "repeats = 5\nseed = 7\n[axes]\nlabel = [\"100mbit\", \"110mbit\", \"100mbit-again\"]\n";

/// `truth.campaign.tbf_difference` and `truth.campaign.identical_cells`.
pub(crate) fn truth_campaign() -> Result<(), String> {
    let names = ["truth.campaign.tbf_difference", "truth.campaign.identical_cells"];
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        for n in names {
            truth::skip(n, "needs root (network namespaces, tbf)");
        }
        return Ok(());
    }
    let campaign = Campaign::parse(FILE, "truth.campaign").map_err(|e| e.to_string())?;
    let cells = campaign.cells();
    let ns = Pair::routed()?;
    let qdisc = |rate: &str, verb: &str| {
        ns.tc(ns.middle(), &format!("qdisc {verb} dev {} root tbf rate {rate} burst 32kb latency 20ms", ns.toward_b()))
    };
    qdisc("100mbit", "add")?;
    let server = ServerIn::start(&ns.b)?;
    let target = format!("{}:{}", ns.addr_b, server.port);
    // Slow start left out: what is compared is the rate the bucket holds.
    let base = profile("bulk-1flow", |p| {
        p.run.duration = Some(Dur(secs().max(Duration::from_secs(2))));
        p.run.interval = Some(Dur(Duration::from_millis(500)));
        p.run.omit = Some(Dur(Duration::from_millis(500)));
    })?;
    let mut runs = BTreeMap::new();
    for id in campaign.schedule() {
        let label = cells[id.cell - 1].get("label").map(|v| v.to_string()).unwrap_or_default();
        let rate = label.trim_end_matches("-again");
        qdisc(rate, "change")?;
        let (p, t) = (base.clone(), target.clone());
        let r = inside(&ns.a, move || {
            netblast_engine::run::plan_and_run(p, "bench", &t, &Probe::tcp_info(), &Default::default())
                .map_err(|e| e.to_string())
        })??;
        if !r.complete {
            return Err(format!("run {id:?} ({label}) incomplete: {:?}", r.errors.first().map(|e| &e.message)));
        }
        runs.insert(id, RunOutcome::Done(Digest::of(&r, netblast_report::verdict::causes(&r))));
    }
    drop(server);
    let s = summarize(&campaign, &runs);
    let change = |cell: &str| {
        s.comparisons
            .iter()
            .find(|c| c.cell == cell)
            .and_then(|c| c.changes.get("throughput").copied())
            .ok_or_else(|| format!("no throughput change for {cell}"))
    };
    let more = change("c002")?;
    let same = change("c003")?;
    let t = |c: &str| s.cell(c).and_then(|c| c.figures.get("throughput")).map(|f| f.median / 1e6).unwrap_or(0.0);
    let medians = format!("medians {:.2}, {:.2}, {:.2} Mbit/s", t("c001"), t("c002"), t("c003"));
    // The interval holds +10%: the truth is in [lo, hi], i.e. the measured change is within
    // (change − lo) below and (hi − change) above it.
    let held = more.differs && more.ci_low <= 0.10 && 0.10 <= more.ci_high;
    truth::check(
        names[0],
        if held { 0.10 } else { more.change },
        0.10,
        "",
        Tolerance::Abs(0.0),
        &format!("tbf 110 vs 100 Mbit/s, 5 runs each: {more} (a difference holding +10%); {medians}"),
    );
    truth::check(
        names[1],
        if same.differs { 1.0 } else { 0.0 },
        0.0,
        "",
        Tolerance::Abs(0.0),
        &format!("tbf 100 vs 100 Mbit/s, 5 runs each: {same} (no difference)"),
    );
    Ok(())
}
