//! Thresholds on a result: `--assert 'throughput>=9Gbit/s' --assert 'p99<5ms'`.
//!
//! An assertion is `METRIC OP VALUE`, spaces allowed around the operator. `OP` is one of
//! `>=`, `<=`, `>`, `<`, `==`, `!=`. Metrics and the units their values take:
//!
//! | metric | what | value |
//! |---|---|---|
//! | `throughput`, `throughput.up`, `throughput.down` | bits/s received (sent, where no receiver reported), all ways or one | `bit/s`, `kbit/s`, `Mbit/s`, `Gbit/s`, `Tbit/s` (or `bps`, `Kbps`, `Mbps`, `Gbps`) |
//! | `p50`, `p90`, `p95`, `p99`, `p99.9`, `p99.99`, `latency.min`, `latency.mean`, `latency.max` | latency: HTTP requests, rr round trips, msgrate messages (the worst way) | `ns`, `us`, `ms`, `s` |
//! | `rtt.p50` … `rtt.p99.99`, `rtt.max` | the kernel's RTT samples (eBPF; the worst way) | as latency |
//! | `retransmits` | retransmitted segments, all ways; with `%`, retransmitted / sent segments | count, or `%` |
//! | `errors` | the run's error records (connections lost, streams failed, server reports refused) | count |
//! | `http.failed` | HTTP requests without a successful response (sent − succeeded) | count, or `%` of sent |
//! | `rps` | HTTP responses per second (any status) | count (`k`, `M`) |
//! | `rps.ok` | HTTP responses per second with an expected status (`--expect-status`) | count (`k`, `M`) |
//! | `msgs` | messages per second received (sent, where no receiver counted) | count (`k`, `M`) |
//! | `lost` | messages sent and never received: UDP datagrams, rr requests over UDP without a response, cps connections that failed; with `%`, of those sent | count, or `%` |
//! | `jitter` | UDP interarrival jitter (RFC 3550) at the receivers (the worst way) | as latency |
//! | `idle.p50` … `idle.max`, `loaded.p50` … `loaded.max` | the latency probes' round trips before the load, and under it (`--latency-probe`) | as latency |
//! | `added.p50` … `added.p99.99` | the latency the load added: loaded − idle at that percentile | as latency |
//! | `rwnd_limited`, `sndbuf_limited`, `cwnd_limited`, `app_limited` | the share of the TCP senders' time the receiver's window, the send buffer, the congestion window or path, or the application held them (their kernels' clocks; the worst way) | `%` |
//!
//! A metric the result does not hold (latency of a bulk run, kernel RTT without eBPF) fails
//! the assertion and says so: a threshold that cannot be checked is not passed.

use crate::hist::LatencySummary;
use crate::profile::Way;
use crate::result::RunResult;

pub use crate::result::Verdict;

/// A comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `>=`
    Ge,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `<`
    Lt,
    /// `==`
    Eq,
    /// `!=`
    Ne,
}

impl Op {
    const ALL: [(&'static str, Op); 6] =
        [(">=", Op::Ge), ("<=", Op::Le), ("==", Op::Eq), ("!=", Op::Ne), (">", Op::Gt), ("<", Op::Lt)];

    fn holds(self, a: f64, b: f64) -> bool {
        match self {
            Op::Ge => a >= b,
            Op::Le => a <= b,
            Op::Gt => a > b,
            Op::Lt => a < b,
            Op::Eq => a == b,
            Op::Ne => a != b,
        }
    }
}

/// What a metric measures, and so which units its value takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dim {
    BitRate,
    Time,
    Count,
    CountOrPercent,
    Percent,
}

/// One metric of a result.
#[derive(Debug, Clone, PartialEq)]
enum Metric {
    Throughput(Option<Way>),
    Latency(Stat),
    KernelRtt(Stat),
    Retransmits,
    Errors,
    HttpFailed,
    Rps,
    /// HTTP responses per second with an expected status.
    RpsOk,
    Msgs,
    Lost,
    Jitter,
    Limited(crate::diagnose::Limit),
    /// The latency probes' round trips: under the load (`true`) or before it.
    Probe(bool, Stat),
    /// The latency the load added: loaded − idle.
    Added(Stat),
}

/// A statistic of a latency distribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stat {
    /// In hundredths of a percent: 9990 is p99.9.
    Quantile(u32),
    Min,
    Mean,
    Max,
}

