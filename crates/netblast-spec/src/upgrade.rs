//! Reading documents written by older netblast: a `netblast.run/3`, /2 (or /1) result, and
//! the intervals and results inside an older partial or fleet log, brought to the /4 form
//! before they are read as this build's types.
//!
//! /4 moved a message kind's totals out of one bag into their own types, it did not change
//! them: a stream's or way's `msgs.segs_out`, `segs_out_per_s`, `wire_packets`,
//! `wire_packets_per_s` went under `msgs.tcp`; `msgs.kernel_drops` and `rcvbuf` under
//! `msgs.udp`, and the datagram quality that was `msgs.udp` to `msgs.udp.quality`. Intervals
//! are as in /3.
//!
//! /3 moved figures, it did not change them: an interval's `sent_msgs`, `received_msgs`,
//! `segs_out`, `udp`, `failed` (and a way's rates) went under `msgs` as `sent`, `received`, ...;
//! every `X_hist` beside a distribution `X` went inside it as `X.hist`. The upgrade goes by
//! shape, not by the schema string (an interval record carries none): a /4 document has none of
//! the old keys, so upgrading it changes nothing.

use crate::result::{RunResult, SCHEMA, SCHEMA_V2, SCHEMA_V3};
use serde_json::{Map, Value};

/// The distributions that /2 stored beside their histogram (`X` and `X_hist`).
const DISTRIBUTIONS: [&str; 8] = ["latency", "kernel_rtt", "srtt", "connect", "tls", "ttfb", "body", "send_lag"];

/// An interval's flat /2 message keys and their /3 names under `msgs`.
const MSG_KEYS: [(&str, &str); 8] = [
    ("sent_msgs", "sent"),
    ("sent_msgs_per_s", "sent_per_s"),
    ("received_msgs", "received"),
    ("received_msgs_per_s", "received_per_s"),
    ("segs_out", "segs_out"),
    ("segs_out_per_s", "segs_out_per_s"),
    ("udp", "udp"),
    ("failed", "failed"),
];

/// A /3 message total's TCP packet figures, which /4 keeps under `msgs.tcp`.
const TCP_PACKET_KEYS: [&str; 4] = ["segs_out", "segs_out_per_s", "wire_packets", "wire_packets_per_s"];

/// Brings any netblast document (a result, an interval, a log record) to the /4 form, in
/// place. Idempotent.
pub fn upgrade(v: &mut Value) {
    match v {
        Value::Object(o) => {
            upgrade_object(o);
            o.values_mut().for_each(upgrade);
        }
        Value::Array(a) => a.iter_mut().for_each(upgrade),
        _ => {}
    }
}

fn upgrade_object(o: &mut Map<String, Value>) {
    // A stream's or way's totals (they have a `sender`; intervals have `sent_bytes`).
    if o.contains_key("sender") {
        if let Some(Value::Object(m)) = o.get_mut("msgs") {
            upgrade_msg_totals(m);
        }
    }
    // Only a /2 stream or way interval has `sent_msgs` (the totals keep theirs under `msgs`).
    if o.contains_key("sent_msgs") {
        let mut msgs = Map::new();
        for (old, new) in MSG_KEYS {
            if let Some(x) = o.remove(old) {
                msgs.insert(new.to_string(), x);
            }
        }
        o.insert("msgs".into(), Value::Object(msgs));
    }
    for name in DISTRIBUTIONS {
        let key = format!("{name}_hist");
        if o.get(name).is_some_and(Value::is_object) {
            if let Some(h) = o.remove(&key) {
                if let Some(Value::Object(d)) = o.get_mut(name) {
                    d.insert("hist".into(), h);
                }
            }
        }
    }
}

/// A /3 message total's flat figures into their /4 types: TCP packets under `tcp`, the UDP
/// receivers' drops, queue and datagram quality under `udp`. A /4 total has no `segs_out`,
/// `kernel_drops` or `rcvbuf` of its own and its `udp` no `jitter_ns`: it is left as it is.
fn upgrade_msg_totals(m: &mut Map<String, Value>) {
    let tcp = take_keys(m, &TCP_PACKET_KEYS);
    if !tcp.is_empty() {
        m.insert("tcp".into(), Value::Object(tcp));
    }
    let quality_v3 = m.get("udp").is_some_and(|u| u.get("jitter_ns").is_some());
    if quality_v3 || m.contains_key("kernel_drops") || m.contains_key("rcvbuf") {
        let mut udp = take_keys(m, &["kernel_drops", "rcvbuf"]);
        if quality_v3 {
            if let Some(q) = m.remove("udp") {
                udp.insert("quality".into(), q);
            }
        }
        m.insert("udp".into(), Value::Object(udp));
    }
}

/// The `keys` of `m` that it has, removed from it, under their names.
fn take_keys(m: &mut Map<String, Value>, keys: &[&str]) -> Map<String, Value> {
    keys.iter().filter_map(|&k| Some((k.to_string(), m.remove(k)?))).collect()
}

/// Reads a document written by this build or an older one: a result of any schema this build
/// reads (/4, /3, /2, /1), a partial log's record, a fleet log's line.
pub fn read<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, serde_json::Error> {
    let mut v: Value = serde_json::from_str(text)?;
    upgrade(&mut v);
    serde_json::from_value(v)
}

