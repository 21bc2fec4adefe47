//! `truth.find_max.*`: the search (`run --find-max`) against capacities made on purpose, its
//! answer and the lowest rate that failed held against the capacity each was made with (see
//! [`bracket`]): nginx `limit_req` at 2 000 r/s; UDP through a `tbf` of 200 Mbit/s (the rate
//! less headers); HTTP responses of a known size through a `tbf` of 50 Mbit/s (the rate over the
//! bytes each response puts on the wire, read from the veth's counter); cps against nftables
//! `limit rate` on SYNs at 1 000/s; and a target faster than the generator on this host, whose
//! answer must be the generator's. Namespaces, tbf and nftables need root; nginx must be
//! installed.

use netblast_benches::netns::{Pair, counters, inside};
use netblast_benches::truth::{self, Tolerance};
use netblast_benches::{ServerIn, profile, secs};
use netblast_probe::Probe;
use netblast_spec::assert::Assertion;
use netblast_spec::find_max::{Axis, LimitedBy, Search, Steps};
use netblast_spec::profile::{Overrides, Workload};
use netblast_spec::units::{BitRate, BitRateArg, Dur, Rate};
use netblast_spec::{Profile, RunResult};
use std::time::Duration;

/// A search of `base` against `target` over `low..high` on `axis`: the written result.
fn search(axis: Axis, range: (f64, f64), asserts: &[&str], base: Profile, target: String) -> Result<RunResult, String> {
    let assertions: Vec<Assertion> = asserts.iter().map(|a| Assertion::parse(a)).collect::<Result<_, _>>()?;
    // Each step's judged span: the bench's run length, at least a second.
    // 3 s at the least: with 1 s steps the http_tbf and cps_syn_limit searches ended at the
    // generator (seen at NETBLAST_BENCH_SECS=1, the suite's; not yet explained).
    let step_s = secs().as_secs_f64().max(3.0);
    let steps = Steps { axis, warmup_s: 1.0, step_s, assertions: &assertions, workload: &base.workload };
    let mut search = Search::new(range.0, range.1, 0.05)?;
    let probe = Probe::tcp_info();
    let (runs, err) = steps.drive(
        &mut search,
        &mut |asked, secs| {
            // The step's rate as `run --find-max` sets it: the kind's own --rate or -b.
            let mut p = base.clone();
            let mut o = Overrides::default();
            match axis {
                Axis::Rate => o.shared.rate = Some(format!("{asked}")),
                Axis::Bitrate => o.shared.bitrate = Some(BitRateArg::one(BitRate(asked))),
            }
            o.shared.duration = Some(Dur(Duration::from_secs_f64(secs)));
            o.apply(&mut p, "bench").map_err(|e| e.to_string())?;
            p.validate("bench").map_err(|e| e.to_string())?;
            netblast_engine::run::plan_and_run(p, "bench", &target, &probe, &Default::default())
                .map_err(|e| e.to_string())
        },
        &|| false,
        &mut |search, _| {
            let Some(s) = search.steps().last() else { return };
            eprintln!(
                "  find-max step {}: {:.0} offered, {:.0} taken: {:?}, {}",
                s.n, s.offered, s.achieved, s.outcome, s.cause
            )
        },
    );
    if let Some(e) = err {
        return Err(e);
    }
    steps.finish(&search, &runs, false).ok_or_else(|| "the search ran no step".to_string())
}

/// The answer of a search result and who limited it.
fn answer(r: &RunResult) -> (f64, Option<LimitedBy>, String) {
    let f = r.find_max.as_deref();
    (
        f.and_then(|f| f.rate).unwrap_or(f64::NAN),
        f.and_then(|f| f.limited_by),
        f.map(|f| f.sentence()).unwrap_or_default().chars().take(160).collect(),
    )
}

/// How near a search must measure a limit made on purpose (5%).
const TOL: f64 = 0.05;

