//! What a fleet shows while it runs: one line per agent and per fleet-wide interval for a
//! person (the `[FLEET]` line is `netblast_report::fleet::interval_line`, the same the frame
//! log's replay prints), and the fleet's Prometheus metrics (`fleet --metrics ADDR`).

use crate::config::FleetEvent;
use netblast_metrics::prometheus_client::metrics::counter::Counter;
use netblast_metrics::prometheus_client::metrics::family::Family;
use netblast_metrics::prometheus_client::metrics::gauge::Gauge;
use netblast_metrics::prometheus_client::registry::Registry;
use netblast_metrics::{HdrMetric, Labels};
use netblast_spec::fleet::FleetInterval;
use netblast_spec::units::{fmt_ns, fmt_rfc3339};
use std::sync::Arc;

/// What to show a person for one event.
#[derive(Debug, Clone, PartialEq)]
pub enum Shown {
    /// A line (an agent ready or failed).
    Line(String),
    /// The orders are out: the header line of the run.
    Starting(String),
    /// A fleet-wide interval, with the count of agents failed so far.
    Interval {
        /// The `[FLEET]` line.
        line: String,
        /// The interval.
        interval: FleetInterval,
        /// Agents failed so far.
        failed: usize,
    },
}

/// The live side of a fleet: its metrics (when served) and the agents failed so far.
#[derive(Debug, Default)]
pub struct Live {
    metrics: Option<FleetMetrics>,
    failed: usize,
}

impl Live {
    /// Live output; `metrics`: counted only when they are served.
    pub fn new(metrics: Option<FleetMetrics>) -> Live {
        Live { metrics, failed: 0 }
    }

    /// Takes one event into the metrics; returns what a person is shown of it (every test's
    /// own interval frame is metrics only).
    pub fn event(&mut self, ev: &FleetEvent<'_>) -> Option<Shown> {
        if let Some(m) = &self.metrics {
            m.event(ev);
        }
        Some(match ev {
            FleetEvent::TestInterval { .. } | FleetEvent::TestDone { .. } => return None,
            FleetEvent::AgentReady { role, address, hostname, clock } => Shown::Line(format!(
                "{role} {address} ({hostname}) ready: clock {:+} ± {}\n",
                fmt_ns(clock.offset_ns as f64),
                fmt_ns(clock.error_ns as f64)
            )),
            FleetEvent::AgentFailed { role, address, why } => {
                self.failed += 1;
                Shown::Line(format!("{role} {address} FAILED: {why}\n"))
            }
            FleetEvent::Starting { t0_unix_ns, tests, clients, servers } => Shown::Starting(format!(
                "{tests} test(s) on {clients} client and {servers} server agent(s) start together at {}\n",
                fmt_rfc3339(*t0_unix_ns)
            )),
            FleetEvent::Interval(iv) => Shown::Interval {
                line: netblast_report::fleet::interval_line(iv),
                interval: (*iv).clone(),
                failed: self.failed,
            },
        })
    }
}

/// What `fleet --metrics` exposes: the coordinator's live, fleet-wide figures.
#[derive(Debug, Default, Clone)]
pub struct FleetMetrics {
    /// Agents, by `role` and `state` (`ready`, `failed`): each agent in one state, the latest
    /// (one that fails after it was ready moves from `ready` to `failed`). Set through
    /// [`FleetMetrics::agent_ready`] and [`FleetMetrics::agent_failed`].
    pub agents: Family<Labels, Gauge>,
    /// The agents counted `ready`, by role and address.
    ready: Arc<std::sync::Mutex<std::collections::HashSet<(String, String)>>>,
    /// Tests running.
    pub tests_running: Gauge,
    /// Tests that reported the latest fleet-wide interval.
    pub tests_reporting: Gauge,
    /// Fleet-wide bits per second of the latest interval (received where receivers reported).
    pub bytes_per_second: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// Fleet-wide HTTP responses per second of the latest interval.
    pub responses_per_second: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// Fleet-wide intervals completed.
    pub intervals: Counter,
    /// Bytes the tests moved (received where receivers reported, else sent; HTTP: both ways).
    pub bytes: Counter,
    /// HTTP responses received by the tests.
    pub http_responses: Counter,
    /// HTTP requests that failed.
    pub http_errors: Counter,
    /// Every latency sample of the tests' intervals (rr, msgrate, HTTP).
    pub latency: HdrMetric,
    /// The latency probes' round trips before the load, of every test that finished.
    pub probe_idle: HdrMetric,
    /// The latency probes' round trips under the load, of every test that finished.
    pub probe_loaded: HdrMetric,
    /// The latency the load added at the median (loaded p50 − idle p50), the latest finished
    /// test's, seconds.
    pub probe_added_p50: Gauge<f64, std::sync::atomic::AtomicU64>,
}