/// [`read`] for a result. A /3 or /2 result comes back as /4 (it holds every figure /4 does,
/// now in their /4 places); a /1 result keeps its schema, which says it cannot be aligned in
/// time.
///
/// Read member by member and interval by interval, each upgraded alone: a result of 300 000
/// intervals never stands in memory as one JSON tree (which took a 196 MB result to 2 GB).
pub fn read_result(text: &str) -> Result<RunResult, serde_json::Error> {
    use serde::Deserializer as _;
    let mut de = serde_json::Deserializer::from_str(text);
    let (mut root, intervals) = de.deserialize_map(Members)?;
    de.end()?;
    upgrade_object(&mut root);
    let mut r: RunResult = serde_json::from_value(Value::Object(root))?;
    r.intervals = intervals;
    if r.schema == SCHEMA_V2 || r.schema == SCHEMA_V3 {
        r.schema = SCHEMA.to_string();
    }
    Ok(r)
}

/// A result's members, each upgraded; its intervals apart, each upgraded and typed as it is read.
struct Members;

impl<'de> serde::de::Visitor<'de> for Members {
    type Value = (Map<String, Value>, Vec<crate::result::Interval>);

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a netblast result (a JSON object)")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut root, mut intervals) = (Map::new(), Vec::new());
        while let Some(key) = map.next_key::<String>()? {
            if key == "intervals" {
                intervals = map.next_value_seed(Intervals)?;
                root.insert(key, Value::Array(Vec::new()));
            } else {
                let mut v: Value = map.next_value()?;
                upgrade(&mut v);
                root.insert(key, v);
            }
        }
        Ok((root, intervals))
    }
}

/// A result's intervals, each upgraded and typed as it is read.
struct Intervals;

impl<'de> serde::de::DeserializeSeed<'de> for Intervals {
    type Value = Vec<crate::result::Interval>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Intervals {
    type Value = Vec<crate::result::Interval>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of intervals")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(mut v) = seq.next_element::<Value>()? {
            upgrade(&mut v);
            out.push(serde_json::from_value(v).map_err(serde::de::Error::custom)?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_moves_its_message_figures_under_msgs() {
        let mut v: Value = serde_json::from_str(
            r#"{"id":3,"sent_bytes":10,"sent_msgs":5,"received_msgs":4,"segs_out":2,"failed":1,
                "latency":{"count":1,"min_ns":7,"mean_ns":7.0,"stdev_ns":0.0,"p50_ns":7,"p90_ns":7,
                "p95_ns":7,"p99_ns":7,"p999_ns":7,"p9999_ns":7,"max_ns":7},"latency_hist":{"x":1}}"#,
        )
        .unwrap();
        upgrade(&mut v);
        assert_eq!(v["msgs"], serde_json::json!({"sent":5,"received":4,"segs_out":2,"failed":1}));
        assert_eq!(v["latency"]["hist"], serde_json::json!({"x":1}));
        assert_eq!(v["latency"]["p99_ns"], 7);
        assert!(v.get("sent_msgs").is_none() && v.get("latency_hist").is_none());
        let once = v.clone();
        upgrade(&mut v);
        assert_eq!(v, once, "upgrading a /3 document changes nothing");
    }

    #[test]
    fn a_totals_bag_becomes_the_kinds_own_types() {
        let mut v: Value = serde_json::from_str(
            r#"{"summary":{"streams":[{"sender":{"bytes":1},"msgs":{"sent":5,"segs_out":2,"segs_out_per_s":1.0,
                "wire_packets":4,"wire_packets_per_s":2.0}}],
                "ways":[{"sender":{"bytes":1},"msgs":{"sent":9,"lost":1,"kernel_drops":1,"rcvbuf":4096,
                "udp":{"lost":1,"out_of_order":0,"duplicates":0,"jitter_ns":3.5,"received":8}}},
                {"sender":{"bytes":1},"msgs":{"sent":3,"lost":1,"conns":{"refused":1}}}]},
                "intervals":[{"sums":[{"sent_bytes":1,"msgs":{"sent":5,"segs_out":2,"udp":{"jitter_ns":1.0}}}]}]}"#,
        )
        .unwrap();
        upgrade(&mut v);
        assert_eq!(
            v["summary"]["streams"][0]["msgs"],
            serde_json::json!({"sent":5,"tcp":{"segs_out":2,"segs_out_per_s":1.0,"wire_packets":4,"wire_packets_per_s":2.0}})
        );
        assert_eq!(
            v["summary"]["ways"][0]["msgs"],
            serde_json::json!({"sent":9,"lost":1,"udp":{"kernel_drops":1,"rcvbuf":4096,
                "quality":{"lost":1,"out_of_order":0,"duplicates":0,"jitter_ns":3.5,"received":8}}})
        );
        assert_eq!(v["summary"]["ways"][1]["msgs"], serde_json::json!({"sent":3,"lost":1,"conns":{"refused":1}}));
        assert_eq!(
            v["intervals"][0]["sums"][0]["msgs"],
            serde_json::json!({"sent":5,"segs_out":2,"udp":{"jitter_ns":1.0}}),
            "an interval's figures are as in /3"
        );
        let once = v.clone();
        upgrade(&mut v);
        assert_eq!(v, once, "upgrading a /4 document changes nothing");
    }

    #[test]
    fn an_http_summary_keeps_its_tls_flag_and_nests_its_phases() {
        let mut v: Value =
            serde_json::from_str(r#"{"tls":true,"phases":{"tls":{"count":2},"tls_hist":{"x":2}}}"#).unwrap();
        upgrade(&mut v);
        assert_eq!(v, serde_json::json!({"tls":true,"phases":{"tls":{"count":2,"hist":{"x":2}}}}));
    }
}
