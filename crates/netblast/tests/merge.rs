//! `netblast merge`: results of concurrent runs merge exactly.

use crate::util::{self, KillOnDrop};
use netblast_spec::RunResult;
use netblast_spec::hist::{Distribution, hist_of};
use std::path::PathBuf;
use std::time::Duration;

fn read(p: &PathBuf) -> RunResult {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

fn count(d: &Option<Distribution>) -> u64 {
    hist_of(d).map(|h| h.decode().unwrap().len()).unwrap_or(0)
}

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("nb-merge-{}-{name}", std::process::id()))
}

/// Two clients run at once against one serve, each writing its result; `netblast merge` of
/// the two: bytes and histogram counts add up exactly, intervals cover the same spans.
#[test]
fn two_concurrent_runs_merge_exactly() {
    let (server, addr) = util::spawn_server();
    let _server = KillOnDrop(server);
    let start = format!("{:.3}", netblast_engine::exec::clock::now_unix_ns() as f64 / 1e9 + 2.0);
    let (a, b, m) = (tmp("a.json"), tmp("b.json"), tmp("m.json"));
    let spawn = |out: &PathBuf, extra: &[&str]| {
        util::run_cmd()
            .args(["--target", &addr.to_string(), "-t", "2", "-i", "500ms", "--start-at", &start, "-o"])
            .arg(out)
            .args(["--json"])
            .args(extra)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    // Two rr tests (latency histograms in every interval) from two processes; blocking waits,
    // as two busy-polling flows at once are more than a 2-CPU server takes.
    let ca = spawn(&a, &["--profile", "latency", "--flows", "1", "--wait", "block"]);
    let cb = spawn(&b, &["--profile", "latency", "--flows", "1", "--req-size", "100", "--wait", "block"]);
    for c in [ca, cb] {
        let out = util::wait_output(c, Duration::from_secs(30));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let merge = util::bin().args(["merge"]).arg(&a).arg(&b).arg("-o").arg(&m).output().unwrap();
    assert!(merge.status.success(), "{}", String::from_utf8_lossy(&merge.stderr));
    let (ra, rb, rm) = (read(&a), read(&b), read(&m));
    assert_eq!(ra.start_unix_ns, rb.start_unix_ns, "both started at --start-at");
    assert_eq!(rm.start_unix_ns, ra.start_unix_ns);
    let way = |r: &RunResult| r.summary.ways[0].clone();
    let (wa, wb, wm) = (way(&ra), way(&rb), way(&rm));
    let recv = |w: &netblast_spec::result::WaySummary| w.receiver.unwrap().bytes;
    assert!(recv(&wa) > 0 && recv(&wb) > 0);
    assert_eq!(recv(&wm), recv(&wa) + recv(&wb), "receiver bytes add up exactly");
    assert_eq!(wm.sender.bytes, wa.sender.bytes + wb.sender.bytes);
    assert_eq!(count(&wm.latency), count(&wa.latency) + count(&wb.latency));
    assert_eq!(wm.msgs.unwrap().sent, wa.msgs.unwrap().sent + wb.msgs.unwrap().sent);
    for (i, iv) in rm.intervals.iter().enumerate() {
        let parts: Vec<_> = [&ra, &rb].iter().filter_map(|r| r.intervals.get(i)).cloned().collect();
        for p in &parts {
            assert_eq!(p.index, iv.index);
            assert!((p.start_s - iv.start_s).abs() < 1e-9, "interval {i}: same start");
        }
        let sum: u64 = parts.iter().map(|p| count(&p.sums[0].latency)).sum();
        assert_eq!(count(&iv.sums[0].latency), sum, "interval {i}: histogram counts add up");
        let bytes: u64 = parts.iter().map(|p| p.sums[0].received_bytes.unwrap()).sum();
        assert_eq!(iv.sums[0].received_bytes, Some(bytes), "interval {i}: bytes add up");
    }
    assert_eq!(rm.parts.len(), 2);
    assert_eq!(rm.streams.len(), 2);
    assert_ne!(rm.streams[0].id, rm.streams[1].id, "stream ids unique in the merge");
    // The report renders the merge with its per-test table.
    let rep = util::bin().args(["report"]).arg(&m).output().unwrap();
    let text = String::from_utf8_lossy(&rep.stdout);
    assert!(rep.status.success(), "{}", String::from_utf8_lossy(&rep.stderr));
    assert!(text.contains("Merged 2 tests"), "{text}");
    for f in [a, b, m] {
        let _ = std::fs::remove_file(f);
    }
}

#[test]
fn results_that_cannot_be_aligned_are_refused_naming_the_input() {
    let (server, addr) = util::spawn_server();
    let _server = KillOnDrop(server);
    let now = netblast_engine::exec::clock::now_unix_ns() as f64 / 1e9;
    let (a, b) = (tmp("ua.json"), tmp("ub.json"));
    let clients: Vec<_> = [(&a, now + 2.0), (&b, now + 2.25)]
        .into_iter()
        .map(|(out, at)| {
            util::run_cmd()
                .args(["--target", &addr.to_string(), "-t", "1", "--json", "--start-at", &format!("{at:.3}"), "-o"])
                .arg(out)
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in clients {
        let out = util::wait_output(c, Duration::from_secs(30));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let out = util::bin().args(["merge"]).arg(&a).arg(&b).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("off the interval grid") && err.contains(b.to_str().unwrap()), "{err}");
    for f in [a, b] {
        let _ = std::fs::remove_file(f);
    }
}

/// A result written by netblast 0.1 (schema netblast.run/1) still renders.
#[test]
fn report_reads_version_1_results() {
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/bulk-v1.json");
    let out = util::bin().args(["report", fixture]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("sender") && text.contains("receiver"), "{text}");
    let merge = util::bin().args(["merge", fixture, fixture]).output().unwrap();
    assert_eq!(merge.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&merge.stderr).contains("netblast.run/1"));
    // Its `delivery_rate_bps` held bytes/s under a bits name: read as the bytes field, and the
    // CSV (bits/s) is eight times it.
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    let written: Vec<u64> = v["intervals"][0]["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["tcp"]["delivery_rate_bps"].as_u64().unwrap())
        .collect();
    let r: netblast_spec::RunResult = serde_json::from_value(v).unwrap();
    let read: Vec<u64> =
        r.intervals[0].streams.iter().map(|s| s.tcp.as_ref().unwrap().delivery_rate_bytes_per_s).collect();
    assert_eq!(read, written);
    assert_eq!(read[0], 3_246_059_103);
    let csv = util::bin().args(["report", "--csv", "streams", fixture]).output().unwrap();
    let csv = String::from_utf8_lossy(&csv.stdout);
    assert!(csv.contains(&format!(",{},", 3_246_059_103u64 * 8)), "{csv}");
}
