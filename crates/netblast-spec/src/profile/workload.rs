//! The workload: which kind of test a profile runs, with that kind's parameters. Everything
//! that depends on the kind (streams, ways, transport, bounds, defaults) is a method here, so
//! no other code works it out again from a kind and optional sections.

use super::{
    BulkSection, CpsSection, HttpSection, Kind, MsgrateSection, Protocol, RrSection, RunSection, Way, MAX_FLOWS,
};
use crate::units::CpuList;
use std::time::Duration;

/// A test's kind and its parameters (the `[bulk]`, `[msgrate]`, `[rr]`, `[cps]` or `[http]`
/// section).
#[derive(Debug, Clone, PartialEq)]
pub enum Workload {
    /// TCP bulk streams (iperf3).
    Bulk(BulkSection),
    /// Small messages as fast as possible, one pinned flow per CPU (qperf tcp_bw -m 1).
    Msgrate(MsgrateSection),
    /// Request/response round trips (qperf tcp_lat, netperf TCP_RR).
    Rr(RrSection),
    /// HTTP request floods (hey, wrk, wrk2, vegeta).
    Http(Box<HttpSection>),
    /// New TCP connections per second (netperf TCP_CRR, ethr -t c).
    Cps(CpsSection),
}

/// A field at fault and what is wrong with it.
pub type FieldError = (&'static str, String);

impl Workload {
    /// The flow count a fleet divides among servers (`--pairing spread`): flows, an http
    /// test's connections; `None` for msgrate and cps without a count (one flow per CPU).
    pub fn flow_count_mut(&mut self) -> Option<&mut u32> {
        match self {
            Workload::Bulk(b) => Some(&mut b.flows),
            Workload::Rr(r) => Some(&mut r.flows),
            Workload::Msgrate(m) => m.flows.as_mut(),
            Workload::Cps(c) => c.flows.as_mut(),
            Workload::Http(h) => Some(&mut h.connections),
        }
    }

    /// Scales what the workload counts in total (not per flow) to a test that runs flows
    /// `[from, to)` of `total`: a cps or http rate (and an http ramp's and steps' rates), a bulk
    /// byte count, an http request count. Per-flow figures (a UDP bitrate) stay as they are;
    /// integer counts are split cumulatively, so the parts add up exactly.
    pub fn share_totals(&mut self, from: u64, to: u64, total: u64) {
        let part_of = |amount: u64| {
            let at = |k: u64| (amount as u128 * k as u128 / total.max(1) as u128) as u64;
            at(to) - at(from)
        };
        let f = (to - from) as f64 / total.max(1) as f64;
        match self {
            Workload::Bulk(b) => {
                if let Some(n) = b.bytes.as_mut() {
                    n.0 = part_of(n.0);
                }
            }
            Workload::Cps(c) => {
                if let Some(r) = c.rate.as_mut() {
                    r.0 *= f;
                }
            }
            Workload::Http(h) => {
                for r in [h.rate.as_mut(), h.rate_to.as_mut()].into_iter().flatten() {
                    r.0 *= f;
                }
                for step in &mut h.steps {
                    step.rate.0 *= f;
                }
                if let Some(n) = h.requests.as_mut() {
                    *n = part_of(*n);
                }
            }
            Workload::Rr(_) | Workload::Msgrate(_) => {}
        }
    }

    /// The kind's workload with every parameter at its default.
    pub fn default_for(kind: Kind) -> Workload {
        match kind {
            Kind::Bulk => Workload::Bulk(BulkSection::default()),
            Kind::Msgrate => Workload::Msgrate(MsgrateSection::default()),
            Kind::Rr => Workload::Rr(RrSection::default()),
            Kind::Http => Workload::Http(Box::default()),
            Kind::Cps => Workload::Cps(CpsSection::default()),
        }
    }

    /// The kind.
    pub fn kind(&self) -> Kind {
        match self {
            Workload::Bulk(_) => Kind::Bulk,
            Workload::Msgrate(_) => Kind::Msgrate,
            Workload::Rr(_) => Kind::Rr,
            Workload::Http(_) => Kind::Http,
            Workload::Cps(_) => Kind::Cps,
        }
    }

    /// Whether the test talks to an HTTP server rather than to `netblast serve`'s data port.
    pub fn is_http(&self) -> bool {
        matches!(self, Workload::Http(_))
    }

    /// Whether the streams carry UDP datagrams (set up over their TCP streams).
    pub fn uses_udp(&self) -> bool {
        self.protocol() == Protocol::Udp
    }

    /// The transport of the test's traffic.
    pub fn protocol(&self) -> Protocol {
        match self {
            Workload::Msgrate(m) => m.protocol,
            Workload::Rr(r) => r.protocol,
            Workload::Bulk(_) | Workload::Http(_) | Workload::Cps(_) => Protocol::Tcp,
        }
    }

    /// Whether streams count messages (msgrate: messages; rr: transactions; cps: connections).
    pub fn counts_msgs(&self) -> bool {
        matches!(self, Workload::Msgrate(_) | Workload::Rr(_) | Workload::Cps(_))
    }

    /// The ways a test's streams may go, in report order.
    pub fn ways(&self) -> &'static [Way] {
        match self {
            Workload::Bulk(b) => b.direction.ways(),
            Workload::Msgrate(m) => m.direction.ways(),
            Workload::Rr(_) | Workload::Cps(_) => &[Way::Up],
            Workload::Http(_) => &[],
        }
    }

    /// Number of data-port streams the test opens, given the client's CPU count.
    pub fn stream_count(&self, cpus: usize) -> usize {
        match self {
            Workload::Bulk(b) => b.flows as usize * b.direction.ways().len(),
            Workload::Msgrate(m) => m.flows.map(|f| f as usize).unwrap_or(cpus.max(1)) * m.direction.ways().len(),
            Workload::Rr(r) => r.flows as usize,
            Workload::Cps(c) => c.flows.map(|f| f as usize).unwrap_or(cpus.max(1)),
            Workload::Http(_) => 0,
        }
    }

    /// Whether the test runs one flow per client CPU (msgrate and cps without a flow count),
    /// which only the client's CPU list settles.
    pub fn flows_per_cpu(&self) -> bool {
        match self {
            Workload::Msgrate(m) => m.flows.is_none(),
            Workload::Cps(c) => c.flows.is_none(),
            _ => false,
        }
    }

    /// Whether each stream has a worker of its own (message kinds), rather than streams being
    /// spread over one worker per CPU (bulk).
    pub fn worker_per_stream(&self) -> bool {
        self.counts_msgs()
    }

    /// The server CPUs the profile asks for (message kinds), `None` when it does not say.
    pub fn server_cpus(&self) -> Option<&CpuList> {
        match self {
            Workload::Msgrate(m) => m.server_cpus.as_ref(),
            Workload::Rr(r) => r.server_cpus.as_ref(),
            Workload::Cps(c) => c.server_cpus.as_ref(),
            Workload::Bulk(b) => b.server_cpus.as_ref(),
            Workload::Http(_) => None,
        }
    }

    /// Whether each flow's server end is pinned: always for the message kinds, for bulk when
    /// the profile names server CPUs.
    pub fn pins_server(&self) -> bool {
        self.counts_msgs() || matches!(self, Workload::Bulk(b) if b.server_cpus.is_some())
    }

    /// TCP_NODELAY when the profile does not say: on for rr and cps (a latency test must not
    /// wait for Nagle), off for bulk and msgrate (as iperf3 and qperf).
    pub fn nodelay_default(&self) -> bool {
        matches!(self, Workload::Rr(_) | Workload::Cps(_))
    }

    /// The bound the kind itself carries besides `run.duration`: bulk's byte count, http's
    /// request count or steps. `None` when only a duration can bound the test.
    fn count_bound(&self) -> bool {
        match self {
            Workload::Bulk(b) => b.bytes.is_some(),
            Workload::Http(h) => h.requests.is_some() || !h.steps.is_empty(),
            Workload::Msgrate(_) | Workload::Rr(_) | Workload::Cps(_) => false,
        }
    }

    /// The time bound in effect: `run.duration`, the length of http steps, or
    /// [`super::COUNT_ONLY_TIME_CAP`] when only a count bounds the test.
    pub fn time_bound(&self, run: &RunSection) -> Duration {
        if let Some(d) = run.duration {
            // The omitted start runs before the test's own duration (iperf3 -O).
            return d.get() + run.omit();
        }
        match self {
            Workload::Http(h) if !h.steps.is_empty() => h.steps_duration(),
            _ => super::COUNT_ONLY_TIME_CAP,
        }
    }

    /// One line saying what the test does, made from its parameters (the description of a
    /// profile changed by flags).
    pub fn describe(&self, run: &RunSection) -> String {
        let bound = match run.duration {
            Some(d) => format!("{d}"),
            None => match self {
                Workload::Http(h) if !h.steps.is_empty() => format!("{} in all", crate::units::Dur(h.steps_duration())),
                _ => "count-bound".to_string(),
            },
        };
        match self {
            Workload::Bulk(b) => {
                let dir = match b.direction {
                    super::Direction::Forward => "client to server",
                    super::Direction::Reverse => "server to client",
                    super::Direction::Bidir => "both ways",
                };
                let bytes = b.bytes.map(|n| format!(", {n} in total")).unwrap_or_default();
                let paced = b.bitrate.map(|r| format!(", each paced to {r}")).unwrap_or_default();
                format!(
                    "bulk: {} TCP flow{} {dir}, {} per send{bytes}{paced}, {bound}",
                    b.flows,
                    plural(b.flows),
                    b.block_bytes
                )
            }
            Workload::Msgrate(m) => format!(
                "msgrate: {}-byte {} messages, {}{}, {bound}",
                m.msg_bytes.bytes(),
                m.protocol.name().to_uppercase(),
                match m.flows {
                    Some(f) => format!("{f} flow{}", plural(f)),
                    None => "one flow per CPU".to_string(),
                },
                [
                    if m.recv == super::RecvMode::Each { ", read one message per call" } else { "" }.to_string(),
                    m.bitrate.map(|b| format!(", paced at {b} per flow")).unwrap_or_default(),
                    if m.receivers == super::Receivers::PerCpu { ", one receiver per server CPU" } else { "" }
                        .to_string(),
                    match (m.gso, m.gro) {
                        (true, true) => ", sent with GSO and received with GRO",
                        (true, false) => ", sent with GSO",
                        (false, true) => ", received with GRO",
                        (false, false) => "",
                    }
                    .to_string(),
                    match m.direction {
                        super::Direction::Forward => String::new(),
                        super::Direction::Reverse => ", server to client".into(),
                        super::Direction::Bidir => ", both ways".into(),
                    },
                ]
                .concat()
            ),
            Workload::Rr(r) => format!(
                "rr: {}-byte requests, {}-byte responses over {}, {} flow{}, wait {}, {bound}",
                r.req_bytes.bytes(),
                r.resp_bytes.bytes(),
                r.protocol.name().to_uppercase(),
                r.flows,
                plural(r.flows),
                match r.wait {
                    super::WaitMode::Block => "block",
                    super::WaitMode::Spin => "spin",
                }
            ),
            Workload::Cps(c) => format!(
                "cps: TCP connections{}, {}-byte request and {}-byte response on each, close with {}, {}, {bound}",
                c.rate.map(|r| format!(" at {} in all", crate::units::fmt_per_s(r.per_second()))).unwrap_or_default(),
                c.req_bytes.bytes(),
                c.resp_bytes.bytes(),
                c.close.name().to_uppercase(),
                match c.flows {
                    Some(f) => format!("{f} flow{}", plural(f)),
                    None => "one flow per CPU".to_string(),
                },
            ),
            Workload::Http(h) => {
                let mode = match (h.rate, h.rate_to, h.steps.is_empty()) {
                    (Some(a), Some(b), _) => format!("open loop {a} to {b}"),
                    (Some(a), None, _) => format!("open loop at {a}"),
                    (None, _, false) => {
                        let d = h.steps[0].duration;
                        let each = if h.steps.iter().all(|s| s.duration == d) {
                            format!(" of {d} each")
                        } else {
                            String::new()
                        };
                        format!("open loop in {} steps{each}", h.steps.len())
                    }
                    (None, _, true) => "closed loop".to_string(),
                };
                let n = h.requests.map(|n| format!(", {n} requests")).unwrap_or_default();
                format!(
                    "http: {} {}, {} connection{}, {mode}{n}, {bound}",
                    h.method,
                    h.urls.join(" "),
                    h.connections,
                    plural(h.connections)
                )
            }
        }
    }

    /// Checks the kind's parameters and that the test is bounded; errors are (field, message).
    pub fn check(&self, run: &RunSection) -> Result<(), FieldError> {
        match self {
            Workload::Bulk(b) => {
                if b.flows == 0 || b.flows > MAX_FLOWS {
                    return Err(("bulk.flows", format!("{} is outside 1..{MAX_FLOWS}", b.flows)));
                }
                if b.block_bytes.bytes() == 0 || b.block_bytes.bytes() > 64 << 20 {
                    return Err(("bulk.block_bytes", format!("{} is outside 1..64MiB", b.block_bytes)));
                }
                if b.bytes.is_some_and(|n| n.bytes() == 0) {
                    return Err(("bulk.bytes", "must be greater than 0".into()));
                }
                if let Some(r) = b.bitrate {
                    // The kernel takes bytes per second in 64 bits; below 8 bit/s it is 0.
                    if !(r.0.is_finite() && (8.0..=1e13).contains(&r.0)) {
                        return Err(("bulk.bitrate", format!("{r} is outside 8 bit/s..10 Tbit/s")));
                    }
                }
            }
            Workload::Msgrate(m) => {
                if let Some(f) = m.flows {
                    if f == 0 || f > MAX_FLOWS {
                        return Err(("msgrate.flows", format!("{f} is outside 1..{MAX_FLOWS}")));
                    }
                }
                let max = max_message(m.protocol, 1 << 20);
                if m.msg_bytes.bytes() == 0 || m.msg_bytes.bytes() > max {
                    return Err(("msgrate.msg_bytes", format!("{} is outside 1..{max} bytes", m.msg_bytes.bytes())));
                }
                if m.batch == 0 || m.batch > 1024 {
                    return Err(("msgrate.batch", format!("{} is outside 1..1024", m.batch)));
                }
                if let Some(b) = m.bitrate {
                    if m.protocol != Protocol::Udp {
                        return Err((
                            "msgrate.bitrate",
                            "paces UDP datagrams (protocol = \"udp\", --udp); TCP runs as fast as the path allows"
                                .into(),
                        ));
                    }
                    if b.0 <= 0.0 || b.0 < 8.0 * m.msg_bytes.bytes() as f64 {
                        return Err(("msgrate.bitrate", format!("{b} is less than one datagram per second")));
                    }
                }
                if m.eor && m.protocol != Protocol::Tcp {
                    return Err(("msgrate.eor", "ends TCP records; a UDP datagram is always its own packet".into()));
                }
                for (on, field) in [(m.gso, "msgrate.gso"), (m.gro, "msgrate.gro")] {
                    if on && m.protocol != Protocol::Udp {
                        return Err((
                            field,
                            "is UDP's segmentation offload (protocol = \"udp\", --udp); TCP has its own, always on"
                                .into(),
                        ));
                    }
                }
                if m.receivers == super::Receivers::PerCpu {
                    if m.protocol != Protocol::Udp {
                        return Err((
                            "msgrate.receivers",
                            "per_cpu is for UDP (protocol = \"udp\", --udp): a TCP flow is its own socket".into(),
                        ));
                    }
                    if m.direction != super::Direction::Forward {
                        return Err((
                            "msgrate.receivers",
                            "per_cpu receivers are the server's: client to server only (no --reverse or --bidir)"
                                .into(),
                        ));
                    }
                }
                let flows = m.flows.unwrap_or(1) as usize * m.direction.ways().len();
                if flows > MAX_FLOWS as usize {
                    return Err(("msgrate.flows", format!("{flows} flows in all is over {MAX_FLOWS}")));
                }
            }
            Workload::Rr(r) => {
                if r.flows == 0 || r.flows > MAX_FLOWS {
                    return Err(("rr.flows", format!("{} is outside 1..{MAX_FLOWS}", r.flows)));
                }
                let max = max_message(r.protocol, 1 << 24);
                for (field, v) in [("rr.req_bytes", r.req_bytes), ("rr.resp_bytes", r.resp_bytes)] {
                    if v.bytes() == 0 || v.bytes() > max {
                        return Err((field, format!("{} is outside 1..{max} bytes", v.bytes())));
                    }
                }
                if r.udp_timeout.is_some_and(|t| t.get() < Duration::from_millis(1)) {
                    return Err(("rr.udp_timeout", "must be at least 1ms".into()));
                }
            }
            Workload::Cps(c) => {
                if let Some(f) = c.flows {
                    if f == 0 || f > MAX_FLOWS {
                        return Err(("cps.flows", format!("{f} is outside 1..{MAX_FLOWS}")));
                    }
                }
                for (field, v) in [("cps.req_bytes", c.req_bytes), ("cps.resp_bytes", c.resp_bytes)] {
                    if v.bytes() > CpsSection::MAX_MSG {
                        return Err((field, format!("{} is outside 0..{} bytes", v.bytes(), CpsSection::MAX_MSG)));
                    }
                }
                if let Some(r) = c.rate {
                    if !(r.per_second() >= 1.0 && r.per_second() <= 1e8) {
                        return Err(("cps.rate", format!("{} connections/s is outside 1..100M", r.per_second())));
                    }
                }
                if let Some(t) = c.timeout {
                    if t.get() < Duration::from_millis(1) || t.get() > CpsSection::MAX_TIMEOUT {
                        return Err(("cps.timeout", format!("{t} is outside 1ms..60s")));
                    }
                }
            }
            Workload::Http(h) => h.check()?,
        }
        if run.duration.is_none() && !self.count_bound() {
            let how = match self {
                Workload::Bulk(_) => "set run.duration or bulk.bytes".to_string(),
                Workload::Http(_) => "set run.duration, http.requests or http.steps".to_string(),
                other => format!("a {} test needs run.duration", other.kind().name()),
            };
            return Err(("run.duration", format!("a test needs a bound: {how}")));
        }
        Ok(())
    }

    /// The bulk parameters, when this is a bulk test.
    pub fn bulk_mut(&mut self) -> Option<&mut BulkSection> {
        match self {
            Workload::Bulk(b) => Some(b),
            _ => None,
        }
    }

    /// The msgrate parameters, when this is a msgrate test.
    pub fn msgrate_mut(&mut self) -> Option<&mut MsgrateSection> {
        match self {
            Workload::Msgrate(m) => Some(m),
            _ => None,
        }
    }

    /// The rr parameters, when this is an rr test.
    pub fn rr_mut(&mut self) -> Option<&mut RrSection> {
        match self {
            Workload::Rr(r) => Some(r),
            _ => None,
        }
    }

    /// The cps parameters, when this is a cps test.
    pub fn cps_mut(&mut self) -> Option<&mut CpsSection> {
        match self {
            Workload::Cps(c) => Some(c),
            _ => None,
        }
    }

    /// The http parameters, when this is an http test.
    pub fn http(&self) -> Option<&HttpSection> {
        match self {
            Workload::Http(h) => Some(h),
            _ => None,
        }
    }

    /// The http parameters, when this is an http test.
    pub fn http_mut(&mut self) -> Option<&mut HttpSection> {
        match self {
            Workload::Http(h) => Some(h),
            _ => None,
        }
    }
}

fn max_message(p: Protocol, tcp_max: u64) -> u64 {
    match p {
        Protocol::Tcp => tcp_max,
        Protocol::Udp => MsgrateSection::MAX_UDP,
    }
}

fn plural(n: u32) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
