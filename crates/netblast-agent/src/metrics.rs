//! What `serve --metrics ADDR` exposes: the data port's tests, the HTTP responder, the
//! refusals (Prometheus, through `netblast-metrics`).

use netblast_metrics::prometheus_client::metrics::counter::Counter;
use netblast_metrics::prometheus_client::metrics::family::Family;
use netblast_metrics::prometheus_client::metrics::gauge::Gauge;
use netblast_metrics::prometheus_client::registry::Registry;
pub use netblast_metrics::{CONTENT_TYPE, HdrMetric, Labels, encode, label, serve_http};

/// What a `serve` exposes: its data-port tests, its HTTP responder, its refusals.
#[derive(Debug, Default, Clone)]
pub struct ServeMetrics {
    /// Tests running now.
    pub tests_active: Gauge,
    /// Tests finished, by `result` (`ok`, `failed`).
    pub tests: Family<Labels, Counter>,
    /// Data-port bytes, by `direction` as the server sees it (`received` from up streams,
    /// `sent` on down streams), counted per interval while tests run.
    pub bytes: Family<Labels, Counter>,
    /// Messages (msgrate, rr transactions), by `direction`.
    pub messages: Family<Labels, Counter>,
    /// Segments the server's sockets retransmitted (down streams, at each stream's end).
    pub retransmits: Counter,
    /// Peers refused, by `reason`.
    pub refused: Family<Labels, Counter>,
    /// Connections closed without a byte: a TCP health probe (kubelet's, a load balancer's),
    /// counted, never logged as a refusal.
    pub probes: Counter,
    /// HTTP responses of the built-in responder, by status `code` (a label set that needs no
    /// allocation: it is looked up once per response).
    pub http_responses: Family<[(&'static str, u16); 1], Counter>,
    /// HTTP requests the responder could not answer as asked (bad shape, aborted on purpose).
    pub http_errors: Counter,
    /// HTTP response body bytes promised (Content-Length) by the responder.
    pub http_bytes: Counter,
    /// From a request's headers to its response's headers, in the responder (its asked
    /// delay included).
    pub http_latency: HdrMetric,
    /// The kernel's RTT samples of the server's sockets (eBPF), added at each stream's end.
    pub rtt: HdrMetric,
}

impl ServeMetrics {
    /// The registry these metrics are exposed from.
    pub fn registry(&self) -> Registry {
        let mut r = Registry::with_prefix("netblast_serve");
        r.register("tests_active", "Tests running now", self.tests_active.clone());
        r.register("tests", "Tests finished, by result", self.tests.clone());
        r.register("bytes", "Data-port bytes, by direction as the server sees it", self.bytes.clone());
        r.register("messages", "Messages or transactions, by direction", self.messages.clone());
        r.register("retransmits", "Segments retransmitted by the server's sockets", self.retransmits.clone());
        r.register("refused", "Peers refused, by reason", self.refused.clone());
        r.register("probes", "Data-port connections closed without a byte (TCP health probes)", self.probes.clone());
        r.register("http_responses", "HTTP responses of the built-in responder, by code", self.http_responses.clone());
        r.register("http_errors", "HTTP requests not answered as asked", self.http_errors.clone());
        r.register("http_response_bytes", "HTTP response body bytes", self.http_bytes.clone());
        r.register(
            "http_latency_seconds",
            "Request headers to response headers in the responder",
            self.http_latency.clone(),
        );
        r.register("rtt_seconds", "Kernel RTT samples of the server's sockets (eBPF)", self.rtt.clone());
        r
    }
}
