//! Latency probes beside a test (`--latency-probe`): an idle phase, then the load, split
//! into idle and loaded round trips on a probe flow of its own, in every rendering.

use crate::util::{self, Server};
use std::time::Duration;

/// `run` with these arguments against `srv`, as JSON, exit 0.
fn run_json(srv: &Server, args: &[&str]) -> serde_json::Value {
    let o = util::run_cmd().args(args).args(["-J", "--target", &srv.addr.to_string()]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", util::said(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn probes_beside_bulk_split_idle_from_loaded() {
    let srv = Server::start("127.0.0.1:0").unwrap();
    let r = run_json(&srv, &["-P", "2", "-t", "2s", "--latency-probe", "20/s", "--idle", "1s"]);
    let lp = &r["latency_probe"];
    assert_eq!(lp["protocol"], "tcp");
    assert_eq!(lp["idle_s"].as_f64(), Some(1.0));
    // 20 a second: 1 s idle, 2 s loaded (a late answer skips its slot, never adds one).
    let idle = lp["idle"]["count"].as_u64().unwrap();
    let loaded = lp["loaded"]["count"].as_u64().unwrap();
    assert!((15..=21).contains(&idle), "{idle} idle round trips at 20/s for 1 s");
    assert!((30..=41).contains(&loaded), "{loaded} loaded round trips at 20/s for 2 s");
    assert!(lp["idle"]["hist"].is_object() && lp["loaded"]["hist"].is_object(), "{lp}");
    let added = lp["added_p50_ns"].as_i64().unwrap();
    let (i50, l50) = (lp["idle"]["p50_ns"].as_i64().unwrap(), lp["loaded"]["p50_ns"].as_i64().unwrap());
    assert_eq!(added, l50 - i50);
    assert!(lp["rpm_loaded"].as_f64().unwrap() > 0.0);
    // The phases in time order, on the load's axis: the idle phase before 0.
    let ivs = lp["intervals"].as_array().unwrap();
    let phases: Vec<&str> = ivs.iter().map(|i| i["phase"].as_str().unwrap()).collect();
    assert_eq!(phases.iter().filter(|p| **p == "idle").count(), 1, "{phases:?}");
    assert_eq!(phases.iter().filter(|p| **p == "loaded").count(), 2, "{phases:?}");
    assert_eq!(ivs[0]["start_s"].as_f64(), Some(-1.0));
    let per_interval: u64 =
        ivs.iter().filter(|i| i["phase"] != "after").map(|i| i["round_trips"].as_u64().unwrap()).sum();
    assert_eq!(per_interval, idle + loaded, "the intervals add up to the phases");
    // The probe's flow is none of the load's: two streams, and their bytes only.
    assert_eq!(r["streams"].as_array().unwrap().len(), 2);
    assert!(r["complete"].as_bool().unwrap(), "{}", r["errors"]);
    assert!(r["plan"]["profile"]["description"].as_str().unwrap().contains("latency probes over TCP at 20/s"));
}

#[test]
fn probes_render_in_text_and_go_over_udp() {
    let srv = Server::start("127.0.0.1:0").unwrap();
    let dir = util::tempdir::Dir::new("latency-probe");
    let out = dir.path().join("r.json");
    let o = util::run_cmd()
        .args(["--profile", "pps-8core", "-t", "1s", "--latency-probe", "10/s", "--probe-udp", "--target"])
        .arg(srv.addr.to_string())
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", util::said(&o));
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    // The idle phase's lines come before the load's, and the summary says what the load added.
    let first_probe = text.find("[probe]").expect(&text);
    assert!(text[first_probe..].starts_with("[probe]  -2.00 to -1.00"), "{text}");
    let line = text.lines().find(|l| l.starts_with("Latency probe (UDP at 10/s): idle ")).expect(&text);
    assert!(line.contains("added by load at p50") && line.contains("RPM"), "{line}");
    let r = util::json_file(&out);
    assert_eq!(r["latency_probe"]["protocol"], "udp");
    assert!(r["latency_probe"]["loaded"]["count"].as_u64().unwrap() >= 5, "{}", r["latency_probe"]);
    // The report of the file says the same.
    let rep = util::bin().arg("report").arg(&out).output().unwrap();
    assert_eq!(rep.status.code(), Some(0), "{}", util::said(&rep));
    let rep = String::from_utf8_lossy(&rep.stdout);
    assert!(rep.contains("[probe]  -2.00 to -1.00") && rep.contains(line), "{rep}");
}

#[test]
fn probe_settings_are_checked() {
    let cases: &[(&[&str], &str)] = &[
        (&["--idle", "1s"], "--idle"),
        (&["--probe-udp"], "--probe-udp"),
        (&["--latency-probe", "5000/s"], "run.latency_probe.rate"),
        (&["--latency-probe", "--idle", "1500ms"], "run.latency_probe.idle"),
        (&["--latency-probe", "--url", "http://127.0.0.1:9/"], "run.latency_probe"),
    ];
    for (args, names) in cases {
        let o = util::run_cmd().args(*args).args(["--target", "127.0.0.1:9"]).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", util::said(&o));
        assert!(util::said(&o).contains(names), "{args:?}: {}", util::said(&o));
    }
    // A server that is not there: the probe cannot start, and the run says so at once.
    let t = std::time::Instant::now();
    let o = util::run_cmd().args(["--latency-probe", "--target", "127.0.0.1:9"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", util::said(&o));
    assert!(util::said(&o).contains("127.0.0.1:9"), "{}", util::said(&o));
    assert!(t.elapsed() < Duration::from_secs(10));
}

#[test]
fn a_bulk_page_draws_the_rrul_picture_in_headless_chromium() {
    use crate::browser::{browse, figure, marks, row_cells, table};
    let srv = Server::start("127.0.0.1:0").unwrap();
    let dir = util::tempdir::Dir::new("latency-page");
    let (json, page) = (dir.path().join("r.json"), dir.path().join("r.html"));
    let o = util::run_cmd()
        .args(["-P", "2", "-t", "2s", "--latency-probe", "20/s", "--idle", "1s", "-q", "--target"])
        .arg(srv.addr.to_string())
        .arg("-o")
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", util::said(&o));
    let rep = util::bin().arg("report").arg(&json).arg("--html").arg(&page).output().unwrap();
    assert_eq!(rep.status.code(), Some(0), "{}", util::said(&rep));
    let r = util::json_file(&json);
    let (dom, _) = browse(&page, dir.path());
    // The probe's round trips over time, the load's start and end marked, under a throughput
    // chart drawn from the idle phase on: flent's RRUL picture.
    assert!(marks(&dom, "chart-probe") >= 2, "the probe chart draws nothing");
    let probe = figure(&dom, "chart-probe");
    assert!(probe.contains("probe p50") && probe.contains("probe p99"), "{probe}");
    assert!(probe.contains("load starts") && probe.contains("load ends"), "{probe}");
    let thr = figure(&dom, "chart-throughput");
    assert!(thr.contains("load starts") && thr.contains(">-1<"), "the throughput axis starts in the idle phase: {thr}");
    // The headline figures hold the probes' own, as the JSON says them.
    let ns = |v: &serde_json::Value| netblast_spec::units::fmt_ns(v.as_f64().unwrap());
    let figures = table(&dom, "figures");
    let loaded = row_cells(figures, "data-metric=\"loaded.p50\"");
    assert_eq!(loaded[1], ns(&r["latency_probe"]["loaded"]["p50_ns"]), "{loaded:?}");
    assert!(row_cells(figures, "data-metric=\"added.p50\"")[0].starts_with("latency added by load p50"));
    assert!(dom.contains("latency under load: "), "the probes' verdict");
}