/// `name`: a search's answer against the limit `limit` made on purpose. The search stops when
/// the lowest rate that failed is within its resolution above the highest that held, so a limit
/// measured within [`TOL`] puts the answer (the highest that held) in limit × (1 − TOL) / (1 +
/// resolution) ..= limit × (1 + TOL), and the lowest rate that failed at limit × (1 − TOL) or
/// above (`name.failed_at`: a search that failed a rate the target carries fails there).
fn bracket(name: &str, r: &RunResult, limit: f64, unit: &str, what: &str) {
    let f = r.find_max.as_deref();
    let res = f.map(|f| f.resolution).unwrap_or(0.0);
    let (rate, _, sentence) = answer(r);
    let failed = f.and_then(|f| f.failed_at).unwrap_or(f64::NAN);
    let under = (1.0 - TOL) / (1.0 + res) - 1.0;
    truth::check(name, rate, limit, unit, Tolerance::RelRange(under, TOL), &format!("{what}: {sentence}"));
    truth::check(
        &format!("{name}.failed_at"),
        failed,
        limit,
        unit,
        Tolerance::RelRange(-TOL, (1.0 + TOL) * (1.0 + res) - 1.0),
        &format!("{what}: the lowest rate that did not hold, not under the limit by more than 5%"),
    );
}

/// `truth.attribution.*` (below), then `truth.find_max.*`: nginx's and the generator's (no
/// root), the namespaces' (root).
pub(crate) fn truth_find_max(server: &netblast_benches::LocalServer, cpus: usize) -> Result<(), String> {
    if truth::section_wanted("truth.attribution") {
        crate::truth_attribution::truth_attribution(server, cpus)?;
    }
    if !truth::section_wanted("truth.find_max") {
        return Ok(());
    }
    if truth::wanted("truth.find_max.nginx_limit_req") {
        nginx_limit_req()?;
    }
    if truth::wanted("truth.find_max.generator") {
        generator(cpus)?;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        for name in ["truth.find_max.udp_tbf", "truth.find_max.http_tbf", "truth.find_max.cps_syn_limit"] {
            truth::skip(name, "needs root (network namespaces, tbf, nftables)");
        }
        return Ok(());
    }
    if truth::wanted("truth.find_max.udp_tbf") {
        udp_tbf()?;
    }
    if truth::wanted("truth.find_max.http_tbf") {
        http_tbf()?;
    }
    if truth::wanted("truth.find_max.cps_syn_limit") {
        cps_syn_limit()?;
    }
    Ok(())
}

fn nginx_limit_req() -> Result<(), String> {
    if std::process::Command::new("nginx").arg("-v").output().is_err() {
        truth::skip("truth.find_max.nginx_limit_req", "nginx is not installed");
        return Ok(());
    }
    let nginx = netblast_benches::Nginx::start("2000r/s", None)?;
    let p1 = nginx.http;
    let base = profile("http-max", |p| {
        if let Some(h) = p.workload.http_mut() {
            h.urls = vec!["/limited".into()];
            h.rate = Some(Rate(100.0));
        }
    })?;
    let r = search(Axis::Rate, (100.0, 50_000.0), &["http.failed<=1%"], base, format!("127.0.0.1:{p1}"));
    let r = r?;
    bracket("truth.find_max.nginx_limit_req", &r, 2000.0, "req/s", "nginx limit_req 2000r/s burst 20, http.failed<=1%");
    Ok(())
}

fn generator(cpus: usize) -> Result<(), String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let web = netblast_agent::Background::http(l, None, Default::default(), cpus).map_err(|e| e.to_string())?;
    let base = profile("http-max", |p| {
        if let Some(h) = p.workload.http_mut() {
            h.rate = Some(Rate(100.0));
        }
    })?;
    let r = search(Axis::Rate, (5_000.0, 20_000_000.0), &["http.failed<=1%"], base, web.addr().to_string())?;
    let (_, by, sentence) = answer(&r);
    truth::check(
        "truth.find_max.generator",
        f64::from(u8::from(by == Some(LimitedBy::Generator))),
        1.0,
        "",
        Tolerance::Abs(0.0),
        &format!(
            "netblast's own responder on this host, beyond what the host can offer: the generator named: {sentence}"
        ),
    );
    Ok(())
}