impl FleetMetrics {
    /// The registry these metrics are exposed from.
    pub fn registry(&self) -> Registry {
        let mut r = Registry::with_prefix("netblast_fleet");
        r.register("agents", "Agents, by role and state", self.agents.clone());
        r.register("tests_running", "Tests running", self.tests_running.clone());
        r.register("tests_reporting", "Tests that reported the latest interval", self.tests_reporting.clone());
        r.register(
            "bytes_per_second",
            "Fleet-wide bytes per second (the base unit: bits / 8), latest interval",
            self.bytes_per_second.clone(),
        );
        r.register(
            "responses_per_second",
            "Fleet-wide HTTP responses per second, latest interval",
            self.responses_per_second.clone(),
        );
        r.register("intervals", "Fleet-wide intervals completed", self.intervals.clone());
        r.register("bytes", "Bytes the tests moved", self.bytes.clone());
        r.register("http_responses", "HTTP responses received by the tests", self.http_responses.clone());
        r.register(
            "http_errors",
            "HTTP requests that failed (no response, or a status outside the expected set)",
            self.http_errors.clone(),
        );
        r.register("latency_seconds", "Latency samples of every test", self.latency.clone());
        r.register(
            "probe_idle_rtt_seconds",
            "Latency probe round trips before the load, of every finished test",
            self.probe_idle.clone(),
        );
        r.register(
            "probe_loaded_rtt_seconds",
            "Latency probe round trips under the load, of every finished test",
            self.probe_loaded.clone(),
        );
        r.register(
            "probe_added_p50_seconds",
            "Latency the load added at the median (loaded p50 - idle p50), latest finished test",
            self.probe_added_p50.clone(),
        );
        r
    }

    fn state(role: &str, state: &str) -> Labels {
        vec![("role".into(), role.into()), ("state".into(), state.into())]
    }

    /// Counts an agent (`role`, `address`) as ready.
    pub fn agent_ready(&self, role: &str, address: &str) {
        let mut ready = self.ready.lock().unwrap_or_else(|p| p.into_inner());
        if ready.insert((role.to_string(), address.to_string())) {
            self.agents.get_or_create(&Self::state(role, "ready")).inc();
        }
    }

    /// Counts an agent as failed, no longer as ready if it was.
    pub fn agent_failed(&self, role: &str, address: &str) {
        let mut ready = self.ready.lock().unwrap_or_else(|p| p.into_inner());
        if ready.remove(&(role.to_string(), address.to_string())) {
            self.agents.get_or_create(&Self::state(role, "ready")).dec();
        }
        self.agents.get_or_create(&Self::state(role, "failed")).inc();
    }

    /// Counts one test's interval as its client agent reported it.
    pub fn test_interval(&self, iv: &netblast_spec::result::Interval) {
        let mut hists: Vec<&netblast_spec::hist::EncodedHistogram> = Vec::new();
        for w in &iv.sums {
            self.bytes.inc_by(w.received_bytes.unwrap_or(w.sent_bytes));
            hists.extend(netblast_spec::hist::hist_of(&w.latency));
        }
        if let Some(h) = &iv.http {
            self.bytes.inc_by(h.bytes_sent + h.bytes_received);
            self.http_responses.inc_by(h.completed);
            // A response outside the expected statuses failed too.
            self.http_errors.inc_by(h.errors + h.failed_status);
            hists.extend(netblast_spec::hist::hist_of(&h.latency));
        }
        for h in hists {
            if let Ok(h) = h.decode() {
                self.latency.add(&h);
            }
        }
    }
}

impl FleetMetrics {
    /// The fleet's result is in: no test runs or reports any more and nothing moves; the
    /// counters and the latency histogram keep their final values.
    pub fn finished(&self) {
        self.tests_running.set(0);
        self.tests_reporting.set(0);
        self.bytes_per_second.set(0.0);
        self.responses_per_second.set(0.0);
    }

    /// Counts one event.
    pub fn event(&self, ev: &FleetEvent<'_>) {
        match ev {
            // Every agent's interval frame: decoded for the metrics only when they are served.
            FleetEvent::TestInterval { interval, .. } => self.test_interval(interval),
            FleetEvent::TestDone { result, .. } => {
                if let Some(p) = result.latency_probe.as_deref() {
                    for (d, m) in [(&p.idle, &self.probe_idle), (&p.loaded, &self.probe_loaded)] {
                        if let Some(h) = d.as_ref().and_then(|d| d.histogram()) {
                            m.add(&h);
                        }
                    }
                    if let Some(a) = p.added_p50_ns {
                        self.probe_added_p50.set(a as f64 / 1e9);
                    }
                }
            }
            FleetEvent::AgentReady { role, address, .. } => self.agent_ready(role, address),
            FleetEvent::AgentFailed { role, address, .. } => self.agent_failed(role, address),
            FleetEvent::Starting { tests, .. } => {
                self.tests_running.set(*tests as i64);
            }
            FleetEvent::Interval(iv) => {
                self.tests_running.set(iv.running as i64);
                self.tests_reporting.set(iv.reporting as i64);
                self.bytes_per_second.set(iv.bits_per_s / 8.0);
                self.responses_per_second.set(iv.ops.filter(|(w, _)| *w == "responses").map_or(0.0, |(_, r)| r));
                self.intervals.inc();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netblast_metrics::encode;

    #[test]
    fn an_agent_is_counted_in_one_state() {
        let m = FleetMetrics::default();
        let text = || encode(&m.registry());
        let has = |t: &str, line: &str| t.lines().any(|l| l == line);
        m.agent_ready("client", "10.0.0.4:5201");
        m.agent_ready("client", "10.0.0.5:5201");
        m.agent_ready("client", "10.0.0.5:5201");
        m.agent_failed("client", "10.0.0.4:5201");
        m.agent_failed("client", "(not registered)");
        let t = text();
        assert!(has(&t, r#"netblast_fleet_agents{role="client",state="ready"} 1"#), "{t}");
        assert!(has(&t, r#"netblast_fleet_agents{role="client",state="failed"} 2"#), "{t}");
    }
}