impl Metric {
    fn parse(name: &str) -> Option<Metric> {
        let stat = |s: &str| -> Option<Stat> {
            Some(match s {
                "min" => Stat::Min,
                "mean" => Stat::Mean,
                "max" => Stat::Max,
                "p50" => Stat::Quantile(5000),
                "p90" => Stat::Quantile(9000),
                "p95" => Stat::Quantile(9500),
                "p99" => Stat::Quantile(9900),
                "p99.9" => Stat::Quantile(9990),
                "p99.99" => Stat::Quantile(9999),
                _ => return None,
            })
        };
        Some(match name {
            "throughput" => Metric::Throughput(None),
            "throughput.up" => Metric::Throughput(Some(Way::Up)),
            "throughput.down" => Metric::Throughput(Some(Way::Down)),
            "retransmits" => Metric::Retransmits,
            "errors" => Metric::Errors,
            "http.failed" => Metric::HttpFailed,
            "rps" => Metric::Rps,
            "rps.ok" => Metric::RpsOk,
            "msgs" => Metric::Msgs,
            "lost" => Metric::Lost,
            "jitter" => Metric::Jitter,
            "rwnd_limited" => Metric::Limited(crate::diagnose::Limit::ReceiverWindow),
            "sndbuf_limited" => Metric::Limited(crate::diagnose::Limit::SendBuffer),
            "cwnd_limited" => Metric::Limited(crate::diagnose::Limit::Congestion),
            "app_limited" => Metric::Limited(crate::diagnose::Limit::Application),
            n if n.starts_with("latency.") => Metric::Latency(
                stat(&n["latency.".len()..]).filter(|s| matches!(s, Stat::Min | Stat::Mean | Stat::Max))?,
            ),
            n if n.starts_with("rtt.") => Metric::KernelRtt(stat(&n["rtt.".len()..])?),
            n if n.starts_with("idle.") => Metric::Probe(false, stat(&n["idle.".len()..])?),
            n if n.starts_with("loaded.") => Metric::Probe(true, stat(&n["loaded.".len()..])?),
            n if n.starts_with("added.") => {
                Metric::Added(stat(&n["added.".len()..]).filter(|s| matches!(s, Stat::Quantile(_)))?)
            }
            n if n.starts_with('p') => Metric::Latency(stat(n)?),
            _ => return None,
        })
    }

    fn dim(&self) -> Dim {
        match self {
            Metric::Throughput(_) => Dim::BitRate,
            Metric::Latency(_) | Metric::KernelRtt(_) | Metric::Jitter | Metric::Probe(..) | Metric::Added(_) => {
                Dim::Time
            }
            Metric::Retransmits | Metric::HttpFailed | Metric::Lost => Dim::CountOrPercent,
            Metric::Limited(_) => Dim::Percent,
            Metric::Errors | Metric::Rps | Metric::RpsOk | Metric::Msgs => Dim::Count,
        }
    }
}

/// A parsed assertion.
#[derive(Debug, Clone, PartialEq)]
pub struct Assertion {
    /// As the user wrote it.
    pub text: String,
    metric: Metric,
    op: Op,
    /// In the metric's base unit: bit/s, ns, a count, or a fraction (0.01 for 1%).
    value: f64,
    percent: bool,
}

const METRICS: &str = "throughput[.up|.down], p50..p99.99, latency.min|mean|max, rtt.p50..rtt.max, \
                       retransmits, errors, http.failed, rps, rps.ok, msgs, lost, jitter, \
                       rwnd_limited, sndbuf_limited, cwnd_limited, app_limited, \
                       idle.p50..idle.max, loaded.p50..loaded.max, added.p50..added.p99.99";