fn udp_tbf() -> Result<(), String> {
    // The bottleneck on a router between the two (on the sender's own interface a full queue
    // holds the sending socket back instead of dropping).
    let ns = Pair::routed()?;
    ns.tc(ns.middle(), &format!("qdisc add dev {} root tbf rate 200mbit burst 32kb latency 20ms", ns.toward_b()))?;
    let server = ServerIn::start(&ns.b)?;
    let target = format!("{}:{}", ns.addr_b, server.port);
    let base = profile("udp-1g", |p| {
        if let Some(m) = p.workload.msgrate_mut() {
            m.bitrate = Some(BitRate(10e6));
            m.msg_bytes = netblast_spec::units::ByteSize(1400);
        }
    })?;
    let r = inside(&ns.a, move || search(Axis::Bitrate, (50e6, 800e6), &["lost<=0.1%"], base, target))??;
    // tbf counts each datagram's frame: 1400 bytes of payload, 8 UDP, 20 IPv4, 14 Ethernet.
    let payload = 200e6 * 1400.0 / 1442.0;
    bracket(
        "truth.find_max.udp_tbf",
        &r,
        payload,
        "bit/s",
        "UDP 1400 B through tbf 200mbit, lost<=0.1%: the rate less headers",
    );
    Ok(())
}

fn http_tbf() -> Result<(), String> {
    let ns = Pair::create()?;
    let web = ServerIn::http(&ns.b)?;
    let target = format!("{}:{}", ns.addr_b, web.port);
    let dev = ns.veth(&ns.b);
    let base = profile("http-max", |p| {
        if let Some(h) = p.workload.http_mut() {
            h.urls = vec!["/?size=16384".into()];
            h.rate = Some(Rate(100.0));
        }
    })?;
    // The bytes a response puts on the wire from the server's side: its veth's counter over a
    // short run at a low rate, per response.
    let mut cal = base.clone();
    cal.run.duration = Some(Dur(Duration::from_secs(2)));
    let (t2, d2) = (target.clone(), dev.clone());
    let per_response = inside(&ns.b, move || counters(&d2))??;
    let r = inside(&ns.a, move || {
        netblast_engine::run::plan_and_run(cal, "bench", &t2, &Probe::tcp_info(), &Default::default())
            .map_err(|e| e.to_string())
    })??;
    let (d3, before) = (dev.clone(), per_response.tx_bytes);
    let after = inside(&ns.b, move || counters(&d3))??.tx_bytes;
    let responses = r.summary.http.as_ref().map(|h| h.succeeded).unwrap_or(0);
    if responses == 0 {
        return Err("the calibration run got no response".into());
    }
    let bytes = (after - before) as f64 / responses as f64;
    ns.tc(&ns.b, &format!("qdisc add dev {dev} root tbf rate 50mbit burst 64kb latency 100ms"))?;
    let r = inside(&ns.a, move || search(Axis::Rate, (20.0, 5_000.0), &["p99<=50ms"], base, target))??;
    bracket(
        "truth.find_max.http_tbf",
        &r,
        50e6 / 8.0 / bytes,
        "resp/s",
        &format!("16 KiB responses ({bytes:.0} B each on the wire) through tbf 50mbit, p99<=50ms"),
    );
    Ok(())
}

fn cps_syn_limit() -> Result<(), String> {
    let ns = Pair::create()?;
    ns.nft(&ns.b, "add table inet nbbcap")?;
    ns.nft(&ns.b, "add chain inet nbbcap input { type filter hook input priority 0 ; }")?;
    ns.nft(
        &ns.b,
        "add rule inet nbbcap input tcp flags & (syn | ack) == syn limit rate over 1000/second burst 20 packets drop",
    )?;
    let server = ServerIn::start(&ns.b)?;
    let target = format!("{}:{}", ns.addr_b, server.port);
    let base = profile("cps", |p| {
        if let Workload::Cps(c) = &mut p.workload {
            c.rate = Some(Rate(100.0));
            c.flows = Some(32);
            c.timeout = Some(Dur(Duration::from_millis(200)));
        }
    })?;
    let r = inside(&ns.a, move || search(Axis::Rate, (100.0, 20_000.0), &["lost<=1%"], base, target))??;
    bracket(
        "truth.find_max.cps_syn_limit",
        &r,
        1000.0,
        "conn/s",
        "nftables limit rate 1000/second on SYNs, a 200 ms connect timeout, lost<=1%",
    );
    Ok(())
}
