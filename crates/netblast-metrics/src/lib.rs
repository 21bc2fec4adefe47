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

/// Connections the metrics endpoint holds at once.
pub const MAX_SCRAPERS: usize = 64;
/// Of those, from one address.
pub const MAX_SCRAPERS_PER_ADDRESS: usize = 8;
/// How long a connection may take to send a request's header.
pub const HEADER_TIME: Duration = Duration::from_secs(2);
/// How long a connection is held at most.
pub const HOLD_TIME: Duration = Duration::from_secs(10);

/// The connections the endpoint holds, oldest first: a new one always gets in, closing one of
/// its own address when that address holds [`MAX_SCRAPERS_PER_ADDRESS`], else one of all when
/// [`MAX_SCRAPERS`] are held: one that has not sent a whole request yet if there is one (a
/// scraper's asks at once), the oldest of those.
#[derive(Default)]
struct Scrapers {
    next: u64,
    held: std::collections::VecDeque<Held>,
}

/// One held connection: its number, address, whether it asked, and its task.
struct Held(u64, std::net::IpAddr, Arc<std::sync::atomic::AtomicBool>, tokio::task::AbortHandle);

impl Scrapers {
    /// Makes room for one more from `ip`; returns its number.
    fn admit(&mut self, ip: std::net::IpAddr) -> u64 {
        let mine = self.held.iter().filter(|h| h.1 == ip).count();
        let crowd = |h: &Held| mine < MAX_SCRAPERS_PER_ADDRESS || h.1 == ip;
        let asked = |h: &Held| h.2.load(std::sync::atomic::Ordering::Relaxed);
        let full = mine >= MAX_SCRAPERS_PER_ADDRESS || self.held.len() >= MAX_SCRAPERS;
        let victim = full
            .then(|| {
                let silent = self.held.iter().position(|h| crowd(h) && !asked(h));
                silent.or_else(|| self.held.iter().position(crowd))
            })
            .flatten();
        if let Some(h) = victim.and_then(|i| self.held.remove(i)) {
            h.3.abort();
        }
        self.next += 1;
        self.next
    }

    fn leave(&mut self, id: u64) {
        self.held.retain(|h| h.0 != id);
    }
}

/// A held connection's place, given back when its task ends or is aborted.
struct Place(Arc<Mutex<Scrapers>>, u64);

impl Drop for Place {
    fn drop(&mut self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).leave(self.1);
    }
}

/// Serves `GET /metrics` (the text of `render()`, made at each scrape: OpenMetrics when the
/// scraper's `Accept` asks for it, else the Prometheus text format) on `listener` until
/// `shutdown` completes; anything else gets 404. Plain HTTP/1.1; a request's header within
/// [`HEADER_TIME`], a connection held [`HOLD_TIME`] at most; a new connection is always
/// served, closing an old one past [`MAX_SCRAPERS_PER_ADDRESS`] or [`MAX_SCRAPERS`] (a
/// stranger holding connections cannot keep a scraper out).
pub async fn serve_http(
    listener: tokio::net::TcpListener,
    render: Arc<dyn Fn() -> String + Send + Sync>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    use http_body_util::Full;
    use hyper::body::Bytes;
    let scrapers: Arc<Mutex<Scrapers>> = Default::default();
    tokio::pin!(shutdown);
    loop {
        let (conn, peer) = tokio::select! {
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
        let mut held = scrapers.lock().unwrap_or_else(|e| e.into_inner());
        let id = held.admit(peer.ip());
        let place = Place(scrapers.clone(), id);
        let render = render.clone();
        let asked = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let asking = asked.clone();
        let task = tokio::spawn(async move {
            let _place = place;
            let svc = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                asking.store(true, std::sync::atomic::Ordering::Relaxed);
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
            let c = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIME)
                .serve_connection(io, svc);
            let _ = tokio::time::timeout(HOLD_TIME, c).await;
        });
        held.held.push_back(Held(id, peer.ip(), asked, task.abort_handle()));
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
        assert_eq!(
            t,
            "# HELP a_bytes_total Bytes moved.\n# TYPE a_bytes_total counter\na_bytes_total 3\n# HELP b Tests.\n# TYPE b gauge\nb 1\n"
        );
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