impl Assertion {
    /// Parses `METRIC OP VALUE`; the error names the part that is wrong.
    pub fn parse(text: &str) -> Result<Assertion, String> {
        let t = text.trim();
        let (at, op_text, op) = Op::ALL
            .iter()
            .filter_map(|(s, o)| t.find(s).map(|i| (i, *s, *o)))
            .min_by_key(|(i, s, _)| (*i, std::cmp::Reverse(s.len())))
            .ok_or_else(|| format!("assertion {t:?}: no comparison (>=, <=, >, <, ==, !=)"))?;
        let name = t[..at].trim();
        let value = t[at + op_text.len()..].trim();
        let metric = Metric::parse(name)
            .ok_or_else(|| format!("assertion {t:?}: unknown metric {name:?} (one of {METRICS})"))?;
        if value.is_empty() {
            return Err(format!("assertion {t:?}: no value after {op_text}"));
        }
        let (value, percent) = parse_value(value, metric.dim()).map_err(|e| format!("assertion {t:?}: {e}"))?;
        Ok(Assertion { text: t.to_string(), metric, op, value, percent })
    }

    /// How many operations (requests, messages, connections) a span must hold before this
    /// threshold says anything: a percentile q needs 10 / (1 − q) of them (1 000 for p99, so
    /// ten lie beyond it), a share p needs 1 / p (one operation may fail within 1% of 100);
    /// any other threshold, one.
    pub fn samples_needed(&self) -> f64 {
        match (&self.metric, self.percent) {
            (Metric::Latency(Stat::Quantile(q)) | Metric::KernelRtt(Stat::Quantile(q)), _) => {
                10.0 / (1.0 - f64::from(*q) / 10_000.0)
            }
            (_, true) if self.value > 0.0 => 1.0 / self.value,
            _ => 1.0,
        }
    }

    /// The latency this threshold bounds, ns, when it bounds one (`p99<=20ms`, `jitter<1ms`):
    /// a span must last many times it to hold its distribution.
    pub fn latency_bound_ns(&self) -> Option<f64> {
        (self.metric.dim() == Dim::Time).then_some(self.value)
    }

    /// Checks the assertion on a result.
    pub fn check(&self, r: &RunResult) -> Verdict {
        let verdict = |pass: bool, measured: String| Verdict { text: self.text.clone(), pass, measured };
        match self.measure(r) {
            Ok(v) => verdict(self.op.holds(v, self.value), self.show(v)),
            Err(why) => verdict(false, format!("nothing: {why}")),
        }
    }

    /// The measured value in the report's own format (one format per unit everywhere); when
    /// that rounds to the threshold's rendering, the exact value follows so the verdict reads.
    fn show(&self, v: f64) -> String {
        let fmt = |x: f64| -> String {
            if self.percent {
                return format!("{}%", crate::units::sig3(x * 100.0));
            }
            match self.metric.dim() {
                Dim::BitRate => crate::units::fmt_bits_per_s(x),
                Dim::Time => crate::units::fmt_ns(x),
                _ if matches!(self.metric, Metric::Rps | Metric::RpsOk | Metric::Msgs) => crate::units::fmt_per_s(x),
                _ => format!("{x:.0}"),
            }
        };
        let shown = fmt(v);
        if v != self.value && shown == fmt(self.value) {
            let exact = if self.percent { format!("{:.6}%", v * 100.0) } else { format!("{v:.3}") };
            return format!("{shown} ({exact})");
        }
        shown
    }

