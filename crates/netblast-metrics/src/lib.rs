//! netblast-metrics: netblast's figures for Prometheus (`serve --metrics ADDR`, `fleet
//! --metrics ADDR`): the pieces every exposition shares, served as the OpenMetrics text on
//! `GET /metrics`.
//!
//! Latency and RTT histograms are netblast's own HDR histograms (every sample, ns), turned into
//! Prometheus buckets (seconds, [`BOUNDS_S`]) when scraped, so a scrape costs nothing on the
//! measuring path and the buckets hold exact counts. The metric sets themselves live with what
//! they count: `netblast_agent::metrics::ServeMetrics`, `netblast_coord::live::FleetMetrics`.

#![warn(missing_docs)]

use hdrhistogram::Histogram;
use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use prometheus_client;

/// Upper bounds (seconds) of the exposed histogram buckets; `+Inf` follows.
pub const BOUNDS_S: [f64; 19] = [
    1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Labels of a family: name and value pairs.
pub type Labels = Vec<(String, String)>;

/// One label pair.
pub fn label(name: &str, value: impl ToString) -> Labels {
    vec![(name.to_string(), value.to_string())]
}

/// A latency histogram in nanoseconds, exposed as a Prometheus histogram in seconds.
#[derive(Debug, Clone)]
pub struct HdrMetric(Arc<Mutex<Histogram<u64>>>);

impl Default for HdrMetric {
    fn default() -> Self {
        HdrMetric(Arc::new(Mutex::new(netblast_spec::hist::new_latency_histogram())))
    }
}

impl HdrMetric {
    /// Records one sample.
    pub fn record(&self, d: Duration) {
        let mut h = self.0.lock().unwrap_or_else(|e| e.into_inner());
        netblast_spec::hist::record_ns(&mut h, d.as_nanos().min(u64::MAX as u128) as u64);
    }

    /// Adds every sample of `other`, whatever its layout (the eBPF RTT histograms keep two
    /// significant digits, latency ones three): each recorded value is recorded again.
    pub fn add(&self, other: &Histogram<u64>) {
        let mut h = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for v in other.iter_recorded() {
            let value = other.highest_equivalent(v.value_iterated_to()).clamp(h.low(), h.high());
            // Cannot fail: the value is within the histogram's bounds.
            let _ = h.record_n(value, v.count_at_value());
        }
    }

    /// Samples so far.
    pub fn count(&self) -> u64 {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// (sum in seconds, count, per-bucket counts over [`BOUNDS_S`] then `+Inf`).
    pub fn buckets(&self) -> (f64, u64, Vec<(f64, u64)>) {
        let h = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let mut b: Vec<(f64, u64)> = BOUNDS_S.iter().map(|x| (*x, 0)).chain([(f64::INFINITY, 0)]).collect();
        let mut sum = 0.0;
        for v in h.iter_recorded() {
            // A recorded value stands for its bucket of equivalent values; its highest one is
            // what the histogram reports as that value.
            let s = h.highest_equivalent(v.value_iterated_to()) as f64 / 1e9;
            let n = v.count_at_value();
            sum += s * n as f64;
            let i = b.iter().position(|(ub, _)| s <= *ub).unwrap_or(b.len() - 1);
            b[i].1 += n;
        }
        (sum, h.len(), b)
    }
}

impl EncodeMetric for HdrMetric {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let (sum, count, buckets) = self.buckets();
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// The OpenMetrics text of a registry.
pub fn encode(registry: &Registry) -> String {
    let mut s = String::new();
    // Writing to a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut s, registry);
    s
}

/// Content type of [`encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Content type of [`text_004`]'s output: the Prometheus text format.
pub const CONTENT_TYPE_004: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The Prometheus text format (0.0.4) of an OpenMetrics text: a counter's `HELP` and `TYPE`
/// name its samples (`_total`), and there is no `UNIT` or `EOF` line. What a scraper that does
/// not ask for OpenMetrics, and `promtool check metrics`, read.
pub fn text_004(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let family = ["# HELP ", "# TYPE "].iter().find_map(|p| line.strip_prefix(p).map(|rest| (*p, rest)));
        match family {
            Some((prefix, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                let name = if counters.contains(name) { format!("{name}_total") } else { name.to_string() };
                out.push_str(format!("{prefix}{name} {tail}").trim_end());
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// Whether a scraper's `Accept` header asks for OpenMetrics (Prometheus asks for it first when
/// it speaks it); otherwise the Prometheus text format is answered.
pub fn wants_openmetrics(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| a.contains("application/openmetrics-text"))
}

/// Serves `GET /metrics` (the text of `render()`, made at each scrape: OpenMetrics when the
/// scraper's `Accept` asks for it, else the Prometheus text format) on `listener` until
/// `shutdown` completes; anything else gets 404. Plain HTTP/1.1, at most 64 connections at
/// once, each closed after 10 s idle.
pub async fn serve_http(
    listener: tokio::net::TcpListener,
    render: Arc<dyn Fn() -> String + Send + Sync>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    use http_body_util::Full;
    use hyper::body::Bytes;
    let limit = Arc::new(tokio::sync::Semaphore::new(64));
    tokio::pin!(shutdown);
    loop {
        let (conn, _) = tokio::select! {
            _ = &mut shutdown => return,
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!("metrics endpoint: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = limit.clone().try_acquire_owned() else { continue };
        let render = render.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let render = render.clone();
                async move {
                    let accept = req.headers().get(hyper::header::ACCEPT).and_then(|v| v.to_str().ok());
                    let (status, ctype, body) = if req.uri().path() != "/metrics" {
                        (404, "text/plain", "netblast: metrics are at /metrics\n".to_string())
                    } else if wants_openmetrics(accept) {
                        (200, CONTENT_TYPE, render())
                    } else {
                        (200, CONTENT_TYPE_004, text_004(&render()))
                    };
                    let mut r = hyper::Response::new(Full::new(Bytes::from(body)));
                    *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::OK);
                    r.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static(ctype));
                    Ok::<_, std::convert::Infallible>(r)
                }
            });
            let io = hyper_util::rt::TokioIo::new(conn);
            let c = hyper::server::conn::http1::Builder::new().serve_connection(io, svc);
            let _ = tokio::time::timeout(Duration::from_secs(10), c).await;
            drop(permit);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prometheus_text_names_counters_by_their_samples_and_has_no_unit_or_eof() {
        let om = "# HELP a_bytes Bytes moved.\n# TYPE a_bytes counter\n# UNIT a_bytes bytes\na_bytes_total 3\n\
                  # HELP b Tests.\n# TYPE b gauge\nb 1\n# EOF\n";
        let t = text_004(om);
        assert_eq!(t, "# HELP a_bytes_total Bytes moved.\n# TYPE a_bytes_total counter\na_bytes_total 3\n# HELP b Tests.\n# TYPE b gauge\nb 1\n");
        assert!(wants_openmetrics(Some("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5")));
        assert!(!wants_openmetrics(Some("text/plain;version=0.0.4")) && !wants_openmetrics(None));
    }

    #[test]
    fn buckets_hold_every_sample_once() {
        let m = HdrMetric::default();
        for us in [5, 20, 20, 700, 3000] {
            m.record(Duration::from_micros(us));
        }
        m.record(Duration::from_secs(20));
        let (sum, count, b) = m.buckets();
        assert_eq!(count, 6);
        assert_eq!(b.iter().map(|x| x.1).sum::<u64>(), 6);
        let at = |ub: f64| b.iter().find(|x| x.0 == ub).unwrap().1;
        assert_eq!((at(1e-5), at(2.5e-5), at(1e-3), at(5e-3), at(f64::INFINITY)), (1, 2, 1, 1, 1));
        assert!((sum - 20.003745).abs() < 0.02, "{sum}");
        // Another layout (eBPF RTT: two significant digits) adds every sample too.
        let mut rtt = Histogram::<u64>::new_with_bounds(1, 100_000_000_000, 2).unwrap();
        rtt.record_n(40_000, 7).unwrap();
        m.add(&rtt);
        assert_eq!((m.count(), m.buckets().2.iter().find(|x| x.0 == 5e-5).unwrap().1), (13, 7));
    }
}
