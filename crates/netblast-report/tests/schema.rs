//! Results written by an older netblast read as this build's: every figure of a
//! `netblast.run/2` or /3 file is in the result read from it, none is invented, and the old
//! flat keys are gone (judged on the real /2 and /3 results of every kind in `testdata/`).

use netblast_spec::result::SCHEMA;
use serde_json::Value;

fn files(dir: &str) -> Vec<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
    let extra = if dir == "real" { vec![root.join("msgrate.json")] } else { Vec::new() };
    let mut v: Vec<_> = std::fs::read_dir(root.join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .chain(extra)
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    v.sort();
    v
}

/// Every leaf value of a document (numbers, strings, booleans), sorted, without its place.
fn leaves(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => o.values().for_each(|x| leaves(x, out)),
        Value::Array(a) => a.iter().for_each(|x| leaves(x, out)),
        x => out.push(x.to_string()),
    }
}

fn keys(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                out.push(k.clone());
                keys(x, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| keys(x, out)),
        _ => {}
    }
}

/// The keys of a stream's or way's message totals (the objects under `msgs` beside a `sender`).
fn totals_keys(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            if let (Some(_), Some(Value::Object(m))) = (o.get("sender"), o.get("msgs")) {
                out.extend(m.keys().cloned());
            }
            o.values().for_each(|x| totals_keys(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| totals_keys(x, out)),
        _ => {}
    }
}

#[test]
fn an_older_result_reads_with_every_figure_and_nothing_more() {
    for (dir, old_schema, least) in [("real", "netblast.run/2", 10), ("v3", "netblast.run/3", 12)] {
        let files = files(dir);
        assert!(files.len() >= least, "{files:?}");
        for f in files {
            read_every_figure(&f, old_schema);
        }
    }
}

/// Reads one older result and holds it to every figure kept, none invented, no old key left.
fn read_every_figure(f: &std::path::Path, old_schema: &str) {
    let text = std::fs::read_to_string(f).unwrap();
    let old: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(old["schema"], old_schema, "{f:?} is a {old_schema} fixture");
    let r = netblast_spec::upgrade::read_result(&text).unwrap_or_else(|e| panic!("{f:?}: {e}"));
    assert_eq!(r.schema, SCHEMA, "{f:?}: read as this build's schema");
    let new = serde_json::to_value(&r).unwrap();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    leaves(&old, &mut a);
    leaves(&new, &mut b);
    let schema = |v: &mut Vec<String>, s: &str| {
        let i = v.iter().position(|x| x == &format!("\"{s}\"")).unwrap();
        v.remove(i);
    };
    schema(&mut a, old_schema);
    schema(&mut b, SCHEMA);
    a.sort();
    b.sort();
    assert_eq!(a, b, "{f:?}: the same figures, moved");
    let mut k = Vec::new();
    keys(&new, &mut k);
    let flat: Vec<&String> = k
        .iter()
        .filter(|k| (k.ends_with("_hist") && *k != "rtt_hist") || k.ends_with("_msgs") || k.ends_with("_msgs_per_s"))
        .collect();
    assert!(flat.is_empty(), "{f:?}: /2 keys left: {flat:?}");
    let mut t = Vec::new();
    totals_keys(&new, &mut t);
    let bag: Vec<&String> = t
        .iter()
        .filter(|k| {
            ["segs_out", "segs_out_per_s", "wire_packets", "wire_packets_per_s", "kernel_drops", "rcvbuf"]
                .contains(&k.as_str())
        })
        .collect();
    assert!(bag.is_empty(), "{f:?}: /3 totals keys left: {bag:?}");
}

#[test]
fn totals_land_in_their_kinds_types() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/v3");
    let read = |name: &str| {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        (serde_json::from_str::<Value>(&text).unwrap(), netblast_spec::upgrade::read_result(&text).unwrap())
    };
    let (old, r) = read("pps.json");
    let (o, tcp) = (&old["summary"]["ways"][0]["msgs"], r.summary.ways[0].msgs.unwrap().tcp.unwrap());
    assert_eq!(tcp.segs_out, o["segs_out"].as_u64().unwrap());
    assert_eq!(tcp.segs_out_per_s, o["segs_out_per_s"].as_f64().unwrap());
    assert_eq!(tcp.wire_packets, o["wire_packets"].as_u64());
    assert_eq!(tcp.wire_packets_per_s, o["wire_packets_per_s"].as_f64());
    let (old, r) = read("udp1g.json");
    let (o, udp) = (&old["summary"]["ways"][0]["msgs"], r.summary.ways[0].msgs.unwrap().udp.unwrap());
    assert_eq!(udp.kernel_drops, o["kernel_drops"].as_u64());
    assert_eq!(udp.rcvbuf, o["rcvbuf"].as_u64());
    let q = udp.quality.unwrap();
    assert_eq!((q.lost, q.received), (o["udp"]["lost"].as_i64().unwrap(), o["udp"]["received"].as_u64().unwrap()));
    assert_eq!(q.jitter_ns, o["udp"]["jitter_ns"].as_f64().unwrap());
    // An interval keeps its /3 figures: its datagram quality is still `msgs.udp`.
    let oi = &old["intervals"][0]["sums"][0]["msgs"]["udp"];
    assert_eq!(r.intervals[0].sums[0].msgs.as_ref().unwrap().udp.unwrap().received, oi["received"].as_u64().unwrap());
}

#[test]
fn figures_land_where_version_3_keeps_them() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/real");
    let text = std::fs::read_to_string(dir.join("rr.json")).unwrap();
    let old: Value = serde_json::from_str(&text).unwrap();
    let r = netblast_spec::upgrade::read_result(&text).unwrap();
    let (ow, w) = (&old["summary"]["ways"][0], &r.summary.ways[0]);
    let lat = w.latency.as_ref().unwrap();
    assert_eq!(lat.p99_ns, ow["latency"]["p99_ns"].as_u64().unwrap());
    let h = lat.histogram().expect("the histogram moved inside the latency");
    assert_eq!(h.len(), ow["latency_hist"]["count"].as_u64().unwrap());
    for (i, iv) in r.intervals.iter().enumerate() {
        let (o, s) = (&old["intervals"][i]["sums"][0], &iv.sums[0]);
        let m = s.msgs.as_ref().unwrap();
        assert_eq!(m.sent, o["sent_msgs"].as_u64().unwrap(), "interval {i}");
        assert_eq!(m.sent_per_s, o["sent_msgs_per_s"].as_f64(), "interval {i}");
        assert_eq!(m.received, o["received_msgs"].as_u64(), "interval {i}");
    }
    let http = std::fs::read_to_string(dir.join("http.json")).unwrap();
    let old: Value = serde_json::from_str(&http).unwrap();
    let r = netblast_spec::upgrade::read_result(&http).unwrap();
    let (oh, h) = (&old["summary"]["http"], r.summary.http.as_ref().unwrap());
    assert_eq!(h.tls, oh["tls"].as_bool().unwrap(), "the TLS flag is not a phase");
    let ttfb = h.phases.ttfb.as_ref().unwrap();
    assert_eq!(ttfb.hist.as_ref().unwrap().count, oh["phases"]["ttfb_hist"]["count"].as_u64().unwrap());
}