    fn measure(&self, r: &RunResult) -> Result<f64, String> {
        let s = &r.summary;
        match &self.metric {
            Metric::Throughput(way) => {
                let ways: Vec<_> = s.ways.iter().filter(|w| way.is_none_or(|x| w.way == x)).collect();
                if ways.is_empty() {
                    return Err(match way {
                        Some(w) => format!("the result has no {w:?} way"),
                        None => "the result moved no bytes".into(),
                    });
                }
                Ok(ways.iter().map(|w| w.receiver.as_ref().unwrap_or(&w.sender).bits_per_s).sum())
            }
            Metric::Latency(stat) => {
                let mut sums: Vec<&LatencySummary> = s.ways.iter().filter_map(|w| w.latency.as_deref()).collect();
                if let Some(h) = &s.http {
                    sums.push(&h.latency);
                }
                worst(&sums, *stat)
                    .ok_or_else(|| format!("this {} result has no latency", r.plan.profile.kind().name()))
            }
            Metric::Probe(loaded, stat) => {
                let p = probe_of(r)?;
                let d = if *loaded { &p.loaded } else { &p.idle };
                let phase = if *loaded { "under the load" } else { "before the load" };
                worst(&d.iter().map(|d| &d.summary).collect::<Vec<_>>(), *stat)
                    .ok_or_else(|| format!("the latency probe had no round trip {phase}"))
            }
            Metric::Added(stat) => {
                let p = probe_of(r)?;
                let at = |d: &Option<crate::hist::Distribution>| {
                    worst(&d.iter().map(|d| &d.summary).collect::<Vec<_>>(), *stat)
                };
                match (at(&p.loaded), at(&p.idle)) {
                    (Some(l), Some(i)) => Ok(l - i),
                    _ => Err("the latency probe needs round trips both before and under the load".into()),
                }
            }
            Metric::KernelRtt(stat) => {
                let sums: Vec<&LatencySummary> = s.ways.iter().filter_map(|w| w.kernel_rtt.as_deref()).collect();
                worst(&sums, *stat)
                    .ok_or_else(|| "the result has no kernel RTT samples (they need --probe ebpf)".into())
            }
            Metric::Retransmits if self.percent => {
                let http = s.http.as_ref().and_then(|h| h.tcp.as_ref());
                let rates: Vec<(f64, u64)> = s
                    .ways
                    .iter()
                    .filter_map(|w| w.retransmit_rate.zip(w.retransmits))
                    .chain(http.and_then(|t| t.retransmit_rate.map(|r| (r, t.retransmits))))
                    .collect();
                if rates.is_empty() {
                    return Err("the result has no retransmit rate (no segment counts)".into());
                }
                // Sent segments per way = retransmits / rate; the overall rate weighs ways by them.
                let sent: f64 = rates.iter().map(|(r, n)| if *r > 0.0 { *n as f64 / r } else { 0.0 }).sum();
                let retrans: f64 = rates.iter().map(|(_, n)| *n as f64).sum();
                Ok(if sent > 0.0 { retrans / sent } else { 0.0 })
            }
            Metric::Retransmits => s
                .retransmits()
                .map(|n| n as f64)
                .ok_or_else(|| "the result has no retransmit counts (the kernel was not read: --probe off)".into()),
            Metric::Errors => Ok(r.errors.len() as f64),
            Metric::HttpFailed => {
                let h = s.http.as_ref().ok_or("not an HTTP result")?;
                let failed = h.sent.saturating_sub(h.succeeded) as f64;
                Ok(if self.percent { if h.sent > 0 { failed / h.sent as f64 } else { 0.0 } } else { failed })
            }
            Metric::Rps => Ok(s.http.as_ref().ok_or("not an HTTP result")?.responses_per_s),
            Metric::RpsOk => {
                let h = s.http.as_ref().ok_or("not an HTTP result")?;
                Ok(h.succeeded as f64 / h.seconds.max(1e-9))
            }
            Metric::Msgs => {
                let msgs: Vec<f64> = s
                    .ways
                    .iter()
                    .filter_map(|w| w.msgs.as_ref().map(|m| m.received_per_s.unwrap_or(m.sent_per_s)))
                    .collect();
                if msgs.is_empty() {
                    return Err(format!("this {} result counts no messages", r.plan.profile.kind().name()));
                }
                Ok(msgs.iter().sum())
            }
            Metric::Lost => {
                let m: Vec<&crate::result::MsgTotals> = s.ways.iter().filter_map(|w| w.msgs.as_ref()).collect();
                let lost: Vec<(u64, u64)> = m.iter().filter_map(|m| m.lost.map(|l| (l, m.sent))).collect();
                if lost.is_empty() {
                    return Err(format!("this {} result counts no lost messages", r.plan.profile.kind().name()));
                }
                let (l, sent) = lost.iter().fold((0, 0), |(a, b), (l, s)| (a + l, b + s));
                // cps: `sent` counts the connections completed, `lost` the failed ones.
                let of = if r.plan.profile.workload.section().sent_counts_lost() { sent } else { l + sent };
                Ok(match self.percent {
                    false => l as f64,
                    true if of > 0 => l as f64 / of as f64,
                    true => 0.0,
                })
            }
            Metric::Limited(limit) => {
                use crate::diagnose::Limit;
                s.ways
                    .iter()
                    .filter_map(|w| w.limits?.shares())
                    .map(|x| match limit {
                        Limit::ReceiverWindow => x.rwnd,
                        Limit::SendBuffer => x.sndbuf,
                        Limit::Congestion => x.cwnd,
                        Limit::Application => x.app,
                        Limit::AskedRate | Limit::SenderCpu => 0.0,
                    })
                    .reduce(f64::max)
                    .ok_or_else(|| {
                        "the result has no TCP limit clocks (a TCP sender's kernel reports them: Linux 4.10+)".into()
                    })
            }
            Metric::Jitter => s
                .ways
                .iter()
                .filter_map(|w| w.msgs.as_ref()?.udp?.quality)
                .filter(|q| q.received > 0)
                .map(|q| q.jitter_ns)
                .reduce(f64::max)
                .ok_or_else(|| "the result has no UDP jitter (a UDP msgrate result has)".into()),
        }
    }
}

