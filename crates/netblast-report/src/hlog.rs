//! The result's latency histograms as an HdrHistogram interval log (`--hlog FILE`), readable
//! by HdrHistogram's own tools (HistogramLogProcessor, HdrHistogramVisualizer, the hdrhistogram
//! crate's `IntervalLogIterator`): one histogram per interval and way (`up`, `down`) or per
//! interval for HTTP (`http`), tagged so, values in nanoseconds, timestamps in seconds from the
//! run's start (`StartTime` in the header).

use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use netblast_spec::RunResult;
use netblast_spec::hist::hist_of;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Writes the log; returns it and how many histograms it holds. A result without latency
/// histograms (bulk) is an error saying so.
pub fn write(r: &RunResult) -> Result<(Vec<u8>, usize), String> {
    let mut buf = Vec::new();
    let mut serializer = V2DeflateSerializer::new();
    let mut builder = IntervalLogWriterBuilder::new();
    builder
        .add_comment(&format!("netblast {} test {}: latency in nanoseconds", r.netblast_version, r.test_id))
        .add_comment(&r.plan.profile.description)
        .with_max_value_divisor(1e6);
    if let Some(ns) = r.start_unix_ns {
        builder.with_start_time(UNIX_EPOCH + Duration::from_nanos(ns));
    } else {
        builder.with_start_time(SystemTime::now());
    }
    let mut w = builder.begin_log_with(&mut buf, &mut serializer).map_err(|e| e.to_string())?;
    let mut n = 0;
    for iv in &r.intervals {
        let start = Duration::from_secs_f64(iv.start_s.max(0.0));
        let span = Duration::from_secs_f64((iv.end_s - iv.start_s).max(0.0));
        let ways = iv.sums.iter().map(|s| (s.way.name(), hist_of(&s.latency)));
        let http = iv.http.iter().map(|h| ("http", hist_of(&h.latency)));
        for (tag, enc) in ways.chain(http) {
            let Some(enc) = enc else { continue };
            let h = enc.decode().map_err(|e| format!("interval {}: {e}", iv.index))?;
            w.write_histogram(&h, start, span, Tag::new(tag)).map_err(|e| format!("interval {}: {e:?}", iv.index))?;
            n += 1;
        }
    }
    drop(w);
    if n == 0 {
        return Err(format!(
            "this {} result has no latency histograms to log (rr, msgrate and http have)",
            r.plan.profile.kind().name()
        ));
    }
    Ok((buf, n))
}
