//! Results written by an older netblast read as this build's: every figure of a
//! `netblast.run/2` file is in the result read from it, none is invented, and the old flat
//! keys are gone (judged on the real /2 results of every kind in `testdata/`).

use netblast_spec::result::SCHEMA;
use serde_json::Value;

fn v2_files() -> Vec<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
    let mut v: Vec<_> = std::fs::read_dir(root.join("real"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .chain([root.join("msgrate.json")])
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

#[test]
fn a_version_2_result_reads_with_every_figure_and_nothing_more() {
    let files = v2_files();
    assert!(files.len() >= 10, "{files:?}");
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let old: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(old["schema"], "netblast.run/2", "{f:?} is a /2 fixture");
        let r = netblast_spec::upgrade::read_result(&text).unwrap_or_else(|e| panic!("{f:?}: {e}"));
        assert_eq!(r.schema, SCHEMA, "{f:?}: read as /3");
        let new = serde_json::to_value(&r).unwrap();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        leaves(&old, &mut a);
        leaves(&new, &mut b);
        let schema = |v: &mut Vec<String>, s: &str| {
            let i = v.iter().position(|x| x == &format!("\"{s}\"")).unwrap();
            v.remove(i);
        };
        schema(&mut a, "netblast.run/2");
        schema(&mut b, SCHEMA);
        a.sort();
        b.sort();
        assert_eq!(a, b, "{f:?}: the same figures, moved");
        let mut k = Vec::new();
        keys(&new, &mut k);
        let flat: Vec<&String> = k
            .iter()
            .filter(|k| {
                (k.ends_with("_hist") && *k != "rtt_hist") || k.ends_with("_msgs") || k.ends_with("_msgs_per_s")
            })
            .collect();
        assert!(flat.is_empty(), "{f:?}: /2 keys left: {flat:?}");
    }
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