/// The latency probes' figures of a result, or why it has none.
fn probe_of(r: &RunResult) -> Result<&crate::result::LatencyProbeResult, String> {
    r.latency_probe.as_deref().ok_or_else(|| "the result has no latency probe (run it with --latency-probe)".into())
}

/// The worst (largest) value of a statistic over several distributions.
fn worst(sums: &[&LatencySummary], stat: Stat) -> Option<f64> {
    sums.iter()
        .filter(|l| l.count > 0)
        .map(|l| match stat {
            Stat::Min => l.min_ns as f64,
            Stat::Mean => l.mean_ns,
            Stat::Max => l.max_ns as f64,
            Stat::Quantile(q) => {
                (match q {
                    5000 => l.p50_ns,
                    9000 => l.p90_ns,
                    9500 => l.p95_ns,
                    9900 => l.p99_ns,
                    9990 => l.p999_ns,
                    _ => l.p9999_ns,
                }) as f64
            }
        })
        .reduce(f64::max)
}

/// A value in the metric's base unit, and whether it was a percentage.
fn parse_value(v: &str, dim: Dim) -> Result<(f64, bool), String> {
    let split = v.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+')).unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("{v:?} is not a number with a unit"))?;
    if !n.is_finite() || n < 0.0 {
        return Err(format!("{v:?} is not a value >= 0"));
    }
    let unit = unit.trim();
    let expect = |what: &str| format!("{v:?}: expected {what}");
    let scaled = match dim {
        Dim::BitRate => {
            let m = match unit {
                "bit/s" | "bps" | "b/s" => 1.0,
                "kbit/s" | "Kbit/s" | "kbps" | "Kbps" => 1e3,
                "Mbit/s" | "Mbps" => 1e6,
                "Gbit/s" | "Gbps" => 1e9,
                "Tbit/s" | "Tbps" => 1e12,
                _ => return Err(expect("a bit rate: bit/s, kbit/s, Mbit/s, Gbit/s, Tbit/s")),
            };
            (n * m, false)
        }
        Dim::Time => {
            let m = match unit {
                "ns" => 1.0,
                "us" | "µs" => 1e3,
                "ms" => 1e6,
                "s" => 1e9,
                _ => return Err(expect("a time: ns, us, ms, s")),
            };
            (n * m, false)
        }
        Dim::Percent => match unit {
            "%" => (n / 100.0, true),
            _ => return Err(expect("a percentage, e.g. 5%")),
        },
        Dim::Count | Dim::CountOrPercent => match unit {
            "" => (n, false),
            "k" | "K" => (n * 1e3, false),
            "M" => (n * 1e6, false),
            "%" if dim == Dim::CountOrPercent => (n / 100.0, true),
            _ if dim == Dim::CountOrPercent => return Err(expect("a count (k, M) or a percentage")),
            _ => return Err(expect("a count (k, M)")),
        },
    };
    Ok(scaled)
}

/// The threshold an HTTP run gets when no `--assert` names `http.failed`: more than 1% of its
/// requests without a successful response fails the run (exit 4), as a k6 threshold would.
pub const DEFAULT_HTTP_FAILED: &str = "http.failed<=1%";

/// `assertions` and the defaults that apply to `r`: [`DEFAULT_HTTP_FAILED`] for an HTTP result
/// whose assertions do not judge `http.failed` themselves (`--assert 'http.failed<=100%'`
/// accepts any share).
pub fn with_defaults(assertions: &[Assertion], r: &RunResult) -> Vec<Assertion> {
    let mut all = assertions.to_vec();
    let judged = assertions.iter().any(|a| a.metric == Metric::HttpFailed);
    if r.summary.http.is_some() && !judged {
        all.push(Assertion::parse(DEFAULT_HTTP_FAILED).expect("the default threshold parses"));
    }
    all
}

/// Checks every assertion; the verdicts in order, and whether all passed.
pub fn check_all(assertions: &[Assertion], r: &RunResult) -> (Vec<Verdict>, bool) {
    let v: Vec<Verdict> = assertions.iter().map(|a| a.check(r)).collect();
    let ok = v.iter().all(|x| x.pass);
    (v, ok)
}

/// One headline figure of a result, as [`headline`] lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// The metric's name in the assertion grammar (`throughput`, `p99`, `retransmits%`).
    pub name: &'static str,
    /// What it is in words, for this result's kind ("connections per second", "latency p99
    /// (connect)"): what a report shows.
    pub label: String,
    /// In the metric's base unit: bit/s, ns, a count or a fraction.
    pub value: f64,
    /// Formatted with its unit.
    pub shown: String,
    /// Whether a larger value is better (throughput, rates) or worse (latency, errors).
    pub higher_is_better: bool,
}

/// What a headline figure's value is counted in (a campaign's summary says it beside each
/// figure, for the charts and tables rendered from it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FigureUnit {
    /// Bits per second.
    BitsPerSecond,
    /// Nanoseconds.
    Nanoseconds,
    /// A count per second.
    PerSecond,
    /// A count.
    Count,
    /// A fraction (0.01 is 1%).
    Share,
}

impl FigureUnit {
    /// The unit of the headline figure `name` ([`headline`]'s names), `None` for another name.
    pub fn of(name: &str) -> Option<FigureUnit> {
        let (_, text, _) = HEADLINE.iter().find(|(n, _, _)| *n == name)?;
        let a = Assertion::parse(text).ok()?;
        Some(match (a.metric.dim(), a.percent) {
            (_, true) => FigureUnit::Share,
            (Dim::BitRate, _) => FigureUnit::BitsPerSecond,
            (Dim::Time, _) => FigureUnit::Nanoseconds,
            _ if matches!(a.metric, Metric::Rps | Metric::RpsOk | Metric::Msgs) => FigureUnit::PerSecond,
            _ => FigureUnit::Count,
        })
    }

    /// A value in this unit, formatted as the report formats it everywhere.
    pub fn show(self, v: f64) -> String {
        match self {
            FigureUnit::BitsPerSecond => crate::units::fmt_bits_per_s(v),
            FigureUnit::Nanoseconds => crate::units::fmt_ns(v),
            FigureUnit::PerSecond => crate::units::fmt_per_s(v),
            FigureUnit::Count => crate::units::sig3(v),
            FigureUnit::Share => format!("{}%", crate::units::sig3(v * 100.0)),
        }
    }
}

/// The metrics [`headline`] looks up, in order: name, assertion text, higher is better.
const HEADLINE: [(&str, &str, bool); 24] = [
    ("throughput", "throughput>=0bit/s", true),
    ("throughput.up", "throughput.up>=0bit/s", true),
    ("throughput.down", "throughput.down>=0bit/s", true),
    ("msgs", "msgs>=0", true),
    ("lost", "lost>=0", false),
    ("lost%", "lost>=0%", false),
    ("jitter", "jitter>=0ns", false),
    ("rps", "rps>=0", true),
    ("rps.ok", "rps.ok>=0", true),
    ("p50", "p50>=0ns", false),
    ("p90", "p90>=0ns", false),
    ("p99", "p99>=0ns", false),
    ("p99.9", "p99.9>=0ns", false),
    ("latency.max", "latency.max>=0ns", false),
    ("rtt.p50", "rtt.p50>=0ns", false),
    ("rtt.p99", "rtt.p99>=0ns", false),
    ("loaded.p50", "loaded.p50>=0ns", false),
    ("loaded.p99", "loaded.p99>=0ns", false),
    ("added.p50", "added.p50>=0ns", false),
    ("retransmits", "retransmits>=0", false),
    ("retransmits%", "retransmits>=0%", false),
    ("errors", "errors>=0", false),
    ("http.failed", "http.failed>=0", false),
    ("http.failed%", "http.failed>=0%", false),
];

/// The headline figures a result holds (those it does not hold are left out), measured exactly
/// as the assertions of the same names measure them: what `report --compare` sets side by side.
pub fn headline(r: &RunResult) -> Vec<Figure> {
    // The text shows no bit rate where the kind's headline has none either.
    let bytes_matter = r.plan.profile.workload.section().headline_bits();
    // A search's answer first: what two searches are compared on.
    let answer = r.find_max.as_deref().and_then(|f| {
        let value = f.rate?;
        let by = match f.limited_by {
            Some(crate::result::LimitedBy::Generator) => " (the generator's limit)",
            _ => "",
        };
        Some(Figure {
            name: "find_max",
            label: format!("highest rate held{by}"),
            value,
            shown: f.axis.fmt(value),
            higher_is_better: true,
        })
    });
    answer
        .into_iter()
        .chain(HEADLINE.iter().filter(|(name, _, _)| bytes_matter || !name.starts_with("throughput")).filter_map(
            |(name, text, higher_is_better)| {
                let a = Assertion::parse(text).expect("built-in headline assertions parse");
                let value = a.measure(r).ok()?;
                let label = label(name, r);
                Some(Figure { name, label, value, shown: a.show(value), higher_is_better: *higher_is_better })
            },
        ))
        .collect()
}

/// A headline metric of `r` in words: the kind's own names (transactions, connections,
/// messages, datagrams) and what its latency is a latency of.
fn label(name: &str, r: &RunResult) -> String {
    let section = r.plan.profile.workload.section();
    let (what_latency, lost) = (section.latency_name(), section.lost_name());
    match name {
        "throughput" if r.summary.ways.iter().any(|w| w.receiver.is_some()) => "throughput (received)".into(),
        "throughput" => "throughput (sent)".into(),
        "throughput.up" => "throughput client → server".into(),
        "throughput.down" => "throughput server → client".into(),
        "msgs" => format!("{} per second", r.plan.profile.workload.unit()),
        "lost" => lost.into(),
        "lost%" => format!("{lost}, % of sent"),
        "jitter" => "jitter (RFC 3550)".into(),
        "rps" => "responses per second (any status)".into(),
        "rps.ok" => "responses per second that succeeded".into(),
        "errors" => section.errors_name().into(),
        "p50" | "p90" | "p99" | "p99.9" => format!("{what_latency} {name}"),
        "latency.max" => format!("{what_latency} max"),
        "rtt.p50" => "kernel RTT p50".into(),
        "rtt.p99" => "kernel RTT p99".into(),
        "loaded.p50" => "probe round trip under load p50".into(),
        "loaded.p99" => "probe round trip under load p99".into(),
        "added.p50" => "latency added by load p50".into(),
        "retransmits" => "retransmitted segments".into(),
        "retransmits%" => "retransmitted / sent segments".into(),
        "http.failed" => "requests failed".into(),
        "http.failed%" => "requests failed, % of sent".into(),
        other => other.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grammar() {
        let a = Assertion::parse("throughput >= 9Gbit/s").unwrap();
        assert_eq!((a.metric.clone(), a.op, a.value), (Metric::Throughput(None), Op::Ge, 9e9));
        let a = Assertion::parse("p99<5ms").unwrap();
        assert_eq!((a.metric.clone(), a.op, a.value), (Metric::Latency(Stat::Quantile(9900)), Op::Lt, 5e6));
        let a = Assertion::parse("p99.9<=250us").unwrap();
        assert_eq!((a.metric.clone(), a.op, a.value), (Metric::Latency(Stat::Quantile(9990)), Op::Le, 250e3));
        let a = Assertion::parse("retransmits<0.1%").unwrap();
        assert!(a.percent && (a.value - 0.001).abs() < 1e-12);
        assert_eq!(Assertion::parse("errors==0").unwrap().op, Op::Eq);
        assert_eq!(Assertion::parse("rps > 10k").unwrap().value, 1e4);
        assert_eq!(Assertion::parse("rtt.max != 1s").unwrap().op, Op::Ne);
        for (bad, names) in [
            ("throughput 9Gbit/s", "no comparison"),
            ("thruput>=9Gbit/s", "\"thruput\""),
            ("p98<5ms", "\"p98\""),
            ("p99<5", "a time"),
            ("throughput>=9GB", "bit rate"),
            ("errors<1%", "a count"),
            ("p99<", "no value"),
            ("p99<-1ms", ">= 0"),
            ("latency.p99<1ms", "\"latency.p99\""),
        ] {
            let e = Assertion::parse(bad).unwrap_err();
            assert!(e.contains(names), "{bad}: {e}");
        }
    }

    #[test]
    fn verdicts_on_a_result() {
        use crate::merge::tests::{Cell, Samples, build};
        use crate::result::SideTotal;
        // One rr stream, one interval: round trips of 1, 2, 3 ms.
        let mut samples = Samples::new();
        samples.entry(0).or_default().insert(0, Cell { bytes: 1000, lat: vec![1_000_000, 2_000_000, 3_000_000] });
        let mut r = build(&samples, 0, "a");
        let rr =
            check_all(&[Assertion::parse("p50<=2.1ms").unwrap(), Assertion::parse("latency.max<2.9ms").unwrap()], &r);
        assert!(rr.0[0].pass && !rr.0[1].pass && !rr.1, "{:?}", rr.0);
        assert!(Assertion::parse("msgs>=3").unwrap().check(&r).pass);
        // Two bulk ways: up received 9.5 Gbit/s, down reported by its sender only.
        let side = |bps: f64| SideTotal { bytes: 1, seconds: 1.0, bits_per_s: bps };
        let mut up = r.summary.ways[0].clone();
        (up.sender, up.receiver, up.retransmits, up.latency, up.msgs) =
            (side(10e9), Some(side(9.5e9)), Some(5), None, None);
        let mut down = up.clone();
        (down.way, down.sender, down.receiver, down.retransmits) = (Way::Down, side(1e9), None, Some(0));
        r.summary.ways = vec![up, down];
        let check = |t: &str| Assertion::parse(t).unwrap().check(&r);
        assert!(check("throughput>=10Gbit/s").pass, "receivers 9.5 + sender 1 (no receiver)");
        assert!(!check("throughput.up>=10Gbit/s").pass);
        assert!(check("throughput.down==1Gbit/s").pass);
        assert!(check("retransmits<=5").pass && !check("retransmits<5").pass);
        assert!(check("errors==0").pass);
        let v = check("p99<5ms");
        assert!(!v.pass && v.measured.contains("no latency"), "{v}");
        assert!(!check("msgs>0").pass, "no message counts: cannot pass");
        let v = check("rtt.p99<5ms");
        assert!(!v.pass && v.measured.contains("--probe ebpf"), "{v}");
        assert!(!check("rps>1").pass, "not HTTP: cannot pass");
        // An rr result headlines no bit rate; the same ways in a bulk result do.
        let names = |r: &RunResult| headline(r).iter().map(|f| f.name).collect::<Vec<_>>();
        assert_eq!(names(&r), ["retransmits", "errors"]);
        r.plan.profile = crate::profile::Profile::load("bulk-1flow").unwrap().0;
        let h = headline(&r);
        assert_eq!(names(&r), ["throughput", "throughput.up", "throughput.down", "retransmits", "errors"]);
        assert_eq!((h[0].value, h[3].value, h[0].higher_is_better, h[3].higher_is_better), (10.5e9, 5.0, true, false));
    }
}
